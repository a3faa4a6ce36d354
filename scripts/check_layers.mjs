// @ts-check
// The layer rules of design.md#layout, checked on what each bundle actually contains: esbuild's metafile lists every input
// file and every import it resolved. The TypeScript projects (tsconfig.<layer>.json) catch most cross-layer imports
// too, but types cannot see that an engine module the extension imports loads TensorFlow.js; the bundle can.
//   src/engine     never vscode, src/extension or src/webviews;
//   src/extension  never src/webviews, and only engine modules that load no TensorFlow.js (rundir readers, config,
//                  catalogs): the extension bundle contains no tfjs;
//   src/webviews   never src/engine, src/extension, vscode, a Node built-in or TensorFlow.js;
//   src/protocol   shared by all three, so it imports nothing outside src/protocol.
// Inside src/engine, the folders form one order (ENGINE_ORDER, lowest first): a module imports only from its own folder
// or a folder below it, so the import graph has no arrow running back up; and no file imports itself through others
// (no circle, which would also make initialisation order matter). Type-only imports are erased before bundling and are
// not arrows here: the config's type is derived from the catalogs its schema is built from, so a catalog entry whose
// check reads the whole config must name that type, but it loads nothing from above.
// The build (esbuild.mjs) runs layerViolations on its bundles; `node scripts/check_layers.mjs` (npm run typecheck)
// builds them in memory and checks them without writing dist/.
import * as esbuild from 'esbuild';
import { builtinModules } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundles } from './bundles.mjs';

const TFJS = /(^|\/)node_modules\/@tensorflow\//;
/**
 * src/engine's folders, lowest first. Each may import only from itself and those before it:
 *   core       errors, RNG, statistics, zod field builders, atomic writes: what everything needs and nothing owns;
 *   model      the transformer, tokenizers, kernels and op tables, the tensor file format, the importance net;
 *   tasks      prompts, rewards, sections; rundir the run directory's files;
 *   tracking   where metrics go beside metrics.jsonl: TensorBoard event files, an MLflow server;
 *   oracle     CAL's error-span oracles;
 *   credit     the strategies and their catalog; losses the policy-loss variants;
 *   server_apis the server APIs' wire formats and routes, one file each (below config, whose rollout.api takes the list);
 *   config     the schema built from the catalogs;
 *   session    what every consumer needs to run a model on a task: the session, rollouts, reward shaping, token log;
 *   serving    inference servers (SGLang, vLLM) as samplers, and `credit-lens serve`;
 *   importance, import, probe, analysis, query: consumers of sessions and run directories;
 *   train      the GRPO loop and step; sweep runs of train; bench times all of it; cli the commands.
 */
export const ENGINE_ORDER = [
  'core',
  'model',
  'tasks',
  'rundir',
  'tracking',
  'oracle',
  'credit',
  'losses',
  'server_apis',
  'config',
  'session',
  'serving',
  'importance',
  'import',
  'probe',
  'analysis',
  'query',
  'trl',
  'train',
  'sweep',
  'bench',
  'cli',
  '(root)',
];
/** The engine folder of a source path: its first folder under src/engine, or (root) for a file directly in it. */
const engineFolder = (/** @type {string} */ p) => (p.startsWith('src/engine/') ? (/^src\/engine\/([^/]+)\//.exec(p)?.[1] ?? '(root)') : undefined);
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
      if (to === 'engine' || to === 'extension')
        return `src/webviews must not import src/${to} (webviews run in the browser; share types through src/protocol)`;
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
      const why = rule(from, imp.path, imp.external) ?? (imp.external ? undefined : engineOrderRule(file, imp.path));
      if (why) out.push(`${file} → ${imp.external ? imp.path : show(imp.path)}: ${why}`);
    }
  }
  out.push(...cycles(inputs));
  if (layer === 'extension') {
    // The first step out of src/extension that leads to tfjs, with the chain of imports that gets there.
    const chain = tfjsChains(inputs);
    for (const [file, info] of Object.entries(inputs)) {
      if (layerOf(file) !== 'extension') continue;
      for (const imp of info.imports) {
        const rest = chain.get(imp.path);
        if (imp.external || layerOf(imp.path) === 'extension' || !rest) continue;
        out.push(
          `${file} → ${[imp.path, ...rest].map(show).join(' → ')}: the extension may import only ` +
            'engine modules that load no TensorFlow.js (rundir readers, config, catalogs); move what it needs into one',
        );
      }
    }
    if (!out.length && Object.keys(inputs).some((p) => TFJS.test(p))) out.push('the extension bundle contains TensorFlow.js');
  }
  if (layer === 'webviews' && Object.keys(inputs).some((p) => TFJS.test(p)) && !out.some((v) => /TensorFlow/.test(v))) {
    out.push('the webview bundles contain TensorFlow.js');
  }
  return [...new Set(out)];
}

