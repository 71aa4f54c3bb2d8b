/* Front end: validates every argument once, resolves the backend, provides the workspace
 * convenience path, and owns the hot-set state. The error message and the status strings are in
 * common.c (the backends use them too). */
#include "ltk-impl.h"
#include "ltk-tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- backend table ------------------------------------------------------------------------ */
static const ltk_backend_i *backend_table(ltk_backend b) {
    switch (b) {
    case LTK_BACKEND_REF: return &ltk_backend_ref;
    case LTK_BACKEND_CPU: return &ltk_backend_cpu;
#ifdef LTK_WITH_CUDA
    case LTK_BACKEND_CUDA: return &ltk_backend_cuda;
#endif
    default: return NULL;
    }
}

const char *ltk_backend_name(ltk_backend b) {
    switch (b) {
    case LTK_BACKEND_AUTO: return "auto";
    case LTK_BACKEND_REF: return "ref";
    case LTK_BACKEND_CPU: return "cpu";
    case LTK_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

int ltk_backend_available(ltk_backend b) {
    const ltk_backend_i *bi = backend_table(b);
    return bi != NULL && bi->available();
}

ltk_backend ltk_backend_resolve(ltk_backend b) {
    if (b != LTK_BACKEND_AUTO) return b;
    const ltk_backend forced = ltk_tune_get()->backend; /* LTK_BACKEND */
    if (forced != LTK_BACKEND_AUTO) return forced;
    return ltk_backend_available(LTK_BACKEND_CUDA) ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU;
}

static ltk_status pick_backend(const ltk_exec *e, const ltk_backend_i **out) {
    ltk_backend want = e ? e->backend : LTK_BACKEND_AUTO;
    LTK_RETURN_IF((int)want < 0 || (int)want > LTK_BACKEND_CUDA, LTK_EINVAL, "unknown backend %d", (int)want);
    ltk_backend b = ltk_backend_resolve(want);
    const ltk_backend_i *bi = backend_table(b);
    LTK_RETURN_IF(bi == NULL, LTK_ENOBACKEND, "backend '%s' is not compiled into this build", ltk_backend_name(b));
    LTK_RETURN_IF(!bi->available(), LTK_ENOBACKEND, "backend '%s' has no usable device on this machine",
                  ltk_backend_name(b));
    if (e) {
        LTK_RETURN_IF((int)e->algo < 0 || (int)e->algo > LTK_ALGO_SCORE_ONLY, LTK_EINVAL, "unknown algo %d",
                      (int)e->algo);
        LTK_RETURN_IF(e->num_threads < 0, LTK_EINVAL, "num_threads=%d < 0", (int)e->num_threads);
        LTK_RETURN_IF(e->workspace == NULL && e->workspace_bytes != 0, LTK_EINVAL,
                      "workspace_bytes=%zu with a NULL workspace", e->workspace_bytes);
    }
    *out = bi;
    return LTK_OK;
}

ltk_status ltk_backend_lookup(const ltk_exec *e, const ltk_backend_i **out) { return pick_backend(e, out); }

static int is_host_backend(const ltk_backend_i *bi) { return bi == &ltk_backend_ref || bi == &ltk_backend_cpu; }

/* Runs `run` with the caller's workspace, or with one allocated here (convenience path). */
#define LTK_RUN_WITH_WORKSPACE(bi, wsfn, runfn, a, e)                                                   \
    do {                                                                                               \
        static const ltk_exec ltk_default_exec_;                                                       \
        const ltk_exec *ex_ = (e) ? (e) : &ltk_default_exec_;                                          \
        size_t need_ = 0;                                                                              \
        LTK_FORWARD_IF((bi)->wsfn((a), ex_, &need_));                                                  \
        if (ex_->workspace) {                                                                          \
            LTK_RETURN_IF(ex_->workspace_bytes < need_, LTK_EWORKSPACE,                                \
                          "workspace of %zu bytes is smaller than the %zu bytes required",             \
                          ex_->workspace_bytes, need_);                                                \
            return (bi)->runfn((a), ex_, ex_->workspace, ex_->workspace_bytes);                        \
        }                                                                                              \
        void *ws_ = NULL;                                                                              \
        if (need_) LTK_FORWARD_IF(ltk_ws_take((bi), need_, ex_->stream, &ws_));                        \
        ltk_status st_ = (bi)->runfn((a), ex_, ws_, need_);                                            \
        ltk_ws_give((bi), ws_, ex_->stream);                                                           \
        return st_;                                                                                    \
    } while (0)

/* ---- validation --------------------------------------------------------------------------- */
static ltk_status check_ranges_host(const int32_t *ks, const int32_t *ke, int64_t rows, int64_t len) {
    if (!ks && !ke) return LTK_OK;
    LTK_RETURN_IF(!ks || !ke, LTK_EINVAL, "row starts and ends must both be given or both be NULL");
    for (int64_t r = 0; r < rows; r++) {
        LTK_RETURN_IF(ks[r] < 0 || ke[r] < ks[r] || (int64_t)ke[r] > len, LTK_EINVAL,
                      "row %lld: range [%d, %d) is not within [0, %lld]", (long long)r, ks[r], ke[r],
                      (long long)len);
    }
    return LTK_OK;
}

/* ALIGNMENT of litetopk.h: every array pointer aligned to its element size. */
#define LTK_CHECK_ALIGNED(ptr, size)                                                                 \
    LTK_RETURN_IF(!ltk_aligned((ptr), (size)), LTK_EINVAL, "%s=%p is not aligned to its %d-byte elements", #ptr, \
                  (const void *)(ptr), (int)(size))

ltk_status ltk_check_indexer_inputs(int32_t H, int32_t D, int32_t k, ltk_dtype dtype, int64_t *q_stride_t,
                                    int64_t *kv_stride_s, int64_t *w_stride_t, const void *q, const void *kv,
                                    const float *kv_scale, const float *weights) {
    LTK_RETURN_IF(H < 1 || H > LTK_INDEXER_MAX_H, LTK_EINVAL, "H=%d out of [1, %d]", H, LTK_INDEXER_MAX_H);
    LTK_RETURN_IF(D < 1 || D > LTK_INDEXER_MAX_D, LTK_EINVAL, "D=%d out of [1, %d]", D, LTK_INDEXER_MAX_D);
    LTK_RETURN_IF(k < 1 || k > LTK_INDEXER_MAX_K, LTK_EINVAL, "k=%d out of [1, %d]", k, LTK_INDEXER_MAX_K);
    LTK_RETURN_IF(dtype != LTK_DTYPE_E4M3 && dtype != LTK_DTYPE_BF16 && dtype != LTK_DTYPE_F32, LTK_EINVAL,
                  "indexer dtype %d: expected E4M3, BF16 or F32", (int)dtype);
    if (*q_stride_t == 0) *q_stride_t = (int64_t)H * D;
    if (*kv_stride_s == 0) *kv_stride_s = D;
    if (*w_stride_t == 0) *w_stride_t = H;
    LTK_RETURN_IF(*q_stride_t < (int64_t)H * D, LTK_EINVAL, "q_stride_t=%lld < H*D=%d", (long long)*q_stride_t, H * D);
    LTK_RETURN_IF(*kv_stride_s < D, LTK_EINVAL, "kv_stride_s=%lld < D=%d", (long long)*kv_stride_s, D);
    LTK_RETURN_IF(*w_stride_t < H, LTK_EINVAL, "w_stride_t=%lld < H=%d", (long long)*w_stride_t, H);
    const size_t el = ltk_dtype_size(dtype);
    LTK_CHECK_ALIGNED(q, el);
    LTK_CHECK_ALIGNED(kv, el);
    LTK_CHECK_ALIGNED(kv_scale, 4);
    LTK_CHECK_ALIGNED(weights, 4);
    return LTK_OK;
}

static ltk_status indexer_fill(const ltk_indexer_args *in, ltk_indexer_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(a->T < 0 || a->T > LTK_MAX_ROWS, LTK_EINVAL, "T=%lld out of [0, 2^31-1]", (long long)a->T);
    LTK_RETURN_IF(a->S < 0 || a->S > LTK_MAX_ROWS, LTK_EINVAL, "S=%lld out of [0, 2^31-1]", (long long)a->S);
    LTK_FORWARD_IF(ltk_check_indexer_inputs(a->H, a->D, a->k, a->dtype, &a->q_stride_t, &a->kv_stride_s,
                                            &a->w_stride_t, a->q, a->kv, a->kv_scale, a->weights));
    LTK_RETURN_IF(a->flags & ~(LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE), LTK_EINVAL, "unknown flags 0x%x",
                  a->flags);
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "out_stride=%lld < k=%d", (long long)a->out_stride, a->k);
    if (a->T > 0) {
        LTK_RETURN_IF(!a->q || !a->weights || !a->out_idx, LTK_EINVAL, "q, weights and out_idx are required");
        LTK_RETURN_IF(a->S > 0 && !a->kv, LTK_EINVAL, "kv is NULL");
    }
    LTK_RETURN_IF((a->ks == NULL) != (a->ke == NULL), LTK_EINVAL, "ks and ke must both be given or both be NULL");
    LTK_CHECK_ALIGNED(a->ks, 4);
    LTK_CHECK_ALIGNED(a->ke, 4);
    LTK_CHECK_ALIGNED(a->out_idx, 4);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    if (a->state) {
        LTK_FORWARD_IF(ltk_state_check(a->state, "state"));
        LTK_RETURN_IF(backend_table(a->state->backend) != bi, LTK_EINVAL,
                      "state belongs to backend '%s', the call runs on '%s'", ltk_backend_name(a->state->backend),
                      bi->name);
    }
    if (is_host_backend(bi)) LTK_FORWARD_IF(check_ranges_host(a->ks, a->ke, a->T, a->S));
    return LTK_OK;
}

static ltk_status knn_fill(const ltk_knn_args *in, ltk_knn_args *a) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(a->B < 0 || a->B > LTK_MAX_ROWS, LTK_EINVAL, "B=%lld out of [0, 2^31-1]", (long long)a->B);
    LTK_RETURN_IF(a->N < 0, LTK_EINVAL, "N=%lld < 0", (long long)a->N);
    LTK_RETURN_IF(a->D < 1 || a->D > LTK_KNN_MAX_D, LTK_EINVAL, "D=%d out of [1, %d]", a->D, LTK_KNN_MAX_D);
    LTK_RETURN_IF(a->k < 1 || a->k > LTK_KNN_MAX_K, LTK_EINVAL, "k=%d out of [1, %d]", a->k, LTK_KNN_MAX_K);
    LTK_RETURN_IF(a->dtype != LTK_DTYPE_F32 && a->dtype != LTK_DTYPE_F16 && a->dtype != LTK_DTYPE_BF16, LTK_EINVAL,
                  "kNN dtype %d: expected F32, F16 or BF16", (int)a->dtype);
    LTK_RETURN_IF((int)a->metric < 0 || a->metric > LTK_METRIC_COS, LTK_EINVAL, "unknown metric %d", (int)a->metric);
    LTK_RETURN_IF(a->flags & ~LTK_FLAG_UNSORTED, LTK_EINVAL, "unknown flags 0x%x for kNN", a->flags);
    if (a->q_stride == 0) a->q_stride = a->D;
    if (a->base_stride == 0) a->base_stride = a->D;
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->q_stride < a->D, LTK_EINVAL, "q_stride=%lld < D=%d", (long long)a->q_stride, a->D);
    LTK_RETURN_IF(a->base_stride < a->D, LTK_EINVAL, "base_stride=%lld < D=%d", (long long)a->base_stride, a->D);
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "out_stride=%lld < k=%d", (long long)a->out_stride, a->k);
    if (a->B > 0) {
        LTK_RETURN_IF(!a->queries || !a->out_idx, LTK_EINVAL, "queries and out_idx are required");
        LTK_RETURN_IF(a->N > 0 && !a->base, LTK_EINVAL, "base is NULL");
    }
    const size_t el = ltk_dtype_size(a->dtype);
    LTK_CHECK_ALIGNED(a->queries, el);
    LTK_CHECK_ALIGNED(a->base, el);
    LTK_CHECK_ALIGNED(a->out_idx, 8);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    return LTK_OK;
}

