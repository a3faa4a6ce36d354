// OpenBLAS products on the wasm backend's heap: gemm(heap, transA, transB, M, N, K, offsets), the BatchMatMul of wasm-blas
// (src/engine/model/kernels/blas.ts).
#include "common.h"

/** Products of at most this many multiply-adds are run whole on one thread when they come in a batch (see Gemm). */
#define SMALL_PRODUCT_MACS (1 << 21)
/**
 * A single product of more than this many multiply-adds is split in halves over two threads of ours (see Gemm). The
 * decode step's products stay below (the small model's largest, 32×2048×256, is exactly 2^24): they come ~0.1 ms apart,
 * when OpenBLAS's pool is still awake and cheaper than a new thread.
 */
#define LARGE_PRODUCT_MACS (1 << 24)
/**
 * The built-in GEMM has no pool: a product of more than this many multiply-adds (~0.1 ms on one core) is split in
 * halves over two threads, whose start (~30 µs) it more than pays for.
 */
#define BUILTIN_LARGE_PRODUCT_MACS (1 << 21)


typedef struct {
  bool ta, tb;
  int32_t M, N, K;
  float *heap;
  const int32_t *off;
  size_t from, to; /* products [from, to) of the batch */
} gemm_batch;

static void *gemm_part(void *arg) {
  const gemm_batch *p = arg;
  for (size_t j = p->from; j < p->to; j++) {
    const int32_t *o = p->off + 3 * j;
    sgemm(ROW_MAJOR, p->ta ? TRANS : NO_TRANS, p->tb ? TRANS : NO_TRANS, p->M, p->N, p->K, 1.0f, p->heap + o[0], p->ta ? p->M : p->K,
          p->heap + o[1], p->tb ? p->K : p->N, 0.0f, p->heap + o[2], p->N);
  }
  return NULL;
}

/** C[M,N] = op(A)·op(B) with leading dimensions: a tile of a larger product. */
typedef struct {
  bool ta, tb;
  int32_t M, N, K;
  const float *A;
  int lda;
  const float *B;
  int ldb;
  float *C;
  int ldc;
} gemm_tile;

static void *gemm_tile_run(void *arg) {
  const gemm_tile *t = arg;
  sgemm(ROW_MAJOR, t->ta ? TRANS : NO_TRANS, t->tb ? TRANS : NO_TRANS, t->M, t->N, t->K, 1.0f, t->A, t->lda, t->B, t->ldb, 0.0f, t->C, t->ldc);
  return NULL;
}

// gemm(heap: Float32Array, transA, transB, M, N, K, offsets: Int32Array):
// for each triple (a, b, c) of float offsets into heap, C[M,N] = op(A)·op(B), row-major, op(X) = Xᵀ when trans.
napi_value Gemm(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (!sgemm) { napi_throw_error(env, NULL, "blas.node: open() a BLAS library first"); return NULL; }
  if (argc < 7) { napi_throw_type_error(env, NULL, "gemm(heap, transA, transB, M, N, K, offsets)"); return NULL; }
  napi_typedarray_type type;
  size_t heapLen, nOff;
  void *heapData, *offData;
  napi_value ab;
  size_t byteOff;
  CHECK(napi_get_typedarray_info(env, argv[0], &type, &heapLen, &heapData, &ab, &byteOff));
  if (type != napi_float32_array) { napi_throw_type_error(env, NULL, "gemm: heap must be a Float32Array"); return NULL; }
  bool ta, tb;
  int32_t M, N, K;
  CHECK(napi_get_value_bool(env, argv[1], &ta));
  CHECK(napi_get_value_bool(env, argv[2], &tb));
  CHECK(napi_get_value_int32(env, argv[3], &M));
  CHECK(napi_get_value_int32(env, argv[4], &N));
  CHECK(napi_get_value_int32(env, argv[5], &K));
  CHECK(napi_get_typedarray_info(env, argv[6], &type, &nOff, &offData, &ab, &byteOff));
  if (type != napi_int32_array || nOff % 3 != 0) {
    napi_throw_type_error(env, NULL, "gemm: offsets must be an Int32Array of (a, b, c) triples");
    return NULL;
  }
  if (M <= 0 || N <= 0 || K <= 0) return NULL;
  float *heap = (float *)heapData;
  const int32_t *off = (const int32_t *)offData;
  const int64_t aSize = (int64_t)M * K, bSize = (int64_t)K * N, cSize = (int64_t)M * N;
  for (size_t i = 0; i < nOff; i += 3) {
    if (off[i] < 0 || off[i + 1] < 0 || off[i + 2] < 0 || off[i] + aSize > (int64_t)heapLen ||
        off[i + 1] + bSize > (int64_t)heapLen || off[i + 2] + cSize > (int64_t)heapLen) {
      napi_throw_range_error(env, NULL, "gemm: an operand lies outside the heap");
      return NULL;
    }
  }
  gemm_batch part = {ta, tb, M, N, K, heap, off, 0, nOff / 3};
  const int threads = product_threads();
  const int64_t large = sgemm == builtin_sgemm ? BUILTIN_LARGE_PRODUCT_MACS : LARGE_PRODUCT_MACS;
  if (part.to == 1 && threads >= 2 && (int64_t)M * N * K > large && (M >= 64 || N >= 64)) {
    // One large product: its rows (or columns, whichever are more) in two halves, one per core with OpenBLAS on one
    // thread in each, instead of OpenBLAS's pool, whose workers had gone to sleep during the kernels before it.
    // Each element is one thread's whole sum over K, as in the pool. The halves are fixed by the shape, so a run's bits are
    // the same from run to run on one machine; whether they equal one thread's depends on OpenBLAS's kernels (equal on
    // Intel's SkylakeX/Cooperlake kernels; on AMD Zen, OpenBLAS 0.3.21, a product's rounding depends on its M and N, so a
    // half's elements can differ from the whole product's in the last bit).
    const float *A = heap + off[0], *B = heap + off[1];
    float *C = heap + off[2];
    const int lda = ta ? M : K, ldb = tb ? K : N;
    gemm_tile halves[2];
    if (M >= N) {
      const int32_t m = M / 2;
      halves[0] = (gemm_tile){ta, tb, m, N, K, A, lda, B, ldb, C, N};
      halves[1] = (gemm_tile){ta, tb, M - m, N, K, ta ? A + m : A + (int64_t)m * K, lda, B, ldb, C + (int64_t)m * N, N};
    } else {
      const int32_t n = N / 2;
      halves[0] = (gemm_tile){ta, tb, M, n, K, A, lda, B, ldb, C, N};
      halves[1] = (gemm_tile){ta, tb, M, N - n, K, A, lda, tb ? B + (int64_t)n * K : B + n, ldb, C + n, N};
    }
    on_two_cores(gemm_tile_run, &halves[0], &halves[1]);
    return NULL;
  }
  if (part.to < 2 || threads < 2 || (int64_t)M * N * K > SMALL_PRODUCT_MACS) {
    gemm_part(&part);
    return NULL;
  }
  // A batch of small products (attention's per-head products): OpenBLAS would wake its pool for every one; instead each
  // core takes half of the batch with OpenBLAS on one thread. Each product is computed whole by one thread, with the
  // same kernel and summation order as on the pool, so the bits do not depend on the split.
  gemm_batch second = part;
  second.from = part.to = part.to / 2;
  on_two_cores(gemm_part, &part, &second);
  return NULL;
}

