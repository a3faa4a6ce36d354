// The tokenizer of a scratch model (`model.tokenizer`). `char` is built from the task's alphabet each time.
// `bpe` is trained once per run: on the prompts and the SFT demonstrations of the task's training split, with the
// chat template's tags as single tokens, and saved in the run folder as tokenizer.json + tokenizer_config.json (the
// Hugging Face format, so Python's `tokenizers` loads it too). A resumed run, an eval and a run that starts from
// another run's checkpoint (model.init_checkpoint) load the saved one: the same ids must mean the same text.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { CreditConfig } from '../config/config';
import { childSeed, makeRng } from '../core/rng';
import type { Task, Tokenizer } from '../core/types';
import { trainBpe } from '../model/bpe';
import { CharTokenizer, HfTokenizer } from '../model/tokenizer';
import { writeFileAtomic } from '../core/files';

export const TOKENIZER_JSON = 'tokenizer.json';
const TAGS = ['<think>', '</think>', '<answer>', '</answer>'];

/** The run folder of a model.init_checkpoint value (a run folder, or its checkpoints/step-N folder). */
function runOfCheckpoint(p: string): string {
  return basename(dirname(p)) === 'checkpoints' ? dirname(dirname(p)) : p;
}

/** Where a saved BPE tokenizer for this run is: the run folder itself, else the init checkpoint's run; null: none. */
export function savedTokenizerDir(cfg: CreditConfig, runDir?: string): string | null {
  const candidates = [runDir, cfg.model.init_checkpoint ? runOfCheckpoint(cfg.model.init_checkpoint) : undefined];
  return candidates.find((d): d is string => !!d && existsSync(join(d, TOKENIZER_JSON))) ?? null;
}

export function scratchTokenizer(cfg: CreditConfig, task: Task, runDir?: string, log: (m: string) => void = () => {}): Tokenizer {
  if (cfg.model.tokenizer === 'char') return CharTokenizer.fromAlphabet(task.alphabet());
  const saved = savedTokenizerDir(cfg, runDir);
  if (saved) {
    const tok = HfTokenizer.fromDir(saved, { useChatTemplate: false });
    if (saved !== runDir && runDir) {
      // A run that starts from another run's weights keeps its ids: copy the tokenizer into this run's folder.
      for (const f of [TOKENIZER_JSON, 'tokenizer_config.json']) {
        if (existsSync(join(saved, f))) writeFileAtomic(join(runDir, f), readFileSync(join(saved, f)));
      }
    }
    log(`tokenizer: bpe, ${tok.vocabSize} ids, from ${saved === runDir ? 'this run' : saved}`);
    return tok;
  }
  const t0 = Date.now();
  // The demonstrations are what SFT teaches; their reasoning words are what the merges should learn.
  const rng = makeRng(childSeed(cfg.seed, 'bpe'));
  const texts = [...task.train.map((ex) => ex.prompt), ...task.train.map((ex) => task.demonstration(ex, rng))];
  const trained = trainBpe(texts, { vocabSize: cfg.model.vocab_size, literals: TAGS, eos: '<|endoftext|>', pad: '<|pad|>', minFrequency: 2 });
  const dir = runDir ?? mkdtempSync(join(tmpdir(), 'credit-lens-bpe-'));
  try {
    writeFileAtomic(join(dir, TOKENIZER_JSON), JSON.stringify(trained.tokenizer));
    writeFileAtomic(join(dir, 'tokenizer_config.json'), JSON.stringify(trained.config));
    const tok = HfTokenizer.fromDir(dir, { useChatTemplate: false });
    log(`tokenizer: bpe trained on ${texts.length} texts in ${((Date.now() - t0) / 1000).toFixed(1)} s, ${tok.vocabSize} ids`);
    return tok;
  } finally {
    if (!runDir) rmSync(dir, { recursive: true, force: true });
  }
}
