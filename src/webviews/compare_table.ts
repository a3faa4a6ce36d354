// The comparison of seeded run groups against a baseline (`credit-lens compare`, design.md#statistics), as the sweep summary and
// Compare Runs show it: eval success as mean ± 95 % CI over seeds, the difference with its interval over instances, the
// Holm-adjusted p of the instance-clustered test, the MDE, and seed doc 002's filler / reasoning |c| with their intervals.
// Rows keep the order they were given (the baseline first): nothing is ranked, a difference that is not significant is
// greyed and marked n.s., and a group with fewer than 3 seeds or an unfinished run is marked exploratory.
import { html, nothing, type TemplateResult } from 'lit';
import type { CompareReport, CompareRow } from '../protocol/compare';
import { conditionalCell, diffCell, intervalCell, mdeCell, pCell, pct, seedsNeededCell, sig } from './compare_cells';
import { byStartText, ONE_START_NOTE, pText, seedsNeededText, seedsText } from '../protocol/compare';
import { adoptCss } from './ipc';
import css from './compare_table.css';

adoptCss(css);

function rowTitle(r: CompareRow, report: CompareReport): string {
  const mark = r.exploratory ? ' Exploratory: fewer than 3 seeds or a run that did not complete; a hint, not a finding.' : '';
  if (r.baseline) return `${r.group}: the baseline (${r.runs.length} run${r.runs.length === 1 ? '' : 's'}).${mark}`;
  const t = r.run_test;
  const c = r.conditional;
  const cond = c
    ? ` Conditional on these checkpoints (instances as the only noise): exact sign-flip test p = ${pText(c.p)}; only the baseline solved ${c.b}, only this group ${c.c} (run pair, instance) outcomes.`
    : '';
  const unit =
    t?.method === 'over warm starts'
      ? `over ${t.starts} warm starts, the start as the unit (${t.runs} against ${t.runs_baseline} runs, ${t.instances} instances)`
      : `the training run as the unit, ${t?.runs} against ${t?.runs_baseline} runs, ${t?.instances} instances`;
  const from = r.warm_start
    ? ` Every run began GRPO from the warm start ${r.warm_start}: the verdict is about that start.`
    : t?.by_start
      ? ` Δ by warm start: ${byStartText(t)}.`
      : '';
  const gate = t
    ? `Run-level test (${unit}): t with ${t.df.toFixed(1)} df, p = ${pText(t.p)}, Holm-adjusted over ${report.adjustment.family} row${report.adjustment.family === 1 ? '' : 's'}: ${pText(r.p_adjusted!)}. ` +
      (r.significant
        ? `p_adj < ${report.alpha}: a difference between the methods.`
        : `p_adj ≥ ${report.alpha}: within the noise of runs and instances, not a difference.`)
    : `No verdict: ${r.verdict_withheld ?? 'no run-level test'}.`;
  const needed = r.seeds_needed ? ` To detect ${seedsNeededText(r.seeds_needed)}.` : '';
  return (
    `${r.group} vs ${report.baseline}: ${gate}${from}` +
    (r.mde !== null ? ` This design detects a true difference of ${(100 * r.mde).toFixed(1)} points with 80 % power.` : '') +
    needed +
    cond +
    mark
  );
}