static ltk_status select_fill(const ltk_select_args *in, ltk_select_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(a->rows < 0 || a->rows > LTK_MAX_ROWS, LTK_EINVAL, "rows=%lld out of [0, 2^31-1]", (long long)a->rows);
    LTK_RETURN_IF(a->cols < 0 || a->cols > LTK_MAX_ROWS, LTK_EINVAL, "cols=%lld out of [0, 2^31-1]", (long long)a->cols);
    LTK_RETURN_IF(a->k < 1 || a->k > LTK_SELECT_MAX_K, LTK_EINVAL, "k=%d out of [1, %d]", a->k, LTK_SELECT_MAX_K);
    LTK_RETURN_IF(a->dtype != LTK_DTYPE_F32 && a->dtype != LTK_DTYPE_F16 && a->dtype != LTK_DTYPE_BF16, LTK_EINVAL,
                  "select dtype %d: expected F32, F16 or BF16", (int)a->dtype);
    LTK_RETURN_IF(a->flags & ~(LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE), LTK_EINVAL, "unknown flags 0x%x", a->flags);
    if (a->row_stride == 0) a->row_stride = a->cols;
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->row_stride < a->cols, LTK_EINVAL, "row_stride=%lld < cols=%lld", (long long)a->row_stride,
                  (long long)a->cols);
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "out_stride=%lld < k=%d", (long long)a->out_stride, a->k);
    if (a->rows > 0) {
        LTK_RETURN_IF(!a->out_idx, LTK_EINVAL, "out_idx is required");
        LTK_RETURN_IF(a->cols > 0 && !a->scores, LTK_EINVAL, "scores is NULL");
    }
    LTK_RETURN_IF((a->starts == NULL) != (a->ends == NULL), LTK_EINVAL,
                  "starts and ends must both be given or both be NULL");
    LTK_CHECK_ALIGNED(a->scores, ltk_dtype_size(a->dtype));
    LTK_CHECK_ALIGNED(a->starts, 4);
    LTK_CHECK_ALIGNED(a->ends, 4);
    LTK_CHECK_ALIGNED(a->out_idx, 4);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    if (is_host_backend(bi)) LTK_FORWARD_IF(check_ranges_host(a->starts, a->ends, a->rows, a->cols));
    return LTK_OK;
}

