// `credit-lens probe`: flags in, probeRun called, its report printed.
import { describeCancellation } from '../../protocol/analysis';
import { pText } from '../../protocol/compare';
import { formatNumber } from '../../protocol/number_format';
import { UserError } from '../core/errors';
import { PROBE_MAX_ROLLOUTS } from '../model/prefix_values';
import { planProbe, planText } from '../probe/plan';
import { probeRun, type ProbeReport } from '../probe/probe';
import { recordAccuracy } from '../rundir/probe_record';
import { readEpisodeTable } from '../rundir/arrow_tables';
import { stepFile } from '../rundir/rundir';
import { SERVER_APIS } from '../server_apis/catalog';
import { choiceFlag, flag, intFlag, numFlag, parseArgs, progressPrinter, stopOnSignals } from './args';

export const PROBE_USAGE = `usage: credit-lens probe <run-dir> --step N [--episodes K | --episode i,j,…] [--rollouts M]
         [--positions every|segments:S|cutpoints:τ] [--temperature T] [--seed s] [--replace] [--json] [--progress-json]
         [--server URL [--server-api ${SERVER_APIS.join('|')}] [--server-concurrency C]]
       credit-lens probe <run-dir> --step N --plan [--target H] [--episodes K] [--rollouts M]
  Monte Carlo values V_t of the step's completion prefixes (M continuations each, from the policy that sampled the step)
  and δ_t = V_{t+1} − V_t, into <run>/probes/step-N.arrow; then each credit strategy's accuracy against them.
  --episodes K (default 32) spreads K episodes over the step's groups. --rollouts M: 2 to 4,096 (default 8). Ctrl-C
  stops within a few tokens, keeping finished episodes (exit 130); the same command resumes. One probe of a step runs
  at a time (probes/step-N.lock): a second is refused with the first one's pid.
  --plan probes a pilot (--episodes, default 16; --rollouts, default 8; kept, so the real probe with the same settings
  resumes from it) and says the prompts, episodes and M whose every lift excess over the trivial baselines has a 95 %
  interval of ± H × uniform credit's δ² (--target H, default 0.1), with its cost in continuations.
  --server URL samples the continuations on an SGLang or vLLM server (or credit-lens serve) that serves the policy of
  step N; the run's tokenizer, stop rules and rewards stay here. --server-api auto asks the server which API it speaks;
  --server-concurrency (default 64) bounds the requests in flight, one per prefix with its M continuations.`;

const pct = (x: number | null) => (x === null ? '   —  ' : `${(100 * x).toFixed(1).padStart(5)}%`);
const num = (x: number | null) => (x === null ? '   —  ' : x.toFixed(3).padStart(6));
/** δ² scores are small (reward² units): four significant digits, in the shared number format */
const d2 = (x: number | null) => (x === null ? '   —  ' : formatNumber(x).padStart(8));

/** The accuracy table as text: the probe's reliability, then one row per strategy and per trivial baseline. */
export function accuracyText(r: ProbeReport): string {
  const acc = r.accuracy;
  if (!acc || !r.uniform_share) return 'no episode finished: no accuracy\n';
  const ci = (e: { lo: number | null; hi: number | null } | undefined, f: (x: number | null) => string) =>
    !e || e.lo === null ? '' : ` [${f(e.lo).trim()}, ${f(e.hi).trim()}]`;
  const m = (e: { mean: number | null } | undefined, f: (x: number | null) => string) => f(e?.mean ?? null);
  const rel = r.reliability;
  const lines = [
    `credit accuracy over ${r.accuracy_episodes} episodes (those with A ≠ 0, one set for every row) of ${r.accuracy_prompts} prompts; 95% intervals over prompts`,
    rel
      ? `probe reliability: split-half r of δ̂ ${num(rel.half).trim()}, for all M (Spearman–Brown) ${num(rel.full).trim()}; |δ̂| rank agreement of the halves ${num(rel.abs_rank_half.mean).trim()}; ${pct(rel.zero_share).trim()} of δ̂ exactly 0`
      : 'probe reliability: unknown (no independent halves in this table; probe again with --replace)',
    ...(r.ceiling
      ? [
          `ceiling: the lift of an oracle credit that weighs units by one half's |δ̂|, scored on the other half (cross-fitted) ${m(r.ceiling, d2).trim()}${ci(r.ceiling, d2)}: what a credit that knew δ as well as M/2 continuations tell it would score (a credit with a better prior can pass it at a small M)`,
        ]
      : []),
    `lift: Σ p·δ̂ᴬ·δ̂ᴮ with p = |Â|/Σ|Â|, minus uniform credit's (${d2(r.uniform_delta2?.mean ?? null).trim()}): the δ² where the credit puts its weight, beyond uniform's, unbiased at any M; ` +
      `over best: the lift minus the best trivial baseline's; rank (attenuated): Spearman of |Â| with δ̂ᴬ·δ̂ᴮ, which noise pulls toward 0; placebo: the rank against |δ̂ᴬ − δ̂ᴮ| (pure noise); uniform credit's decisive share ${pct(r.uniform_share.mean).trim()}`,
    `${'strategy'.padEnd(24)} ${'lift'.padEnd(28)} ${'over best'.padEnd(28)} ${'rank (attenuated)'.padEnd(24)} ${'placebo'.padEnd(8)} ${'decisive'.padEnd(8)} ${'kendall τ'.padEnd(9)} sign agree (p)`,
  ];
  const row = (label: string, s: (typeof acc)[string], excess: boolean) =>
    `${label.padEnd(24)} ${(m(s.lift, d2) + ci(s.lift, d2)).padEnd(28)} ${(excess ? m(s.lift_excess, d2) + ci(s.lift_excess, d2) : '').padEnd(28)} ${(m(s.spearman_unbiased, num) + ci(s.spearman_unbiased, num)).padEnd(24)} ${m(s.placebo, num).padEnd(8)} ${m(s.decisive_share, pct).padEnd(8)} ${m(s.kendall, num).padEnd(9)} ${s.sign_test ? `${s.sign_test.agree}/${s.sign_test.units} (${pText(s.sign_test.p_clustered ?? s.sign_test.p)})` : ''}`;
  for (const [name, s] of Object.entries(acc)) lines.push(row(name === r.run_strategy ? `${name} (the run's)` : name, s, true));
  for (const [name, s] of Object.entries(r.baselines ?? {})) lines.push(row(`baseline: ${name}`, s, false));
  if (r.cancellation) {
    const e = (x: { mean: number | null; lo: number | null; hi: number | null; n: number }) => `${num(x.mean).trim()}${ci(x, num)} (n ${x.n})`;
    lines.push(describeCancellation(r.cancellation, e, pText));
  }
  for (const w of r.warnings ?? []) lines.push(`warning: ${w}`);
  return lines.join('\n') + '\n';
}

