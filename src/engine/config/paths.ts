// Path keys: resolved against the config file's folder (design.md#config), and checked on disk before a run directory is
// made, so a typo costs an error message rather than a half-made run.
import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { PATH_KEYS } from './base';
import { getDotted, setDotted } from './dotted';
import type { CreditConfig } from './schema';

function resolveOne(p: string, dir: string): string {
  if (p === '~' || p.startsWith('~/')) return resolvePath(homedir(), p.slice(2));
  return isAbsolute(p) ? p : resolvePath(dir, p);
}

export function resolveConfigPaths(config: CreditConfig, dir: string): void {
  const c = config as unknown as Record<string, unknown>;
  for (const key of PATH_KEYS) {
    const v = getDotted(c, key);
    if (typeof v === 'string') setDotted(c, key, resolveOne(v, dir));
  }
  // A sweep over model.path etc. names files relative to the same folder.
  const grid = config.sweep?.grid;
  for (const entry of grid === undefined ? [] : Array.isArray(grid) ? grid : [grid]) {
    for (const key of Object.keys(entry)) {
      if (!PATH_KEYS.includes(key)) continue;
      const v = entry[key];
      entry[key] = Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? resolveOne(x, dir) : x)) : typeof v === 'string' ? resolveOne(v, dir) : v;
    }
  }
}

/** What each path key must name on disk; output_dir is created by the run, so it need not exist. */
const PATH_KINDS: Record<string, 'file' | 'folder' | 'file or folder'> = {
  'model.path': 'folder',
  'model.init_checkpoint': 'folder',
  'task.path': 'file',
  'task.reward_module': 'file',
  'credit.reward_variance.importance_checkpoint': 'folder',
};

/**
 * Every path key (resolved) that names nothing on disk, or the wrong kind of thing: checked before a run directory
 * is created, so a typo costs an error message, not a half-made run. Sweep grid values are checked too.
 */
export function configPathIssues(config: CreditConfig): string[] {
  const out: string[] = [];
  const check = (key: string, v: unknown, where: string) => {
    const kind = PATH_KINDS[key];
    if (!kind || typeof v !== 'string') return;
    let st: ReturnType<typeof statSync> | null = null;
    try {
      st = statSync(v);
    } catch {
      /* reported below */
    }
    const ok = st && (kind === 'file' ? st.isFile() : kind === 'folder' ? st.isDirectory() : true);
    if (!ok) out.push(`${where}: got ${JSON.stringify(v)}, ${st ? `expected a ${kind}` : `no such ${kind}`}`);
  };
  for (const key of Object.keys(PATH_KINDS)) check(key, getDotted(config as unknown as Record<string, unknown>, key), key);
  const grid = config.sweep?.grid;
  for (const entry of grid === undefined ? [] : Array.isArray(grid) ? grid : [grid]) {
    for (const [key, v] of Object.entries(entry)) for (const x of Array.isArray(v) ? v : [v]) check(key, x, `sweep.grid.${key}`);
  }
  return out;
}