/* Host backends: every length a call uses within [0, max_len] (explicit lens non-negative) and every
 * table entry it reads within [0, num_blocks). */
static ltk_status check_decode_host(const ltk_decode_args *a) {
    for (int64_t b = 0; b < a->B; b++) {
        int64_t need = 0; /* positions request b reads: the longest of its rows */
        for (int32_t r = 0; r < a->next_n; r++) {
            const int64_t t = b * a->next_n + r;
            const int64_t n = ltk_decode_len_given(a, t);
            LTK_RETURN_IF(a->lens && n < 0, LTK_EINVAL, "lens[%lld] = %lld < 0", (long long)t, (long long)n);
            LTK_RETURN_IF(n > a->max_len, LTK_EINVAL, "row %lld: length %lld exceeds max_len = %d (the table holds %lld)",
                          (long long)t, (long long)n, a->max_len, (long long)a->max_blocks * a->block_kv);
            if (n > need) need = n;
        }
        for (int64_t p = 0; p < (need + a->block_kv - 1) / a->block_kv; p++) {
            const int32_t blk = a->block_table[b * a->bt_stride + p];
            LTK_RETURN_IF(blk < 0 || blk >= a->num_blocks, LTK_EINVAL,
                          "block_table[%lld, %lld] = %d is outside the cache's %lld blocks", (long long)b, (long long)p,
                          blk, (long long)a->num_blocks);
        }
    }
    return LTK_OK;
}

