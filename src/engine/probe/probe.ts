// `credit-lens probe`: Monte Carlo values of a logged step's completion prefixes under the policy that
// sampled them, written to `<run>/probes/step-NNNNNN.arrow`, and how accurately each credit strategy places credit
// against them. `<run>/probes/step-NNNNNN.json` records the probe's settings, its finished episodes and the accuracy: a
// probe stopped by Ctrl-C keeps every finished episode, and the same command resumes it.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, type CreditConfig } from '../config/config';
import { UserError, isUserError } from '../core/errors';
import type { Example, Task, Tokenizer } from '../core/types';
import { readProbeTable, readStepTables, writeProbeTable, type ProbeColumns } from '../rundir/arrow_tables';
import { probePolicy } from '../rundir/policies';
import { acquireRunLock } from '../rundir/run_lock';
import { sha256File } from '../core/files';
import { readRunInfo, stepFile } from '../rundir/rundir';
import { writeFileAtomic } from '../core/files';
import { shapedReward } from '../session/reward';
import { openSession, useWeights, type Session } from '../session/session';
import { loadTokenizerOnly } from '../session/model_path';
import { makeTask } from '../tasks';
import { childSeed } from '../core/rng';
import { PromptTemplater } from '../session/chat_template';
import { HfTokenizer } from '../model/tokenizer';
import type { RunInfo } from '../../protocol';
import { carriesTokens } from '../../protocol/import_formats';
import { LocalSampler, type Sampler, type SamplerProvenance } from '../model/sampling';
import { ServerSampler, type ServerOptions } from '../serving/client';
import { checkServedWeights } from './served_weights';
import { accuracyOf, ownAccuracy } from './credit_scores';
import {
  accuracyFields,
  probeRecordFile,
  probeTableFile,
  readProbeRecord,
  type ProbeRecord,
  type ProbeReport,
  type ProbeSettings,
} from '../rundir/probe_record';

export type { ProbeReport };

export { readProbeRecord };
import { estimateEpisode, parsePositions, PROBE_MAX_ROLLOUTS, probePositions, type ProbeEpisode, type ProbeRow } from '../model/prefix_values';

export interface ProbeOptions {
  runDir: string;
  step: number;
  /** probe this many episodes, spread over the step's groups (default 32) */
  episodes?: number;
  /** or exactly these */
  episodeList?: number[];
  rollouts?: number;
  positions?: string;
  temperature?: number;
  seed?: number;
  /** start again when the step was probed with other settings */
  replace?: boolean;
  progress?(done: number, total: number): void;
  log?(message: string): void;
  /** stop between batches, keeping finished episodes */
  signal?: AbortSignal;
  /**
   * Sample the continuations on an SGLang or vLLM server (or `credit-lens serve`) serving the policy that sampled the
   * step, instead of in this process. The run's tokenizer, stop rules and rewards stay here.
   */
  server?: Omit<ServerOptions, 'log'>;
}

/**
 * `n` episodes spread over the step's groups: the first episode of every group, then the second of every group, …, so
 * a small probe covers many prompts (the clusters of the accuracy's interval) and still has several episodes per prompt.
 */
export function spreadEpisodes(promptIdx: ArrayLike<number>, n: number): number[] {
  const groups: number[][] = [];
  for (let i = 0; i < promptIdx.length; i++) {
    if (i === 0 || promptIdx[i] !== promptIdx[i - 1]) groups.push([]);
    groups[groups.length - 1].push(i);
  }
  const out: number[] = [];
  for (let r = 0; out.length < n; r++) {
    let any = false;
    for (const g of groups) {
      if (r < g.length && out.length < n) {
        out.push(g[r]);
        any = true;
      }
    }
    if (!any) break;
  }
  return out.sort((a, b) => a - b);
}

/** Per episode of the step: its token rows in position order. */
function rowsByEpisode(episodeCol: Int32Array, position: Int32Array, count: number): number[][] {
  const out: number[][] = Array.from({ length: count }, () => []);
  for (let k = 0; k < episodeCol.length; k++) out[episodeCol[k]]?.push(k);
  for (const rows of out) rows.sort((a, b) => position[a] - position[b]);
  return out;
}

