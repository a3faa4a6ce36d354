// Credit Lens: OpenBLAS sgemm on the wasm backend's heap (backend `wasm-blas`, src/engine/model/kernels/blas.ts), and the
// fused kernels that backend runs natively (src/engine/model/kernels/native.ts and decode_attention.ts): a token's
// log-prob, RMSNorm, the attention heads with RoPE, attention over a whole sequence, SwiGLU, each with its gradient, and
// the KV-cache decode step.
//
// A Node-API addon, so one build loads in any Node (or Electron) of Node-API 8+. It links against nothing but libc:
// the BLAS library is opened at run time with dlopen (`open(path)`), so a machine without OpenBLAS still loads the
// addon and the engine falls back to plain wasm with the reason. Products run in place on a Float32Array over the
// WebAssembly memory: no copy in or out.
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);
typedef void (*set_threads_fn)(int);
typedef int (*get_threads_fn)(void);
typedef char *(*get_config_fn)(void);

static void *lib = NULL;
static sgemm_fn sgemm = NULL;
static set_threads_fn set_threads = NULL;
static get_threads_fn get_threads = NULL;
static get_config_fn get_config = NULL;

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    if ((call) != napi_ok) { napi_throw_error(env, NULL, "blas.node: " #call " failed"); return NULL; }                \
  } while (0)

static napi_value str(napi_env env, const char *s) {
  napi_value v;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

// open(path) → the library's config string (openblas_get_config) or its path; throws with dlerror() on failure.
static napi_value Open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char path[1024];
  size_t len;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "open(path: string)");
    return NULL;
  }
  // OpenBLAS's idle workers spin for 2^28 cycles (~0.1 s) before they sleep. Between the products of a train step the
  // kernels here run on both cores (split_rows, the attention's pairs), and a spinning worker takes one of them. At
  // 2^21 cycles (~1 ms) a worker still spins through the short gaps between the decode step's products (waking a
  // sleeping one costs more than they do: 2^4 cut rollout by ~15 %) but sleeps through a train step's kernels (the
  // step measured 5–10 % faster; bench/PROFILE.md). Read by OpenBLAS when it loads; a value the user set wins.
  setenv("OPENBLAS_THREAD_TIMEOUT", "21", 0);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { napi_throw_error(env, NULL, dlerror()); return NULL; }
  sgemm_fn f = (sgemm_fn)dlsym(h, "cblas_sgemm");
  if (!f) { dlclose(h); napi_throw_error(env, NULL, "no cblas_sgemm in that library"); return NULL; }
  lib = h;
  sgemm = f;
  set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
  get_threads = (get_threads_fn)dlsym(h, "openblas_get_num_threads");
  get_config = (get_config_fn)dlsym(h, "openblas_get_config");
  return str(env, get_config ? get_config() : path);
}

// threads(n?) → sets OpenBLAS's thread count when n is given; returns the count in use (0 if unknown).
static napi_value Threads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_valuetype t = napi_undefined;
  if (argc >= 1) CHECK(napi_typeof(env, argv[0], &t));
  if (t == napi_number && set_threads) {
    int32_t n;
    CHECK(napi_get_value_int32(env, argv[0], &n));
    if (n > 0) set_threads(n);
  }
  CHECK(napi_create_int32(env, get_threads ? get_threads() : 0, &out));
  return out;
}

/** Products of at most this many multiply-adds are run whole on one thread when they come in a batch (see Gemm). */
#define SMALL_PRODUCT_MACS (1 << 21)
/**
 * A single product of more than this many multiply-adds is split in halves over two threads of ours (see Gemm). The
 * decode step's products stay below (the small model's largest, 32×2048×256, is exactly 2^24): they come ~0.1 ms apart,
 * when OpenBLAS's pool is still awake and cheaper than a new thread.
 */
#define LARGE_PRODUCT_MACS (1 << 24)

