/* Fuzz target for the argument validation (and the results) of ltk_select_topk, ltk_knn_topk and
 * ltk_indexer_topk on the ref and cpu backends.
 *
 * The input bytes choose an operation, shapes (mostly small, sometimes at or beyond the documented
 * limits, negative or huge), strides, flags, ranges, dtype, metric, backend, algo, workspace, stats
 * and state, and the data values (ties, NaN, +-inf, -0, subnormals). Every pointer is either NULL or
 * a buffer sized exactly to the claimed shape — when the shape is too large to allocate, NULL — so
 * any read or write the library makes outside what it was told is a sanitizer report, not noise.
 *
 * Oracles: no crash or sanitizer report; no byte of an output buffer outside the documented k
 * entries per row is written (stride gaps and a trailing guard stay intact); on success every row is
 * well formed (indices in range and distinct, -1 padding exactly when the row has fewer than k valid
 * entries, the short-row convention); select returns exactly the top-k by the ORDER of litetopk.h
 * (checked against the inputs); fused equals materialize bit for bit (same backend), and cpu equals
 * ref for select. A violation aborts with a message. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "litetopk.h"
#include "num.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- input bytes -------------------------------------------------------------------------- */
typedef struct fz {
    const uint8_t *p;
    size_t n;
    uint64_t lcg; /* continues deterministically once the bytes run out */
    int param;    /* number of the current choice */
    int evil;     /* the choice allowed to be invalid: 0 none, -1 every one */
} fz;

static uint8_t fz_u8(fz *f) {
    if (f->n) {
        f->n--;
        return *f->p++;
    }
    f->lcg = f->lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(f->lcg >> 56);
}

static uint32_t fz_u32(fz *f) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | fz_u8(f);
    return v;
}

/* Whether the next choice may take invalid values. Most inputs keep all choices valid but one, so
 * the calls get past validation and each rejection path is reached on its own. */
static int fz_bad(fz *f) {
    f->param++;
    return f->evil == -1 || f->evil == f->param;
}

/* Index into a table whose first `nvalid` entries are valid. */
static int fz_pick(fz *f, int nvalid, int ntotal) { return fz_u8(f) % (fz_bad(f) ? ntotal : nvalid); }

/* A dimension: usually small; when allowed, sometimes one of the boundary values. */
static int64_t fz_dim(fz *f, int64_t valid_min, int64_t small_max, const int64_t *special, int nspecial) {
    uint8_t sel = fz_u8(f);
    int bad = fz_bad(f);
    if (!bad) sel = 0;
    if (sel < 216 || nspecial == 0) {
        uint32_t lo = fz_u8(f), hi = fz_u8(f);
        int64_t from = bad ? 0 : valid_min;
        return from + (int64_t)(lo | hi << 8) % (small_max - from + 1);
    }
    return special[sel % nspecial];
}

/* A stride: 0 (default), the minimum, the minimum plus a little, or one short (invalid). */
static int64_t fz_stride(fz *f, int64_t minimum) {
    switch (fz_u8(f) % (fz_bad(f) ? 8 : 6)) {
    case 0: case 1: case 2: return 0;
    case 3: return minimum;
    case 4: case 5: return minimum + 1 + fz_u8(f) % 7;
    case 6: return minimum - 1;
    default: return (int64_t)(int32_t)fz_u32(f);
    }
}

static float fz_value(fz *f) {
    uint8_t b = fz_u8(f);
    switch (b) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return -0.0f;
    case 4: return 1e-40f; /* subnormal */
    case 5: return 3.0e38f;
    default: return (float)(int8_t)b / 4.0f; /* many exact ties */
    }
}

/* Outcome counts, printed at exit with LTK_FUZZ_STATS=1 (to judge how deep a corpus reaches). */
static long long outcome[3][2];
static void print_outcomes(void) {
    static const char *names[3] = {"select", "knn", "indexer"};
    for (int i = 0; i < 3; i++)
        fprintf(stderr, "fuzz-args: %-8s %lld ok, %lld rejected\n", names[i], outcome[i][0], outcome[i][1]);
}

/* The call under test, printed when an invariant fails. */
static char call_desc[512];

static void describe_exec(char *buf, size_t cap, const ltk_exec *e) {
    snprintf(buf, cap, " backend=%d algo=%d threads=%d ws=%p/%zu stats=%s", (int)e->backend, (int)e->algo,
             (int)e->num_threads, e->workspace, e->workspace_bytes, e->stats ? "on" : "off");
}

static void die(const char *op, const char *what) {
    fprintf(stderr, "fuzz-args: %s: invariant violated: %s (last error: %s)\n  call: %s\n", op, what,
            ltk_last_error(), call_desc);
    abort();
}

/* ---- buffers ------------------------------------------------------------------------------ */
enum { GUARD = 16, CAP_ELEMS = 1 << 18 };

/* Elements spanned by `rows` rows of `len` with `stride` (0 = len); -1 when invalid or too large. */
static int64_t span(int64_t rows, int64_t len, int64_t stride) {
    if (stride == 0) stride = len;
    if (rows < 0 || len < 0 || stride < len || rows > CAP_ELEMS || stride > CAP_ELEMS) return -1;
    if (rows == 0) return 0;
    int64_t n = (rows - 1) * stride + len;
    return n <= CAP_ELEMS ? n : -1;
}

static void *alloc_exact(int64_t elems, size_t es) {
    if (elems < 0) return NULL;
    return malloc((size_t)(elems > 0 ? elems : 1) * es);
}