static ltk_status decode_fill(const ltk_decode_args *in, ltk_decode_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(a->B < 0 || a->B > LTK_MAX_ROWS, LTK_EINVAL, "B=%lld out of [0, 2^31-1]", (long long)a->B);
    LTK_RETURN_IF(a->next_n < 1 || a->next_n > LTK_DECODE_MAX_NEXT_N, LTK_EINVAL, "next_n=%d out of [1, %d]",
                  a->next_n, LTK_DECODE_MAX_NEXT_N);
    LTK_RETURN_IF(a->B * a->next_n > LTK_MAX_ROWS, LTK_EINVAL, "B*next_n=%lld rows exceed 2^31-1",
                  (long long)(a->B * a->next_n));
    int64_t kv_stride_unused = 0;
    LTK_FORWARD_IF(ltk_check_indexer_inputs(a->H, a->D, a->k, a->dtype, &a->q_stride, &kv_stride_unused,
                                            &a->w_stride, a->q, a->kv_cache, NULL, a->weights));
    LTK_RETURN_IF(a->flags & ~(LTK_FLAG_UNSORTED | LTK_FLAG_PHYSICAL), LTK_EINVAL, "decode flags 0x%x: expected "
                  "LTK_FLAG_UNSORTED and LTK_FLAG_PHYSICAL only", a->flags);
    LTK_RETURN_IF(a->block_kv < 1 || a->block_kv > LTK_DECODE_MAX_BLOCK, LTK_EINVAL, "block_kv=%d out of [1, %d]",
                  a->block_kv, LTK_DECODE_MAX_BLOCK);
    LTK_RETURN_IF(((int64_t)a->block_kv * a->D) % 4, LTK_EINVAL,
                  "block_kv*D=%lld: the scales after the keys need a multiple of 4 bytes", (long long)a->block_kv * a->D);
    const int64_t block_bytes = (int64_t)a->block_kv * (a->D + 4);
    if (a->block_stride == 0) a->block_stride = block_bytes;
    LTK_RETURN_IF(a->block_stride < block_bytes || a->block_stride % 4, LTK_EINVAL,
                  "block_stride=%lld: expected a multiple of 4 and >= block_kv*(D+4) = %lld", (long long)a->block_stride,
                  (long long)block_bytes);
    LTK_RETURN_IF(a->num_blocks < 0 || a->max_blocks < 0, LTK_EINVAL, "num_blocks=%lld, max_blocks=%d",
                  (long long)a->num_blocks, a->max_blocks);
    LTK_RETURN_IF((a->flags & LTK_FLAG_PHYSICAL) && a->num_blocks * a->block_kv > LTK_MAX_ROWS, LTK_EINVAL,
                  "num_blocks*block_kv=%lld: physical slots would not fit in int32",
                  (long long)(a->num_blocks * a->block_kv));
    if (a->bt_stride == 0) a->bt_stride = a->max_blocks;
    LTK_RETURN_IF(a->bt_stride < a->max_blocks, LTK_EINVAL, "bt_stride=%lld < max_blocks=%d", (long long)a->bt_stride,
                  a->max_blocks);
    const int64_t table_len = (int64_t)a->max_blocks * a->block_kv;
    if (a->max_len == 0) a->max_len = (int32_t)(table_len < LTK_MAX_ROWS ? table_len : LTK_MAX_ROWS);
    LTK_RETURN_IF(a->max_len < 0 || a->max_len > table_len, LTK_EINVAL,
                  "max_len=%d out of [0, max_blocks*block_kv = %lld]", a->max_len, (long long)table_len);
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "out_stride=%lld < k=%d", (long long)a->out_stride, a->k);
    if (a->B > 0) {
        LTK_RETURN_IF(!a->q || !a->weights || !a->out_idx || !a->block_table, LTK_EINVAL,
                      "q, weights, block_table and out_idx are required");
        LTK_RETURN_IF(a->num_blocks > 0 && !a->kv_cache, LTK_EINVAL, "kv_cache is NULL");
        LTK_RETURN_IF((a->lens == NULL) == (a->seq_lens == NULL), LTK_EINVAL,
                      "give exactly one of lens [B, next_n] and seq_lens [B]");
    }
    LTK_CHECK_ALIGNED(a->kv_cache, 4);
    LTK_CHECK_ALIGNED(a->block_table, 4);
    LTK_CHECK_ALIGNED(a->lens, 4);
    LTK_CHECK_ALIGNED(a->seq_lens, 4);
    LTK_CHECK_ALIGNED(a->out_idx, 4);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    LTK_RETURN_IF(bi->decode == NULL || bi->decode_workspace == NULL, LTK_EUNSUPPORTED,
                  "backend '%s' has no decode operation in this build", bi->name);
    if (is_host_backend(bi) && a->B > 0) LTK_FORWARD_IF(check_decode_host(a));
    return LTK_OK;
}

/* The candidate indexer's scoring inputs (ix): as indexer_fill takes them, but with no state, the
 * flags each operation knows, and (blocks_only: ltk_blocks_topk) k = 0 for no ordinary top-k. */
