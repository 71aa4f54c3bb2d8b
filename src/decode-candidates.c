/* The candidate indexer's decode forms on the host backends (ltk_decode_blocks_topk,
 * ltk_decode_candidates_topk; contract in litetopk.h), on the public prefill forms.
 *
 * A request at a time: its keys are gathered from the paged cache into a contiguous key array (in
 * q's element type, e4m3 widened exactly to bf16 or fp32 where q is one of those) with one scale a
 * key, and the prefill form runs on the request's next_n rows with ks = 0, ke = the rows' lengths.
 * The publication gathers the request's whole context (every position is scored anyway); the
 * consumer only the blocks some row of the request lists, in ascending order, so that a row's
 * visible positions are a prefix of the gathered ones and the gathered order is the positions'
 * (ties by the lower position carry over), and its lists are renumbered into the gathered blocks.
 * Outputs are mapped back to positions, or to the cache's slots with LTK_FLAG_PHYSICAL. Arguments
 * arrive validated (litetopk.c), every length and table entry checked. */
#include <stdlib.h>
#include <string.h>

#include "ltk-impl.h"

typedef struct gather {
    uint8_t *kv;        /* keys, D elements of q's dtype each */
    float *scale;
    int32_t *ks, *ke;   /* the request's rows: 0 and their lengths (gathered positions) */
    int64_t cap;        /* keys kv holds */
} gather;

static void gather_free(gather *g) { free(g->kv), free(g->scale), free(g->ks), free(g->ke); }

static ltk_status gather_make(const ltk_decode_args *a, int64_t cap, gather *g) {
    memset(g, 0, sizeof *g);
    g->cap = cap > 0 ? cap : 1;
    g->kv = malloc((size_t)g->cap * (size_t)a->D * ltk_dtype_size(a->dtype));
    g->scale = malloc(sizeof(float) * (size_t)g->cap);
    g->ks = calloc((size_t)a->next_n, sizeof(int32_t));
    g->ke = malloc(sizeof(int32_t) * (size_t)a->next_n);
    if (!g->kv || !g->scale || !g->ks || !g->ke) {
        gather_free(g);
        return ltk_error(LTK_ENOMEM, "decode candidates: gather buffers of %lld keys: allocation failed", (long long)cap);
    }
    return LTK_OK;
}

/* Positions [p0, p0 + n) of request b into gathered keys [at, at + n). */
static void gather_keys(const ltk_decode_args *a, int64_t b, int64_t p0, int64_t n, gather *g, int64_t at) {
    const size_t es = ltk_dtype_size(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = p0 + i;
        const int32_t blk = ltk_decode_block(a, b, p);
        const uint8_t *key = ltk_decode_keys(a, blk) + (size_t)(p % a->block_kv) * (size_t)a->D;
        uint8_t *dst = g->kv + (size_t)(at + i) * (size_t)a->D * es;
        if (a->dtype == LTK_DTYPE_E4M3) {
            memcpy(dst, key, (size_t)a->D);
        } else {
            for (int d = 0; d < a->D; d++) {
                const float x = ltk_e4m3_to_f32(key[d]);
                if (a->dtype == LTK_DTYPE_F32) {
                    memcpy(dst + 4 * (size_t)d, &x, 4);
                } else { /* bf16: the top half of the fp32 bits (exact: e4m3 has 3 mantissa bits) */
                    uint32_t u;
                    memcpy(&u, &x, 4);
                    const uint16_t h = (uint16_t)(u >> 16);
                    memcpy(dst + 2 * (size_t)d, &h, 2);
                }
            }
        }
        g->scale[at + i] = ltk_decode_scales(a, blk)[p % a->block_kv];
    }
}