/* Output buffer: the span plus a guard, all filled with a sentinel. */
static void *alloc_out(int64_t elems, size_t es) {
    if (elems < 0) return NULL;
    void *p = malloc((size_t)(elems + GUARD) * es);
    if (p) memset(p, 0xA5, (size_t)(elems + GUARD) * es);
    return p;
}

/* Bytes outside the k entries of each row must keep the sentinel. */
static void check_untouched(const char *op, const void *buf, int64_t rows, int32_t k, int64_t stride, int64_t elems,
                            size_t es) {
    if (!buf || elems < 0) return;
    const unsigned char *b = buf;
    for (int64_t i = 0; i < elems + GUARD; i++) {
        int64_t col = (stride > 0 && i < rows * stride) ? i % stride : -1;
        int inside = i < elems && col >= 0 && col < k;
        if (inside) continue;
        for (size_t j = 0; j < es; j++)
            if (b[(size_t)i * es + j] != 0xA5) die(op, "a byte outside the documented output was written");
    }
}

static void fill_values(fz *f, void *buf, int64_t n, ltk_dtype dt) {
    for (int64_t i = 0; i < n; i++) {
        float v = fz_value(f);
        switch (dt) {
        case LTK_DTYPE_F32: ((float *)buf)[i] = v; break;
        case LTK_DTYPE_F16: ((uint16_t *)buf)[i] = num_f32_to_f16(v); break;
        case LTK_DTYPE_BF16: ((uint16_t *)buf)[i] = num_f32_to_bf16(v); break;
        case LTK_DTYPE_E4M3: ((uint8_t *)buf)[i] = num_f32_to_e4m3(v); break;
        }
    }
}

static float load_value(const void *buf, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: return ((const float *)buf)[i];
    case LTK_DTYPE_F16: return num_f16_to_f32(((const uint16_t *)buf)[i]);
    case LTK_DTYPE_BF16: return num_bf16_to_f32(((const uint16_t *)buf)[i]);
    case LTK_DTYPE_E4M3: return num_e4m3_to_f32(((const uint8_t *)buf)[i]);
    }
    return NAN;
}

static int better(float a, int64_t ia, float b, int64_t ib) {
    uint32_t ka = num_rank_key(a), kb = num_rank_key(b);
    return ka > kb || (ka == kb && ia < ib);
}

/* ---- execution options -------------------------------------------------------------------- */
typedef struct fz_exec {
    ltk_exec exec;
    ltk_stats stats;
    int32_t *row_detail[2];
    int ws_mode;
} fz_exec;

static void fz_exec_make(fz *f, fz_exec *x, int64_t rows) {
    memset(x, 0, sizeof *x);
    static const int backends[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU, LTK_BACKEND_CPU, LTK_BACKEND_REF,
                                   LTK_BACKEND_AUTO, 7, -1};
    static const int algos[] = {LTK_ALGO_FUSED, LTK_ALGO_FUSED, LTK_ALGO_MATERIALIZE, LTK_ALGO_SCORE_ONLY, 5, -2};
    static const int threads[] = {0, 1, 2, 3, -1};
    x->exec.backend = (ltk_backend)backends[fz_pick(f, 5, 7)];
    x->exec.algo = (ltk_algo)algos[fz_pick(f, 4, 6)];
    x->exec.num_threads = threads[fz_pick(f, 4, 5)];
    x->ws_mode = fz_pick(f, 3, 5); /* 0,1: none  2: exact  3: one byte short  4: NULL with a size */
    if (fz_u8(f) % 2) {
        x->exec.stats = &x->stats;
        if (rows >= 0 && rows <= 4096 && fz_u8(f) % 2) {
            x->row_detail[0] = malloc(sizeof(int32_t) * (size_t)(rows ? rows : 1));
            x->row_detail[1] = malloc(sizeof(int32_t) * (size_t)(rows ? rows : 1));
            x->stats.row_candidates = x->row_detail[0];
            x->stats.row_bin_entries = x->row_detail[1];
        }
    }
}

/* Applies the workspace mode once the size is known; returns the buffer to free. */
static void *fz_exec_workspace(fz_exec *x, ltk_status size_status, size_t need) {
    void *ws = NULL;
    if (x->ws_mode == 4) x->exec.workspace_bytes = 64; /* invalid: NULL with bytes */
    if (size_status != LTK_OK || need > ((size_t)1 << 28)) return NULL;
    if (x->ws_mode == 2 || (x->ws_mode == 3 && need > 0)) {
        size_t bytes = x->ws_mode == 2 ? need : need - 1;
        ws = malloc(bytes ? bytes : 1);
        x->exec.workspace = ws;
        x->exec.workspace_bytes = bytes;
        if (!ws) x->exec.workspace_bytes = 0;
    }
    return ws;
}

static void fz_exec_free(fz_exec *x) { free(x->row_detail[0]), free(x->row_detail[1]); }

/* Host backend the call ran on (AUTO resolved), or -1 when the call could not have succeeded. */
static int host_backend(const ltk_exec *e) {
    ltk_backend b = ltk_backend_resolve(e->backend);
    return (b == LTK_BACKEND_REF || b == LTK_BACKEND_CPU) ? (int)b : -1;
}

/* ---- row checks --------------------------------------------------------------------------- */
/* Indices of one row: valid ones in [lo, hi) (after adding `base`), distinct, -1 count = max(0, k - n). */
static void check_row_indices(const char *op, const int64_t *idx, int32_t k, int64_t n, int64_t base, int64_t lo,
                              int64_t hi) {
    int64_t pad = 0;
    for (int32_t j = 0; j < k; j++) {
        if (idx[j] == -1) {
            pad++;
            continue;
        }
        int64_t a = idx[j] + base;
        if (a < lo || a >= hi) die(op, "index out of the row's range");
        for (int32_t i = 0; i < j; i++)
            if (idx[i] == idx[j]) die(op, "duplicate index in a row");
    }
    if (pad != (n < k ? k - n : 0)) die(op, "wrong number of -1 padding entries");
}

