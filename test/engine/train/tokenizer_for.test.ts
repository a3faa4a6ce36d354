// model.tokenizer: bpe: trained once per run on the task's training split, saved in the run folder as a
// Hugging Face tokenizer.json, deterministic, and reused by eval, resume and a run that starts from its checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { loadConfig } from '../../../src/engine/config/config';
import { readTokenTable } from '../../../src/engine/rundir/arrow_tables';
import { stepFile } from '../../../src/engine/rundir/rundir';
import { buildSession } from '../../../src/engine/session/session';
import { train } from '../../../src/engine/train/train';
import { evalRun } from '../../../src/engine/train/evalrun';
import { isUserError } from '../../../src/engine/core/errors';
import { tinyConfig } from '../fixtures';

const BPE = ['model.tokenizer=bpe', 'model.vocab_size=300'];

test('bpe: trained into the run folder, loads in @huggingface/tokenizers, tags are single tokens, tokens are subwords', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-bpe-run-'));
  try {
    const cfg = tinyConfig(dir, 'countdown');
    const r = await train({ configPath: cfg, sets: BPE });
    assert.equal(r.status, 'completed');
    const json = readFileSync(join(r.runDir, 'tokenizer.json'), 'utf8');
    const hf = new Tokenizer(JSON.parse(json), JSON.parse(readFileSync(join(r.runDir, 'tokenizer_config.json'), 'utf8')));
    for (const tag of ['<think>', '</think>', '<answer>', '</answer>']) assert.equal(hf.encode(tag, { add_special_tokens: false }).ids.length, 1, tag);
    const t = readTokenTable(stepFile(r.runDir, 'tokens', 3));
    assert.ok(
      t.token.some((x) => x.length > 1),
      'some logged tokens are several characters long',
    );
    // Deterministic: the same config trains the same tokenizer.
    const again = await train({ configPath: cfg, sets: [...BPE, 'name=again'] });
    assert.equal(readFileSync(join(again.runDir, 'tokenizer.json'), 'utf8'), json);

    // Eval and a new session on the run read the saved file; a run from its checkpoint copies it.
    const ev = await evalRun(r.runDir);
    assert.ok(ev.n > 0);
    const { config } = loadConfig(cfg, BPE);
    const s = await buildSession(config, () => {}, r.runDir);
    // At most model.vocab_size ids: 6 specials and tags + 256 bytes + merges, which stop early when no pair occurs
    // twice in a 48-example training split.
    assert.ok(s.tokenizer.vocabSize > 262 + 10 && s.tokenizer.vocabSize <= 300, String(s.tokenizer.vocabSize));
    assert.deepEqual(s.tokenizer.encode('<think>3+5=8</think>'), hf.encode('<think>3+5=8</think>', { add_special_tokens: false }).ids);
    s.model.dispose();
    const child = await train({ configPath: cfg, sets: [...BPE, 'name=child', `model.init_checkpoint=${r.runDir}`, 'model.vocab_size=400'] });
    assert.equal(child.status, 'completed');
    assert.equal(readFileSync(join(child.runDir, 'tokenizer.json'), 'utf8'), json, "the init checkpoint's tokenizer, not a new one of 400");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bpe: a vocab_size below the bytes and tags is a config error naming the field', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-bpe-run-'));
  try {
    const cfg = tinyConfig(dir, 'countdown');
    assert.throws(
      () => loadConfig(cfg, ['model.tokenizer=bpe', 'model.vocab_size=100']),
      (e: unknown) => isUserError(e) && /model\.vocab_size/.test((e as Error).message) && /100/.test((e as Error).message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
