// The episode table, drawn only where it is in view, with each row's links, the expanded episode's text and the exports.
import { html, nothing, type TemplateResult } from 'lit';
import type { BrowseResult } from '../../../protocol/browse_view';
import type { BrowseActions } from '../actions';
import type { BrowseState } from '../state';
import { nextSort, ROW_H } from '../state';
import { COLS, num } from '../columns';

export function episodesTab(s: BrowseState, a: BrowseActions, r: BrowseResult): TemplateResult {
  const n = r.episodes.length;
  const first = Math.max(0, Math.floor(s.scrollTop / ROW_H) - 10);
  const last = Math.min(n, first + 60);
  const sortKey = s.query.sort.replace(/^-/, '');
  return html`<div class="table-head">
      ${COLS.map(
        ([key, title]) =>
          html`<span
            class="cell ${key ? 'sortable' : ''}"
            data-col=${title}
            data-sort=${key}
            role=${key ? 'button' : nothing}
            tabindex=${key ? '0' : nothing}
            aria-sort=${sortKey === key || (key === 'advantage' && sortKey === 'abs_advantage') ? (s.query.sort.startsWith('-') ? 'descending' : 'ascending') : nothing}
            @click=${() => key && a.send({ sort: nextSort(s.query, key) })}
            @keydown=${(ev: KeyboardEvent) => key && (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), a.send({ sort: nextSort(s.query, key) }))}
            >${key === 'advantage' && sortKey === 'abs_advantage' ? 'A (by |A|)' : title}${sortKey === key || (key === 'advantage' && sortKey === 'abs_advantage') ? (s.query.sort.startsWith('-') ? ' ▼' : ' ▲') : ''}</span
          >`,
      )}<span class="cell links"></span><span class="cell grow">completion</span>
    </div>
    <div
      class="scroller"
      @scroll=${(e: Event) => {
        a.scrolled((e.target as HTMLElement).scrollTop);
      }}
    >
      <div class="spacer" data-height=${n * ROW_H}>
        ${r.episodes.slice(first, last).map(
          (e, k) =>
            html`<div
              class="row"
              role="button"
              tabindex="0"
              data-top=${(first + k) * ROW_H}
              data-step=${e.step}
              data-episode=${e.episode}
              title="open the painted episode"
              @click=${() => a.open(e)}
              @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), a.open(e))}
            >
              ${COLS.map(([, title, cell]) => html`<span class="cell" data-col=${title}>${cell(e)}</span>`)}
              <span class="cell links"
                ><a
                  href="#"
                  title="its group side by side"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), a.send({ tab: 'group', group: { step: e.step, prompt: e.prompt } }))}
                  >group</a
                >
                <a
                  href="#"
                  title="this prompt across steps"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), a.send({ tab: 'prompt', prompt: e.prompt }))}
                  >over time</a
                >
                <a
                  href="#"
                  class="show-text"
                  title="the whole prompt and completion, answer included, under the table"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), a.send({ expanded: { step: e.step, episode: e.episode } }))}
                  >text</a
                ></span
              ><span class="cell grow snippet">${e.snippet}</span>
            </div>`,
        )}
      </div>
    </div>
    ${r.total > n ? html`<p class="muted">showing the first ${n} of ${r.total}; narrow the filter or export them all</p>` : nothing} ${detailPane(a, r)}
    <div class="exports">
      <vscode-button secondary @click=${() => a.exportTable('episodes', 'csv')}>Export CSV</vscode-button>
      <vscode-button secondary @click=${() => a.exportTable('episodes', 'jsonl')}>Export JSONL</vscode-button>
    </div>`;
}

/** The expanded episode's whole prompt and completion (the table shows a line of each). */
function detailPane(a: BrowseActions, r: BrowseResult): TemplateResult | typeof nothing {
  const d = r.detail;
  if (!d) return nothing;
  const e = d.episode;
  return html`<section class="detail" aria-label="episode text">
    <header>
      <b>step ${e.step} · #${e.episode}</b>
      <span class="status ${e.status}">${e.status.replace('_', ' ')}</span>
      <span>reward ${num(e.reward)} · A ${num(e.advantage)} · ${e.length} tokens</span>
      <span class="actions">
        <vscode-button secondary title="open the painted episode in the editor" @click=${() => a.open(e)}>Open painted</vscode-button>
        <vscode-button secondary class="close-detail" title="hide the text" @click=${() => a.send({ expanded: null })}>Close</vscode-button>
      </span>
    </header>
    <h3>prompt ${e.prompt}</h3>
    <pre class="prompt-text">${d.prompt}</pre>
    <h3>completion</h3>
    <pre class="completion-text">${d.completion}</pre>
  </section>`;
}
