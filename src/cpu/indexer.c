/* DSA/CSA indexer on the CPU backend.
 *
 * Threads take blocks of RB query rows. For each block the q rows are decoded once, and every
 * key tile (64 keys) is decoded once and scored against all rows of the block (the tile stays
 * in L1, q in L2). Fused: each row is gated while its tile scores are in registers/L1 and only
 * candidates are kept (docs/design.md steps 0-6). Materialize: the same block loop stores every
 * score into a row-chunk of the score matrix, then the exact select runs on it.
 *
 * Sample: on the CPU a sampled key costs as much as a scanned one, so the sample is small (512
 * keys): 3/4 strided over the block's common range and 1/4 most recent keys. It fixes the bins,
 * and the strided part (unbiased) gives each long row a predicted start, as in knn.c: the rp-th
 * best strided score, rp = the Poisson(mu = nstr k / n) 1e-6 tail rank, a few sigma below the
 * row's estimated k-th best (T=256 S=64K k=2048: 4,190 candidates per row instead of 10,330 from
 * th = 0). Gates only rise from it (histogram refresh, compaction), so every pushed entry is >= e0;
 * after the scan, >= k pushed entries prove the row's k-th best >= e0 and the select exact;
 * otherwise the row is redone alone from the conservative start (rescan_row, fallback_rows).
 * The hot set (a biased sample: only its k-th best is a safe start) is scored only in blocks
 * where no predicted start exists; there the start is the larger k-th best of the cold and hot
 * parts. The hot-set vote counts keys instead of sorting T k of them (vote_counting).
 */
#include "row.h"
#include "ltk-tune.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define RB 16
#define NK LTKC_IDX_NK
#define COLD_SAMPLE 512       /* strided + recent sample keys a block scores exactly */
#define COLD_SAMPLE_SCR 2048  /* with the int8 screen: a tighter predicted start prunes more */
#define PRED_EPS_SCR 1e-3     /* and the predicted start's tail probability (knn.c: 1e-6) */
#define HOT_MAX 16384
#define MAT_BYTES ((size_t)256 << 20)

typedef struct {
    int nth, k, rbm; /* rbm: rows per materialized chunk */
    ltkc_idx_geom g;
    size_t qrow, tileb;
    int64_t cap, ms, hot;
    int scr_ws, screen8; /* int8 screen: workspace for it (capable), and in use (not turned off) */
    int D4;
    int64_t cold;        /* cold sample size */
    const ltkc_kv_tiles *tl; /* keys read in place (decode's pages), or NULL: a->kv */
    int scaled;          /* a->kv_scale or tl: each key has a scale */
} plan;

typedef struct {
    char *q;          /* [RB][qrow] */
    void *tile;
    float *sc, *scale;/* [NK] */
    uint8_t *gk;      /* [NK][D] listed keys gathered from tl's tiles, and their scales */
    float *gsc;
    ltkc_row *rows;   /* [RB] */
    float *rscore;
    int64_t *ridx;
    uint32_t *rhist;
    ltkc_rowtmp tmp;
    int64_t *slist;   /* [ms] */
    float *ssc;       /* [RB][ms] */
    float *svalid;    /* [ms] */
    uint64_t *sa, *sb;
    int32_t *opos;
    /* materialize select */
    ltkc_selws sel;
    uint32_t *okey;
    /* int8 screen (plan.scr_ws): the key tile packed, per key bound terms, per row the
     * packed heads and constants, per row the survivors waiting to be scored exactly */
    float *xf;                       /* [D] ltkc_idx8_row's scratch */
    uint32_t *tile8;                 /* knn8_pack_tile layout */
    float *kxn, *kxs, *kxr2;         /* [NK] canonical |k|^2, scale (0: off), residual sum of squares */
    float *kb;                       /* [3][NK] kv s_k (NaN: never screened out), kv |k|, kv R_k bounds */
    uint32_t *q4;                    /* [RB][H * D4] */
    int32_t *corr;                   /* [RB][H] */
    float *wq;                       /* [RB][H] */
    float *rcon;                     /* [RB][4]: A+, B+ (over the screened heads), A, W (all heads) */
    int32_t *hs;                     /* [RB] screened heads (those with w > 0) */
    int64_t *sv;                     /* [RB][NK] survivors of each row, in key order */
    void *tile2;                     /* their bf16 tile, scales and exact scores */
    float *scale2, *sc2;
} thr;

static plan make_plan(const ltk_indexer_args *a, const ltk_exec *e) {
    plan p;
    memset(&p, 0, sizeof p);
    const ltkc_kern *K = ltkc_kernels();
    p.nth = ltkc_threads(e);
    int64_t nblk = (a->T + RB - 1) / RB;
    if (nblk < 1) nblk = 1;
    if (e->algo != LTK_ALGO_MATERIALIZE && p.nth > nblk) p.nth = (int)nblk;
    p.k = a->k;
    p.g.H = a->H;
    p.g.D = a->D;
    p.g.bf16 = K->has_bf16 && a->dtype != LTK_DTYPE_F32;
    p.g.dp = p.g.bf16 ? (a->D + 1) / 2 : a->D;
    p.qrow = ((size_t)a->H * (size_t)p.g.dp * 4 + 63) & ~(size_t)63;
    p.tileb = ltkc_idx_tile_bytes(&p.g);
    p.cap = 2 * (int64_t)a->k + 256;
    /* The workspace must not depend on the state (callers size it once, then pass a state):
     * at most 3k hot keys (k' = 3k, best first) are used as the sample. */
    p.hot = 3 * (int64_t)a->k < HOT_MAX ? 3 * (int64_t)a->k : HOT_MAX;
    p.cold = COLD_SAMPLE;
    p.ms = p.cold + p.hot; /* the cold (strided) sample, then the hot keys */
    /* The int8 screen of the fused scan: e4m3 inputs (finite by construction, |x| <= 448), exact
     * scores in bf16 (vdpbf16ps), AVX-512 VNNI (vpdpbusd: twice the bf16 product rate). */
    p.scr_ws = e->algo == LTK_ALGO_FUSED && a->dtype == LTK_DTYPE_E4M3 && p.g.bf16 && K->idx8_screen &&
               K->idx8_pack_keys && K->idx8_pack_query && a->D <= 1024 && a->H <= 128 && ltkc_cpu_idx8();
    /* the test hook turns the screen off (the workspace keeps its room) */
    p.screen8 = p.scr_ws && !ltk_tune_get()->cpu_idx_screen_off;
    p.D4 = (a->D + 3) / 4;
    if (p.scr_ws) { /* T=256 S=64K k=2048: 507 ms with 512 sample keys, 490 with 2048, 500 with 4096 */
        p.cold = COLD_SAMPLE_SCR;
        p.ms = p.cold + p.hot;
    }
    int64_t rbm = a->S > 0 ? (int64_t)(MAT_BYTES / ((size_t)a->S * 4)) : a->T;
    if (rbm < 1) rbm = 1;
    if (rbm > a->T) rbm = a->T > 0 ? a->T : 1;
    p.rbm = (int)rbm;
    return p;
}

