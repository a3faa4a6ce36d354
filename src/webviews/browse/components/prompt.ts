// One prompt over time: its completions at every step it was drawn, oldest first.
import { html, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import { num } from '../columns';

export function promptTab(a: BrowseActions, r: BrowseResult): TemplateResult {
  const p = r.prompt;
  if (!p) return html`<p class="muted">Choose "over time" on an episode's row: that prompt's completions at every step it was drawn, oldest first.</p>`;
  return html`<p>Prompt ${p.prompt}: <code>${p.text.replace(/\n/g, '⏎')}</code> — drawn at ${p.steps.length} step${p.steps.length === 1 ? '' : 's'}</p>
    ${p.steps.map(
      (s) =>
        html`<h3>step ${s.step}</h3>
          ${s.members.map(
            (e) =>
              html`<div
                class="over-time"
                role="button"
                tabindex="0"
                @click=${() => a.open(e)}
                @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), a.open(e))}
              >
                <span class="status ${e.status}">${e.status.replace('_', ' ')}</span> ${num(e.reward)} <span class="muted">#${e.episode}</span>
                <code>${e.snippet}</code>
              </div>`,
          )}`,
    )}`;
}
