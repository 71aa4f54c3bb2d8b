/* DeepSeek-V4.1's candidate indexer on the CPU (ltk_blocks_topk, ltk_candidates_topk; contract in
 * litetopk.h). A thread takes a row: its keys (the row's range for the publication, the listed
 * blocks' keys inside it for the consumer) go through the indexer's kernels tile by tile (the
 * same canonical scores as ltk_indexer_topk on this backend), then the exact select of select.c.
 * The publication keeps a row's scores only for its ordinary top-k; its block maxima are one float
 * a block. Tiles are packed per row: at H = 64, D = 128 packing is ~1.5% of a tile's scoring. */
#include "cpu-impl.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int nth;
    ltkc_idx_geom g;
    size_t qrow, tileb;
    int64_t maxn;   /* the most keys a row scores */
    int64_t maxb;   /* the most blocks a row has (publication) or lists (consumer) */
    int64_t kmax;   /* the most outputs a row selects */
    int64_t cap;    /* select buffer */
    size_t slice;   /* workspace a thread */
} cand_plan;

typedef struct {
    void *q, *tile;
    float *sc, *scale, *row, *bmax;
    int64_t *slist, *ids;
    uint32_t *okey;
    int32_t *opos;
    uint64_t *sa, *sb;
    ltkc_selws sel;
} cand_thr;

static void carve(const cand_plan *p, ltkc_ws *w, cand_thr *x) {
    x->q = ltkc_take(w, p->qrow);
    x->tile = ltkc_take(w, p->tileb);
    x->sc = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
    x->scale = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
    x->row = ltkc_take(w, sizeof(float) * (size_t)p->maxn);
    x->bmax = ltkc_take(w, sizeof(float) * (size_t)p->maxb);
    x->slist = ltkc_take(w, sizeof(int64_t) * (size_t)p->maxn);
    x->ids = ltkc_take(w, sizeof(int64_t) * (size_t)p->maxb);
    x->okey = ltkc_take(w, sizeof(uint32_t) * (size_t)p->kmax);
    x->opos = ltkc_take(w, sizeof(int32_t) * (size_t)p->kmax);
    x->sa = ltkc_take(w, sizeof(uint64_t) * (size_t)p->kmax);
    x->sb = ltkc_take(w, sizeof(uint64_t) * (size_t)p->kmax);
    x->sel.hist = ltkc_take(w, sizeof(uint32_t) * LTKC_NB);
    x->sel.bkey = ltkc_take(w, sizeof(uint32_t) * (size_t)p->cap);
    x->sel.bpos = ltkc_take(w, sizeof(int32_t) * (size_t)p->cap);
    x->sel.cap = p->cap;
}

static cand_plan make_plan(const ltk_indexer_args *a, const ltk_exec *e, int64_t maxn, int64_t maxb, int64_t kmax) {
    cand_plan p;
    memset(&p, 0, sizeof p);
    const ltkc_kern *K = ltkc_kernels();
    p.nth = ltkc_threads(e);
    if (a->T < p.nth) p.nth = a->T > 0 ? (int)a->T : 1;
    p.g.H = a->H, p.g.D = a->D;
    p.g.bf16 = K->has_bf16 && a->dtype != LTK_DTYPE_F32;
    p.g.dp = p.g.bf16 ? (a->D + 1) / 2 : a->D;
    p.qrow = ((size_t)a->H * (size_t)p.g.dp * 4 + 63) & ~(size_t)63;
    p.tileb = ltkc_idx_tile_bytes(&p.g);
    p.maxn = maxn > 0 ? maxn : 1;
    p.maxb = maxb > 0 ? maxb : 1;
    p.kmax = kmax > 0 ? kmax : 1;
    p.cap = ltkc_select_cap(p.maxn > p.maxb ? p.maxn : p.maxb, p.kmax);
    ltkc_ws w = {NULL, 0};
    cand_thr x;
    carve(&p, &w, &x);
    p.slice = (w.off + 63) & ~(size_t)63;
    return p;
}

