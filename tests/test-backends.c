/* test-backends: every available backend (cpu; cuda when built and a device is present) and every
 * algo (fused, materialize) against the ref oracle, on random and adversarial inputs -- the
 * analogue of ggml's test-backend-ops.
 *
 *  select   scores are given, so the result must equal ref EXACTLY: indices and score bits (NaN
 *           compared as NaN), in sorted order, or as the same set with LTK_FLAG_UNSORTED.
 *  indexer, knn  the backend's fp32 (or tensor-core) scores differ from ref's float64 ones by rounding.
 *           Per row, with ref's k-th score kth and a tolerance tol = rel * (row magnitude):
 *             (a) exactly min(k, n) distinct valid indices, the rest -1 (padding at the tail when sorted)
 *             (b) every returned index has a float64 score >= kth - tol (<= kth + tol for L2)
 *             (c) every ref index that is missing has a score within tol of kth (differences only
 *                 inside the band); when kth is not finite the sets are equal
 *             (d) every returned score within tol of the float64 score (same class when not finite),
 *                 padding -inf (+inf for L2), and sorted output in ORDER on the returned scores
 *             (e) fused and materialize of the same backend are BIT-IDENTICAL (indices and scores)
 *           rel is 1e-4 on the CPU (fp32 accumulation over D <= 256 and H <= 128 terms errs by less
 *           than 3e-5 of the sum of |terms|, which is the row magnitude used here) and 1e-2 on CUDA
 *           (FP8/bf16 tensor-core inputs). Grid inputs (small multiples of 1/4, exact in fp32 and
 *           e4m3/bf16) make every backend exact: there the result must equal ref exactly.
 *  Outputs live in guarded, poisoned blocks: canaries intact, every slot of [0, k) written, the
 *  stride gap [k, out_stride) untouched. The hot-set state is checked after every indexer call,
 *  the stats after every call, and a caller workspace (dirty, guarded) is used on one run per case.
 *
 * Env: LTK_TEST_BACKEND=cpu|cuda|ref restricts the backends under test (ref checks the checker).
 */
#include "harness.h"

#include "decode.h"
#include "litetopk.h"
#include "ltk-tune.h" /* test hooks: internal paths this machine or shape would not take */

#include <pthread.h>

#ifdef LTK_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

enum { POISON = 0x7b };

/* ---- backends under test ------------------------------------------------------------------ */
static ltk_backend g_be[3];
static int g_nbe;

static void init_backends(void) {
    const char *only = getenv("LTK_TEST_BACKEND");
    static const ltk_backend all[] = {LTK_BACKEND_CPU, LTK_BACKEND_CUDA, LTK_BACKEND_REF};
    for (int i = 0; i < 3; i++) {
        ltk_backend b = all[i];
        if (only && *only ? strcmp(only, ltk_backend_name(b)) != 0 : b == LTK_BACKEND_REF) continue;
        if (!ltk_backend_available(b)) {
            printf("backend %s: not available, skipped\n", ltk_backend_name(b));
            continue;
        }
#ifndef LTK_WITH_CUDA
        if (b == LTK_BACKEND_CUDA) {
            printf("backend cuda: available, but this test was built without LTK_WITH_CUDA; skipped\n");
            continue;
        }
#endif
        g_be[g_nbe++] = b;
    }
    printf("backends under test:");
    for (int i = 0; i < g_nbe; i++) printf(" %s", ltk_backend_name(g_be[i]));
    printf("\n");
}

static double rel_tol(ltk_backend be) { return be == LTK_BACKEND_CUDA ? 1e-2 : 1e-4; }

/* Grid inputs are exact in fp32 arithmetic on the host. On CUDA only the tensor-core input types
 * are taken as they are: F32 inputs may be converted (to bf16/FP8/TF32) before the products. */
static int exact_on(ltk_backend be, ltk_dtype dt) { return !(be == LTK_BACKEND_CUDA && dt == LTK_DTYPE_F32); }

/* ---- backend memory: host pointers for host backends, device copies for CUDA -------------- */
typedef struct {
    void *host, *dev;
    size_t bytes;
    int out;
} xbuf;
typedef struct {
    ltk_backend be;
    xbuf b[32];
    int n;
} xmem;

static const void *x_in(xmem *m, const void *h, size_t bytes) {
    if (!h || m->be != LTK_BACKEND_CUDA) return h;
#ifdef LTK_WITH_CUDA
    void *d = NULL;
    if (!CHECK(cudaMalloc(&d, bytes ? bytes : 1) == cudaSuccess, "cudaMalloc(%zu)", bytes)) return NULL;
    CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy H2D");
    m->b[m->n++] = (xbuf){(void *)h, d, bytes, 0};
    return d;
#else
    (void)bytes;
    return NULL;
#endif
}

