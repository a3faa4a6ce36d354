// The handlers of the commands that train (train, sweep, eval, slurm), compare runs and print the schema or the bench:
// flags in, a domain function called, its result printed. The table in commands.ts names them; domain code never
// imports this file.
import { UserError } from '../core/errors';
import { BACKENDS } from '../config/base';
import { loadConfig } from '../config/config';
import type { BackendPreference } from '../model/backend';
import { RunController, train, type Reporter } from '../train/train';
import { choiceFlag, intFlag, numFlag, parseArgs } from './args';

function humanReporter(): Reporter {
  const t0 = Date.now();
  const el = () => `${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s`;
  return {
    started: (p) => process.stderr.write(`run ${p.runDir} (backend ${p.backend})\n`),
    progress: () => {},
    metrics: (_d, r) => {
      const f = (v: number | string | undefined, d = 3) => (typeof v === 'number' ? v.toFixed(d) : '-');
      if (r.phase === 'sft') {
        if (r.step % 10 === 0 || r.step === 1) process.stderr.write(`${el()} sft  ${String(r.step).padStart(4)}  loss ${f(r.loss)}\n`);
        return;
      }
      if (r.phase === 'eval') {
        process.stderr.write(`${el()} eval ${String(r.step).padStart(4)}  success ${f((r.eval_success ?? 0) * 100, 1)}%\n`);
        return;
      }
      process.stderr.write(
        `${el()} grpo ${String(r.step).padStart(4)}  reward ${f(r.reward_mean)} ± ${f(r.reward_std)}  success ${f((r.success_rate ?? 0) * 100, 1)}%` +
          `  loss ${f(r.loss, 4)}  |g| ${f(r.grad_norm)}  len ${f(r.response_len, 1)}  ${f(r.step_time_s, 2)}s` +
          (r.eval_success !== undefined ? `  eval ${f(r.eval_success * 100, 1)}%` : '') +
          (r.skipped ? '  SKIPPED' : '') +
          '\n',
      );
    },
    log: (level, m) => {
      if (level !== 'info' || /^(backend|faster|resumed|eval before|shared warm start)/.test(m))
        process.stderr.write(`${level === 'info' ? '' : level + ': '}${m}\n`);
    },
    finished: (p) => process.stderr.write(`${p.status}${p.error ? `: ${p.error}` : ''} — ${p.runDir}\n`),
  };
}

export async function cmdReward(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['set'] }, usage);
  if (a.positional.length !== 1) throw new UserError(`reward needs exactly one config file\n${usage}`);
  const { serveRewards } = await import('../trl/reward_worker');
  await serveRewards(loadConfig(a.positional[0], a.flags.get('set')).config);
  return 0;
}

export async function cmdTrain(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['set', 'resume', 'output-dir', 'run-dir'], boolean: ['rpc'] }, usage);
  const resume = a.flags.get('resume')?.[0];
  if (!resume && a.positional.length !== 1) throw new UserError(`train needs exactly one config file\n${usage}`);
  const controller = new RunController();
  let reporter: Reporter;
  let close = () => {};
  if (a.flags.has('rpc')) {
    const { rpcReporter } = await import('./rpc');
    const r = rpcReporter(controller);
    reporter = r.reporter;
    close = () => r.connection.dispose();
  } else reporter = humanReporter();
  let signals = 0;
  // A second Ctrl-C aborts (a person at the terminal means it); SIGTERM never does: a scheduler may deliver it to the
  // engine and to its batch shell, which forwards it again (scancel), and the run must still end with its checkpoint.
  const onSignal = (sig: string) => {
    if (sig === 'SIGINT' && ++signals > 1) process.exit(130);
    if (controller.stopRequested) return;
    process.stderr.write(`${sig}: stopping after the current step (checkpoint, then exit)${sig === 'SIGINT' ? '; press again to abort' : ''}\n`);
    void controller.stop();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  try {
    const r = await train({
      configPath: a.positional[0],
      sets: a.flags.get('set'),
      resume,
      reporter,
      controller,
      outputDir: a.flags.get('output-dir')?.[0],
      runDir: a.flags.get('run-dir')?.[0],
    });
    if (r.initialEval !== null && r.finalEval !== null && !a.flags.has('rpc')) {
      process.stderr.write(`greedy eval success: ${(r.initialEval * 100).toFixed(1)}% after SFT → ${(r.finalEval * 100).toFixed(1)}% after GRPO\n`);
    }
    return exitStatus([r.status]);
  } finally {
    // Let the last notifications flush before the connection closes.
    await new Promise((r) => setTimeout(r, 50));
    close();
  }
}

