// The built-in GEMM (native/builtin_gemm.c): where OpenBLAS is not installed, wasm-blas runs its products on the addon's
// own blocked GEMM. Forced here with CREDIT_LENS_BLAS=builtin (this machine has OpenBLAS), in a child process so the
// choice is made fresh. Products are checked against float64 sums computed in JS, over shapes that cross every block
// edge (MR 6, NR 16, KC 256, MC 96, NC 2048) with each transpose, and products split over two threads (by rows, by
// columns); then every entry of the wasm-blas ops table against the cpu composition (ops_tables.test.ts), the whole
// model's gradients, KV-cache decoding and sampling against cpu.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');
// NODE_TEST_CONTEXT (set by this test's runner) would make the child's runner report to ours instead of running
const { NODE_TEST_CONTEXT: _, ...inherited } = process.env;
const ENV = { ...inherited, CREDIT_LENS_BLAS: 'builtin' };
const child = (script: string) =>
  spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    env: ENV,
    timeout: 300_000,
  });

test('products on the built-in GEMM equal float64 sums, across every block edge and transpose', () => {
  const r = child(`
    const tf = require('@tensorflow/tfjs');
    const { initBackend, backendInfo } = require('./src/engine/model/backend');
    const { blasStats } = require('./src/engine/model/kernels/blas');
    const { makeRng, randNormal } = require('./src/engine/core/rng');
    (async () => {
      await initBackend('wasm-blas');
      const info = backendInfo();
      if (!/^built-in GEMM \\(/.test(info.blas)) throw new Error('not the built-in GEMM: ' + info.blas);
      const rng = makeRng(3);
      let worst = 0;
      const shapes = [[1, 1, 1], [7, 17, 5], [6, 16, 256], [13, 33, 300], [97, 40, 257], [200, 130, 64], [5, 2100, 20], [64, 96, 600], [300, 200, 64], [64, 600, 128]];
      for (const [M, N, K] of shapes)
        for (const ta of [false, true])
          for (const tb of [false, true]) {
            const a = Float32Array.from({ length: 2 * M * K }, () => randNormal(rng));
            const b = Float32Array.from({ length: 2 * K * N }, () => randNormal(rng));
            const A = tf.tensor3d(a, ta ? [2, K, M] : [2, M, K]);
            const B = tf.tensor3d(b, tb ? [2, N, K] : [2, K, N]);
            const before = blasStats.calls;
            const C = tf.matMul(A, B, ta, tb).dataSync();
            if (blasStats.calls === before) throw new Error('the product did not go through the addon');
            for (let z = 0; z < 2; z++)
              for (let i = 0; i < M; i++)
                for (let j = 0; j < N; j++) {
                  let s = 0, mag = 0;
                  for (let k = 0; k < K; k++) {
                    const x = ta ? a[z * M * K + k * M + i] : a[z * M * K + i * K + k];
                    const y = tb ? b[z * K * N + j * K + k] : b[z * K * N + k * N + j];
                    s += x * y;
                    mag += Math.abs(x * y);
                  }
                  worst = Math.max(worst, Math.abs(C[z * M * N + i * N + j] - s) / (mag + 1e-30));
                }
            tf.dispose([A, B]);
          }
      console.log(JSON.stringify({ blas: info.blas, worst }));
    })().catch((e) => { console.error(e.stack || e); process.exit(1); });
  `);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { blas: string; worst: number };
  // float32 summation: relative to Σ|x·y|, a few units of 2^-24 times √K at most
  assert.ok(out.worst < 2e-6, `worst relative error ${out.worst} (${out.blas})`);
});

test('every entry of the wasm-blas ops table, forward and gradient, and a training step against cpu, on the built-in GEMM', () => {
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      // the table's entries, the whole model's gradients, KV-cache decoding and sampling, each on wasm-blas, and the
      // products' every transpose through the addon (the route named OpenBLAS)
      '--test-name-pattern=ops table wasm-blas|on wasm-blas|\\(OpenBLAS\\)',
      'test/engine/model/ops_tables.test.ts',
      'test/engine/model/backend.test.ts',
    ],
    { cwd: ROOT, encoding: 'utf8', env: ENV, timeout: 600_000 },
  );
  assert.equal(r.status, 0, r.stdout.slice(-4000) + r.stderr.slice(-2000));
  const passed = Number(/^# pass (\d+)/m.exec(r.stdout)?.[1] ?? 0);
  assert.ok(passed >= 6, `${passed} wasm-blas tests ran:\n${r.stdout.slice(-2000)}`);
});
