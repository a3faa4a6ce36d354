// prime-rl's trace stream (its file monitor, since 2026-09): `<run>/monitors/file/traces/stream.jsonl` (or, chunked,
// `traces/stream/NNNNN.jsonl`), one verifiers Episode a line as it arrived, before training, and the per-token values
// the run gave it later as annotations beside it: `traces/annotations/<producer>.jsonl` (or `<producer>/NNNNN.jsonl`),
// one `{version, trace_id, info, branches: [{index, advantages | trainer_logprobs | entropies}]}` a line. The
// orchestrator's ("orch") carry `info.ship.step`, the step that trained the trace, and the branches' advantages; the
// trainer's carry trainer_logprobs and entropies. Each branch stream runs over the branch's nodes' token ids, with null
// where unknown; folded onto a node, it keeps the node's mask-true positions (verifiers' compact layout) and is set
// only where none of them is null. Updates apply in file order, the newest winning. Sources: prime-rl
// src/prime_rl/monitors/file/monitor.py and traces/update.py (fold_trace_updates), verifiers v1/graph.py (MessageNode).
// Chunks sealed as Zstandard (`NNNNN.jsonl.zst`, prime-rl's traces/chunks.py) are read as the plain ones (compressed.ts).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RowError, isObj, type Obj } from '../fields';
import { readDataText, withoutSealedTwins } from '../compressed';

export const PRIME_STREAM = /(^|[/\\])monitors[/\\]file[/\\]traces[/\\](stream\.jsonl|stream[/\\]\d+\.jsonl(\.zst)?)$/;
const STREAM_FIELDS = ['advantages', 'trainer_logprobs', 'entropies'] as const;

export interface TraceUpdate {
  info: Obj;
  /** per branch index, per field, the full-length stream */
  branches: Map<number, Partial<Record<(typeof STREAM_FIELDS)[number], (number | null)[]>>>;
}

/** The traces folder of a stream file. */
export function tracesDir(streamPath: string): string {
  return streamPath.replace(/[/\\](stream\.jsonl|stream[/\\]\d+\.jsonl(\.zst)?)$/, '');
}

function annotationFiles(dir: string): string[] {
  const root = join(dir, 'annotations');
  let entries;
  try {
    entries = readdirSync(root, { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }))) {
    const p = join(root, e.name);
    if (e.isFile() && e.name.endsWith('.jsonl') && !e.name.endsWith('.index.jsonl')) out.push(p);
    else if (e.isDirectory())
      for (const f of readdirSync(p).sort((a, b) => a.localeCompare(b, undefined, { numeric: true }))) if (/^\d+\.jsonl(\.zst)?$/.test(f)) out.push(join(p, f));
  }
  return withoutSealedTwins(out);
}

/** An annotation file's text; one that went away or is torn between the listing and the read counts as empty. */
function annotationText(f: string): string {
  try {
    return readDataText(f);
  } catch {
    return '';
  }
}

function deepMerge(a: Obj, b: Obj): Obj {
  const out: Obj = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = isObj(v) && isObj(out[k]) ? deepMerge(out[k] as Obj, v) : v;
  return out;
}

const cache = new Map<string, { key: string; updates: Map<string, TraceUpdate> }>();

/** What a traces folder's annotations are now (their files, sizes and times): a follow re-reads the stream when it moves. */
export function annotationsKey(dir: string, files = annotationFiles(dir)): string {
  return files
    .map((f) => {
      const st = statSync(f, { throwIfNoEntry: false });
      return `${f}:${st?.size ?? -1}:${st?.mtimeMs ?? -1}`;
    })
    .join('|');
}

/** Every trace's annotations in a traces folder, merged in file order (re-read when a file changes: a followed run). */
export function traceUpdates(dir: string): Map<string, TraceUpdate> {
  const files = annotationFiles(dir);
  const key = annotationsKey(dir, files);
  const hit = cache.get(dir);
  if (hit && hit.key === key) return hit.updates;
  const updates = new Map<string, TraceUpdate>();
  for (const f of files)
    for (const line of annotationText(f).split('\n')) {
      if (!line.trim()) continue;
      let u: unknown;
      try {
        u = JSON.parse(line);
      } catch {
        continue; // a line still being written
      }
      if (!isObj(u) || typeof u.trace_id !== 'string') continue;
      const t = updates.get(u.trace_id) ?? { info: {}, branches: new Map() };
      if (isObj(u.info)) t.info = deepMerge(t.info, u.info);
      for (const b of Array.isArray(u.branches) ? u.branches : []) {
        if (!isObj(b) || !Number.isInteger(b.index)) continue;
        const cur = t.branches.get(b.index as number) ?? {};
        for (const field of STREAM_FIELDS) if (Array.isArray(b[field])) cur[field] = b[field] as (number | null)[];
        t.branches.set(b.index as number, cur);
      }
      updates.set(u.trace_id, t);
    }
  cache.set(dir, { key, updates });
  return updates;
}

/**
 * The root-to-leaf node paths of a trace, as node indices in leaf order (verifiers' branches): each leaf's parents
 * followed up to the root (a cycle stops after as many hops as nodes; a parent that is not a node is a bad row).
 */
export function branchPaths(nodes: Obj[]): number[][] {
  const parents = new Set(nodes.map((n) => n.parent).filter((x) => typeof x === 'number'));
  const out: number[][] = [];
  for (let leaf = 0; leaf < nodes.length; leaf++) {
    if (parents.has(leaf)) continue;
    const path: number[] = [];
    for (let at: unknown = leaf, hops = 0; typeof at === 'number' && hops <= nodes.length; hops++) {
      if (!isObj(nodes[at])) throw new RowError(`nodes[${at}]: missing`);
      path.unshift(at);
      at = nodes[at].parent;
    }
    out.push(path);
  }
  return out;
}

/**
 * An Episode line of the stream with its traces' annotations folded in: `info` merged onto each trace, and the branch
 * streams set on the nodes as verifiers lays them out (compact over the mask-true positions). A copy; the row stays.
 */
export function foldAnnotations(o: Obj, updates: Map<string, TraceUpdate>): Obj {
  if (!Array.isArray(o.traces)) return o;
  const traces = o.traces.map((t) => {
    if (!isObj(t) || !Array.isArray(t.nodes)) return t;
    const u = typeof t.id === 'string' ? updates.get(t.id) : undefined;
    if (!u) return t;
    const nodes = (t.nodes as Obj[]).map((n) => ({ ...n }));
    branchPaths(nodes).forEach((path, index) => {
      const streams = u.branches.get(index);
      if (!streams) return;
      for (const field of STREAM_FIELDS) {
        const s = streams[field];
        if (!s) continue;
        let at = 0;
        for (const k of path) {
          const n = nodes[k];
          const ids = Array.isArray(n.token_ids) ? n.token_ids : [];
          const mask = Array.isArray(n.mask) ? n.mask : [];
          const vals = ids.map((_, i) => s[at + i]).filter((_, i) => mask[i] === true);
          at += ids.length;
          if (vals.length && vals.every((v) => typeof v === 'number')) n[field] = vals;
        }
      }
    });
    return { ...t, nodes, info: deepMerge(isObj(t.info) ? t.info : {}, u.info) };
  });
  return { ...o, traces };
}
