/* kNN on the CPU backend.
 *
 * Fused: per block of <= 64 queries, a strided sample of the base sets each query's bins and
 * initial threshold; the threads then split the base, score tiles of 96 vectors against all
 * queries, gate, and keep per-(thread, query) candidate buffers, merged exactly at the end.
 *
 * Screening (AVX-512 BF16): a tile is first scored in bf16 (vdpbf16ps, twice the fp32 rate).
 * For the canonical fp32 dot c = dot(q, x) (cpu-impl.h) and the bf16 estimate a:
 *   |c - a| <= (2u + u^2 + g(n1) + g(n2)(1+u)^2) |q|_2 |x|_2 + A,
 * u = 2^-8 (bf16 round to nearest), g(n) = n 2^-24 / (1 - n 2^-24), n1 = ceil(D/16)+4 rounding
 * steps of the canonical dot, n2 = D+2 steps of the bf16 accumulation (products of two bf16 are
 * exact in fp32), and A = 2^-119 (D+4)(|q|+|x|+1) covers denormals flushed by the bf16
 * instructions. |q|, |x| are upper bounds derived from the canonical squared norms (relative
 * error <= g(n1)); a norm above 2^60 (or inf/NaN) switches screening off for that pair.
 * V = fl(a + E) >= c, and the metric map (IP: c; L2: -fma(-2, c, qn+xn); COS: c / den, 0 for a zero norm) is
 * monotone in c and computed with the same fp32 operations, so U = map(V) >= the canonical
 * rank score. A pair is rescored exactly iff !(U < edge); all others provably fail the gate.
 * The returned set is therefore the exact top-k of the canonical fp32 scores, the same scores
 * the materialize path writes.
 *
 * Int8 screening (AVX-512 VNNI, D <= 1024; twice the bf16 rate, the default where present): each
 * vector x (and query q) is x8 = RNE(x 127/m) in [-127, 127], m = max |x_i|, with the scale
 * s_x = fl(m/127) and the MEASURED residual norm R_x >= |x - s_x x8|_2 (sum of fl(x_i - s_x x8_i)^2,
 * bounded up like the norms). I = q8 . x8 is exact in int32 (|I| <= 1024 * 127^2 < 2^24, so also
 * exact as a float) and A = fl(fl(s_q s_x) I) is within 2^-22 |A| of (s_q q8) . (s_x x8). As
 *   q.x - (s_q q8).(s_x x8) = q.(x - s_x x8) + (q - s_q q8).(s_x x8),
 * |q.x - A| <= |q| R_x + R_q (|x| + R_x) + 2^-22 |A|, and |c - q.x| <= g(n1) |q||x| + A as above.
 * E = (|q| + R_q) R_x + (R_q + g(n1) |q|) |x| + A, coefficients raised by (1 + 2^-16) to cover the
 * fp32 rounding of E, and V = fl(A + fl(|A| 2^-21 + E)) >= c (the 2^-21 also covers the last
 * addition). A query is quantized only if m >= 2^-50, a base vector only if m >= 2^-60, both only
 * if |x|^2 <= 2^100: so s_q is in [2^-57, 2^44], s_x in [2^-67, 2^44], and s_q s_x >= 2^-124 and A
 * (0 or >= s_q s_x) stay normal, neither underflowing nor overflowing. The squared norms and residual
 * sums behind |q|, |x|, R_q, R_x may run through denormals at these sizes: each of their (D + 20)
 * roundings adds at most 2^-150 absolute (<= 2^-134 for D <= 65536), covered by the 2^-126 floor
 * of norm_bound. A base vector with m < 2^-60 (a zero
 * vector among them) takes s_x = 0, x8 = 0: A = 0, R_x >= |x| (its measured norm), and the bound
 * reduces to |q.x| <= |q| R_x, covered by the (|q| + R_q) R_x term; a norm above 2^100, inf or NaN
 * has R = +inf and always passes (a query with s_q = 0 too).
 *
 * Predicted initial threshold (verified, so still exact). The sample has ms ~ 128 N/k entries
 * (clamped to a few % of the base), so about mu = ms k/N of them lie above the row's k-th best.
 * Instead of the sample's k-th best (a quantile k/ms, far below the row's k-th), the gate starts at
 * e0 = the sample's rp-th best score, rp = the smallest r with P(Poisson(mu) >= r) <= 1e-6: a
 * threshold a few standard deviations BELOW the estimated k-th, so that with overwhelming
 * probability at least k entries of the row pass it. Such a row gates with the fixed edge e0
 * (LTKC_MODE_EDGE: no histogram, which would hardly ever raise it). This is only a guess; the
 * proof comes after the scan. Every entry pushed into the row's buffers passed a gate >= e0
 * (gates only rise), and the scan pushes every index at most once (the sample is never pushed).
 * So if the threads pushed >= k entries of the row in all (sum of `appended`), at least k scores
 * of the row are >= e0, its k-th best is >= e0, and no top-k entry was rejected by the start
 * edge. The only raises are an exact compaction (the k-th best of >= k pushed entries) and gates
 * shared by the other threads (their own start e0 or such a compaction), never above the k-th
 * best either; so the final select is exact. If fewer than k were pushed, the guess was too
 * tight (rare, or an adversarial order or distribution): the row is redone with the conservative
 * start, the bin of the sample's k-th best (a subset's k-th best is <= the row's), and counted in
 * fallback_rows; its candidates/compactions stats add both passes.
 */
#include "row.h"
#include "ltk-tune.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define NT 96                 /* vectors per tile (6 panels of 16) */
#define MW ((NT + 63) / 64)   /* mask words per query */
#define QB 64                 /* queries per block */
#define MAT_BYTES ((size_t)256 << 20)

typedef struct {
    int nth, nq_max, D, Dp, D2, k, metric, screen, mode;
    int screen8;  /* screening in int8 (VNNI) instead of bf16 */
    int qw, qas;  /* packed words and screening parameters per query */
    int64_t N, cap, ms;
    int64_t rp; /* rank in the sample of the predicted start threshold; 0: none */
} plan;

/* Start of a query's gate, from the sample (identical for every thread). */
typedef struct {
    float smin, delta, edge_c; /* bins; conservative start: the edge of the bin of the sample's k-th best */
    int32_t th_c;
    float edge_p;              /* predicted start: the sample's rp-th best score, if pred */
    int32_t pred;
} qinit;

