// A Hugging Face folder with a real model's shapes and random BF16 weights: what the seeds' model (Qwen2.5-0.5B-Instruct)
// costs to load, score, sample and train, measured without downloading it (this machine reaches no model hub). Written
// at run time by the tests and the bench (never committed): config.json with the model's own fields, model.safetensors
// (streamed, a tensor at a time), and the tokenizer files given.
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { hfConfigToModelConfig } from './hf';
import { paramSpecs, sizeOf } from './shapes';

/** Qwen2.5-0.5B-Instruct's config.json (the fields transformers' Qwen2Config reads), as published with the model. */
export const QWEN25_05B_CONFIG = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** The HF tensors of a config.json: names and shapes in the order the model lists them. */
export function hfTensorShapes(config: Record<string, unknown>): { name: string; shape: number[] }[] {
  const cfg = hfConfigToModelConfig(config);
  return paramSpecs(cfg).flatMap((s) => s.parts.map((p) => ({ name: p.name, shape: p.hfShape })));
}

/** float32 → bfloat16 bits, rounded to nearest even (as torch's .to(torch.bfloat16)). */
function bf16(x: number, f: Float32Array, u: Uint32Array): number {
  f[0] = x;
  const b = u[0];
  return (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
}

/**
 * Writes `dir` (created) as a Hugging Face model folder: `config`, its tensors with seeded random BF16 values (norm
 * weights 1, every other tensor N(0, std²) approximated by a sum of three uniforms), and tokenizer.json (+
 * tokenizer_config.json when present) copied from `tokenizerDir`. A folder already complete (its done-marker written
 * last) is kept: the 0.5B one is 988 MB and takes ~10 s to write. Returns the parameter count.
 */
export function writeShapedCheckpoint(dir: string, config: Record<string, unknown>, tokenizerDir: string, o: { seed?: number; std?: number } = {}): number {
  const shapes = hfTensorShapes(config);
  const params = shapes.reduce((a, t) => a + sizeOf(t.shape), 0);
  const marker = join(dir, '.complete');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === JSON.stringify({ config, seed: o.seed ?? 1, params })) return params;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  copyFileSync(join(tokenizerDir, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  if (existsSync(join(tokenizerDir, 'tokenizer_config.json'))) copyFileSync(join(tokenizerDir, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  // safetensors: an 8-byte header length, the JSON header (names sorted, offsets into the data), then the data
  const sorted = [...shapes].sort((a, b) => (a.name < b.name ? -1 : 1));
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const t of sorted) {
    const bytes = sizeOf(t.shape) * 2;
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [off, off + bytes] };
    off += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const tmp = join(dir, `model.safetensors.tmp-${process.pid}`);
  const fd = openSync(tmp, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    writeSync(fd, len);
    writeSync(fd, Buffer.from(json, 'utf8'));
    // xorshift32, seeded: fast enough for half a billion draws
    let s = (o.seed ?? 1) * 2654435761 || 1;
    const next = () => {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      return (s >>> 0) / 4294967296;
    };
    const std = o.std ?? 0.02;
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    const CHUNK = 1 << 22;
    const buf = new Uint16Array(CHUNK);
    for (const t of sorted) {
      const n = sizeOf(t.shape);
      const ones = /norm\.weight$/.test(t.name);
      const one = bf16(1, f, u);
      for (let i0 = 0; i0 < n; i0 += CHUNK) {
        const m = Math.min(CHUNK, n - i0);
        // a sum of three uniforms has variance 3/12: scaled by 2·std its sd is std
        for (let i = 0; i < m; i++) buf[i] = ones ? one : bf16((next() + next() + next() - 1.5) * 2 * std, f, u);
        writeSync(fd, new Uint8Array(buf.buffer, 0, m * 2));
      }
    }
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(dir, 'model.safetensors'));
  writeFileSync(marker, JSON.stringify({ config, seed: o.seed ?? 1, params }));
  return params;
}