typedef struct { uint32_t key, bits; int64_t idx; } ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
    return (a->bits > b->bits) - (a->bits < b->bits);
}

/* Same set of (index, score bits) in two rows. */
static int same_set(const int64_t *ia, const float *sa, const int64_t *ib, const float *sb, int32_t k) {
    ranked *a = malloc(sizeof *a * (size_t)k), *b = malloc(sizeof *b * (size_t)k);
    int same = 1;
    for (int32_t j = 0; j < k; j++) {
        a[j] = (ranked){num_rank_key(sa ? sa[j] : 0.0f), num_f32_bits(sa ? sa[j] : 0.0f), ia[j]};
        b[j] = (ranked){num_rank_key(sb ? sb[j] : 0.0f), num_f32_bits(sb ? sb[j] : 0.0f), ib[j]};
    }
    qsort(a, (size_t)k, sizeof *a, cmp_ranked);
    qsort(b, (size_t)k, sizeof *b, cmp_ranked);
    for (int32_t j = 0; j < k && same; j++) same = a[j].idx == b[j].idx && a[j].bits == b[j].bits;
    free(a), free(b);
    return same;
}

/* ---- select ------------------------------------------------------------------------------- */
static void fuzz_select(fz *f) {
    static const int64_t sp_rows[] = {-1, 0, 1, (int64_t)INT32_MAX + 1, INT64_MIN, 5000000};
    static const int64_t sp_cols[] = {-1, 0, 1, INT32_MAX, (int64_t)INT32_MAX + 1, 1 << 20};
    static const int64_t sp_k[] = {0, -1, 1, 65536, 65537, INT32_MAX, INT32_MIN};
    static const int dtypes[] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16, LTK_DTYPE_F32, LTK_DTYPE_E4M3, 9};
    const char *op = "select";
    ltk_select_args a;
    memset(&a, 0, sizeof a);
    a.rows = fz_dim(f, 0, 6, sp_rows, 6);
    a.cols = fz_dim(f, 0, 300, sp_cols, 6);
    int64_t k64 = fz_dim(f, 1, 40, sp_k, 7);
    a.k = (int32_t)k64;
    a.dtype = (ltk_dtype)dtypes[fz_pick(f, 4, 6)];
    a.row_stride = fz_stride(f, a.cols);
    a.out_stride = fz_stride(f, a.k);
    a.flags = fz_bad(f) ? (uint32_t)fz_u8(f) : (uint32_t)(fz_u8(f) % 4);
    size_t es = ltk_dtype_size(a.dtype) ? ltk_dtype_size(a.dtype) : 4;
    int64_t n_scores = span(a.rows, a.cols, a.row_stride);
    int64_t n_out = span(a.rows, a.k, a.out_stride);
    uint8_t ptrs = fz_bad(f) ? fz_u8(f) : (fz_u8(f) & 4); /* out_scores is optional */
    void *scores = (ptrs & 1) ? NULL : alloc_exact(n_scores, es);
    if (scores) fill_values(f, scores, n_scores, ltk_dtype_size(a.dtype) ? a.dtype : LTK_DTYPE_F32);
    int32_t *out_idx = (ptrs & 2) ? NULL : alloc_out(n_out, 4);
    float *out_scores = (ptrs & 4) ? NULL : alloc_out(n_out, 4);
    int32_t *starts = NULL, *ends = NULL;
    uint8_t rmode = (uint8_t)fz_pick(f, 4, 6);
    if (rmode >= 3 && a.rows >= 0 && a.rows <= CAP_ELEMS) {
        starts = alloc_exact(a.rows, 4), ends = alloc_exact(a.rows, 4);
        for (int64_t r = 0; r < a.rows; r++) {
            int64_t c = a.cols > 0 && a.cols <= CAP_ELEMS ? a.cols : 1;
            int32_t s = (int32_t)(fz_u8(f) % (c + 1)), e = (int32_t)(s + fz_u8(f) % (c + 1 - s));
            if (rmode == 5 && fz_u8(f) % 4 == 0) s = (int32_t)fz_u32(f); /* possibly invalid */
            starts[r] = s, ends[r] = e;
        }
        if (rmode == 4) free(starts), starts = NULL; /* one of the pair missing: invalid */
    }
    a.scores = scores, a.out_idx = out_idx, a.out_scores = out_scores, a.starts = starts, a.ends = ends;

    fz_exec x;
    fz_exec_make(f, &x, a.rows);
    size_t need = 0;
    ltk_status wst = ltk_select_workspace_size(&a, &x.exec, &need);
    void *ws = fz_exec_workspace(&x, wst, need);
    {
        char ex[160];
        describe_exec(ex, sizeof ex, &x.exec);
        snprintf(call_desc, sizeof call_desc,
                 "select rows=%lld cols=%lld k=%d dtype=%d row_stride=%lld out_stride=%lld flags=0x%x ranges=%s "
                 "scores=%p out_scores=%p%s",
                 (long long)a.rows, (long long)a.cols, a.k, (int)a.dtype, (long long)a.row_stride,
                 (long long)a.out_stride, a.flags, starts ? "yes" : "no", (void *)scores, (void *)out_scores, ex);
    }
    ltk_status st = ltk_select_topk(fz_bad(f) && fz_u8(f) == 0 ? NULL : &a, &x.exec);
    outcome[0][st != LTK_OK]++;
    if (st != LTK_OK && !ltk_last_error()[0]) die(op, "error without a message");
    int64_t ostride = a.out_stride ? a.out_stride : a.k;
    check_untouched(op, out_idx, a.rows, a.k, ostride, n_out, 4);
    check_untouched(op, out_scores, a.rows, a.k, ostride, n_out, 4);

    int hb = host_backend(&x.exec);
    if (st == LTK_OK && hb >= 0 && x.exec.algo != LTK_ALGO_SCORE_ONLY && a.rows > 0) {
        int64_t rstride = a.row_stride ? a.row_stride : a.cols;
        int64_t *row = malloc(sizeof(int64_t) * (size_t)a.k);
        int32_t *ref_idx = NULL;
        float *ref_sc = NULL;
        /* cpu vs ref, same arguments: selection over given values has one right answer. */
        if (hb == LTK_BACKEND_CPU && n_out >= 0) {
            ltk_select_args b = a;
            ref_idx = alloc_out(n_out, 4), ref_sc = out_scores ? alloc_out(n_out, 4) : NULL;
            b.out_idx = ref_idx, b.out_scores = ref_sc;
            ltk_exec re = {0};
            re.backend = LTK_BACKEND_REF;
            if (ltk_select_topk(&b, &re) != LTK_OK) die(op, "ref failed where cpu succeeded");
        }
        for (int64_t r = 0; r < a.rows; r++) {
            int64_t lo = starts ? starts[r] : 0, hi = ends ? ends[r] : a.cols, n = hi - lo;
            int64_t base = (a.flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
            const int32_t *oi = out_idx + r * ostride;
            const float *os = out_scores ? out_scores + r * ostride : NULL;
            for (int32_t j = 0; j < a.k; j++) row[j] = oi[j];
            check_row_indices(op, row, a.k, n, base, lo, hi);
            int unsorted = (a.flags & LTK_FLAG_UNSORTED) != 0;
            /* Exactly the top-k: the worst selected entry beats every unselected one. */
            if (!scores) continue; /* only possible when no row has a valid entry */
            const void *srow = (const char *)scores + (size_t)(r * rstride) * es;
            int64_t worst = -1;
            float worst_v = 0.0f;
            for (int32_t j = 0; j < a.k; j++) {
                if (row[j] < 0) continue;
                int64_t c = row[j] + base;
                float v = load_value(srow, a.dtype, c);
                if (os && num_f32_bits(os[j]) != num_f32_bits(v) && !(isnan(os[j]) && isnan(v)))
                    die(op, "reported score is not the input value");
                if (worst < 0 || better(worst_v, worst, v, c)) worst = c, worst_v = v;
                if (!unsorted && j > 0 && row[j - 1] >= 0 &&
                    better(v, c, load_value(srow, a.dtype, row[j - 1] + base), row[j - 1] + base))
                    die(op, "sorted output out of order");
            }
            if (worst >= 0 && n > a.k) {
                for (int64_t c = lo; c < hi; c++) {
                    int chosen = 0;
                    for (int32_t j = 0; j < a.k && !chosen; j++) chosen = row[j] + base == c;
                    if (!chosen && better(load_value(srow, a.dtype, c), c, worst_v, worst))
                        die(op, "an unselected entry ranks above a selected one");
                }
            }
            if (ref_idx) {
                int64_t *rrow = malloc(sizeof(int64_t) * (size_t)a.k);
                for (int32_t j = 0; j < a.k; j++) rrow[j] = ref_idx[r * ostride + j];
                if (!same_set(row, os, rrow, ref_sc ? ref_sc + r * ostride : NULL, a.k)) die(op, "cpu != ref");
                free(rrow);
            }
        }
        free(row), free(ref_idx), free(ref_sc);
    }
    free(ws);
    fz_exec_free(&x);
    free(scores), free(out_idx), free(out_scores), free(starts), free(ends);
}

