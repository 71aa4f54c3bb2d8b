/* AVX2+FMA kernels: the canonical kNN dot form with 16 lanes held as two ymm (bit-identical to
 * the AVX-512 and scalar kernels) and the fp32 indexer outer form. */
#include "cpu-impl.h"

#if defined(LTKC_X86)
#include <immintrin.h>
#include <string.h>

#define T2 __attribute__((target("avx2,fma")))

T2 static inline __m256 ld8(const float *p, int n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    if (n <= 0) return _mm256_setzero_ps();
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx));
}

T2 static inline float red(__m256 lo, __m256 hi) {
    __m256 s8 = _mm256_add_ps(lo, hi); /* (l, l+8) */
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

T2 static float dot2(const float *q, const float *x, int D) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    int c = 0;
    for (; c + 16 <= D; c += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(x + c), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + c + 8), _mm256_loadu_ps(x + c + 8), hi);
    }
    if (c < D) {
        int n = D - c;
        lo = _mm256_fmadd_ps(ld8(q + c, n), ld8(x + c, n), lo);
        hi = _mm256_fmadd_ps(ld8(q + c + 8, n - 8), ld8(x + c + 8, n - 8), hi);
    }
    return red(lo, hi);
}

T2 static void a_dots_block(const float *Q, int64_t ldq, int nq, const float *X, int64_t ldx, int nx, int D,
                            float *out, int64_t ldo) {
    int i = 0;
    for (; i + 2 <= nq; i += 2) {
        const float *q0 = Q + i * ldq, *q1 = q0 + ldq;
        int j = 0;
        for (; j + 2 <= nx; j += 2) {
            const float *x0 = X + j * ldx, *x1 = x0 + ldx;
            __m256 a[8];
            for (int t = 0; t < 8; t++) a[t] = _mm256_setzero_ps();
            for (int c = 0; c < D; c += 16) {
                int n = D - c;
                for (int h = 0; h < 2; h++) {
                    __m256 vq0 = ld8(q0 + c + 8 * h, n - 8 * h), vq1 = ld8(q1 + c + 8 * h, n - 8 * h);
                    __m256 vx0 = ld8(x0 + c + 8 * h, n - 8 * h), vx1 = ld8(x1 + c + 8 * h, n - 8 * h);
                    a[0 + h] = _mm256_fmadd_ps(vq0, vx0, a[0 + h]);
                    a[2 + h] = _mm256_fmadd_ps(vq0, vx1, a[2 + h]);
                    a[4 + h] = _mm256_fmadd_ps(vq1, vx0, a[4 + h]);
                    a[6 + h] = _mm256_fmadd_ps(vq1, vx1, a[6 + h]);
                }
            }
            out[i * ldo + j] = red(a[0], a[1]);
            out[i * ldo + j + 1] = red(a[2], a[3]);
            out[(i + 1) * ldo + j] = red(a[4], a[5]);
            out[(i + 1) * ldo + j + 1] = red(a[6], a[7]);
        }
        for (; j < nx; j++) {
            out[i * ldo + j] = dot2(q0, X + j * ldx, D);
            out[(i + 1) * ldo + j] = dot2(q1, X + j * ldx, D);
        }
    }
    for (; i < nq; i++)
        for (int j = 0; j < nx; j++) out[i * ldo + j] = dot2(Q + i * ldq, X + j * ldx, D);
}

T2 static void a_dots_pairs(const float *const *qp, const float *const *xp, int n, int D, float *out) {
    for (int p = 0; p < n; p++) out[p] = dot2(qp[p], xp[p], D);
}

T2 static void a_gate_mask(const float *s, int n, float edge, uint64_t *mask) {
    __m256 e = _mm256_set1_ps(edge);
    for (int w = 0; w < (n + 63) / 64; w++) mask[w] = 0;
    for (int j = 0; j < n; j += 8) {
        uint64_t m = (uint64_t)_mm256_movemask_ps(_mm256_cmp_ps(ld8(s + j, n - j), e, _CMP_GE_OQ));
        if (n - j < 8) m &= (1ull << (n - j)) - 1;
        mask[j >> 6] |= m << (j & 63);
    }
}

static void a_keys_f32(const float *s, int64_t n, uint32_t *keys) {
    for (int64_t i = 0; i < n; i++) keys[i] = ltk_rank_key(s[i]);
}

