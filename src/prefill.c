/* Whole-sequence prefill driver: the indexer over all L tokens of one sequence, chunk by chunk,
 * with the hot set carried between chunks and a workspace bounded independently of L.
 * Backend-agnostic: it only builds per-chunk arguments and calls ltk_indexer_topk. */
#include "ltk-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    size_t indexer, ranges, out_idx, out_scores, state, total;
} prefill_layout;

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* Validates the arguments once, for the size query and the run alike, and resolves the defaults:
 * strides, the chunk (default 8192 rows, never more than L), the hot-set size (3k) and the output
 * stride. */
static ltk_status prefill_fill(const ltk_prefill_args *in, ltk_prefill_args *a) {
    LTK_RETURN_IF(in == NULL, LTK_EINVAL, "args is NULL");
    *a = *in;
    LTK_RETURN_IF(a->L < 0 || a->L > LTK_MAX_ROWS, LTK_EINVAL, "L=%lld out of [0, 2^31-1]", (long long)a->L);
    LTK_RETURN_IF(a->m < 1, LTK_EINVAL, "compression ratio m=%d < 1", a->m);
    LTK_RETURN_IF(a->chunk < 0, LTK_EINVAL, "chunk=%lld < 0", (long long)a->chunk);
    LTK_FORWARD_IF(ltk_check_indexer_inputs(a->H, a->D, a->k, a->dtype, &a->q_stride_t, &a->kv_stride_s,
                                            &a->w_stride_t, a->q, a->kv, a->kv_scale, a->weights));
    LTK_RETURN_IF(a->sample_size < 0 || a->sample_size > LTK_STATE_MAX_SIZE, LTK_EINVAL,
                  "sample_size=%d out of [0, 2^20]", a->sample_size);
    LTK_RETURN_IF(a->flags & ~LTK_FLAG_UNSORTED, LTK_EINVAL, "prefill flags 0x%x: only LTK_FLAG_UNSORTED is allowed",
                  a->flags);
    LTK_RETURN_IF(a->out_scores && !a->out_idx, LTK_EINVAL, "out_scores needs out_idx");
    LTK_RETURN_IF(!a->out_idx && !a->callback && a->L > 0, LTK_EINVAL,
                  "neither out_idx nor a callback: the results would be lost");
    if (a->L > 0) LTK_RETURN_IF(!a->q || !a->weights, LTK_EINVAL, "q and weights are required");
    if (a->L / a->m > 0) LTK_RETURN_IF(!a->kv, LTK_EINVAL, "kv is NULL");
    if (a->out_stride == 0) a->out_stride = a->k;
    LTK_RETURN_IF(a->out_idx && a->out_stride < a->k, LTK_EINVAL, "out_stride=%lld < k=%d", (long long)a->out_stride,
                  a->k);
    LTK_RETURN_IF(!ltk_aligned(a->out_idx, 4) || !ltk_aligned(a->out_scores, 4), LTK_EINVAL,
                  "out_idx or out_scores is not aligned to its 4-byte elements");
    if (a->chunk == 0) a->chunk = 8192;
    if (a->chunk > a->L) a->chunk = a->L > 0 ? a->L : 1;
    if (a->sample_size == 0) a->sample_size = 3 * a->k;
    return LTK_OK;
}

/* Keys the chunk of tokens t0..t0+rows-1 can see: token t sees j < (t + 1) / m, so the chunk's last
 * token bounds them. Each call is planned for its own keys (sample stride, candidate room, tiles),
 * not for the whole sequence's L / m, most of which an early chunk cannot see. */
static int64_t chunk_keys(const ltk_prefill_args *a, int64_t t0, int64_t rows) {
    int64_t s = (t0 + rows) / a->m, all = a->L / a->m;
    return s < all ? s : all;
}

