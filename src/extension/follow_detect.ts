// Which trainer writes a folder, from the files it already holds, for Follow a Training Run…'s picker. No vscode: a
// unit test reads folders laid out as each trainer lays them out.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ImportFormat } from '../protocol/import_formats';

/**
 * The trainer whose files a folder already holds, by the paths each writes (as the engine's readers find them), or
 * null: prime-rl's token exports, traces or trace stream; veRL's Credit Lens shards (step_N.jsonl); TRL's completions
 * tables; veRL's numbered rollout dumps (N.jsonl).
 */
export function detectFollowFormat(dir: string): ImportFormat | null {
  const has = (...parts: string[]) => existsSync(join(dir, ...parts));
  if (has('token_exports') || has('rollouts') || has('monitors', 'file', 'traces')) return 'prime';
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return null;
  }
  if (names.some((n) => /^step_\d+\.jsonl$/.test(n))) return 'verl_shard';
  if (names.some((n) => /^completions(_\d+)?\.(parquet|jsonl)$/.test(n)) || has('completions')) return 'trl';
  if (names.some((n) => /^\d+\.jsonl$/.test(n))) return 'verl';
  return null;
}
