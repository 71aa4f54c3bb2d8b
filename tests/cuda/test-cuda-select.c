/* GPU exact select (src/cuda/select.cu) against a host oracle, bit for bit.
 *   test-cuda-select            every test, each in its own process (harness.h; "N passed, N failed")
 *   test-cuda-select --small    a few small cases (for compute-sanitizer; LTK_TEST_TIMEOUT_S=0 there)
 *   test-cuda-select --bench ROWS COLS K DTYPE [flat] [unsorted] [--json FILE]
 *                               median time of the CUDA select, one JSON line */
#include "gpu-util.h"

/* The host oracle's ranked entry: score key descending, then the lower index (the ref backend's
 * order; ltk_rank_key makes -0 == +0 and NaN last). */
typedef struct {
    uint32_t key;
    int64_t idx;
} hent;
static int cmp_hent(const void *pa, const void *pb) {
    const hent *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { G_RANDN, G_FLAT, G_FEW, G_BUCKET, G_SPECIAL, G_ASC, G_DESC, G_NANHEAVY, G_NGEN,
       /* tie classes at the k-th place (sel_take_ties), not in the every-generator sweep */
       G_PLAT, /* the zero plateau: g_plat_m positive entries at random places, the rest exactly 0 */
       G_DIST2, /* two values */
       G_LATE,  /* first half: ~1% positives, the rest -10; second half 0: the ties at the k-th place come last */
       G_NEG0,   /* -0 and +0 mixed, a few positives: one key class of both zeros */
       G_QUARTER, /* randn rounded down to quarters: a small tie class at the k-th place */
       G_SHIFT }; /* randn * 1e-3 + 1e4 in fp32: ~10 values in the bulk, thousands of ties at the k-th place */
static const char *gen_name[] = {"randn", "flat", "few", "bucket", "special", "asc", "desc", "nanheavy", "-",
                                 "plateau", "distinct2", "late-ties", "signed-zeros", "quarters", "shift"};
static int64_t g_plat_m; /* G_PLAT: positives a row (each entry positive with probability m / cols) */

static float gen_value(int g, int64_t i, int64_t cols) {
    switch (g) {
    case G_PLAT: return (int64_t)(rng_u64() % (uint64_t)cols) < g_plat_m ? 1.0f + (float)(rng_u64() % 1000) : 0.0f;
    case G_DIST2: return (rng_u64() % 2) ? 1.0f : -1.0f;
    case G_LATE: return i >= cols / 2 ? 0.0f : (rng_u64() % 100) == 0 ? 1.0f + rng_normal() * 0.1f : -10.0f;
    case G_QUARTER: return floorf(rng_normal() * 4.0f) * 0.25f;
    case G_SHIFT: return rng_normal() * 1e-3f + 1e4f;
    case G_NEG0: return (rng_u64() % 1000) == 0 ? 1.0f : ((rng_u64() % 2) ? -0.0f : 0.0f);
    case G_RANDN: return rng_normal();
    case G_FLAT: return 0.5f;
    case G_FEW: return (float)(rng_u64() % 4);
    case G_BUCKET: return t_bits_f32(0x3f800000u + (uint32_t)(rng_u64() % 256)); /* one radix bucket but the last */
    case G_SPECIAL: {
        uint64_t r = rng_u64() % 16;
        if (r == 0) return NAN;
        if (r == 1) return INFINITY;
        if (r == 2) return -INFINITY;
        if (r == 3) return -0.0f;
        if (r == 4) return 0.0f;
        return rng_normal();
    }
    case G_ASC: return (float)i * 1e-3f;
    case G_DESC: return (float)(cols - i) * 1e-3f;
    case G_NANHEAVY: return (rng_u64() % 64) ? NAN : rng_normal();
    }
    return 0;
}

typedef struct {
    int64_t rows, cols, k;
    int dtype, gen;
    int ranges;     /* 0 none, 1 random, 2 some empty */
    int64_t pad;    /* row_stride = cols + pad */
    int64_t opad;   /* out_stride = k + opad */
    uint32_t flags;
    int scores;
} scase;

static size_t esz(int dt) { return dt == LTK_DTYPE_F32 ? 4 : 2; }

static float load_h(const void *p, int dt, int64_t i) {
    if (dt == LTK_DTYPE_F32) return ((const float *)p)[i];
    uint16_t v = ((const uint16_t *)p)[i];
    return dt == LTK_DTYPE_F16 ? t_f16_f32(v) : t_bf16_f32(v);
}

static ltk_stats g_last_stats;

static void run_case(const scase *c) {
    int64_t stride = c->cols + c->pad, ostride = c->k + c->opad;
    size_t es = esz(c->dtype), nel = (size_t)(c->rows > 0 ? (c->rows - 1) * stride + c->cols : 0);
    unsigned char *h = malloc(nel * es + 16);
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < stride && r * stride + j < (int64_t)nel; j++) {
            float v = j < c->cols ? gen_value(c->gen, j, c->cols) : 12345.0f; /* padding must never be read */
            size_t o = (size_t)(r * stride + j);
            if (c->dtype == LTK_DTYPE_F32) ((float *)h)[o] = v;
            else if (c->dtype == LTK_DTYPE_F16) ((uint16_t *)h)[o] = t_f32_f16(v);
            else ((uint16_t *)h)[o] = t_f32_bf16(v);
        }
    int32_t *hs = NULL, *he = NULL;
    if (c->ranges) {
        hs = malloc(sizeof(int32_t) * (size_t)c->rows);
        he = malloc(sizeof(int32_t) * (size_t)c->rows);
        for (int64_t r = 0; r < c->rows; r++) {
            int64_t a = (int64_t)(rng_u64() % (uint64_t)(c->cols + 1)), b = (int64_t)(rng_u64() % (uint64_t)(c->cols + 1));
            if (a > b) {
                int64_t t = a;
                a = b;
                b = t;
            }
            if (c->ranges == 2 && r % 3 == 0) b = a;           /* empty */
            if (c->ranges == 2 && r % 3 == 1) a = 0, b = c->cols; /* full */
            hs[r] = (int32_t)a;
            he[r] = (int32_t)b;
        }
    }
    /* outputs with a guard region after the last row; poison everything */
    size_t on = (size_t)(c->rows * ostride) + 64;
    int32_t *oi = malloc(on * 4);
    float *os = malloc(on * 4);
    void *dsc = gu_upload(h, nel * es);
    int32_t *ds = hs ? gu_upload(hs, (size_t)c->rows * 4) : NULL, *de = he ? gu_upload(he, (size_t)c->rows * 4) : NULL;
    int32_t *doi = gu_alloc(on * 4);
    float *dos = gu_alloc(on * 4);
    GPU_CHECK(cudaMemset(doi, 0x7f, on * 4));
    GPU_CHECK(cudaMemset(dos, 0x7f, on * 4));
    ltk_select_args a;
    memset(&a, 0, sizeof a);
    a.rows = c->rows;
    a.cols = c->cols;
    a.k = (int32_t)c->k;
    a.dtype = (ltk_dtype)c->dtype;
    a.scores = dsc;
    a.row_stride = stride;
    a.starts = ds;
    a.ends = de;
    a.out_idx = doi;
    a.out_scores = c->scores ? dos : NULL;
    a.out_stride = ostride;
    a.flags = c->flags;
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    ltk_stats st;
    memset(&st, 0, sizeof st);
    e.stats = &st;
    size_t wsb = 0;
    ltk_status s = ltk_cuda_select_workspace(&a, &e, &wsb);
    void *ws = gu_alloc(wsb);
    GPU_CHECK(cudaMemset(ws, 0xa5, wsb)); /* the select must not rely on a zeroed workspace */
    if (s == LTK_OK) s = ltk_cuda_select(&a, &e, ws, wsb);
    GPU_CHECK(cudaDeviceSynchronize());
    g_last_stats = st;
    char name[256];
    snprintf(name, sizeof name, "rows=%lld cols=%lld k=%lld %s dt=%d ranges=%d pad=%lld opad=%lld flags=%u scores=%d",
             (long long)c->rows, (long long)c->cols, (long long)c->k, gen_name[c->gen], c->dtype, c->ranges,
             (long long)c->pad, (long long)c->opad, c->flags, c->scores);
    CHECK(s == LTK_OK, "%s: status %d", name, (int)s);
    GPU_CHECK(cudaMemcpy(oi, doi, on * 4, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(os, dos, on * 4, cudaMemcpyDeviceToHost));
    /* oracle */
    hent *ent = malloc(sizeof(hent) * (size_t)(c->cols + 1));
    int bad = 0;
    for (int64_t r = 0; r < c->rows && bad < 3; r++) {
        int64_t lo = hs ? hs[r] : 0, hi = he ? he[r] : c->cols, n = hi - lo;
        for (int64_t j = 0; j < n; j++) {
            ent[j].key = ltk_rank_key(load_h(h, c->dtype, r * stride + lo + j));
            ent[j].idx = lo + j;
        }
        qsort(ent, (size_t)n, sizeof(hent), cmp_hent);
        int64_t base = (c->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
        const int32_t *gi = oi + r * ostride;
        const float *gs = os + r * ostride;
        if (c->flags & LTK_FLAG_UNSORTED) { /* compare as sets: re-sort the GPU output in the oracle order */
            hent *g = malloc(sizeof(hent) * (size_t)c->k);
            int ok = 1;
            int64_t m = 0;
            for (int64_t j = 0; j < c->k; j++) {
                if (gi[j] < 0) continue;
                int64_t id = gi[j] + base;
                if (id < lo || id >= hi) {
                    ok = 0;
                    break;
                }
                g[m].key = ltk_rank_key(load_h(h, c->dtype, r * stride + id));
                g[m].idx = id;
                if (c->scores && !t_same_f32(gs[j], load_h(h, c->dtype, r * stride + id))) ok = 0;
                m++;
            }
            qsort(g, (size_t)m, sizeof(hent), cmp_hent);
            int64_t want = n < c->k ? n : c->k;
            if (m != want) ok = 0;
            for (int64_t j = 0; ok && j < m; j++)
                if (g[j].idx != ent[j].idx) ok = 0;
            if (!ok) {
                bad++;
                CHECK(0, "%s: row %lld unsorted set differs (m=%lld want=%lld)", name, (long long)r, (long long)m, (long long)want);
            }
            free(g);
        } else {
            for (int64_t j = 0; j < c->k; j++) {
                int32_t wi = j < n ? (int32_t)(ent[j].idx - base) : -1;
                float ws = j < n ? load_h(h, c->dtype, r * stride + ent[j].idx) : -INFINITY;
                if (gi[j] != wi || (c->scores && !t_same_f32(gs[j], ws))) {
                    bad++;
                    CHECK(0, "%s: row %lld slot %lld: got (%d, %g) want (%d, %g) [range %lld..%lld]", name,
                          (long long)r, (long long)j, gi[j], c->scores ? gs[j] : 0.0, wi, ws, (long long)lo,
                          (long long)hi);
                    break;
                }
            }
        }
        /* the gap between k and out_stride is never written */
        for (int64_t j = c->k; j < ostride; j++)
            if ((uint32_t)gi[j] != 0x7f7f7f7fu) {
                bad++;
                CHECK(0, "%s: row %lld wrote past k at %lld", name, (long long)r, (long long)j);
                break;
            }
    }
    int guard_ok = 1;
    for (size_t j = (size_t)(c->rows * ostride); j < on; j++)
        if ((uint32_t)oi[j] != 0x7f7f7f7fu || t_f32_bits(os[j]) != 0x7f7f7f7fu) guard_ok = 0;
    if (!c->scores)
        for (size_t j = 0; j < on; j++)
            if (t_f32_bits(os[j]) != 0x7f7f7f7fu) guard_ok = 0;
    CHECK(guard_ok, "%s: canary overwritten", name);
    if (getenv("LTK_TEST_VERBOSE"))
        printf("ok %s  fallback_rows=%lld short_rows=%lld candidates_max=%lld\n", name, (long long)st.fallback_rows,
               (long long)st.short_rows, (long long)st.candidates_max);
    free(ent);
    free(h);
    free(hs);
    free(he);
    free(oi);
    free(os);
    cudaFree(dsc);
    cudaFree(ds);
    cudaFree(de);
    cudaFree(doi);
    cudaFree(dos);
    cudaFree(ws);
}

static void sc(int64_t rows, int64_t cols, int64_t k, int dt, int gen, int ranges, int64_t pad, int64_t opad,
               uint32_t flags, int scores) {
    scase c = {rows, cols, k, dt, gen, ranges, pad, opad, flags, scores};
    run_case(&c);
}

/* A tie class at the k-th place resolved on the fast tier (candidates above the threshold, then the
 * lowest-index ties), never on the dense fallback: exact (run_case) and no row fell back. */
static void sc_ties(int64_t rows, int64_t cols, int64_t k, int dt, int gen, int64_t plat_m, uint32_t flags) {
    g_plat_m = plat_m;
    sc(rows, cols, k, dt, gen, 0, 0, 0, flags, 1);
    CHECK(g_last_stats.fallback_rows == 0, "%s rows=%lld cols=%lld k=%lld m=%lld: %lld rows took the dense fallback",
          gen_name[gen], (long long)rows, (long long)cols, (long long)k, (long long)plat_m,
          (long long)g_last_stats.fallback_rows);
}

static void tie_suite(int small) {
    if (small) {
        sc_ties(2, 40000, 100, LTK_DTYPE_F32, G_FLAT, 0, 0);
        sc_ties(1, 200000, 300, LTK_DTYPE_F32, G_PLAT, 150, 0); /* split row (P > 1) */
        sc_ties(4, 8192, 2048, LTK_DTYPE_F32, G_QUARTER, 0, 0); /* one-key crowded buckets (ltk_topk_crowded) */
        return;
    }
    /* Rows that fit one CTA's buffer, every entry a candidate: tie classes crowd the buckets up to
     * the k-th key (ltk_topk_crowded: b* one key, its lowest positions by radix; or b* small and
     * the buckets above it crowded), at k whose padded sort fits k + LTK_BUCKET_MAX (2048, 1000,
     * 100, 4096) and k that does not (1500: the radix passes) */
    {
        const int64_t kc[5] = {2048, 1000, 1500, 100, 4096};
        const int gc[3] = {G_QUARTER, G_DIST2, G_SHIFT};
        for (int i = 0; i < 5; i++)
            for (int g = 0; g < 3; g++) {
                sc_ties(64, 8192, kc[i], LTK_DTYPE_F32, gc[g], 0, 0);
                if (gc[g] != G_SHIFT) sc_ties(64, 12000, kc[i], LTK_DTYPE_BF16, gc[g], 0, LTK_FLAG_UNSORTED);
            }
    }
    const int dts[3] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16};
    const int64_t k = 2048;
    const int64_t ms[5] = {0, k / 2, k - 1, k, 4 * k};
    for (int d = 0; d < 3; d++) {
        for (int i = 0; i < 5; i++) {
            sc_ties(40, 100000, k, dts[d], G_PLAT, ms[i], 0);                /* one CTA a row */
            sc_ties(2, 1 << 20, k, dts[d], G_PLAT, ms[i], LTK_FLAG_UNSORTED); /* split rows */
        }
        sc_ties(40, 100000, k, dts[d], G_FLAT, 0, 0);
        sc_ties(2, 1 << 20, k, dts[d], G_FLAT, 0, 0);
        sc_ties(40, 100000, k, dts[d], G_DIST2, 0, 0);
        sc_ties(2, 1 << 20, 4096, dts[d], G_FEW, 0, 0);
        sc_ties(40, 100000, k, dts[d], G_LATE, 0, 0);
        sc_ties(2, 300000, 500, dts[d], G_NEG0, 0, LTK_FLAG_UNSORTED);
        sc_ties(40, 200000, k, dts[d], G_QUARTER, 0, 0); /* sparse tie classes: they fit the tie region */
        sc_ties(2, 1 << 20, k, dts[d], G_QUARTER, 0, 0);
        if (dts[d] == LTK_DTYPE_F32) { /* (16-bit types round it to one value: G_FLAT) */
            sc_ties(300, 100000, k, dts[d], G_SHIFT, 0, 0); /* one CTA a row (rows > the CTA slots) */
            sc_ties(2, 1 << 20, k, dts[d], G_SHIFT, 0, LTK_FLAG_UNSORTED); /* split rows */
        }
    }
    /* the largest fast k (8192: the shrunk buffer, one CTA an SM, the 16-element sort) */
    const int64_t k8 = 8192;
    const int64_t m8[5] = {0, k8 / 2, k8 - 1, k8, 4 * k8};
    for (int i = 0; i < 5; i++) {
        sc_ties(140, 100000, k8, LTK_DTYPE_F32, G_PLAT, m8[i], 0);                /* one CTA a row */
        sc_ties(2, 1 << 20, k8, LTK_DTYPE_BF16, G_PLAT, m8[i], LTK_FLAG_UNSORTED); /* split rows */
    }
    sc_ties(2, 1 << 20, k8, LTK_DTYPE_F32, G_FLAT, 0, 0);
    sc_ties(140, 100000, k8, LTK_DTYPE_F16, G_DIST2, 0, 0);
    sc_ties(2, 1 << 20, k8, LTK_DTYPE_F32, G_SHIFT, 0, 0);
}

static int suite(int small) {
    const int dts[3] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16};
    if (small) {
        sc(3, 3000, 50, LTK_DTYPE_F32, G_RANDN, 1, 3, 2, 0, 1);
        sc(2, 20000, 100, LTK_DTYPE_BF16, G_FLAT, 0, 0, 0, 0, 1);
        sc(2, 40000, 64, LTK_DTYPE_F16, G_FEW, 2, 1, 0, LTK_FLAG_ABSOLUTE, 1);
        sc(1, 100000, 300, LTK_DTYPE_F32, G_SPECIAL, 0, 0, 0, 0, 1); /* P > 1 path */
        sc(2, 12000, 5000, LTK_DTYPE_F32, G_FEW, 0, 0, 0, 0, 1);     /* fast tier, E = 16 */
        sc(2, 30000, 9000, LTK_DTYPE_F32, G_FEW, 0, 0, 0, 0, 1);     /* general tier */
        sc(1, 30000, 20000, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);  /* CUB sort */
        return 0;
    }
    /* every generator x dtype, fast tier (one CTA per row and split rows) */
    for (int g = 0; g < G_NGEN; g++)
        for (int d = 0; d < 3; d++) {
            sc(40, 30000, 200, dts[d], g, 0, 0, 0, 0, 1);
            sc(2, 300000, 2048, dts[d], g, g % 2, 5, 3, g % 3 == 0 ? LTK_FLAG_UNSORTED : 0, 1);
            sc(2, 1 << 20, 8192, dts[d], g, g % 2, 0, 1, g % 3 == 1 ? LTK_FLAG_UNSORTED : 0, 1); /* largest fast k */
        }
    for (int g = 0; g < G_NGEN; g++) /* k = 8192, one CTA a row (rows > the 132 CTA slots) */
        sc(140, 60000, 8192, LTK_DTYPE_F32, g, 0, 0, 0, 0, 1);
    /* shapes and options */
    sc(300, 50000, 2048, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);          /* many rows, P = 1 */
    sc(600, 9000, 64, LTK_DTYPE_F32, G_RANDN, 1, 7, 1, 0, 1);             /* row fits the buffer */
    sc(1, 1 << 20, 2048, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);          /* 1 x 1M */
    sc(1, 1 << 20, 2048, LTK_DTYPE_F32, G_FLAT, 0, 0, 0, 0, 1);           /* flat 1 x 1M: fallback */
    sc(1, 3000000, 1, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);             /* k = 1 */
    sc(4, 1000, 1000, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);             /* k = cols */
    sc(4, 1000, 1500, LTK_DTYPE_BF16, G_RANDN, 0, 0, 0, 0, 1);            /* k > cols: padding */
    sc(4, 1000, 1500, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, LTK_FLAG_UNSORTED, 0); /* short rows, index order */
    sc(5, 0, 10, LTK_DTYPE_F32, G_RANDN, 0, 0, 0, 0, 1);                  /* cols = 0 */
    sc(30, 20000, 777, LTK_DTYPE_F16, G_RANDN, 2, 3, 5, LTK_FLAG_ABSOLUTE, 1); /* empty + full ranges */
    sc(30, 20000, 777, LTK_DTYPE_F32, G_SPECIAL, 1, 0, 0, LTK_FLAG_ABSOLUTE | LTK_FLAG_UNSORTED, 1);
    sc(8, 100000, 4096, LTK_DTYPE_F32, G_RANDN, 0, 1, 0, 0, 0);           /* largest fast k, no scores */
    sc(8, 100000, 4096, LTK_DTYPE_BF16, G_FEW, 0, 0, 0, 0, 1);
    sc(3, 200000, 8192, LTK_DTYPE_F32, G_RANDN, 1, 0, 0, 0, 1);           /* largest fast k */
    sc(3, 200000, 8192, LTK_DTYPE_F16, G_BUCKET, 0, 0, 0, LTK_FLAG_UNSORTED, 1);
    sc(3, 200000, 8193, LTK_DTYPE_F32, G_RANDN, 1, 0, 0, 0, 1);           /* general tier, smem sort */
    sc(3, 200000, 12000, LTK_DTYPE_F16, G_BUCKET, 0, 0, 0, LTK_FLAG_UNSORTED, 1);
    sc(2, 100000, 16384, LTK_DTYPE_BF16, G_FLAT, 0, 0, 0, 0, 1);
    sc(2, 50000, 20000, LTK_DTYPE_F32, G_RANDN, 0, 0, 2, 0, 1);           /* CUB sort */
    sc(2, 50000, 20000, LTK_DTYPE_F32, G_FEW, 0, 0, 0, LTK_FLAG_UNSORTED, 1);
    sc(2, 70000, 65536, LTK_DTYPE_F32, G_SPECIAL, 1, 0, 0, 0, 1);         /* k = 65536 */
    sc(3, 40000, 65536, LTK_DTYPE_BF16, G_RANDN, 0, 0, 0, 0, 1);          /* short rows, CUB sort */
    /* determinism: the same call twice gives the same bits (sorted output) */
    return 0;
}

