// Markdown for people: the credit analysis laid out as seed doc 002's tables, in the seed's order, so a run's
// report reads side by side with the seed. The JSON (src/protocol/analysis.ts) is the data; this is a view.
import {
  describeCancellation,
  type AppendixBComparison,
  type AppendixBRow,
  type CreditAnalysis,
  type Estimate,
  type ProbeAccuracy,
  type TokenTypeStats,
  type TopToken,
} from '../../protocol/analysis';
import { pText } from '../../protocol/compare';
import { formatNumber } from '../../protocol/number_format';

const DASH = '—';

/** Contributions and weights: 3 decimals like the seed, switching to exponent form for specks like 2e-5. */
function num(x: number | null, digits = 3): string {
  if (x === null) return DASH;
  if (x !== 0 && Math.abs(x) < 0.5 * 10 ** -digits) return x.toExponential(1);
  return x.toFixed(digits);
}

const pct = (x: number | null, digits = 1) => (x === null ? DASH : `${(x * 100).toFixed(digits)}%`);
const times = (x: number | null) => (x === null ? DASH : `${x.toFixed(2)}×`);
const signed = (x: number | null, f: (v: number) => string) => (x === null ? DASH : `${x >= 0 ? '+' : '−'}${f(Math.abs(x))}`);

/** A token's text as a code span that survives a table: quoted and escaped, pipes escaped (GFM requires it even in code). */
function tokenCell(t: string): string {
  const quoted = JSON.stringify(t).replace(/\|/g, '\\|');
  return quoted.includes('`') ? `\`\` ${quoted} \`\`` : `\`${quoted}\``;
}

function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

function typeRow(label: string, s: TokenTypeStats): string[] {
  return [label, String(s.count), pct(s.share), num(s.mean_abs_contribution), num(s.mean_grad_norm), num(s.mean_contribution), num(s.mean_logprob, 3)];
}

function topTable(list: TopToken[]): string {
  if (list.length === 0) return '_none_';
  // The id tells apart tokens that print alike (EOS and padding both decode to "").
  return table(
    ['Token', 'Id', 'Count', 'Total \\|c\\|', 'Mean c', 'Mean \\|c\\|', 'Mean log-prob'],
    list.map((t) => [
      tokenCell(t.token),
      String(t.token_id),
      String(t.count),
      num(t.total_abs_contribution),
      num(t.mean_contribution),
      num(t.mean_abs_contribution),
      num(t.mean_logprob),
    ]),
  );
}

function appendixB(cmp: AppendixBComparison): string {
  const row = (r: AppendixBRow, tag: string) => [
    `${tag}${r.label}`,
    r.name ?? DASH,
    r.eval_success === null ? DASH : `${pct(r.eval_success, 0)}${r.eval_step !== null ? ` @ ${r.eval_step}` : ''}`,
    num(r.filler_mean_abs_contribution),
    num(r.reasoning_mean_abs_contribution),
    times(r.filler_reasoning_ratio),
  ];
  const d = cmp.delta;
  return (
    table(
      ['Run', 'Name', 'Eval success', 'Filler \\|c\\|', 'Reasoning \\|c\\|', 'Ratio'],
      [
        row(cmp.baseline, 'Baseline: '),
        row(cmp.run, ''),
        [
          'Δ (run − baseline)',
          '',
          signed(d.eval_success, (v) => `${(v * 100).toFixed(0)} pts`),
          signed(d.filler_mean_abs_contribution, (v) => num(v)),
          signed(d.reasoning_mean_abs_contribution, (v) => num(v)),
          signed(d.filler_reasoning_ratio, (v) => `${v.toFixed(2)}×`),
        ],
      ],
    ) +
    '\n\n' +
    evalTestLine(cmp)
  );
}

/** The paired test under the table: significant differences in bold, the others marked n.s. (one seed each: exploratory). */
export function evalTestLine(cmp: AppendixBComparison): string {
  const t = cmp.eval_test;
  if (!t) return `Paired test on eval success: not available (${cmp.eval_test_note ?? 'no per-instance eval tables'}).`;
  const pts = (v: number) => `${v >= 0 ? '+' : ''}${(100 * v).toFixed(1)}`;
  const diff = `Δ ${pts(t.diff)} pts, 95 % bootstrap CI over instances [${pts(t.lo)}, ${pts(t.hi)}]`;
  const p = `exact test p = ${t.p < 1e-4 ? t.p.toExponential(1) : t.p.toFixed(3)} (one seed per side: McNemar's; only the baseline solves ${t.b}, only this run ${t.c})`;
  const mde = t.mde === null ? '' : `, MDE ± ${(100 * t.mde).toFixed(1)} pp`;
  return (
    `Paired test on eval success at step ${t.step}, the same ${t.instances} ${t.split} instances: ${t.significant ? `**${diff}**` : diff}; ${p}${mde}` +
    `${t.significant ? '' : ` — n.s. at α = ${t.alpha}`}. Conditional on these two checkpoints: whether these two policies differ on these instances, not whether the methods train differently; that needs several seeds a side (\`credit-lens compare\`'s run-level test).`
  );
}