/* An output (a guarded host block): mirrored on the device with its canaries, copied back by x_sync. */
static void *x_out(xmem *m, void *h) {
    if (!h || m->be != LTK_BACKEND_CUDA) return h;
#ifdef LTK_WITH_CUDA
    size_t bytes = t_guarded_size(h) + 2 * T_GUARD;
    uint8_t *hb = (uint8_t *)h - T_GUARD, *d = NULL;
    if (!CHECK(cudaMalloc((void **)&d, bytes) == cudaSuccess, "cudaMalloc(%zu)", bytes)) return NULL;
    CHECK(cudaMemcpy(d, hb, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy H2D");
    m->b[m->n++] = (xbuf){hb, d, bytes, 1};
    return d + T_GUARD;
#else
    return NULL;
#endif
}

static void x_sync(xmem *m) {
#ifdef LTK_WITH_CUDA
    if (m->be != LTK_BACKEND_CUDA) return;
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize: %s", cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < m->n; i++)
        if (m->b[i].out) CHECK(cudaMemcpy(m->b[i].host, m->b[i].dev, m->b[i].bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "D2H");
#else
    (void)m;
#endif
}

static void x_free(xmem *m) {
#ifdef LTK_WITH_CUDA
    for (int i = 0; i < m->n; i++) cudaFree(m->b[i].dev);
#endif
    m->n = 0;
}

/* ---- guarded outputs ---------------------------------------------------------------------- */
static void *g_alloc_poison(size_t bytes, size_t el) {
    /* shifted by one element now and then: outputs need only be element-aligned, not 64-byte aligned */
    void *p = t_guarded_alloc(bytes ? bytes : 1, rng_below(4) == 0 ? el : 0);
    memset(p, POISON, bytes ? bytes : 1);
    return p;
}

/* 1 if the canaries are intact and every row's stride gap [k, stride) still holds the poison. */
static int out_guards_ok(const char *what, const void *p, size_t el, int64_t rows, int32_t k, int64_t stride) {
    if (!p) return 1;
    if (!CHECK(t_guarded_ok(p), "%s: write outside the output block (canary damaged)", what)) return 0;
    const uint8_t *b = p;
    for (int64_t r = 0; r < rows; r++)
        for (size_t i = (size_t)(r * stride + k) * el; i < (size_t)((r + 1) * stride) * el; i++)
            if (b[i] != POISON)
                return CHECK(0, "%s row %lld: write into the stride gap (slot %lld, k=%d, stride=%lld)", what, (long long)r,
                             (long long)(i / el - (size_t)(r * stride)), k, (long long)stride);
    return 1;
}

/* ---- the ORDER on floats ------------------------------------------------------------------ */
/* 1 if (a, ia) ranks strictly before (b, ib): desc (asc for L2), NaN last, ties by lower index. */
static int ranks_before(float a, int64_t ia, float b, int64_t ib, int asc) {
    int an = isnan(a), bn = isnan(b);
    if (an != bn) return bn;
    if (!an && a != b) return asc ? a < b : a > b;
    return ia < ib;
}
static int dranks_before(double a, int64_t ia, double b, int64_t ib, int asc) {
    int an = isnan(a), bn = isnan(b);
    if (an != bn) return bn;
    if (!an && a != b) return asc ? a < b : a > b;
    return ia < ib;
}

static int same_class(double a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return (double)b == a;
    return 1;
}

/* ---- the per-row check against the float64 scores (indexer, knn) --------------------------- */
typedef struct {
    int64_t n, lo, base; /* valid entries [lo, lo + n) (absolute); output index = absolute - base */
    int32_t k;
    int sorted, asc, short_rule;
    float pad;
    const double *full;    /* float64 score of absolute index lo + i at full[i] */
    const int64_t *ref;    /* ref's top-k, absolute, sorted; min(n, k) entries */
    double tol;            /* absolute score tolerance of this row (0: exact) */
    int exact_set;         /* the set must equal ref's even though scores carry a tolerance */
    int no_float_order;    /* ref ranks its float64 scores: equal floats may come in any index order */
} rowchk;

static uint8_t *g_mark; /* scratch bitmaps of n bytes */
static size_t g_mark_cap;
static uint8_t *marks(int64_t n) {
    if ((size_t)n + 1 > g_mark_cap) {
        free(g_mark);
        g_mark_cap = (size_t)n + 1;
        g_mark = malloc(g_mark_cap * 2);
    }
    memset(g_mark, 0, ((size_t)n + 1) * 2);
    return g_mark;
}

static int check_row(const char *what, int64_t row, const rowchk *r, const int64_t *gi, const float *gs) {
    int32_t k = r->k;
    int64_t n = r->n, m = n < k ? n : k;
    if (r->short_rule) {
        for (int32_t j = 0; j < k; j++) {
            int64_t want = j < n ? r->lo + j - r->base : -1;
            if (!CHECK(gi[j] == want, "%s row %lld slot %d: short row (n=%lld <= k, UNSORTED, no scores) must be in "
                       "index order: got %lld, want %lld", what, (long long)row, j, (long long)n, (long long)gi[j], (long long)want))
                return 0;
        }
        return 1;
    }
    uint8_t *ret = marks(n), *inref = ret + n + 1;
    int64_t valid = 0;
    /* (a) count, range, distinctness, padding */
    for (int32_t j = 0; j < k; j++) {
        if (gi[j] == -1) {
            if (!CHECK(!r->sorted || j >= m, "%s row %lld slot %d: padding before slot %lld (sorted output)", what,
                       (long long)row, j, (long long)m))
                return 0;
            if (gs && !CHECK(t_f32_bits(gs[j]) == t_f32_bits(r->pad), "%s row %lld slot %d: padding score %.9g (0x%08x), want %g",
                             what, (long long)row, j, gs[j], t_f32_bits(gs[j]), r->pad))
                return 0;
            continue;
        }
        int64_t x = gi[j] + r->base - r->lo;
        if (!CHECK(x >= 0 && x < n, "%s row %lld slot %d: index %lld outside the row (n=%lld%s)", what, (long long)row, j,
                   (long long)gi[j], (long long)n, gi[j] == (int64_t)0x7b7b7b7b || gi[j] == 0x7b7b7b7b7b7b7b7bll ? ", slot never written" : ""))
            return 0;
        if (!CHECK(!ret[x], "%s row %lld slot %d: index %lld returned twice", what, (long long)row, j, (long long)gi[j]))
            return 0;
        ret[x] = 1;
        valid++;
    }
    if (!CHECK(valid == m, "%s row %lld: %lld valid indices, want min(n=%lld, k=%d) = %lld", what, (long long)row,
               (long long)valid, (long long)n, k, (long long)m))
        return 0;
    /* (b), (c) the set, against ref's */
    if (n > k) {
        for (int64_t j = 0; j < k; j++) inref[r->ref[j] - r->lo] = 1;
        double kth = r->full[r->ref[k - 1] - r->lo];
        int exact = r->tol == 0.0 || r->exact_set || !isfinite(kth);
        for (int64_t x = 0; x < n; x++) {
            if (ret[x] == inref[x]) continue;
            double v = r->full[x];
            if (exact)
                return CHECK(0, "%s row %lld: index %lld (score %.9g) %s, the set must equal ref's exactly here "
                             "(tol %g, ref k-th %.9g at %lld)", what, (long long)row, (long long)(x + r->lo - r->base),
                             v, ret[x] ? "returned but not in ref's top-k" : "in ref's top-k but not returned", r->tol,
                             kth, (long long)(r->ref[k - 1] - r->base));
            int ok = ret[x] ? (r->asc ? v <= kth + r->tol : v >= kth - r->tol)  /* (b) */
                            : (r->asc ? v >= kth - r->tol : v <= kth + r->tol); /* (c) */
            if (!CHECK(ok && !isnan(v), "%s row %lld: index %lld (float64 score %.9g) %s; ref k-th score %.9g, tol %.3g",
                       what, (long long)row, (long long)(x + r->lo - r->base), v,
                       ret[x] ? "returned but ranks outside the tolerance band" : "missing although it ranks above the band",
                       kth, r->tol))
                return 0;
        }
    }
    /* (d) scores and order */
    if (gs) {
        for (int64_t j = 0; j < m; j++) {
            int64_t slot = j;
            if (!r->sorted) { /* find the j-th valid slot */
                int64_t c = -1;
                for (slot = 0; slot < k; slot++)
                    if (gi[slot] != -1 && ++c == j) break;
            }
            int64_t x = gi[slot] + r->base - r->lo;
            double v = r->full[x];
            int ok = isfinite(v) ? isfinite(gs[slot]) && fabs((double)gs[slot] - v) <= r->tol : same_class(v, gs[slot]);
            if (!CHECK(ok, "%s row %lld slot %lld index %lld: score %.9g, float64 score %.9g (tol %.3g)%s", what,
                       (long long)row, (long long)slot, (long long)gi[slot], gs[slot], v, r->tol,
                       t_f32_bits(gs[slot]) == 0x7b7b7b7bu ? " -- slot never written" : ""))
                return 0;
            if (r->sorted && !r->no_float_order && j + 1 < m &&
                !CHECK(ranks_before(gs[j], gi[j], gs[j + 1], gi[j + 1], r->asc),
                       "%s row %lld: slots %lld, %lld out of order: (%.9g, %lld) then (%.9g, %lld)", what, (long long)row,
                       (long long)j, (long long)j + 1, gs[j], (long long)gi[j], gs[j + 1], (long long)gi[j + 1]))
                return 0;
        }
    }
    /* exact scores: the sorted output is ref's, slot by slot */
    if (r->sorted && (r->tol == 0.0))
        for (int64_t j = 0; j < m; j++)
            if (!CHECK(gi[j] == r->ref[j] - r->base, "%s row %lld slot %lld: index %lld, ref has %lld (exact inputs)", what,
                       (long long)row, (long long)j, (long long)gi[j], (long long)(r->ref[j] - r->base)))
                return 0;
    return 1;
}

/* Two runs of the same backend: identical rows (sorted), or identical (index, score bits) sets. */
static int same_rows(const char *what, int64_t rows, int32_t k, int64_t stride, int sorted, const int64_t *ia,
                     const float *sa, const int64_t *ib, const float *sb) {
    int64_t *x = malloc(sizeof(int64_t) * 2 * (size_t)k);
    uint32_t *y = malloc(sizeof(uint32_t) * 2 * (size_t)k);
    int ok = 1;
    for (int64_t r = 0; r < rows && ok; r++) {
        const int64_t *a = ia + r * stride, *b = ib + r * stride;
        const float *fa = sa ? sa + r * stride : NULL, *fb = sb ? sb + r * stride : NULL;
        if (sorted) {
            for (int32_t j = 0; j < k && ok; j++) {
                ok = CHECK(a[j] == b[j], "%s: row %lld slot %d: index %lld vs %lld", what, (long long)r, j,
                           (long long)a[j], (long long)b[j]);
                if (ok && fa && fb)
                    ok = CHECK(t_f32_bits(fa[j]) == t_f32_bits(fb[j]) || (isnan(fa[j]) && isnan(fb[j])),
                               "%s: row %lld slot %d (index %lld): score 0x%08x (%.9g) vs 0x%08x (%.9g)", what,
                               (long long)r, j, (long long)a[j], t_f32_bits(fa[j]), fa[j], t_f32_bits(fb[j]), fb[j]);
            }
            continue;
        }
        /* unsorted: sort (index, score) pairs of each by index (insertion sort, k is moderate) */
        for (int side = 0; side < 2; side++) {
            const int64_t *src = side ? b : a;
            const float *fs = side ? fb : fa;
            int64_t *xi = x + side * k;
            uint32_t *yi = y + side * k;
            for (int32_t j = 0; j < k; j++) {
                int64_t v = src[j];
                uint32_t s = fs ? (isnan(fs[j]) ? 0x7fc00000u : t_f32_bits(fs[j])) : 0;
                int32_t p = j;
                while (p > 0 && xi[p - 1] > v) xi[p] = xi[p - 1], yi[p] = yi[p - 1], p--;
                xi[p] = v, yi[p] = s;
            }
        }
        for (int32_t j = 0; j < k && ok; j++)
            ok = CHECK(x[j] == x[k + j] && y[j] == y[k + j], "%s: row %lld: unsorted sets differ (%lld/0x%08x vs %lld/0x%08x)",
                       what, (long long)r, (long long)x[j], y[j], (long long)x[k + j], y[k + j]);
    }
    free(x);
    free(y);
    return ok;
}

/* ---- stats -------------------------------------------------------------------------------- */
typedef struct {
    ltk_stats *s;
    int32_t *rc, *rb;
    int64_t rows;
} gstats;

static void gstats_new(gstats *g, int64_t rows) {
    g->rows = rows;
    g->s = g_alloc_poison(sizeof(ltk_stats), 0);
    g->rc = g_alloc_poison(sizeof(int32_t) * (size_t)(rows ? rows : 1), 4);
    g->rb = g_alloc_poison(sizeof(int32_t) * (size_t)(rows ? rows : 1), 4);
    g->s->row_candidates = g->rc;
    g->s->row_bin_entries = g->rb;
}

static int gstats_check(const char *what, const gstats *g, ltk_backend be) {
    const ltk_stats *s = g->s;
    int ok = CHECK(t_guarded_ok(s) && t_guarded_ok(g->rc) && t_guarded_ok(g->rb), "%s: stats canaries damaged", what);
    ok = ok && CHECK(s->rows == g->rows, "%s: stats.rows = %lld, want %lld", what, (long long)s->rows, (long long)g->rows);
    ok = ok && CHECK(s->short_rows >= 0 && s->short_rows <= s->rows && s->candidates >= 0 && s->candidates_max >= 0 &&
                         s->candidates_max <= (s->candidates > 0 ? s->candidates : 0) && s->bin_entries >= 0 &&
                         s->bin_entries_max >= 0 && s->bin_entries_max <= (s->bin_entries > 0 ? s->bin_entries : 0) &&
                         s->compactions >= 0 && s->fallback_rows >= 0 && s->fallback_rows <= s->rows,
                     "%s: inconsistent stats: short_rows %lld candidates %lld (max %lld) bin_entries %lld (max %lld) "
                     "compactions %lld fallback_rows %lld of %lld rows", what, (long long)s->short_rows,
                     (long long)s->candidates, (long long)s->candidates_max, (long long)s->bin_entries,
                     (long long)s->bin_entries_max, (long long)s->compactions, (long long)s->fallback_rows,
                     (long long)s->rows);
    ok = ok && CHECK(s->row_candidates == g->rc && s->row_bin_entries == g->rb, "%s: stats row pointers overwritten", what);
    /* per-row detail: written by backends that count candidates; sums and maxima agree */
    if (ok && be != LTK_BACKEND_REF && s->candidates > 0) {
        int64_t sum = 0, mx = 0, sumb = 0, mxb = 0;
        for (int64_t r = 0; r < g->rows; r++) {
            sum += g->rc[r], sumb += g->rb[r];
            mx = g->rc[r] > mx ? g->rc[r] : mx, mxb = g->rb[r] > mxb ? g->rb[r] : mxb;
        }
        ok = CHECK(sum == s->candidates && mx == s->candidates_max && sumb == s->bin_entries && mxb == s->bin_entries_max,
                   "%s: row_candidates sum %lld max %lld vs candidates %lld max %lld; row_bin_entries sum %lld max %lld "
                   "vs %lld max %lld", what, (long long)sum, (long long)mx, (long long)s->candidates,
                   (long long)s->candidates_max, (long long)sumb, (long long)mxb, (long long)s->bin_entries,
                   (long long)s->bin_entries_max);
    }
    return ok;
}

static void gstats_free(gstats *g) {
    t_guarded_free(g->s);
    t_guarded_free(g->rc);
    t_guarded_free(g->rb);
}

/* ---- values ------------------------------------------------------------------------------- */
/* Stores x, which must be exactly representable in dt (grid values, specials): the harness's
 * encoders then round nothing. NaN is the positive quiet NaN of each format, and inf is NaN in
 * e4m3 (e4m3fn has no infinity; the encoder would saturate it to 448). */
static void put_val(void *p, ltk_dtype dt, int64_t i, float x) {
    switch (dt) {
    case LTK_DTYPE_F32: ((float *)p)[i] = x; break;
    case LTK_DTYPE_BF16: ((uint16_t *)p)[i] = isnan(x) ? 0x7fc0 : t_f32_bf16(x); break;
    case LTK_DTYPE_F16: ((uint16_t *)p)[i] = isnan(x) ? 0x7e00 : t_f32_f16(x); break;
    case LTK_DTYPE_E4M3: ((uint8_t *)p)[i] = isnan(x) || isinf(x) ? 0x7f : t_f32_e4m3(x); break;
    }
    if (!isnan(x) && !(isinf(x) && dt == LTK_DTYPE_E4M3) && dec_val(p, dt, i) != (double)x) {
        fprintf(stderr, "test bug: %.9g is not representable in dtype %d\n", x, (int)dt);
        abort();
    }
}
/* A random value of the dtype's own codes (no rounding step): normal floats for f32; for the
 * 8/16-bit types a random sign and mantissa with an exponent around 1 (e4m3 subnormals now and then). */
static void put_rand(void *p, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: ((float *)p)[i] = (float)rng_normal(); break;
    case LTK_DTYPE_BF16: ((uint16_t *)p)[i] = (uint16_t)((rng_below(2) << 15) | (rng_range(124, 129) << 7) | rng_below(128)); break;
    case LTK_DTYPE_F16: ((uint16_t *)p)[i] = (uint16_t)((rng_below(2) << 15) | (rng_range(12, 17) << 10) | rng_below(1024)); break;
    case LTK_DTYPE_E4M3:
        ((uint8_t *)p)[i] = (uint8_t)((rng_below(2) << 7) | ((rng_below(32) ? rng_range(4, 9) : 0) << 3) | rng_below(8));
        break;
    }
}
static float grid_val(void) { return (float)rng_range(-4, 4) * 0.25f; }
static float grid_w(void) {
    static const float w[] = {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f};
    return w[rng_below(6)];
}
static const char *dt_name(ltk_dtype dt) {
    static const char *n[] = {"f32", "f16", "bf16", "e4m3"};
    return (unsigned)dt < 4 ? n[dt] : "?";
}

/* ================================================================================================
 * indexer
 * ============================================================================================== */
enum { G_RANDOM, G_GRID, G_EQUAL, G_TIES, G_INC, G_DEC, G_NONFINITE, G_NANHEAVY, G_NANINPUT, G_DENORM, G_EDGE, G_PERIODIC,
       G_PLATEAU, G_DISTINCT };
static const char *gen_name[] = {"random", "grid", "all-equal", "ties", "increasing", "decreasing",
                                 "nan/inf", "nan-heavy", "nan-input", "denormal", "bin-edges", "periodic",
                                 "zero-plateau", "distinct"};

/* Integers in [0, 256], exact in every dtype, 0 and 256 frequent: with a score range of 256 the
 * edges of equal-width bins fall exactly on score values, and many entries tie on each of them. */
static float edge_val(ltk_dtype dt) {
    int64_t r = rng_below(10);
    if (r == 0) return 0.0f;
    if (r == 1) return 256.0f;
    if (dt == LTK_DTYPE_E4M3) return r == 2 ? (float)rng_range(1, 8) : ldexpf((float)rng_range(8, 15), (int)rng_range(0, 4));
    return (float)rng_range(0, 256);
}
enum { R_NONE, R_FULL, R_CAUSAL, R_SLIDING, R_MULTI, R_EMPTY, R_RANDOM };
static const char *range_name[] = {"none", "full", "causal", "sliding", "multi-request", "some-empty", "random"};
enum { ST_NONE, ST_COLD, ST_WORST, ST_JUNK, ST_CARRY, ST_BEST };
static const char *state_name[] = {"none", "cold", "worst-keys", "junk", "carried", "best-keys"};

typedef struct {
    int64_t T, S;
    int32_t H, D, k;
    ltk_dtype dt;
    uint32_t flags;
    int gen, ranges, strided, scale, state, threads;
    int32_t hotcap; /* state capacity (sample_size); 0: 3k */
    /* G_PLATEAU: keys scoring > 0 (the rest score exactly 0 after the ReLU); G_DISTINCT: distinct keys */
    int64_t m;
    /* magnitudes: kv_scale times 10^scale_exp (with .scale), weights times 10^w_exp */
    int scale_exp, w_exp;
} icase;

typedef struct {
    icase c;
    size_t el;
    int64_t qs, kvs, ws, os;
    void *q, *kv;
    float *w, *scale;
    int32_t *ks, *ke;
    double *full, *mag; /* [T * S], [T] */
    int exact, exact_set;
    int64_t *ref;       /* [T * k] absolute */
    int32_t *hot;
    int32_t nhot, cap;
} iprob;

static int64_t row_lo(const iprob *p, int64_t t) { return p->c.ranges ? p->ks[t] : 0; }
static int64_t row_hi(const iprob *p, int64_t t) { return p->c.ranges ? p->ke[t] : p->c.S; }

static void make_ranges(iprob *p) {
    const icase *c = &p->c;
    int64_t T = c->T, S = c->S;
    for (int64_t t = 0; t < T; t++) p->ks[t] = 0, p->ke[t] = (int32_t)S;
    switch (c->ranges) {
    case R_CAUSAL:
    case R_SLIDING:
        for (int64_t t = 0; t < T; t++) {
            int64_t ctx = S - T > 0 ? S - T : 0;
            p->ke[t] = (int32_t)(ctx + t + 1 < S ? ctx + t + 1 : S);
            if (c->ranges == R_SLIDING) p->ks[t] = (int32_t)(p->ke[t] > c->k + 37 ? p->ke[t] - c->k - 37 : 0);
        }
        break;
    case R_MULTI: { /* 2 or 3 requests packed along S, each causal inside its own segment */
        int64_t nreq = T >= 3 ? 3 : T, off = 0;
        for (int64_t r = 0, t = 0; r < nreq; r++) {
            int64_t rows = r == nreq - 1 ? T - t : T / nreq, len = r == nreq - 1 ? S - off : S / nreq;
            for (int64_t j = 0; j < rows; j++, t++) {
                int64_t ctx = len - rows > 0 ? len - rows : 0;
                p->ks[t] = (int32_t)off;
                p->ke[t] = (int32_t)(off + (ctx + j + 1 < len ? ctx + j + 1 : len));
            }
            off += len;
        }
        break;
    }
    case R_EMPTY:
        for (int64_t t = 0; t < T; t++)
            if (t % 2 == 0) {
                int64_t a = t % 4 == 0 ? 0 : (t % 3 == 0 ? S : rng_range(0, S));
                p->ks[t] = p->ke[t] = (int32_t)a;
            }
        break;
    case R_RANDOM:
        for (int64_t t = 0; t < T; t++) {
            int64_t a = rng_range(0, S), b = rng_range(0, S);
            p->ks[t] = (int32_t)(a < b ? a : b), p->ke[t] = (int32_t)(a < b ? b : a);
        }
        break;
    }
}

static const double *g_sort_full;
/* qsort: worst-ranked keys first (reverse ORDER). */
static int worst_first(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return dranks_before(g_sort_full[a], a, g_sort_full[b], b, 0) ? 1 : -1;
}

/* 0: the case does not apply to this backend (reason printed). */
static int iprob_make(iprob *p, const icase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    if (c->gen == G_INC || c->gen == G_DEC || c->gen == G_NONFINITE || c->gen == G_NANHEAVY || c->gen == G_PERIODIC)
        p->c.scale = 1;
    int64_t T = c->T, S = c->S, H = c->H, D = c->D;
    p->el = ltk_dtype_size(c->dt);
    p->qs = H * D + (c->strided ? 5 : 0);
    p->kvs = D + (c->strided ? 3 : 0);
    p->ws = H + (c->strided ? 2 : 0);
    p->os = c->k + (c->strided ? 3 : 0);
    p->q = malloc(p->el * (size_t)(T * p->qs + 1));
    p->kv = malloc(p->el * (size_t)(S * p->kvs + 1));
    p->w = malloc(sizeof(float) * (size_t)(T * p->ws + 1));
    p->scale = malloc(sizeof(float) * (size_t)(S + 1));
    p->ks = malloc(sizeof(int32_t) * (size_t)(T + 1));
    p->ke = malloc(sizeof(int32_t) * (size_t)(T + 1));
    p->full = malloc(sizeof(double) * (size_t)(T * S + 1));
    p->mag = malloc(sizeof(double) * (size_t)(T + 1));
    p->ref = malloc(sizeof(int64_t) * (size_t)(T * c->k));
    int g = c->gen;
    int grid = g != G_RANDOM && g != G_DENORM;
    p->exact = grid || g == G_DENORM;
    p->exact_set = g == G_INC || g == G_DEC;
    if (g == G_INC || g == G_DEC) p->exact = 0;
    if (c->scale_exp || c->w_exp) p->exact = 0; /* powers of ten: the scores round (checked to rel_tol of the row) */
    /* stride padding: NaN everywhere, so reading it shows */
    for (int64_t i = 0; i < T * p->qs; i++) put_val(p->q, c->dt, i, NAN);
    for (int64_t i = 0; i < S * p->kvs; i++) put_val(p->kv, c->dt, i, NAN);
    for (int64_t i = 0; i < T * p->ws; i++) p->w[i] = NAN;
    /* queries and weights */
    float *u = malloc(sizeof(float) * (size_t)D); /* G_PLATEAU: every head's query; keys are c u or -u */
    for (int64_t d = 0; d < D; d++) u[d] = d == 0 ? 1.0f : grid_val();
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < H * D; i++) {
            int64_t at = t * p->qs + i;
            if (g == G_PLATEAU) put_val(p->q, c->dt, at, u[i % D]);
            else if (g == G_RANDOM) put_rand(p->q, c->dt, at);
            else if (g == G_DENORM) put_val(p->q, c->dt, at, (float)rng_range(-3, 3));
            else if (g == G_INC || g == G_DEC || g == G_PERIODIC) put_val(p->q, c->dt, at, (float)rng_range(1, 4) * 0.25f);
            else if (g == G_EDGE) put_val(p->q, c->dt, at, i == 0 ? 1.0f : 0.0f); /* score = relu(kv[s][0]) */
            else put_val(p->q, c->dt, at, grid_val());
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float w = g == G_RANDOM ? (float)rng_normal() : grid_w();
            if (g == G_INC || g == G_DEC || g == G_DENORM || g == G_PERIODIC) w = fabsf(w) * (rng_below(2) ? 1.0f : 0.5f);
            if (g == G_DENORM && rng_below(2)) w = -w;
            if (g == G_TIES && t == 0 && T > 1) w = 0.0f; /* row 0: every score 0 */
            if (g == G_EDGE) w = h == 0 ? 1.0f : 0.0f;
            if (g == G_PLATEAU) w = fabsf(w); /* a positive dot scores > 0 */
            if (c->w_exp) w *= powf(10.0f, (float)c->w_exp);
            p->w[t * p->ws + h] = w;
        }
    if (g == G_NANINPUT && T > 1) put_val(p->q, c->dt, (T - 1) * p->qs, NAN); /* last row: all NaN */
    /* keys and scales */
    enum { NG = 4 };
    float gscale[NG] = {1.0f, 1.0f, 0.5f, 0.0f};
    /* G_PLATEAU: exactly min(m, S) positive keys, at random positions (a partial shuffle) */
    uint8_t *pos = NULL;
    if (g == G_PLATEAU) {
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)(S + 1));
        pos = calloc((size_t)S + 1, 1);
        for (int64_t i = 0; i < S; i++) perm[i] = i;
        for (int64_t i = 0; i < c->m && i < S; i++) {
            int64_t j = i + rng_below(S - i), x = perm[i];
            perm[i] = perm[j], perm[j] = x;
            pos[perm[i]] = 1;
        }
        free(perm);
    }
    for (int64_t s = 0; s < S; s++) {
        int64_t at = s * p->kvs;
        int64_t src = -1; /* copy of an earlier key */
        if (g == G_EQUAL || g == G_INC || g == G_DEC) src = s > 0 ? 0 : -1;
        if (g == G_TIES) src = s >= NG ? rng_below(NG) : -1;
        if (g == G_DISTINCT) src = s >= c->m ? rng_below(c->m) : -1;
        /* G_PLATEAU: m keys at random positions are c u (c in 1..4: four positive scores), the rest -u */
        const float pc = g == G_PLATEAU ? (pos[s] ? (float)rng_range(1, 4) : -1.0f) : 0.0f;
        for (int64_t d = 0; d < D; d++) {
            if (src >= 0) {
                memcpy((char *)p->kv + p->el * (size_t)(at + d), (char *)p->kv + p->el * (size_t)(src * p->kvs + d), p->el);
                continue;
            }
            if (g == G_PLATEAU) put_val(p->kv, c->dt, at + d, pc * u[d]);
            else if (g == G_RANDOM) put_rand(p->kv, c->dt, at + d);
            else if (g == G_DENORM) put_val(p->kv, c->dt, at + d, ldexpf((float)rng_range(-7, 7), -140));
            else if (g == G_INC || g == G_DEC || g == G_PERIODIC) put_val(p->kv, c->dt, at + d, (float)rng_range(1, 4) * 0.25f);
            else if (g == G_EDGE) put_val(p->kv, c->dt, at + d, d == 0 ? edge_val(c->dt) : grid_val());
            else put_val(p->kv, c->dt, at + d, grid_val());
            if (g == G_NANINPUT && rng_below(33) == 0) put_val(p->kv, c->dt, at + d, NAN);
            if (g == G_NANINPUT && c->dt != LTK_DTYPE_E4M3 && rng_below(50) == 0)
                put_val(p->kv, c->dt, at + d, rng_below(2) ? INFINITY : -INFINITY);
        }
        float sc;
        switch (g) {
        case G_RANDOM: sc = (float)(0.5 + rng_unit()); break;
        case G_EQUAL: sc = 1.0f; break;
        case G_TIES: sc = gscale[src >= 0 ? src : s]; break;
        case G_INC: sc = 1.0f + (float)s / (float)S; break;
        case G_DEC: sc = 2.0f - (float)s / (float)S; break;
        case G_DENORM: sc = rng_below(2) ? 1.0f : 2.0f; break;
        case G_NONFINITE: {
            int64_t r = rng_below(100);
            sc = r < 10 ? NAN : r < 18 ? INFINITY : r < 26 ? -INFINITY : r < 31 ? 0.0f : ldexpf(1.0f, (int)rng_range(-2, 1));
            break;
        }
        case G_NANHEAVY: sc = rng_below(20) ? NAN : 1.0f; break;
        case G_EDGE: sc = 1.0f; break;
        case G_PERIODIC: sc = s % 4 == 0 ? 8.0f : 1.0f; break; /* every 4th key on top */
        case G_PLATEAU: case G_DISTINCT: sc = 1.0f; break;
        default: sc = ldexpf(1.0f, (int)rng_range(-2, 1)); break;
        }
        if (c->scale_exp) sc *= powf(10.0f, (float)c->scale_exp);
        p->scale[s] = sc;
    }
    free(u);
    free(pos);
    make_ranges(p);
    /* float64 scores and row magnitudes: sum of |terms| bounds the rounding of any fp32 order */
    double *qd = malloc(sizeof(double) * (size_t)(H * D)), *kd = malloc(sizeof(double) * (size_t)(S * D + 1));
    for (int64_t s = 0; s < S; s++)
        for (int64_t d = 0; d < D; d++) kd[s * D + d] = dec_val(p->kv, c->dt, s * p->kvs + d);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < H * D; i++) qd[i] = dec_val(p->q, c->dt, t * p->qs + i);
        double mag = 0.0;
        for (int64_t s = row_lo(p, t); s < row_hi(p, t); s++) {
            double acc = 0.0, absacc = 0.0;
            for (int64_t h = 0; h < H; h++) {
                double dot = 0.0, ad = 0.0;
                for (int64_t d = 0; d < D; d++) dot += qd[h * D + d] * kd[s * D + d], ad += fabs(qd[h * D + d] * kd[s * D + d]);
                double w = p->w[t * p->ws + h];
                acc += w * (isnan(dot) ? dot : dot > 0.0 ? dot : 0.0);
                absacc += fabs(w) * ad;
            }
            double sc = p->c.scale ? p->scale[s] : 1.0;
            p->full[t * S + s] = acc * sc;
            if (isfinite(absacc * sc)) mag = fmax(mag, absacc * fabs(sc));
        }
        p->mag[t] = mag;
    }
    free(qd);
    free(kd);
    /* the hot set the state starts from */
    p->cap = c->hotcap ? c->hotcap : 3 * c->k < (1 << 20) ? 3 * c->k : (1 << 20);
    p->hot = malloc(sizeof(int32_t) * (size_t)(p->cap * 2 + 16));
    if (c->state == ST_WORST || c->state == ST_JUNK || c->state == ST_BEST) {
        /* row 0's worst keys (lowest float64 scores; NaN counts as worst) */
        int64_t lo = row_lo(p, 0), hi = row_hi(p, 0);
        int64_t n = hi - lo;
        int32_t *all = malloc(sizeof(int32_t) * (size_t)(n + 1));
        for (int64_t i = 0; i < n; i++) all[i] = (int32_t)(lo + i);
        g_sort_full = p->full; /* row 0 of full is indexed by absolute key */
        qsort(all, (size_t)n, sizeof *all, worst_first);
        if (c->state == ST_BEST) /* row 0's best keys, best first: the sample's k-th is the row's k-th */
            for (int64_t i = 0; i < n / 2; i++) {
                int32_t tmp = all[i];
                all[i] = all[n - 1 - i], all[n - 1 - i] = tmp;
            }
        p->nhot = 0;
        for (int64_t i = 0; i < n && p->nhot < p->cap; i++) p->hot[p->nhot++] = all[i];
        /* best keys plus the worst one: the sample then spans the row's whole range of values */
        if (c->state == ST_BEST && p->nhot > c->k && n > 0) p->hot[p->nhot - 1] = all[n - 1];
        free(all);
        if (c->state == ST_JUNK) { /* out of range, duplicates, negatives, keys outside rows' ranges */
            int32_t junk[] = {-1, (int32_t)S, (int32_t)S + 100, INT32_MAX, -7, INT32_MIN};
            int32_t keep = p->nhot;
            for (int32_t i = 0; i < keep && p->nhot < p->cap * 2; i += 2) p->hot[p->nhot++] = p->hot[i];
            for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) p->hot[p->nhot++] = junk[i];
            for (int64_t i = 0; i < 6 && p->nhot < p->cap * 2 + 16; i++) {
                int64_t s = rng_below(S > 0 ? S : 1);
                p->hot[p->nhot++] = (int32_t)s;
            }
            /* shuffle the junk in */
            for (int32_t i = p->nhot - 1; i > 0; i--) {
                int32_t j = (int32_t)rng_below(i + 1), tmp = p->hot[i];
                p->hot[i] = p->hot[j], p->hot[j] = tmp;
            }
        }
    }
    return 1;
}