typedef struct {
    float *tile;      /* [NT][Dp] decoded vectors */
    uint32_t *packed; /* [NT/16][D2][16] */
    float *xa;        /* SoA [4][NT]: int8 scale, int8 residual sum of squares, xn, sqrt(xn) */
    float *sc;        /* [QB][NT] exact scores; also the screening SoA [6][NT] */
    uint64_t *mask;   /* [QB][MW] */
    const float **pq, **px;
    int32_t *pi, *pj;
    float *pd;        /* [QB*NT] */
    float *edge;      /* [QB] */
    ltkc_row *rows;   /* [QB] */
    float *rscore;    /* [QB][cap] */
    int64_t *ridx;
    uint32_t *rhist;  /* [QB][NB] */
    ltkc_rowtmp tmp;  /* keys, pos [cap], hist */
    /* merge */
    float *mscore;
    int64_t *midx;
    ltkc_rowtmp mtmp; /* keys, pos [nth*cap] */
    uint64_t *sa, *sb;
    int32_t *opos;    /* [k] */
} thr;

typedef struct {
    float *Qf;        /* [QB][Dp] */
    uint32_t *Qp;     /* [QB][D2] */
    uint32_t *Qp16;   /* [QB][D2] bf16 form where the int8 screen runs (its tiles of unquantizable vectors) */
    float *qa16;      /* [QB][4] the bf16 screen's parameters beside the int8 ones */
    float *qn, *sq, *qa; /* [QB], [QB], [QB][qas] screening parameters */
    float *sample;    /* [QB][ms] */
    uint32_t *gedge;  /* [QB] best gate edge published by any thread (float bits) */
    qinit *qi;        /* [QB] */
    int32_t *rowmap;  /* [QB] row of the block each slot answers (slots are compacted for redos) */
    int32_t *fail;    /* [QB] 1: the predicted start was not verified, redo the slot */
    int64_t *app0, *comp0; /* [QB] first-pass work of a redone slot (stats) */
} shared;

static double gam(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }


static plan make_plan(const ltk_knn_args *a, const ltk_exec *e) {
    plan p;
    memset(&p, 0, sizeof p);
    p.nth = ltkc_threads(e);
    p.N = a->N;
    p.D = a->D;
    p.Dp = (a->D + 15) & ~15;
    p.D2 = (a->D + 1) / 2;
    p.k = a->k;
    p.metric = a->metric;
    p.nq_max = a->B < QB ? (int)a->B : QB;
    if (p.nq_max < 1) p.nq_max = 1;
    p.mode = a->N <= a->k ? LTKC_MODE_ALL : LTKC_MODE_BINS;
    p.cap = 2 * (int64_t)a->k + 256;
    p.ms = 0;
    p.rp = 0;
    if (p.mode == LTKC_MODE_BINS) {
        /* >= 128 expected sample entries above the k-th best (pred_rank), at least 2k (the
         * conservative start), at most ~1.6-3% of the base (cost) and 64K per query (workspace);
         * a power of two, so the strided positions c N / ms form a lattice when N is one too. */
        int64_t lo = 2 * (int64_t)a->k > 4096 ? 2 * (int64_t)a->k : 4096;
        int64_t hi = a->N / 64 < 65536 ? a->N / 64 : 65536;
        if (hi < lo) hi = lo;
        double want_d = ceil(128.0 * (double)a->N / (double)a->k); /* clamp before converting: N may be ~2^62 */
        int64_t want = want_d >= (double)hi ? hi : want_d <= (double)lo ? lo : (int64_t)want_d;
        int64_t ms = 1;
        while (ms < want) ms <<= 1;
        p.ms = ms < a->N ? ms : a->N;
        p.rp = ltkc_pred_rank(p.ms, a->k, a->N);
    }
    const ltkc_kern *K = ltkc_kernels();
    p.screen = K->has_bf16 && K->knn_screen && p.mode == LTKC_MODE_BINS && e->algo == LTK_ALGO_FUSED;
    /* the test hook keeps the bf16 screen where int8 would run */
    p.screen8 = p.screen && K->knn8_screen && a->D <= 1024 && ltkc_cpu_vnni() && !ltk_tune_get()->cpu_knn_screen_bf16;
    p.qw = p.screen8 ? (a->D + 3) / 4 : p.D2;
    p.qas = p.screen8 ? LTKC_QA8 : 4;
    if (p.nth > 1 && a->N < (int64_t)p.nth * NT * 4) p.nth = (int)(a->N / (NT * 4)) + 1; /* small bases */
    return p;
}

static size_t fused_layout(const plan *p, char *base, shared *sh, thr **thp) {
    ltkc_ws w = {base, 0};
    shared s;
    thr *th = ltkc_take(&w, sizeof(thr) * (size_t)p->nth);
    if (thp) *thp = th;
    int q = p->nq_max;
    s.Qf = ltkc_take(&w, sizeof(float) * (size_t)q * p->Dp);
    s.Qp = ltkc_take(&w, sizeof(uint32_t) * (size_t)q * p->D2);
    s.qn = ltkc_take(&w, sizeof(float) * q);
    s.sq = ltkc_take(&w, sizeof(float) * q);
    s.qa = ltkc_take(&w, sizeof(float) * LTKC_QA8 * q);
    s.Qp16 = ltkc_take(&w, p->screen8 ? sizeof(uint32_t) * (size_t)q * p->D2 : 0);
    s.qa16 = ltkc_take(&w, p->screen8 ? sizeof(float) * 4 * q : 0);
    s.sample = ltkc_take(&w, sizeof(float) * (size_t)q * (size_t)(p->ms > 0 ? p->ms : 1));
    s.gedge = ltkc_take(&w, sizeof(uint32_t) * q);
    s.qi = ltkc_take(&w, sizeof(qinit) * q);
    s.rowmap = ltkc_take(&w, sizeof(int32_t) * q);
    s.fail = ltkc_take(&w, sizeof(int32_t) * q);
    s.app0 = ltkc_take(&w, sizeof(int64_t) * q);
    s.comp0 = ltkc_take(&w, sizeof(int64_t) * q);
    if (sh) *sh = s;
    size_t cap = (size_t)p->cap, mcap = cap * (size_t)p->nth;
    for (int t = 0; t < p->nth; t++) {
        thr x;
        x.tile = ltkc_take(&w, sizeof(float) * NT * (size_t)p->Dp);
        x.packed = ltkc_take(&w, p->screen ? sizeof(uint32_t) * NT * (size_t)p->D2 : 0);
        x.xa = ltkc_take(&w, sizeof(float) * 4 * NT);
        x.sc = ltkc_take(&w, sizeof(float) * (size_t)(q > 6 ? q : 6) * NT); /* also the screening SoA [6][NT] */
        x.mask = ltkc_take(&w, sizeof(uint64_t) * (size_t)q * MW);
        x.pq = ltkc_take(&w, sizeof(float *) * (size_t)q * NT);
        x.px = ltkc_take(&w, sizeof(float *) * (size_t)q * NT);
        x.pi = ltkc_take(&w, sizeof(int32_t) * (size_t)q * NT);
        x.pj = ltkc_take(&w, sizeof(int32_t) * (size_t)q * NT);
        x.pd = ltkc_take(&w, sizeof(float) * (size_t)q * NT);
        x.edge = ltkc_take(&w, sizeof(float) * q);
        x.rows = ltkc_take(&w, sizeof(ltkc_row) * q);
        x.rscore = ltkc_take(&w, sizeof(float) * (size_t)q * cap);
        x.ridx = ltkc_take(&w, sizeof(int64_t) * (size_t)q * cap);
        x.rhist = ltkc_take(&w, p->mode == LTKC_MODE_BINS ? sizeof(uint32_t) * (size_t)q * LTKC_NB : 0);
        size_t tcap = cap > (size_t)p->ms ? cap : (size_t)p->ms; /* also holds the sample's keys */
        x.tmp.keys = ltkc_take(&w, sizeof(uint32_t) * tcap);
        x.tmp.pos = ltkc_take(&w, sizeof(int32_t) * tcap);
        x.tmp.hist = ltkc_take(&w, sizeof(uint32_t) * 2048);
        x.mscore = ltkc_take(&w, sizeof(float) * mcap);
        x.midx = ltkc_take(&w, sizeof(int64_t) * mcap);
        x.mtmp.keys = ltkc_take(&w, sizeof(uint32_t) * mcap);
        x.mtmp.pos = ltkc_take(&w, sizeof(int32_t) * mcap);
        x.mtmp.hist = x.tmp.hist;
        x.sa = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        x.sb = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        x.opos = ltkc_take(&w, sizeof(int32_t) * (size_t)p->k);
        if (th) th[t] = x;
    }
    return w.off;
}

