/* The CPU int8 screens (the indexer's, src/cpu/indexer.c, and the kNN's, src/cpu/knn.c) against the
 * exact kernels, key by key (pair by pair): the
 * screen may drop a key only if its canonical score is below the edge, so with the edge set to the
 * key's own exact score every key must survive. The end-to-end tests (test-backends) cannot see a
 * bound that is too small by a constant factor, because on ordinary inputs the int8 error is a small
 * part of the bound; here the query heads are aligned with one key's quantisation residual, which
 * makes the first term of the bound (|q| R_k) nearly tight for that key. Skipped without AVX-512
 * VNNI (the screens are then never used). */
#include "harness.h"

#include "../src/cpu/cpu-impl.h"
#include "decode.h"

#define NK LTKC_IDX_NK


typedef struct {
    int H, D;
    uint8_t *q, *kv; /* [H][D], [NK][D] */
    float *w, *kvs;  /* [H], [NK] */
} scase;

/* Exact canonical scores of the case's keys (the kernel table's bf16 path) and the screen's verdict
 * at edge = each key's own score; returns the keys the screen wrongly drops, or -1 if the row is not
 * screened. */
static int check_case(const scase *c, int *screened_keys) {
    const ltkc_kern *K = ltkc_kernels();
    const int H = c->H, D = c->D, D4 = (D + 3) / 4;
    ltkc_idx_geom g = {H, D, K->has_bf16, K->has_bf16 ? (D + 1) / 2 : D};
    void *qrow = calloc((size_t)H * (size_t)g.dp + 16, 4);
    void *tile = calloc(ltkc_idx_tile_bytes(&g), 1);
    float exact[NK];
    K->idx_pack_q(c->q, LTK_DTYPE_E4M3, &g, qrow);
    K->idx_pack_tile(c->kv, LTK_DTYPE_E4M3, D, NULL, 0, NK, &g, tile);
    K->idx_score(qrow, c->w, tile, c->kvs, &g, exact);

    float *xf = malloc(sizeof(float) * (size_t)NK * (size_t)D);
    uint32_t *q4 = calloc((size_t)H * D4, 4), *t8 = calloc((size_t)4 * D4 * 16, 4);
    int32_t *corr = calloc((size_t)H, 4), hs = 0;
    float *wq = calloc((size_t)H, 4), rcon[4], kxn[NK], kxs[NK], kxr2[NK], kb[3 * NK];
    int bad = -1;
    if (ltkc_idx8_row(K, c->q, c->w, H, D, xf, q4, corr, wq, rcon, &hs)) {
        ltkc_idx8_keys(K, c->kv, D, c->kvs, 0, NK, D, t8, kxn, kxs, kxr2, kb);
        bad = 0;
        for (int j = 0; j < NK; j++) {
            if (exact[j] != exact[j]) continue; /* NaN never passes a gate */
            uint64_t m = K->idx8_screen(q4, corr, wq, hs, D, t8, kb, rcon, exact[j], NULL, 0);
            if (!CHECK((m >> j) & 1, "key %d dropped: exact %.9g (c1 %g, |k| %g, R %g)", j, exact[j], kb[j], kb[NK + j],
                       kb[2 * NK + j]))
                bad++;
            if (kb[j] == kb[j]) (*screened_keys)++;
        }
    }
    free(qrow), free(tile), free(xf), free(q4), free(t8), free(corr), free(wq);
    return bad;
}

static int screen_available(void) {
    const ltkc_kern *K = ltkc_kernels();
    if (K->idx8_screen && K->idx8_pack_keys && K->idx8_pack_query && K->has_bf16 && ltkc_cpu_idx8()) return 1;
    printf("    skipped: no AVX-512 VNNI + BF16 kernels on this CPU (the screen is never used)\n");
    return 0;
}

static void case_alloc(scase *c, int H, int D) {
    c->H = H, c->D = D;
    c->q = malloc((size_t)H * D);
    c->kv = malloc((size_t)NK * D);
    c->w = malloc(sizeof(float) * (size_t)H);
    c->kvs = malloc(sizeof(float) * NK);
}
static void case_free(scase *c) { free(c->q), free(c->kv), free(c->w), free(c->kvs); }