// fn(first) on this thread and fn(second) on a new one (here, after the first, if none starts), with OpenBLAS on one
// thread meanwhile so that each core runs its own products: the product splits, the attention's pairs, the row kernels.
static void on_two_cores(void *(*fn)(void *), void *first, void *second) {
  const int threads = get_threads && set_threads ? get_threads() : 1;
  if (threads > 1) set_threads(1);
  pthread_t helper;
  const int started = pthread_create(&helper, NULL, fn, second) == 0;
  fn(first);
  if (started) pthread_join(helper, NULL);
  else fn(second);
  if (threads > 1) set_threads(threads);
}

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
static napi_value Gemm(napi_env env, napi_callback_info info) {
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
  const int threads = get_threads && set_threads ? get_threads() : 1;
  if (part.to == 1 && threads >= 2 && (int64_t)M * N * K > LARGE_PRODUCT_MACS && (M >= 64 || N >= 64)) {
    // One large product: its rows (or columns, whichever are more) in two halves, one per core with OpenBLAS on one
    // thread in each, instead of OpenBLAS's pool, whose workers had gone to sleep during the kernels before it.
    // Each element is one thread's whole sum over K, as in the pool.
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


// ---- native kernels ------------------------------------------------------------------------------------------
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

// out[i] = e^(row[i] − shift) for i < n
VECTOR_CLONES static void exp_shifted(const float *row, float shift, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = exp_neg(row[i] - shift);
}

// out[i] = −d·e^(row[i] − shift) for i < n
VECTOR_CLONES static void neg_scaled_exp(const float *row, float shift, float d, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = -d * exp_neg(row[i] - shift);
}

/** Reads (heap: Float32Array, then `n` int32s); returns the heap's floats or NULL with an exception pending. */
static float *heap_and_ints(napi_env env, napi_callback_info info, int32_t *ints, size_t n, size_t *heapLen) {
  size_t argc = 15;
  napi_value argv[15];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < n + 1 || n > 14) {
    napi_throw_type_error(env, NULL, "blas.node: wrong number of arguments");
    return NULL;
  }
  napi_typedarray_type type;
  void *data;
  napi_value ab;
  size_t byteOff;
  if (napi_get_typedarray_info(env, argv[0], &type, heapLen, &data, &ab, &byteOff) != napi_ok || type != napi_float32_array) {
    napi_throw_type_error(env, NULL, "blas.node: the heap must be a Float32Array");
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    if (napi_get_value_int32(env, argv[i + 1], &ints[i]) != napi_ok || ints[i] < 0) {
      napi_throw_type_error(env, NULL, "blas.node: offsets and sizes are non-negative int32s");
      return NULL;
    }
  }
  return (float *)data;
}

/** Whether every operand, given as (offset, length) pairs in floats, lies inside the heap; throws a RangeError if not. */
static int fit(napi_env env, size_t heapLen, const int64_t *spans, size_t pairs) {
  for (size_t i = 0; i < pairs; i++) {
    if (spans[2 * i] + spans[2 * i + 1] > (int64_t)heapLen) {
      napi_throw_range_error(env, NULL, "blas.node: an operand lies outside the heap");
      return 0;
    }
  }
  return 1;
}
#define FIT(...) fit(env, heapLen, (const int64_t[]){__VA_ARGS__}, sizeof((const int64_t[]){__VA_ARGS__}) / (2 * sizeof(int64_t)))

// A native kernel's prologue: its n int32 arguments in a[], the heap's floats in heap (heapLen of them), or return with
// the exception pending.
#define KERNEL_ARGS(n)                                                                                               \
  int32_t a[n];                                                                                                      \
  size_t heapLen;                                                                                                    \
  float *heap = heap_and_ints(env, info, a, n, &heapLen);                                                            \
  if (!heap) return NULL

// ---- two cores for the row loops ------------------------------------------------------------------------------------
//
// A kernel whose rows are independent runs the first half of them here and the second half on a new thread, when it
// touches at least SPLIT_MIN_FLOATS floats (the decode step's kernels stay on one thread: a new thread costs ~30 µs,
// more than their work). The halves depend on the row count alone, and a kernel that sums over rows keeps one sum per half (part 0, 1) whether or
// not the second thread ran, so the bits do not depend on the cores.
#define SPLIT_MIN_FLOATS (1 << 18)

typedef struct {
  float *heap;
  const int32_t *a; /* the kernel's int32 arguments */
  void *scratch;    /* per-part scratch (part p takes the p-th half), or NULL */
} rows_ctx;
typedef void (*rows_fn)(const rows_ctx *c, int32_t from, int32_t to, int part);
typedef struct {
  rows_fn fn;
  const rows_ctx *c;
  int32_t from, to;
  int part;
} rows_job;

static void *rows_job_run(void *p) {
  const rows_job *j = p;
  j->fn(j->c, j->from, j->to, j->part);
  return NULL;
}

static void split_rows(rows_fn fn, const rows_ctx *c, int32_t rows, int64_t floats) {
  rows_job first = {fn, c, 0, rows / 2, 0}, second = {fn, c, rows / 2, rows, 1};
  if (rows >= 2 && floats >= SPLIT_MIN_FLOATS) {
    on_two_cores(rows_job_run, &first, &second);
  } else {
    rows_job_run(&first);
    rows_job_run(&second);
  }
}

static void logprob_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t zOff = c->a[0], tOff = c->a[1], V = c->a[3], lpOff = c->a[4], lseOff = c->a[5];
  float *heap = c->heap, *tmp = (float *)c->scratch + (int64_t)part * V;
  const int32_t *targets = (const int32_t *)(heap + tOff);
  for (int32_t n = from; n < to; n++) {
    const float *z = heap + zOff + (int64_t)n * V;
    float mx = -INFINITY;
    for (int32_t v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    exp_shifted(z, mx, tmp, V);
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int32_t v = 0;
    for (; v + 4 <= V; v += 4) { s0 += tmp[v]; s1 += tmp[v + 1]; s2 += tmp[v + 2]; s3 += tmp[v + 3]; }
    for (; v < V; v++) s0 += tmp[v];
    const double lse = (double)mx + log((s0 + s1) + (s2 + s3));
    heap[lseOff + n] = (float)lse;
    heap[lpOff + n] = (float)((double)z[targets[n]] - lse);
  }
}

// logprob(heap, logits, targets, N, V, logp, lse): per row n of logits [N, V], lse[n] = log Σ_v e^z (max-shifted, the
// sum in float64) and logp[n] = z[targets[n]] − lse[n]; targets is int32, in range (checked by the caller).
static napi_value Logprob(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(6);
  const int32_t zOff = a[0], tOff = a[1], N = a[2], V = a[3], lpOff = a[4], lseOff = a[5];
  if (!FIT(zOff, (int64_t)N * V, tOff, N, lpOff, N, lseOff, N)) return NULL;
  float *tmp = malloc(sizeof(float) * 2 * (V > 0 ? V : 1));
  if (!tmp) { napi_throw_error(env, NULL, "blas.node: out of memory"); return NULL; }
  split_rows(logprob_rows, &(rows_ctx){heap, a, tmp}, N, (int64_t)N * V);
  free(tmp);
  return NULL;
}

static void logprob_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t zOff = c->a[0], tOff = c->a[1], lseOff = c->a[2], dyOff = c->a[3], outOff = c->a[4], V = c->a[6];
  float *heap = c->heap;
  const int32_t *targets = (const int32_t *)(heap + tOff);
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float d = heap[dyOff + n];
    float *out = heap + outOff + (int64_t)n * V;
    neg_scaled_exp(heap + zOff + (int64_t)n * V, heap[lseOff + n], d, out, V);
    out[targets[n]] += d;
  }
}