/** Why an import between two src/engine modules runs against ENGINE_ORDER, or undefined. */
function engineOrderRule(/** @type {string} */ file, /** @type {string} */ target) {
  const a = engineFolder(file);
  const b = engineFolder(target);
  if (a === undefined || b === undefined || a === b) return undefined;
  const ra = ENGINE_ORDER.indexOf(a);
  const rb = ENGINE_ORDER.indexOf(b);
  const place = (/** @type {string} */ x) => `src/engine/${x}/ is not in ENGINE_ORDER (scripts/check_layers.mjs): give the new folder its place in the order`;
  if (ra < 0) return place(a);
  if (rb < 0) return place(b);
  if (rb > ra) return `src/engine/${a}/ is below src/engine/${b}/ (ENGINE_ORDER: ${ENGINE_ORDER.join(' < ')}); move what both need down, or the importer up`;
  return undefined;
}

/**
 * Each circle of runtime imports among src/ files, as one line naming its files in order (Tarjan's strongly connected
 * components: a component of more than one file, or a file importing itself, is a circle).
 * @param {Metafile['inputs']} inputs @returns {string[]}
 */
function cycles(inputs) {
  const ours = Object.keys(inputs).filter((p) => layerOf(p));
  /** @type {Map<string, string[]>} */
  const next = new Map(ours.map((p) => [p, inputs[p].imports.filter((i) => !i.external && layerOf(i.path)).map((i) => i.path)]));
  /** @type {Map<string, number>} */
  const index = new Map();
  /** @type {Map<string, number>} */
  const low = new Map();
  /** @type {string[]} */
  const stack = [];
  const on = new Set();
  /** @type {string[]} */
  const out = [];
  let n = 0;
  /** @param {string} v */
  const visit = (v) => {
    index.set(v, n);
    low.set(v, n++);
    stack.push(v);
    on.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(/** @type {number} */ (low.get(v)), /** @type {number} */ (low.get(w))));
      } else if (on.has(w)) low.set(v, Math.min(/** @type {number} */ (low.get(v)), /** @type {number} */ (index.get(w))));
    }
    if (low.get(v) !== index.get(v)) return;
    const comp = [];
    let w;
    do {
      w = /** @type {string} */ (stack.pop());
      on.delete(w);
      comp.push(w);
    } while (w !== v);
    if (comp.length > 1 || (next.get(v) ?? []).includes(v))
      out.push(`a circle of imports: ${shortestCircle(v, new Set(comp), next).join(' → ')}; break it (no module may load itself through others)`);
  };
  for (const p of ours) if (!index.has(p)) visit(p);
  return out;
}

/**
 * The shortest path of imports from `v` back to itself inside one strongly connected component (breadth-first).
 * @param {string} v @param {Set<string>} comp @param {Map<string, string[]>} next @returns {string[]}
 */
function shortestCircle(v, comp, next) {
  const from = new Map([[v, '']]);
  let frontier = [v];
  while (frontier.length) {
    const after = [];
    for (const p of frontier) {
      for (const q of next.get(p) ?? []) {
        if (q === v) {
          const path = [v];
          for (let x = p; x !== v; x = /** @type {string} */ (from.get(x))) path.splice(1, 0, x);
          return [...path, v];
        }
        if (comp.has(q) && !from.has(q)) {
          from.set(q, p);
          after.push(q);
        }
      }
    }
    frontier = after;
  }
  return [v, v];
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
      results.push({
        layer,
        lines: (e.errors ?? [{ text: String(err), location: null }]).map((x) => `${x.location ? `${x.location.file}:${x.location.line}: ` : ''}${x.text}`),
      });
    }
  }
  return summarize(results);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const lines = await checkTree(resolve(dirname(fileURLToPath(import.meta.url)), '..'));
  if (lines.length) {
    console.error(`Layer rules broken (design.md#layout):\n${lines.map((l) => `  ${l}`).join('\n')}`);
    process.exit(1);
  }
  console.log(`layers: ok (engine, extension, webviews; engine folders ${ENGINE_ORDER.join(' < ')}; no circles)`);
}
