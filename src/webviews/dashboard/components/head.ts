// The page's head: the title and its actions, the live badge, the comparison's run legend and paired test, and the
// chart view's controls (the SFT warm start, smoothing).
import { html, nothing, type TemplateResult } from 'lit';
import type { DashboardActions } from '../actions';
import { medianLatency, runColour, runLabel, runSummary, sftText, type DashboardState } from '../state';
import { comparisonSection } from './comparison';

function liveBadge(s: DashboardState): TemplateResult | typeof nothing {
  if (!s.runs.some((r) => r.data.status === 'running')) return nothing;
  const median = medianLatency(s);
  return html`<vscode-badge
    class="live"
    title="points arrive as the engine logs them; median latency from the engine's notification reaching the extension host to the point drawn"
    >live${median !== null ? html` · ${median} ms` : nothing}</vscode-badge
  >`;
}

function headerActions(s: DashboardState, a: DashboardActions): TemplateResult {
  const one = s.mode === 'dashboard' ? s.runs[0] : undefined;
  return html`<div class="actions">
    ${liveBadge(s)}
    ${
      one
        ? html` <vscode-button secondary title="Overlay this run's charts with other runs" @click=${() => a.compareWith([one.data.runDir])}
              >Compare with…</vscode-button
            >
            <vscode-button
              secondary
              title="the credit-assignment tables of this run: filler and reasoning credit, position bins, top tokens"
              @click=${() => a.openAnalysis(one.data.runDir)}
              >Credit analysis</vscode-button
            >`
        : nothing
    }
    ${
      s.mode === 'compare'
        ? html`<vscode-button secondary title="Add runs to this comparison" @click=${() => a.compareWith(s.runs.map((r) => r.data.runDir))}
            >Add runs…</vscode-button
          >`
        : nothing
    }
  </div>`;
}

function runLegend(s: DashboardState, a: DashboardActions): TemplateResult {
  return html`<ul class="run-legend" aria-label="runs">
    ${s.runs.map(
      (r, i) =>
        html`<li class="entry" data-run=${r.data.id} title=${r.data.runDir}>
          <span class="swatch" data-colour=${runColour(s, i)}></span>
          <a
            href="#"
            title="Open this run's dashboard"
            @click=${(e: Event) => {
              e.preventDefault();
              a.openRun(r.data.runDir);
            }}
            >${runLabel(s, r)}</a
          >
          ${runLabel(s, r) !== r.data.id ? html`<span class="muted">${r.data.id}</span>` : nothing}
          <span class="muted">${r.data.strategy ?? '?'} · ${r.data.status}${runSummary(r)}</span>
        </li>`,
    )}
  </ul>`;
}

function viewTools(s: DashboardState, a: DashboardActions): TemplateResult {
  const anySft = s.runs.some((r) => r.data.sftSteps > 0);
  const view = s.view;
  return html`<div class="view-tools" role="group" aria-label="chart view">
    ${
      anySft || s.runs.some((r) => r.points.has(0))
        ? html`<label title="the SFT warm start (x < 0, counted back from the eval before GRPO at 0) and that eval; off, the charts start at GRPO step 1"
            ><input
              type="checkbox"
              class="include-sft"
              .checked=${view.includeSft}
              @change=${(e: Event) => a.setView({ ...view, includeSft: (e.target as HTMLInputElement).checked })}
            />
            ${anySft ? html`Include SFT warm start${sftText(s)}` : 'Include the eval before GRPO'}</label
          >`
        : nothing
    }
    <label
      title="TensorBoard's smoothing: a debiased exponential moving average of each line, restarting at GRPO step 1; the logged values stay faintly behind, and CSV exports hold them"
      >Smoothing
      <input
        type="range"
        class="smoothing"
        min="0"
        max="0.99"
        step="0.01"
        aria-label="smoothing weight"
        .value=${String(view.smoothing)}
        @input=${(e: Event) => a.setView({ ...view, smoothing: Number((e.target as HTMLInputElement).value) })}
      />
      <output class="smoothing-value">${view.smoothing.toFixed(2)}</output></label
    >
  </div>`;
}

export function headView(s: DashboardState, a: DashboardActions): TemplateResult {
  const title = s.mode === 'compare' ? `Compare ${s.runs.length} runs` : s.runs[0] ? runLabel(s, s.runs[0]) : 'Run dashboard';
  const anySft = s.runs.some((r) => r.data.sftSteps > 0);
  return html` <header class="top">
      <div>
        <h1>${title}</h1>
        ${s.mode === 'dashboard' && s.runs[0] ? html`<p class="muted">${s.runs[0].data.strategy ?? '?'} · ${s.runs[0].data.runDir}</p>` : nothing}
      </div>
      ${headerActions(s, a)}
    </header>
    ${s.mode === 'compare' ? runLegend(s, a) : nothing} ${s.mode === 'compare' && s.comparison ? comparisonSection(s.comparison, a) : nothing}
    ${viewTools(s, a)}
    <p class="muted note">
      ${s.view.includeSft && anySft ? 'Shaded: the SFT warm start, drawn before GRPO step 0 (x < 0 counts SFT steps back from the eval before GRPO). ' : ''}Drag
      across a chart to zoom, double-click to reset; the cursor reads every chart at the same step.
    </p>`;
}
