// `credit-lens import <file or folder>`: rollouts from another trainer (veRL, TRL, prime-rl, plain JSONL) made into an
// ordinary run directory, so the runs tree, heatmaps, Compare With…, dashboards and `analyze` read them unchanged.
//
// - Records come from formats.ts; a malformed line is reported with its file and line in engine.log and skipped.
// - Episodes are grouped by the source's group id, else by prompt, within a step; the advantage is the source's
//   (TRL's `advantage`, prime-rl's per-token `advantages`) or recomputed from the rewards with grpo.scale_rewards.
// - Tokens without per-token values are scored with `--model`: log-prob and entropy teacher-forced over the full
//   vocabulary, and the weights of a credit strategy that needs no training (IMPORT_STRATEGIES).
// - run.json says the run is imported, from where, in which format and with which model.
import { writeFileSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import type { MetricsRow, RunInfo } from '../../protocol';
import { applyOverrides, configToYaml, loadConfig, redactConfig, validateConfig, type CreditConfig } from '../config/config';
import { issuesError } from '../config/issues';
import { StoppedError, UserError, isUserError } from '../core/errors';
import { meanStd } from '../core/stats';
import { groupAdvantages } from '../credit/advantages';
import type { Section, Tokenizer, TokenSpan } from '../core/types';
import { ENGINE_VERSION } from '../core/version';
import { appendMetrics, createRunDir, openEngineLog, writeRunInfo } from '../rundir/rundir';
import { RunTrackers } from '../tracking/trackers';
import { acquireRunLock } from '../rundir/run_lock';
import { computeSections, tokenType } from '../tasks/sections';
import type { Episode } from '../session/rollout';
import { gradNorms, logTables, type TokenLog } from '../session/token_log';
import { readImport, type ImportedRecord, type ImportFormat, type ImportProblem } from './formats';
import { IMPORT_STRATEGIES, loadScorer, loadTokenizerOnly, scoreBatch, weighExported, type Scorer } from '../session/score';
import { PromptTemplater, type ChatTemplateMode } from '../session/chat_template';
import { HfTokenizer } from '../model/tokenizer';
import { ServerSampler, type ServerOptions } from '../serving/client';
import { topKStats } from '../serving/apis/types';
import { findTrainerMetrics, TrainerMetrics } from './trainer_metrics';

export interface ImportOptions {
  source: string;
  format?: ImportFormat | 'auto';
  /** HF model folder, run folder or checkpoint: scores tokens that have no per-token values */
  model?: string;
  /** prime-rl only: a tokenizer (HF folder or tokenizer.json) to show token ids as text */
  tokenizer?: string;
  /** output folder (default: the config's output_dir) */
  out?: string;
  name?: string;
  configPath?: string;
  sets?: string[];
  /**
   * How a logged prompt text is encoded for scoring (chat_template.ts): auto (the default) puts the chat template's
   * markers back or applies the template where the prompt lacks them; apply always does; as-logged never does.
   */
  chatTemplate?: ChatTemplateMode;
  /** success = reward ≥ this, unless the source has a success / acc / correct field */
  successThreshold?: number;
  /** completion tokens × vocabulary entries per scoring batch (bounds the logits' memory) */
  batchBudget?: number;
  progress?: (done: number, total: number) => void;
  log?: (level: 'info' | 'warn', message: string) => void;
  /** aborted by a SIGTERM or SIGINT (the extension's Cancel): the import ends `failed`, saying how far it got */
  signal?: AbortSignal;
  /** the trainer's own metrics file (veRL's file logger, prime-rl's metrics.jsonl); undefined: looked for; null: none */
  metrics?: string | null;
  /**
   * Score the tokens on an SGLang or vLLM server (or `credit-lens serve`) instead of a local `--model`: log-probs at
   * temperature 1 and the top `topK` (default 20) at each position, read with `--tokenizer`.
   */
  scoreServer?: Omit<ServerOptions, 'log'>;
  topK?: number;
}

export interface ImportResult {
  runDir: string;
  format: ImportFormat;
  records: number;
  skipped: number;
  steps: number[];
  /** the first problems (all of them are in engine.log) */
  problems: ImportProblem[];
}

/** One episode as it will be logged, before scoring. */
interface Pending {
  rec: ImportedRecord;
  /** its group in the step (the logged prompt, or the source's group id): advantages are taken over these */
  group: number;
  promptIdx: number;
  promptIds: number[];
  ids: number[];
  text: string;
  tokens: TokenSpan[];
  sections: Section[];
  advantage: number;
  reward: number;
  success: boolean;
  logprob?: number[];
  entropy?: number[];
  /** Σ_j π_j² at each position, where a model scored the tokens */
  probSq?: number[];
  /** the same over a server's top K (a lower bound) */
  probSqTopK?: number[];
  weight?: number[];
  effAdv?: number[];
  extra?: Record<string, (number | null)[]>;
}

export function importConfig(o: ImportOptions): CreditConfig {
  if (o.configPath) return loadConfig(o.configPath, o.sets ?? []).config;
  const { config, issues } = validateConfig(applyOverrides({}, o.sets ?? []));
  if (!config) throw issuesError('--set', issues);
  return config;
}

const placeholder = (ids: number[]) => ids.map((id) => `⟨${id}⟩`);

/** Text and per-token spans of completion ids: decoded by a tokenizer, or ⟨id⟩ placeholders without one. */
function decodeTokens(tok: Tokenizer | null, ids: number[]): { text: string; tokens: TokenSpan[] } {
  if (tok) return tok.decodeWithOffsets(ids);
  let at = 0;
  const tokens = placeholder(ids).map((t, i): TokenSpan => {
    const s = { id: ids[i], text: t, start: at, end: at + t.length };
    at += t.length;
    return s;
  });
  return { text: tokens.map((t) => t.text).join(''), tokens };
}

function sectionsOf(prompt: string, text: string, tokens: TokenSpan[]): Section[] {
  // A prompt ending in "<think>" opens the think section (the chat template's prefill, design.md#semantics).
  const prefill = prompt.trimEnd().endsWith('<think>') ? '<think>' : '';
  return computeSections(
    prefill + text,
    tokens.map((t) => ({ ...t, start: t.start + prefill.length, end: t.end + prefill.length })),
  );
}

/** One step of an import: its records with each one's group (members of a group consecutive, in their order). */
export interface StepPlan {
  step: number;
  records: ImportedRecord[];
  group: number[];
}

/**
 * The records by step, ascending, each step's records grouped (by the source's group id, else the prompt) in first-seen
 * order. Linear in the records: one pass to bucket them by step, one map of group keys per step. (Filtering all
 * records once per step, and indexOf over the groups, were quadratic: 20,000 prompts took 14 s.)
 */
export function planSteps(records: readonly ImportedRecord[]): StepPlan[] {
  const byStep = new Map<number, ImportedRecord[]>();
  for (const r of records) {
    const list = byStep.get(r.step);
    if (list) list.push(r);
    else byStep.set(r.step, [r]);
  }
  return [...byStep.keys()]
    .sort((a, b) => a - b)
    .map((step) => {
      const recs = byStep.get(step)!;
      const groupOf = new Map<string, number>();
      const ids = recs.map((r) => {
        const key = r.group ?? (r.tokens ? `ids:${r.tokens.promptIds.join(',')}` : `p:${r.prompt}`);
        let g = groupOf.get(key);
        if (g === undefined) groupOf.set(key, (g = groupOf.size));
        return g;
      });
      // a stable order by group: a group's members keep their order
      const order = recs.map((_, i) => i).sort((a, b) => ids[a] - ids[b]);
      return { step, records: order.map((i) => recs[i]), group: order.map((i) => ids[i]) };
    });
}

/** The largest of many numbers, without a spread (Math.max(...xs) overflows the call stack past ~130,000). */
export function lastOf(xs: Iterable<number>): number | null {
  let m: number | null = null;
  for (const x of xs) if (m === null || x > m) m = x;
  return m;
}

export async function importRollouts(o: ImportOptions): Promise<ImportResult> {
  const cfg = importConfig(o);
  const source = resolve(o.source);
  const read = await readChecked(o, cfg, source);
  const imp = await Importer.open(o, cfg, source, read);
  try {
    await imp.addRecords(read.records);
    const m = o.metrics === null ? null : (o.metrics ?? findTrainerMetrics(source));
    if (m) {
      const rows = new TrainerMetrics(m, read.format).read();
      imp.addMetrics(rows);
      imp.log('info', `imported ${rows.length} rows of the trainer's metrics from ${m}`);
    }
    if (imp.total === 0)
      throw new UserError(`import: every one of the ${imp.problems.length} completions was skipped; nothing to show${firstProblems(imp.problems)}`);
    return imp.complete();
  } catch (e) {
    imp.fail(e);
    throw e;
  } finally {
    await imp.close();
  }
}

/**
 * One import's run directory and what fills it, step by step: the whole source at once (importRollouts), or steps as a
 * trainer writes them (follow.ts). Prompt indices, problems and counts carry over between calls, so a step imported
 * later reads as if it had been imported with the rest.
 */
export class Importer {
  total = 0;
  readonly steps: number[] = [];
  readonly problems: ImportProblem[];
  private readonly promptIndex = new Map<string, number>();
  private readonly templater: PromptTemplater;
  private readonly trackers: RunTrackers;
  private done = 0;

  private constructor(
    readonly o: ImportOptions,
    readonly cfg: CreditConfig,
    readonly format: ImportFormat,
    readonly runDir: string,
    readonly info: RunInfo,
    private readonly elog: ReturnType<typeof openEngineLog>,
    private readonly release: () => void,
    private readonly sc: Scoring,
    problems: ImportProblem[],
  ) {
    this.problems = [...problems];
    this.templater = new PromptTemplater(sc.scorer?.tokenizer instanceof HfTokenizer ? sc.scorer.tokenizer : null, o.chatTemplate ?? 'auto');
    // TensorBoard only: an import is not a training run to track on a lab's MLflow server
    this.trackers = new RunTrackers({ runDir, runName: info.name, logging: { tensorboard: cfg.logging.tensorboard }, log: o.log ?? (() => {}) });
  }

  static async open(
    o: ImportOptions,
    cfg: CreditConfig,
    source: string,
    read: { format: ImportFormat; files: string[]; problems: ImportProblem[] },
  ): Promise<Importer> {
    const log = o.log ?? (() => {});
    const sc = await openScoring(o, cfg, read.format, log);
    const { runDir, info, elog, release } = startImportRun(o, cfg, source, read, sc);
    return new Importer(o, cfg, read.format, runDir, info, elog, release, sc, read.problems);
  }

  /** Imports the steps of `records` (whole steps, ascending; each step once), scoring them where they need it. */
  async addRecords(records: ImportedRecord[], problems: ImportProblem[] = []): Promise<number[]> {
    const { o, cfg, sc } = this;
    this.problems.push(...problems);
    // Episodes by step; within a step, members of a group are consecutive (logTables' and the analysis' layout).
    const byStep = episodesByStep(records, {
      encoder: sc.encoder,
      tokenizer: sc.tokenizer,
      cfg,
      threshold: o.successThreshold ?? 0.5,
      templater: this.templater,
      problems: this.problems,
      promptIndex: this.promptIndex,
    });
    const total = this.total + [...byStep.values()].reduce((a, e) => a + e.length, 0);
    // Scoring is synchronous: each batch first lets the event loop run, so a SIGTERM's handler can abort.
    const cancelled = async () => {
      await new Promise((r) => setImmediate(r));
      if (o.signal?.aborted) throw new StoppedError(`import cancelled after ${this.done} of ${total} completions; run it again to import them all`);
    };
    const scored = (n: number) => {
      this.done += n;
      o.progress?.(this.done, total);
    };
    o.progress?.(this.done, total);
    for (const [step, eps] of byStep) {
      await cancelled();
      if (eps.every((e) => e.rec.tokens)) {
        weighFromFile(eps, cfg);
        scored(eps.length);
      } else if (sc.server) await scoreStepOnServer(eps, sc.server, cfg, sc.topK, { cancelled, scored, stopped: () => !!o.signal?.aborted });
      else await scoreStep(eps, sc.scorer!, cfg, { budget: o.batchBudget ?? 1 << 24, cancelled, scored });
      writeStep(this.runDir, step, eps, cfg.grpo.temperature, this.trackers);
      this.total += eps.length;
      this.steps.push(step);
      this.info.last_step = step;
      this.info.total_steps = this.steps.length;
      this.info.imported = { ...this.info.imported!, records: this.total, skipped: this.problems.length };
      writeRunInfo(this.runDir, this.info);
    }
    return [...byStep.keys()];
  }

  /** The trainer's own metrics rows (its logger's file), as metrics.jsonl rows beside the imported steps'. */
  addMetrics(rows: MetricsRow[]): void {
    for (const row of rows) {
      appendMetrics(this.runDir, row);
      this.trackers.metrics(row);
    }
  }

  log(level: 'info' | 'warn', message: string): void {
    this.elog.write(level, message);
    this.o.log?.(level, message);
  }

  /** run.json completed, with the counts; the problems and the chat template's summary in engine.log. */
  complete(): ImportResult {
    const { info, problems } = this;
    for (const p of problems) this.elog.write('warn', `skipped ${p.file}:${p.line}: ${p.reason}`);
    const templated = this.templater.summary();
    if (templated) this.log('info', templated);
    Object.assign(info, {
      status: 'completed',
      ended: new Date().toISOString(),
      total_steps: this.steps.length,
      last_step: lastOf(this.steps),
      imported: { ...info.imported!, records: this.total, skipped: problems.length },
    });
    writeRunInfo(this.runDir, info);
    const n = this.steps.length;
    this.elog.write('info', `imported ${this.total} completions in ${n} step${n === 1 ? '' : 's'}; ${problems.length} skipped`);
    return { runDir: this.runDir, format: this.format, records: this.total, skipped: problems.length, steps: [...this.steps], problems: problems.slice(0, 20) };
  }

  /** run.json failed (or stopped, for a cancel), saying why. */
  fail(e: unknown): void {
    const msg = (e as Error).message;
    this.elog.write('error', msg);
    writeRunInfo(this.runDir, { ...this.info, status: e instanceof StoppedError ? 'stopped' : 'failed', ended: new Date().toISOString(), error: msg });
  }

  async close(): Promise<void> {
    this.trackers.close();
    this.elog.close();
    this.release();
    this.sc.scorer?.dispose();
    await this.sc.server?.close();
  }
}

/** What scores the tokens: a local model (--model), a server (--score-server), or nothing (an export with its own values). */
interface Scoring {
  scorer: Scorer | null;
  server: ServerSampler | null;
  tokenizer: Tokenizer | null;
  topK: number;
  /** what encodes logged texts for scoring: the scoring model's tokenizer, its vocabulary and context */
  encoder: { tokenizer: Tokenizer; vocab: number; maxSeq: number } | null;
}

async function openScoring(o: ImportOptions, cfg: CreditConfig, format: ImportFormat, log: (l: 'info' | 'warn', m: string) => void): Promise<Scoring> {
  const perToken = format === 'prime';
  const scorer = o.model ? await loadScorer(o.model, cfg, (m) => log('info', m)) : null;
  const tokenizer = scorer?.tokenizer ?? (o.tokenizer ? loadTokenizerOnly(o.tokenizer) : null);
  if (perToken && !tokenizer) log('warn', 'no --tokenizer: prime-rl exports carry token ids only, so tokens are shown as ⟨id⟩');
  const server = o.scoreServer && !perToken ? await ServerSampler.connect({ ...o.scoreServer, log: (m) => log('info', m) }, tokenizer!) : null;
  const encoder = scorer
    ? { tokenizer: scorer.tokenizer, vocab: scorer.model.cfg.vocabSize, maxSeq: scorer.model.cfg.maxSeqLen }
    : server
      ? { tokenizer: tokenizer!, vocab: tokenizer!.vocabSize, maxSeq: Infinity }
      : null;
  return { scorer, server, tokenizer, topK: o.topK ?? 20, encoder };
}

/** The import's run folder, locked, with its engine log and run.json (running) and its config. */
function startImportRun(
  o: ImportOptions,
  cfg: CreditConfig,
  source: string,
  read: { format: ImportFormat; files: string[]; problems: ImportProblem[] },
  sc: Scoring,
) {
  const { scorer, server, topK } = sc;
  const name = o.name ?? `import-${basename(source, extname(source)).replace(/[^A-Za-z0-9._-]+/g, '-')}`;
  const runDir = createRunDir(resolve(o.out ?? cfg.output_dir), name);
  const release = acquireRunLock(runDir);
  const elog = openEngineLog(runDir);
  const p = server?.provenance;
  const info: RunInfo = {
    id: basename(runDir),
    name,
    status: 'running',
    started: new Date().toISOString(),
    ended: null,
    backend: scorer ? 'wasm' : 'none',
    engine_version: ENGINE_VERSION,
    strategy: cfg.credit.strategy,
    // the pid lets a reader tell a live import from one that was killed (engineAlive), as for a trained run
    pid: process.pid,
    imported: {
      source,
      format: read.format,
      model: scorer?.describe ?? p?.model ?? null,
      records: 0,
      skipped: read.problems.length,
      tokenizer: o.model ? scorer!.describe : o.tokenizer ? resolve(o.tokenizer) : null,
      chat_template: o.chatTemplate ?? 'auto',
      ...(p ? { scored_by: { api: p.api, url: p.url, model: p.model, weight_version: p.weight_version, top_k: topK } } : {}),
    },
  };
  writeRunInfo(runDir, info);
  writeFileSync(join(runDir, 'config.yaml'), configToYaml(redactConfig(cfg)));
  const files = `${read.files.length} file${read.files.length === 1 ? '' : 's'}`;
  const by = scorer ? ` scored with ${scorer.describe}` : p ? ` scored on ${p.api} at ${p.url} (model ${p.model}; top-${topK} entropies)` : '';
  elog.write('info', `import ${source} (${read.format}, ${files})${by}`);
  if (server?.scoringNote) elog.write('info', server.scoringNote);
  return { runDir, info, elog, release };
}

/** The first three problems, one per line, for an error message. */
function firstProblems(problems: ImportProblem[]): string {
  const first = problems
    .slice(0, 3)
    .map((p) => `  ${p.file}:${p.line}: ${p.reason}`)
    .join('\n');
  return first ? `:\n${first}` : '';
}

/** The source's records, refused before any folder is made where the strategy, the format or the records cannot be imported. */
async function readChecked(o: ImportOptions, cfg: CreditConfig, source: string) {
  checkOptions(o, cfg);
  const read = await readImport(source, o.format ?? 'auto');
  checkScorable(o, read.format);
  if (!read.records.length) {
    throw new UserError(
      `import: no readable completions in ${o.source} (${read.problems.length} problem${read.problems.length === 1 ? '' : 's'})${firstProblems(read.problems)}`,
    );
  }
  return read;
}

/** A format whose records carry no per-token values needs something to score them. */
export function checkScorable(o: ImportOptions, format: ImportFormat): void {
  if (format !== 'prime' && !o.model && !o.scoreServer) {
    throw new UserError(
      `import: ${format} rollouts carry no per-token values; pass --model <Hugging Face model folder | run folder | checkpoint> or --score-server URL to score them`,
    );
  }
}

/** The options refused before anything is read: a strategy that needs training, two scorers, a server without what it needs. */
export function checkOptions(o: ImportOptions, cfg: CreditConfig): void {
  if (!(IMPORT_STRATEGIES as readonly string[]).includes(cfg.credit.strategy)) {
    throw new UserError(
      `credit.strategy: '${cfg.credit.strategy}' needs training (a head, a network or an oracle) and cannot score imported rollouts; use one of ${IMPORT_STRATEGIES.join(', ')}`,
    );
  }
  if (o.model && o.scoreServer) throw new UserError('import: --model and --score-server both score the tokens; give one');
  if (o.scoreServer) {
    if (!o.tokenizer)
      throw new UserError(
        'import --score-server: pass --tokenizer <the policy’s Hugging Face folder or tokenizer.json>: the server scores token ids, read with it',
      );
    if (cfg.grpo.temperature !== 1)
      throw new UserError(
        `import --score-server: grpo.temperature is ${cfg.grpo.temperature}; a server's log-probs are taken at temperature 1 (SGLang returns them after its temperature, vLLM before: at 1 they agree). Score at 1 (--set grpo.temperature=1) or with --model`,
      );
    if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 1 && o.topK <= 100))
      throw new UserError(`--top-k: got ${o.topK}; expected an integer from 1 to 100 (the top-K log-probs each position's entropy is estimated from)`);
  }
}

