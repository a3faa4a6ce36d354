// Browse Rollouts' messages (src/extension/panels/browse_panel.ts ↔ src/webviews/browse.main.ts) and their runtime
// checks. The queries are the engine's (src/engine/query/rollouts.ts), run in the extension host's query worker.
import { arrayOf, isBoolean, isEmpty, isNumber, isRecord, isString, messageCheck, nullable, oneOf, shape, type Check } from './validate';
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from './webview';

export const BROWSE_TABS = ['episodes', 'search', 'tokens', 'group', 'prompt', 'histograms'] as const;
export type BrowseTab = (typeof BROWSE_TABS)[number];

/** Everything a query depends on; kept in the webview's state, so it survives a reload. */
export interface BrowseQuery {
  tab: BrowseTab;
  where: string;
  search: string;
  /** search as a regular expression (else plain text) */
  regex: boolean;
  /** episode sort key, "-key" descending */
  sort: string;
  /** token aggregate: a token type and a section to keep ('' for all), and its sort column */
  tokenType: string;
  section: string;
  tokenSort: string;
  /** the group view's and the prompt view's subject */
  group: { step: number; prompt: number } | null;
  prompt: number | null;
  /** the episode whose whole prompt and completion are shown under the table */
  expanded: { step: number; episode: number } | null;
  /** histograms: count the episodes (and their tokens) whose advantage is 0, which carry no gradient */
  histZeroA: boolean;
  /** histograms: a logarithmic count axis */
  histLogY: boolean;
}

export interface BrowsePanelState extends BrowseQuery {
  runDir: string;
}

/**
 * One episode's row, as `credit-lens rollouts` prints it (query/rollouts.ts EpisodeRow, whose measures are numbers) and
 * as Browse Rollouts receives it (BrowseEpisode: a measure that is not finite travels as null in JSON).
 */
export interface EpisodeSummary<Measure = number | null> {
  step: number;
  episode: number;
  prompt: number;
  reward: number;
  advantage: number;
  length: number;
  status: string;
  zero_var: boolean;
  mean_abs_c: Measure;
  max_entropy: Measure;
  /** the first line of the completion, shortened */
  snippet: string;
  /** what tells the prompt from the run's others: its text without the template every prompt shares, shortened */
  prompt_text: string;
}

export type BrowseEpisode = EpisodeSummary;

export interface BrowseCi {
  mean: number | null;
  lo: number | null;
  hi: number | null;
  n: number;
}

export interface BrowseTokenRow {
  token: string;
  count: number;
  effective_advantage: BrowseCi;
  abs_contribution: BrowseCi;
  entropy: BrowseCi;
  grad_norm: BrowseCi;
  mc_delta: BrowseCi;
}

/** One completion of a group, its tokens painted by contribution on the group's shared scale. */
export interface BrowseGroupMember {
  episode: BrowseEpisode;
  tokens: { text: string; c: number }[];
}

export interface BrowseHistogram {
  name: string;
  lo: number;
  hi: number;
  counts: number[];
}

export interface BrowseResult {
  runDir: string;
  id: string;
  query: BrowseQuery;
  /** the filtered episodes: how many, and the first rows in the chosen order (the table scrolls through these) */
  total: number;
  episodes: BrowseEpisode[];
  search: { total: number; hits: { step: number; episode: number; position: number; match: string; before: string; after: string }[] } | null;
  tokens: BrowseTokenRow[] | null;
  /** a group: its prompt's number and text, the shared scale (98th percentile of |c_Â|), its completions */
  group: { step: number; prompt: number; text: string; scale: number; members: BrowseGroupMember[] } | null;
  prompt: { prompt: number; text: string; steps: { step: number; members: BrowseEpisode[] }[] } | null;
  histograms: BrowseHistogram[] | null;
  /** the expanded episode: its row, the whole prompt and the whole completion (the answer included) */
  detail: { episode: BrowseEpisode; prompt: string; completion: string } | null;
  /** with the histograms: per step, the share of groups whose rewards are not all equal (effective groups), and the success rate */
  steps: { step: number; effective_groups: number; success_rate: number }[] | null;
  /** the fields --where knows (with the imported run's extra columns), for the filter's hint */
  fields: string[];
  stats: { episodes: number; tokens: number; loadMs: number; queryMs: number };
  error: string | null;
}

