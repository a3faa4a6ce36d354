// The handlers of the commands that read runs and rollouts (analyze, import, rollouts paired, importance train): flags
// in, a domain function called, its result printed. The table in commands.ts names them; domain code never imports
// this file.
import { writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { poolProbes, pooledProbeMarkdown } from '../probe/pooled';
import { probeAccuracies } from '../rundir/probe_record';
import { readRunInfo } from '../rundir/rundir';
import type { AnalyzeReport, PooledProbeReport } from '../../protocol/analysis';
import { analyzeRun, compareRuns, type AnalyzeOptions } from '../analysis/analysis';
import { analysisToMarkdown } from '../analysis/markdown';
import { UserError } from '../core/errors';
import { SERVER_APIS } from '../server_apis/catalog';
import { importRollouts } from '../import/import';
import { IMPORT_FORMATS, type ImportFormat } from '../../protocol/import_formats';
import { importanceTrain } from '../importance/importance';
import type { ImportanceNetConfig } from '../model/importance_net';
import { pairedRollouts } from '../importance/paired';
import { flag, choiceFlag, intFlag, numFlag, parseArgs, progressPrinter, stopOnSignals } from './args';

export const ANALYZE_USAGE = `usage: credit-lens analyze <run-dir> [--out file] [--json] [--from-step N] [--to-step N]
       credit-lens analyze --probe <run-dir> <run-dir> … [--out file] [--json]
                           [--baseline <run-dir>] [--reasoning-regex RE] [--top-k N] [--contribution episode|weighted] [--probe]
  Prints the GRPO credit-assignment analysis's credit tables as Markdown; --json prints the JSON instead. --out writes a file
  (JSON when it ends in .json or --json is given, else Markdown). --baseline adds the Appendix-B comparison.
  --contribution: c = A·log-prob, the GRPO credit-assignment analysis's (episode, the default), or Â·log-prob with the strategy's weight.
  --probe adds each probed step's credit accuracy (credit-lens probe). With several run directories, --probe pools their
  probes: one accuracy per strategy and the cancellation test, the run as the unit (each run's probed steps averaged).`;

/** `credit-lens analyze <run> …` (argv after the command name). Returns the exit code. */
export async function cmdAnalyze(argv: string[]): Promise<number> {
  const args = parseArgs(
    argv,
    { valued: ['out', 'from-step', 'to-step', 'baseline', 'reasoning-regex', 'top-k', 'contribution'], boolean: ['json', 'probe'] },
    ANALYZE_USAGE,
  );
  const { positional } = args;
  const json = args.flags.has('json');
  const flags = new Map([...args.flags].map(([k, v]) => [k, v.at(-1)!]));
  if (positional.length > 1) {
    if (!args.flags.has('probe'))
      throw new UserError(`analyze takes one run directory, or several with --probe (their probes pooled, the run as the unit)\n${ANALYZE_USAGE}`);
    return pooledProbeCommand(positional, json, flags.get('out'));
  }
  if (positional.length !== 1) throw new UserError(`analyze needs a run directory\n${ANALYZE_USAGE}`);
  const opts: AnalyzeOptions = {
    fromStep: intFlag(args, 'from-step'),
    toStep: intFlag(args, 'to-step'),
    reasoningRegex: flags.get('reasoning-regex'),
    topK: intFlag(args, 'top-k'),
    contribution: choiceFlag(args, 'contribution', ['episode', 'weighted'] as const, 'episode'),
    probe: args.flags.has('probe'),
  };
  const analysis = analyzeRun(positional[0], opts);
  const baselineDir = flags.get('baseline');
  const cmp = baselineDir !== undefined ? compareRuns(analysis, analyzeRun(baselineDir, opts)) : undefined;
  const report: AnalyzeReport = cmp ? { ...analysis, appendix_b: cmp } : analysis;
  const asJson = () => JSON.stringify(report, null, 2) + '\n';
  const out = flags.get('out');
  if (out !== undefined) {
    const text = json || out.toLowerCase().endsWith('.json') ? asJson() : analysisToMarkdown(analysis, cmp);
    try {
      writeFileSync(out, text);
    } catch (e) {
      throw new UserError(`cannot write ${out}: ${(e as Error).message}`);
    }
    process.stderr.write(`wrote ${out}\n`);
  } else {
    process.stdout.write(json ? asJson() : analysisToMarkdown(analysis, cmp));
  }
  return 0;
}

/** Every run's probes pooled, the run as the unit (`analyze --probe <run> <run> …`, and the results book's `analyze` tables). */
export function pooledProbeReport(runDirs: readonly string[]): PooledProbeReport {
  const runs = runDirs.map((dir) => {
    const info = readRunInfo(dir);
    if (!info) throw new UserError(`analyze --probe: ${dir} is not a run directory (no readable run.json)`);
    return { run_dir: dir, name: basename(dir), probes: probeAccuracies(dir), start: info.warm_start ?? null };
  });
  const none = runs.filter((r) => !r.probes.length).map((r) => r.name);
  if (none.length === runs.length) throw new UserError(`analyze --probe: none of these runs has a probe (credit-lens probe <run> --step N)`);
  if (none.length) process.stderr.write(`analyze --probe: no probe in ${none.join(', ')}; pooled over the other ${runs.length - none.length}\n`);
  return poolProbes(runs);
}

function pooledProbeCommand(runDirs: string[], json: boolean, out: string | undefined): number {
  const report = pooledProbeReport(runDirs);
  const text = json || out?.toLowerCase().endsWith('.json') ? JSON.stringify(report, null, 2) + '\n' : pooledProbeMarkdown(report);
  if (out === undefined) process.stdout.write(text);
  else {
    try {
      writeFileSync(out, text);
    } catch (e) {
      throw new UserError(`cannot write ${out}: ${(e as Error).message}`);
    }
    process.stderr.write(`wrote ${out}\n`);
  }
  return 0;
}

export const IMPORTANCE_USAGE =
  'usage: credit-lens importance train <config.credit.yaml> --rollouts <rollouts.parquet> [--out dir] [--steps N] ' +
  '[--batch-size N] [--lr x] [--d-model N] [--layers N] [--heads N] [--heldout fraction] [--validation fraction] [--reward column] [--set key=value]...';

export async function cmdImportance(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'train') throw new UserError(`importance: unknown subcommand ${sub === undefined ? '(none)' : JSON.stringify(sub)}\n${IMPORTANCE_USAGE}`);
  const a = parseArgs(
    rest,
    { valued: ['rollouts', 'out', 'steps', 'batch-size', 'lr', 'd-model', 'layers', 'heads', 'heldout', 'validation', 'reward', 'set'] },
    IMPORTANCE_USAGE,
  );
  if (a.positional.length !== 1) throw new UserError(`importance train needs exactly one config file\n${IMPORTANCE_USAGE}`);
  const rollouts = a.flags.get('rollouts')?.at(-1);
  if (!rollouts) throw new UserError(`importance train needs --rollouts <rollouts.parquet> (from \`credit-lens rollouts paired\`)\n${IMPORTANCE_USAGE}`);
  const net: Partial<ImportanceNetConfig> = {};
  const d = intFlag(a, 'd-model', 2),
    l = intFlag(a, 'layers', 1),
    h = intFlag(a, 'heads', 1);
  if (d !== undefined) net.d_model = d;
  if (l !== undefined) net.n_layers = l;
  if (h !== undefined) net.n_heads = h;
  if (d !== undefined) net.d_ff = 2 * d;
  const r = await importanceTrain({
    configPath: a.positional[0],
    rollouts,
    out: a.flags.get('out')?.at(-1),
    sets: a.flags.get('set'),
    net,
    steps: intFlag(a, 'steps', 1),
    batchSize: intFlag(a, 'batch-size', 1),
    lr: numFlag(a, 'lr', (x) => x > 0, 'a positive number'),
    heldout: numFlag(a, 'heldout', (x) => x > 0 && x < 1, 'a fraction in (0, 1)'),
    validation: numFlag(a, 'validation', (x) => x >= 0 && x < 1, 'a fraction in [0, 1)'),
    reward: a.flags.get('reward')?.at(-1),
    log: (m) => process.stderr.write(m + '\n'),
  });
  const m = r.metrics;
  process.stderr.write(
    `held-out NLL per pair: net ${m.heldout_nll.toFixed(4)}  constant f=${m.constant_f.toFixed(3)} ${m.heldout_nll_constant.toFixed(4)}  ` +
      `independent ${m.heldout_nll_independent.toFixed(4)}  (${m.heldout_pairs} pairs of ${m.heldout_prompts} prompts; ${m.train_pairs} training pairs; ` +
      `weights of step ${m.selected_step})\n`,
  );
  console.log(r.dir);
  return 0;
}

