// A Slurm sweep row's status from Slurm's state and the run's own (src/extension/slurm_status.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slurmRowStatus, slurmTaskActive } from '../../../src/extension/slurm_status';
import type { SlurmTaskStatus } from '../../../src/protocol/slurm';

const task = (slurm_state: string | null, run_status: string | null = null): SlurmTaskStatus => ({
  index: 0,
  name: 'r',
  run_dir: '/r',
  slurm_job: '7_0',
  slurm_state,
  slurm_reason: null,
  run_status,
  summary: '',
});

test('before a run directory exists, Slurm decides: pending is queued, running is running, a failure is failed', () => {
  assert.equal(slurmRowStatus(task('PENDING'), null, false), 'queued');
  assert.equal(slurmRowStatus(task('CONFIGURING'), null, false), 'queued');
  assert.equal(slurmRowStatus(task('RUNNING'), null, false), 'running');
  assert.equal(slurmRowStatus(task('OUT_OF_MEMORY'), null, false), 'failed');
  assert.equal(slurmRowStatus(task('NODE_FAIL'), null, false), 'failed');
  assert.equal(slurmRowStatus(task('CANCELLED'), null, false), 'cancelled');
  // A pending array task that was cancelled leaves no record in Slurm: the sweep remembers it.
  assert.equal(slurmRowStatus(task(null), null, true), 'cancelled');
  assert.equal(slurmRowStatus(null, null, false), 'queued');
});

test('once the engine wrote run.json, its status wins, except while Slurm holds the task again or killed it mid-run', () => {
  assert.equal(slurmRowStatus(task('RUNNING', 'running'), 'running', false), 'running');
  assert.equal(slurmRowStatus(task('COMPLETED', 'completed'), 'completed', false), 'completed');
  assert.equal(slurmRowStatus(task('TIMEOUT', 'stopped'), 'stopped', false), 'stopped');
  assert.equal(slurmRowStatus(task('PENDING', 'stopped'), 'stopped', false), 'queued', 'requeued');
  // run.json still says running but Slurm ended the task (SIGKILL after KillWait, OOM): not running any more.
  assert.equal(slurmRowStatus(task('OUT_OF_MEMORY', 'running'), 'running', false), 'failed');
  assert.equal(slurmRowStatus(task(null), 'completed', false), 'completed', 'finished long ago, forgotten by Slurm');
});

test('a task is alive while Slurm has it waiting or running', () => {
  assert.ok(slurmTaskActive(task('PENDING')));
  assert.ok(slurmTaskActive(task('RUNNING', 'running')));
  assert.ok(!slurmTaskActive(task('COMPLETED', 'completed')));
  assert.ok(!slurmTaskActive(task(null, 'stopped')));
});
