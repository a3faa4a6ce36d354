// Painting episode documents (as GitLens' heatmap does): each token's value falls in one of a fixed set of
// buckets, each bucket has one TextEditorDecorationType, and a repaint is one setDecorations call per bucket.
// The types are disposed and made again only when the palette changes (diverging ↔ sequential, or into or
// out of a high-contrast theme); disposing a type removes its decorations from every editor.
import * as vscode from 'vscode';
import { onSettingChange, readSettings, setHeatmapNormalization } from '../vscode_settings';
import { probeReliability } from './probe_reliability';
import { positionOf, valueRangeOfEpisode, type HeatmapEpisode } from './episode';
import { EPISODE_SCHEME, type EpisodeStore } from './episode_doc';
import {
  bucketColors,
  formatScale,
  formatValue,
  scaleKey,
  scaleSense,
  isMetricId,
  metricDef,
  nextMetric,
  quantise,
  scaleFor,
  unionRange,
  DIVERGING_SIDE,
  METRICS,
  type MetricId,
  type Normalization,
  isProbeMetric,
  type Scale,
  type ThemeKind,
} from './scales';

const METRIC_KEY = 'creditLens.heatmap.metric';

/** The metric every episode is painted by (remembered across sessions) and the normalisation setting. */
export class HeatmapState implements vscode.Disposable {
  private current: MetricId;
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];

  /** whether the metric is one the user chose (the picker, a cycle), not the default */
  private chosen: boolean;

  constructor(private readonly memento: vscode.Memento) {
    const saved = memento.get<string>(METRIC_KEY);
    this.current = isMetricId(saved) ? saved : 'effective_advantage';
    this.chosen = isMetricId(saved);
    this.disposables.push(onSettingChange('heatmapNormalization', () => this.changed.fire()));
  }

  get metric(): MetricId {
    return this.current;
  }

  get explicit(): boolean {
    return this.chosen;
  }

  async setMetric(m: MetricId): Promise<void> {
    if (m === this.current && this.chosen) return;
    this.current = m;
    this.chosen = true;
    this.changed.fire();
    await this.memento.update(METRIC_KEY, m);
  }

  get normalization(): Normalization {
    return readSettings().heatmapNormalization;
  }

  async setNormalization(n: Normalization): Promise<void> {
    await setHeatmapNormalization(n);
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

/** What was painted last, for the status bar and for measuring (`creditLens._lastPaint`). */
export interface PaintResult {
  uri: string;
  metric: MetricId;
  normalization: Normalization;
  scale: Scale | null;
  tokens: number;
  /** tokens whose MC credit δ is within 2 standard errors of 0, left unpainted */
  noise: number;
  /** painted by an MC metric: tokens without a Monte Carlo value */
  unprobed: number;
  ms: number;
}

interface Palette {
  kind: Scale['kind'];
  highContrast: boolean;
  types: vscode.TextEditorDecorationType[];
}

function themeKind(): ThemeKind {
  switch (vscode.window.activeColorTheme.kind) {
    case vscode.ColorThemeKind.Light:
      return 'light';
    case vscode.ColorThemeKind.HighContrast:
      return 'highContrast';
    case vscode.ColorThemeKind.HighContrastLight:
      return 'highContrastLight';
    default:
      return 'dark';
  }
}

export class Painter implements vscode.Disposable {
  private palette: Palette | null = null;
  private readonly promptType = vscode.window.createTextEditorDecorationType({
    opacity: '0.6',
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly headerType = vscode.window.createTextEditorDecorationType({
    fontWeight: 'bold',
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly legendType = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor('descriptionForeground'), fontStyle: 'italic' },
  });
  /** Painted by a Monte Carlo metric (mc_*): the tokens the probe has no value for, shown as not probed. */
  private readonly unprobedType = vscode.window.createTextEditorDecorationType({
    textDecoration: 'underline dotted',
    opacity: '0.7',
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  /**
   * A Monte Carlo δ within 2 standard errors of 0: noise at this M, so no colour that reads as credit; a grey wavy
   * underline says "measured, and nothing found" apart from "not probed" (dotted).
   */
  private readonly noiseType = vscode.window.createTextEditorDecorationType({
    textDecoration: 'underline wavy rgba(128, 128, 128, 0.8)',
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  /** Token ranges of each view, built on its first paint and reused by every repaint. */
  private readonly ranges = new WeakMap<HeatmapEpisode, (vscode.Range | null)[]>();
  /** What each editor shows now; an editor whose key differs (new, or shown again) is repainted. */
  private readonly painted = new WeakMap<vscode.TextEditor, string>();
  private readonly status = vscode.window.createStatusBarItem('creditLens.heatmap', vscode.StatusBarAlignment.Right, 100);
  private readonly disposables: vscode.Disposable[] = [];
  private generation = 0;
  last: PaintResult | null = null;

  constructor(
    private readonly store: EpisodeStore,
    readonly state: HeatmapState,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.status.name = 'Credit Lens Heatmap';
    this.status.command = 'creditLens.heatmap.chooseMetric';
    this.disposables.push(
      this.promptType,
      this.headerType,
      this.legendType,
      this.unprobedType,
      this.noiseType,
      this.status,
      state.onDidChange(() => this.repaintAll()),
      store.onDidLoad(() => this.repaintAll()),
      vscode.window.onDidChangeVisibleTextEditors(() => this.paintVisible()),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateStatus()),
      vscode.window.onDidChangeActiveColorTheme(() => {
        const hc = isHighContrast(themeKind());
        if (this.palette && this.palette.highContrast !== hc) this.dropPalette();
        this.repaintAll();
      }),
      vscode.workspace.onDidOpenTextDocument((d) => d.uri.scheme === EPISODE_SCHEME && setTimeout(() => this.paintVisible(), 0)),
    );
  }

  /** The metric an episode is painted by: the chosen one, or the first one its run has when it lacks that one. */
  metricFor(view: HeatmapEpisode): MetricId {
    return this.metricChoice(view).metric;
  }

  /**
   * The metric and, where it is not the one asked for, why. Â is the default, and under one advantage per episode
   * (strategy none, the most common run) every token of an episode shares it: one flat wash says nothing a newcomer can
   * see. Unless Â was chosen, such an episode opens on realized credit where the run logged it, else on c_Â = Â·log π,
   * which varies with each token's probability.
   */
  metricChoice(view: HeatmapEpisode): { metric: MetricId; why: string | null } {
    const available = view.tables.available();
    const metric = available.includes(this.state.metric) ? this.state.metric : (available[0] ?? this.state.metric);
    if (metric !== 'effective_advantage' || this.state.explicit) return { metric, why: null };
    const shared = sharedValue(view.tables.column(metric), view.tables.trainedRows(view.rows));
    if (shared === null) return { metric, why: null };
    const realized = view.tables.column('realized');
    const instead = realized && view.rows.some((r) => Number.isFinite(realized[r]) && realized[r] !== 0) ? 'realized' : 'contribution';
    if (!available.includes(instead)) return { metric, why: null };
    return {
      metric: instead,
      why: `every token shares Â = ${shared > 0 ? '+' : ''}${formatValue(shared)} (one advantage for the episode, as under strategy none): painting ${metricDef(instead).label}`,
    };
  }

  /** Metrics of the active episode's run, for cycling and for the QuickPick. */
  availableMetrics(): MetricId[] {
    const view = this.activeView();
    return view ? view.tables.available() : METRICS.map((m) => m.id);
  }

  activeView(): HeatmapEpisode | undefined {
    const ed = vscode.window.activeTextEditor;
    return ed?.document.uri.scheme === EPISODE_SCHEME ? this.store.view(ed.document.uri) : undefined;
  }

  async cycleMetric(direction: 1 | -1 = 1): Promise<void> {
    const view = this.activeView();
    const current = view ? this.metricFor(view) : this.state.metric;
    await this.state.setMetric(nextMetric(current, this.availableMetrics(), direction));
  }

  /** The value range an episode is painted over: its own or its step's, joined with its compared episode's. */
  scaleOf(view: HeatmapEpisode, metric: MetricId): Scale | null {
    const def = metricDef(metric);
    const perStep = this.state.normalization === 'step';
    const own = perStep ? view.tables.stepRange(metric) : valueRangeOfEpisode(view.tables, view.ref.episode, metric);
    let other = null;
    if (view.pair) {
      const o = this.store.rowsOf(view.pair);
      if (o) other = perStep ? o.tables.stepRange(metric) : valueRangeOfEpisode(o.tables, view.pair.episode, metric);
    }
    return scaleFor(def, unionRange([own, other]));
  }

  paintVisible(): void {
    for (const ed of vscode.window.visibleTextEditors) {
      if (ed.document.uri.scheme !== EPISODE_SCHEME) continue;
      if (this.painted.get(ed) !== this.paintKey()) this.paint(ed);
    }
    this.updateStatus();
  }

  repaintAll(): void {
    this.generation++;
    this.paintVisible();
  }

  private paintKey(): string {
    return `${this.generation}:${this.state.metric}:${this.state.normalization}`;
  }

  paint(editor: vscode.TextEditor): PaintResult | null {
    const view = this.store.view(editor.document.uri);
    if (!view) return null;
    const t0 = performance.now();
    const { metric, why } = this.metricChoice(view);
    const scale = this.scaleOf(view, metric);
    const col = view.tables.column(metric);
    const ranges = this.tokenRanges(view);
    let unprobed = 0;
    if (isProbeMetric(metric)) {
      const value = view.tables.column('extra.mc_value');
      const missing: vscode.Range[] = [];
      view.rows.forEach((r, i) => {
        if ((!value || Number.isNaN(value[r])) && ranges[i]) missing.push(ranges[i]!);
      });
      unprobed = missing.length;
      editor.setDecorations(this.unprobedType, missing);
    } else editor.setDecorations(this.unprobedType, []);
    const def = metricDef(metric);
    // a token that did not train was pushed neither way: a metric of the update's direction leaves it unpainted
    const untrained = view.rows.length - view.tables.trainedRows(view.rows).length;
    const noisy = withinNoise(view, metric);
    editor.setDecorations(
      this.noiseType,
      noisy.flatMap((n, i) => (n && ranges[i] ? [ranges[i]!] : [])),
    );
    if (scale && col) {
      const types = this.typesFor(scale.kind);
      const buckets = quantise(scale, col, view.rows);
      const perBucket: vscode.Range[][] = types.map(() => []);
      for (let i = 0; i < buckets.length; i++) {
        const b = buckets[i];
        const r = ranges[i];
        if (def.up && !view.tables.trained(view.rows[i])) continue;
        if (noisy[i]) continue;
        if (b >= 0 && r) perBucket[b].push(r);
      }
      for (let b = 0; b < types.length; b++) editor.setDecorations(types[b], perBucket[b]);
    } else if (this.palette) {
      for (const t of this.palette.types) editor.setDecorations(t, []);
    }
    const headerEnd = view.header.length;
    const lines = view.lineStarts;
    const at = (offset: number) => {
      const [l, c] = positionOf(lines, offset);
      return new vscode.Position(l, c);
    };
    editor.setDecorations(this.headerType, [new vscode.Range(0, 0, 0, headerEnd)]);
    editor.setDecorations(this.promptType, [new vscode.Range(at(view.promptOffset), at(view.completionOffset))]);
    const norm = this.state.normalization;
    editor.setDecorations(this.legendType, [
      {
        // On the empty line under the header: a header that wraps would push it off the right edge.
        range: new vscode.Range(1, 0, 1, 0),
        renderOptions: {
          after: {
            contentText:
              `${why ? `${why} · ` : ''}${scaleKey(def, scale)} · per ${norm}${view.pair ? ' · shared' : ''}` +
              `${untrained ? ` · ${untrained} tokens did not train (${def.up ? 'unpainted' : 'outside the range'})` : ''}` +
              `${unprobed ? ` · ${unprobed} tokens not probed (dotted)` : ''}` +
              `${noisy.some(Boolean) ? ` · ${noisy.filter(Boolean).length} δ within 2 se of 0: noise at this M (grey wavy, unpainted)` : ''}` +
              `${isProbeMetric(metric) ? probeReliabilityNote(view.ref.runDir, view.ref.step) : ''}`,
          },
        },
      },
    ]);
    const ms = performance.now() - t0;
    this.painted.set(editor, this.paintKey());
    const noise = noisy.filter(Boolean).length;
    this.last = { uri: editor.document.uri.toString(), metric, normalization: norm, scale, tokens: view.rows.length, unprobed, noise, ms };
    this.log.info(
      `heatmap: painted ${view.rows.length} tokens of ${view.runName} step ${view.ref.step} episode ${view.ref.episode} by ${metric} ${formatScale(scale)} per ${norm} in ${ms.toFixed(2)} ms` +
        (noise ? ` (${noise} δ within 2 se of 0 left unpainted)` : ''),
    );
    if (editor === vscode.window.activeTextEditor) this.updateStatus();
    return this.last;
  }

  private tokenRanges(view: HeatmapEpisode): (vscode.Range | null)[] {
    let out = this.ranges.get(view);
    if (out) return out;
    out = new Array<vscode.Range | null>(view.rows.length);
    const lines = view.lineStarts;
    const base = view.completionOffset;
    for (let i = 0; i < view.rows.length; i++) {
      if (view.starts[i] === view.ends[i]) {
        out[i] = null; // a token that decodes to no text (a special token): nothing to paint
        continue;
      }
      const [l0, c0] = positionOf(lines, base + view.starts[i]);
      const [l1, c1] = positionOf(lines, base + view.ends[i]);
      out[i] = new vscode.Range(l0, c0, l1, c1);
    }
    this.ranges.set(view, out);
    return out;
  }

  private typesFor(kind: Scale['kind']): vscode.TextEditorDecorationType[] {
    const theme = themeKind();
    const hc = isHighContrast(theme);
    if (this.palette && this.palette.kind === kind && this.palette.highContrast === hc) return this.palette.types;
    this.dropPalette();
    // Light and dark variants of each bucket: VS Code picks the one for the current theme itself, so only a
    // switch into or out of high contrast (other opacities, an underline) makes new types.
    const light = bucketColors(kind, hc ? 'highContrastLight' : 'light');
    const dark = bucketColors(kind, hc ? 'highContrast' : 'dark');
    const n = light.length;
    const strongest = (b: number) => (kind === 'diverging' ? b === 0 || b === n - 1 : b === n - 1);
    const types = light.map((_, b) => {
      const variant = (color: string): vscode.ThemableDecorationRenderOptions => ({
        backgroundColor: color,
        ...(hc ? { borderStyle: 'solid', borderWidth: '0 0 2px 0', borderColor: opaque(color) } : {}),
        ...(strongest(b) ? { overviewRulerColor: opaque(color) } : {}),
      });
      return vscode.window.createTextEditorDecorationType({
        light: variant(light[b]),
        dark: variant(dark[b]),
        borderRadius: '2px',
        overviewRulerLane: vscode.OverviewRulerLane.Center,
        rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
      });
    });
    this.palette = { kind, highContrast: hc, types };
    this.log.debug(
      `heatmap: ${n} ${kind} decoration types (${hc ? 'high contrast' : 'light/dark'}; ${kind === 'diverging' ? `${DIVERGING_SIDE} per sign` : 'sequential'})`,
    );
    return types;
  }

  private dropPalette(): void {
    for (const t of this.palette?.types ?? []) t.dispose();
    this.palette = null;
  }

  updateStatus(): void {
    const view = this.activeView();
    if (!view) {
      this.status.hide();
      return;
    }
    const { metric, why } = this.metricChoice(view);
    const scale = this.scaleOf(view, metric);
    const norm = this.state.normalization;
    const def = metricDef(metric);
    // the key, short: which colour is which, then the range
    const sense = scale ? scaleSense(def, scale, 'short') : '';
    this.status.text = `$(symbol-color) ${def.label}: ${sense} ${formatScale(scale)}`;
    const md = new vscode.MarkdownString(undefined, true);
    md.appendMarkdown(`**Heatmap: ${def.label}** — ${def.description}\n\n`);
    if (why) md.appendMarkdown(`${why}; choose Â to paint it anyway\n\n`);
    md.appendMarkdown(`${scaleKey(def, scale)}\n\n`);
    md.appendMarkdown(`${scale?.kind ?? 'no'} scale, normalised per ${norm}${view.pair ? ' and shared with the compared episode' : ''}\n\n`);
    const last = this.last;
    if (last && last.uri === vscode.window.activeTextEditor?.document.uri.toString()) {
      md.appendMarkdown(`painted ${last.tokens} tokens in ${last.ms.toFixed(1)} ms\n\n`);
    }
    md.appendMarkdown('Click to choose the metric');
    this.status.tooltip = md;
    this.status.accessibilityInformation = { label: `Heatmap metric ${def.label}: ${scaleKey(def, scale)}, per ${norm}` };
    this.status.show();
  }

  dispose(): void {
    this.dropPalette();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

/** For MC credit δ: whether each token's δ is within 2 standard errors of 0 (noise at the probe's M); all false otherwise. */
export function withinNoise(view: HeatmapEpisode, metric: MetricId): boolean[] {
  const delta = metric === 'extra.mc_delta' ? view.tables.column('extra.mc_delta') : null;
  const se = delta ? view.tables.column('extra.mc_delta_se') : null;
  return Array.from(view.rows, (r) => !!delta && !!se && Number.isFinite(delta[r]) && Number.isFinite(se[r]) && Math.abs(delta[r]) < 2 * se[r]);
}

/** The step's probe reliability for the key: " · split-half reliability 0.11: …" (the engine's own warning), or ''. */
function probeReliabilityNote(runDir: string, step: number): string {
  const r = probeReliability(runDir, step);
  if (!r) return '';
  return ` · split-half reliability ${r.full === null ? '—' : r.full.toFixed(2)}${r.warning ? `: ${r.warning}` : ''}`;
}

/** The one value every given row holds (finite rows only; at least two), or null where they differ. */
function sharedValue(col: Float32Array | null, rows: ArrayLike<number>): number | null {
  if (!col) return null;
  let v: number | null = null;
  let n = 0;
  for (let i = 0; i < rows.length; i++) {
    const x = col[rows[i]];
    if (!Number.isFinite(x)) continue;
    if (v !== null && x !== v) return null;
    v = x;
    n++;
  }
  return n >= 2 ? v : null;
}

function isHighContrast(t: ThemeKind): boolean {
  return t === 'highContrast' || t === 'highContrastLight';
}

/** The bucket's hue at full opacity, for the overview ruler and the high-contrast underline. */
function opaque(rgba: string): string {
  return rgba.replace(/^rgba\((\d+), (\d+), (\d+), [\d.]+\)$/, 'rgb($1, $2, $3)');
}
