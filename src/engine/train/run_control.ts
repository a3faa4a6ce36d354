// What a run reports and how it is stopped: the reporter (CLI, RPC, sweep), the controller a signal or `run/stop`
// uses, and the result. train.ts and warm_start.ts both use these, so they live apart from both.
import type { MetricsRow, RunFinishedParams, RunInfo, RunProgressParams, RunStartedParams } from '../../protocol';

export interface Reporter {
  started(p: RunStartedParams): void;
  progress(p: RunProgressParams): void;
  metrics(runDir: string, row: MetricsRow): void;
  log(level: 'info' | 'warn' | 'error', message: string): void;
  finished(p: RunFinishedParams): void;
}

export const silentReporter: Reporter = { started() {}, progress() {}, metrics() {}, log() {}, finished() {} };

/** Lets a signal handler or the RPC `run/stop` request end the run after the current step, with a checkpoint. */
export class RunController {
  stopRequested = false;
  private readonly abort = new AbortController();
  /** Aborted by stop(): long waits inside a step (oracle requests, their back-off) end at once. */
  readonly signal: AbortSignal = this.abort.signal;
  private waiters: ((checkpoint: string | null) => void)[] = [];
  stop(): Promise<string | null> {
    this.stopRequested = true;
    this.abort.abort();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  settle(checkpoint: string | null): void {
    for (const w of this.waiters.splice(0)) w(checkpoint);
  }
}

export interface TrainResult {
  runDir: string;
  status: RunInfo['status'];
  finalEval: number | null;
  initialEval: number | null;
}
