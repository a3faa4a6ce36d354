// GRPO rollouts on an SGLang server (`rollout.server`): the server samples, this process updates, and after each update
// the server loads the new policy before the next step samples (serving.md#sglang, "sglang_for_rl"):
//   1. the policy is written as a safetensors folder, <run>/rollout/step-N/ (model.safetensors; for a Hugging Face model
//      also its config.json, generation config and tokenizer files, so SGLang can load the folder as a model);
//   2. POST /update_weights_from_disk {model_path, weight_version: "step-N", flush_cache: true}: the prefix cache is
//      flushed with it, so no step reuses keys and values computed with the old weights;
//   3. the server must then report weight_version "step-N" (GET /model_info, or /get_weight_version on older builds)
//      before anything samples. Every sync goes into run.json with its seconds.
// The previous step's folder is removed once the server has loaded the next.
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CreditConfig } from '../config/config';
import { UserError } from '../core/errors';
import type { Tokenizer } from '../core/types';
import type { StTensor } from '../model/safetensors';
import { writeSafetensors } from '../model/safetensors';
import { resolvedLora } from '../model/lora';
import type { Transformer } from '../model/model';
import type { Continuation, SampleHooks, SampleRequest, Sampler, SampleSettings, SamplerProvenance, ScoreItem, ScoredTokens } from '../model/sampling';
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

/** Adapters as PEFT saves them: adapter_model.safetensors (base_model.model.<module>.lora_A/B.weight) and adapter_config.json. */
export function writePeftAdapters(
  dir: string,
  adapters: Record<string, StTensor>,
  lora: { r: number; alpha: number; targets: string[] },
  base: string | null,
): void {
  const named = Object.fromEntries(Object.entries(adapters).map(([k, v]) => [`base_model.model.${k}`, v]));
  writeSafetensors(join(dir, 'adapter_model.safetensors'), named, { metadata: { format: 'pt' } });
  const config = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    r: lora.r,
    lora_alpha: lora.alpha,
    target_modules: lora.targets,
    lora_dropout: 0,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    base_model_name_or_path: base,
  };
  writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify(config, null, 2) + '\n');
}

/** What the run is told of the rollout server: its log lines, and run.json's record after each sync. */
export interface RolloutHooks {
  log: (m: string) => void;
  onSync?: (info: RolloutServerInfo) => void;
}

/**
 * The rollout server as the session's sampler (rollout.server), or null where the run samples here. It follows the
 * policy: the trainer calls follow() after each update, and nothing samples before the server has the new weights.
 */
export async function openRolloutSampler(cfg: CreditConfig, runDir: string, tokenizer: Tokenizer, hooks: RolloutHooks): Promise<RolloutServer | null> {
  return cfg.rollout.server ? RolloutServer.connect(cfg, runDir, tokenizer, hooks) : null;
}

export class RolloutServer implements Sampler {
  private last: string | null = null;

  private constructor(
    readonly sampler: ServerSampler,
    private readonly runDir: string,
    private readonly hfSource: string | null,
    readonly info: RolloutServerInfo,
    /** model.lora: the adapters are synced (PEFT folders, /load_lora_adapter), the base stays the server's */
    private readonly lora: { r: number; alpha: number; targets: string[] } | null,
    private readonly hooks: RolloutHooks = { log: () => {} },
  ) {}

  get provenance(): SamplerProvenance {
    return this.sampler.provenance;
  }

  sample(reqs: SampleRequest[], settings: SampleSettings, hooks?: SampleHooks): Promise<Continuation[][] | null> {
    return this.sampler.sample(reqs, settings, hooks);
  }

  score(items: ScoreItem[], topK: number, hooks?: SampleHooks): Promise<ScoredTokens[] | null> {
    return this.sampler.score(items, topK, hooks);
  }

  /** The policy of `step` on the server, recorded in run.json; resolves once the server has it. */
  async follow(step: number, model: Transformer): Promise<void> {
    const r = await this.sync(step, model);
    this.hooks.onSync?.(this.info);
    this.hooks.log(`rollout server: loaded the policy of step ${step} in ${r.seconds.toFixed(2)} s`);
  }