export async function cmdSweep(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['set', 'executor'], boolean: ['json', 'dry-run'] }, usage);
  if (a.positional.length !== 1) throw new UserError(`sweep needs exactly one config file\n${usage}`);
  const { loadConfig } = await import('../config/config');
  const { config } = loadConfig(a.positional[0], a.flags.get('set') ?? []);
  const executor = a.flags.get('executor')?.[0] ?? config.sweep?.executor ?? 'local';
  if (executor !== 'local' && executor !== 'slurm') throw new UserError(`--executor ${executor}: expected local or slurm`);
  if (executor === 'slurm') {
    const { expandSweep } = await import('../sweep/sweep');
    const { submitSweep } = await import('../sweep/slurm_cli');
    const sweep = await submitSweep(a.positional[0], config, expandSweep(config), config.sweep?.slurm, { dryRun: a.flags.has('dry-run') });
    if (a.flags.has('json')) console.log(JSON.stringify(sweep, null, 2));
    else {
      console.log(`${a.flags.has('dry-run') ? 'prepared' : `submitted job ${sweep.job_id}:`} ${sweep.tasks.length} runs in ${sweep.sweep_dir}`);
      console.log(`script: ${sweep.script}\nwatch: credit-lens slurm status ${sweep.sweep_dir}\ncancel: credit-lens slurm cancel ${sweep.sweep_dir}`);
    }
    return 0;
  }
  if (a.flags.has('dry-run')) {
    // The runs the sweep would train, and nothing else: no run directory, no warm start.
    const { expandSweep } = await import('../sweep/sweep');
    const runs = expandSweep(config).map((r) => ({ name: r.name, overrides: r.overrides, output_dir: r.config.output_dir }));
    if (a.flags.has('json')) console.log(JSON.stringify({ executor: 'local', runs }, null, 2));
    else {
      console.log(`${runs.length} run${runs.length === 1 ? '' : 's'} (dry run: nothing trained)`);
      for (const r of runs)
        console.log(
          `  ${r.name}  ${Object.entries(r.overrides)
            .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
            .join(' ')}`,
        );
    }
    return 0;
  }
  const { runSweep, sweepTable } = await import('../sweep/run_sweep');
  const controller = new RunController();
  let signals = 0;
  process.on('SIGINT', () => {
    if (++signals > 1) process.exit(130);
    process.stderr.write('SIGINT: stopping the current run (checkpoint) and skipping the rest\n');
    void controller.stop();
  });
  process.on('SIGTERM', () => void controller.stop());
  const results = await runSweep(a.positional[0], a.flags.get('set') ?? [], humanReporter(), controller, (m) => process.stderr.write(m + '\n'));
  console.log(sweepTable(results));
  return exitStatus(results.map((r) => r.status));
}

/**
 * 0 when every run completed, 1 when one failed, 130 when one was stopped (Ctrl-C, SIGTERM, Stop) or skipped by the
 * stop: the status a stopped probe and import exit with too, so a script can tell a stop (resumable) from a failure
 * and from the end.
 */
export function exitStatus(statuses: string[]): number {
  if (statuses.includes('failed')) return 1;
  return statuses.includes('stopped') || statuses.includes('skipped') ? 130 : 0;
}

export async function cmdEval(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['checkpoint'], boolean: ['json'] }, usage);
  if (a.positional.length !== 1) throw new UserError(`eval needs a run directory\n${usage}`);
  const { evalRun } = await import('../train/evalrun');
  const ck = a.flags.get('checkpoint')?.[0];
  const r = await evalRun(a.positional[0], ck === undefined ? undefined : Number(ck));
  if (a.flags.has('json')) console.log(JSON.stringify(r));
  else console.log(`${r.checkpoint}: greedy eval success ${(r.success * 100).toFixed(1)}% (mean reward ${r.reward.toFixed(3)}) on ${r.n} examples`);
  return 0;
}

export async function cmdSchema(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['out'], boolean: [] }, usage);
  const { configJsonSchema } = await import('../config/config');
  const text = JSON.stringify(configJsonSchema(), null, 2) + '\n';
  const out = a.flags.get('out')?.[0];
  if (out) (await import('node:fs')).writeFileSync(out, text);
  else process.stdout.write(text);
  return 0;
}

