// The credit-analysis view's messages (src/extension/panels/analysis_panel.ts ↔ src/webviews/analysis.main.ts)
// and their runtime checks (see webview.ts).
import type { AnalyzeReport } from './analysis';
import { isEmpty, isNumber, isRecord, isString, messageCheck, nullable, shape, type Check } from './validate';
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from './webview';

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

const step = nullable(isNumber);
const dir = nullable(isString);

/**
 * The report is the engine's own JSON, already checked by the host (engine_cli.ts parseAnalyzeReport); here
 * only its version and the parts every table reads first are checked again.
 */
const isReport: Check<AnalyzeReport> = (v): v is AnalyzeReport =>
  isRecord(v) && v.version === 1 && isRecord(v.meta) && isRecord(v.token_types) && isRecord(v.contribution);

export const isAnalysisPanelState: Check<AnalysisPanelState> = shape<AnalysisPanelState>({ runDir: isString, from: step, to: step, baselineDir: dir });

export const analysisChecks: ProtocolChecks<AnalysisProtocol> = {
  toWebview: messageCheck<AnalysisToWebview>('notification', {
    'analysis/busy': isAnalysisPanelState,
    'analysis/result': shape<AnalysisView>({
      runDir: isString,
      id: isString,
      loggedSteps: nullable(shape<{ first: number; last: number; count: number }>({ first: isNumber, last: isNumber, count: isNumber })),
      from: step,
      to: step,
      baselineDir: dir,
      report: nullable(isReport),
      error: nullable(isString),
      elapsedMs: isNumber,
    }),
  }),
  toHost: messageCheck<AnalysisToHost>('command', {
    'webview/ready': isEmpty,
    'analysis/setRange': shape<{ from: number | null; to: number | null }>({ from: step, to: step }),
    'analysis/pickBaseline': isEmpty,
    'analysis/clearBaseline': isEmpty,
    'analysis/openDashboard': shape<{ runDir: string }>({ runDir: isString }),
    'analysis/exportCsv': shape<{ name: string; csv: string }>({ name: isString, csv: isString }),
  }),
  state: isAnalysisPanelState,
};