/* Random keys (Gaussian-like e4m3 with a per-key spread), random heads, weights of both signs. */
static void fill_random(scase *c) {
    for (int j = 0; j < NK; j++) {
        float sig = (float)exp(0.8 * rng_normal());
        for (int d = 0; d < c->D; d++) c->kv[j * c->D + d] = t_f32_e4m3((float)rng_normal() * sig);
        c->kvs[j] = (float)ldexp(1.0 + rng_unit(), (int)rng_range(-8, 2));
    }
    for (int h = 0; h < c->H; h++) {
        float sig = (float)exp(0.5 * rng_normal());
        for (int d = 0; d < c->D; d++) c->q[h * c->D + d] = t_f32_e4m3((float)rng_normal() * sig);
        c->w[h] = (float)(rng_normal() * 0.7 + 0.3);
    }
}

static void screen_random(void) {
    if (!screen_available()) return;
    int screened = 0;
    for (int it = 0; it < 60; it++) {
        scase c;
        case_alloc(&c, (int)rng_range(1, 70), (int)(4 * rng_range(4, 40)));
        fill_random(&c);
        check_case(&c, &screened);
        case_free(&c);
    }
    CHECK(screened > 1000, "only %d keys screened", screened);
}

/* Every head points along key j0's int8 residual r = k - s k8 (the power-of-two scale of the pack),
 * plus a little of k itself so that the dot is positive: q . (k - s k8) ~ |q| R_k, the bound's first
 * term at equality. A bound short by a constant factor drops key j0 here. */
static void screen_aligned_residual(void) {
    if (!screen_available()) return;
    int screened = 0, drops = 0;
    for (int it = 0; it < 200; it++) {
        scase c;
        case_alloc(&c, (int)rng_range(4, 12), 128);
        fill_random(&c);
        const int D = c.D, j0 = (int)rng_below(NK);
        float k[512], r[512], m = 0.0f, rn = 0.0f, kn = 0.0f;
        for (int d = 0; d < D; d++) {
            k[d] = ltk_e4m3_to_f32(c.kv[j0 * D + d]);
            m = fmaxf(m, fabsf(k[d]));
        }
        float s = m / 127.0f; /* the pack's power-of-two scale: the one at or above m / 127 */
        s = ldexpf(1.0f, (int)ceilf(log2f(s)));
        for (int d = 0; d < D; d++) {
            r[d] = k[d] - s * rintf(k[d] / s);
            rn += r[d] * r[d];
            kn += k[d] * k[d];
        }
        if (!(rn > 0.0f)) {
            case_free(&c);
            continue;
        }
        rn = sqrtf(rn), kn = sqrtf(kn);
        for (int h = 0; h < c.H; h++) {
            float amp = (float)ldexp(1.0, (int)rng_range(-2, 3));
            for (int d = 0; d < D; d++) c.q[h * D + d] = t_f32_e4m3(amp * (8.0f * r[d] / rn + 0.05f * k[d] / kn));
            c.w[h] = (float)(0.2 + rng_unit());
        }
        c.kvs[j0] = 1.0f;
        int b = check_case(&c, &screened);
        if (b > 0) drops += b;
        case_free(&c);
    }
    CHECK(drops == 0, "%d keys dropped", drops);
    CHECK(screened > 5000, "only %d keys screened", screened);
}

/* The key pack itself, against its definition computed here: x8 = RNE(k / s) with s the power of
 * two at or above max |k_i| / 127 (stored as x8 + 128, 4 dims a word, 16 keys a panel), s = 0 for
 * an all-zero key or one with a NaN byte, and the norm and residual sums upper bounds of
 * sum k_i^2 and sum (k_i - s x8_i)^2: the residual's within 2^-10 of it plus 2^-10 s^2 a dim (the
 * rounding up of its table), the norm's root within twice the residual's root of |k| (it is
 * s |x8| + R). */
