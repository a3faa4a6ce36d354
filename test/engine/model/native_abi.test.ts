// The native kernels' arguments are declared once (src/engine/model/kernels/native_abi.ts). These tests fail when the C
// side (native/abi.h, and the addon built from it) disagrees with that declaration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

// ---- the addon's identity and the library it opens ----

test('the build stamps blas.node with its sources, and the engine computes the same stamp (bundle and source)', async () => {
  const { expectedNativeHash } = await import('../../../src/engine/model/kernels/blas');
  const { nativeSourceHash } = (await import('../../../scripts/native_hash.mjs')) as { nativeSourceHash(root?: string): string };
  assert.equal(expectedNativeHash(), nativeSourceHash(root));
  const addon = createRequire(__filename)(join(root, 'dist/engine/blas.node')) as { sourceHash(): string };
  assert.equal(addon.sourceHash(), nativeSourceHash(root), 'npm run build stamped it');
  assert.match(readFileSync(join(root, 'dist/engine/cli.js'), 'utf8'), new RegExp(`"${nativeSourceHash(root)}"`), 'and the bundle carries it');
});

test('a stale blas.node (built from other sources, left by a failed rebuild) is refused, and the engine trains on wasm saying why', () => {
  const headers = spawnSync(process.execPath, ['-e', 'import("./scripts/build_native.mjs").then((m) => console.log(m.nodeHeaders() ?? ""))'], {
    cwd: root,
    encoding: 'utf8',
  }).stdout.trim();
  const dir = mkdtempSync(join(tmpdir(), 'cl-stale-'));
  const stale = join(dir, 'blas.node');
  const sources = readdirSync(join(root, 'native'))
    .filter((f) => f.endsWith('.c'))
    .map((f) => join(root, 'native', f));
  const cc = spawnSync(
    'cc',
    ['-O1', '-pthread', '-shared', '-fPIC', `-I${headers}`, '-DNAPI_VERSION=8', '-DCL_SOURCE_HASH="0000000000000000"', ...sources, '-o', stale, '-ldl'],
    { encoding: 'utf8' },
  );
  assert.equal(cc.status, 0, cc.stderr);
  const probe = `require(${JSON.stringify(join(root, 'src/engine/model/kernels/blas'))}).loadBlas()`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', probe], { encoding: 'utf8', env: { ...process.env, CREDIT_LENS_BLAS_ADDON: stale } });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /blas\.node was built from other native\/ sources than this engine \(stamp 0000000000000000, engine [0-9a-f]{16}\): a stale build/);
  // The CLI's backend choice falls back to wasm and names the reason.
  const cfg = join(dir, 'c.credit.yaml');
  writeFileSync(
    cfg,
    'name: s\nseed: 1\nbackend: auto\noutput_dir: runs\nmodel: { source: scratch, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, d_ff: 32, max_seq_len: 64 }\n' +
      'task: { name: arithmetic, numbers: [2, 2], max_number: 5, max_target: 20, train_size: 20, eval_size: 4 }\ngrpo: { steps: 1, prompts_per_step: 1, group_size: 2, max_new_tokens: 8 }\n',
  );
  const t = spawnSync(process.execPath, [join(root, 'dist/engine/cli.js'), 'train', cfg], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, CREDIT_LENS_BLAS_ADDON: stale },
  });
  assert.equal(t.status, 0, t.stderr);
  const run = readdirSync(join(dir, 'runs'))[0];
  const info = JSON.parse(readFileSync(join(dir, 'runs', run, 'run.json'), 'utf8'));
  assert.equal(info.backend, 'wasm');
  assert.match(info.backend_reason, /stale build/);
});

test("OpenBLAS before 0.3.10 and 64-bit-integer builds are refused by their config string; bookworm's is used", async () => {
  const { openblasRefusal } = await import('../../../src/engine/model/kernels/blas');
  assert.match(openblasRefusal('OpenBLAS 0.3.9 NO_AFFINITY Haswell MAX_THREADS=64') ?? '', /0\.3\.9 is older than 0\.3\.10/);
  assert.match(openblasRefusal('OpenBLAS 0.2.20 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64') ?? '', /older than 0\.3\.10/);
  assert.match(openblasRefusal('OpenBLAS 0.3.21 USE64BITINT DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64') ?? '', /64-bit-integer/);
  assert.equal(openblasRefusal('OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64'), null);
  assert.equal(openblasRefusal('OpenBLAS 0.3.10 NO_AFFINITY Zen MAX_THREADS=8'), null);
});