static void iprob_free(iprob *p) {
    free(p->q), free(p->kv), free(p->w), free(p->scale), free(p->ks), free(p->ke), free(p->full), free(p->mag);
    free(p->ref), free(p->hot);
}

typedef struct {
    int32_t *idx;
    float *sc;
    int64_t *gi;
    gstats st;
} irun;

static void irun_free(irun *o) {
    t_guarded_free(o->idx);
    t_guarded_free(o->sc);
    free(o->gi);
    gstats_free(&o->st);
    memset(o, 0, sizeof *o);
}

/* One call. Outputs in `o` (guarded, poisoned); checks status, canaries, stats. */
static int run_indexer(const iprob *p, ltk_backend be, ltk_algo algo, int with_scores, int threads, int use_ws,
                       ltk_indexer_state *state, uint32_t flags, irun *o, const char *what) {
    const icase *c = &p->c;
    memset(o, 0, sizeof *o);
    o->idx = g_alloc_poison(sizeof(int32_t) * (size_t)(c->T * p->os), sizeof(int32_t));
    o->sc = with_scores ? g_alloc_poison(sizeof(float) * (size_t)(c->T * p->os), sizeof(float)) : NULL;
    gstats_new(&o->st, c->T);
    xmem m = {.be = be};
    ltk_indexer_args a = {.T = c->T, .S = c->S, .H = c->H, .D = c->D, .k = c->k, .dtype = c->dt,
                          .q = x_in(&m, p->q, p->el * (size_t)(c->T * p->qs)), .q_stride_t = c->strided ? p->qs : 0,
                          .kv = x_in(&m, p->kv, p->el * (size_t)(c->S * p->kvs)), .kv_stride_s = c->strided ? p->kvs : 0,
                          .kv_scale = p->c.scale ? x_in(&m, p->scale, sizeof(float) * (size_t)c->S) : NULL,
                          .weights = x_in(&m, p->w, sizeof(float) * (size_t)(c->T * p->ws)),
                          .w_stride_t = c->strided ? p->ws : 0,
                          .ks = c->ranges ? x_in(&m, p->ks, sizeof(int32_t) * (size_t)c->T) : NULL,
                          .ke = c->ranges ? x_in(&m, p->ke, sizeof(int32_t) * (size_t)c->T) : NULL,
                          .out_idx = x_out(&m, o->idx), .out_scores = x_out(&m, o->sc),
                          .out_stride = c->strided ? p->os : 0, .flags = flags, .state = state};
    ltk_exec e = {.backend = be, .algo = algo, .num_threads = threads, .stats = o->st.s};
    uint8_t *ws = NULL;
    int ok = 1;
    if (use_ws) {
        size_t need = 0;
        ltk_status s = ltk_indexer_workspace_size(&a, &e, &need);
        ok = CHECK(s == LTK_OK, "%s: workspace size: %s", what, ltk_last_error());
        ws = t_guarded_alloc(need ? need : 1, 0);
        for (size_t i = 0; i < need; i++) ws[i] = (uint8_t)rng_u32(); /* dirty */
        e.workspace = x_out(&m, ws);
        e.workspace_bytes = need;
    }
    if (ok && state && c->state != ST_NONE)
        ok = CHECK(ltk_indexer_state_set(state, p->hot, p->nhot) == LTK_OK, "state_set: %s", ltk_last_error());
    if (ok) {
        ltk_status s = ltk_indexer_topk(&a, &e);
        ok = CHECK(s == LTK_OK, "%s: %s (%s)", what, ltk_status_str(s), ltk_last_error());
    }
    x_sync(&m);
    x_free(&m);
    if (ws) ok = ok && CHECK(t_guarded_ok(ws), "%s: write outside the caller's workspace", what);
    t_guarded_free(ws);
    ok = ok && out_guards_ok(what, o->idx, sizeof(int32_t), c->T, c->k, p->os);
    ok = ok && out_guards_ok(what, o->sc, sizeof(float), c->T, c->k, p->os);
    gstats_check(what, &o->st, be); /* reported, but the results are still checked */
    o->gi = malloc(sizeof(int64_t) * (size_t)(c->T * p->os));
    for (int64_t i = 0; i < c->T * p->os; i++) o->gi[i] = o->idx[i];
    return ok;
}

static int check_indexer_rows(const iprob *p, ltk_backend be, const irun *o, uint32_t flags, const char *what) {
    const icase *c = &p->c;
    for (int64_t t = 0; t < c->T; t++) {
        int64_t lo = row_lo(p, t), n = row_hi(p, t) - lo;
        rowchk r = {.n = n, .lo = lo, .base = (flags & LTK_FLAG_ABSOLUTE) ? 0 : lo, .k = c->k,
                    .sorted = !(flags & LTK_FLAG_UNSORTED), .asc = 0,
                    .short_rule = (flags & LTK_FLAG_UNSORTED) && !o->sc && n <= c->k, .pad = -INFINITY,
                    .full = p->full + t * c->S + lo, .ref = p->ref + t * c->k,
                    .tol = p->exact && exact_on(be, c->dt) ? 0.0 : rel_tol(be) * p->mag[t], .exact_set = p->exact_set,
                    .no_float_order = be == LTK_BACKEND_REF};
        if (!check_row(what, t, &r, o->gi + t * p->os, o->sc ? o->sc + t * p->os : NULL)) return 0;
    }
    return 1;
}

/* The hot set after a call: the cap keys voted most often by that call's rows (votes desc, then
 * larger index first), only valid keys, no duplicates. */
