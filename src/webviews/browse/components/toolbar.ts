// The filter, its quick picks and the result's count, the filter's error, and the tabs.
import { html, nothing, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import type { BrowseState } from '../state';
import { BROWSE_TABS } from '../../../protocol/browse_view';
import { formatCount } from '../../../protocol/number_format';
import { QUICK, TAB_TITLES } from '../columns';

export function toolbar(s: BrowseState, a: BrowseActions, r: BrowseResult | null): TemplateResult {
  return html`<div class="toolbar">
      <label class="where"
        >Filter
        <input
          id="where"
          type="text"
          spellcheck="false"
          placeholder="e.g. reward < 0.5 and status = wrong   (Enter applies)"
          .value=${s.query.where}
          @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && a.send({ where: (e.target as HTMLInputElement).value })}
      /></label>
      ${QUICK.map(
        ([label, expr]) =>
          html`<vscode-button secondary class="quick" @click=${() => a.send({ where: s.query.where.trim() ? `(${s.query.where}) and ${expr}` : expr })}
            >${label}</vscode-button
          >`,
      )}
      <vscode-button secondary @click=${() => a.send({ where: '' })}>clear</vscode-button>
      <span class="count"
        >${r ? html`<b>${formatCount(r.total)}</b> of ${formatCount(r.stats.episodes)} episodes · ${formatCount(r.stats.tokens)} tokens · ${formatCount(r.stats.queryMs)} ms` : nothing}</span
      >
    </div>
    ${r?.error ? html`<p class="error" role="alert">${r.error}</p>` : nothing}
    ${r ? html`<p class="hint muted">fields: ${r.fields.join(', ')}; and / or / not, ( ), a:b ranges (step in 10:50)</p>` : nothing}
    <div class="tabs" role="tablist">
      ${BROWSE_TABS.map(
        (t) =>
          html`<button
            role="tab"
            class="tab ${t === s.query.tab ? 'active' : ''}"
            aria-selected=${t === s.query.tab}
            data-tab=${t}
            @click=${() => a.send({ tab: t })}
          >
            ${TAB_TITLES[t]}
          </button>`,
      )}
    </div>`;
}