/* ---- shared helpers ----------------------------------------------------------------------------- */
static inline float transform(int metric, float dot, float qn, float xn, float sq, float sx) {
    float s;
    if (metric == LTK_METRIC_IP) s = dot;
    else if (metric == LTK_METRIC_L2) s = -fmaf(-2.0f, dot, qn + xn);
    else s = (qn == 0.0f || xn == 0.0f) ? 0.0f : dot / (sq * sx); /* NaN norms stay NaN */
    return ltkc_canon(s);
}

/* Vectors [i0, i0+n) as fp32 rows: the base itself for F32, else decoded into `tile`. */
static const float *tile_rows(const ltk_knn_args *a, const plan *p, int64_t i0, int n, const int64_t *gather,
                              float *tile, int64_t *ld) {
    if (a->dtype == LTK_DTYPE_F32 && !gather) {
        *ld = a->base_stride;
        return (const float *)a->base + i0 * a->base_stride;
    }
    for (int j = 0; j < n; j++) {
        int64_t i = gather ? gather[j] : i0 + j;
        if (a->dtype == LTK_DTYPE_F32) {
            memcpy(tile + (size_t)j * p->Dp, (const float *)a->base + i * a->base_stride, sizeof(float) * p->D);
        } else {
            for (int d = 0; d < p->D; d++) tile[(size_t)j * p->Dp + d] = ltk_load_f32(a->base, a->dtype, i * a->base_stride + d);
        }
    }
    *ld = p->Dp;
    return tile;
}

/* Canonical squared norms (and derived values) of n rows. */
static void tile_norms(const ltkc_kern *K, const float *X, int64_t ld, int n, int D, float *xn) {
    const float *pp[NT];
    for (int j = 0; j < n; j++) pp[j] = X + j * ld;
    K->dots_pairs(pp, pp, n, D, xn);
}

/* Upper bound of the true 2-norm from the canonical squared norm n2: the canonical sum has
 * relative error <= g(n1) < 2.5e-4 for D <= 65536 (all terms >= 0) plus <= 2^-134 absolute from
 * denormals ((D + 20) roundings of <= 2^-150 each); 2^-9 and 2^-126 cover both (2^-126, the smallest
 * normal float, so that the floor survives a denormals-are-zero mode), and 1 + 2^-16 covers the
 * roundings of this expression. Why not a larger floor: it is |x|'s and R_x's bound for tiny vectors
 * (2^-100 made R_x >= 2^-50, which rejected nothing on a base scaled by 1e-15). */
static inline float norm_bound(float n2, int D) {
    (void)D;
    if (!(n2 <= 0x1p120f)) return INFINITY; /* NaN, inf or too large: no screening */
    return sqrtf(n2 * (1.0f + 0x1p-9f) + 0x1p-126f) * (1.0f + 0x1p-16f);
}

static float round_up(double v) {
    float f = (float)v;
    if ((double)f < v) f = nextafterf(f, INFINITY);
    return f;
}

/* The int8 screen's parameters of one query q (D floats, canonical squared norm qn): q8 packed into
 * q4 and qa[LTKC_QA8] = s_q, a1, a2, qa3, qn, sqrt(qn), corr bits, 0 (the header comment's E). Also
 * called by tests/test-cpu-screen.c, which checks the bound pair by pair. */
void ltkc_knn8_query(const ltkc_kern *K, const float *q, int D, float qn, uint32_t *q4, float *qa) {
    float o[2];
    int32_t corr;
    K->knn8_pack_query(q, D, q4, o, &corr);
    double Dd = D, nq_ = norm_bound(qn, D), rq = norm_bound(o[1], D);
    int off = !(o[0] > 0.0f); /* then E = +inf: nothing screened out */
    qa[0] = o[0];
    qa[1] = off ? INFINITY : round_up((nq_ + rq) * (1.0 + 0x1p-16));
    qa[2] = off ? INFINITY : round_up((rq + gam(ceil(Dd / 16.0) + 4) * nq_) * (1.0 + 0x1p-16));
    qa[3] = round_up(0x1p-119 * (Dd + 4) * (nq_ + 1.0));
    qa[4] = qn;
    qa[5] = sqrtf(qn);
    qa[6] = ltk_bits_f32((uint32_t)corr);
    qa[7] = 0.0f;
}

/* A screened tile's per-vector parameters, SoA over xs = n rounded up to 16: nx (norm bound), ex (its
 * denormal term), xn, sqrt(xn) and, for the int8 screen (s8, xr2 non-NULL: the pack's scales and
 * residual sums of squares), s_x and rx (residual norm bound). Also called by test-cpu-screen.c. */
