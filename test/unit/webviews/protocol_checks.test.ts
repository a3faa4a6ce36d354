// The runtime checks both ends apply to webview messages (src/protocol/*_view.ts): every message the host and
// the pages really send passes, and the malformed ones a stale or tampered page could post are dropped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { analysisChecks } from '../../../src/protocol/analysis_view';
import { metricsChecks } from '../../../src/protocol/metrics_view';
import { sweepChecks, type SweepView } from '../../../src/protocol/sweep_view';

const ok = (r: { ok: boolean }) => r.ok;
const why = (r: { ok: true } | { ok: false; why: string }) => (r.ok ? 'ok' : r.why);

test('metrics: the messages the page and the host send pass; wrong kinds, methods and params do not', () => {
  const row = { step: 1, phase: 'grpo', reward_mean: 0.5, skipped: 0 };
  const run = { runDir: '/r', id: 'a-1', name: 'a', strategy: null, status: 'running', sftSteps: 0, klBeta: 0.04, rows: [row] };
  assert.ok(ok(metricsChecks.toWebview({ kind: 'notification', method: 'metrics/init', params: { mode: 'compare', runs: [run, run] } })));
  assert.ok(
    ok(metricsChecks.toWebview({ kind: 'notification', method: 'metrics/append', params: { runDir: '/r', rows: [row], status: 'running', receivedAt: null } })),
  );
  assert.equal(
    why(metricsChecks.toWebview({ kind: 'notification', method: 'metrics/init', params: { mode: 'table', runs: [] } })),
    'metrics/init: params of the wrong shape',
  );
  // A row without a phase, or holding an object, is not a metrics.jsonl row.
  assert.ok(
    !ok(metricsChecks.toWebview({ kind: 'notification', method: 'metrics/append', params: { runDir: '/r', rows: [{ step: 1 }], status: 'x', receivedAt: 1 } })),
  );
  assert.ok(
    !ok(
      metricsChecks.toWebview({
        kind: 'notification',
        method: 'metrics/append',
        params: { runDir: '/r', rows: [{ ...row, x: {} }], status: 'x', receivedAt: 1 },
      }),
    ),
  );

  assert.ok(ok(metricsChecks.toHost({ kind: 'command', method: 'webview/ready', params: {} })));
  assert.ok(ok(metricsChecks.toHost({ kind: 'command', method: 'metrics/compareWith', params: { runDirs: ['/a', '/b'] } })));
  assert.ok(ok(metricsChecks.toHost({ kind: 'command', method: 'metrics/drawn', params: { runDir: '/a', step: 3, latencyMs: 41 } })));
  assert.equal(why(metricsChecks.toHost({ kind: 'notification', method: 'webview/ready', params: {} })), 'not a message of this protocol');
  assert.equal(why(metricsChecks.toHost({ kind: 'command', method: 'metrics/deleteRun', params: {} })), 'unknown method metrics/deleteRun');
  // Inherited names are not methods.
  assert.equal(why(metricsChecks.toHost({ kind: 'command', method: 'toString', params: {} })), 'unknown method toString');
  assert.ok(!ok(metricsChecks.toHost({ kind: 'command', method: 'metrics/compareWith', params: { runDirs: '/a' } })));
  assert.ok(!ok(metricsChecks.toHost({ kind: 'command', method: 'metrics/drawn', params: { runDir: '/a', step: 3, latencyMs: NaN } })));
  assert.ok(!ok(metricsChecks.toHost({ kind: 'command', method: 'metrics/exportPng', params: { chartId: 'c', title: 't' } })));
  assert.ok(!ok(metricsChecks.toHost(null)));
  assert.ok(!ok(metricsChecks.toHost('webview/ready')));

  assert.ok(metricsChecks.state({ mode: 'dashboard', runDirs: ['/r'] }));
  // The state an older page saved before the mode moved into it.
  assert.ok(!metricsChecks.state({ runDirs: ['/r'] }));
  assert.ok(!metricsChecks.state(undefined));
});

