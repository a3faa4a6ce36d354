// The layer rules (design.md#layout) fail the build, shown by breaking them on a copy of the tree: the TypeScript project
// of each layer (tsconfig.<layer>.json) refuses imports of another layer and another environment's globals, and
// scripts/check_layers.mjs (run by `npm run build` and `npm run typecheck`) refuses them in the bundles, including
// the one types cannot see: the extension importing an engine module that loads TensorFlow.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cl-layers-'));
  for (const f of ['src', 'scripts', 'tsconfig.base.json', 'tsconfig.engine.json', 'tsconfig.extension.json', 'tsconfig.webviews.json']) {
    cpSync(join(ROOT, f), join(dir, f), { recursive: true });
  }
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'), 'dir');
  return dir;
}

function run(dir: string, args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}
const tsc = (dir: string, layer: string) => run(dir, [TSC, '-p', `tsconfig.${layer}.json`]);
const checkLayers = (dir: string) => run(dir, ['scripts/check_layers.mjs']);

/** A tsc diagnostic of `file` with `code`, whose message matches `message`. */
const diag = (file: string, code: string, message: string) => new RegExp(`${file.replace(/[./]/g, '\\$&')}\\(\\d+,\\d+\\): error (?:${code}): ${message}`);

test('the real tree keeps the rules: the check and all three projects pass', { timeout: 240_000 }, () => {
  const c = checkLayers(ROOT);
  assert.equal(c.status, 0, c.out);
  assert.match(c.out, /layers: ok/);
  for (const layer of ['engine', 'extension', 'webviews']) {
    const r = tsc(ROOT, layer);
    assert.equal(r.status, 0, `tsconfig.${layer}.json:\n${r.out}`);
  }
});

test("deliberate cross-layer imports fail both the layer check and the layer's TypeScript project", { timeout: 300_000 }, (t) => {
  const dir = copyTree();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Each import is appended to a file its bundle reaches, so that esbuild's metafile records it.
  appendFileSync(
    join(dir, 'src/engine/core/stats.ts'),
    "\nimport * as vscode from 'vscode';\nimport { toCsv } from '../../webviews/csv';\nexport const probe = [vscode.window, toCsv];\n",
  );
  appendFileSync(
    join(dir, 'src/webviews/metrics_series.ts'),
    "\nimport { readFileSync } from 'node:fs';\nimport { mean } from '../engine/core/stats';\nexport const probe = [readFileSync, mean];\n",
  );
  // The extension importing engine code that loads TensorFlow.js: well typed, so only the bundle check sees it.
  appendFileSync(join(dir, 'src/extension/args.ts'), "\nimport { Transformer } from '../engine/model/model';\nexport const probe = Transformer;\n");
  appendFileSync(join(dir, 'src/extension/markdown.ts'), "\nimport { toCsv } from '../webviews/csv';\nexport const probe = toCsv;\n");

  const c = checkLayers(dir);
  assert.equal(c.status, 1, c.out);
  for (const line of [
    'src/engine/core/stats.ts → vscode: src/engine must not import vscode',
    'src/engine/core/stats.ts → src/webviews/csv.ts: src/engine must not import src/webviews',
    'src/webviews/metrics_series.ts → node:fs: src/webviews must not import a Node built-in',
    'src/webviews/metrics_series.ts → src/engine/core/stats.ts: src/webviews must not import src/engine',
    // model.ts imports @tensorflow/tfjs itself, so the chain is one step long.
    'src/extension/args.ts → src/engine/model/model.ts → @tensorflow/tfjs: the extension may import only engine modules that load no TensorFlow.js',
    'src/extension/markdown.ts → src/webviews/csv.ts: src/extension must not import src/webviews',
  ])
    assert.ok(c.out.includes(line), `missing "${line}" in:\n${c.out}`);

  const notListed = (file: string, layer: string) =>
    `File '[^']*/${file.replace(/[./]/g, '\\$&')}' is not listed within the file list of project '[^']*tsconfig\\.${layer}\\.json'`;
  const engine = tsc(dir, 'engine');
  assert.notEqual(engine.status, 0);
  assert.match(engine.out, diag('src/engine/core/stats.ts', 'TS6307', notListed('scripts/layers/vscode_only_in_the_extension.ts', 'engine')));
  assert.match(engine.out, diag('src/engine/core/stats.ts', 'TS6307', notListed('src/webviews/csv.ts', 'engine')));
  const webviews = tsc(dir, 'webviews');
  assert.notEqual(webviews.status, 0);
  assert.match(webviews.out, diag('src/webviews/metrics_series.ts', 'TS2307', "Cannot find module 'node:fs'"));
  assert.match(webviews.out, diag('src/webviews/metrics_series.ts', 'TS6307', notListed('src/engine/core/stats.ts', 'webviews')));
  const extension = tsc(dir, 'extension');
  assert.notEqual(extension.status, 0);
  assert.match(extension.out, diag('src/extension/markdown.ts', 'TS6307', notListed('src/webviews/csv.ts', 'extension')));
});

test("another environment's globals fail the layer's TypeScript project: the DOM in the engine, Node in a webview", { timeout: 240_000 }, (t) => {
  const dir = copyTree();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  appendFileSync(join(dir, 'src/engine/core/stats.ts'), '\nexport const title = () => document.title;\n');
  appendFileSync(join(dir, 'src/webviews/csv.ts'), '\nexport const home = () => process.env.HOME;\n');
  const e = tsc(dir, 'engine');
  assert.notEqual(e.status, 0);
  assert.match(e.out, diag('src/engine/core/stats.ts', 'TS2584|TS2304', "Cannot find name 'document'"));
  const w = tsc(dir, 'webviews');
  assert.notEqual(w.status, 0);
  assert.match(w.out, diag('src/webviews/csv.ts', 'TS2580|TS2591|TS2304', "Cannot find name 'process'"));
});

test('inside the engine, an import against ENGINE_ORDER and a circle of imports fail the layer check', { timeout: 240_000 }, (t) => {
  const dir = copyTree();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // core importing the session layer runs back up.
  appendFileSync(join(dir, 'src/engine/core/stats.ts'), "\nimport { shapedReward } from '../session/reward';\nexport const probeUp = shapedReward;\n");
  // Two files of one folder that import each other: no order is broken, but it is a circle.
  appendFileSync(join(dir, 'src/engine/tasks/expr.ts'), "\nimport { TASK_NAMES } from './catalog';\nexport const probeCircle = TASK_NAMES;\n");
  appendFileSync(join(dir, 'src/engine/tasks/catalog.ts'), "\nimport { evalExact } from './expr';\nexport const probeCircleBack = evalExact;\n");
  const c = checkLayers(dir);
  assert.equal(c.status, 1, c.out);
  assert.ok(c.out.includes('src/engine/core/stats.ts → src/engine/session/reward.ts: src/engine/core/ is below src/engine/session/'), c.out);
  assert.match(c.out, /a circle of imports: [^\n]*src\/engine\/tasks\/(expr|catalog)\.ts → [^\n]*src\/engine\/tasks\/(catalog|expr)\.ts/);
});
