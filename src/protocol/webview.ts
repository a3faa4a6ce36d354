// Messages between the extension host and its webviews (DESIGN §1, GitLens' protocol pattern): every message
// of every webview is declared here, and both sides import this file, so a renamed field breaks the build,
// not the user. Types only.
import type { AnalyzeReport } from './analysis';
import type { MetricsRow, RunStatus } from './index';

/** Host → webview. `P` is what the webview receives. */
export interface IpcNotification<M extends string, P> {
  readonly kind: 'notification';
  readonly method: M;
  readonly params: P;
}

/** Webview → host. */
export interface IpcCommand<M extends string, P> {
  readonly kind: 'command';
  readonly method: M;
  readonly params: P;
}

/** A webview's whole protocol: what the host may send it, what it may send the host, what it persists. */
export interface WebviewProtocol<ToWebview extends IpcNotification<string, unknown>, ToHost extends IpcCommand<string, unknown>, State> {
  toWebview: ToWebview;
  toHost: ToHost;
  /** Kept by `vscode.setState` and handed back to the host's `WebviewPanelSerializer` after a reload. */
  state: State;
}

// ---- sweep summary (src/extension/sweep_panel.ts ↔ src/webviews/sweep.main.ts) ----

/** A sweep run that has not started yet has no run directory; a cancelled one never will. */
export type SweepRowStatus = RunStatus | 'queued' | 'cancelled';

export interface SweepRow {
  /** Stable within the sweep: the run's position in the expansion. */
  index: number;
  name: string;
  strategy: string;
  /** The sweep's overrides for this run, e.g. `{ "credit.think_discount": 0.25 }`. */
  params: Record<string, string | number | boolean | null>;
  status: SweepRowStatus;
  runDir: string | null;
  step: number | null;
  totalSteps: number | null;
  finalEvalSuccess: number | null;
  bestEvalSuccess: number | null;
  /** First GRPO step whose training success rate reached 10%; null if it never did (yet). */
  stepsTo10pct: number | null;
  meanGradNorm: number | null;
  /** Mean |contribution| of filler tokens over that of reasoning tokens, from `credit-lens analyze`. */
  fillerReasoningRatio: number | null;
}

export interface SweepView {
  sweepId: string;
  title: string;
  configPath: string;
  created: string;
  rows: SweepRow[];
  /** Runs that have ended (completed, failed, stopped or cancelled). */
  done: number;
  total: number;
  active: boolean;
}

export type SweepSortKey = 'index' | 'name' | 'strategy' | 'status' | 'finalEvalSuccess' | 'bestEvalSuccess'
  | 'stepsTo10pct' | 'meanGradNorm' | 'fillerReasoningRatio';

export interface SweepPanelState {
  sweepId: string;
  sort: { key: SweepSortKey; descending: boolean };
}

export type SweepToWebview = IpcNotification<'sweep/update', SweepView>;

export type SweepToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  | IpcCommand<'sweep/openRun', { runDir: string }>
  | IpcCommand<'sweep/cancel', Record<string, never>>;

export type SweepProtocol = WebviewProtocol<SweepToWebview, SweepToHost, SweepPanelState>;

// ---- run dashboard and run comparison (src/extension/panels/{dashboard,compare}_panel.ts ↔
//      src/webviews/{dashboard,compare}.main.ts; both draw with src/webviews/metrics_view.ts) ----

/** One run's metrics as the charts need them: every metrics.jsonl row, and where SFT ends. */
export interface MetricsRunData {
  runDir: string;
  /** The run directory's name (`<name>-<timestamp>`): unique, so it labels the run in a comparison. */
  id: string;
  name: string;
  strategy: string | null;
  status: string;
  /**
   * `sft.steps` of the run's config.yaml. SFT step s is drawn at x = s − sftSteps − 1, so the warm start
   * fills x < 0, the eval before GRPO sits at x = 0 and GRPO step k at x = k, the same in every run.
   */
  sftSteps: number;
  rows: MetricsRow[];
}

export interface MetricsViewInit {
  mode: 'dashboard' | 'compare';
  runs: MetricsRunData[];
}

/** New rows of one run: a `run/metrics` notification of a run this window trains, or lines appended to metrics.jsonl. */
export interface MetricsAppend {
  runDir: string;
  rows: MetricsRow[];
  status: string;
  /**
   * Date.now() in the extension host when the engine's `run/metrics` notification arrived; null for rows read
   * from disk. The webview measures the update latency against it once the point is drawn.
   */
  receivedAt: number | null;
}

export interface MetricsPanelState {
  mode: 'dashboard' | 'compare';
  runDirs: string[];
}

export type MetricsToWebview =
  | IpcNotification<'metrics/init', MetricsViewInit>
  | IpcNotification<'metrics/append', MetricsAppend>;

export type MetricsToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  /** A chart composed with its title and legend, as a PNG data URL. */
  | IpcCommand<'metrics/exportPng', { chartId: string; title: string; dataUrl: string }>
  | IpcCommand<'metrics/exportCsv', { chartId: string; title: string; csv: string }>
  /** A live point is on screen; `latencyMs` is from the notification's arrival in the host to the repaint. */
  | IpcCommand<'metrics/drawn', { runDir: string; step: number; latencyMs: number }>
  | IpcCommand<'metrics/openAnalysis', { runDir: string }>
  | IpcCommand<'metrics/openRun', { runDir: string }>
  | IpcCommand<'metrics/compareWith', { runDirs: string[] }>;

export type MetricsProtocol = WebviewProtocol<MetricsToWebview, MetricsToHost, MetricsPanelState>;

// ---- credit analysis (src/extension/panels/analysis_panel.ts ↔ src/webviews/analysis.main.ts) ----

export interface AnalysisView {
  runDir: string;
  id: string;
  /** Steps with token tables, for the range filter's bounds. */
  loggedSteps: { first: number; last: number; count: number } | null;
  from: number | null;
  to: number | null;
  baselineDir: string | null;
  /** `credit-lens analyze --json` (with `appendix_b` when a baseline is chosen); null when it failed. */
  report: AnalyzeReport | null;
  error: string | null;
  /** Wall time of the analysis in the engine process, for the footer. */
  elapsedMs: number;
}

export interface AnalysisPanelState {
  runDir: string;
  from: number | null;
  to: number | null;
  baselineDir: string | null;
}

export type AnalysisToWebview =
  | IpcNotification<'analysis/busy', { runDir: string; from: number | null; to: number | null; baselineDir: string | null }>
  | IpcNotification<'analysis/result', AnalysisView>;

export type AnalysisToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  | IpcCommand<'analysis/setRange', { from: number | null; to: number | null }>
  | IpcCommand<'analysis/pickBaseline', Record<string, never>>
  | IpcCommand<'analysis/clearBaseline', Record<string, never>>
  | IpcCommand<'analysis/openDashboard', { runDir: string }>
  | IpcCommand<'analysis/exportCsv', { name: string; csv: string }>;

export type AnalysisProtocol = WebviewProtocol<AnalysisToWebview, AnalysisToHost, AnalysisPanelState>;