static ltk_status cand_ix_fill(const ltk_indexer_args *in, ltk_indexer_args *a, const ltk_backend_i *bi,
                               int blocks_only, uint32_t flags_ok, const char *op) {
    *a = *in;
    const int none = blocks_only && a->k == 0;
    LTK_RETURN_IF(none && (a->out_idx || a->out_scores), LTK_EINVAL,
                  "%s: ix.k = 0 (blocks only) with ix.out_idx or ix.out_scores given", op);
    LTK_RETURN_IF(a->T < 0 || a->T > LTK_MAX_ROWS, LTK_EINVAL, "%s: T=%lld out of [0, 2^31-1]", op, (long long)a->T);
    LTK_RETURN_IF(a->S < 0 || a->S > LTK_MAX_ROWS, LTK_EINVAL, "%s: S=%lld out of [0, 2^31-1]", op, (long long)a->S);
    LTK_FORWARD_IF(ltk_check_indexer_inputs(a->H, a->D, none ? 1 : a->k, a->dtype, &a->q_stride_t, &a->kv_stride_s,
                                            &a->w_stride_t, a->q, a->kv, a->kv_scale, a->weights));
    LTK_RETURN_IF(a->flags & ~flags_ok, LTK_EINVAL, "%s: unknown flags 0x%x", op, a->flags & ~flags_ok);
    LTK_RETURN_IF(a->state != NULL, LTK_EINVAL, "%s: ix.state must be NULL (no hot set here)", op);
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "%s: out_stride=%lld < k=%d", op, (long long)a->out_stride, a->k);
    if (a->T > 0) {
        LTK_RETURN_IF(!a->q || !a->weights, LTK_EINVAL, "%s: q and weights are required", op);
        LTK_RETURN_IF(!none && !a->out_idx, LTK_EINVAL, "%s: ix.out_idx is required", op);
        LTK_RETURN_IF(a->S > 0 && !a->kv, LTK_EINVAL, "%s: kv is NULL", op);
    }
    LTK_RETURN_IF((a->ks == NULL) != (a->ke == NULL), LTK_EINVAL, "%s: ks and ke must both be given or both be NULL", op);
    LTK_CHECK_ALIGNED(a->ks, 4);
    LTK_CHECK_ALIGNED(a->ke, 4);
    LTK_CHECK_ALIGNED(a->out_idx, 4);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    if (is_host_backend(bi)) LTK_FORWARD_IF(check_ranges_host(a->ks, a->ke, a->T, a->S));
    return LTK_OK;
}

#define LTK_CAND_FLAGS (LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE | LTK_FLAG_BY_INDEX)

static ltk_status blocks_fill(const ltk_blocks_args *in, ltk_blocks_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_FORWARD_IF(cand_ix_fill(&in->ix, &a->ix, bi, 1, LTK_CAND_FLAGS | LTK_FLAG_PIN_NEWEST, "blocks"));
    LTK_RETURN_IF(a->block_size < 1 || a->block_size > LTK_BLOCK_MAX_SIZE, LTK_EINVAL, "blocks: block_size=%d out of [1, %d]",
                  a->block_size, LTK_BLOCK_MAX_SIZE);
    LTK_RETURN_IF(a->block_k < 1 || a->block_k > LTK_BLOCKS_MAX_K, LTK_EINVAL, "blocks: block_k=%d out of [1, %d]",
                  a->block_k, LTK_BLOCKS_MAX_K);
    if (a->blocks_stride == 0) a->blocks_stride = a->block_k;
    LTK_RETURN_IF(a->blocks_stride < a->block_k, LTK_EINVAL, "blocks: blocks_stride=%lld < block_k=%d",
                  (long long)a->blocks_stride, a->block_k);
    LTK_RETURN_IF(a->ix.T > 0 && !a->out_blocks, LTK_EINVAL, "blocks: out_blocks is required");
    LTK_CHECK_ALIGNED(a->out_blocks, 4);
    LTK_CHECK_ALIGNED(a->out_block_scores, 4);
    LTK_RETURN_IF(bi->blocks == NULL || bi->blocks_workspace == NULL, LTK_EUNSUPPORTED,
                  "backend '%s' has no blocks operation in this build (the ref backend has)", bi->name);
    return LTK_OK;
}

static ltk_status candidates_fill(const ltk_candidates_args *in, ltk_candidates_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_FORWARD_IF(cand_ix_fill(&in->ix, &a->ix, bi, 0, LTK_CAND_FLAGS, "candidates"));
    LTK_RETURN_IF(a->block_size < 1 || a->block_size > LTK_BLOCK_MAX_SIZE, LTK_EINVAL,
                  "candidates: block_size=%d out of [1, %d]", a->block_size, LTK_BLOCK_MAX_SIZE);
    LTK_RETURN_IF(a->n_blocks < 1 || a->n_blocks > LTK_BLOCKS_MAX_K, LTK_EINVAL, "candidates: n_blocks=%d out of [1, %d]",
                  a->n_blocks, LTK_BLOCKS_MAX_K);
    if (a->blocks_stride == 0) a->blocks_stride = a->n_blocks;
    LTK_RETURN_IF(a->blocks_stride < a->n_blocks, LTK_EINVAL, "candidates: blocks_stride=%lld < n_blocks=%d",
                  (long long)a->blocks_stride, a->n_blocks);
    LTK_RETURN_IF(a->ix.T > 0 && !a->blocks, LTK_EINVAL, "candidates: blocks is required");
    LTK_CHECK_ALIGNED(a->blocks, 4);
    LTK_RETURN_IF(bi->candidates == NULL || bi->candidates_workspace == NULL, LTK_EUNSUPPORTED,
                  "backend '%s' has no candidates operation in this build (the ref backend has)", bi->name);
    return LTK_OK;
}

/* The decode forms' cache and rows (dx) as decode_fill takes them, with the candidate flags
 * and (blocks_only) dx.k = 0 for no ordinary top-k; host backends only. */
