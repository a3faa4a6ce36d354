// uPlot wrappers for the dashboard, the run comparison and the analysis view. Colours come from VS Code's
// --vscode-* variables read at draw time, so a theme change repaints every chart in the new theme. uPlot
// evaluates no code and styles its DOM through the CSSOM, which the nonce CSP allows; its stylesheet is
// adopted like the page's own.
import uPlot from 'uplot';
import uplotCss from 'uplot/dist/uPlot.min.css';
import type { AlignedChart, ChartSpec } from './metrics_series';
import { adoptCss } from './ipc';
import { formatValue, niceStep } from '../protocol/number_format';

adoptCss(uplotCss);

export interface ChartTheme {
  foreground: string;
  muted: string;
  grid: string;
  background: string;
  font: string;
  /** One colour per run (comparison) or per series (dashboard). */
  palette: string[];
}

const PALETTE_VARS: [string, string][] = [
  ['--vscode-charts-blue', '#3794ff'],
  ['--vscode-charts-orange', '#d18616'],
  ['--vscode-charts-green', '#89d185'],
  ['--vscode-charts-purple', '#b180d7'],
  ['--vscode-charts-red', '#f14c4c'],
  ['--vscode-charts-yellow', '#cca700'],
  ['--vscode-terminal-ansiCyan', '#11a8cd'],
  ['--vscode-terminal-ansiMagenta', '#bc3fbc'],
];

export function readTheme(): ChartTheme {
  const cs = getComputedStyle(document.body);
  const v = (name: string, fallback: string) => cs.getPropertyValue(name).trim() || fallback;
  const size = v('--vscode-font-size', '13px');
  return {
    foreground: v('--vscode-foreground', '#cccccc'),
    muted: v('--vscode-descriptionForeground', '#9d9d9d'),
    grid: v('--vscode-editorWidget-border', v('--vscode-panel-border', '#80808040')),
    background: v('--vscode-editor-background', '#1e1e1e'),
    font: `${Math.max(10, parseFloat(size) - 2)}px ${v('--vscode-font-family', 'sans-serif')}`,
    palette: PALETTE_VARS.map(([name, fb]) => v(name, fb)),
  };
}

/** VS Code swaps the body's theme class (vscode-light/-dark/-high-contrast) on a theme change. */
export function onThemeChange(fn: () => void): void {
  let last = document.body.className + document.body.dataset.vscodeThemeId;
  new MutationObserver(() => {
    const now = document.body.className + document.body.dataset.vscodeThemeId;
    if (now !== last) {
      last = now;
      fn();
    }
  }).observe(document.body, { attributes: true, attributeFilter: ['class', 'data-vscode-theme-id'] });
}

/** Every chart's numbers in the shared format (src/protocol/number_format.ts). */
/** The charts' value format (protocol/number_format.ts), under its short name. */
export const fmt = formatValue;

export interface ChartStyle {
  /** Colour of a column: by run in a comparison, by series in a single-run dashboard. */
  colour: (column: { run: number; key: string; index: number }) => string;
  /** The legend's text for the x value under the cursor (e.g. "SFT step 40"). */
  xLabel: (x: number) => string;
}

const HEIGHT = 200;
const CURSOR_SYNC = 'credit-lens-metrics';

/** One metric chart: a uPlot instance rebuilt when its columns change, else fed new data. */
export class MetricChart {
  private plot: uPlot | null = null;
  private signature = '';
  private data: AlignedChart = { x: [], columns: [], bands: [] };
  /** The y axis's labels as last drawn: a canvas says nothing to a screen reader, so the host's label does. */
  private yTicks: string[] = [];

  constructor(
    private readonly host: HTMLElement,
    readonly spec: ChartSpec,
    private theme: ChartTheme,
    private readonly style: ChartStyle,
  ) {}

  /** Values drawn (non-null points over all columns): what the e2e suite counts. */
  get pointCount(): number {
    return this.data.columns.reduce((n, c) => n + c.values.filter((v) => v !== null).length, 0);
  }

  get aligned(): AlignedChart {
    return this.data;
  }

  setTheme(theme: ChartTheme): void {
    this.theme = theme;
    this.signature = '';
    this.update(this.data);
  }

  update(data: AlignedChart): void {
    this.data = data;
    const signature = data.columns.map((c) => `${c.run}:${c.key}:${c.label}`).join('|') + `#${data.bands.length}`;
    const uData = [data.x, ...data.columns.map((c) => c.values)] as uPlot.AlignedData;
    if (this.plot && signature === this.signature) {
      this.plot.setData(uData);
      return;
    }
    this.plot?.destroy();
    this.signature = signature;
    this.plot = new uPlot(this.options(data), uData, this.host);
  }

