// The credit-analysis view: seed doc 002's tables for one run from `credit-lens analyze --json`, bar charts of
// the position bins and of t by position, the weight distribution per section, a step-range filter that
// re-runs the analysis, and the Appendix-B comparison against a baseline run.
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-progress-ring/index.js';
import '@vscode-elements/elements/dist/vscode-textfield/index.js';
import { html, nothing, render, type TemplateResult } from 'lit';
import type { Section } from '../protocol/index';
import { analysisChecks, type AnalysisPanelState, type AnalysisProtocol, type AnalysisView } from '../protocol/analysis_view';
import css from './analysis.css';
import baseCss from './base.css';
import { allTables, binLabel, type Table } from './analysis_tables';
import { formatCount } from '../protocol/number_format';
import { drawBars, fmt, onThemeChange, readTheme, type ChartTheme } from './charts';
import { toCsv } from './csv';
import { adoptCss, connect } from './ipc';

adoptCss(baseCss);
adoptCss(css);
const host = connect<AnalysisProtocol>(analysisChecks);
const root = document.getElementById('root')!;

let view: AnalysisView | null = null;
let busy = false;
let theme: ChartTheme = readTheme();

const send = (m: AnalysisProtocol['toHost']) => host.post(m);

function cell(v: Table['rows'][number][number], percent: boolean): TemplateResult | string {
  if (v === null) return html`<span class="muted">—</span>`;
  if (typeof v === 'number') return fmt(v, percent);
  return v;
}

/** A table section; `beside` (a chart) sits to the right of the table when the panel is wide enough. */
function tableView(t: Table, extra: TemplateResult | typeof nothing = nothing, beside: TemplateResult | typeof nothing = nothing): TemplateResult {
  const pct = new Set(t.percentColumns ?? []);
  return html`<section class=${beside === nothing ? 'table' : 'table with-chart'} data-table=${t.id}>
    <header>
      <h2 title=${t.hint}>${t.title}</h2>
      <vscode-button
        secondary
        class="csv"
        title="Save this table as CSV"
        @click=${() => send({ kind: 'command', method: 'analysis/exportCsv', params: { name: t.id, csv: toCsv(t.header, t.rows) } })}
        >CSV</vscode-button
      >
    </header>
    <div class="body">
      <table class=${t.id}>
        <thead>
          <tr>
            ${t.header.map((h) => html`<th>${h}</th>`)}
          </tr>
        </thead>
        <tbody>
          ${t.rows.map(
            (r) =>
              html`<tr>
                ${r.map((v, i) => html`<td class=${typeof v === 'number' ? 'num' : ''}>${cell(v, pct.has(i))}</td>`)}
              </tr>`,
          )}
        </tbody>
      </table>
      ${beside === nothing ? nothing : html`<div class="side">${beside}</div>`}
    </div>
    ${extra}
  </section>`;
}

function rangeForm(v: AnalysisView): TemplateResult {
  const steps = v.loggedSteps;
  const apply = () => {
    const read = (id: string): number | null => {
      const raw = (root.querySelector<HTMLInputElement>(`#${id}`)?.value ?? '').trim();
      return raw === '' ? null : Number(raw);
    };
    const from = read('from-step');
    const to = read('to-step');
    if ((from !== null && !Number.isInteger(from)) || (to !== null && !Number.isInteger(to))) return;
    send({ kind: 'command', method: 'analysis/setRange', params: { from, to } });
  };
  return html`<form
    class="range"
    @submit=${(e: Event) => {
      e.preventDefault();
      apply();
    }}
  >
    <label for="from-step">Steps</label>
    <vscode-textfield
      id="from-step"
      type="number"
      min=${steps?.first ?? 0}
      max=${steps?.last ?? 0}
      placeholder=${String(steps?.first ?? '')}
      .value=${v.from === null ? '' : String(v.from)}
      @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && apply()}
    ></vscode-textfield>
    <span>to</span>
    <vscode-textfield
      id="to-step"
      type="number"
      min=${steps?.first ?? 0}
      max=${steps?.last ?? 0}
      placeholder=${String(steps?.last ?? '')}
      .value=${v.to === null ? '' : String(v.to)}
      @keydown=${(e: KeyboardEvent) => e.key === 'Enter' && apply()}
    ></vscode-textfield>
    <vscode-button class="apply" @click=${apply} ?disabled=${busy}>Apply</vscode-button>
    <vscode-button
      secondary
      class="all-steps"
      ?disabled=${busy || (v.from === null && v.to === null)}
      @click=${() => send({ kind: 'command', method: 'analysis/setRange', params: { from: null, to: null } })}
      >All steps</vscode-button
    >
    <span class="muted">${steps ? `${steps.count} logged steps, ${steps.first}–${steps.last}` : 'no token tables'}</span>
  </form>`;
}

