// RMSNorm, forward and backward (kernels/native.ts rmsNormNative).
#include "common.h"

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
  const rmsnorm_args *A = c->args;
  const int32_t xOff = A->x, wOff = A->w, yOff = A->y, rOff = A->rinv, d = A->d;
  float eps;
  memcpy(&eps, &A->epsBits, 4);
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
napi_value RmsNorm(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(rmsnorm);
  const int32_t xOff = A.x, wOff = A.w, yOff = A.y, rOff = A.rinv, N = A.N, d = A.d;
  if (!FIT(xOff, (int64_t)N * d, wOff, d, yOff, (int64_t)N * d, rOff, N)) return NULL;
  split_rows(rmsnorm_rows, &(rows_ctx){heap, &A, NULL}, N, (int64_t)N * 2 * d);
  return NULL;
}

static void rmsnorm_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const rmsnormGrad_args *A = c->args;
  const int32_t xOff = A->x, wOff = A->w, rOff = A->rinv, dyOff = A->dy, dxOff = A->dx, d = A->d;
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
napi_value RmsNormGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(rmsnormGrad);
  const int32_t xOff = A.x, wOff = A.w, rOff = A.rinv, dyOff = A.dy, dxOff = A.dx, dwOff = A.dw, N = A.N, d = A.d;
  if (!FIT(xOff, (int64_t)N * d, wOff, d, rOff, N, dyOff, (int64_t)N * d, dxOff, (int64_t)N * d, dwOff, d)) return NULL;
  double *acc = calloc(2 * (d > 0 ? d : 1), sizeof(double));
  if (!acc) { napi_throw_error(env, NULL, "blas.node: out of memory"); return NULL; }
  split_rows(rmsnorm_grad_rows, &(rows_ctx){heap, &A, acc}, N, (int64_t)N * 3 * d);
  for (int32_t j = 0; j < d; j++) heap[dwOff + j] = (float)(acc[j] + acc[d + j]);
  free(acc);
  return NULL;
}
