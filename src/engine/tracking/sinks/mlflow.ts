// An MLflow tracking server (logging.mlflow): one MLflow run per run, the config as params, the metrics as they come,
// run.json and the analysis as artifacts. The REST client and its queue are ../mlflow.ts.
import { z } from 'zod';
import { allow } from '../../core/fields';
import { flattenParams, MlflowTracker, type MlflowSettings } from '../mlflow';
import type { MetricSink, RunEndStatus, SinkContext, SinkSpec } from '../sink';
import { rowScalars } from '../tags';

class MlflowSink implements MetricSink {
  constructor(private readonly tracker: MlflowTracker) {}

  metrics(row: Parameters<MetricSink['metrics']>[0], wallTime: number): void {
    this.tracker.logMetrics(rowScalars(row).map(([key, value]) => ({ key, value, step: row.step, timestamp: Math.round(wallTime * 1000) })));
  }

  artifact(name: string, body: string): void {
    this.tracker.logArtifact(name, body);
  }

  async end(status: RunEndStatus): Promise<void> {
    await this.tracker.end(status);
  }

  close(): void {}
}

const settings = z
  .strictObject({
    tracking_uri: z
      .string()
      .regex(/^https?:\/\/[^\s@/]+(\/\S*)?$/, {
        message:
          'an http:// or https:// URL without user:password@ (config.yaml is copied into the run: credentials go in ' +
          'MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)',
      })
      .describe("The tracking server's URL, e.g. http://mlflow.lab:5000 (credentials go in MLFLOW_TRACKING_TOKEN, not here)."),
    experiment: z.string().min(1).describe('Experiment the run goes to; created when it does not exist.').default('credit-lens'),
  })
  .nullable()
  .describe(
    'Also log to an MLflow tracking server: one MLflow run per run, the config as params, the metrics as they come ' +
      '(queued and retried: a slow or dead server never stops training), run.json and the analysis as artifacts where ' +
      'the server proxies them. A token in MLFLOW_TRACKING_TOKEN (or MLFLOW_TRACKING_USERNAME / _PASSWORD) is sent ' +
      'with each request and never written to the run (an addition to design.md#config).',
  );

export const mlflowSink = {
  key: 'mlflow',
  schema: allow(settings, 'null, or {tracking_uri: an http:// or https:// URL without user:password@, experiment: a name}').default(null),
  open: (s: MlflowSettings | null, ctx: SinkContext): MetricSink | null => {
    if (!s) return null;
    // MLflow keeps every value it is sent, and has no purge: a resume that abandons logged steps would leave two values
    // at each of them. So that resume logs to a new MLflow run, a child of the first (mlflow.parentRunId), which keeps
    // the abandoned trajectory as it was; a resume from where the run stopped goes on in the same run.
    const r = ctx.resume;
    const fork = ctx.mlflowRun && r && (r.abandonedRows ?? 0) > 0 ? { ...ctx.mlflowRun, resumed_from: `${r.phase} step ${r.step}` } : null;
    if (fork)
      ctx.log(
        'info',
        `MLflow: this resume abandons the ${r!.abandonedRows} metrics rows logged after ${fork.resumed_from}: it logs to a new MLflow run, a child of ${fork.run_id}, which keeps them`,
      );
    const existing = fork ? null : ctx.mlflowRun;
    return new MlflowSink(
      new MlflowTracker(s, {
        runName: ctx.runName,
        runDir: ctx.runDir,
        existing,
        parent: fork,
        params: existing ? {} : flattenParams(ctx.config ?? {}),
        log: ctx.log,
        onRun: ctx.onMlflowRun,
      }),
    );
  },
} as const satisfies SinkSpec;
