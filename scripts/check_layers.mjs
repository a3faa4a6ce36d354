// @ts-check
// The layer rules of DESIGN §2, checked on what each bundle actually contains: esbuild's metafile lists every input
// file and every import it resolved. The TypeScript projects (tsconfig.<layer>.json) catch most cross-layer imports
// too, but types cannot see that an engine module the extension imports loads TensorFlow.js; the bundle can.
//   src/engine     never vscode, src/extension or src/webviews;
//   src/extension  never src/webviews, and only engine modules that load no TensorFlow.js (rundir readers, config,
//                  catalogs): the extension bundle contains no tfjs;
//   src/webviews   never src/engine, src/extension, vscode, a Node built-in or TensorFlow.js;
//   src/protocol   shared by all three, so it imports nothing outside src/protocol.
// The build (esbuild.mjs) runs layerViolations on its bundles; `node scripts/check_layers.mjs` (npm run typecheck)
// builds them in memory and checks them without writing dist/.
import * as esbuild from 'esbuild';
import { builtinModules } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundles } from './bundles.mjs';

const TFJS = /(^|\/)node_modules\/@tensorflow\//;
const BUILTIN = new Set(builtinModules);
/** @typedef {import('esbuild').Metafile} Metafile */
const layerOf = (/** @type {string} */ p) => /^src\/(engine|extension|webviews|protocol)\//.exec(p)?.[1];
/** A node_modules path shown as its package name (the symlinked node_modules makes these paths long). */
const show = (/** @type {string} */ p) => /.*node_modules\/((@[^/]+\/)?[^/]+)/.exec(p)?.[1] ?? p;

/**
 * Why importer → target breaks a rule, or undefined.
 * @param {string | undefined} from the importer's layer @param {string} target @param {boolean | undefined} external
 */
function rule(from, target, external) {
  const to = layerOf(target);
  const builtin = external && (target.startsWith('node:') || BUILTIN.has(target));
  switch (from) {
    case 'engine':
      if (to === 'extension' || to === 'webviews') return `src/engine must not import src/${to} (the engine runs without VS Code)`;
      if (target === 'vscode') return 'src/engine must not import vscode (the engine runs without VS Code)';
      return undefined;
    case 'webviews':
      if (to === 'engine' || to === 'extension') return `src/webviews must not import src/${to} (webviews run in the browser; share types through src/protocol)`;
      if (target === 'vscode') return 'src/webviews must not import vscode (webviews talk to the extension by messages)';
      if (builtin) return 'src/webviews must not import a Node built-in (webviews run in the browser)';
      if (TFJS.test(target)) return 'src/webviews must not import TensorFlow.js';
      return undefined;
    case 'protocol':
      if (to !== 'protocol') return 'src/protocol is shared by all three layers, so it imports only src/protocol';
      return undefined;
    case 'extension':
      if (to === 'webviews') return 'src/extension must not import src/webviews (they are browser bundles, loaded by path)';
      return undefined;
  }
  return undefined;
}

/**
 * Every violation in the metafile of bundle `layer`, as readable lines.
 * @param {import('./bundles.mjs').Layer} layer @param {Metafile} metafile @returns {string[]}
 */
export function layerViolations(layer, metafile) {
  const inputs = metafile.inputs;
  const out = [];
  for (const [file, info] of Object.entries(inputs)) {
    const from = layerOf(file);
    for (const imp of info.imports) {
      const why = rule(from, imp.path, imp.external);
      if (why) out.push(`${file} → ${imp.external ? imp.path : show(imp.path)}: ${why}`);
    }
  }
  if (layer === 'extension') {
    // The first step out of src/extension that leads to tfjs, with the chain of imports that gets there.
    const chain = tfjsChains(inputs);
    for (const [file, info] of Object.entries(inputs)) {
      if (layerOf(file) !== 'extension') continue;
      for (const imp of info.imports) {
        const rest = chain.get(imp.path);
        if (imp.external || layerOf(imp.path) === 'extension' || !rest) continue;
        out.push(`${file} → ${[imp.path, ...rest].map(show).join(' → ')}: the extension may import only ` +
          'engine modules that load no TensorFlow.js (rundir readers, config, catalogs); move what it needs into one');
      }
    }
    if (!out.length && Object.keys(inputs).some((p) => TFJS.test(p))) out.push('the extension bundle contains TensorFlow.js');
  }
  if (layer === 'webviews' && Object.keys(inputs).some((p) => TFJS.test(p)) && !out.some((v) => /TensorFlow/.test(v))) {
    out.push('the webview bundles contain TensorFlow.js');
  }
  return [...new Set(out)];
}

/**
 * For each input, the shortest chain of imports from it to a TensorFlow.js file (undefined when there is none).
 * @param {Metafile['inputs']} inputs @returns {Map<string, string[]>}
 */
function tfjsChains(inputs) {
  const chain = new Map();
  const importers = new Map();
  for (const [file, info] of Object.entries(inputs)) {
    for (const imp of info.imports) if (!imp.external) importers.set(imp.path, [...(importers.get(imp.path) ?? []), file]);
  }
  // Breadth-first backwards from tfjs itself, so each chain is a shortest one.
  let frontier = Object.keys(inputs).filter((p) => TFJS.test(p));
  for (const p of frontier) chain.set(p, []);
  while (frontier.length) {
    const next = [];
    for (const p of frontier) {
      for (const q of importers.get(p) ?? []) {
        if (chain.has(q)) continue;
        chain.set(q, TFJS.test(p) ? [p] : [p, ...chain.get(p)]);
        next.push(q);
      }
    }
    frontier = next;
  }
  for (const p of Object.keys(inputs)) if (TFJS.test(p)) chain.delete(p);
  return chain;
}

/**
 * Each line once, with the bundles it shows up in (a file that breaks a rule is often in more than one bundle).
 * @param {{ layer: string, lines: string[] }[]} results @returns {string[]}
 */
export function summarize(results) {
  /** @type {Map<string, string[]>} */
  const seen = new Map();
  for (const { layer, lines } of results) for (const l of lines) seen.set(l, [...(seen.get(l) ?? []), layer]);
  return [...seen].map(([l, layers]) => `${l} (in the ${layers.join(', ')} bundle${layers.length > 1 ? 's' : ''})`);
}

/** Builds every bundle of the tree at `root` in memory; returns its violations, or esbuild's errors.
 *  @param {string} root @returns {Promise<string[]>} */
export async function checkTree(root) {
  const results = [];
  for (const { layer, options } of bundles(root)) {
    try {
      const r = await esbuild.build({ ...options, absWorkingDir: root, write: false, metafile: true, sourcemap: false, logLevel: 'silent' });
      results.push({ layer, lines: layerViolations(layer, r.metafile) });
    } catch (err) {
      const e = /** @type {{ errors?: import('esbuild').Message[] }} */ (err);
      results.push({ layer, lines: (e.errors ?? [{ text: String(err), location: null }]).map((x) =>
        `${x.location ? `${x.location.file}:${x.location.line}: ` : ''}${x.text}`) });
    }
  }
  return summarize(results);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const lines = await checkTree(resolve(dirname(fileURLToPath(import.meta.url)), '..'));
  if (lines.length) {
    console.error(`Layer rules broken (DESIGN §2):\n${lines.map((l) => `  ${l}`).join('\n')}`);
    process.exit(1);
  }
  console.log('layers: ok (engine, extension, webviews)');
}
