// Browse Rollouts' state: the query (kept in the page's saved state, so a reload keeps every filter, tab and sort),
// the host's last answer, whether one is on its way, and where the episode table is scrolled.
import { DEFAULT_QUERY, type BrowseQuery, type BrowseResult } from '../../protocol/browse_view';

/** One row of the episode table, in pixels: the table draws only the rows in view. */
/** A row's height: the fixed columns on one line, the completion on up to three (browse.css's .row). */
export const ROW_H = 56;

export interface BrowseState {
  runDir: string;
  query: BrowseQuery;
  result: BrowseResult | null;
  busy: boolean;
  scrollTop: number;
}

/** The state of a page opened afresh or restored from its saved query. */
export function initialBrowseState(saved: ({ runDir: string } & Partial<BrowseQuery>) | undefined): BrowseState {
  const { runDir = '', ...q } = saved ?? {};
  return { runDir, query: { ...DEFAULT_QUERY, ...q }, result: null, busy: true, scrollTop: 0 };
}

/**
 * The sort after a click on a column's header: ascending, then descending. The A column also sorts by |A| (the
 * default: the episodes the update moved most first), so it goes |A| ▼ → A ▲ → A ▼ → |A| ▼.
 */
export function nextSort(query: BrowseQuery, key: string): string {
  const s = query.sort;
  if (key === 'advantage') return s === '-abs_advantage' ? 'advantage' : s === 'advantage' ? '-advantage' : '-abs_advantage';
  return s === key ? `-${key}` : key;
}
