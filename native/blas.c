// Credit Lens: OpenBLAS sgemm on the wasm backend's heap (backend `wasm-blas`, src/engine/model/blas.ts).
//
// A Node-API addon, so one build loads in any Node (or Electron) of Node-API 8+. It links against nothing but libc:
// the BLAS library is opened at run time with dlopen (`open(path)`), so a machine without OpenBLAS still loads the
// addon and the engine falls back to plain wasm with the reason. Products run in place on a Float32Array over the
// WebAssembly memory: no copy in or out.
#include <dlfcn.h>
#include <node_api.h>
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
  for (size_t i = 0; i < nOff; i += 3) {
    sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, M, N, K, 1.0f, heap + off[i], ta ? M : K,
          heap + off[i + 1], tb ? K : N, 0.0f, heap + off[i + 2], N);
  }
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"open", NULL, Open, NULL, NULL, NULL, napi_default, NULL},
      {"threads", NULL, Threads, NULL, NULL, NULL, napi_default, NULL},
      {"gemm", NULL, Gemm, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE_INIT() { return Init(env, exports); }
