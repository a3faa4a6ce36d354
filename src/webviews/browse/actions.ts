// What Browse Rollouts' controls do: a new query for the host (the page shows it busy until the answer), an episode
// opened painted in the editor, an export, or the table scrolled.
import type { BrowseEpisode, BrowseProtocol, BrowseQuery } from '../../protocol/browse_view';
import type { Host } from '../ipc';
import type { BrowseState } from './state';

export interface BrowseActions {
  send(q: Partial<BrowseQuery>): void;
  open(e: BrowseEpisode, position?: number | null): void;
  openAt(step: number, episode: number, position: number | null): void;
  exportTable(what: 'episodes' | 'tokens', format: 'csv' | 'jsonl'): void;
  scrolled(top: number): void;
}

export function browseActions(host: Host<BrowseProtocol>, s: BrowseState, redraw: () => void): BrowseActions {
  const openAt = (step: number, episode: number, position: number | null) =>
    host.post({ kind: 'command', method: 'browse/openEpisode', params: { step, episode, position } });
  return {
    send(q) {
      s.query = { ...s.query, ...q };
      if (s.result) host.setState({ runDir: s.result.runDir, ...s.query });
      s.busy = true;
      redraw();
      host.post({ kind: 'command', method: 'browse/query', params: s.query });
    },
    open: (e, position = null) => openAt(e.step, e.episode, position),
    openAt,
    exportTable: (what, format) => host.post({ kind: 'command', method: 'browse/export', params: { what, format, query: s.query } }),
    scrolled(top) {
      s.scrollTop = top;
      redraw();
    },
  };
}
