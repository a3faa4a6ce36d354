import { test } from 'node:test';
import type { RunInfo } from '../../../src/protocol/index';
import assert from 'node:assert/strict';
import { isEnded, isTraining, timesOf, type LiveStatus, placeWarmStarts, startedShort } from '../../../src/extension/run_status';
import { runLegendNames, runTabName, shortRunNames } from '../../../src/protocol/run_names';

test('each status is training, ended, or queued: never two of them', () => {
  // The statuses of LiveStatus, each classed by hand from runs.ts' state machine.
  const expected: Record<LiveStatus, 'training' | 'ended' | 'waiting'> = {
    queued: 'waiting',
    starting: 'training',
    running: 'training',
    stopping: 'training',
    completed: 'ended',
    failed: 'ended',
    stopped: 'ended',
    cancelled: 'ended',
  };
  for (const [s, kind] of Object.entries(expected) as [LiveStatus, string][]) {
    assert.equal(isTraining(s), kind === 'training', `isTraining(${s})`);
    assert.equal(isEnded(s), kind === 'ended', `isEnded(${s})`);
  }
  assert.equal(isTraining(undefined), false);
  assert.equal(isTraining(null), false);
});

test("a run's hover times: local start, end and how long it took; a running one how long so far", () => {
  // built from local times, so the test reads the same in any time zone
  const at = (h: number, m: number, s = 0, day = 27) => new Date(2026, 10, day, h, m, s).toISOString();
  const t = (h: number, m: number) => new Date(2026, 10, 27, h, m).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const d = (day: number) => new Date(2026, 10, day).toLocaleDateString(undefined, { day: 'numeric', month: 'short' });
  assert.equal(timesOf(at(14, 2), at(14, 5, 12), false), `started ${d(27)} ${t(14, 2)} · ended ${t(14, 5)} · took 3 min 12 s`);
  assert.equal(timesOf(at(23, 30), at(1, 0, 0, 28), false), `started ${d(27)} ${t(23, 30)} · ended ${d(28)} ${t(1, 0)} · took 1 h 30 min`);
  assert.equal(timesOf(at(14, 2), null, true, Date.parse(at(14, 2, 45))), `started ${d(27)} ${t(14, 2)} · running for 45 s`);
  assert.equal(timesOf(at(14, 2), null, false), `started ${d(27)} ${t(14, 2)}`, 'a run that died without an end: no made-up duration');
  assert.equal(timesOf('garbage', null, false), 'started garbage');
});

test("a config's runs by their short names: the part every run shares dropped at a '-', a lone name kept whole", () => {
  assert.deepEqual(shortRunNames(['countdown-short-entropy_mask-mp80-seed2', 'countdown-short-none-seed2', 'countdown-short-none-seed11']), [
    'entropy_mask-mp80-seed2',
    'none-seed2',
    'none-seed11',
  ]);
  // "sweep-n" is shared by none and nothing else: the cut is at the last '-' inside the shared part
  assert.deepEqual(shortRunNames(['sweep-none', 'sweep-outcome_conditional']), ['none', 'outcome_conditional']);
  assert.deepEqual(shortRunNames(['tiny', 'tiny']), ['tiny', 'tiny'], 'one name, run twice: kept');
  assert.deepEqual(shortRunNames(['tiny']), ['tiny']);
  assert.deepEqual(shortRunNames(['a-x', 'b-y']), ['a-x', 'b-y'], 'nothing shared');
  assert.match(startedShort('2026-11-29T09:30:00.000Z'), /Nov.*\d\d:\d\d/, 'day and time, in the local form');
  assert.equal(startedShort('not a date'), '');
});

test('a shared warm start goes under the config whose runs start from it, shown as one; its own group goes', () => {
  const warm = '/ws/runs/countdown-warm-start-0123456789ab';
  const run = (runDir: string, warm_start?: string) => ({ runDir, info: { warm_start } as RunInfo, warmStart: undefined as boolean | undefined });
  const seeds = {
    key: '/ws/seeds.credit.yaml',
    configPath: '/ws/seeds.credit.yaml',
    runs: [run('/ws/runs/seeds-none-seed1-1', warm), run('/ws/runs/seeds-none-seed2-1', warm)],
  };
  const own = { key: 'name:countdown-warm-start', configPath: null, runs: [run(warm)] };
  const other = { key: '/ws/tiny.credit.yaml', configPath: '/ws/tiny.credit.yaml', runs: [run('/ws/runs/tiny-1')] };
  const groups = new Map([own, seeds, other].map((g) => [g.key, g]));
  placeWarmStarts(groups);
  assert.deepEqual([...groups.keys()], [seeds.key, other.key], 'its own group gone');
  assert.deepEqual(
    seeds.runs.map((r) => [r.runDir, r.warmStart ?? false]),
    [
      ['/ws/runs/seeds-none-seed1-1', false],
      ['/ws/runs/seeds-none-seed2-1', false],
      [warm, true],
    ],
  );
  // a warm start no run names (an older run.json) stays where it was, still shown as one
  const alone = new Map([[own.key, { ...own, runs: [run(warm)] }]]);
  placeWarmStarts(alone);
  assert.equal(alone.get(own.key)!.runs[0].warmStart, true);
});

test('tabs and legends: a stamped folder reads "name HH:MM"; runs shown together by their short names, else their times', () => {
  assert.equal(runTabName('tiny-20261129-125107'), 'tiny 12:51');
  assert.equal(runTabName('tiny-20261129-125107', { withDay: true }), 'tiny 29 Nov 12:51');
  assert.equal(runTabName('countdown-short-none-seed2-20260101-000100'), 'countdown-short-none-seed2 00:01');
  assert.equal(runTabName('prime-import'), 'prime-import', 'a folder the engine did not name is kept');
  const a = { id: 'tiny-20260101-000000', name: 'tiny' };
  const b = { id: 'tiny-oc-20260101-000100', name: 'tiny-oc' };
  const c = { id: 'tiny-20260102-000200', name: 'tiny' };
  const d = { id: 'tiny-20260103-000200', name: 'tiny' };
  // names that differ lose what they share, cut at a '-': "tiny" and "tiny-oc" share "tiny" but no '-' before it
  assert.deepEqual(runLegendNames([a, b]), ['tiny', 'tiny-oc']);
  assert.deepEqual(
    runLegendNames([
      { id: 'x-20260101-000000', name: 'sweep-entropy_mask-mp80-seed2' },
      { id: 'y-20260101-000000', name: 'sweep-none-seed2' },
    ]),
    ['entropy_mask-mp80-seed2', 'none-seed2'],
  );
  assert.deepEqual(runLegendNames([a, b, c]), ['tiny 00:00', 'tiny-oc 00:01', 'tiny 00:02'], 'one name twice: the times tell them apart');
  assert.deepEqual(runLegendNames([c, d]), ['tiny 2 Jan 00:02', 'tiny 3 Jan 00:02'], 'the same time: the days too');
  assert.deepEqual(runLegendNames([a, { ...a }]), [a.id, a.id], 'nothing tells them apart: the folders');
});
