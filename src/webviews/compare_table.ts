// The comparison of seeded run groups against a baseline (`credit-lens compare`, DESIGN §10), as the sweep summary and
// Compare Runs show it: eval success as mean ± 95 % CI over seeds, the difference with its interval over instances, the
// Holm-adjusted p of the instance-clustered test, the MDE, and seed doc 002's filler / reasoning |c| with their intervals.
// Rows keep the order they were given (the baseline first): nothing is ranked, a difference that is not significant is
// greyed and marked n.s., and a group with fewer than 3 seeds or an unfinished run is marked exploratory.
import { html, nothing, type TemplateResult } from 'lit';
import type { CompareReport, CompareRow } from '../protocol/compare';
import { diffCell, diffSeedsCell, intervalCell, mdeCell, pCell, pct, sig } from './compare_cells';
import { pText } from '../protocol/compare';
import { adoptCss } from './ipc';
import css from './compare_table.css';

adoptCss(css);

function rowTitle(r: CompareRow, report: CompareReport): string {
  const mark = r.exploratory ? ' Exploratory: fewer than 3 seeds or a run that did not complete; a hint, not a finding.' : '';
  if (r.baseline) return `${r.group}: the baseline (${r.runs.length} run${r.runs.length === 1 ? '' : 's'}).${mark}`;
  const t = r.test!;
  return (
    `${r.group} vs ${report.baseline}: ${t.instances} instances × ${r.runs.length} seed${r.runs.length === 1 ? '' : 's'}; only the baseline solved ${t.b}, only this group ${t.c} (seed, instance) pairs. ` +
    `Exact sign-flip test over instances p = ${pText(t.p)}, Holm-adjusted over ${report.adjustment.family} row${report.adjustment.family === 1 ? '' : 's'}: ${pText(r.p_adjusted!)}. ` +
    (r.significant ? `p_adj < ${report.alpha}: a difference.` : `p_adj ≥ ${report.alpha}: within noise, not a difference.`) +
    (r.mde !== null ? ` This design detects a true difference of ${(100 * r.mde).toFixed(1)} points with 80 % power.` : '') +
    mark
  );
}

export function comparisonTable(report: CompareReport, opts: { onOpen?: (runDir: string) => void } = {}): TemplateResult {
  const seeds = Math.min(...report.rows.map((r) => r.runs.length));
  return html` <table class="comparison" aria-label="comparison with ${report.baseline}">
      <thead>
        <tr>
          <th title="strategy and its headline parameter (run group)">Configuration</th>
          <th class="num" title="runs (seeds) in the group">Seeds</th>
          <th class="num" title="eval success on the ${report.split} split: mean over seeds ± the 95 % t half-width">Eval success %</th>
          <th class="num" title="cluster bootstrap 95 % interval over instances (each with all its seeds), in points">Δ vs baseline</th>
          <th
            class="num"
            title="exact sign-flip test over instances, Holm-adjusted over the ${report.adjustment.family} rows compared; n.s. when p_adj ≥ ${report.alpha}"
          >
            p_adj
          </th>
          <th class="num" title="minimum detectable effect: the smallest true difference this design detects with 80 % power">MDE</th>
          <th
            class="num"
            title="the difference from the same seed's baseline run, mean [95 % t interval over seeds]: counts how much the seeds disagree, which pooling instances does not"
          >
            Δ over seeds
          </th>
          <th
            class="num"
            title="seed doc 002: mean |c| of filler tokens, c = A·ℓ (the episode’s advantage times the log-prob), mean ± 95 % t half-width over seeds"
          >
            Filler |c|
          </th>
          <th class="num" title="seed doc 002: mean |c| of reasoning tokens, c = A·ℓ">Reasoning |c|</th>
          <th class="num" title="filler |c| ÷ reasoning |c| per run, over seeds">Filler ÷ reas.</th>
        </tr>
      </thead>
      <tbody>
        ${report.rows.map(
          (r) =>
            html`<tr
              class="${r.baseline ? 'baseline' : r.significant ? 'significant' : 'ns'}${r.exploratory ? ' exploratory' : ''}"
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
              <td class="num">${r.seeds.map((s) => s ?? '?').join(', ')}</td>
              <td class="num">${intervalCell(r.eval_success, pct)}</td>
              <td class="num diff">${diffCell(r)}</td>
              <td class="num p">${pCell(r)}</td>
              <td class="num mde">${mdeCell(r)}</td>
              <td class="num diff-seeds">${diffSeedsCell(r)}</td>
              <td class="num">${intervalCell(r.filler_abs_c, sig)}</td>
              <td class="num">${intervalCell(r.reasoning_abs_c, sig)}</td>
              <td class="num">${intervalCell(r.filler_reasoning_ratio, sig)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <p class="muted compare-note">
      ${report.rows[0]?.instances ?? 0} ${report.split} instances per run at step ${report.rows[0]?.step ?? '?'}, paired across runs with the instance as the
      unit. Intervals are 95 %: t over seeds, cluster bootstrap over instances for Δ. p_adj: Holm over the ${report.adjustment.family} rows compared;
      significant when p_adj &lt; ${report.alpha}. Δ over seeds is information, not a second gate. Rows are not ranked; greyed rows (n.s.) are within noise of
      ${report.baseline}. ${seeds < 3 ? html`<strong>Fewer than 3 seeds in a group: exploratory rows are hints, not findings.</strong>` : nothing}
      ${report.notes.map((n) => html`<br />${n}`)}
    </p>`;
}