static ltk_status cand_dx_fill(const ltk_decode_args *in, ltk_decode_args *a, const ltk_backend_i *bi, int blocks_only,
                               uint32_t extra_ok, const char *op) {
    ltk_decode_args d = *in;
    const int none = blocks_only && d.k == 0;
    LTK_RETURN_IF(none && (d.out_idx || d.out_scores), LTK_EINVAL,
                  "%s: dx.k = 0 (blocks only) with dx.out_idx or dx.out_scores given", op);
    LTK_RETURN_IF(d.flags & ~(LTK_FLAG_UNSORTED | LTK_FLAG_PHYSICAL | extra_ok), LTK_EINVAL, "%s: unknown flags 0x%x", op,
                  d.flags & ~(LTK_FLAG_UNSORTED | LTK_FLAG_PHYSICAL | extra_ok));
    const uint32_t extra = d.flags & extra_ok;
    static int32_t dummy_out;
    d.flags &= ~extra_ok;
    if (none) d.k = 1, d.out_idx = &dummy_out; /* (checked as a call of k = 1; no output is written) */
    LTK_FORWARD_IF(decode_fill(&d, a, bi));
    if (none) a->k = 0, a->out_idx = NULL, a->out_stride = 0;
    a->flags |= extra;
    const int device_op = blocks_only ? bi->decode_blocks != NULL : bi->decode_candidates != NULL;
    LTK_RETURN_IF(!is_host_backend(bi) && !device_op, LTK_EUNSUPPORTED,
                  "%s: backend '%s' has no decode form of it yet (ref and cpu have)", op, bi->name);
    return LTK_OK;
}

static ltk_status decode_blocks_fill(const ltk_decode_blocks_args *in, ltk_decode_blocks_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_FORWARD_IF(cand_dx_fill(&in->dx, &a->dx, bi, 1, LTK_FLAG_BY_INDEX | LTK_FLAG_PIN_NEWEST, "decode blocks"));
    LTK_RETURN_IF(a->block_size < 1 || a->block_size > LTK_BLOCK_MAX_SIZE, LTK_EINVAL,
                  "decode blocks: block_size=%d out of [1, %d]", a->block_size, LTK_BLOCK_MAX_SIZE);
    LTK_RETURN_IF(a->block_k < 1 || a->block_k > LTK_BLOCKS_MAX_K, LTK_EINVAL, "decode blocks: block_k=%d out of [1, %d]",
                  a->block_k, LTK_BLOCKS_MAX_K);
    if (a->blocks_stride == 0) a->blocks_stride = a->block_k;
    LTK_RETURN_IF(a->blocks_stride < a->block_k, LTK_EINVAL, "decode blocks: blocks_stride=%lld < block_k=%d",
                  (long long)a->blocks_stride, a->block_k);
    LTK_RETURN_IF(a->dx.B > 0 && !a->out_blocks, LTK_EINVAL, "decode blocks: out_blocks is required");
    LTK_CHECK_ALIGNED(a->out_blocks, 4);
    LTK_CHECK_ALIGNED(a->out_block_scores, 4);
    return LTK_OK;
}

static ltk_status decode_candidates_fill(const ltk_decode_candidates_args *in, ltk_decode_candidates_args *a,
                                         const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_FORWARD_IF(cand_dx_fill(&in->dx, &a->dx, bi, 0, LTK_FLAG_BY_INDEX, "decode candidates"));
    LTK_RETURN_IF(a->block_size < 1 || a->block_size > LTK_BLOCK_MAX_SIZE, LTK_EINVAL,
                  "decode candidates: block_size=%d out of [1, %d]", a->block_size, LTK_BLOCK_MAX_SIZE);
    LTK_RETURN_IF(a->n_blocks < 1 || a->n_blocks > LTK_BLOCKS_MAX_K, LTK_EINVAL,
                  "decode candidates: n_blocks=%d out of [1, %d]", a->n_blocks, LTK_BLOCKS_MAX_K);
    if (a->blocks_stride == 0) a->blocks_stride = a->n_blocks;
    LTK_RETURN_IF(a->blocks_stride < a->n_blocks, LTK_EINVAL, "decode candidates: blocks_stride=%lld < n_blocks=%d",
                  (long long)a->blocks_stride, a->n_blocks);
    LTK_RETURN_IF(a->dx.B > 0 && !a->blocks, LTK_EINVAL, "decode candidates: blocks is required");
    LTK_CHECK_ALIGNED(a->blocks, 4);
    return LTK_OK;
}

