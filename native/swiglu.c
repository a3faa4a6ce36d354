// SwiGLU of the fused gate | up projection, forward and backward (kernels/native.ts, ops/wasm_blas.ts).
#include "common.h"

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
  const swiglu_args *A = c->args;
  const int32_t guOff = A->gu, outOff = A->out, sigOff = A->sig, F = A->F;
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float *g = c->heap + guOff + (int64_t)n * 2 * F;
    swiglu_row(g, g + F, c->heap + outOff + (int64_t)n * F, c->heap + sigOff + (int64_t)n * F, F);
  }
}

// swiglu(heap, gu, out, sig, N, F): per row of gu [N, 2F] = gate | up, out = (g·σ(g))·u and sig = σ(g), [N, F] each.
napi_value Swiglu(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(swiglu);
  const int32_t guOff = A.gu, outOff = A.out, sigOff = A.sig, N = A.N, F = A.F;
  if (!FIT(guOff, (int64_t)N * 2 * F, outOff, (int64_t)N * F, sigOff, (int64_t)N * F)) return NULL;
  split_rows(swiglu_rows, &(rows_ctx){heap, &A, NULL}, N, (int64_t)N * 4 * F);
  return NULL;
}

static void swiglu_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const swigluGrad_args *A = c->args;
  const int32_t guOff = A->gu, sigOff = A->sig, dyOff = A->dy, outOff = A->out, F = A->F;
  (void)part;
  for (int32_t n = from; n < to; n++) {
    const float *g = c->heap + guOff + (int64_t)n * 2 * F;
    float *o = c->heap + outOff + (int64_t)n * 2 * F;
    swiglu_grad_row(g, g + F, c->heap + sigOff + (int64_t)n * F, c->heap + dyOff + (int64_t)n * F, o, o + F, F);
  }
}

// swigluGrad(heap, gu, sig, dy, out, N, F): out [N, 2F] = [dy·σ·u·(1 + g·(1 − σ)) | dy·σ·g], the gradient of swiglu.
napi_value SwigluGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(swigluGrad);
  const int32_t guOff = A.gu, sigOff = A.sig, dyOff = A.dy, outOff = A.out, N = A.N, F = A.F;
  if (!FIT(guOff, (int64_t)N * 2 * F, sigOff, (int64_t)N * F, dyOff, (int64_t)N * F, outOff, (int64_t)N * 2 * F)) return NULL;
  split_rows(swiglu_grad_rows, &(rows_ctx){heap, &A, NULL}, N, (int64_t)N * 6 * F);
  return NULL;
}
