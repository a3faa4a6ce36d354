// Browse Rollouts' answer to one query (src/protocol/browse_view.ts) from a loaded RolloutIndex: the filtered and sorted
// episodes, and what the open tab shows (search hits, the token aggregate, a group side by side, a prompt over time,
// histograms). Pure: the extension's query worker calls it, and so do the tests.
import { toCsv } from '../../protocol/csv';
import { emptyResult, type BrowseEpisode, type BrowseQuery, type BrowseResult, type BrowseTokenRow } from '../../protocol/browse_view';
import { isUserError } from '../core/errors';
import type { RolloutIndex } from './rollouts';

/** Episode rows a result carries at most (the table scrolls through them; the total says how many matched). */
export const MAX_ROWS = 5000;
const MAX_TOKENS = 2000;
const MAX_HITS = 2000;

const finite = (x: number) => (Number.isFinite(x) ? x : null);

/** The CLI's row as the view receives it: without the CLI's own columns, measures that are not finite as null. */
function episode(idx: RolloutIndex, i: number): BrowseEpisode {
  const { mean_weight, extra, ...row } = idx.row(i);
  return { ...row, mean_abs_c: finite(row.mean_abs_c), max_entropy: finite(row.max_entropy) };
}

const TOKEN_SORTS: Record<string, (t: BrowseTokenRow) => number> = {
  count: (t) => t.count,
  effective_advantage: (t) => t.effective_advantage.mean ?? NaN,
  abs_contribution: (t) => t.abs_contribution.mean ?? NaN,
  entropy: (t) => t.entropy.mean ?? NaN,
  grad_norm: (t) => t.grad_norm.mean ?? NaN,
  mc_delta: (t) => t.mc_delta.mean ?? NaN,
};

/** The token aggregate sorted by a column ("-abs_contribution" descending); NaN last. */
export function sortTokens(rows: BrowseTokenRow[], by: string): BrowseTokenRow[] {
  const desc = by.startsWith('-');
  const key = TOKEN_SORTS[desc ? by.slice(1) : by] ?? TOKEN_SORTS.count;
  return rows
    .map((r, i) => ({ r, i, v: key(r) }))
    .sort((a, b) => {
      if (Number.isNaN(a.v) || Number.isNaN(b.v)) return Number.isNaN(a.v) ? (Number.isNaN(b.v) ? a.i - b.i : 1) : -1;
      return (desc ? b.v - a.v : a.v - b.v) || a.i - b.i;
    })
    .map((x) => x.r);
}

