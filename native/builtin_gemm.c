// The built-in GEMM: cblas_sgemm's row-major products for machines without OpenBLAS (Linux without the package, macOS
// without Homebrew's), so backend wasm-blas and its native kernels run there too. (Windows builds no addon: plain wasm.) Plain wasm multiplies with
// 128-bit SIMD and no fused multiply-add; this is a BLIS-style blocked product whose 6×16 micro-kernel is written once
// with GCC/clang vector types: an AVX2+FMA clone is picked at load time on x86-64 (12 accumulators in 256-bit
// registers), the default build uses what the target has (SSE, or NEON's 32 registers on arm64). Measured here it runs
// the train step's products at several times the wasm loop's rate; OpenBLAS is still faster, and preferred.
//
// Blocks: B's [KC × NC] block is packed into panels of NR columns, A's [MC × KC] block into panels of MR rows (zero-
// padded at the edges), so the micro-kernel reads both contiguously; each output element's sum runs over k in order,
// block by block, so the bits do not depend on the thread that computes the tile.
#include <pthread.h>

#include "common.h"

enum { MR = 6, NR = 16, KC = 256, MC = 96, NC = 2048 };

typedef float v8f __attribute__((vector_size(32)));

static inline float at(const float *X, int ld, bool trans, int r, int c) { return trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]; }

/** acc[MR×NR] = Σ_k a[k·MR + r] · b[k·NR + c] over kc steps of packed panels. */
static inline __attribute__((always_inline)) void micro_body(int kc, const float *restrict a, const float *restrict b, float *restrict acc) {
  v8f c[MR][2];
  for (int r = 0; r < MR; r++) c[r][0] = c[r][1] = (v8f){0};
  for (int k = 0; k < kc; k++) {
    v8f b0, b1;
    memcpy(&b0, b + (size_t)k * NR, sizeof b0);
    memcpy(&b1, b + (size_t)k * NR + 8, sizeof b1);
    const float *ak = a + (size_t)k * MR;
    for (int r = 0; r < MR; r++) {
      const float s = ak[r];
      const v8f x = {s, s, s, s, s, s, s, s};
      c[r][0] += x * b0;
      c[r][1] += x * b1;
    }
  }
  for (int r = 0; r < MR; r++) {
    memcpy(acc + r * NR, &c[r][0], sizeof c[r][0]);
    memcpy(acc + r * NR + 8, &c[r][1], sizeof c[r][1]);
  }
}

typedef void (*micro_fn)(int kc, const float *a, const float *b, float *acc);
static void micro_plain(int kc, const float *a, const float *b, float *acc) { micro_body(kc, a, b, acc); }
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_CLONE 1
__attribute__((target("avx2,fma"))) static void micro_avx2(int kc, const float *a, const float *b, float *acc) { micro_body(kc, a, b, acc); }
#endif

static bool has_avx2(void) {
#ifdef HAVE_AVX2_CLONE
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

/** The micro-kernel for this CPU, chosen on first use. */
static micro_fn micro_for_cpu(void) {
#ifdef HAVE_AVX2_CLONE
  if (has_avx2()) return micro_avx2;
#endif
  return micro_plain;
}

static micro_fn micro = NULL;
static pthread_once_t micro_once = PTHREAD_ONCE_INIT;
static void choose_micro(void) { micro = micro_for_cpu(); }

/** 64-byte aligned room for n floats, or NULL. */
static float *panels(size_t n) { return aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64); }

void builtin_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc) {
  (void)order; /* row-major: the only order the engine uses */
  const bool tA = ta == TRANS, tB = tb == TRANS;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
  if (K == 0 || alpha == 0.0f) return;
  pthread_once(&micro_once, choose_micro);
  // The packed panels, per call: the products here run on threads that start and end with each split (on_two_cores),
  // so a buffer kept per thread would be lost with its thread; one allocation is small beside 2^21 multiply-adds.
  const int ncMax = N < NC ? N : NC, kcMax = K < KC ? K : KC;
  float *bp = panels((size_t)((ncMax + NR - 1) / NR) * NR * kcMax);
  float *ap = panels((size_t)((MC + MR - 1) / MR) * MR * kcMax);
  if (!bp || !ap) abort(); /* out of memory: the engine cannot go on without its products */
  float acc[MR * NR];
  for (int jc = 0; jc < N; jc += NC) {
    const int nc = N - jc < NC ? N - jc : NC;
    const int panelsB = (nc + NR - 1) / NR;
    for (int pc = 0; pc < K; pc += KC) {
      const int kc = K - pc < KC ? K - pc : KC;
      for (int p = 0; p < panelsB; p++)
        for (int k = 0; k < kc; k++)
          for (int c = 0; c < NR; c++) {
            const int j = jc + p * NR + c;
            bp[((size_t)p * kc + k) * NR + c] = j < N ? at(B, ldb, tB, pc + k, j) : 0.0f;
          }
      for (int ic = 0; ic < M; ic += MC) {
        const int mc = M - ic < MC ? M - ic : MC;
        const int panelsA = (mc + MR - 1) / MR;
        for (int p = 0; p < panelsA; p++)
          for (int k = 0; k < kc; k++)
            for (int r = 0; r < MR; r++) {
              const int i = ic + p * MR + r;
              ap[((size_t)p * kc + k) * MR + r] = i < M ? at(A, lda, tA, i, pc + k) : 0.0f;
            }
        for (int pb = 0; pb < panelsB; pb++)
          for (int pa = 0; pa < panelsA; pa++) {
            micro(kc, ap + (size_t)pa * kc * MR, bp + (size_t)pb * kc * NR, acc);
            const int i0 = ic + pa * MR, j0 = jc + pb * NR;
            const int rows = M - i0 < MR ? M - i0 : MR, cols = N - j0 < NR ? N - j0 : NR;
            for (int r = 0; r < rows; r++) {
              float *c = C + (size_t)(i0 + r) * ldc + j0;
              for (int q = 0; q < cols; q++) c[q] += alpha * acc[r * NR + q];
            }
          }
      }
    }
  }
  free(ap);
  free(bp);
}

/** Which micro-kernel this CPU runs: "AVX2+FMA" where it has them (x86-64), else the build's own vectors. */
const char *builtin_gemm_isa(void) {
  if (has_avx2()) return "AVX2+FMA";
#if defined(__x86_64__)
  return "SSE2";
#elif defined(__aarch64__)
  return "NEON";
#else
  return "portable vectors";
#endif
}
