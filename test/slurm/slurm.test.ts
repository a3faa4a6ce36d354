// Sweeps on a real one-node Slurm cluster (test/slurm/cluster.sh, design.md#slurm-for-tests), driven through the bundled CLI as a
// user on a login node would drive it: submit, watch, scancel, a time limit, a requeue, and sbatch's refusal.
// Run alone: `npm run test:slurm` (needs root, as the Slurm daemons do; `npm test` runs it too).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const CLI = join(ROOT, 'dist/engine/cli.js');
const CLUSTER = join(ROOT, 'test/slurm/cluster.sh');
const dir = mkdtempSync(join(tmpdir(), 'cl-slurm-'));

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: dir, timeout: 300_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

interface Task {
  index: number;
  run_dir: string;
  slurm_job: string | null;
  slurm_state: string | null;
  slurm_reason: string | null;
  run_status: string | null;
  summary: string;
}
function status(sweepDir: string): Task[] {
  const r = cli('slurm', 'status', sweepDir, '--json');
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out).tasks;
}

const submitted: string[] = [];

// What Slurm and the run directories say, for a failure message: a wait that times out is otherwise unexplained.
function clusterState(): string {
  const show = (cmd: string, ...args: string[]) => {
    const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 });
    return `$ ${cmd} ${args.join(' ')}\n${(r.stdout ?? '') + (r.stderr ?? '')}`.trimEnd();
  };
  const parts = [
    show('squeue', '-h', '-o', '%i %T %r %M %l'),
    show('sinfo', '-h', '-o', '%N %T %E'),
    show('tail', '-n', '25', '/tmp/credit-lens-slurm/slurmctld.log'),
  ];
  for (const sweepDir of submitted) {
    const logs = join(sweepDir, 'slurm/logs');
    if (!existsSync(logs)) continue;
    for (const f of readdirSync(logs)) parts.push(show('tail', '-n', '15', join(logs, f)));
  }
  return parts.join('\n');
}

async function until<T>(what: string, fn: () => T | null | undefined | false, timeoutMs = 180_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}\n${clusterState()}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function config(name: string, grpoSteps: number, slurm: string, grid = '{ credit.strategy: [none, outcome_conditional] }'): string {
  const p = join(dir, `${name}.credit.yaml`);
  writeFileSync(
    p,
    `name: ${name}
seed: 3
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 2, d_ff: 64, max_seq_len: 48 }
task: { name: countdown, numbers: [3, 3], max_number: 9, max_target: 30, train_size: 64, eval_size: 8 }
sft: { steps: 4, batch_size: 8, lr: 1.0e-2 }
grpo: { steps: ${grpoSteps}, prompts_per_step: 2, group_size: 4, max_new_tokens: 24, eval_every: 1000, checkpoint_every: 1 }
sweep:
  grid: ${grid}
  executor: slurm
  slurm: ${slurm}
`,
  );
  return p;
}

function submit(cfgPath: string, ...extra: string[]): { sweepDir: string; jobId: string } {
  const r = cli('sweep', cfgPath, '--json', ...extra);
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out);
  assert.match(j.job_id, /^\d+$/);
  submitted.push(j.sweep_dir);
  return { sweepDir: j.sweep_dir, jobId: j.job_id };
}

const runJson = (runDir: string) => JSON.parse(readFileSync(join(runDir, 'run.json'), 'utf8'));