// logprobGrad(heap, logits, targets, lse, dy, out, N, V): out[n, v] = dy[n]·(δ(v, targets[n]) − e^(z[n, v] − lse[n])),
// the gradient of logprob's logp for upstream dy [N].
static napi_value LogprobGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(7);
  const int32_t zOff = a[0], tOff = a[1], lseOff = a[2], dyOff = a[3], outOff = a[4], N = a[5], V = a[6];
  if (!FIT(zOff, (int64_t)N * V, tOff, N, lseOff, N, dyOff, N, outOff, (int64_t)N * V)) return NULL;
  split_rows(logprob_grad_rows, &(rows_ctx){heap, a, NULL}, N, (int64_t)N * 2 * V);
  return NULL;
}

// ---- RMSNorm, forward and backward ------------------------------------------------------------------------------

// y[j] = (x[j]·r)·w[j] for j < d
VECTOR_CLONES static void scale_row(const float *x, float r, const float *w, float *y, int d) {
  for (int j = 0; j < d; j++) y[j] = (x[j] * r) * w[j];
}

// dx[j] = r·(dy[j]·w[j]) − x[j]·c and acc[j] += dy[j]·x[j]·r (float64) for j < d
VECTOR_CLONES static void norm_grad_row(const float *x, const float *w, const float *dy, float r, float c, float *dx, double *acc, int d) {
  for (int j = 0; j < d; j++) {
    dx[j] = r * (dy[j] * w[j]) - x[j] * c;
    acc[j] += (double)(dy[j] * x[j]) * r;
  }
}

static void rmsnorm_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t xOff = c->a[0], wOff = c->a[1], yOff = c->a[2], rOff = c->a[3], d = c->a[5];
  float eps;
  memcpy(&eps, &c->a[6], 4);
  float *heap = c->heap;
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float *x = heap + xOff + (int64_t)n * d;
    double ss = 0;
    for (int32_t j = 0; j < d; j++) ss += (double)x[j] * x[j];
    const float r = (float)(1.0 / sqrt((double)(float)(ss / d) + eps));
    heap[rOff + n] = r;
    scale_row(x, r, heap + wOff, heap + yOff + (int64_t)n * d, d);
  }
}

// rmsnorm(heap, x, w, y, rinv, N, d, epsBits): per row of x [N, d], rinv = 1/√(mean(x²) + eps) (sum of squares in
// float64) and y = x·rinv·w; eps is passed as its float32 bits.
static napi_value RmsNorm(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(7);
  const int32_t xOff = a[0], wOff = a[1], yOff = a[2], rOff = a[3], N = a[4], d = a[5];
  if (!FIT(xOff, (int64_t)N * d, wOff, d, yOff, (int64_t)N * d, rOff, N)) return NULL;
  split_rows(rmsnorm_rows, &(rows_ctx){heap, a, NULL}, N, (int64_t)N * 2 * d);
  return NULL;
}

static void rmsnorm_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t xOff = c->a[0], wOff = c->a[1], rOff = c->a[2], dyOff = c->a[3], dxOff = c->a[4], d = c->a[7];
  float *heap = c->heap;
  double *acc = (double *)c->scratch + (int64_t)part * d;
  const float *w = heap + wOff;
  for (int32_t n = from; n < to; n++) {
    const float *x = heap + xOff + (int64_t)n * d, *dy = heap + dyOff + (int64_t)n * d;
    const float r = heap[rOff + n];
    double dot = 0;
    for (int32_t j = 0; j < d; j++) dot += (double)(dy[j] * w[j]) * x[j];
    const float k = (float)(dot * r * r * r / d);
    norm_grad_row(x, w, dy, r, k, heap + dxOff + (int64_t)n * d, acc, d);
  }
}

// rmsnormGrad(heap, x, w, rinv, dy, dx, dw, N, d): the gradient of rmsnorm's y for upstream dy. With g = dy·w,
// dx = rinv·g − x·rinv³·(Σ g·x)/d per row, and dw = Σ_rows dy·x·rinv (accumulated in float64, one sum per half of
// the rows, then added).
static napi_value RmsNormGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(8);
  const int32_t xOff = a[0], wOff = a[1], rOff = a[2], dyOff = a[3], dxOff = a[4], dwOff = a[5], N = a[6], d = a[7];
  if (!FIT(xOff, (int64_t)N * d, wOff, d, rOff, N, dyOff, (int64_t)N * d, dxOff, (int64_t)N * d, dwOff, d)) return NULL;
  double *acc = calloc(2 * (d > 0 ? d : 1), sizeof(double));
  if (!acc) { napi_throw_error(env, NULL, "blas.node: out of memory"); return NULL; }
  split_rows(rmsnorm_grad_rows, &(rows_ctx){heap, a, acc}, N, (int64_t)N * 3 * d);
  for (int32_t j = 0; j < d; j++) heap[dwOff + j] = (float)(acc[j] + acc[d + j]);
  free(acc);
  return NULL;
}

