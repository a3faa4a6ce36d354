// Interfaces shared across the engine. Concrete modules implement these; the trainer only sees these.

import type { Section, TokenType } from '../../protocol/index';

// Declared in src/protocol, which the run-directory readers and the webviews share.
export type { Section, TokenType };

/** One completion token with its character offsets [start, end) in the decoded completion text. */
export interface TokenSpan {
  id: number;
  text: string;
  start: number;
  end: number;
}

export interface Tokenizer {
  readonly kind: 'char' | 'hf';
  readonly vocabSize: number;
  /** −1 when the model has no BOS token (Qwen) */
  readonly bosId: number;
  readonly eosId: number;
  /** every id that ends a completion (Qwen: <|im_end|> and <|endoftext|>); defaults to [eosId] */
  readonly eosIds?: number[];
  readonly padId: number;
  /** Encode plain text (no special tokens added). */
  encode(text: string): number[];
  /** Decode ids to text; special tokens (BOS/EOS/pad) are dropped. */
  decode(ids: number[]): string;
  /** Decode completion ids; every token keeps its character offsets in the returned text. */
  decodeWithOffsets(ids: number[]): { text: string; tokens: TokenSpan[] };
  /** Prompt text → ids as fed to the model (BOS / chat template applied here). */
  encodePrompt(prompt: string): number[];
}

/** One task instance. `prompt` is what the model is conditioned on. */
export interface Example {
  id: number;
  prompt: string;
  /** countdown */
  numbers?: number[];
  target?: number;
  /** arithmetic / jsonl: the reference answer as text */
  answer?: string;
  /** jsonl: the user's raw record */
  record?: Record<string, unknown>;
}

export interface RewardResult {
  total: number;
  format: number;
  answer: number;
  /** optional named partial rewards (seed doc 004) */
  parts?: Record<string, number>;
}

export interface Task {
  /** its entry's name in tasks/catalog.ts */
  readonly name: string;
  /**
   * Text the prompt ends with that belongs to the completion's format (e.g. "<think>"): rewards and
   * sections see `prefill + completion`, as GRPO-Zero does.
   */
  readonly prefill: string;
  readonly train: Example[];
  /** the test split: what evaluation reports */
  readonly eval: Example[];
  /** disjoint from both: for choices made by looking at results (task.val_size; may be empty) */
  readonly validation: Example[];
  /** Reward of a generated completion (without the prefill; the task adds it). */
  reward(completion: string, ex: Example): RewardResult;
  /** success = the answer part is fully correct */
  isSuccess(r: RewardResult): boolean;
  /** A demonstration completion (without the prefill) for the SFT warm start. */
  demonstration(ex: Example, rng: () => number): string;
  /** Every character prompts and completions can contain (char tokenizer alphabet). */
  alphabet(): string;
}

/** A finding of a catalog entry's check: the key it is about (from the root), what is allowed there or what is wrong,
 *  and `at`, the key that made the check run (the diagnostic's second place). */
export interface CatalogIssue {
  path: string[];
  expected?: string;
  message?: string;
  at?: string[];
}
