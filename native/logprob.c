// A token's log-prob, log softmax(z)[target], and its gradient (kernels/native.ts tokenLogprob).
#include <stdio.h>

#include "common.h"

// out[i] = e^(row[i] − shift) for i < n
VECTOR_CLONES static void exp_shifted(const float *row, float shift, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = exp_neg(row[i] - shift);
}

// out[i] = −d·e^(row[i] − shift) for i < n
VECTOR_CLONES static void neg_scaled_exp(const float *row, float shift, float d, float *out, int n) {
  for (int i = 0; i < n; i++) out[i] = -d * exp_neg(row[i] - shift);
}

static void logprob_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const logprob_args *A = c->args;
  const int32_t zOff = A->logits, tOff = A->targets, V = A->V, lpOff = A->logp, lseOff = A->lse;
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

// Whether every target is in [0, V); throws a RangeError naming the first that is not (it would index outside its row).
static int targets_in_range(napi_env env, const float *heap, int32_t tOff, int32_t N, int32_t V) {
  const int32_t *targets = (const int32_t *)(heap + tOff);
  for (int32_t n = 0; n < N; n++) {
    if (targets[n] < 0 || targets[n] >= V) {
      char msg[128];
      snprintf(msg, sizeof msg, "blas.node: target %d at row %d is outside the vocabulary [0, %d)", targets[n], n, V);
      napi_throw_range_error(env, NULL, msg);
      return 0;
    }
  }
  return 1;
}

// logprob(heap, logits, targets, N, V, logp, lse): per row n of logits [N, V], lse[n] = log Σ_v e^z (max-shifted, the
// sum in float64) and logp[n] = z[targets[n]] − lse[n]; targets is int32, each in [0, V) (checked here and by the caller).
napi_value Logprob(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(logprob);
  const int32_t zOff = A.logits, tOff = A.targets, N = A.N, V = A.V, lpOff = A.logp, lseOff = A.lse;
  if (!FIT(zOff, (int64_t)N * V, tOff, N, lpOff, N, lseOff, N)) return NULL;
  if (!targets_in_range(env, heap, tOff, N, V)) return NULL;
  float *tmp = malloc(sizeof(float) * 2 * (V > 0 ? V : 1));
  if (!tmp) { napi_throw_error(env, NULL, "blas.node: out of memory"); return NULL; }
  split_rows(logprob_rows, &(rows_ctx){heap, &A, tmp}, N, (int64_t)N * V);
  free(tmp);
  return NULL;
}

static void logprob_grad_rows(const rows_ctx *c, int32_t from, int32_t to, int part) {
  const logprobGrad_args *A = c->args;
  const int32_t zOff = A->logits, tOff = A->targets, lseOff = A->lse, dyOff = A->dy, outOff = A->out, V = A->V;
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
napi_value LogprobGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(logprobGrad);
  const int32_t zOff = A.logits, tOff = A.targets, lseOff = A.lse, dyOff = A.dy, outOff = A.out, N = A.N, V = A.V;
  if (!FIT(zOff, (int64_t)N * V, tOff, N, lseOff, N, dyOff, N, outOff, (int64_t)N * V)) return NULL;
  if (!targets_in_range(env, heap, tOff, N, V)) return NULL;
  split_rows(logprob_grad_rows, &(rows_ctx){heap, &A, NULL}, N, (int64_t)N * 2 * V);
  return NULL;
}
