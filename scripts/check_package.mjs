// Before `vsce package`: the native parts the .vsix must carry for linux-x64 exist (build_native.mjs and esbuild.mjs
// only log when they cannot make them, so a machine without a C compiler would otherwise ship a .vsix without OpenBLAS).
import { existsSync, statSync } from 'node:fs';

const need = {
  'dist/engine/blas.node': 'the native addon (backend wasm-blas: products on OpenBLAS or its built-in GEMM): needs a C compiler and Node headers at build time',
  'dist/engine/dawn/linux-x64/dawn.node': "Dawn's Node binding (backend webgpu): from the optional npm package webgpu",
};
let missing = 0;
for (const [path, what] of Object.entries(need)) {
  if (existsSync(path)) console.log(`package: ${path} (${(statSync(path).size / 2 ** 20).toFixed(1)} MiB)`);
  else {
    console.error(`package: ${path} is missing: ${what}`);
    missing++;
  }
}
process.exit(missing ? 1 : 0);