// ---- the attention softmax with its additive mask, and its gradient, by row -----------------------------------------

// out[i] = e^(row[i] + mask[i] − shift) for i < n
VECTOR_CLONES static void exp_masked(const float *row, const float *mask, float shift, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = exp_neg((row[i] + mask[i]) - shift);
}
// p[i] *= s for i < n
VECTOR_CLONES static void scale_in_place(float *p, float s, int n) {
  for (int i = 0; i < n; i++) p[i] *= s;
}
// ds[i] = p[i]·(dp[i] − c) for i < n
VECTOR_CLONES static void softmax_grad_row(const float *p, const float *dp, float c, float *ds, int n) {
  for (int i = 0; i < n; i++) ds[i] = p[i] * (dp[i] - c);
}

// softmax(s + mask) of one row in place, the sum in float64
static inline void masked_softmax_row(float *s, const float *m, int n) {
  float mx = -INFINITY;
  for (int k = 0; k < n; k++) { const float v = s[k] + m[k]; mx = v > mx ? v : mx; }
  exp_masked(s, m, mx, s, n);
  double sum = 0;
  for (int k = 0; k < n; k++) sum += s[k];
  scale_in_place(s, (float)(1.0 / sum), n);
}

// ---- attention of a whole sequence (the training forward and the prefill), fused ------------------------------------
//
// Per batch element b and kv head g, the rep = H / Hkv query heads that share it: scores, masked softmax and ·V forward;
// the five products and the softmax gradient backward. The scores of one (b, g) stay in cache between the products
// and the softmax, the context is written straight into the merged [B·T, H·hd] layout the output projection reads
// (no transpose either way), and the (b, g) pairs are split over two threads with OpenBLAS on one thread in each, as
// for a batch of small products in Gemm.

typedef struct {
  float *heap;
  int32_t B, H, Hkv, T, Tk, hd;
  int64_t q, k, v, mask, p, o;  /* forward: inputs q, k, v, mask; outputs p (probs), o (merged context) */
  int64_t dq, dk, dv;           /* backward: o is the upstream gradient of the context; p, q, k, v as saved */
  int32_t from, to;             /* (b, g) pairs [from, to) */
  int ok;
} attn_part;

static void *attn_forward_part(void *arg) {
  attn_part *a = arg;
  float *heap = a->heap;
  const int32_t T = a->T, Tk = a->Tk, hd = a->hd, H = a->H, rep = a->H / a->Hkv;
  for (int32_t j = a->from; j < a->to; j++) {
    const int32_t b = j / a->Hkv, g = j % a->Hkv;
    const int64_t h0 = (int64_t)b * H + (int64_t)g * rep; /* first query head of the group, as a [B·H] index */
    const float *Q = heap + a->q + h0 * T * hd, *K = heap + a->k + (int64_t)j * Tk * hd, *V = heap + a->v + (int64_t)j * Tk * hd;
    float *P = heap + a->p + h0 * T * Tk;
    sgemm(ROW_MAJOR, NO_TRANS, TRANS, rep * T, Tk, hd, 1.0f, Q, hd, K, hd, 0.0f, P, Tk);
    for (int32_t r = 0; r < rep * T; r++) masked_softmax_row(P + (int64_t)r * Tk, heap + a->mask + ((int64_t)b * T + r % T) * Tk, Tk);
    for (int32_t i = 0; i < rep; i++) {
      sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, T, hd, Tk, 1.0f, P + (int64_t)i * T * Tk, Tk, V, hd, 0.0f,
            heap + a->o + (int64_t)b * T * H * hd + (int64_t)(g * rep + i) * hd, H * hd);
    }
  }
  return NULL;
}