static int check_state(const iprob *p, ltk_indexer_state *st, const irun *o, uint32_t flags, const char *what) {
    const icase *c = &p->c;
    int32_t *votes = calloc((size_t)c->S + 1, sizeof(int32_t));
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(p->cap + 1)), *want = malloc(sizeof(int32_t) * (size_t)(c->S + 1));
    for (int64_t t = 0; t < c->T; t++)
        for (int32_t j = 0; j < c->k; j++) {
            int64_t x = o->gi[t * p->os + j];
            if (x >= 0) votes[x + ((flags & LTK_FLAG_ABSOLUTE) ? 0 : row_lo(p, t))]++;
        }
    int32_t nw = 0;
    for (int64_t s = c->S - 1; s >= 0; s--)
        if (votes[s] > 0) want[nw++] = (int32_t)s; /* larger index first, then a stable sort by votes */
    for (int32_t i = 1; i < nw; i++) {
        int32_t x = want[i], j = i - 1;
        while (j >= 0 && votes[want[j]] < votes[x]) want[j + 1] = want[j], j--;
        want[j + 1] = x;
    }
    if (nw > p->cap) nw = p->cap;
    int32_t cnt = -1;
    ltk_status s = ltk_indexer_state_get(st, got, p->cap, &cnt);
    int ok = CHECK(s == LTK_OK, "%s: state_get: %s", what, ltk_last_error()) &&
             CHECK(cnt == nw, "%s: hot set holds %d keys, want %d (capacity %d)", what, cnt, nw, p->cap);
    for (int32_t i = 0; i < nw && ok; i++)
        ok = CHECK(got[i] == want[i], "%s: hot set slot %d: key %d (%d votes), want key %d (%d votes)", what, i, got[i],
                   got[i] >= 0 && got[i] < c->S ? votes[got[i]] : -1, want[i], votes[want[i]]);
    free(votes), free(got), free(want);
    return ok;
}

static void indexer_case(const icase *c) {
    iprob p;
    iprob_make(&p, c);
    char desc[400];
    snprintf(desc, sizeof desc,
             "indexer T=%lld S=%lld H=%d D=%d k=%d %s gen=%s ranges=%s flags=%s%s strided=%d scale=%d state=%s m=%lld "
             "scale 1e%d weights 1e%d",
             (long long)c->T, (long long)c->S, c->H, c->D, c->k, dt_name(c->dt), gen_name[c->gen],
             range_name[c->ranges], (c->flags & LTK_FLAG_UNSORTED) ? "U" : "-", (c->flags & LTK_FLAG_ABSOLUTE) ? "A" : "-",
             c->strided, p.c.scale, state_name[c->state], (long long)c->m, c->scale_exp, c->w_exp);
    test_ctx("%s", desc);
    /* ref: sorted, with scores; its indices made absolute */
    irun r = {0};
    int ok = run_indexer(&p, LTK_BACKEND_REF, LTK_ALGO_FUSED, 1, 0, 0, NULL, c->flags & ~LTK_FLAG_UNSORTED, &r, "ref");
    for (int64_t t = 0; t < c->T && ok; t++)
        for (int32_t j = 0; j < c->k; j++) {
            int64_t x = r.gi[t * p.os + j];
            p.ref[t * c->k + j] = x < 0 ? -1 : x + ((c->flags & LTK_FLAG_ABSOLUTE) ? 0 : row_lo(&p, t));
        }
    /* the oracle agrees with the float64 scores computed here (a test-infrastructure check) */
    ok = ok && check_indexer_rows(&p, LTK_BACKEND_REF, &r, c->flags & ~LTK_FLAG_UNSORTED, "ref vs float64");
    irun_free(&r);
    for (int b = 0; b < g_nbe && ok; b++) {
        ltk_backend be = g_be[b];
        if (c->gen == G_DENORM && be == LTK_BACKEND_CUDA) continue; /* tensor-core inputs flush these */
        char what[64];
        ltk_indexer_state *st = NULL;
        if (c->state != ST_NONE) {
            ok = CHECK(ltk_indexer_state_create(be, p.cap, &st) == LTK_OK, "state_create: %s", ltk_last_error());
            if (!ok) break;
        }
        if (c->state == ST_CARRY) {
            /* the previous chunk: other queries (weights negated), its hot set carried into this one */
            iprob prev = p;
            prev.w = malloc(sizeof(float) * (size_t)(c->T * p.ws + 1));
            for (int64_t i = 0; i < c->T * p.ws; i++) prev.w[i] = -p.w[i];
            prev.c.state = ST_COLD;
            irun o = {0};
            snprintf(what, sizeof what, "%s previous chunk", ltk_backend_name(be));
            ok = run_indexer(&prev, be, LTK_ALGO_FUSED, 0, 0, 0, st, c->flags, &o, what);
            irun_free(&o);
            free(prev.w);
            p.nhot = 0;
            ok = ok && CHECK(ltk_indexer_state_get(st, p.hot, p.cap, &p.nhot) == LTK_OK, "state_get");
            p.c.state = ST_WORST; /* from here on: set p.hot before each call */
        }
        irun f = {0}, mt = {0}, fn = {0};
        snprintf(what, sizeof what, "%s fused", ltk_backend_name(be));
        ok = ok && run_indexer(&p, be, LTK_ALGO_FUSED, 1, 0, 1, st, c->flags, &f, what);
        ok = ok && check_indexer_rows(&p, be, &f, c->flags, what);
        if (ok && st) ok = check_state(&p, st, &f, c->flags, what);
        snprintf(what, sizeof what, "%s materialize", ltk_backend_name(be));
        ok = ok && run_indexer(&p, be, LTK_ALGO_MATERIALIZE, 1, 0, 0, st, c->flags, &mt, what);
        ok = ok && check_indexer_rows(&p, be, &mt, c->flags, what);
        if (ok && st) ok = check_state(&p, st, &mt, c->flags, what);
        snprintf(what, sizeof what, "%s fused vs materialize", ltk_backend_name(be));
        ok = ok && same_rows(what, c->T, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.gi, f.sc, mt.gi, mt.sc);
        /* without out_scores: the same indices (short rows in index order when UNSORTED) */
        snprintf(what, sizeof what, "%s fused, out_scores NULL", ltk_backend_name(be));
        ok = ok && run_indexer(&p, be, LTK_ALGO_FUSED, 0, 0, 0, st, c->flags, &fn, what);
        ok = ok && check_indexer_rows(&p, be, &fn, c->flags, what);
        if (ok && st) ok = check_state(&p, st, &fn, c->flags, what);
        for (int64_t t = 0; t < c->T && ok; t++) {
            int64_t n = row_hi(&p, t) - row_lo(&p, t);
            if ((c->flags & LTK_FLAG_UNSORTED) && n <= c->k) continue; /* index order, checked above */
            ok = same_rows(what, 1, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.gi + t * p.os, NULL,
                           fn.gi + t * p.os, NULL);
        }
        if (ok && c->threads && be == LTK_BACKEND_CPU) {
            /* thread count does not change a bit */
            static const int32_t nt[] = {1, 3};
            for (int i = 0; i < 2 && ok; i++) {
                irun th = {0};
                snprintf(what, sizeof what, "%s fused, num_threads=%d", ltk_backend_name(be), nt[i]);
                ok = run_indexer(&p, be, LTK_ALGO_FUSED, 1, nt[i], 0, st, c->flags, &th, what);
                ok = ok && same_rows(what, c->T, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.gi, f.sc, th.gi, th.sc);
                irun_free(&th);
            }
        }
        irun_free(&f), irun_free(&mt), irun_free(&fn);
        ltk_indexer_state_free(st);
        if (c->state == ST_CARRY) p.c.state = ST_CARRY;
    }
    iprob_free(&p);
}

#define IC(...) ((icase){__VA_ARGS__})
static void run_icases(const icase *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        indexer_case(&cs[i]); /* every case runs: a failure in one does not hide another */
    }
}

/* ================================================================================================
 * kNN
 * ============================================================================================== */
enum { K_RANDOM, K_GRID, K_ZERO, K_EQUAL, K_NAN, K_INF, K_DENORM, K_EDGE, K_INC, K_DEC, K_RULER, K_SCALES, K_LATE, K_TINY };
static const char *kgen_name[] = {"random", "grid+duplicates", "zero-vectors", "all-equal", "nan", "inf", "denormal",
                                  "bin-edges", "increasing", "decreasing", "ruler", "scales", "late-ties", "tiny"};

/* x with its low 16 bits cleared: exact in F32 and BF16, and so is x 2^e (no under/overflow) */
static float bf16_cut(float x) { return t_bits_f32(t_f32_bits(x) & 0xffff0000u); }

/* Trailing zero bits of i (i = 0 counts as 20): the ruler sequence 0 1 0 2 0 1 0 3 ... */
static float ruler(int64_t i) {
    int t = 0;
    if (i == 0) return 20.0f;
    while (!(i & 1)) i >>= 1, t++;
    return (float)t;
}
static const char *metric_name[] = {"ip", "l2", "cos"};

typedef struct {
    int64_t B, N;
    int32_t D, k;
    ltk_dtype dt;
    ltk_metric metric;
    uint32_t flags;
    int gen, strided, threads;
} kcase;

typedef struct {
    kcase c;
    size_t el;
    int64_t qs, bs, os;
    void *q, *base;
    double *full, *mag;
    int64_t *ref;
    int exact;
} kprob;

static void kprob_make(kprob *p, const kcase *c) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    int64_t B = c->B, N = c->N, D = c->D;
    int g = c->gen;
    p->el = ltk_dtype_size(c->dt);
    p->qs = D + (c->strided ? 3 : 0);
    p->bs = D + (c->strided ? 1 : 0);
    p->os = c->k + (c->strided ? 2 : 0);
    p->q = malloc(p->el * (size_t)(B * p->qs + 1));
    p->base = malloc(p->el * (size_t)(N * p->bs + 1));
    p->full = malloc(sizeof(double) * (size_t)(B * N + 1));
    p->mag = malloc(sizeof(double) * (size_t)(B + 1));
    p->ref = malloc(sizeof(int64_t) * (size_t)(B * c->k));
    p->exact = (g != K_RANDOM && g != K_SCALES && g != K_TINY && c->metric != LTK_METRIC_COS) || g == K_DENORM;
    for (int64_t i = 0; i < B * p->qs; i++) put_val(p->q, c->dt, i, NAN);
    for (int64_t i = 0; i < N * p->bs; i++) put_val(p->base, c->dt, i, NAN);
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) {
            int64_t at = b * p->qs + d;
            if (g == K_RANDOM) put_rand(p->q, c->dt, at);
            else if (g == K_SCALES || g == K_TINY) put_val(p->q, c->dt, at, bf16_cut((float)rng_normal()));
            else if (g == K_DENORM) put_val(p->q, c->dt, at, (float)rng_range(-3, 3));
            else if (g == K_EDGE || g == K_LATE) put_val(p->q, c->dt, at, d == 0 ? 1.0f : 0.0f); /* IP = base[i][0] */
            else if (g == K_INC || g == K_DEC) put_val(p->q, c->dt, at, c->metric == LTK_METRIC_L2 ? 0.0f : d == 0 ? 1.0f : 0.0f);
            else if (g == K_RULER) /* even rows rank by ruler(i) (IP: base[i][0]; L2: distance 20 - ruler), odd ones reversed */
                put_val(p->q, c->dt, at, d ? 0.0f : c->metric == LTK_METRIC_L2 ? (b % 2 ? 64.0f : 0.0f) : (b % 2 ? -1.0f : 1.0f));
            else put_val(p->q, c->dt, at, grid_val());
            if (g == K_ZERO && b == 0) put_val(p->q, c->dt, at, 0.0f);
        }
    for (int64_t i = 0; i < N; i++) {
        int64_t src = -1;
        int sh = g == K_SCALES ? (int)rng_range(-60, 55) : 0; /* vector i times 2^sh (F32/BF16 range) */
        if (g == K_EQUAL && i > 0) src = 0;
        if ((g == K_GRID || g == K_ZERO || g == K_NAN) && i > 0 && rng_below(4) == 0) src = rng_below(i);
        for (int64_t d = 0; d < D; d++) {
            int64_t at = i * p->bs + d;
            if (src >= 0) memcpy((char *)p->base + p->el * (size_t)at, (char *)p->base + p->el * (size_t)(src * p->bs + d), p->el);
            else if (g == K_RANDOM) put_rand(p->base, c->dt, at);
            else if (g == K_DENORM) put_val(p->base, c->dt, at, ldexpf((float)rng_range(-7, 7), -140));
            else if (g == K_EDGE) put_val(p->base, c->dt, at, d == 0 ? edge_val(c->dt) : grid_val());
            else if (g == K_INC || g == K_DEC) /* base[i][0] = i (or N - i), exact in f32: IP and L2 monotone in i */
                put_val(p->base, c->dt, at, d == 0 ? (float)(g == K_INC ? i : c->N - i) : 0.0f);
            else if (g == K_RULER)
                put_val(p->base, c->dt, at, d ? 0.0f : c->metric == LTK_METRIC_L2 ? 20.0f - ruler(i) : ruler(i));
            else if (g == K_SCALES) put_val(p->base, c->dt, at, ldexpf(bf16_cut((float)rng_normal()), sh));
            else if (g == K_TINY) /* query 0's direction, 2^-52 .. 2^-60: max |x_i| below the int8 screen's 2^-50 */
                put_val(p->base, c->dt, at,
                        i % 7 == 3 ? 0.0f
                                   : ldexpf((float)(dec_val(p->q, c->dt, d) + 0.05 * rng_normal()), -52 - (int)(i % 9)));
            else if (g == K_LATE) /* the first quarter scores below one tie class: the rest */
                put_val(p->base, c->dt, at, d == 0 && i >= c->N / 4 ? 1.0f : 0.0f);
            else put_val(p->base, c->dt, at, grid_val());
            if (src < 0 && g == K_ZERO && i % 5 == 1) put_val(p->base, c->dt, at, 0.0f);
            if (src < 0 && g == K_NAN && rng_below(40) == 0) put_val(p->base, c->dt, at, NAN);
            if (src < 0 && g == K_INF && rng_below(40) == 0) put_val(p->base, c->dt, at, rng_below(2) ? INFINITY : -INFINITY);
        }
    }
    if (g == K_NAN && B > 1) put_val(p->q, c->dt, (B - 1) * p->qs, NAN); /* a NaN query: every score NaN */
    double *xn = malloc(sizeof(double) * (size_t)(N + 1)), *qd = malloc(sizeof(double) * (size_t)D);
    for (int64_t i = 0; i < N; i++) {
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += dec_val(p->base, c->dt, i * p->bs + d) * dec_val(p->base, c->dt, i * p->bs + d);
        xn[i] = s;
    }
    for (int64_t b = 0; b < B; b++) {
        double qn = 0, mag = 0;
        for (int64_t d = 0; d < D; d++) qd[d] = dec_val(p->q, c->dt, b * p->qs + d), qn += qd[d] * qd[d];
        for (int64_t i = 0; i < N; i++) {
            double dot = 0, ad = 0;
            for (int64_t d = 0; d < D; d++) {
                double x = dec_val(p->base, c->dt, i * p->bs + d);
                dot += qd[d] * x, ad += fabs(qd[d] * x);
            }
            double s = c->metric == LTK_METRIC_IP   ? dot
                       : c->metric == LTK_METRIC_L2 ? qn + xn[i] - 2.0 * dot
                       : (qn == 0.0 || xn[i] == 0.0) ? 0.0
                                                     : dot / (sqrt(qn) * sqrt(xn[i]));
            p->full[b * N + i] = s;
            double m = c->metric == LTK_METRIC_IP ? ad : c->metric == LTK_METRIC_L2 ? qn + xn[i] + 2.0 * ad : 1.0;
            if (isfinite(m)) mag = fmax(mag, m);
        }
        p->mag[b] = mag;
    }
    free(xn);
    free(qd);
}