void ltkc_knn_tile_params(int D, int n, const float *xn, const float *s8, const float *xr2, float *soa) {
    const int xs = (n + 15) / 16 * 16;
    const float cex = round_up(0x1p-119 * (D + 4)); /* 2x the derived constant: covers this product's rounding */
    for (int j = 0; j < xs; j++) {
        float v = j < n ? xn[j] : 0.0f, b = norm_bound(v, D);
        soa[j] = b;
        soa[xs + j] = cex * b;
        soa[2 * xs + j] = v;
        soa[3 * xs + j] = sqrtf(v);
        if (s8) {
            soa[4 * xs + j] = j < n ? s8[j] : 0.0f;
            soa[5 * xs + j] = j < n ? norm_bound(xr2[j], D) : INFINITY;
        }
    }
}

static void prepare_queries(const ltk_knn_args *a, const plan *p, const ltkc_kern *K, int64_t b0, int nq,
                            shared *s) {
    for (int i = 0; i < nq; i++) {
        s->gedge[i] = ltk_f32_bits(-INFINITY); /* before the team starts: no stale edge of the last block */
        s->rowmap[i] = i;
        s->fail[i] = 0;
        s->app0[i] = s->comp0[i] = 0;
        float *q = s->Qf + (size_t)i * p->Dp;
        for (int d = 0; d < p->D; d++) q[d] = ltk_load_f32(a->queries, a->dtype, (b0 + i) * a->q_stride + d);
        for (int d = p->D; d < p->Dp; d++) q[d] = 0.0f;
        const float *pp[1] = {q};
        K->dots_pairs(pp, pp, 1, p->D, &s->qn[i]);
        s->sq[i] = sqrtf(s->qn[i]);
        if (p->screen8) ltkc_knn8_query(K, q, p->D, s->qn[i], s->Qp + (size_t)i * p->qw, s->qa + (size_t)LTKC_QA8 * i);
        if (p->screen) { /* the bf16 screen: the plan's, or the int8 screen's for some tiles */
            uint32_t *qp = p->screen8 ? s->Qp16 : s->Qp;
            float *qa = (p->screen8 ? s->qa16 : s->qa) + 4 * i;
            K->knn_pack_query(q, p->D, qp + (size_t)i * p->D2);
            double ub = 0x1p-8, D = p->D;
            double c = 2 * ub + ub * ub + gam(ceil(D / 16.0) + 4) + gam(D + 2) * (1 + ub) * (1 + ub);
            float nq_ = norm_bound(s->qn[i], p->D);
            qa[0] = round_up(c * (1.0 + 0x1p-16) * (double)nq_);
            qa[1] = round_up(0x1p-119 * (D + 4) * ((double)nq_ + 1.0));
            qa[2] = s->qn[i];
            qa[3] = s->sq[i];
        }
    }
}

static void write_row(const ltk_knn_args *a, int64_t b, const float *score, const int64_t *idx, const int32_t *pos,
                      int64_t m, int64_t nnan, const int64_t *nan_idx) {
    int64_t *oi = a->out_idx + b * a->out_stride;
    float *os = a->out_scores ? a->out_scores + b * a->out_stride : NULL;
    int l2 = a->metric == LTK_METRIC_L2;
    int64_t j = 0;
    for (; j < m; j++) {
        oi[j] = idx[pos[j]];
        if (os) {
            float s = score[pos[j]];
            os[j] = (l2 && s == s) ? -s : s;
        }
    }
    for (int64_t t = 0; t < nnan && j < a->k; t++, j++) {
        oi[j] = nan_idx[t];
        if (os) os[j] = ltk_bits_f32(LTKC_CANON_NAN);
    }
    for (; j < a->k; j++) {
        oi[j] = -1;
        if (os) os[j] = l2 ? INFINITY : -INFINITY;
    }
}

/* ---- fused ---------------------------------------------------------------------------------------- */
/* The float gate of a row's own scan. After an exact compaction (MODE_EXACT) the row holds k
 * entries that rank at or above (kth_s, kth_i), and every later entry of this thread's slice has a
 * larger index, so it must score strictly above kth_s: the gate is the next float up. Why: rows of
 * tied scores (duplicated base vectors) passed `>= kth_s` with every entry and paid a push each
 * (the pair gate then refused it). The edge shared with the other threads stays kth_s: their
 * slices hold lower indices, whose ties do rank before the k-th. */
static inline float own_edge(const ltkc_row *r) {
    return r->mode == LTKC_MODE_EXACT && r->edge <= r->kth_s ? nextafterf(r->kth_s, INFINITY) : r->edge;
}

static void push_exact_tile(const ltk_knn_args *a, const plan *p, const ltkc_kern *K, const shared *s, thr *x,
                            int nq, const float *X, int64_t ld, int64_t i0, int n, int gate) {
    /* A tile of one vector repeated (bitwise) is scored once and its scores copied (the canonical
     * dot does not depend on the block). Why: where the screen passes most pairs (ties at the
     * edge) the scan takes this path for whole stretches, and an all-equal base scored every
     * pair: 55-56 ms against 22-23 on clustered rows (`litetopk bench knn --backend cpu --B 64
     * --N 200000 -k 128 --dist equal --threads 1`; 22-24 ms now). The check stops at the first
     * difference. */
    int one = n > 1;
    for (int j = 1; j < n && one; j++) one = memcmp(X + j * ld, X, sizeof(float) * (size_t)p->D) == 0;
    K->dots_block(s->Qf, p->Dp, nq, X, ld, one ? 1 : n, p->D, x->sc, NT);
    const float *xn = x->xa + 2 * NT, *sx = x->xa + 3 * NT;
    for (int i = 0; i < nq; i++) {
        float *row = x->sc + (size_t)i * NT;
        const float d0 = row[0];
        for (int j = 0; j < n; j++) row[j] = transform(p->metric, one ? d0 : row[j], s->qn[i], xn[j], s->sq[i], sx[j]);
        if (!gate) continue;
        ltkc_row *r = &x->rows[i];
        if (r->mode == LTKC_MODE_ALL) {
            for (int j = 0; j < n; j++) ltkc_row_push(r, row[j], i0 + j, &x->tmp);
            continue;
        }
        uint64_t m[MW] = {0};
        K->gate_mask(row, n, own_edge(r), m);
        for (int w = 0; w < MW; w++)
            for (uint64_t bits = m[w]; bits; bits &= bits - 1) {
                int j = w * 64 + __builtin_ctzll(bits);
                ltkc_row_push(r, row[j], i0 + j, &x->tmp);
            }
    }
}

