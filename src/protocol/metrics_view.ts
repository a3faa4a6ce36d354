// The run dashboard's and the run comparison's messages — one webview, one bundle (metrics.main.ts), its
// mode given by the init message — between src/extension/panels/metrics_panel.ts and
// src/webviews/metrics_view.ts, and their runtime checks (see webview.ts).
import type { MetricsRow } from './index';
import { isCompareReport, type CompareReport } from './compare';
import { arrayOf, isEmpty, isNumber, isRecord, isString, messageCheck, nullable, oneOf, shape, type Check } from './validate';
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from './webview';

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
  /** `grpo.kl_beta` of the run's config.yaml (null when unknown): at 0 the engine logs no KL worth charting */
  klBeta: number | null;
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
  /** the page's chart view (x-range, smoothing), kept across reloads; the host does not read it */
  view?: unknown;
}

/**
 * Compare Runs' test of the compared runs grouped by configuration (seeds together) against a baseline group, on the
 * same eval instances (`credit-lens compare`). `groups` lists every configuration, so the page can offer the baseline
 * choice; `report` is null while it is computed or when it cannot be (`note` says why).
 */
export interface MetricsComparison {
  groups: string[];
  baseline: string | null;
  /** GRPO steps every ended run has an eval table at (0: the warm starts), ascending: what the step picker offers */
  steps: number[];
  /** the step picked on the page; null: each run's last eval, or the latest step all of them evaluated */
  step: number | null;
  report: CompareReport | null;
  note: string;
}

export type MetricsToWebview =
  | IpcNotification<'metrics/init', MetricsViewInit>
  | IpcNotification<'metrics/append', MetricsAppend>
  | IpcNotification<'metrics/comparison', MetricsComparison>;

export type MetricsToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  /** A chart composed with its title and legend, as a PNG data URL. */
  | IpcCommand<'metrics/exportPng', { chartId: string; title: string; dataUrl: string }>
  | IpcCommand<'metrics/exportCsv', { chartId: string; title: string; csv: string }>
  /** A live point is on screen; `latencyMs` is from the notification's arrival in the host to the repaint. */
  | IpcCommand<'metrics/drawn', { runDir: string; step: number; latencyMs: number }>
  | IpcCommand<'metrics/openAnalysis', { runDir: string }>
  | IpcCommand<'metrics/openRun', { runDir: string }>
  | IpcCommand<'metrics/compareWith', { runDirs: string[] }>
  /** Compare Runs: test every other configuration against this one */
  | IpcCommand<'metrics/setBaseline', { group: string }>
  /** null: back to the runs' last evals */
  | IpcCommand<'metrics/setStep', { step: number | null }>;

export type MetricsProtocol = WebviewProtocol<MetricsToWebview, MetricsToHost, MetricsPanelState>;

const isMode = oneOf('dashboard', 'compare');

/** A metrics row needs a step and a phase; every other field is a number or a string (design.md#run-directory). */
export const isMetricsRow: Check<MetricsRow> = (v): v is MetricsRow =>
  isRecord(v) &&
  isNumber(v.step) &&
  (v.phase === 'sft' || v.phase === 'grpo' || v.phase === 'eval') &&
  Object.values(v).every((x) => x === undefined || typeof x === 'number' || typeof x === 'string');

export const isMetricsRunData: Check<MetricsRunData> = shape<MetricsRunData>({
  runDir: isString,
  id: isString,
  name: isString,
  strategy: nullable(isString),
  status: isString,
  sftSteps: isNumber,
  klBeta: nullable(isNumber),
  rows: arrayOf(isMetricsRow),
});

export const isMetricsPanelState: Check<MetricsPanelState> = shape<MetricsPanelState>({
  mode: isMode,
  runDirs: arrayOf(isString),
  view: (_v): _v is unknown => true,
});

const chartId = { chartId: isString, title: isString };

export const metricsChecks: ProtocolChecks<MetricsProtocol> = {
  toWebview: messageCheck<MetricsToWebview>('notification', {
    'metrics/init': shape<MetricsViewInit>({ mode: isMode, runs: arrayOf(isMetricsRunData) }),
    'metrics/append': shape<MetricsAppend>({ runDir: isString, rows: arrayOf(isMetricsRow), status: isString, receivedAt: nullable(isNumber) }),
    'metrics/comparison': shape<MetricsComparison>({
      groups: arrayOf(isString),
      baseline: nullable(isString),
      steps: arrayOf(isNumber),
      step: nullable(isNumber),
      report: nullable(isCompareReport),
      note: isString,
    }),
  }),
  toHost: messageCheck<MetricsToHost>('command', {
    'webview/ready': isEmpty,
    'metrics/exportPng': shape<{ chartId: string; title: string; dataUrl: string }>({ ...chartId, dataUrl: isString }),
    'metrics/exportCsv': shape<{ chartId: string; title: string; csv: string }>({ ...chartId, csv: isString }),
    'metrics/drawn': shape<{ runDir: string; step: number; latencyMs: number }>({ runDir: isString, step: isNumber, latencyMs: isNumber }),
    'metrics/openAnalysis': shape<{ runDir: string }>({ runDir: isString }),
    'metrics/openRun': shape<{ runDir: string }>({ runDir: isString }),
    'metrics/compareWith': shape<{ runDirs: string[] }>({ runDirs: arrayOf(isString) }),
    'metrics/setBaseline': shape<{ group: string }>({ group: isString }),
    'metrics/setStep': shape<{ step: number | null }>({ step: nullable(isNumber) }),
  }),
  state: isMetricsPanelState,
};