static void kprob_free(kprob *p) { free(p->q), free(p->base), free(p->full), free(p->mag), free(p->ref); }

typedef struct {
    int64_t *idx;
    float *sc;
    gstats st;
} krun;

static void krun_free(krun *o) {
    t_guarded_free(o->idx);
    t_guarded_free(o->sc);
    gstats_free(&o->st);
}

static int run_knn(const kprob *p, ltk_backend be, ltk_algo algo, int with_scores, int threads, int use_ws,
                   uint32_t flags, krun *o, const char *what) {
    const kcase *c = &p->c;
    memset(o, 0, sizeof *o);
    o->idx = g_alloc_poison(sizeof(int64_t) * (size_t)(c->B * p->os), sizeof(int64_t));
    o->sc = with_scores ? g_alloc_poison(sizeof(float) * (size_t)(c->B * p->os), sizeof(float)) : NULL;
    gstats_new(&o->st, c->B);
    xmem m = {.be = be};
    ltk_knn_args a = {.B = c->B, .N = c->N, .D = c->D, .k = c->k, .dtype = c->dt, .metric = c->metric,
                      .queries = x_in(&m, p->q, p->el * (size_t)(c->B * p->qs)), .q_stride = c->strided ? p->qs : 0,
                      .base = x_in(&m, p->base, p->el * (size_t)(c->N * p->bs)), .base_stride = c->strided ? p->bs : 0,
                      .out_idx = x_out(&m, o->idx), .out_scores = x_out(&m, o->sc),
                      .out_stride = c->strided ? p->os : 0, .flags = flags};
    ltk_exec e = {.backend = be, .algo = algo, .num_threads = threads, .stats = o->st.s};
    uint8_t *ws = NULL;
    int ok = 1;
    if (use_ws) {
        size_t need = 0;
        ok = CHECK(ltk_knn_workspace_size(&a, &e, &need) == LTK_OK, "%s: workspace size: %s", what, ltk_last_error());
        ws = t_guarded_alloc(need ? need : 1, 0);
        for (size_t i = 0; i < need; i++) ws[i] = (uint8_t)rng_u32();
        e.workspace = x_out(&m, ws);
        e.workspace_bytes = need;
    }
    if (ok) {
        ltk_status s = ltk_knn_topk(&a, &e);
        ok = CHECK(s == LTK_OK, "%s: %s (%s)", what, ltk_status_str(s), ltk_last_error());
    }
    x_sync(&m);
    x_free(&m);
    if (ws) ok = ok && CHECK(t_guarded_ok(ws), "%s: write outside the caller's workspace", what);
    t_guarded_free(ws);
    ok = ok && out_guards_ok(what, o->idx, sizeof(int64_t), c->B, c->k, p->os);
    ok = ok && out_guards_ok(what, o->sc, sizeof(float), c->B, c->k, p->os);
    gstats_check(what, &o->st, be); /* reported, but the results are still checked */
    return ok;
}

static int check_knn_rows(const kprob *p, ltk_backend be, const krun *o, uint32_t flags, const char *what) {
    const kcase *c = &p->c;
    for (int64_t b = 0; b < c->B; b++) {
        rowchk r = {.n = c->N, .k = c->k, .sorted = !(flags & LTK_FLAG_UNSORTED), .asc = c->metric == LTK_METRIC_L2,
                    .pad = c->metric == LTK_METRIC_L2 ? INFINITY : -INFINITY, .full = p->full + b * c->N,
                    .ref = p->ref + b * c->k, .tol = p->exact && exact_on(be, c->dt) ? 0.0 : rel_tol(be) * p->mag[b],
                    .no_float_order = be == LTK_BACKEND_REF};
        if (!check_row(what, b, &r, o->idx + b * p->os, o->sc ? o->sc + b * p->os : NULL)) return 0;
    }
    return 1;
}

static void knn_case(const kcase *c) {
    kprob p;
    kprob_make(&p, c);
    test_ctx("knn B=%lld N=%lld D=%d k=%d %s %s gen=%s flags=%s strided=%d", (long long)c->B, (long long)c->N, c->D,
             c->k, dt_name(c->dt), metric_name[c->metric], kgen_name[c->gen],
             (c->flags & LTK_FLAG_UNSORTED) ? "U" : "-", c->strided);
    krun r = {0};
    int ok = run_knn(&p, LTK_BACKEND_REF, LTK_ALGO_FUSED, 1, 0, 0, 0, &r, "ref");
    for (int64_t b = 0; b < c->B && ok; b++)
        for (int32_t j = 0; j < c->k; j++) p.ref[b * c->k + j] = r.idx[b * p.os + j];
    ok = ok && check_knn_rows(&p, LTK_BACKEND_REF, &r, 0, "ref vs float64");
    krun_free(&r);
    for (int b = 0; b < g_nbe && ok; b++) {
        ltk_backend be = g_be[b];
        if (c->gen == K_DENORM && be == LTK_BACKEND_CUDA) continue;
        char what[64];
        krun f = {0}, mt = {0}, fn = {0};
        snprintf(what, sizeof what, "%s fused", ltk_backend_name(be));
        ok = run_knn(&p, be, LTK_ALGO_FUSED, 1, 0, 1, c->flags, &f, what) && check_knn_rows(&p, be, &f, c->flags, what);
        snprintf(what, sizeof what, "%s materialize", ltk_backend_name(be));
        ok = ok && run_knn(&p, be, LTK_ALGO_MATERIALIZE, 1, 0, 0, c->flags, &mt, what) &&
             check_knn_rows(&p, be, &mt, c->flags, what);
        snprintf(what, sizeof what, "%s fused vs materialize", ltk_backend_name(be));
        ok = ok && same_rows(what, c->B, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.idx, f.sc, mt.idx, mt.sc);
        snprintf(what, sizeof what, "%s fused, out_scores NULL", ltk_backend_name(be));
        ok = ok && run_knn(&p, be, LTK_ALGO_FUSED, 0, 0, 0, c->flags, &fn, what) &&
             check_knn_rows(&p, be, &fn, c->flags, what) &&
             same_rows(what, c->B, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.idx, NULL, fn.idx, NULL);
        if (ok && c->threads && be == LTK_BACKEND_CPU) {
            krun th = {0};
            /* 1 thread, and 5 (slices of the base whose ties at lower indices rank first) */
            for (int nt = 1; nt <= 5 && ok; nt += 4) {
                snprintf(what, sizeof what, "%s fused, num_threads=%d", ltk_backend_name(be), nt);
                ok = run_knn(&p, be, LTK_ALGO_FUSED, 1, nt, 0, c->flags, &th, what) &&
                     same_rows(what, c->B, c->k, p.os, !(c->flags & LTK_FLAG_UNSORTED), f.idx, f.sc, th.idx, th.sc);
                krun_free(&th);
            }
        }
        krun_free(&f), krun_free(&mt), krun_free(&fn);
    }
    kprob_free(&p);
}

#define KC(...) ((kcase){__VA_ARGS__})
static void run_kcases(const kcase *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        knn_case(&cs[i]);
    }
}

/* ================================================================================================
 * select: exact
 * ============================================================================================== */
enum { S_RANDOM, S_TIES, S_EQUAL, S_INC, S_DEC, S_NONFINITE, S_NANHEAVY, S_DENORM, S_BITS, S_RADIX, S_NEG, S_OFFSET,
       S_HIDE_TOP, S_HIDE_LOW, S_TIE_ABOVE, S_PLATEAU_KM1, S_MAX_TWICE, S_PLATEAU_SAMPLED, S_PLATEAU_4K, S_ROUNDED };
static const char *sgen_name[] = {"random", "ties", "all-equal", "increasing", "decreasing", "nan/inf/-0",
                                  "nan-heavy", "denormal", "random-bits", "shared-high-bits", "all-negative",
                                  "offset", "sample-misses-top", "sample-misses-low", "tie-class-under-unsampled",
                                  "plateau-k-1", "sample-max-twice", "plateau-k-1-one-sampled",
                                  "plateau-4k-one-sampled", "rounded-normals"};

typedef struct {
    int64_t R, C;
    int32_t k;
    ltk_dtype dt;
    uint32_t flags;
    int gen, ranges, strided, threads;
} scase;

static void put_select_value(void *m, ltk_dtype dt, int64_t i, int g, int64_t col, int64_t C) {
    float x;
    int64_t r = rng_below(100);
    switch (g) {
    case S_TIES: x = (float)rng_range(0, 4); break; /* 5 values: huge ties straddle k */
    case S_EQUAL: x = 1.5f; break;
    case S_INC: x = (float)col; break;
    case S_DEC: x = (float)(C - col); break;
    case S_NONFINITE:
        x = r < 10 ? NAN : r < 18 ? INFINITY : r < 26 ? -INFINITY : r < 34 ? -0.0f : r < 42 ? 0.0f : (float)rng_normal();
        break;
    case S_NANHEAVY: x = r < 95 ? NAN : (float)rng_normal(); break;
    case S_DENORM:
        x = r < 10 ? 0.0f : r < 20 ? -0.0f : t_bits_f32((uint32_t)rng_range(1, 0x7fffff) | (r & 1 ? 0x80000000u : 0));
        break;
    case S_BITS: x = t_bits_f32(rng_u32()); break;
    case S_RADIX: /* equal high bits, differing only in the lowest mantissa bits */
        x = t_bits_f32(0x3f8a0000u | (uint32_t)rng_below(dt == LTK_DTYPE_F32 ? 64 : 1));
        if (dt != LTK_DTYPE_F32) x = t_bits_f32(0x3f800000u | ((uint32_t)rng_below(8) << 16));
        break;
    case S_NEG: x = -fabsf((float)rng_normal()) - 1.0f; break;
    /* The CPU select's first digit starts below the high bits a strided sample of the row shares
     * (positions j * (C / 128)); these rows are made so that C / 128 is a multiple of 3 (97): */
    case S_OFFSET: x = (float)rng_normal() * 0.01f + 100.0f; break; /* the sample is right */
    case S_HIDE_TOP: /* >= k entries above the sampled prefix, none of them sampled */
        x = col % 3 == 1 ? 1e30f * (1.0f + (float)rng_unit()) : 1.0f + 0.001f * (float)rng_unit();
        break;
    case S_HIDE_LOW: /* the sampled prefix holds fewer than k entries */
        x = col % 97 == 0 ? 5.0f : (float)rng_normal();
        break;
    /* The CPU select's shortcut for a large class at the sample's top (its key twice or more): */
    case S_TIE_ABOVE: /* the sampled class is not the k-th: >= k unsampled entries above it */
        x = col % 3 == 1 ? 2.0f : 1.0f;
        break;
    case S_PLATEAU_KM1: /* k - 1 = 2047 unsampled positives over zeros: the k-th is a zero */
        x = col % 3 == 1 && col < 3 * 2047 ? 1.0f + (float)rng_unit() : 0.0f;
        break;
    case S_PLATEAU_SAMPLED: /* k - 1 positives over zeros, one of them at a sampled position */
        x = (col % 3 == 1 && col < 3 * 2046) || col == 5 * (C / 128) ? 1.0f + (float)rng_unit() : 0.0f;
        break;
    case S_PLATEAU_4K: /* 4k positives over zeros, one sampled: k or more above the class (riding) */
        x = (col % 3 == 1 && col < 3 * 4 * 2048) || col == 5 * (C / 128) ? 1.0f + (float)rng_unit() : 0.0f;
        break;
    case S_ROUNDED: /* N(0,1) x 1e-3 + 1e4 in f32: a handful of values, the top ones above the class */
        x = 1e4f + 1e-3f * (float)rng_normal();
        break;
    case S_MAX_TWICE: /* the sample's top key twice, and the row holds only those two */
        x = col == 0 || col == C / 128 ? 5.0f : (float)rng_normal();
        break;
    default: x = (float)rng_normal(); break;
    }
    if (dt == LTK_DTYPE_F32) ((float *)m)[i] = x;
    else if (g == S_BITS) ((uint16_t *)m)[i] = (uint16_t)rng_u32();
    else if (g == S_DENORM) ((uint16_t *)m)[i] = (uint16_t)(rng_range(0, dt == LTK_DTYPE_F16 ? 0x3ff : 0x7f) | (r & 1 ? 0x8000 : 0));
    else if (g == S_INC || g == S_DEC) { /* positive codes are monotone in value */
        int64_t span = dt == LTK_DTYPE_F16 ? 0x7800 : 0x3f00, v = (g == S_INC ? col : C - col) % span;
        ((uint16_t *)m)[i] = (uint16_t)((dt == LTK_DTYPE_F16 ? 0x0400 : 0x0080) + v);
    }
    else if (dt == LTK_DTYPE_BF16) ((uint16_t *)m)[i] = isnan(x) ? 0x7fc1 : (uint16_t)(t_f32_bits(x) >> 16);
    else { /* f16: round by hand through the exact encoder on a coarse value */
        float y = isfinite(x) ? ldexpf(roundf(ldexpf(x, 6)), -6) : x;
        if (fabsf(y) > 60000.0f) y = 60000.0f;
        put_val(m, dt, i, y);
    }
}

