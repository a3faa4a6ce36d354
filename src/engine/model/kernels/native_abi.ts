// The native kernels' arguments (native/), declared once: each kernel's int32 arguments by name, in call order. Element
// offsets into the wasm heap and sizes. The TypeScript side calls a kernel with these names (blas.ts nativeCall, checked
// by the compiler); the C side reads them as the fields of a struct in native/abi.h, which abiHeader() writes from this
// table. test/engine/model/native_abi.test.ts fails when native/abi.h, or the addon that was built from it, disagrees.
//
// Regenerate the header after a change here:  npx tsx src/engine/model/kernels/native_abi.ts --write
export const NATIVE_ABI = {
  logprob: ['logits', 'targets', 'N', 'V', 'logp', 'lse'],
  logprobGrad: ['logits', 'targets', 'lse', 'dy', 'out', 'N', 'V'],
  rmsnorm: ['x', 'w', 'y', 'rinv', 'N', 'd', 'epsBits'],
  rmsnormGrad: ['x', 'w', 'rinv', 'dy', 'dx', 'dw', 'N', 'd'],
  attention: ['q', 'k', 'v', 'mask', 'p', 'o', 'B', 'H', 'Hkv', 'T', 'Tk', 'hd'],
  attentionGrad: ['q', 'k', 'v', 'p', 'dO', 'dq', 'dk', 'dv', 'B', 'H', 'Hkv', 'T', 'Tk', 'hd'],
  qkvHeads: ['qkv', 'cos', 'sin', 'q', 'k', 'v', 'B', 'T', 'H', 'Hkv', 'hd'],
  qkvHeadsGrad: ['dq', 'dk', 'dv', 'cos', 'sin', 'dqkv', 'B', 'T', 'H', 'Hkv', 'hd'],
  swiglu: ['gu', 'out', 'sig', 'N', 'F'],
  swigluGrad: ['gu', 'sig', 'dy', 'out', 'N', 'F'],
  decodeStep: ['qkv', 'tabs', 'keys', 'values', 'mask', 'out', 'B', 'H', 'Hkv', 'hd', 'cap', 'pos'],
} as const satisfies Record<string, readonly string[]>;

export type NativeKernel = keyof typeof NATIVE_ABI;
/** A kernel's arguments by name. */
export type NativeArgs<K extends NativeKernel> = { [A in (typeof NATIVE_ABI)[K][number]]: number };

/** The most arguments a kernel takes (the addon reads at most this many). */
export const MAX_NATIVE_ARGS = Math.max(...Object.values(NATIVE_ABI).map((a) => a.length));

/** The kernel's arguments in call order. */
export function positional<K extends NativeKernel>(kernel: K, args: NativeArgs<K>): number[] {
  return NATIVE_ABI[kernel].map((name) => (args as Record<string, number>)[name]);
}

/** native/abi.h: one struct of int32 fields per kernel, its argument count, and the table the addon exports as abi. */
export function abiHeader(): string {
  const lines = [
    '// Generated from src/engine/model/kernels/native_abi.ts (npx tsx src/engine/model/kernels/native_abi.ts --write); do not edit.',
    "// Each native kernel's int32 arguments, by name in call order: KERNEL_ARGS(name) in common.h reads them into a name##_args.",
    '#pragma once',
    '#include <stdint.h>',
    '',
    `#define NATIVE_MAX_ARGS ${MAX_NATIVE_ARGS}`,
    '',
  ];
  for (const [name, args] of Object.entries(NATIVE_ABI)) {
    lines.push(`typedef struct { int32_t ${args.join(', ')}; } ${name}_args;`);
    lines.push(`enum { ${name}_nargs = ${args.length} };`);
    lines.push(`_Static_assert(sizeof(${name}_args) == ${args.length} * sizeof(int32_t), "${name}_args has no padding");`);
  }
  lines.push('', '// "name:arg,arg,…" per kernel: the addon exports these as abi, so the engine can check the build it loaded.');
  lines.push('#define NATIVE_ABI_STRINGS \\');
  const entries = Object.entries(NATIVE_ABI).map(([name, args]) => `  "${name}:${args.join(',')}"`);
  lines.push(entries.join(', \\\n'));
  return lines.join('\n') + '\n';
}

if (process.argv.includes('--write') && /native_abi\.ts$/.test(process.argv[1] ?? '')) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require('node:fs') as typeof import('node:fs')).writeFileSync('native/abi.h', abiHeader());
  console.log('wrote native/abi.h');
}
