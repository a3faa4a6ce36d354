// Sweep summary table: one row per run, sortable by any column, each row opening its run.
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-progress-bar/index.js';
import '@vscode-elements/elements/dist/vscode-table/index.js';
import '@vscode-elements/elements/dist/vscode-table-body/index.js';
import '@vscode-elements/elements/dist/vscode-table-cell/index.js';
import '@vscode-elements/elements/dist/vscode-table-header/index.js';
import '@vscode-elements/elements/dist/vscode-table-header-cell/index.js';
import '@vscode-elements/elements/dist/vscode-table-row/index.js';
import { html, nothing, render } from 'lit';
import { sweepChecks, type SweepPanelState, type SweepProtocol, type SweepRow, type SweepSortKey, type SweepView } from '../protocol/sweep_view';
import { comparisonTable } from './compare_table';
import { adoptCss, connect } from './ipc';
import css from './sweep.css';
import baseCss from './base.css';
import { formatFixed, formatPercent } from '../protocol/number_format';

adoptCss(baseCss);

adoptCss(css);
const host = connect<SweepProtocol>(sweepChecks);
const root = document.getElementById('root')!;

let view: SweepView | null = null;
let sort: SweepPanelState['sort'] = host.getState()?.sort ?? { key: 'index', descending: false };

interface Column {
  key: SweepSortKey | null;
  title: string;
  hint?: string;
  cell: (r: SweepRow) => unknown;
}

const pct = (v: number | null) => formatPercent(v);
const num = (v: number | null, d: number) => formatFixed(v, d);
const paramText = (p: SweepRow['params']) =>
  Object.entries(p)
    .filter(([k]) => k !== 'credit.strategy')
    .map(([k, v]) => `${k.replace(/^credit\./, '')}=${v}`)
    .join(', ') || '—';

const COLUMNS: Column[] = [
  { key: 'index', title: '#', cell: (r) => r.index + 1 },
  { key: 'strategy', title: 'Strategy', cell: (r) => r.strategy },
  { key: null, title: 'Parameters', cell: (r) => paramText(r.params) },
  {
    key: 'status',
    title: 'Status',
    cell: (r) =>
      html`<span class="status status-${r.status}">${r.status}</span>${
          r.status === 'running' && r.step !== null ? html` <span class="muted">${r.step}/${r.totalSteps ?? '?'}</span>` : nothing
        }${
          r.slurm
            ? html`<br /><span class="muted slurm" title=${r.slurm.summary}
                  >${r.slurm.job}${r.slurm.state ? ` ${r.slurm.state}` : ''}${r.slurm.reason ? ` (${r.slurm.reason})` : ''}</span
                >${
                  r.status === 'queued' || r.status === 'running'
                    ? html` <a
                        href="#"
                        class="cancel-run"
                        title="scancel this run (it checkpoints and ends stopped)"
                        @click=${(e: Event) => {
                          e.preventDefault();
                          e.stopPropagation();
                          host.post({ kind: 'command', method: 'sweep/cancelRun', params: { index: r.index } });
                        }}
                        >cancel</a
                      >`
                    : nothing
                }`
            : nothing
        }`,
  },
  { key: 'finalEvalSuccess', title: 'Final eval', hint: 'greedy eval success at the last evaluation', cell: (r) => pct(r.finalEvalSuccess) },
  { key: 'bestEvalSuccess', title: 'Best eval', hint: 'best greedy eval success over the run', cell: (r) => pct(r.bestEvalSuccess) },
  { key: 'stepsTo10pct', title: 'To 10%', hint: 'first GRPO step whose training success rate reached 10%', cell: (r) => r.stepsTo10pct ?? '—' },
  { key: 'meanGradNorm', title: 'Mean |g|', hint: 'mean gradient norm over GRPO steps (before clipping)', cell: (r) => num(r.meanGradNorm, 3) },
  {
    key: 'fillerReasoningRatio',
    title: 'Filler ÷ reas.',
    hint: 'mean |contribution| of filler tokens ÷ that of reasoning tokens (the credit-assignment analysis), from credit-lens analyze',
    cell: (r) => num(r.fillerReasoningRatio, 2),
  },
];

/** The 95 % half-width of one run's eval success from its test instances alone (binomial, at the sweep's mean rate). */
function noise(v: SweepView): string | null {
  const rows = v.rows.filter((r) => r.finalEvalSuccess !== null);
  const n = v.comparison?.report?.rows[0]?.instances;
  if (!rows.length || !n) return null;
  const p = rows.reduce((a, r) => a + r.finalEvalSuccess!, 0) / rows.length;
  // every run at 0 % (or 100 %): the binomial spread is 0, and "±0.0 points" would read as no noise at all
  const half = 196 * Math.sqrt((p * (1 - p)) / n);
  return half >= 0.05 ? half.toFixed(1) : null;
}

function sortValue(r: SweepRow, key: SweepSortKey): string | number | null {
  return r[key] as string | number | null;
}

function sortedRows(rows: SweepRow[]): SweepRow[] {
  const dir = sort.descending ? -1 : 1;
  return [...rows].sort((a, b) => {
    const x = sortValue(a, sort.key);
    const y = sortValue(b, sort.key);
    // Missing values sink to the bottom whichever way the column is sorted.
    if (x === null || y === null) return x === y ? a.index - b.index : x === null ? 1 : -1;
    const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
    return c * dir || a.index - b.index;
  });
}