/** The table's columns; δ from the float32 values, so a resumed probe (whose finished rows come back as float32) writes the same bits. */
function toColumns(rows: ProbeRow[]): ProbeColumns {
  rows.sort((a, b) => a.episode - b.episode || a.position - b.position);
  const n = rows.length;
  const delta = new Float32Array(n).fill(NaN);
  for (let i = 0; i + 1 < n; i++) {
    if (rows[i + 1].episode === rows[i].episode && rows[i + 1].position === rows[i].position + 1)
      delta[i] = Math.fround(rows[i + 1].value) - Math.fround(rows[i].value);
  }
  return {
    episode: Int32Array.from(rows, (r) => r.episode),
    position: Int32Array.from(rows, (r) => r.position),
    value: Float32Array.from(rows, (r) => r.value),
    value_se: Float32Array.from(rows, (r) => r.valueSe),
    rollouts: Int32Array.from(rows, (r) => r.rollouts),
    delta,
    value_a: Float32Array.from(rows, (r) => r.valueA ?? NaN),
    value_b: Float32Array.from(rows, (r) => r.valueB ?? NaN),
    value_var_a: Float32Array.from(rows, (r) => r.varA ?? NaN),
    value_var_b: Float32Array.from(rows, (r) => r.varB ?? NaN),
  };
}

const orNull = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? null : x);

function fromColumns(c: ProbeColumns): ProbeRow[] {
  return Array.from(c.episode, (e, i) => ({
    episode: e,
    position: c.position[i],
    value: c.value[i],
    valueSe: c.value_se[i],
    rollouts: c.rollouts[i],
    valueA: orNull(c.value_a?.[i]),
    valueB: orNull(c.value_b?.[i]),
    varA: orNull(c.value_var_a?.[i]),
    varB: orNull(c.value_var_b?.[i]),
  }));
}

/**
 * A fresh row as the table will hold it (float32): the accuracy is computed from these, so a probe that finishes in one
 * go and one resumed from its table score exactly alike (ties among float64 values can break apart in float32).
 */
function asStored(r: ProbeRow): ProbeRow {
  const f = (x: number | null) => (x === null ? null : Math.fround(x));
  return {
    ...r,
    value: Math.fround(r.value),
    valueSe: Math.fround(r.valueSe),
    valueA: f(r.valueA),
    valueB: f(r.valueB),
    varA: f(r.varA ?? null),
    varB: f(r.varB ?? null),
  };
}

/** What a probe of step `o.step` works on: the run's config, the step's tables and policy, the settings, the episodes. */
function probeInputs(o: ProbeOptions) {
  const { runDir, step } = o;
  if (!existsSync(join(runDir, 'config.yaml'))) throw new UserError(`${runDir} is not a run folder (no config.yaml)`);
  const imported = readRunInfo(runDir)?.imported ?? null;
  if (imported) checkImportedProbe(runDir, imported, o);
  const { config: cfg } = loadConfig(join(runDir, 'config.yaml'));
  const tokenFile = stepFile(runDir, 'tokens', step);
  if (!existsSync(tokenFile))
    throw new UserError(`step ${step} of ${runDir} has no token table (logging.every ${cfg.logging.every}, or the run has not reached it)`);
  // Through a server the policy is the server's: the run's copy, where it kept one, only scores the other strategies.
  let policy: ReturnType<typeof probePolicy> | null = null;
  try {
    if (!imported) policy = probePolicy(runDir, step);
  } catch (e) {
    if (!o.server || !isUserError(e)) throw e;
  }
  const settings: ProbeSettings = {
    rollouts: o.rollouts ?? 8,
    positions: o.positions ?? 'every',
    temperature: o.temperature ?? cfg.grpo.temperature,
    top_p: cfg.grpo.top_p,
    seed: o.seed ?? cfg.seed,
  };
  if (!Number.isInteger(settings.rollouts) || settings.rollouts < 2 || settings.rollouts > PROBE_MAX_ROLLOUTS)
    throw new UserError(
      `--rollouts: got ${settings.rollouts}; expected an integer from 2 (a standard error needs two) to ${PROBE_MAX_ROLLOUTS} ` +
        `(V_t's standard error falls as 1/√M: ${PROBE_MAX_ROLLOUTS} continuations already pin it to a sixty-fourth of the reward's spread)`,
    );
  if (!(settings.temperature > 0)) throw new UserError(`--temperature: got ${settings.temperature}; expected a number > 0`);
  const rule = parsePositions(settings.positions);

  const { tokens, episodes: eps } = readStepTables(runDir, step);
  const tok = tokens!;
  const count = eps.episode.length;
  let wanted: number[];
  if (o.episodeList) {
    const bad = o.episodeList.filter((e) => !(Number.isInteger(e) && e >= 0 && e < count));
    if (bad.length) throw new UserError(`--episode: ${bad.join(', ')} not in step ${step}, whose episodes are 0–${count - 1}`);
    wanted = [...new Set(o.episodeList)].sort((a, b) => a - b);
  } else {
    const k = o.episodes ?? 32;
    if (!Number.isInteger(k) || k < 1) throw new UserError(`--episodes: got ${k}; expected an integer ≥ 1`);
    wanted = spreadEpisodes(eps.prompt_idx, Math.min(k, count));
  }

  const byEpisode = rowsByEpisode(tok.episode, tok.position, count);
  return { cfg, tokenFile, policy, settings, rule, tok, eps, count, wanted, byEpisode, imported };
}

