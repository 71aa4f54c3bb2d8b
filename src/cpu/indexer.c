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
#include "cpu-impl.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define RB 16
#define NK LTKC_IDX_NK
#define COLD_SAMPLE 512
#define HOT_MAX 16384
#define MAT_BYTES ((size_t)256 << 20)

typedef struct {
    int nth, k, rbm; /* rbm: rows per materialized chunk */
    ltkc_idx_geom g;
    size_t qrow, tileb;
    int64_t cap, ms, hot;
} plan;

typedef struct {
    char *q;          /* [RB][qrow] */
    void *tile;
    float *sc, *scale;/* [NK] */
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
    p.ms = COLD_SAMPLE + p.hot; /* the cold (strided) sample, then the hot keys */
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


static void pack_tile(const ltk_indexer_args *a, const plan *p, const ltkc_kern *K, thr *x, const int64_t *slist,
                      int64_t s0, int n) {
    K->idx_pack_tile(a->kv, a->dtype, a->kv_stride_s, slist, s0, n, &p->g, x->tile);
    if (a->kv_scale)
        for (int j = 0; j < NK; j++) x->scale[j] = j < n ? a->kv_scale[slist ? slist[j] : s0 + j] : 0.0f;
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
    int64_t rp = predict && msv == nstr && nstr >= 64 ? ltkc_pred_rank(nstr, a->k, hi - lo) : 0;
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

/* Fallback of a row whose predicted start failed: the conservative start from the block's sample
 * (still in x->ssc; row r's valid keys), then a scan of the row alone. */
/* The gate on one scored tile (x->sc, keys s0 + j): entries j in [j0, j1) at or above the row's
 * edge are pushed in index order, then the threshold is refreshed from the histogram. */
static void gate_tile(const ltkc_kern *K, thr *x, ltkc_row *row, int64_t s0, int j0, int j1) {
    uint64_t m;
    K->gate_mask(x->sc, NK, row->edge, &m);
    m &= (j1 - j0 == 64 ? ~0ull : ((1ull << (j1 - j0)) - 1) << j0);
    for (; m; m &= m - 1) {
        int j = __builtin_ctzll(m);
        ltkc_row_push(row, x->sc[j], s0 + j, &x->tmp);
    }
    ltkc_row_refresh(row);
}

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
        K->idx_score(x->q + p->qrow * r, w, x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
        int j0 = lo > s0 ? (int)(lo - s0) : 0, j1 = hi < s0 + n ? (int)(hi - s0) : n;
        gate_tile(K, x, row, s0, j0, j1);
    }
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
                int64_t len = chi - clo, m = len < COLD_SAMPLE ? len : COLD_SAMPLE;
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
            int predictable = nstr >= 64 && ltkc_pred_rank(nstr, a->k, chi - clo) > 0;
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
                K->idx_score(x->q + p->qrow * r, W[r], x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
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
    for (int64_t s0 = blo - blo % NK; s0 < bhi; s0 += NK) {
        int n = bhi - s0 < NK ? (int)(bhi - s0) : NK;
        pack_tile(a, p, K, x, NULL, s0, n);
        for (int r = 0; r < nr; r++) {
            if (!active[r] || s0 + NK <= lo[r] || s0 >= hi[r]) continue;
            K->idx_score(x->q + p->qrow * r, W[r], x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
            int j0 = lo[r] > s0 ? (int)(lo[r] - s0) : 0, j1 = hi[r] < s0 + n ? (int)(hi[r] - s0) : n;
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
                K->idx_score(x->q + p->qrow * r, W[r], x->tile, a->kv_scale ? x->scale : NULL, &p->g, x->sc);
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

ltk_status ltkc_indexer_ws(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes) {
    plan p = make_plan(a, e);
    size_t need = layout(a, &p, e->algo == LTK_ALGO_MATERIALIZE, NULL, NULL, NULL, NULL), vb = vote_bytes(a, e);
    *bytes = need > vb ? need : vb;
    return LTK_OK;
}

ltk_status ltkc_indexer(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const ltkc_kern *K = ltkc_kernels();
    plan p = make_plan(a, e);
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
