// Credit Lens's native addon (backend wasm-blas): what every file of native/ shares. The files by role:
//   addon.c      the Node-API glue: open(), threads(), the kernels' argument prologue, the exports (abi included)
//   threads.c    two cores for a kernel: on_two_cores, split_rows
//   gemm.c       OpenBLAS products on the wasm heap
//   builtin_gemm.c  the products where OpenBLAS is not installed (blocked, AVX2+FMA where the CPU has it)
//   logprob.c, rmsnorm.c, attention.c (attention over a sequence, the heads with RoPE, the decode step), swiglu.c:
//                the fused kernels, one file per family, each forward and backward
// abi.h, generated from src/engine/model/kernels/native_abi.ts, declares each kernel's named int32 arguments.
#pragma once
#include <math.h>
#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);
typedef void (*set_threads_fn)(int);
typedef int (*get_threads_fn)(void);

// The BLAS library's functions, set by open() or builtin() (addon.c); NULL before.
extern sgemm_fn sgemm;
// builtin_gemm.c: the products where no BLAS library is installed, and the micro-kernel this CPU runs
void builtin_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                   float beta, float *C, int ldc);
const char *builtin_gemm_isa(void);
extern set_threads_fn set_threads;
extern get_threads_fn get_threads;

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    if ((call) != napi_ok) { napi_throw_error(env, NULL, "blas.node: " #call " failed"); return NULL; }                \
  } while (0)

// ---- the kernels' prologue (addon.c) ------------------------------------------------------------------------------

/** Reads (heap: Float32Array, then `n` int32s); returns the heap's floats or NULL with an exception pending. */
float *heap_and_ints(napi_env env, napi_callback_info info, int32_t *ints, size_t n, size_t *heapLen);
/** Whether every operand, given as (offset, length) pairs in floats, lies inside the heap; throws a RangeError if not. */
int fit(napi_env env, size_t heapLen, const int64_t *spans, size_t pairs);
#define FIT(...) fit(env, heapLen, (const int64_t[]){__VA_ARGS__}, sizeof((const int64_t[]){__VA_ARGS__}) / (2 * sizeof(int64_t)))

// A native kernel's prologue: its arguments by name in A (a name##_args of abi.h), the heap's floats in heap (heapLen of
// them), or return with the exception pending.
#define KERNEL_ARGS(name)                                                                                            \
  name##_args A;                                                                                                     \
  size_t heapLen;                                                                                                    \
  float *heap = heap_and_ints(env, info, (int32_t *)&A, name##_nargs, &heapLen);                                     \
  if (!heap) return NULL

// ---- two cores (threads.c) ----------------------------------------------------------------------------------------

// The threads a product or kernel may use: OpenBLAS's count, or the online cores with the built-in GEMM (which has no
// pool of its own: the splits below are its only parallelism).
int product_threads(void);

// fn(first) on this thread and fn(second) on a new one (here, after the first, if none starts), with OpenBLAS on one
// thread meanwhile so that each core runs its own products: the product splits, the attention's pairs, the row kernels.
void on_two_cores(void *(*fn)(void *), void *first, void *second);

// A kernel whose rows are independent runs the first half of them here and the second half on a new thread, when it
// touches at least SPLIT_MIN_FLOATS floats (the decode step's kernels stay on one thread: a new thread costs ~30 µs,
// more than their work). The halves depend on the row count alone, and a kernel that sums over rows keeps one sum per
// half (part 0, 1) whether or not the second thread ran, so the bits do not depend on the cores.
#define SPLIT_MIN_FLOATS (1 << 18)

typedef struct {
  float *heap;
  const void *args; /* the kernel's arguments (its name##_args) */
  void *scratch;    /* per-part scratch (part p takes the p-th half), or NULL */
} rows_ctx;
typedef void (*rows_fn)(const rows_ctx *c, int32_t from, int32_t to, int part);
void split_rows(rows_fn fn, const rows_ctx *c, int32_t rows, int64_t floats);

// ---- vector loops -------------------------------------------------------------------------------------------------
//
// Loops over the heap that the compiler vectorises (-O3; an AVX2 clone is picked at load time on x86-64). Their
// arguments are (heap, then int32 element offsets and sizes); the JS side (kernels/native.ts) checks shapes and
// ranges before calling.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

// e^x for x ≤ 0 by Cephes' expf (about 1 ulp; the same scheme as the SIMD sigmoid in kernels/simd.ts): x clamped at −87,
// n = round(x·log₂e) by adding 1.5·2²³, r = x − n·ln 2 in two parts, e^r = 1 + r + r²·P(r), times 2ⁿ in the exponent bits.
static inline float exp_neg(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float fx = x * 1.44269504088896341f + 12582912.0f;
  const float n = fx - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  int32_t bits;
  memcpy(&bits, &fx, 4);
  bits = (bits - (0x4b400000 - 127)) << 23;
  float scale;
  memcpy(&scale, &bits, 4);
  return e * scale;
}