static size_t layout(const ltk_indexer_args *a, const plan *p, int mat, char *base, thr **thp, float **M,
                     int32_t **hot) {
    ltkc_ws w = {base, 0};
    thr *th = ltkc_take(&w, sizeof(thr) * (size_t)p->nth);
    if (thp) *thp = th;
    int32_t *h = ltkc_take(&w, sizeof(int32_t) * (size_t)(p->hot + 1));
    if (hot) *hot = h;
    float *m = mat ? ltkc_take(&w, sizeof(float) * (size_t)p->rbm * (size_t)(a->S > 0 ? a->S : 1)) : NULL;
    if (M) *M = m;
    size_t cap = (size_t)p->cap;
    for (int t = 0; t < p->nth; t++) {
        thr x;
        memset(&x, 0, sizeof x);
        x.q = ltkc_take(&w, p->qrow * RB);
        x.tile = ltkc_take(&w, p->tileb);
        x.sc = ltkc_take(&w, sizeof(float) * NK);
        x.scale = ltkc_take(&w, sizeof(float) * NK);
        x.gk = ltkc_take(&w, (size_t)NK * (size_t)p->g.D);
        x.gsc = ltkc_take(&w, sizeof(float) * NK);
        x.sa = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        x.sb = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        x.opos = ltkc_take(&w, sizeof(int32_t) * (size_t)p->k);
        if (!mat) {
            x.rows = ltkc_take(&w, sizeof(ltkc_row) * RB);
            x.rscore = ltkc_take(&w, sizeof(float) * RB * cap);
            x.ridx = ltkc_take(&w, sizeof(int64_t) * RB * cap);
            x.rhist = ltkc_take(&w, sizeof(uint32_t) * RB * LTKC_NB);
            size_t tcap = cap > (size_t)p->ms ? cap : (size_t)p->ms; /* also holds the sample's keys */
            x.tmp.keys = ltkc_take(&w, sizeof(uint32_t) * tcap);
            x.tmp.pos = ltkc_take(&w, sizeof(int32_t) * tcap);
            x.tmp.hist = ltkc_take(&w, sizeof(uint32_t) * 2048);
            x.slist = ltkc_take(&w, sizeof(int64_t) * (size_t)p->ms);
            x.ssc = ltkc_take(&w, sizeof(float) * RB * (size_t)p->ms);
            x.svalid = ltkc_take(&w, sizeof(float) * (size_t)p->ms);
            if (p->scr_ws) {
                size_t H = (size_t)p->g.H, D = (size_t)p->g.D, D4 = (size_t)p->D4;
                x.xf = ltkc_take(&w, sizeof(float) * D);
                x.tile8 = ltkc_take(&w, sizeof(uint32_t) * 4 * D4 * 16);
                x.kxn = ltkc_take(&w, sizeof(float) * NK);
                x.kxs = ltkc_take(&w, sizeof(float) * NK);
                x.kxr2 = ltkc_take(&w, sizeof(float) * NK);
                x.kb = ltkc_take(&w, sizeof(float) * 3 * NK);
                x.q4 = ltkc_take(&w, sizeof(uint32_t) * RB * H * D4);
                x.corr = ltkc_take(&w, sizeof(int32_t) * RB * H);
                x.wq = ltkc_take(&w, sizeof(float) * RB * H);
                x.rcon = ltkc_take(&w, sizeof(float) * RB * 4);
                x.hs = ltkc_take(&w, sizeof(int32_t) * RB);
                x.sv = ltkc_take(&w, sizeof(int64_t) * RB * NK);
                x.tile2 = ltkc_take(&w, p->tileb);
                x.scale2 = ltkc_take(&w, sizeof(float) * NK);
                x.sc2 = ltkc_take(&w, sizeof(float) * NK);
            }
        } else {
            int64_t scap = ltkc_select_cap(a->S, a->k);
            x.sel.hist = ltkc_take(&w, sizeof(uint32_t) * 2048);
            x.sel.bkey = ltkc_take(&w, sizeof(uint32_t) * (size_t)scap);
            x.sel.bpos = ltkc_take(&w, sizeof(int32_t) * (size_t)scap);
            x.sel.cap = scap;
            x.okey = ltkc_take(&w, sizeof(uint32_t) * (size_t)p->k);
        }
        if (th) th[t] = x;
    }
    return w.off;
}

static inline int64_t row_lo(const ltk_indexer_args *a, int64_t t) { return a->ks ? a->ks[t] : 0; }
static inline int64_t row_hi(const ltk_indexer_args *a, int64_t t) { return a->ke ? a->ke[t] : a->S; }

/* Short row answered without scoring (header rule). */
static int shortcut(const ltk_indexer_args *a, int64_t n) {
    return n <= a->k && (a->flags & LTK_FLAG_UNSORTED) && !a->out_scores;
}


/* Keys of tl's tiles as one contiguous [n, D] array: tile s0 / NK itself (slist NULL, s0 a multiple
 * of NK), or the listed keys gathered into x->gk; *sc their scales. */
static const uint8_t *tile_keys(const plan *p, thr *x, const int64_t *slist, int64_t s0, int n, const float **sc) {
    const int64_t D = p->g.D;
    if (!slist) {
        *sc = p->tl->scales[s0 / NK];
        return p->tl->keys[s0 / NK];
    }
    for (int j = 0; j < n; j++) {
        const int64_t s = slist[j];
        memcpy(x->gk + j * D, p->tl->keys[s / NK] + (s % NK) * D, (size_t)D);
        x->gsc[j] = p->tl->scales[s / NK][s % NK];
    }
    *sc = x->gsc;
    return x->gk;
}

/* Keys s0..s0+n-1 (slist NULL) or the n listed ones packed into tile, their scales into scale. */
static void pack_to(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, const int64_t *slist,
                    int64_t s0, int n, void *tile, float *scale) {
    if (p->tl) {
        const float *sc;
        const uint8_t *k = tile_keys(p, x, slist, s0, n, &sc);
        K->idx_pack_tile(k, a->dtype, p->g.D, NULL, 0, n, &p->g, tile);
        for (int j = 0; j < NK; j++) scale[j] = j < n ? sc[j] : 0.0f;
        return;
    }
    K->idx_pack_tile(a->kv, a->dtype, a->kv_stride_s, slist, s0, n, &p->g, tile);
    if (a->kv_scale)
        for (int j = 0; j < NK; j++) scale[j] = j < n ? a->kv_scale[slist ? slist[j] : s0 + j] : 0.0f;
}