/** The whole analysis as Markdown; with `cmp`, seed doc 002's Appendix-B table comes first. */
export function analysisToMarkdown(a: CreditAnalysis, cmp?: AppendixBComparison): string {
  const out = metaSection(a);
  if (cmp) out.push('## Mitigation summary (the GRPO credit-assignment analysis, Appendix B)', appendixB(cmp));
  out.push(...contributionSections(a), ...tokenTypeSections(a), ...topAndWeightSections(a));
  if (a.probes) out.push(...probeSection(a.probes));
  if (a.notes.length) out.push('## Notes', a.notes.map((n) => `- ${n}`).join('\n'));
  return out.join('\n\n') + '\n';
}

/** The title and the run's facts: its folder, strategy, steps, evals and the filler/reasoning ratio. */
function metaSection(a: CreditAnalysis): string[] {
  const m = a.meta;
  const out: string[] = [];
  const steps = m.steps.from === m.steps.to ? `step ${m.steps.from}` : `steps ${m.steps.from}–${m.steps.to}`;
  out.push(`# Credit analysis: ${m.name ?? m.run_dir}${m.run_id ? ` (${m.run_id})` : ''}`);
  out.push(
    [
      `- Run directory: \`${m.run_dir}\``,
      `- Strategy: ${m.strategy ?? 'unknown'}${m.strategy_param ? ` (${m.strategy_param.name} ${m.strategy_param.value})` : ''}`,
      `- Analysed: ${steps} (${m.steps.count} logged step table${m.steps.count === 1 ? '' : 's'}), ${m.episodes} episodes, ${m.tokens} tokens`,
      `- Eval success: ${pct(m.eval_success.before_grpo)} before GRPO → ${pct(m.eval_success.final)}${m.eval_success.final_step !== null ? ` at step ${m.eval_success.final_step}` : ''}`,
      `- Training batches of these steps: success ${pct(m.training.success_rate)}, mean reward ${num(m.training.reward_mean)}`,
      `- Filler |c| ${num(m.filler_mean_abs_contribution)}, reasoning |c| ${num(m.reasoning_mean_abs_contribution)}, ratio ${times(m.filler_reasoning_ratio)}`,
      `- Reasoning tokens: \`/${m.reasoning_regex}/\`${m.reasoning_regex_is_default ? " (the GRPO credit-assignment analysis's, the default)" : ' (custom)'}; ${contributionText(m.contribution)}; std is the sample std`,
    ].join('\n'),
  );

  return out;
}

/** Contribution, per-position t statistics, relative positions and reward signs. */
function contributionSections(a: CreditAnalysis): string[] {
  const out: string[] = [];
  const c = a.contribution;
  out.push(
    '## Contribution statistics',
    table(
      ['Metric', 'Value'],
      [
        ['Mean contribution', num(c.mean)],
        ['Std contribution', num(c.std)],
        ['Mean \\|contribution\\|', num(c.mean_abs)],
        ['Range', c.min === null ? DASH : `${num(c.min)} to ${num(c.max)}`],
        ['Tokens', String(c.count)],
      ],
    ),
  );

  const t = a.position_t_stats;
  out.push(
    '## T-statistics per position',
    table(
      ['Metric', 'Value'],
      [
        ['High t-stat (\\|t\\| > 3.0)', pct(t.frac_abs_t_gt_3)],
        ['Low t-stat (\\|t\\| < 1.5)', pct(t.frac_abs_t_lt_1_5)],
        ['Mean \\|t-stat\\|', num(t.mean_abs_t, 2)],
        ['Positions', String(t.positions)],
      ],
    ),
    `_${t.note}_`,
  );

  out.push(
    '## Position analysis (relative position in the episode)',
    table(
      ['Bin', 'Position', 'Mean c', 'Std c', 'Mean \\|c\\|', 'Mean log-prob', 'Count'],
      a.relative_position.map((b) => [
        String(b.bin),
        `${(b.lo * 100).toFixed(0)}–${(b.hi * 100).toFixed(0)}%`,
        num(b.mean_contribution),
        num(b.std_contribution),
        num(b.mean_abs_contribution),
        num(b.mean_logprob),
        String(b.count),
      ]),
    ),
  );

  const s = a.reward_sign;
  out.push(
    '## By reward sign (episode advantage)',
    table(
      ['Episode type', 'Episodes', 'Tokens', 'Mean c', 'Mean \\|c\\|'],
      [
        ['Positive (A > 0)', String(s.positive.episodes), String(s.positive.tokens), num(s.positive.mean_contribution), num(s.positive.mean_abs_contribution)],
        ['Zero (A = 0)', String(s.zero.episodes), String(s.zero.tokens), num(s.zero.mean_contribution), num(s.zero.mean_abs_contribution)],
        ['Negative (A < 0)', String(s.negative.episodes), String(s.negative.tokens), num(s.negative.mean_contribution), num(s.negative.mean_abs_contribution)],
      ],
    ),
    '_A rewarded episode (A > 0) has c ≤ 0: c is an advantage times a log-prob, and log-probs are negative._',
  );

  return out;
}

