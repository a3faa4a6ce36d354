// The layer rules of DESIGN §2, checked on what each bundle actually contains (esbuild's metafile: every input file
// and every import it resolved). Types alone cannot catch the extension pulling in engine code that loads tfjs, so
// the build checks the bundles themselves:
//   engine     never vscode, src/extension or src/webviews;
//   extension  never src/webviews, never TensorFlow.js (it may use the engine's tfjs-free readers);
//   webviews   never src/engine, src/extension, vscode, TensorFlow.js or a Node built-in.
const RULES = {
  engine: [[/^src\/(extension|webviews)\//, 'src/engine must not import the extension or the webviews'], [/^vscode$/, 'src/engine must not import vscode']],
  extension: [[/^src\/webviews\//, 'the extension must not import webview code'],
    [/node_modules\/@tensorflow\//, 'the extension bundle must not contain TensorFlow.js: import only the engine\'s tfjs-free modules (rundir readers, config, catalog)']],
  webviews: [[/^src\/(engine|extension)\//, 'src/webviews must not import the engine or the extension'], [/^vscode$/, 'src/webviews must not import vscode'],
    [/node_modules\/@tensorflow\//, 'src/webviews must not contain TensorFlow.js'], [/^node:/, 'src/webviews must not import Node built-ins']],
};

/** Every violation in a metafile of bundle `kind`: "<importer> → <imported>: <rule>". */
export function layerViolations(kind, metafile) {
  const rules = RULES[kind];
  const out = [];
  for (const [file, info] of Object.entries(metafile.inputs)) {
    const targets = [file, ...info.imports.map((i) => i.path)];
    for (const t of targets) {
      for (const [re, why] of rules) if (re.test(t)) out.push(`${file}${t === file ? '' : ` → ${t}`}: ${why}`);
    }
  }
  return [...new Set(out)];
}