/* Indexer fp32 outer form: q row [H][D]; tile [4 panels][D][16] floats. */
static void a_idx_pack_q(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst) {
    float *o = dst;
    for (int64_t i = 0; i < (int64_t)g->H * g->D; i++) o[i] = ltk_load_f32(q, dt, i);
}

static void a_idx_pack_tile(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0, int n,
                            const ltkc_idx_geom *g, void *tile) {
    float *o = tile;
    int D = g->D;
    for (int j = 0; j < LTKC_IDX_NK; j++) {
        int p = j / 16, l = j % 16;
        int64_t s = j < n ? (s_list ? s_list[j] : s0 + j) : 0;
        for (int d = 0; d < D; d++)
            o[((size_t)p * D + d) * 16 + l] = j < n ? ltk_load_f32(kv, dt, s * stride + d) : 0.0f;
    }
}

T2 static void a_idx_score(const void *qrow, const float *w, const void *tile, const float *scale,
                           const ltkc_idx_geom *g, float *out) {
    const float *q = qrow, *t = tile;
    int H = g->H, D = g->D;
    const size_t ps = (size_t)D * 16;
    __m256 zero = _mm256_setzero_ps();
    for (int p = 0; p < 4; p++) {
        const float *tp = t + p * ps;
        __m256 S0 = zero, S1 = zero;
        int h = 0;
        for (; h + 2 <= H; h += 2) {
            __m256 a00 = zero, a01 = zero, a10 = zero, a11 = zero;
            const float *q0 = q + (size_t)h * D, *q1 = q0 + D;
            for (int d = 0; d < D; d++) {
                __m256 k0 = _mm256_loadu_ps(tp + d * 16), k1 = _mm256_loadu_ps(tp + d * 16 + 8);
                __m256 b0 = _mm256_broadcast_ss(q0 + d), b1 = _mm256_broadcast_ss(q1 + d);
                a00 = _mm256_fmadd_ps(b0, k0, a00);
                a01 = _mm256_fmadd_ps(b0, k1, a01);
                a10 = _mm256_fmadd_ps(b1, k0, a10);
                a11 = _mm256_fmadd_ps(b1, k1, a11);
            }
            __m256 w0 = _mm256_set1_ps(w[h]), w1 = _mm256_set1_ps(w[h + 1]);
            S0 = _mm256_fmadd_ps(w0, _mm256_max_ps(zero, a00), S0);
            S1 = _mm256_fmadd_ps(w0, _mm256_max_ps(zero, a01), S1);
            S0 = _mm256_fmadd_ps(w1, _mm256_max_ps(zero, a10), S0);
            S1 = _mm256_fmadd_ps(w1, _mm256_max_ps(zero, a11), S1);
        }
        for (; h < H; h++) {
            __m256 a0 = zero, a1 = zero;
            const float *q0 = q + (size_t)h * D;
            for (int d = 0; d < D; d++) {
                __m256 b0 = _mm256_broadcast_ss(q0 + d);
                a0 = _mm256_fmadd_ps(b0, _mm256_loadu_ps(tp + d * 16), a0);
                a1 = _mm256_fmadd_ps(b0, _mm256_loadu_ps(tp + d * 16 + 8), a1);
            }
            __m256 w0 = _mm256_set1_ps(w[h]);
            S0 = _mm256_fmadd_ps(w0, _mm256_max_ps(zero, a0), S0);
            S1 = _mm256_fmadd_ps(w0, _mm256_max_ps(zero, a1), S1);
        }
        if (scale) {
            S0 = _mm256_mul_ps(S0, _mm256_loadu_ps(scale + 16 * p));
            S1 = _mm256_mul_ps(S1, _mm256_loadu_ps(scale + 16 * p + 8));
        }
        _mm256_storeu_ps(out + 16 * p, S0);
        _mm256_storeu_ps(out + 16 * p + 8, S1);
    }
    for (int j = 0; j < LTKC_IDX_NK; j++) out[j] = ltkc_canon(out[j]);
}

const ltkc_kern ltkc_kern_avx2 = {
    .name = "avx2",
    .has_bf16 = 0,
    .dots_block = a_dots_block,
    .dots_pairs = a_dots_pairs,
    .gate_mask = a_gate_mask,
    .keys_f32 = a_keys_f32,
    .idx_pack_q = a_idx_pack_q,
    .idx_pack_tile = a_idx_pack_tile,
    .idx_score = a_idx_score,
};
#endif
