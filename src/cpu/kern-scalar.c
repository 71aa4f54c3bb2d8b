/* Portable kernels. They spell out the canonical orders of cpu-impl.h with fmaf, so the kNN
 * score is bit-identical to the SIMD kernels and the fp32 indexer score is too. */
#include "cpu-impl.h"

#include <math.h>
#include <string.h>

float ltkc_dot_canon(const float *q, const float *x, int D) {
    float a[16];
    for (int l = 0; l < 16; l++) a[l] = 0.0f;
    int c = 0;
    for (; c + 16 <= D; c += 16)
        for (int l = 0; l < 16; l++) a[l] = fmaf(q[c + l], x[c + l], a[l]);
    if (c < D)
        for (int l = 0; l < 16; l++) {
            float qv = c + l < D ? q[c + l] : 0.0f, xv = c + l < D ? x[c + l] : 0.0f;
            a[l] = fmaf(qv, xv, a[l]);
        }
    float b[8], c4[4];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c4[l] = b[l] + b[l + 4];
    float d0 = c4[0] + c4[2], d1 = c4[1] + c4[3];
    return d0 + d1;
}

static void s_dots_block(const float *Q, int64_t ldq, int nq, const float *X, int64_t ldx, int nx, int D, float *out,
                         int64_t ldo) {
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nx; j++) out[i * ldo + j] = ltkc_dot_canon(Q + i * ldq, X + j * ldx, D);
}

static void s_dots_pairs(const float *const *qp, const float *const *xp, int n, int D, float *out) {
    for (int p = 0; p < n; p++) out[p] = ltkc_dot_canon(qp[p], xp[p], D);
}

static void s_gate_mask(const float *s, int n, float edge, uint64_t *mask) {
    for (int w = 0; w < (n + 63) / 64; w++) mask[w] = 0;
    for (int j = 0; j < n; j++)
        if (s[j] >= edge) mask[j >> 6] |= 1ull << (j & 63);
}

static void s_keys_f32(const float *s, int64_t n, uint32_t *keys) {
    for (int64_t i = 0; i < n; i++) keys[i] = ltk_rank_key(s[i]);
}

/* Indexer, fp32 outer form. q row [H][D] floats; tile [IDX_NK][D] floats (key major). */
static void s_idx_pack_q(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst) {
    float *o = dst;
    for (int64_t i = 0; i < (int64_t)g->H * g->D; i++) o[i] = ltk_load_f32(q, dt, i);
}

static void s_idx_pack_tile(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0, int n,
                            const ltkc_idx_geom *g, void *tile) {
    float *o = tile;
    int D = g->D;
    for (int j = 0; j < LTKC_IDX_NK; j++) {
        if (j < n) {
            int64_t s = s_list ? s_list[j] : s0 + j;
            for (int d = 0; d < D; d++) o[j * D + d] = ltk_load_f32(kv, dt, s * stride + d);
        } else {
            memset(o + j * D, 0, sizeof(float) * (size_t)D);
        }
    }
}

static void s_idx_score(const void *qrow, const float *w, const void *tile, const float *scale,
                        const ltkc_idx_geom *g, float *out) {
    const float *q = qrow, *t = tile;
    int H = g->H, D = g->D;
    for (int j = 0; j < LTKC_IDX_NK; j++) {
        float S = 0.0f;
        for (int h = 0; h < H; h++) {
            float a = 0.0f;
            for (int d = 0; d < D; d++) a = fmaf(q[h * D + d], t[j * D + d], a);
            float r = 0.0f > a ? 0.0f : a; /* = vmaxps(0, a): NaN and -0 pass through */
            S = fmaf(w[h], r, S);
        }
        if (scale) S = S * scale[j];
        out[j] = ltkc_canon(S);
    }
}

const ltkc_kern ltkc_kern_scalar = {
    .name = "scalar",
    .has_bf16 = 0,
    .dots_block = s_dots_block,
    .dots_pairs = s_dots_pairs,
    .gate_mask = s_gate_mask,
    .keys_f32 = s_keys_f32,
    .idx_pack_q = s_idx_pack_q,
    .idx_pack_tile = s_idx_pack_tile,
    .idx_score = s_idx_score,
};
