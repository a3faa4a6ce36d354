// A hostile or corrupted config.json (import --model, serve, train from a HF folder) is refused with the file and the
// field, before anything is allocated from it: no TypeError, no internal error, no gigabytes grown first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hfConfigToModelConfig, loadHfModel } from '../../../src/engine/model/hf';
import { HfTokenizer } from '../../../src/engine/model/tokenizer';
import { QWEN25_05B_CONFIG } from '../../../src/engine/model/shaped_checkpoint';
import { isUserError } from '../../../src/engine/core/errors';
import { QWEN_TOKENIZER_DIR } from './qwen05b';

const GOOD = QWEN25_05B_CONFIG as unknown as Record<string, unknown>;
const refused = (c: unknown, re: RegExp) =>
  assert.throws(
    () => hfConfigToModelConfig(c as Record<string, unknown>, 'x/config.json'),
    (e: Error) => isUserError(e) && e.message.startsWith('x/config.json: ') && re.test(e.message),
    JSON.stringify(c)?.slice(0, 80),
  );

test('every field has a type and a range; a value outside it is refused naming the file and the field', () => {
  assert.equal(hfConfigToModelConfig(GOOD).nLayers, 24, 'the real 0.5B config passes');
  refused({ ...GOOD, vocab_size: 1e12 }, /"vocab_size" is 1000000000000; expected an integer from 1 to 16777216/);
  refused({ ...GOOD, head_dim: 2e8 }, /"head_dim" is 200000000; expected an integer from 2 to 1024/);
  refused({ ...GOOD, rms_norm_eps: -1 }, /"rms_norm_eps" is -1; expected a number above 0 to 0.1/);
  refused({ ...GOOD, num_hidden_layers: 1e7 }, /"num_hidden_layers" is 10000000; expected an integer from 1 to 1024/);
  refused({ ...GOOD, hidden_size: 'wide' }, /"hidden_size" must be a number, got "wide"/);
  refused({ ...GOOD, num_hidden_layers: 2.5 }, /"num_hidden_layers" is 2.5; expected an integer/);
  refused({ ...GOOD, num_key_value_heads: 5 }, /num_key_value_heads 5 must divide num_attention_heads 14/);
  refused({ ...GOOD, hidden_size: 900 }, /hidden_size 900 \/ num_attention_heads 14 is 64\.28/);
  refused(null, /expected a JSON object/);
  refused([1, 2], /expected a JSON object/);
});

test('a config.json that is null, or that describes more parameters than its weights files hold, is refused before the weights are read', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-hostile-hf-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of readdirSync(QWEN_TOKENIZER_DIR)) cpSync(join(QWEN_TOKENIZER_DIR, f), join(dir, f));
  writeFileSync(join(dir, 'model.safetensors'), Buffer.alloc(1024));
  writeFileSync(join(dir, 'config.json'), 'null');
  assert.throws(
    () => loadHfModel(dir),
    (e: Error) => isUserError(e) && e.message.includes(join(dir, 'config.json')) && /expected a JSON object/.test(e.message),
  );
  // the 0.5B's config over a 1 KB weights file: 494 million parameters cannot be in it
  writeFileSync(join(dir, 'config.json'), JSON.stringify(GOOD));
  assert.throws(
    () => loadHfModel(dir),
    (e: Error) => isUserError(e) && /describes 494,032,768 parameters .* but the weights files in .* hold 0\.00 GB/.test(e.message),
  );
});

test('a tokenizer.json whose added token has id 2³² − 2 is refused at once, naming the token', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-hostile-tok-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of readdirSync(QWEN_TOKENIZER_DIR)) cpSync(join(QWEN_TOKENIZER_DIR, f), join(dir, f));
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as { added_tokens: { id: number; content: string }[] };
  tok.added_tokens.push({ ...tok.added_tokens[0], id: 2 ** 32 - 2, content: '<|evil|>' });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok));
  const t0 = Date.now();
  assert.throws(
    () => HfTokenizer.fromDir(dir),
    (e: Error) =>
      isUserError(e) &&
      e.message.includes(join(dir, 'tokenizer.json')) &&
      /added token "<\|evil\|>" has id 4294967294, outside \[0, 16777216\)/.test(e.message),
  );
  assert.ok(Date.now() - t0 < 5000, `refused in ${Date.now() - t0} ms, not after building a table of four billion entries`);
});

test("a tokenizer id at or above config.json's vocab_size is refused, naming the token and the vocabulary size", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cl-hostile-vocab-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of readdirSync(QWEN_TOKENIZER_DIR)) cpSync(join(QWEN_TOKENIZER_DIR, f), join(dir, f));
  // Qwen's ids end at 151,668 and its models' vocab_size is 151,936: the table fits
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ vocab_size: 151936 }));
  assert.ok(HfTokenizer.fromDir(dir));
  // an added token past it (below the general bound of 2^24): no embedding row would hold it
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as { added_tokens: { id: number; content: string }[] };
  tok.added_tokens.push({ ...tok.added_tokens[0], id: 200_000, content: '<|far|>' });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok));
  assert.throws(
    () => HfTokenizer.fromDir(dir),
    (e: Error) =>
      isUserError(e) &&
      /has 200001 ids but config\.json has vocab_size 151936: tokenizer and weights do not belong together \(added token "<\|far\|>" has id 200000\)/.test(
        e.message,
      ),
  );
});

test('a model too large for the backend is refused from its config.json, with the numbers, before a weight is read (import --model, probe, eval)', async (t) => {
  const { loadScorer } = await import('../../../src/engine/session/score');
  const { parseConfigText } = await import('../../../src/engine/config/config');
  const dir = mkdtempSync(join(tmpdir(), 'cl-hostile-big-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of readdirSync(QWEN_TOKENIZER_DIR)) cpSync(join(QWEN_TOKENIZER_DIR, f), join(dir, f));
  // Qwen2.5-7B's shape: 7.6 billion parameters, 30 GB in float32, far past the wasm heap's 4.29 GB; no weights file at
  // all, so anything that reached for the weights would fail otherwise
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      architectures: ['Qwen2ForCausalLM'],
      model_type: 'qwen2',
      vocab_size: 152064,
      hidden_size: 3584,
      intermediate_size: 18944,
      num_hidden_layers: 28,
      num_attention_heads: 28,
      num_key_value_heads: 4,
      max_position_embeddings: 32768,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      tie_word_embeddings: false,
    }),
  );
  const cfg = parseConfigText('name: x\nbackend: wasm\ntask: { name: countdown }\n').config!;
  await assert.rejects(
    loadScorer(dir, cfg, () => {}),
    (e: Error) =>
      isUserError(e) &&
      /this run needs 30\.\d\d GB of wasm heap \(weights 30\.\d\d GB.*the wasm backend holds 4\.29 GB: use backend webgpu on a GPU that holds it, or a smaller model/.test(
        e.message,
      ),
  );
});