/* The prefill indexer arguments of request b's rows over n gathered keys. */
static ltk_indexer_args request_ix(const ltk_decode_args *a, int64_t b, const gather *g, int64_t n) {
    ltk_indexer_args ix;
    memset(&ix, 0, sizeof ix);
    const int64_t t0 = b * a->next_n;
    ix.T = a->next_n, ix.S = n, ix.H = a->H, ix.D = a->D, ix.k = a->k, ix.dtype = a->dtype;
    ix.q = (const uint8_t *)a->q + (size_t)t0 * (size_t)a->q_stride * ltk_dtype_size(a->dtype);
    ix.q_stride_t = a->q_stride;
    ix.kv = g->kv, ix.kv_stride_s = a->D, ix.kv_scale = g->scale;
    ix.weights = a->weights + t0 * a->w_stride, ix.w_stride_t = a->w_stride;
    ix.ks = g->ks, ix.ke = g->ke;
    ix.out_idx = a->out_idx ? a->out_idx + t0 * a->out_stride : NULL;
    ix.out_scores = a->out_scores ? a->out_scores + t0 * a->out_stride : NULL;
    ix.out_stride = a->out_stride;
    ix.flags = LTK_FLAG_ABSOLUTE | (a->flags & LTK_FLAG_UNSORTED);
    return ix;
}

/* Request b's output rows: gathered positions to positions (through pos[] when given, block by
 * block of b keys) and to slots with LTK_FLAG_PHYSICAL. */
static void map_rows(const ltk_decode_args *a, int64_t b, const int32_t *cid, int32_t bs) {
    if (!a->out_idx || a->k == 0) return;
    for (int32_t r = 0; r < a->next_n; r++) {
        int32_t *oi = a->out_idx + (b * a->next_n + r) * a->out_stride;
        for (int32_t j = 0; j < a->k; j++) {
            int32_t p = oi[j];
            if (p < 0) continue;
            if (cid) p = cid[p / bs] * bs + p % bs;
            oi[j] = ltk_decode_out(a, b, p);
        }
    }
}

static int64_t request_len(const ltk_decode_args *a, int64_t b, gather *g) {
    int64_t need = 0;
    for (int32_t r = 0; r < a->next_n; r++) {
        g->ke[r] = ltk_decode_len(a, b * a->next_n + r);
        if (g->ke[r] > need) need = g->ke[r];
    }
    return need;
}

/* The exec of the inner calls: the caller's backend, threads and stream, no workspace (sized for
 * another call) and no statistics (set once, at the end). */
static ltk_exec inner_exec(const ltk_exec *e) {
    ltk_exec x;
    memset(&x, 0, sizeof x);
    if (e) x = *e;
    x.workspace = NULL, x.workspace_bytes = 0, x.stats = NULL;
    return x;
}

ltk_status ltk_decode_blocks_run(const ltk_decode_blocks_args *da, const ltk_exec *e) {
    const ltk_decode_args *a = &da->dx;
    const ltk_exec x = inner_exec(e);
    gather g;
    LTK_FORWARD_IF(gather_make(a, a->max_len, &g));
    ltk_status st = LTK_OK;
    for (int64_t b = 0; b < a->B && st == LTK_OK; b++) {
        const int64_t n = request_len(a, b, &g);
        gather_keys(a, b, 0, n, &g, 0);
        ltk_blocks_args ba;
        memset(&ba, 0, sizeof ba);
        ba.ix = request_ix(a, b, &g, n);
        ba.ix.flags |= a->flags & (LTK_FLAG_BY_INDEX | LTK_FLAG_PIN_NEWEST);
        ba.block_size = da->block_size, ba.block_k = da->block_k;
        ba.out_blocks = da->out_blocks + b * a->next_n * da->blocks_stride;
        ba.out_block_scores = da->out_block_scores ? da->out_block_scores + b * a->next_n * da->blocks_stride : NULL;
        ba.blocks_stride = da->blocks_stride;
        st = ltk_blocks_topk(&ba, &x);
        if (st == LTK_OK) map_rows(a, b, NULL, 1);
    }
    gather_free(&g);
    if (st == LTK_OK && e && e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->B * a->next_n;
    }
    return st;
}

