// The sweep summary's messages (src/extension/panels/sweep_panel.ts ↔ src/webviews/sweep.main.ts) and
// their runtime checks (see webview.ts).
import type { RunStatus } from './index';
import { isCompareReport, type CompareReport } from './compare';
import { arrayOf, isBoolean, isEmpty, isNumber, isRecord, isString, messageCheck, nullable, oneOf, shape, type Check } from './validate';
import type { IpcCommand, IpcNotification, ProtocolChecks, WebviewProtocol } from './webview';

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
  /** For a Slurm sweep: the array task (`<job>_<i>`), its Slurm state and pending reason, and the one-line summary. */
  slurm: SweepRowSlurm | null;
}

export interface SweepRowSlurm {
  job: string;
  state: string | null;
  reason: string | null;
  summary: string;
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
  /** Set for a sweep that runs on Slurm: its job array and folder. */
  /** `error`: why Slurm did not answer the last poll (the rows keep their last known state), null when it did */
  slurm: { jobId: string; sweepDir: string; error: string | null } | null;
  /**
   * The runs grouped by configuration (their seeds together) against the baseline group, on the same test instances
   * (`credit-lens compare` over the completed runs); null with fewer than two configurations. `note` says what is
   * missing or running, or why the comparison failed.
   */
  comparison: SweepComparison | null;
}

export interface SweepComparison {
  report: CompareReport | null;
  note: string;
}

export type SweepSortKey =
  'index' | 'name' | 'strategy' | 'status' | 'finalEvalSuccess' | 'bestEvalSuccess' | 'stepsTo10pct' | 'meanGradNorm' | 'fillerReasoningRatio';

export interface SweepPanelState {
  sweepId: string;
  sort: { key: SweepSortKey; descending: boolean };
}

export type SweepToWebview = IpcNotification<'sweep/update', SweepView>;

export type SweepToHost =
  | IpcCommand<'webview/ready', Record<string, never>>
  | IpcCommand<'sweep/openRun', { runDir: string }>
  | IpcCommand<'sweep/cancel', Record<string, never>>
  /** scancel one run of a Slurm sweep */
  | IpcCommand<'sweep/cancelRun', { index: number }>;

export type SweepProtocol = WebviewProtocol<SweepToWebview, SweepToHost, SweepPanelState>;

const SORT_KEYS = [
  'index',
  'name',
  'strategy',
  'status',
  'finalEvalSuccess',
  'bestEvalSuccess',
  'stepsTo10pct',
  'meanGradNorm',
  'fillerReasoningRatio',
] as const satisfies readonly SweepSortKey[];

const isStatus = oneOf('running', 'completed', 'failed', 'stopped', 'queued', 'cancelled') satisfies Check<SweepRowStatus>;
const num = nullable(isNumber);
const isParamValue = (v: unknown): v is SweepRow['params'][string] => v === null || ['string', 'number', 'boolean'].includes(typeof v);

export const isSweepRow: Check<SweepRow> = shape<SweepRow>({
  index: isNumber,
  name: isString,
  strategy: isString,
  params: (v): v is SweepRow['params'] => isRecord(v) && Object.values(v).every(isParamValue),
  status: isStatus,
  runDir: nullable(isString),
  step: num,
  totalSteps: num,
  finalEvalSuccess: num,
  bestEvalSuccess: num,
  stepsTo10pct: num,
  meanGradNorm: num,
  fillerReasoningRatio: num,
  slurm: nullable(shape<SweepRowSlurm>({ job: isString, state: nullable(isString), reason: nullable(isString), summary: isString })),
});

export const isSweepView: Check<SweepView> = shape<SweepView>({
  sweepId: isString,
  title: isString,
  configPath: isString,
  created: isString,
  rows: arrayOf(isSweepRow),
  done: isNumber,
  total: isNumber,
  active: isBoolean,
  slurm: nullable(shape<{ jobId: string; sweepDir: string; error: string | null }>({ jobId: isString, sweepDir: isString, error: nullable(isString) })),
  comparison: nullable(shape<SweepComparison>({ report: nullable(isCompareReport), note: isString })),
});

export const isSweepPanelState: Check<SweepPanelState> = shape<SweepPanelState>({
  sweepId: isString,
  sort: shape<SweepPanelState['sort']>({ key: oneOf(...SORT_KEYS), descending: isBoolean }),
});

export const sweepChecks: ProtocolChecks<SweepProtocol> = {
  toWebview: messageCheck<SweepToWebview>('notification', { 'sweep/update': isSweepView }),
  toHost: messageCheck<SweepToHost>('command', {
    'webview/ready': isEmpty,
    'sweep/openRun': shape<{ runDir: string }>({ runDir: isString }),
    'sweep/cancel': isEmpty,
    'sweep/cancelRun': shape<{ index: number }>({ index: isNumber }),
  }),
  state: isSweepPanelState,
};