export async function cmdBench(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(
    argv,
    { valued: ['backend', 'torch-python', 'torch-device', 'out', 'tokenizer-dir'], boolean: ['json', 'quick', 'profile', 'device', 'local', 'toggles-child'] },
    usage,
  );
  if (a.flags.has('toggles-child')) {
    // one setting of Dawn's toggles, in a process of its own: the device bench's dawn_toggles stage runs this
    const { togglesChild } = await import('../bench/device');
    console.log(JSON.stringify(await togglesChild()));
    return 0;
  }
  if (a.flags.has('device')) {
    // The GPU machine's figures (bench/device/run.sh): webgpu against PyTorch on the same machine, one JSON report.
    const { runDeviceBench } = await import('../bench/device');
    const local = a.flags.has('local');
    const report = await runDeviceBench({
      local,
      quick: a.flags.has('quick'),
      torchPython: a.flags.get('torch-python')?.[0] ?? (local ? '/usr/bin/python3' : 'python3'),
      torchDevice: a.flags.get('torch-device')?.[0] ?? (local ? 'cpu' : 'cuda'),
      tokenizerDir: a.flags.get('tokenizer-dir')?.[0],
      out: a.flags.get('out')?.[0] ?? null,
      say: (m) => process.stderr.write(m + '\n'),
    });
    console.log(JSON.stringify(report));
    return 0;
  }
  if (a.flags.has('profile')) {
    const { profileReference, profileMarkdown } = await import('../bench/profile');
    const backend: BackendPreference = choiceFlag(a, 'backend', BACKENDS, 'auto');
    for (const t of await profileReference(undefined, backend)) console.log(profileMarkdown(t) + '\n');
    return 0;
  }
  const { runBench } = await import('../bench/bench');
  await runBench({ json: a.flags.has('json'), quick: a.flags.has('quick') });
  return 0;
}

export async function cmdCompare(argv: string[], usage: string): Promise<number> {
  console.log(await compareOutput(argv, usage));
  return 0;
}

/** What `compare` prints for these arguments (the results book rebuilds its tables through this too). */
export async function compareOutput(argv: readonly string[], usage: string): Promise<string> {
  const a = parseArgs(argv, { valued: ['baseline', 'split', 'alpha', 'step', 'power-for', 'looks'], boolean: ['json', 'from-start', 'common-step'] }, usage);
  const { compareSeeds, compareMarkdown, gainFromStart, gainMarkdown } = await import('../analysis/compare');
  const split = choiceFlag(a, 'split', ['test', 'validation'] as const, 'test');
  const opts = {
    split,
    alpha: numFlag(a, 'alpha', (x) => x > 0 && x < 1, 'a level in (0, 1)') ?? 0.05,
    step: numFlag(a, 'step', (x) => Number.isInteger(x) && x >= 0, 'a step number ≥ 0'),
    powerFor: numFlag(a, 'power-for', (x) => x > 0 && x < 1, 'a difference in success rate in (0, 1), e.g. 0.05 for 5 points'),
    commonStep: a.flags.has('common-step'),
    looks: numFlag(a, 'looks', (x) => Number.isInteger(x) && x >= 1, 'the number of looks at these groups, this one included (an integer ≥ 1)'),
  } as const;
  if (a.flags.has('from-start')) {
    if (a.flags.has('baseline')) throw new UserError('compare: --from-start measures each run against its own step 0; it takes no --baseline');
    const g = gainFromStart(a.positional, opts);
    return a.flags.has('json') ? JSON.stringify(g, null, 2) : gainMarkdown(g);
  }
  const r = compareSeeds(a.flags.get('baseline') ?? [], a.positional, opts);
  return a.flags.has('json') ? JSON.stringify(r, null, 2) : compareMarkdown(r);
}

export async function cmdSlurm(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['task', 'poll'], boolean: ['json', 'wait'] }, usage);
  return await (
    await import('../sweep/slurm_cli')
  ).cmdSlurm(
    a.positional[0],
    a.positional[1],
    { json: a.flags.has('json'), wait: a.flags.has('wait'), task: intFlag(a, 'task', 0), poll: numFlag(a, 'poll', (x) => x > 0, 'seconds > 0') },
    (m) => console.log(m),
  );
}