  static async connect(cfg: CreditConfig, runDir: string, tokenizer: Tokenizer, hooks: RolloutHooks = { log: () => {} }): Promise<RolloutServer> {
    const log = hooks.log;
    const sampler = await ServerSampler.connect({ url: cfg.rollout.server!, api: cfg.rollout.api, concurrency: cfg.rollout.concurrency, log }, tokenizer);
    if (!sampler.syncsWeights) {
      await sampler.close();
      // vLLM reloads weights from disk only in its dev mode (VLLM_SERVER_DEV_MODE=1, /collective_rpc)
      throw new UserError(
        `rollout.server: ${cfg.rollout.server} speaks ${sampler.api}, which loads no new weights while it serves; ` +
          'rollout.sync: disk needs SGLang (POST /update_weights_from_disk)',
        'serve the policy with SGLang (python -m sglang.launch_server --model-path <folder>), or set rollout.server: null',
      );
    }
    const hf = cfg.model.source === 'hf' && cfg.model.path ? resolve(cfg.model.path) : null;
    const lora = cfg.model.lora ? resolvedLora(cfg.model.lora) : null;
    return new RolloutServer(sampler, runDir, hf, { url: sampler.provenance.url!, api: sampler.api, model: sampler.provenance.model, syncs: [] }, lora, hooks);
  }

  /** The policy of `step` on the server: its whole weights, or with LoRA its adapters; resolves once the server has it. */
  async sync(step: number, model: Transformer): Promise<{ path: string; seconds: number }> {
    return this.lora ? this.syncAdapters(step, model) : this.syncWeights(step, await model.readWeights());
  }

  /**
   * The adapters as PEFT saves them (adapter_config.json; adapter_model.safetensors named base_model.model.<module>…),
   * loaded under the name step-N, which every later request names (lora_path); the previous adapter is then unloaded.
   */
  private async syncAdapters(step: number, model: Transformer): Promise<{ path: string; seconds: number }> {
    const t0 = performance.now();
    const adapters = await model.readAdapters();
    const dir = this.folder(step, (tmp) => writePeftAdapters(tmp, adapters, this.lora!, this.hfSource));
    const name = `step-${step}`;
    const r = await this.sampler.loadLoraAdapter(name, dir);
    if (!r.success) throw new ServerError(`${this.info.url} could not load the adapters of step ${step} from ${dir}: ${r.message}`);
    const previous = this.sampler.lora;
    this.sampler.lora = name;
    // the previous adapter is only cleanup: a server restarted since no longer has it, and that is no reason to stop
    if (previous && previous !== name) await this.sampler.unloadLoraAdapter(previous).catch(() => undefined);
    return this.done(step, dir, t0);
  }

  /** Writes a step's folder through `fill` (a temporary folder renamed into place, so a reader never sees half of it). */
  private folder(step: number, fill: (tmp: string) => void): string {
    const dir = join(this.runDir, 'rollout', `step-${String(step).padStart(6, '0')}`);
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    fill(tmp);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    return dir;
  }

  private done(step: number, dir: string, t0: number): { path: string; seconds: number } {
    if (this.last && this.last !== dir) rmSync(this.last, { recursive: true, force: true });
    this.last = dir;
    const seconds = (performance.now() - t0) / 1000;
    this.info.syncs.push({ step, path: dir, seconds });
    return { path: dir, seconds };
  }

  /** Writes `weights` as the policy of `step` and has the server load it; resolves once the server reports it. */
  private async syncWeights(step: number, weights: Record<string, StTensor>): Promise<{ path: string; seconds: number }> {
    const t0 = performance.now();
    const dir = this.folder(step, (tmp) => {
      writeSafetensors(join(tmp, 'model.safetensors'), weights, { metadata: { format: 'pt', credit_lens: 'rollout policy', step: String(step) } });
      if (this.hfSource) for (const f of HF_FILES) if (existsSync(join(this.hfSource, f))) copyFileSync(join(this.hfSource, f), join(tmp, f));
    });
    const version = `step-${step}`;
    const r = await this.sampler.updateWeightsFromDisk(dir, version);
    if (!r.success) throw new ServerError(`${this.info.url} could not load the policy of step ${step} from ${dir}: ${r.message}`);
    const reported = await this.sampler.weightVersion();
    if (reported !== version)
      throw new ServerError(
        `${this.info.url} loaded ${dir} but reports weight version ${JSON.stringify(reported)}, not ${JSON.stringify(version)}: another client may be updating it`,
      );
    return this.done(step, dir, t0);
  }

  close(): Promise<void> {
    return this.sampler.close();
  }
}