/** A step whose tokens came with the trainer's own values (prime-rl): the strategy's weight multiplies its per-token advantage. */
function weighFromFile(eps: Pending[], cfg: CreditConfig): void {
  const w = weighExported(
    eps.map((e) => ({ logprob: e.logprob!, entropy: e.entropy!, sections: e.sections, advantage: e.advantage })),
    cfg,
  );
  // The trainer's per-token advantage stays the effective advantage; the strategy's weight multiplies it.
  eps.forEach((e, i) => {
    const fileAdv = e.rec.tokens!.advantage;
    e.weight = w[i].weight.map((wt, t) => (e.advantage !== 0 ? (wt * fileAdv[t]) / e.advantage : wt));
    e.effAdv = w[i].weight.map((wt, t) => wt * fileAdv[t]);
  });
}

/**
 * A step's completions scored by the model, in batches sorted by length and sized so that completion tokens ×
 * vocabulary stays within the budget; inside a batch (one long completion included) the lm head runs in blocks of at
 * most `budget` logits (model.scoreTokens).
 */
async function scoreStep(
  eps: Pending[],
  scorer: Scorer,
  cfg: CreditConfig,
  c: { budget: number; cancelled: () => Promise<void>; scored: (n: number) => void },
): Promise<void> {
  const vocab = scorer.model.cfg.vocabSize;
  const order = eps.map((_, i) => i).sort((a, b) => eps[a].ids.length - eps[b].ids.length);
  for (let start = 0; start < order.length;) {
    await c.cancelled();
    const width = eps[order[start]].ids.length;
    let n = 1;
    while (start + n < order.length && (n + 1) * Math.max(width, eps[order[start + n]].ids.length) * vocab <= c.budget) n++;
    const batch = order.slice(start, start + n);
    const out = await scoreBatch(
      scorer,
      batch.map((i) => eps[i]),
      cfg,
      { budget: c.budget, beforeChunk: c.cancelled },
    );
    batch.forEach((i, k) =>
      Object.assign(eps[i], { logprob: out[k].logprob, entropy: out[k].entropy, probSq: out[k].probSq, weight: out[k].weight, effAdv: out[k].effAdv }),
    );
    start += n;
    c.scored(n);
  }
}