static void pack_tile(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, const int64_t *slist,
                      int64_t s0, int n) {
    pack_to(a, p, K, x, slist, s0, n, x->tile, x->scale);
}

static void write_out(const ltk_indexer_args *a, int64_t t, const float *score, const int64_t *idx,
                      const int32_t *pos, int64_t m, const int64_t *nan_idx, int64_t nnan) {
    int32_t *oi = a->out_idx + t * a->out_stride;
    float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
    int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : row_lo(a, t);
    int64_t j = 0;
    for (; j < m; j++) {
        oi[j] = (int32_t)(idx[pos[j]] - base);
        if (os) os[j] = score[pos[j]];
    }
    for (int64_t u = 0; u < nnan && j < a->k; u++, j++) {
        oi[j] = (int32_t)(nan_idx[u] - base);
        if (os) os[j] = ltk_bits_f32(LTKC_CANON_NAN);
    }
    for (; j < a->k; j++) {
        oi[j] = -1;
        if (os) os[j] = -INFINITY;
    }
}

typedef struct {
    int64_t cand, cand_max, bins, bins_max, comp, fb;
    int32_t *rc, *rbe; /* optional per-row detail */
} acc_stats;

/* Bin of the k-th best of s[0..m) (0 if m < k): a lower bound of the row's k-th best's bin when
 * s are scores of distinct keys of the row. */
static int32_t kth_bin(const ltkc_kern *K, thr *x, const ltkc_row *row, const float *s, int64_t m, int64_t k) {
    if (m < k) return 0;
    K->keys_f32(s, m, x->tmp.keys);
    int64_t te;
    uint32_t Kk = ltkc_kth_key(x->tmp.keys, m, k, &te, x->tmp.hist);
    return ltkc_bin(row, ltk_rank_key_to_f32(Kk)); /* NaN: bin 0 */
}

/* Start of a long row (BINS mode) from the block's sample scores x->ssc (docs/design.md step 1).
 * Bins from all valid sample scores; conservative start: the larger k-th-best bin of the cold part
 * and of the hot part (each of distinct keys; the two may share keys, so not of their union).
 * predict: also the predicted start (knn.c's header): the rp-th best of the unbiased strided
 * part, a few sigma below the estimated k-th best; only a guess, verified after the scan.
 * Returns 1 if the row starts at the predicted edge. */
static int row_start(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int r, int64_t lo,
                     int64_t hi, int64_t ms, int64_t ncold, int64_t nstr, int predict) {
    ltkc_row *row = &x->rows[r];
    int64_t mv = 0, mc = 0, msv = 0;
    for (int64_t i = 0; i < ms; i++)
        if (x->slist[i] >= lo && x->slist[i] < hi) {
            x->svalid[mv++] = x->ssc[(size_t)r * p->ms + i];
            if (i < ncold) mc = mv;
            if (i < nstr) msv = mv;
        }
    ltkc_row_sample_bins(row, x->svalid, mv);
    int32_t tc = kth_bin(K, x, row, x->svalid, mc, a->k), th = kth_bin(K, x, row, x->svalid + mc, mv - mc, a->k);
    row->th = tc > th ? tc : th;
    row->edge = ltkc_edge_of(row, row->th);
    /* the strided keys come first in svalid; all of them are valid for the row (msv == nstr) */
    /* With the int8 screen a tighter start saves more scoring than a rare rescan of the row costs. */
    const double eps = p->screen8 ? PRED_EPS_SCR : 1e-6;
    int64_t rp = predict && msv == nstr && nstr >= 64 ? ltkc_pred_rank_tail(nstr, a->k, hi - lo, eps) : 0;
    if (rp <= 0) return 0;
    K->keys_f32(x->svalid, nstr, x->tmp.keys);
    int64_t te;
    uint32_t Kr = ltkc_kth_key(x->tmp.keys, nstr, rp, &te, x->tmp.hist);
    float e0 = ltk_rank_key_to_f32(Kr);
    if (!(e0 > -INFINITY && e0 > row->edge)) return 0; /* NaN, or not above the conservative start */
    int32_t b0 = ltkc_bin(row, e0);
    if (b0 > row->th) row->th = b0; /* edge_of(th' > bin(e0)) > e0: gates only rise */
    row->edge = e0;
    return 1;
}

/* The gate on NK scores sc: lanes j in `lanes` at or above the row's edge are pushed in lane order
 * with key keys[j] (s0 + j when keys is NULL), then the threshold is refreshed from the histogram. */
static void gate_scores(const ltkc_kern *K, thr *x, ltkc_row *row, const float *sc, uint64_t lanes, int64_t s0,
                        const int64_t *keys) {
    uint64_t m;
    /* In the exact mode a score equal to the k-th best's fails: every key gated from here on has a
     * larger index than the k-th's (keys arrive in index order), and ties go to the lower index. So
     * the mask is strict there, and a tie class at the k-th (flat rows, a zero plateau) costs no
     * push per key (T = 64, S = 64K, k = 2048, 2 cores: all-equal rows 185 -> 183 ms, within this
     * machine's noise; the screen's switch-off below is what those rows needed). */
    K->gate_mask(sc, NK, row->mode == LTKC_MODE_EXACT ? nextafterf(row->edge, INFINITY) : row->edge, &m);
    for (m &= lanes; m; m &= m - 1) {
        int j = __builtin_ctzll(m);
        ltkc_row_push(row, sc[j], keys ? keys[j] : s0 + j, &x->tmp);
    }
    ltkc_row_refresh(row);
}

/* The gate on one scored tile (x->sc, keys s0 + j), entries j in [j0, j1). */
static void gate_tile(const ltkc_kern *K, thr *x, ltkc_row *row, int64_t s0, int j0, int j1) {
    gate_scores(K, x, row, x->sc, j1 - j0 == 64 ? ~0ull : ((1ull << (j1 - j0)) - 1) << j0, s0, NULL);
}

/* Fallback of a row whose predicted start failed: the conservative start from the block's sample
 * (still in x->ssc; row r's valid keys), then a scan of the row alone. */
static void rescan_row(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int r, int64_t t,
                       int64_t lo, int64_t hi, const float *w, int64_t ms, int64_t ncold, int64_t nstr) {
    (void)t;
    ltkc_row *row = &x->rows[r];
    ltkc_row_setup(row, x->rscore + (size_t)r * p->cap, x->ridx + (size_t)r * p->cap, x->rhist + (size_t)r * LTKC_NB,
                   p->cap, a->k, LTKC_MODE_BINS);
    row_start(a, p, K, x, r, lo, hi, ms, ncold, nstr, 0);
    for (int64_t s0 = lo - lo % NK; s0 < hi; s0 += NK) {
        int n = hi - s0 < NK ? (int)(hi - s0) : NK;
        pack_tile(a, p, K, x, NULL, s0, n);
        K->idx_score(x->q + p->qrow * r, w, x->tile, p->scaled ? x->scale : NULL, &p->g, x->sc);
        int j0 = lo > s0 ? (int)(lo - s0) : 0, j1 = hi < s0 + n ? (int)(hi - s0) : n;
        gate_tile(K, x, row, s0, j0, j1);
    }
}

