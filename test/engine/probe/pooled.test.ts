// Probes pooled over runs, the run as the unit. Hand numbers for the pooling; then two real (tiny) probed runs through
// `analyze --probe`, whose per-run values must be each run's own probe record's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { PooledProbeReport, ProbeAccuracy } from '../../../src/protocol/analysis';
import { cmdAnalyze, pooledProbeReport } from '../../../src/engine/cli/data_commands';
import { renderBook } from '../../../src/engine/cli/results_command';
import { keepRun, readBook } from '../../../src/engine/analysis/results_book';
import { isUserError } from '../../../src/engine/core/errors';
import { probeRun } from '../../../src/engine/probe/probe';
import { poolProbes, pooledOverRuns, pooledProbeMarkdown } from '../../../src/engine/probe/pooled';
import { probeAccuracies } from '../../../src/engine/rundir/probe_record';
import { train } from '../../../src/engine/train/train';
import { sevensConfig } from '../fixtures';

const close = (a: number | null | undefined, b: number, tol = 1e-9) => assert.ok(a != null && Math.abs(a - b) <= tol, `${a} != ${b}`);

test('pooled over runs by hand: a run is the mean of its steps, and the runs are the unit', () => {
  // runs' values 0.2 (steps 0.1 and 0.3), 0.4, 0.5: mean 0.366667, SD 0.152753, se 0.0881917, t 4.15761 on 2 df;
  // p = 1 − t/√(t² + 2) = 0.0532707 (Student's t on 2 df in closed form); half width t_.975,2 = 4.302653 × se = 0.379458
  const e = pooledOverRuns([[0.1, 0.3], [0.4], [0.5, null]]);
  close(e.mean, 0.3666666666666667);
  close(e.p, 0.05327073759374253, 1e-9);
  close(e.lo, -0.012791636693009256, 1e-9);
  close(e.hi, 0.7461249700263426, 1e-9);
  assert.equal(e.runs, 3);
  assert.deepEqual(e.by_run, [0.2, 0.4, 0.5]);
  // one run: a value, no interval; no runs: nothing
  assert.deepEqual(pooledOverRuns([[0.3]]), { mean: 0.3, lo: null, hi: null, runs: 1, p: null, by_run: [0.3] });
  assert.equal(pooledOverRuns([[null], []]).mean, null);
});

