/* CPU decode over a paged cache (ltk_decode_topk).
 *
 * A request's positions run chunk by chunk through the CPU indexer: read in place from the pages
 * (e4m3 q, pages of whole 64-key tiles: the indexer takes a pointer a tile) or else gathered into
 * its contiguous layout (keys in q's element type, one fp32 scale a key). Each chunk runs the CPU
 * indexer for the request's next_n rows with the caller's algo: fused (the sampled threshold, the
 * int8 screen, exact rescoring of the survivors) or materialize. The chunks' exact top-k lists merge exactly: a key of a row's top-k is
 * in its chunk's top-k, and the merge ranks by the ORDER with the logical position. So the scores are
 * the indexer's (fused == materialize bit for bit), and the memory is one chunk a thread whatever the
 * context length. Threads take whole requests. */
#include "cpu-impl.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Keys a chunk gathers: the indexer's fused filter pays from about 12 k keys on (fused_dense), and
 * 64K keys of D = 128 (8 MiB of e4m3 keys) keep a thread's slice small. */
#define DEC_CHUNK 65536

typedef struct dec_plan {
    int64_t chunk;          /* keys a chunk (a multiple of block_kv, <= max_len) */
    int in_place;           /* e4m3 q and whole 64-key tiles a page: the indexer reads the pages (tiles) */
    size_t el;              /* bytes of one key element (q's dtype) */
    size_t keys, scales, ranges, cidx, csc, run_sc, run_pos, idx_ws, slice;
    int nth;
} dec_plan;

static size_t al64(size_t x) { return (x + 63) & ~(size_t)63; }

/* The indexer arguments of one chunk of request b (pointers filled by the caller). */
static ltk_indexer_args chunk_args(const ltk_decode_args *a, int64_t n) {
    ltk_indexer_args c;
    memset(&c, 0, sizeof c);
    c.T = a->next_n, c.S = n, c.H = a->H, c.D = a->D, c.k = a->k, c.dtype = a->dtype;
    c.q_stride_t = a->q_stride, c.kv_stride_s = a->D, c.w_stride_t = a->w_stride, c.out_stride = a->k;
    c.flags = LTK_FLAG_ABSOLUTE; /* sorted, with scores: the merge needs both */
    return c;
}

static dec_plan make_plan(const ltk_decode_args *a, const ltk_exec *e) {
    dec_plan p;
    memset(&p, 0, sizeof p);
    int64_t ch = DEC_CHUNK - DEC_CHUNK % a->block_kv;
    if (ch < a->block_kv) ch = a->block_kv;
    if (ch > a->max_len) ch = a->max_len > 0 ? a->max_len : 1;
    p.chunk = ch;
    p.el = ltk_dtype_size(a->dtype);
    /* Why in place: the gather was 16% of a fused call's samples, and its 8 MiB chunk is written and
     * read again past L2 (perf, `litetopk bench decode --backend cpu --B 8 --ctx 65536 --next-n 2`). */
    p.in_place = a->dtype == LTK_DTYPE_E4M3 && a->block_kv % LTKC_IDX_NK == 0;
    const size_t rows = (size_t)a->next_n, k = (size_t)a->k, ntile = (size_t)((ch + LTKC_IDX_NK - 1) / LTKC_IDX_NK);
    /* in place: the chunk's tile pointers (keys, then scales) instead of its gathered keys */
    p.keys = p.in_place ? al64(ntile * 2 * sizeof(void *)) : al64((size_t)ch * (size_t)a->D * p.el);
    p.scales = p.in_place ? 0 : al64((size_t)ch * 4);
    p.ranges = al64(rows * 2 * 4);
    p.cidx = al64(rows * k * 4);
    p.csc = al64(rows * k * 4);
    p.run_sc = al64(rows * 2 * k * 4); /* the running list and the merge's output, per row */
    p.run_pos = al64(rows * 2 * k * 4);
    /* the indexer's workspace over the chunk sizes a call can meet: plans need not grow with S */
    ltk_exec e1 = *e;
    e1.num_threads = 1, e1.workspace = NULL, e1.workspace_bytes = 0, e1.stats = NULL;
    const int64_t sizes[4] = {ch, ch < 12 * (int64_t)a->k ? ch : 12 * (int64_t)a->k,
                              ch < 12 * (int64_t)a->k + 1 ? ch : 12 * (int64_t)a->k + 1, a->block_kv < ch ? a->block_kv : ch};
    for (int i = 0; i < 4; i++) {
        ltk_indexer_args c = chunk_args(a, sizes[i]);
        size_t b = 0;
        if (ltkc_indexer_ws(&c, &e1, &b) == LTK_OK && b > p.idx_ws) p.idx_ws = b;
    }
    p.idx_ws = al64(p.idx_ws);
    p.slice = p.keys + p.scales + p.ranges + p.cidx + p.csc + p.run_sc + p.run_pos + p.idx_ws;
    int nth = ltkc_threads(e);
    if (nth > a->B) nth = (int)(a->B > 0 ? a->B : 1);
    p.nth = nth;
    return p;
}

