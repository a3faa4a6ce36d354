// @ts-check
// The identity of the native addon's sources: sha256 over native/*.c and *.h (names and contents, in name order), 16
// hex digits. The build compiles it into blas.node (-DCL_SOURCE_HASH) and into the engine bundle (a define); the engine
// refuses an addon whose stamp differs (a stale blas.node left by a failed rebuild). src/engine/model/kernels/blas.ts
// computes the same from native/ when it runs from source (tests); test/engine/model/native_abi.test.ts checks both agree.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** @returns {string | null} null when there is no native/ folder */
export function nativeSourceHash(root = '.') {
  const dir = join(root, 'native');
  if (!existsSync(dir)) return null;
  const h = createHash('sha256');
  for (const f of readdirSync(dir).filter((n) => /\.[ch]$/.test(n)).sort()) h.update(`${f}\n`).update(readFileSync(join(dir, f))).update('\n');
  return h.digest('hex').slice(0, 16);
}