static ltk_status merge_fill(const ltk_merge_args *in, ltk_merge_args *a, const ltk_backend_i *bi) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(!bi->merge, LTK_EUNSUPPORTED, "merge: backend '%s' has none", bi->name);
    LTK_RETURN_IF(a->rows < 0 || a->rows > LTK_MAX_ROWS, LTK_EINVAL, "merge: rows=%lld out of [0, 2^31-1]",
                  (long long)a->rows);
    LTK_RETURN_IF(a->k < 1 || a->k > LTK_SELECT_MAX_K, LTK_EINVAL, "merge: k=%d out of [1, %d]", a->k, LTK_SELECT_MAX_K);
    LTK_RETURN_IF(a->lists < 1 || a->list_len < 1, LTK_EINVAL, "merge: lists=%d and list_len=%d must be >= 1", a->lists,
                  a->list_len);
    LTK_RETURN_IF((int64_t)a->lists * a->list_len > LTK_MAX_ROWS, LTK_EINVAL,
                  "merge: lists * list_len = %lld candidates a row, more than 2^31-1",
                  (long long)a->lists * a->list_len);
    LTK_RETURN_IF(a->flags & ~LTK_FLAG_UNSORTED, LTK_EINVAL, "merge: unknown flags 0x%x", a->flags);
    if (a->list_stride == 0) a->list_stride = a->list_len;
    if (a->row_stride == 0) a->row_stride = a->lists * (int64_t)a->list_len;
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->list_stride < 0 || a->row_stride < 0, LTK_EINVAL, "merge: negative stride (row %lld, list %lld)",
                  (long long)a->row_stride, (long long)a->list_stride);
    LTK_RETURN_IF(a->out_stride < a->k, LTK_EINVAL, "merge: out_stride=%lld < k=%d", (long long)a->out_stride, a->k);
    if (a->rows > 0) {
        LTK_RETURN_IF(!a->out_idx, LTK_EINVAL, "merge: out_idx is required");
        LTK_RETURN_IF(!a->scores || !a->ids, LTK_EINVAL, "merge: scores and ids are required");
    }
    LTK_CHECK_ALIGNED(a->scores, 4);
    LTK_CHECK_ALIGNED(a->ids, 4);
    LTK_CHECK_ALIGNED(a->out_idx, 4);
    LTK_CHECK_ALIGNED(a->out_scores, 4);
    return LTK_OK;
}