ltk_status ltkc_decode_ws(const ltk_decode_args *a, const ltk_exec *e, size_t *bytes) {
    dec_plan p = make_plan(a, e);
    *bytes = p.slice * (size_t)p.nth;
    return LTK_OK;
}

/* Positions [c0, c0 + n) of request b in the indexer's layout: keys (converted to q's element type)
 * and their scales. */
static void gather(const ltk_decode_args *a, int64_t b, int64_t c0, int64_t n, uint8_t *keys, float *scales,
                   size_t el) {
    const int D = a->D;
    for (int64_t i = c0; i < c0 + n;) {
        const int32_t blk = ltk_decode_block(a, b, i);
        const int64_t j0 = i % a->block_kv, cnt = (a->block_kv - j0) < (c0 + n - i) ? a->block_kv - j0 : c0 + n - i;
        const uint8_t *src = ltk_decode_keys(a, blk) + (size_t)j0 * (size_t)D;
        uint8_t *dst = keys + (size_t)(i - c0) * (size_t)D * el;
        if (a->dtype == LTK_DTYPE_E4M3) {
            memcpy(dst, src, (size_t)cnt * (size_t)D);
        } else { /* q in bf16 or f32 (tests, host callers): e4m3 widens exactly to both */
            for (int64_t x = 0; x < cnt * D; x++) {
                const float v = ltk_e4m3_to_f32(src[x]);
                if (a->dtype == LTK_DTYPE_F32) {
                    ((float *)dst)[x] = v;
                } else {
                    uint32_t u = ltk_f32_bits(v);
                    ((uint16_t *)dst)[x] = (uint16_t)(u >> 16); /* e4m3 has 3 mantissa bits: exact */
                }
            }
        }
        memcpy(scales + (i - c0), ltk_decode_scales(a, blk) + j0, (size_t)cnt * sizeof(float));
        i += cnt;
    }
}

/* Tile pointers of positions [c0, c0 + n) of request b (c0 a multiple of block_kv, block_kv of whole
 * 64-key tiles): tile i at keys[i], its scales at scales[i]. */
static void tiles(const ltk_decode_args *a, int64_t b, int64_t c0, int64_t n, const uint8_t **keys,
                  const float **scales) {
    for (int64_t i = 0; i * LTKC_IDX_NK < n; i++) {
        const int64_t pos = c0 + i * LTKC_IDX_NK, j0 = pos % a->block_kv;
        const int32_t blk = ltk_decode_block(a, b, pos);
        keys[i] = ltk_decode_keys(a, blk) + (size_t)j0 * (size_t)a->D;
        scales[i] = ltk_decode_scales(a, blk) + j0;
    }
}