static int cmp_i32(const void *pa, const void *pb) {
    const int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
    return (x > y) - (x < y);
}

ltk_status ltk_decode_candidates_run(const ltk_decode_candidates_args *da, const ltk_exec *e) {
    const ltk_decode_args *a = &da->dx;
    const ltk_exec x = inner_exec(e);
    const int32_t bs = da->block_size, nl = da->n_blocks;
    const int64_t most = (int64_t)a->next_n * nl; /* blocks a request can list */
    gather g;
    LTK_FORWARD_IF(gather_make(a, most * bs, &g));
    int32_t *cid = malloc(sizeof(int32_t) * (size_t)most), *lists = malloc(sizeof(int32_t) * (size_t)most);
    if (!cid || !lists) {
        free(cid), free(lists), gather_free(&g);
        return ltk_error(LTK_ENOMEM, "decode candidates: list buffers: allocation failed");
    }
    ltk_status st = LTK_OK;
    for (int64_t b = 0; b < a->B && st == LTK_OK; b++) {
        const int64_t need = request_len(a, b, &g), nbk = (need + bs - 1) / bs;
        /* the blocks some row lists that hold a position the request's rows can see, ascending */
        int64_t u = 0;
        for (int32_t r = 0; r < a->next_n; r++) {
            const int32_t *bl = da->blocks + (b * a->next_n + r) * da->blocks_stride;
            for (int32_t i = 0; i < nl; i++)
                if (bl[i] >= 0 && bl[i] < nbk) cid[u++] = bl[i];
        }
        qsort(cid, (size_t)u, sizeof *cid, cmp_i32);
        int64_t m = 0;
        for (int64_t i = 0; i < u; i++)
            if (m == 0 || cid[m - 1] != cid[i]) cid[m++] = cid[i];
        for (int64_t c = 0; c < m; c++) {
            const int64_t p0 = (int64_t)cid[c] * bs, n = p0 + bs <= need ? bs : need - p0;
            gather_keys(a, b, p0, n, &g, c * bs);
            for (int64_t i = n; i < bs; i++) { /* past every row's length: never visible */
                memset(g.kv + (size_t)(c * bs + i) * (size_t)a->D * ltk_dtype_size(a->dtype), 0,
                       (size_t)a->D * ltk_dtype_size(a->dtype));
                g.scale[c * bs + i] = 0.0f;
            }
        }
        /* rows: their lists in gathered blocks, their lengths in gathered positions (a prefix) */
        for (int32_t r = 0; r < a->next_n; r++) {
            const int32_t *bl = da->blocks + (b * a->next_n + r) * da->blocks_stride;
            for (int32_t i = 0; i < nl; i++) {
                const int32_t *hit = bl[i] >= 0 && bl[i] < nbk ? bsearch(&bl[i], cid, (size_t)m, sizeof *cid, cmp_i32) : NULL;
                lists[r * nl + i] = hit ? (int32_t)(hit - cid) : -1;
            }
            const int32_t len = g.ke[r], full = len / bs;
            int64_t lo = 0, hi = m; /* the gathered blocks below block `full` */
            while (lo < hi) {
                const int64_t mid = (lo + hi) / 2;
                if (cid[mid] < full) lo = mid + 1;
                else hi = mid;
            }
            g.ke[r] = (int32_t)(lo * bs + (lo < m && cid[lo] == full ? len % bs : 0));
        }
        ltk_candidates_args ca;
        memset(&ca, 0, sizeof ca);
        ca.ix = request_ix(a, b, &g, m * bs);
        ca.ix.flags |= a->flags & LTK_FLAG_BY_INDEX;
        ca.block_size = bs, ca.n_blocks = nl, ca.blocks = lists, ca.blocks_stride = nl;
        st = ltk_candidates_topk(&ca, &x);
        if (st == LTK_OK) map_rows(a, b, cid, bs);
    }
    free(cid), free(lists), gather_free(&g);
    if (st == LTK_OK && e && e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->B * a->next_n;
    }
    return st;
}