static void *attn_backward_part(void *arg) {
  attn_part *a = arg;
  float *heap = a->heap;
  const int32_t T = a->T, Tk = a->Tk, hd = a->hd, H = a->H, rep = a->H / a->Hkv;
  float *dS = malloc(sizeof(float) * (size_t)rep * T * Tk);
  if (!dS) { a->ok = 0; return NULL; }
  for (int32_t j = a->from; j < a->to; j++) {
    const int32_t b = j / a->Hkv, g = j % a->Hkv;
    const int64_t h0 = (int64_t)b * H + (int64_t)g * rep;
    const float *Q = heap + a->q + h0 * T * hd, *K = heap + a->k + (int64_t)j * Tk * hd, *V = heap + a->v + (int64_t)j * Tk * hd;
    const float *P = heap + a->p + h0 * T * Tk;
    float *dV = heap + a->dv + (int64_t)j * Tk * hd;
    for (int32_t i = 0; i < rep; i++) {
      const float *dO = heap + a->o + (int64_t)b * T * H * hd + (int64_t)(g * rep + i) * hd;
      const float *Pi = P + (int64_t)i * T * Tk;
      /* dV += P_iᵀ·dO_i, dP_i = dO_i·Vᵀ */
      sgemm(ROW_MAJOR, TRANS, NO_TRANS, Tk, hd, T, 1.0f, Pi, Tk, dO, H * hd, i ? 1.0f : 0.0f, dV, hd);
      sgemm(ROW_MAJOR, NO_TRANS, TRANS, T, Tk, hd, 1.0f, dO, H * hd, V, hd, 0.0f, dS + (int64_t)i * T * Tk, Tk);
    }
    for (int32_t r = 0; r < rep * T; r++) {
      const float *p = P + (int64_t)r * Tk;
      float *d = dS + (int64_t)r * Tk;
      double c = 0;
      for (int32_t k = 0; k < Tk; k++) c += (double)d[k] * p[k];
      softmax_grad_row(p, d, (float)c, d, Tk);
    }
    /* dQ = dS·K, dK = dSᵀ·Q over the group's rep·T query rows */
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, rep * T, hd, Tk, 1.0f, dS, Tk, K, hd, 0.0f, heap + a->dq + h0 * T * hd, hd);
    sgemm(ROW_MAJOR, TRANS, NO_TRANS, Tk, hd, rep * T, 1.0f, dS, Tk, Q, hd, 0.0f, heap + a->dk + (int64_t)j * Tk * hd, hd);
  }
  free(dS);
  return NULL;
}

/** Runs part over the (b, g) pairs [0, pairs) on two threads (OpenBLAS on one in each) or, for one pair or one core, on this one. */
static int attn_run(attn_part *part, void *(*fn)(void *), int32_t pairs) {
  part->from = 0;
  part->to = pairs;
  part->ok = 1;
  const int threads = get_threads && set_threads ? get_threads() : 1;
  if (pairs < 2 || threads < 2) {
    fn(part);
    return part->ok;
  }
  attn_part second = *part;
  second.from = part->to = pairs / 2;
  on_two_cores(fn, part, &second);
  return part->ok && second.ok;
}

// Both directions' sizes from (B, H, Hkv, T, Tk, hd) at d: q's, k's (and v's) and p's floats; 0 with an exception pending
// when there is no BLAS or the sizes do not fit.
static int attn_sizes(napi_env env, const int32_t *d, int64_t *qn, int64_t *kn, int64_t *pn) {
  const int32_t B = d[0], H = d[1], Hkv = d[2], T = d[3], Tk = d[4], hd = d[5];
  if (!sgemm) { napi_throw_error(env, NULL, "blas.node: open() a BLAS library first"); return 0; }
  if (Hkv <= 0 || H % Hkv != 0 || T <= 0 || Tk <= 0 || hd <= 0) {
    napi_throw_range_error(env, NULL, "attention: needs H a multiple of Hkv and positive sizes");
    return 0;
  }
  *qn = (int64_t)B * H * T * hd, *kn = (int64_t)B * Hkv * Tk * hd, *pn = (int64_t)B * H * T * Tk;
  return 1;
}

// attention(heap, q, k, v, mask, p, o, B, H, Hkv, T, Tk, hd): q [B, H, T, hd] (1/√hd folded in), k and v [B, Hkv, Tk, hd],
// the additive mask [B, 1, T, Tk]; p [B, H, T, Tk] = softmax(q·kᵀ + mask) (sum in float64) and the context o [B·T, H·hd]
// = p·v with the heads merged. Query head h reads kv head h / (H / Hkv).
static napi_value Attention(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(12);
  const int32_t B = a[6], H = a[7], Hkv = a[8], T = a[9], Tk = a[10], hd = a[11];
  int64_t qn, kn, pn;
  if (!attn_sizes(env, a + 6, &qn, &kn, &pn) || !FIT(a[0], qn, a[1], kn, a[2], kn, a[3], (int64_t)B * T * Tk, a[4], pn, a[5], qn)) return NULL;
  attn_part part = {heap, B, H, Hkv, T, Tk, hd, a[0], a[1], a[2], a[3], a[4], a[5], 0, 0, 0, 0, 0, 1};
  attn_run(&part, attn_forward_part, B * Hkv);
  return NULL;
}

// attentionGrad(heap, q, k, v, p, do, dq, dk, dv, B, H, Hkv, T, Tk, hd) — 14 ints: the gradient of attention for the
// upstream do [B·T, H·hd] of the merged context, with q, k, v and p as attention took and made them. With dS =
// p·(dP − Σ dP·p) and dP = do·vᵀ per head: dq = dS·k, dk = Σ_heads dSᵀ·q, dv = Σ_heads pᵀ·do. The mask takes none.
static napi_value AttentionGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(14);
  const int32_t B = a[8], H = a[9], Hkv = a[10], T = a[11], Tk = a[12], hd = a[13];
  int64_t qn, kn, pn;
  if (!attn_sizes(env, a + 8, &qn, &kn, &pn) || !FIT(a[0], qn, a[1], kn, a[2], kn, a[3], pn, a[4], qn, a[5], qn, a[6], kn, a[7], kn)) return NULL;
  attn_part part = {heap, B, H, Hkv, T, Tk, hd, a[0], a[1], a[2], 0, a[3], a[4], a[5], a[6], a[7], 0, 0, 1};
  if (!attn_run(&part, attn_backward_part, B * Hkv)) napi_throw_error(env, NULL, "blas.node: out of memory");
  return NULL;
}

// ---- the attention heads of the fused q|k|v projection, with RoPE -------------------------------------------------

