/* DeepSeek-V4.1's candidate indexer on the CPU (ltk_blocks_topk, ltk_candidates_topk; contract in
 * litetopk.h). A thread takes a row: its keys (the row's range for the publication, the listed
 * blocks' keys inside it for the consumer) go through the indexer's kernels tile by tile (the
 * same canonical scores as ltk_indexer_topk on this backend), then the exact select of select.c.
 * The publication keeps a row's scores only for its ordinary top-k; its block maxima are one float
 * a block. Tiles are packed per row: at H = 64, D = 128 packing is ~1.5% of a tile's scoring.
 * The fused publication of e4m3 keys (with or without the row's own top-k) is screened (blocks_group). */
#include "row.h"
#include "ltk-tune.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int nth;
    int screen;     /* the publication's int8 screen may run (fused, e4m3, VNNI) */
    int64_t kcap;   /* its buffer for the row's own top-k */
    int grp;        /* rows a thread screens together (<= SRB, so that every thread has a group) */
    int D4;
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
    /* the publication's int8 screen (plan.screen), for SRB rows at once: per row its packed heads
     * and constants, exact query, block maxima, listed blocks and waiting survivors; the key tile
     * decoded and packed with its bound terms, shared */
    struct scr_row *sr;
    ltkc_rowtmp rtmp;
    uint32_t *tile8;
    float *xf, *kxn, *kxs, *kxr2, *kb, *svs;
} cand_thr;

#define SRB 16 /* rows screened together: a packed key tile serves them all */

typedef struct scr_row {
    int64_t t, lo, hi, j0, nb;
    int32_t hs, nsv, live;
    uint32_t e;               /* the gate (a rank key), and its float for the screen */
    float edge;
    int64_t ncl, next, surv, seen;
    uint32_t *q4;
    int32_t *corr, *svb;
    float *wq, *rcon, *bmax;
    void *q;
    int64_t *cl, *sv;
    ltkc_row kr;              /* the row's own top-k (k > 0): a fixed gate from the sample, exact compactions */
} scr_row;

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
    if (p->screen) {
        const size_t H = (size_t)p->g.H, D = (size_t)p->g.D, D4 = (size_t)p->D4;
        x->sr = ltkc_take(w, sizeof(scr_row) * SRB);
        for (int r = 0; r < SRB; r++) {
            scr_row dummy, *y = w->base ? &x->sr[r] : &dummy; /* the sizing pass has no memory */
            y->q4 = ltkc_take(w, sizeof(uint32_t) * H * D4);
            y->corr = ltkc_take(w, sizeof(int32_t) * H);
            y->wq = ltkc_take(w, sizeof(float) * H);
            y->rcon = ltkc_take(w, sizeof(float) * 4);
            y->q = ltkc_take(w, p->qrow);
            y->bmax = ltkc_take(w, sizeof(float) * (size_t)p->maxb);
            y->cl = ltkc_take(w, sizeof(int64_t) * (size_t)p->maxb);
            y->sv = ltkc_take(w, sizeof(int64_t) * LTKC_IDX_NK);
            y->svb = ltkc_take(w, sizeof(int32_t) * LTKC_IDX_NK);
            y->kr.score = ltkc_take(w, sizeof(float) * (size_t)p->kcap);
            y->kr.idx = ltkc_take(w, sizeof(int64_t) * (size_t)p->kcap);
        }
        x->rtmp.keys = ltkc_take(w, sizeof(uint32_t) * (size_t)p->kcap);
        x->rtmp.pos = ltkc_take(w, sizeof(int32_t) * (size_t)p->kcap);
        x->rtmp.hist = ltkc_take(w, sizeof(uint32_t) * 2048);
        x->xf = ltkc_take(w, sizeof(float) * D); /* ltkc_idx8_row's scratch */
        x->tile8 = ltkc_take(w, sizeof(uint32_t) * 4 * D4 * 16);
        x->kxn = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
        x->kxs = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
        x->kxr2 = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
        x->kb = ltkc_take(w, sizeof(float) * 3 * LTKC_IDX_NK);
        x->svs = ltkc_take(w, sizeof(float) * LTKC_IDX_NK);
    }
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
    p.D4 = (a->D + 3) / 4;
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