static int64_t row_lo(const ltk_indexer_args *a, int64_t t) { return a->ks ? a->ks[t] : 0; }
static int64_t row_hi(const ltk_indexer_args *a, int64_t t) { return a->ke ? a->ke[t] : a->S; }
static int64_t longest_row(const ltk_indexer_args *a) {
    int64_t m = 0;
    for (int64_t t = 0; t < a->T; t++)
        if (row_hi(a, t) - row_lo(a, t) > m) m = row_hi(a, t) - row_lo(a, t);
    return m;
}

/* The canonical scores of keys slist[0..n) (or lo .. lo+n-1 where slist is NULL) for row t. */
static void score_keys(const ltk_indexer_args *a, const cand_plan *p, cand_thr *x, int64_t t, const int64_t *slist,
                       int64_t lo, int64_t n, float *out) {
    const ltkc_kern *K = ltkc_kernels();
    const float *w = a->weights + t * a->w_stride_t;
    for (int64_t c = 0; c < n; c += LTKC_IDX_NK) {
        const int m = n - c < LTKC_IDX_NK ? (int)(n - c) : LTKC_IDX_NK;
        K->idx_pack_tile(a->kv, a->dtype, a->kv_stride_s, slist ? slist + c : NULL, lo + c, m, &p->g, x->tile);
        if (a->kv_scale)
            for (int j = 0; j < LTKC_IDX_NK; j++) x->scale[j] = j < m ? a->kv_scale[slist ? slist[c + j] : lo + c + j] : 0.0f;
        K->idx_score(x->q, w, x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
        memcpy(out + c, x->sc, sizeof(float) * (size_t)m);
    }
}

/* The best k of row[0..n) in ORDER (ties by the lower position), or by position where by_index:
 * *m entries, positions in x->opos. */
static int64_t best_of(const cand_plan *p, cand_thr *x, const float *row, int64_t n, int64_t k, int by_index) {
    (void)p;
    const int64_t m = ltkc_select_row(row, LTK_DTYPE_F32, n, k, &x->sel, x->okey, x->opos);
    for (int64_t j = 0; j < m; j++)
        x->sa[j] = by_index ? (uint64_t)(uint32_t)x->opos[j] : ltkc_composite(x->okey[j], x->opos[j]);
    ltkc_sort_u64(x->sa, x->sb, m);
    for (int64_t j = 0; j < m; j++) x->opos[j] = (int32_t)(uint32_t)x->sa[j];
    return m;
}

/* Every row of the call through row_fn, a thread a row, each thread on its slice of ws. */
typedef void (*cand_row_fn)(const void *args, const cand_plan *p, cand_thr *x, int64_t t);
static ltk_status run_rows(const cand_plan *p, const void *args, int64_t T, cand_row_fn row_fn, const ltk_exec *e,
                           void *ws, size_t wsb, const char *what) {
    LTK_RETURN_IF(wsb < p->slice * (size_t)p->nth || !ws, LTK_EWORKSPACE, "cpu %s: workspace %zu < %zu", what, wsb,
                  p->slice * (size_t)p->nth);
#pragma omp parallel num_threads(p->nth)
    {
        ltkc_ws w = {(char *)ws + (size_t)omp_get_thread_num() * p->slice, 0};
        cand_thr x;
        carve(p, &w, &x);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < T; t++) row_fn(args, p, &x, t);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    return LTK_OK;
}

/* ---- ltk_blocks_topk -------------------------------------------------------------------------- */
static cand_plan blocks_plan(const ltk_blocks_args *a, const ltk_exec *e) {
    const int64_t n = longest_row(&a->ix);
    const int64_t kmax = a->block_k > a->ix.k ? a->block_k : a->ix.k;
    return make_plan(&a->ix, e, n, n / a->block_size + 2, kmax);
}

ltk_status ltkc_blocks_ws(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes) {
    const cand_plan p = blocks_plan(a, e);
    *bytes = p.slice * (size_t)p.nth;
    return LTK_OK;
}

static void blocks_row(const void *args, const cand_plan *p, cand_thr *x, int64_t t) {
    const ltk_blocks_args *ba = args;
    const ltk_indexer_args *a = &ba->ix;
    const int64_t b = ba->block_size, lo = row_lo(a, t), hi = row_hi(a, t), n = hi - lo;
    const int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo, j0 = lo / b, nb = n > 0 ? (hi - 1) / b - j0 + 1 : 0;
    const int by = (a->flags & LTK_FLAG_BY_INDEX) != 0, loose = (a->flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) != 0;
    int32_t *ob = ba->out_blocks + t * ba->blocks_stride;
    float *obs = ba->out_block_scores ? ba->out_block_scores + t * ba->blocks_stride : NULL;
    int32_t *oi = a->k > 0 ? a->out_idx + t * a->out_stride : NULL;
    float *os = a->k > 0 && a->out_scores ? a->out_scores + t * a->out_stride : NULL;
    const int blocks_plain = nb <= ba->block_k && loose && !obs, keys_plain = !oi || (n <= a->k && loose && !os);
    if (blocks_plain)
        for (int32_t j = 0; j < ba->block_k; j++) ob[j] = j < nb ? (int32_t)(j0 + j) : -1;
    if (oi && keys_plain)
        for (int32_t j = 0; j < a->k; j++) oi[j] = j < n ? (int32_t)(lo + j - base) : -1;
    if (blocks_plain && keys_plain) return;
    ltkc_kernels()->idx_pack_q((const char *)a->q + (size_t)t * a->q_stride_t * ltk_dtype_size(a->dtype), a->dtype,
                               &p->g, x->q);
    score_keys(a, p, x, t, NULL, lo, n, x->row);
    if (!blocks_plain) {
        /* each block's largest score in ORDER (the canonical NaN ranks below every number) */
        for (int64_t i = 0; i < nb; i++) x->bmax[i] = ltk_bits_f32(LTKC_CANON_NAN);
        for (int64_t s = lo; s < hi; s++) {
            float *m = &x->bmax[s / b - j0];
            if (ltk_rank_key(x->row[s - lo]) > ltk_rank_key(*m)) *m = x->row[s - lo];
        }
        for (int64_t i = 0; i < nb; i++) x->bmax[i] = ltkc_canon(x->bmax[i] + 0.0f);
        int64_t m = best_of(p, x, x->bmax, nb, ba->block_k, 0);
        const int64_t pin = (a->flags & LTK_FLAG_PIN_NEWEST) && nb > 0 && hi % b != 0 ? nb - 1 : -1;
        if (pin >= 0) { /* the newest, partial block first: in place of the worst where it is not among them */
            int64_t at = 0;
            while (at < m && x->opos[at] != pin) at++;
            if (at == m) at = m - 1;
            memmove(x->opos + 1, x->opos, sizeof(int32_t) * (size_t)at);
            x->opos[0] = (int32_t)pin;
        }
        if (by) {
            for (int64_t j = 0; j < m; j++) x->sa[j] = (uint64_t)(uint32_t)x->opos[j];
            ltkc_sort_u64(x->sa, x->sb, m);
            for (int64_t j = 0; j < m; j++) x->opos[j] = (int32_t)(uint32_t)x->sa[j];
        }
        for (int32_t j = 0; j < ba->block_k; j++) {
            ob[j] = j < m ? (int32_t)(j0 + x->opos[j]) : -1;
            if (obs) obs[j] = j >= m ? -__builtin_inff() : x->opos[j] == pin ? __builtin_inff() : x->bmax[x->opos[j]];
        }
    }
    if (!keys_plain) {
        const int64_t m = best_of(p, x, x->row, n, a->k, by);
        for (int32_t j = 0; j < a->k; j++) {
            oi[j] = j < m ? (int32_t)(lo + x->opos[j] - base) : -1;
            if (os) os[j] = j < m ? x->row[x->opos[j]] : -__builtin_inff();
        }
    }
}

ltk_status ltkc_blocks(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const cand_plan p = blocks_plan(a, e);
    return run_rows(&p, a, a->ix.T, blocks_row, e, ws, wsb, "blocks");
}

/* ---- ltk_candidates_topk ---------------------------------------------------------------------- */
static cand_plan candidates_plan(const ltk_candidates_args *a, const ltk_exec *e) {
    int64_t n = longest_row(&a->ix), l = (int64_t)a->n_blocks * a->block_size;
    return make_plan(&a->ix, e, n < l ? n : l, a->n_blocks, a->ix.k);
}

ltk_status ltkc_candidates_ws(const ltk_candidates_args *a, const ltk_exec *e, size_t *bytes) {
    const cand_plan p = candidates_plan(a, e);
    *bytes = p.slice * (size_t)p.nth;
    return LTK_OK;
}

static int cmp_i64(const void *pa, const void *pb) {
    const int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
    return (x > y) - (x < y);
}

static void candidates_row(const void *args, const cand_plan *p, cand_thr *x, int64_t t) {
    const ltk_candidates_args *ca = args;
    const ltk_indexer_args *a = &ca->ix;
    const int64_t b = ca->block_size, lo = row_lo(a, t), hi = row_hi(a, t), nbk = (a->S + b - 1) / b;
    const int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
    const int by = (a->flags & LTK_FLAG_BY_INDEX) != 0, loose = (a->flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) != 0;
    const int32_t *bl = ca->blocks + t * ca->blocks_stride;
    int32_t *oi = a->out_idx + t * a->out_stride;
    float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
    /* the listed blocks that exist and meet the row's range, once each, ascending: their keys */
    int64_t m = 0, u = 0, n = 0;
    for (int32_t i = 0; i < ca->n_blocks; i++) {
        const int64_t j = bl[i];
        if (j >= 0 && j < nbk && j * b < hi && (j + 1) * b > lo) x->ids[m++] = j;
    }
    qsort(x->ids, (size_t)m, sizeof *x->ids, cmp_i64);
    for (int64_t i = 0; i < m; i++)
        if (u == 0 || x->ids[u - 1] != x->ids[i]) x->ids[u++] = x->ids[i];
    for (int64_t i = 0; i < u; i++)
        for (int64_t s = x->ids[i] * b > lo ? x->ids[i] * b : lo; s < (x->ids[i] + 1) * b && s < hi; s++) x->slist[n++] = s;
    if (n <= a->k && loose && !os) { /* ascending, unscored */
        for (int32_t j = 0; j < a->k; j++) oi[j] = j < n ? (int32_t)(x->slist[j] - base) : -1;
        return;
    }
    ltkc_kernels()->idx_pack_q((const char *)a->q + (size_t)t * a->q_stride_t * ltk_dtype_size(a->dtype), a->dtype,
                               &p->g, x->q);
    score_keys(a, p, x, t, x->slist, 0, n, x->row);
    /* positions in the list ascend with the keys: ORDER's ties and by_index carry over */
    const int64_t k = best_of(p, x, x->row, n, a->k, by);
    for (int32_t j = 0; j < a->k; j++) {
        oi[j] = j < k ? (int32_t)(x->slist[x->opos[j]] - base) : -1;
        if (os) os[j] = j < k ? x->row[x->opos[j]] : -__builtin_inff();
    }
}

ltk_status ltkc_candidates(const ltk_candidates_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const cand_plan p = candidates_plan(a, e);
    return run_rows(&p, a, a->ix.T, candidates_row, e, ws, wsb, "candidates");
}