// y = x·c + swap(x)·s over one head row of hd = 2·half floats, swap exchanging the halves (the sign of rotate_half is
// folded into s)
VECTOR_CLONES static void rope_row(const float *restrict x, const float *restrict c, const float *restrict s, float *restrict y, int half) {
  const float *x2 = x + half, *c2 = c + half, *s2 = s + half;
  float *y2 = y + half;
  for (int i = 0; i < half; i++) y[i] = x[i] * c[i] + x2[i] * s[i];
  for (int i = 0; i < half; i++) y2[i] = x2[i] * c2[i] + x[i] * s2[i];
}
// dx = dy·c − swap(dy)·s: the gradient of rope_row (s at the swapped index is −s at this one)
VECTOR_CLONES static void rope_grad_row(const float *restrict dy, const float *restrict c, const float *restrict s, float *restrict dx, int half) {
  const float *dy2 = dy + half, *c2 = c + half, *s2 = s + half;
  float *dx2 = dx + half;
  for (int i = 0; i < half; i++) dx[i] = dy[i] * c[i] - dy2[i] * s[i];
  for (int i = 0; i < half; i++) dx2[i] = dy2[i] * c2[i] - dy[i] * s2[i];
}

// The head row of qkv [B, T, H + 2·Hkv, hd] at (b, t, h) and where it goes: q [B, H, T, hd] for h < H, k [B, Hkv, T, hd]
// for the next Hkv, v [B, Hkv, T, hd] for the last Hkv. Returns 0 for q, 1 for k, 2 for v.
static inline int head_place(int32_t b, int32_t t, int32_t h, int32_t T, int32_t H, int32_t Hkv, int32_t hd, int64_t *off) {
  if (h < H) { *off = (((int64_t)b * H + h) * T + t) * hd; return 0; }
  if (h < H + Hkv) { *off = (((int64_t)b * Hkv + h - H) * T + t) * hd; return 1; }
  *off = (((int64_t)b * Hkv + h - H - Hkv) * T + t) * hd;
  return 2;
}

// The row loop of both directions, batch elements [from, to): forward (a = qkv, cos, sin, q, k, v, …) rotates each head row
// of qkv into q or k, or copies it into v; backward (a = dq, dk, dv, cos, sin, dqkv, …) rotates back and gathers.
static void qkv_heads_loop(const rows_ctx *c, int32_t from, int32_t to, bool grad) {
  const int32_t *a = c->a, T = a[7], H = a[8], Hkv = a[9], hd = a[10];
  float *heap = c->heap, *x0 = heap + a[grad ? 5 : 0], *parts[3];
  const float *cs = heap + a[grad ? 3 : 1], *sn = heap + a[grad ? 4 : 2];
  for (int i = 0; i < 3; i++) parts[i] = heap + a[grad ? i : 3 + i];
  const int64_t W = (int64_t)(H + 2 * Hkv) * hd;
  for (int32_t b = from; b < to; b++) {
    for (int32_t t = 0; t < T; t++) {
      float *x = x0 + ((int64_t)b * T + t) * W;
      for (int32_t h = 0; h < H + 2 * Hkv; h++, x += hd) {
        int64_t off;
        const int which = head_place(b, t, h, T, H, Hkv, hd, &off);
        float *part = parts[which] + off;
        const int64_t tr = ((int64_t)h * T + t) * hd;
        if (which == 2) memcpy(grad ? x : part, grad ? part : x, sizeof(float) * hd);
        else if (grad) rope_grad_row(part, cs + tr, sn + tr, x, hd / 2);
        else rope_row(x, cs + tr, sn + tr, part, hd / 2);
      }
    }
  }
}
static void qkv_heads_rows(const rows_ctx *c, int32_t from, int32_t to, int part) { (void)part; qkv_heads_loop(c, from, to, false); }
static void qkv_heads_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) { (void)part; qkv_heads_loop(c, from, to, true); }

// Both directions' prologue: a[] as in qkv_heads_loop, shapes checked, then the rows over two cores.
static napi_value qkv_heads_kernel(napi_env env, napi_callback_info info, bool grad) {
  KERNEL_ARGS(11);
  const int32_t B = a[6], T = a[7], H = a[8], Hkv = a[9], hd = a[10];
  if (hd % 2 != 0) {
    napi_throw_range_error(env, NULL, grad ? "qkvHeadsGrad: the head dimension must be even" : "qkvHeads: the head dimension must be even");
    return NULL;
  }
  const int64_t rows = (int64_t)B * T, W = (int64_t)(H + 2 * Hkv) * hd, tab = (int64_t)(H + Hkv) * T * hd;
  const int x = grad ? 5 : 0, cs = grad ? 3 : 1, q = grad ? 0 : 3;
  if (!FIT(a[x], rows * W, a[cs], tab, a[cs + 1], tab, a[q], rows * H * hd, a[q + 1], rows * Hkv * hd, a[q + 2], rows * Hkv * hd)) return NULL;
  split_rows(grad ? qkv_heads_grad_rows : qkv_heads_rows, &(rows_ctx){heap, a, NULL}, B, 2 * rows * W);
  return NULL;
}

