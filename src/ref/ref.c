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

/* Sorts `n` scored entries and writes the best k (padding -1 / pad_score). `negate` flips the
 * reported score back for metrics ranked ascending (L2). */
static void emit_row(scored *v, int64_t n, int32_t k, int64_t base, int32_t *idx32, int64_t *idx64, float *out_s,
                     int negate) {
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
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
    /* One row buffer of the longest visible range (not S: S may be 2^31 for rows that see a few keys). */
    int64_t maxlen = 1;
    for (int64_t t = 0; t < T; t++) {
        int64_t len = (a->ke ? a->ke[t] : S) - (a->ks ? a->ks[t] : 0);
        if (len > maxlen) maxlen = len;
    }
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
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) q[h * D + d] = ltk_load_f32(a->q, a->dtype, t * a->q_stride_t + h * D + d);
        for (int64_t s = lo; s < hi; s++) {
            double acc = 0.0;
            for (int h = 0; h < H; h++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++) dot += q[h * D + d] * (double)ltk_load_f32(a->kv, a->dtype, s * a->kv_stride_s + d);
                acc += (double)a->weights[t * a->w_stride_t + h] * (dot > 0.0 ? dot : (isnan(dot) ? dot : 0.0));
            }
            row[s - lo].score = acc * (a->kv_scale ? (double)a->kv_scale[s] : 1.0);
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
};
