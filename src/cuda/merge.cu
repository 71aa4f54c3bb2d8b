/* The merge of candidate lists on CUDA (ltk_topk_merge): one select CTA a row, on the block-level
 * routines of select.cuh, as the kNN merges its chunks' lists (knn_output_kernel).
 *
 * A candidate is the composite (rank key << 32 | ~id): larger is better, and at equal keys the lower
 * id is the larger composite, so the k largest composites are the contract's top k (ties by id,
 * NaN last: key 0) and no tie class needs its own pass. Padding (id < 0) is the composite 0, below
 * every real one (~id >= 2^31 for id >= 0). A row with more than k candidates takes the radix
 * select over all 64 bits (ltk_radix_select), then the entries above the threshold composite and
 * the kk still needed at it (more than one only where an id is repeated; a counter takes exactly
 * kk of them); then the bitonic network over the next power of two and the store. The candidates
 * are read from global memory at every pass (n = lists x list_len, 16K at 8 x 2048: L1/L2 hits). */
#include <cuda_runtime.h>

#include <string.h>

#include "cuda-common.cuh"
#include "select.cuh"

#define MRG_MAX_K 16384 /* the sorted composites in shared memory: 128 KB */

struct mrg_src {
    const float *sc;
    const int32_t *id;
    int32_t len;
    int64_t lstride;
    int64_t cnt; /* lists x list_len */
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const {
        const int32_t g = (int32_t)i / len, j = (int32_t)i - g * len;
        const int64_t o = (int64_t)g * lstride + j;
        const int32_t d = __ldg(id + o);
        if (d < 0) return 0ull;
        return ltk_comp(ltk_key32(__float_as_uint(__ldg(sc + o))), (uint32_t)d);
    }
};

static __global__ void __launch_bounds__(LTK_SEL_NT) mrg_kernel(ltk_merge_args a, int kp) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));
    __shared__ uint32_t n_above, n_at;
    const int64_t r = blockIdx.x;
    const mrg_src src = {a.scores + r * a.row_stride, a.ids + r * a.row_stride, a.list_len, a.list_stride,
                         (int64_t)a.lists * a.list_len};
    /* the row's candidates */
    uint32_t mine = 0;
    for (int64_t i = threadIdx.x; i < src.cnt; i += LTK_SEL_NT) {
        const int32_t g = (int32_t)i / src.len, j = (int32_t)i - g * src.len;
        mine += __ldg(src.id + (int64_t)g * src.lstride + j) >= 0;
    }
    uint32_t m;
    ltk_block_scan(mine, sm->warp, &m);
    for (int j = threadIdx.x; j < kp; j += LTK_SEL_NT) sb[j] = 0ull;
    if (threadIdx.x == 0) n_above = 0, n_at = 0;
    uint64_t prefix = 1ull, mask = ~0ull; /* every real candidate */
    uint32_t kk = 0;
    const uint32_t k = (uint32_t)a.k;
    __syncthreads();
    if (m > k) {
        ltk_radix_select<mrg_src, 1>(src, k, 64, 0, sm);
        prefix = sm->prefix, mask = sm->mask, kk = sm->kk;
    }
    /* above the threshold (< k of them), then kk at it */
    for (int64_t i = threadIdx.x; i - threadIdx.x < src.cnt; i += LTK_SEL_NT) {
        const uint64_t c = i < src.cnt ? src.comp(i) : 0ull;
        const uint64_t cm = c & mask;
        const bool real = c != 0ull;
        const bool above = real && (m <= k ? true : cm > prefix);
        const bool at = real && m > k && cm == prefix;
        const uint32_t pa = ltk_warp_append(above, &n_above);
        if (above && pa < (uint32_t)kp) sb[pa] = c;
        const uint32_t pt = ltk_warp_append(at, &n_at);
        if (at && pt < kk) sb[k - kk + pt] = c;
    }
    __syncthreads();
    const uint32_t got = m < k ? m : k;
    ltk_bitonic_desc(sb, kp);
    int32_t *oi = a.out_idx + r * a.out_stride;
    float *os = a.out_scores ? a.out_scores + r * a.out_stride : NULL;
    for (uint32_t j = threadIdx.x; j < k; j += LTK_SEL_NT) {
        const uint64_t c = sb[j];
        const bool v = j < got;
        oi[j] = v ? (int32_t)ltk_comp_rel(c) : -1;
        if (os) os[j] = v ? ltk_rank_key_to_f32(ltk_comp_key(c)) : -__int_as_float(0x7f800000);
    }
}

extern "C" ltk_status ltk_cuda_merge_workspace(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes) {
    (void)e;
    LTK_RETURN_IF(a->k > MRG_MAX_K, LTK_EUNSUPPORTED, "cuda merge: k=%d over %d (the sorted candidates in shared memory)",
                  a->k, MRG_MAX_K);
    *bytes = 0;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t ws_bytes) {
    (void)ws, (void)ws_bytes;
    size_t need;
    LTK_FORWARD_IF(ltk_cuda_merge_workspace(a, e, &need));
    if (a->rows > 0) {
        int kp = 2;
        while (kp < a->k) kp <<= 1;
        const size_t smem = sizeof(ltk_sel_smem) + 8 * (size_t)kp;
        LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)mrg_kernel, smem));
        mrg_kernel<<<(unsigned)a->rows, LTK_SEL_NT, smem, (cudaStream_t)e->stream>>>(*a, kp);
        LTK_CUDA_TRY(cudaGetLastError());
    }
    if (e->stats) {
        LTK_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)e->stream));
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
    }
    return LTK_OK;
}
