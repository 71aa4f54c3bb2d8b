/* test-candidates: DeepSeek-V4.1's candidate indexer (ltk_blocks_topk, ltk_candidates_topk) on
 * the ref and CPU backends against a brute force written here from the header alone: the indexer's scores
 * in float64, block scores as the largest score of a block's keys in the row (NaN below every
 * number), the ORDER with ties by the lower id, the newest-block pin, the identity rule, the
 * output orders, padding, listed ids in any order with repeats and padding; and the front end's
 * errors. Inputs lie on dyadic grids, so that every score is exact in float64 whatever the
 * summation order (the CPU's fp32 canonical scores too): every backend and the brute force must
 * agree bit for bit, and ties are frequent. On the CPU also: e4m3 inputs against its own indexer
 * (the same scores), and a caller's workspace. The CUDA backend: tests/cuda/test-cuda-candidates.c. */
#include "harness.h"

#include "litetopk.h"
#include "paged-cache.h"

enum { H = 3, D = 8 };

typedef struct { double s; int64_t i; } ent;

/* ORDER: score desc, NaN last, ties by the lower index. */
static int ent_cmp(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    const int na = isnan(a->s), nb = isnan(b->s);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}
static int ent_cmp_idx(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    return (a->i > b->i) - (a->i < b->i);
}

typedef struct {
    int64_t T, S;
    float *q, *kv, *w;
    int32_t *ks, *ke;
} inputs;

/* Grid values; key s is NaN in every dimension where nan_keys and s % 23 == 7. */
static void make_inputs(inputs *in, int64_t T, int64_t S, int nan_keys) {
    in->T = T, in->S = S;
    in->q = malloc(sizeof(float) * (size_t)(T * H * D + 1));
    in->kv = malloc(sizeof(float) * (size_t)(S * D + 1));
    in->w = malloc(sizeof(float) * (size_t)(T * H + 1));
    in->ks = malloc(sizeof(int32_t) * (size_t)(T + 1));
    in->ke = malloc(sizeof(int32_t) * (size_t)(T + 1));
    for (int64_t i = 0; i < T * H * D; i++) in->q[i] = (float)rng_range(-3, 3) * 0.5f;
    for (int64_t s = 0; s < S; s++)
        for (int d = 0; d < D; d++) in->kv[s * D + d] = nan_keys && s % 23 == 7 ? NAN : (float)rng_range(-2, 2);
    for (int64_t i = 0; i < T * H; i++) in->w[i] = (float)rng_range(-1, 2) * 0.5f;
    for (int64_t t = 0; t < T; t++) {
        int64_t a = S ? rng_below(S + 1) : 0, b = S ? rng_below(S + 1) : 0;
        if (rng_below(4) == 0) a = 0;
        if (a > b) { int64_t x = a; a = b; b = x; }
        in->ks[t] = (int32_t)a, in->ke[t] = (int32_t)b;
    }
}
static void free_inputs(inputs *in) { free(in->q), free(in->kv), free(in->w), free(in->ks), free(in->ke); }

static double brute_score(const inputs *in, int64_t t, int64_t s) {
    double acc = 0.0;
    for (int h = 0; h < H; h++) {
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += (double)in->q[(t * H + h) * D + d] * (double)in->kv[s * D + d];
        acc += (double)in->w[t * H + h] * (dot > 0.0 ? dot : (isnan(dot) ? dot : 0.0));
    }
    return acc;
}

static ltk_indexer_args ix_of(const inputs *in, int32_t k, int32_t *oi, float *os, uint32_t flags) {
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = in->T, a.S = in->S, a.H = H, a.D = D, a.k = k, a.dtype = LTK_DTYPE_F32;
    a.q = in->q, a.kv = in->kv, a.weights = in->w, a.ks = in->ks, a.ke = in->ke;
    a.out_idx = oi, a.out_scores = os, a.flags = flags;
    return a;
}
static ltk_exec ref_exec = {LTK_BACKEND_REF, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL}; /* the backend under test */
static const ltk_backend host_backends[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU};

/* The expected k outputs from n entries (ORDER, or by index), written as the library writes them. */
static void expect_row(ent *v, int64_t n, int32_t k, int by_index, int64_t base, int32_t *ei, float *es) {
    qsort(v, (size_t)n, sizeof *v, ent_cmp);
    if (by_index) qsort(v, (size_t)(n < k ? n : k), sizeof *v, ent_cmp_idx);
    for (int32_t j = 0; j < k; j++) {
        ei[j] = j < n ? (int32_t)(v[j].i - base) : -1;
        es[j] = j < n ? (float)v[j].s : -INFINITY;
    }
}

/* Compares a row; unsorted outputs as sets (both sorted by index; scores then follow their ids). */
static int same_row(const int32_t *gi, const float *gs, const int32_t *ei, const float *es, int32_t k, int unsorted,
                    const char *what, int64_t t) {
    int32_t *a = malloc(sizeof(int32_t) * (size_t)k), *b = malloc(sizeof(int32_t) * (size_t)k);
    memcpy(a, gi, sizeof(int32_t) * (size_t)k), memcpy(b, ei, sizeof(int32_t) * (size_t)k);
    int ok = 1;
    if (unsorted) {
        for (int32_t i = 1; i < k; i++) /* insertion sort: rows are short */
            for (int32_t j = i; j > 0 && (uint32_t)a[j - 1] > (uint32_t)a[j]; j--) { int32_t x = a[j]; a[j] = a[j - 1]; a[j - 1] = x; }
        for (int32_t i = 1; i < k; i++)
            for (int32_t j = i; j > 0 && (uint32_t)b[j - 1] > (uint32_t)b[j]; j--) { int32_t x = b[j]; b[j] = b[j - 1]; b[j - 1] = x; }
    }
    for (int32_t j = 0; j < k && ok; j++) ok = a[j] == b[j];
    if (ok && gs && !unsorted)
        for (int32_t j = 0; j < k && ok; j++) ok = t_same_f32(gs[j], es[j]);
    CHECK(ok, "%s: row %lld differs (slot 0: got %d, want %d)", what, (long long)t, gi[0], ei[0]);
    free(a), free(b);
    return ok;
}

