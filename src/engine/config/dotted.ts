// Dotted config paths (`grpo.group_size`) on plain objects: read and write, for overrides, sweeps and messages.

export type Seg = string | number;

export function getAt(obj: unknown, path: readonly Seg[]): unknown {
  let cur = obj;
  for (const seg of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[seg as string];
  }
  return cur;
}

export function getDotted(obj: unknown, key: string): unknown {
  return getAt(obj, key.split('.'));
}

/** Sets obj[a][b]... = value for key "a.b...", creating (or replacing non-object) intermediate mappings. */
export function setDotted(obj: Record<string, unknown>, key: string, value: unknown): void {
  const segs = key.split('.');
  let cur = obj;
  for (const seg of segs.slice(0, -1)) {
    const next = cur[seg];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) cur[seg] = {};
    cur = cur[seg] as Record<string, unknown>;
  }
  cur[segs[segs.length - 1]] = value;
}