/**
 * The finished episodes of an earlier probe of the step with the same settings, kept (a resumed probe); none where it
 * had other settings and --replace asks to start again, or where it was made on another token table (the run was
 * restarted or resumed since). Other settings without --replace are an error naming them.
 */
function earlierProbe(
  o: ProbeOptions,
  settings: ProbeSettings,
  sha: { tokens: string | null; policy: string | null },
  sampler: SamplerProvenance,
  tableFile: string,
  log: (m: string) => void,
) {
  const { runDir, step } = o;
  const prior = readProbeRecord(runDir, step);
  let rows: ProbeRow[] = [];
  let doneEpisodes = new Set<number>();
  let continuations = 0;
  // a probe of another token table or another policy under this step number (the run restarted or resumed since):
  // not this step's
  const otherTokens = prior?.tokens_sha256 ? prior.tokens_sha256 !== sha.tokens : false;
  const otherPolicy = prior?.policy_sha256 ? prior.policy_sha256 !== sha.policy : false;
  const stale = otherTokens || otherPolicy;
  if (stale)
    log(`the probe of step ${step} was made on another ${otherTokens ? 'token table' : 'policy'} (the run was restarted or resumed since): probing afresh`);
  if (prior && !stale) {
    const same = (Object.keys(settings) as (keyof ProbeSettings)[]).every((k) => prior[k] === settings[k]);
    if (!same && !o.replace) {
      throw new UserError(
        `step ${step} was probed with --rollouts ${prior.rollouts} --positions ${prior.positions} --temperature ${prior.temperature} --seed ${prior.seed}; ` +
          'probe it with the same settings to add episodes, or pass --replace to start again',
      );
    }
    // Episodes sampled by another engine or another served model are not mixed into one table: the values would agree
    // only in expectation, and a served model may not be this step's policy.
    const was = prior.sampler ?? { api: 'local', model: null, weight_version: null };
    const other = was.api !== sampler.api || was.model !== sampler.model || was.weight_version !== sampler.weight_version;
    if (same && other && !o.replace) {
      const say = (x: { api: string; model: string | null; weight_version: string | null }) =>
        x.api === 'local' ? 'in this process' : `on ${x.api} (model ${x.model}${x.weight_version ? `, weights ${x.weight_version}` : ''})`;
      throw new UserError(
        `step ${step} was probed ${say(was)}, and this probe samples ${say(sampler)}; probe it where it was probed to add episodes, or pass --replace to start again`,
      );
    }
    if (same && !o.replace && existsSync(tableFile)) {
      const keep = new Set(prior.episodes);
      rows = fromColumns(readProbeTable(tableFile)).filter((r) => keep.has(r.episode));
      doneEpisodes = keep;
      continuations = prior.continuations;
      log(`resuming: ${keep.size} episode${keep.size === 1 ? '' : 's'} already probed`);
    }
  }
  return { prior, rows, doneEpisodes, continuations };
}

