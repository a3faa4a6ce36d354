// @ts-check
// Compiles native/*.c (backend wasm-blas) into dist/engine/blas.node when a C compiler and Node's headers are
// present; otherwise says why in one line and the engine runs on plain wasm. The addon links against libc only
// (OpenBLAS is opened at run time), so nothing beyond a compiler is needed to build it.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeSourceHash } from './native_hash.mjs';

const NATIVE = 'native';
const OUT = 'dist/engine/blas.node';

/** Node's header folder (the one holding node_api.h), or null. */
export function nodeHeaders() {
  const dirs = [process.env.NODE_HEADERS, join(dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'];
  return dirs.find((d) => d && existsSync(join(d, 'node_api.h'))) ?? null;
}

/** Builds the addon if its source is newer than the output; returns a line for the build log. */
export function buildNative() {
  if (!existsSync(NATIVE)) return null;
  const files = readdirSync(NATIVE).filter((f) => /\.[ch]$/.test(f)).map((f) => join(NATIVE, f));
  const sources = files.filter((f) => f.endsWith('.c')).sort();
  // stale when a source, a header or these flags (this file) changed
  const newest = Math.max(...files.map((f) => statSync(f).mtimeMs), statSync(fileURLToPath(import.meta.url)).mtimeMs);
  if (existsSync(OUT) && statSync(OUT).mtimeMs >= newest) return null;
  const headers = nodeHeaders();
  if (!headers) return `native: ${OUT} not built (no node_api.h; set NODE_HEADERS), backend wasm-blas unavailable`;
  const cc = process.env.CC || 'cc';
  try {
    // -fno-trapping-math lets GCC turn the clamps and selects of the exp loops into vector blends (with trapping math a
    // float compare is control flow, and those loops stay scalar); neither flag changes a value.
    // stamped with its sources' hash: the engine refuses a blas.node whose stamp is not its own
    const stamp = `-DCL_SOURCE_HASH="${nativeSourceHash()}"`;
    // macOS: the Node-API symbols resolve against the process that loads the addon, as node-gyp links addons there
    const platform = process.platform === 'darwin' ? ['-undefined', 'dynamic_lookup'] : ['-ldl'];
    execFileSync(cc, ['-O3', '-fno-trapping-math', '-fno-math-errno', '-Wall', '-pthread', '-shared', '-fPIC', `-I${headers}`, '-DNAPI_VERSION=8', stamp, ...sources, '-o', OUT, ...platform],
      { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (e) {
    return `native: ${OUT} not built (${cc} failed: ${e instanceof Error ? e.message.split('\n')[0] : e}), backend wasm-blas unavailable`;
  }
  return `native: built ${OUT}`;
}
