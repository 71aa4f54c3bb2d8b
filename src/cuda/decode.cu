/* The CUDA decode operation: the indexer's pipeline (indexer.cu) over the paged FP8 cache.
 *
 * A decode call is an indexer call whose keys differ by request: row t = b * next_n + r sees
 * positions [0, len(t)) of request b, read through its block-table row. So the call runs the
 * indexer's plan and kernels on a paged key source (ltk_paged_src): the scan kernels group each
 * request's next_n rows into one q-block, so they share every key tile (the sm_90a producer loads a
 * tile as one TMA box per cache block, the scales beside it), and long contexts split across CTAs.
 * The scores go to dense windows of a bounded buffer and the exact GPU select (select.cu): in decode
 * they are 4 bytes a position a row next to the 132 the scan reads (indexer.cu, DECODE_BUDGET).
 * What is added here: the rows' lengths as the indexer's key ranges (clamped to max_len on the
 * device, as the front end cannot see them), and the physical-slot mapping of the output.
 *
 * Graph-safe: every launch's geometry comes from B, next_n, k and max_len; the lengths and the table
 * are read only on the device. */
#include <cuda_runtime.h>

#include <string.h>

#include "indexer.cuh"
#include "ptx.cuh"

/* ks[t] = 0, ke[t] = len(t) clamped to [0, max_len] (ltk_decode_len on the device). The indexer's
 * ranges come in pairs (its front end's rule, which its dense select relies on). */
__global__ void dec_lens_kernel(const int32_t *lens, const int32_t *seq_lens, int64_t T, int32_t next_n, int32_t max_len,
                                int32_t *ks, int32_t *ke) {
    ltk_pdl_launch(); /* (the scan after it is launched by ltk_launch_pdl) */
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    ks[t] = 0;
    const int64_t n = lens ? (int64_t)lens[t] : (int64_t)seq_lens[t / next_n] - next_n + (int32_t)(t % next_n) + 1;
    ke[t] = (int32_t)(n < 0 ? 0 : n > max_len ? max_len : n);
}

/* Logical positions -> physical slots, in place (-1 stays -1; an unmapped block gives -1). */
__global__ void dec_physical_kernel(int32_t *out, int64_t out_stride, int64_t T, int32_t k, int32_t next_n,
                                    const int32_t *bt, int64_t bt_stride, int32_t max_blocks, int64_t nblocks,
                                    int32_t bkv) {
    ltk_pdl_wait();
    const int64_t t = blockIdx.y;
    for (int64_t yt = t; yt < T; yt += gridDim.y) {
        int32_t *row = out + yt * out_stride;
        const int32_t *btr = bt + (yt / next_n) * bt_stride;
        for (int32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < k; j += gridDim.x * blockDim.x) {
            const int32_t i = row[j];
            if (i < 0) continue;
            const int32_t blk = i / bkv;
            const int32_t id = blk < max_blocks ? btr[blk] : -1;
            row[j] = id >= 0 && id < nblocks ? id * bkv + i % bkv : -1;
        }
    }
}

typedef struct dec_plan {
    ltk_indexer_args ia;
    ltk_paged_src pg;
    size_t o_ks, o_ke, o_ind, ind_bytes, total;
} dec_plan;

/* sizing: also the indexer's workspace (the size query); a call leaves that check to the indexer's
 * own plan, so that it plans once. */
static ltk_status dec_make(const ltk_decode_args *d, const ltk_exec *e, int sizing, dec_plan *p) {
    memset(p, 0, sizeof *p);
    if (d->dtype != LTK_DTYPE_E4M3)
        return ltk_error(LTK_EUNSUPPORTED, "cuda decode: q must be e4m3 (bf16 and f32 queries are for the host backends)");
    const int64_t T = d->B * d->next_n;
    ltk_cuda_decode_source(d, &p->ia, &p->pg);
    p->o_ks = 0;
    p->o_ke = ltk_al256(4 * (size_t)(T > 0 ? T : 1));
    p->o_ind = 2 * p->o_ke;
    ltk_indexer_args *a = &p->ia;
    /* planned with ranges present, as the call runs (any non-NULL pointer: the plan reads none) */
    if (sizing) {
        a->ks = a->ke = d->block_table;
        ltk_status st = ltk_cuda_indexer_paged_workspace(a, &p->pg, e, &p->ind_bytes);
        a->ks = a->ke = NULL;
        LTK_FORWARD_IF(st);
    }
    p->total = p->o_ind + p->ind_bytes + 256;
    return LTK_OK;
}