export function answer(idx: RolloutIndex, q: BrowseQuery, loadMs: number): BrowseResult {
  const t0 = performance.now();
  const base: BrowseResult = {
    ...emptyResult(idx.runDir, q),
    fields: Object.keys(idx.fields),
    stats: { episodes: idx.episodes, tokens: idx.tokens.step.length, loadMs, queryMs: 0 },
  };
  try {
    let rows = idx.filter(q.where);
    if (q.sort) rows = idx.sort(rows, q.sort);
    base.total = rows.length;
    base.episodes = [...rows.subarray(0, MAX_ROWS)].map((i) => episode(idx, i));
    if (q.tab === 'search' && q.search) base.search = idx.search(q.search, rows, { plain: !q.regex, limit: MAX_HITS });
    if (q.tab === 'tokens')
      base.tokens = sortTokens(idx.aggregateTokens(rows, { tokenType: q.tokenType || undefined, section: q.section || undefined }), q.tokenSort).slice(
        0,
        MAX_TOKENS,
      );
    if (q.tab === 'group' && q.group) {
      const members = idx.group(q.group.step, q.group.prompt);
      const abs: number[] = [];
      const m = [...members].map((i) => {
        const tokens: { text: string; c: number }[] = [];
        for (let k = idx.start[i]; k < idx.start[i] + idx.len[i]; k++) {
          const c = idx.tokens.contribution[k];
          if (Number.isFinite(c) && c !== 0) abs.push(Math.abs(c));
          tokens.push({ text: idx.tokens.token[k], c });
        }
        return { episode: episode(idx, i), tokens };
      });
      // the 98th percentile of |c|, as the editor's heatmap clips its ranges: one outlier does not fade the rest
      abs.sort((a, b) => a - b);
      const scale = abs.length ? abs[Math.round(0.98 * (abs.length - 1))] : 0;
      base.group = { step: q.group.step, prompt: q.group.prompt, text: members.length ? idx.promptText[members[0]] : '', scale, members: m };
    }
    if (q.tab === 'prompt' && q.prompt !== null) {
      const all = idx.filter(`prompt = ${q.prompt}`);
      const bySteps = new Map<number, BrowseEpisode[]>();
      for (const i of all) bySteps.set(idx.step[i], [...(bySteps.get(idx.step[i]) ?? []), episode(idx, i)]);
      base.prompt = {
        prompt: q.prompt,
        text: all.length ? idx.promptText[all[0]] : '',
        steps: [...bySteps.entries()].sort((a, b) => a[0] - b[0]).map(([step, members]) => ({ step, members })),
      };
    }
    if (q.expanded) {
      const { step, episode: e } = q.expanded;
      const [i] = idx.filter(`step = ${step} and episode = ${e}`);
      base.detail = i === undefined ? null : { episode: episode(idx, i), prompt: idx.promptText[i], completion: idx.completion[i] };
    }
    if (q.tab === 'histograms') {
      const of = (f: (i: number) => number) => Float64Array.from(rows, f);
      // A = 0 (a group whose rewards are all equal) trains nothing: by default its episodes and tokens are left out
      // of the credit histograms, where they would pile up at 0 and flatten the rest.
      const moved = q.histZeroA ? rows : rows.filter((i) => idx.advantage[i] !== 0);
      const tag = q.histZeroA ? '' : ' (A ≠ 0)';
      base.histograms = [
        { name: 'reward', ...idx.niceHistogram(of((i) => idx.reward[i])) },
        { name: `advantage${tag}`, ...idx.niceHistogram(Float64Array.from(moved, (i) => idx.advantage[i])) },
        { name: 'length', ...idx.niceHistogram(of((i) => idx.len[i])) },
        { name: `|c| of filler tokens${tag}`, ...idx.niceHistogram(idx.tokenValues(moved, 'abs_contribution', 'filler')) },
        { name: `|c| of reasoning tokens${tag}`, ...idx.niceHistogram(idx.tokenValues(moved, 'abs_contribution', 'reasoning')) },
        { name: `entropy of filler tokens${tag}`, ...idx.niceHistogram(idx.tokenValues(moved, 'entropy', 'filler')) },
        { name: `entropy of reasoning tokens${tag}`, ...idx.niceHistogram(idx.tokenValues(moved, 'entropy', 'reasoning')) },
      ];
      base.steps = idx.groupBy(rows, 'step').map((g) => ({ step: g.key, effective_groups: g.effective_groups ?? 0, success_rate: g.success_rate }));
    }
  } catch (e) {
    if (!isUserError(e)) throw e;
    base.error = e.message;
  }
  base.stats.queryMs = performance.now() - t0;
  return base;
}

/** The filtered episodes (every one, not only the shown) or the token aggregate, as CSV or JSON lines. */
export function exportRows(idx: RolloutIndex, q: BrowseQuery, what: 'episodes' | 'tokens', format: 'csv' | 'jsonl'): string {
  let rows = idx.filter(q.where);
  if (q.sort) rows = idx.sort(rows, q.sort);
  if (what === 'episodes') {
    const eps = [...rows].map((i) => ({ ...episode(idx, i), completion: idx.completion[i] }));
    if (format === 'jsonl') return eps.map((e) => JSON.stringify(e)).join('\n') + '\n';
    const header = ['step', 'episode', 'prompt', 'reward', 'advantage', 'length', 'status', 'zero_var', 'mean_abs_c', 'max_entropy', 'completion'];
    return toCsv(
      header,
      eps.map((e) => [e.step, e.episode, e.prompt, e.reward, e.advantage, e.length, e.status, e.zero_var ? 1 : 0, e.mean_abs_c, e.max_entropy, e.completion]),
    );
  }
  const toks = sortTokens(idx.aggregateTokens(rows, { tokenType: q.tokenType || undefined, section: q.section || undefined }), q.tokenSort);
  if (format === 'jsonl') return toks.map((t) => JSON.stringify(t)).join('\n') + '\n';
  const stats = ['effective_advantage', 'abs_contribution', 'entropy', 'grad_norm', 'mc_delta'] as const;
  return toCsv(
    ['token', 'count', ...stats.flatMap((s) => [`${s}_mean`, `${s}_lo`, `${s}_hi`, `${s}_n`])],
    toks.map((t) => [t.token, t.count, ...stats.flatMap((s) => [t[s].mean, t[s].lo, t[s].hi, t[s].n])]),
  );
}
