// A group side by side: its prompt's completions at one step, painted by c_Â on one scale.
import { html, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import { num } from '../columns';
import { HEATMAP_HUES, rgba, tintRange } from '../../../protocol/heatmap_colors';
import { fmt } from '../../charts';

/**
 * A token's background on the group's shared diverging scale, in the editor heatmap's sense and palette: blue where the
 * update pushed the token up (c_Â = Â·ℓ < 0, since ℓ < 0), red where it pushed it down.
 */
function paint(c: number, scale: number): string {
  if (!scale || !c || !Number.isFinite(c)) return '';
  const dark = document.body.classList.contains('vscode-dark') || document.body.classList.contains('vscode-high-contrast');
  const [lo, hi] = tintRange(dark ? 'dark' : 'light');
  const hue = HEATMAP_HUES[c < 0 ? 'positive' : 'negative'][dark ? 'dark' : 'light'];
  return rgba(hue, Number((lo + Math.min(1, Math.abs(c) / scale) * (hi - lo)).toFixed(3)));
}

export function groupTab(a: BrowseActions, r: BrowseResult): TemplateResult {
  const g = r.group;
  if (!g) return html`<p class="muted">Choose "group" on an episode's row: its prompt's completions at that step, side by side.</p>`;
  return html`<p>Step ${g.step}, prompt #${g.prompt}: <code>${g.text.replace(/\n/g, '⏎')}</code></p>
    <p>${g.members.length} completions, painted by contribution c_Â = Â·ℓ on one scale.</p>
    <p class="key" aria-label="colour key">
      <span class="swatch" data-bg=${paint(-1, 1)}></span> blue = pushed up · <span class="swatch" data-bg=${paint(1, 1)}></span> red = pushed down · |c_Â| up
      to ${fmt(g.scale)} (p98; stronger tokens take the strongest colour) · the hover of an opened episode gives each value
    </p>
    <div class="group">
      ${g.members.map(
        (m) =>
          html`<div
            class="member"
            role="button"
            tabindex="0"
            title="open the painted episode"
            @click=${() => a.open(m.episode)}
            @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), a.open(m.episode))}
          >
            <div class="member-head">
              #${m.episode.episode} · reward ${num(m.episode.reward)} · A ${num(m.episode.advantage)} ·
              <span class="status ${m.episode.status}">${m.episode.status.replace('_', ' ')}</span>
            </div>
            <pre>${m.tokens.map((t) => html`<span data-bg=${paint(t.c, g.scale)}>${t.text}</span>`)}</pre>
          </div>`,
      )}
    </div>`;
}