  resize(): void {
    const w = this.host.clientWidth;
    if (this.plot && w > 0 && Math.abs(this.plot.width - w) > 1) this.plot.setSize({ width: w, height: HEIGHT });
  }

  private options(data: AlignedChart): uPlot.Options {
    const t = this.theme;
    const pct = !!this.spec.percent;
    const axis = (extra: Partial<uPlot.Axis>): uPlot.Axis => ({
      stroke: t.muted,
      font: t.font,
      labelFont: t.font,
      grid: { stroke: t.grid, width: 1 },
      ticks: { stroke: t.grid, width: 1 },
      ...extra,
    });
    const series: uPlot.Series[] = [{ label: 'step', value: (_u, v) => (v === null || v === undefined ? '—' : this.style.xLabel(v)) }];
    data.columns.forEach((c, index) => {
      const stroke = this.style.colour({ run: c.run, key: c.key, index });
      const points = c.style === 'points';
      series.push({
        label: c.label,
        stroke,
        width: points ? 1 : 1.5,
        dash: points ? [4, 3] : undefined,
        // Sparse series (eval every eval_every steps) join their markers across the steps without one.
        spanGaps: points,
        points: { show: points ? true : undefined, size: points ? 6 : 4, stroke, fill: points ? stroke : t.background },
        value: (_u, v) => fmt(v, pct),
      });
    });
    return {
      width: Math.max(200, this.host.clientWidth),
      height: HEIGHT,
      series,
      scales: { x: { time: false }, y: { range: (_u, lo, hi) => this.yRange(lo, hi) } },
      axes: [
        // Steps are whole numbers: no tick at step 1.5.
        axis({ incrs: [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000] }),
        // the gutter as wide as the widest label (a fixed one clipped "−0.0025" to "0.0025"), and no narrower than 40
        axis({ size: (u, vals) => this.gutter(u, vals), values: (_u, vals) => vals.map((v) => (pct ? `${Math.round(v * 100)}%` : fmt(v))) }),
      ],
      legend: { show: true, live: true },
      // One cursor across every chart of the page: the step under the mouse is read off all of them at once.
      cursor: { drag: { x: true, y: false }, points: { size: 6 }, sync: { key: CURSOR_SYNC, setSeries: false } },
      hooks: { drawAxes: [(u) => this.underlay(u)], draw: [() => this.describe()] },
    };
  }

  /** "Loss: y axis −0.0025 to 0.005 (−0.0025, 0, 0.0025, 0.005)", on the chart's host, read by screen readers. */
  private describe(): void {
    if (!this.yTicks.length) return;
    const label = `${this.spec.title}: y axis ${this.yTicks[0]} to ${this.yTicks[this.yTicks.length - 1]} (${this.yTicks.join(', ')})`;
    this.host.setAttribute('role', 'img');
    if (this.host.getAttribute('aria-label') !== label) this.host.setAttribute('aria-label', label);
  }

  /** The y axis's width in CSS pixels: its widest tick label in the axis font, plus the tick and a gap. */
  private gutter(u: uPlot, values: string[] | null): number {
    this.yTicks = values ?? [];
    if (!values?.length) return 40;
    const ctx = u.ctx;
    ctx.save();
    ctx.font = this.theme.font;
    const widest = Math.max(...values.map((v) => ctx.measureText(v).width));
    ctx.restore();
    return Math.max(40, Math.ceil(widest) + 16);
  }