static void pack_keys_exact(void) {
    if (!screen_available()) return;
    const ltkc_kern *K = ltkc_kernels();
    int keys = 0;
    for (int it = 0; it < 40; it++) {
        const int D = (int)rng_range(1, 300), D4 = (D + 3) / 4, n = (int)rng_range(1, NK);
        uint8_t *kv = malloc((size_t)NK * D);
        for (int j = 0; j < n; j++) {
            const int64_t kind = rng_below(12), lo = rng_range(0, 0x70), hi = lo + rng_range(0, 0x7e - lo);
            for (int d = 0; d < D; d++) kv[j * D + d] = (uint8_t)(rng_below(2) << 7 | rng_range(lo, hi));
            if (kind == 0) memset(kv + j * D, 0, (size_t)D);
            if (kind == 1) kv[j * D + rng_below(D)] = (uint8_t)(0x7f | rng_below(2) << 7); /* NaN */
        }
        float xn[NK], xs[NK], xr2[NK];
        uint32_t *t8 = calloc((size_t)4 * D4 * 16, 4);
        K->idx8_pack_keys(kv, D, 0, n, D, t8, xn, xs, xr2);
        for (int j = 0; j < n && !T_FAILURES(); j++) {
            float m = 0.0f;
            int nan = 0;
            for (int d = 0; d < D; d++) {
                const float v = ltk_e4m3_to_f32(kv[j * D + d]);
                nan |= v != v;
                m = fmaxf(m, fabsf(v));
            }
            const float sc = nan || m == 0.0f ? 0.0f : ldexpf(1.0f, (int)ceil(log2((double)(m / 127.0f))));
            CHECK(xs[j] == sc, "key %d (D %d): scale %g, expected %g", j, D, xs[j], sc);
            if (nan) {
                CHECK(!(xr2[j] < INFINITY), "key %d: NaN byte but residual bound %g", j, xr2[j]);
                continue;
            }
            double n2 = 0.0, r2 = 0.0;
            int bad = 0;
            for (int d = 0; d < D; d++) {
                const float v = ltk_e4m3_to_f32(kv[j * D + d]);
                const int x8 = sc > 0.0f ? (int)rintf(v / sc) : 0;
                const uint32_t w = t8[((size_t)(j / 16) * D4 + d / 4) * 16 + j % 16];
                bad += (int)((w >> (8 * (d % 4))) & 0xff) != x8 + 128;
                n2 += (double)v * v;
                r2 += ((double)v - (double)sc * x8) * ((double)v - (double)sc * x8);
            }
            const double slack = 0x1p-10 * (double)sc * sc * D;
            CHECK(bad == 0, "key %d (D %d): %d packed bytes differ from RNE(k / s) + 128", j, D, bad);
            /* |k| <= s |x8| + R <= |k| + 2 R: the norm bound within twice the measured residual */
            const double nb = sqrt(n2) + 2.0 * sqrt(r2 * (1 + 0x1p-10) + slack);
            CHECK(xn[j] >= n2 * (1 - 0x1p-20) && xn[j] <= nb * nb * (1 + 0x1p-10), "key %d: norm bound %g for %g", j,
                  xn[j], n2);
            CHECK(xr2[j] >= r2 * (1 - 0x1p-20) && xr2[j] <= r2 * (1 + 0x1p-10) + slack, "key %d: residual bound %g for %g",
                  j, xr2[j], r2);
            keys++;
        }
        free(kv), free(t8);
    }
    CHECK(keys > 500, "only %d keys checked", keys);
}

/* Scales that switch a key off (NaN, inf, negative) or make its score 0, zero heads, zero and
 * negative weights, NaN bytes in keys: nothing that passes may be dropped. */
static void screen_special_values(void) {
    if (!screen_available()) return;
    int screened = 0;
    for (int it = 0; it < 40; it++) {
        scase c;
        case_alloc(&c, (int)rng_range(2, 20), 64);
        fill_random(&c);
        for (int j = 0; j < NK; j++) {
            int64_t r = rng_below(10);
            if (r == 0) c.kvs[j] = NAN;
            else if (r == 1) c.kvs[j] = INFINITY;
            else if (r == 2) c.kvs[j] = -c.kvs[j];
            else if (r == 3) c.kvs[j] = 0.0f;
            else if (r == 4) c.kv[j * c.D + rng_below(c.D)] = 0x7f; /* NaN byte */
            else if (r == 5) memset(c.kv + j * c.D, 0, (size_t)c.D);
        }
        for (int h = 0; h < c.H; h++) {
            int64_t r = rng_below(6);
            if (r == 0) memset(c.q + h * c.D, 0, (size_t)c.D);
            else if (r == 1) c.w[h] = 0.0f;
            else if (r == 2) c.w[h] = -fabsf(c.w[h]);
        }
        check_case(&c, &screened);
        case_free(&c);
    }
    CHECK(screened > 500, "only %d keys screened", screened);
}

