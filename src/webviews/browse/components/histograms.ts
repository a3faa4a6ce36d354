// Histograms of the filtered episodes' columns, and the effective groups per step.
import { html, nothing, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import type { BrowseState } from '../state';
import { drawBars, fmt, readTheme } from '../../charts';

export function histogramsTab(s: BrowseState, a: BrowseActions, r: BrowseResult): TemplateResult {
  return html`<div class="toolbar histogram-tools">
      <vscode-checkbox class="hist-zero" ?checked=${s.query.histZeroA} @change=${(e: Event) => a.send({ histZeroA: (e.target as HTMLInputElement).checked })}
        >include A = 0 (groups whose rewards are all equal: no gradient)</vscode-checkbox
      >
      <vscode-checkbox class="hist-log" ?checked=${s.query.histLogY} @change=${(e: Event) => a.send({ histLogY: (e.target as HTMLInputElement).checked })}
        >log count axis</vscode-checkbox
      >
    </div>
    <div class="histograms">
      ${(r.histograms ?? []).map(
        (h) =>
          html`<figure>
            <figcaption>
              ${h.name} <span class="muted">${h.counts.reduce((a, b) => a + b, 0).toLocaleString('en-US')} values in [${fmt(h.lo)}, ${fmt(h.hi)})</span>
            </figcaption>
            <canvas data-hist=${h.name}></canvas>
          </figure>`,
      )}
      ${
        r.steps?.length
          ? html`<figure>
              <figcaption>effective groups per step <span class="muted">(the share whose rewards are not all equal: the ones with a signal)</span></figcaption>
              <canvas data-steps="effective"></canvas>
            </figure>`
          : nothing
      }
    </div>`;
}

/** The histograms' bars, drawn on their canvases once the tab is rendered. */
export function drawHistograms(root: HTMLElement, s: BrowseState, r: BrowseResult): void {
  const theme = readTheme();
  for (const h of r.histograms ?? []) {
    const canvas = root.querySelector<HTMLCanvasElement>(`canvas[data-hist="${CSS.escape(h.name)}"]`);
    if (!canvas) continue;
    drawBars(
      canvas,
      h.counts.map((c) => ({ label: '', value: c })),
      theme,
      theme.palette[0],
      { logY: s.query.histLogY, axis: { lo: h.lo, hi: h.hi } },
    );
  }
  const steps = root.querySelector<HTMLCanvasElement>('canvas[data-steps="effective"]');
  const every = Math.max(1, Math.ceil((r.steps?.length ?? 0) / 10));
  if (steps && r.steps)
    drawBars(
      steps,
      r.steps.map((st, i) => ({ label: i % every === 0 ? String(st.step) : '', value: st.effective_groups })),
      theme,
      theme.palette[2],
    );
}