// qkvHeads(heap, qkv, cos, sin, q, k, v, B, T, H, Hkv, hd): splits the fused projection qkv [B·T, (H + 2·Hkv)·hd] into
// head-major q, k and v, rotating q and k by RoPE on the way: row (b, t, h) of q or k is x·cos + swap(x)·sin with the
// tables' row (h, t) (tables [H + Hkv, T, hd], sin sign-folded, 1/√hd folded into q's rows); v is copied.
static napi_value QkvHeads(napi_env env, napi_callback_info info) { return qkv_heads_kernel(env, info, false); }

// qkvHeadsGrad(heap, dq, dk, dv, cos, sin, dqkv, B, T, H, Hkv, hd): the gradient of qkvHeads for upstream dq, dk, dv:
// the inverse rotation of dq and dk (dy·cos − swap(dy)·sin) and dv, gathered back into dqkv [B·T, (H + 2·Hkv)·hd].
static napi_value QkvHeadsGrad(napi_env env, napi_callback_info info) { return qkv_heads_kernel(env, info, true); }

// ---- SwiGLU -----------------------------------------------------------------------------------------------------------

// σ(x) = 1 / (1 + e^−x) from e = e^−|x| (never overflows): 1/(1 + e) for x ≥ 0, e/(1 + e) below; one exp and a blend,
// so the loops below vectorise.
static inline float sigmoid(float x) {
  const float e = exp_neg(-fabsf(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

// out = (g·σ(g))·u and sig = σ(g) for j < F
VECTOR_CLONES static void swiglu_row(const float *restrict g, const float *restrict u, float *restrict out, float *restrict sig, int F) {
  for (int j = 0; j < F; j++) {
    const float s = sigmoid(g[j]);
    sig[j] = s;
    out[j] = (g[j] * s) * u[j];
  }
}

// dg = d·σ·u·(1 + g·(1 − σ)) and du = d·σ·g for j < F
VECTOR_CLONES static void swiglu_grad_row(const float *restrict g, const float *restrict u, const float *restrict sig, const float *restrict d,
                                          float *restrict dg, float *restrict du, int F) {
  for (int j = 0; j < F; j++) {
    const float ds = d[j] * sig[j];
    du[j] = ds * g[j];
    dg[j] = (ds * u[j]) * (1.0f + g[j] * (1.0f - sig[j]));
  }
}

static void swiglu_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t guOff = c->a[0], outOff = c->a[1], sigOff = c->a[2], F = c->a[4];
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float *g = c->heap + guOff + (int64_t)n * 2 * F;
    swiglu_row(g, g + F, c->heap + outOff + (int64_t)n * F, c->heap + sigOff + (int64_t)n * F, F);
  }
}

// swiglu(heap, gu, out, sig, N, F): per row of gu [N, 2F] = gate | up, out = (g·σ(g))·u and sig = σ(g), [N, F] each.
static napi_value Swiglu(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(5);
  const int32_t guOff = a[0], outOff = a[1], sigOff = a[2], N = a[3], F = a[4];
  if (!FIT(guOff, (int64_t)N * 2 * F, outOff, (int64_t)N * F, sigOff, (int64_t)N * F)) return NULL;
  split_rows(swiglu_rows, &(rows_ctx){heap, a, NULL}, N, (int64_t)N * 4 * F);
  return NULL;
}

static void swiglu_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const int32_t guOff = c->a[0], sigOff = c->a[1], dyOff = c->a[2], outOff = c->a[3], F = c->a[5];
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float *g = c->heap + guOff + (int64_t)n * 2 * F;
    float *o = c->heap + outOff + (int64_t)n * 2 * F;
    swiglu_grad_row(g, g + F, c->heap + sigOff + (int64_t)n * F, c->heap + dyOff + (int64_t)n * F, o, o + F, F);
  }
}

// swigluGrad(heap, gu, sig, dy, out, N, F): out [N, 2F] = [dy·σ·u·(1 + g·(1 − σ)) | dy·σ·g], the gradient of swiglu.
static napi_value SwigluGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(6);
  const int32_t guOff = a[0], sigOff = a[1], dyOff = a[2], outOff = a[3], N = a[4], F = a[5];
  if (!FIT(guOff, (int64_t)N * 2 * F, sigOff, (int64_t)N * F, dyOff, (int64_t)N * F, outOff, (int64_t)N * 2 * F)) return NULL;
  split_rows(swiglu_grad_rows, &(rows_ctx){heap, a, NULL}, N, (int64_t)N * 6 * F);
  return NULL;
}

// ---- decode step on the in-place KV cache ---------------------------------------------------------------------------

// One query row q [hd] against the first n keys of K [hd, cap] (transposed) and values V [cap, hd]; mask m [cap] holds 1
// for a real key, a hidden one scores −1e9 as in the generic path. o [hd] = softmax(q·K + mask)·V (sum in float64);
// s is scratch for n scores. The inner loops run 8 wide in the AVX2 clone.
VECTOR_CLONES static void attend_row(const float *restrict q, const float *restrict K, const float *restrict V, const float *restrict m,
                                     float *restrict o, float *restrict s, int hd, int cap, int n) {
  for (int t = 0; t < n; t++) s[t] = 0.0f;
  for (int i = 0; i < hd; i++) {
    const float qi = q[i], *k = K + (int64_t)i * cap;
    for (int t = 0; t < n; t++) s[t] += qi * k[t];
  }
  float mx = -INFINITY;
  for (int t = 0; t < n; t++) {
    s[t] += (m[t] - 1.0f) * 1e9f;
    mx = s[t] > mx ? s[t] : mx;
  }
  for (int t = 0; t < n; t++) s[t] = exp_neg(s[t] - mx);
  double sum = 0;
  for (int t = 0; t < n; t++) sum += s[t];
  const float inv = (float)(1.0 / sum);
  for (int j = 0; j < hd; j++) o[j] = 0.0f;
  for (int t = 0; t < n; t++) {
    const float p = s[t] * inv, *v = V + (int64_t)t * hd;
    for (int j = 0; j < hd; j++) o[j] += p * v[j];
  }
}