/** Filler and reasoning tokens: their table, the ratio in words (|c| and gradient norm), and by position. */
function tokenTypeSections(a: CreditAnalysis): string[] {
  const m = a.meta;
  const out: string[] = [];
  out.push(
    '## Token types',
    table(
      ['Type', 'Count', '%', 'Mean \\|c\\|', 'Mean grad norm', 'Mean c', 'Mean log-prob'],
      [typeRow('Filler', a.token_types.filler), typeRow('Reasoning', a.token_types.reasoning)],
    ),
  );
  if (m.filler_reasoning_ratio !== null) {
    const r = m.filler_reasoning_ratio;
    out.push(`Filler gets ${Math.abs((r - 1) * 100).toFixed(0)}% ${r >= 1 ? 'MORE' : 'LESS'} gradient magnitude than reasoning (ratio ${times(r)}).`);
  }
  const gf = a.token_types.filler.mean_grad_norm;
  const gr = a.token_types.reasoning.mean_grad_norm;
  if (gf !== null && gr !== null && gr > 0) {
    const r = gf / gr;
    out.push(
      `Measured by the gradient each token's term sends to the logits (grad_norm, |Â|·√(1 − 2π + Σπ²)) instead of |c|, filler gets ${Math.abs((r - 1) * 100).toFixed(0)}% ${r >= 1 ? 'MORE' : 'LESS'} than reasoning (ratio ${times(r)}).`,
    );
  }

  out.push(
    '## Token types by position',
    table(
      [
        'Position',
        'Filler \\|c\\|',
        'Reasoning \\|c\\|',
        'Filler grad norm',
        'Reasoning grad norm',
        'Filler log-prob',
        'Reasoning log-prob',
        'Filler n',
        'Reasoning n',
      ],
      a.token_types_by_position.map((b) => [
        `${(b.lo * 100).toFixed(0)}–${(b.hi * 100).toFixed(0)}%`,
        num(b.filler.mean_abs_contribution),
        num(b.reasoning.mean_abs_contribution),
        num(b.filler.mean_grad_norm),
        num(b.reasoning.mean_grad_norm),
        num(b.filler.mean_logprob, 2),
        num(b.reasoning.mean_logprob, 2),
        String(b.filler.count),
        String(b.reasoning.count),
      ]),
    ),
  );

  return out;
}

/** The top tokens of each type, and the strategy's weights per section. */
function topAndWeightSections(a: CreditAnalysis): string[] {
  const out: string[] = [];
  out.push('## Top tokens by type');
  for (const [type, title] of [
    ['filler', 'Filler'],
    ['reasoning', 'Reasoning'],
  ] as const) {
    out.push(`### ${title}, by total |c|`, topTable(a.top_tokens[type].by_total_abs_contribution));
    out.push(`### ${title}, by count`, topTable(a.top_tokens[type].by_count));
  }

  out.push(
    `## Weights per section (strategy: ${a.weights.strategy ?? 'unknown'})`,
    table(
      ['Section', 'Count', 'Mean w', 'Std', 'Min', 'p10', 'p50', 'p90', 'Max', 'Mean \\|Â\\|', 'Mean \\|c\\|'],
      (['think', 'answer', 'other'] as const).map((name) => {
        const w = a.weights.sections[name];
        return [
          name,
          String(w.count),
          num(w.mean),
          num(w.std),
          num(w.min),
          num(w.p10),
          num(w.p50),
          num(w.p90),
          num(w.max),
          num(w.mean_abs_effective_advantage),
          num(w.mean_abs_contribution),
        ];
      }),
    ),
  );

  return out;
}

/** An estimate with its interval: "0.279 [0.198, 0.341]". */
function est(e: Estimate, f: (x: number | null) => string): string {
  return e.mean === null ? DASH : `${f(e.mean)}${e.lo !== null ? ` [${f(e.lo)}, ${f(e.hi)}]` : ''}`;
}