export const ROLLOUTS_USAGE =
  'usage: credit-lens rollouts paired <config.credit.yaml> [--groups N] [--checkpoint <run-or-checkpoint-dir>] [--set key=value]... [--output-dir dir]';

/** `credit-lens rollouts paired …` (argv after "rollouts"). Prints the parquet path on stdout. */
export async function cmdRollouts(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  // `rollouts <run-dir> …`: the query engine (Browse Rollouts from the command line)
  if (sub !== 'paired') return (await import('./rollouts_command')).cmdRolloutsQuery(argv);
  const a = parseArgs(rest, { valued: ['groups', 'checkpoint', 'set', 'output-dir'] }, ROLLOUTS_USAGE);
  if (a.positional.length !== 1) throw new UserError(`rollouts paired needs exactly one config file\n${ROLLOUTS_USAGE}`);
  const r = await pairedRollouts({
    configPath: a.positional[0],
    sets: a.flags.get('set'),
    groups: intFlag(a, 'groups', 1),
    checkpoint: a.flags.get('checkpoint')?.at(-1),
    outputDir: a.flags.get('output-dir')?.at(-1),
    argv: ['rollouts', ...argv],
    log: (m) => process.stderr.write(m + '\n'),
  });
  process.stderr.write(`${r.rows} rollouts in ${r.groups} groups (${r.zeroVarianceGroups} with zero reward variance) → ${r.dir}\n`);
  console.log(r.parquet);
  return 0;
}