test('sweep: a real view passes; a row with an unknown status or an object parameter does not', () => {
  const view: SweepView = {
    sweepId: 's1',
    title: 'cd',
    configPath: '/w/cd.credit.yaml',
    created: '2026-11-24T00:00:00Z',
    done: 1,
    total: 2,
    active: true,
    slurm: { jobId: '12', sweepDir: '/w/runs/sweep-1', error: null },
    rows: [
      {
        index: 0,
        name: 'cd-none',
        strategy: 'none',
        params: {},
        status: 'completed',
        runDir: '/w/runs/a',
        step: 10,
        totalSteps: 10,
        finalEvalSuccess: 0.5,
        bestEvalSuccess: 0.6,
        stepsTo10pct: 3,
        meanGradNorm: 1.2,
        fillerReasoningRatio: 1.31,
        slurm: null,
      },
      {
        index: 1,
        name: 'cd-oc',
        strategy: 'outcome_conditional',
        params: { 'credit.think_discount': 0.25 },
        status: 'queued',
        runDir: null,
        step: null,
        totalSteps: null,
        finalEvalSuccess: null,
        bestEvalSuccess: null,
        stepsTo10pct: null,
        meanGradNorm: null,
        fillerReasoningRatio: null,
        slurm: { job: '12_1', state: 'PENDING', reason: 'JobArrayTaskLimit', summary: 'pending (JobArrayTaskLimit)' },
      },
    ],
    comparison: { report: null, note: 'waiting' },
  };
  assert.ok(ok(sweepChecks.toWebview({ kind: 'notification', method: 'sweep/update', params: view })));
  const bad = (patch: object) => ({ kind: 'notification', method: 'sweep/update', params: { ...view, rows: [{ ...view.rows[0], ...patch }] } });
  assert.ok(!ok(sweepChecks.toWebview(bad({ status: 'exploded' }))));
  assert.ok(!ok(sweepChecks.toWebview(bad({ params: { a: { b: 1 } } }))));
  // The comparison as `credit-lens compare --json` prints it (one seed: null interval ends), and one of another shape.
  const interval = (mean: number) => ({ mean, lo: null, hi: null, n: 1, half: null });
  const report = {
    split: 'test',
    alpha: 0.05,
    adjustment: { method: 'holm' as const, family: 1, looks: 1 },
    power: 0.8,
    baseline: 'cd-none',
    notes: [],
    rows: [
      {
        group: 'cd-none',
        label: 'none',
        strategy: 'none',
        baseline: true,
        seeds: [1],
        starts: 0,
        runs: ['/w/runs/a'],
        instances: 8,
        step: 3,
        eval_success: interval(0.5),
        diff: null,
        run_test: null,
        conditional: null,
        p_adjusted: null,
        significant: null,
        verdict_withheld: null,
        mde: null,
        seeds_needed: null,
        exploratory: true,
        filler_abs_c: interval(0.01),
        reasoning_abs_c: interval(0.02),
        filler_reasoning_ratio: interval(0.5),
        warm_start: null,
      },
      {
        group: 'cd-oc',
        label: 'outcome_conditional (think_discount 0.25)',
        strategy: 'outcome_conditional',
        baseline: false,
        seeds: [1],
        starts: 0,
        runs: ['/w/runs/b'],
        instances: 8,
        step: 3,
        eval_success: interval(0.6),
        diff: null,
        run_test: null,
        conditional: { diff: { mean: 0.1, lo: -0.1, hi: 0.3, resamples: 100 }, b: 1, c: 2, pairs: 8, instances: 8, p: 1, p_adjusted: 1, mde: null },
        p_adjusted: null,
        significant: null,
        verdict_withheld: '1 run against 1: the run-level test needs at least 2 runs on each side',
        mde: null,
        seeds_needed: { diff: 0.1, basis: 'observed' as const, unit: 'seeds' as const, seeds: null },
        exploratory: true,
        filler_abs_c: null,
        reasoning_abs_c: null,
        filler_reasoning_ratio: null,
        warm_start: null,
      },
    ],
  };
  assert.ok(ok(sweepChecks.toWebview({ kind: 'notification', method: 'sweep/update', params: { ...view, comparison: { report, note: '' } } })));
  assert.ok(
    !ok(
      sweepChecks.toWebview({
        kind: 'notification',
        method: 'sweep/update',
        params: { ...view, comparison: { report: { ...report, rows: [{ group: 1 }] }, note: '' } },
      }),
    ),
  );
  assert.ok(ok(sweepChecks.toHost({ kind: 'command', method: 'sweep/openRun', params: { runDir: '/w/runs/a' } })));
  assert.ok(!ok(sweepChecks.toHost({ kind: 'command', method: 'sweep/openRun', params: { runDir: 7 } })));
  assert.ok(sweepChecks.state({ sweepId: 's1', sort: { key: 'meanGradNorm', descending: true } }));
  assert.ok(!sweepChecks.state({ sweepId: 's1', sort: { key: 'nope', descending: true } }));
});

test('analysis: results with and without a report pass; a report of another version does not', () => {
  const base = { runDir: '/r', id: 'a-1', loggedSteps: { first: 1, last: 9, count: 9 }, from: null, to: 5, baselineDir: null, elapsedMs: 812 };
  const report = { version: 1, meta: {}, token_types: {}, contribution: {} };
  assert.ok(ok(analysisChecks.toWebview({ kind: 'notification', method: 'analysis/result', params: { ...base, report, error: null } })));
  assert.ok(
    ok(
      analysisChecks.toWebview({
        kind: 'notification',
        method: 'analysis/result',
        params: { ...base, loggedSteps: null, report: null, error: 'no token tables' },
      }),
    ),
  );
  assert.ok(
    !ok(analysisChecks.toWebview({ kind: 'notification', method: 'analysis/result', params: { ...base, report: { ...report, version: 2 }, error: null } })),
  );
  assert.ok(ok(analysisChecks.toWebview({ kind: 'notification', method: 'analysis/busy', params: { runDir: '/r', from: 1, to: null, baselineDir: '/b' } })));
  assert.ok(ok(analysisChecks.toHost({ kind: 'command', method: 'analysis/setRange', params: { from: null, to: 4 } })));
  assert.ok(!ok(analysisChecks.toHost({ kind: 'command', method: 'analysis/setRange', params: { from: '1', to: 4 } })));
  assert.ok(analysisChecks.state({ runDir: '/r', from: null, to: null, baselineDir: null }));
  assert.ok(!analysisChecks.state({ runDir: '/r' }));
});