/* ---- int8 screen of the fused scan -------------------------------------------------------------
 * For head h, q_h and its int8 form s_q q8 (idx8_pack_query: the measured R_q >= |q_h - s_q q8|), a
 * key k and s_k k8 (idx8_pack_keys: R_k), power-of-two scales, a_h = s_q s_k I_h with I_h = q8 . k8
 * exact in int32 (|I| < 2^24 for D <= 1024, so also as a float), and (knn.c's header)
 *   |q_h . k - a_h| <= |q_h| R_k + R_q (|k| + R_k) = E_h.
 * ReLU is 1-Lipschitz, so the canonical score c = fl(kv fl(sum_h w_h ReLU(dot_h))) (bf16 products,
 * fp32 sums: within (gamma_1024 + gamma_128 + u) kv A |k| + kv W 2^-116 of the real value, the last
 * for partial sums that vdpbf16ps flushes to zero) obeys
 *   c <= kv s_k sum_h+ w_h s_q ReLU(I_h) + kv [A+ R_k + B+ (|k| + R_k)] + 2^-13.7 kv A |k| + kv W 2^-116,
 * the sums h+ over the heads with w_h > 0 only (the others add <= 0), A+ = sum+ w_h |q_h|,
 * B+ = sum+ w_h R_q, A = sum |w_h| |q_h| and W = sum |w_h| over all heads (H <= 128, D <= 1024). Its
 * fp32 evaluation a~ = fl(fl(kv s_k) fl(sum_h+ fl(w_h s_q) ReLU(I_h))) is within gamma_131 < 2^-16.9
 * of kv sum+ w_h |a_h| <= kv (A+ |k| + sum+ w_h E_h). Hence with
 *   bnd = kv [(A+ R_k + B+ (|k| + R_k)) (1 + 2^-12) + 2^-12 A |k| + 2^-100 W |k|]   (|k| >= 2^-9),
 *   UB = a~ + |a~| 2^-20 + bnd (1 + 2^-12) + 2^-140        (the slack covers its own fp32 rounding)
 * c <= UB, and a key with UB < edge fails the gate whatever its exact score: it is not scored.
 * Norms come from the canonical squared norms and residual sums (relative error < 2^-18), raised by
 * 2^-12 before the square root. A key with a non-finite or negative scale, or one the int8 pack
 * turns off (NaN bytes, all zero), gets c1 = NaN and is always scored; a row with a non-finite
 * weight or a head the pack turns off (other than an all-zero head) is not screened at all. */
static const float SCR_UP = 1.0f + 0x1p-12f;
/* A row stops screening once more than SCR_OFF_FRAC of its keys survived (after SCR_OFF_MIN keys):
 * then each key costs a screen and an exact score, more than the plain scan's exact score alone.
 * Why: a row whose k-th best sits in a tie class or a plateau (every score equal; every score 0
 * after the ReLU, whose bound stays > 0) has every key survive, and such rows took 2.5x the time
 * of DSA rows (T = 64, S = 64K, k = 2048, 2 cores: fused 300 against 120 ms; materialize 165). From
 * those figures a screened key costs ~0.45 of a survivor's exact score, which makes the screen pay
 * below ~30% survivors; DSA rows keep 10-14%. */
#define SCR_OFF_MIN 4096
#define SCR_OFF_FRAC 0.3

/* Packs one row's screened heads (w > 0: a head with w <= 0 adds at most 0 to the score, so the
 * bound leaves it out; T=256 S=64K: 21% fewer heads for survivors 10.7% -> 13.9% of the keys at the
 * k-th best): q e4m3 [H][D], w [H]; qf: D floats of scratch. 0 if the row cannot be screened. */
int ltkc_idx8_row(const ltkc_kern *K, const uint8_t *q, const float *w, int H, int D, float *qf, uint32_t *q4,
                  int32_t *corr, float *wq, float *rcon, int32_t *hs_out) {
    const int D4 = (D + 3) / 4;
    double Ap = 0.0, Bp = 0.0, A = 0.0, W = 0.0;
    int hs = 0;
    for (int h = 0; h < H; h++) {
        double n2 = 0.0;
        for (int d = 0; d < D; d++) {
            qf[d] = ltk_e4m3_to_f32(q[(size_t)h * D + d]);
            n2 += (double)qf[d] * (double)qf[d];
        }
        const float wh = w[h];
        if (!isfinite(wh) || !(n2 == n2)) return 0;
        const double nq = sqrt(n2) * (1.0 + 0x1p-30);
        A += fabs((double)wh) * nq;
        W += fabs((double)wh);
        if (!(wh > 0.0f) || n2 == 0.0) continue; /* adds <= 0 (or exactly 0): not screened */
        float out[2];
        int32_t c;
        K->idx8_pack_query(qf, D, q4 + (size_t)hs * D4, out, &c);
        if (!(out[0] > 0.0f) || !isfinite(out[1])) return 0;
        wq[hs] = wh * out[0];
        corr[hs] = c;
        Ap += (double)wh * nq;
        Bp += (double)wh * sqrt((double)out[1] * (double)SCR_UP);
        hs++;
    }
    rcon[0] = (float)Ap * SCR_UP;
    rcon[1] = (float)Bp * SCR_UP;
    rcon[2] = (float)A * SCR_UP;
    rcon[3] = (float)W * SCR_UP;
    *hs_out = hs;
    return isfinite(rcon[0]) && isfinite(rcon[1]) && isfinite(rcon[2]) && isfinite(rcon[3]);
}

/* Packs keys s0..s0+n-1 (n <= 64) of an e4m3 [S, D] array, with each key's bound terms
 * kb = [kv s_k (NaN: always scored) | kv |k| | kv R_k] (64 each). */