  /** The data's range widened to hold the std bands; a share axis starts at 0 and ends by 100%. */
  private yRange(lo: number | null, hi: number | null): uPlot.Range.MinMax {
    let min = lo ?? Infinity;
    let max = hi ?? -Infinity;
    for (const b of this.data.bands) {
      for (const v of b.lo) if (v !== null && v < min) min = v;
      for (const v of b.hi) if (v !== null && v > max) max = v;
    }
    for (const c of this.data.columns)
      for (const v of c.raw ?? []) {
        if (v !== null && v < min) min = v;
        if (v !== null && v > max) max = v;
      }
    if (!Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
    if (this.spec.percent) return [0, Math.min(1, Math.max(0.05, max * 1.15))];
    // A constant series (KL with kl_beta 0) gets a band around its value rather than uPlot's 0–100.
    if (min === max) {
      const pad = Math.abs(min) * 0.1 || 1;
      return [min - pad, max + pad];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  /** Under the series: the SFT region shaded and labelled, then each run's mean ± std band. */
  private underlay(u: uPlot): void {
    const { ctx } = u;
    const { left, top, width, height } = u.bbox;
    const t = this.theme;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    const x = this.data.x;
    if (x.length && x[0] < 0) {
      const x0 = Math.max(left, u.valToPos(x[0] - 0.5, 'x', true));
      const x1 = Math.min(left + width, u.valToPos(-0.5, 'x', true));
      if (x1 > x0) {
        ctx.globalAlpha = 0.08;
        ctx.fillStyle = t.foreground;
        ctx.fillRect(x0, top, x1 - x0, height);
        ctx.globalAlpha = 1;
        ctx.fillStyle = t.muted;
        ctx.font = t.font.replace(/^(\d+(\.\d+)?)px/, (_m, n) => `${Number(n) * uPlot.pxRatio}px`);
        // uPlot leaves its last axis label's alignment on the context.
        ctx.textAlign = 'left';
        ctx.textBaseline = 'top';
        ctx.fillText('SFT', x0 + 4 * uPlot.pxRatio, top + 4 * uPlot.pxRatio);
        if (x1 < left + width - 40 * uPlot.pxRatio) ctx.fillText('GRPO', x1 + 4 * uPlot.pxRatio, top + 4 * uPlot.pxRatio);
      }
    }
    // Smoothing on: the logged values faintly behind their moving average, as TensorBoard draws them.
    this.data.columns.forEach((c, index) => {
      if (!c.raw) return;
      ctx.strokeStyle = this.style.colour({ run: c.run, key: c.key, index });
      ctx.globalAlpha = 0.25;
      ctx.lineWidth = uPlot.pxRatio;
      ctx.beginPath();
      let open = false;
      c.raw.forEach((v, i) => {
        if (v === null) {
          open = false;
          return;
        }
        const px = u.valToPos(x[i], 'x', true);
        const py = u.valToPos(v, 'y', true);
        if (open) ctx.lineTo(px, py);
        else ctx.moveTo(px, py);
        open = true;
      });
      ctx.stroke();
      ctx.globalAlpha = 1;
    });
    for (const b of this.data.bands) {
      ctx.fillStyle = this.style.colour({ run: b.run, key: this.spec.band!.mean, index: 0 });
      ctx.globalAlpha = 0.2;
      // One polygon per stretch of consecutive points that have both bounds.
      let i = 0;
      while (i < x.length) {
        while (i < x.length && (b.lo[i] === null || b.hi[i] === null)) i++;
        const start = i;
        while (i < x.length && b.lo[i] !== null && b.hi[i] !== null) i++;
        if (i - start < 1) continue;
        ctx.beginPath();
        for (let k = start; k < i; k++) {
          const px = u.valToPos(x[k], 'x', true);
          const py = u.valToPos(b.hi[k]!, 'y', true);
          if (k === start) ctx.moveTo(px, py);
          else ctx.lineTo(px, py);
        }
        for (let k = i - 1; k >= start; k--) ctx.lineTo(u.valToPos(x[k], 'x', true), u.valToPos(b.lo[k]!, 'y', true));
        ctx.closePath();
        ctx.fill();
      }
      ctx.globalAlpha = 1;
    }
    ctx.restore();
  }

  /** Whether the plot's canvas holds any drawn (non-transparent) pixel inside the plotting area. */
  hasInk(): boolean {
    if (!this.plot) return false;
    const { left, top, width, height } = this.plot.bbox;
    if (width < 1 || height < 1) return false;
    const img = this.plot.ctx.getImageData(left, top, width, height).data;
    for (let i = 3; i < img.length; i += 4) if (img[i] !== 0) return true;
    return false;
  }

  /**
   * The chart as a PNG data URL, composed with its title on top and a legend below (uPlot's legend is HTML,
   * not part of its canvas), on the theme's background.
   */
  toPng(title: string, legend: { label: string; colour: string }[]): string {
    if (!this.plot) throw new Error('nothing drawn yet');
    const src = this.plot.ctx.canvas;
    const r = uPlot.pxRatio;
    const t = this.theme;
    const font = (px: number, weight = '') => `${weight} ${px * r}px ${t.font.replace(/^\S+\s/, '')}`.trim();
    const pad = 10 * r;
    const titleH = 24 * r;
    const rowH = 18 * r;
    const perRow = Math.max(1, Math.floor(src.width / (220 * r)));
    const legendH = Math.ceil(legend.length / perRow) * rowH + pad;
    const out = document.createElement('canvas');
    out.width = src.width + 2 * pad;
    out.height = titleH + src.height + legendH + pad;
    const ctx = out.getContext('2d')!;
    ctx.fillStyle = t.background;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.fillStyle = t.foreground;
    ctx.font = font(13, '600');
    ctx.textBaseline = 'middle';
    ctx.fillText(title, pad, titleH / 2 + pad / 2);
    ctx.drawImage(src, pad, titleH);
    ctx.font = font(12);
    legend.forEach((e, i) => {
      const x = pad + (i % perRow) * 220 * r;
      const y = titleH + src.height + pad / 2 + Math.floor(i / perRow) * rowH + rowH / 2;
      ctx.fillStyle = e.colour;
      ctx.fillRect(x, y - 2 * r, 14 * r, 4 * r);
      ctx.fillStyle = t.foreground;
      ctx.fillText(e.label, x + 20 * r, y, 190 * r);
    });
    return out.toDataURL('image/png');
  }

  destroy(): void {
    this.plot?.destroy();
    this.plot = null;
  }
}

/**
 * A bar chart of one value per category (the analysis view's position bins), signed values around a zero
 * line. Plain canvas: uPlot's bar paths need its x axis to be numeric and the bins are labelled ranges.
 */
export function drawBars(
  canvas: HTMLCanvasElement,
  bars: { label: string; value: number | null }[],
  theme: ChartTheme,
  colour: string,
  opts: {
    /** heights on log10(1 + count): a histogram's tail next to its peak */
    logY?: boolean;
    /** bins of equal width over [lo, hi): ticks at round values along the axis instead of a label under each bar */
    axis?: { lo: number; hi: number };
  } = {},
): void {
  const r = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || 600;
  const cssH = canvas.clientHeight || 180;
  canvas.width = Math.round(cssW * r);
  canvas.height = Math.round(cssH * r);
  const ctx = canvas.getContext('2d')!;
  ctx.scale(r, r);
  ctx.clearRect(0, 0, cssW, cssH);
  const log = !!opts.logY;
  const scaled = (v: number) => (log ? Math.log10(1 + Math.max(0, v)) : v);
  const values = bars.map((b) => b.value).filter((v): v is number => v !== null && Number.isFinite(v));
  const max = Math.max(0, ...values.map(scaled));
  const min = Math.min(0, ...values.map(scaled));
  const span = max - min || 1;
  const left = 56;
  const bottom = 22;
  const top = 8;
  // room at the right for the last edge label, centred on the plot's right end
  const w = cssW - left - (opts.axis ? 24 : 8);
  const h = cssH - bottom - top;
  const y = (v: number) => top + ((max - v) / span) * h;
  ctx.font = readFont(theme, 11);
  ctx.fillStyle = theme.muted;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  if (log) {
    // powers of ten on a log axis: 1, 10, 100, … up to the largest count
    const top10 = Math.floor(Math.log10(Math.max(1, ...values)));
    for (let k = 0; k <= top10; k++) ctx.fillText((10 ** k).toLocaleString('en-US'), left - 6, y(Math.log10(1 + 10 ** k)));
    ctx.fillText('0', left - 6, y(0));
  } else
    for (const v of [max, 0, min]) {
      if (v === 0 && (max === 0 || min === 0) && v !== max && v !== min) continue;
      ctx.fillText(fmt(v), left - 6, y(v));
    }
  ctx.strokeStyle = theme.grid;
  ctx.beginPath();
  ctx.moveTo(left, y(0));
  ctx.lineTo(left + w, y(0));
  ctx.stroke();
  const bw = w / Math.max(1, bars.length);
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const axis = opts.axis;
  bars.forEach((b, i) => {
    const x = left + i * bw;
    if (b.value !== null && Number.isFinite(b.value) && b.value !== 0) {
      ctx.fillStyle = colour;
      const y0 = y(Math.max(0, scaled(b.value)));
      const y1 = y(Math.min(0, scaled(b.value)));
      // histogram bins touch (a gap of a pixel between them); categories keep their spacing
      if (axis) ctx.fillRect(x + 0.5, y0, Math.max(1, bw - 1), Math.max(1, y1 - y0));
      else ctx.fillRect(x + bw * 0.15, y0, bw * 0.7, Math.max(1, y1 - y0));
    }
    ctx.fillStyle = theme.muted;
    if (!axis) ctx.fillText(b.label, x + bw / 2, top + h + 6);
  });
  if (axis && axis.hi > axis.lo) {
    // about five ticks at multiples of a round step (0, 0.5, 1, … or −1, 0, 1), wherever the bins start
    const step = niceStep((axis.hi - axis.lo) / 5);
    for (let k = Math.ceil(axis.lo / step - 1e-9); k * step <= axis.hi + 1e-9 * step; k++) {
      const v = k * step;
      const x = left + ((v - axis.lo) / (axis.hi - axis.lo)) * w;
      ctx.strokeStyle = theme.grid;
      ctx.beginPath();
      ctx.moveTo(x, top + h);
      ctx.lineTo(x, top + h + 3);
      ctx.stroke();
      ctx.fillStyle = theme.muted;
      ctx.textAlign = 'center';
      ctx.fillText(fmt(Math.abs(v) < step * 1e-9 ? 0 : v), x, top + h + 6);
    }
  }
}

function readFont(theme: ChartTheme, px: number): string {
  return `${px}px ${theme.font.replace(/^\S+\s/, '')}`;
}