static int bench(int argc, char **argv) {
    int64_t rows = atoll(argv[2]), cols = atoll(argv[3]), k = atoll(argv[4]);
    const char *dts = argv[5];
    int dt = !strcmp(dts, "f16") ? LTK_DTYPE_F16 : !strcmp(dts, "bf16") ? LTK_DTYPE_BF16 : LTK_DTYPE_F32;
    int flat = 0;
    uint32_t flags = 0;
    const char *json = NULL;
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "flat")) flat = 1;
        else if (!strcmp(argv[i], "unsorted")) flags |= LTK_FLAG_UNSORTED;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    }
    size_t es = esz(dt), nel = (size_t)rows * (size_t)cols;
    void *dsc = gu_alloc(nel * es);
    /* fill on the host in slices (random, or flat) */
    size_t slice = (size_t)1 << 24;
    unsigned char *h = malloc(slice * es);
    for (size_t o = 0; o < nel; o += slice) {
        size_t m = nel - o < slice ? nel - o : slice;
        for (size_t j = 0; j < m; j++) {
            float v = flat ? 0.25f : rng_normal();
            if (dt == LTK_DTYPE_F32) ((float *)h)[j] = v;
            else if (dt == LTK_DTYPE_F16) ((uint16_t *)h)[j] = t_f32_f16(v);
            else ((uint16_t *)h)[j] = t_f32_bf16(v);
        }
        GPU_CHECK(cudaMemcpy((char *)dsc + o * es, h, m * es, cudaMemcpyHostToDevice));
    }
    free(h);
    int32_t *doi = gu_alloc((size_t)rows * k * 4);
    float *dos = gu_alloc((size_t)rows * k * 4);
    ltk_select_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows;
    a.cols = cols;
    a.k = (int32_t)k;
    a.dtype = (ltk_dtype)dt;
    a.scores = dsc;
    a.row_stride = cols;
    a.out_idx = doi;
    a.out_scores = dos;
    a.out_stride = k;
    a.flags = flags;
    ltk_exec e;
    memset(&e, 0, sizeof e);
    size_t wsb = 0;
    if (ltk_cuda_select_workspace(&a, &e, &wsb) != LTK_OK) return 2;
    void *ws = gu_alloc(wsb);
    cudaEvent_t ev0, ev1;
    GPU_CHECK(cudaEventCreate(&ev0));
    GPU_CHECK(cudaEventCreate(&ev1));
    int reps = rows * cols > ((int64_t)1 << 31) ? 7 : 30;
    double t[64];
    for (int i = 0; i < 3; i++) ltk_cuda_select(&a, &e, ws, wsb);
    for (int i = 0; i < reps; i++) {
        GPU_CHECK(cudaEventRecord(ev0, 0));
        ltk_status s = ltk_cuda_select(&a, &e, ws, wsb);
        GPU_CHECK(cudaEventRecord(ev1, 0));
        GPU_CHECK(cudaEventSynchronize(ev1));
        if (s != LTK_OK) return 2;
        t[i] = now_ms_events(ev0, ev1);
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    ltk_stats st;
    memset(&st, 0, sizeof st);
    e.stats = &st;
    ltk_cuda_select(&a, &e, ws, wsb);
    char line[512];
    snprintf(line, sizeof line,
             "{\"op\": \"select\", \"backend\": \"cuda\", \"algo\": \"radix\", \"rows\": %lld, \"cols\": %lld, \"k\": %lld, "
             "\"dtype\": \"%s\", \"input\": \"%s\", \"sorted\": %s, \"median_ms\": %.4f, \"min_ms\": %.4f, \"aux_bytes\": %zu, "
             "\"fallback_rows\": %lld, \"candidates_max\": %lld, \"GBps\": %.1f}",
             (long long)rows, (long long)cols, (long long)k, dts, flat ? "flat" : "randn",
             (flags & LTK_FLAG_UNSORTED) ? "false" : "true", t[reps / 2], t[0], wsb, (long long)st.fallback_rows,
             (long long)st.candidates_max, (double)nel * es / (t[reps / 2] * 1e6));
    printf("%s\n", line);
    if (json) {
        FILE *f = fopen(json, "a");
        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        }
    }
    cudaFree(dsc);
    cudaFree(doi);
    cudaFree(dos);
    cudaFree(ws);
    return 0;
}