/* ---- kNN ---------------------------------------------------------------------------------- */
static void fuzz_knn(fz *f) {
    static const int64_t sp_b[] = {-1, 0, 1, (int64_t)INT32_MAX + 1, 100000000};
    static const int64_t sp_n[] = {-1, 0, 1, INT64_MAX, 1 << 24};
    static const int64_t sp_d[] = {0, -1, 1, 65536, 65537};
    static const int64_t sp_k[] = {0, -1, 1, 16384, 16385, INT32_MAX};
    static const int dtypes[] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16, LTK_DTYPE_F32, LTK_DTYPE_E4M3, 7};
    static const int metrics[] = {LTK_METRIC_IP, LTK_METRIC_L2, LTK_METRIC_COS, LTK_METRIC_IP, 3, -1};
    const char *op = "knn";
    ltk_knn_args a;
    memset(&a, 0, sizeof a);
    a.B = fz_dim(f, 0, 5, sp_b, 5);
    a.N = fz_dim(f, 0, 150, sp_n, 5);
    a.D = (int32_t)fz_dim(f, 1, 24, sp_d, 5);
    a.k = (int32_t)fz_dim(f, 1, 30, sp_k, 6);
    a.dtype = (ltk_dtype)dtypes[fz_pick(f, 4, 6)];
    a.metric = (ltk_metric)metrics[fz_pick(f, 4, 6)];
    a.q_stride = fz_stride(f, a.D);
    a.base_stride = fz_stride(f, a.D);
    a.out_stride = fz_stride(f, a.k);
    a.flags = fz_bad(f) ? (uint32_t)fz_u8(f) : (uint32_t)(fz_u8(f) % 2);
    size_t es = ltk_dtype_size(a.dtype) ? ltk_dtype_size(a.dtype) : 4;
    ltk_dtype fill = ltk_dtype_size(a.dtype) ? a.dtype : LTK_DTYPE_F32;
    int64_t n_q = span(a.B, a.D, a.q_stride), n_b = span(a.N, a.D, a.base_stride), n_out = span(a.B, a.k, a.out_stride);
    if ((double)a.B * (double)a.N * (double)a.D > 4e6) n_b = -1; /* keep runs short */
    uint8_t ptrs = fz_bad(f) ? fz_u8(f) : (fz_u8(f) & 8); /* out_scores is optional */
    void *q = (ptrs & 1) ? NULL : alloc_exact(n_q, es);
    void *base = (ptrs & 2) ? NULL : alloc_exact(n_b, es);
    if (q) fill_values(f, q, n_q, fill);
    if (base) fill_values(f, base, n_b, fill);
    int64_t *out_idx = (ptrs & 4) ? NULL : alloc_out(n_out, 8);
    float *out_scores = (ptrs & 8) ? NULL : alloc_out(n_out, 4);
    a.queries = q, a.base = base, a.out_idx = out_idx, a.out_scores = out_scores;

    fz_exec x;
    fz_exec_make(f, &x, a.B);
    size_t need = 0;
    ltk_status wst = ltk_knn_workspace_size(&a, &x.exec, &need);
    void *ws = fz_exec_workspace(&x, wst, need);
    {
        char ex[160];
        describe_exec(ex, sizeof ex, &x.exec);
        snprintf(call_desc, sizeof call_desc,
                 "knn B=%lld N=%lld D=%d k=%d dtype=%d metric=%d q_stride=%lld base_stride=%lld out_stride=%lld "
                 "flags=0x%x out_scores=%p%s",
                 (long long)a.B, (long long)a.N, a.D, a.k, (int)a.dtype, (int)a.metric, (long long)a.q_stride,
                 (long long)a.base_stride, (long long)a.out_stride, a.flags, (void *)out_scores, ex);
    }
    ltk_status st = ltk_knn_topk(&a, &x.exec);
    outcome[1][st != LTK_OK]++;
    if (st != LTK_OK && !ltk_last_error()[0]) die(op, "error without a message");
    int64_t ostride = a.out_stride ? a.out_stride : a.k;
    check_untouched(op, out_idx, a.B, a.k, ostride, n_out, 8);
    check_untouched(op, out_scores, a.B, a.k, ostride, n_out, 4);

    int hb = host_backend(&x.exec);
    if (st == LTK_OK && hb >= 0 && x.exec.algo != LTK_ALGO_SCORE_ONLY && a.B > 0) {
        /* The other algo of the same backend must agree bit for bit. */
        ltk_knn_args b = a;
        int64_t *idx2 = alloc_out(n_out, 8);
        float *sc2 = out_scores ? alloc_out(n_out, 4) : NULL;
        b.out_idx = idx2, b.out_scores = sc2;
        ltk_exec e2 = {0};
        e2.backend = (ltk_backend)hb;
        e2.algo = x.exec.algo == LTK_ALGO_FUSED ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED;
        if (ltk_knn_topk(&b, &e2) != LTK_OK) die(op, "the other algo failed");
        for (int64_t r = 0; r < a.B; r++) {
            check_row_indices(op, out_idx + r * ostride, a.k, a.N, 0, 0, a.N);
            if (!same_set(out_idx + r * ostride, out_scores ? out_scores + r * ostride : NULL, idx2 + r * ostride,
                          sc2 ? sc2 + r * ostride : NULL, a.k)) {
                fprintf(stderr, "row %lld:\n", (long long)r);
                if (!out_scores && n_out >= 0) { /* rerun both with scores, for the report */
                    ltk_knn_args c = a;
                    float *s1 = alloc_out(n_out, 4), *s2 = alloc_out(n_out, 4);
                    int64_t *i1 = alloc_out(n_out, 8), *i2 = alloc_out(n_out, 8);
                    ltk_exec e1 = e2;
                    e1.algo = x.exec.algo;
                    c.out_idx = i1, c.out_scores = s1;
                    ltk_knn_topk(&c, &e1);
                    c.out_idx = i2, c.out_scores = s2;
                    ltk_knn_topk(&c, &e2);
                    for (int32_t j = 0; j < a.k; j++)
                        fprintf(stderr, "  with scores %3d: %5lld %-14.9g | %5lld %-14.9g\n", j,
                                (long long)i1[r * ostride + j], (double)s1[r * ostride + j],
                                (long long)i2[r * ostride + j], (double)s2[r * ostride + j]);
                    free(s1), free(s2), free(i1), free(i2);
                }
                for (int32_t j = 0; j < a.k; j++)
                    fprintf(stderr, "  %3d: %5lld %-12.7g | %5lld %-12.7g\n", j, (long long)out_idx[r * ostride + j],
                            out_scores ? (double)out_scores[r * ostride + j] : 0.0, (long long)idx2[r * ostride + j],
                            sc2 ? (double)sc2[r * ostride + j] : 0.0);
                die(op, "fused != materialize");
            }
        }
        free(idx2), free(sc2);
    }
    free(ws);
    fz_exec_free(&x);
    free(q), free(base), free(out_idx), free(out_scores);
}