/* The canonical scores of keys slist[0..n) (or lo .. lo+n-1 where slist is NULL) for row t, whose
 * packed query is q. */
static void score_keys(const ltk_indexer_args *a, const cand_plan *p, cand_thr *x, const void *q, int64_t t,
                       const int64_t *slist, int64_t lo, int64_t n, float *out) {
    const ltkc_kern *K = ltkc_kernels();
    const float *w = a->weights + t * a->w_stride_t;
    for (int64_t c = 0; c < n; c += LTKC_IDX_NK) {
        const int m = n - c < LTKC_IDX_NK ? (int)(n - c) : LTKC_IDX_NK;
        K->idx_pack_tile(a->kv, a->dtype, a->kv_stride_s, slist ? slist + c : NULL, lo + c, m, &p->g, x->tile);
        if (a->kv_scale)
            for (int j = 0; j < LTKC_IDX_NK; j++) x->scale[j] = j < m ? a->kv_scale[slist ? slist[c + j] : lo + c + j] : 0.0f;
        K->idx_score(q, w, x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
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
    const ltkc_kern *K = ltkc_kernels();
    /* the screen needs what the indexer's does (indexer.c make_plan) and whole blocks in a 64-key tile */
    const int screen = e->algo == LTK_ALGO_FUSED && a->ix.dtype == LTK_DTYPE_E4M3 && K->has_bf16 &&
                       K->idx8_screen && K->idx8_pack_keys && K->idx8_pack_query && a->ix.D <= 1024 &&
                       a->ix.H <= 128 && a->block_size <= LTKC_IDX_NK && ltkc_cpu_idx8() &&
                       !ltk_tune_get()->cpu_idx_screen_off;
    if (!screen) return make_plan(&a->ix, e, n, n / a->block_size + 2, kmax);
    cand_plan p = make_plan(&a->ix, e, n, n / a->block_size + 2, kmax), q = p;
    q.screen = 1; /* the slice again, with the screen's arrays */
    q.kcap = 2 * (int64_t)a->ix.k + 256;
    const int64_t per = (a->ix.T + q.nth - 1) / (q.nth > 0 ? q.nth : 1);
    q.grp = per < 1 ? 1 : per > SRB ? SRB : (int)per;
    ltkc_ws w = {NULL, 0};
    cand_thr x;
    carve(&q, &w, &x);
    q.slice = (w.off + 63) & ~(size_t)63;
    return q;
}

ltk_status ltkc_blocks_ws(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes) {
    const cand_plan p = blocks_plan(a, e);
    *bytes = p.slice * (size_t)p.nth;
    return LTK_OK;
}

/* Scores row y's waiting survivors exactly, raises their blocks' maxima, lists the blocks that
 * reach its gate, and raises the gate once they pass the mark. */
static void scr_flush(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, scr_row *y) {
    const int64_t bk = ba->block_k;
    float *tmp = x->row;
    score_keys(&ba->ix, p, x, y->q, y->t, y->sv, 0, y->nsv, x->svs);
    for (int u = 0; u < y->nsv; u++) {
        if (ba->ix.k > 0) ltkc_row_push(&y->kr, x->svs[u], y->sv[u], &x->rtmp); /* index order */
        float *bm = &y->bmax[y->svb[u]];
        const uint32_t old = ltk_rank_key(*bm), nk = ltk_rank_key(x->svs[u]);
        if (nk <= old) continue;
        *bm = x->svs[u];
        if (old < y->e && nk >= y->e) y->cl[y->ncl++] = y->svb[u];
    }
    y->surv += y->nsv;
    y->nsv = 0;
    if (y->ncl < y->next) return;
    for (int64_t c = 0; c < y->ncl; c++) tmp[c] = y->bmax[y->cl[c]];
    const int64_t got = ltkc_select_row(tmp, LTK_DTYPE_F32, y->ncl, bk, &x->sel, x->okey, x->opos);
    uint32_t v = 0xffffffffu;
    for (int64_t j = 0; j < got; j++) v = x->okey[j] < v ? x->okey[j] : v;
    if (got == bk && v > y->e) y->e = v, y->edge = ltk_rank_key_floor(v);
    int64_t kept = 0;
    for (int64_t c = 0; c < y->ncl; c++)
        if (ltk_rank_key(y->bmax[y->cl[c]]) >= y->e) y->cl[kept++] = y->cl[c];
    y->ncl = kept;
    y->next = kept + (bk / 16 > 64 ? bk / 16 : 64);
}

/* Row t's screen: its heads packed, its exact query, and the starting gate from a sample of its
 * blocks (scored exactly in one list). 0 where the row cannot be screened or has no prediction. */
static int scr_setup(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, scr_row *y, int64_t t) {
    const ltk_indexer_args *a = &ba->ix;
    const ltkc_kern *K = ltkc_kernels();
    const int64_t b = ba->block_size, bk = ba->block_k;
    y->t = t, y->lo = row_lo(a, t), y->hi = row_hi(a, t), y->j0 = y->lo / b, y->nb = (y->hi - 1) / b - y->j0 + 1;
    if (!ltkc_idx8_row(K, (const uint8_t *)a->q + (size_t)t * (size_t)a->q_stride_t, a->weights + t * a->w_stride_t,
                       p->g.H, p->g.D, x->xf, y->q4, y->corr, y->wq, y->rcon, &y->hs))
        return 0;
    const int64_t nb = y->nb, j0 = y->j0, ns = nb < 512 ? nb : 512, rp = ltkc_pred_rank_tail(ns, bk, nb, 1e-3);
    if (rp <= 0) return 0;
    K->idx_pack_q((const char *)a->q + (size_t)t * a->q_stride_t, a->dtype, &p->g, y->q);
    int64_t nk = 0;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t blk = j0 + i * nb / ns;
        for (int64_t s = blk * b > y->lo ? blk * b : y->lo; s < (blk + 1) * b && s < y->hi; s++) x->slist[nk++] = s;
    }
    score_keys(a, p, x, y->q, t, x->slist, 0, nk, x->row);
    float *smax = y->bmax;
    for (int64_t i = 0; i < ns; i++) smax[i] = ltk_bits_f32(LTKC_CANON_NAN);
    for (int64_t u = 0, i = 0; u < nk; u++) {
        while (x->slist[u] / b != j0 + i * nb / ns) i++;
        if (ltk_rank_key(x->row[u]) > ltk_rank_key(smax[i])) smax[i] = x->row[u];
    }
    const int64_t got = ltkc_select_row(smax, LTK_DTYPE_F32, ns, rp, &x->sel, x->okey, x->opos);
    uint32_t e0 = 0xffffffffu;
    for (int64_t j = 0; j < got; j++) e0 = x->okey[j] < e0 ? x->okey[j] : e0;
    if (got < rp || e0 <= 0x007fffffu) return 0; /* NaN or -inf: nothing would be screened out */
    if (a->k > 0) { /* the row's own top-k: a gate at the sample keys' predicted rank (indexer.c) */
        const int64_t rk = ltkc_pred_rank_tail(nk, a->k, y->hi - y->lo, 1e-3);
        if (rk <= 0) return 0;
        const int64_t gk = ltkc_select_row(x->row, LTK_DTYPE_F32, nk, rk, &x->sel, x->okey, x->opos);
        uint32_t k0 = 0xffffffffu;
        for (int64_t j = 0; j < gk; j++) k0 = x->okey[j] < k0 ? x->okey[j] : k0;
        if (gk < rk || k0 <= 0x007fffffu) return 0;
        ltkc_row_setup(&y->kr, y->kr.score, y->kr.idx, NULL, p->kcap, a->k, LTKC_MODE_EDGE);
        y->kr.edge = ltk_rank_key_floor(k0);
    }
    y->e = e0, y->edge = ltk_rank_key_floor(e0);
    y->ncl = 0, y->next = bk + (bk / 16 > 64 ? bk / 16 : 64), y->surv = y->seen = 0, y->nsv = 0, y->live = 1;
    for (int64_t i = 0; i < nb; i++) y->bmax[i] = ltk_bits_f32(LTKC_CANON_NAN);
    return 1;
}

static void blocks_emit(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, int64_t t, const float *cb,
                        const int64_t *cid, int64_t nc);
static void blocks_row(const void *args, const cand_plan *p, cand_thr *x, int64_t t);

/* A screened row's own top-k from its buffer, by best_of as the exact path writes it (the buffer's
 * positions ascend with the keys, so ties and by-position order carry over). */
static void keys_emit(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, scr_row *y) {
    const ltk_indexer_args *a = &ba->ix;
    const int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : y->lo;
    int32_t *oi = a->out_idx + y->t * a->out_stride;
    float *os = a->out_scores ? a->out_scores + y->t * a->out_stride : NULL;
    const int64_t m = best_of(p, x, y->kr.score, y->kr.count, a->k, (a->flags & LTK_FLAG_BY_INDEX) != 0);
    for (int32_t j = 0; j < a->k; j++) {
        oi[j] = j < m ? (int32_t)(y->kr.idx[x->opos[j]] - base) : -1;
        if (os) os[j] = j < m ? y->kr.score[x->opos[j]] : -__builtin_inff();
    }
}

/* The publication of rows [t0, t1) (<= SRB), screened like the fused indexer: indexer.c's
 * int8 bound UB >= the canonical score of every key, one packed key tile for all the rows. Only
 * blocks whose maximum can reach the row's k-th best block maximum matter, and a block's maximum is
 * exact once its largest key is scored: so keys with UB below a lower bound e of that k-th best are
 * never scored, the rest exactly in batches of 64 (score_keys: the exact path's kernel, so its
 * bits). A block then holds bmax <= its true maximum, equal to it wherever that is >= the e its
 * tile was screened at (tiles hold whole blocks); e only rises, so the blocks with bmax >= the
 * final e are exactly those with maximum >= it, with exact maxima. e starts at a predicted value
 * (the rp-th best maximum of 512 strided blocks, rp a 1e-3 tail rank below the estimated k-th:
 * ltkc_pred_rank_tail), rises to the block_k-th best of the listed blocks whenever block_k / 16
 * more reach it, and is proven at the end: >= block_k blocks with bmax >= the final e (each bmax
 * <= its block's maximum) put the k-th best at or above it, and so above every e a tile was
 * screened at. A row without a prediction, one whose proof fails and one where over 30% of the keys
 * survive (the exact scan is cheaper then: indexer.c SCR_OFF_FRAC) takes the exact path
 * (blocks_row). The row's own top-k
 * (k > 0) rides along: its gate starts at the sample keys' predicted rank, rises by exact
 * compactions of its buffer (ltkc_row, MODE_EDGE), and the screen runs at the lower of the two
 * gates; >= k entries pushed prove it, as in the fused indexer. Why: T = 64, S = 64K,
 * b = 8, 2048 blocks, 2 threads, the exact publication took 2.5x the fused indexer (`litetopk
 * bench blocks --T 64 --S 65536 --backend cpu`: 224.9 against 88.2 ms); a row at a time the key
 * packing alone cost as much as the exact scan. */
static void blocks_group(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, int64_t t0, int64_t t1) {
    const ltk_indexer_args *a = &ba->ix;
    const ltkc_kern *K = ltkc_kernels();
    const int64_t b = ba->block_size, L = LTKC_IDX_NK / b * b; /* a tile: whole blocks */
    scr_row *rows[SRB];
    int nr = 0;
    int64_t glo = INT64_MAX, ghi = 0;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t lo = row_lo(a, t), hi = row_hi(a, t), nb = hi > lo ? (hi - 1) / b - lo / b + 1 : 0;
        scr_row *y = &x->sr[nr];
        if (nb > ba->block_k && (a->k == 0 || hi - lo > 4 * (int64_t)a->k) && scr_setup(ba, p, x, y, t)) {
            rows[nr++] = y;
            glo = lo < glo ? lo : glo, ghi = hi > ghi ? hi : ghi;
        } else {
            blocks_row(ba, p, x, t);
        }
    }
    for (int64_t s0 = nr ? glo / L * L : ghi; s0 < ghi; s0 += L) {
        const int64_t s1 = s0 + L < ghi ? s0 + L : ghi;
        int any = 0;
        for (int r = 0; r < nr; r++) any |= rows[r]->live && rows[r]->lo < s1 && rows[r]->hi > s0;
        if (!any) continue;
        ltkc_idx8_keys(K, (const uint8_t *)a->kv, a->kv_stride_s, a->kv_scale, s0, (int)(s1 - s0), p->g.D, x->tile8,
                       x->kxn, x->kxs, x->kxr2, x->kb);
        for (int r = 0; r < nr; r++) {
            scr_row *y = rows[r];
            if (!y->live || y->lo >= s1 || y->hi <= s0) continue;
            const int u0 = (int)((y->lo > s0 ? y->lo : s0) - s0), u1 = (int)((y->hi < s1 ? y->hi : s1) - s0);
            /* the lower of the blocks' gate and the keys' (NaN: every key scored) */
            const float ke = y->kr.edge, se = a->k == 0 || ke >= y->edge ? y->edge : ke;
            uint64_t mask = K->idx8_screen(y->q4, y->corr, y->wq, y->hs, p->g.D, x->tile8, x->kb, y->rcon, se, NULL, 0);
            mask &= (u1 == 64 ? ~0ull : (1ull << u1) - 1) & ~((1ull << u0) - 1);
            for (; mask; mask &= mask - 1) {
                const int64_t s = s0 + __builtin_ctzll(mask);
                y->sv[y->nsv] = s;
                y->svb[y->nsv++] = (int32_t)(s / b - y->j0);
                if (y->nsv == LTKC_IDX_NK) scr_flush(ba, p, x, y);
            }
            y->seen += u1 - u0;
            if (y->seen >= 4096 && (double)(y->surv + y->nsv) > 0.3 * (double)y->seen) y->live = 0;
        }
    }
    for (int r = 0; r < nr; r++) {
        scr_row *y = rows[r];
        if (y->live && y->nsv > 0) scr_flush(ba, p, x, y);
        /* the candidates in block order (y->cl and y->bmax reused), then the proof */
        int64_t c = 0;
        for (int64_t i = 0; y->live && i < y->nb; i++)
            if (ltk_rank_key(y->bmax[i]) >= y->e) y->cl[c] = i, y->bmax[c++] = ltkc_canon(y->bmax[i] + 0.0f);
        /* the keys' proof: >= k entries pushed at or above the starting gate (gates only rise) */
        const int keys_ok = a->k == 0 || y->kr.appended >= a->k;
        if (!(y->live && c >= ba->block_k && keys_ok)) {
            blocks_row(ba, p, x, y->t);
            continue;
        }
        if (a->k > 0) keys_emit(ba, p, x, y);
        blocks_emit(ba, p, x, y->t, y->bmax, y->cl, c);
    }
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
    score_keys(a, p, x, x->q, t, NULL, lo, n, x->row);
    if (!blocks_plain) {
        /* each block's largest score in ORDER (the canonical NaN ranks below every number) */
        for (int64_t i = 0; i < nb; i++) x->bmax[i] = ltk_bits_f32(LTKC_CANON_NAN);
        for (int64_t s = lo; s < hi; s++) {
            float *mx = &x->bmax[s / b - j0];
            if (ltk_rank_key(x->row[s - lo]) > ltk_rank_key(*mx)) *mx = x->row[s - lo];
        }
        for (int64_t i = 0; i < nb; i++) x->bmax[i] = ltkc_canon(x->bmax[i] + 0.0f);
        blocks_emit(ba, p, x, t, x->bmax, NULL, nb);
    }
    if (!keys_plain) {
        const int64_t m = best_of(p, x, x->row, n, a->k, by);
        for (int32_t j = 0; j < a->k; j++) {
            oi[j] = j < m ? (int32_t)(lo + x->opos[j] - base) : -1;
            if (os) os[j] = j < m ? x->row[x->opos[j]] : -__builtin_inff();
        }
    }
}

