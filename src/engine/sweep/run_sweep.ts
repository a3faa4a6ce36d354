// `credit-lens sweep <config>`: expand `sweep.grid` and train the runs one after another. The sweep keeps its record
// in `<output_dir>/sweep-<ts>/sweep.json` (src/protocol/sweep_record.ts), updated as each run starts and ends, so the
// extension can open the summary of a sweep started from a terminal, live or after it ended.
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../config/config';
import { describeSweepRun, expandSweep } from './sweep';
import { train, type Reporter, type RunController } from '../train/train';
import { claimFolder, runTimestamp } from '../rundir/rundir';
import { writeFileAtomic } from '../core/files';
import { LOCAL_SWEEP_JSON, type LocalSweepJson } from '../../protocol/sweep_record';

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
  const record = createSweepRecord(configPath, config.name, config.output_dir, sets, runs);
  const save = () => writeFileAtomic(join(record.sweep_dir, LOCAL_SWEEP_JSON), JSON.stringify(record, null, 2) + '\n');
  save();
  log(`sweep: ${runs.length} runs from ${configPath} (record: ${join(record.sweep_dir, LOCAL_SWEEP_JSON)})`);
  const results: SweepRunResult[] = [];
  try {
    for (const [i, run] of runs.entries()) {
      const task = record.tasks[i];
      if (controller.stopRequested) {
        results.push({ name: run.name, runDir: null, status: 'skipped', initialEval: null, finalEval: null });
        task.outcome = 'skipped';
        save();
        continue;
      }
      log(`sweep ${i + 1}/${runs.length}: ${run.name} ${JSON.stringify(run.overrides)}`);
      // The run's folder enters the record as soon as it exists, so a summary opened now shows the run training.
      const recording: Reporter = {
        ...reporter,
        started: (p) => {
          task.run_dir = resolve(p.runDir);
          save();
          reporter.started(p);
        },
      };
      try {
        const r = await train({ config: run.config, reporter: recording, controller });
        results.push({ name: run.name, runDir: r.runDir, status: r.status, initialEval: r.initialEval, finalEval: r.finalEval });
        task.run_dir = resolve(r.runDir);
      } catch (e) {
        // One failed run (e.g. a strategy that diverges) must not take the rest of the sweep with it.
        results.push({ name: run.name, runDir: task.run_dir, status: 'failed', initialEval: null, finalEval: null, error: (e as Error).message });
        if (!task.run_dir) {
          task.outcome = 'failed';
          task.error = (e as Error).message.split('\n')[0];
        }
      }
      save();
    }
  } finally {
    record.pid = null;
    save();
  }
  return results;
}

/** Reserves `<output_dir>/sweep-<ts>/` (mkdir without `recursive` claims the name: two sweeps in one second get -2). */
function createSweepRecord(configPath: string, name: string, outputDir: string, sets: string[], runs: ReturnType<typeof expandSweep>): LocalSweepJson {
  const now = new Date();
  mkdirSync(resolve(outputDir), { recursive: true });
  const dir = claimFolder(join(resolve(outputDir), `sweep-${runTimestamp(now)}`));
  return {
    kind: 'credit-lens-sweep',
    version: 1,
    executor: 'local',
    sweep_dir: dir,
    config: resolve(configPath),
    name,
    created: now.toISOString(),
    sets,
    pid: process.pid,
    host: hostname(),
    tasks: runs.map((r, index) => ({ index, name: r.name, ...describeSweepRun(r), overrides: r.overrides, run_dir: null })),
  };
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