static void prefetch_all(const ltkc_pf *f) {
    for (int j = 0; j < f->n; j++)
        for (int l = 0; l < f->lpv; l++) __builtin_prefetch(f->base + j * f->stride + (int64_t)l * 64, 0, 2);
}

/* The tile is packed (x->packed) and its norms are in x->xa. Returns the number of pairs rescored. */
static int screen_tile(const ltk_knn_args *a, const plan *p, const ltkc_kern *K, const shared *s, thr *x, int nq,
                       const float *X, int64_t ld, int64_t i0, int n, const ltkc_pf *pf, int int8) {
    float *soa = x->sc; /* free here */
    ltkc_knn_tile_params(p->D, n, x->xa + 2 * NT, int8 ? x->xa : NULL, int8 ? x->xa + NT : NULL, soa);
    const float *xn = x->xa + 2 * NT, *sx = x->xa + 3 * NT;
    for (int i = 0; i < nq; i++) x->edge[i] = own_edge(&x->rows[i]);
    if (int8)
        K->knn8_screen(s->Qp, nq, x->packed, n, p->D, p->metric, s->qa, soa, x->edge, x->mask, MW, pf);
    else
        K->knn_screen(p->screen8 ? s->Qp16 : s->Qp, nq, x->packed, n, p->D, p->metric, p->screen8 ? s->qa16 : s->qa,
                      soa, x->edge, x->mask, MW, pf);
    /* A tile whose pairs mostly pass (ties at the edge: no bound can drop a score equal to it) is
     * checked for runs of bitwise-equal vectors: such a vector's pair takes the score of the
     * vector before it (the canonical dot and the metric map are functions of the bits), the rest
     * are rescored. Why: an all-equal base rescored every pair, the CPU kNN 2.0-2.5x its clustered
     * time (`litetopk bench knn --backend cpu --B 64 --N 200000 -k 128|1024 --dist equal
     * --threads 1`); the check is a memcmp a vector, taken only where over a quarter pass (counted
     * from the pair list: a popcount of the masks first, a libgcc call a word here, cost normal
     * rows 5%). */
    int np_ = 0;
    for (int i = 0; i < nq; i++)
        for (int w = 0; w < MW; w++)
            for (uint64_t bits = x->mask[(size_t)i * MW + w]; bits; bits &= bits - 1) {
                int j = w * 64 + __builtin_ctzll(bits);
                x->pq[np_] = s->Qf + (size_t)i * p->Dp;
                x->px[np_] = X + j * ld;
                x->pi[np_] = i;
                x->pj[np_] = j;
                np_++;
            }
    if (4 * np_ <= nq * n) {
        K->dots_pairs(x->pq, x->px, np_, p->D, x->pd);
        for (int t = 0; t < np_; t++) {
            int i = x->pi[t], j = x->pj[t];
            float sc = transform(p->metric, x->pd[t], s->qn[i], xn[j], s->sq[i], sx[j]);
            ltkc_row_push(&x->rows[i], sc, i0 + j, &x->tmp);
        }
        return np_;
    }
    uint8_t same[NT];
    same[0] = 0;
    for (int j = 1; j < n; j++) same[j] = memcmp(X + j * ld, X + (j - 1) * ld, sizeof(float) * (size_t)p->D) == 0;
    /* a pair (i, j) after (i, j - 1) with vector j equal to j - 1 copies its score: pj = -1 - j;
     * the others keep their place in the first nu entries of pq / px */
    int nu = 0;
    for (int t = 0; t < np_; t++) {
        const int i = x->pi[t], j = x->pj[t];
        if (same[j] && t > 0 && x->pi[t - 1] == i && (x->pj[t - 1] < 0 ? -1 - x->pj[t - 1] : x->pj[t - 1]) == j - 1) {
            x->pj[t] = -1 - j;
        } else {
            x->pq[nu] = x->pq[t];
            x->px[nu] = x->px[t];
            nu++;
        }
    }
    K->dots_pairs(x->pq, x->px, nu, p->D, x->pd);
    float sc = 0.0f;
    for (int t = 0, u = 0; t < np_; t++) {
        int i = x->pi[t], j = x->pj[t];
        if (j < 0) j = -1 - j; /* sc: the pair before's score */
        else sc = transform(p->metric, x->pd[u++], s->qn[i], xn[j], s->sq[i], sx[j]);
        ltkc_row_push(&x->rows[i], sc, i0 + j, &x->tmp);
    }
    return np_;
}

/* One scan of the base for the nq query slots of s. redo: the slots are rows whose predicted
 * start failed verification; their qinit is kept and the conservative start is used. */