/* Row t's published blocks from its candidate blocks' maxima cb[0..nc) at block offsets cid (NULL:
 * every block of the row, cid[i] = i), ascending: the block_k best (ties by the lower block), the
 * newest block pinned first where asked, by block id where asked. A block outside the
 * candidates is never published but for the pin (whose score is +inf). */
static void blocks_emit(const ltk_blocks_args *ba, const cand_plan *p, cand_thr *x, int64_t t, const float *cb,
                        const int64_t *cid, int64_t nc) {
    const ltk_indexer_args *a = &ba->ix;
    const int64_t b = ba->block_size, lo = row_lo(a, t), hi = row_hi(a, t), j0 = lo / b;
    const int64_t nb = hi > lo ? (hi - 1) / b - j0 + 1 : 0;
    int32_t *ob = ba->out_blocks + t * ba->blocks_stride;
    float *obs = ba->out_block_scores ? ba->out_block_scores + t * ba->blocks_stride : NULL;
    int64_t m = best_of(p, x, cb, nc, ba->block_k, 0);
    float *sc = (float *)x->okey; /* the published blocks' scores in output order (okey is free now) */
    for (int64_t j = 0; j < m; j++) sc[j] = cb[x->opos[j]];
    if (cid)
        for (int64_t j = 0; j < m; j++) x->opos[j] = (int32_t)cid[x->opos[j]];
    const int64_t pin = (a->flags & LTK_FLAG_PIN_NEWEST) && nb > 0 ? nb - 1 : -1;
    if (pin >= 0) { /* the newest block first: in place of the worst where it is not among them */
        int64_t at = 0;
        while (at < m && x->opos[at] != pin) at++;
        if (at == m) at = m - 1;
        memmove(x->opos + 1, x->opos, sizeof(int32_t) * (size_t)at);
        memmove(sc + 1, sc, sizeof(float) * (size_t)at);
        x->opos[0] = (int32_t)pin;
        sc[0] = __builtin_inff();
    }
    if ((a->flags & LTK_FLAG_BY_INDEX) != 0 && m > 0) {
        /* by block id: the scores follow through the sort (ids are distinct) */
        for (int64_t j = 0; j < m; j++) x->sa[j] = (uint64_t)(uint32_t)x->opos[j] << 32 | ltk_f32_bits(sc[j]);
        ltkc_sort_u64(x->sa, x->sb, m);
        for (int64_t j = 0; j < m; j++) x->opos[j] = (int32_t)(x->sa[j] >> 32), sc[j] = ltk_bits_f32((uint32_t)x->sa[j]);
    }
    for (int32_t j = 0; j < ba->block_k; j++) {
        ob[j] = j < m ? (int32_t)(j0 + x->opos[j]) : -1;
        if (obs) obs[j] = j < m ? sc[j] : -__builtin_inff();
    }
}

/* A thread takes p->grp rows where the screen runs, else a row. */
static void blocks_rows(const void *args, const cand_plan *p, cand_thr *x, int64_t g) {
    const ltk_blocks_args *ba = args;
    if (!p->screen) {
        blocks_row(ba, p, x, g);
        return;
    }
    const int64_t t0 = g * p->grp, t1 = t0 + p->grp < ba->ix.T ? t0 + p->grp : ba->ix.T;
    blocks_group(ba, p, x, t0, t1);
}

ltk_status ltkc_blocks(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const cand_plan p = blocks_plan(a, e);
    return run_rows(&p, a, p.screen ? (a->ix.T + p.grp - 1) / p.grp : a->ix.T, blocks_rows, e, ws, wsb, "blocks");
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
    score_keys(a, p, x, x->q, t, x->slist, 0, n, x->row);
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