test('poolProbes: a strategy per row, the lift over the best baseline Holm-adjusted over the strategies', () => {
  const est = (mean: number) => ({ mean, lo: null, hi: null, n: 10 });
  const probe = (a: number, b: number): ProbeAccuracy =>
    ({
      step: 50,
      rollouts: 8,
      positions: 'every',
      run_strategy: 'none',
      episodes: 10,
      prompts: 5,
      uniform_share: est(0.1),
      accuracy: { none: { lift: est(0), lift_excess: est(a) }, ktae: { lift: est(0.01), lift_excess: est(b) } },
      baselines: { one_minus_p: { lift: est(0.02) } },
    }) as unknown as ProbeAccuracy;
  const r = poolProbes([
    { run_dir: 'a', name: 'a', probes: [probe(-0.02, 0.01)] },
    { run_dir: 'b', name: 'b', probes: [probe(-0.03, 0.03)] },
    { run_dir: 'c', name: 'c', probes: [probe(-0.025, 0.02)] },
  ]);
  // none: −0.02, −0.03, −0.025 → mean −0.025, SD 0.005, t −8.660 on 2 df: p = 1 − 8.660/√77 = 0.013072;
  // ktae: 0.01, 0.03, 0.02 → mean 0.02, SD 0.01, t 3.4641: p = 1 − 3.4641/√14 = 0.074180; Holm: 0.026144, 0.074180
  close(r.accuracy.none.lift_excess.p, 1 - 8.660254037844386 / Math.sqrt(77), 1e-9);
  close(r.accuracy.none.lift_excess.p_adj, 2 * (1 - 8.660254037844386 / Math.sqrt(77)), 1e-9);
  close(r.accuracy.ktae.lift_excess.p_adj, 1 - 3.4641016151377544 / Math.sqrt(14), 1e-9);
  close(r.baselines.one_minus_p.lift.mean, 0.02);
  assert.equal(r.cancellation, null);
  assert.match(pooledProbeMarkdown(r), /\| none \(the runs'\) \| 0 .*p_adj 0\.026/);
});

test('runs from shared warm starts: each start the mean of its runs, the start the unit', () => {
  // starts s1 (runs 0.1, 0.3 → 0.2), s2 (0.3, 0.5 → 0.4), s3 (0.5): the values over starts are those of the hand case
  // above, mean 0.366667, p 0.0532707 on 2 df
  const e = pooledOverRuns([[0.1], [0.3], [0.3], [0.5], [0.5]], ['s1', 's1', 's2', 's2', 's3']);
  close(e.mean, 0.3666666666666667);
  close(e.p, 0.05327073759374253, 1e-9);
  assert.deepEqual([e.runs, e.by_run.length], [3, 3]);
  const probe = {
    step: 1,
    episodes: 4,
    prompts: 2,
    run_strategy: 'none',
    uniform_share: { mean: 0.1, lo: null, hi: null, n: 4 },
    accuracy: {},
  } as unknown as ProbeAccuracy;
  const shared = poolProbes(['a', 'b', 'c', 'd'].map((n, i) => ({ run_dir: n, name: n, probes: [probe], start: `/runs/start${i % 2}` })));
  assert.deepEqual([shared.unit, shared.units], ['warm start', 2]);
  assert.match(pooledProbeMarkdown(shared), /over 4 runs from 2 warm starts \(the start as the unit\)/);
  // each run its own start (or none named): the run is the unit
  const own = poolProbes(['a', 'b'].map((n) => ({ run_dir: n, name: n, probes: [probe], start: null })));
  assert.deepEqual([own.unit, own.units], ['run', 2]);
});

test('analyze --probe over two real probed runs: each run its own record, pooled; errors name what is wrong', async () => {
  const dirs: string[] = [];
  for (const seed of [3, 4]) {
    const dir = mkdtempSync(join(tmpdir(), 'cl-pool-'));
    const cfg = sevensConfig(dir, {
      name: `pool${seed}`,
      seed,
      backend: 'wasm',
      grpo: '{ steps: 2, prompts_per_step: 4, group_size: 4, max_new_tokens: 8, eval_every: 2, checkpoint_every: 2 }\nlogging: { probe_every: 1, realized_credit: true }',
    });
    const { runDir } = await train({ configPath: cfg });
    await probeRun({ runDir, step: 1, episodes: 8, rollouts: 6 });
    await probeRun({ runDir, step: 2, episodes: 8, rollouts: 6 });
    dirs.push(runDir);
  }
  const out = join(mkdtempSync(join(tmpdir(), 'cl-pool-out-')), 'pooled.json');
  assert.equal(await cmdAnalyze([...dirs, '--probe', '--out', out]), 0);
  const r = JSON.parse(readFileSync(out, 'utf8')) as PooledProbeReport;
  assert.deepEqual(
    r.runs.map((x) => x.steps),
    [
      [1, 2],
      [1, 2],
    ],
  );
  // each run's value is the mean of its two steps' own records
  const own = dirs.map((d) => probeAccuracies(d).map((p) => p.baselines!.one_minus_p.lift!.mean!));
  const lift = r.baselines.one_minus_p.lift;
  assert.equal(lift.runs, 2);
  own.forEach((steps, i) => close(lift.by_run[i], (steps[0] + steps[1]) / 2, 1e-12));
  close(lift.mean, (lift.by_run[0] + lift.by_run[1]) / 2, 1e-12);
  // the realized column was logged, so the cancellation test and its controls are pooled too
  assert.ok(r.cancellation && 'stratified_positive' in r.cancellation && 'control_positive' in r.cancellation);
  // kept for results/ (records, not the probes' tables or the token tables), the pooled report is the same
  const keepInto = mkdtempSync(join(tmpdir(), 'cl-pool-kept-'));
  const kept = dirs.map((d) => keepRun(d, keepInto));
  assert.ok(kept.every((k) => !existsSync(join(k, 'tokens')) && !existsSync(join(k, 'probes', 'step-000001.arrow'))));
  const strip = (x: PooledProbeReport) => ({ ...x, runs: x.runs.map(({ run_dir: _, ...rest }) => rest) });
  assert.deepEqual(strip(pooledProbeReport(kept)), strip(r));
  // a results book's analyze table renders it
  writeFileSync(join(keepInto, 'book.yaml'), `doc: doc.md\ntables:\n  - id: pooled\n    analyze: ['${basename(kept[0])}', '${basename(kept[1])}']\n`);
  const md = (await renderBook(readBook(join(keepInto, 'book.yaml')))).get('pooled')!;
  assert.match(md, /^#### Credit accuracy over 2 runs/);
  assert.equal(md, pooledProbeMarkdown(pooledProbeReport(kept)).trimEnd());
  await assert.rejects(cmdAnalyze([...dirs]), (e: unknown) => isUserError(e) && /several with --probe/.test(e.message));
  await assert.rejects(
    cmdAnalyze([dirs[0], '/nonexistent/run', '--probe']),
    (e: unknown) => isUserError(e) && /nonexistent\/run is not a run directory/.test(e.message),
  );
});