static void fused_block(const ltk_knn_args *a, const ltk_exec *e, const plan *p, const ltkc_kern *K, shared *s,
                        thr *th, int64_t b0, int nq, ltk_stats *st, int redo) {
    int nth = p->nth;
    int unsorted = (a->flags & LTK_FLAG_UNSORTED) != 0;
    int gate = e->algo != LTK_ALGO_SCORE_ONLY;
    int bins = p->mode == LTKC_MODE_BINS && gate;
#pragma omp parallel num_threads(nth)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads(); /* the team may be smaller than asked */
        thr *x = &th[t];
        /* 1. sample: strided, distinct, shared by all queries; threads split it */
        if (p->ms > 0 && gate && !redo) {
            int64_t per = (p->ms + nt - 1) / nt, c0 = per * t, c1 = c0 + per < p->ms ? c0 + per : p->ms;
            int64_t g[NT];
            for (int64_t c = c0; c < c1; c += NT) {
                int n = c1 - c < NT ? (int)(c1 - c) : NT;
                for (int j = 0; j < n; j++) g[j] = (c + j) * p->N / p->ms;
                int64_t ld;
                const float *X = tile_rows(a, p, 0, n, g, x->tile, &ld);
                tile_norms(K, X, ld, n, p->D, x->xa + 2 * NT);
                for (int j = 0; j < n; j++) x->xa[3 * NT + j] = sqrtf(x->xa[2 * NT + j]);
                K->dots_block(s->Qf, p->Dp, nq, X, ld, n, p->D, x->sc, NT);
                for (int i = 0; i < nq; i++)
                    for (int j = 0; j < n; j++)
                        s->sample[(size_t)i * p->ms + c + j] = transform(p->metric, x->sc[(size_t)i * NT + j], s->qn[i],
                                                                         x->xa[2 * NT + j], s->sq[i], x->xa[3 * NT + j]);
            }
        }
#pragma omp barrier
        /* 2. per query: bins, the conservative and the predicted start (header comment) */
        if (bins && !redo) {
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < nq; i++) {
                const float *smp = s->sample + (size_t)i * p->ms;
                ltkc_row tm;
                memset(&tm, 0, sizeof tm);
                ltkc_row_sample_bins(&tm, smp, p->ms);
                qinit q = {tm.smin, tm.delta, -INFINITY, 0, -INFINITY, 0};
                if (p->ms >= p->k) { /* always in BINS mode: ms >= min(2k, N) > k */
                    K->keys_f32(smp, p->ms, x->tmp.keys);
                    int64_t te;
                    uint32_t Kc = ltkc_kth_key(x->tmp.keys, p->ms, p->k, &te, x->tmp.hist);
                    q.th_c = ltkc_bin(&tm, ltk_rank_key_to_f32(Kc)); /* NaN: bin 0 */
                    q.edge_c = ltkc_edge_of(&tm, q.th_c);
                    if (p->rp > 0) {
                        uint32_t Kr = ltkc_kth_key(x->tmp.keys, p->ms, p->rp, &te, x->tmp.hist);
                        float e0 = ltk_rank_key_to_f32(Kr);
                        /* only a start above the conservative one (and above -inf; not NaN) */
                        if (Kr > Kc && e0 > -INFINITY && e0 > q.edge_c) {
                            q.edge_p = e0;
                            q.pred = 1;
                        }
                    }
                }
                s->qi[i] = q;
            }
        }
        /* 3. rows: identical bins and start in every thread */
        for (int i = 0; i < nq; i++) {
            ltkc_row *r = &x->rows[i];
            const qinit *q = &s->qi[i];
            int pred = bins && !redo && q->pred; /* a fixed edge: the histogram would hardly ever raise it */
            ltkc_row_setup(r, x->rscore + (size_t)i * p->cap, x->ridx + (size_t)i * p->cap,
                           x->rhist ? x->rhist + (size_t)i * LTKC_NB : NULL, p->cap, p->k,
                           pred ? LTKC_MODE_EDGE : p->mode);
            if (pred) {
                r->edge = q->edge_p;
            } else if (bins) {
                r->smin = q->smin;
                r->delta = q->delta;
                r->th = q->th_c;
                r->edge = q->edge_c;
            }
        }
        /* 4. scan this thread's slice of the base */
        int64_t per = (p->N + nt - 1) / nt;
        per = (per + 15) & ~(int64_t)15;
        int64_t n0 = per * t < p->N ? per * t : p->N, n1 = n0 + per < p->N ? n0 + per : p->N;
        int use_screen = 0;
        for (int64_t i0 = n0; i0 < n1; i0 += NT) {
            int n = n1 - i0 < NT ? (int)(n1 - i0) : NT;
            int64_t ld;
            const float *X = tile_rows(a, p, i0, n, NULL, x->tile, &ld);
            ltkc_pf pf = {NULL, 0, 0, (int)((sizeof(float) * (size_t)p->D + 63) / 64)};
            if (a->dtype == LTK_DTYPE_F32 && i0 + NT < n1) { /* the next tile streams in while this one is scored */
                pf.base = (const char *)((const float *)a->base + (i0 + NT) * a->base_stride);
                pf.stride = a->base_stride * (int64_t)sizeof(float);
                pf.n = n1 - i0 - NT < NT ? (int)(n1 - i0 - NT) : NT;
            }
            int screenable = p->screen && gate;
            for (int i = 0; i < nq && screenable; i++)
                if (x->rows[i].edge == -INFINITY) screenable = 0;
            if (screenable && use_screen >= 0) {
                int int8 = p->screen8;
                if (int8) { /* int8 tile, scales, residuals and the norms */
                    K->knn8_pack_tile(X, ld, n, p->D, x->packed, x->xa + 2 * NT, x->xa, x->xa + NT);
                    /* A vector too small to quantize (0 < max |x_i| < 2^-60, kern-avx512.c) has only
                     * |q| |x| as its int8 bound, which rejects nothing: its tile takes the bf16 screen,
                     * whose bound is relative to |q| |x| down to ~2^-112. Why: a base scaled by 1e-15
                     * rescored every pair, 2.1-2.5x the clustered time (bench knn --dist scale-lo). */
                    for (int j = 0; j < n && int8; j++)
                        if (x->xa[j] == 0.0f && x->xa[2 * NT + j] > 0.0f && x->xa[2 * NT + j] <= 0x1p100f) int8 = 0;
                }
                if (!int8) /* bf16 tile and the norms */
                    K->knn_pack_tile(X, ld, n, p->D, x->packed, x->xa + 2 * NT);
                for (int j = 0; j < n; j++) x->xa[3 * NT + j] = sqrtf(x->xa[2 * NT + j]);
                int passed = screen_tile(a, p, K, s, x, nq, X, ld, i0, n, &pf, int8);
                /* Many rescored pairs cost more than the plain fp32 tile: skip screening a while. */
                if (passed * 4 > nq * n) use_screen = -8;
            } else {
                prefetch_all(&pf);
                tile_norms(K, X, ld, n, p->D, x->xa + 2 * NT);
                for (int j = 0; j < n; j++) x->xa[3 * NT + j] = sqrtf(x->xa[2 * NT + j]);
                push_exact_tile(a, p, K, s, x, nq, X, ld, i0, n, gate);
                if (use_screen < 0) use_screen++;
            }
            /* Share gates: a thread's edge is the common start edge or was raised by a refresh,
             * backed by >= k of this query's keys; so it is a valid lower bound of the query's k-th
             * best for every thread (design.md step 3; the start edge: header comment). */
            for (int i = 0; i < nq; i++) {
                ltkc_row *r = &x->rows[i];
                ltkc_row_refresh(r);
                if (r->mode == LTKC_MODE_ALL) continue;
                float g = ltk_bits_f32(__atomic_load_n(&s->gedge[i], __ATOMIC_RELAXED));
                if (r->edge > g) __atomic_store_n(&s->gedge[i], ltk_f32_bits(r->edge), __ATOMIC_RELAXED);
                else if (g > r->edge) r->edge = g;
            }
        }