/* Merges the sorted chunk list (sc, idx + c0; -1 ends it) into the sorted running list of `*cnt`
 * entries, keeping the best k by the ORDER; positions of the chunk are all above the running ones. */
static void merge_row(float *run_sc, int32_t *run_pos, int32_t *cnt, const float *sc, const int32_t *idx, int64_t c0,
                      int32_t k, float *tmp_sc, int32_t *tmp_pos) {
    int32_t i = 0, j = 0, n = 0, m = 0;
    while (m < k && idx[m] >= 0) m++;
    while (n < k && (i < *cnt || j < m)) {
        const int take_run = j >= m || (i < *cnt && !ltk_better(sc[j], c0 + idx[j], run_sc[i], run_pos[i]));
        if (take_run) tmp_sc[n] = run_sc[i], tmp_pos[n] = run_pos[i], i++;
        else tmp_sc[n] = sc[j], tmp_pos[n] = (int32_t)(c0 + idx[j]), j++;
        n++;
    }
    memcpy(run_sc, tmp_sc, (size_t)n * sizeof(float));
    memcpy(run_pos, tmp_pos, (size_t)n * sizeof(int32_t));
    *cnt = n;
}

/* One request: its chunks through the indexer, merged; then its output rows. */
static ltk_status decode_request(const ltk_decode_args *a, const ltk_exec *e, const dec_plan *p, int64_t b,
                                 uint8_t *slice, ltk_stats *st) {
    uint8_t *w = slice;
    uint8_t *keys = w;
    float *scales = (float *)(w += p->keys);
    int32_t *ks = (int32_t *)(w += p->scales), *ke = ks + a->next_n;
    int32_t *cidx = (int32_t *)(w += p->ranges);
    float *csc = (float *)(w += p->cidx);
    float *run_sc = (float *)(w += p->csc);
    int32_t *run_pos = (int32_t *)(w += p->run_sc);
    void *idx_ws = (w += p->run_pos);
    const int32_t k = a->k, nn = a->next_n;
    int32_t lens[LTK_DECODE_MAX_NEXT_N], cnt[LTK_DECODE_MAX_NEXT_N], need = 0;
    int all_short = 1;
    for (int32_t r = 0; r < nn; r++) {
        lens[r] = ltk_decode_len(a, b * nn + r), cnt[r] = 0;
        if (lens[r] > need) need = lens[r];
        if (lens[r] > k) all_short = 0;
    }
    const int short_rule = (a->flags & LTK_FLAG_UNSORTED) && !a->out_scores;
    if (!(all_short && short_rule)) {
        ltk_exec e1 = *e;
        e1.num_threads = 1, e1.workspace = idx_ws, e1.workspace_bytes = p->idx_ws, e1.stats = NULL;
        ltk_stats cs;
        memset(&cs, 0, sizeof cs); /* no per-row arrays: the chunks' counters are summed */
        for (int64_t c0 = 0; c0 < need; c0 += p->chunk) {
            const int64_t n = need - c0 < p->chunk ? need - c0 : p->chunk;
            ltkc_kv_tiles tl;
            if (p->in_place) {
                const uint8_t **tk = (const uint8_t **)(void *)keys;
                const float **ts = (const float **)(void *)(tk + (p->chunk + LTKC_IDX_NK - 1) / LTKC_IDX_NK);
                tiles(a, b, c0, n, tk, ts);
                tl.keys = tk, tl.scales = ts;
            } else {
                gather(a, b, c0, n, keys, scales, p->el);
            }
            for (int32_t r = 0; r < nn; r++) {
                const int64_t hi = lens[r] - c0;
                ks[r] = 0, ke[r] = (int32_t)(hi < 0 ? 0 : hi > n ? n : hi);
            }
            ltk_indexer_args c = chunk_args(a, n);
            c.q = (const uint8_t *)a->q + (size_t)(b * nn) * (size_t)a->q_stride * p->el;
            c.kv = p->in_place ? NULL : keys, c.kv_scale = p->in_place ? NULL : scales;
            c.weights = a->weights + b * nn * a->w_stride;
            c.ks = ks, c.ke = ke, c.out_idx = cidx, c.out_scores = csc;
            if (st) e1.stats = &cs;
            LTK_FORWARD_IF(ltkc_indexer_tiles(&c, p->in_place ? &tl : NULL, &e1, idx_ws, p->idx_ws));
            if (st) {
                st->candidates += cs.candidates, st->bin_entries += cs.bin_entries;
                st->compactions += cs.compactions, st->fallback_rows += cs.fallback_rows;
                if (cs.candidates_max > st->candidates_max) st->candidates_max = cs.candidates_max;
                if (cs.bin_entries_max > st->bin_entries_max) st->bin_entries_max = cs.bin_entries_max;
            }
            for (int32_t r = 0; r < nn; r++)
                if (ke[r] > 0)
                    merge_row(run_sc + (size_t)r * 2 * k, run_pos + (size_t)r * 2 * k, &cnt[r], csc + (size_t)r * k,
                              cidx + (size_t)r * k, c0, k, run_sc + (size_t)r * 2 * k + k, run_pos + (size_t)r * 2 * k + k);
        }
    }
    for (int32_t r = 0; r < nn; r++) {
        const int64_t t = b * nn + r;
        int32_t *oi = a->out_idx + t * a->out_stride;
        float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
        if (lens[r] <= k && short_rule) { /* vLLM's rule: 0..len-1 in order, unscored */
            for (int32_t j = 0; j < k; j++) oi[j] = j < lens[r] ? ltk_decode_out(a, b, j) : -1;
            if (st) st->short_rows++;
            continue;
        }
        const float *rs = run_sc + (size_t)r * 2 * k;
        const int32_t *rp = run_pos + (size_t)r * 2 * k;
        for (int32_t j = 0; j < k; j++) {
            oi[j] = j < cnt[r] ? ltk_decode_out(a, b, rp[j]) : -1;
            if (os) os[j] = j < cnt[r] ? rs[j] : -INFINITY;
        }
    }
    return LTK_OK;
}

