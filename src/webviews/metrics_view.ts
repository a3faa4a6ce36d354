// The run dashboard and the run comparison are one view: every chart of src/webviews/metrics_series.ts for
// one run (colours by series) or several (colours by run, with a legend), SFT shaded before GRPO step 0,
// live points appended as the host forwards them, each chart exportable as PNG and CSV.
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-button/index.js';
import { html, nothing, render } from 'lit';
import { metricsChecks, type MetricsComparison, type MetricsProtocol, type MetricsRunData, type MetricsViewInit } from '../protocol/metrics_view';
import { comparisonTable } from './compare_table';
import { MetricChart, fmt, onThemeChange, readTheme, type ChartTheme } from './charts';
import { adoptCss, connect } from './ipc';
import {
  alignChart,
  beforeGrpo,
  chartCsv,
  chartsFor,
  DEFAULT_VIEW,
  emptyState,
  firstVisibleX,
  phaseOfX,
  pointsOf,
  runLabels,
  upsertRow,
  type ChartSpec,
  type ChartView,
  type RunPoints,
} from './metrics_series';
import css from './metrics_view.css';
import baseCss from './base.css';

interface RunState {
  data: MetricsRunData;
  points: RunPoints;
}

/** How many live latencies the page keeps (shown in the header, read by the e2e suite). */
const LATENCY_WINDOW = 50;

/** A saved view read defensively: the page's saved state is whatever an older version wrote. */
function restoredView(v: unknown): ChartView {
  const r = (v ?? {}) as Partial<ChartView>;
  return {
    includeSft: typeof r.includeSft === 'boolean' ? r.includeSft : DEFAULT_VIEW.includeSft,
    smoothing: typeof r.smoothing === 'number' && r.smoothing >= 0 && r.smoothing < 1 ? r.smoothing : DEFAULT_VIEW.smoothing,
  };
}

