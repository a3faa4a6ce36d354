// Search completions for a token string or a regular expression; each hit opens the episode at its token.
import { html, nothing, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import type { BrowseState } from '../state';

export function searchTab(s: BrowseState, a: BrowseActions, r: BrowseResult): TemplateResult {
  const hits = r.search?.hits ?? [];
  return html`<div class="toolbar">
      <label class="where"
        >Search completions
        <input
          id="search"
          type="text"
          spellcheck="false"
          placeholder="a token string or a regular expression (Enter)"
          .value=${s.query.search}
          @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && a.send({ search: (e.target as HTMLInputElement).value })}
      /></label>
      <vscode-checkbox ?checked=${s.query.regex} @change=${(e: Event) => a.send({ regex: (e.target as HTMLInputElement).checked })}
        >regular expression</vscode-checkbox
      >
      ${r.search ? html`<span class="count"><b>${r.search.total}</b> matches${r.search.total > hits.length ? ` (first ${hits.length})` : ''}</span>` : nothing}
    </div>
    <div class="hits">
      ${hits.map(
        (h) =>
          html`<div
            class="hit"
            role="button"
            tabindex="0"
            title="open the episode at this token"
            @click=${() => a.openAt(h.step, h.episode, h.position)}
            @keydown=${(e: KeyboardEvent) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), a.openAt(h.step, h.episode, h.position))}
          >
            <span class="muted">step ${h.step} · #${h.episode} · token ${h.position}</span>
            <code>${h.before.replace(/\n/g, '⏎')}<mark>${h.match}</mark>${h.after.replace(/\n/g, '⏎')}</code>
          </div>`,
      )}
    </div>`;
}