/**
 * A step's completions scored on a server: each token's log-prob at temperature 1 and the top K at each position, from
 * which `entropy_topk` and `grad_norm_topk` are estimated (topKStats: lower bounds, so never written under the exact
 * names); the strategy weighs the tokens on those estimates (weighExported), as for an export that carries its own.
 */
async function scoreStepOnServer(
  eps: Pending[],
  server: ServerSampler,
  cfg: CreditConfig,
  topK: number,
  c: { cancelled: () => Promise<void>; scored: (n: number) => void; stopped: () => boolean },
): Promise<void> {
  // chunks of 64 completions: progress between them, and a cancel seen within one chunk's requests
  for (let start = 0; start < eps.length; start += 64) {
    await c.cancelled();
    const part = eps.slice(start, start + 64);
    const out = await server.score(
      part.map((e) => ({ prefix: e.promptIds, ids: e.ids })),
      topK,
      { stop: c.stopped },
    );
    if (!out) await c.cancelled();
    part.forEach((e, i) => {
      const stats = out![i].top.map((t) => topKStats(t.logprobs));
      e.logprob = out![i].logprobs;
      e.entropy = e.ids.map(() => NaN);
      e.extra = { ...e.extra, entropy_topk: stats.map((x) => x.entropy) };
      e.probSqTopK = stats.map((x) => x.probSq);
    });
    c.scored(part.length);
  }
  const w = weighExported(
    eps.map((e) => ({ logprob: e.logprob!, entropy: e.extra!.entropy_topk as number[], sections: e.sections, advantage: e.advantage })),
    cfg,
    'through a server (no attention): score with --model instead',
  );
  eps.forEach((e, i) => {
    e.weight = w[i].weight;
    e.effAdv = w[i].effAdv;
    e.extra!.grad_norm_topk = gradNorms([e.effAdv], [e.logprob!], [e.probSqTopK], 1)![0];
  });
}

