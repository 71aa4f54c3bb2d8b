/* The CPU indexer's int8 screen (src/cpu/indexer.c) against the exact kernel, key by key: the
 * screen may drop a key only if its canonical score is below the edge, so with the edge set to the
 * key's own exact score every key must survive. The end-to-end tests (test-backends) cannot see a
 * bound that is too small by a constant factor, because on ordinary inputs the int8 error is a small
 * part of the bound; here the query heads are aligned with one key's quantisation residual, which
 * makes the first term of the bound (|q| R_k) nearly tight for that key. Skipped without AVX-512
 * VNNI (the screen is then never used). */
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
        ltkc_idx8_keys(K, c->kv, D, c->kvs, 0, NK, D, xf, t8, kxn, kxs, kxr2, kb);
        bad = 0;
        for (int j = 0; j < NK; j++) {
            if (exact[j] != exact[j]) continue; /* NaN never passes a gate */
            uint64_t m = K->idx8_screen(q4, corr, wq, hs, D, t8, kb, rcon, exact[j]);
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
    if (K->idx8_screen && K->idx8_pack_keys && K->idx8_pack_query && K->has_bf16 && ltkc_cpu_vnni()) return 1;
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

int main(int argc, char **argv) {
    static const t_test tests[] = {
        T_ENTRY(screen_random),
        T_ENTRY(screen_aligned_residual),
        T_ENTRY(screen_special_values),
    };
    return T_RUN_ALL(tests);
}
