// Browse Rollouts' fixed tables: the tabs' titles, the quick filters, and the columns of the episode and token tables
// (the query's sort key, the header, and how a cell shows its value).
import { html, nothing } from 'lit';
import type { BrowseEpisode, BrowseTab } from '../../protocol/browse_view';
import { formatFixed } from '../../protocol/number_format';

/** A value of the tables, to d decimals. */
export const num = (v: number | null, d = 3) => formatFixed(v, d);

export const TAB_TITLES: Record<BrowseTab, string> = {
  episodes: 'Episodes',
  search: 'Search',
  tokens: 'Tokens',
  group: 'Group',
  prompt: 'Prompt over time',
  histograms: 'Histograms',
};
export const QUICK: [string, string][] = [
  ['wrong', 'status = wrong'],
  ['truncated', 'truncated'],
  ['no answer', 'status = no_answer'],
  ['zero-variance groups', 'zero_var'],
  ['solved', 'success'],
];

export const COLS: [string, string, (e: BrowseEpisode) => unknown][] = [
  ['step', 'step', (e) => e.step],
  ['episode', '#', (e) => e.episode],
  ['prompt', 'prompt', (e) => html`<span title="prompt ${e.prompt}: ${e.prompt_text}">${e.prompt_text || `#${e.prompt}`}</span>`],
  ['reward', 'reward', (e) => num(e.reward)],
  ['advantage', 'A', (e) => num(e.advantage)],
  ['length', 'len', (e) => e.length],
  [
    '',
    'status',
    (e) =>
      html`<span class="status ${e.status}">${e.status.replace('_', ' ')}</span
        >${e.zero_var ? html` <span class="muted" title="every reward of its group is equal">=</span>` : nothing}`,
  ],
  ['mean_abs_c', 'mean |c|', (e) => num(e.mean_abs_c, 4)],
  ['max_entropy', 'max H', (e) => num(e.max_entropy, 2)],
];

export const TOKEN_COLS: [string, string, string][] = [
  ['count', 'count', ''],
  ['effective_advantage', 'mean Â', ''],
  ['abs_contribution', 'mean |c|', ''],
  ['entropy', 'mean entropy', ''],
  ['grad_norm', 'mean grad norm', 'the size of the gradient the token sends to the logits'],
  ['mc_delta', 'mean MC δ', 'Monte Carlo credit, where probed (credit-lens probe)'],
];
