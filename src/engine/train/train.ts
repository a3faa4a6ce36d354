// The training loop: optional SFT warm start, then GRPO steps (DESIGN §4), writing the run directory (§5).
import * as tf from '@tensorflow/tfjs';
import { appendFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MetricsRow, RunFinishedParams, RunInfo, RunProgressParams, RunStartedParams } from '../../protocol';
import { writeEpisodeTable, writeTokenTable } from '../rundir/arrow_tables';
import { checkpointDir, latestCheckpoint, loadCheckpoint, loadLatestGoodCheckpoint, saveCheckpoint } from '../rundir/checkpoint';
import { configToYaml, loadConfig, redactConfig, type CreditConfig } from '../config/config';
import { getStrategy, type CreditBatch } from '../credit';
import { creditParams } from '../credit/types';
import { answerAttention } from '../credit/attention_credit';
import { attributionMetrics, maskedScaledSoftmax } from '../credit/attribution';
import type { CreditHead, EpisodeView, Prepared } from '../credit/types';
import { isUserError, UserError } from '../core/errors';
import { advantages, aggregationWeights, meanStd, policyLossAndGrad } from './grpo';
import { Transformer } from '../model/model';
import { Adam, clipByGlobalNorm } from '../model/optim';
import { childSeed, makeRng, randInt, type Rng } from '../core/rng';
import { completionLogprobs, policyBatch, rollout, type Episode } from './rollout';
import { acquireRunLock, appendMetrics, createRunDir, openEngineLog, readMetrics, readRunInfo, readRunInfoChecked, redactSecrets, stepFile, writeRunInfo } from '../rundir/rundir';
import { buildSession, type Session } from './session';
import type { Example, Section, TokenType } from '../core/types';
import { ENGINE_VERSION } from '../core/version';

export interface Reporter {
  started(p: RunStartedParams): void;
  progress(p: RunProgressParams): void;
  metrics(runDir: string, row: MetricsRow): void;
  log(level: 'info' | 'warn' | 'error', message: string): void;
  finished(p: RunFinishedParams): void;
}

export const silentReporter: Reporter = { started() {}, progress() {}, metrics() {}, log() {}, finished() {} };