/* ---- ltk_blocks_topk ------------------------------------------------------------------------ */
static void blocks_case(int64_t T, int64_t S, int32_t b, int32_t bk, int32_t k, uint32_t flags, int with_scores,
                        int nan_keys) {
    inputs in;
    make_inputs(&in, T, S, nan_keys);
    const int64_t stride = bk + 3;
    int32_t *ob = malloc(sizeof(int32_t) * (size_t)(T * stride + 1)), *oi = malloc(sizeof(int32_t) * (size_t)(T * (k + 1) + 1));
    float *obs = malloc(sizeof(float) * (size_t)(T * stride + 1)), *os = malloc(sizeof(float) * (size_t)(T * (k + 1) + 1));
    for (int64_t i = 0; i < T * stride; i++) ob[i] = 0x5a5a5a5a;
    ltk_blocks_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(&in, k, k ? oi : NULL, k && with_scores ? os : NULL, flags);
    a.block_size = b, a.block_k = bk, a.out_blocks = ob, a.out_block_scores = with_scores ? obs : NULL, a.blocks_stride = stride;
    ltk_status st = ltk_blocks_topk(&a, &ref_exec);
    CHECK(st == LTK_OK, "blocks T=%lld S=%lld b=%d: %s", (long long)T, (long long)S, b, ltk_last_error());
    const int by = (flags & LTK_FLAG_BY_INDEX) != 0, uns = (flags & LTK_FLAG_UNSORTED) && !by;
    ent *v = malloc(sizeof(ent) * (size_t)(S + 1)), *bl = malloc(sizeof(ent) * (size_t)(S / b + 2) * 2); /* (nb <= S / b + 2) */
    int32_t *ei = malloc(sizeof(int32_t) * (size_t)(bk + k + 1));
    float *es = malloc(sizeof(float) * (size_t)(bk + k + 1));
    char what[160];
    snprintf(what, sizeof what, "%s blocks T=%lld S=%lld b=%d block_k=%d k=%d flags=0x%x scores=%d",
             ltk_backend_name(ref_exec.backend), (long long)T, (long long)S, b, bk, k, flags, with_scores);
    for (int64_t t = 0; st == LTK_OK && t < T; t++) {
        const int64_t lo = in.ks[t], hi = in.ke[t], n = hi - lo, j0 = lo / b, nb = n > 0 ? (hi - 1) / b - j0 + 1 : 0;
        if (nb <= bk && (flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) && !with_scores) {
            for (int32_t j = 0; j < bk; j++) ei[j] = j < nb ? (int32_t)(j0 + j) : -1;
            same_row(ob + t * stride, NULL, ei, NULL, bk, 0, what, t);
        } else {
            for (int64_t i = 0; i < nb; i++) {
                const int64_t j = j0 + i;
                double best = NAN;
                for (int64_t s = j * b; s < (j + 1) * b; s++)
                    if (s >= lo && s < hi) {
                        const double x = brute_score(&in, t, s);
                        if (!isnan(x) && (isnan(best) || x > best)) best = x;
                    }
                bl[i].s = best + 0.0, bl[i].i = j;
            }
            /* the pin: the newest block (full or partial) first, as +inf, before a real +inf of a lower id */
            int64_t pinned = (flags & LTK_FLAG_PIN_NEWEST) && nb > 0 ? (hi - 1) / b : -1;
            qsort(bl, (size_t)nb, sizeof *bl, ent_cmp);
            if (pinned >= 0) {
                int64_t at = 0;
                while (bl[at].i != pinned) at++;
                for (; at > 0; at--) bl[at] = bl[at - 1];
                bl[0].i = pinned, bl[0].s = INFINITY;
            }
            if (by) qsort(bl, (size_t)(nb < bk ? nb : bk), sizeof *bl, ent_cmp_idx);
            for (int32_t j = 0; j < bk; j++) {
                ei[j] = j < nb ? (int32_t)bl[j].i : -1;
                es[j] = j < nb ? (float)bl[j].s : -INFINITY;
            }
            same_row(ob + t * stride, with_scores ? obs + t * stride : NULL, ei, es, bk, uns, what, t);
        }
        for (int64_t j = bk; j < stride; j++) CHECK(ob[t * stride + j] == 0x5a5a5a5a, "%s: row %lld: wrote past block_k", what, (long long)t);
        if (k) { /* the ordinary top-k, from the same scores */
            const int64_t base = (flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
            if (n <= k && (flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) && !with_scores) {
                for (int32_t j = 0; j < k; j++) ei[j] = j < n ? (int32_t)(lo + j - base) : -1;
                same_row(oi + t * k, NULL, ei, NULL, k, 0, what, t);
            } else {
                for (int64_t s = lo; s < hi; s++) v[s - lo].s = brute_score(&in, t, s), v[s - lo].i = s;
                expect_row(v, n, k, by, base, ei, es);
                same_row(oi + t * k, with_scores ? os + t * k : NULL, ei, es, k, uns, what, t);
            }
        }
    }
    free(v), free(bl), free(ei), free(es), free(ob), free(oi), free(obs), free(os);
    free_inputs(&in);
}

static void blocks_vs_brute(void);
static void test_blocks_vs_brute(void) {
    for (int i = 0; i < 2; i++) {
        ref_exec.backend = host_backends[i];
        ref_exec.num_threads = i + 1;
        blocks_vs_brute();
    }
    ref_exec.backend = LTK_BACKEND_REF;
}
static void blocks_vs_brute(void) {
    static const uint32_t fl[] = {0, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX, LTK_FLAG_PIN_NEWEST,
                                  LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX, LTK_FLAG_ABSOLUTE | LTK_FLAG_UNSORTED};
    static const int32_t bs[] = {1, 3, 8, 16};
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < 4; i++) {
            blocks_case(9, rng_range(0, 300), bs[i], (int32_t)rng_range(1, 40), 0, fl[f], 1, 0);
            blocks_case(9, rng_range(1, 300), bs[i], (int32_t)rng_range(1, 40), (int32_t)rng_range(1, 30), fl[f], 1, 1);
            blocks_case(7, rng_range(1, 200), bs[i], (int32_t)rng_range(1, 60), 0, fl[f], 0, 0);
            blocks_case(7, rng_range(1, 200), bs[i], (int32_t)rng_range(1, 60), (int32_t)rng_range(1, 30), fl[f], 0, 1);
        }
    blocks_case(3, 0, 8, 4, 0, 0, 1, 0);                      /* no keys: every row empty */
    blocks_case(4, 64, 8, 8, 0, LTK_FLAG_PIN_NEWEST, 1, 0);   /* block_k = all blocks */
    blocks_case(4, 4096, 8, 2048, 512, LTK_FLAG_PIN_NEWEST, 1, 0); /* V4.1's shape, small */
}

