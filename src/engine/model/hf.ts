// Load a local Hugging Face checkpoint of the Qwen2 / Llama family: config.json + safetensors weights (one file
// or sharded with model.safetensors.index.json) + tokenizer.json.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors';
import { paramCount } from './memory';
import { Transformer, type ModelConfig, type RopeScaling } from './model';
import { readSafetensors, type StTensor } from './safetensors';
import { HfTokenizer } from './tokenizer';

const EXPECTED = 'a Hugging Face model directory: config.json, model.safetensors (or model.safetensors.index.json + its shards) and tokenizer.json';
const ARCHITECTURES: Record<string, ModelConfig['arch']> = { Qwen2ForCausalLM: 'qwen2', LlamaForCausalLM: 'llama' };
const MODEL_TYPES: Record<string, ModelConfig['arch']> = { qwen2: 'qwen2', llama: 'llama' };

export interface LoadHfOptions {
  /** wrap prompts in the tokenizer's chat template */
  useChatTemplate?: boolean;
  /** override max_position_embeddings (the sampler refuses prompts + completions longer than this) */
  maxSeqLen?: number;
  /** called with the config and tokenizer before the weights are read (a run's memory check: model/memory.ts) */
  beforeWeights?: (cfg: ModelConfig, tokenizer: HfTokenizer) => void;
}

function readJsonFile(path: string): Record<string, unknown> {
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw new UserError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The ranges config.json's numbers must fall in: [lowest, highest, integer]. A lowest of 0 means "above 0". Far above
 * any released model of the family, so a hostile or corrupted file is refused with its field before anything is
 * allocated from it, instead of an allocation of gigabytes or an internal error.
 */
const HF_RANGES: Record<string, [number, number, boolean]> = {
  vocab_size: [1, 2 ** 24, true],
  hidden_size: [1, 65536, true],
  num_hidden_layers: [1, 1024, true],
  num_attention_heads: [1, 1024, true],
  num_key_value_heads: [1, 1024, true],
  intermediate_size: [1, 2 ** 20, true],
  max_position_embeddings: [1, 2 ** 24, true],
  head_dim: [2, 1024, true],
  rope_theta: [0, 1e12, false],
  rms_norm_eps: [0, 0.1, false],
};

/** config.json (transformers' Qwen2Config / LlamaConfig field names) → ModelConfig. */
export function hfConfigToModelConfig(c: Record<string, unknown>, where = 'config.json'): ModelConfig {
  if (c === null || typeof c !== 'object' || Array.isArray(c))
    throw new UserError(`${where}: expected a JSON object of the model's settings, got ${JSON.stringify(c)?.slice(0, 40)}`);
  const archs = Array.isArray(c.architectures) ? (c.architectures as string[]) : [];
  const arch = archs.map((a) => ARCHITECTURES[a]).find(Boolean) ?? MODEL_TYPES[String(c.model_type)];
  if (!arch) {
    throw new UserError(
      `${where}: unsupported model (architectures ${JSON.stringify(archs)}, model_type ${JSON.stringify(c.model_type)}); supported: ${Object.keys(ARCHITECTURES).join(', ')} (model_type ${Object.keys(MODEL_TYPES).join(' or ')})`,
    );
  }
  const num = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new UserError(`${where}: "${key}" must be a number, got ${JSON.stringify(c[key])}`);
    const range = HF_RANGES[key];
    if (range) {
      const [lo, hi, int] = range;
      if ((int && !Number.isInteger(v)) || v < lo || v > hi || (lo === 0 && v === 0))
        throw new UserError(`${where}: "${key}" is ${v}; expected ${int ? 'an integer' : 'a number'} ${lo === 0 ? 'above 0' : `from ${lo}`} to ${hi}`);
    }
    return v;
  };
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu')
    throw new UserError(`${where}: hidden_act ${JSON.stringify(c.hidden_act)} is not supported (only silu)`);
  if (c.mlp_bias === true) throw new UserError(`${where}: mlp_bias = true is not supported`);
  const nHeads = num('num_attention_heads');
  let maxSeqLen = num('max_position_embeddings', arch === 'llama' ? 2048 : 32768);
  // Qwen2's sliding window only changes attention beyond `sliding_window` tokens: capping the length keeps it exact.
  if (c.use_sliding_window === true && typeof c.sliding_window === 'number') maxSeqLen = Math.min(maxSeqLen, c.sliding_window);
  const cfg: ModelConfig = {
    vocabSize: num('vocab_size'),
    dModel: num('hidden_size'),
    nLayers: num('num_hidden_layers'),
    nHeads,
    nKvHeads: num('num_key_value_heads', nHeads),
    dFf: num('intermediate_size'),
    maxSeqLen,
    ropeTheta: num('rope_theta', 10000),
    rmsEps: num('rms_norm_eps', 1e-6),
    // transformers' Qwen2Config and LlamaConfig both default to untied
    tieEmbeddings: c.tie_word_embeddings === true,
    // Qwen2 always has q/k/v biases; Llama has them only with attention_bias
    qkvBias: arch === 'qwen2' ? true : c.attention_bias === true,
    arch,
  };
  if (c.head_dim !== undefined && c.head_dim !== null) cfg.headDim = num('head_dim');
  const hd = cfg.headDim ?? cfg.dModel / nHeads;
  if (!Number.isInteger(hd) || hd % 2)
    throw new UserError(
      `${where}: hidden_size ${cfg.dModel} / num_attention_heads ${nHeads} is ${hd}; each head needs an even whole number of dimensions (RoPE rotates pairs), or give head_dim`,
    );
  if (nHeads % cfg.nKvHeads) throw new UserError(`${where}: num_key_value_heads ${cfg.nKvHeads} must divide num_attention_heads ${nHeads}`);
  const rs = c.rope_scaling as Record<string, unknown> | null | undefined;
  if (rs) {
    const type = String(rs.rope_type ?? rs.type);
    const factor = Number(rs.factor);
    if (type === 'linear' || type === 'llama3') {
      if (!(factor > 0)) throw new UserError(`${where}: rope_scaling.factor must be a positive number`);
      const s: RopeScaling = { type, factor };
      if (type === 'llama3') {
        s.lowFreqFactor = Number(rs.low_freq_factor ?? 1);
        s.highFreqFactor = Number(rs.high_freq_factor ?? 4);
        s.originalMaxPositionEmbeddings = Number(rs.original_max_position_embeddings ?? 8192);
      }
      cfg.ropeScaling = s;
    } else if (type !== 'default') {
      throw new UserError(`${where}: rope_scaling type ${JSON.stringify(type)} is not supported (supported: default, linear, llama3)`);
    }
  }
  return cfg;
}

