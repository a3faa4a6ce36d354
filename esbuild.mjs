// @ts-check
// Three bundles (design.md#layout, defined in scripts/bundles.mjs): extension (cjs/node, vscode external), engine
// (cjs/node), webviews (browser iife). The build fails when a bundle breaks the layer rules (scripts/check_layers.mjs).
import * as esbuild from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildNative } from './scripts/build_native.mjs';
import { bundles } from './scripts/bundles.mjs';
import { layerViolations, summarize } from './scripts/check_layers.mjs';

const watch = process.argv.includes('--watch');
const jobs = bundles();

// The wasm backend loads its .wasm binaries from next to the engine bundle (setWasmPaths(__dirname)).
mkdirSync('dist/engine', { recursive: true });
for (const f of readdirSync('node_modules/@tensorflow/tfjs-backend-wasm/dist').filter((f) => f.endsWith('.wasm'))) {
  cpSync(join('node_modules/@tensorflow/tfjs-backend-wasm/dist', f), join('dist/engine', f));
}
// parquet-wasm (paired rollouts) loads its binary from __dirname the first time it is used.
cpSync('node_modules/parquet-wasm/node/parquet_wasm_bg.wasm', 'dist/engine/parquet_wasm_bg.wasm');
// OpenBLAS products (backend wasm-blas): a small Node-API addon, compiled when a C compiler is present.
const native = buildNative();
if (native) console.log(native);
// WebGPU (backend webgpu): Dawn's Node binding for this platform, from the optional `webgpu` package, next to the engine
// (model/webgpu.ts looks in dawn/<platform>-<arch>/ first), so that the .vsix carries it.
const dawnPlatform = `${process.platform}-${process.platform === 'darwin' ? 'universal' : process.arch}`;
const dawnSrc = join('node_modules/webgpu/dist', dawnPlatform, 'dawn.node');
if (existsSync(dawnSrc)) {
  mkdirSync(join('dist/engine/dawn', dawnPlatform), { recursive: true });
  cpSync(dawnSrc, join('dist/engine/dawn', dawnPlatform, 'dawn.node'));
} else console.log(`webgpu: no Dawn binary for ${dawnPlatform} (optional dependency webgpu not installed): the engine runs without backend webgpu`);

if (watch) {
  for (const { options } of jobs) (await esbuild.context(options)).watch();
} else {
  const results = await Promise.all(jobs.map(({ layer, options }) => esbuild.build({ ...options, metafile: true })
    .then((r) => ({ layer, lines: layerViolations(layer, r.metafile) }))));
  const violations = summarize(results);
  if (violations.length) {
    console.error(`Layer rules broken (design.md#layout):\n${violations.map((v) => `  ${v}`).join('\n')}`);
    process.exit(1);
  }
  // The config's JSON Schema, contributed through `yamlValidation`, is written by the engine's own `schema` command
  // from the zod schema it validates with, so the two cannot drift and there is one generator.
  if (existsSync('dist/engine/cli.js')) {
    mkdirSync('schemas', { recursive: true });
    execFileSync(process.execPath, ['dist/engine/cli.js', 'schema', '--out', 'schemas/credit.schema.json'], { stdio: 'inherit' });
  }
  writeFileSync('dist/.built', new Date().toISOString());
}