/* ---- indexer ------------------------------------------------------------------------------ */
/* The candidate indexer on the indexer call's inputs (ltk_blocks_topk, ltk_candidates_topk): block
 * sizes, counts and lists fuzzed (ids anywhere in int32), flags of either operation. Whatever the
 * status: a message on error, no byte written outside the outputs, and on success every index inside
 * its row's range (the blocks' ids inside the row's blocks), no duplicate, the padding exact. */
static void fuzz_candidates(fz *f, const ltk_indexer_args *ix, int64_t n_out) {
    static const int64_t sp_b[] = {0, -1, 1, LTK_BLOCK_MAX_SIZE, LTK_BLOCK_MAX_SIZE + 1};
    static const int64_t sp_n[] = {0, -1, 1, LTK_BLOCKS_MAX_K, LTK_BLOCKS_MAX_K + 1};
    const char *op = "candidates";
    const int32_t b = (int32_t)fz_dim(f, 1, 16, sp_b, 5), nb = (int32_t)fz_dim(f, 1, 24, sp_n, 5);
    const int64_t T = ix->T >= 0 && ix->T <= CAP_ELEMS ? ix->T : -1;
    const int64_t bstride = fz_stride(f, nb), n_bl = T >= 0 && nb > 0 ? span(T, nb, bstride) : -1;
    const int64_t bst = bstride ? bstride : nb; /* (0: packed) */
    int32_t *bl = alloc_exact(n_bl, 4);
    const int64_t nbk = ix->S > 0 && b > 0 ? (ix->S + b - 1) / b : 1;
    for (int64_t i = 0; bl && i < n_bl; i++)
        bl[i] = fz_u8(f) % 8 == 0 ? (int32_t)fz_u32(f) : (int32_t)(fz_u32(f) % (uint32_t)(nbk + 2)) - 1;
    ltk_exec e = {0};
    e.backend = fz_u8(f) % 2 ? LTK_BACKEND_REF : LTK_BACKEND_CPU;
    const uint32_t flags = fz_bad(f) ? (uint32_t)fz_u8(f) : (uint32_t)(fz_u8(f) % 32) & ~LTK_FLAG_PHYSICAL;
    /* the consumer: ix's outputs as allocated by the caller's fuzz (n_out) */
    ltk_candidates_args c;
    memset(&c, 0, sizeof c);
    c.ix = *ix, c.ix.state = NULL, c.ix.flags = flags & ~LTK_FLAG_PIN_NEWEST;
    int32_t *oi = alloc_out(n_out, 4);
    c.ix.out_idx = ix->out_idx ? oi : NULL, c.ix.out_scores = NULL;
    c.block_size = b, c.n_blocks = nb, c.blocks = fz_bad(f) && fz_u8(f) % 4 == 0 ? NULL : bl, c.blocks_stride = bstride;
    snprintf(call_desc, sizeof call_desc, "candidates T=%lld S=%lld k=%d b=%d n_blocks=%d stride=%lld flags=0x%x on %s",
             (long long)ix->T, (long long)ix->S, ix->k, b, nb, (long long)bstride, c.ix.flags, ltk_backend_name(e.backend));
    ltk_status st = ltk_candidates_topk(&c, &e);
    if (st != LTK_OK && !ltk_last_error()[0]) die(op, "error without a message");
    const int64_t ostride = c.ix.out_stride ? c.ix.out_stride : c.ix.k;
    check_untouched(op, oi, ix->T, ix->k, ostride, n_out, 4);
    if (st == LTK_OK && oi && ix->S <= CAP_ELEMS) {
        int64_t *row = malloc(sizeof(int64_t) * (size_t)(ix->k > 0 ? ix->k : 1));
        for (int64_t t = 0; t < ix->T; t++) {
            const int64_t lo = ix->ks ? ix->ks[t] : 0, hi = ix->ke ? ix->ke[t] : ix->S;
            const int64_t base = (c.ix.flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
            int64_t n = 0; /* the listed keys inside the row, once each */
            for (int64_t s = lo; s < hi; s++) {
                int in = 0;
                for (int32_t i = 0; i < nb && !in; i++) in = bl[t * bst + i] >= 0 && bl[t * bst + i] == s / b;
                n += in;
            }
            for (int32_t j = 0; j < ix->k; j++) row[j] = oi[t * ostride + j];
            check_row_indices(op, row, ix->k, n, base, lo, hi);
        }
        free(row);
    }
    free(oi);
    /* the publication: blocks only, into a fresh buffer */
    op = "blocks";
    const int32_t bk = (int32_t)fz_dim(f, 1, 24, sp_n, 5);
    const int64_t ostr = fz_stride(f, bk), n_ob = T >= 0 && bk > 0 ? span(T, bk, ostr) : -1;
    int32_t *ob = alloc_out(n_ob, 4);
    ltk_blocks_args pa;
    memset(&pa, 0, sizeof pa);
    pa.ix = *ix, pa.ix.state = NULL, pa.ix.k = 0, pa.ix.out_idx = NULL, pa.ix.out_scores = NULL, pa.ix.out_stride = 0;
    pa.ix.flags = flags;
    pa.block_size = b, pa.block_k = bk, pa.out_blocks = ob, pa.blocks_stride = ostr;
    snprintf(call_desc, sizeof call_desc, "blocks T=%lld S=%lld b=%d block_k=%d stride=%lld flags=0x%x on %s",
             (long long)ix->T, (long long)ix->S, b, bk, (long long)ostr, pa.ix.flags, ltk_backend_name(e.backend));
    st = ltk_blocks_topk(&pa, &e);
    if (st != LTK_OK && !ltk_last_error()[0]) die(op, "error without a message");
    check_untouched(op, ob, ix->T, bk, ostr ? ostr : bk, n_ob, 4);
    if (st == LTK_OK && ob) {
        int64_t *row = malloc(sizeof(int64_t) * (size_t)bk);
        for (int64_t t = 0; t < ix->T; t++) {
            const int64_t lo = ix->ks ? ix->ks[t] : 0, hi = ix->ke ? ix->ke[t] : ix->S;
            const int64_t j0 = lo / b, nblk = hi > lo ? (hi - 1) / b - j0 + 1 : 0;
            for (int32_t j = 0; j < bk; j++) row[j] = ob[t * (ostr ? ostr : bk) + j];
            check_row_indices(op, row, bk, nblk, 0, j0, j0 + nblk);
        }
        free(row);
    }
    free(ob), free(bl);
}

static void fuzz_indexer(fz *f) {
    static const int64_t sp_t[] = {-1, 0, 1, (int64_t)INT32_MAX + 1, 3000000};
    static const int64_t sp_s[] = {-1, 0, 1, INT32_MAX, (int64_t)INT32_MAX + 1};
    static const int64_t sp_h[] = {0, -1, 1, 128, 129};
    static const int64_t sp_d[] = {0, -1, 1, 256, 257};
    static const int64_t sp_k[] = {0, -1, 1, 8192, 8193, INT32_MAX};
    static const int dtypes[] = {LTK_DTYPE_E4M3, LTK_DTYPE_BF16, LTK_DTYPE_F32, LTK_DTYPE_E4M3, LTK_DTYPE_F16, 11};
    const char *op = "indexer";
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = fz_dim(f, 0, 4, sp_t, 5);
    a.S = fz_dim(f, 0, 200, sp_s, 5);
    a.H = (int32_t)fz_dim(f, 1, 6, sp_h, 5);
    a.D = (int32_t)fz_dim(f, 1, 20, sp_d, 5);
    a.k = (int32_t)fz_dim(f, 1, 40, sp_k, 6);
    a.dtype = (ltk_dtype)dtypes[fz_pick(f, 4, 6)];
    int64_t hd = (int64_t)a.H * a.D;
    a.q_stride_t = fz_stride(f, hd);
    a.kv_stride_s = fz_stride(f, a.D);
    a.w_stride_t = fz_stride(f, a.H);
    a.out_stride = fz_stride(f, a.k);
    a.flags = fz_bad(f) ? (uint32_t)fz_u8(f) : (uint32_t)(fz_u8(f) % 4);
    size_t es = ltk_dtype_size(a.dtype) ? ltk_dtype_size(a.dtype) : 1;
    ltk_dtype fill = ltk_dtype_size(a.dtype) ? a.dtype : LTK_DTYPE_E4M3;
    int64_t n_q = span(a.T, hd, a.q_stride_t), n_kv = span(a.S, a.D, a.kv_stride_s);
    int64_t n_w = span(a.T, a.H, a.w_stride_t), n_out = span(a.T, a.k, a.out_stride);
    if ((double)a.T * (double)a.S * (double)hd > 4e6) n_kv = -1; /* keep runs short */
    uint8_t ptrs = fz_bad(f) ? fz_u8(f) : (fz_u8(f) & (4 | 32)); /* kv_scale and out_scores are optional */
    void *q = (ptrs & 1) ? NULL : alloc_exact(n_q, es);
    void *kv = (ptrs & 2) ? NULL : alloc_exact(n_kv, es);
    float *kv_scale = (ptrs & 4) ? alloc_exact(a.S >= 0 && a.S <= CAP_ELEMS ? a.S : -1, 4) : NULL;
    float *w = (ptrs & 8) ? NULL : alloc_exact(n_w, 4);
    int32_t *out_idx = (ptrs & 16) ? NULL : alloc_out(n_out, 4);
    float *out_scores = (ptrs & 32) ? NULL : alloc_out(n_out, 4);
    if (q) fill_values(f, q, n_q, fill);
    if (kv) fill_values(f, kv, n_kv, fill);
    if (kv_scale) fill_values(f, kv_scale, a.S, LTK_DTYPE_F32);
    if (w) fill_values(f, w, n_w, LTK_DTYPE_F32);
    int32_t *ks = NULL, *ke = NULL;
    uint8_t rmode = (uint8_t)fz_pick(f, 4, 6);
    if (rmode >= 2 && a.T >= 0 && a.T <= CAP_ELEMS) {
        ks = alloc_exact(a.T, 4), ke = alloc_exact(a.T, 4);
        int64_t s_cap = a.S > 0 && a.S <= CAP_ELEMS ? a.S : 0;
        for (int64_t t = 0; t < a.T; t++) {
            int32_t s = (int32_t)(fz_u8(f) % (s_cap + 1));
            int32_t e = (int32_t)(s + fz_u8(f) % (s_cap + 1 - s));
            if (rmode == 3) s = 0, e = (int32_t)(s_cap - a.T + t + 1 > 0 ? s_cap - a.T + t + 1 : 0); /* causal */
            if (rmode == 5 && fz_u8(f) % 4 == 0) e = (int32_t)fz_u32(f); /* possibly invalid */
            ks[t] = s, ke[t] = e;
        }
        if (rmode == 4 && fz_u8(f) % 2) free(ke), ke = NULL;
    }
    a.q = q, a.kv = kv, a.kv_scale = kv_scale, a.weights = w, a.ks = ks, a.ke = ke;
    a.out_idx = out_idx, a.out_scores = out_scores;

    fz_exec x;
    fz_exec_make(f, &x, a.T);
    ltk_indexer_state *state = NULL;
    uint8_t smode = (uint8_t)fz_pick(f, 3, 4);
    if (smode) {
        static const int32_t sizes[] = {1, 3, 7, 64, 0, -1, (1 << 20) + 1};
        ltk_backend sb = smode == 3 ? LTK_BACKEND_REF : ltk_backend_resolve(x.exec.backend);
        if (ltk_indexer_state_create(sb, sizes[fz_pick(f, 4, 7)], &state) == LTK_OK && fz_u8(f) % 2) {
            int32_t seed_keys[16];
            int32_t count = fz_u8(f) % 17;
            int64_t range = a.S > 0 && a.S < (1 << 20) ? a.S + 8 : 8;
            for (int32_t i = 0; i < count; i++) seed_keys[i] = (int32_t)(fz_u32(f) % (uint32_t)range) - 4;
            if (ltk_indexer_state_set(state, seed_keys, count) != LTK_OK) die(op, "state_set refused valid input");
        }
        a.state = state;
    }
    size_t need = 0;
    ltk_status wst = ltk_indexer_workspace_size(&a, &x.exec, &need);
    void *ws = fz_exec_workspace(&x, wst, need);
    {
        char ex[160];
        describe_exec(ex, sizeof ex, &x.exec);
        snprintf(call_desc, sizeof call_desc,
                 "indexer T=%lld S=%lld H=%d D=%d k=%d dtype=%d strides q=%lld kv=%lld w=%lld out=%lld flags=0x%x "
                 "ranges=%s kv_scale=%s out_scores=%p state=%s%s",
                 (long long)a.T, (long long)a.S, a.H, a.D, a.k, (int)a.dtype, (long long)a.q_stride_t,
                 (long long)a.kv_stride_s, (long long)a.w_stride_t, (long long)a.out_stride, a.flags,
                 ks ? (ke ? "yes" : "ks only") : "no", kv_scale ? "yes" : "no", (void *)out_scores,
                 state ? "yes" : "no", ex);
    }
    ltk_status st = ltk_indexer_topk(&a, &x.exec);
    outcome[2][st != LTK_OK]++;
    if (st != LTK_OK && !ltk_last_error()[0]) die(op, "error without a message");
    int64_t ostride = a.out_stride ? a.out_stride : a.k;
    check_untouched(op, out_idx, a.T, a.k, ostride, n_out, 4);
    check_untouched(op, out_scores, a.T, a.k, ostride, n_out, 4);

    int hb = host_backend(&x.exec);
    if (st == LTK_OK && state) {
        int32_t keys[8], count = -1;
        if (ltk_indexer_state_get(state, keys, 8, &count) != LTK_OK || count < 0) die(op, "state_get failed");
    }
    if (st == LTK_OK && hb >= 0 && x.exec.algo != LTK_ALGO_SCORE_ONLY && a.T > 0) {
        ltk_indexer_args b = a;
        int32_t *idx2 = alloc_out(n_out, 4);
        float *sc2 = out_scores ? alloc_out(n_out, 4) : NULL;
        b.out_idx = idx2, b.out_scores = sc2, b.state = NULL; /* exact: the result cannot depend on the hot set */
        ltk_exec e2 = {0};
        e2.backend = (ltk_backend)hb;
        e2.algo = x.exec.algo == LTK_ALGO_FUSED ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED;
        if (ltk_indexer_topk(&b, &e2) != LTK_OK) die(op, "the other algo failed");
        int64_t *row = malloc(sizeof(int64_t) * (size_t)a.k), *row2 = malloc(sizeof(int64_t) * (size_t)a.k);
        for (int64_t t = 0; t < a.T; t++) {
            int64_t lo = ks ? ks[t] : 0, hi = ke ? ke[t] : a.S, n = hi - lo;
            int64_t base = (a.flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
            for (int32_t j = 0; j < a.k; j++) row[j] = out_idx[t * ostride + j], row2[j] = idx2[t * ostride + j];
            check_row_indices(op, row, a.k, n, base, lo, hi);
            if (n <= a.k && (a.flags & LTK_FLAG_UNSORTED) && !out_scores) {
                for (int32_t j = 0; j < a.k; j++)
                    if (row[j] != (j < n ? j + lo - base : -1)) die(op, "short row not in index order");
            }
            if (!same_set(row, out_scores ? out_scores + t * ostride : NULL, row2, sc2 ? sc2 + t * ostride : NULL,
                          a.k))
                die(op, "fused != materialize");
        }
        free(row), free(row2), free(idx2), free(sc2);
    }
    ltk_indexer_state_free(state);
    free(ws);
    fz_exec_free(&x);
    fuzz_candidates(f, &a, n_out);
    free(q), free(kv), free(kv_scale), free(w), free(ks), free(ke), free(out_idx), free(out_scores);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int once = 0;
    if (!once) {
        /* AUTO must never pick a GPU here: every pointer is host memory. */
        setenv("LTK_BACKEND", "cpu", 1);
        const char *show = getenv("LTK_FUZZ_STATS");
        if (show && *show == '1') atexit(print_outcomes);
        once = 1;
    }
    fz f = {data, size, 0x9e3779b97f4a7c15ull ^ size, 0, 0};
    for (size_t i = 0; i < size && i < 16; i++) f.lcg = f.lcg * 31 + data[i];
    uint8_t op = fz_u8(&f), mode = fz_u8(&f);
    /* Half the inputs all-valid, most others with one invalid choice, a few with anything goes. */
    f.evil = mode < 128 ? 0 : mode < 232 ? 1 + mode % 24 : -1;
    static int only = -2; /* LTK_FUZZ_OP=select|knn|indexer restricts the target to one operation */
    if (only == -2) {
        const char *o = getenv("LTK_FUZZ_OP");
        only = !o ? -1 : !strcmp(o, "select") ? 0 : !strcmp(o, "knn") ? 1 : !strcmp(o, "indexer") ? 2 : -1;
    }
    if (only >= 0) op = (uint8_t)only;
    switch (op % 3) {
    case 0: fuzz_select(&f); break;
    case 1: fuzz_knn(&f); break;
    default: fuzz_indexer(&f); break;
    }
    return 0;
}
