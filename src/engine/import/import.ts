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
import { StoppedError, UserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import { ENGINE_VERSION } from '../core/version';
import { appendMetrics, createRunDir, openEngineLog, writeRunInfo } from '../rundir/rundir';
import { RunTrackers } from '../tracking/trackers';
import { acquireRunLock } from '../rundir/run_lock';
import { readImport, type ImportedRecord, type ImportFormat, type ImportProblem } from './formats';
import { carriesTokens } from '../../protocol/import_formats';
import { IMPORT_STRATEGIES, loadScorer, loadTokenizerOnly, type Scorer } from '../session/score';
import { PromptTemplater, type ChatTemplateMode } from '../session/chat_template';
import { HfTokenizer } from '../model/tokenizer';
import { ServerSampler, type ServerOptions } from '../serving/client';
import { findTrainerMetrics, TrainerMetrics } from './trainer_metrics';
import { episodesByStep, scoreStep, scoreStepOnServer, weighFromFile, writeStep } from './episodes';
export { planSteps, type StepPlan } from './episodes';

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
export function importConfig(o: ImportOptions): CreditConfig {
  if (o.configPath) return loadConfig(o.configPath, o.sets ?? []).config;
  const { config, issues } = validateConfig(applyOverrides({}, o.sets ?? []));
  if (!config) throw issuesError('--set', issues);
  return config;
}

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
      } else if (sc.server) {
        const skip = (e: { rec: ImportedRecord }, reason: string) => this.problems.push({ file: e.rec.file, line: e.rec.line, reason });
        await scoreStepOnServer(eps, sc.server, cfg, sc.topK, { cancelled, scored, stopped: () => !!o.signal?.aborted, skip });
        if (!eps.length) continue;
      } else await scoreStep(eps, sc.scorer!, cfg, { budget: o.batchBudget ?? 1 << 24, cancelled, scored });
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
  const perToken = carriesTokens(format);
  const scorer = o.model ? await loadScorer(o.model, cfg, (m) => log('info', m)) : null;
  const tokenizer = scorer?.tokenizer ?? (o.tokenizer ? loadTokenizerOnly(o.tokenizer) : null);
  if (format === 'prime' && !tokenizer) log('warn', 'no --tokenizer: prime-rl exports carry token ids only, so tokens are shown as ⟨id⟩');
  const server =
    o.scoreServer && !perToken ? await ServerSampler.connect({ ...o.scoreServer, signal: o.signal, log: (m) => log('info', m) }, tokenizer!) : null;
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
  if (carriesTokens(format) && o.scoreServer) {
    throw new UserError(
      `import --score-server: ${format} exports carry the trainer's own log-prob of every token, which the import keeps as ` +
        'logged (scoring them again on a server would replace them with whatever policy it holds); drop --score-server, ' +
        'and pass --tokenizer to show the tokens as text',
    );
  }
  if (!carriesTokens(format) && !o.model && !o.scoreServer) {
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
