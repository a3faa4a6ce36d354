// The dashboard's state: what the page shows, as the host sent it and the user set it. Everything the components read
// comes from here, so a component can be drawn (and tested) from a state alone.
import type { MetricsComparison, MetricsRunData, MetricsViewInit } from '../../protocol/metrics_view';
import type { ChartTheme } from '../charts';
import { formatValue as fmt } from '../../protocol/number_format';
import { DEFAULT_VIEW, phaseOfX, type ChartSpec, type ChartView, type RunPoints } from '../metrics_series';

export interface RunState {
  data: MetricsRunData;
  points: RunPoints;
}

/** How many live latencies the page keeps (shown in the header, read by the e2e suite). */
export const LATENCY_WINDOW = 50;

export interface DashboardState {
  /** one run's dashboard, or a comparison of runs */
  mode: MetricsViewInit['mode'];
  view: ChartView;
  runs: RunState[];
  /** each run's short label, in run order */
  labels: string[];
  theme: ChartTheme;
  comparison: MetricsComparison | null;
  /** the last live points' latencies, ms */
  latencies: number[];
}

/** A saved view read defensively: the page's saved state is whatever an older version wrote. */
export function restoredView(v: unknown): ChartView {
  const r = (v ?? {}) as Partial<ChartView>;
  return {
    includeSft: typeof r.includeSft === 'boolean' ? r.includeSft : DEFAULT_VIEW.includeSft,
    smoothing: typeof r.smoothing === 'number' && r.smoothing >= 0 && r.smoothing < 1 ? r.smoothing : DEFAULT_VIEW.smoothing,
  };
}

/** Until the host's init message arrives: a restored page knows its mode and its view from its saved state. */
export function initialState(saved: { mode?: MetricsViewInit['mode']; view?: unknown } | undefined, theme: ChartTheme): DashboardState {
  return { mode: saved?.mode ?? 'dashboard', view: restoredView(saved?.view), runs: [], labels: [], theme, comparison: null, latencies: [] };
}

export const runLabel = (s: DashboardState, r: RunState): string => s.labels[s.runs.indexOf(r)] ?? r.data.id;

export const runColour = (s: DashboardState, run: number): string => s.theme.palette[run % s.theme.palette.length];

/** A line's colour: by run in a comparison, by series on one run's dashboard. */
export const colourOf = (s: DashboardState, c: { run: number; index: number }): string =>
  s.mode === 'compare' ? runColour(s, c.run) : s.theme.palette[c.index % s.theme.palette.length];

/** What the cursor calls an x: a GRPO step, the eval before GRPO, or an SFT step. */
export function xLabel(s: DashboardState, x: number): string {
  if (x >= 0) return x === 0 ? 'eval before GRPO' : `GRPO step ${x}`;
  // With one run the SFT step is known exactly; runs of a comparison may have warmed up for different lengths.
  return s.runs.length === 1 ? `SFT step ${x + s.runs[0].data.sftSteps + 1}` : `SFT (${x} from GRPO)`;
}

/** The median of the live latencies, or null before any. */
export function medianLatency(s: DashboardState): number | null {
  const sorted = [...s.latencies].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : null;
}

/** A run's last GRPO reward and last eval, for the legend. */
export function runSummary(r: RunState): string {
  let reward: number | undefined;
  let evalSuccess: number | undefined;
  for (const [x, v] of [...r.points].sort((a, b) => a[0] - b[0])) {
    if (phaseOfX(x) === 'grpo' && v.reward_mean !== undefined) reward = v.reward_mean;
    if (v.eval_success !== undefined) evalSuccess = v.eval_success;
  }
  return `${reward !== undefined ? ` · reward ${fmt(reward)}` : ''}${evalSuccess !== undefined ? ` · eval ${fmt(evalSuccess, true)}` : ''}`;
}

/** " (N steps)" where every run warmed up for the same N SFT steps. */
export function sftText(s: DashboardState): string {
  const steps = [...new Set(s.runs.map((r) => r.data.sftSteps))];
  return steps.length === 1 && steps[0] > 0 ? ` (${steps[0].toLocaleString('en-US')} steps)` : '';
}

/** The values at the eval before GRPO in words: each, or for many runs the one value they share, or their range. */
export function beforeGrpoText(spec: ChartSpec, start: { label: string; key: string; value: number }[], nRuns: number): string {
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