function summary(v: AnalysisView): TemplateResult {
  const a = v.report!;
  const m = a.meta;
  const param = m.strategy_param ? ` (${m.strategy_param.name} ${m.strategy_param.value})` : '';
  return html`<div class="cards">
    <div class="card"><span class="muted">strategy</span><b>${m.strategy ?? '?'}${param}</b></div>
    <div class="card">
      <span class="muted">analysed</span><b>steps ${m.steps.from}–${m.steps.to}</b
      ><span class="muted">${formatCount(m.episodes)} episodes · ${formatCount(m.tokens)} tokens</span>
    </div>
    <div class="card">
      <span class="muted">greedy eval success</span><b>${fmt(m.eval_success.before_grpo, true)} → ${fmt(m.eval_success.final, true)}</b>
      <span class="muted">${m.eval_success.final_step !== null ? `at step ${m.eval_success.final_step}` : ''}</span>
    </div>
    <div class="card"><span class="muted">training success · reward</span><b>${fmt(m.training.success_rate, true)} · ${fmt(m.training.reward_mean)}</b></div>
    <div class="card">
      <span class="muted">filler ÷ reasoning |c|</span><b>${fmt(m.filler_reasoning_ratio)}</b>
      <span class="muted">${fmt(m.filler_mean_abs_contribution)} ÷ ${fmt(m.reasoning_mean_abs_contribution)}</span>
    </div>
  </div>`;
}

