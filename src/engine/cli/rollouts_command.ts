// `credit-lens rollouts <run-dir> …`: the queries of Browse Rollouts from the command line, so they can be
// scripted and tested. `rollouts paired <config>` (seed doc 004's paired rollouts) is data_commands.ts's.
import { toCsv, type CsvValue } from '../../protocol/csv';
import { UserError } from '../core/errors';
import { loadRollouts, type MeanCi } from '../query/rollouts';
import { flag, intFlag, parseArgs } from './args';

export const QUERY_USAGE = `usage: credit-lens rollouts <run-dir> [--steps a:b] [--where EXPR] [--search REGEX [--plain] [--ignore-case]]
         [--group-by token|prompt|step] [--token-type filler|reasoning] [--section think|answer|other]
         [--sort [-]FIELD] [--limit N] [--json | --csv]
  Episodes of a run, filtered, searched, grouped and aggregated (Browse Rollouts' queries). --where takes comparisons
  joined by and / or / not: reward < 0.5 and status = wrong; step in 10:50 and (truncated or zero_var). Fields: step,
  episode, prompt, reward, advantage, length, mean_abs_c, max_entropy, mean_weight, status (correct, wrong, truncated,
  no_answer), success, truncated, zero_var, and <column>_mean / <column>_max for an imported run's extra columns.
  --search lists the matches in the completions with the token each starts in; --group-by token aggregates every token
  string (count, mean Â, |c|, entropy, grad norm, MC δ, each with a 95 % interval).`;

const ci = (m: MeanCi) => (m.mean === null ? '' : m.lo === null ? m.mean.toFixed(4) : `${m.mean.toFixed(4)} [${m.lo.toFixed(4)}, ${m.hi!.toFixed(4)}]`);

export async function cmdRolloutsQuery(argv: string[]): Promise<number> {
  const a = parseArgs(
    argv,
    { valued: ['steps', 'where', 'search', 'group-by', 'token-type', 'section', 'sort', 'limit'], boolean: ['json', 'csv', 'plain', 'ignore-case'] },
    QUERY_USAGE,
  );
  if (a.positional.length !== 1)
    throw new UserError(`rollouts needs exactly one run directory, or the subcommand paired (rollouts paired <config.credit.yaml>)\n${QUERY_USAGE}`);
  if (a.flags.has('json') && a.flags.has('csv')) throw new UserError('--json and --csv: give one');
  const range = stepRange(flag(a, 'steps'));
  const groupBy = flag(a, 'group-by');
  if (groupBy !== undefined && !['token', 'prompt', 'step'].includes(groupBy))
    throw new UserError(`--group-by: got ${JSON.stringify(groupBy)}; expected token, prompt or step`);
  const limit = intFlag(a, 'limit', 1) ?? 50;
  const t0 = performance.now();
  const idx = loadRollouts(a.positional[0], range);
  const loaded = performance.now();
  let rows = idx.filter(flag(a, 'where'));
  const sort = flag(a, 'sort');
  if (sort) rows = idx.sort(rows, sort);
  const as = a.flags.has('json') ? 'json' : a.flags.has('csv') ? 'csv' : 'text';
  const out = (header: string[], table: CsvValue[][], json: unknown) => printResult(as, header, table, json);
  const timing = () =>
    process.stderr.write(
      `${rows.length} of ${idx.episodes} episodes; loaded in ${(loaded - t0).toFixed(0)} ms, queried in ${(performance.now() - loaded).toFixed(0)} ms\n`,
    );
  const search = flag(a, 'search');
  if (search !== undefined) {
    const r = idx.search(search, rows, { plain: a.flags.has('plain'), ignoreCase: a.flags.has('ignore-case'), limit });
    out(
      ['step', 'episode', 'position', 'before', 'match', 'after'],
      r.hits.map((h) => [h.step, h.episode, h.position, h.before.replace(/\n/g, '⏎'), h.match, h.after.replace(/\n/g, '⏎')]),
      { total: r.total, hits: r.hits },
    );
    timing();
    return 0;
  }
  if (groupBy === 'token') {
    const agg = idx.aggregateTokens(rows, { tokenType: flag(a, 'token-type'), section: flag(a, 'section') }).slice(0, limit);
    out(
      ['token', 'count', 'mean Â', 'mean |c|', 'mean entropy', 'mean grad norm', 'mean MC δ'],
      agg.map((g) => [JSON.stringify(g.token), g.count, ci(g.effective_advantage), ci(g.abs_contribution), ci(g.entropy), ci(g.grad_norm), ci(g.mc_delta)]),
      agg,
    );
    timing();
    return 0;
  }
  if (groupBy) {
    const g = idx.groupBy(rows, groupBy as 'step' | 'prompt').slice(0, limit);
    out(
      [groupBy, 'episodes', 'reward mean', 'success rate', ...(groupBy === 'step' ? ['effective groups'] : [])],
      g.map((x) => [x.key, x.episodes, x.reward_mean, x.success_rate, ...(groupBy === 'step' ? [x.effective_groups] : [])]),
      g,
    );
    timing();
    return 0;
  }
  const shown = [...rows.subarray(0, limit)].map((i) => idx.row(i));
  out(
    ['step', 'episode', 'prompt', 'reward', 'advantage', 'length', 'status', 'zero_var', 'mean |c|', 'max entropy', 'completion'],
    shown.map((r) => [r.step, r.episode, r.prompt, r.reward, r.advantage, r.length, r.status, r.zero_var ? 'yes' : '', r.mean_abs_c, r.max_entropy, r.snippet]),
    { total: rows.length, episodes: shown },
  );
  timing();
  return 0;
}

/** --steps a:b, a: or :b (inclusive step numbers) as the query's range; none given: every step. */
function stepRange(steps: string | undefined): { fromStep?: number; toStep?: number } {
  if (steps === undefined) return {};
  const m = /^(\d*):(\d*)$/.exec(steps);
  if (!m || (m[1] === '' && m[2] === '')) throw new UserError(`--steps: got ${JSON.stringify(steps)}; expected a:b, a: or :b (inclusive step numbers)`);
  return { fromStep: m[1] ? Number(m[1]) : undefined, toStep: m[2] ? Number(m[2]) : undefined };
}

/** A result as JSON, as CSV, or as an aligned text table. */
function printResult(as: 'json' | 'csv' | 'text', header: string[], table: CsvValue[][], json: unknown): void {
  if (as === 'json') console.log(JSON.stringify(json, null, 2));
  else if (as === 'csv') process.stdout.write(toCsv(header, table));
  else {
    // float32 columns printed at 4 decimals (0.1 reads 0.1000, not 0.10000000149011612); the JSON and CSV keep every digit
    const text = (v: CsvValue) => (typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(4) : String(v ?? ''));
    const widths = header.map((h, c) => Math.min(60, Math.max(h.length, ...table.map((r) => text(r[c]).length))));
    const line = (r: readonly CsvValue[]) => r.map((v, c) => text(v).slice(0, 60).padEnd(widths[c])).join('  ');
    console.log([line(header), ...table.map(line)].join('\n'));
  }
}