export async function cmdProbe(argv: string[]): Promise<number> {
  const a = parseArgs(
    argv,
    {
      valued: ['step', 'episodes', 'episode', 'rollouts', 'positions', 'temperature', 'seed', 'target', 'server', 'server-api', 'server-concurrency'],
      boolean: ['json', 'progress-json', 'replace', 'plan'],
    },
    PROBE_USAGE,
  );
  if (a.positional.length !== 1) throw new UserError(`probe needs exactly one run directory\n${PROBE_USAGE}`);
  const step = intFlag(a, 'step', 1);
  if (step === undefined) throw new UserError(`probe needs --step N (a logged GRPO step)\n${PROBE_USAGE}`);
  const list = flag(a, 'episode');
  if (list !== undefined && a.flags.has('episodes')) throw new UserError('--episodes and --episode: give one (a count, or a list of episode indices)');
  const episodeList = list === undefined ? undefined : parseEpisodeList(list);
  const progress = progressPrinter(a, 'continuations');
  const signal = stopOnSignals('stopping after the current batch; finished episodes are kept');
  const plan = a.flags.has('plan');
  const target = numFlag(
    a,
    'target',
    (x) => x > 0 && x <= 1,
    "a half-width as a share of uniform credit's δ², in (0, 1] (0.1: every lift excess within ± 10 % of it)",
  );
  if (target !== undefined && !plan) throw new UserError('--target sizes a plan: give it with --plan');
  const server = flag(a, 'server');
  const api = choiceFlag(a, 'server-api', SERVER_APIS, 'auto');
  const concurrency = intFlag(a, 'server-concurrency', 1);
  if (!server && (a.flags.has('server-api') || concurrency !== undefined)) throw new UserError('--server-api and --server-concurrency go with --server URL');
  const r = await probeRun({
    runDir: a.positional[0],
    step,
    episodes: intFlag(a, 'episodes', 1) ?? (plan && !episodeList ? 16 : undefined),
    episodeList,
    rollouts: intFlag(a, 'rollouts', 2),
    positions: flag(a, 'positions'),
    temperature: numFlag(a, 'temperature', (x) => x > 0, 'a number > 0'),
    seed: intFlag(a, 'seed', 0),
    replace: a.flags.has('replace'),
    progress,
    log: (m) => process.stderr.write(`${m}\n`),
    signal,
    server: server ? { url: server, api, concurrency } : undefined,
  });
  const report = recordAccuracy(r);
  if (plan && report) {
    const eps = readEpisodeTable(stepFile(r.run_dir, 'episodes', r.step));
    const p = planProbe(
      {
        report,
        rollouts: r.rollouts,
        probed: r.episodes.length,
        continuations: r.continuations,
        seconds: r.seconds,
        target: target ?? 0.1,
        stepEpisodes: eps.episode.length,
        stepPrompts: new Set(eps.prompt_idx).size,
        maxRollouts: PROBE_MAX_ROLLOUTS,
      },
      r.run_dir,
      r.step,
    );
    if (a.flags.has('json')) console.log(JSON.stringify({ plan: p, pilot: r }, null, 2));
    else process.stdout.write(accuracyText(r) + planText(p));
    return r.complete ? 0 : 130;
  }
  if (a.flags.has('json')) console.log(JSON.stringify(r, null, 2));
  else {
    console.log(`probed ${r.episodes.length} episodes of step ${r.step} (${r.continuations} continuations, ${r.seconds.toFixed(1)} s) → ${r.table}`);
    process.stdout.write(accuracyText(r));
  }
  return r.complete ? 0 : 130;
}

/**
 * `--episode 0,3,17`: the episode indices, each a whole number ≥ 0. An empty item (`3,,5`, `3,`, `,`) is an error, not
 * episode 0 (Number('') is 0).
 */
export function parseEpisodeList(list: string): number[] {
  return list.split(',').map((x) => {
    if (!x.trim())
      throw new UserError(`--episode: ${JSON.stringify(list)} has an empty item; expected episode indices separated by commas, e.g. --episode 0,3,17`);
    const v = Number(x.trim());
    if (!Number.isInteger(v) || v < 0) throw new UserError(`--episode: ${JSON.stringify(x)} is not an episode index (expected e.g. --episode 0,3,17)`);
    return v;
  });
}
