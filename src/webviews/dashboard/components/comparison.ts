// The paired test of the compared configurations (seeds together) against the chosen baseline, at a step every run
// evaluated.
import { html, nothing, type TemplateResult } from 'lit';
import type { MetricsComparison } from '../../../protocol/metrics_view';
import { comparisonTable } from '../../compare_table';
import type { DashboardActions } from '../actions';

const stepName = (s: number) => (s === 0 ? 'step 0 (the warm starts)' : `GRPO step ${s}`);

/** The step picker: each run's last eval, or any step all of them evaluated. */
function stepPicker(c: MetricsComparison, actions: DashboardActions): TemplateResult {
  const at = c.report?.rows[0]?.step ?? c.step;
  if (c.steps.length <= 1) return html`<span class="step">${at !== null && at !== undefined ? stepName(at) : 'the last eval'}</span>`;
  return html`<select
    aria-label="step"
    class="step-picker"
    title="the GRPO step every run's eval is read at: each run's last eval, or any step all of them evaluated"
    @change=${(e: Event) => {
      const v = (e.target as HTMLSelectElement).value;
      actions.setStep(v === 'last' ? null : Number(v));
    }}
  >
    <option value="last" ?selected=${c.step === null}>
      ${c.step === null && at !== null && at !== undefined ? `${stepName(at)}, the latest all evaluated` : 'the latest step all evaluated'}
    </option>
    ${[...c.steps]
      .reverse()
      // the step the first option already names is not offered twice
      .filter((s) => c.step !== null || s !== at)
      .map((s) => html`<option value=${String(s)} ?selected=${c.step === s}>${stepName(s)}</option>`)}
  </select>`;
}

function baselinePicker(c: MetricsComparison, actions: DashboardActions): TemplateResult {
  if (c.groups.length <= 1) return html`${c.baseline ?? 'a baseline'}`;
  return html`<select
    aria-label="baseline"
    title="the configuration every other one is tested against"
    @change=${(e: Event) => actions.setBaseline((e.target as HTMLSelectElement).value)}
  >
    ${c.groups.map((g) => html`<option value=${g} ?selected=${g === c.baseline}>${g}</option>`)}
  </select>`;
}

export function comparisonSection(c: MetricsComparison, actions: DashboardActions): TemplateResult {
  return html`<section class="significance" aria-label="paired test">
    <h2>Eval success at ${stepPicker(c, actions)} against ${baselinePicker(c, actions)}, on the same eval instances</h2>
    ${c.report ? comparisonTable(c.report, { onOpen: (runDir) => actions.openRun(runDir) }) : nothing}
    ${c.note ? html`<p class="muted comparison-status">${c.note}</p>` : nothing}
  </section>`;
}
