// Browse Rollouts: a run's episodes filtered, searched, grouped and aggregated. The queries run in the extension host's
// query worker (src/engine/query/); this page sends the query and draws the answer. It renders from its state
// (state.ts): the host's answers change the state, the controls call actions.ts, and each tab is a component.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-checkbox/index.js';
import '@vscode-elements/elements/dist/vscode-progress-bar/index.js';
import { html, nothing, render, type TemplateResult } from 'lit';
import { browseChecks, type BrowseProtocol, type BrowseResult } from '../../protocol/browse_view';
import { adoptCss, connect } from '../ipc';
import css from '../browse.css';
import baseCss from '../base.css';
import { browseActions, type BrowseActions } from './actions';
import { episodesTab } from './components/episodes';
import { groupTab } from './components/group';
import { drawHistograms, histogramsTab } from './components/histograms';
import { promptTab } from './components/prompt';
import { searchTab } from './components/search';
import { tokensTab } from './components/tokens';
import { toolbar } from './components/toolbar';
import { initialBrowseState, type BrowseState } from './state';

/** The open tab's body. */
function tabBody(s: BrowseState, a: BrowseActions, r: BrowseResult): TemplateResult {
  switch (s.query.tab) {
    case 'episodes':
      return episodesTab(s, a, r);
    case 'search':
      return searchTab(s, a, r);
    case 'tokens':
      return tokensTab(s, a, r);
    case 'group':
      return groupTab(a, r);
    case 'prompt':
      return promptTab(a, r);
    default:
      return histogramsTab(s, a, r);
  }
}

/**
 * Positions and colours go through the CSSOM after each render: the page's CSP refuses style attributes (lit's styleMap
 * writes one on first render), and element.style is allowed.
 */
function applyStyles(root: HTMLElement): void {
  for (const el of root.querySelectorAll<HTMLElement>('[data-top]')) el.style.top = `${el.dataset.top}px`;
  for (const el of root.querySelectorAll<HTMLElement>('[data-height]')) el.style.height = `${el.dataset.height}px`;
  for (const el of root.querySelectorAll<HTMLElement>('[data-bg]')) el.style.background = el.dataset.bg ?? '';
}

export function mountBrowse(): void {
  adoptCss(baseCss);
  adoptCss(css);
  const host = connect<BrowseProtocol>(browseChecks);
  const root = document.getElementById('root')!;
  const s = initialBrowseState(host.getState());
  const draw = (): void => {
    const r = s.result;
    render(
      html`${s.busy ? html`<vscode-progress-bar></vscode-progress-bar>` : nothing}
        <h2>${r?.id ?? s.runDir}</h2>
        ${toolbar(s, a, r)}
        <section class="body" data-tab=${s.query.tab}>${r ? tabBody(s, a, r) : html`<p class="muted">loading the run's tables…</p>`}</section>`,
      root,
    );
    root.setAttribute('aria-busy', String(s.busy));
    applyStyles(root);
    if (r && s.query.tab === 'histograms') drawHistograms(root, s, r);
  };
  const a = browseActions(host, s, draw);
  host.onMessage((m) => {
    if (m.method === 'browse/busy') {
      s.busy = true;
      draw();
      return;
    }
    s.busy = false;
    // a filter that does not parse keeps the last result on screen (its rows and count, under the filter it came from)
    // and says why beside the filter, which keeps the text typed so it can be mended
    if (m.params.error && s.result) {
      const last = s.result.query.where;
      s.result = { ...s.result, error: `${m.params.error.replace(/^--where: /, '')} (showing the last result${last ? `, filter: ${last}` : ''})` };
      s.query = { ...s.query, where: m.params.query.where };
      draw();
      return;
    }
    s.result = m.params.error ? { ...m.params, error: m.params.error.replace(/^--where: /, '') } : m.params;
    s.query = m.params.query;
    host.setState({ runDir: m.params.runDir, ...s.query });
    draw();
  });
  draw();
  // the host answers with the query it holds: a restored panel's, which the serializer handed it from this page's state
  host.post({ kind: 'command', method: 'webview/ready', params: {} });
}
