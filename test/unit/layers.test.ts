// The layer rules (DESIGN §2) fail the build, shown by breaking them on a copy of src/: each TypeScript project has
// only its own environment (the engine no vscode and no DOM, the webviews no Node), and the bundles are checked for
// what they contain (scripts/layers.mjs), which catches what types cannot: the extension pulling in TensorFlow.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as esbuild from 'esbuild';
// @ts-expect-error: a plain .mjs module of the build, without type declarations
import { layerViolations } from '../../scripts/layers.mjs';

const ROOT = resolve(__dirname, '../..');

function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-layers-'));
  cpSync(join(ROOT, 'src'), join(dir, 'src'), { recursive: true });
  for (const f of ['tsconfig.base.json', 'tsconfig.engine.json', 'tsconfig.extension.json', 'tsconfig.webviews.json']) cpSync(join(ROOT, f), join(dir, f));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

const tsc = (dir: string, project: string) => spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: dir, encoding: 'utf8' });

async function violations(dir: string, layer: 'engine' | 'extension' | 'webviews', entry: string): Promise<string[]> {
  const r = await esbuild.build({
    entryPoints: [join(dir, entry)], bundle: true, write: false, metafile: true, logLevel: 'silent', absWorkingDir: dir,
    platform: layer === 'webviews' ? 'browser' : 'node', format: layer === 'webviews' ? 'iife' : 'cjs', external: ['vscode', 'node:*'], loader: { '.css': 'text' },
  }).catch((e: Error & { errors?: { text: string }[] }) => ({ metafile: null, errors: e.errors?.length ? e.errors : [{ text: e.message }] }));
  if (!r.metafile) return r.errors.map((e) => `unbuildable: ${e.text}`);
  return layerViolations(layer, r.metafile);
}

test('the real tree keeps the rules: no violation in any bundle', async () => {
  assert.deepEqual(await violations(ROOT, 'engine', 'src/engine/cli/main.ts'), []);
  assert.deepEqual(await violations(ROOT, 'extension', 'src/extension/extension.ts'), []);
  assert.deepEqual(await violations(ROOT, 'webviews', 'src/webviews/sweep.main.ts'), []);
});

test('deliberate cross-layer imports fail the bundle check, and another layer\'s globals fail the type check', { timeout: 240_000 }, async () => {
  const dir = copyTree();
  // Imports across layers. (TypeScript resolves any package that has declarations, vscode included, whatever a
  // project's `types` say, so imports are checked on the bundles' import graphs.)
  appendFileSync(join(dir, 'src/engine/core/errors.ts'), "\nimport * as vscode from 'vscode';\nconsole.log(vscode.window);\n");
  appendFileSync(join(dir, 'src/webviews/csv.ts'), "\nimport { readRunInfo } from '../engine/rundir/rundir';\nconsole.log(readRunInfo);\n");
  // The extension importing engine code that loads TensorFlow.js: well typed, but the bundle would carry tfjs.
  appendFileSync(join(dir, 'src/extension/args.ts'), "\nimport { Transformer } from '../engine/model/model';\nconsole.log(Transformer);\n");
  const engine = await violations(dir, 'engine', 'src/engine/cli/main.ts');
  assert.ok(engine.some((v) => /src\/engine\/core\/errors\.ts → vscode: src\/engine must not import vscode/.test(v)), engine.join('\n'));
  const ext = await violations(dir, 'extension', 'src/extension/extension.ts');
  assert.ok(ext.some((v) => /node_modules\/@tensorflow\/.*must not contain TensorFlow\.js/.test(v)), ext.join('\n'));
  const wv = await violations(dir, 'webviews', 'src/webviews/metrics.main.ts');
  assert.ok(wv.some((v) => /src\/webviews\/csv\.ts → src\/engine\/rundir\/rundir\.ts: src\/webviews must not import the engine/.test(v)), wv.join('\n'));
  assert.ok(wv.some((v) => /→ node:fs: src\/webviews must not import Node built-ins/.test(v)), wv.join('\n'));

  // Globals of another environment: the DOM in the engine, Node's process in a webview.
  const dir2 = copyTree();
  appendFileSync(join(dir2, 'src/engine/core/errors.ts'), '\nexport const title = () => document.title;\n');
  appendFileSync(join(dir2, 'src/webviews/csv.ts'), '\nexport const home = () => process.env.HOME;\n');
  assert.equal(tsc(ROOT, 'tsconfig.engine.json').status, 0, 'the real engine project type-checks');
  const e = tsc(dir2, 'tsconfig.engine.json');
  assert.notEqual(e.status, 0);
  assert.match(e.stdout, /src\/engine\/core\/errors\.ts.*Cannot find name 'document'/);
  const w = tsc(dir2, 'tsconfig.webviews.json');
  assert.notEqual(w.status, 0);
  assert.match(w.stdout, /src\/webviews\/csv\.ts.*Cannot find name 'process'/);
});