/* ---- kNN int8 screen ---------------------------------------------------------------------------- */

/* The canonical rank score of knn.c (transform) from the kernel table's canonical dot and norms. */
static float knn_exact(const ltkc_kern *K, int metric, const float *q, const float *x, int D, float qn, float xn) {
    const float *pq[1] = {q}, *px[1] = {x};
    float d;
    K->dots_pairs(pq, px, 1, D, &d);
    float s;
    if (metric == LTK_METRIC_IP) s = d;
    else if (metric == LTK_METRIC_L2) s = -fmaf(-2.0f, d, qn + xn);
    else s = (qn == 0.0f || xn == 0.0f) ? 0.0f : d / (sqrtf(qn) * sqrtf(xn));
    return s;
}

/* nq queries against n <= 64 vectors X [n][D]: for each pair, the screen at edge = the pair's own
 * exact score must pass it. Returns the pairs screened (vectors with a scale, queries not off). */
static int knn_check(const float *Q, int nq, const float *X, int n, int D, int metric) {
    const ltkc_kern *K = ltkc_kernels();
    const int D4 = (D + 3) / 4, xs = (n + 15) / 16 * 16;
    uint32_t *q4 = calloc((size_t)nq * D4, 4), *packed = calloc((size_t)xs * D4, 4);
    float *qa = calloc((size_t)nq * LTKC_QA8, 4), *qn = calloc((size_t)nq, 4), xn[64], s8[64], xr2[64];
    float soa[6 * 64], edge[8];
    K->knn8_pack_tile(X, D, n, D, packed, xn, s8, xr2);
    ltkc_knn_tile_params(D, n, xn, s8, xr2, soa);
    for (int i = 0; i < nq; i++) {
        const float *pq[1] = {Q + (size_t)i * D};
        K->dots_pairs(pq, pq, 1, D, &qn[i]);
        ltkc_knn8_query(K, Q + (size_t)i * D, D, qn[i], q4 + (size_t)i * D4, qa + (size_t)i * LTKC_QA8);
    }
    int screened = 0;
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < n; j++) {
            float e = knn_exact(K, metric, Q + (size_t)i * D, X + (size_t)j * D, D, qn[i], xn[j]);
            if (!(fabsf(e) < INFINITY)) continue; /* NaN never passes a gate; an infinite score is never cut */
            uint64_t mask[8];
            for (int t = 0; t < nq; t++) edge[t] = t == i ? e : INFINITY;
            K->knn8_screen(q4, nq, packed, n, D, metric, qa, soa, edge, mask, 1, NULL);
            if (!CHECK((mask[i] >> j) & 1, "metric %d D %d pair (%d, %d) dropped: exact %.9g, |x| %g, s_x %g, R_x %g, s_q %g",
                       metric, D, i, j, e, sqrt(xn[j]), s8[j], sqrt(xr2[j]), qa[(size_t)i * LTKC_QA8]))
                break;
            if (s8[j] > 0.0f && qa[(size_t)i * LTKC_QA8] > 0.0f) screened++;
        }
    free(q4), free(packed), free(qa), free(qn);
    return screened;
}

static int knn_screen_available(void) {
    const ltkc_kern *K = ltkc_kernels();
    if (K->knn8_screen && K->knn8_pack_tile && K->knn8_pack_query && ltkc_cpu_vnni()) return 1;
    printf("    skipped: no AVX-512 VNNI kernels on this CPU (the kNN int8 screen is never used)\n");
    return 0;
}

/* Query 0 points along vector j0's int8 residual r = x - s x8 (s = fl(m / 127), as the pack), on
 * a grid its own int8 form represents exactly (R_q = 0), so q.x - A ~ |q| |r|: the bound's first
 * term at equality; query 1 along x_j0 on such a grid (A ~ |q| |x|: the relative terms); the
 * others are random; query scales down to 2^-63. Vectors at magnitudes 2^e over the quantised range
 * and past its ends (tiny vectors take s = 0; a norm above 2^100 switches the screen off). A bound
 * short by a few percent in its residual term drops (0, j0). */
