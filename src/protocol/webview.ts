// Messages between the extension host and its webviews (DESIGN §1, GitLens' protocol pattern): every message
// of every webview is declared here, and both sides import this file, so a renamed field breaks the build,
// not the user. Types only.
import type { RunStatus } from './index';

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
  /** False when the engine has no `analyze` command, so the ratio column shows "—" for every row. */
  analysisAvailable: boolean;
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
