// Which trainer writes a folder, from the files it already holds, for Follow a Training Run…'s picker. No vscode: a
// unit test reads folders laid out as each trainer lays them out.
import { existsSync, readdirSync, type Dirent } from 'node:fs';
import { join } from 'node:path';
import type { ImportFormat } from '../protocol/import_formats';

/**
 * The trainer whose files a folder already holds, by the paths each writes (as the engine's readers find them), or
 * null (`listed`: the folder's names where the caller has read them): prime-rl's token exports, traces or trace stream; veRL's Credit Lens shards (step_N.jsonl); TRL's completions
 * tables; veRL's numbered rollout dumps (N.jsonl).
 */
export function detectFollowFormat(dir: string, listed?: readonly string[]): ImportFormat | null {
  const has = (...parts: string[]) => existsSync(join(dir, ...parts));
  if (has('token_exports') || has('rollouts') || has('monitors', 'file', 'traces')) return 'prime';
  let names: readonly string[];
  try {
    names = listed ?? readdirSync(dir);
  } catch {
    return null;
  }
  if (names.some((n) => /^step_\d+\.jsonl$/.test(n))) return 'verl_shard';
  if (names.some((n) => /^completions(_\d+)?\.(parquet|jsonl)$/.test(n)) || has('completions')) return 'trl';
  if (names.some((n) => /^\d+\.jsonl$/.test(n))) return 'verl';
  return null;
}

/**
 * Folders a walk never enters: tools' own. A Credit Lens run folder is entered (a trainer may write beside it, under
 * runs/ too) and never listed, since nothing in it is in a trainer's layout.
 */
const SKIPPED = new Set(['node_modules', '__pycache__', 'site-packages', 'wandb']);

/**
 * The folders under `root` (down to `maxDepth`, hidden ones and SKIPPED left out) that a trainer already writes to,
 * shallowest first, with the format each holds. A found folder is not searched further: its own subfolders are its
 * steps. The walk stops after `maxFolders` folders, so a large workspace costs a bounded look.
 */
export function findTrainerFolders(root: string, { maxDepth = 3, maxFolders = 2000 } = {}): { dir: string; format: ImportFormat }[] {
  const found: { dir: string; format: ImportFormat }[] = [];
  let level = [root];
  let seen = 0;
  for (let depth = 0; depth <= maxDepth && level.length; depth++) {
    const next: string[] = [];
    for (const dir of level) {
      if (++seen > maxFolders) return found;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      // the listing read here is the one detection reads, once per folder
      const format =
        depth > 0
          ? detectFollowFormat(
              dir,
              entries.map((e) => e.name),
            )
          : null;
      if (format) {
        found.push({ dir, format });
        continue;
      }
      for (const e of entries) if (e.isDirectory() && !e.name.startsWith('.') && !SKIPPED.has(e.name)) next.push(join(dir, e.name));
    }
    level = next.sort();
  }
  return found;
}