/* The indexer arguments of one chunk. */
static ltk_indexer_args chunk_args(const ltk_prefill_args *a, int64_t t0, int64_t rows) {
    ltk_indexer_args c;
    memset(&c, 0, sizeof c);
    const int64_t qs = a->q_stride_t, ws = a->w_stride_t;
    size_t el = ltk_dtype_size(a->dtype);
    c.T = rows;
    c.S = chunk_keys(a, t0, rows);
    c.H = a->H;
    c.D = a->D;
    c.k = a->k;
    c.dtype = a->dtype;
    c.q = a->q ? (const char *)a->q + (size_t)(t0 * qs) * el : NULL;
    c.q_stride_t = qs;
    c.kv = a->kv;
    c.kv_stride_s = a->kv_stride_s;
    c.kv_scale = a->kv_scale;
    c.weights = a->weights ? a->weights + t0 * ws : NULL;
    c.w_stride_t = ws;
    c.flags = (a->flags & LTK_FLAG_UNSORTED) | LTK_FLAG_ABSOLUTE;
    return c;
}

static ltk_status prefill_layout_of(const ltk_prefill_args *a, const ltk_exec *e, prefill_layout *lay) {
    const int64_t C = a->chunk;
    const int32_t kp = a->sample_size;
    /* Dummy non-NULL pointers so the size query validates shapes without touching memory. */
    static int32_t dummy_i;
    static float dummy_f;
    /* The run passes ranges and the hot-set state; the size depends on both (the state's sample
     * and vote scratch), so the query must see them too. Nothing is dereferenced by a size query
     * (host backends validate the ranges: empty ones, readable). */
    int32_t *zr = calloc((size_t)(C > 0 ? C : 1), sizeof(int32_t));
    if (!zr) return ltk_error(LTK_ENOMEM, "prefill: size query allocation failed");
    struct ltk_indexer_state sz_state = {LTK_STATE_TAG, ltk_backend_resolve(e->backend), kp, &dummy_i};
    ltk_exec ex = *e;
    ex.workspace = NULL;
    ex.workspace_bytes = 0;
    memset(lay, 0, sizeof *lay);
    /* Every chunk is planned for its own key count, and a plan's size need not grow with it (a
     * materialize window of fewer keys holds more rows), so the workspace is the largest over the
     * chunks: one host-side size query per chunk. */
    ltk_status qs = LTK_OK;
    for (int64_t t0 = 0; t0 < (a->L > 0 ? a->L : 1) && qs == LTK_OK; t0 += C) {
        int64_t rows = a->L > 0 && t0 + C > a->L ? a->L - t0 : C;
        ltk_indexer_args c = chunk_args(a, t0, rows);
        if (!c.q) c.q = &dummy_i;
        if (!c.kv) c.kv = &dummy_i;
        if (!c.weights) c.weights = &dummy_f;
        c.out_idx = &dummy_i;
        c.ks = zr;
        c.ke = zr;
        c.state = &sz_state;
        size_t b = 0;
        qs = ltk_indexer_workspace_size(&c, &ex, &b);
        if (b > lay->indexer) lay->indexer = b;
    }
    free(zr);
    LTK_FORWARD_IF(qs);
    lay->indexer = align_up(lay->indexer);
    lay->ranges = align_up(sizeof(int32_t) * 2 * (size_t)C);
    lay->out_idx = a->out_idx ? 0 : align_up(sizeof(int32_t) * (size_t)C * (size_t)a->k);
    lay->out_scores = 0;
    lay->state = align_up(sizeof(int32_t) * ((size_t)kp + 1));
    lay->total = lay->indexer + lay->ranges + lay->out_idx + lay->out_scores + lay->state;
    return LTK_OK;
}

