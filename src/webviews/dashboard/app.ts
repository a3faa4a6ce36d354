// The run dashboard and the run comparison are one page: every chart of src/webviews/metrics_series.ts for one run
// (colours by series) or several (colours by run, with a legend), SFT shaded before GRPO step 0, live points appended
// as the host forwards them, each chart exportable as PNG and CSV. The page renders from its state (state.ts): the
// host's messages change the state, the controls call actions.ts, and one repaint per frame draws the head
// (components/head.ts) and the charts (components/chart_grid.ts).
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-button/index.js';
import { html, render } from 'lit';
import { metricsChecks, type MetricsProtocol } from '../../protocol/metrics_view';
import { onThemeChange, readTheme } from '../charts';
import { adoptCss, connect, type Host } from '../ipc';
import { runLegendNames } from '../../protocol/run_names';
import { pointsOf, upsertRow } from '../metrics_series';
import css from '../metrics_view.css';
import baseCss from '../base.css';
import { dashboardActions } from './actions';
import { ChartGrid } from './components/chart_grid';
import { headView } from './components/head';
import { initialState, LATENCY_WINDOW, type DashboardState } from './state';

/** Live points waiting for the frame that draws them: their arrival, for the latency the header shows. */
type Pending = { receivedAt: number; runDir: string; step: number }[];

export function mountDashboard(): void {
  adoptCss(baseCss);
  adoptCss(css);
  const host = connect<MetricsProtocol>(metricsChecks);
  const root = document.getElementById('root')!;
  root.innerHTML = '';
  const head = document.createElement('div');
  const gridEl = document.createElement('div');
  gridEl.className = 'charts';
  root.append(head, gridEl);

  const state = initialState(host.getState(), readTheme());
  const drawHead = () => {
    render(headView(state, actions), head);
    // A style attribute would need 'unsafe-inline'; the CSSOM does not.
    head.querySelectorAll<HTMLElement>('.swatch').forEach((s) => (s.style.background = s.dataset.colour ?? ''));
  };
  const actions = dashboardActions(host, state, () => {
    grid.draw();
    drawHead();
  });
  const grid = new ChartGrid(gridEl, state, actions);
  const repaint = frameScheduler(
    host,
    state,
    () => {
      grid.draw();
      drawHead();
    },
    drawHead,
  );

  host.onMessage((m) => {
    if (m.method === 'metrics/init') {
      state.mode = m.params.mode;
      state.runs = m.params.runs.map((data) => ({ data, points: pointsOf(data.rows, data.sftSteps) }));
      state.labels = state.mode === 'compare' ? runLegendNames(state.runs.map((r) => r.data)) : state.runs.map((r) => r.data.id);
      grid.clear();
      host.setState({ mode: state.mode, runDirs: state.runs.map((r) => r.data.runDir), view: state.view });
      repaint([]);
      root.setAttribute('aria-busy', 'false');
    } else if (m.method === 'metrics/comparison') {
      state.comparison = m.params;
      drawHead();
    } else if (m.method === 'metrics/append') {
      const r = state.runs.find((x) => x.data.runDir === m.params.runDir);
      if (!r) return;
      r.data.status = m.params.status;
      const arrived: Pending = [];
      for (const row of m.params.rows) {
        upsertRow(r.points, row, r.data.sftSteps);
        if (m.params.receivedAt !== null) arrived.push({ receivedAt: m.params.receivedAt, runDir: r.data.runDir, step: row.step });
      }
      repaint(arrived);
    }
  });

  document.body.dataset.chartForeground = state.theme.foreground;
  onThemeChange(() => {
    state.theme = readTheme();
    document.body.dataset.chartForeground = state.theme.foreground;
    grid.setTheme(state.theme);
    drawHead();
  });
  new ResizeObserver(() => grid.resize()).observe(gridEl);
  render(html`<p class="muted">Loading metrics…</p>`, head);
  host.post({ kind: 'command', method: 'webview/ready', params: {} });
}

/**
 * One repaint per animation frame however many rows arrive; latencies are taken once the frame is drawn and reported
 * to the host (the e2e suite reads them from the page too).
 */
function frameScheduler(host: Host<MetricsProtocol>, state: DashboardState, draw: () => void, drawHead: () => void): (arrived: Pending) => void {
  let scheduled = false;
  let pending: Pending = [];
  return (arrived) => {
    pending.push(...arrived);
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      draw();
      const done = pending;
      pending = [];
      if (!done.length) return;
      // uPlot commits its redraw in a microtask after setData; the next frame shows it.
      requestAnimationFrame(() => {
        const now = Date.now();
        for (const p of done) {
          const ms = Math.max(0, now - p.receivedAt);
          state.latencies.push(ms);
          if (state.latencies.length > LATENCY_WINDOW) state.latencies.shift();
          host.post({ kind: 'command', method: 'metrics/drawn', params: { runDir: p.runDir, step: p.step, latencyMs: ms } });
        }
        document.body.dataset.latencies = JSON.stringify(state.latencies);
        drawHead();
      });
    });
  };
}
