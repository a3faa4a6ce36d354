// The comparison's tables as markdown, for a terminal, a README and the results book: the report (compare.ts) in, the
// table with its rule, its notes and every row's verdict out. Pure text, so what the CLI prints is what the document holds.
import {
  byStartText,
  diffText,
  intervalText,
  pctText,
  pText,
  seedsNeededText,
  seedsText,
  sig3,
  verdictText,
  type CompareReport,
  type CompareRow,
  type ConditionalTest,
} from '../../protocol/compare';
import type { GainReport } from './compare';

/** The lines under a table: each difference over warm starts by start, each withheld verdict's reason, the notes. */
function footer(r: { rows: readonly Pick<CompareRow, 'group' | 'run_test' | 'verdict_withheld'>[]; notes: readonly string[] }): string[] {
  const withheld = r.rows.filter((x) => x.verdict_withheld);
  const overStarts = r.rows.filter((x) => x.run_test?.by_start);
  if (!withheld.length && !overStarts.length && !r.notes.length) return [];
  return [
    '',
    ...overStarts.map((x) => `- ${x.group}: Δ by warm start: ${byStartText(x.run_test!)}`),
    ...withheld.map((x) => `- ${x.group}: ${x.verdict_withheld}`),
    ...r.notes.map((n) => `- ${n}`),
  ];
}

/** The sentence under a table: which test gates, which family was adjusted, what the marks mean. */
function ruleText(alpha: number, family: number, power: number): string {
  return (
    `Δ [95 % CI], p: the run-level gate, the training run as the unit: Δ of the groups' mean success over their runs, its variance σ_seed² (pooled over the sides) × (1/S_B + 1/S_A) + σ_inst²/n (two-way), Student's t with Satterthwaite's df; ` +
    'where the runs began GRPO from K ≥ 2 shared warm starts, each with runs of every row, the gate is over the starts instead (the start as the unit): Δ within each start, its variance over the starts (a start × method interaction counts) / K + σ_inst²/n, t with Satterthwaite\'s df from K − 1; a verdict from one shared start is labelled "from warm start …"; starts that are not crossed with the rows give no verdict. ' +
    `p Holm-adjusted over the ${family} row${family === 1 ? '' : 's'} tested; a row is significant (bold) when p_adj < ${alpha}, else n.s.; with fewer than 3 runs a side there is no verdict (with one, only the seeds needed). ` +
    `MDE: the smallest true difference the gate detects with ${Math.round(power * 100)} % power at α / rows, with these seeds and instances. ` +
    'Conditional on these checkpoints: the cluster bootstrap over instances and the exact sign-flip test (every baseline run against every run of the row); they say whether these trained policies differ on these instances, not whether the method trains better ones. ' +
    'Rows marked exploratory have fewer than 3 seeds or a run that did not complete.'
  );
}

const condText = (c: ConditionalTest | null) => (c ? `${diffText(c.diff.mean, c.diff.lo, c.diff.hi)}, b / c ${c.b} / ${c.c}, p ${pText(c.p)}` : '');

/** The table for a terminal or a README: significant differences in bold, the rest marked n.s. */
export function compareMarkdown(r: CompareReport): string {
  const lines = [
    `Eval success on the ${r.split} split at step ${r.rows[0]?.step ?? '?'}: mean over seeds ± the 95 % t half-width. ${ruleText(r.alpha, r.adjustment.family, r.power)} |c|: the GRPO credit-assignment analysis's mean |contribution| c = A·ℓ (the episode's advantage times the log-prob) of filler and reasoning tokens over all logged steps, mean ± 95 % t half-width over seeds. Rows are in the order given, not ranked.`,
    '',
    `| run group | strategy | seeds | instances | eval success % | Δ vs baseline (pp) | p | p_adj | MDE | seeds needed | conditional on these checkpoints: Δ [bootstrap], b / c, p | filler \\|c\\| | reasoning \\|c\\| | filler ÷ reasoning |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|---|---|`,
  ];
  for (const x of r.rows) {
    const diff = x.baseline ? '(baseline)' : x.diff ? diffText(x.diff.mean, x.diff.lo, x.diff.hi) : '—';
    const group = x.exploratory ? `${x.group} (exploratory)` : x.group;
    const cells = [
      group,
      x.label,
      seedsText(x.seeds, x.starts),
      String(x.instances),
      intervalText(x.eval_success, pctText),
      x.significant ? `**${diff}**` : diff,
      x.run_test ? pText(x.run_test.p) : '',
      x.significant ? `**${verdictText(x)}**` : verdictText(x),
      x.mde === null ? '' : `± ${(100 * x.mde).toFixed(1)} pp`,
      seedsNeededText(x.seeds_needed),
      condText(x.conditional),
      intervalText(x.filler_abs_c, sig3),
      intervalText(x.reasoning_abs_c, sig3),
      intervalText(x.filler_reasoning_ratio, sig3),
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return [...lines, ...footer(r)].join('\n');
}

/** The gain table for a terminal or a README. */
export function gainMarkdown(r: GainReport): string {
  const lines = [
    `Eval success on the ${r.split} split at step 0 (the policy GRPO started from) and at each run's last eval, mean over seeds ± the 95 % t half-width. gain: last − start, each run against its own start. ${ruleText(r.alpha, r.adjustment.family, r.power)} |c|: the GRPO credit-assignment analysis's mean |contribution| c = A·ℓ over all logged steps.`,
    '',
    `| run group | strategy | seeds | instances | start % | after GRPO % | gain (pp) | p | p_adj | MDE | seeds needed | conditional on these checkpoints: gain [bootstrap], b / c, p | filler ÷ reasoning \\|c\\| | minutes per run |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|---|---|`,
  ];
  for (const x of r.rows) {
    const g = x.diff ? diffText(x.diff.mean, x.diff.lo, x.diff.hi) : '—';
    // in the seeds' numeric order, as seedsText lists them
    const bySeed = x.minutes.map((m, i) => ({ m, seed: x.seeds[i] ?? Infinity })).sort((a, b) => a.seed - b.seed);
    const mins = bySeed.map(({ m }) => (m === null ? '—' : m.toFixed(1))).join(', ');
    const cells = [
      x.exploratory ? `${x.group} (exploratory)` : x.group,
      x.label,
      seedsText(x.seeds, x.starts),
      String(x.instances),
      intervalText(x.start, pctText),
      intervalText(x.final, pctText),
      x.significant ? `**${g}**` : g,
      x.run_test ? pText(x.run_test.p) : '',
      x.significant ? `**${verdictText(x)}**` : verdictText(x),
      x.mde === null ? '' : `± ${(100 * x.mde).toFixed(1)} pp`,
      seedsNeededText(x.seeds_needed),
      condText(x.conditional),
      intervalText(x.filler_reasoning_ratio, sig3),
      mins,
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return [...lines, ...footer(r)].join('\n');
}
