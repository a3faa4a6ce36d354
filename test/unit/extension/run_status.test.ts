import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isEnded, isTraining, type LiveStatus } from '../../../src/extension/run_status';

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
