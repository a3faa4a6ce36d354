// A user's own task: prompts and reference answers from a JSONL file, scored by the user's reward module or by
// the GRPO-Zero format reward plus an exact match of the answer block.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { UserError } from '../core/errors';
import { childSeed, makeRng, shuffle } from '../core/rng';
import type { Example, RewardResult, Task } from '../core/types';
import { formattedReward, THINK_PREFILL, uniqueChars, type PromptStyle, type RewardKind } from './countdown';
import { finalNumberReward, wordProblemPrompt } from './word_problems';

export interface JsonlTaskOptions {
  path: string | null;
  /** plain {"prompt", "answer"} lines, or GSM8K's {"question", "answer": "... #### N"} */
  format: 'plain' | 'gsm8k';
  prompt: PromptStyle;
  reward_module: string | null;
  reward: RewardKind;
  train_size: number;
  eval_size: number;
  val_size?: number;
}

/**
 * The user's module: `reward(completion, example)`, where completion is the full text the model wrote after the
 * prompt, prefill included, and example is the Example (id = line number, prompt, answer as text, record = the
 * raw JSON object). Returns a number or {total, parts}.
 */
export type UserRewardFn = (completion: string, example: Example) => unknown;

/**
 * A GSM8K line: the question, and the answer's worked solution (calculator annotations <<3+5=8>> removed) and final
 * number after "#### ". Errors name the field.
 */
export function gsm8kExample(r: Record<string, unknown>, id: number, where: string, style: PromptStyle): Example {
  if (typeof r.question !== 'string') throw new UserError(`${where}: missing string field "question" (task.format: gsm8k)`);
  if (typeof r.answer !== 'string') throw new UserError(`${where}: missing string field "answer" (task.format: gsm8k)`);
  const m = /^([\s\S]*?)\n?####\s*([^\n]+?)\s*$/.exec(r.answer);
  const n = m ? Number(m[2].replace(/,/g, '')) : NaN;
  if (!m || !Number.isFinite(n)) throw new UserError(`${where}: "answer" does not end in "#### <number>" (task.format: gsm8k)`);
  const worked = m[1].replace(/<<[^>]*>>/g, '').trim();
  return { id, prompt: wordProblemPrompt(r.question.trim(), style), answer: String(n), record: { ...r, worked } };
}