/* The indexer's arguments of a decode call (ranges left NULL: ltk_cuda_decode_ranges writes them)
 * and its paged key source. */
extern "C" void ltk_cuda_decode_source(const ltk_decode_args *d, ltk_indexer_args *a, ltk_paged_src *pg) {
    const int64_t T = d->B * d->next_n;
    memset(a, 0, sizeof *a);
    a->T = T;
    a->S = d->max_len;
    a->H = d->H;
    a->D = d->D;
    a->k = d->k;
    a->dtype = d->dtype;
    a->q = d->q;
    a->q_stride_t = d->q_stride;
    a->kv = NULL;
    a->kv_stride_s = d->D;
    a->kv_scale = NULL;
    a->weights = d->weights;
    a->w_stride_t = d->w_stride;
    a->out_idx = d->out_idx;
    a->out_scores = d->out_scores;
    a->out_stride = d->out_stride;
    a->flags = d->flags & ~LTK_FLAG_PHYSICAL;
    a->state = NULL;
    const ltk_paged_src g = {d->kv_cache, d->num_blocks, d->block_stride, d->block_table, d->bt_stride,
                             d->block_kv, d->max_blocks, d->next_n, 0, NULL, 0, 0, 0};
    *pg = g;
    /* An empty cache (num_blocks 0, kv_cache may be NULL) is still a paged source: the kernels tell
     * it from the contiguous one by a non-NULL cache, and read nothing through it (every block is
     * unmapped). Any non-NULL address serves; the table's is at hand. */
    if (!pg->cache) pg->cache = (const uint8_t *)d->block_table;
}

/* ks[t] = 0, ke[t] = the row's length clamped to [0, max_len], on st. */
extern "C" ltk_status ltk_cuda_decode_ranges(const ltk_decode_args *d, int32_t *ks, int32_t *ke, cudaStream_t st) {
    const int64_t T = d->B * d->next_n;
    if (T == 0) return LTK_OK;
    dec_lens_kernel<<<(unsigned)((T + 255) / 256), 256, 0, st>>>(d->lens, d->seq_lens, T, d->next_n, d->max_len, ks, ke);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_decode_workspace(const ltk_decode_args *d, const ltk_exec *e, size_t *bytes) {
    dec_plan p;
    LTK_FORWARD_IF(dec_make(d, e, 1, &p));
    *bytes = p.total;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_decode(const ltk_decode_args *d, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    dec_plan p;
    LTK_FORWARD_IF(dec_make(d, e, 0, &p)); /* (p.total without the indexer's part, which checks its own) */
    if (ws_bytes < p.total)
        return ltk_error(LTK_EWORKSPACE, "workspace of %zu bytes is smaller than the %zu bytes required", ws_bytes,
                         p.total);
    cudaStream_t st = (cudaStream_t)e->stream;
    const int64_t T = p.ia.T;
    if (T == 0) return LTK_OK;
    uint8_t *ws = (uint8_t *)(uintptr_t)ltk_al256((uintptr_t)wsv);
    int32_t *ks = (int32_t *)(ws + p.o_ks), *ke = (int32_t *)(ws + p.o_ke);
    LTK_FORWARD_IF(ltk_cuda_decode_ranges(d, ks, ke, st));
    p.ia.ks = ks;
    p.ia.ke = ke;
    LTK_FORWARD_IF(ltk_cuda_indexer_paged(&p.ia, &p.pg, e, ws + p.o_ind, ws_bytes - (size_t)(ws - (uint8_t *)wsv) - p.o_ind));
    if (d->flags & LTK_FLAG_PHYSICAL) LTK_FORWARD_IF(ltk_cuda_decode_physical(d, st));
    return LTK_OK;
}

/* d's outputs, logical positions, turned into physical slots in place, on st. */
extern "C" ltk_status ltk_cuda_decode_physical(const ltk_decode_args *d, cudaStream_t st) {
    const int64_t T = d->B * d->next_n;
    if (T == 0 || d->k == 0) return LTK_OK;
    const unsigned gy = (unsigned)(T < 65535 ? T : 65535);
    const unsigned gx = (unsigned)((d->k + 255) / 256);
    ltk_cuda_dev dv;
    LTK_FORWARD_IF(ltk_cuda_device(&dv));
    LTK_CUDA_TRY(ltk_launch_pdl(dv.major >= 9, dec_physical_kernel, dim3(gx, gy), dim3(256), 0, st, d->out_idx,
                                d->out_stride, T, d->k, d->next_n, d->block_table, d->bt_stride, d->max_blocks,
                                d->num_blocks, d->block_kv));
    return LTK_OK;
}