/* Same inputs twice -> same output bits, on a tie-heavy split row. */
static void determinism(void) {
    int64_t cols = 500000, k = 3000;
    float *h = malloc(sizeof(float) * (size_t)cols);
    for (int64_t j = 0; j < cols; j++) h[j] = (float)(rng_u64() % 50);
    float *d = gu_upload(h, sizeof(float) * (size_t)cols);
    int32_t *o1 = gu_alloc((size_t)k * 4), *o2 = gu_alloc((size_t)k * 4);
    int32_t *h1 = malloc((size_t)k * 4), *h2 = malloc((size_t)k * 4);
    ltk_select_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1;
    a.cols = cols;
    a.k = (int32_t)k;
    a.dtype = LTK_DTYPE_F32;
    a.scores = d;
    a.row_stride = cols;
    a.out_stride = k;
    ltk_exec e;
    memset(&e, 0, sizeof e);
    size_t wsb = 0;
    ltk_cuda_select_workspace(&a, &e, &wsb);
    void *ws = gu_alloc(wsb);
    a.out_idx = o1;
    ltk_cuda_select(&a, &e, ws, wsb);
    a.out_idx = o2;
    ltk_cuda_select(&a, &e, ws, wsb);
    GPU_CHECK(cudaMemcpy(h1, o1, (size_t)k * 4, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(h2, o2, (size_t)k * 4, cudaMemcpyDeviceToHost));
    CHECK(!memcmp(h1, h2, (size_t)k * 4), "determinism: two runs differ");
    /* ties at k: every selected entry is 49 and the indices are the lowest ones */
    int ok = 1;
    for (int64_t j = 1; j < k; j++)
        if (h1[j] <= h1[j - 1] && h[h1[j]] == h[h1[j - 1]]) ok = 0;
    CHECK(ok, "ties must come out in index order");
    free(h);
    free(h1);
    free(h2);
    cudaFree(d);
    cudaFree(o1);
    cudaFree(o2);
    cudaFree(ws);
}

static void select_small(void) {
    suite(1);
    tie_suite(1);
}
static void select_full(void) { suite(0); }
static void select_ties(void) { tie_suite(0); }
static void select_determinism(void) { determinism(); }

static const t_test tests[] = {T_ENTRY(select_small), T_ENTRY(select_full), T_ENTRY(select_ties),
                               T_ENTRY(select_determinism)};

int main(int argc, char **argv) {
    if (argc >= 6 && !strcmp(argv[1], "--bench")) return bench(argc, argv);
    char small[] = "small";
    if (argc > 1 && !strcmp(argv[1], "--small")) argv[1] = small; /* the sanitizers' few cases */
    return T_RUN_ISOLATED(tests, 600, gu_no_cuda);
}
