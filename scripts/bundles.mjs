// @ts-check
// The three bundles (design.md#layout), shared by the build (esbuild.mjs) and the layer check (scripts/check_layers.mjs),
// so that the check looks at exactly what the build ships.
import { builtinModules } from 'node:module';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { nativeSourceHash } from './native_hash.mjs';

/** @typedef {'engine' | 'extension' | 'webviews'} Layer */
/** @type {import('esbuild').BuildOptions} */
const common = { bundle: true, sourcemap: true, logLevel: 'warning', legalComments: 'none' };
/** @type {import('esbuild').BuildOptions} */
const node = { ...common, platform: 'node', format: 'cjs', target: 'node20' };

/**
 * `{ layer, options }` for each bundle whose sources exist under `root`; entry points are relative to `root`.
 * @returns {{ layer: Layer, options: import('esbuild').BuildOptions }[]}
 */
export function bundles(root = '.') {
  /** @type {{ layer: Layer, options: import('esbuild').BuildOptions }[]} */
  const jobs = [];
  const has = (/** @type {string} */ p) => existsSync(join(root, p));
  if (has('src/engine/cli/main.ts')) {
    jobs.push({ layer: 'engine', options: { ...node, entryPoints: { cli: 'src/engine/cli/main.ts', index: 'src/engine/index.ts' },
      outdir: 'dist/engine', banner: { js: '#!/usr/bin/env node' },
      // the native sources this engine was built with: blas.node must carry the same stamp (kernels/blas.ts)
      define: { __CL_NATIVE_SOURCE_HASH__: JSON.stringify(nativeSourceHash(root)) },
      // Never loaded by the engine; external so that a stray import reaches the layer check by name.
      external: ['vscode'] } });
  }
  if (has('src/extension/extension.ts')) {
    // run_worker: the worker thread that reads runs off the host's main thread, step tables and Browse Rollouts'
    // queries alike (src/extension/worker_client.ts)
    jobs.push({ layer: 'extension', options: { ...node, entryPoints: { extension: 'src/extension/extension.ts', run_worker: 'src/extension/run_worker.ts' },
      outdir: 'dist/extension', external: ['vscode'] } });
  }
  const views = has('src/webviews') ? readdirSync(join(root, 'src/webviews')).filter((f) => /^[a-z_]+\.main\.ts$/.test(f)) : [];
  if (views.length) {
    jobs.push({ layer: 'webviews', options: { ...common, platform: 'browser', format: 'iife', target: 'es2022',
      entryPoints: Object.fromEntries(views.map((f) => [f.replace('.main.ts', ''), `src/webviews/${f}`])),
      outdir: 'dist/webviews', loader: { '.css': 'text' },
      // Left unresolved so that the layer check names the import, rather than esbuild failing to resolve it.
      external: ['vscode', 'node:*', ...builtinModules] } });
  }
  return jobs;
}
