// The byte-level BPE trainer against merges worked by hand, and its tokenizer.json against the Hugging Face
// tokenizer library that loads real models' files (@huggingface/tokenizers) and against our HfTokenizer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { byteToChar, pretokenize, trainBpe } from '../../../src/engine/model/bpe';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';

const TAGS = ['<think>', '</think>', '<answer>', '</answer>'];
const opts = (vocabSize: number, minFrequency = 2) => ({ vocabSize, literals: TAGS, eos: '<|endoftext|>', pad: '<|pad|>', minFrequency });
const BASE = 2 + TAGS.length + 256;

test('merges worked by hand: most frequent pair first, ties to the smallest pair, stop below min frequency', () => {
  // Words "aaab" and "aab". Pairs: (a,a) 2 + 1 = 3, (a,b) 1 + 1 = 2 → merge "a a"; words become [aa,a,b] and [aa,b].
  // Then (aa,a) 1, (a,b) 1, (aa,b) 1: below 2, so training stops with one merge.
  assert.deepEqual(trainBpe(['aaab aab'], opts(BASE + 10)).merges, [['a', 'a']]);
  // With min frequency 1 the ties break by the smaller pair: "a\0b" < "aa\0a" < "aa\0b" → merge "a b"; words [aa,ab] and
  // [aa,b]; then "aa\0ab" < "aa\0b" → merge "aa ab". The word "aab" keeps its leading space as GPT-2's Ġ.
  const r = trainBpe(['aaab aab'], opts(BASE + 10, 1));
  assert.deepEqual(r.merges.slice(0, 3), [
    ['a', 'a'],
    ['a', 'b'],
    ['aa', 'ab'],
  ]);
  assert.equal(byteToChar()[32], 'Ġ');
  assert.deepEqual(
    [...pretokenize(['aaab aab'], [])],
    [
      ['aaab', 1],
      ['Ġaab', 1],
    ],
  );
  // The vocabulary stops at vocab_size.
  assert.equal(trainBpe(['aaab aab'], opts(BASE + 2, 1)).vocabSize, BASE + 2);
  assert.throws(() => trainBpe(['x'], opts(100)), /vocab_size 100 is below 262/);
});

test('deterministic: the same corpus gives the same tokenizer.json, whatever the order of the texts', () => {
  const texts = ['Tom has 3 apples and buys 5 more, so he has 3 + 5 = 8.', 'She has 12 pens and gives away 4, so 12 - 4 = 8.', 'so he has'];
  const a = JSON.stringify(trainBpe(texts, opts(320)).tokenizer);
  const b = JSON.stringify(trainBpe([...texts].reverse(), opts(320)).tokenizer);
  assert.equal(a, b);
});

test('tokenizer.json loads in @huggingface/tokenizers: tags are single tokens, text round-trips, and HfTokenizer gives offsets', () => {
  const corpus = Array.from(
    { length: 200 },
    (_, i) => `<think>Tom has ${i} apples and buys ${i % 7} more, so he has ${i} + ${i % 7} = ${i + (i % 7)}.</think>\n<answer>${i + (i % 7)}</answer>`,
  );
  const t = trainBpe(corpus, opts(400));
  const hf = new Tokenizer(t.tokenizer, t.config);
  const text = '<think>Tom has 12 apples and buys 3 more, so he has 12 + 3 = 15.</think>\n<answer>15</answer>';
  const ids = hf.encode(text, { add_special_tokens: false }).ids;
  const tokens = ids.map((id) => hf.id_to_token(id));
  for (const tag of TAGS) assert.ok(tokens.includes(tag), `${tag} is one token: ${JSON.stringify(tokens)}`);
  assert.ok(tokens.includes('Ġapples') || tokens.includes('Ġapp'), `subwords were learned: ${JSON.stringify(tokens)}`);
  assert.ok(ids.length < text.length / 2, `${ids.length} tokens for ${text.length} characters`);
  assert.equal(hf.decode(ids, { skip_special_tokens: true }), text);
  // The engine's loader, as for a real model directory.
  const dir = mkdtempSync(join(tmpdir(), 'cl-bpe-'));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(t.tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(t.config));
  const tok = HfTokenizer.fromDir(dir);
  assert.deepEqual(tok.encode(text), ids);
  assert.equal(tok.eosId, 1);
  assert.equal(tok.padId, 0);
  const d = tok.decodeWithOffsets([...ids, tok.eosId]);
  assert.equal(d.text, text);
  assert.equal(d.tokens.map((x) => x.text).join(''), text);
  assert.deepEqual(d.tokens[0], { id: ids[0], text: '<think>', start: 0, end: 7 });
  assert.equal(d.tokens[d.tokens.length - 1].text, '', 'EOS decodes to nothing');
});