/** Lets a signal handler or the RPC `run/stop` request end the run after the current step, with a checkpoint. */
export class RunController {
  stopRequested = false;
  private readonly abort = new AbortController();
  /** Aborted by stop(): long waits inside a step (oracle requests, their back-off) end at once. */
  readonly signal: AbortSignal = this.abort.signal;
  private waiters: ((checkpoint: string | null) => void)[] = [];
  stop(): Promise<string | null> {
    this.stopRequested = true;
    this.abort.abort();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  settle(checkpoint: string | null): void {
    for (const w of this.waiters.splice(0)) w(checkpoint);
  }
}

export interface TrainOptions {
  configPath?: string;
  /** an already validated config (a sweep's expanded run); takes the place of configPath */
  config?: CreditConfig;
  sets?: string[];
  /** continue this run directory from its latest checkpoint */
  resume?: string;
  reporter?: Reporter;
  controller?: RunController;
  /** override the run directory's parent (tests) */
  outputDir?: string;
  /**
   * Train in exactly this folder: start the run there, or resume it when it already holds a run with a checkpoint
   * (a requeued Slurm task finds its own run this way). A folder with a run.json but no checkpoint yet (stopped
   * during its first steps) starts over in place.
   */
  runDir?: string;
}

export interface TrainResult {
  runDir: string;
  status: RunInfo['status'];
  finalEval: number | null;
  initialEval: number | null;
}

const TIMING_KEYS = new Set(['step_time_s', 'tokens_per_s']);
export function metricsWithoutTiming(row: MetricsRow): MetricsRow {
  return Object.fromEntries(Object.entries(row).filter(([k]) => !TIMING_KEYS.has(k))) as MetricsRow;
}


/** Greedy success rate on the eval split (deterministic). */
export function evaluate(s: Session, examples: Example[] = s.task.eval): { success: number; reward: number } {
  if (examples.length === 0) return { success: 0, reward: 0 };
  const eps = rollout(s.model, s.tokenizer, s.task, examples, {
    maxNewTokens: s.cfg.grpo.max_new_tokens, temperature: 1, topP: 1, greedy: true, rng: () => 0, chunk: 128,
  });
  return {
    success: eps.filter((e) => e.success).length / eps.length,
    reward: eps.reduce((a, e) => a + e.reward.total, 0) / eps.length,
  };
}

function pick(rng: Rng, xs: Example[], n: number): Example[] {
  return Array.from({ length: n }, () => xs[randInt(rng, 0, xs.length - 1)]);
}

/** Token-mean cross-entropy on demonstration completions: the SFT warm start. */
function sftStep(s: Session, opt: Adam, step: number): MetricsRow {
  const t0 = performance.now();
  const rng = makeRng(childSeed(s.cfg.seed, `sft-${step}`));
  const exs = pick(rng, s.task.train, s.cfg.sft.batch_size);
  const prompts = exs.map((ex) => s.tokenizer.encodePrompt(ex.prompt));
  const comps = exs.map((ex) => [...s.tokenizer.encode(s.task.demonstration(ex, rng)), s.tokenizer.eosId]);
  const pb = policyBatch(prompts, comps, s.tokenizer.padId);
  const maskT = tf.tensor2d(pb.mask.flat(), [pb.mask.length, pb.completionLen]);
  const nTok = pb.mask.flat().reduce((a, b) => a + b, 0);
  const { value, grads } = tf.variableGrads(() => {
    const { logp } = completionLogprobs(s.model, pb, 1);
    return logp.mul(maskT).sum().neg().div(nTok) as tf.Scalar;
  }, [...s.model.params.values()]);
  const loss = value.dataSync()[0];
  value.dispose();
  maskT.dispose();
  pb.dispose();
  const named = renameGrads(s.model.params, grads);
  const { norm, grads: clipped } = clipByGlobalNorm(named, s.cfg.grpo.grad_clip);
  let skipped = 0;
  if (Number.isFinite(loss) && Number.isFinite(norm)) opt.apply(s.model.params, clipped);
  else skipped = 1;
  tf.dispose(Object.values(clipped));
  const dt = (performance.now() - t0) / 1000;
  return { step, phase: 'sft', loss, grad_norm: norm, step_time_s: dt, tokens_per_s: nTok / dt, ...(skipped ? { skipped } : {}) };
}

/** The policy's parameters plus a credit head's, under the names the optimizer and checkpoints use. */
function trainables(s: Session, head: CreditHead | null): Map<string, tf.Variable> {
  return head ? new Map([...s.model.params, ...head.params]) : s.model.params;
}

function renameGrads(params: Map<string, tf.Variable>, grads: tf.NamedTensorMap): Record<string, tf.Tensor> {
  // variableGrads keys by the variable's tf name; map back to the HF parameter names the optimizer uses.
  const byVar = new Map<string, string>();
  for (const [name, v] of params) byVar.set(v.name, name);
  const out: Record<string, tf.Tensor> = {};
  for (const [k, g] of Object.entries(grads)) out[byVar.get(k) ?? k] = g;
  return out;
}

/** A step abandoned before its update because the run was asked to stop while the step waited. */
export class StepCancelled extends Error {
  constructor(readonly step: number) { super(`step ${step} cancelled by a stop`); }
}

interface GrpoStepResult { row: MetricsRow; episodes: Episode[]; tok: TokenLog }
interface TokenLog {
  logprobs: number[][]; weights: number[][]; effAdv: number[][]; adv: number[];
  attribution?: number[][]; importance?: number[][]; oracleSpans?: (string | null)[];
}

export async function grpoStep(s: Session, opt: Adam, ref: Transformer | null, step: number, log: (l: 'info' | 'warn', m: string) => void, head: CreditHead | null = null, runDir = '', signal?: AbortSignal): Promise<GrpoStepResult> {
  const g = s.cfg.grpo;
  const t0 = performance.now();
  const rng = makeRng(childSeed(s.cfg.seed, `grpo-${step}`));
  const prompts = pick(rng, s.task.train, g.prompts_per_step);
  const batchExamples = prompts.flatMap((ex) => Array.from({ length: g.group_size }, () => ex));
  const episodes = rollout(s.model, s.tokenizer, s.task, batchExamples, {
    maxNewTokens: g.max_new_tokens, temperature: g.temperature, topP: g.top_p, rng,
  });
  const tGen = performance.now();
  const rewards = episodes.map((e) => e.reward.total);
  const adv = advantages(rewards, g.group_size, g.scale_rewards);

  const strategy = getStrategy(s.cfg.credit.strategy);
  let prepared: Prepared = {};
  if (strategy.prepare) {
    prepared = await strategy.prepare(episodes.map((e, i): EpisodeView => ({
      index: i, group: Math.floor(i / g.group_size), example: e.example, prefill: s.task.prefill, completion: e.text,
      tokens: e.tokens, promptIds: e.promptIds, ids: e.ids, reward: e.reward, success: e.success, advantage: adv[i],
    })), { step, runDir, cfg: s.cfg, task: s.task, tokenizer: s.tokenizer, log, signal });
  }
  if (signal?.aborted) throw new StepCancelled(step);
  const pb = policyBatch(episodes.map((e) => e.promptIds), episodes.map((e) => e.ids), s.tokenizer.padId);
  const C = pb.completionLen;
  const pad = <T>(row: T[], fill: T) => [...row, ...Array<T>(C - row.length).fill(fill)];
  const refLogprobs = ref && g.kl_beta > 0
    ? tf.tidy(() => completionLogprobs(ref, pb, g.temperature).logp.arraySync())
    : undefined;

  let oldLogprobs: number[][] | null = null;
  let firstLogprobs: number[][] = [];
  let batch: CreditBatch | null = null;
  let weights: number[][] = [];
  let effAdv: number[][] = [];
  let alpha: number[][] | undefined;
  let loss = 0, gradNorm = 0, clipFrac = 0, kl = 0, skipped = 0;
  const params = creditParams(s.cfg.credit);
  const params_ = trainables(s, head);
  const maskT = tf.tensor2d(pb.mask);
  const advT = tf.tensor2d(adv, [adv.length, 1]);
  for (let epoch = 0; epoch < g.epochs_per_step; epoch++) {
    let lossInfo: ReturnType<typeof policyLossAndGrad> | null = null;
    const { value, grads } = tf.variableGrads(() => {
      const out = completionLogprobs(s.model, pb, g.temperature, { ...strategy.needs, hidden: strategy.needs.hidden || !!head });
      const lp = out.logp.arraySync();
      if (!batch) {
        // μ = 1 (or the first of μ epochs): the policy that sampled is the one being updated, so ℓ_old = ℓ.detach(),
        // as TRL does; later epochs keep these values.
        oldLogprobs = lp;
        firstLogprobs = lp;
        batch = {
          logprobs: lp,
          entropies: episodes.map((e) => pad(e.entropies, 0)),
          sections: episodes.map((e) => pad(e.sections, 'other')),
          mask: pb.mask,
        };
        // Per-token inputs from prepare() cover each episode's own tokens; pad them to the batch's width.
        const extra = prepared.batch ?? {};
        if (extra.importance) batch.importance = extra.importance.map((r) => pad(r, 0));
        if (extra.importancePrompt) batch.importancePrompt = extra.importancePrompt;
        if (extra.spanMask) batch.spanMask = extra.spanMask.map((r) => r && pad(r, 0));
        if (strategy.needs.attention && out.attention) {
          // Last layer's attention averaged over heads, restricted to completion queries and keys.
          const P = pb.promptLen;
          const att = tf.tidy(() => out.attention!.mean(1).slice([0, P, P], [-1, C, C]).arraySync() as number[][][]);
          batch.answerAttention = answerAttention(att, batch.sections, pb.mask);
        }
        if (!head) {
          weights = strategy.weights(batch, params);
          effAdv = strategy.effectiveAdvantages
            ? strategy.effectiveAdvantages(batch, adv, params)
            : weights.map((row, i) => row.map((w, t) => (pb.mask[i][t] ? adv[i] * w : 0)));
        }
      }
      let wT: tf.Tensor2D | null = null;
      if (head && out.hidden) {
        // Detaching copies the values out of the graph, so no gradient reaches the trunk through the head.
        const h = params.detach_hidden ? tf.tensor3d(out.hidden.dataSync() as Float32Array, out.hidden.shape) : out.hidden;
        const z = head.logits(h);
        wT = maskedScaledSoftmax(z, maskT);
        batch.attributionLogits = z.arraySync();
        // The JS weights come from the same library function tokenWeights('attribution') uses.
        weights = strategy.weights(batch, params);
        effAdv = weights.map((row, i) => row.map((w, t) => (pb.mask[i][t] ? adv[i] * w : 0)));
        alpha = weights.map((row, i) => { const n = pb.mask[i].reduce((a, b) => a + b, 0); return row.map((w) => (n ? w / n : 0)); });
      }
      lossInfo = policyLossAndGrad(
        { logprobs: lp, oldLogprobs: oldLogprobs!, refLogprobs, advantages: effAdv, mask: pb.mask },
        { clipEps: g.clip_eps, clipEpsHigh: g.clip_eps_high, klBeta: g.kl_beta, lossAgg: g.loss_agg, maxNewTokens: g.max_new_tokens },
      );
      // Surrogate whose gradient w.r.t. the parameters is Σ (dLoss/dℓ)·dℓ/dθ (+ Σ (dLoss/dÂ)·dÂ/dθ for a credit
      // head): the loss itself lives in grpo.ts.
      let sur = out.logp.mul(tf.tensor2d(lossInfo.grad)).sum();
      if (wT) {
        // The head trains on seed 000's objective −Σ c·Â·ℓ (the contribution, ℓ detached). In the PPO form the
        // gradient w.r.t. Â is −c·ρ, constant over an episode at ρ = 1, and Σ_t w_t = n_i, so the head would get
        // exactly zero gradient; both forms give the policy the same gradient at ρ = 1.
        const c = aggregationWeights(pb.mask, g.loss_agg, g.max_new_tokens);
        const headGrad = c.map((row, i) => row.map((ci, t) => -ci * lp[i][t]));
        sur = sur.add(wT.mul(advT).mul(tf.tensor2d(headGrad)).sum());
      }
      return sur as tf.Scalar;
    }, [...params_.values()]);
    value.dispose();
    const info = lossInfo!;
    const named = renameGrads(params_, grads);
    const clippedRes = clipByGlobalNorm(named, g.grad_clip);
    if (epoch === 0) { loss = info.loss; gradNorm = clippedRes.norm; clipFrac = info.clipFrac; kl = info.kl; }
    if (!Number.isFinite(info.loss) || !Number.isFinite(clippedRes.norm)) {
      skipped++;
      log('warn', `step ${step}: non-finite ${Number.isFinite(info.loss) ? 'gradient norm' : 'loss'} (loss=${info.loss}, grad_norm=${clippedRes.norm}); update skipped`);
    } else {
      opt.apply(params_, clippedRes.grads);
    }
    tf.dispose(Object.values(clippedRes.grads));
  }
  maskT.dispose();
  advT.dispose();
  pb.dispose();

  const dt = (performance.now() - t0) / 1000;
  const nGen = episodes.reduce((a, e) => a + e.ids.length, 0);
  const valid = episodes.flatMap((e) => e.entropies);
  const { mean: rMean, std: rStd } = meanStd(rewards);
  const row: MetricsRow = {
    step,
    phase: 'grpo',
    reward_mean: rMean,
    reward_std: rStd,
    success_rate: episodes.filter((e) => e.success).length / episodes.length,
    loss,
    grad_norm: gradNorm,
    kl,
    entropy_mean: valid.length ? valid.reduce((a, b) => a + b, 0) / valid.length : 0,
    clip_frac: clipFrac,
    response_len: nGen / episodes.length,
    step_time_s: dt,
    tokens_per_s: nGen / ((tGen - t0) / 1000),
  };
  if (skipped) row.skipped = skipped;
  if (alpha) Object.assign(row, attributionMetrics(alpha, pb.mask));
  if (prepared.metrics) Object.assign(row, prepared.metrics);
  const importance = (batch as CreditBatch | null)?.importance;
  return { row, episodes, tok: { logprobs: firstLogprobs, weights, effAdv, adv, attribution: alpha, importance, oracleSpans: prepared.oracleSpans } };
}

function logTables(runDir: string, step: number, episodes: Episode[], tok: TokenLog): void {
  let n = 0;
  for (const e of episodes) n += e.ids.length;
  const cols = {
    step: new Int32Array(n).fill(step),
    episode: new Int32Array(n),
    prompt_idx: new Int32Array(n),
    position: new Int32Array(n),
    token_id: new Int32Array(n),
    token: new Array<string>(n),
    logprob: new Float32Array(n),
    entropy: new Float32Array(n),
    advantage: new Float32Array(n),
    weight: new Float32Array(n),
    effective_advantage: new Float32Array(n),
    contribution: new Float32Array(n),
    attribution: new Array<number | null>(n).fill(null),
    importance: new Array<number | null>(n).fill(null),
    section: new Array<Section>(n),
    token_type: new Array<TokenType>(n),
    reward: new Float32Array(n),
  };
  let k = 0;
  episodes.forEach((e, i) => {
    for (let t = 0; t < e.ids.length; t++, k++) {
      cols.episode[k] = i;
      cols.prompt_idx[k] = e.example.id;
      cols.position[k] = t;
      cols.token_id[k] = e.ids[t];
      cols.token[k] = e.tokens[t].text;
      const lp = tok.logprobs[i][t];
      cols.logprob[k] = lp;
      cols.entropy[k] = e.entropies[t];
      cols.advantage[k] = tok.adv[i];
      cols.weight[k] = tok.weights[i][t];
      cols.effective_advantage[k] = tok.effAdv[i][t];
      // contribution = Â × ℓ (seed 002), computed in float32 like the stored columns so the identity holds exactly.
      cols.contribution[k] = Math.fround(Math.fround(tok.effAdv[i][t]) * Math.fround(lp));
      if (tok.attribution) cols.attribution[k] = tok.attribution[i][t];
      if (tok.importance) cols.importance[k] = tok.importance[i][t];
      cols.section[k] = e.sections[t];
      cols.token_type[k] = e.tokenTypes[t];
      cols.reward[k] = e.reward.total;
    }
  });
  writeTokenTable(stepFile(runDir, 'tokens', step), cols);
  writeEpisodeTable(stepFile(runDir, 'episodes', step), {
    step: new Int32Array(episodes.length).fill(step),
    episode: Int32Array.from(episodes.map((_, i) => i)),
    prompt_idx: Int32Array.from(episodes.map((e) => e.example.id)),
    prompt: episodes.map((e) => e.example.prompt),
    completion: episodes.map((e) => e.text),
    reward: Float32Array.from(episodes.map((e) => e.reward.total)),
    reward_format: Float32Array.from(episodes.map((e) => e.reward.format)),
    reward_answer: Float32Array.from(episodes.map((e) => e.reward.answer)),
    success: episodes.map((e) => e.success),
    advantage: Float32Array.from(tok.adv),
    length: Int32Array.from(episodes.map((e) => e.ids.length)),
    oracle_span: episodes.map((_, i) => tok.oracleSpans?.[i] ?? null),
  });
}

/** On resume, drop metrics rows written after the checkpoint so no step appears twice. */
function keepFirstMetrics(runDir: string, n: number): void {
  const rows = readMetrics(runDir).slice(0, n);
  writeFileSync(join(runDir, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r) + '\n').join(''));
}