/* ---- operations --------------------------------------------------------------------------- */
ltk_status ltk_indexer_workspace_size(const ltk_indexer_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_indexer_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(indexer_fill(args, &a, bi));
    return bi->indexer_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_indexer_topk(const ltk_indexer_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_indexer_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(indexer_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, indexer_workspace, indexer, &a, exec);
}

ltk_status ltk_knn_workspace_size(const ltk_knn_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_knn_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(knn_fill(args, &a));
    return bi->knn_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_knn_topk(const ltk_knn_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_knn_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(knn_fill(args, &a));
    LTK_RUN_WITH_WORKSPACE(bi, knn_workspace, knn, &a, exec);
}

ltk_status ltk_select_workspace_size(const ltk_select_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_select_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(select_fill(args, &a, bi));
    return bi->select_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_select_topk(const ltk_select_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_select_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(select_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, select_workspace, select, &a, exec);
}

ltk_status ltk_decode_workspace_size(const ltk_decode_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_fill(args, &a, bi));
    return bi->decode_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_decode_topk(const ltk_decode_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, decode_workspace, decode, &a, exec);
}

ltk_status ltk_blocks_workspace_size(const ltk_blocks_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_blocks_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(blocks_fill(args, &a, bi));
    return bi->blocks_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_blocks_topk(const ltk_blocks_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_blocks_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(blocks_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, blocks_workspace, blocks, &a, exec);
}

ltk_status ltk_candidates_workspace_size(const ltk_candidates_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_candidates_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(candidates_fill(args, &a, bi));
    return bi->candidates_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_candidates_topk(const ltk_candidates_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_candidates_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(candidates_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, candidates_workspace, candidates, &a, exec);
}

/* ---- hot-set state ------------------------------------------------------------------------ */
ltk_status ltk_indexer_state_create(ltk_backend backend, int32_t sample_size, ltk_indexer_state **out) {
    ltk_clear_error();
    LTK_RETURN_IF(out == NULL, LTK_EINVAL, "out is NULL");
    *out = NULL;
    LTK_RETURN_IF(sample_size < 1 || sample_size > LTK_STATE_MAX_SIZE, LTK_EINVAL, "sample_size=%d out of [1, 2^20]",
                  sample_size);
    ltk_exec e = {0};
    e.backend = backend;
    const ltk_backend_i *bi = NULL;
    LTK_FORWARD_IF(pick_backend(&e, &bi));
    ltk_indexer_state *st = calloc(1, sizeof *st);
    LTK_RETURN_IF(st == NULL, LTK_ENOMEM, "state allocation failed");
    st->tag = LTK_STATE_TAG;
    st->backend = ltk_backend_resolve(backend);
    st->capacity = sample_size;
    ltk_status s = bi->mem_alloc(sizeof(int32_t) * ((size_t)sample_size + 1), (void **)&st->keys);
    if (s != LTK_OK) {
        free(st);
        return s;
    }
    int32_t zero = 0;
    s = bi->mem_from_host(st->keys, &zero, sizeof zero);
    if (s != LTK_OK) {
        bi->mem_free(st->keys);
        free(st);
        return s;
    }
    *out = st;
    return LTK_OK;
}

void ltk_indexer_state_free(ltk_indexer_state *st) {
    if (!st || st->tag != LTK_STATE_TAG) return; /* NULL, freed or foreign: nothing of ours to free */
    const ltk_backend_i *bi = backend_table(st->backend);
    if (bi && st->keys) bi->mem_free(st->keys);
    st->tag = 0;
    free(st);
}

ltk_status ltk_indexer_state_reset(ltk_indexer_state *st) {
    ltk_clear_error();
    LTK_FORWARD_IF(ltk_state_check(st, "state"));
    int32_t zero = 0;
    return backend_table(st->backend)->mem_from_host(st->keys, &zero, sizeof zero);
}

ltk_status ltk_indexer_state_get(const ltk_indexer_state *st, int32_t *idx, int32_t cap, int32_t *count) {
    ltk_clear_error();
    LTK_FORWARD_IF(ltk_state_check(st, "state"));
    LTK_RETURN_IF(count == NULL, LTK_EINVAL, "count is NULL");
    LTK_RETURN_IF(cap < 0 || (cap > 0 && idx == NULL), LTK_EINVAL, "idx is NULL with cap=%d", cap);
    const ltk_backend_i *bi = backend_table(st->backend);
    int32_t n = 0;
    LTK_FORWARD_IF(bi->mem_to_host(&n, st->keys, sizeof n));
    if (n < 0 || n > st->capacity) return ltk_error(LTK_EINTERNAL, "corrupt state count %d", n);
    *count = n;
    int32_t m = n < cap ? n : cap;
    if (m > 0) LTK_FORWARD_IF(bi->mem_to_host(idx, st->keys + 1, sizeof(int32_t) * (size_t)m));
    return LTK_OK;
}

ltk_status ltk_indexer_state_set(ltk_indexer_state *st, const int32_t *idx, int32_t count) {
    ltk_clear_error();
    LTK_FORWARD_IF(ltk_state_check(st, "state"));
    LTK_RETURN_IF(count < 0 || (count > 0 && idx == NULL), LTK_EINVAL, "idx is NULL or count=%d < 0", count);
    ltk_status s = ltk_state_set_host_list(st, idx, count, backend_table(st->backend)->mem_from_host);
    return s;
}

/* ---- info --------------------------------------------------------------------------------- */
ltk_status ltk_info(char *buf, size_t cap) {
    ltk_clear_error();
    LTK_RETURN_IF(buf == NULL || cap == 0, LTK_EINVAL, "buf is NULL or cap is 0");
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap > n ? cap - n : 0, "litetopk %d.%d.%d\nbuild: %s%s\n", LTK_VERSION_MAJOR,
                          LTK_VERSION_MINOR, LTK_VERSION_PATCH,
#ifdef LTK_WITH_CUDA
                          "cuda=on",
#else
                          "cuda=off",
#endif
#ifdef _OPENMP
                          " openmp=on"
#else
                          " openmp=off"
#endif
    );
    static const ltk_backend all[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU, LTK_BACKEND_CUDA};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && n < cap; i++) {
        const ltk_backend_i *bi = backend_table(all[i]);
        n += (size_t)snprintf(buf + n, cap - n, "backend %-4s: %s\n", ltk_backend_name(all[i]),
                              bi == NULL ? "not built" : (bi->available() ? "available" : "no device"));
        if (bi && bi->info && n < cap) {
            bi->info(buf + n, cap - n);
            n += strlen(buf + n);
        }
    }
    if (n < cap)
        snprintf(buf + n, cap - n, "auto resolves to: %s\n", ltk_backend_name(ltk_backend_resolve(LTK_BACKEND_AUTO)));
    return LTK_OK;
}

ltk_status ltk_decode_blocks_workspace_size(const ltk_decode_blocks_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_blocks_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_blocks_fill(args, &a, bi));
    *bytes = 0; /* (the host backends' gather buffers are the call's own) */
    return is_host_backend(bi) ? LTK_OK : bi->decode_blocks_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_decode_blocks_topk(const ltk_decode_blocks_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_blocks_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_blocks_fill(args, &a, bi));
    if (!is_host_backend(bi)) LTK_RUN_WITH_WORKSPACE(bi, decode_blocks_workspace, decode_blocks, &a, exec);
    ltk_exec e;
    memset(&e, 0, sizeof e);
    if (exec) e = *exec;
    e.backend = bi == &ltk_backend_ref ? LTK_BACKEND_REF : LTK_BACKEND_CPU; /* (the inner calls: not auto again) */
    return ltk_decode_blocks_run(&a, &e);
}

ltk_status ltk_decode_candidates_workspace_size(const ltk_decode_candidates_args *args, const ltk_exec *exec,
                                                size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_candidates_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_candidates_fill(args, &a, bi));
    *bytes = 0; /* (the host backends' gather buffers are the call's own) */
    return is_host_backend(bi) ? LTK_OK : bi->decode_candidates_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_decode_candidates_topk(const ltk_decode_candidates_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_decode_candidates_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(decode_candidates_fill(args, &a, bi));
    if (!is_host_backend(bi)) LTK_RUN_WITH_WORKSPACE(bi, decode_candidates_workspace, decode_candidates, &a, exec);
    ltk_exec e;
    memset(&e, 0, sizeof e);
    if (exec) e = *exec;
    e.backend = bi == &ltk_backend_ref ? LTK_BACKEND_REF : LTK_BACKEND_CPU; /* (the inner calls: not auto again) */
    return ltk_decode_candidates_run(&a, &e);
}

ltk_status ltk_merge_workspace_size(const ltk_merge_args *args, const ltk_exec *exec, size_t *bytes) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_merge_args a;
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(merge_fill(args, &a, bi));
    return bi->merge_workspace(&a, exec ? exec : &def, bytes);
}

ltk_status ltk_topk_merge(const ltk_merge_args *args, const ltk_exec *exec) {
    ltk_clear_error();
    const ltk_backend_i *bi = NULL;
    ltk_merge_args a;
    LTK_FORWARD_IF(pick_backend(exec, &bi));
    LTK_FORWARD_IF(merge_fill(args, &a, bi));
    LTK_RUN_WITH_WORKSPACE(bi, merge_workspace, merge, &a, exec);
}