export const IMPORT_USAGE = `usage: credit-lens import <file or folder> [--model <HF model folder | run folder | checkpoint>]
         [--format ${['auto', ...IMPORT_FORMATS].join('|')}] [--out <folder>] [--name <run name>] [--tokenizer <HF folder | tokenizer.json>]
         [--config <config.credit.yaml>] [--set key=value]... [--strategy <name>] [--success-threshold X] [--json] [--progress-json]
         [--chat-template auto|apply|as-logged] [--score-server URL [--server-api ${SERVER_APIS.join('|')}] [--server-concurrency C] [--top-k K]]
         [--follow [--until-idle S]] [--metrics FILE|none]
  --score-server URL scores the tokens on an SGLang or vLLM server serving the policy, instead of --model: log-probs at
  temperature 1 and the top K (default 20) at each position, read with --tokenizer. Entropy and the gradient norm then
  come from the top K plus one bucket for the rest (columns entropy_topk, grad_norm_topk: lower bounds).
  --chat-template: a logged prompt without the model's chat-template markers (veRL and TRL ≤ 0.19 log prompts decoded with
  skip_special_tokens) gets them back, or the template applied (auto, the default); apply always; as-logged never.
  --follow keeps importing as the folder grows (a run still training): a step once a later one appears or its files have
  not changed for 10 s, until Ctrl-C or, with --until-idle S, until nothing new has come for S seconds.
  --metrics FILE imports the trainer's own metrics (veRL's file logger JSONL, prime-rl's metrics.jsonl; found beside a
  prime-rl folder without it; none: not at all).`;

const IMPORT_FLAGS = {
  valued: ['model', 'format', 'out', 'name', 'tokenizer', 'config', 'set', 'strategy', 'success-threshold', 'chat-template'].concat([
    'score-server',
    'server-api',
    'server-concurrency',
    'top-k',
    'metrics',
    'until-idle',
  ]),
  boolean: ['json', 'progress-json', 'follow'],
};