interface Progress { phase: 'sft' | 'grpo'; step: number }

function exportVars(vars: Map<string, tf.Variable>): Record<string, { shape: number[]; data: Float32Array }> {
  return Object.fromEntries([...vars].map(([k, v]) => [k, { shape: v.shape, data: v.dataSync() as Float32Array }]));
}

function checkpoint(runDir: string, s: Session, head: CreditHead | null, sftOpt: Adam, grpoOpt: Adam, p: Progress, initialEval: number | null, metricsRows: number): string {
  const opt = p.phase === 'sft' ? sftOpt : grpoOpt;
  return saveCheckpoint(runDir, p.phase === 'sft' ? 0 : p.step, {
    model: s.model.exportWeights(),
    ...(head ? { head: exportVars(head.params) } : {}),
    optimizer: { name: 'adam', step: opt.step, state: opt.exportState() },
    meta: { phase: p.phase, step: p.step, initial_eval: initialEval, metrics_rows: metricsRows, engine_version: ENGINE_VERSION, strategy: s.cfg.credit.strategy },
  });
}

export async function train(opts: TrainOptions): Promise<TrainResult> {
  let cfg: CreditConfig;
  let runDir: string;
  let resumeFrom: string | null = null;
  let resumeDir = opts.resume;
  if (!resumeDir && opts.runDir && readRunInfo(opts.runDir) && latestCheckpoint(opts.runDir)) resumeDir = opts.runDir;
  let release: () => void;
  let resumed: ReturnType<typeof loadLatestGoodCheckpoint> = null;
  if (resumeDir) {
    const checked = readRunInfoChecked(resumeDir);
    if (!checked.ok) throw new UserError(`--resume ${resumeDir}: not a run directory (${checked.reason})`);
    release = acquireRunLock(resumeDir);
    try {
      resumed = loadLatestGoodCheckpoint(resumeDir);
      if (!resumed) throw new UserError(`--resume ${resumeDir}: the run has no checkpoint to resume from; start it again instead`);
      cfg = loadConfig(join(resumeDir, 'config.yaml'), opts.sets).config;
    } catch (e) {
      if (isUserError(e)) {
        // The run directory stays readable: its status says why the resume failed.
        const cur = readRunInfo(resumeDir);
        if (cur) writeRunInfo(resumeDir, { ...cur, status: 'failed', ended: new Date().toISOString(), error: e.message });
        try { appendFileSync(join(resumeDir, 'engine.log'), `${new Date().toISOString()} error ${e.message}\n`); } catch { /* read-only folder */ }
      }
      release();
      throw e;
    }
    resumeFrom = resumed.checkpoint.dir;
    runDir = resumeDir;
  } else {
    if (opts.config) cfg = opts.config;
    else if (opts.configPath) cfg = loadConfig(opts.configPath, opts.sets).config;
    else throw new UserError('train: a config file is required');
    if (opts.runDir) {
      runDir = opts.runDir;
      for (const sub of ['tokens', 'episodes', 'checkpoints']) mkdirSync(join(runDir, sub), { recursive: true });
      release = acquireRunLock(runDir);
      // A start that died before its first checkpoint: begin again in place, without its partial rows.
      rmSync(join(runDir, 'metrics.jsonl'), { force: true });
    } else {
      runDir = createRunDir(opts.outputDir ?? cfg.output_dir, cfg.name);
      release = acquireRunLock(runDir);
    }
    writeFileSync(join(runDir, 'config.yaml'), configToYaml(redactConfig(cfg)));
  }
  try {
    return await trainIn(opts, cfg, runDir, resumeFrom, resumed);
  } finally {
    release();
  }
}

