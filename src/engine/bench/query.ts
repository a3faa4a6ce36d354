// Browse Rollouts' figures for `npm run bench`: a synthetic run of a million token rows, loaded once as the
// query worker loads it, then the view's queries timed (the median of 5 after one warm-up) and the memory it took.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DEFAULT_QUERY, type BrowseQuery } from '../../protocol/browse_view';
import { writeSyntheticRun } from '../analysis/synthetic';
import { answer } from '../query/browse';
import { loadRollouts } from '../query/rollouts';

export interface RolloutsBench {
  rows: number;
  episodes: number;
  /** loading the tables and answering the first query: what the view waits for before its first table */
  first_table_s: number;
  filter_ms: number;
  search_ms: number;
  aggregate_ms: number;
  /** memory the loaded index holds, JS heap and buffers (in the query worker, not the extension host's main thread) */
  memory_mb: number;
}

export function benchRollouts(rows = 1_000_000): RolloutsBench {
  const dir = mkdtempSync(join(tmpdir(), 'credit-lens-rollouts-'));
  try {
    writeSyntheticRun(dir, rows);
    // what the loaded index keeps (JS heap and its typed arrays' buffers), measured between two full collections
    const gc = fullGc();
    const held = () => {
      gc();
      const m = process.memoryUsage();
      return m.heapUsed + m.external;
    };
    const before = held();
    const t0 = performance.now();
    const idx = loadRollouts(dir);
    answer(idx, DEFAULT_QUERY, 0);
    const first = (performance.now() - t0) / 1000;
    const memory = (held() - before) / 2 ** 20;
    const time = (q: Partial<BrowseQuery>) => {
      const query = { ...DEFAULT_QUERY, ...q };
      answer(idx, query, 0);
      const ts: number[] = [];
      for (let k = 0; k < 5; k++) {
        const s = performance.now();
        answer(idx, query, 0);
        ts.push(performance.now() - s);
      }
      return ts.sort((a, b) => a - b)[2];
    };
    return {
      rows: idx.tokens.step.length,
      episodes: idx.episodes,
      first_table_s: first,
      filter_ms: time({ where: 'reward < 0.5 and length > 20 and not zero_var' }),
      search_ms: time({ tab: 'search', search: '\\d[+*]\\d', regex: true }),
      aggregate_ms: time({ tab: 'tokens', tokenSort: '-abs_contribution' }),
      memory_mb: memory,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A full garbage collection, for measuring what stays reachable (V8's gc, exposed for this process by flag). */
function fullGc(): () => void {
  setFlagsFromString('--expose_gc');
  return runInNewContext('gc') as () => void;
}