export async function cmdImport(argv: string[]): Promise<number> {
  const a = parseArgs(argv, IMPORT_FLAGS, IMPORT_USAGE);
  if (a.positional.length !== 1) throw new UserError(`import needs exactly one file or folder\n${IMPORT_USAGE}`);
  const format = flag(a, 'format') ?? 'auto';
  if (format !== 'auto' && !(IMPORT_FORMATS as readonly string[]).includes(format))
    throw new UserError(`--format ${format}: expected auto, ${IMPORT_FORMATS.slice(0, -1).join(', ')} or ${IMPORT_FORMATS[IMPORT_FORMATS.length - 1]}`);
  const sets = [...(a.flags.get('set') ?? [])];
  const strategy = flag(a, 'strategy');
  if (strategy) sets.push(`credit.strategy=${strategy}`);
  const progress = progressPrinter(a, 'completions scored');
  // Cancel (the extension's SIGTERM) or Ctrl-C: the import stops between batches and records why, so its run does not
  // read "running" forever.
  const signal = stopOnSignals('stopping the import');
  const scoreServer = flag(a, 'score-server');
  const api = choiceFlag(a, 'server-api', SERVER_APIS, 'auto');
  const concurrency = intFlag(a, 'server-concurrency', 1);
  const topK = intFlag(a, 'top-k', 1);
  if (!scoreServer && (a.flags.has('server-api') || concurrency !== undefined || topK !== undefined))
    throw new UserError('--server-api, --server-concurrency and --top-k go with --score-server URL');
  const follow = a.flags.has('follow');
  const untilIdle = numFlag(a, 'until-idle', (x) => x > 0, 'a positive number of seconds');
  if (untilIdle !== undefined && !follow) throw new UserError('--until-idle goes with --follow');
  const metricsFlag = flag(a, 'metrics');
  const log = (level: 'info' | 'warn', m: string) => process.stderr.write(`${level === 'warn' ? 'warning: ' : ''}${m}\n`);
  const run = follow
    ? async (o: Parameters<typeof importRollouts>[0]) =>
        (await import('../import/follow')).followImport({
          ...o,
          untilIdle,
          onStep: (step, latency) => log('info', `step ${step} imported (${latency.toFixed(1)} s after it was whole)`),
        })
    : importRollouts;
  const r = await run({
    metrics: metricsFlag === 'none' ? null : metricsFlag,
    signal,
    scoreServer: scoreServer ? { url: scoreServer, api, concurrency } : undefined,
    topK,
    source: a.positional[0],
    format: format as ImportFormat | 'auto',
    model: flag(a, 'model'),
    tokenizer: flag(a, 'tokenizer'),
    out: flag(a, 'out'),
    name: flag(a, 'name'),
    configPath: flag(a, 'config'),
    sets,
    successThreshold: numFlag(a, 'success-threshold', Number.isFinite, 'a number'),
    chatTemplate: choiceFlag(a, 'chat-template', ['auto', 'apply', 'as-logged'] as const, 'auto'),
    progress: follow ? undefined : progress,
    log,
  });
  if (a.flags.has('json')) console.log(JSON.stringify(r, null, 2));
  else {
    for (const p of r.problems) process.stderr.write(`skipped ${p.file}:${p.line}: ${p.reason}\n`);
    if (r.skipped > r.problems.length) process.stderr.write(`… and ${r.skipped - r.problems.length} more (engine.log lists them all)\n`);
    console.log(
      `imported ${r.records} completions (${r.format}, ${r.steps.length} step${r.steps.length === 1 ? '' : 's'}, ${r.skipped} skipped) → ${r.runDir}`,
    );
  }
  return 0;
}

/**
 * `credit-lens export tensorboard <run-dir>...`: TensorBoard event files for runs made before runs wrote them (or again,
 * with --replace). Each run is reported; one that cannot be exported does not stop the others.
 */
export async function cmdExport(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: [], boolean: ['replace', 'json'] }, usage);
  const [what, ...dirs] = a.positional;
  if (what !== 'tensorboard')
    throw new UserError(`export: unknown target ${what === undefined ? '(none)' : JSON.stringify(what)}; expected tensorboard\n${usage}`);
  if (!dirs.length) throw new UserError(`export tensorboard needs at least one run directory\n${usage}`);
  const { exportTensorboard } = await import('../tracking/export');
  const results: unknown[] = [];
  let failed = 0;
  for (const dir of dirs) {
    try {
      const r = exportTensorboard(dir, { replace: a.flags.has('replace') });
      results.push(r);
      if (!a.flags.has('json')) console.log(`${dir}: ${r.rows} metrics rows, histograms of ${r.histogramSteps} steps → ${r.files.join(', ')}`);
    } catch (e) {
      if (!(e instanceof UserError)) throw e;
      failed++;
      results.push({ runDir: dir, error: e.message });
      process.stderr.write(`error: ${e.message}\n`);
    }
  }
  if (a.flags.has('json')) console.log(JSON.stringify(results));
  else if (dirs.length > 1 || !failed) console.log(`view with: tensorboard --logdir ${dirs.length === 1 ? dirs[0] : '<their folder>'}`);
  return failed ? 2 : 0;
}