function setSort(key: SweepSortKey): void {
  sort = { key, descending: sort.key === key ? !sort.descending : key !== 'index' && key !== 'strategy' && key !== 'status' && key !== 'stepsTo10pct' };
  if (view) host.setState({ sweepId: view.sweepId, sort });
  draw();
}

function openRow(r: SweepRow): void {
  if (r.runDir) host.post({ kind: 'command', method: 'sweep/openRun', params: { runDir: r.runDir } });
}

function draw(): void {
  if (!view) {
    render(html`<p class="muted">Loading sweep…</p>`, root);
    return;
  }
  const v = view;
  const header = html` <header>
      <div>
        <h1>Sweep ${v.title}</h1>
        <p class="muted">${v.configPath} · started ${new Date(v.created).toLocaleString()}</p>
      </div>
      <div class="actions">
        <vscode-badge variant="counter" title="runs ended / runs in the sweep">${v.done} / ${v.total}</vscode-badge>
        ${v.active ? html`<vscode-button secondary @click=${() => host.post({ kind: 'command', method: 'sweep/cancel', params: {} })}>Cancel sweep</vscode-button>` : nothing}
      </div>
    </header>
    ${v.active ? html`<vscode-progress-bar aria-label="sweep progress" value=${(100 * v.done) / Math.max(1, v.total)} max="100"></vscode-progress-bar>` : nothing}`;
  const arrow = (c: Column) => (c.key && c.key === sort.key ? (sort.descending ? ' ▼' : ' ▲') : '');
  const table = html` <vscode-table
    zebra
    bordered-rows
    resizable
    columns=${JSON.stringify(v.slurm ? ['4%', '15%', '14%', '21%', '9%', '9%', '8%', '9%', '11%'] : ['4%', '19%', '15%', '13%', '10%', '10%', '9%', '9%', '11%'])}
  >
    <vscode-table-header slot="header">
      ${COLUMNS.map(
        (c) =>
          html`<vscode-table-header-cell
            class=${c.key ? 'sortable' : ''}
            title=${c.hint ?? (c.key ? 'sort' : '')}
            role=${c.key ? 'button' : nothing}
            tabindex=${c.key ? '0' : nothing}
            aria-sort=${c.key && sort.key === c.key ? (sort.descending ? 'descending' : 'ascending') : nothing}
            @click=${c.key ? () => setSort(c.key!) : nothing}
            @keydown=${(e: KeyboardEvent) => c.key && (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), setSort(c.key))}
            >${c.title}${arrow(c)}</vscode-table-header-cell
          >`,
      )}
    </vscode-table-header>
    <vscode-table-body slot="body">
      ${sortedRows(v.rows).map(
        (r) =>
          html`<vscode-table-row
            class=${r.runDir ? 'run-row openable' : 'run-row'}
            data-run=${r.name}
            data-status=${r.status}
            title=${r.runDir ? `${r.name}: click to open the run` : `${r.name}: not started`}
            tabindex=${r.runDir ? 0 : -1}
            @click=${() => openRow(r)}
            @keydown=${(e: KeyboardEvent) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), openRow(r))}
          >
            ${COLUMNS.map((c) => html`<vscode-table-cell>${c.cell(r)}</vscode-table-cell>`)}
          </vscode-table-row>`,
      )}
    </vscode-table-body>
  </vscode-table>`;
  const cmp = v.comparison;
  const grouped = cmp
    ? html`<section class="by-config" aria-label="by configuration">
          <h2>By configuration, against ${cmp.report?.baseline ?? 'the baseline'}</h2>
          ${cmp.report ? comparisonTable(cmp.report, { onOpen: (runDir) => host.post({ kind: 'command', method: 'sweep/openRun', params: { runDir } }) }) : nothing}
          ${cmp.note ? html`<p class="muted comparison-status">${cmp.note}</p>` : nothing}
        </section>
        <h2>Runs</h2>`
    : nothing;
  const foot = html`<p class="muted note">
    Click a column to sort, a row to open its
    run.${
      noise(v)
        ? ` One run's eval success moves by about ±${noise(v)} points ` +
          'from its test instances alone: compare configurations in the table above, not runs by rank.'
        : ''
    }
    Filler/reasoning is computed by credit-lens analyze once a run has ended.
    ${v.slurm ? html`<br />Slurm job ${v.slurm.jobId} · ${v.slurm.sweepDir}/slurm (script, configs, logs)` : nothing}
    ${
      v.slurm?.error
        ? html`<br /><span class="slurm-error">Slurm did not answer (${v.slurm.error}): the rows show what it said last; asking again with back-off.</span>`
        : nothing
    }
  </p>`;
  render(html`${header}${grouped}${table}${foot}`, root);
  root.setAttribute('aria-busy', 'false');
}

host.onMessage((m) => {
  if (m.method === 'sweep/update') {
    view = m.params;
    host.setState({ sweepId: view.sweepId, sort });
    draw();
  }
});
draw();
host.post({ kind: 'command', method: 'webview/ready', params: {} });