// decodeStep(heap, qkv, tabs, keys, values, mask, out, B, H, Hkv, hd, cap, pos): one decode step of attention for every
// row, the cache written in place. qkv [B, (H + 2·Hkv)·hd] is the fused projection of the new token; tabs [4, hd] the
// RoPE row of pos: cos and sin times 1/√hd (for q), then cos and sin (for k), sin sign-folded. The rotated key goes
// to column pos of keys [B, Hkv, hd, cap], the value to row pos of values [B, Hkv, cap, hd], 1 to mask [B, cap] at pos;
// then out [B, H·hd] = attention of each rotated query over the first n = pos + 1 positions, rounded up to a multiple
// of 4 (hidden keys past pos score −1e9, so their weight is exactly 0). Query head h reads kv head h / (H / Hkv).
static napi_value DecodeStep(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(12);
  const int32_t xOff = a[0], tOff = a[1], kOff = a[2], vOff = a[3], mOff = a[4], oOff = a[5], B = a[6], H = a[7], Hkv = a[8], hd = a[9],
                cap = a[10], pos = a[11];
  if (Hkv <= 0 || H % Hkv != 0 || hd % 2 != 0 || pos >= cap) {
    napi_throw_range_error(env, NULL, "decodeStep: needs H a multiple of Hkv, an even head dimension and pos < capacity");
    return NULL;
  }
  const int64_t kv = (int64_t)B * Hkv * hd * cap, W = (int64_t)(H + 2 * Hkv) * hd;
  if (!FIT(xOff, B * W, tOff, 4 * (int64_t)hd, kOff, kv, vOff, kv, mOff, (int64_t)B * cap, oOff, (int64_t)B * H * hd)) return NULL;
  const int32_t n = ((pos + 4) / 4) * 4 < cap ? ((pos + 4) / 4) * 4 : cap, rep = H / Hkv, half = hd / 2;
  float *scratch = malloc(sizeof(float) * (n + 2 * hd));
  if (!scratch) { napi_throw_error(env, NULL, "blas.node: out of memory"); return NULL; }
  float *s = scratch, *q = scratch + n, *kr = q + hd;
  const float *qc = heap + tOff, *qs = qc + hd, *kc = qs + hd, *ks = kc + hd;
  for (int32_t b = 0; b < B; b++) {
    const float *x = heap + xOff + b * W;
    float *m = heap + mOff + (int64_t)b * cap;
    m[pos] = 1.0f;
    for (int32_t g = 0; g < Hkv; g++) {
      const int64_t kvh = (int64_t)b * Hkv + g;
      rope_row(x + (int64_t)(H + g) * hd, kc, ks, kr, half);
      float *K = heap + kOff + kvh * hd * cap + pos;
      for (int32_t i = 0; i < hd; i++) K[(int64_t)i * cap] = kr[i];
      memcpy(heap + vOff + (kvh * cap + pos) * hd, x + (int64_t)(H + Hkv + g) * hd, sizeof(float) * hd);
    }
    for (int32_t h = 0; h < H; h++) {
      const int64_t kvh = (int64_t)b * Hkv + h / rep;
      rope_row(x + (int64_t)h * hd, qc, qs, q, half);
      attend_row(q, heap + kOff + kvh * hd * cap, heap + vOff + kvh * cap * hd, m, heap + oOff + ((int64_t)b * H + h) * hd, s, hd, cap, n);
    }
  }
  free(scratch);
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"open", NULL, Open, NULL, NULL, NULL, napi_default, NULL},
      {"threads", NULL, Threads, NULL, NULL, NULL, napi_default, NULL},
      {"gemm", NULL, Gemm, NULL, NULL, NULL, napi_default, NULL},
      {"logprob", NULL, Logprob, NULL, NULL, NULL, napi_default, NULL},
      {"logprobGrad", NULL, LogprobGrad, NULL, NULL, NULL, napi_default, NULL},
      {"rmsnorm", NULL, RmsNorm, NULL, NULL, NULL, napi_default, NULL},
      {"rmsnormGrad", NULL, RmsNormGrad, NULL, NULL, NULL, napi_default, NULL},
      {"attention", NULL, Attention, NULL, NULL, NULL, napi_default, NULL},
      {"attentionGrad", NULL, AttentionGrad, NULL, NULL, NULL, napi_default, NULL},
      {"qkvHeads", NULL, QkvHeads, NULL, NULL, NULL, napi_default, NULL},
      {"qkvHeadsGrad", NULL, QkvHeadsGrad, NULL, NULL, NULL, napi_default, NULL},
      {"swiglu", NULL, Swiglu, NULL, NULL, NULL, napi_default, NULL},
      {"swigluGrad", NULL, SwigluGrad, NULL, NULL, NULL, napi_default, NULL},
      {"decodeStep", NULL, DecodeStep, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE_INIT() { return Init(env, exports); }
