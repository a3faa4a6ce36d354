// Attention: the softmax rows, attention over a whole sequence, the heads of the fused q|k|v projection with RoPE, and the
// decode step on the in-place KV cache (kernels/native.ts, decode_attention.ts).
#include "common.h"

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
  const int threads = product_threads();
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
static int attn_sizes(napi_env env, int32_t B, int32_t H, int32_t Hkv, int32_t T, int32_t Tk, int32_t hd, int64_t *qn, int64_t *kn, int64_t *pn) {
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
napi_value Attention(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(attention);
  const int32_t B = A.B, H = A.H, Hkv = A.Hkv, T = A.T, Tk = A.Tk, hd = A.hd;
  int64_t qn, kn, pn;
  if (!attn_sizes(env, B, H, Hkv, T, Tk, hd, &qn, &kn, &pn) || !FIT(A.q, qn, A.k, kn, A.v, kn, A.mask, (int64_t)B * T * Tk, A.p, pn, A.o, qn)) return NULL;
  attn_part part = {heap, B, H, Hkv, T, Tk, hd, A.q, A.k, A.v, A.mask, A.p, A.o, 0, 0, 0, 0, 0, 1};
  attn_run(&part, attn_forward_part, B * Hkv);
  return NULL;
}

// attentionGrad(heap, q, k, v, p, do, dq, dk, dv, B, H, Hkv, T, Tk, hd) — 14 ints: the gradient of attention for the
// upstream do [B·T, H·hd] of the merged context, with q, k, v and p as attention took and made them. With dS =
// p·(dP − Σ dP·p) and dP = do·vᵀ per head: dq = dS·k, dk = Σ_heads dSᵀ·q, dv = Σ_heads pᵀ·do. The mask takes none.
napi_value AttentionGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(attentionGrad);
  const int32_t B = A.B, H = A.H, Hkv = A.Hkv, T = A.T, Tk = A.Tk, hd = A.hd;
  int64_t qn, kn, pn;
  if (!attn_sizes(env, B, H, Hkv, T, Tk, hd, &qn, &kn, &pn) || !FIT(A.q, qn, A.k, kn, A.v, kn, A.p, pn, A.dO, qn, A.dq, qn, A.dk, kn, A.dv, kn)) return NULL;
  attn_part part = {heap, B, H, Hkv, T, Tk, hd, A.q, A.k, A.v, 0, A.p, A.dO, A.dq, A.dk, A.dv, 0, 0, 1};
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

// Both directions' operands: x the fused projection (qkvHeads' input, qkvHeadsGrad's output), the RoPE tables, and the
// head-major parts q, k, v (qkvHeads' outputs, qkvHeadsGrad's upstream gradients).
typedef struct {
  int32_t x, cos, sin, parts[3], B, T, H, Hkv, hd;
} heads_io;

// The row loop of both directions, batch elements [from, to): forward rotates each head row of x into q or k, or copies
// it into v; backward rotates back and gathers.
static void qkv_heads_loop(const rows_ctx *c, int32_t from, int32_t to, bool grad) {
  const heads_io *io = c->args;
  const int32_t T = io->T, H = io->H, Hkv = io->Hkv, hd = io->hd;
  float *heap = c->heap, *x0 = heap + io->x, *parts[3];
  const float *cs = heap + io->cos, *sn = heap + io->sin;
  for (int i = 0; i < 3; i++) parts[i] = heap + io->parts[i];
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

// Both directions' body: shapes checked, then the rows over two cores.
static napi_value qkv_heads_run(napi_env env, float *heap, size_t heapLen, const heads_io *io, bool grad) {
  const int32_t B = io->B, T = io->T, H = io->H, Hkv = io->Hkv, hd = io->hd;
  if (hd % 2 != 0) {
    napi_throw_range_error(env, NULL, grad ? "qkvHeadsGrad: the head dimension must be even" : "qkvHeads: the head dimension must be even");
    return NULL;
  }
  const int64_t rows = (int64_t)B * T, W = (int64_t)(H + 2 * Hkv) * hd, tab = (int64_t)(H + Hkv) * T * hd;
  if (!FIT(io->x, rows * W, io->cos, tab, io->sin, tab, io->parts[0], rows * H * hd, io->parts[1], rows * Hkv * hd, io->parts[2], rows * Hkv * hd)) return NULL;
  split_rows(grad ? qkv_heads_grad_rows : qkv_heads_rows, &(rows_ctx){heap, io, NULL}, B, 2 * rows * W);
  return NULL;
}

// qkvHeads(heap, qkv, cos, sin, q, k, v, B, T, H, Hkv, hd): splits the fused projection qkv [B·T, (H + 2·Hkv)·hd] into
// head-major q, k and v, rotating q and k by RoPE on the way: row (b, t, h) of q or k is x·cos + swap(x)·sin with the
// tables' row (h, t) (tables [H + Hkv, T, hd], sin sign-folded, 1/√hd folded into q's rows); v is copied.
napi_value QkvHeads(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(qkvHeads);
  const heads_io io = {A.qkv, A.cos, A.sin, {A.q, A.k, A.v}, A.B, A.T, A.H, A.Hkv, A.hd};
  return qkv_heads_run(env, heap, heapLen, &io, false);
}

// qkvHeadsGrad(heap, dq, dk, dv, cos, sin, dqkv, B, T, H, Hkv, hd): the gradient of qkvHeads for upstream dq, dk, dv:
// the inverse rotation of dq and dk (dy·cos − swap(dy)·sin) and dv, gathered back into dqkv [B·T, (H + 2·Hkv)·hd].
napi_value QkvHeadsGrad(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(qkvHeadsGrad);
  const heads_io io = {A.dqkv, A.cos, A.sin, {A.dq, A.dk, A.dv}, A.B, A.T, A.H, A.Hkv, A.hd};
  return qkv_heads_run(env, heap, heapLen, &io, true);
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
napi_value DecodeStep(napi_env env, napi_callback_info info) {
  KERNEL_ARGS(decodeStep);
  const int32_t xOff = A.qkv, tOff = A.tabs, kOff = A.keys, vOff = A.values, mOff = A.mask, oOff = A.out, B = A.B, H = A.H, Hkv = A.Hkv, hd = A.hd,
                cap = A.cap, pos = A.pos;
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