ltk_status ltk_prefill_workspace_size(const ltk_prefill_args *in, const ltk_exec *e, size_t *bytes) {
    ltk_clear_error();
    static const ltk_exec def;
    LTK_RETURN_IF(bytes == NULL, LTK_EINVAL, "bytes is NULL");
    ltk_prefill_args a;
    LTK_FORWARD_IF(prefill_fill(in, &a));
    prefill_layout lay;
    LTK_FORWARD_IF(prefill_layout_of(&a, e ? e : &def, &lay));
    *bytes = lay.total;
    return LTK_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ltk_status ltk_prefill_run(const ltk_prefill_args *in, const ltk_exec *e_in) {
    ltk_clear_error();
    static const ltk_exec def;
    const ltk_exec *e = e_in ? e_in : &def;
    ltk_prefill_args args;
    LTK_FORWARD_IF(prefill_fill(in, &args));
    const ltk_prefill_args *a = &args;
    const ltk_backend_i *bi = NULL;
    LTK_FORWARD_IF(ltk_backend_lookup(e, &bi));
    prefill_layout lay;
    LTK_FORWARD_IF(prefill_layout_of(a, e, &lay));
    if (a->L == 0) return LTK_OK;

    char *ws = e->workspace;
    void *owned = NULL;
    if (ws) {
        LTK_RETURN_IF(e->workspace_bytes < lay.total, LTK_EWORKSPACE,
                      "workspace of %zu bytes is smaller than the %zu bytes required", e->workspace_bytes, lay.total);
    } else {
        LTK_FORWARD_IF(ltk_ws_take(bi, lay.total, e->stream, &owned));
        ws = owned;
    }
    const int64_t C = a->chunk, ostride = a->out_stride;
    const int32_t kp = a->sample_size;
    char *p = ws + lay.indexer;
    int32_t *ranges_dev = (int32_t *)p;
    p += lay.ranges;
    int32_t *chunk_out = lay.out_idx ? (int32_t *)p : NULL;
    p += lay.out_idx + lay.out_scores;
    struct ltk_indexer_state state = {LTK_STATE_TAG, ltk_backend_resolve(e->backend), kp, (int32_t *)p};

    /* host staging of the ranges, for backends that cannot write them on their stream */
    int32_t *ranges_host = bi->causal_ranges ? NULL : ltk_aligned_alloc(sizeof(int32_t) * 2 * (size_t)C);
    ltk_status st = (ranges_host || bi->causal_ranges) ? LTK_OK
                                                       : ltk_error(LTK_ENOMEM, "prefill: range staging allocation failed");
    int32_t zero = 0;
    if (st == LTK_OK) st = bi->mem_from_host(state.keys, &zero, sizeof zero); /* cold start */
    int64_t nchunks = (a->L + C - 1) / C;
    double t_start = now_s();
    for (int64_t ci = 0; ci < nchunks && st == LTK_OK; ci++) {
        int64_t t0 = ci * C, rows = (t0 + C <= a->L) ? C : a->L - t0;
        /* Causal (compressed) visibility: token t sees keys j < (t + 1) / m. A device backend writes
         * them on the stream (ordered after the previous chunk, which read the same buffer). */
        if (bi->causal_ranges) {
            st = bi->causal_ranges(ranges_dev, ranges_dev + C, t0, rows, a->m, e->stream);
        } else {
            for (int64_t r = 0; r < rows; r++) {
                ranges_host[r] = 0;
                ranges_host[C + r] = (int32_t)((t0 + r + 1) / a->m);
            }
            if (bi->stream_sync && ci > 0) st = bi->stream_sync(e->stream); /* previous chunk still reads them */
            if (st == LTK_OK) st = bi->mem_from_host(ranges_dev, ranges_host, sizeof(int32_t) * (size_t)C * 2);
        }
        if (st != LTK_OK) break;
        ltk_indexer_args c = chunk_args(a, t0, rows);
        c.ks = ranges_dev;
        c.ke = ranges_dev + C;
        c.state = &state;
        if (a->out_idx) {
            c.out_idx = a->out_idx + t0 * ostride;
            c.out_scores = a->out_scores ? a->out_scores + t0 * ostride : NULL;
            c.out_stride = ostride;
        } else {
            c.out_idx = chunk_out;
            c.out_stride = a->k;
        }
        ltk_exec ex = *e;
        ex.workspace = ws;
        ex.workspace_bytes = lay.indexer;
        ex.stats = NULL;
        st = ltk_indexer_topk(&c, &ex);
        if (st != LTK_OK) break;
        if (a->callback && a->callback(t0, rows, c.out_idx, c.out_scores, c.out_stride, a->user) != 0)
            st = ltk_error(LTK_EINVAL, "prefill stopped by the callback at chunk %lld", (long long)ci);
        if (a->progress)
            fprintf(stderr, "prefill: chunk %lld/%lld, tokens %lld..%lld, %.1f s\n", (long long)(ci + 1),
                    (long long)nchunks, (long long)t0, (long long)(t0 + rows - 1), now_s() - t_start);
    }
    ltk_aligned_free(ranges_host);
    ltk_ws_give(bi, owned, e->stream);
    return st;
}