/** The bytes of the weights files (model.safetensors, or the shards its index lists); null where they cannot be listed. */
function weightFilesBytes(dir: string): number | null {
  try {
    const index = join(dir, 'model.safetensors.index.json');
    if (existsSync(index)) {
      const map = readJsonFile(index).weight_map as Record<string, string>;
      return [...new Set(Object.values(map))].reduce((a, f) => a + statSync(join(dir, f)).size, 0);
    }
    return statSync(join(dir, 'model.safetensors')).size;
  } catch {
    return null;
  }
}

/** All tensors of model.safetensors, or of the shards listed by model.safetensors.index.json. */
export function readHfWeights(dir: string): Record<string, StTensor> {
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    const map = readJsonFile(index).weight_map as Record<string, string> | undefined;
    if (!map || typeof map !== 'object') throw new UserError(`${index} has no "weight_map"`);
    const out: Record<string, StTensor> = {};
    for (const shard of [...new Set(Object.values(map))]) {
      const path = join(dir, shard);
      if (!existsSync(path)) throw new UserError(`${index} lists shard ${shard}, which is not in ${dir}`);
      Object.assign(out, readSafetensors(path).tensors);
    }
    for (const name of Object.keys(map)) if (!out[name]) throw new UserError(`${index} puts ${name} in ${map[name]}, but that file does not hold it`);
    return out;
  }
  const single = join(dir, 'model.safetensors');
  if (existsSync(single)) return readSafetensors(single).tensors;
  const files = readdirSync(dir);
  const hint = files.some((f) => f.endsWith('.bin') || f.endsWith('.pt'))
    ? ' (only safetensors weights can be read: re-save the model with save_pretrained(..., safe_serialization=True))'
    : files.some((f) => f.endsWith('.safetensors'))
      ? ' (found .safetensors files but no model.safetensors.index.json naming them)'
      : '';
  throw new UserError(`no model.safetensors or model.safetensors.index.json in ${dir}${hint}`);
}

export function loadHfModel(dir: string, opts: LoadHfOptions = {}): { model: Transformer; tokenizer: HfTokenizer; cfg: ModelConfig } {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (e) {
    throw new UserError(`cannot read model directory ${dir}: ${(e as Error).message} (expected ${EXPECTED})`);
  }
  if (!isDir) throw new UserError(`${dir} is not a directory (expected ${EXPECTED})`);
  const configPath = join(dir, 'config.json');
  if (!existsSync(configPath)) throw new UserError(`no config.json in ${dir} (expected ${EXPECTED})`);
  const cfg = hfConfigToModelConfig(readJsonFile(configPath), configPath);
  if (opts.maxSeqLen !== undefined) cfg.maxSeqLen = opts.maxSeqLen;
  const tokenizer = HfTokenizer.fromDir(dir, { useChatTemplate: opts.useChatTemplate });
  if (tokenizer.vocabSize > cfg.vocabSize) {
    throw new UserError(
      `the tokenizer in ${dir} has ${tokenizer.vocabSize} ids but config.json has vocab_size ${cfg.vocabSize}: tokenizer and weights do not belong together`,
    );
  }
  opts.beforeWeights?.(cfg, tokenizer);
  // Before anything is allocated from the config: weights stored in 16 bits take 2 bytes a parameter, so files smaller
  // than that cannot hold the model config.json describes (a corrupted or hostile config, or the wrong folder).
  const held = weightFilesBytes(dir);
  const params = paramCount(cfg);
  if (held !== null && 2 * params > held * 1.01)
    throw new UserError(
      `${configPath} describes ${params.toLocaleString('en-US')} parameters (${((2 * params) / 1e9).toFixed(2)} GB in 16 bits), but the weights files ` +
        `in ${dir} hold ${(held / 1e9).toFixed(2)} GB: config.json and the weights do not belong together`,
    );
  const weights = readHfWeights(dir);
  const model = Transformer.fromWeights(cfg, weights);
  return { model, tokenizer, cfg };
}
