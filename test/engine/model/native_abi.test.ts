// The native kernels' arguments are declared once (src/engine/model/kernels/native_abi.ts). These tests fail when the C
// side (native/abi.h, and the addon built from it) disagrees with that declaration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { abiMismatch } from '../../../src/engine/model/kernels/blas';
import { abiHeader, NATIVE_ABI, positional } from '../../../src/engine/model/kernels/native_abi';

const root = join(__dirname, '../../..');

test('native/abi.h is the header native_abi.ts generates (regenerate: npx tsx src/engine/model/kernels/native_abi.ts --write)', () => {
  assert.equal(readFileSync(join(root, 'native/abi.h'), 'utf8'), abiHeader());
});

test('every kernel body reads its arguments through its own struct (KERNEL_ARGS(name) for each declared kernel)', () => {
  const c = ['addon', 'logprob', 'rmsnorm', 'attention', 'swiglu'].map((f) => readFileSync(join(root, `native/${f}.c`), 'utf8')).join('\n');
  for (const name of Object.keys(NATIVE_ABI)) assert.match(c, new RegExp(`KERNEL_ARGS\\(${name}\\);`), `${name} has no KERNEL_ARGS(${name})`);
  assert.doesNotMatch(c, /\ba\[\d+\]/, 'a kernel reads a positional argument a[i]');
});

test('the built addon reports the declared arguments; a disagreement is named kernel by kernel', (t) => {
  let addon: { abi(): string[] };
  try {
    addon = createRequire(__filename)(join(root, 'dist/engine/blas.node')) as { abi(): string[] };
  } catch {
    t.skip('dist/engine/blas.node not built (no C compiler)');
    return;
  }
  assert.equal(abiMismatch(addon.abi()), null);
  const edited = addon
    .abi()
    .map((e) => (e.startsWith('swiglu:') ? 'swiglu:gu,sig,out,N,F' : e))
    .filter((e) => !e.startsWith('decodeStep:'));
  assert.equal(abiMismatch([...edited, 'extra:x']), 'swiglu: built (gu,sig,out,N,F), engine (gu,out,sig,N,F); decodeStep: missing; extra: not in the engine');
});

test('positional: a call by name becomes the declared order', () => {
  assert.deepEqual(positional('swiglu', { F: 5, N: 4, sig: 3, out: 2, gu: 1 }), [1, 2, 3, 4, 5]);
});