function body(v: AnalysisView): TemplateResult {
  const a = v.report!;
  const tables = new Map(allTables(a).map((t) => [t.id, t]));
  const t = (id: string, extra?: TemplateResult, beside?: TemplateResult) =>
    tables.has(id) ? tableView(tables.get(id)!, extra ?? nothing, beside ?? nothing) : nothing;
  return html` ${summary(v)} ${a.appendix_b ? t('appendix_b') : nothing}
    ${t(
      'position_bins',
      undefined,
      html`<canvas class="bars bin-bars" aria-label="mean contribution by relative position bin"></canvas>
        <p class="muted caption">Mean contribution c by position ÷ length.</p>`,
    )}
    <div class="two">${t('token_types')}${t('type_by_position')}</div>
    <div class="two">${t('contribution')}${t('reward_sign')}</div>
    ${t(
      't_stats',
      html`<canvas class="bars t-bars" aria-label="t statistic by absolute position"></canvas>
        <p class="muted caption">t by absolute position (|t| > 3: the position's mean contribution differs from zero).</p>`,
    )}
    ${t(
      'weights',
      html`<canvas class="boxes" aria-label="weight distribution per section"></canvas>
        <p class="muted caption">Weight w per section: whiskers min–max, box p10–p90, tick p50, dot mean.</p>`,
    )}
    <div class="two">${t('top_filler_abs')}${t('top_reasoning_abs')}</div>
    <div class="two">${t('top_filler_count')}${t('top_reasoning_count')}</div>
    ${
      a.notes.length
        ? html`<section class="notes">
            <h2>Notes</h2>
            <ul>
              ${a.notes.map((n) => html`<li>${n}</li>`)}
            </ul>
          </section>`
        : nothing
    }
    <p class="muted caption">credit-lens analyze ran in ${v.elapsedMs} ms.</p>`;
}

function draw(): void {
  if (!view) {
    render(html`<p class="muted">Running credit-lens analyze…</p>`, root);
    return;
  }
  const v = view;
  const a = v.report;
  render(
    html` <header class="top">
        <div>
          <h1>Credit analysis: ${v.id}</h1>
          <p class="muted">${v.runDir}${v.baselineDir ? html` · baseline <b>${v.baselineDir.split(/[\\/]/).pop()}</b>` : nothing}</p>
        </div>
        <div class="actions">
          ${busy ? html`<vscode-progress-ring class="busy" aria-label="analysing"></vscode-progress-ring>` : nothing}
          <vscode-button
            secondary
            title="Charts of this run's metrics"
            @click=${() => send({ kind: 'command', method: 'analysis/openDashboard', params: { runDir: v.runDir } })}
            >Dashboard</vscode-button
          >
          <vscode-button
            secondary
            class="baseline"
            title="the credit analysis's comparison appendix: these tables against a baseline run's"
            @click=${() => send({ kind: 'command', method: 'analysis/pickBaseline', params: {} })}
            >${v.baselineDir ? 'Change baseline…' : 'Compare with baseline…'}</vscode-button
          >
          ${v.baselineDir ? html`<vscode-button secondary @click=${() => send({ kind: 'command', method: 'analysis/clearBaseline', params: {} })}>Clear baseline</vscode-button>` : nothing}
        </div>
      </header>
      ${rangeForm(v)}
      <div class=${busy ? 'content stale' : 'content'}>${v.error ? html`<p class="error">${v.error}</p>` : nothing} ${a ? body(v) : nothing}</div>`,
    root,
  );
  root.setAttribute('aria-busy', busy ? 'true' : 'false');
  if (a) paintCanvases(v);
}

function paintCanvases(v: AnalysisView): void {
  const a = v.report!;
  const [blue, orange] = theme.palette;
  const bins = root.querySelector<HTMLCanvasElement>('canvas.bin-bars');
  if (bins)
    drawBars(
      bins,
      a.relative_position.map((b) => ({ label: binLabel(b.lo, b.hi), value: b.mean_contribution })),
      theme,
      blue,
    );
  const tb = root.querySelector<HTMLCanvasElement>('canvas.t-bars');
  if (tb) {
    const byPos = a.position_t_stats.by_position;
    // Label every k-th position so the labels do not overlap.
    const every = Math.max(1, Math.ceil(byPos.length / 16));
    drawBars(
      tb,
      byPos.map((p) => ({ label: p.position % every === 0 ? String(p.position) : '', value: p.t })),
      theme,
      orange,
    );
  }
  const boxes = root.querySelector<HTMLCanvasElement>('canvas.boxes');
  if (boxes) drawWeightBoxes(boxes, a.weights.sections, theme);
}

/** One horizontal box per section on a shared axis: whiskers min–max, box p10–p90, tick at p50, dot at the mean. */
function drawWeightBoxes(
  canvas: HTMLCanvasElement,
  sections: Record<
    Section,
    { count: number; mean: number | null; min: number | null; p10: number | null; p50: number | null; p90: number | null; max: number | null }
  >,
  t: ChartTheme,
): void {
  const names = (Object.keys(sections) as Section[]).filter((s) => sections[s].count > 0);
  const r = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600;
  const rowH = 26;
  const h = Math.max(1, names.length) * rowH + 24;
  canvas.style.height = `${h}px`;
  canvas.width = Math.round(w * r);
  canvas.height = Math.round(h * r);
  const ctx = canvas.getContext('2d')!;
  ctx.scale(r, r);
  ctx.clearRect(0, 0, w, h);
  const vals = names.flatMap((s) => [sections[s].min, sections[s].max]).filter((x): x is number => x !== null);
  if (!vals.length) return;
  let lo = Math.min(...vals);
  let hi = Math.max(...vals);
  if (hi === lo) {
    lo -= 0.5;
    hi += 0.5;
  }
  const left = 70;
  const right = w - 16;
  const x = (v: number) => left + ((v - lo) / (hi - lo)) * (right - left);
  const font = t.font.replace(/^\S+\s/, '');
  ctx.font = `11px ${font}`;
  names.forEach((s, i) => {
    const st = sections[s];
    const cy = 10 + i * rowH + rowH / 2;
    const colour = t.palette[i % t.palette.length];
    ctx.fillStyle = t.foreground;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ctx.fillText(s, left - 8, cy);
    if (st.min === null || st.max === null || st.p10 === null || st.p90 === null || st.p50 === null) return;
    ctx.strokeStyle = colour;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(x(st.min), cy);
    ctx.lineTo(x(st.max), cy);
    ctx.moveTo(x(st.min), cy - 5);
    ctx.lineTo(x(st.min), cy + 5);
    ctx.moveTo(x(st.max), cy - 5);
    ctx.lineTo(x(st.max), cy + 5);
    ctx.stroke();
    ctx.globalAlpha = 0.35;
    ctx.fillStyle = colour;
    ctx.fillRect(x(st.p10), cy - 8, Math.max(2, x(st.p90) - x(st.p10)), 16);
    ctx.globalAlpha = 1;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x(st.p50), cy - 8);
    ctx.lineTo(x(st.p50), cy + 8);
    ctx.stroke();
    if (st.mean !== null) {
      ctx.fillStyle = t.foreground;
      ctx.beginPath();
      ctx.arc(x(st.mean), cy, 3, 0, 2 * Math.PI);
      ctx.fill();
    }
  });
  ctx.fillStyle = t.muted;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'bottom';
  for (const v of [lo, (lo + hi) / 2, hi]) ctx.fillText(fmt(v), x(v), h - 2);
}

host.onMessage((m) => {
  if (m.method === 'analysis/busy') {
    busy = true;
    host.setState({ runDir: m.params.runDir, from: m.params.from, to: m.params.to, baselineDir: m.params.baselineDir } satisfies AnalysisPanelState);
  } else if (m.method === 'analysis/result') {
    busy = false;
    view = m.params;
    host.setState({ runDir: view.runDir, from: view.from, to: view.to, baselineDir: view.baselineDir });
  }
  draw();
});
document.body.dataset.chartForeground = theme.foreground;
onThemeChange(() => {
  theme = readTheme();
  document.body.dataset.chartForeground = theme.foreground;
  if (view?.report) paintCanvases(view);
});
new ResizeObserver(() => view?.report && paintCanvases(view)).observe(root);
draw();
send({ kind: 'command', method: 'webview/ready', params: {} });