void ltkc_idx8_keys(const ltkc_kern *K, const uint8_t *kv, int64_t stride, const float *kv_scale, int64_t s0, int n,
                    int D, uint32_t *tile8, float *kxn, float *kxs, float *kxr2, float *kb) {
    K->idx8_pack_keys(kv, stride, s0, n, D, tile8, kxn, kxs, kxr2);
    for (int j = 0; j < NK; j++) {
        if (j >= n) { /* padding lanes: never read (masked), kept finite */
            kb[j] = kb[NK + j] = kb[2 * NK + j] = 0.0f;
            continue;
        }
        const float sc = kv_scale ? kv_scale[s0 + j] : 1.0f;
        const int ok = isfinite(sc) && sc >= 0.0f && kxs[j] > 0.0f && isfinite(kxr2[j]) && isfinite(kxn[j]);
        kb[j] = ok ? sc * kxs[j] : NAN;
        kb[NK + j] = ok ? sc * sqrtf(kxn[j] * SCR_UP) : 0.0f;
        kb[2 * NK + j] = ok ? sc * sqrtf(kxr2[j] * SCR_UP) : 0.0f;
    }
}

static int screen_row_setup(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int r, int64_t t,
                            const float *w) {
    const int H = p->g.H;
    return ltkc_idx8_row(K, (const uint8_t *)a->q + (size_t)t * (size_t)a->q_stride_t, w, H, p->g.D, x->xf,
                         x->q4 + (size_t)r * H * p->D4, x->corr + (size_t)r * H, x->wq + (size_t)r * H,
                         x->rcon + 4 * r, x->hs + r);
}

static void screen_tile_setup(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int64_t s0, int n) {
    if (p->tl) {
        const float *sc;
        const uint8_t *k = tile_keys(p, x, NULL, s0, n, &sc);
        ltkc_idx8_keys(K, k, p->g.D, sc, 0, n, p->g.D, x->tile8, x->kxn, x->kxs, x->kxr2, x->kb);
        return;
    }
    ltkc_idx8_keys(K, (const uint8_t *)a->kv, a->kv_stride_s, a->kv_scale, s0, n, p->g.D, x->tile8, x->kxn,
                   x->kxs, x->kxr2, x->kb);
}

/* The survivors of keys [j0, j1) of the packed tile for row r: bit j set iff !(UB_j < edge). */
static uint64_t screen_mask(const plan *p, const ltkc_kern *K, thr *x, int r, int j0, int j1, float edge,
                            const uint8_t *pf, int pf_lines) {
    const int H = p->g.H;
    uint64_t m = K->idx8_screen(x->q4 + (size_t)r * H * p->D4, x->corr + (size_t)r * H, x->wq + (size_t)r * H,
                                x->hs[r], p->g.D, x->tile8, x->kb, x->rcon + 4 * r, edge, pf, pf_lines);
    m &= j1 - j0 == 64 ? ~0ull : ((1ull << (j1 - j0)) - 1) << j0;
    return m;
}

/* Scores row r's n waiting survivors exactly (the same kernel and key order as the plain scan) and
 * gates them: their own tile, so that the block's tile stays packed for the other rows. */
static void score_survivors(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int r,
                            const float *w, int n) {
    const int64_t *sl = x->sv + (size_t)r * NK;
    pack_to(a, p, K, x, sl, 0, n, x->tile2, x->scale2);
    K->idx_score(x->q + p->qrow * r, w, x->tile2, p->scaled ? x->scale2 : NULL, &p->g, x->sc2);
    gate_scores(K, x, &x->rows[r], x->sc2, n < 64 ? (1ull << n) - 1 : ~0ull, 0, sl);
}

/* One block of rows [t0, t1) on one thread. mode: 0 fused, 1 materialize (store into M rows
 * starting at row m0), 2 score only. */