static void select_case(const scase *c) {
    size_t el = ltk_dtype_size(c->dt);
    int64_t R = c->R, C = c->C, rs = C + (c->strided ? 7 : 0), os = c->k + (c->strided ? 3 : 0);
    void *m = malloc(el * (size_t)(R * rs + 1));
    int32_t *st = malloc(sizeof(int32_t) * (size_t)(R + 1)), *en = malloc(sizeof(int32_t) * (size_t)(R + 1));
    for (int64_t r = 0; r < R; r++) {
        st[r] = 0, en[r] = (int32_t)C;
        if (c->ranges == R_RANDOM || (c->ranges == R_EMPTY && r % 2)) {
            int64_t a = rng_range(0, C), b = rng_range(0, C);
            st[r] = (int32_t)(a < b ? a : b), en[r] = (int32_t)(a < b ? b : a);
        }
        if (c->ranges == R_EMPTY && r % 2 == 0) st[r] = en[r] = (int32_t)(r % 4 == 0 ? 0 : C);
        if (c->ranges == R_MULTI) st[r] = (int32_t)(C * (r % 3) / 3), en[r] = (int32_t)(C * (r % 3 + 1) / 3);
    }
    int outside_inf = (int)rng_below(2);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < rs; j++) {
            int64_t i = r * rs + j;
            int in_range = j < C && (!c->ranges || (j >= st[r] && j < en[r]));
            if (j >= C || (!in_range && outside_inf)) put_val(m, c->dt, i, INFINITY); /* must never be picked */
            else put_select_value(m, c->dt, i, c->gen, j, C);
        }
    test_ctx("select rows=%lld cols=%lld k=%d %s gen=%s ranges=%s flags=%s%s strided=%d", (long long)R, (long long)C,
             c->k, dt_name(c->dt), sgen_name[c->gen], range_name[c->ranges], (c->flags & LTK_FLAG_UNSORTED) ? "U" : "-",
             (c->flags & LTK_FLAG_ABSOLUTE) ? "A" : "-", c->strided);
    int32_t *ri = NULL;
    float *rsc = NULL;
    int ok = 1;
    /* ref (sorted) */
    ri = g_alloc_poison(sizeof(int32_t) * (size_t)(R * os), sizeof(int32_t));
    rsc = g_alloc_poison(sizeof(float) * (size_t)(R * os), sizeof(float));
    {
        ltk_select_args a = {.rows = R, .cols = C, .k = c->k, .dtype = c->dt, .scores = m, .row_stride = c->strided ? rs : 0,
                             .starts = c->ranges ? st : NULL, .ends = c->ranges ? en : NULL, .out_idx = ri,
                             .out_scores = rsc, .out_stride = c->strided ? os : 0, .flags = c->flags & ~LTK_FLAG_UNSORTED};
        ltk_exec e = {.backend = LTK_BACKEND_REF};
        ok = CHECK(ltk_select_topk(&a, &e) == LTK_OK, "ref: %s", ltk_last_error());
    }
    int64_t *ref64 = malloc(sizeof(int64_t) * (size_t)(R * os)), *got64 = malloc(sizeof(int64_t) * (size_t)(R * os));
    for (int64_t i = 0; i < R * os; i++) ref64[i] = ri[i];
    for (int b = 0; b < g_nbe && ok; b++) {
        ltk_backend be = g_be[b];
        for (int variant = 0; variant < 4 && ok; variant++) {
            /* 0 fused + scores + caller workspace, 1 materialize + scores, 2 fused without scores,
             * 3 fused with one thread (cpu, when asked) */
            if (variant == 3 && !(c->threads && be == LTK_BACKEND_CPU)) continue;
            char what[64];
            snprintf(what, sizeof what, "%s %s%s", ltk_backend_name(be), variant == 1 ? "materialize" : "fused",
                     variant == 2 ? ", out_scores NULL" : variant == 3 ? ", num_threads=1" : "");
            int32_t *oi = g_alloc_poison(sizeof(int32_t) * (size_t)(R * os), sizeof(int32_t));
            float *osc = variant == 2 ? NULL : g_alloc_poison(sizeof(float) * (size_t)(R * os), sizeof(float));
            gstats gs;
            gstats_new(&gs, R);
            xmem x = {.be = be};
            ltk_select_args a = {.rows = R, .cols = C, .k = c->k, .dtype = c->dt,
                                 .scores = x_in(&x, m, el * (size_t)(R * rs)), .row_stride = c->strided ? rs : 0,
                                 .starts = c->ranges ? x_in(&x, st, sizeof(int32_t) * (size_t)R) : NULL,
                                 .ends = c->ranges ? x_in(&x, en, sizeof(int32_t) * (size_t)R) : NULL,
                                 .out_idx = x_out(&x, oi), .out_scores = x_out(&x, osc),
                                 .out_stride = c->strided ? os : 0, .flags = c->flags};
            ltk_exec e = {.backend = be, .algo = variant == 1 ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED,
                          .num_threads = variant == 3 ? 1 : 0, .stats = gs.s};
            uint8_t *ws = NULL;
            if (variant == 0) {
                size_t need = 0;
                ok = CHECK(ltk_select_workspace_size(&a, &e, &need) == LTK_OK, "%s: %s", what, ltk_last_error());
                ws = t_guarded_alloc(need ? need : 1, 0);
                for (size_t i = 0; i < need; i++) ws[i] = (uint8_t)rng_u32();
                e.workspace = x_out(&x, ws);
                e.workspace_bytes = need;
            }
            if (ok) {
                ltk_status s = ltk_select_topk(&a, &e);
                ok = CHECK(s == LTK_OK, "%s: %s (%s)", what, ltk_status_str(s), ltk_last_error());
            }
            x_sync(&x);
            x_free(&x);
            if (ws) ok = ok && CHECK(t_guarded_ok(ws), "%s: write outside the caller's workspace", what);
            ok = ok && out_guards_ok(what, oi, sizeof(int32_t), R, c->k, os) &&
                 out_guards_ok(what, osc, sizeof(float), R, c->k, os);
            gstats_check(what, &gs, be);
            for (int64_t i = 0; i < R * os; i++) got64[i] = oi[i];
            /* exact: ref's indices and score bits, in order (or as a set with UNSORTED) */
            ok = ok && same_rows(what, R, c->k, os, !(c->flags & LTK_FLAG_UNSORTED), ref64, osc ? rsc : NULL, got64, osc);
            t_guarded_free(ws), t_guarded_free(oi), t_guarded_free(osc);
            gstats_free(&gs);
        }
    }
    t_guarded_free(ri), t_guarded_free(rsc);
    free(ref64), free(got64), free(m), free(st), free(en);
}

#define SC(...) ((scase){__VA_ARGS__})
static void run_scases(const scase *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        select_case(&cs[i]);
    }
}

/* ================================================================================================
 * the tests
 * ============================================================================================== */
static const ltk_dtype idt[3] = {LTK_DTYPE_E4M3, LTK_DTYPE_BF16, LTK_DTYPE_F32};

/* Random inputs over shapes: H in {1, 32, 64}, D in {32, 128}, S not a multiple of any tile. */
static void test_indexer_random(void) {
    static const int32_t HD[][2] = {{1, 32}, {32, 32}, {64, 128}, {32, 128}, {1, 128}, {64, 32}};
    static const int64_t Ss[] = {1, 7, 255, 257, 300, 1000, 4099};
    for (int i = 0; i < 36; i++) {
        int32_t H = HD[i % 6][0], D = HD[i % 6][1];
        int64_t S = Ss[rng_below(7)];
        if ((int64_t)H * D * S > 3000000) S = 257;
        int64_t T = rng_range(1, 4);
        int32_t k = (int32_t)rng_range(1, S + 8 < 600 ? S + 8 : 600);
        icase c = IC(.T = T, .S = S, .H = H, .D = D, .k = k, .dt = idt[i % 3], .flags = (uint32_t)rng_below(4),
                     .gen = G_RANDOM, .ranges = (int)rng_below(7), .strided = (int)rng_below(2),
                     .scale = (int)rng_below(2), .threads = i % 5 == 0);
        indexer_case(&c);
    }
}

static void test_indexer_k_edges(void) {
    static const int64_t Ss[] = {1, 7, 255, 257, 4099};
    for (int i = 0; i < 5; i++) {
        int64_t S = Ss[i];
        int32_t ks[3] = {1, (int32_t)S, (int32_t)S + 5}; /* k = 1, k = S, k > S */
        for (int j = 0; j < 3; j++) {
            icase c = IC(.T = 3, .S = S, .H = 4, .D = 32, .k = ks[j], .dt = idt[(i + j) % 3],
                         .flags = (uint32_t)((i + j) % 4), .gen = j == 1 ? G_GRID : G_RANDOM, .scale = 1);
            indexer_case(&c);
        }
    }
}