before(() => {
  assert.ok(existsSync(CLI), 'build first: npm run build');
  execFileSync('bash', [CLUSTER, 'start'], { stdio: 'inherit' });
});
after(async () => {
  // Cancel what is left and let the engines checkpoint before the daemons go (KillWait is 30 s).
  try {
    execFileSync('scancel', ['-u', 'root'], { stdio: 'ignore' });
  } catch {
    /* nothing queued */
  }
  for (let i = 0; i < 60; i++) {
    const q = spawnSync('squeue', ['-h'], { encoding: 'utf8' });
    if (q.status !== 0 || !q.stdout.trim()) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  execFileSync('bash', [CLUSTER, 'stop'], { stdio: 'inherit' });
});

test('a 2-run sweep submitted as one job array completes; both runs are readable run directories', async () => {
  const { sweepDir, jobId } = submit(config('two', 2, '{ max_parallel: 2, time: "10:00" }'));
  const script = readFileSync(join(sweepDir, 'slurm/sweep.sbatch'), 'utf8');
  assert.match(script, /^#SBATCH --array=0-1%2$/m);
  assert.match(script, /^#SBATCH --signal=B:TERM@120$/m);
  assert.match(script, /^#SBATCH --requeue$/m);
  assert.match(script, /^#SBATCH --time=10:00$/m);
  for (const i of [0, 1]) assert.ok(existsSync(join(sweepDir, `slurm/configs/task-${i}.yaml`)));
  const first = status(sweepDir);
  assert.equal(first.length, 2);
  assert.deepEqual(
    first.map((t) => t.slurm_job),
    [`${jobId}_0`, `${jobId}_1`],
  );
  const done = await until('both runs completed', () => {
    const s = status(sweepDir);
    return s.every((t) => t.run_status === 'completed') && s;
  });
  for (const t of done) {
    const info = runJson(t.run_dir);
    assert.equal(info.status, 'completed');
    assert.ok(existsSync(join(t.run_dir, 'metrics.jsonl')));
    assert.ok(t.run_dir.startsWith(join(dir, 'runs')), "the run directory is under the config's output_dir");
  }
  assert.match(runJson(done[1].run_dir).name ?? '', /outcome_conditional|oc/);
  // The table a person reads on the login node.
  const table = cli('slurm', 'status', sweepDir);
  assert.match(table.out, /\| 0 \| .* \| completed \|/);
});

test('scancel of a running task leaves a stopped, resumable run', async () => {
  const { sweepDir } = submit(config('cancel', 100000, '{ max_parallel: 1 }', '{ credit.strategy: [none] }'));
  const t = await until('the run has a checkpoint', () => {
    const [s] = status(sweepDir);
    // Checkpoints are pruned to the newest few, so "has one past the post-SFT step 0" is the test.
    return (
      s.run_status === 'running' &&
      (runJson(s.run_dir).last_step ?? 0) >= 2 &&
      readdirSync(join(s.run_dir, 'checkpoints')).some((c) => /^step-0*[1-9]\d*$/.test(c)) &&
      s
    );
  });
  const r = cli('slurm', 'cancel', sweepDir, '--task', '0');
  assert.equal(r.code, 0, r.err);
  const info = await until(
    'run.json says stopped',
    () => {
      const i = runJson(t.run_dir);
      return i.status !== 'running' && i;
    },
    60_000,
  );
  assert.equal(info.status, 'stopped');
  // Resumable: the CLI continues it to completion from its last checkpoint.
  const resumed = cli('train', '--resume', t.run_dir, '--set', 'grpo.steps=' + String(info.last_step + 1));
  assert.equal(resumed.code, 0, resumed.err);
  assert.equal(runJson(t.run_dir).status, 'completed');
});

test('a task stopped by its time limit ends stopped, and resumes when requeued', async () => {
  // --time=1 with --signal=B:TERM@50: Slurm signals the batch shell up to a minute early, the engine checkpoints.
  const { sweepDir, jobId } = submit(config('limit', 100000, '{ time: "1", signal: "B:TERM@50" }', '{ credit.strategy: [none] }'));
  const [t] = await until('the run has started', () => {
    const s = status(sweepDir);
    return s[0].run_status ? s : null;
  });
  const stopped = await until(
    'run.json says stopped',
    () => {
      const i = runJson(t.run_dir);
      return i.status !== 'running' && i;
    },
    150_000,
  );
  assert.equal(stopped.status, 'stopped', JSON.stringify(stopped));
  const stepBefore = stopped.last_step;
  assert.ok(stepBefore >= 1);
  // Requeue as a preemption would. Slurm holds a requeued task for cred_expire + 1 s (BeginTime; cluster.sh sets 10 s):
  // releasing it sooner races slurmd, which refuses a launch in the second the old credential was revoked and fails
  // the task for good ("Job credential revoked").
  execFileSync('scontrol', ['requeue', `${jobId}_0`]);
  await until('the task is pending again', () => status(sweepDir)[0].slurm_state === 'PENDING', 30_000);
  // The requeued task keeps its one-minute limit, and Slurm may send the early TERM at any point of its last minute,
  // so on a loaded machine the second start could be signalled before it trains a step. Give it ten minutes, as an
  // admin raising a preempted job's limit would: this test is about the resume, the stop was checked above.
  execFileSync('scontrol', ['update', `JobId=${jobId}_0`, 'TimeLimit=10']);
  await until(
    'the run resumed past its checkpoint',
    () => {
      const i = runJson(t.run_dir);
      return i.resumed_from && i.last_step > stepBefore && i;
    },
    150_000,
  );
  const log = readFileSync(join(sweepDir, `slurm/logs/${jobId}_0.out`), 'utf8');
  assert.match(log, /restart 1/);
  cli('slurm', 'cancel', sweepDir);
  await until('stopped again', () => runJson(t.run_dir).status === 'stopped', 60_000);
  assert.ok(runJson(t.run_dir).last_step > stepBefore, 'the stop after the resume keeps the steps trained since');
});

test("a bad partition gives Slurm's own message; no sbatch on PATH is a clear error", () => {
  const cfgPath = config('badpart', 1, '{ partition: nosuchpartition }', '{ credit.strategy: [none] }');
  const r = cli('sweep', cfgPath);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /sbatch refused the sweep: .*invalid partition/i);
  const noSlurm = spawnSync(process.execPath, [CLI, 'sweep', cfgPath], { encoding: 'utf8', cwd: dir, env: { ...process.env, PATH: '/nonexistent' } });
  assert.equal(noSlurm.status, 2);
  assert.match(noSlurm.stderr, /sbatch is not on PATH/);
  assert.doesNotMatch(noSlurm.stderr, /^\s+at /m);
});