export type BrowseToWebview = IpcNotification<'browse/busy', { runDir: string }> | IpcNotification<'browse/result', BrowseResult>;

export type BrowseToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  | IpcCommand<'browse/query', BrowseQuery>
  | IpcCommand<'browse/openEpisode', { step: number; episode: number; position: number | null }>
  | IpcCommand<'browse/export', { what: 'episodes' | 'tokens'; format: 'csv' | 'jsonl'; query: BrowseQuery }>;

export type BrowseProtocol = WebviewProtocol<BrowseToWebview, BrowseToHost, BrowsePanelState>;

const isGroupRef = nullable(shape<{ step: number; prompt: number }>({ step: isNumber, prompt: isNumber }));

/** A field added after the first release: a saved state of an older page lacks it, and the host fills the default in. */
function added<T>(c: Check<T>): Check<T> {
  return (v): v is T => v === undefined || c(v);
}

export const isBrowseQuery: Check<BrowseQuery> = shape<BrowseQuery>({
  tab: oneOf(...BROWSE_TABS),
  where: isString,
  search: isString,
  regex: isBoolean,
  sort: isString,
  tokenType: isString,
  section: isString,
  tokenSort: isString,
  group: isGroupRef,
  prompt: nullable(isNumber),
  expanded: added(nullable(shape<{ step: number; episode: number }>({ step: isNumber, episode: isNumber }))),
  histZeroA: added(isBoolean),
  histLogY: added(isBoolean),
});

export const isBrowsePanelState: Check<BrowsePanelState> = (v): v is BrowsePanelState => isBrowseQuery(v) && isRecord(v) && isString(v.runDir);

/** The engine's result, built by the host: its outline is checked here, the rows are read as they come. */
const isResult: Check<BrowseResult> = shape<Pick<BrowseResult, 'runDir' | 'id' | 'query' | 'total' | 'episodes' | 'fields' | 'error'>>({
  runDir: isString,
  id: isString,
  query: isBrowseQuery,
  total: isNumber,
  episodes: arrayOf(isRecord) as unknown as Check<BrowseEpisode[]>,
  fields: arrayOf(isString),
  error: nullable(isString),
}) as Check<BrowseResult>;

export const browseChecks: ProtocolChecks<BrowseProtocol> = {
  toWebview: messageCheck<BrowseToWebview>('notification', {
    'browse/busy': shape<{ runDir: string }>({ runDir: isString }),
    'browse/result': isResult,
  }),
  toHost: messageCheck<BrowseToHost>('command', {
    'webview/ready': isEmpty,
    'browse/query': isBrowseQuery,
    'browse/openEpisode': shape<{ step: number; episode: number; position: number | null }>({
      step: isNumber,
      episode: isNumber,
      position: nullable(isNumber),
    }),
    'browse/export': shape<{ what: 'episodes' | 'tokens'; format: 'csv' | 'jsonl'; query: BrowseQuery }>({
      what: oneOf('episodes', 'tokens'),
      format: oneOf('csv', 'jsonl'),
      query: isBrowseQuery,
    }),
  }),
  state: isBrowsePanelState,
};

export const DEFAULT_QUERY: BrowseQuery = {
  tab: 'episodes',
  where: '',
  search: '',
  regex: false,
  // the episodes the update moved most first: in table order the first screen is often all zero-advantage groups
  sort: '-abs_advantage',
  tokenType: '',
  section: '',
  tokenSort: '-count',
  group: null,
  prompt: null,
  expanded: null,
  histZeroA: false,
  histLogY: false,
};

/** A result with nothing in it yet: what a query starts from, and what a failed one reports with its error. */
export function emptyResult(runDir: string, query: BrowseQuery, error: string | null = null): BrowseResult {
  return {
    runDir,
    id: runDir.split(/[\\/]/).pop() ?? runDir,
    query,
    total: 0,
    episodes: [],
    search: null,
    tokens: null,
    group: null,
    prompt: null,
    histograms: null,
    detail: null,
    steps: null,
    fields: [],
    stats: { episodes: 0, tokens: 0, loadMs: 0, queryMs: 0 },
    error,
  };
}