/** Parse the file; every error names the file and the 1-based line. Blank lines are skipped. */
export function readJsonlExamples(path: string, format: 'plain' | 'gsm8k' = 'plain', style: PromptStyle = 'compact'): Example[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new UserError(`task.path: cannot read ${path}: ${(e as Error).message}`);
  }
  const out: Example[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${path}:${i + 1}`;
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch (e) {
      throw new UserError(`${where}: invalid JSON: ${(e as Error).message}`, 'each line must be {"prompt": ..., "answer": ...}');
    }
    if (typeof rec !== 'object' || rec === null || Array.isArray(rec)) {
      throw new UserError(`${where}: expected a JSON object {"prompt": ..., "answer": ...}`);
    }
    const r = rec as Record<string, unknown>;
    if (format === 'gsm8k') {
      out.push(gsm8kExample(r, i + 1, where, style));
      return;
    }
    if (typeof r.prompt !== 'string') throw new UserError(`${where}: missing string field "prompt"`);
    const a = r.answer;
    if (typeof a !== 'string' && !(typeof a === 'number' && Number.isFinite(a))) {
      throw new UserError(`${where}: missing field "answer" (a string or a number)`);
    }
    out.push({ id: i + 1, prompt: r.prompt, answer: String(a), record: r });
  });
  if (out.length === 0) throw new UserError(`task.path: ${path} holds no examples`);
  return out;
}

/** Load `reward` (or a default export) from an absolute path; require also loads ESM on Node ≥ 20.19. */
export function loadRewardModule(modulePath: string): UserRewardFn {
  let mod: unknown;
  try {
    mod = createRequire(modulePath)(modulePath);
  } catch (e) {
    throw new UserError(`task.reward_module: cannot load ${modulePath}: ${(e as Error).message}`);
  }
  const m = mod as { reward?: unknown; default?: unknown } | null;
  const d = m?.default as { reward?: unknown } | undefined;
  const fn = typeof m?.reward === 'function' ? m.reward : typeof d === 'function' ? d : d?.reward;
  if (typeof fn !== 'function') {
    throw new UserError(`task.reward_module: ${modulePath} exports no function reward(completion, example)`);
  }
  return fn as UserRewardFn;
}

/**
 * Call the user's reward and check what comes back. `answer` comes from parts.answer when given, else a plain
 * total of at least 1 counts as a correct answer; `format` from parts.format, else 0.
 */
export function callUserReward(fn: UserRewardFn, modulePath: string, text: string, ex: Example): RewardResult {
  let out: unknown;
  try {
    out = fn(text, ex);
  } catch (e) {
    throw new UserError(`reward module ${modulePath} threw on example ${ex.id}: ${(e as Error)?.message ?? String(e)}`);
  }
  const bad = (what: string): never => {
    throw new UserError(
      `reward module ${modulePath} returned ${what} for example ${ex.id}`,
      'return a finite number or {total: number, parts?: {name: number}}',
    );
  };
  let total: unknown = out;
  let parts: Record<string, number> | undefined;
  if (typeof out === 'object' && out !== null) {
    const o = out as { total?: unknown; parts?: unknown };
    total = o.total;
    if (o.parts !== undefined) {
      if (typeof o.parts !== 'object' || o.parts === null) bad('non-object parts');
      parts = {};
      for (const [k, v] of Object.entries(o.parts as Record<string, unknown>)) {
        if (typeof v !== 'number' || !Number.isFinite(v)) bad(`a non-finite part ${k}=${String(v)}`);
        parts[k] = v as number;
      }
    }
  }
  if (typeof total !== 'number' || !Number.isFinite(total)) bad(`a non-finite total ${String(total)}`);
  const t = total as number;
  return { total: t, format: parts?.format ?? 0, answer: parts?.answer ?? (t >= 1 ? 1 : 0), parts };
}

export function makeJsonlTask(o: JsonlTaskOptions, seed: number): Task {
  if (!o.path) throw new UserError('task.path: required when task.name is jsonl (a file of {"prompt", "answer"} lines)');
  const all = readJsonlExamples(o.path, o.format, o.prompt);
  const gsm8k = o.format === 'gsm8k';
  // One example per distinct prompt (first occurrence), so train and eval can never share a prompt.
  const byPrompt = new Map<string, Example>();
  for (const ex of all) if (!byPrompt.has(ex.prompt)) byPrompt.set(ex.prompt, ex);
  const unique = [...byPrompt.values()];
  const nVal = o.val_size ?? 0;
  if (unique.length < o.train_size + o.eval_size + nVal) {
    throw new UserError(
      `task: ${o.path} has ${unique.length} distinct prompts, fewer than train_size + eval_size + val_size = ${o.train_size + o.eval_size + nVal}`,
      `lower task.train_size to at most ${Math.max(0, unique.length - o.eval_size - nVal)}, or task.eval_size / task.val_size`,
    );
  }
  shuffle(makeRng(childSeed(seed, 'task/jsonl-split')), unique);
  const evalEx = unique.slice(0, o.eval_size);
  const trainEx = unique.slice(o.eval_size, o.eval_size + o.train_size);
  // Validation after train, so that neither eval nor train changes with val_size.
  const valEx = unique.slice(o.eval_size + o.train_size, o.eval_size + o.train_size + nVal);
  // GRPO-Zero-style prompts end with the opening think tag; only then is it part of what rewards see.
  const prefill = all.every((ex) => ex.prompt.endsWith(THINK_PREFILL)) ? THINK_PREFILL : '';
  const userFn = o.reward_module ? loadRewardModule(o.reward_module) : null;
  const modulePath = o.reward_module ?? '';
  const alphabet = uniqueChars(
    all.map((ex) => ex.prompt + ex.answer + (typeof ex.record?.worked === 'string' ? ex.record.worked : '')).join('') + '<think></think>\n<answer></answer>',
  );
  return {
    name: 'jsonl',
    prefill,
    train: trainEx,
    eval: evalEx,
    validation: valEx,
    reward(completion, ex) {
      const text = prefill + completion;
      if (userFn) return callUserReward(userFn, modulePath, text, ex);
      if (gsm8k) return finalNumberReward(text, Number(ex.answer), o.reward);
      return formattedReward(text, o.reward, (c) => ({ correct: c !== null && c.trim() === (ex.answer ?? '').trim() }));
    },
    isSuccess: (r) => r.answer === 1,
    demonstration(ex) {
      const head = prefill === THINK_PREFILL ? '' : THINK_PREFILL;
      const worked = typeof ex.record?.worked === 'string' ? ex.record.worked : '';
      return `${head}${worked}</think>\n<answer>${ex.answer ?? ''}</answer>`;
    },
    alphabet: () => alphabet,
  };
}
