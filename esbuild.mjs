// Three bundles (DESIGN §2): extension (cjs/node, vscode external), engine (cjs/node), webviews (browser iife).
import * as esbuild from 'esbuild';
import { cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layerViolations } from './scripts/layers.mjs';

const watch = process.argv.includes('--watch');
const common = { bundle: true, sourcemap: true, logLevel: 'warning', legalComments: 'none' };
const node = { ...common, platform: 'node', format: 'cjs', target: 'node20' };
const jobs = [];

if (existsSync('src/engine/cli/main.ts')) {
  jobs.push({ ...node, layer: 'engine', entryPoints: { cli: 'src/engine/cli/main.ts', index: 'src/engine/index.ts' }, outdir: 'dist/engine',
    banner: { js: '#!/usr/bin/env node' }, external: ['vscode'] });
}
if (existsSync('src/extension/extension.ts')) {
  jobs.push({ ...node, layer: 'extension', entryPoints: { extension: 'src/extension/extension.ts' }, outdir: 'dist/extension', external: ['vscode'] });
}
const views = existsSync('src/webviews') ? readdirSync('src/webviews').filter((f) => /^[a-z_]+\.main\.ts$/.test(f)) : [];
if (views.length) {
  jobs.push({ ...common, layer: 'webviews', platform: 'browser', format: 'iife', target: 'es2022',
    entryPoints: Object.fromEntries(views.map((f) => [f.replace('.main.ts', ''), join('src/webviews', f)])),
    outdir: 'dist/webviews', loader: { '.css': 'text' },
    // Left unresolved so that the layer check below names the import, rather than esbuild failing on it.
    external: ['vscode', 'node:*'] });
}

// The wasm backend loads its .wasm binaries from next to the engine bundle (setWasmPaths(__dirname)).
mkdirSync('dist/engine', { recursive: true });
for (const f of readdirSync('node_modules/@tensorflow/tfjs-backend-wasm/dist').filter((f) => f.endsWith('.wasm'))) {
  cpSync(join('node_modules/@tensorflow/tfjs-backend-wasm/dist', f), join('dist/engine', f));
}
// parquet-wasm (paired rollouts) loads its binary from __dirname the first time it is used.
cpSync('node_modules/parquet-wasm/node/parquet_wasm_bg.wasm', 'dist/engine/parquet_wasm_bg.wasm');

if (watch) {
  for (const { layer, ...j } of jobs) (await esbuild.context(j)).watch();
} else {
  const results = await Promise.all(jobs.map(({ layer, ...j }) => esbuild.build({ ...j, metafile: true }).then((r) => [layer, r.metafile])));
  const violations = results.flatMap(([layer, meta]) => layerViolations(layer, meta).map((v) => `  ${layer}: ${v}`));
  if (violations.length) {
    console.error(`Layer rules broken (DESIGN §2):\n${violations.join('\n')}`);
    process.exit(1);
  }
  // The config's JSON Schema, contributed through `yamlValidation`, comes from the same zod schema the engine
  // validates with, so the two cannot drift.
  if (existsSync('dist/engine/index.js')) {
    const { createRequire } = await import('node:module');
    const engine = createRequire(import.meta.url)('./dist/engine/index.js');
    mkdirSync('schemas', { recursive: true });
    writeFileSync('schemas/credit.schema.json', JSON.stringify(engine.configJsonSchema(), null, 2) + '\n');
  }
  writeFileSync('dist/.built', new Date().toISOString());
}
