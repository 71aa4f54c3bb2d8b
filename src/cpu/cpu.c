/* The fused CPU backend: OpenMP threads over rows (indexer, select) or over the base (kNN),
 * AVX-512 / AVX2 kernels chosen once at run time, a portable scalar fallback. */
#include "cpu-impl.h"
#include "ltk-tune.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ltkc_threads(const ltk_exec *e) {
    int n = e && e->num_threads > 0 ? e->num_threads : omp_get_max_threads();
    if (n < 1) n = 1;
    if (n > 256) n = 256;
    return n;
}

static const ltkc_kern *pick_kernels(void) {
    const char *env = ltk_tune_get()->cpu_kernels; /* LTK_CPU_KERNELS: force "scalar", "avx2", "avx512" */
#if defined(LTKC_X86)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    int bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (env && !strcmp(env, "scalar")) return &ltkc_kern_scalar;
    if (env && !strcmp(env, "avx2") && avx2) return &ltkc_kern_avx2;
    if (env && !strcmp(env, "avx512") && avx512) return &ltkc_kern_avx512;
    if (bf16) return &ltkc_kern_avx512bf16;
    if (avx512) return &ltkc_kern_avx512;
    if (avx2) return &ltkc_kern_avx2;
#else
    (void)env;
#endif
    return &ltkc_kern_scalar;
}

const ltkc_kern *ltkc_kernels(void) {
    static const ltkc_kern *chosen;
    const ltkc_kern *k = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (!k) {
        k = pick_kernels();
        __atomic_store_n(&chosen, k, __ATOMIC_RELEASE);
    }
    return k;
}

size_t ltkc_idx_tile_bytes(const ltkc_idx_geom *g) { return (size_t)LTKC_IDX_NK * (size_t)(g->D + 1) * 4; }

static int cpu_available(void) { return 1; }

static void cpu_info(char *buf, size_t cap) {
    snprintf(buf, cap, "  cpu kernels: %s, threads: %d\n", ltkc_kernels()->name, omp_get_max_threads());
}

const ltk_backend_i ltk_backend_cpu = {
    /* .name              = */ "cpu",
    /* .available         = */ cpu_available,
    /* .info              = */ cpu_info,
    /* .indexer_workspace = */ ltkc_indexer_ws,
    /* .indexer           = */ ltkc_indexer,
    /* .knn_workspace     = */ ltkc_knn_ws,
    /* .knn               = */ ltkc_knn,
    /* .select_workspace  = */ ltkc_select_ws,
    /* .select            = */ ltkc_select,
    /* .mem_alloc         = */ ltk_host_alloc,
    /* .mem_free          = */ ltk_aligned_free,
    /* .mem_to_host       = */ ltk_host_copy,
    /* .mem_from_host     = */ ltk_host_copy,
    /* .stream_sync       = */ NULL,
    /* .causal_ranges     = */ NULL,
    /* .decode_workspace  = */ ltkc_decode_ws,
    /* .decode            = */ ltkc_decode,
    /* .ws_alloc          = */ NULL,
    /* .ws_free           = */ NULL,
    /* .blocks_workspace  = */ ltkc_blocks_ws,
    /* .blocks            = */ ltkc_blocks,
    /* .candidates_ws     = */ ltkc_candidates_ws,
    /* .candidates        = */ ltkc_candidates,
    /* .decode_blocks_ws  = */ NULL,
    /* .decode_blocks     = */ NULL,
    /* .decode_cands_ws   = */ NULL,
    /* .decode_cands      = */ NULL,
    /* .merge_workspace   = */ ltkc_merge_ws,
    /* .merge             = */ ltkc_merge,
};
