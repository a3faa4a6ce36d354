// A run directory as the dashboards load it, written here by the engine's own writers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appendMetrics, writeRunInfo } from '../../../../src/engine/rundir/rundir';
import { klBetaOf, loadRunData, pngBytes, probeRows, safeFileName, sftStepsOf } from '../../../../src/extension/panels/run_data';

function runDir(config: string | null): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'credit-lens-rundata-')), 'demo-20260101-000000');
  mkdirSync(dir);
  writeRunInfo(dir, {
    id: 'demo-20260101-000000',
    name: 'demo',
    status: 'completed',
    started: '2026-01-01T00:00:00Z',
    ended: null,
    backend: 'cpu',
    engine_version: '0',
    strategy: 'entropy_mask',
  });
  if (config !== null) writeFileSync(join(dir, 'config.yaml'), config);
  for (let s = 1; s <= 3; s++) appendMetrics(dir, { step: s, phase: 'sft', loss: 1 / s });
  appendMetrics(dir, { step: 1, phase: 'grpo', reward_mean: 0.5 });
  return dir;
}

test('loadRunData: run.json name and strategy, every row, sft.steps from config.yaml', () => {
  const dir = runDir('name: demo\nsft:\n  steps: 40\n  lr: 0.001\n');
  try {
    const d = loadRunData(dir);
    assert.equal(d.id, 'demo-20260101-000000');
    assert.equal(d.name, 'demo');
    assert.equal(d.strategy, 'entropy_mask');
    assert.equal(d.status, 'completed');
    // config.yaml says 40 although only 3 SFT rows are logged so far (a live run mid-SFT).
    assert.equal(d.sftSteps, 40);
    assert.equal(d.rows.length, 4);
    assert.equal(loadRunData(dir, 'running').status, 'running', 'a live status overrides run.json');
  } finally {
    rmSync(join(dir, '..'), { recursive: true, force: true });
  }
});

test('sftStepsOf: without a readable config, the last logged SFT step', () => {
  const dir = runDir(null);
  try {
    assert.equal(sftStepsOf(dir, loadRunData(dir).rows), 3);
    writeFileSync(join(dir, 'config.yaml'), 'sft: [not, a, map');
    assert.equal(sftStepsOf(dir, loadRunData(dir).rows), 3);
  } finally {
    rmSync(join(dir, '..'), { recursive: true, force: true });
  }
});

test("grpo.kl_beta from config.yaml; a probed step's accuracy becomes a dashboard row beside its baseline, placebo and reliability", () => {
  const dir = runDir('grpo:\n  kl_beta: 0\n');
  try {
    assert.equal(klBetaOf(dir), 0);
    assert.equal(loadRunData(dir).klBeta, 0);
    mkdirSync(join(dir, 'probes'));
    const est = (mean: number | null) => ({ mean, lo: null, hi: null, n: 4 });
    // a record as the probe writes it (rundir/probe_record.ts reads it for the dashboard too): step 2: the run's entropy_mask scores 0.3; baselines 0.25 and 0.35 (the best is 0.35); placebo 0.05; reliability 0.6; lifts 0.004, 0.006 and 0.002
    writeFileSync(
      join(dir, 'probes', 'step-000002.json'),
      JSON.stringify({
        format: 'credit-lens-probe',
        step: 2,
        episodes: [0, 1, 2, 3],
        run_strategy: 'entropy_mask',
        accuracy: { entropy_mask: { spearman_unbiased: est(0.3), placebo: est(0.05), lift: est(0.004) }, none: { spearman_unbiased: est(0.9) } },
        baselines: {
          one_minus_pi: { spearman_unbiased: est(0.25), lift: est(0.006) },
          entropy: { spearman_unbiased: est(0.35), lift: est(0.002) },
          position: { spearman_unbiased: est(null) },
        },
        reliability: { full: 0.6 },
      }),
    );
    // a stopped probe (no accuracy yet) and a file that is not JSON are skipped
    writeFileSync(
      join(dir, 'probes', 'step-000003.json'),
      JSON.stringify({ format: 'credit-lens-probe', step: 3, episodes: [], run_strategy: 'entropy_mask', accuracy: null }),
    );
    writeFileSync(join(dir, 'probes', 'step-000004.json'), '{ not json');
    assert.deepEqual(probeRows(dir), [
      {
        step: 2,
        phase: 'grpo',
        'mc/spearman_unbiased': 0.3,
        'mc/placebo': 0.05,
        'mc/best_baseline': 0.35,
        'mc/reliability': 0.6,
        // the headline: the run's lift and the best baseline's (1 − π's 0.006 over entropy's 0.002)
        'mc/lift': 0.004,
        'mc/lift_best_baseline': 0.006,
      },
    ]);
    assert.equal(loadRunData(dir).rows.length, 5, 'the metrics rows and the probed step');
  } finally {
    rmSync(join(dir, '..'), { recursive: true, force: true });
  }
});

test('pngBytes accepts only a base64 PNG data URL', () => {
  // The 8-byte PNG signature (PNG spec §5.2) and one more byte.
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00]);
  assert.deepEqual(pngBytes(`data:image/png;base64,${png.toString('base64')}`), png);
  assert.throws(() => pngBytes(`data:image/png;base64,${Buffer.from('hello world').toString('base64')}`), /does not hold a PNG/);
  assert.throws(() => pngBytes(`data:image/svg+xml;base64,${png.toString('base64')}`), /no PNG data URL/);
});

test('safeFileName', () => {
  assert.equal(safeFileName('attribution/attribution_range'), 'attribution_attribution_range');
  assert.equal(safeFileName('///'), 'chart');
});
