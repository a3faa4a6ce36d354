// The token aggregate: means with 95 % t intervals over the filtered episodes' tokens, by token, sortable.
import { html, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import type { BrowseState } from '../state';
import type { BrowseCi, BrowseQuery } from '../../../protocol/browse_view';
import { num, TOKEN_COLS } from '../columns';

const ci = (c: BrowseCi, d = 3) =>
  c.mean === null ? '—' : c.lo === null ? num(c.mean, d) : html`${num(c.mean, d)} <span class="muted">[${num(c.lo, d)}, ${num(c.hi, d)}]</span>`;

export function tokensTab(s: BrowseState, a: BrowseActions, r: BrowseResult): TemplateResult {
  const rows = r.tokens ?? [];
  const key = s.query.tokenSort.replace(/^-/, '');
  const select = (label: string, value: string, options: string[], set: (v: string) => Partial<BrowseQuery>) =>
    html`<label
      >${label}
      <select @change=${(e: Event) => a.send(set((e.target as HTMLSelectElement).value))}>
        ${options.map((o) => html`<option value=${o} ?selected=${o === value}>${o || 'all'}</option>`)}
      </select></label
    >`;
  return html`<div class="toolbar">
      ${select('token type', s.query.tokenType, ['', 'filler', 'reasoning'], (v) => ({ tokenType: v }))}
      ${select('section', s.query.section, ['', 'think', 'answer', 'other'], (v) => ({ section: v }))}
      <span class="muted">means over the filtered episodes' tokens, 95 % t intervals</span>
      <vscode-button secondary @click=${() => a.exportTable('tokens', 'csv')}>Export CSV</vscode-button>
    </div>
    <table class="tokens">
      <thead>
        <tr>
          <th>token</th>
          ${TOKEN_COLS.map(
            ([k, title, hint]) =>
              html`<th
                class="sortable"
                title=${hint}
                data-sort=${k}
                tabindex="0"
                aria-sort=${key === k ? (s.query.tokenSort.startsWith('-') ? 'descending' : 'ascending') : 'none'}
                @click=${() => a.send({ tokenSort: key === k && s.query.tokenSort.startsWith('-') ? k : `-${k}` })}
                @keydown=${(ev: KeyboardEvent) =>
                  (ev.key === 'Enter' || ev.key === ' ') &&
                  (ev.preventDefault(), a.send({ tokenSort: key === k && s.query.tokenSort.startsWith('-') ? k : `-${k}` }))}
              >
                ${title}${key === k ? (s.query.tokenSort.startsWith('-') ? ' ▼' : ' ▲') : ''}
              </th>`,
          )}
        </tr>
      </thead>
      <tbody>
        ${rows.slice(0, 500).map(
          (t) =>
            html`<tr>
              <td><code>${JSON.stringify(t.token)}</code></td>
              <td>${t.count}</td>
              <td>${ci(t.effective_advantage)}</td>
              <td>${ci(t.abs_contribution, 4)}</td>
              <td>${ci(t.entropy)}</td>
              <td>${ci(t.grad_norm, 4)}</td>
              <td>${ci(t.mc_delta)}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}