#pragma omp barrier
        /* 5. merge per query (index order: thread slices are in increasing order) */
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < nq; i++) {
            int64_t n = 0, app = 0, comp = 0, row = b0 + s->rowmap[i];
            for (int u = 0; u < nt; u++) {
                ltkc_row *r = &th[u].rows[i];
                app += r->appended;
                comp += r->compactions;
            }
            s->fail[i] = 0;
            if (bins && !redo && s->qi[i].pred && app < p->k) {
                /* fewer than k pushed: the predicted start is not proven below the k-th best */
                s->fail[i] = 1;
                s->app0[i] = app;
                s->comp0[i] = comp;
                continue;
            }
            for (int u = 0; u < nt; u++) {
                ltkc_row *r = &th[u].rows[i];
                memcpy(x->mscore + n, r->score, sizeof(float) * (size_t)r->count);
                memcpy(x->midx + n, r->idx, sizeof(int64_t) * (size_t)r->count);
                n += r->count;
            }
            app += s->app0[i];
            comp += s->comp0[i];
            int64_t m = 0, nnan = 0;
            if (gate) m = ltkc_final_arrays(x->mscore, n, p->k, &x->mtmp, x->sa, x->sb, unsorted, x->opos);
            int fb = redo;
            if (gate && m < p->k && p->N > p->k) {
                /* fewer than k non-NaN scores: the rest are the lowest-index NaN scores */
                fb = 1;
                int64_t need = p->k - m;
                int64_t *nan_idx = (int64_t *)x->sa; /* free after the sort */
                for (int64_t i0 = 0; i0 < p->N && nnan < need; i0 += NT) {
                    int nn = p->N - i0 < NT ? (int)(p->N - i0) : NT;
                    int64_t ld;
                    const float *X = tile_rows(a, p, i0, nn, NULL, x->tile, &ld);
                    float xn[NT], d[NT];
                    tile_norms(K, X, ld, nn, p->D, xn);
                    K->dots_block(s->Qf + (size_t)i * p->Dp, p->Dp, 1, X, ld, nn, p->D, d, NT);
                    for (int j = 0; j < nn && nnan < need; j++) {
                        float sc = transform(p->metric, d[j], s->qn[i], xn[j], s->sq[i], sqrtf(xn[j]));
                        if (sc != sc) nan_idx[nnan++] = i0 + j;
                    }
                }
                write_row(a, row, x->mscore, x->midx, x->opos, m, nnan, nan_idx);
            } else if (gate) {
                write_row(a, row, x->mscore, x->midx, x->opos, m, 0, NULL);
            } else {
                write_row(a, row, x->mscore, x->midx, x->opos, 0, 0, NULL);
            }
            if (st) {
#pragma omp critical /* unnamed: a named one exports a symbol */
                {
                    st->candidates += app;
                    if (app > st->candidates_max) st->candidates_max = app;
                    st->bin_entries += n;
                    if (n > st->bin_entries_max) st->bin_entries_max = n;
                    st->compactions += comp;
                    st->fallback_rows += fb;
                    if (st->row_candidates) st->row_candidates[row] = (int32_t)(app < INT32_MAX ? app : INT32_MAX);
                    if (st->row_bin_entries) st->row_bin_entries[row] = (int32_t)(n < INT32_MAX ? n : INT32_MAX);
                }
            }
        }
    }
}

/* Slot i's query data to slot j <= i (compaction of the rows to redo; qinit replaces the sample). */
static void move_slot(const plan *p, shared *s, int i, int j) {
    s->gedge[j] = ltk_f32_bits(-INFINITY); /* the redo starts from its own conservative edges */
    if (i == j) return;
    memcpy(s->Qf + (size_t)j * p->Dp, s->Qf + (size_t)i * p->Dp, sizeof(float) * (size_t)p->Dp);
    if (p->screen) memcpy(s->Qp + (size_t)j * p->qw, s->Qp + (size_t)i * p->qw, sizeof(uint32_t) * (size_t)p->qw);
    if (p->screen8) {
        memcpy(s->Qp16 + (size_t)j * p->D2, s->Qp16 + (size_t)i * p->D2, sizeof(uint32_t) * (size_t)p->D2);
        memcpy(s->qa16 + 4 * j, s->qa16 + 4 * i, sizeof(float) * 4);
    }
    memcpy(s->qa + (size_t)p->qas * j, s->qa + (size_t)p->qas * i, sizeof(float) * (size_t)p->qas);
    s->qn[j] = s->qn[i];
    s->sq[j] = s->sq[i];
    s->qi[j] = s->qi[i];
    s->rowmap[j] = s->rowmap[i];
    s->app0[j] = s->app0[i];
    s->comp0[j] = s->comp0[i];
}

/* ---- materialize ---------------------------------------------------------------------------------- */
typedef struct {
    int nth, rb;
    int64_t cap;
} mplan;

typedef struct {
    float *S, *Qf, *qn, *sq;
    struct {
        float *tile, *xn, *sx;
        ltkc_selws sel;
        uint32_t *okey;
        int32_t *opos;
        uint64_t *sa, *sb;
    } t[256];
} mlay;

static mplan make_mplan(const ltk_knn_args *a, const plan *p) {
    mplan m;
    m.nth = p->nth;
    int64_t rb = a->N > 0 ? (int64_t)(MAT_BYTES / ((size_t)a->N * 4)) : QB;
    if (rb < 1) rb = 1;
    if (rb > a->B) rb = a->B > 0 ? a->B : 1;
    m.rb = (int)rb;
    m.cap = ltkc_select_cap(a->N, a->k);
    return m;
}

static size_t mat_layout(const ltk_knn_args *a, const plan *p, const mplan *m, char *base, mlay *L) {
    ltkc_ws w = {base, 0};
    float *S = ltkc_take(&w, sizeof(float) * (size_t)m->rb * (size_t)(a->N > 0 ? a->N : 1));
    float *Qf = ltkc_take(&w, sizeof(float) * (size_t)m->rb * p->Dp);
    float *qn = ltkc_take(&w, sizeof(float) * m->rb);
    float *sq = ltkc_take(&w, sizeof(float) * m->rb);
    if (L) {
        L->S = S;
        L->Qf = Qf;
        L->qn = qn;
        L->sq = sq;
    }
    for (int t = 0; t < m->nth; t++) {
        float *tile = ltkc_take(&w, sizeof(float) * NT * (size_t)p->Dp);
        float *xn = ltkc_take(&w, sizeof(float) * NT);
        float *sx = ltkc_take(&w, sizeof(float) * NT);
        uint32_t *hist = ltkc_take(&w, sizeof(uint32_t) * 2048);
        uint32_t *bkey = ltkc_take(&w, sizeof(uint32_t) * (size_t)m->cap);
        int32_t *bpos = ltkc_take(&w, sizeof(int32_t) * (size_t)m->cap);
        uint32_t *okey = ltkc_take(&w, sizeof(uint32_t) * (size_t)p->k);
        int32_t *opos = ltkc_take(&w, sizeof(int32_t) * (size_t)p->k);
        uint64_t *sa = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        uint64_t *sb = ltkc_take(&w, sizeof(uint64_t) * (size_t)p->k);
        if (L) {
            L->t[t].tile = tile;
            L->t[t].xn = xn;
            L->t[t].sx = sx;
            L->t[t].sel = (ltkc_selws){hist, bkey, bpos, m->cap};
            L->t[t].okey = okey;
            L->t[t].opos = opos;
            L->t[t].sa = sa;
            L->t[t].sb = sb;
        }
    }
    return w.off;
}