/** One row of the accuracy table: a strategy's (with its excess) or a trivial baseline's. */
function accuracyRow(label: string, s: ProbeAccuracy['accuracy'][string], excess: boolean): string[] {
  const opt = (e: typeof s.placebo) => (e ? est(e, (x) => num(x)) : DASH);
  const t = s.sign_test;
  const d2 = (e: Estimate | undefined) => (e ? est(e, (x) => formatNumber(x)) : DASH);
  return [
    label,
    d2(s.lift),
    excess && s.lift_excess ? `${d2(s.lift_excess)}${s.lift_excess.over ? ` (over ${s.lift_excess.over})` : ''}` : excess ? DASH : '',
    opt(s.spearman_unbiased),
    opt(s.placebo),
    est(s.decisive_share, (x) => pct(x)),
    opt(s.kendall),
    t
      ? `${t.agree}/${t.units} (${t.p_clustered !== undefined && t.p_clustered !== null ? `p ${pText(t.p_clustered)} over ${t.prompts} prompts` : pText(t.p)})`
      : DASH,
    String(s.decisive_share.n),
  ];
}

/** `analyze --probe`: each probed step's credit accuracy against the Monte Carlo credit δ. */
export function probeSection(probes: readonly ProbeAccuracy[]): string[] {
  const out = ['## Credit accuracy against Monte Carlo values (credit-lens probe)'];
  if (!probes.length) return [...out, '_No step of this run has been probed: `credit-lens probe <run> --step N`._'];
  out.push(
    "_Per episode, against the probe's two independent halves of its continuations: lift, Σ p·δ̂ᴬ·δ̂ᴮ with p = |Â|/Σ|Â| minus uniform credit's (the δ² where the credit puts its weight, beyond uniform's: linear in the halves' products, so unbiased for its noise-free value at any M); lift over the best baseline, the lift minus the best trivial baseline's (A·(1 − π), A·H or A·position), episode by episode; rank (attenuated), the rank correlation of |Â| with δ̂ᴬ·δ̂ᴮ, which the noise pulls toward 0 by an amount that depends on where a credit puts its weight; placebo, the rank against |δ̂ᴬ − δ̂ᴮ|, pure estimation error. Also the decisive share (Σ|Â| on the top 10 % |δ̂| tokens), QVal's Kendall τ of the signed Â and δ̂, and the sign test over all units with the prompt as the unit (the exact binomial p, which counts tokens as independent, is in the JSON). Means over the episodes with A ≠ 0 (one set for every row), with 95 % intervals over prompts. Reliability: the halves' split-half correlation, and Spearman–Brown's value for all M, the ceiling of a rank score; the lift's ceiling is an oracle credit's lift, its weights from one half and its δ² from the other._",
  );
  for (const p of probes) {
    const rel = p.reliability;
    out.push(
      `### Step ${p.step}: ${p.episodes} episodes of ${p.prompts} prompts, ${p.rollouts} rollouts per position (${p.positions}); uniform credit's decisive share ${est(p.uniform_share, (x) => pct(x))}${p.uniform_delta2 ? `, its Σ δ²/n ${est(p.uniform_delta2, (x) => formatNumber(x))}` : ''}`,
      rel
        ? `Reliability of δ̂: split-half r ${num(rel.half)}, all M ${num(rel.full)} (${rel.units} units; ${rel.zero_share === null ? DASH : pct(rel.zero_share)} of δ̂ exactly 0).`
        : 'Reliability of δ̂: unknown (the probe kept no independent halves; probe again with --replace).',
      ...(p.ceiling
        ? [
            `Ceiling of the lift: an oracle credit weighing units by one half's |δ̂|, scored on the other half's unbiased δ² (cross-fitted) ${est(p.ceiling, (x) => formatNumber(x))}.`,
          ]
        : []),
      ...(p.warnings ?? []).map((w) => `> ${w}`),
      ...(p.cancellation
        ? [
            describeCancellation(
              p.cancellation,
              (e) => est(e, (x) => num(x)),
              (x) => pText(x),
            ),
          ]
        : []),
      table(
        ['Strategy', 'Lift', 'Lift over the best baseline', 'Rank (attenuated)', 'Placebo', 'Decisive share', 'Kendall τ', 'Sign agreement (p)', 'Episodes'],
        [
          ...Object.entries(p.accuracy).map(([name, s]) => accuracyRow(name === p.run_strategy ? `${name} (the run's)` : name, s, true)),
          ...Object.entries(p.baselines ?? {}).map(([name, s]) => accuracyRow(`baseline: ${name}`, s, false)),
        ],
      ),
    );
  }
  return out;
}

/** What c is in the tables: seed doc 002's A × log-prob, or the weighted Â × log-prob the strategy trained with. */
export function contributionText(kind: 'episode' | 'weighted'): string {
  return kind === 'episode'
    ? "c = A × log-prob, the episode's advantage (the GRPO credit-assignment analysis's contribution; --contribution weighted for Â × log-prob)"
    : "c = Â × log-prob, the strategy's weighted advantage (the logged contribution; the GRPO credit-assignment analysis's is A × log-prob)";
}
