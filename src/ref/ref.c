/* The oracle backend: scalar code, float64 accumulation, a full sort of every row.
 * Slow on purpose and simple enough to check by eye; every other backend is tested against it. */
#include "../ltk-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* The oracle does not follow the host's denormal modes: a program built with -ffast-math sets
 * flush-to-zero and denormals-are-zero (MXCSR on x86, FPCR.FZ on AArch64), under which every
 * float -> double conversion here reads a subnormal input as 0 while the CPU backend's integer
 * decodes do not. Each call clears them and restores the caller's afterwards (the oracle runs on
 * the calling thread only). */
typedef struct { uint64_t saved; } fp_mode;
static fp_mode fp_exact_begin(void) {
    fp_mode m = {0};
#if defined(__SSE__) || defined(__x86_64__)
    m.saved = _mm_getcsr();
    _mm_setcsr((unsigned)m.saved & ~0x8040u); /* FTZ bit 15, DAZ bit 6 */
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    m.saved = fpcr;
    fpcr &= ~((1ull << 24) | (1ull << 19)); /* FZ, FZ16 */
    __asm__ volatile("msr fpcr, %0" ::"r"(fpcr));
#endif
    return m;
}
static void fp_exact_end(fp_mode m) {
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr((unsigned)m.saved);
#elif defined(__aarch64__)
    __asm__ volatile("msr fpcr, %0" ::"r"(m.saved));
#else
    (void)m;
#endif
}
#define REF_EXACT(call)                   \
    do {                                  \
        fp_mode m_ = fp_exact_begin();    \
        ltk_status st_ = (call);          \
        fp_exact_end(m_);                 \
        return st_;                       \
    } while (0)

typedef struct { double score; int64_t idx; } scored;