static void run_block(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, int64_t t0, int64_t t1,
                      int mode, float *M, int64_t m0, const int32_t *hot, int64_t nhot, acc_stats *st) {
    int nr = (int)(t1 - t0);
    int unsorted = (a->flags & LTK_FLAG_UNSORTED) != 0;
    int active[RB];
    int64_t lo[RB], hi[RB];
    int64_t blo = INT64_MAX, bhi = 0, clo = 0, chi = INT64_MAX;
    int any_long = 0;
    for (int r = 0; r < nr; r++) {
        int64_t t = t0 + r;
        lo[r] = row_lo(a, t);
        hi[r] = row_hi(a, t);
        int64_t n = hi[r] - lo[r];
        active[r] = n > 0 && !shortcut(a, n);
        if (shortcut(a, n) && mode != 2) {
            int32_t *oi = a->out_idx + t * a->out_stride;
            int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo[r];
            for (int64_t j = 0; j < a->k; j++) oi[j] = j < n ? (int32_t)(lo[r] + j - base) : -1;
        } else if (n == 0 && mode != 2) {
            write_out(a, t, NULL, NULL, NULL, 0, NULL, 0);
        }
        if (!active[r]) continue;
        if (lo[r] < blo) blo = lo[r];
        if (hi[r] > bhi) bhi = hi[r];
        if (n > a->k) {
            any_long = 1;
            if (lo[r] > clo) clo = lo[r];
            if (hi[r] < chi) chi = hi[r];
        }
        K->idx_pack_q((const char *)a->q + (size_t)t * a->q_stride_t * ltk_dtype_size(a->dtype), a->dtype, &p->g,
                      x->q + p->qrow * r);
    }
    if (blo >= bhi) return;
    const float *W[RB];
    for (int r = 0; r < nr; r++) W[r] = a->weights + (t0 + r) * a->w_stride_t;
    int pred[RB]; /* 1: the row starts at a predicted edge, verified after the scan */
    memset(pred, 0, sizeof pred);
    /* sample: slist[0..ms); [0..nstr) unbiased strided, [0..ncold) cold (distinct), then hot (distinct) */
    int64_t ms = 0, nstr = 0, ncold = 0;

    if (mode == 0) {
        /* ---- sample: distinct keys valid for the rows that use them ---- */
        if (any_long) {
            if (clo < chi) {
                int64_t len = chi - clo, m = len < p->cold ? len : p->cold;
                int64_t win = m / 4, rest = m - win, slen = len - win;
                for (int64_t i = 0; i < rest; i++) x->slist[ms++] = clo + i * slen / rest;
                nstr = rest;
                for (int64_t i = 0; i < win; i++) x->slist[ms++] = chi - win + i;
            }
            ncold = ms;
            /* Hot keys: each costs a scored key, and where the strided part gives a predicted start
             * for every long row (rp > 0 at the shortest one, the largest mu) that start gates about
             * as tightly as the hot set's k-th best (T=256 S=64K k=2048, chunk 64: 4190 vs 3770
             * candidates per row) for none of the ~4.7% extra scoring, so they are scored only where
             * it does not. Both together: the start is the larger of the two (row_start). */
            int predictable = nstr >= 64 && ltkc_pred_rank_tail(nstr, a->k, chi - clo, p->screen8 ? PRED_EPS_SCR : 1e-6) > 0;
            if (nhot > 0 && !predictable) {
                for (int64_t i = 0; i < nhot && ms < p->ms; i++)
                    if (hot[i] >= blo && hot[i] < bhi) x->slist[ms++] = hot[i];
                if (ms - ncold < 64) ms = ncold; /* hot set misses this block */
            }
        }
        for (int64_t c = 0; c < ms; c += NK) {
            int n = ms - c < NK ? (int)(ms - c) : NK;
            pack_tile(a, p, K, x, x->slist + c, 0, n);
            for (int r = 0; r < nr; r++) {
                if (!active[r] || hi[r] - lo[r] <= a->k) continue;
                K->idx_score(x->q + p->qrow * r, W[r], x->tile, p->scaled ? x->scale : NULL, &p->g, x->sc);
                memcpy(x->ssc + (size_t)r * p->ms + c, x->sc, sizeof(float) * (size_t)n);
            }
        }
        for (int r = 0; r < nr; r++) {
            if (!active[r]) continue;
            int64_t n = hi[r] - lo[r];
            ltkc_row *row = &x->rows[r];
            ltkc_row_setup(row, x->rscore + (size_t)r * p->cap, x->ridx + (size_t)r * p->cap,
                           x->rhist + (size_t)r * LTKC_NB, p->cap, a->k, n <= a->k ? LTKC_MODE_ALL : LTKC_MODE_BINS);
            if (n <= a->k) continue;
            pred[r] = row_start(a, p, K, x, r, lo[r], hi[r], ms, ncold, nstr, 1);
        }
    }

    /* ---- scan ---- */
    /* scr[r]: row r is screened in int8 first; only its survivors are scored exactly, NK at a time.
     * scn[r], svc[r]: keys screened and survivors so far; a row whose survivors pass SCR_OFF_FRAC of
     * the keys after SCR_OFF_MIN is scored plainly from there on (see SCR_OFF_FRAC). */
    int scr[RB], svn[RB];
    int64_t scn[RB], svc[RB];
    memset(scr, 0, sizeof scr);
    memset(svn, 0, sizeof svn);
    memset(scn, 0, sizeof scn);
    memset(svc, 0, sizeof svc);
    if (mode == 0 && p->screen8)
        for (int r = 0; r < nr; r++)
            if (active[r] && x->rows[r].mode == LTKC_MODE_BINS) scr[r] = screen_row_setup(a, p, K, x, r, t0 + r, W[r]);
    for (int64_t s0 = blo - blo % NK; s0 < bhi; s0 += NK) {
        int n = bhi - s0 < NK ? (int)(bhi - s0) : NK;
        int need16 = 0, need8 = 0;
        for (int r = 0; r < nr; r++) {
            if (!active[r] || s0 + NK <= lo[r] || s0 >= hi[r]) continue;
            if (scr[r]) need8 = 1;
            else need16 = 1;
        }
        if (need16) pack_tile(a, p, K, x, NULL, s0, n);
        if (need8) screen_tile_setup(a, p, K, x, s0, n);
        /* The next tile of an in-place cache is another page, whose first lines the hardware
         * prefetcher does not fetch ahead: the pack stalled on them (perf annotate, B = 8, 64K,
         * next_n 2: the key loads' line held 46% of k8_idx_pack_keys' samples). So it is
         * prefetched into L2 while this tile is scored: by the first screened row, spread over the
         * screen's head loop, and before each plainly scored row's score, a share a row (issued
         * all at once, 128 prefetches stalled on the line fill buffers). */
        const uint8_t *pf = NULL;
        int pf_lines = 0, pf_row = 0;
        if (p->tl && s0 + NK < bhi) {
            pf = p->tl->keys[(s0 + NK) / NK];
            pf_lines = (int)((NK * p->g.D + 63) / 64);
            pf_row = (pf_lines + nr - 1) / nr;
            for (int o = 0; o < NK * 4; o += 64) __builtin_prefetch((const char *)p->tl->scales[(s0 + NK) / NK] + o, 0, 2);
        }
        for (int r = 0; r < nr; r++) {
            if (!active[r] || s0 + NK <= lo[r] || s0 >= hi[r]) continue;
            int j0 = lo[r] > s0 ? (int)(lo[r] - s0) : 0, j1 = hi[r] < s0 + n ? (int)(hi[r] - s0) : n;
            if (scr[r]) {
                uint64_t m = screen_mask(p, K, x, r, j0, j1, x->rows[r].edge, pf, pf_lines);
                pf = NULL, pf_lines = 0;
                scn[r] += j1 - j0;
                svc[r] += __builtin_popcountll(m);
                for (; m; m &= m - 1) {
                    x->sv[(size_t)r * NK + svn[r]++] = s0 + __builtin_ctzll(m);
                    if (svn[r] == NK) {
                        score_survivors(a, p, K, x, r, W[r], svn[r]);
                        svn[r] = 0;
                    }
                }
                if (scn[r] >= SCR_OFF_MIN && svc[r] > (int64_t)(SCR_OFF_FRAC * (double)scn[r])) {
                    /* the screen does not prune this row (ties or a plateau at the gate): its
                     * waiting survivors first, so that entries still arrive in index order */
                    if (svn[r] > 0) score_survivors(a, p, K, x, r, W[r], svn[r]);
                    svn[r] = 0;
                    scr[r] = 0;
                }
                continue;
            }
            for (int l = 0; l < pf_row && pf_lines > 0; l++, pf_lines--, pf += 64) __builtin_prefetch(pf, 0, 2);
            K->idx_score(x->q + p->qrow * r, W[r], x->tile, p->scaled ? x->scale : NULL, &p->g, x->sc);
            if (mode == 1) {
                memcpy(M + (size_t)(t0 + r - m0) * (size_t)a->S + s0 + j0, x->sc + j0, sizeof(float) * (size_t)(j1 - j0));
                continue;
            }
            if (mode == 2) continue;
            ltkc_row *row = &x->rows[r];
            if (row->mode == LTKC_MODE_ALL) {
                for (int j = j0; j < j1; j++) ltkc_row_push(row, x->sc[j], s0 + j, &x->tmp);
                continue;
            }
            gate_tile(K, x, row, s0, j0, j1);
        }
    }
    for (int r = 0; r < nr; r++)
        if (scr[r] && svn[r] > 0) score_survivors(a, p, K, x, r, W[r], svn[r]);
    if (mode != 0) return;

    /* ---- select, fallback, output ---- */
    for (int r = 0; r < nr; r++) {
        if (!active[r]) continue;
        int64_t t = t0 + r, n = hi[r] - lo[r];
        ltkc_row *row = &x->rows[r];
        int64_t be, app0 = 0, comp0 = 0, redone = 0;
        if (pred[r] && row->appended < a->k) {
            /* Fewer than k entries passed a gate >= e0: e0 is not proven <= the k-th best.
             * Redo the row from the conservative start (the sample's k-th best). */
            app0 = row->appended;
            comp0 = row->compactions;
            rescan_row(a, p, K, x, r, t0 + r, lo[r], hi[r], W[r], ms, ncold, nstr);
            st->fb++;
            redone = 1;
        }
        int64_t m = ltkc_row_final(row, &x->tmp, x->sa, x->sb, unsorted, x->opos, &be);
        int64_t nnan = 0;
        int64_t *nan_idx = (int64_t *)x->sa;
        if (m < a->k && n > a->k) {
            /* fewer than k non-NaN scores: the rest are the lowest-index NaN scores (dense rescan) */
            int64_t need = a->k - m;
            for (int64_t s0 = lo[r] - lo[r] % NK; s0 < hi[r] && nnan < need; s0 += NK) {
                int nn = hi[r] - s0 < NK ? (int)(hi[r] - s0) : NK;
                pack_tile(a, p, K, x, NULL, s0, nn);
                K->idx_score(x->q + p->qrow * r, W[r], x->tile, p->scaled ? x->scale : NULL, &p->g, x->sc);
                for (int j = 0; j < nn && nnan < need; j++)
                    if (s0 + j >= lo[r] && x->sc[j] != x->sc[j]) nan_idx[nnan++] = s0 + j;
            }
            if (!redone) st->fb++;
        }
        row->appended += app0;
        row->compactions += comp0;
        write_out(a, t, row->score, row->idx, x->opos, m, nan_idx, nnan);
        if (n > a->k) {
            st->cand += row->appended;
            if (row->appended > st->cand_max) st->cand_max = row->appended;
            st->bins += be;
            if (be > st->bins_max) st->bins_max = be;
            st->comp += row->compactions;
        }
        if (n > a->k && st->rc) st->rc[t] = (int32_t)(row->appended < INT32_MAX ? row->appended : INT32_MAX);
        if (n > a->k && st->rbe) st->rbe[t] = (int32_t)(be < INT32_MAX ? be : INT32_MAX);
    }
}

