// A copy of src/ that a test edits, and the engine CLI built from it exactly as esbuild.mjs builds it (the wasm
// binaries beside it): how the toy-strategy and toy-task tests show what adding one takes.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as esbuild from 'esbuild';

const ROOT = resolve(__dirname, '../..');

/** A temporary folder holding a copy of src/ (and node_modules linked), for the test to edit. */
export function copySources(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(ROOT, 'src'), join(dir, 'src'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** Builds the edited copy's engine CLI; returns a function that runs it in `dir`. */
export async function buildCli(dir: string): Promise<(...args: string[]) => SpawnSyncReturns<string>> {
  const out = join(dir, 'dist/engine');
  mkdirSync(out, { recursive: true });
  await esbuild.build({
    entryPoints: { cli: join(dir, 'src/engine/cli/main.ts') },
    outdir: out,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    logLevel: 'error',
    absWorkingDir: dir,
  });
  const wasmDir = join(ROOT, 'node_modules/@tensorflow/tfjs-backend-wasm/dist');
  for (const f of readdirSync(wasmDir).filter((f) => f.endsWith('.wasm'))) cpSync(join(wasmDir, f), join(out, f));
  return (...args: string[]) => spawnSync(process.execPath, [join(out, 'cli.js'), ...args], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
}

/**
 * Adds a strategy to the copy of src/ at `dir` in the three places a strategy takes: its file in src/engine/credit/, one
 * entry at the end of credit/catalog.ts, one line in the registry (credit/index.ts) naming `exportName` from the file.
 */
export function addStrategy(dir: string, o: { file: string; source: string; exportName: string; entry: string }): void {
  const credit = join(dir, 'src/engine/credit');
  writeFileSync(join(credit, o.file), o.source);
  const catalog = readFileSync(join(credit, 'catalog.ts'), 'utf8');
  const end = catalog.indexOf('] as const satisfies readonly StrategySpec[];');
  if (end < 0) throw new Error('addStrategy: the catalog is no longer one array literal');
  writeFileSync(join(credit, 'catalog.ts'), catalog.slice(0, end) + o.entry + catalog.slice(end));
  const registry = readFileSync(join(credit, 'index.ts'), 'utf8');
  if (!/^ {2}rewardVariance,$/m.test(registry)) throw new Error('addStrategy: the registry no longer lists rewardVariance last');
  const module = `./${o.file.replace(/\.ts$/, '')}`;
  writeFileSync(
    join(credit, 'index.ts'),
    registry
      .replace(
        "import { rewardVariance } from './reward_variance';",
        `import { rewardVariance } from './reward_variance';\nimport { ${o.exportName} } from '${module}';`,
      )
      .replace(/^ {2}rewardVariance,$/m, `  rewardVariance,\n  ${o.exportName},`),
  );
}

/** Adds a metric sink to the copy of src/ at `dir`: its file in src/engine/tracking/sinks/ and its line in sinks/catalog.ts. */
export function addSink(dir: string, o: { file: string; source: string; exportName: string }): void {
  const sinks = join(dir, 'src/engine/tracking/sinks');
  writeFileSync(join(sinks, o.file), o.source);
  const catalog = readFileSync(join(sinks, 'catalog.ts'), 'utf8');
  const list = 'export const METRIC_SINKS = [tensorboardSink, mlflowSink]';
  if (!catalog.includes(list)) throw new Error('addSink: the catalog no longer lists tensorboardSink, mlflowSink');
  const module = `./${o.file.replace(/\.ts$/, '')}`;
  writeFileSync(
    join(sinks, 'catalog.ts'),
    catalog
      .replace(
        "import { tensorboardSink } from './tensorboard';",
        `import { tensorboardSink } from './tensorboard';\nimport { ${o.exportName} } from '${module}';`,
      )
      .replace(list, `export const METRIC_SINKS = [tensorboardSink, mlflowSink, ${o.exportName}]`),
  );
}

/** Adds a server API to the copy of src/ at `dir`: its file in src/engine/server_apis/ and its line in apis/catalog.ts. */
export function addServerApi(dir: string, o: { file: string; source: string; exportName: string }): void {
  const apis = join(dir, 'src/engine/server_apis');
  writeFileSync(join(apis, o.file), o.source);
  const catalog = readFileSync(join(apis, 'catalog.ts'), 'utf8');
  const list = 'export const SERVER_API_SPECS = [sglang, vllm]';
  if (!catalog.includes(list)) throw new Error('addServerApi: the catalog no longer lists sglang, vllm');
  const module = `./${o.file.replace(/\.ts$/, '')}`;
  writeFileSync(
    join(apis, 'catalog.ts'),
    catalog
      .replace("import { vllm } from './vllm';", `import { vllm } from './vllm';\nimport { ${o.exportName} } from '${module}';`)
      .replace(list, `export const SERVER_API_SPECS = [sglang, vllm, ${o.exportName}]`),
  );
}

/**
 * Adds an import format to the copy of src/ at `dir`: its reader in src/engine/import/readers/, its line in
 * readers/catalog.ts (first in detection order), and its entry (label, detail) in src/protocol/import_formats.ts.
 */
export function addImportFormat(dir: string, o: { file: string; source: string; exportName: string; entry: string }): void {
  const readers = join(dir, 'src/engine/import/readers');
  writeFileSync(join(readers, o.file), o.source);
  const catalog = readFileSync(join(readers, 'catalog.ts'), 'utf8');
  const list = 'export const IMPORT_READERS: readonly ImportReader[] = [verlShard, prime, verl, trl, jsonl];';
  if (!catalog.includes(list)) throw new Error('addImportFormat: the catalog no longer lists verlShard, prime, verl, trl, jsonl');
  writeFileSync(
    join(readers, 'catalog.ts'),
    catalog
      .replace("import { verl } from './verl';", `import { verl } from './verl';\nimport { ${o.exportName} } from './${o.file.replace(/\.ts$/, '')}';`)
      .replace(list, `export const IMPORT_READERS: readonly ImportReader[] = [${o.exportName}, verlShard, prime, verl, trl, jsonl];`),
  );
  const protocol = join(dir, 'src/protocol/import_formats.ts');
  const decl = readFileSync(protocol, 'utf8');
  const end = decl.indexOf('] as const satisfies readonly ImportFormatDef[];');
  if (end < 0) throw new Error('addImportFormat: the protocol list is no longer one array literal');
  writeFileSync(protocol, decl.slice(0, end) + o.entry + decl.slice(end));
}

/**
 * The toy tests' run config, `toy.credit.yaml` in `dir`: a one-layer scratch model on small countdown problems, two SFT
 * steps, then GRPO as `grpo` gives it, and the further sections `extra` holds (YAML lines).
 */
export function writeToyConfig(dir: string, o: { grpo: string; extra?: string }): void {
  writeFileSync(
    join(dir, 'toy.credit.yaml'),
    `name: toy
seed: 5
backend: wasm
output_dir: runs
model: { source: scratch, d_model: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 64, max_seq_len: 64 }
task: { name: countdown, numbers: [2, 3], max_number: 6, max_target: 20, train_size: 48, eval_size: 8 }
sft: { steps: 2, batch_size: 8, lr: 1.0e-3 }
grpo: ${o.grpo}
${o.extra ?? ''}
`,
  );
}