/* ORDER of litetopk.h on doubles: score desc, -0 == +0, NaN last, ties by lower index. */
static int cmp_scored(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    int na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int cmp_idx(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Writes the first k of `n` entries (padding -1 / pad_score). `negate` flips the reported score
 * back for metrics ranked ascending (L2). */
static void write_row(const scored *v, int64_t n, int32_t k, int64_t base, int32_t *idx32, int64_t *idx64, float *out_s,
                      int negate) {
    for (int32_t j = 0; j < k; j++) {
        if (j < n) {
            int64_t id = v[j].idx - base;
            if (idx32) idx32[j] = (int32_t)id;
            if (idx64) idx64[j] = id;
            if (out_s) out_s[j] = (float)(negate ? -v[j].score : v[j].score);
        } else {
            if (idx32) idx32[j] = -1;
            if (idx64) idx64[j] = -1;
            if (out_s) out_s[j] = negate ? INFINITY : -INFINITY;
        }
    }
}

/* Sorts `n` scored entries and writes the best k (write_row). */
static void emit_row(scored *v, int64_t n, int32_t k, int64_t base, int32_t *idx32, int64_t *idx64, float *out_s,
                     int negate) {
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
    write_row(v, n, k, base, idx32, idx64, out_s, negate);
}

/* emit_row, the best k then in ascending index order where by_index (LTK_FLAG_BY_INDEX). */
static void emit_row_by(scored *v, int64_t n, int32_t k, int64_t base, int32_t *idx32, float *out_s, int by_index) {
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
    if (by_index) qsort(v, (size_t)(n < k ? n : k), sizeof *v, cmp_idx);
    write_row(v, n, k, base, idx32, NULL, out_s, 0);
}

/* Row t's queries as float64 (H*D), and I[t,s] from them: the indexer's formula, float64 throughout. */
static void ref_load_q(const ltk_indexer_args *a, int64_t t, double *q) {
    for (int h = 0; h < a->H; h++)
        for (int d = 0; d < a->D; d++) q[h * a->D + d] = ltk_load_f32(a->q, a->dtype, t * a->q_stride_t + h * a->D + d);
}
static double ref_score(const ltk_indexer_args *a, const double *q, int64_t t, int64_t s) {
    double acc = 0.0;
    for (int h = 0; h < a->H; h++) {
        double dot = 0.0;
        for (int d = 0; d < a->D; d++) dot += q[h * a->D + d] * (double)ltk_load_f32(a->kv, a->dtype, s * a->kv_stride_s + d);
        acc += (double)a->weights[t * a->w_stride_t + h] * (dot > 0.0 ? dot : (isnan(dot) ? dot : 0.0));
    }
    return acc * (a->kv_scale ? (double)a->kv_scale[s] : 1.0);
}

/* The longest visible range of the indexer's rows (at least 1): one row buffer of it, not of S (S may
 * be 2^31 for rows that see a few keys). */
static int64_t ref_longest(const ltk_indexer_args *a) {
    int64_t maxlen = 1;
    for (int64_t t = 0; t < a->T; t++) {
        const int64_t len = (a->ke ? a->ke[t] : a->S) - (a->ks ? a->ks[t] : 0);
        if (len > maxlen) maxlen = len;
    }
    return maxlen;
}

static int ref_available(void) { return 1; }

/* The oracle allocates what it needs itself: it is never on a hot path. */
static ltk_status ref_indexer_ws(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}
static ltk_status ref_knn_ws(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}
static ltk_status ref_select_ws(const ltk_select_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}

/* ---- indexer ------------------------------------------------------------------------------ */
static ltk_status ref_indexer_exact(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws;
    (void)wsb;
    int64_t T = a->T, S = a->S;
    int H = a->H, D = a->D, k = a->k;
    const int64_t maxlen = ref_longest(a);
    double *q = malloc(sizeof(double) * (size_t)H * (size_t)D);
    scored *row = malloc(sizeof(scored) * (size_t)maxlen);
    if (!q || !row) {
        free(q);
        free(row);
        return ltk_error(LTK_ENOMEM, "ref indexer: allocation failed");
    }
    for (int64_t t = 0; t < T; t++) {
        int64_t lo = a->ks ? a->ks[t] : 0, hi = a->ke ? a->ke[t] : S;
        int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
        int32_t *oi = a->out_idx + t * a->out_stride;
        float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
        if (hi - lo <= k && (a->flags & LTK_FLAG_UNSORTED) && !os) {
            for (int32_t j = 0; j < k; j++) oi[j] = j < hi - lo ? (int32_t)(lo + j - base) : -1;
            continue;
        }
        ref_load_q(a, t, q);
        for (int64_t s = lo; s < hi; s++) {
            row[s - lo].score = ref_score(a, q, t, s);
            row[s - lo].idx = s;
        }
        emit_row(row, hi - lo, k, base, oi, NULL, os, 0);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    ltk_status st = LTK_OK;
    if (a->state) st = ltk_state_vote_host(a->state, a->out_idx, T, k, a->out_stride, a->ks, (a->flags & LTK_FLAG_ABSOLUTE) != 0,
                                            NULL, 0); /* the oracle allocates */
    free(q);
    free(row);
    return st;
}

/* ---- the candidate indexer (V4.1's block publication and listed-block scoring) -------------- */
static ltk_status ref_blocks_ws(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}
static ltk_status ref_candidates_ws(const ltk_candidates_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}

/* Ids lo .. lo + n - 1 ascending (relative to base), then -1. */
static void write_identity(int32_t *out, int64_t lo, int64_t n, int32_t k, int64_t base) {
    for (int32_t j = 0; j < k; j++) out[j] = j < n ? (int32_t)(lo + j - base) : -1;
}

static ltk_status ref_blocks_exact(const ltk_blocks_args *ba, const ltk_exec *e) {
    const ltk_indexer_args *a = &ba->ix;
    const int64_t T = a->T, S = a->S, b = ba->block_size;
    const int by = (a->flags & LTK_FLAG_BY_INDEX) != 0, loose = (a->flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) != 0;
    const int64_t maxlen = ref_longest(a);
    double *q = malloc(sizeof(double) * (size_t)a->H * (size_t)a->D);
    scored *row = malloc(sizeof(scored) * (size_t)maxlen), *blk = malloc(sizeof(scored) * (size_t)(maxlen / b + 2));
    if (!q || !row || !blk) {
        free(q), free(row), free(blk);
        return ltk_error(LTK_ENOMEM, "ref blocks: allocation failed");
    }
    for (int64_t t = 0; t < T; t++) {
        const int64_t lo = a->ks ? a->ks[t] : 0, hi = a->ke ? a->ke[t] : S, n = hi - lo;
        const int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo, j0 = lo / b, nb = n > 0 ? (hi - 1) / b - j0 + 1 : 0;
        int32_t *ob = ba->out_blocks + t * ba->blocks_stride;
        float *obs = ba->out_block_scores ? ba->out_block_scores + t * ba->blocks_stride : NULL;
        int32_t *oi = a->k > 0 ? a->out_idx + t * a->out_stride : NULL;
        float *os = a->k > 0 && a->out_scores ? a->out_scores + t * a->out_stride : NULL;
        const int blocks_plain = nb <= ba->block_k && loose && !obs, keys_plain = !oi || (n <= a->k && loose && !os);
        if (blocks_plain) write_identity(ob, j0, nb, ba->block_k, 0);
        if (oi && keys_plain) write_identity(oi, lo, n, a->k, base);
        if (blocks_plain && keys_plain) continue;
        ref_load_q(a, t, q);
        for (int64_t s = lo; s < hi; s++) {
            row[s - lo].score = ref_score(a, q, t, s);
            row[s - lo].idx = s;
        }
        if (!blocks_plain) {
            /* each block's largest score in ORDER (NaN below every number; -0 as +0) */
            for (int64_t i = 0; i < nb; i++) {
                const int64_t j = j0 + i, s0 = j * b > lo ? j * b : lo, s1 = (j + 1) * b < hi ? (j + 1) * b : hi;
                double best = NAN;
                for (int64_t s = s0; s < s1; s++) {
                    const double v = row[s - lo].score;
                    if (!isnan(v) && (isnan(best) || v > best)) best = v;
                }
                blk[i].score = best + 0.0;
                blk[i].idx = j;
            }
            qsort(blk, (size_t)nb, sizeof *blk, cmp_scored);
            if ((a->flags & LTK_FLAG_PIN_NEWEST) && nb > 0) { /* the newest block first (full or partial) */
                const int64_t jn = (hi - 1) / b;
                int64_t at = 0;
                while (blk[at].idx != jn) at++;
                memmove(blk + 1, blk, sizeof *blk * (size_t)at);
                blk[0].idx = jn;
                blk[0].score = INFINITY;
            }
            if (by) qsort(blk, (size_t)(nb < ba->block_k ? nb : ba->block_k), sizeof *blk, cmp_idx);
            write_row(blk, nb, ba->block_k, 0, ob, NULL, obs, 0);
        }
        if (!keys_plain) emit_row_by(row, n, a->k, base, oi, os, by);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    free(q), free(row), free(blk);
    return LTK_OK;
}

static int cmp_i64(const void *pa, const void *pb) {
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static ltk_status ref_candidates_exact(const ltk_candidates_args *ca, const ltk_exec *e) {
    const ltk_indexer_args *a = &ca->ix;
    const int64_t T = a->T, S = a->S, b = ca->block_size, nbk = (S + b - 1) / b;
    const int by = (a->flags & LTK_FLAG_BY_INDEX) != 0, loose = (a->flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) != 0;
    double *q = malloc(sizeof(double) * (size_t)a->H * (size_t)a->D);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)ca->n_blocks);
    scored *row = malloc(sizeof(scored) * (size_t)ca->n_blocks * (size_t)b);
    if (!q || !ids || !row) {
        free(q), free(ids), free(row);
        return ltk_error(LTK_ENOMEM, "ref candidates: allocation failed");
    }
    for (int64_t t = 0; t < T; t++) {
        const int64_t lo = a->ks ? a->ks[t] : 0, hi = a->ke ? a->ke[t] : S;
        const int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
        const int32_t *bl = ca->blocks + t * ca->blocks_stride;
        int32_t *oi = a->out_idx + t * a->out_stride;
        float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
        /* the listed blocks that exist and meet the row's range, once each, ascending */
        int64_t m = 0, n = 0;
        for (int32_t i = 0; i < ca->n_blocks; i++) {
            const int64_t j = bl[i];
            if (j >= 0 && j < nbk && j * b < hi && (j + 1) * b > lo) ids[m++] = j;
        }
        qsort(ids, (size_t)m, sizeof *ids, cmp_i64);
        int64_t u = 0;
        for (int64_t i = 0; i < m; i++)
            if (u == 0 || ids[u - 1] != ids[i]) ids[u++] = ids[i];
        for (int64_t i = 0; i < u; i++)
            for (int64_t s = ids[i] * b > lo ? ids[i] * b : lo; s < (ids[i] + 1) * b && s < hi; s++) row[n++].idx = s;
        if (n <= a->k && loose && !os) { /* ascending, unscored */
            for (int32_t j = 0; j < a->k; j++) oi[j] = j < n ? (int32_t)(row[j].idx - base) : -1;
            continue;
        }
        ref_load_q(a, t, q);
        for (int64_t i = 0; i < n; i++) row[i].score = ref_score(a, q, t, row[i].idx);
        emit_row_by(row, n, a->k, base, oi, os, by);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    free(q), free(ids), free(row);
    return LTK_OK;
}

static ltk_status ref_blocks(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws, (void)wsb;
    REF_EXACT(ref_blocks_exact(a, e));
}
static ltk_status ref_candidates(const ltk_candidates_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws, (void)wsb;
    REF_EXACT(ref_candidates_exact(a, e));
}

/* ---- decode ------------------------------------------------------------------------------- */
static ltk_status ref_decode_ws(const ltk_decode_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}

/* The indexer's formula over the paged cache, position by position, read straight from the blocks. */
static ltk_status ref_decode_exact(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws, (void)wsb;
    const int H = a->H, D = a->D, k = a->k;
    const int64_t rows = a->B * a->next_n;
    double *q = malloc(sizeof(double) * (size_t)H * (size_t)D);
    scored *row = malloc(sizeof(scored) * (size_t)(a->max_len > 0 ? a->max_len : 1));
    if (!q || !row) {
        free(q), free(row);
        return ltk_error(LTK_ENOMEM, "ref decode: allocation failed");
    }
    for (int64_t t = 0; t < rows; t++) {
        const int64_t b = t / a->next_n;
        const int32_t len = ltk_decode_len(a, t);
        int32_t *oi = a->out_idx + t * a->out_stride;
        float *os = a->out_scores ? a->out_scores + t * a->out_stride : NULL;
        if (len <= k && (a->flags & LTK_FLAG_UNSORTED) && !os) {
            for (int32_t j = 0; j < k; j++) oi[j] = j < len ? ltk_decode_out(a, b, j) : -1;
            continue;
        }
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) q[h * D + d] = ltk_load_f32(a->q, a->dtype, t * a->q_stride + h * D + d);
        for (int32_t i = 0; i < len; i++) {
            const int32_t blk = ltk_decode_block(a, b, i);
            const uint8_t *key = ltk_decode_keys(a, blk) + (size_t)(i % a->block_kv) * (size_t)D;
            double acc = 0.0;
            for (int h = 0; h < H; h++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++) dot += q[h * D + d] * (double)ltk_e4m3_to_f32(key[d]);
                acc += (double)a->weights[t * a->w_stride + h] * (dot > 0.0 ? dot : (isnan(dot) ? dot : 0.0));
            }
            row[i].score = acc * (double)ltk_decode_scales(a, blk)[i % a->block_kv];
            row[i].idx = i;
        }
        emit_row(row, len, k, 0, oi, NULL, os, 0);
        for (int32_t j = 0; j < k && j < len; j++) oi[j] = ltk_decode_out(a, b, oi[j]);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = rows;
    }
    free(q), free(row);
    return LTK_OK;
}

/* ---- kNN ---------------------------------------------------------------------------------- */
static ltk_status ref_knn_exact(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws;
    (void)wsb;
    int64_t B = a->B, N = a->N;
    int D = a->D;
    if (B == 0) N = 0; /* nothing to rank: no buffers sized by a base that need not exist */
    scored *row = malloc(sizeof(scored) * (size_t)(N > 0 ? N : 1));
    double *q = malloc(sizeof(double) * (size_t)D);
    double *xn = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
    if (!row || !q || !xn) {
        free(row);
        free(q);
        free(xn);
        return ltk_error(LTK_ENOMEM, "ref knn: allocation failed");
    }
    for (int64_t i = 0; B > 0 && i < N; i++) { /* base may be NULL when B == 0 */
        double s = 0.0;
        for (int d = 0; d < D; d++) {
            double x = ltk_load_f32(a->base, a->dtype, i * a->base_stride + d);
            s += x * x;
        }
        xn[i] = s;
    }
    for (int64_t b = 0; b < B; b++) {
        double qn = 0.0;
        for (int d = 0; d < D; d++) {
            q[d] = ltk_load_f32(a->queries, a->dtype, b * a->q_stride + d);
            qn += q[d] * q[d];
        }
        for (int64_t i = 0; i < N; i++) {
            double dot = 0.0;
            for (int d = 0; d < D; d++) dot += q[d] * (double)ltk_load_f32(a->base, a->dtype, i * a->base_stride + d);
            double s;
            if (a->metric == LTK_METRIC_IP) s = dot;
            else if (a->metric == LTK_METRIC_L2) s = -(qn + xn[i] - 2.0 * dot); /* ranked as -distance */
            else s = (qn == 0.0 || xn[i] == 0.0) ? 0.0 : dot / (sqrt(qn) * sqrt(xn[i])); /* NaN norms stay NaN */
            row[i].score = s;
            row[i].idx = i;
        }
        emit_row(row, N, a->k, 0, NULL, a->out_idx + b * a->out_stride,
                 a->out_scores ? a->out_scores + b * a->out_stride : NULL, a->metric == LTK_METRIC_L2);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = B;
    }
    free(row);
    free(q);
    free(xn);
    return LTK_OK;
}

/* ---- select ------------------------------------------------------------------------------- */
static ltk_status ref_select_exact(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws;
    (void)wsb;
    int64_t maxlen = 1; /* the longest valid range, not cols */
    for (int64_t r = 0; r < a->rows; r++) {
        int64_t len = (a->ends ? a->ends[r] : a->cols) - (a->starts ? a->starts[r] : 0);
        if (len > maxlen) maxlen = len;
    }
    scored *row = malloc(sizeof(scored) * (size_t)maxlen);
    if (!row) return ltk_error(LTK_ENOMEM, "ref select: allocation failed");
    for (int64_t r = 0; r < a->rows; r++) {
        int64_t lo = a->starts ? a->starts[r] : 0, hi = a->ends ? a->ends[r] : a->cols;
        int64_t base = (a->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
        for (int64_t c = lo; c < hi; c++) {
            /* Rank on the float value itself (the input), so ties are exact ties. */
            row[c - lo].score = (double)ltk_load_f32(a->scores, a->dtype, r * a->row_stride + c);
            row[c - lo].idx = c;
        }
        emit_row(row, hi - lo, a->k, base, a->out_idx + r * a->out_stride, NULL,
                 a->out_scores ? a->out_scores + r * a->out_stride : NULL, 0);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
    }
    free(row);
    return LTK_OK;
}

static ltk_status ref_indexer(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    REF_EXACT(ref_indexer_exact(a, e, ws, wsb));
}
static ltk_status ref_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    REF_EXACT(ref_knn_exact(a, e, ws, wsb));
}
static ltk_status ref_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    REF_EXACT(ref_select_exact(a, e, ws, wsb));
}
static ltk_status ref_decode(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    REF_EXACT(ref_decode_exact(a, e, ws, wsb));
}

/* ---- merge of candidate lists ---------------------------------------------------------------- */
static ltk_status ref_merge_ws(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes) {
    (void)a, (void)e;
    *bytes = 0;
    return LTK_OK;
}

/* Every row's candidates with an id >= 0, sorted in ORDER by their ids (a full sort). */
static ltk_status ref_merge_exact(const ltk_merge_args *a, const ltk_exec *e) {
    const int64_t n = (int64_t)a->lists * a->list_len;
    scored *v = malloc(sizeof(scored) * (size_t)(n > 0 ? n : 1));
    if (!v) return ltk_error(LTK_ENOMEM, "ref merge: allocation failed");
    for (int64_t r = 0; r < a->rows; r++) {
        int64_t m = 0;
        for (int32_t g = 0; g < a->lists; g++)
            for (int32_t j = 0; j < a->list_len; j++) {
                const int64_t o = r * a->row_stride + g * a->list_stride + j;
                if (a->ids[o] < 0) continue;
                v[m].score = (double)a->scores[o] + 0.0; /* -0 as +0 (the contract's output) */
                v[m++].idx = a->ids[o];
            }
        emit_row_by(v, m, a->k, 0, a->out_idx + r * a->out_stride, a->out_scores ? a->out_scores + r * a->out_stride : NULL,
                    0);
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
    }
    free(v);
    return LTK_OK;
}

static ltk_status ref_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    (void)ws, (void)wsb;
    REF_EXACT(ref_merge_exact(a, e));
}

