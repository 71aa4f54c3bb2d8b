/* The tuning table (ltk-tune.h): parsed in one place, once. */
#include "ltk-tune.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static ltk_tune tune;
static pthread_once_t tune_once = PTHREAD_ONCE_INIT;

static const char *env(const char *name) {
    const char *e = getenv(name);
    return e && *e ? e : NULL;
}

static int env_flag(const char *name) {
    const char *e = env(name);
    return e && strcmp(e, "0") != 0;
}

static int64_t env_i64(const char *name, int64_t dflt, int64_t lo, int64_t hi) {
    const char *e = env(name);
    if (!e) return dflt;
    char *end = NULL;
    long long v = strtoll(e, &end, 10);
    if (end == e) return dflt;
    return v < lo ? lo : v > hi ? hi : (int64_t)v;
}

static void tune_read(ltk_tune *t) {
    memset(t, 0, sizeof *t);
    const char *b = env("LTK_BACKEND");
    t->backend = !b                     ? LTK_BACKEND_AUTO
                 : !strcmp(b, "ref")    ? LTK_BACKEND_REF
                 : !strcmp(b, "cpu")    ? LTK_BACKEND_CPU
                 : !strcmp(b, "cuda")   ? LTK_BACKEND_CUDA
                                        : LTK_BACKEND_AUTO;
    const char *k = env("LTK_CPU_KERNELS");
    if (k) strncpy(t->cpu_kernels, k, sizeof t->cpu_kernels - 1);
    t->cuda_portable = env_flag("LTK_CUDA_PORTABLE");
    t->cuda_trace = env_flag("LTK_CUDA_TRACE");
    const char *w = env("LTK_CUDA_WATCHDOG_S");
    t->cuda_watchdog_s = w ? atof(w) : 10.0;
    if (!(t->cuda_watchdog_s > 0)) t->cuda_watchdog_s = 0;
    /* whole MiB: benchmarks compare against the 512 MB logits budget vLLM uses */
    t->cuda_mat_budget_mb = env_i64("LTK_CUDA_MAT_BUDGET_MB", 4096, 0, (int64_t)1 << 30);
    if (t->cuda_mat_budget_mb <= 0) t->cuda_mat_budget_mb = 4096; /* 0 or negative: the default */
    t->cuda_fused_dense_s = env_i64("LTK_CUDA_FUSED_DENSE_S", 262144, 0, INT64_MAX);
    t->cuda_knn_dense = env_i64("LTK_CUDA_KNN_DENSE", (int64_t)1 << 23, 0, INT64_MAX);
    t->cuda_pool_keep_mb = env_i64("LTK_CUDA_POOL_KEEP_MB", 2048, 0, (int64_t)1 << 40);
}

static void tune_init(void) { tune_read(&tune); }

const ltk_tune *ltk_tune_get(void) {
    pthread_once(&tune_once, tune_init);
    return &tune;
}

void ltk_tune_set(const ltk_tune *t) {
    pthread_once(&tune_once, tune_init);
    if (t) tune = *t;
    else tune_read(&tune);
}