async function trainIn(opts: TrainOptions, cfg: CreditConfig, runDir: string, resumeFrom: string | null,
  resumed: ReturnType<typeof loadLatestGoodCheckpoint>): Promise<TrainResult> {
  const reporter = opts.reporter ?? silentReporter;
  const ctl = opts.controller ?? new RunController();
  // Defence in depth: the API key is never put in a message on purpose, but anything that echoes it is masked.
  const keyVar = cfg.credit.strategy === 'cal' && cfg.credit.cal.provider !== 'rule' ? cfg.credit.cal.api_key_env : null;
  // The key as read and as the oracle trims it: either could be echoed back.
  const secrets = keyVar && process.env[keyVar] ? [...new Set([process.env[keyVar]!, process.env[keyVar]!.trim()])].filter(Boolean) : [];
  const elog = openEngineLog(runDir, { secrets });
  const log = (level: 'info' | 'warn' | 'error', m: string) => { elog.write(level, m); reporter.log(level, redactSecrets(m, secrets)); };
  const started = new Date().toISOString();
  const info: RunInfo = {
    id: runDir.split(/[\\/]/).pop()!, name: cfg.name, status: 'running', started, ended: null,
    backend: 'pending', engine_version: ENGINE_VERSION, strategy: cfg.credit.strategy,
    total_steps: cfg.grpo.steps, last_step: 0, pid: process.pid, resumed_from: resumeFrom,
    config_path: opts.configPath,
  };
  writeRunInfo(runDir, info);

  if (keyVar !== null && !process.env[keyVar]) {
    // Fail before the SFT warm start, not at the first GRPO step.
    const msg = `credit.cal.api_key_env: the environment variable ${keyVar} is not set (the ${cfg.credit.cal.provider} oracle reads its API key from it)`;
    writeRunInfo(runDir, { ...info, status: 'failed', ended: new Date().toISOString(), error: msg });
    elog.write('error', msg);
    elog.close();
    reporter.finished({ status: 'failed', runDir, error: msg });
    throw new UserError(msg);
  }
  let s: Session | null = null;
  const sftOpt = new Adam(cfg.sft.lr);
  const grpoOpt = new Adam(cfg.grpo.lr);
  let progress: Progress = { phase: 'sft', step: 0 };
  let initialEval: number | null = null;
  let finalEval: number | null = null;
  let metricsRows = 0;
  // Steps run synchronously; yielding between them lets signals and the RPC `run/stop` request through.
  const tick = () => new Promise<void>((r) => setImmediate(r));
  let head: CreditHead | null = null;
  const ckpt = () => checkpoint(runDir, s!, head, sftOpt, grpoOpt, progress, initialEval, metricsRows);
  try {
    s = await buildSession(cfg, (m) => log('info', m));
    info.backend = s.backend.backend;
    info.backend_reason = s.backend.reason;
    writeRunInfo(runDir, info);
    log('info', `backend ${s.backend.backend} (${s.backend.reason}); model ${s.modelCfg.nLayers}×d${s.modelCfg.dModel}, vocab ${s.modelCfg.vocabSize}; task ${cfg.task.name} (${s.task.train.length} train / ${s.task.eval.length} eval)`);
    const strategy = getStrategy(cfg.credit.strategy);
    head = strategy.createHead?.(s.modelCfg.dModel, childSeed(cfg.seed, 'credit-head'), creditParams(cfg.credit)) ?? null;
    reporter.started({ runDir, id: info.id, name: cfg.name, backend: s.backend.backend, totalSteps: cfg.sft.steps + cfg.grpo.steps });

    if (cfg.model.init_checkpoint) {
      const dir = existsSync(join(cfg.model.init_checkpoint, 'run.json')) ? latestCheckpoint(cfg.model.init_checkpoint) : cfg.model.init_checkpoint;
      if (!dir) throw new UserError(`model.init_checkpoint: ${cfg.model.init_checkpoint} is a run without checkpoints`);
      const fresh = Transformer.fromWeights(s.modelCfg, loadCheckpoint(dir).model);
      s.model.dispose();
      s.model = fresh;
      if (!resumeFrom) log('info', `initial weights from ${dir}`);
    }
    // The run's starting policy (seeded init, HF weights or init_checkpoint), kept for the KL reference of a run
    // without SFT that resumes in GRPO: the reference must not be the resumed weights.
    const startWeights = resumeFrom && cfg.grpo.kl_beta > 0 && cfg.sft.steps === 0 ? s.model.exportWeights() : null;
    for (const sk of resumed?.skipped ?? []) log('warn', `skipped a damaged checkpoint: ${sk.reason}`);
    if (resumeFrom && resumed) {
      const ck = resumed.checkpoint;
      const meta = ck.meta as { phase: 'sft' | 'grpo'; step: number; initial_eval: number | null };
      const fresh = Transformer.fromWeights(s.modelCfg, ck.model);
      s.model.dispose();
      s.model = fresh;
      (meta.phase === 'sft' ? sftOpt : grpoOpt).importState(ck.optimizer.step, ck.optimizer.state);
      if (head) {
        if (!ck.head) throw new UserError(`${resumeFrom}: checkpoint has no head.safetensors, but credit.strategy ${cfg.credit.strategy} needs its trained head`);
        for (const [name, v] of head.params) {
          const w = ck.head[name];
          if (!w) throw new UserError(`${resumeFrom}: head.safetensors lacks ${name}`);
          v.assign(tf.tensor(w.data, w.shape));
        }
      }
      progress = { phase: meta.phase, step: meta.step };
      initialEval = meta.initial_eval ?? null;
      keepFirstMetrics(runDir, (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0);
      metricsRows = (ck.meta as { metrics_rows?: number }).metrics_rows ?? 0;
      log('info', `resumed from ${resumeFrom} (${meta.phase} step ${meta.step})`);
    }

    let nonFinite = 0;
    const checkDiverged = (row: MetricsRow, what: string, step: number) => {
      nonFinite = row.skipped ? nonFinite + 1 : 0;
      if (nonFinite >= cfg.grpo.max_nonfinite_steps) {
        throw new UserError(`diverged at ${what} ${step}: ${nonFinite} steps in a row had a non-finite loss or gradient (grpo.max_nonfinite_steps ${cfg.grpo.max_nonfinite_steps})`,
          `lower ${row.phase === 'sft' ? 'sft' : 'grpo'}.lr`);
      }
    };
    const emit = (row: MetricsRow) => { appendMetrics(runDir, row); metricsRows++; reporter.metrics(runDir, row); };
    const stopNow = () => ctl.stopRequested;

    // ---- SFT warm start ----
    if (progress.phase === 'sft') {
      for (let step = progress.step + 1; step <= cfg.sft.steps && !stopNow(); step++) {
        await tick();
        if (stopNow()) break;
        const row = sftStep(s, sftOpt, step);
        emit(row);
        progress = { phase: 'sft', step };
        checkDiverged(row, 'SFT step', step);
        reporter.progress({ phase: 'sft', step, total: cfg.sft.steps, message: `loss ${row.loss?.toFixed(3)}` });
      }
      if (!stopNow()) {
        progress = { phase: 'grpo', step: 0 };
        if (cfg.sft.steps > 0) ckpt();
      }
    }

    // ---- GRPO ----
    // The KL reference is the policy GRPO started from: the weights now, when GRPO starts in this process; on a
    // resume inside GRPO, the post-SFT checkpoint (step 0) or, without SFT, the run's starting weights.
    let ref: Transformer | null = null;
    if (progress.phase === 'grpo' && cfg.grpo.kl_beta > 0) {
      const resumedInGrpo = (resumed?.checkpoint.meta as { phase?: string } | undefined)?.phase === 'grpo';
      if (!resumedInGrpo) ref = Transformer.fromWeights(s.modelCfg, s.model.exportWeights());
      else if (cfg.sft.steps > 0) {
        const start = checkpointDir(runDir, 0);
        if (!existsSync(start)) throw new UserError(`${runDir}: kl_beta > 0 needs the post-SFT checkpoint ${start} as the KL reference on resume, and it is missing`);
        ref = Transformer.fromWeights(s.modelCfg, loadCheckpoint(start).model);
      } else ref = Transformer.fromWeights(s.modelCfg, startWeights!);
    }
    if (progress.phase === 'grpo' && progress.step === 0 && !stopNow()) {
      const ev = evaluate(s);
      initialEval = ev.success;
      emit({ step: 0, phase: 'eval', eval_success: ev.success, reward_mean: ev.reward });
      log('info', `eval before GRPO: success ${(ev.success * 100).toFixed(1)}%`);
    }
    while (progress.phase === 'grpo' && progress.step < cfg.grpo.steps && !stopNow()) {
      await tick();
      if (stopNow()) break;
      const step = progress.step + 1;
      let r: GrpoStepResult;
      try {
        r = await grpoStep(s, grpoOpt, ref, step, log, head, runDir, ctl.signal);
      } catch (e) {
        // Stopped while the step waited (on the oracle): the step is dropped whole, and the checkpoint below holds
        // the last finished one.
        if (e instanceof StepCancelled) break;
        throw e;
      }
      if (cfg.logging.tokens && step % cfg.logging.every === 0) logTables(runDir, step, r.episodes, r.tok);
      if (step % cfg.grpo.eval_every === 0 || step === cfg.grpo.steps) {
        const ev = evaluate(s);
        r.row.eval_success = ev.success;
        finalEval = ev.success;
      }
      emit(r.row);
      progress = { phase: 'grpo', step };
      info.last_step = step;
      checkDiverged(r.row, 'step', step);
      reporter.progress({ phase: 'grpo', step, total: cfg.grpo.steps, message: `reward ${r.row.reward_mean?.toFixed(3)}` });
      if (step % cfg.grpo.checkpoint_every === 0 && step < cfg.grpo.steps) ckpt();
      writeRunInfo(runDir, info);
    }
    ref?.dispose();

    const ck = ckpt();
    const stopped = ctl.stopRequested && !(progress.phase === 'grpo' && progress.step >= cfg.grpo.steps);
    info.status = stopped ? 'stopped' : 'completed';
    info.ended = new Date().toISOString();
    writeRunInfo(runDir, info);
    log('info', `${info.status} at ${progress.phase} step ${progress.step}; checkpoint ${ck}`);
    ctl.settle(ck);
    reporter.finished({ status: info.status, runDir });
    return { runDir, status: info.status, finalEval, initialEval };
  } catch (e) {
    const msg = redactSecrets(isUserError(e) ? e.message : `internal error: ${(e as Error).stack ?? e}`, secrets);
    info.status = 'failed';
    info.ended = new Date().toISOString();
    info.error = redactSecrets(isUserError(e) ? e.message : (e as Error).message, secrets);
    writeRunInfo(runDir, info);
    log('error', msg);
    ctl.settle(null);
    reporter.finished({ status: 'failed', runDir, error: info.error });
    throw e;
  } finally {
    elog.close();
    sftOpt.dispose();
    grpoOpt.dispose();
    s?.model.dispose();
    head?.dispose();
  }
}
