// GRPO rollouts on an SGLang server (`rollout.server`): the server samples, this process updates, and after each update
// the server loads the new policy before the next step samples (SERVING.md, "sglang_for_rl"):
//   1. the policy is written as a safetensors folder, <run>/rollout/step-N/ (model.safetensors; for a Hugging Face model
//      also its config.json, generation config and tokenizer files, so SGLang can load the folder as a model);
//   2. POST /update_weights_from_disk {model_path, weight_version: "step-N", flush_cache: true}: the prefix cache is
//      flushed with it, so no step reuses keys and values computed with the old weights;
//   3. the server must then report weight_version "step-N" (GET /model_info, or /get_weight_version on older builds)
//      before anything samples. Every sync goes into run.json with its seconds.
// The previous step's folder is removed once the server has loaded the next.
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import type { StTensor } from '../model/safetensors';
import { writeSafetensors } from '../model/safetensors';
import { ServerError, ServerSampler } from './client';

/** What run.json records about the rollout server. */
export interface RolloutServerInfo {
  url: string;
  api: string;
  model: string | null;
  syncs: { step: number; path: string; seconds: number }[];
}

/** Files beside the weights that make a Hugging Face model folder loadable by SGLang. */
const HF_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt'];

export class RolloutServer {
  private last: string | null = null;

  private constructor(
    readonly sampler: ServerSampler,
    private readonly runDir: string,
    private readonly hfSource: string | null,
    readonly info: RolloutServerInfo,
  ) {}

  static async connect(cfg: CreditConfig, runDir: string, tokenizer: Tokenizer, log: (m: string) => void): Promise<RolloutServer> {
    const sampler = await ServerSampler.connect({ url: cfg.rollout.server!, api: cfg.rollout.api, concurrency: cfg.rollout.concurrency, log }, tokenizer);
    if (sampler.api !== 'sglang') {
      await sampler.close();
      throw new UserError(
        `rollout.server: ${cfg.rollout.server} speaks vLLM, which reloads weights from disk only in its dev mode (VLLM_SERVER_DEV_MODE=1, /collective_rpc); ` +
          'rollout.sync: disk needs SGLang (POST /update_weights_from_disk)',
        'serve the policy with SGLang (python -m sglang.launch_server --model-path <folder>), or set rollout.server: null',
      );
    }
    const hf = cfg.model.source === 'hf' && cfg.model.path ? resolve(cfg.model.path) : null;
    return new RolloutServer(sampler, runDir, hf, { url: sampler.provenance.url!, api: sampler.api, model: sampler.provenance.model, syncs: [] });
  }

  /** Writes `weights` as the policy of `step` and has the server load it; resolves once the server reports it. */
  async sync(step: number, weights: Record<string, StTensor>): Promise<{ path: string; seconds: number }> {
    const t0 = performance.now();
    const dir = join(this.runDir, 'rollout', `step-${String(step).padStart(6, '0')}`);
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    writeSafetensors(join(tmp, 'model.safetensors'), weights, { metadata: { format: 'pt', credit_lens: 'rollout policy', step: String(step) } });
    if (this.hfSource) for (const f of HF_FILES) if (existsSync(join(this.hfSource, f))) copyFileSync(join(this.hfSource, f), join(tmp, f));
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    const version = `step-${step}`;
    const r = await this.sampler.updateWeightsFromDisk(dir, version);
    if (!r.success) throw new ServerError(`${this.info.url} could not load the policy of step ${step} from ${dir}: ${r.message}`);
    const reported = await this.sampler.weightVersion();
    if (reported !== version)
      throw new ServerError(
        `${this.info.url} loaded ${dir} but reports weight version ${JSON.stringify(reported)}, not ${JSON.stringify(version)}: another client may be updating it`,
      );
    if (this.last && this.last !== dir) rmSync(this.last, { recursive: true, force: true });
    this.last = dir;
    const seconds = (performance.now() - t0) / 1000;
    this.info.syncs.push({ step, path: dir, seconds });
    return { path: dir, seconds };
  }

  close(): Promise<void> {
    return this.sampler.close();
  }
}
