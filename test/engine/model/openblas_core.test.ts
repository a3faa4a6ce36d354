// OpenBLAS's kernels named from the CPU's flags (kernels/blas.ts): OpenBLAS 0.3.21 falls back to Prescott's SSE3
// kernels on a CPU model it does not know, 3–4× slower on this machine. The choice is pure (flags in, core out); the
// second test opens OpenBLAS in a fresh process and reads the core it runs back from openblas_get_config.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { openblasCoreFor } from '../../../src/engine/model/kernels/blas';

const ROOT = resolve(__dirname, '../../..');

test('the core follows the flags: AVX-512 (F, BW, DQ, VL, CD) → SkylakeX, AVX2 + FMA → Haswell, else OpenBLAS decides', () => {
  const f = (s: string) => new Set(s.split(' '));
  assert.equal(openblasCoreFor(f('sse4_2 avx avx2 fma avx512f avx512bw avx512dq avx512vl avx512cd')), 'SkylakeX');
  assert.equal(openblasCoreFor(f('sse4_2 avx avx2 fma avx512f')), 'Haswell', 'AVX-512 F alone is not SkylakeX');
  assert.equal(openblasCoreFor(f('sse4_2 avx avx2 fma')), 'Haswell');
  assert.equal(openblasCoreFor(f('sse4_2 avx avx2')), null, 'AVX2 without FMA');
  assert.equal(openblasCoreFor(f('sse2 sse3')), null);
});

test('a fresh process opens OpenBLAS with the core named from this CPU, unless OPENBLAS_CORETYPE is set', (t) => {
  let flags: Set<string>;
  try {
    flags = new Set(/^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))![1].trim().split(/\s+/));
  } catch {
    t.skip('no /proc/cpuinfo');
    return;
  }
  const want = openblasCoreFor(flags);
  const probe = (env: NodeJS.ProcessEnv) =>
    spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "const b = require('./src/engine/model/kernels/blas'); console.log(b.loadBlas()); console.log(process.env.OPENBLAS_CORETYPE ?? '')",
      ],
      { cwd: ROOT, encoding: 'utf8', env },
    );
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE;
  const r = probe(env);
  if (r.status !== 0 && /no OpenBLAS|not built/.test(r.stderr)) {
    t.skip('no OpenBLAS here');
    return;
  }
  assert.equal(r.status, 0, r.stderr);
  const [config, chosen] = r.stdout.trim().split('\n');
  if (want) {
    assert.equal(chosen, want);
    assert.match(config, new RegExp(`\\b${want}\\b`), `openblas_get_config: ${config}`);
  }
  // The user's choice wins.
  const mine = probe({ ...env, OPENBLAS_CORETYPE: 'Haswell' });
  assert.equal(mine.status, 0, mine.stderr);
  assert.match(mine.stdout, /\bHaswell\b/);
});