export function mountMetricsView(): void {
  adoptCss(baseCss);
  adoptCss(css);
  const host = connect<MetricsProtocol>(metricsChecks);
  const root = document.getElementById('root')!;
  root.innerHTML = '';
  const head = document.createElement('div');
  const grid = document.createElement('div');
  grid.className = 'charts';
  root.append(head, grid);

  // Until the host's init message arrives: a restored page knows its mode and its view from its saved state.
  let mode: MetricsViewInit['mode'] = host.getState()?.mode ?? 'dashboard';
  let view: ChartView = restoredView(host.getState()?.view);
  let runs: RunState[] = [];
  let theme: ChartTheme = readTheme();
  const charts = new Map<string, { chart: MetricChart; card: HTMLElement; caption: HTMLElement; empty: HTMLElement }>();
  const latencies: number[] = [];
  let drawScheduled = false;
  let pendingLatency: { receivedAt: number; runDir: string; step: number }[] = [];
  let comparison: MetricsComparison | null = null;

  const runColour = (run: number) => theme.palette[run % theme.palette.length];
  const colourOf = (c: { run: number; index: number }) => (mode === 'compare' ? runColour(c.run) : theme.palette[c.index % theme.palette.length]);
  let labels: string[] = [];
  const runLabel = (r: RunState) => labels[runs.indexOf(r)] ?? r.data.id;

  function xLabel(x: number): string {
    if (x >= 0) return x === 0 ? 'eval before GRPO' : `GRPO step ${x}`;
    // With one run the SFT step is known exactly; runs of a comparison may have warmed up for different lengths.
    return runs.length === 1 ? `SFT step ${x + runs[0].data.sftSteps + 1}` : `SFT (${x} from GRPO)`;
  }

  function legendOf(chart: MetricChart): { label: string; colour: string }[] {
    return chart.aligned.columns.map((c, index) => ({ label: c.label, colour: colourOf({ run: c.run, index }) }));
  }

  function card(spec: ChartSpec): { chart: MetricChart; card: HTMLElement; caption: HTMLElement; empty: HTMLElement } {
    const el = document.createElement('section');
    el.className = 'chart';
    el.dataset.chart = spec.id;
    const title = document.createElement('header');
    const caption = document.createElement('p');
    caption.className = 'muted before-grpo';
    const empty = document.createElement('p');
    empty.className = 'empty-state';
    empty.hidden = true;
    const plot = document.createElement('div');
    plot.className = 'plot';
    el.append(title, caption, empty, plot);
    const chart = new MetricChart(plot, spec, theme, { colour: colourOf, xLabel });
    render(
      html`<h2 title=${spec.hint}>${spec.title}</h2>
        <span class="tools">
          <vscode-button secondary class="png" title="Save this chart as a PNG image" @click=${() => exportPng(chart)}>PNG</vscode-button>
          <vscode-button secondary class="csv" title="Save this chart's data as CSV" @click=${() => exportCsv(chart)}>CSV</vscode-button>
        </span>`,
      title,
    );
    return { chart, card: el, caption, empty };
  }

  function exportPng(chart: MetricChart): void {
    const title = `${chart.spec.title} — ${mode === 'compare' ? runs.map(runLabel).join(' vs ') : runLabel(runs[0])}`;
    host.post({ kind: 'command', method: 'metrics/exportPng', params: { chartId: chart.spec.id, title, dataUrl: chart.toPng(title, legendOf(chart)) } });
  }

  function exportCsv(chart: MetricChart): void {
    const csv = chartCsv(chart.spec, chart.aligned, runs.map(runLabel));
    host.post({ kind: 'command', method: 'metrics/exportCsv', params: { chartId: chart.spec.id, title: chart.spec.title, csv } });
  }

  /** Charts appear as their first value arrives (e.g. eval success), in the fixed order of chartsFor. */
  function drawCharts(): void {
    const specs = chartsFor(runs.map((r) => r.points));
    const inputs = runs.map((r) => ({ label: runLabel(r), points: r.points }));
    const from = firstVisibleX(
      runs.map((r) => r.points),
      view,
    );
    let prev: HTMLElement | null = null;
    for (const spec of specs) {
      let entry = charts.get(spec.id);
      if (!entry) {
        entry = card(spec);
        charts.set(spec.id, entry);
        if (prev) prev.after(entry.card);
        else grid.prepend(entry.card);
      }
      entry.chart.update(alignChart(spec, inputs, view));
      entry.card.dataset.points = String(entry.chart.pointCount);
      entry.card.dataset.firstX = String(entry.chart.aligned.x[0] ?? '');
      // Not drawn at x = 0 when the charts start at GRPO step 1: the starting point said in words instead.
      const start = from > 0 ? beforeGrpo(spec, inputs) : [];
      entry.caption.textContent = start.length ? `before GRPO: ${beforeGrpoText(spec, start, runs.length)}` : '';
      entry.caption.hidden = !start.length;
      const why = emptyState(
        spec.id,
        runs.map((r) => r.data),
      );
      entry.empty.textContent = why ?? '';
      entry.empty.hidden = why === null;
      entry.card.classList.toggle('is-empty', why !== null);
      prev = entry.card;
    }
    document.body.dataset.charts = String(specs.length);
  }

  function drawHead(): void {
    const live = runs.some((r) => r.data.status === 'running');
    const sorted = [...latencies].sort((a, b) => a - b);
    const median = sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : null;
    const title = mode === 'compare' ? `Compare ${runs.length} runs` : runs[0] ? runLabel(runs[0]) : 'Run dashboard';
    const anySft = runs.some((r) => r.data.sftSteps > 0);
    render(
      html` <header class="top">
          <div>
            <h1>${title}</h1>
            ${mode === 'dashboard' && runs[0] ? html`<p class="muted">${runs[0].data.strategy ?? '?'} · ${runs[0].data.runDir}</p>` : nothing}
          </div>
          <div class="actions">
            ${
              live
                ? html`<vscode-badge
                    class="live"
                    title="points arrive as the engine logs them; median latency from the engine's notification reaching the extension host to the point drawn"
                    >live${median !== null ? html` · ${median} ms` : nothing}</vscode-badge
                  >`
                : nothing
            }
            ${
              mode === 'dashboard' && runs[0]
                ? html` <vscode-button
                      secondary
                      title="Overlay this run's charts with other runs"
                      @click=${() => host.post({ kind: 'command', method: 'metrics/compareWith', params: { runDirs: [runs[0].data.runDir] } })}
                      >Compare with…</vscode-button
                    >
                    <vscode-button
                      secondary
                      title="the credit-assignment tables of this run: filler and reasoning credit, position bins, top tokens"
                      @click=${() => host.post({ kind: 'command', method: 'metrics/openAnalysis', params: { runDir: runs[0].data.runDir } })}
                      >Credit analysis</vscode-button
                    >`
                : nothing
            }
            ${mode === 'compare' ? html`<vscode-button secondary title="Add runs to this comparison" @click=${() => host.post({ kind: 'command', method: 'metrics/compareWith', params: { runDirs: runs.map((r) => r.data.runDir) } })}>Add runs…</vscode-button>` : nothing}
          </div>
        </header>
        ${
          mode === 'compare'
            ? html`<ul class="run-legend" aria-label="runs">
                ${runs.map(
                  (r, i) =>
                    html`<li class="entry" data-run=${r.data.id} title=${r.data.runDir}>
                      <span class="swatch" data-colour=${runColour(i)}></span>
                      <a
                        href="#"
                        title="Open this run's dashboard"
                        @click=${(e: Event) => {
                          e.preventDefault();
                          host.post({ kind: 'command', method: 'metrics/openRun', params: { runDir: r.data.runDir } });
                        }}
                        >${runLabel(r)}</a
                      >
                      ${runLabel(r) !== r.data.id ? html`<span class="muted">${r.data.id}</span>` : nothing}
                      <span class="muted">${r.data.strategy ?? '?'} · ${r.data.status}${summary(r)}</span>
                    </li>`,
                )}
              </ul>`
            : nothing
        }
        ${mode === 'compare' && comparison ? comparisonSection(comparison) : nothing}
        <div class="view-tools" role="group" aria-label="chart view">
          ${
            anySft || runs.some((r) => r.points.has(0))
              ? html`<label title="the SFT warm start (x < 0, counted back from the eval before GRPO at 0) and that eval; off, the charts start at GRPO step 1"
                  ><input
                    type="checkbox"
                    class="include-sft"
                    .checked=${view.includeSft}
                    @change=${(e: Event) => setView({ ...view, includeSft: (e.target as HTMLInputElement).checked })}
                  />
                  ${anySft ? html`Include SFT warm start${sftText()}` : 'Include the eval before GRPO'}</label
                >`
              : nothing
          }
          <label
            title="TensorBoard's smoothing: a debiased exponential moving average of each line, restarting at GRPO step 1; the logged values stay faintly behind, and CSV exports hold them"
            >Smoothing
            <input
              type="range"
              class="smoothing"
              min="0"
              max="0.99"
              step="0.01"
              aria-label="smoothing weight"
              .value=${String(view.smoothing)}
              @input=${(e: Event) => setView({ ...view, smoothing: Number((e.target as HTMLInputElement).value) })}
            />
            <output class="smoothing-value">${view.smoothing.toFixed(2)}</output></label
          >
        </div>
        <p class="muted note">
          ${view.includeSft && anySft ? 'Shaded: the SFT warm start, drawn before GRPO step 0 (x < 0 counts SFT steps back from the eval before GRPO). ' : ''}Drag
          across a chart to zoom, double-click to reset; the cursor reads every chart at the same step.
        </p>`,
      head,
    );
    // A style attribute would need 'unsafe-inline'; the CSSOM does not.
    head.querySelectorAll<HTMLElement>('.swatch').forEach((s) => (s.style.background = s.dataset.colour ?? ''));
  }

  /** The paired test of the compared configurations (seeds together) against the chosen baseline. */
  function comparisonSection(c: MetricsComparison) {
    const at = c.report?.rows[0]?.step ?? c.step;
    const stepName = (s: number) => (s === 0 ? 'step 0 (the warm starts)' : `GRPO step ${s}`);
    return html`<section class="significance" aria-label="paired test">
      <h2>
        Eval success at
        ${
          c.steps.length > 1
            ? html`<select
                aria-label="step"
                class="step-picker"
                title="the GRPO step every run's eval is read at: each run's last eval, or any step all of them evaluated"
                @change=${(e: Event) => {
                  const v = (e.target as HTMLSelectElement).value;
                  host.post({ kind: 'command', method: 'metrics/setStep', params: { step: v === 'last' ? null : Number(v) } });
                }}
              >
                <option value="last" ?selected=${c.step === null}>
                  ${c.step === null && at !== null && at !== undefined ? `${stepName(at)}, the latest all evaluated` : 'the latest step all evaluated'}
                </option>
                ${[...c.steps].reverse().map((s) => html`<option value=${String(s)} ?selected=${c.step === s}>${stepName(s)}</option>`)}
              </select>`
            : html`<span class="step">${at !== null && at !== undefined ? stepName(at) : 'the last eval'}</span>`
        }
        against
        ${
          c.groups.length > 1
            ? html`<select
                aria-label="baseline"
                title="the configuration every other one is tested against"
                @change=${(e: Event) => host.post({ kind: 'command', method: 'metrics/setBaseline', params: { group: (e.target as HTMLSelectElement).value } })}
              >
                ${c.groups.map((g) => html`<option value=${g} ?selected=${g === c.baseline}>${g}</option>`)}
              </select>`
            : html`${c.baseline ?? 'a baseline'}`
        },
        on the same eval instances
      </h2>
      ${c.report ? comparisonTable(c.report, { onOpen: (runDir) => host.post({ kind: 'command', method: 'metrics/openRun', params: { runDir } }) }) : nothing}
      ${c.note ? html`<p class="muted comparison-status">${c.note}</p>` : nothing}
    </section>`;
  }

  /** The values at the eval before GRPO in words: each, or for many runs the one value they share, or their range. */
  function beforeGrpoText(spec: ChartSpec, start: { label: string; key: string; value: number }[], nRuns: number): string {
    const f = (v: number) => fmt(v, !!spec.percent);
    if (nRuns <= 3) return start.map((s) => `${s.label} ${f(s.value)}`).join(' · ');
    return spec.series
      .flatMap((series) => {
        const vs = start.filter((s) => s.key === series.key).map((s) => s.value);
        if (!vs.length) return [];
        const lo = Math.min(...vs);
        const hi = Math.max(...vs);
        const where = vs.length === nRuns ? 'every run' : `${vs.length} of ${nRuns} runs`;
        return [lo === hi ? `${series.label} ${f(lo)} in ${where}` : `${series.label} ${f(lo)} – ${f(hi)} over ${where}`];
      })
      .join(' · ');
  }

  function sftText(): string {
    const steps = [...new Set(runs.map((r) => r.data.sftSteps))];
    return steps.length === 1 && steps[0] > 0 ? ` (${steps[0].toLocaleString('en-US')} steps)` : '';
  }

  function setView(v: ChartView): void {
    view = v;
    host.setState({ mode, runDirs: runs.map((r) => r.data.runDir), view });
    drawCharts();
    drawHead();
  }

  function summary(r: RunState): string {
    let reward: number | undefined;
    let evalSuccess: number | undefined;
    for (const [x, v] of [...r.points].sort((a, b) => a[0] - b[0])) {
      if (phaseOfX(x) === 'grpo' && v.reward_mean !== undefined) reward = v.reward_mean;
      if (v.eval_success !== undefined) evalSuccess = v.eval_success;
    }
    return `${reward !== undefined ? ` · reward ${fmt(reward)}` : ''}${evalSuccess !== undefined ? ` · eval ${fmt(evalSuccess, true)}` : ''}`;
  }

  /** One repaint per animation frame however many rows arrive; latencies are taken once the frame is drawn. */
  function scheduleDraw(): void {
    if (drawScheduled) return;
    drawScheduled = true;
    requestAnimationFrame(() => {
      drawScheduled = false;
      drawCharts();
      drawHead();
      const done = pendingLatency;
      pendingLatency = [];
      if (!done.length) return;
      // uPlot commits its redraw in a microtask after setData; the next frame shows it.
      requestAnimationFrame(() => {
        const now = Date.now();
        for (const p of done) {
          const ms = Math.max(0, now - p.receivedAt);
          latencies.push(ms);
          if (latencies.length > LATENCY_WINDOW) latencies.shift();
          host.post({ kind: 'command', method: 'metrics/drawn', params: { runDir: p.runDir, step: p.step, latencyMs: ms } });
        }
        document.body.dataset.latencies = JSON.stringify(latencies);
        drawHead();
      });
    });
  }

  function redrawAll(): void {
    theme = readTheme();
    document.body.dataset.chartForeground = theme.foreground;
    for (const { chart } of charts.values()) chart.setTheme(theme);
    drawHead();
  }

  host.onMessage((m) => {
    if (m.method === 'metrics/init') {
      mode = m.params.mode;
      runs = m.params.runs.map((data) => ({ data, points: pointsOf(data.rows, data.sftSteps) }));
      labels = mode === 'compare' ? runLabels(runs.map((r) => r.data)) : runs.map((r) => r.data.id);
      for (const { chart, card: c } of charts.values()) {
        chart.destroy();
        c.remove();
      }
      charts.clear();
      host.setState({ mode, runDirs: runs.map((r) => r.data.runDir), view });
      scheduleDraw();
      root.setAttribute('aria-busy', 'false');
    } else if (m.method === 'metrics/comparison') {
      comparison = m.params;
      drawHead();
    } else if (m.method === 'metrics/append') {
      const r = runs.find((x) => x.data.runDir === m.params.runDir);
      if (!r) return;
      r.data.status = m.params.status;
      for (const row of m.params.rows) {
        upsertRow(r.points, row, r.data.sftSteps);
        if (m.params.receivedAt !== null) pendingLatency.push({ receivedAt: m.params.receivedAt, runDir: r.data.runDir, step: row.step });
      }
      scheduleDraw();
    }
  });

  document.body.dataset.chartForeground = theme.foreground;
  onThemeChange(redrawAll);
  new ResizeObserver(() => {
    for (const { chart } of charts.values()) chart.resize();
  }).observe(grid);
  render(html`<p class="muted">Loading metrics…</p>`, head);
  host.post({ kind: 'command', method: 'webview/ready', params: {} });
}