/* The hot-set vote of ltk_state_vote_host (votes desc, then larger key first; the same result),
 * by counting instead of sorting T k keys: keys are < S, votes <= T. 0: use the host one. */
/* Counting needs an S-sized array: only when that is no larger than the sort's O(T k) scratch
 * (S may be up to 2^31: 8 GiB of counters for a handful of rows). */
static int vote_by_counting(const ltk_indexer_args *a) { return a->S <= 4 * a->T * (int64_t)a->k; }

/* Workspace bytes of the vote; it runs after the scan and overlays the start of the workspace. */
static size_t vote_bytes(const ltk_indexer_args *a, const ltk_exec *e) {
    if (!a->state || e->algo == LTK_ALGO_SCORE_ONLY) return 0;
    if (vote_by_counting(a)) return sizeof(int64_t) * ((size_t)a->T + 2) + sizeof(int32_t) * ((size_t)a->S + 1) + 64;
    return ltk_state_vote_host_scratch(a->T, a->k);
}

static int vote_counting(const ltk_indexer_args *a, void *ws) {
    int64_t S = a->S, T = a->T;
    if (!vote_by_counting(a)) return 0;
    int64_t *off = ws;
    int32_t *cnt = (int32_t *)(off + T + 2);
    memset(off, 0, sizeof(int64_t) * ((size_t)T + 2));
    memset(cnt, 0, sizeof(int32_t) * ((size_t)S + 1));
    int ok = 1;
    int absolute = (a->flags & LTK_FLAG_ABSOLUTE) != 0;
    for (int64_t t = 0; t < T && ok; t++) {
        int64_t base = (absolute || !a->ks) ? 0 : a->ks[t];
        const int32_t *oi = a->out_idx + t * a->out_stride;
        for (int64_t j = 0; j < a->k; j++) {
            int64_t v = oi[j];
            if (v < 0) continue;
            v += base;
            if (v >= S || v > INT32_MAX || cnt[v] >= T) { /* (a repeated key: not ours) */
                ok = 0;
                break;
            }
            cnt[v]++;
        }
    }
    if (ok) {
        /* off[v] = keys with more than v votes (v <= T: a key appears at most once per row) */
        for (int64_t key = 0; key < S; key++)
            if (cnt[key] > 0) off[cnt[key] - 1]++;
        int64_t acc = 0;
        for (int64_t v = T; v >= 0; v--) {
            int64_t c = off[v];
            off[v] = acc;
            acc += c;
        }
        int64_t cap = a->state->capacity, m = acc < cap ? acc : cap;
        a->state->keys[0] = (int32_t)m;
        for (int64_t key = S - 1; key >= 0; key--)
            if (cnt[key] > 0) {
                int64_t pos = off[cnt[key] - 1]++;
                if (pos < m) a->state->keys[1 + pos] = (int32_t)key;
            }
    }
    return ok;
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* A fused call over few keys runs as materialize: score every key, then the exact select (the
 * same scores, so the same result). Why: with S <= 12k keys a row the filter keeps too large a
 * share to pay for its sample and screen (2 Zen 4 cores, T=256 H=64 k=2048: S=4K fused 118 vs
 * materialize 49 ms, 16K 219 vs 187, 32K 314 vs 389). LTK_CPU_FUSED_DENSE=0 keeps the filter (the
 * tests of the fused path set it). */
static int fused_dense(const ltk_indexer_args *a, const ltk_exec *e) {
    if (e->algo != LTK_ALGO_FUSED) return 0;
    if (ltk_tune_get()->cpu_fused_dense_off) return 0; /* test hook: keep the filter */
    return a->S <= 12 * (int64_t)a->k;
}

/* (the workspace does not depend on tl: x->gk is always laid out) */
ltk_status ltkc_indexer_ws(const ltk_indexer_args *a, const ltk_exec *e_in, size_t *bytes) {
    ltk_exec ed = *e_in;
    if (fused_dense(a, e_in)) ed.algo = LTK_ALGO_MATERIALIZE;
    const ltk_exec *e = &ed;
    plan p = make_plan(a, e);
    size_t need = layout(a, &p, e->algo == LTK_ALGO_MATERIALIZE, NULL, NULL, NULL, NULL), vb = vote_bytes(a, e);
    *bytes = need > vb ? need : vb;
    return LTK_OK;
}

ltk_status ltkc_indexer(const ltk_indexer_args *a, const ltk_exec *e_in, void *ws, size_t wsb) {
    return ltkc_indexer_tiles(a, NULL, e_in, ws, wsb);
}

ltk_status ltkc_indexer_tiles(const ltk_indexer_args *a, const ltkc_kv_tiles *tl, const ltk_exec *e_in, void *ws,
                              size_t wsb) {
    const ltkc_kern *K = ltkc_kernels();
    const int dense = fused_dense(a, e_in);
    ltk_exec ed = *e_in;
    if (dense) ed.algo = LTK_ALGO_MATERIALIZE;
    const ltk_exec *e = &ed;
    plan p = make_plan(a, e);
    p.tl = tl;
    p.scaled = a->kv_scale != NULL || tl != NULL;
    int mat = e->algo == LTK_ALGO_MATERIALIZE;
    size_t need = layout(a, &p, mat, NULL, NULL, NULL, NULL), vb = vote_bytes(a, e);
    if (vb > need) need = vb;
    LTK_RETURN_IF(need > wsb || !ws, LTK_EWORKSPACE, "cpu indexer: workspace %zu < %zu", wsb, need);
    thr *th = NULL;
    float *M = NULL;
    int32_t *hot = NULL;
    layout(a, &p, mat, ws, &th, &M, &hot);
    ltk_stats *st = e->stats;
    if (st) {
        memset(st, 0, offsetof(ltk_stats, row_candidates));
        /* rows without a scan (short, empty, materialize) count 0 candidates */
        if (st->row_candidates) memset(st->row_candidates, 0, sizeof(int32_t) * (size_t)a->T);
        if (st->row_bin_entries) memset(st->row_bin_entries, 0, sizeof(int32_t) * (size_t)a->T);
    }

    /* Hot set (cross-chunk state): sorted, deduplicated copy. */
    int64_t nhot = 0;
    if (a->state && !mat && e->algo == LTK_ALGO_FUSED) {
        int32_t cnt = a->state->keys[0];
        if (cnt < 0 || cnt > a->state->capacity) return ltk_error(LTK_EINTERNAL, "corrupt state count %d", cnt);
        if (cnt > p.hot) cnt = (int32_t)p.hot; /* best first: keep the most voted */
        memcpy(hot, a->state->keys + 1, sizeof(int32_t) * (size_t)cnt);
        qsort(hot, (size_t)cnt, sizeof(int32_t), cmp_i32);
        for (int32_t i = 0; i < cnt; i++)
            if (hot[i] >= 0 && (nhot == 0 || hot[i] != hot[nhot - 1])) hot[nhot++] = hot[i];
    }

    acc_stats tot = {0, 0, 0, 0, 0, 0, NULL, NULL};
    int64_t nblk = (a->T + RB - 1) / RB;
    if (!mat) {
        int mode = e->algo == LTK_ALGO_SCORE_ONLY ? 2 : 0;
#pragma omp parallel num_threads(p.nth)
        {
            acc_stats loc = {0, 0, 0, 0, 0, 0, st ? st->row_candidates : NULL, st ? st->row_bin_entries : NULL};
            thr *x = &th[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = 0; b < nblk; b++) {
                int64_t t0 = b * RB, t1 = t0 + RB < a->T ? t0 + RB : a->T;
                run_block(a, &p, K, x, t0, t1, mode, NULL, 0, hot, nhot, &loc);
            }
#pragma omp critical /* unnamed: a named one exports a symbol */
            {
                tot.cand += loc.cand;
                if (loc.cand_max > tot.cand_max) tot.cand_max = loc.cand_max;
                tot.bins += loc.bins;
                if (loc.bins_max > tot.bins_max) tot.bins_max = loc.bins_max;
                tot.comp += loc.comp;
                tot.fb += loc.fb;
            }
        }
        if (mode == 2)
            for (int64_t t = 0; t < a->T; t++) write_out(a, t, NULL, NULL, NULL, 0, NULL, 0);
    } else {
        int unsorted = (a->flags & LTK_FLAG_UNSORTED) != 0;
        for (int64_t m0 = 0; m0 < a->T; m0 += p.rbm) {
            int64_t m1 = m0 + p.rbm < a->T ? m0 + p.rbm : a->T;
            int64_t nb = (m1 - m0 + RB - 1) / RB;
#pragma omp parallel num_threads(p.nth)
            {
                thr *x = &th[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nb; b++) {
                    int64_t t0 = m0 + b * RB, t1 = t0 + RB < m1 ? t0 + RB : m1;
                    run_block(a, &p, K, x, t0, t1, 1, M, m0, NULL, 0, NULL);
                }
#pragma omp for schedule(dynamic, 1)
                for (int64_t t = m0; t < m1; t++) {
                    int64_t lo = row_lo(a, t), hi = row_hi(a, t), n = hi - lo;
                    if (n == 0 || shortcut(a, n)) continue; /* written by run_block */
                    const float *row = M + (size_t)(t - m0) * (size_t)a->S + lo;
                    int64_t m = ltkc_select_row(row, LTK_DTYPE_F32, n, a->k, &x->sel, x->okey, x->opos);
                    if (!unsorted) {
                        for (int64_t j = 0; j < m; j++) x->sa[j] = ltkc_composite(x->okey[j], x->opos[j]);
                        ltkc_sort_u64(x->sa, x->sb, m);
                        for (int64_t j = 0; j < m; j++) x->opos[j] = (int32_t)(uint32_t)x->sa[j];
                    }
                    int32_t *oi = a->out_idx + t * a->out_stride;
                    float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
                    int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
                    for (int64_t j = 0; j < a->k; j++) {
                        oi[j] = j < m ? (int32_t)(lo + x->opos[j] - base) : -1;
                        if (os) os[j] = j < m ? row[x->opos[j]] : -INFINITY;
                    }
                }
            }
        }
    }
    if (st) {
        st->rows = a->T;
        for (int64_t t = 0; t < a->T; t++)
            if (row_hi(a, t) - row_lo(a, t) <= a->k) st->short_rows++;
        if (dense) /* every visible key of a scanned row went to its select */
            for (int64_t t = 0; t < a->T; t++) {
                const int64_t n = row_hi(a, t) - row_lo(a, t);
                if (n <= 0 || shortcut(a, n)) continue;
                tot.cand += n;
                if (n > tot.cand_max) tot.cand_max = n;
                if (st->row_candidates) st->row_candidates[t] = (int32_t)n;
            }
        st->candidates = tot.cand;
        st->candidates_max = tot.cand_max;
        st->bin_entries = tot.bins;
        st->bin_entries_max = tot.bins_max;
        st->compactions = tot.comp;
        st->fallback_rows = tot.fb;
    }
    /* the hot-set vote, in the workspace (the scan is over: its buffers are free) */
    if (a->state && e->algo != LTK_ALGO_SCORE_ONLY && vote_counting(a, ws)) return LTK_OK;
    if (a->state && e->algo != LTK_ALGO_SCORE_ONLY)
        return ltk_state_vote_host(a->state, a->out_idx, a->T, a->k, a->out_stride, a->ks,
                                   (a->flags & LTK_FLAG_ABSOLUTE) != 0, ws, wsb);
    return LTK_OK;
}