static void test_indexer_all_equal(void) {
    const icase cs[] = {
        IC(.T = 3, .S = 3000, .H = 4, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_EQUAL, .scale = 1),
        IC(.T = 2, .S = 257, .H = 32, .D = 32, .k = 256, .dt = LTK_DTYPE_BF16, .gen = G_EQUAL, .flags = LTK_FLAG_UNSORTED),
        IC(.T = 4, .S = 1000, .H = 1, .D = 128, .k = 7, .dt = LTK_DTYPE_F32, .gen = G_EQUAL, .ranges = R_RANDOM),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* S = 50000 equal scores with k = 2048: every candidate passes the gate, any small candidate
 * buffer overflows; the answer is exactly the first 2048 keys. */
static void test_indexer_flat_overflow(void) {
    const icase cs[] = {
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_EQUAL),
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = G_EQUAL,
           .flags = LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE, .ranges = R_RANDOM),
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_F32, .gen = G_TIES, .scale = 1),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* Many exact duplicates straddling position k (4 groups of keys with identical rows and scales;
 * one group scaled by 0; row 0 has all-zero weights, so every score in it is 0). */
static void test_indexer_ties_boundary(void) {
    const icase cs[] = {
        IC(.T = 3, .S = 5000, .H = 4, .D = 32, .k = 1000, .dt = LTK_DTYPE_E4M3, .gen = G_TIES, .scale = 1),
        IC(.T = 3, .S = 4099, .H = 2, .D = 32, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = G_TIES, .scale = 1,
           .flags = LTK_FLAG_UNSORTED),
        IC(.T = 4, .S = 1000, .H = 32, .D = 32, .k = 250, .dt = LTK_DTYPE_F32, .gen = G_TIES, .scale = 1,
           .ranges = R_MULTI, .flags = LTK_FLAG_ABSOLUTE),
        IC(.T = 3, .S = 777, .H = 1, .D = 32, .k = 333, .dt = LTK_DTYPE_E4M3, .gen = G_TIES, .ranges = R_CAUSAL),
        IC(.T = 2, .S = 300, .H = 64, .D = 128, .k = 64, .dt = LTK_DTYPE_E4M3, .gen = G_GRID, .scale = 1),
        IC(.T = 3, .S = 2000, .H = 8, .D = 32, .k = 128, .dt = LTK_DTYPE_BF16, .gen = G_GRID, .ranges = R_RANDOM,
           .flags = LTK_FLAG_UNSORTED, .strided = 1),
        /* scores are integers in [0, 256]: the k-th value sits exactly on a bin edge */
        IC(.T = 3, .S = 5000, .H = 1, .D = 1, .k = 100, .dt = LTK_DTYPE_F32, .gen = G_EDGE),
        IC(.T = 3, .S = 5000, .H = 4, .D = 32, .k = 1000, .dt = LTK_DTYPE_BF16, .gen = G_EDGE, .scale = 1),
        IC(.T = 3, .S = 5000, .H = 4, .D = 32, .k = 2500, .dt = LTK_DTYPE_E4M3, .gen = G_EDGE, .ranges = R_RANDOM),
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_EDGE, .flags = LTK_FLAG_UNSORTED),
        /* ... with a hot set holding the row's best keys: the initial threshold is then exactly the
         * k-th value, on a bin edge, and its ties outside the hot set must still pass the gate */
        IC(.T = 3, .S = 5000, .H = 1, .D = 32, .k = 1000, .dt = LTK_DTYPE_F32, .gen = G_EDGE, .state = ST_BEST),
        IC(.T = 2, .S = 20000, .H = 2, .D = 32, .k = 3000, .dt = LTK_DTYPE_BF16, .gen = G_EDGE, .state = ST_BEST,
           .flags = LTK_FLAG_UNSORTED),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* Scores increasing along S (every key raises a running threshold) and decreasing. */
static void test_indexer_monotone(void) {
    const icase cs[] = {
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_INC),
        IC(.T = 2, .S = 50000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = G_DEC),
        IC(.T = 4, .S = 4099, .H = 4, .D = 32, .k = 100, .dt = LTK_DTYPE_F32, .gen = G_INC, .ranges = R_CAUSAL),
        IC(.T = 4, .S = 4099, .H = 4, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_DEC, .ranges = R_MULTI,
           .flags = LTK_FLAG_UNSORTED),
        IC(.T = 3, .S = 3000, .H = 2, .D = 32, .k = 64, .dt = LTK_DTYPE_E4M3, .gen = G_INC, .state = ST_CARRY),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* NaN and +-inf scores (through kv_scale), rows with more than S - k NaNs (NaNs must be
 * returned, lowest indices first), NaN/inf inside q and kv (ReLU propagates NaN), a NaN query row. */
static void test_indexer_nonfinite(void) {
    const icase cs[] = {
        IC(.T = 3, .S = 2000, .H = 4, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_NONFINITE),
        IC(.T = 3, .S = 2000, .H = 4, .D = 32, .k = 500, .dt = LTK_DTYPE_F32, .gen = G_NONFINITE, .flags = LTK_FLAG_UNSORTED),
        IC(.T = 3, .S = 3000, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_BF16, .gen = G_NANHEAVY),
        IC(.T = 2, .S = 3000, .H = 2, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_NANHEAVY, .ranges = R_RANDOM,
           .flags = LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

static void test_indexer_nan_inputs(void) {
    for (int i = 0; i < 3; i++) {
        icase c = IC(.T = 3, .S = 1000, .H = 4, .D = 32, .k = 64, .dt = idt[i], .gen = G_NANINPUT, .scale = i == 1,
                     .flags = (uint32_t)i);
        indexer_case(&c);
    }
}

/* Periodic scores (every 4th key far above the others) that a strided sample of stride 4 sees
 * only at its peaks: S = 1664 makes the CPU cold sample's strided part exactly the keys 4i, so its
 * predicted start lies far above the k-th best and the scan must catch that and redo the rows. */
static void test_indexer_periodic(void) {
    const icase cs[] = {
        IC(.T = 17, .S = 1664, .H = 4, .D = 32, .k = 500, .dt = LTK_DTYPE_BF16, .gen = G_PERIODIC, .threads = 1),
        IC(.T = 5, .S = 1664, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_E4M3, .gen = G_PERIODIC,
           .flags = LTK_FLAG_UNSORTED),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
    for (int b = 0; b < g_nbe; b++) {
        if (g_be[b] != LTK_BACKEND_CPU) continue;
        iprob p;
        iprob_make(&p, &cs[0]);
        irun f = {0};
        test_ctx("indexer periodic: the cpu predicted-start fallback is exercised");
        if (run_indexer(&p, LTK_BACKEND_CPU, LTK_ALGO_FUSED, 1, 0, 0, NULL, 0, &f, "cpu fused"))
            CHECK(f.st.s->fallback_rows > 0, "cpu fused: fallback_rows = %lld: the misleading sample was not caught",
                  (long long)f.st.s->fallback_rows);
        irun_free(&f);
        iprob_free(&p);
    }
}

/* Subnormal fp32 keys (multiples of 2^-140): exact in IEEE fp32, all zero if flushed. CPU only. */
static void test_indexer_denormal(void) {
    const icase cs[] = {
        IC(.T = 3, .S = 1000, .H = 4, .D = 32, .k = 50, .dt = LTK_DTYPE_F32, .gen = G_DENORM),
        IC(.T = 2, .S = 257, .H = 1, .D = 32, .k = 16, .dt = LTK_DTYPE_F32, .gen = G_DENORM, .scale = 1,
           .flags = LTK_FLAG_UNSORTED),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* The zero plateau (issue 22): m keys score > 0 (four values), the rest exactly 0 after the ReLU,
 * for m in {0, k/2, k - 1, k, 4k}: whenever fewer than k keys score above 0 the k-th sits inside
 * a class of exact zeros, answered by the lowest indices; also S long enough for the filter. */
static void test_indexer_zero_plateau(void) {
    const int32_t k = 512;
    const int64_t ms[] = {0, k / 2, k - 1, k, 4 * k};
    for (int i = 0; i < 5; i++) {
        icase c = IC(.T = 3, .S = 30000, .H = 8, .D = 32, .k = k, .dt = idt[i % 3], .gen = G_PLATEAU, .m = ms[i],
                     .flags = i % 2 ? LTK_FLAG_UNSORTED : 0, .ranges = i == 3 ? R_RANDOM : R_NONE);
        indexer_case(&c);
    }
    icase big = IC(.T = 2, .S = 70000, .H = 4, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_PLATEAU, .m = 2047);
    indexer_case(&big);
}

/* Keys of 2, 4 or 16 distinct values (copies of the first m keys): every row has m distinct scores. */
static void test_indexer_distinct(void) {
    const int64_t ns[] = {2, 4, 16};
    for (int i = 0; i < 3; i++) {
        icase c = IC(.T = 3, .S = 20000, .H = 4, .D = 32, .k = 1000, .dt = idt[i], .gen = G_DISTINCT, .m = ns[i],
                     .scale = 1, .flags = i == 1 ? LTK_FLAG_UNSORTED : 0);
        indexer_case(&c);
    }
}

/* Magnitudes (issue 22): kv_scale or the weights scaled by 1e-30 .. 1e30, every backend's set and
 * scores against float64 on the same rounded inputs, to rel_tol of the row's magnitude (1e-4 on
 * the CPU, 1e-2 on the GPU's FP8/bf16 tensor cores). A backend that scores in a fixed-point screen
 * or bins on an absolute scale would lose keys here. */
static void test_indexer_magnitudes(void) {
    static const int exps[] = {30, -30, 20, -20, 10, -10};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++) {
            icase c = IC(.T = 3, .S = j == 2 ? 20000 : 3000, .H = 16, .D = 32, .k = j == 2 ? 512 : 200, .dt = idt[j],
                         .gen = G_RANDOM, .scale = 1, .scale_exp = exps[i], .flags = (uint32_t)(i % 2));
            indexer_case(&c);
            icase w = c;
            w.scale_exp = 0, w.w_exp = exps[i];
            indexer_case(&w);
        }
}

/* Ranges: causal prefill, sliding windows, several requests packed along S (ks != 0), empty rows
 * (ks == ke, at 0, inside and at S), random; relative and absolute indices. */
static void test_indexer_ranges(void) {
    for (int r = R_FULL; r <= R_RANDOM; r++)
        for (uint32_t fl = 0; fl < 4; fl += 2) {
            icase c = IC(.T = 6, .S = 1500, .H = 8, .D = 32, .k = 128, .dt = idt[(r + fl) % 3], .flags = fl | (r == R_EMPTY),
                         .gen = r % 2 ? G_RANDOM : G_GRID, .ranges = r, .scale = 1);
            indexer_case(&c);
        }
}

/* Strides larger than the rows (the padding holds NaN): q_stride_t > H*D, kv_stride_s > D,
 * w_stride_t > H, out_stride > k (the gap must stay untouched). */
static void test_indexer_strided(void) {
    const icase cs[] = {
        IC(.T = 3, .S = 1000, .H = 64, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .strided = 1, .scale = 1),
        IC(.T = 3, .S = 257, .H = 32, .D = 128, .k = 20, .dt = LTK_DTYPE_BF16, .gen = G_GRID, .strided = 1,
           .flags = LTK_FLAG_UNSORTED, .ranges = R_CAUSAL),
        IC(.T = 5, .S = 300, .H = 1, .D = 32, .k = 300, .dt = LTK_DTYPE_F32, .gen = G_RANDOM, .strided = 1,
           .ranges = R_EMPTY, .flags = LTK_FLAG_UNSORTED),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* A hot set from a different distribution than the row: the row's worst keys; junk (out of
 * range, duplicates, negatives, keys outside the rows' ranges); one carried from another chunk. */
static void test_indexer_hot_set(void) {
    const icase cs[] = {
        IC(.T = 4, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .state = ST_COLD),
        IC(.T = 4, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .state = ST_WORST),
        IC(.T = 4, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_BF16, .gen = G_GRID, .state = ST_WORST,
           .ranges = R_CAUSAL, .flags = LTK_FLAG_UNSORTED),
        IC(.T = 4, .S = 2000, .H = 2, .D = 32, .k = 100, .dt = LTK_DTYPE_F32, .gen = G_TIES, .state = ST_JUNK,
           .ranges = R_MULTI),
        IC(.T = 4, .S = 2000, .H = 2, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .state = ST_JUNK,
           .ranges = R_RANDOM, .flags = LTK_FLAG_ABSOLUTE),
        IC(.T = 4, .S = 2000, .H = 2, .D = 32, .k = 100, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .state = ST_CARRY,
           .ranges = R_SLIDING),
        IC(.T = 3, .S = 5000, .H = 1, .D = 32, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_EQUAL, .state = ST_WORST),
        IC(.T = 3, .S = 1500, .H = 2, .D = 32, .k = 200, .dt = LTK_DTYPE_F32, .gen = G_NANHEAVY, .state = ST_JUNK),
        IC(.T = 3, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_BF16, .gen = G_RANDOM, .state = ST_BEST),
        /* k close to n: no predicted start on the CPU, the hot keys are sampled with the cold ones */
        IC(.T = 4, .S = 400, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_BF16, .gen = G_RANDOM, .state = ST_BEST),
        IC(.T = 4, .S = 400, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_E4M3, .gen = G_GRID, .state = ST_WORST),
        IC(.T = 4, .S = 400, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .state = ST_CARRY),
        IC(.T = 5, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_E4M3, .gen = G_GRID, .state = ST_WORST, .hotcap = 5),
        IC(.T = 5, .S = 3000, .H = 4, .D = 32, .k = 64, .dt = LTK_DTYPE_F32, .gen = G_RANDOM, .state = ST_CARRY, .hotcap = 1),
        IC(.T = 3, .S = 4000, .H = 2, .D = 32, .k = 300, .dt = LTK_DTYPE_E4M3, .gen = G_TIES, .state = ST_BEST,
           .ranges = R_CAUSAL),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
}

/* ---- kNN ---------------------------------------------------------------------------------- */
static const ltk_dtype kdt[3] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16};

static void test_knn_random(void) {
    for (int i = 0; i < 18; i++) {
        static const int32_t Ds[] = {32, 128, 7};
        static const int64_t Ns[] = {1000, 4099, 257};
        kcase c = KC(.B = rng_range(1, 4), .N = Ns[i % 3], .D = Ds[i / 3 % 3], .k = (int32_t)rng_range(1, 300),
                     .dt = kdt[(i + i / 3) % 3], .metric = (ltk_metric)(i % 3), .flags = (uint32_t)rng_below(2),
                     .gen = K_RANDOM, .strided = i % 4 == 1, .threads = i % 4 == 0);
        knn_case(&c);
    }
}

static void test_knn_exact_grid_ties(void) {
    for (int i = 0; i < 6; i++) {
        kcase c = KC(.B = 3, .N = 3000, .D = i < 3 ? 32 : 128, .k = i % 2 ? 500 : 37, .dt = kdt[i % 3],
                     .metric = (ltk_metric)(i % 3), .flags = (uint32_t)(i / 2 % 2), .gen = K_GRID);
        knn_case(&c);
    }
}

static void test_knn_bin_edges(void) {
    for (int i = 0; i < 3; i++) {
        kcase c = KC(.B = 3, .N = 6000, .D = i ? 32 : 1, .k = i == 2 ? 2048 : 150 * (i + 1), .dt = kdt[i],
                     .metric = LTK_METRIC_IP, .gen = K_EDGE, .flags = (uint32_t)(i == 1));
        knn_case(&c);
    }
}

static void test_knn_zero_vectors(void) {
    for (int i = 0; i < 3; i++) {
        kcase c = KC(.B = 3, .N = 1000, .D = 32, .k = 300, .dt = kdt[i], .metric = (ltk_metric)i, .gen = K_ZERO);
        knn_case(&c);
    }
}

static void test_knn_flat_overflow(void) {
    const kcase cs[] = {
        KC(.B = 2, .N = 50000, .D = 32, .k = 2048, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_EQUAL),
        KC(.B = 2, .N = 50000, .D = 32, .k = 2048, .dt = LTK_DTYPE_BF16, .metric = LTK_METRIC_L2, .gen = K_EQUAL,
           .flags = LTK_FLAG_UNSORTED),
        KC(.B = 2, .N = 20000, .D = 32, .k = 2048, .dt = LTK_DTYPE_F16, .metric = LTK_METRIC_COS, .gen = K_EQUAL),
    };
    run_kcases(cs, sizeof cs / sizeof cs[0]);
}

/* Duplicated base vectors (all equal, or a quarter copies) at the shapes where the fused scan
 * screens (D = 128) and compacts: the top-k is the lowest indices of the tie class, across the
 * threads' slices (own_edge in knn.c turns strict only within a thread's own slice). */
static void test_knn_tied_threads(void) {
    const kcase cs[] = {
        KC(.B = 3, .N = 60000, .D = 128, .k = 10, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_EQUAL,
           .threads = 1),
        KC(.B = 3, .N = 60000, .D = 128, .k = 1000, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_EQUAL,
           .threads = 1),
        KC(.B = 3, .N = 60000, .D = 128, .k = 100, .dt = LTK_DTYPE_BF16, .metric = LTK_METRIC_IP, .gen = K_GRID,
           .threads = 1),
        /* the tie class starts inside the second of 5 slices, after the later slices compacted */
        KC(.B = 2, .N = 60000, .D = 128, .k = 1000, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_LATE,
           .threads = 1),
        KC(.B = 2, .N = 60000, .D = 128, .k = 10, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_LATE,
           .threads = 1),
    };
    run_kcases(cs, sizeof cs / sizeof cs[0]);
}

static void test_knn_nonfinite(void) {
    for (int i = 0; i < 6; i++) {
        int g = i < 3 ? K_NAN : K_INF;
        ltk_metric mt = (ltk_metric)(i % 3);
        if (g == K_INF && mt == LTK_METRIC_L2) mt = LTK_METRIC_IP; /* |q|^2+|x|^2-2<q,x> with inf is formula-specific */
        kcase c = KC(.B = 3, .N = 2000, .D = 32, .k = i % 2 ? 1999 : 100, .dt = kdt[i % 3], .metric = mt, .gen = g,
                     .flags = (uint32_t)(i / 3));
        knn_case(&c);
    }
}

/* Scores monotone along the base: every vector raises a running threshold (IP increasing; L2
 * distance increasing, i.e. the best come first), and the reverse. */
static void test_knn_monotone(void) {
    const kcase cs[] = {
        KC(.B = 2, .N = 50000, .D = 4, .k = 2048, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_INC),
        KC(.B = 2, .N = 50000, .D = 4, .k = 2048, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_DEC),
        KC(.B = 2, .N = 4099, .D = 32, .k = 100, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_INC),
        KC(.B = 2, .N = 4099, .D = 32, .k = 100, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_DEC,
           .flags = LTK_FLAG_UNSORTED),
    };
    run_kcases(cs, sizeof cs / sizeof cs[0]);
}

/* Scores by the ruler sequence over a power-of-two base: a strided sample with a power-of-two
 * stride sees only the high levels, so a start threshold predicted from it passes fewer than k
 * entries of the base. The CPU backend must notice (fewer than k entries passed its start edge)
 * and redo those rows from the conservative start (stats.fallback_rows). */
static void test_knn_sample_misled(void) {
    const kcase cs[] = {
        KC(.B = 3, .N = 32768, .D = 4, .k = 2048, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_RULER, .threads = 1),
        KC(.B = 4, .N = 32768, .D = 8, .k = 1000, .dt = LTK_DTYPE_BF16, .metric = LTK_METRIC_L2, .gen = K_RULER,
           .flags = LTK_FLAG_UNSORTED, .strided = 1),
        KC(.B = 2, .N = 65536, .D = 16, .k = 300, .dt = LTK_DTYPE_F16, .metric = LTK_METRIC_IP, .gen = K_RULER),
    };
    run_kcases(cs, sizeof cs / sizeof cs[0]);
    for (int b = 0; b < g_nbe; b++) {
        if (g_be[b] != LTK_BACKEND_CPU) continue;
        kprob p;
        kprob_make(&p, &cs[0]);
        krun f = {0};
        test_ctx("knn ruler: the cpu fallback is exercised");
        if (run_knn(&p, LTK_BACKEND_CPU, LTK_ALGO_FUSED, 1, 0, 0, 0, &f, "cpu fused"))
            CHECK(f.st.s->fallback_rows > 0, "cpu fused: fallback_rows = %lld: the misleading sample was not caught",
                  (long long)f.st.s->fallback_rows);
        krun_free(&f);
        kprob_free(&p);
    }
}

/* The CPU screens tiles in int8 (AVX-512 VNNI, D <= 1024) or bf16 before the exact rescoring:
 * vectors of very different magnitudes (some beyond the screenable range, tiny or huge), D above
 * the int8 limit, and the bf16 screen forced on (LTK_CPU_KNN_SCREEN) for a few adversarial cases. */
static void test_knn_screens(void) {
    const kcase cs[] = {
        KC(.B = 3, .N = 3000, .D = 40, .k = 50, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_SCALES),
        KC(.B = 2, .N = 3000, .D = 33, .k = 300, .dt = LTK_DTYPE_BF16, .metric = LTK_METRIC_L2, .gen = K_SCALES,
           .strided = 1),
        KC(.B = 2, .N = 3000, .D = 64, .k = 20, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_COS, .gen = K_SCALES,
           .flags = LTK_FLAG_UNSORTED),
        KC(.B = 2, .N = 1500, .D = 1100, .k = 30, .dt = LTK_DTYPE_F16, .metric = LTK_METRIC_IP, .gen = K_RANDOM),
        KC(.B = 2, .N = 5000, .D = 128, .k = 100, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_GRID),
        KC(.B = 3, .N = 2000, .D = 32, .k = 100, .dt = LTK_DTYPE_BF16, .metric = LTK_METRIC_COS, .gen = K_NAN),
        KC(.B = 3, .N = 4000, .D = 8, .k = 64, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_RANDOM, .threads = 1),
    };
    for (int pass = 0; pass < 2; pass++) {
        ltk_tune t = *ltk_tune_get();
        t.cpu_knn_screen_bf16 = pass; /* the second pass on the bf16 screen where int8 would run */
        ltk_tune_set(&t);
        run_kcases(cs, sizeof cs / sizeof cs[0]);
    }
    ltk_tune t = *ltk_tune_get();
    t.cpu_knn_screen_bf16 = 0;
    ltk_tune_set(&t);
}

/* Base vectors too small to quantize (max |x_i| < 2^-50) or zero, along query 0's direction, at the
 * shapes where the fused scan screens and compacts: a zero vector is screened in int8 with its
 * measured norm as the residual (s_x = 0), a tile holding a tiny nonzero one takes the bf16 screen
 * (knn.c), whose bound is nearly tight here for query 0. */
static void test_knn_tiny_vectors(void) {
    const kcase cs[] = {
        KC(.B = 3, .N = 60000, .D = 128, .k = 100, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_TINY),
        KC(.B = 2, .N = 60000, .D = 128, .k = 1000, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .gen = K_TINY,
           .threads = 1),
        KC(.B = 2, .N = 30000, .D = 96, .k = 50, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_COS, .gen = K_TINY),
    };
    run_kcases(cs, sizeof cs / sizeof cs[0]);
}

static void test_knn_denormal(void) {
    kcase c = KC(.B = 3, .N = 1000, .D = 32, .k = 40, .dt = LTK_DTYPE_F32, .metric = LTK_METRIC_IP, .gen = K_DENORM);
    knn_case(&c);
}

static void test_knn_k_edges(void) {
    static const int64_t Ns[] = {1, 7, 255, 257};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            int32_t k = j == 0 ? 1 : j == 1 ? (int32_t)Ns[i] : (int32_t)Ns[i] + 9;
            kcase c = KC(.B = 2, .N = Ns[i], .D = 16, .k = k, .dt = kdt[(i + j) % 3], .metric = (ltk_metric)((i + j) % 3),
                         .gen = (i + j) % 2 ? K_GRID : K_RANDOM, .flags = (uint32_t)(j == 2), .strided = i == 2);
            knn_case(&c);
        }
}

/* ---- select ------------------------------------------------------------------------------- */
static void test_select_random(void) {
    for (int i = 0; i < 24; i++) {
        static const int64_t Cs[] = {1, 7, 255, 257, 4099, 30000};
        int64_t C = Cs[i % 6];
        scase c = SC(.R = rng_range(1, 5), .C = C, .k = (int32_t)rng_range(1, C + 10 < 3000 ? C + 10 : 3000),
                     .dt = kdt[i % 3], .flags = (uint32_t)rng_below(4), .gen = S_RANDOM, .ranges = (int)rng_below(2) * R_RANDOM,
                     .strided = (int)rng_below(2), .threads = i % 4 == 0);
        select_case(&c);
    }
}

static void test_select_adversarial(void) {
    const scase cs[] = {
        SC(.R = 3, .C = 5000, .k = 1000, .dt = LTK_DTYPE_F32, .gen = S_TIES),
        SC(.R = 3, .C = 4099, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = S_TIES, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 2, .C = 50000, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_EQUAL),
        SC(.R = 2, .C = 50000, .k = 2048, .dt = LTK_DTYPE_F16, .gen = S_EQUAL, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 1, .C = 70000, .k = 65536, .dt = LTK_DTYPE_F32, .gen = S_TIES),
        SC(.R = 2, .C = 50000, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_INC),
        SC(.R = 2, .C = 50000, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_DEC),
        SC(.R = 2, .C = 20000, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = S_INC, .ranges = R_MULTI),
        SC(.R = 3, .C = 10000, .k = 500, .dt = LTK_DTYPE_F32, .gen = S_NONFINITE),
        SC(.R = 3, .C = 10000, .k = 1000, .dt = LTK_DTYPE_F32, .gen = S_NANHEAVY, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 3, .C = 3000, .k = 300, .dt = LTK_DTYPE_F16, .gen = S_NANHEAVY),
        SC(.R = 3, .C = 10000, .k = 700, .dt = LTK_DTYPE_F32, .gen = S_DENORM),
        SC(.R = 3, .C = 10000, .k = 700, .dt = LTK_DTYPE_BF16, .gen = S_DENORM, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 4, .C = 10000, .k = 999, .dt = LTK_DTYPE_F32, .gen = S_BITS),
        SC(.R = 4, .C = 10000, .k = 999, .dt = LTK_DTYPE_F16, .gen = S_BITS),
        SC(.R = 4, .C = 10000, .k = 999, .dt = LTK_DTYPE_BF16, .gen = S_BITS, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 3, .C = 20000, .k = 1500, .dt = LTK_DTYPE_F32, .gen = S_RADIX),
        SC(.R = 3, .C = 20000, .k = 1500, .dt = LTK_DTYPE_BF16, .gen = S_RADIX),
        SC(.R = 3, .C = 5000, .k = 100, .dt = LTK_DTYPE_F32, .gen = S_NEG),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_OFFSET),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_HIDE_TOP),
        SC(.R = 2, .C = 49664, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_HIDE_LOW),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_TIE_ABOVE),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_PLATEAU_KM1),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_BF16, .gen = S_PLATEAU_KM1, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 2, .C = 50016, .k = 100, .dt = LTK_DTYPE_F32, .gen = S_MAX_TWICE),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_PLATEAU_SAMPLED),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_PLATEAU_4K),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_PLATEAU_4K, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 3, .C = 300000, .k = 2048, .dt = LTK_DTYPE_F32, .gen = S_ROUNDED),
        SC(.R = 2, .C = 50016, .k = 100, .dt = LTK_DTYPE_F32, .gen = S_ROUNDED, .flags = LTK_FLAG_UNSORTED),
        SC(.R = 2, .C = 50016, .k = 2048, .dt = LTK_DTYPE_F16, .gen = S_TIES),
    };
    run_scases(cs, sizeof cs / sizeof cs[0]);
}

static void test_select_k_edges(void) {
    static const int64_t Cs[] = {1, 7, 255, 257, 4099};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) {
            int32_t k = j == 0 ? 1 : j == 1 ? (int32_t)Cs[i] : (int32_t)Cs[i] + 3;
            scase c = SC(.R = 3, .C = Cs[i], .k = k, .dt = kdt[(i + j) % 3], .flags = (uint32_t)((i + j) % 4),
                         .gen = (i + j) % 2 ? S_TIES : S_BITS, .strided = j == 2);
            select_case(&c);
        }
}

