// The pure parts of the Slurm executor: what sbatch is given, and how squeue / scontrol answers are read. The
// scontrol and squeue texts below were printed by Debian's Slurm 22.05 on the one-node test cluster
// (test/slurm/cluster.sh) for an array job 2 with tasks 0 (cancelled) and 1 (requeued, held by BeginTime).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_SLURM, parseScontrol, parseSqueue, sbatchDirectives, sbatchScript, shq, type SlurmSweep } from '../../../src/engine/sweep/slurm';

const SCONTROL = `JobId=3 ArrayJobId=2 ArrayTaskId=0 JobName=t.sbatch
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901759 Nice=0 Account=(null) QOS=(null)
   JobState=CANCELLED Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15

JobId=2 ArrayJobId=2 ArrayTaskId=1 JobName=t.sbatch
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   JobState=PENDING Reason=BeginTime Dependency=(null)
   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0
`;

test('scontrol show job: one state per array task, reason None as null, restarts', () => {
  const m = parseScontrol(SCONTROL);
  assert.deepEqual(m.get(0), { state: 'CANCELLED', reason: null, exit_code: '0:15', restarts: 0 });
  assert.deepEqual(m.get(1), { state: 'PENDING', reason: 'BeginTime', exit_code: '0:0', restarts: 1 });
  assert.equal(m.size, 2);
});

test('squeue -r -o %K|%T|%r: single tasks and the ranges a pending array prints', () => {
  const m = parseSqueue('1|RUNNING|None\n[2-4%2]|PENDING|JobArrayTaskLimit\n7|PENDING|Resources\n');
  assert.deepEqual(
    [...m.keys()].sort((a, b) => a - b),
    [1, 2, 3, 4, 7],
  );
  assert.equal(m.get(1)!.reason, null);
  assert.equal(m.get(3)!.reason, 'JobArrayTaskLimit');
  assert.equal(m.get(7)!.state, 'PENDING');
});

test('sbatch directives: the array with its throttle, the signal, requeue, and only the options that are set', () => {
  const d = sbatchDirectives(
    { ...DEFAULT_SLURM, partition: 'gpu', time: '2:00:00', cpus_per_task: 4, mem: '8G', max_parallel: 3, extra_args: ['--gres=gpu:1'] },
    12,
    'credit-lens-x',
    '/s/logs',
  );
  assert.deepEqual(d, [
    '--job-name=credit-lens-x',
    '--array=0-11%3',
    '--output=/s/logs/%A_%a.out',
    '--open-mode=append',
    '--partition=gpu',
    '--time=2:00:00',
    '--cpus-per-task=4',
    '--mem=8G',
    '--signal=B:TERM@120',
    '--requeue',
    '--gres=gpu:1',
  ]);
  const bare = sbatchDirectives(DEFAULT_SLURM, 1, 'j', '/l');
  assert.ok(bare.includes('--array=0-0'));
  assert.ok(!bare.some((x) => x.startsWith('--partition') || x.startsWith('--time')));
});

test('the script forwards SIGTERM to the engine, waits for its checkpoint, and quotes paths', () => {
  const sweep: SlurmSweep = {
    kind: 'credit-lens-slurm-sweep',
    version: 1,
    sweep_dir: "/shared/it's here/sweep-1",
    config: '/c.yaml',
    created: '',
    job_id: null,
    script: '/shared/sweep.sbatch',
    tasks: [{ index: 0, name: 'a-none', config: '/x', run_dir: '/r', overrides: {} }],
  };
  const s = sbatchScript(sweep, { ...DEFAULT_SLURM, setup: ['module load node/20'] }, '/opt/cl/dist/engine/cli.js', '/work');
  assert.match(s, /^#!\/bin\/bash\n/);
  assert.ok(s.includes(`SWEEP_DIR=${shq("/shared/it's here/sweep-1")}`));
  assert.equal(shq("it's"), `'it'\\''s'`);
  assert.match(s, /^module load node\/20$/m);
  assert.match(s, /'node' '\/opt\/cl\/dist\/engine\/cli\.js' train "\$CONFIG" --run-dir "\$RUN_DIR" &/);
  assert.match(s, /trap 'kill -TERM "\$pid" 2>\/dev\/null' TERM INT/);
  assert.match(s, /while kill -0 "\$pid"/);
  assert.match(s, /not visible on .*share/);
  const onPath = sbatchScript(sweep, { ...DEFAULT_SLURM, engine: 'path' }, '/unused', '/work');
  assert.match(onPath, /^credit-lens train "\$CONFIG"/m);
});

test('an output directory that cannot be written is refused before anything is submitted, naming it', async () => {
  const { prepareSlurmSweep } = await import('../../../src/engine/sweep/slurm');
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const config = parseConfigText('name: x\noutput_dir: /dev/null/runs\n').config!;
  assert.throws(
    () =>
      prepareSlurmSweep({
        configPath: '/c.yaml',
        outputDir: config.output_dir,
        runs: [{ name: 'x', overrides: {}, config }],
        slurm: DEFAULT_SLURM,
        cliPath: '/cli.js',
      }),
    /output_dir: \/dev\/null\/runs cannot be written \(ENOTDIR/,
  );
});
