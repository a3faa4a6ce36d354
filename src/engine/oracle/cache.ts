// On-disk cache of oracle replies, keyed by sha256 of (provider, normalised base URL, model, prompt). The base URL is
// part of the key: two local servers serving different weights under one model name must not share answers.
//
// It lives in one shared folder, ${XDG_CACHE_HOME:-~/.cache}/credit-lens/oracle, not in the run directory: every run
// gets a new timestamped directory, so a per-run cache would only pay off on resume, while a shared one makes a rerun
// of a seeded config, and every run of a sweep over cal's own knobs (negative_reward, max_error_span: same seed,
// same rollouts at step 1), cost nothing for the queries already answered. The run directory keeps what a run means
// (oracle_span in the episode table); the cache only saves money. Entries are written through a temporary file and
// a rename, so runs sharing the folder never read half an entry.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { writeFileAtomic } from '../core/files';
import type { OraclePrompt } from './prompt';

/** The base URL is in the key's hash but not in the entry: a URL can carry a token (`?key=`, `user:pass@`). */
export interface CacheEntry {
  provider: string;
  model: string;
  prompt: OraclePrompt;
  /** the provider's reply text (with any echo of the key redacted), before parsing: a better parser reuses it */
  reply: string;
  created: string;
}

export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME.trim() ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(root, 'credit-lens', 'oracle');
}

/** Scheme and host lower-cased, default port and trailing slashes dropped: spellings of one endpoint share a key. */
export function normalizeBaseUrl(url: string | null): string {
  if (!url) return '';
  try {
    const u = new URL(url);
    const port = u.port && !((u.protocol === 'https:' && u.port === '443') || (u.protocol === 'http:' && u.port === '80')) ? `:${u.port}` : '';
    return `${u.protocol}//${u.hostname.toLowerCase()}${port}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return url.trim().replace(/\/+$/, '');
  }
}

export function cacheKey(provider: string, baseUrl: string | null, model: string, prompt: OraclePrompt): string {
  return createHash('sha256')
    .update(JSON.stringify([provider, normalizeBaseUrl(baseUrl), model, prompt.system, prompt.user]))
    .digest('hex');
}

export class OracleCache {
  constructor(readonly dir: string) {}

  private path(key: string): string {
    // 256 subfolders keep any one folder small after millions of queries.
    return join(this.dir, key.slice(0, 2), `${key}.json`);
  }

  /** The cached reply, or null on a miss or an unreadable entry (which the next put overwrites). */
  get(key: string): string | null {
    try {
      const e = JSON.parse(readFileSync(this.path(key), 'utf8')) as Partial<CacheEntry>;
      return typeof e.reply === 'string' ? e.reply : null;
    } catch {
      return null;
    }
  }

  /** A cache that cannot be written would silently bill every rerun again, so that stops the run with a fix. */
  put(key: string, entry: CacheEntry): void {
    try {
      mkdirSync(join(this.dir, key.slice(0, 2)), { recursive: true });
      writeFileAtomic(this.path(key), JSON.stringify(entry));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'error';
      throw new UserError(
        `cannot write the oracle cache in ${this.dir} (${code})`,
        'point XDG_CACHE_HOME at a writable folder, or set credit.cal.cache: false',
      );
    }
  }
}
