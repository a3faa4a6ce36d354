// The filler/reasoning |contribution| ratio for the sweep table comes from the engine's own analysis
// (`credit-lens analyze <run> --json`, seed 002's token-type table), never from a re-implementation here.
// An engine without that command is detected by trying it once; the column then shows "—".
import { execFile } from 'node:child_process';
import { chooseNode } from './node';
import { isTraining } from './run_status';
import type { RunInfo } from '../protocol/index';

type Availability = 'unknown' | 'available' | 'missing';

/**
 * Reads the ratio from the analysis JSON: a top-level `filler_reasoning_ratio`, or else the token-type
 * table's mean |c| of filler over that of reasoning (`token_types.{filler,reasoning}.mean_abs_contribution`).
 */
export function fillerReasoningRatio(analysis: unknown): number | null {
  if (!analysis || typeof analysis !== 'object') return null;
  const a = analysis as Record<string, unknown>;
  if (typeof a.filler_reasoning_ratio === 'number' && Number.isFinite(a.filler_reasoning_ratio)) return a.filler_reasoning_ratio;
  const types = a.token_types as Record<string, Record<string, unknown> | undefined> | undefined;
  const f = types?.filler?.mean_abs_contribution;
  const r = types?.reasoning?.mean_abs_contribution;
  if (typeof f === 'number' && typeof r === 'number' && r > 0) return f / r;
  return null;
}

export class AnalysisRunner {
  private availability: Availability = 'unknown';
  private readonly results = new Map<string, number | null>();
  private readonly pending = new Set<string>();

  constructor(private readonly cliPath: string, private readonly nodePath: () => string | undefined, private readonly onResult: () => void) {}

  get available(): boolean {
    return this.availability !== 'missing';
  }

  /** The ratio for an ended run: null when unknown; the first call starts the analysis and onResult fires when it is done. */
  ratio(runDir: string, info: RunInfo | null): number | null {
    if (this.availability === 'missing' || !info || isTraining(info.status)) return null;
    const key = `${runDir}\n${info.ended ?? ''}`;
    if (this.results.has(key)) return this.results.get(key)!;
    if (!this.pending.has(key)) {
      this.pending.add(key);
      void this.run(runDir).then((v) => {
        this.pending.delete(key);
        this.results.set(key, v);
        this.onResult();
      });
    }
    return null;
  }

  private run(runDir: string): Promise<number | null> {
    return new Promise<number | null>((resolve) => {
      let node;
      try {
        node = chooseNode(this.nodePath());
      } catch {
        resolve(null);
        return;
      }
      execFile(node.command, [this.cliPath, 'analyze', runDir, '--json'], { env: { ...process.env, ...node.env }, maxBuffer: 64 << 20, timeout: 120_000 },
        (err, stdout, stderr) => {
          if (err) {
            if (/unknown command/i.test(stderr)) this.availability = 'missing';
            resolve(null);
            return;
          }
          this.availability = 'available';
          try {
            resolve(fillerReasoningRatio(JSON.parse(stdout)));
          } catch {
            resolve(null);
          }
        });
    });
  }
}