static ltk_status materialize(const ltk_knn_args *a, const ltk_exec *e, const plan *p, const ltkc_kern *K, void *ws,
                              size_t wsb) {
    mplan m = make_mplan(a, p);
    mlay L; /* pointer table on this stack: the team reads it through the shared frame */
    size_t need = mat_layout(a, p, &m, NULL, NULL);
    LTK_RETURN_IF(need > wsb || !ws, LTK_EWORKSPACE, "cpu knn: workspace %zu < %zu", wsb, need);
    mat_layout(a, p, &m, ws, &L);
    int unsorted = (a->flags & LTK_FLAG_UNSORTED) != 0;
    int l2 = a->metric == LTK_METRIC_L2;
    for (int64_t b0 = 0; b0 < a->B; b0 += m.rb) {
        int nq = a->B - b0 < m.rb ? (int)(a->B - b0) : m.rb;
        for (int i = 0; i < nq; i++) {
            float *q = L.Qf + (size_t)i * p->Dp;
            for (int d = 0; d < p->D; d++) q[d] = ltk_load_f32(a->queries, a->dtype, (b0 + i) * a->q_stride + d);
            const float *pp[1] = {q};
            K->dots_pairs(pp, pp, 1, p->D, &L.qn[i]);
            L.sq[i] = sqrtf(L.qn[i]);
        }
#pragma omp parallel num_threads(m.nth)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t per = (a->N + nt - 1) / nt;
            per = (per + 15) & ~(int64_t)15;
            int64_t n0 = per * t < a->N ? per * t : a->N, n1 = n0 + per < a->N ? n0 + per : a->N;
            for (int64_t i0 = n0; i0 < n1; i0 += NT) {
                int n = n1 - i0 < NT ? (int)(n1 - i0) : NT;
                int64_t ld;
                const float *X = tile_rows(a, p, i0, n, NULL, L.t[t].tile, &ld);
                tile_norms(K, X, ld, n, p->D, L.t[t].xn);
                for (int j = 0; j < n; j++) L.t[t].sx[j] = sqrtf(L.t[t].xn[j]);
                float *out = L.S + i0;
                K->dots_block(L.Qf, p->Dp, nq, X, ld, n, p->D, out, a->N);
                for (int i = 0; i < nq; i++)
                    for (int j = 0; j < n; j++) {
                        float *v = &out[(size_t)i * a->N + j];
                        *v = transform(p->metric, *v, L.qn[i], L.t[t].xn[j], L.sq[i], L.t[t].sx[j]);
                    }
            }
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < nq; i++) {
                const float *row = L.S + (size_t)i * a->N;
                int64_t mm = ltkc_select_row(row, LTK_DTYPE_F32, a->N, a->k, &L.t[t].sel, L.t[t].okey, L.t[t].opos);
                if (!unsorted) {
                    for (int64_t j = 0; j < mm; j++) L.t[t].sa[j] = ltkc_composite(L.t[t].okey[j], L.t[t].opos[j]);
                    ltkc_sort_u64(L.t[t].sa, L.t[t].sb, mm);
                    for (int64_t j = 0; j < mm; j++) L.t[t].opos[j] = (int32_t)(uint32_t)L.t[t].sa[j];
                }
                int64_t *oi = a->out_idx + (b0 + i) * a->out_stride;
                float *os = a->out_scores ? a->out_scores + (b0 + i) * a->out_stride : NULL;
                for (int64_t j = 0; j < a->k; j++) {
                    if (j < mm) {
                        oi[j] = L.t[t].opos[j];
                        if (os) {
                            float s = row[L.t[t].opos[j]];
                            os[j] = (l2 && s == s) ? -s : s;
                        }
                    } else {
                        oi[j] = -1;
                        if (os) os[j] = l2 ? INFINITY : -INFINITY;
                    }
                }
            }
        }
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->B;
        if (a->N <= a->k) e->stats->short_rows = a->B;
    }
    return LTK_OK;
}

/* ---- entry points ------------------------------------------------------------------------------- */
ltk_status ltkc_knn_ws(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes) {
    plan p = make_plan(a, e);
    if (e->algo == LTK_ALGO_MATERIALIZE) {
        mplan m = make_mplan(a, &p);
        *bytes = mat_layout(a, &p, &m, NULL, NULL);
    } else {
        *bytes = fused_layout(&p, NULL, NULL, NULL);
    }
    return LTK_OK;
}

ltk_status ltkc_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    const ltkc_kern *K = ltkc_kernels();
    plan p = make_plan(a, e);
    LTK_RETURN_IF(a->N >= ((int64_t)1 << 31) && e->algo == LTK_ALGO_MATERIALIZE, LTK_EUNSUPPORTED,
                  "cpu knn materialize: N=%lld >= 2^31", (long long)a->N);
    if (e->algo == LTK_ALGO_MATERIALIZE) return materialize(a, e, &p, K, ws, wsb);
    size_t need = fused_layout(&p, NULL, NULL, NULL);
    LTK_RETURN_IF(need > wsb || !ws, LTK_EWORKSPACE, "cpu knn: workspace %zu < %zu", wsb, need);
    shared s;
    thr *th;
    fused_layout(&p, ws, &s, &th);
    ltk_stats *st = e->stats;
    if (st) memset(st, 0, offsetof(ltk_stats, row_candidates));
    for (int64_t b0 = 0; b0 < a->B; b0 += p.nq_max) {
        int nq = a->B - b0 < p.nq_max ? (int)(a->B - b0) : p.nq_max;
        prepare_queries(a, &p, K, b0, nq, &s);
        fused_block(a, e, &p, K, &s, th, b0, nq, st, 0);
        int nf = 0;
        for (int i = 0; i < nq; i++)
            if (s.fail[i]) move_slot(&p, &s, i, nf++);
        if (nf) fused_block(a, e, &p, K, &s, th, b0, nf, st, 1);
    }
    if (st) {
        st->rows = a->B;
        if (a->N <= a->k) st->short_rows = a->B;
    }
    return LTK_OK;
}
