// The bench's comparison with PyTorch, paired in time: bench/torch_ref.py --serve answers timing requests while the
// bench runs, and blocks of its timings alternate with blocks of ours. On this 2-core VM the speed of the whole machine
// drifts by 20–30 % over minutes (the same torch step measured 75 ms in one bench run and 100 ms in the next), so two
// medians taken minutes apart compare the machine's moods as much as the two engines. Each round's ratio compares
// blocks seconds apart; the bench reports the median of the round ratios and their range.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { median } from '../core/stats';

/** One figure measured in alternating rounds: every sample of each side, and each round's ratio of medians (ours / torch). */
export interface PairedRounds {
  ours: number[];
  torch: number[];
  ratios: number[];
}

export interface RoundsSummary {
  /** medians over every sample of each side */
  ours: number;
  torch: number;
  /** the median of the rounds' ratios (ours / torch), and their range */
  ratio: number;
  ratio_range: [number, number];
  rounds: number;
}

export function summarize(r: PairedRounds): RoundsSummary {
  return {
    ours: median(r.ours),
    torch: median(r.torch),
    ratio: median(r.ratios),
    ratio_range: [Math.min(...r.ratios), Math.max(...r.ratios)],
    rounds: r.ratios.length,
  };
}

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

/**
 * `rounds` rounds of one block each side; which side goes first alternates by round, so neither always runs right
 * after the other's threads went idle. A pause between blocks lets the other side's OpenBLAS threads stop spinning.
 * Each block starts with an untimed repetition (the bench's blocks do), as the caches and thread pools are cold.
 */
export async function benchRounds(
  rounds: number,
  ours: () => number[] | Promise<number[]>,
  torch: () => Promise<number[]>,
  pauseMs = 250,
): Promise<PairedRounds> {
  const out: PairedRounds = { ours: [], torch: [], ratios: [] };
  for (let r = 0; r < rounds; r++) {
    let a: number[] = [],
      b: number[] = [];
    if (r % 2 === 0) {
      b = await torch();
      await pause(pauseMs);
      a = await ours();
    } else {
      a = await ours();
      await pause(pauseMs);
      b = await torch();
    }
    await pause(pauseMs);
    out.ours.push(...a);
    out.torch.push(...b);
    out.ratios.push(median(a) / median(b));
  }
  return out;
}

export type TorchModel = 'reference' | 'small';

/** bench/torch_ref.py --serve under Debian's /usr/bin/python3: one JSON request per line, one JSON answer per line. */
export class TorchServer {
  private readonly waiting: ((line: string | null) => void)[] = [];
  private stderr = '';
  private exited = false;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on('line', (line) => this.waiting.shift()?.(line));
    child.stderr.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-2000);
    });
    child.on('exit', () => {
      this.exited = true;
      for (const w of this.waiting.splice(0)) w(null);
    });
  }

  /** Starts the server, or says why it cannot (no python, no script, torch not importable). */
  static async start(
    python = '/usr/bin/python3',
    device = 'cpu',
  ): Promise<{ server: TorchServer; version: string; threads: number; sgemm_gflops: number; device_name: string; blas: string } | { error: string }> {
    const server = TorchServer.spawn('torch_ref.py', ['--serve', '--device', device], python);
    if ('error' in server) return server;
    try {
      const info = await server.ask<{ torch_version: string; threads: number; sgemm_gflops: number; device_name?: string; blas?: string }>({ op: 'info' });
      return {
        server,
        version: info.torch_version,
        threads: info.threads,
        sgemm_gflops: info.sgemm_gflops,
        device_name: info.device_name ?? device,
        blas: info.blas ?? 'unknown',
      };
    } catch (e) {
      server.close();
      return { error: e instanceof Error ? e.message : String(e) };
    }
  }

  /** bench/<script> under `python`, speaking one JSON line per request (torch_ref.py --serve, torch_hf.py). */
  static spawn(script: string, args: string[] = [], python = '/usr/bin/python3', env: NodeJS.ProcessEnv = process.env): TorchServer | { error: string } {
    const path = [join(__dirname, '../../bench', script), resolve('bench', script)].find(existsSync);
    if (!path) return { error: `no bench/${script}` };
    // a bare name (python3) is looked up on PATH by spawn; a path must exist
    if (python.includes('/') && !existsSync(python)) return { error: `no ${python}` };
    return new TorchServer(spawn(python, [path, ...args], { stdio: 'pipe', env }));
  }

  async ask<T>(req: object): Promise<T> {
    if (this.exited) throw new Error(`torch_ref.py exited: ${this.stderr.trim().split('\n').pop() ?? ''}`);
    const line = await new Promise<string | null>((done) => {
      this.waiting.push(done);
      this.child.stdin.write(JSON.stringify(req) + '\n');
    });
    if (line === null) throw new Error(`torch_ref.py exited: ${this.stderr.trim().split('\n').pop() ?? ''}`);
    const ans = JSON.parse(line) as T & { error?: string };
    if (ans.error) throw new Error(`torch_ref.py: ${ans.error}`);
    return ans;
  }

  /** n train steps of the model after `warmup` untimed ones: their times in ms (the first request for a model also builds and warms it). */
  async train(model: TorchModel, n: number, warmup = 0): Promise<number[]> {
    return (await this.ask<{ ms: number[] }>({ op: 'train', model, n, warmup })).ms;
  }

  /** n rollouts of the model after `warmup` untimed ones: their rates in tokens/s. */
  async rollout(model: TorchModel, n: number, warmup = 0): Promise<number[]> {
    return (await this.ask<{ tokens_per_s: number[] }>({ op: 'rollout', model, n, warmup })).tokens_per_s;
  }

  close(): void {
    if (!this.exited) this.child.stdin.end();
  }
}
