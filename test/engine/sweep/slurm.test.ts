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
    '--output="/s/logs/%A_%a.out"',
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

// ---- faults: each test injects one and failed on the code before it ----

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

test('a newline or control character in any sweep.slurm value is a config error naming the field', async () => {
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const bad: [string, string][] = [
    ['partition', 'partition: "gpu\\n#SBATCH --wrap=rm"'],
    ['account', 'account: "lab\\r"'],
    ['qos', 'qos: "a\\tb"'],
    ['extra_args', 'extra_args: ["--gres=gpu:1\\n--wrap=x"]'],
    ['setup', 'setup: ["module load node\\nrm -rf ~"]'],
    ['node', 'node: "node\\u0007"'],
  ];
  for (const [field, line] of bad) {
    const r = parseConfigText(`name: x\nsweep:\n  slurm:\n    ${line}\n`);
    assert.equal(r.config, null, field);
    const msg = r.issues.map((i) => i.message).join('\n');
    assert.match(msg, new RegExp(`sweep\\.slurm\\.${field}`), msg);
    assert.match(msg, /no newline or other control character/, msg);
  }
  assert.ok(parseConfigText('name: x\nsweep:\n  slurm:\n    partition: gpu\n    setup: ["module load node/20"]\n').config, 'plain values pass');
});

function fakeSweep(dir: string, jobId: string | null): SlurmSweep {
  const sweep: SlurmSweep = {
    kind: 'credit-lens-slurm-sweep',
    version: 1,
    sweep_dir: dir,
    config: '/c.yaml',
    created: '',
    job_id: jobId,
    script: join(dir, 'slurm', 'sweep.sbatch'),
    tasks: [{ index: 0, name: 'a', config: '/c.yaml', run_dir: join(dir, 'no-run-yet'), overrides: {} }],
  };
  mkdirSync(join(dir, 'slurm'), { recursive: true });
  writeFileSync(join(dir, 'slurm', 'sweep.json'), JSON.stringify(sweep));
  return sweep;
}

test('a job id in sweep.json that is not one sbatch printed never reaches scancel', async () => {
  const { readSlurmSweep } = await import('../../../src/engine/sweep/slurm');
  const dir = mkdtempSync(join(tmpdir(), 'cl-jobid-'));
  for (const id of ['12; rm -rf ~', '-u root', '12 13', '']) {
    fakeSweep(dir, id);
    assert.throws(() => readSlurmSweep(dir), /job_id .* is not a Slurm job id/, id);
  }
  for (const id of ['12', '12_3']) {
    fakeSweep(dir, id);
    assert.equal(readSlurmSweep(dir).job_id, id);
  }
});

/** squeue and scontrol stand-ins on PATH: each prints what `script` says for the n-th call (a counter file). */
function fakeSlurm(answers: { squeue: string[]; scontrol: string[] }): { dir: string; restore: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'cl-fake-slurm-'));
  for (const [cmd, list] of Object.entries(answers)) {
    const cases = list.map((a, i) => `  ${i + 1}) ${a} ;;`).join('\n');
    writeFileSync(
      join(dir, cmd),
      `#!/bin/sh\nn=$(cat "${dir}/${cmd}.n" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "${dir}/${cmd}.n"\ncase $n in\n${cases}\n  *) ${list.at(-1)} ;;\nesac\n`,
    );
    chmodSync(join(dir, cmd), 0o755);
  }
  const old = process.env.PATH;
  process.env.PATH = `${dir}:${old}`;
  return { dir, restore: () => (process.env.PATH = old) };
}

const TIMEOUT = `echo "slurm_load_jobs error: Socket timed out on send/recv operation" >&2; exit 1`;
const GONE = `echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1`;

test('a controller that does not answer is not "job gone": status says so, and --wait asks again until Slurm answers', async () => {
  const { slurmStatus } = await import('../../../src/engine/sweep/slurm');
  const { cmdSlurm } = await import('../../../src/engine/sweep/slurm_cli');
  const dir = mkdtempSync(join(tmpdir(), 'cl-unanswered-'));
  const sweep = fakeSweep(dir, '41');
  // squeue and scontrol time out twice, then the job is found ended (scontrol: COMPLETED), then forgotten by Slurm
  const fake = fakeSlurm({
    squeue: [TIMEOUT, TIMEOUT, 'exit 0'],
    scontrol: [TIMEOUT, TIMEOUT, 'echo "JobId=42 ArrayJobId=41 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0 Restarts=0"', GONE],
  });
  try {
    const first = await slurmStatus(sweep);
    assert.match(first.unanswered ?? '', /^squeue: slurm_load_jobs error: Socket timed out/);
    assert.equal(first.tasks[0].slurm_state, null);
    assert.match(first.tasks[0].summary, /^Slurm did not answer \(squeue: slurm_load_jobs error: Socket timed out/);
    const out: string[] = [];
    await cmdSlurm('status', dir, { json: true, wait: true, poll: 0.05 }, (s) => out.push(s));
    const json = JSON.parse(out[0]);
    assert.equal(json.slurm_error, null, 'it waited for an answer');
    assert.equal(json.tasks[0].slurm_state, 'COMPLETED');
    assert.equal(readFileSync(join(fake.dir, 'scontrol.n'), 'utf8').trim(), '3', 'asked again after the silence, and stopped once answered');
    // "Invalid job id" is an answer: the job ended long ago
    const gone = await slurmStatus(sweep);
    assert.equal(gone.unanswered, null);
    assert.equal(gone.tasks[0].summary, 'unknown to Slurm (finished long ago?)');
  } finally {
    fake.restore();
  }
});

test('two Slurm sweeps prepared in the same second get their own sweep folders and run folders', async () => {
  const { prepareSlurmSweep } = await import('../../../src/engine/sweep/slurm');
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const out = mkdtempSync(join(tmpdir(), 'cl-same-second-'));
  const config = parseConfigText(`name: x\noutput_dir: ${out}\n`).config!;
  const now = new Date(2026, 10, 25, 12, 0, 0);
  const prepare = () =>
    prepareSlurmSweep({
      configPath: '/c.yaml',
      outputDir: out,
      runs: ['x-a', 'x-b'].map((name) => ({ name, overrides: {}, config: { ...config, name } })),
      slurm: DEFAULT_SLURM,
      cliPath: '/cli.js',
      now,
    });
  const one = prepare();
  const two = prepare();
  assert.notEqual(one.sweep_dir, two.sweep_dir);
  const dirs = [...one.tasks, ...two.tasks].map((t) => t.run_dir);
  assert.equal(new Set(dirs).size, 4, dirs.join('\n'));
  assert.match(two.tasks[0].run_dir, /x-a-20261125-120000-2$/);
});

test('an output_dir with a double quote cannot hold a Slurm sweep: refused, naming it', async () => {
  const { prepareSlurmSweep } = await import('../../../src/engine/sweep/slurm');
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const out = join(mkdtempSync(join(tmpdir(), 'cl-quote-')), 'a"b');
  const config = parseConfigText('name: x\n').config!;
  assert.throws(
    () => prepareSlurmSweep({ configPath: '/c.yaml', outputDir: out, runs: [{ name: 'x', overrides: {}, config }], slurm: DEFAULT_SLURM, cliPath: '/cli.js' }),
    /output_dir: .*a\\"b.* double quote/,
  );
});