ltk_status ltkc_decode(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const dec_plan p = make_plan(a, e);
    LTK_RETURN_IF(wsb < p.slice * (size_t)p.nth || (!ws && p.slice), LTK_EWORKSPACE,
                  "cpu decode: workspace %zu < %zu", wsb, p.slice * (size_t)p.nth);
    ltk_status st = LTK_OK;
    ltk_stats total;
    memset(&total, 0, offsetof(ltk_stats, row_candidates));
#pragma omp parallel num_threads(p.nth)
    {
        uint8_t *slice = (uint8_t *)ws + (size_t)omp_get_thread_num() * p.slice;
        ltk_stats mine;
        memset(&mine, 0, offsetof(ltk_stats, row_candidates));
        ltk_status my = LTK_OK;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < a->B; b++)
            if (my == LTK_OK) my = decode_request(a, e, &p, b, slice, e->stats ? &mine : NULL);
#pragma omp critical
        {
            if (my != LTK_OK && st == LTK_OK) st = my;
            total.candidates += mine.candidates, total.bin_entries += mine.bin_entries;
            total.compactions += mine.compactions, total.fallback_rows += mine.fallback_rows;
            total.short_rows += mine.short_rows;
            if (mine.candidates_max > total.candidates_max) total.candidates_max = mine.candidates_max;
            if (mine.bin_entries_max > total.bin_entries_max) total.bin_entries_max = mine.bin_entries_max;
        }
    }
    if (e->stats) {
        int32_t *rc = e->stats->row_candidates, *rb = e->stats->row_bin_entries;
        *e->stats = total;
        e->stats->rows = a->B * a->next_n;
        e->stats->row_candidates = rc, e->stats->row_bin_entries = rb;
    }
    return st;
}
