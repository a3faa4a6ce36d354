// Browse Rollouts: a run's episodes filtered, searched, grouped and aggregated. The queries run in the
// extension host's query worker (src/engine/query/); this page sends the query (kept in its state, so a reload keeps
// every filter, tab and sort) and draws the answer. The episode table renders only the rows in view.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-checkbox/index.js';
import '@vscode-elements/elements/dist/vscode-progress-bar/index.js';
import { html, nothing, render, type TemplateResult } from 'lit';
import { HEATMAP_HUES, rgba, tintRange } from '../protocol/heatmap_colors';
import {
  BROWSE_TABS,
  browseChecks,
  DEFAULT_QUERY,
  type BrowseCi,
  type BrowseEpisode,
  type BrowseProtocol,
  type BrowseQuery,
  type BrowseResult,
} from '../protocol/browse_view';
import { drawBars, fmt, readTheme } from './charts';
import { adoptCss, connect } from './ipc';
import css from './browse.css';
import baseCss from './base.css';
import { formatCount, formatFixed } from '../protocol/number_format';
import { COLS, QUICK, TAB_TITLES, TOKEN_COLS } from './browse_columns';

adoptCss(baseCss);
adoptCss(css);
const host = connect<BrowseProtocol>(browseChecks);
const root = document.getElementById('root')!;
const saved = host.getState();
const runDir = saved?.runDir ?? '';
let query: BrowseQuery = (({ runDir: _, ...q }) => ({ ...DEFAULT_QUERY, ...q }))(saved ?? { runDir: '', ...DEFAULT_QUERY });
let result: BrowseResult | null = null;
let busy = true;
let scrollTop = 0;

const ROW_H = 24;
function send(q: Partial<BrowseQuery>): void {
  query = { ...query, ...q };
  if (result) host.setState({ runDir: result.runDir, ...query });
  busy = true;
  draw();
  host.post({ kind: 'command', method: 'browse/query', params: query });
}

const num = (v: number | null, d = 3) => formatFixed(v, d);
const ci = (c: BrowseCi, d = 3) =>
  c.mean === null ? '—' : c.lo === null ? num(c.mean, d) : html`${num(c.mean, d)} <span class="muted">[${num(c.lo, d)}, ${num(c.hi, d)}]</span>`;
const open = (e: BrowseEpisode, position: number | null = null) =>
  host.post({ kind: 'command', method: 'browse/openEpisode', params: { step: e.step, episode: e.episode, position } });

function toolbar(r: BrowseResult | null): TemplateResult {
  return html`<div class="toolbar">
      <label class="where"
        >Filter
        <input
          id="where"
          type="text"
          spellcheck="false"
          placeholder="e.g. reward < 0.5 and status = wrong   (Enter applies)"
          .value=${query.where}
          @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && send({ where: (e.target as HTMLInputElement).value })}
      /></label>
      ${QUICK.map(
        ([label, expr]) =>
          html`<vscode-button secondary class="quick" @click=${() => send({ where: query.where.trim() ? `(${query.where}) and ${expr}` : expr })}
            >${label}</vscode-button
          >`,
      )}
      <vscode-button secondary @click=${() => send({ where: '' })}>clear</vscode-button>
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
            class="tab ${t === query.tab ? 'active' : ''}"
            aria-selected=${t === query.tab}
            data-tab=${t}
            @click=${() => send({ tab: t })}
          >
            ${TAB_TITLES[t]}
          </button>`,
      )}
    </div>`;
}

/**
 * The sort after a click on a column's header: ascending, then descending. The A column also sorts by |A| (the
 * default: the episodes the update moved most first), so it goes |A| ▼ → A ▲ → A ▼ → |A| ▼.
 */
function nextSort(key: string): string {
  const s = query.sort;
  if (key === 'advantage') return s === '-abs_advantage' ? 'advantage' : s === 'advantage' ? '-advantage' : '-abs_advantage';
  return s === key ? `-${key}` : key;
}

function episodesTab(r: BrowseResult): TemplateResult {
  const n = r.episodes.length;
  const first = Math.max(0, Math.floor(scrollTop / ROW_H) - 10);
  const last = Math.min(n, first + 60);
  const sortKey = query.sort.replace(/^-/, '');
  return html`<div class="table-head">
      ${COLS.map(
        ([key, title]) =>
          html`<span
            class="cell ${key ? 'sortable' : ''}"
            data-col=${title}
            data-sort=${key}
            role=${key ? 'button' : nothing}
            tabindex=${key ? '0' : nothing}
            aria-sort=${sortKey === key || (key === 'advantage' && sortKey === 'abs_advantage') ? (query.sort.startsWith('-') ? 'descending' : 'ascending') : nothing}
            @click=${() => key && send({ sort: nextSort(key) })}
            @keydown=${(ev: KeyboardEvent) => key && (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), send({ sort: nextSort(key) }))}
            >${key === 'advantage' && sortKey === 'abs_advantage' ? '|A|' : title}${sortKey === key || (key === 'advantage' && sortKey === 'abs_advantage') ? (query.sort.startsWith('-') ? ' ▼' : ' ▲') : ''}</span
          >`,
      )}<span class="cell links"></span><span class="cell grow">completion</span>
    </div>
    <div
      class="scroller"
      @scroll=${(e: Event) => {
        scrollTop = (e.target as HTMLElement).scrollTop;
        draw();
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
              title="open the painted episode"
              @click=${() => open(e)}
              @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), open(e))}
            >
              ${COLS.map(([, title, cell]) => html`<span class="cell" data-col=${title}>${cell(e)}</span>`)}
              <span class="cell links"
                ><a
                  href="#"
                  title="its group side by side"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), send({ tab: 'group', group: { step: e.step, prompt: e.prompt } }))}
                  >group</a
                >
                <a
                  href="#"
                  title="this prompt across steps"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), send({ tab: 'prompt', prompt: e.prompt }))}
                  >over time</a
                >
                <a
                  href="#"
                  class="show-text"
                  title="the whole prompt and completion, answer included, under the table"
                  @click=${(ev: Event) => (ev.preventDefault(), ev.stopPropagation(), send({ expanded: { step: e.step, episode: e.episode } }))}
                  >text</a
                ></span
              ><span class="cell grow snippet">${e.snippet}</span>
            </div>`,
        )}
      </div>
    </div>
    ${r.total > n ? html`<p class="muted">showing the first ${n} of ${r.total}; narrow the filter or export them all</p>` : nothing} ${detailPane(r)}
    <div class="exports">
      <vscode-button secondary @click=${() => host.post({ kind: 'command', method: 'browse/export', params: { what: 'episodes', format: 'csv', query } })}
        >Export CSV</vscode-button
      >
      <vscode-button secondary @click=${() => host.post({ kind: 'command', method: 'browse/export', params: { what: 'episodes', format: 'jsonl', query } })}
        >Export JSONL</vscode-button
      >
    </div>`;
}

