// Two cores for a kernel (common.h says how each is used): on_two_cores, and split_rows for kernels of independent rows.
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static int builtin_threads = 0;
static pthread_once_t builtin_threads_once = PTHREAD_ONCE_INIT;
// two at most: on_two_cores is the only parallelism the built-in GEMM has. Read once: sysconf reads /sys per call, and
// this is asked on every product.
static void count_cores(void) { builtin_threads = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2 : 1; }

int product_threads(void) {
  if (get_threads && set_threads) return get_threads();
  if (sgemm == builtin_sgemm) {
    pthread_once(&builtin_threads_once, count_cores);
    return builtin_threads;
  }
  return 1;
}

void on_two_cores(void *(*fn)(void *), void *first, void *second) {
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

void split_rows(rows_fn fn, const rows_ctx *c, int32_t rows, int64_t floats) {
  rows_job first = {fn, c, 0, rows / 2, 0}, second = {fn, c, rows / 2, rows, 1};
  if (rows >= 2 && floats >= SPLIT_MIN_FLOATS) {
    on_two_cores(rows_job_run, &first, &second);
  } else {
    rows_job_run(&first);
    rows_job_run(&second);
  }
}