export async function probeRun(o: ProbeOptions): Promise<ProbeReport> {
  const t0 = performance.now();
  const { runDir, step } = o;
  const log = o.log ?? (() => {});
  const inputs = probeInputs(o);
  const { cfg, settings } = inputs;

  // One probe of a step at a time: two would each rewrite the whole table and record, and lose the other's episodes.
  // The lock is the run lock's kind (stale once its holder dies, host-aware); the merge below reads under it.
  mkdirSync(join(runDir, 'probes'), { recursive: true });
  const release = acquireRunLock(runDir, { file: probeLockFile(step), doing: `step ${step} is already being probed` });
  try {
    const ctx = await openProbeContext(inputs, runDir, log);
    let sampler: Sampler | null = null;
    try {
      const s = ctx.session;
      sampler = o.server ? await ServerSampler.connect({ ...o.server, signal: o.signal, log }, ctx.tokenizer) : new LocalSampler(s!.model, s!.tokenizer);
      if (o.server && s && inputs.policy) {
        const targets = inputs.wanted.slice(0, 2).map((e) => probeTarget(ctx, inputs, e).ep);
        await checkServedWeights(sampler, new LocalSampler(s.model, s.tokenizer), targets, inputs.policy.source, step, log);
      }
      const tableFile = probeTableFile(runDir, step);
      const sha = { tokens: sha256File(inputs.tokenFile), policy: inputs.policy ? sha256File(inputs.policy.file) : null };
      const earlier = earlierProbe(o, settings, sha, sampler.provenance, tableFile, log);
      const todo = inputs.wanted.filter((e) => !earlier.doneEpisodes.has(e)).map((e) => probeTarget(ctx, inputs, e));
      const state = { rows: earlier.rows, done: earlier.doneEpisodes, continuations: earlier.continuations };
      const record = (pending: number[]): ProbeRecord => ({
        format: 'credit-lens-probe',
        step,
        policy: inputs.policy?.source ?? `${sampler!.provenance.url} (${sampler!.provenance.model})`,
        policy_sha256: sha.policy,
        tokens_sha256: sha.tokens,
        sampler: sampler!.provenance,
        ...settings,
        episodes: [...state.done].sort((a, b) => a - b),
        pending,
        continuations: state.continuations,
        seconds: (earlier.prior && earlier.doneEpisodes.size > 0 ? earlier.prior.seconds : 0) + (performance.now() - t0) / 1000,
        run_strategy: cfg.credit.strategy,
        accuracy: null,
        uniform_share: null,
        accuracy_episodes: 0,
        accuracy_prompts: 0,
      });
      const stopped = await probeEpisodes(o, sampler, ctx, todo, settings, cfg.grpo.max_new_tokens, state, (k) => {
        writeProbeTable(tableFile, toColumns(state.rows));
        writeFileAtomic(probeRecordFile(runDir, step), JSON.stringify(record(todo.slice(k + 1).map((x) => x.ep.episode)), null, 2) + '\n');
      });
      const pending = inputs.wanted.filter((e) => !state.done.has(e));
      const rec = record(pending);
      // A stopped probe exits now: the accuracy scores every episode of the step under the policy (minutes at the seeds'
      // size), so it waits for the probe that finishes, which the same command resumes.
      if (stopped)
        log(`stopped: ${state.done.size} of ${inputs.wanted.length} episodes probed; run the same command again to finish (the accuracy is scored then)`);
      else if (state.done.size) {
        const acc =
          s && inputs.policy
            ? await accuracyOf(s, cfg, inputs.tok, inputs.eps, inputs.byEpisode, state.rows, [...state.done])
            : ownAccuracy(cfg, inputs.tok, inputs.eps, inputs.byEpisode, state.rows, [...state.done]);
        Object.assign(rec, accuracyFields(acc));
      }
      writeFileAtomic(probeRecordFile(runDir, step), JSON.stringify(rec, null, 2) + '\n');
      return { ...rec, run_dir: runDir, table: tableFile, complete: pending.length === 0 };
    } finally {
      await sampler?.close();
      ctx.session?.model.dispose();
    }
  } finally {
    release();
  }
}

/** What a probe runs on: the run's config, task and tokenizer, the example each episode was sampled from, and the model where this process has one. */
interface ProbeContext {
  cfg: CreditConfig;
  task: Task;
  tokenizer: Tokenizer;
  /** the run's session, with the step's policy where the run kept it; null for an imported run (its policy is the server's) */
  session: Session | null;
  exampleOf(e: number): Example;
}

async function openProbeContext(inputs: ReturnType<typeof probeInputs>, runDir: string, log: (m: string) => void): Promise<ProbeContext> {
  const { cfg, eps, imported } = inputs;
  if (imported) return importedContext(inputs);
  const { session } = await openSession(cfg, { runDir, log });
  // the policy that sampled the step, where the run kept it: it samples here, and it scores the other strategies
  if (inputs.policy) await useWeights(session, inputs.policy.weights);
  const byId = new Map(session.task.train.map((ex) => [ex.id, ex]));
  return {
    cfg,
    task: session.task,
    tokenizer: session.tokenizer,
    session,
    exampleOf: (e) => {
      const ex = byId.get(eps.prompt_idx[e]);
      if (!ex || ex.prompt !== eps.prompt[e])
        throw new UserError(
          `episode ${e}'s prompt is not prompt ${eps.prompt_idx[e]} of the task's train split: the run's task or split_seed changed since it trained`,
        );
      return ex;
    },
  };
}

/**
 * An imported run through a server: the tokenizer it was imported with, the task of its config (`import --config`),
 * and each episode's example found by its prompt among the task's, encoded as the import encoded logged prompts.
 */