/** The expanded episode's whole prompt and completion (the table shows a line of each). */
function detailPane(r: BrowseResult): TemplateResult | typeof nothing {
  const d = r.detail;
  if (!d) return nothing;
  const e = d.episode;
  return html`<section class="detail" aria-label="episode text">
    <header>
      <b>step ${e.step} · #${e.episode}</b>
      <span class="status ${e.status}">${e.status.replace('_', ' ')}</span>
      <span>reward ${num(e.reward)} · A ${num(e.advantage)} · ${e.length} tokens</span>
      <span class="actions">
        <vscode-button secondary title="open the painted episode in the editor" @click=${() => open(e)}>Open painted</vscode-button>
        <vscode-button secondary class="close-detail" title="hide the text" @click=${() => send({ expanded: null })}>Close</vscode-button>
      </span>
    </header>
    <h3>prompt ${e.prompt}</h3>
    <pre class="prompt-text">${d.prompt}</pre>
    <h3>completion</h3>
    <pre class="completion-text">${d.completion}</pre>
  </section>`;
}

function searchTab(r: BrowseResult): TemplateResult {
  const hits = r.search?.hits ?? [];
  return html`<div class="toolbar">
      <label class="where"
        >Search completions
        <input
          id="search"
          type="text"
          spellcheck="false"
          placeholder="a token string or a regular expression (Enter)"
          .value=${query.search}
          @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && send({ search: (e.target as HTMLInputElement).value })}
      /></label>
      <vscode-checkbox ?checked=${query.regex} @change=${(e: Event) => send({ regex: (e.target as HTMLInputElement).checked })}
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
            @click=${() => host.post({ kind: 'command', method: 'browse/openEpisode', params: { step: h.step, episode: h.episode, position: h.position } })}
            @keydown=${(e: KeyboardEvent) =>
              (e.key === 'Enter' || e.key === ' ') &&
              (e.preventDefault(),
              host.post({ kind: 'command', method: 'browse/openEpisode', params: { step: h.step, episode: h.episode, position: h.position } }))}
          >
            <span class="muted">step ${h.step} · #${h.episode} · token ${h.position}</span>
            <code>${h.before.replace(/\n/g, '⏎')}<mark>${h.match}</mark>${h.after.replace(/\n/g, '⏎')}</code>
          </div>`,
      )}
    </div>`;
}

function tokensTab(r: BrowseResult): TemplateResult {
  const rows = r.tokens ?? [];
  const key = query.tokenSort.replace(/^-/, '');
  const select = (label: string, value: string, options: string[], set: (v: string) => Partial<BrowseQuery>) =>
    html`<label
      >${label}
      <select @change=${(e: Event) => send(set((e.target as HTMLSelectElement).value))}>
        ${options.map((o) => html`<option value=${o} ?selected=${o === value}>${o || 'all'}</option>`)}
      </select></label
    >`;
  return html`<div class="toolbar">
      ${select('token type', query.tokenType, ['', 'filler', 'reasoning'], (v) => ({ tokenType: v }))}
      ${select('section', query.section, ['', 'think', 'answer', 'other'], (v) => ({ section: v }))}
      <span class="muted">means over the filtered episodes' tokens, 95 % t intervals</span>
      <vscode-button secondary @click=${() => host.post({ kind: 'command', method: 'browse/export', params: { what: 'tokens', format: 'csv', query } })}
        >Export CSV</vscode-button
      >
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
                aria-sort=${key === k ? (query.tokenSort.startsWith('-') ? 'descending' : 'ascending') : 'none'}
                @click=${() => send({ tokenSort: key === k && query.tokenSort.startsWith('-') ? k : `-${k}` })}
                @keydown=${(ev: KeyboardEvent) =>
                  (ev.key === 'Enter' || ev.key === ' ') &&
                  (ev.preventDefault(), send({ tokenSort: key === k && query.tokenSort.startsWith('-') ? k : `-${k}` }))}
              >
                ${title}${key === k ? (query.tokenSort.startsWith('-') ? ' ▼' : ' ▲') : ''}
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