/* ---- ltk_candidates_topk -------------------------------------------------------------------- */
static void candidates_case(int64_t T, int64_t S, int32_t b, int32_t nbl, int32_t k, uint32_t flags, int with_scores,
                            int nan_keys) {
    inputs in;
    make_inputs(&in, T, S, nan_keys);
    const int64_t nbk = (S + b - 1) / b, bstride = nbl + 2;
    int32_t *bl = malloc(sizeof(int32_t) * (size_t)(T * bstride + 1)), *oi = malloc(sizeof(int32_t) * (size_t)(T * k + 1));
    float *os = malloc(sizeof(float) * (size_t)(T * k + 1));
    for (int64_t i = 0; i < T * bstride; i++) { /* ids in any order, -1, repeats, out of range */
        const int64_t r = rng_below(10);
        bl[i] = r == 0 ? -1 : r == 1 ? (int32_t)(nbk + rng_below(3)) : r == 2 ? -7 : (int32_t)(nbk ? rng_below(nbk) : 0);
    }
    ltk_candidates_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(&in, k, oi, with_scores ? os : NULL, flags);
    a.block_size = b, a.n_blocks = nbl, a.blocks = bl, a.blocks_stride = bstride;
    ltk_status st = ltk_candidates_topk(&a, &ref_exec);
    char what[160];
    snprintf(what, sizeof what, "%s candidates T=%lld S=%lld b=%d n_blocks=%d k=%d flags=0x%x scores=%d",
             ltk_backend_name(ref_exec.backend), (long long)T, (long long)S, b, nbl, k, flags, with_scores);
    CHECK(st == LTK_OK, "%s: %s", what, ltk_last_error());
    const int by = (flags & LTK_FLAG_BY_INDEX) != 0, uns = (flags & LTK_FLAG_UNSORTED) && !by;
    ent *v = malloc(sizeof(ent) * (size_t)(S + 1));
    unsigned char *in_list = malloc((size_t)S + 1);
    int32_t *ei = malloc(sizeof(int32_t) * (size_t)k);
    float *es = malloc(sizeof(float) * (size_t)k);
    for (int64_t t = 0; st == LTK_OK && t < T; t++) {
        const int64_t lo = in.ks[t], hi = in.ke[t], base = (flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
        memset(in_list, 0, (size_t)S + 1);
        for (int32_t i = 0; i < nbl; i++) {
            const int64_t j = bl[t * bstride + i];
            if (j >= 0 && j < nbk)
                for (int64_t s = j * b; s < (j + 1) * b && s < S; s++) in_list[s] = 1;
        }
        int64_t n = 0;
        for (int64_t s = lo; s < hi; s++)
            if (in_list[s]) v[n].s = brute_score(&in, t, s), v[n++].i = s;
        if (n <= k && (flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) && !with_scores) {
            for (int32_t j = 0; j < k; j++) ei[j] = j < n ? (int32_t)(v[j].i - base) : -1;
            same_row(oi + t * k, NULL, ei, NULL, k, 0, what, t);
        } else {
            expect_row(v, n, k, by, base, ei, es);
            same_row(oi + t * k, with_scores ? os + t * k : NULL, ei, es, k, uns, what, t);
        }
    }
    free(v), free(in_list), free(ei), free(es), free(bl), free(oi), free(os);
    free_inputs(&in);
}

static void candidates_vs_brute(void);
static void test_candidates_vs_brute(void) {
    for (int i = 0; i < 2; i++) {
        ref_exec.backend = host_backends[i];
        ref_exec.num_threads = i + 1;
        candidates_vs_brute();
    }
    ref_exec.backend = LTK_BACKEND_REF;
}
static void candidates_vs_brute(void) {
    static const uint32_t fl[] = {0, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX, LTK_FLAG_ABSOLUTE, LTK_FLAG_ABSOLUTE | LTK_FLAG_BY_INDEX};
    static const int32_t bs[] = {1, 4, 8, 16};
    for (int f = 0; f < 5; f++)
        for (int i = 0; i < 4; i++) {
            candidates_case(9, rng_range(0, 400), bs[i], (int32_t)rng_range(1, 40), (int32_t)rng_range(1, 50), fl[f], 1, 0);
            candidates_case(9, rng_range(1, 400), bs[i], (int32_t)rng_range(1, 40), (int32_t)rng_range(1, 50), fl[f], 0, 1);
        }
    candidates_case(4, 8192, 8, 2048, 512, 0, 1, 0); /* V4.1's consumer shape, small */
}

/* Listing every block of the keys scores every key: the same bits as ltk_indexer_topk. */
static void all_blocks_is_indexer(void);
static void test_candidates_all_blocks_is_indexer(void) {
    for (int i = 0; i < 2; i++) {
        ref_exec.backend = host_backends[i];
        all_blocks_is_indexer();
    }
    ref_exec.backend = LTK_BACKEND_REF;
}
static void all_blocks_is_indexer(void) {
    inputs in;
    make_inputs(&in, 11, 500, 1);
    const int32_t k = 40, b = 8, nbl = (500 + b - 1) / b;
    int32_t *bl = malloc(sizeof(int32_t) * (size_t)(11 * nbl)), *o1 = malloc(sizeof(int32_t) * 11 * k), *o2 = malloc(sizeof(int32_t) * 11 * k);
    float *s1 = malloc(sizeof(float) * 11 * k), *s2 = malloc(sizeof(float) * 11 * k);
    for (int64_t t = 0; t < 11; t++)
        for (int32_t i = 0; i < nbl; i++) bl[t * nbl + i] = nbl - 1 - i; /* descending ids */
    ltk_candidates_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(&in, k, o1, s1, 0);
    a.block_size = b, a.n_blocks = nbl, a.blocks = bl;
    CHECK(ltk_candidates_topk(&a, &ref_exec) == LTK_OK, "candidates: %s", ltk_last_error());
    ltk_indexer_args x = ix_of(&in, k, o2, s2, 0);
    CHECK(ltk_indexer_topk(&x, &ref_exec) == LTK_OK, "indexer: %s", ltk_last_error());
    int same = 1;
    for (int64_t i = 0; i < 11 * k; i++) same &= o1[i] == o2[i] && t_same_f32(s1[i], s2[i]);
    CHECK(same, "all blocks listed != ltk_indexer_topk");
    free(bl), free(o1), free(o2), free(s1), free(s2);
    free_inputs(&in);
}

/* e4m3 keys and queries on the CPU: the publication's ordinary top-k and the all-blocks consumer
 * give its indexer's bits (the same kernels), and its blocks rank the block maxima of those scores. */
static void test_cpu_e4m3_is_indexer(void) {
    const int64_t T = 9, S = 3000;
    const int32_t k = 64, b = 8, bk = 100, nbl = (int32_t)((S + b - 1) / b);
    uint8_t *q = malloc((size_t)(T * H * D)), *kv = malloc((size_t)(S * D));
    float *w = malloc(sizeof(float) * (size_t)(T * H)), *sc = malloc(sizeof(float) * (size_t)S);
    int32_t ks[9], ke[9];
    for (int64_t i = 0; i < T * H * D; i++) q[i] = (uint8_t)(rng_below(2) << 7 | rng_range(0x28, 0x48));
    for (int64_t i = 0; i < S * D; i++) kv[i] = (uint8_t)(rng_below(2) << 7 | rng_range(0x28, 0x48));
    for (int64_t i = 0; i < T * H; i++) w[i] = (float)rng_normal();
    for (int64_t s = 0; s < S; s++) sc[s] = (float)rng_unit() + 0.5f;
    for (int64_t t = 0; t < T; t++) ks[t] = (int32_t)rng_below(100), ke[t] = (int32_t)(S - rng_below(300));
    int32_t *o1 = malloc(sizeof(int32_t) * T * k), *o2 = malloc(sizeof(int32_t) * T * k), *o3 = malloc(sizeof(int32_t) * T * k);
    int32_t *ob = malloc(sizeof(int32_t) * T * bk), *bl = malloc(sizeof(int32_t) * (size_t)(T * nbl)), *all = malloc(sizeof(int32_t) * (size_t)(T * S));
    float *s1 = malloc(sizeof(float) * T * k), *s2 = malloc(sizeof(float) * T * k), *s3 = malloc(sizeof(float) * T * k);
    float *obs = malloc(sizeof(float) * T * bk), *alls = malloc(sizeof(float) * (size_t)(T * S));
    for (int64_t i = 0; i < T * nbl; i++) bl[i] = (int32_t)(i % nbl);
    ltk_exec cpu = {LTK_BACKEND_CPU, LTK_ALGO_FUSED, NULL, NULL, 0, 2, NULL};
    ltk_indexer_args x;
    memset(&x, 0, sizeof x);
    x.T = T, x.S = S, x.H = H, x.D = D, x.k = k, x.dtype = LTK_DTYPE_E4M3, x.q = q, x.kv = kv, x.kv_scale = sc, x.weights = w;
    x.ks = ks, x.ke = ke, x.out_idx = o1, x.out_scores = s1;
    CHECK(ltk_indexer_topk(&x, &cpu) == LTK_OK, "cpu indexer: %s", ltk_last_error());
    ltk_blocks_args ba;
    memset(&ba, 0, sizeof ba);
    ba.ix = x, ba.ix.out_idx = o2, ba.ix.out_scores = s2;
    ba.block_size = b, ba.block_k = bk, ba.out_blocks = ob, ba.out_block_scores = obs;
    CHECK(ltk_blocks_topk(&ba, &cpu) == LTK_OK, "cpu blocks: %s", ltk_last_error());
    ltk_candidates_args ca;
    memset(&ca, 0, sizeof ca);
    ca.ix = x, ca.ix.out_idx = o3, ca.ix.out_scores = s3;
    ca.block_size = b, ca.n_blocks = nbl, ca.blocks = bl;
    CHECK(ltk_candidates_topk(&ca, &cpu) == LTK_OK, "cpu candidates: %s", ltk_last_error());
    int same = 1;
    for (int64_t i = 0; i < T * k; i++)
        same &= o1[i] == o2[i] && o1[i] == o3[i] && t_same_f32(s1[i], s2[i]) && t_same_f32(s1[i], s3[i]);
    CHECK(same, "cpu e4m3: blocks' top-k or the all-blocks consumer != the indexer");
    /* every score of each row (the indexer with k = the row), then the block maxima ranked here */
    ltk_indexer_args y = x;
    y.k = (int32_t)S, y.out_idx = all, y.out_scores = alls, y.flags = LTK_FLAG_ABSOLUTE;
    CHECK(ltk_indexer_topk(&y, &cpu) == LTK_OK, "cpu indexer, every key: %s", ltk_last_error());
    ent *blk = malloc(sizeof(ent) * (size_t)nbl);
    for (int64_t t = 0; t < T; t++) {
        const int64_t j0 = ks[t] / b, nb = (ke[t] - 1) / b - j0 + 1;
        for (int64_t i = 0; i < nb; i++) blk[i].s = NAN, blk[i].i = j0 + i;
        for (int64_t j = 0; j < ke[t] - ks[t]; j++) {
            ent *e = &blk[all[t * S + j] / b - j0];
            const double v = alls[t * S + j];
            if (!isnan(v) && (isnan(e->s) || v > e->s)) e->s = v;
        }
        qsort(blk, (size_t)nb, sizeof *blk, ent_cmp);
        int ok = 1;
        for (int32_t j = 0; j < bk && ok; j++) ok = ob[t * bk + j] == (j < nb ? (int32_t)blk[j].i : -1) && (j >= nb || t_same_f32(obs[t * bk + j], (float)blk[j].s));
        CHECK(ok, "cpu e4m3 blocks, row %lld: not the ranked maxima of the indexer's scores", (long long)t);
    }
    free(blk), free(q), free(kv), free(w), free(sc), free(o1), free(o2), free(o3), free(ob), free(bl), free(all);
    free(s1), free(s2), free(s3), free(obs), free(alls);
}

/* The CPU's fused publication alone (ltk_blocks_topk with k = 0) on e4m3 keys is screened
 * (candidates.c blocks_group: keys whose int8 bound is below a lower bound of the k-th best block
 * maximum are never scored); its blocks and scores must equal the exact path's (materialize) bit
 * for bit. Rows long enough for the screen (more blocks than published), block sizes that do and
 * do not divide a 64-key tile, every flag, and inputs that defeat it: duplicated keys (tied block
 * maxima), every key equal, a zero plateau (+0 and -0 scores under few positive ones), keys with
 * NaN, inf or zero scales, all-zero keys, a row shorter than its published blocks, and rows whose
 * strided sample sees only their best blocks (the prediction too high: the proof must catch it). */
static void test_cpu_screened_publication(void) {
    /* (k > 0: the row's own top-k with it, from the same screened scan) */
    enum { HS = 16, DS = 64 };
    static const int32_t bsz[] = {8, 16, 3, 64, 8, 5, 8};
    int rows_checked = 0;
    for (int it = 0; it < 30; it++) {
        const int32_t b = it >= 28 ? 8 : bsz[it % 7], kind = it >= 28 ? 7 : it % 7;
        /* kind 6: every 4th block high, 2048 blocks a row: a strided sample of 512 sees only those,
         * so the predicted start is too high and the proof must send the row to the exact path */
        const int64_t T = (int64_t)rng_range(1, 20), S = kind >= 6 ? 2048 * (int64_t)b : (int64_t)rng_range(3000, 24000);
        const int32_t bk = kind == 6 ? 1000 : kind == 7 ? 300 : (int32_t)rng_range(16, 400);
        const uint32_t flags = (uint32_t)(it % 4 == 1 ? LTK_FLAG_PIN_NEWEST : it % 4 == 2 ? LTK_FLAG_BY_INDEX | LTK_FLAG_PIN_NEWEST
                                          : it % 4 == 3 ? LTK_FLAG_UNSORTED : 0);
        uint8_t *q = malloc((size_t)(T * HS * DS)), *kv = malloc((size_t)(S * DS));
        float *w = malloc(sizeof(float) * (size_t)(T * HS)), *sc = malloc(sizeof(float) * (size_t)S);
        int32_t *ks = malloc(sizeof(int32_t) * (size_t)T), *ke = malloc(sizeof(int32_t) * (size_t)T);
        for (int64_t i = 0; i < T * HS * DS; i++) q[i] = (uint8_t)(rng_below(2) << 7 | rng_range(0x28, 0x48));
        for (int64_t i = 0; i < S * DS; i++) kv[i] = (uint8_t)(rng_below(2) << 7 | rng_range(0x28, 0x48));
        for (int64_t i = 0; i < T * HS; i++) w[i] = (float)rng_normal();
        if (kind == 3) { /* a zero plateau: non-positive heads, non-negative keys but 1 in 16 (+0 and -0 scores) */
            for (int64_t i = 0; i < T * HS * DS; i++) q[i] |= 0x80;
            for (int64_t i = 0; i < S * DS; i++)
                if ((i / DS) % 16 != 0) kv[i] &= 0x7f;
        }
        for (int64_t s = 0; s < S; s++) sc[s] = (float)rng_unit() + 0.5f;
        if (kind == 1) /* duplicated keys: 1 in 16 rows a copy of an earlier one */
            for (int64_t s = 64; s < S; s++)
                if (rng_below(16) == 0) memcpy(kv + s * DS, kv + rng_below(s) * DS, DS), sc[s] = 1.0f;
        if (kind == 2) /* every key and scale equal */
            for (int64_t s = 1; s < S; s++) memcpy(kv + s * DS, kv, DS), sc[s] = sc[0];
        if (kind == 4)
            for (int64_t s = 0; s < S; s++) {
                const int64_t r = rng_below(40);
                if (r == 0) sc[s] = NAN;
                else if (r == 1) sc[s] = INFINITY;
                else if (r == 2) sc[s] = 0.0f;
                else if (r == 3) memset(kv + s * DS, 0, DS);
            }
        if (kind == 5) /* one row's key range shorter than its published blocks: the exact path */
            for (int64_t s = 0; s < S; s++) sc[s] = (float)(1 + (s % 3));
        if (kind == 6)
            for (int64_t s = 0; s < S; s++)
                for (int d = 0; d < DS; d++)
                    kv[s * DS + d] = (uint8_t)((s / b) % 4 == 0 ? rng_range(0x40, 0x50) : rng_range(0x20, 0x28)), sc[s] = 1.0f;
        if (kind == 7) /* kind 7: every block's first key the same top key, the sampled blocks' others just
                        * below it, the rest low: block maxima all tie (the blocks' proof holds) while
                        * the keys' sample is too good, so only the keys' proof sends the row back */
            for (int64_t s = 0; s < S; s++)
                for (int d = 0; d < DS; d++)
                    kv[s * DS + d] = (uint8_t)(s % b == 0 ? 0x56 : (s / b) % 4 == 0 ? rng_range(0x48, 0x50) : rng_range(0x20, 0x28)),
                    sc[s] = 1.0f;
        if (kind >= 6) {
            for (int64_t i = 0; i < T * HS * DS; i++) q[i] &= 0x7f; /* positive heads and weights: higher keys score higher */
            for (int64_t i = 0; i < T * HS; i++) w[i] = fabsf(w[i]);
        }
        for (int64_t t = 0; t < T; t++) {
            ks[t] = (int32_t)rng_below(S / 4);
            ke[t] = (int32_t)(S - rng_below(S / 4));
            if (kind == 5 && t == 0) ke[t] = ks[t] + (int32_t)rng_range(1, b * bk);
            if (kind >= 6) ks[t] = 0, ke[t] = (int32_t)S;
        }
        ltk_indexer_args x;
        memset(&x, 0, sizeof x);
        x.T = T, x.S = S, x.H = HS, x.D = DS, x.k = 0, x.dtype = LTK_DTYPE_E4M3, x.q = q, x.kv = kv, x.kv_scale = sc;
        x.weights = w, x.ks = ks, x.ke = ke, x.flags = flags;
        /* two cases in three also ask for the row's own top-k (the publication's one call), with every flag */
        const int32_t k = kind == 7 ? 3000 : it % 3 ? (int32_t)rng_range(1, 300) : 0;
        x.k = k, x.out_stride = k;
        int32_t *ob[2], *oi[2];
        float *os[2], *ok[2];
        for (int v = 0; v < 2; v++) {
            ob[v] = malloc(sizeof(int32_t) * (size_t)(T * bk)), os[v] = malloc(sizeof(float) * (size_t)(T * bk));
            oi[v] = malloc(sizeof(int32_t) * (size_t)(T * k + 1)), ok[v] = malloc(sizeof(float) * (size_t)(T * k + 1));
            for (int64_t i = 0; i < T * bk; i++) ob[v][i] = -7, os[v][i] = 12345.0f; /* poison */
            for (int64_t i = 0; i < T * k; i++) oi[v][i] = -7, ok[v][i] = 12345.0f;
            ltk_blocks_args ba;
            memset(&ba, 0, sizeof ba);
            ba.ix = x, ba.block_size = b, ba.block_k = bk, ba.out_blocks = ob[v], ba.out_block_scores = os[v];
            ba.ix.out_idx = k ? oi[v] : NULL, ba.ix.out_scores = k ? ok[v] : NULL;
            ltk_exec e = {LTK_BACKEND_CPU, v ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED, NULL, NULL, 0, 2, NULL};
            CHECK(ltk_blocks_topk(&ba, &e) == LTK_OK, "cpu blocks (%s): %s", v ? "materialize" : "fused", ltk_last_error());
        }
        for (int64_t t = 0; t < T; t++) {
            int same = 1;
            for (int32_t j = 0; j < bk; j++)
                same &= ob[0][t * bk + j] == ob[1][t * bk + j] && t_same_f32(os[0][t * bk + j], os[1][t * bk + j]);
            for (int32_t j = 0; j < k; j++)
                same &= oi[0][t * k + j] == oi[1][t * k + j] && t_same_f32(ok[0][t * k + j], ok[1][t * k + j]);
            if (!CHECK(same, "screened publication != exact: case %d (kind %d, b %d, block_k %d, k %d, flags %u), row %lld", it,
                       kind, b, bk, k, flags, (long long)t))
                break;
            rows_checked++;
        }
        free(q), free(kv), free(w), free(sc), free(ks), free(ke);
        for (int v = 0; v < 2; v++) free(ob[v]), free(os[v]), free(oi[v]), free(ok[v]);
        if (T_FAILURES()) break;
    }
    CHECK(rows_checked > 30, "only %d rows checked", rows_checked);
}

/* ---- errors --------------------------------------------------------------------------------- */
static void test_bad_args(void) {
    inputs in;
    make_inputs(&in, 4, 100, 0);
    int32_t ob[64], oi[64], bl[64];
    for (int i = 0; i < 64; i++) bl[i] = i;
    ltk_blocks_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(&in, 0, NULL, NULL, 0);
    a.block_size = 8, a.block_k = 4, a.out_blocks = ob;
    CHECK(ltk_blocks_topk(&a, &ref_exec) == LTK_OK, "blocks only: %s", ltk_last_error());
#define BAD_B(field, value, want)                                                        \
    do {                                                                                 \
        ltk_blocks_args b2 = a;                                                          \
        b2.field = value;                                                                \
        ltk_status st_ = ltk_blocks_topk(&b2, &ref_exec);                                \
        CHECK(st_ == (want), "blocks %s = %s: status %d (%s)", #field, #value, (int)st_, ltk_last_error()); \
    } while (0)
    BAD_B(block_size, 0, LTK_EINVAL);
    BAD_B(block_size, LTK_BLOCK_MAX_SIZE + 1, LTK_EINVAL);
    BAD_B(block_k, 0, LTK_EINVAL);
    BAD_B(block_k, LTK_BLOCKS_MAX_K + 1, LTK_EINVAL);
    BAD_B(out_blocks, NULL, LTK_EINVAL);
    BAD_B(blocks_stride, 2, LTK_EINVAL);
    BAD_B(ix.out_idx, oi, LTK_EINVAL);          /* k = 0 with an output */
    BAD_B(ix.k, 5, LTK_EINVAL);                 /* k with no output */
    BAD_B(ix.k, LTK_INDEXER_MAX_K + 1, LTK_EINVAL);
    BAD_B(ix.flags, 0x100u, LTK_EINVAL);
    BAD_B(ix.H, 0, LTK_EINVAL);
    BAD_B(ix.ke, NULL, LTK_EINVAL);             /* ks without ke */
    BAD_B(ix.state, (ltk_indexer_state *)bl, LTK_EINVAL);
    {
        ltk_blocks_args b2 = a;
        int32_t bad_ke[4] = {10, 10, 10, 101}; /* beyond S */
        b2.ix.ke = bad_ke;
        CHECK(ltk_blocks_topk(&b2, &ref_exec) == LTK_EINVAL, "blocks: a range past S accepted");
    }
    CHECK(ltk_blocks_topk(NULL, &ref_exec) == LTK_EINVAL, "blocks: NULL args accepted");
    ltk_candidates_args c;
    memset(&c, 0, sizeof c);
    c.ix = ix_of(&in, 5, oi, NULL, 0);
    c.block_size = 8, c.n_blocks = 13, c.blocks = bl;
    CHECK(ltk_candidates_topk(&c, &ref_exec) == LTK_OK, "candidates: %s", ltk_last_error());
#define BAD_C(field, value, want)                                                        \
    do {                                                                                 \
        ltk_candidates_args c2 = c;                                                      \
        c2.field = value;                                                                \
        ltk_status st_ = ltk_candidates_topk(&c2, &ref_exec);                            \
        CHECK(st_ == (want), "candidates %s = %s: status %d (%s)", #field, #value, (int)st_, ltk_last_error()); \
    } while (0)
    BAD_C(block_size, 0, LTK_EINVAL);
    BAD_C(n_blocks, 0, LTK_EINVAL);
    BAD_C(n_blocks, LTK_BLOCKS_MAX_K + 1, LTK_EINVAL);
    BAD_C(blocks, NULL, LTK_EINVAL);
    BAD_C(blocks_stride, 3, LTK_EINVAL);
    BAD_C(ix.k, 0, LTK_EINVAL);
    BAD_C(ix.out_idx, NULL, LTK_EINVAL);
    BAD_C(ix.flags, LTK_FLAG_PIN_NEWEST, LTK_EINVAL); /* a blocks-only flag */
    /* no rows: nothing to do, on both host backends */
    for (int i = 0; i < 2; i++) {
        ltk_exec ex = ref_exec;
        ex.backend = host_backends[i];
        ltk_blocks_args b0 = a;
        b0.ix.T = 0;
        ltk_candidates_args c0 = c;
        c0.ix.T = 0;
        CHECK(ltk_blocks_topk(&b0, &ex) == LTK_OK && ltk_candidates_topk(&c0, &ex) == LTK_OK, "T = 0 on %s: %s",
              ltk_backend_name(ex.backend), ltk_last_error());
    }
    /* the CPU's workspace: the size query, a caller's buffer, one byte short refused */
    {
        ltk_exec cpu = ref_exec;
        cpu.backend = LTK_BACKEND_CPU;
        size_t need = 0;
        CHECK(ltk_blocks_workspace_size(&a, &cpu, &need) == LTK_OK && need > 0, "cpu blocks workspace: %s", ltk_last_error());
        void *ws = malloc(need);
        cpu.workspace = ws, cpu.workspace_bytes = need;
        CHECK(ltk_blocks_topk(&a, &cpu) == LTK_OK, "cpu blocks with a workspace: %s", ltk_last_error());
        cpu.workspace_bytes = need - 1;
        CHECK(ltk_blocks_topk(&a, &cpu) == LTK_EWORKSPACE, "cpu blocks: a short workspace accepted");
        free(ws);
    }
    size_t bytes = 1;
    CHECK(ltk_blocks_workspace_size(&a, &ref_exec, &bytes) == LTK_OK && bytes == 0, "blocks workspace on ref");
    CHECK(ltk_candidates_workspace_size(&c, &ref_exec, NULL) == LTK_EINVAL, "candidates workspace: NULL bytes accepted");
    free_inputs(&in);
}

/* ---- the decode forms ------------------------------------------------------------------------ */
/* ltk_decode_blocks_topk and ltk_decode_candidates_topk over a paged cache of grid codes against
 * the prefill forms (checked against the brute force above) on each request's keys, laid out
 * contiguously here from the cache as the test built it, with ks = 0, ke = the rows' lengths;
 * physical slots mapped here from the table. Both host backends, every flag. */
typedef struct dprob {
    int B, next_n, H, D, block_kv, max_len, max_blocks;
    int64_t num_blocks, block_stride, bt_stride, rows;
    uint8_t *cache, *q;
    int32_t *table, *lens, *seq;
    float *w;
} dprob;

static void dprob_make(dprob *p, int B, int next_n, int block_kv, int max_len) {
    memset(p, 0, sizeof *p);
    p->B = B, p->next_n = next_n, p->H = 4, p->D = 16, p->block_kv = block_kv, p->max_len = max_len;
    p->rows = (int64_t)B * next_n;
    p->max_blocks = (max_len + block_kv - 1) / block_kv;
    p->num_blocks = (int64_t)B * p->max_blocks + 2;
    p->block_stride = (int64_t)block_kv * (p->D + 4);
    p->cache = malloc((size_t)(p->num_blocks * p->block_stride));
    pc_fill_blocks(p->cache, p->num_blocks, p->block_stride, block_kv, p->D, 0, 1, 0);
    p->bt_stride = p->max_blocks + 1;
    p->table = pc_table(B, p->max_blocks, p->num_blocks, p->bt_stride);
    p->lens = malloc(sizeof(int32_t) * (size_t)p->rows), p->seq = malloc(sizeof(int32_t) * (size_t)B);
    pc_lens(B, next_n, 0, 8, max_len, p->seq, p->lens);
    p->q = malloc((size_t)(p->rows * p->H * p->D));
    for (int64_t x = 0; x < p->rows * p->H * p->D; x++) p->q[x] = pc_grid_code();
    p->w = malloc(sizeof(float) * (size_t)(p->rows * p->H));
    for (int64_t x = 0; x < p->rows * p->H; x++) p->w[x] = (float)rng_range(-8, 8) * 0.25f;
}
static void dprob_free(dprob *p) { free(p->cache), free(p->table), free(p->lens), free(p->seq), free(p->q), free(p->w); }

static ltk_decode_args dprob_dx(const dprob *p, int32_t k, int32_t *oi, float *os, int64_t out_stride, uint32_t flags) {
    ltk_decode_args d;
    memset(&d, 0, sizeof d);
    d.B = p->B, d.next_n = p->next_n, d.H = p->H, d.D = p->D, d.k = k, d.dtype = LTK_DTYPE_E4M3, d.q = p->q;
    d.kv_cache = p->cache, d.num_blocks = p->num_blocks, d.block_kv = p->block_kv, d.block_stride = p->block_stride;
    d.block_table = p->table, d.bt_stride = p->bt_stride, d.max_blocks = p->max_blocks, d.lens = p->lens;
    d.max_len = p->max_len, d.weights = p->w, d.out_idx = oi, d.out_scores = os, d.out_stride = out_stride;
    d.flags = flags;
    return d;
}

/* Request b's rows as a prefill problem over its keys laid out contiguously (kv, scale: max_len). */
static ltk_indexer_args dprob_ix(const dprob *p, int b, uint8_t *kv, float *scale, int32_t *ks, int32_t *ke, int32_t k,
                                 int32_t *oi, float *os, int64_t out_stride, uint32_t flags) {
    for (int i = 0; i < p->max_len; i++) {
        const int32_t blk = p->table[b * p->bt_stride + i / p->block_kv];
        const uint8_t *base = p->cache + blk * p->block_stride;
        memcpy(kv + (size_t)i * p->D, base + (size_t)(i % p->block_kv) * p->D, (size_t)p->D);
        memcpy(&scale[i], base + (size_t)p->block_kv * p->D + 4 * (size_t)(i % p->block_kv), 4);
    }
    for (int r = 0; r < p->next_n; r++) ks[r] = 0, ke[r] = p->lens[b * p->next_n + r];
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = p->next_n, a.S = p->max_len, a.H = p->H, a.D = p->D, a.k = k, a.dtype = LTK_DTYPE_E4M3;
    a.q = p->q + (size_t)b * p->next_n * p->H * p->D, a.kv = kv, a.kv_scale = scale;
    a.weights = p->w + (size_t)b * p->next_n * p->H, a.ks = ks, a.ke = ke;
    a.out_idx = oi, a.out_scores = os, a.out_stride = out_stride, a.flags = flags | LTK_FLAG_ABSOLUTE;
    return a;
}

static void to_slots(const dprob *p, int b, int32_t *row, int32_t k) {
    for (int32_t j = 0; j < k; j++)
        if (row[j] >= 0) row[j] = p->table[b * p->bt_stride + row[j] / p->block_kv] * p->block_kv + row[j] % p->block_kv;
}

static void decode_forms_case(int B, int next_n, int block_kv, int max_len, int32_t bsz, int32_t nblk, int32_t k,
                              uint32_t flags, int scores, ltk_backend be) {
    test_ctx("decode forms B=%d next_n=%d block_kv=%d max_len=%d b=%d blocks=%d k=%d flags=0x%x scores=%d on %s", B,
             next_n, block_kv, max_len, bsz, nblk, k, flags, scores, ltk_backend_name(be));
    dprob p;
    dprob_make(&p, B, next_n, block_kv, max_len);
    const int64_t R = p.rows, os_ = k + 1, bs_ = nblk + 2;
    int32_t *gi = malloc(sizeof(int32_t) * (size_t)(R * os_)), *gb = malloc(sizeof(int32_t) * (size_t)(R * bs_));
    float *gs = malloc(sizeof(float) * (size_t)(R * os_)), *gbs = malloc(sizeof(float) * (size_t)(R * bs_));
    int32_t *ei = malloc(sizeof(int32_t) * (size_t)(next_n * os_)), *eb = malloc(sizeof(int32_t) * (size_t)(next_n * bs_));
    float *es = malloc(sizeof(float) * (size_t)(next_n * os_)), *ebs = malloc(sizeof(float) * (size_t)(next_n * bs_));
    uint8_t *kv = malloc((size_t)max_len * p.D + 1);
    float *scale = malloc(sizeof(float) * (size_t)max_len + 4);
    int32_t ks[8], ke[8];
    const int64_t nbk = (max_len + bsz - 1) / bsz;
    int32_t *lists = malloc(sizeof(int32_t) * (size_t)(R * nblk));
    for (int64_t x = 0; x < R * nblk; x++) {
        const int64_t u = rng_below(12);
        lists[x] = u == 0 ? -1 : u == 1 ? (int32_t)(nbk + rng_below(4)) : (int32_t)rng_below(nbk > 0 ? nbk : 1);
    }
    ltk_exec e = {be, LTK_ALGO_FUSED, NULL, NULL, 0, 2, NULL};
    const uint32_t pf = flags & ~LTK_FLAG_PHYSICAL, uns = (flags & LTK_FLAG_UNSORTED) && !(flags & LTK_FLAG_BY_INDEX);
    /* publication */
    memset(gb, 0x5a, sizeof(int32_t) * (size_t)(R * bs_)), memset(gi, 0x5a, sizeof(int32_t) * (size_t)(R * os_));
    ltk_decode_blocks_args da;
    memset(&da, 0, sizeof da);
    da.dx = dprob_dx(&p, k, k ? gi : NULL, k && scores ? gs : NULL, k ? os_ : 0, flags);
    da.block_size = bsz, da.block_k = nblk, da.out_blocks = gb, da.out_block_scores = scores ? gbs : NULL;
    da.blocks_stride = bs_;
    ltk_status st = ltk_decode_blocks_topk(&da, &e);
    CHECK(st == LTK_OK, "decode blocks: %s", ltk_last_error());
    for (int b = 0; b < B && st == LTK_OK; b++) {
        ltk_blocks_args ba;
        memset(&ba, 0, sizeof ba);
        ba.ix = dprob_ix(&p, b, kv, scale, ks, ke, k, k ? ei : NULL, k && scores ? es : NULL, k ? os_ : 0,
                         pf & ~LTK_FLAG_PIN_NEWEST);
        ba.ix.flags |= pf & LTK_FLAG_PIN_NEWEST;
        ba.block_size = bsz, ba.block_k = nblk, ba.out_blocks = eb, ba.out_block_scores = scores ? ebs : NULL;
        ba.blocks_stride = bs_;
        ltk_exec re = {LTK_BACKEND_REF, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL};
        if (!CHECK(ltk_blocks_topk(&ba, &re) == LTK_OK, "prefill blocks: %s", ltk_last_error())) break;
        for (int r = 0; r < next_n; r++) {
            const int64_t t = (int64_t)b * next_n + r;
            if (k && (flags & LTK_FLAG_PHYSICAL)) to_slots(&p, b, ei + r * os_, k);
            same_row(gb + t * bs_, scores ? gbs + t * bs_ : NULL, eb + r * bs_, ebs + r * bs_, nblk, uns, "decode blocks", t);
            if (k) same_row(gi + t * os_, scores ? gs + t * os_ : NULL, ei + r * os_, es + r * os_, k, uns, "decode blocks' top-k", t);
        }
    }
    /* consumer */
    if (k) {
        memset(gi, 0x5a, sizeof(int32_t) * (size_t)(R * os_));
        ltk_decode_candidates_args dc;
        memset(&dc, 0, sizeof dc);
        dc.dx = dprob_dx(&p, k, gi, scores ? gs : NULL, os_, flags & ~LTK_FLAG_PIN_NEWEST);
        dc.block_size = bsz, dc.n_blocks = nblk, dc.blocks = lists, dc.blocks_stride = nblk;
        st = ltk_decode_candidates_topk(&dc, &e);
        CHECK(st == LTK_OK, "decode candidates: %s", ltk_last_error());
        for (int b = 0; b < B && st == LTK_OK; b++) {
            ltk_candidates_args ca;
            memset(&ca, 0, sizeof ca);
            ca.ix = dprob_ix(&p, b, kv, scale, ks, ke, k, ei, scores ? es : NULL, os_, pf & ~LTK_FLAG_PIN_NEWEST);
            ca.block_size = bsz, ca.n_blocks = nblk, ca.blocks = lists + (size_t)b * next_n * nblk, ca.blocks_stride = nblk;
            ltk_exec re = {LTK_BACKEND_REF, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL};
            if (!CHECK(ltk_candidates_topk(&ca, &re) == LTK_OK, "prefill candidates: %s", ltk_last_error())) break;
            for (int r = 0; r < next_n; r++) {
                const int64_t t = (int64_t)b * next_n + r;
                if (flags & LTK_FLAG_PHYSICAL) to_slots(&p, b, ei + r * os_, k);
                same_row(gi + t * os_, scores ? gs + t * os_ : NULL, ei + r * os_, es + r * os_, k, uns,
                         "decode candidates", t);
            }
        }
    }
    free(gi), free(gb), free(gs), free(gbs), free(ei), free(eb), free(es), free(ebs), free(kv), free(scale), free(lists);
    dprob_free(&p);
}

static void test_decode_forms(void) {
    static const uint32_t fl[] = {0, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX, LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX,
                                  LTK_FLAG_PHYSICAL, LTK_FLAG_PHYSICAL | LTK_FLAG_PIN_NEWEST | LTK_FLAG_UNSORTED};
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 6; f++) {
            decode_forms_case(3, 2, 16, 300, 8, 12, 20, fl[f], f % 2, host_backends[i]);
            decode_forms_case(2, 1, 32, 500, 16, 40, 0, fl[f] & ~LTK_FLAG_PHYSICAL, 1, host_backends[i]);
            decode_forms_case(4, 3, 16, 200, 3, 30, 64, fl[f], (f + 1) % 2, host_backends[i]); /* b does not divide block_kv */
        }
    /* the CUDA decode consumer takes blocks that tile the cache's pages only: else it says so
     * before touching memory (both decode forms on CUDA: test-cuda-candidates) */
    if (ltk_backend_available(LTK_BACKEND_CUDA)) {
        dprob p;
        dprob_make(&p, 1, 1, 16, 64);
        int32_t out[64], list[4] = {0, 1, 2, 3};
        ltk_decode_candidates_args dc;
        memset(&dc, 0, sizeof dc);
        dc.dx = dprob_dx(&p, 8, out, NULL, 0, 0);
        dc.block_size = 3, dc.n_blocks = 4, dc.blocks = list;
        ltk_exec cu = {LTK_BACKEND_CUDA, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL};
        CHECK(ltk_decode_candidates_topk(&dc, &cu) == LTK_EUNSUPPORTED,
              "decode candidates of 3-token blocks in 16-token pages on CUDA: not LTK_EUNSUPPORTED");
        dprob_free(&p);
    }
    /* the host backends' workspace query: 0 (their gather buffers are the call's) */
    {
        dprob p;
        dprob_make(&p, 2, 1, 16, 64);
        int32_t out[256];
        ltk_decode_blocks_args da;
        memset(&da, 0, sizeof da);
        da.dx = dprob_dx(&p, 0, NULL, NULL, 0, 0);
        da.block_size = 8, da.block_k = 4, da.out_blocks = out;
        ltk_exec ce = {LTK_BACKEND_CPU, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL};
        size_t need = 1;
        CHECK(ltk_decode_blocks_workspace_size(&da, &ce, &need) == LTK_OK && need == 0, "cpu decode blocks workspace: %zu",
              need);
        da.block_k = 0;
        CHECK(ltk_decode_blocks_topk(&da, &ce) == LTK_EINVAL, "block_k = 0 accepted");
        dprob_free(&p);
    }
}

int main(int argc, char **argv) {
    static const t_test tests[] = {T_ENTRY(test_blocks_vs_brute), T_ENTRY(test_candidates_vs_brute),
                                   T_ENTRY(test_candidates_all_blocks_is_indexer), T_ENTRY(test_cpu_e4m3_is_indexer),
                                   T_ENTRY(test_cpu_screened_publication),
                                   T_ENTRY(test_bad_args), T_ENTRY(test_decode_forms)};
    return T_RUN_ALL(tests);
}