const ltk_backend_i ltk_backend_ref = {
    /* .name              = */ "ref",
    /* .available         = */ ref_available,
    /* .info              = */ NULL,
    /* .indexer_workspace = */ ref_indexer_ws,
    /* .indexer           = */ ref_indexer,
    /* .knn_workspace     = */ ref_knn_ws,
    /* .knn               = */ ref_knn,
    /* .select_workspace  = */ ref_select_ws,
    /* .select            = */ ref_select,
    /* .mem_alloc         = */ ltk_host_alloc,
    /* .mem_free          = */ ltk_aligned_free,
    /* .mem_to_host       = */ ltk_host_copy,
    /* .mem_from_host     = */ ltk_host_copy,
    /* .stream_sync       = */ NULL,
    /* .causal_ranges     = */ NULL,
    /* .decode_workspace  = */ ref_decode_ws,
    /* .decode            = */ ref_decode,
    /* .ws_alloc          = */ NULL,
    /* .ws_free           = */ NULL,
    /* .blocks_workspace  = */ ref_blocks_ws,
    /* .blocks            = */ ref_blocks,
    /* .candidates_ws     = */ ref_candidates_ws,
    /* .candidates        = */ ref_candidates,
    /* .decode_blocks_ws  = */ NULL,
    /* .decode_blocks     = */ NULL,
    /* .decode_cands_ws   = */ NULL,
    /* .decode_cands      = */ NULL,
    /* .merge_workspace   = */ ref_merge_ws,
    /* .merge             = */ ref_merge,
};