static void knn_screen_aligned_residual(void) {
    if (!knn_screen_available()) return;
    static const int exps[] = {0, 0, -20, -45, -50, -55, -58, -60, -61, -65, -70, -75, -90, 20, 48};
    int screened = 0;
    for (int it = 0; it < 240; it++) {
        const int D = (int)(4 * rng_range(4, 64)) - (int)rng_below(4), n = (int)rng_range(1, 64);
        const int nq = (int)rng_range(1, 8), metric = (int)rng_below(3);
        const int e = exps[rng_below(sizeof exps / sizeof exps[0])], j0 = (int)rng_below(n);
        float *X = malloc(sizeof(float) * (size_t)n * D), *Q = malloc(sizeof(float) * (size_t)nq * D);
        for (int j = 0; j < n; j++) {
            const double sig = ldexp(exp(0.5 * rng_normal()), e - 3);
            for (int d = 0; d < D; d++) X[(size_t)j * D + d] = (float)(rng_normal() * sig);
        }
        for (int i = 0; i < nq * D; i++) Q[i] = (float)(rng_normal() * ldexp(1.0, (int)rng_range(-40, 8)));
        const float *x = X + (size_t)j0 * D;
        float m = 0.0f, r[256], rm = 0.0f;
        for (int d = 0; d < D; d++) m = fmaxf(m, fabsf(x[d]));
        const float s = m / 127.0f, inv = 127.0f / m;
        for (int d = 0; d < D; d++) {
            r[d] = fmaf(-s, rintf(x[d] * inv), x[d]);
            rm = fmaxf(rm, fabsf(r[d]));
        }
        if (rm > 0.0f && m > 0.0f) {
            const float qs = ldexpf(1.0f, (int)rng_range(-56, 10)) / 127.0f; /* then s_q = qs exactly */
            for (int d = 0; d < D; d++) Q[d] = qs * rintf(127.0f * r[d] / rm);
            /* query 1 along x itself (A ~ |q| |x|): the product s_q s_x must keep its relative accuracy */
            if (nq > 1)
                for (int d = 0; d < D; d++) Q[D + d] = qs * rintf(127.0f * x[d] / m);
        }
        screened += knn_check(Q, nq, X, n, D, metric);
        free(X), free(Q);
        if (T_FAILURES()) break;
    }
    CHECK(screened > 10000, "only %d pairs screened", screened);
}

/* Zero, tiny and huge vectors, inf and NaN entries, zero queries: nothing that scores at the edge
 * may be dropped. */
static void knn_screen_special_values(void) {
    if (!knn_screen_available()) return;
    int screened = 0;
    for (int it = 0; it < 120; it++) {
        const int D = (int)rng_range(1, 200), n = (int)rng_range(1, 64), nq = (int)rng_range(1, 8);
        float *X = malloc(sizeof(float) * (size_t)n * D), *Q = malloc(sizeof(float) * (size_t)nq * D);
        for (int j = 0; j < n; j++) {
            const int64_t kind = rng_below(8);
            const double sig = kind == 0 ? 0.0 : kind == 1 ? 0x1p-62 : kind == 2 ? 0x1p-56 : kind == 3 ? 0x1p47 : 1.0;
            for (int d = 0; d < D; d++) X[(size_t)j * D + d] = (float)(rng_normal() * sig);
            if (kind == 4) X[(size_t)j * D + rng_below(D)] = rng_below(2) ? INFINITY : NAN;
            if (kind == 5) X[(size_t)j * D + rng_below(D)] = 0x1p-60f; /* one tiny coordinate, the rest 0 */
            if (kind == 5) for (int d = 0; d < D; d++) X[(size_t)j * D + d] *= (float)(d == 0);
        }
        for (int i = 0; i < nq; i++) {
            const double sig = rng_below(6) == 0 ? 0.0 : ldexp(1.0, (int)rng_range(-52, 10));
            for (int d = 0; d < D; d++) Q[(size_t)i * D + d] = (float)(rng_normal() * sig);
        }
        screened += knn_check(Q, nq, X, n, D, (int)rng_below(3));
        free(X), free(Q);
        if (T_FAILURES()) break;
    }
    CHECK(screened > 2000, "only %d pairs screened", screened);
}

int main(int argc, char **argv) {
    static const t_test tests[] = {
        T_ENTRY(screen_random),
        T_ENTRY(screen_aligned_residual),
        T_ENTRY(screen_special_values),
        T_ENTRY(pack_keys_exact),
        T_ENTRY(knn_screen_aligned_residual),
        T_ENTRY(knn_screen_special_values),
    };
    return T_RUN_ALL(tests);
}