/**
 * Positions and colours go through the CSSOM after each render: the page's CSP refuses style attributes (lit's styleMap
 * writes one on first render), and element.style is allowed.
 */
function applyStyles(): void {
  for (const el of root.querySelectorAll<HTMLElement>('[data-top]')) el.style.top = `${el.dataset.top}px`;
  for (const el of root.querySelectorAll<HTMLElement>('[data-height]')) el.style.height = `${el.dataset.height}px`;
  for (const el of root.querySelectorAll<HTMLElement>('[data-bg]')) el.style.background = el.dataset.bg ?? '';
}

function groupTab(r: BrowseResult): TemplateResult {
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
            @click=${() => open(m.episode)}
            @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), open(m.episode))}
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

function promptTab(r: BrowseResult): TemplateResult {
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
                @click=${() => open(e)}
                @keydown=${(ev: KeyboardEvent) => (ev.key === 'Enter' || ev.key === ' ') && (ev.preventDefault(), open(e))}
              >
                <span class="status ${e.status}">${e.status.replace('_', ' ')}</span> ${num(e.reward)} <span class="muted">#${e.episode}</span>
                <code>${e.snippet}</code>
              </div>`,
          )}`,
    )}`;
}

function histogramsTab(r: BrowseResult): TemplateResult {
  return html`<div class="toolbar histogram-tools">
      <vscode-checkbox class="hist-zero" ?checked=${query.histZeroA} @change=${(e: Event) => send({ histZeroA: (e.target as HTMLInputElement).checked })}
        >include A = 0 (groups whose rewards are all equal: no gradient)</vscode-checkbox
      >
      <vscode-checkbox class="hist-log" ?checked=${query.histLogY} @change=${(e: Event) => send({ histLogY: (e.target as HTMLInputElement).checked })}
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

function draw(): void {
  const r = result;
  const body = !r
    ? html`<p class="muted">loading the run's tables…</p>`
    : query.tab === 'episodes'
      ? episodesTab(r)
      : query.tab === 'search'
        ? searchTab(r)
        : query.tab === 'tokens'
          ? tokensTab(r)
          : query.tab === 'group'
            ? groupTab(r)
            : query.tab === 'prompt'
              ? promptTab(r)
              : histogramsTab(r);
  render(
    html`${busy ? html`<vscode-progress-bar></vscode-progress-bar>` : nothing}
      <h2>${r?.id ?? runDir}</h2>
      ${toolbar(r)}
      <section class="body" data-tab=${query.tab}>${body}</section>`,
    root,
  );
  root.setAttribute('aria-busy', String(busy));
  applyStyles();
  if (r && query.tab === 'histograms') {
    const theme = readTheme();
    for (const h of r.histograms ?? []) {
      const canvas = root.querySelector<HTMLCanvasElement>(`canvas[data-hist="${CSS.escape(h.name)}"]`);
      if (!canvas) continue;
      drawBars(
        canvas,
        h.counts.map((c) => ({ label: '', value: c })),
        theme,
        theme.palette[0],
        { logY: query.histLogY, axis: { lo: h.lo, hi: h.hi } },
      );
    }
    const steps = root.querySelector<HTMLCanvasElement>('canvas[data-steps="effective"]');
    const every = Math.max(1, Math.ceil((r.steps?.length ?? 0) / 10));
    if (steps && r.steps)
      drawBars(
        steps,
        r.steps.map((s, i) => ({ label: i % every === 0 ? String(s.step) : '', value: s.effective_groups })),
        theme,
        theme.palette[2],
      );
  }
}

host.onMessage((m) => {
  if (m.method === 'browse/busy') {
    busy = true;
    draw();
    return;
  }
  result = m.params;
  busy = false;
  query = m.params.query;
  host.setState({ runDir: m.params.runDir, ...query });
  draw();
});
draw();
// the host answers with the query it holds: a restored panel's, which the serializer handed it from this page's state
host.post({ kind: 'command', method: 'webview/ready', params: {} });
