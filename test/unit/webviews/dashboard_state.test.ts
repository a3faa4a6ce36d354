// The dashboard's state (src/webviews/dashboard/state.ts) alone, without a page: what the head and the charts read
// from it. Expected strings are written out by hand from the rules each function's comment states.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsRunData } from '../../../src/protocol/metrics_view';
import { pointsOf, type ChartSpec } from '../../../src/webviews/metrics_series';
import {
  beforeGrpoText,
  colourOf,
  initialState,
  medianLatency,
  restoredView,
  runSummary,
  sftText,
  xLabel,
  type RunState,
} from '../../../src/webviews/dashboard/state';

const theme = { foreground: '#000', muted: '#777', grid: '#eee', palette: ['red', 'green', 'blue'] } as unknown as Parameters<typeof initialState>[1];

function run(id: string, sftSteps: number, rows: MetricsRunData['rows']): RunState {
  const data = { runDir: `/runs/${id}`, id, name: id, strategy: 'none', status: 'completed', sftSteps, klBeta: 0, rows } as MetricsRunData;
  return { data, points: pointsOf(rows, sftSteps) };
}

test('a saved view is read defensively: a smoothing out of [0, 1) or a missing toggle falls back to the defaults', () => {
  assert.deepEqual(restoredView({ includeSft: true, smoothing: 0.6 }), { includeSft: true, smoothing: 0.6 });
  const d = restoredView(undefined);
  assert.deepEqual(restoredView({ smoothing: 1.5, includeSft: 'yes' }), d);
});

test('x labels name the GRPO step, the eval before GRPO, and the SFT step (exact for one run, relative for several)', () => {
  const s = initialState(undefined, theme);
  s.runs = [run('a', 40, [])];
  assert.equal(xLabel(s, 3), 'GRPO step 3');
  assert.equal(xLabel(s, 0), 'eval before GRPO');
  // x = −1 is the last SFT step: sftSteps + x + 1 = 40
  assert.equal(xLabel(s, -1), 'SFT step 40');
  s.runs.push(run('b', 20, []));
  assert.equal(xLabel(s, -5), 'SFT (-5 from GRPO)');
});

test('colours go by run in a comparison and by series on one run; the latency is the lower median', () => {
  const s = initialState({ mode: 'compare' }, theme);
  assert.equal(colourOf(s, { run: 1, index: 0 }), 'green');
  s.mode = 'dashboard';
  assert.equal(colourOf(s, { run: 1, index: 2 }), 'blue');
  assert.equal(medianLatency(s), null);
  s.latencies = [30, 10, 20, 40];
  assert.equal(medianLatency(s), 20);
});

test("a run's legend summary is its last GRPO reward and its last eval; SFT steps are named when every run shares them", () => {
  const r = run('a', 2, [
    { step: 1, phase: 'sft', loss: 1 },
    { step: 1, phase: 'grpo', reward_mean: 0.25 },
    { step: 2, phase: 'grpo', reward_mean: 0.5, eval_success: 0.125 },
  ]);
  assert.match(runSummary(r), /^ · reward 0\.5\d* · eval 12\.5\s?%$/);
  const s = initialState(undefined, theme);
  s.runs = [r, run('b', 2, [])];
  assert.equal(sftText(s), ' (2 steps)');
  s.runs.push(run('c', 3, []));
  assert.equal(sftText(s), '');
});

test('the values before GRPO: each one for up to three runs, else the shared value or the range per series', () => {
  const spec = { id: 'success', title: 'Success', percent: true, series: [{ key: 'eval_success', label: 'eval' }] } as unknown as ChartSpec;
  const start = (vs: number[]) => vs.map((value, i) => ({ label: `r${i}`, key: 'eval_success', value }));
  assert.equal(beforeGrpoText(spec, start([0.09, 0.105]), 2).replace(/\s?%/g, '%'), 'r0 9.0% · r1 10.5%');
  assert.equal(beforeGrpoText(spec, start([0.09, 0.09, 0.09, 0.09]), 4).replace(/\s?%/g, '%'), 'eval 9.0% in every run');
  assert.equal(beforeGrpoText(spec, start([0.09, 0.105, 0.09, 0.09]), 5).replace(/\s?%/g, '%'), 'eval 9.0% – 10.5% over 4 of 5 runs');
});
