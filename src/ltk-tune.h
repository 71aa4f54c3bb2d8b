/* The tuning table: every environment switch the library reads, read once (on first use) into one
 * struct, so a workspace-size query and the call it sizes always see the same values. None is
 * needed for correctness; each is documented in docs/design.md#switches. Fields marked "test
 * hook" have no environment variable: tests reach those internal paths through ltk_tune_set(). */
#ifndef LTK_TUNE_H
#define LTK_TUNE_H

#include <stdint.h>

#include "litetopk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ltk_tune {
    /* LTK_BACKEND=ref|cpu|cuda: what LTK_BACKEND_AUTO resolves to (AUTO: no override) */
    ltk_backend backend;
    /* LTK_CPU_KERNELS=scalar|avx2|avx512: force the CPU kernel table ("" = detect) */
    char cpu_kernels[16];
    /* LTK_CUDA_PORTABLE=1: the portable CUDA kernels (mma.sync) for every operation, also on sm_90 */
    int cuda_portable;
    /* LTK_CUDA_TRACE=1: every stage of a CUDA indexer call synchronised and timed on stderr */
    int cuda_trace;
    /* LTK_CUDA_WATCHDOG_S (default 10, 0 = off): the sm_90a scan traps with a printed line when a
     * barrier wait lasts longer */
    double cuda_watchdog_s;
    /* LTK_CUDA_MAT_BUDGET_MB (default 4096): logits per sub-chunk of the CUDA materialize path */
    int64_t cuda_mat_budget_mb;
    /* LTK_CUDA_FUSED_DENSE_S (default 262144, 0 = never): the largest S at which a fused CUDA call of
     * >= 1,024 rows runs as dense windows */
    int64_t cuda_fused_dense_s;
    /* LTK_CUDA_KNN_DENSE (default 8,388,608 = 2^23, 0 = never): a fused CUDA kNN call of at most this
     * many scores (B x N) runs as materialize */
    int64_t cuda_knn_dense;
    /* LTK_CUDA_POOL_KEEP_MB (default 2048): device memory the CUDA workspace pool of calls made
     * without a workspace keeps between calls (per device) */
    int64_t cuda_pool_keep_mb;

    /* test hooks */
    int cpu_fused_dense_off; /* CPU fused indexer over <= 12 k keys keeps the filter */
    int cpu_idx_screen_off;  /* CPU fused indexer without its int8 screen */
    int cpu_knn_screen_bf16; /* CPU fused kNN on the bf16 screen instead of int8 */
    int cuda_scan_nopass;    /* the fused sm_90a scan's gate passes nothing: every row falls back */
    int cuda_knn_qi64;       /* CUDA kNN sm_90a loop: 64-query work items also for launches of >= 256
                              * queries (default 128 there): the 64-query build on large batches */
    int cuda_knn_graph;      /* CUDA kNN check + fallback as a conditional graph: 0 for chunks of >= 262,144
                              * rows (default), 1 for every sampled chunk (a failure to build is then an
                              * error, not a return to plain launches), -1 never */
    int cuda_knn_thr_global; /* CUDA kNN threshold: radix passes over the sample in global memory, the
                              * path of devices that refuse the 128 KB shared-memory attribute */
    int cuda_knn_tiebound_off; /* CUDA kNN threshold: no position bound on a tie class at the
                                * threshold (flat corpora then take the exact fallback) */
    int64_t cuda_blk_rows;   /* CUDA candidate indexer's publication: rows a sub-chunk (0: its budget's),
                              * so that small tests cross sub-chunks */
} ltk_tune;

/* The table: the environment as read on the first call (thread-safe). */
const ltk_tune *ltk_tune_get(void);
/* Test hook: replaces the table with *t, or re-reads the environment when t is NULL. Not to be
 * called while another thread is inside the library. */
void ltk_tune_set(const ltk_tune *t);

#ifdef __cplusplus
}
#endif
#endif /* LTK_TUNE_H */