/**
 * The imported records as episodes, by step: token ids checked against the vocabulary, prompts through the chat template
 * as the scoring model saw them, texts and sections decoded, and advantages the source did not log computed from the
 * rewards by group. A record that cannot be an episode is skipped into `problems` with its reason.
 */
function episodesByStep(
  records: ImportedRecord[],
  c: {
    /** what encodes logged texts for scoring: the scoring model's tokenizer, its vocabulary and context */
    encoder: { tokenizer: Tokenizer; vocab: number; maxSeq: number } | null;
    tokenizer: Tokenizer | null;
    cfg: CreditConfig;
    threshold: number;
    templater: PromptTemplater;
    problems: ImportProblem[];
    /** prompt (or prompt ids) → its index, kept across calls so that a later step's prompts keep their numbers */
    promptIndex: Map<string, number>;
  },
): Map<number, Pending[]> {
  const { encoder, tokenizer, cfg, threshold, templater, problems, promptIndex } = c;
  const plan = planSteps(records);
  const byStep = new Map<number, Pending[]>();
  const skip = (r: ImportedRecord, reason: string) => problems.push({ file: r.file, line: r.line, reason });
  const maxSeq = encoder?.maxSeq ?? Infinity;
  for (const { step, records: recs, group: groups } of plan) {
    const eps: Pending[] = [];
    for (const [k, r] of recs.entries()) {
      try {
        // Token ids from another trainer's tokenizer: one outside ours (or the scoring model's) skips the line with
        // its reason, rather than aborting the import inside a decoder.
        if (r.tokens && tokenizer) {
          const n = Math.min(tokenizer.vocabSize, encoder?.vocab ?? Infinity);
          const bad = [...r.tokens.promptIds, ...r.tokens.ids].find((id) => !Number.isInteger(id) || id < 0 || id >= n);
          if (bad !== undefined) throw new UserError(`token id ${bad} is outside the tokenizer's vocabulary [0, ${n}): exported with another tokenizer?`);
        }
        // a logged prompt text is scored (and shown) as the chat template makes it; token ids are what the model saw
        const scored = r.tokens ? null : templater.text(r.prompt).text;
        const promptText = r.tokens ? (tokenizer ? tokenizer.decode(r.tokens.promptIds) : `⟨${r.tokens.promptIds.length} prompt tokens⟩`) : scored!;
        const pKey = r.tokens ? `ids:${r.tokens.promptIds.join(',')}` : r.prompt;
        if (!promptIndex.has(pKey)) promptIndex.set(pKey, promptIndex.size);
        let promptIds: number[];
        let ids: number[];
        if (r.tokens) {
          promptIds = r.tokens.promptIds;
          ids = r.tokens.ids;
        } else {
          if (!encoder) throw new UserError('no token ids to import as they are: pass --model or --score-server to score its text');
          promptIds = encoder.tokenizer.encodePrompt(scored!);
          ids = encoder!.tokenizer.encode(r.completion);
          if (!ids.length) throw new UserError('empty completion');
          if (ids.length + 1 > maxSeq) throw new UserError(`completion is ${ids.length} tokens, the model's context is ${maxSeq}`);
          // Keep the prompt's end (the tokens the completion follows) when both do not fit.
          if (promptIds.length + ids.length > maxSeq) promptIds = promptIds.slice(promptIds.length + ids.length - maxSeq);
        }
        const { text, tokens } = decodeTokens(tokenizer, ids);
        const reward = r.reward ?? NaN;
        const adv = r.tokens ? r.tokens.advantage.reduce((a, b) => a + b, 0) / Math.max(1, r.tokens.advantage.length) : (r.advantage ?? NaN);
        eps.push({
          rec: { ...r, prompt: promptText },
          group: groups[k],
          promptIdx: promptIndex.get(pKey)!,
          promptIds,
          ids,
          text,
          tokens,
          sections: sectionsOf(promptText, text, tokens),
          advantage: adv,
          reward,
          success: r.success ?? (Number.isFinite(reward) && reward >= threshold),
          ...(r.tokens ? { logprob: r.tokens.logprob, entropy: r.tokens.entropy ?? r.tokens.logprob.map(() => NaN), extra: r.tokens.extra } : {}),
        });
      } catch (e) {
        if (!isUserError(e)) throw e;
        skip(r, e.message);
      }
    }
    // Advantages the source did not log: from the rewards, grouped as above.
    if (eps.some((e) => Number.isNaN(e.advantage))) {
      const gid = eps.map((e) => e.group);
      const a = groupAdvantages(
        eps.map((e) => (Number.isFinite(e.reward) ? e.reward : 0)),
        gid,
        cfg.grpo.scale_rewards,
      );
      eps.forEach((e, i) => {
        if (!Number.isNaN(e.advantage)) return;
        e.advantage = a[i];
        // per-token advantages the trainer had not assigned (a prime-rl episode logged before its update): the episode's
        if (e.rec.tokens) e.rec = { ...e.rec, tokens: { ...e.rec.tokens, advantage: e.rec.tokens.advantage.map((x) => (Number.isNaN(x) ? a[i] : x)) } };
      });
    }
    if (eps.length) byStep.set(step, eps);
  }
  return byStep;
}

