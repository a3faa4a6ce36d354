// Credit Lens: OpenBLAS sgemm on the wasm backend's heap (backend `wasm-blas`, src/engine/model/kernels/blas.ts), and the
// fused kernels that backend runs natively (src/engine/model/kernels/native.ts and decode_attention.ts): a token's
// log-prob, RMSNorm, the attention heads with RoPE, attention over a whole sequence, SwiGLU, each with its gradient, and
// the KV-cache decode step.
//
// A Node-API addon, so one build loads in any Node (or Electron) of Node-API 8+. It links against nothing but libc:
// the BLAS library is opened at run time with dlopen (`open(path)`), so a machine without OpenBLAS still loads the
// addon and the engine falls back to plain wasm with the reason. Products run in place on a Float32Array over the
// WebAssembly memory: no copy in or out.
//
// This file is the Node-API glue: open() and threads(), the kernels' argument prologue and the exports. The rest of
// native/ by role is listed in common.h.
#include <dlfcn.h>
#include <stdio.h>

#include "common.h"

typedef char *(*get_config_fn)(void);

static void *lib = NULL;
sgemm_fn sgemm = NULL;
set_threads_fn set_threads = NULL;
get_threads_fn get_threads = NULL;
static get_config_fn get_config = NULL;

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

// builtin() → "built-in GEMM (<ISA>)": products on builtin_gemm.c, where no BLAS library could be opened.
static napi_value Builtin(napi_env env, napi_callback_info info) {
  (void)info;
  char what[64];
  snprintf(what, sizeof what, "built-in GEMM (%s)", builtin_gemm_isa());
  sgemm = builtin_sgemm;
  set_threads = NULL;
  get_threads = NULL;
  get_config = NULL;
  return str(env, what);
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
  CHECK(napi_create_int32(env, get_threads ? get_threads() : sgemm == builtin_sgemm ? product_threads() : 0, &out));
  return out;
}

// Reads (heap: Float32Array, then `n` int32s); returns the heap's floats or NULL with an exception pending.
float *heap_and_ints(napi_env env, napi_callback_info info, int32_t *ints, size_t n, size_t *heapLen) {
  size_t argc = NATIVE_MAX_ARGS + 1;
  napi_value argv[NATIVE_MAX_ARGS + 1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < n + 1 || n > NATIVE_MAX_ARGS) {
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

// Whether every operand, given as (offset, length) pairs in floats, lies inside the heap; throws a RangeError if not.
int fit(napi_env env, size_t heapLen, const int64_t *spans, size_t pairs) {
  for (size_t i = 0; i < pairs; i++) {
    if (spans[2 * i] + spans[2 * i + 1] > (int64_t)heapLen) {
      napi_throw_range_error(env, NULL, "blas.node: an operand lies outside the heap");
      return 0;
    }
  }
  return 1;
}

#ifndef CL_SOURCE_HASH
#define CL_SOURCE_HASH ""
#endif

// sourceHash() → the hash of native/ this build was compiled from (scripts/native_hash.mjs), "" if built without one.
static napi_value SourceHash(napi_env env, napi_callback_info info) {
  (void)info;
  return str(env, CL_SOURCE_HASH);
}

// abi() → ["name:arg,arg,…", …]: the argument names this build was compiled with (abi.h), for the engine to check.
static napi_value Abi(napi_env env, napi_callback_info info) {
  (void)info;
  static const char *const entries[] = {NATIVE_ABI_STRINGS};
  const size_t n = sizeof entries / sizeof entries[0];
  napi_value arr;
  CHECK(napi_create_array_with_length(env, n, &arr));
  for (size_t i = 0; i < n; i++) CHECK(napi_set_element(env, arr, (uint32_t)i, str(env, entries[i])));
  return arr;
}

napi_value Gemm(napi_env env, napi_callback_info info);
napi_value Logprob(napi_env env, napi_callback_info info);
napi_value LogprobGrad(napi_env env, napi_callback_info info);
napi_value RmsNorm(napi_env env, napi_callback_info info);
napi_value RmsNormGrad(napi_env env, napi_callback_info info);
napi_value Attention(napi_env env, napi_callback_info info);
napi_value AttentionGrad(napi_env env, napi_callback_info info);
napi_value QkvHeads(napi_env env, napi_callback_info info);
napi_value QkvHeadsGrad(napi_env env, napi_callback_info info);
napi_value Swiglu(napi_env env, napi_callback_info info);
napi_value SwigluGrad(napi_env env, napi_callback_info info);
napi_value DecodeStep(napi_env env, napi_callback_info info);

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"open", NULL, Open, NULL, NULL, NULL, napi_default, NULL},
      {"threads", NULL, Threads, NULL, NULL, NULL, napi_default, NULL},
      {"builtin", NULL, Builtin, NULL, NULL, NULL, napi_default, NULL},
      {"abi", NULL, Abi, NULL, NULL, NULL, napi_default, NULL},
      {"sourceHash", NULL, SourceHash, NULL, NULL, NULL, napi_default, NULL},
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