function importedContext(inputs: ReturnType<typeof probeInputs>): ProbeContext {
  const { cfg, eps, imported } = inputs;
  const tokenizer = loadTokenizerOnly(imported!.tokenizer!);
  const task = makeTask(cfg.task, childSeed(cfg.task.split_seed, 'task'));
  const templater = new PromptTemplater(tokenizer instanceof HfTokenizer ? tokenizer : null, imported!.chat_template ?? 'auto');
  const byPrompt = new Map<string, Example>();
  for (const ex of [...task.train, ...task.eval, ...task.validation]) {
    byPrompt.set(ex.prompt, ex);
    byPrompt.set(templater.text(ex.prompt).text, ex);
  }
  return {
    cfg,
    task,
    tokenizer,
    session: null,
    exampleOf: (e) => {
      const ex = byPrompt.get(eps.prompt[e]);
      if (!ex)
        throw new UserError(
          `episode ${e}'s prompt is not a prompt of the task in the run's config.yaml (task.name ${cfg.task.name}): the probe rewards continuations with that task, ` +
            'so import the run with --config <the config of the task it trained on> (for your own data: task.name jsonl with task.path and task.reward_module)',
        );
      return ex;
    },
  };
}

/** An imported run is probed only through the server that serves its policy, and only when its token ids can be read. */
function checkImportedProbe(runDir: string, imported: NonNullable<RunInfo['imported']>, o: ProbeOptions): void {
  if (!o.server)
    throw new UserError(
      `${runDir} is an imported run: its completions were sampled by another trainer, whose policy Credit Lens does not have here`,
      'serve the checkpoint that sampled the step (SGLang or vLLM) and probe through it: credit-lens probe <run> --step N --server URL',
    );
  if (!imported.tokenizer)
    throw new UserError(
      `${runDir} was imported without --model or --tokenizer: its token ids cannot be read, so it cannot be probed; import it again with --tokenizer`,
    );
  if (carriesTokens(imported.format))
    throw new UserError(
      `${runDir} is a ${imported.format === 'prime' ? 'prime-rl token export' : 'veRL token shard'}: it keeps its prompts as token ids, whose text does not re-encode to them, so its prompts cannot be matched to a task's; import a veRL, TRL or JSONL dump of the run to probe it`,
    );
}

type ProbeTarget = { ep: ProbeEpisode; positions: number[] };

/** Episode e of the step as the probe continues it: its example from the task, its prompt's ids, its probed positions. */
function probeTarget(ctx: ProbeContext, inputs: ReturnType<typeof probeInputs>, e: number): ProbeTarget {
  const { eps, tok, byEpisode, rule } = inputs;
  const ex = ctx.exampleOf(e);
  const r = byEpisode[e];
  const ids = r.map((k) => tok.token_id[k]);
  return {
    // the prompt as the episode was sampled (an import's: as it scored it, template included)
    ep: { episode: e, example: ex, promptIds: ctx.tokenizer.encodePrompt(eps.prompt[e]), ids, reward: eps.reward[e] },
    positions: probePositions(
      ids.length,
      rule,
      r.map((k) => tok.logprob[k]),
    ),
  };
}

/**
 * The episodes' values, one episode at a time, each saved as it finishes (`saved(k)` after the k-th): a stop keeps every
 * finished one. True when a stop ended it.
 */
async function probeEpisodes(
  o: ProbeOptions,
  sampler: Sampler,
  ctx: ProbeContext,
  todo: ProbeTarget[],
  settings: ProbeSettings,
  maxNewTokens: number,
  state: { rows: ProbeRow[]; done: Set<number>; continuations: number },
  saved: (k: number) => void,
): Promise<boolean> {
  const open = (x: ProbeTarget) => x.positions.filter((t) => t < x.ep.ids.length).length * settings.rollouts;
  const total = todo.reduce((a, x) => a + open(x), 0);
  const reward = shapedReward(ctx);
  let done = 0;
  o.progress?.(0, total);
  for (const [k, { ep, positions }] of todo.entries()) {
    const got = await estimateEpisode(sampler, ctx.tokenizer, ep, positions, {
      rollouts: settings.rollouts,
      temperature: settings.temperature,
      topP: settings.top_p,
      maxNewTokens,
      seed: settings.seed,
      step: o.step,
      reward,
      onRows: (n) => o.progress?.(done + n, total),
      stopped: () => !!o.signal?.aborted,
    });
    if (!got) return true;
    done += open({ ep, positions });
    state.continuations += open({ ep, positions });
    state.rows.push(...got.map(asStored));
    state.done.add(ep.episode);
    saved(k);
  }
  return false;
}

/** The probe lock of a step, relative to the run directory: `probes/step-NNNNNN.lock`. */
export function probeLockFile(step: number): string {
  return join('probes', `step-${String(step).padStart(6, '0')}.lock`);
}