/** One step's token and episode tables (the trainer's own writer) and its metrics row. */
function writeStep(runDir: string, step: number, eps: Pending[], temperature: number, trackers: RunTrackers): void {
  const episodes = eps.map((e): Episode => ({
    example: { id: e.promptIdx, prompt: e.rec.prompt },
    promptIds: e.promptIds,
    ids: e.ids,
    sampleLogprobs: e.logprob!,
    entropies: e.entropy!,
    text: e.text,
    tokens: e.tokens,
    sections: e.sections,
    tokenTypes: e.tokens.map((t) => tokenType(t.text)),
    reward: { total: e.reward, format: NaN, answer: e.success ? 1 : 0 },
    success: e.success,
  }));
  const extraNames = [...new Set(eps.flatMap((e) => Object.keys(e.extra ?? {})))];
  const tok: TokenLog = {
    logprobs: eps.map((e) => e.logprob!),
    weights: eps.map((e) => e.weight!),
    effAdv: eps.map((e) => e.effAdv!),
    adv: eps.map((e) => e.advantage),
    gradNorm: gradNorms(
      eps.map((e) => e.effAdv!),
      eps.map((e) => e.logprob!),
      eps.map((e) => e.probSq),
      temperature,
    ),
    ...(extraNames.length ? { extra: Object.fromEntries(extraNames.map((n) => [n, eps.map((e) => e.extra?.[n] ?? e.ids.map(() => null))])) } : {}),
  };
  trackers.tokens(step, logTables(runDir, step, episodes, tok));
  const rewards = eps.map((e) => e.reward).filter(Number.isFinite);
  const ents = eps.flatMap((e) => e.entropy!).filter(Number.isFinite);
  const row: MetricsRow = {
    step,
    phase: 'grpo',
    success_rate: eps.filter((e) => e.success).length / eps.length,
    response_len: eps.reduce((a, e) => a + e.ids.length, 0) / eps.length,
  };
  if (rewards.length) {
    const { mean, std } = meanStd(rewards);
    row.reward_mean = mean;
    row.reward_std = std;
  }
  if (ents.length) row.entropy_mean = ents.reduce((a, b) => a + b, 0) / ents.length;
  // the share of the step's groups (of any size) whose rewards are not all equal, as a GRPO step logs it
  const byGroup = new Map<number, number[]>();
  for (const e of eps) byGroup.set(e.group, [...(byGroup.get(e.group) ?? []), e.reward]);
  const sized = [...byGroup.values()].filter((r) => r.length > 1);
  if (sized.length) row.effective_groups = sized.filter((r) => r.some((x) => x !== r[0])).length / sized.length;
  for (const n of extraNames) {
    const v = eps.flatMap((e) => e.extra?.[n] ?? []).filter((x): x is number => x !== null && Number.isFinite(x));
    if (v.length) row[`${n}_mean`] = v.reduce((a, b) => a + b, 0) / v.length;
  }
  appendMetrics(runDir, row);
  trackers.metrics(row);
}

// ---- the command line ----
