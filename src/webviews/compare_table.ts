// The comparison of seeded run groups against a baseline (`credit-lens compare`, DESIGN §10), as the sweep summary and
// Compare Runs show it: eval success as mean ± 95 % CI over seeds, the paired difference with its interval and
// McNemar's p, and seed doc 002's filler / reasoning |c| with their intervals. Rows keep the order they were given (the
// baseline first): nothing is ranked, and a difference that is not significant is greyed and marked n.s.
import { html, nothing, type TemplateResult } from 'lit';
import type { CompareReport, CompareRow } from '../protocol/compare';
import { diffCell, diffSeedsCell, intervalCell, pCell, pct, sig } from './compare_cells';
import { adoptCss } from './ipc';
import css from './compare_table.css';

adoptCss(css);

function rowTitle(r: CompareRow, report: CompareReport): string {
  if (r.baseline) return `${r.group}: the baseline (${r.runs.length} run${r.runs.length === 1 ? '' : 's'})`;
  const m = r.mcnemar!;
  return (
    `${r.group} vs ${report.baseline}: ${m.pairs} (seed, instance) pairs; only the baseline solved ${m.b}, only this group solved ${m.c}. ` +
    (r.significant ? `McNemar p < ${report.alpha}: a difference.` : `McNemar p ≥ ${report.alpha}: within noise, not a difference.`)
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
          <th class="num" title="paired bootstrap 95 % interval over instances pooled over seeds, in points">Δ vs baseline</th>
          <th class="num" title="McNemar's exact test on per-(seed, instance) success; n.s. when p ≥ ${report.alpha}">p</th>
          <th
            class="num"
            title="the difference from the same seed's baseline run, mean [95 % t interval over seeds]: counts how much the seeds disagree, which pooling instances does not"
          >
            Δ over seeds
          </th>
          <th class="num" title="seed doc 002: mean |contribution| of filler tokens, mean ± 95 % t half-width over seeds">Filler |c|</th>
          <th class="num" title="seed doc 002: mean |contribution| of reasoning tokens">Reasoning |c|</th>
          <th class="num" title="filler |c| ÷ reasoning |c| per run, over seeds">Filler ÷ reas.</th>
        </tr>
      </thead>
      <tbody>
        ${report.rows.map(
          (r) =>
            html`<tr class=${r.baseline ? 'baseline' : r.significant ? 'significant' : 'ns'} data-group=${r.group} title=${rowTitle(r, report)}>
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
                }<br /><span class="muted">${r.group}</span>
              </td>
              <td class="num">${r.seeds.map((s) => s ?? '?').join(', ')}</td>
              <td class="num">${intervalCell(r.eval_success, pct)}</td>
              <td class="num diff">${diffCell(r)}</td>
              <td class="num p">${pCell(r)}</td>
              <td class="num diff-seeds">${diffSeedsCell(r)}</td>
              <td class="num">${intervalCell(r.filler_abs_c, sig)}</td>
              <td class="num">${intervalCell(r.reasoning_abs_c, sig)}</td>
              <td class="num">${intervalCell(r.filler_reasoning_ratio, sig)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <p class="muted compare-note">
      ${report.rows[0]?.instances ?? 0} ${report.split} instances per run, paired across runs. Intervals are 95 %: t over seeds, bootstrap over instances for Δ,
      t over seeds for Δ over seeds. Rows are not ranked; greyed rows (n.s.) are within noise of ${report.baseline}.
      ${seeds < 3 ? html`<strong>Fewer than 3 seeds in a group: its interval means little.</strong>` : nothing} ${report.notes.map((n) => html`<br />${n}`)}
    </p>`;
}