export function comparisonTable(report: CompareReport, opts: { onOpen?: (runDir: string) => void } = {}): TemplateResult {
  // the table scrolls sideways inside its own box, its first column pinned: at 1440 px with the side bar open the
  // right-hand columns were cut off
  return html` <div class="comparison-scroll">
      <table class="comparison" aria-label="comparison with ${report.baseline}">
        <thead>
          <tr>
            <th title="strategy and its headline parameter (run group)">Configuration</th>
            <th class="num" title="runs (seeds) in the group">Seeds</th>
            <th class="num" title="eval success on the ${report.split} split: mean over seeds ± the 95 % t half-width">Eval success %</th>
            <th class="num" title="the run-level difference of mean success over the runs, with its 95 % t interval (seeds and instances as noise), in points">
              Δ vs baseline
            </th>
            <th
              class="num"
              title="the run-level test (the training run as the unit), Holm-adjusted over the ${report.adjustment.family} rows tested; n.s. when p_adj ≥ ${report.alpha}; no verdict with fewer than 3 runs a side"
            >
              p_adj
            </th>
            <th class="num" title="minimum detectable effect of the run-level test: the smallest true difference it detects with 80 % power">MDE</th>
            <th class="num" title="seeds per side the run-level test needs to detect --power-for's difference, or else the observed one, with 80 % power">
              Seeds needed
            </th>
            <th
              class="num"
              title="conditional on these checkpoints: cluster bootstrap interval over instances and the exact sign-flip test's p; whether these trained policies differ on these instances, not whether the method trains better ones"
            >
              These checkpoints
            </th>
            <th
              class="num"
              title="the credit-assignment analysis: mean |c_A| of filler tokens, c_A = A·ℓ (the episode’s advantage times the log-prob; the heatmap’s c_Â uses the strategy’s Â), mean ± 95 % t half-width over seeds"
            >
              Filler |c|
            </th>
            <th class="num" title="the credit-assignment analysis: mean |c_A| of reasoning tokens, c_A = A·ℓ">Reasoning |c|</th>
            <th class="num" title="filler |c| ÷ reasoning |c| per run, over seeds">Filler ÷ reas.</th>
          </tr>
        </thead>
        <tbody>
          ${report.rows.map(
            (r) =>
              html`<tr
                class="${r.baseline ? 'baseline' : r.significant ? 'significant' : r.verdict_withheld ? 'ns withheld' : 'ns'}${r.exploratory ? ' exploratory' : ''}"
                data-group=${r.group}
                title=${rowTitle(r, report)}
              >
                <td>
                  ${r.label !== '—' ? r.label : r.group}${
                    opts.onOpen
                      ? html` <a
                          href="#"
                          class="open-group"
                          title="open this group's first run"
                          @click=${(e: Event) => {
                            e.preventDefault();
                            opts.onOpen!(r.runs[0]);
                          }}
                          >open</a
                        >`
                      : nothing
                  }<br /><span class="muted">${r.group}</span>${r.exploratory ? html` <span class="exploratory-tag">exploratory</span>` : nothing}
                </td>
                <td class="num">${seedsText(r.seeds, r.starts)}</td>
                <td class="num">${intervalCell(r.eval_success, pct)}</td>
                <td class="num diff">${diffCell(r)}</td>
                <td class="num p">${pCell(r)}</td>
                <td class="num mde">${mdeCell(r)}</td>
                <td class="num seeds-needed">${seedsNeededCell(r)}</td>
                <td class="num conditional">${conditionalCell(r)}</td>
                <td class="num">${intervalCell(r.filler_abs_c, sig)}</td>
                <td class="num">${intervalCell(r.reasoning_abs_c, sig)}</td>
                <td class="num">${intervalCell(r.filler_reasoning_ratio, sig)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${comparisonNote(report)}`;
}

/** Under the table: which warm start every verdict is about (said once; the cells keep the p alone), and how it was tested. */
function comparisonNote(report: CompareReport): TemplateResult {
  const seeds = Math.min(...report.rows.map((r) => r.runs.length));
  const tested = report.rows.filter((r) => !r.baseline);
  const fromStart = tested.length && tested.every((r) => r.warm_start && r.warm_start === tested[0].warm_start) ? tested[0].warm_start : null;
  const overStarts = tested.find((r) => r.run_test?.method === 'over warm starts')?.run_test?.starts ?? null;
  return html`${fromStart ? html`<p class="from-start"><strong>Every verdict here is from warm start ${fromStart}</strong>: about that SFT start, not the method in general (sweep.warm_starts trains several).</p>` : nothing}
    <p class="muted compare-note">
      ${report.rows[0]?.instances ?? 0} ${report.split} instances per run at step ${report.rows[0]?.step ?? '?'}.
      ${
        overStarts
          ? `The verdict has the warm start as its unit (${overStarts} shared starts, each with runs of every row): Δ and p_adj come from a t test over the starts, whose noise is how the difference moves from start to start plus the instances`
          : 'The verdict has the training run as its unit: Δ and p_adj come from a two-way t test whose noise is the run-to-run variance over seeds plus the instances'
      }
      (${report.adjustment.family > 0 ? `Holm over the ${report.adjustment.family} row${report.adjustment.family === 1 ? '' : 's'} tested; ` : 'no row has the runs to be tested; '}significant
      when p_adj &lt; ${report.alpha}); with fewer than 3 runs a side there is no verdict (with one, only the seeds needed). "These checkpoints" is the
      instance-clustered test, conditional on the trained runs: information, not the gate. Rows are not ranked; greyed rows (n.s.) are within noise of
      ${report.baseline}. ${seeds < 3 ? html`<strong>Fewer than 3 seeds in a group: exploratory rows are hints, not findings.</strong>` : nothing}
      ${report.notes.filter((n) => !fromStart || n !== ONE_START_NOTE(fromStart)).map((n) => html`<br />${n}`)}
    </p>`;
}
