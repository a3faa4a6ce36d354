// `credit-lens sweep <config>`: expand `sweep.grid` and train the runs one after another.
import { loadConfig } from '../config/config';
import { expandSweep } from './sweep';
import { train, type Reporter, type RunController } from '../train/train';

export interface SweepRunResult {
  name: string;
  runDir: string | null;
  status: string;
  initialEval: number | null;
  finalEval: number | null;
  error?: string;
}

export async function runSweep(
  configPath: string,
  sets: string[],
  reporter: Reporter,
  controller: RunController,
  log: (m: string) => void,
): Promise<SweepRunResult[]> {
  const { config } = loadConfig(configPath, sets);
  const runs = expandSweep(config);
  log(`sweep: ${runs.length} runs from ${configPath}`);
  const results: SweepRunResult[] = [];
  for (const [i, run] of runs.entries()) {
    if (controller.stopRequested) {
      results.push({ name: run.name, runDir: null, status: 'skipped', initialEval: null, finalEval: null });
      continue;
    }
    log(`sweep ${i + 1}/${runs.length}: ${run.name} ${JSON.stringify(run.overrides)}`);
    try {
      const r = await train({ config: run.config, reporter, controller });
      results.push({ name: run.name, runDir: r.runDir, status: r.status, initialEval: r.initialEval, finalEval: r.finalEval });
    } catch (e) {
      // One failed run (e.g. a strategy that diverges) must not take the rest of the sweep with it.
      results.push({ name: run.name, runDir: null, status: 'failed', initialEval: null, finalEval: null, error: (e as Error).message });
    }
  }
  return results;
}

export function sweepTable(results: SweepRunResult[]): string {
  const pct = (x: number | null) => (x === null ? '—' : `${(x * 100).toFixed(1)}%`);
  const lines = ['| run | status | eval before GRPO | final eval | run directory |', '|---|---|---|---|---|'];
  for (const r of results)
    lines.push(
      `| ${r.name} | ${r.status}${r.error ? ` (${r.error.split('\n')[0]})` : ''} | ${pct(r.initialEval)} | ${pct(r.finalEval)} | ${r.runDir ?? '—'} |`,
    );
  return lines.join('\n');
}