static void test_select_ranges_strided(void) {
    const scase cs[] = {
        SC(.R = 6, .C = 3000, .k = 200, .dt = LTK_DTYPE_F32, .gen = S_RANDOM, .ranges = R_EMPTY, .strided = 1),
        SC(.R = 6, .C = 3000, .k = 200, .dt = LTK_DTYPE_F16, .gen = S_TIES, .ranges = R_MULTI, .flags = LTK_FLAG_ABSOLUTE),
        SC(.R = 6, .C = 3000, .k = 2000, .dt = LTK_DTYPE_BF16, .gen = S_NONFINITE, .ranges = R_RANDOM, .strided = 1,
           .flags = LTK_FLAG_ABSOLUTE | LTK_FLAG_UNSORTED),
        SC(.R = 5, .C = 257, .k = 257, .dt = LTK_DTYPE_F32, .gen = S_BITS, .ranges = R_RANDOM, .strided = 1),
    };
    run_scases(cs, sizeof cs / sizeof cs[0]);
}

/* ---- concurrent callers ------------------------------------------------------------------- */
/* Several application threads call the same backend at once (each call with its own OpenMP team
 * and its own hot-set state): every result equals the one computed alone. */
enum { CT = 4, CR = 4, CC = 20000, CK = 500, CS = 3000, CH = 4, CD = 32, CIK = 64 };
typedef struct {
    ltk_backend be;
    float *scores;
    uint8_t *q, *kv;
    float *w;
    int32_t *sel_want, *idx_want, *hot_want;
    int32_t nhot_want;
    int bad; /* 0 ok; else a code of the first mismatch */
} cjob;

static int cjob_run(cjob *j, int32_t *sel, int32_t *idx, int32_t *hot, int32_t *nhot) {
    ltk_exec e = {.backend = j->be};
    ltk_select_args sa = {.rows = CR, .cols = CC, .k = CK, .dtype = LTK_DTYPE_F32, .scores = j->scores, .out_idx = sel};
    if (ltk_select_topk(&sa, &e) != LTK_OK) return 1;
    ltk_indexer_state *st = NULL;
    if (ltk_indexer_state_create(j->be, 3 * CIK, &st) != LTK_OK) return 2;
    ltk_indexer_args ia = {.T = CR, .S = CS, .H = CH, .D = CD, .k = CIK, .dtype = LTK_DTYPE_E4M3, .q = j->q, .kv = j->kv,
                           .weights = j->w, .out_idx = idx, .state = st};
    ltk_status s = ltk_indexer_topk(&ia, &e); /* cold, then again with the hot set it left */
    if (s == LTK_OK) s = ltk_indexer_topk(&ia, &e);
    if (s == LTK_OK) s = ltk_indexer_state_get(st, hot, 3 * CIK, nhot);
    ltk_indexer_state_free(st);
    return s == LTK_OK ? 0 : 3;
}

static void *cjob_thread(void *arg) {
    cjob *j = arg;
    int32_t *sel = malloc(sizeof(int32_t) * CR * CK), *idx = malloc(sizeof(int32_t) * CR * CIK);
    int32_t *hot = malloc(sizeof(int32_t) * 3 * CIK), nhot = -1;
    for (int rep = 0; rep < 3 && !j->bad; rep++) {
        int rc = cjob_run(j, sel, idx, hot, &nhot);
        if (rc) j->bad = 10 + rc;
        else if (memcmp(sel, j->sel_want, sizeof(int32_t) * CR * CK)) j->bad = 20;
        else if (memcmp(idx, j->idx_want, sizeof(int32_t) * CR * CIK)) j->bad = 21;
        else if (nhot != j->nhot_want || memcmp(hot, j->hot_want, sizeof(int32_t) * (size_t)nhot)) j->bad = 22;
    }
    free(sel), free(idx), free(hot);
    return NULL;
}

static void test_concurrent_calls(void) {
    for (int b = 0; b < g_nbe; b++) {
        if (g_be[b] == LTK_BACKEND_CUDA) continue; /* host memory only here */
        cjob jobs[CT];
        pthread_t th[CT];
        for (int i = 0; i < CT; i++) {
            cjob *j = &jobs[i];
            memset(j, 0, sizeof *j);
            j->be = g_be[b];
            j->scores = malloc(sizeof(float) * CR * CC);
            j->q = malloc(CR * CH * CD), j->kv = malloc(CS * CD), j->w = malloc(sizeof(float) * CR * CH);
            for (int x = 0; x < CR * CC; x++) j->scores[x] = (float)rng_range(-50, 50); /* ties */
            for (int x = 0; x < CR * CH * CD; x++) put_rand(j->q, LTK_DTYPE_E4M3, x);
            for (int x = 0; x < CS * CD; x++) put_rand(j->kv, LTK_DTYPE_E4M3, x);
            for (int x = 0; x < CR * CH; x++) j->w[x] = (float)rng_normal();
            j->sel_want = malloc(sizeof(int32_t) * CR * CK);
            j->idx_want = malloc(sizeof(int32_t) * CR * CIK);
            j->hot_want = malloc(sizeof(int32_t) * 3 * CIK);
            int rc = cjob_run(j, j->sel_want, j->idx_want, j->hot_want, &j->nhot_want);
            CHECK(rc == 0, "%s: sequential run failed (%d): %s", ltk_backend_name(g_be[b]), rc, ltk_last_error());
        }
        for (int i = 0; i < CT; i++) pthread_create(&th[i], NULL, cjob_thread, &jobs[i]);
        for (int i = 0; i < CT; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < CT; i++) {
            cjob *j = &jobs[i];
            CHECK(j->bad == 0, "%s: caller thread %d: %s", ltk_backend_name(g_be[b]), i,
                  j->bad == 20 ? "select result differs from the sequential one"
                  : j->bad == 21 ? "indexer result differs from the sequential one"
                  : j->bad == 22 ? "hot set differs from the sequential one" : "call failed");
            free(j->scores), free(j->q), free(j->kv), free(j->w), free(j->sel_want), free(j->idx_want), free(j->hot_want);
        }
    }
}

/* A CPU fused call over S <= 12k keys runs as materialize (fused_dense in src/cpu/indexer.c); the
 * other indexer tests keep the filter (the test hook cpu_fused_dense_off, set in main), this one
 * lets the dispatch happen on shapes where it does and checks the same properties, fused ==
 * materialize bit for bit included. */
static void set_fused_dense_off(int off) {
    ltk_tune t = *ltk_tune_get();
    t.cpu_fused_dense_off = off;
    ltk_tune_set(&t);
}

static void test_indexer_dense_dispatch(void) {
    set_fused_dense_off(0);
    const icase cs[] = {
        IC(.T = 5, .S = 3000, .H = 8, .D = 64, .k = 256, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM, .scale = 1),
        IC(.T = 9, .S = 4099, .H = 64, .D = 128, .k = 2048, .dt = LTK_DTYPE_E4M3, .gen = G_RANDOM,
           .ranges = R_CAUSAL, .scale = 1),
        IC(.T = 4, .S = 1000, .H = 4, .D = 32, .k = 100, .dt = LTK_DTYPE_BF16, .gen = G_EQUAL,
           .flags = LTK_FLAG_UNSORTED),
    };
    run_icases(cs, sizeof cs / sizeof cs[0]);
    set_fused_dense_off(1);
}

int main(int argc, char **argv) {
    /* the indexer tests exercise the CPU filter even where a fused call would run dense
     * (test_indexer_dense_dispatch lifts this) */
    set_fused_dense_off(1);
    { /* the CUDA kNN's filter too, where a fused call would run as materialize (test-cuda-knn tests that dispatch) */
        ltk_tune t = *ltk_tune_get();
        t.cuda_knn_dense = 0;
        ltk_tune_set(&t);
    }
    init_backends();
    static const t_test tests[] = {
        T_ENTRY(test_select_random),        T_ENTRY(test_select_adversarial),   T_ENTRY(test_select_ranges_strided),
        T_ENTRY(test_select_k_edges),       T_ENTRY(test_knn_monotone),         T_ENTRY(test_knn_tied_threads),         T_ENTRY(test_knn_sample_misled),   T_ENTRY(test_knn_screens),
        T_ENTRY(test_knn_random),           T_ENTRY(test_knn_exact_grid_ties),  T_ENTRY(test_knn_bin_edges),
        T_ENTRY(test_knn_zero_vectors),
        T_ENTRY(test_knn_flat_overflow),    T_ENTRY(test_knn_nonfinite),        T_ENTRY(test_knn_denormal), T_ENTRY(test_knn_tiny_vectors),
        T_ENTRY(test_knn_k_edges),          T_ENTRY(test_indexer_random),       T_ENTRY(test_indexer_k_edges),
        T_ENTRY(test_indexer_all_equal),    T_ENTRY(test_indexer_flat_overflow), T_ENTRY(test_indexer_ties_boundary),
        T_ENTRY(test_indexer_monotone),     T_ENTRY(test_indexer_nonfinite),    T_ENTRY(test_indexer_nan_inputs),
        T_ENTRY(test_indexer_denormal),     T_ENTRY(test_indexer_zero_plateau), T_ENTRY(test_indexer_distinct),
        T_ENTRY(test_indexer_magnitudes),     T_ENTRY(test_indexer_periodic),     T_ENTRY(test_indexer_ranges),       T_ENTRY(test_indexer_strided),
        T_ENTRY(test_indexer_hot_set),      T_ENTRY(test_indexer_dense_dispatch), T_ENTRY(test_concurrent_calls),
    };
    int rc = T_RUN_ALL(tests);
    free(g_mark);
    return rc;
}
