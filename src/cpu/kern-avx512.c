/* AVX-512 kernels (F/BW/DQ/VL), plus the BF16 ones (vdpbf16ps) for the indexer and the kNN
 * screening pass. Compiled for every x86-64 build and entered only after a CPUID check. */
#include "cpu-impl.h"

#if defined(LTKC_X86)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#define T512BF __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")))

float ltkc_dot_canon(const float *q, const float *x, int D);

/* ---- kNN canonical dot form ------------------------------------------------------------------ */
T512 static inline __m512 ld_tail(const float *p, int n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}

/* Tree (l, l+8), (l, l+4), (l, l+2), (l, l+1) of one accumulator, lower lane first. */
T512 static inline float reduce1(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

T512 static inline __m512 lo64(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
T512 static inline __m512 hi64(__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

/* The same tree for 16 accumulators at once (same pairs, lower lane first);
 * lane 4*q + m of the result holds the sum of acc[4*m + q]. */
T512 static inline __m512 reduce16(const __m512 *a) {
    __m512 s[8], u[4], w[2];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) w[i] = _mm512_add_ps(lo64(u[2 * i], u[2 * i + 1]), hi64(u[2 * i], u[2 * i + 1]));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
}

T512 static float dot1(const float *q, const float *x, int D) {
    __m512 acc = _mm512_setzero_ps();
    int c = 0;
    for (; c + 16 <= D; c += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + c), _mm512_loadu_ps(x + c), acc);
    if (c < D) acc = _mm512_fmadd_ps(ld_tail(q + c, D - c), ld_tail(x + c, D - c), acc);
    return reduce1(acc);
}

T512 static void v_dots_block(const float *Q, int64_t ldq, int nq, const float *X, int64_t ldx, int nx, int D,
                              float *out, int64_t ldo) {
    /* reduce16 leaves (query ii, vector jj) in lane 4*jj + ii; put it in lane 4*ii + jj. */
    const __m512i perm = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    int i = 0;
    for (; i + 4 <= nq; i += 4) {
        const float *q0 = Q + i * ldq, *q1 = q0 + ldq, *q2 = q1 + ldq, *q3 = q2 + ldq;
        int j = 0;
        for (; j + 4 <= nx; j += 4) {
            const float *x0 = X + j * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
            __m512 a[16];
            for (int t = 0; t < 16; t++) a[t] = _mm512_setzero_ps();
            int c = 0;
            for (; c + 16 <= D; c += 16) {
                __m512 vq0 = _mm512_loadu_ps(q0 + c), vq1 = _mm512_loadu_ps(q1 + c);
                __m512 vq2 = _mm512_loadu_ps(q2 + c), vq3 = _mm512_loadu_ps(q3 + c);
                __m512 vx = _mm512_loadu_ps(x0 + c);
                a[0] = _mm512_fmadd_ps(vq0, vx, a[0]);
                a[4] = _mm512_fmadd_ps(vq1, vx, a[4]);
                a[8] = _mm512_fmadd_ps(vq2, vx, a[8]);
                a[12] = _mm512_fmadd_ps(vq3, vx, a[12]);
                vx = _mm512_loadu_ps(x1 + c);
                a[1] = _mm512_fmadd_ps(vq0, vx, a[1]);
                a[5] = _mm512_fmadd_ps(vq1, vx, a[5]);
                a[9] = _mm512_fmadd_ps(vq2, vx, a[9]);
                a[13] = _mm512_fmadd_ps(vq3, vx, a[13]);
                vx = _mm512_loadu_ps(x2 + c);
                a[2] = _mm512_fmadd_ps(vq0, vx, a[2]);
                a[6] = _mm512_fmadd_ps(vq1, vx, a[6]);
                a[10] = _mm512_fmadd_ps(vq2, vx, a[10]);
                a[14] = _mm512_fmadd_ps(vq3, vx, a[14]);
                vx = _mm512_loadu_ps(x3 + c);
                a[3] = _mm512_fmadd_ps(vq0, vx, a[3]);
                a[7] = _mm512_fmadd_ps(vq1, vx, a[7]);
                a[11] = _mm512_fmadd_ps(vq2, vx, a[11]);
                a[15] = _mm512_fmadd_ps(vq3, vx, a[15]);
            }
            if (c < D) {
                int n = D - c;
                __m512 vq[4] = {ld_tail(q0 + c, n), ld_tail(q1 + c, n), ld_tail(q2 + c, n), ld_tail(q3 + c, n)};
                __m512 vx[4] = {ld_tail(x0 + c, n), ld_tail(x1 + c, n), ld_tail(x2 + c, n), ld_tail(x3 + c, n)};
                for (int ii = 0; ii < 4; ii++)
                    for (int jj = 0; jj < 4; jj++) a[4 * ii + jj] = _mm512_fmadd_ps(vq[ii], vx[jj], a[4 * ii + jj]);
            }
            __m512 r = _mm512_permutexvar_ps(perm, reduce16(a));
            /* now lane 4*ii + jj; but reduce16 lane 4*q+m = acc[4*m+q] with acc index 4*ii+jj -> m=ii, q=jj */
            _mm_storeu_ps(out + (i + 0) * ldo + j, _mm512_extractf32x4_ps(r, 0));
            _mm_storeu_ps(out + (i + 1) * ldo + j, _mm512_extractf32x4_ps(r, 1));
            _mm_storeu_ps(out + (i + 2) * ldo + j, _mm512_extractf32x4_ps(r, 2));
            _mm_storeu_ps(out + (i + 3) * ldo + j, _mm512_extractf32x4_ps(r, 3));
        }
        for (; j < nx; j++)
            for (int ii = 0; ii < 4; ii++) out[(i + ii) * ldo + j] = dot1(Q + (i + ii) * ldq, X + j * ldx, D);
    }
    for (; i < nq; i++)
        for (int j = 0; j < nx; j++) out[i * ldo + j] = dot1(Q + i * ldq, X + j * ldx, D);
}

T512 static void v_dots_pairs(const float *const *qp, const float *const *xp, int n, int D, float *out) {
    int p = 0;
    for (; p + 4 <= n; p += 4) {
        const float *q0 = qp[p], *q1 = qp[p + 1], *q2 = qp[p + 2], *q3 = qp[p + 3];
        const float *x0 = xp[p], *x1 = xp[p + 1], *x2 = xp[p + 2], *x3 = xp[p + 3];
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int c = 0;
        if (q0 == q1 && q0 == q2 && q0 == q3) { /* one query (kNN rescoring lists): load it once */
            for (; c + 16 <= D; c += 16) {
                __m512 vq = _mm512_loadu_ps(q0 + c);
                a0 = _mm512_fmadd_ps(vq, _mm512_loadu_ps(x0 + c), a0);
                a1 = _mm512_fmadd_ps(vq, _mm512_loadu_ps(x1 + c), a1);
                a2 = _mm512_fmadd_ps(vq, _mm512_loadu_ps(x2 + c), a2);
                a3 = _mm512_fmadd_ps(vq, _mm512_loadu_ps(x3 + c), a3);
            }
        }
        for (; c + 16 <= D; c += 16) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + c), _mm512_loadu_ps(x0 + c), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q1 + c), _mm512_loadu_ps(x1 + c), a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q2 + c), _mm512_loadu_ps(x2 + c), a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q3 + c), _mm512_loadu_ps(x3 + c), a3);
        }
        if (c < D) {
            int m = D - c;
            a0 = _mm512_fmadd_ps(ld_tail(q0 + c, m), ld_tail(x0 + c, m), a0);
            a1 = _mm512_fmadd_ps(ld_tail(q1 + c, m), ld_tail(x1 + c, m), a1);
            a2 = _mm512_fmadd_ps(ld_tail(q2 + c, m), ld_tail(x2 + c, m), a2);
            a3 = _mm512_fmadd_ps(ld_tail(q3 + c, m), ld_tail(x3 + c, m), a3);
        }
        out[p] = reduce1(a0);
        out[p + 1] = reduce1(a1);
        out[p + 2] = reduce1(a2);
        out[p + 3] = reduce1(a3);
    }
    for (; p < n; p++) out[p] = dot1(qp[p], xp[p], D);
}

T512 static void v_gate_mask(const float *s, int n, float edge, uint64_t *mask) {
    __m512 e = _mm512_set1_ps(edge);
    for (int w = 0; w < (n + 63) / 64; w++) {
        uint64_t m = 0;
        for (int b = 0; b < 4; b++) {
            int j = w * 64 + b * 16;
            if (j >= n) break;
            __m512 v = n - j >= 16 ? _mm512_loadu_ps(s + j) : ld_tail(s + j, n - j);
            __mmask16 k = _mm512_cmp_ps_mask(v, e, _CMP_GE_OQ);
            if (n - j < 16) k &= (__mmask16)((1u << (n - j)) - 1);
            m |= (uint64_t)k << (b * 16);
        }
        mask[w] = m;
    }
}

T512 static inline __m512i rank_keys16(__m512i u) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), absm = _mm512_set1_epi32(0x7fffffff);
    __m512i mag = _mm512_and_si512(u, absm);
    __mmask16 neg = _mm512_test_epi32_mask(u, sign);
    __m512i key = _mm512_mask_xor_epi32(_mm512_or_si512(u, sign), neg, u, _mm512_set1_epi32(-1));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
    __mmask16 zero = _mm512_cmpeq_epi32_mask(mag, _mm512_setzero_si512());
    key = _mm512_mask_mov_epi32(key, zero, sign);
    return _mm512_mask_mov_epi32(key, nan, _mm512_setzero_si512());
}

T512 static void v_keys_f32(const float *s, int64_t n, uint32_t *keys) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512((void *)(keys + i), rank_keys16(_mm512_loadu_si512((const void *)(s + i))));
    for (; i < n; i++) keys[i] = ltk_rank_key(s[i]);
}

/* ---- 16x16 transpose of 32-bit elements: c[j] = (r[0][j], ..., r[15][j]) ------------------- */
T512 static inline void transpose16(__m512i *r) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    /* b[4i+e], 128-bit lane L: column 4L+e of rows 4i..4i+3 */
    for (int e = 0; e < 4; e++) {
        __m512i s1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x88), s2 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xDD);
        __m512i s3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x88), s4 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xDD);
        r[0 + e] = _mm512_shuffle_i32x4(s1, s3, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
        r[4 + e] = _mm512_shuffle_i32x4(s2, s4, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(s2, s4, 0xDD);
    }
}

/* ---- indexer, fp32 outer form: q row [H][D] floats, tile [4 panels][D][16] floats ----------- */
static float e4m3_f32_lut[256];
static uint16_t e4m3_bf16_lut[256];
static int luts_ready;

static void init_luts(void) {
    if (__atomic_load_n(&luts_ready, __ATOMIC_ACQUIRE)) return;
    for (int v = 0; v < 256; v++) {
        float f = ltk_e4m3_to_f32((uint8_t)v);
        e4m3_f32_lut[v] = f;
        e4m3_bf16_lut[v] = (uint16_t)(ltk_f32_bits(f) >> 16); /* exact: e4m3 fits in bf16 */
    }
    __atomic_store_n(&luts_ready, 1, __ATOMIC_RELEASE);
}

static inline float load_f(const void *p, ltk_dtype dt, int64_t i) {
    if (dt == LTK_DTYPE_E4M3) return e4m3_f32_lut[((const uint8_t *)p)[i]];
    return ltk_load_f32(p, dt, i);
}

static void f_idx_pack_q(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst) {
    init_luts();
    float *o = dst;
    for (int64_t i = 0; i < (int64_t)g->H * g->D; i++) o[i] = load_f(q, dt, i);
}

T512 static void f_idx_pack_tile(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0,
                                 int n, const ltkc_idx_geom *g, void *tile) {
    init_luts();
    int D = g->D;
    float *o = tile;
    float buf[16];
    for (int p = 0; p < LTKC_IDX_NK / 16; p++) {
        for (int d0 = 0; d0 < D; d0 += 16) {
            int nd = D - d0 < 16 ? D - d0 : 16;
            __m512i r[16];
            for (int l = 0; l < 16; l++) {
                int j = p * 16 + l;
                if (j >= n) {
                    r[l] = _mm512_setzero_si512();
                    continue;
                }
                int64_t s = s_list ? s_list[j] : s0 + j;
                if (dt == LTK_DTYPE_F32) {
                    r[l] = _mm512_castps_si512(ld_tail((const float *)kv + s * stride + d0, nd));
                } else {
                    for (int d = 0; d < 16; d++) buf[d] = d < nd ? load_f(kv, dt, s * stride + d0 + d) : 0.0f;
                    r[l] = _mm512_loadu_si512((const void *)buf);
                }
            }
            transpose16(r);
            for (int m = 0; m < nd; m++) _mm512_storeu_si512((void *)(o + ((size_t)p * D + d0 + m) * 16), r[m]);
        }
    }
}

T512 static void f_idx_score(const void *qrow, const float *w, const void *tile, const float *scale,
                             const ltkc_idx_geom *g, float *out) {
    const float *q = qrow, *t = tile;
    int H = g->H, D = g->D;
    const size_t ps = (size_t)D * 16; /* panel stride */
    __m512 S0 = _mm512_setzero_ps(), S1 = S0, S2 = S0, S3 = S0, zero = S0;
    int h = 0;
    for (; h + 4 <= H; h += 4) {
        __m512 a[4][4];
        for (int x = 0; x < 4; x++)
            for (int y = 0; y < 4; y++) a[x][y] = zero;
        const float *qh = q + (size_t)h * D;
        for (int d = 0; d < D; d++) {
            __m512 k0 = _mm512_loadu_ps(t + d * 16), k1 = _mm512_loadu_ps(t + ps + d * 16);
            __m512 k2 = _mm512_loadu_ps(t + 2 * ps + d * 16), k3 = _mm512_loadu_ps(t + 3 * ps + d * 16);
            for (int x = 0; x < 4; x++) {
                __m512 b = _mm512_set1_ps(qh[x * D + d]);
                a[x][0] = _mm512_fmadd_ps(b, k0, a[x][0]);
                a[x][1] = _mm512_fmadd_ps(b, k1, a[x][1]);
                a[x][2] = _mm512_fmadd_ps(b, k2, a[x][2]);
                a[x][3] = _mm512_fmadd_ps(b, k3, a[x][3]);
            }
        }
        for (int x = 0; x < 4; x++) {
            __m512 wv = _mm512_set1_ps(w[h + x]);
            S0 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][0]), S0);
            S1 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][1]), S1);
            S2 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][2]), S2);
            S3 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][3]), S3);
        }
    }
    for (; h < H; h++) {
        __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
        const float *qh = q + (size_t)h * D;
        for (int d = 0; d < D; d++) {
            __m512 b = _mm512_set1_ps(qh[d]);
            a0 = _mm512_fmadd_ps(b, _mm512_loadu_ps(t + d * 16), a0);
            a1 = _mm512_fmadd_ps(b, _mm512_loadu_ps(t + ps + d * 16), a1);
            a2 = _mm512_fmadd_ps(b, _mm512_loadu_ps(t + 2 * ps + d * 16), a2);
            a3 = _mm512_fmadd_ps(b, _mm512_loadu_ps(t + 3 * ps + d * 16), a3);
        }
        __m512 wv = _mm512_set1_ps(w[h]);
        S0 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a0), S0);
        S1 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a1), S1);
        S2 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a2), S2);
        S3 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a3), S3);
    }
    __m512 S[4] = {S0, S1, S2, S3};
    const __m512 cnan = _mm512_castsi512_ps(_mm512_set1_epi32((int)LTKC_CANON_NAN));
    for (int p = 0; p < 4; p++) {
        __m512 v = scale ? _mm512_mul_ps(S[p], _mm512_loadu_ps(scale + 16 * p)) : S[p];
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), cnan);
        _mm512_storeu_ps(out + 16 * p, v);
    }
}

/* ---- indexer, bf16 pairs: q row [H][D2] u32, tile [4 panels][D2][16] u32 --------------------- */
static void b_idx_pack_q(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst) {
    init_luts();
    uint32_t *o = dst;
    int D = g->D, D2 = (D + 1) / 2;
    for (int h = 0; h < g->H; h++)
        for (int j = 0; j < D2; j++) {
            uint32_t lo = 0, hi = 0;
            int64_t i = (int64_t)h * D + 2 * j;
            if (dt == LTK_DTYPE_E4M3) {
                lo = e4m3_bf16_lut[((const uint8_t *)q)[i]];
                if (2 * j + 1 < D) hi = e4m3_bf16_lut[((const uint8_t *)q)[i + 1]];
            } else {
                lo = ((const uint16_t *)q)[i];
                if (2 * j + 1 < D) hi = ((const uint16_t *)q)[i + 1];
            }
            o[(size_t)h * D2 + j] = lo | (hi << 16);
        }
}

/* e4m3 bytes (zero extended to 16 bits) -> bf16 bits, 32 at a time. */
T512 static inline __m512i e4m3_to_bf16(__m512i x) { /* (AVX-512BW only: the int8 screen uses it too) */
    const __m512i sub = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0x3C60, 0x3C40, 0x3C20, 0x3C00, 0x3BC0, 0x3B80, 0x3B00, 0);
    __m512i mag = _mm512_and_si512(x, _mm512_set1_epi16(0x7f));
    __m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(0x3C00));
    __mmask32 is_sub = _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8));
    v = _mm512_mask_permutexvar_epi16(v, is_sub, mag, sub);
    __mmask32 is_nan = _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x7f));
    v = _mm512_mask_mov_epi16(v, is_nan, _mm512_set1_epi16(0x7FC0));
    return _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x80)), 8));
}

T512BF static void b_idx_pack_tile(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0,
                                   int n, const ltkc_idx_geom *g, void *tile) {
    int D = g->D, D2 = (D + 1) / 2;
    uint32_t *o = tile;
    for (int p = 0; p < LTKC_IDX_NK / 16; p++) {
        for (int j0 = 0; j0 < D2; j0 += 16) {
            int d0 = 2 * j0, nd = D - d0 < 32 ? D - d0 : 32;
            __mmask32 m32 = nd >= 32 ? 0xffffffffu : (__mmask32)((1u << nd) - 1);
            __m512i r[16];
            for (int l = 0; l < 16; l++) {
                int j = p * 16 + l;
                if (j >= n) {
                    r[l] = _mm512_setzero_si512();
                    continue;
                }
                int64_t s = s_list ? s_list[j] : s0 + j;
                if (dt == LTK_DTYPE_E4M3) {
                    __m256i b = _mm256_maskz_loadu_epi8(m32, (const uint8_t *)kv + s * stride + d0);
                    r[l] = e4m3_to_bf16(_mm512_cvtepu8_epi16(b));
                } else {
                    r[l] = _mm512_maskz_loadu_epi16(m32, (const uint16_t *)kv + s * stride + d0);
                }
            }
            transpose16(r);
            int nj = D2 - j0 < 16 ? D2 - j0 : 16;
            for (int m = 0; m < nj; m++) _mm512_storeu_si512((void *)(o + ((size_t)p * D2 + j0 + m) * 16), r[m]);
        }
    }
}

T512BF static void b_idx_score(const void *qrow, const float *w, const void *tile, const float *scale,
                               const ltkc_idx_geom *g, float *out) {
    const uint32_t *q = qrow, *t = tile;
    int H = g->H, D2 = (g->D + 1) / 2;
    const size_t ps = (size_t)D2 * 16;
    __m512 S0 = _mm512_setzero_ps(), S1 = S0, S2 = S0, S3 = S0, zero = S0;
    int h = 0;
    for (; h + 4 <= H; h += 4) {
        __m512 a[4][4];
        for (int x = 0; x < 4; x++)
            for (int y = 0; y < 4; y++) a[x][y] = zero;
        const uint32_t *qh = q + (size_t)h * D2;
        for (int j = 0; j < D2; j++) {
            __m512bh k0 = (__m512bh)_mm512_loadu_si512((const void *)(t + j * 16));
            __m512bh k1 = (__m512bh)_mm512_loadu_si512((const void *)(t + ps + j * 16));
            __m512bh k2 = (__m512bh)_mm512_loadu_si512((const void *)(t + 2 * ps + j * 16));
            __m512bh k3 = (__m512bh)_mm512_loadu_si512((const void *)(t + 3 * ps + j * 16));
            for (int x = 0; x < 4; x++) {
                __m512bh b = (__m512bh)_mm512_set1_epi32((int)qh[x * D2 + j]);
                a[x][0] = _mm512_dpbf16_ps(a[x][0], b, k0);
                a[x][1] = _mm512_dpbf16_ps(a[x][1], b, k1);
                a[x][2] = _mm512_dpbf16_ps(a[x][2], b, k2);
                a[x][3] = _mm512_dpbf16_ps(a[x][3], b, k3);
            }
        }
        for (int x = 0; x < 4; x++) {
            __m512 wv = _mm512_set1_ps(w[h + x]);
            S0 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][0]), S0);
            S1 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][1]), S1);
            S2 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][2]), S2);
            S3 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a[x][3]), S3);
        }
    }
    for (; h < H; h++) {
        __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
        const uint32_t *qh = q + (size_t)h * D2;
        for (int j = 0; j < D2; j++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)qh[j]);
            a0 = _mm512_dpbf16_ps(a0, b, (__m512bh)_mm512_loadu_si512((const void *)(t + j * 16)));
            a1 = _mm512_dpbf16_ps(a1, b, (__m512bh)_mm512_loadu_si512((const void *)(t + ps + j * 16)));
            a2 = _mm512_dpbf16_ps(a2, b, (__m512bh)_mm512_loadu_si512((const void *)(t + 2 * ps + j * 16)));
            a3 = _mm512_dpbf16_ps(a3, b, (__m512bh)_mm512_loadu_si512((const void *)(t + 3 * ps + j * 16)));
        }
        __m512 wv = _mm512_set1_ps(w[h]);
        S0 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a0), S0);
        S1 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a1), S1);
        S2 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a2), S2);
        S3 = _mm512_fmadd_ps(wv, _mm512_max_ps(zero, a3), S3);
    }
    __m512 S[4] = {S0, S1, S2, S3};
    const __m512 cnan = _mm512_castsi512_ps(_mm512_set1_epi32((int)LTKC_CANON_NAN));
    for (int p = 0; p < 4; p++) {
        __m512 v = scale ? _mm512_mul_ps(S[p], _mm512_loadu_ps(scale + 16 * p)) : S[p];
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), cnan);
        _mm512_storeu_ps(out + 16 * p, v);
    }
}

/* ---- kNN bf16 screening -------------------------------------------------------------------- */
/* packed[(p*D2 + j)*16 + l] = bf16 pair (x[16p+l][2j], x[16p+l][2j+1]); RNE by vcvtne2ps2bf16.
 * xn[v] = canonical squared norm of vector v (the same FMA chunks and tree as dot1(x, x)). */
T512BF static void k_pack_tile(const float *X, int64_t ldx, int nx, int D, uint32_t *packed, float *xn) {
    int D2 = (D + 1) / 2, np = (nx + 15) / 16;
    float acc[16 * 16] __attribute__((aligned(64))); /* norm accumulators in memory: the transpose needs the registers */
    for (int p = 0; p < np; p++) {
        memset(acc, 0, sizeof acc);
        const float *xp = X + (int64_t)p * 16 * ldx;
        for (int j0 = 0; j0 < D2; j0 += 16) {
            int d0 = 2 * j0, nd = D - d0 < 32 ? D - d0 : 32;
            __m512i r[16];
            uint32_t *o = packed + ((size_t)p * D2 + j0) * 16;
            if (nd == 32 && p * 16 + 16 <= nx) { /* the common case, unrolled so that r stays in registers */
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++) {
                    const float *x = xp + l * ldx + d0;
                    __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
                    _mm512_store_ps(acc + 16 * l, _mm512_fmadd_ps(hi, hi, _mm512_fmadd_ps(lo, lo, _mm512_load_ps(acc + 16 * l))));
                    r[l] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
                }
                transpose16(r);
#pragma GCC unroll 16
                for (int m = 0; m < 16; m++) _mm512_storeu_si512((void *)(o + m * 16), r[m]);
                continue;
            }
            for (int l = 0; l < 16; l++) {
                int v = p * 16 + l;
                if (v >= nx) {
                    r[l] = _mm512_setzero_si512();
                    continue;
                }
                const float *x = xp + l * ldx + d0;
                __m512 lo = nd >= 16 ? _mm512_loadu_ps(x) : ld_tail(x, nd);
                __m512 hi = nd >= 32 ? _mm512_loadu_ps(x + 16) : (nd > 16 ? ld_tail(x + 16, nd - 16) : _mm512_setzero_ps());
                __m512 a = _mm512_fmadd_ps(lo, lo, _mm512_load_ps(acc + 16 * l));
                if (nd > 16) a = _mm512_fmadd_ps(hi, hi, a); /* only the chunks the dot form has */
                _mm512_store_ps(acc + 16 * l, a);
                r[l] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            }
            transpose16(r);
            int nj = D2 - j0 < 16 ? D2 - j0 : 16;
            for (int m = 0; m < nj; m++) _mm512_storeu_si512((void *)(o + m * 16), r[m]);
        }
        for (int l = 0; l < 16 && p * 16 + l < nx; l++) xn[p * 16 + l] = reduce1(_mm512_load_ps(acc + 16 * l));
    }
}

T512BF static void k_pack_query(const float *q, int D, uint32_t *pairs) {
    int D2 = (D + 1) / 2;
    for (int j0 = 0; j0 < D2; j0 += 16) {
        int d0 = 2 * j0, nd = D - d0 < 32 ? D - d0 : 32;
        __m512 lo = nd >= 16 ? _mm512_loadu_ps(q + d0) : ld_tail(q + d0, nd);
        __m512 hi = nd >= 32 ? _mm512_loadu_ps(q + d0 + 16) : (nd > 16 ? ld_tail(q + d0 + 16, nd - 16) : _mm512_setzero_ps());
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        int nj = D2 - j0 < 16 ? D2 - j0 : 16;
        _mm512_mask_storeu_epi32(pairs + j0, (__mmask16)((1u << nj) - 1), v);
    }
}

/* Upper bound of the canonical rank score from the approximate dot (see knn.c for the bound):
 * V = dot~ + E >= canonical dot, then the canonical metric map, which is monotone in the dot. */
T512BF static inline __mmask16 screen_epi(__m512 acc, int metric, const float *qa, const float *xa, int xs, int j,
                                          float edge) {
    __m512 nx = _mm512_loadu_ps(xa + j), ex = _mm512_loadu_ps(xa + xs + j);
    __m512 E = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(qa[0]), nx), _mm512_add_ps(_mm512_set1_ps(qa[1]), ex));
    __m512 V = _mm512_add_ps(acc, E), U;
    if (metric == LTK_METRIC_IP) {
        U = V;
    } else if (metric == LTK_METRIC_L2) {
        __m512 xn = _mm512_loadu_ps(xa + 2 * xs + j);
        U = _mm512_sub_ps(_mm512_setzero_ps(),
                          _mm512_fmadd_ps(_mm512_set1_ps(-2.0f), V, _mm512_add_ps(_mm512_set1_ps(qa[2]), xn)));
    } else {
        __m512 xn = _mm512_loadu_ps(xa + 2 * xs + j), sx = _mm512_loadu_ps(xa + 3 * xs + j);
        __m512 den = _mm512_mul_ps(_mm512_set1_ps(qa[3]), sx);
        __mmask16 ok = _mm512_cmp_ps_mask(xn, _mm512_setzero_ps(), _CMP_NEQ_UQ); /* canonical: 0 iff a norm is 0 */
        if (qa[2] == 0.0f) ok = 0;
        U = _mm512_maskz_div_ps(ok, V, den);
    }
    return _mm512_cmp_ps_mask(U, _mm512_set1_ps(edge), _CMP_NLT_UQ); /* !(U < edge): NaN passes */
}

/* Prefetch cursor over ltkc_pf lines: `per` lines at each step of the kernels' inner loop, so that
 * the next tile streams in evenly (a burst stalls on the full miss queue). */
typedef struct {
    const char *vp;
    int64_t stride;
    int l, lpv, vleft, per;
} pfcur;

static inline void pf_step(pfcur *c) {
    for (int t = 0; t < c->per && c->vleft > 0; t++) {
        __builtin_prefetch(c->vp + (int64_t)c->l * 64, 0, 2);
        if (++c->l == c->lpv) {
            c->l = 0;
            c->vp += c->stride;
            c->vleft--;
        }
    }
}

#define SCREEN_FN(QR, PR)                                                                                       \
    T512BF static void screen_##QR##_##PR(const uint32_t *qp, int D2, const uint32_t *packed, int p0, int nx,     \
                                          int metric, const float *qa, const float *xa, int xs, const float *edge, \
                                          uint64_t *mask, int mw, pfcur *pc) {                                   \
        __m512 a[QR][PR];                                                                                        \
        for (int x = 0; x < QR; x++)                                                                             \
            for (int y = 0; y < PR; y++) a[x][y] = _mm512_setzero_ps();                                          \
        const uint32_t *pk = packed + (size_t)p0 * D2 * 16;                                                      \
        for (int j = 0; j < D2; j++) {                                                                           \
            if (pc->vleft > 0) pf_step(pc);                                                                      \
            __m512bh k[PR];                                                                                      \
            for (int y = 0; y < PR; y++) k[y] = (__m512bh)_mm512_loadu_si512((const void *)(pk + ((size_t)y * D2 + j) * 16)); \
            for (int x = 0; x < QR; x++) {                                                                       \
                __m512bh b = (__m512bh)_mm512_set1_epi32((int)qp[(size_t)x * D2 + j]);                          \
                for (int y = 0; y < PR; y++) a[x][y] = _mm512_dpbf16_ps(a[x][y], b, k[y]);                      \
            }                                                                                                    \
        }                                                                                                        \
        for (int x = 0; x < QR; x++)                                                                             \
            for (int y = 0; y < PR; y++) {                                                                       \
                int j = (p0 + y) * 16;                                                                           \
                __mmask16 m = screen_epi(a[x][y], metric, qa + 4 * x, xa, xs, j, edge[x]);                       \
                if (nx - j < 16) m &= (__mmask16)((1u << (nx - j)) - 1);                                         \
                mask[(size_t)x * mw + (j >> 6)] |= (uint64_t)m << (j & 63);                                      \
            }                                                                                                    \
    }
SCREEN_FN(8, 3)
SCREEN_FN(8, 1)
SCREEN_FN(4, 3)
SCREEN_FN(4, 1)
SCREEN_FN(1, 3)
SCREEN_FN(1, 1)

/* xa is SoA over the padded tile width xs = 16 * panels: nx bound, ex, xn, sqrt(xn). */
T512BF static void k_screen(const uint32_t *qpairs, int nq, const uint32_t *packed, int nx, int D, int metric,
                            const float *qa, const float *xa, const float *edge, uint64_t *mask, int mw,
                            const ltkc_pf *pf) {
    int D2 = (D + 1) / 2, np = (nx + 15) / 16, xs = np * 16;
    for (int i = 0; i < nq * mw; i++) mask[i] = 0;
    pfcur pcur = {NULL, 0, 0, 1, 0, 0}, *pc = &pcur;
    if (pf && pf->n > 0) {
        int groups = nq / 8 + (nq % 8) / 4 + nq % 4;
        int64_t steps = (int64_t)groups * (np / 3 + np % 3) * D2, lines = (int64_t)pf->n * pf->lpv;
        pcur = (pfcur){pf->base, pf->stride, 0, pf->lpv, pf->n, (int)((lines + steps - 1) / steps)};
    }
    int i = 0;
    while (i < nq) {
        int qr = nq - i >= 8 ? 8 : (nq - i >= 4 ? 4 : 1);
        const uint32_t *qp = qpairs + (size_t)i * D2;
        int p = 0;
        for (; p + 3 <= np; p += 3) {
            if (qr == 8) screen_8_3(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else if (qr == 4) screen_4_3(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else screen_1_3(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
        }
        for (; p < np; p++) {
            if (qr == 8) screen_8_1(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else if (qr == 4) screen_4_1(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else screen_1_1(qp, D2, packed, p, nx, metric, qa + 4 * i, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
        }
        i += qr;
    }
    while (pc->vleft > 0) pf_step(pc);
}

/* ---- kNN int8 screening (AVX-512 VNNI): vpdpbusd, 4 products per lane, twice the bf16 rate ---- */
#define T512VN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma")))

int ltkc_cpu_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}

/* int8 form of a vector x (knn.c has the bound): with m = max |x_i| and the scale s = fl(m / 127),
 * x8_i = RNE(fl(x_i * fl(127 / m))) (|x8_i| <= 127: |x_i 127/m| (1+u)^2 < 127.5), the residual
 * dx_i = fl(x_i - s x8_i) and r2 = the sum of dx_i^2. A vector is quantised only if m >= mmin
 * (2^-50 for queries and indexer keys, 2^-60 for kNN vectors) and its squared norm is <= 2^100 (so
 * finite, no NaN); otherwise s = 0 (see k8_pack_tile for r2). */
T512VN static inline __m512i q8_chunk(__m512 f, __m512 inv, __m512 sc, __m512 *r2) {
    __m512i xi = _mm512_cvt_roundps_epi32(_mm512_mul_ps(f, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 dx = _mm512_fnmadd_ps(sc, _mm512_cvtepi32_ps(xi), f);
    *r2 = _mm512_fmadd_ps(dx, dx, *r2);
    return xi;
}

/* The scale of a vector with max |x_i| = m (m >= 2^-60, finite): fl(m / 127), or with pow2 the
 * power of two at or above it. Why pow2 for e4m3 data: its values sit on power-of-two grids, so a
 * power-of-two scale represents the top binades exactly; the measured residual R drops by ~30%
 * (T=256 S=64K DSA inputs: R/|x| 0.0064 -> 0.0046) although the step may be up to 2x coarser. */
T512VN static inline void q8_pick(float m, int pow2, float *inv, float *sc) {
    float t = m / 127.0f;
    if (pow2) {
        uint32_t u;
        memcpy(&u, &t, 4);
        u = (u + 0x7fffffu) & 0xff800000u; /* round up to a power of two (t is normal) */
        memcpy(&t, &u, 4);
        *sc = t;
        *inv = 1.0f / t;
    } else {
        *inv = 127.0f / m;
        *sc = t;
    }
}

/* Pass 1 of one vector: canonical squared norm (dot1 chunks and tree) and the scale. */
T512VN static inline float q8_scale(const float *x, int D, float *inv, float *sc, int pow2, float mmin) {
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 acc = _mm512_setzero_ps(), mx = acc;
    int c = 0;
    for (; c + 16 <= D; c += 16) {
        __m512 a = _mm512_loadu_ps(x + c);
        acc = _mm512_fmadd_ps(a, a, acc);
        mx = _mm512_max_ps(mx, _mm512_and_ps(a, absm));
    }
    if (c < D) {
        __m512 a = ld_tail(x + c, D - c);
        acc = _mm512_fmadd_ps(a, a, acc);
        mx = _mm512_max_ps(mx, _mm512_and_ps(a, absm));
    }
    float n2 = reduce1(acc), m = _mm512_reduce_max_ps(mx);
    if (n2 <= 0x1p100f && m >= mmin) q8_pick(m, pow2, inv, sc);
    else *inv = *sc = 0.0f;
    return n2;
}

/* q8_scale of 8 vectors x + l ldx at once (the same per-vector operations). */
T512VN static inline void q8_scale8(const float *x, int64_t ldx, int D, float *inv, float *sc, float *xn, int pow2,
                                     float mmin) {
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 acc[8], mx[8];
    for (int l = 0; l < 8; l++) acc[l] = mx[l] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 16 <= D; c += 16) {
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) {
            __m512 a = _mm512_loadu_ps(x + l * ldx + c);
            acc[l] = _mm512_fmadd_ps(a, a, acc[l]);
            mx[l] = _mm512_max_ps(mx[l], _mm512_and_ps(a, absm));
        }
    }
    if (c < D)
        for (int l = 0; l < 8; l++) {
            __m512 a = ld_tail(x + l * ldx + c, D - c);
            acc[l] = _mm512_fmadd_ps(a, a, acc[l]);
            mx[l] = _mm512_max_ps(mx[l], _mm512_and_ps(a, absm));
        }
    for (int l = 0; l < 8; l++) {
        float n2 = reduce1(acc[l]), m = _mm512_reduce_max_ps(mx[l]);
        xn[l] = n2;
        if (n2 <= 0x1p100f && m >= mmin) q8_pick(m, pow2, &inv[l], &sc[l]);
        else inv[l] = sc[l] = 0.0f;
    }
}

/* packed[(p*D4 + j)*16 + l] = bytes x8 + 128 (unsigned) of x[16p+l][4j..4j+3], zero padded (x8 = 0);
 * xn[v] canonical squared norm, xs[v] scale (0: x8 = 0), xr2[v] residual sum of squares (+inf: a
 * norm above 2^100, inf or NaN). */
T512VN static void k8_pack_tile(const float *X, int64_t ldx, int nx, int D, uint32_t *packed, float *xn, float *xs,
                                float *xr2) {
    int D4 = (D + 3) / 4, np = (nx + 15) / 16;
    /* The smallest max |x_i| quantised: 2^-60 for kNN vectors (so s_x >= 2^-67, and with a query's
     * s_q >= 2^-57 the product s_q s_x >= 2^-124 stays normal: knn.c). (The indexer's e4m3 keys are
     * packed from their bytes: k8_idx_pack_keys.) */
    const float mmin = 0x1p-60f;
    const int pow2 = 0;
    float inv[16], sc[16];
    float r2[16 * 16] __attribute__((aligned(64)));
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int p = 0; p < np; p++) {
        const float *xp = X + (int64_t)p * 16 * ldx;
        int nv = nx - p * 16 < 16 ? nx - p * 16 : 16;
        int l0 = 0;
        if (nv == 16) /* 8 vectors at a time: 16 independent FMA/max chains instead of 2 */
            for (; l0 < 16; l0 += 8) q8_scale8(xp + l0 * ldx, ldx, D, inv + l0, sc + l0, xn + p * 16 + l0, pow2, mmin);
        for (int l = l0; l < 16; l++) {
            inv[l] = sc[l] = 0.0f;
            if (l < nv) xn[p * 16 + l] = q8_scale(xp + l * ldx, D, &inv[l], &sc[l], pow2, mmin);
        }
        memset(r2, 0, sizeof r2);
        for (int j0 = 0; j0 < D4; j0 += 16) {
            int d0 = 4 * j0;
            __m512i r[16];
            if (d0 + 64 <= D && nv == 16) { /* the common case, unrolled so that r stays in registers */
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++) {
                    const float *x = xp + l * ldx + d0;
                    __m512 vi = _mm512_set1_ps(inv[l]), vs = _mm512_set1_ps(sc[l]), acc = _mm512_load_ps(r2 + 16 * l);
                    __m128i b0 = _mm512_cvtepi32_epi8(q8_chunk(_mm512_loadu_ps(x), vi, vs, &acc));
                    __m128i b1 = _mm512_cvtepi32_epi8(q8_chunk(_mm512_loadu_ps(x + 16), vi, vs, &acc));
                    __m128i b2 = _mm512_cvtepi32_epi8(q8_chunk(_mm512_loadu_ps(x + 32), vi, vs, &acc));
                    __m128i b3 = _mm512_cvtepi32_epi8(q8_chunk(_mm512_loadu_ps(x + 48), vi, vs, &acc));
                    _mm512_store_ps(r2 + 16 * l, acc);
                    __m512i w = _mm512_inserti32x4(_mm512_castsi128_si512(b0), b1, 1);
                    w = _mm512_inserti32x4(_mm512_inserti32x4(w, b2, 2), b3, 3);
                    r[l] = _mm512_xor_si512(w, flip);
                }
                transpose16(r);
                uint32_t *o = packed + ((size_t)p * D4 + j0) * 16;
#pragma GCC unroll 16
                for (int m = 0; m < 16; m++) _mm512_storeu_si512((void *)(o + m * 16), r[m]);
                continue;
            }
            for (int l = 0; l < 16; l++) {
                if (l >= nv) {
                    r[l] = flip;
                    continue;
                }
                const float *x = xp + l * ldx + d0;
                __m512 vi = _mm512_set1_ps(inv[l]), vs = _mm512_set1_ps(sc[l]), acc = _mm512_load_ps(r2 + 16 * l);
                __m128i b[4];
                for (int t = 0; t < 4; t++) {
                    int n = D - d0 - 16 * t;
                    __m512 f = n >= 16 ? _mm512_loadu_ps(x + 16 * t) : n > 0 ? ld_tail(x + 16 * t, n) : _mm512_setzero_ps();
                    b[t] = _mm512_cvtepi32_epi8(q8_chunk(f, vi, vs, &acc));
                }
                _mm512_store_ps(r2 + 16 * l, acc);
                __m512i w = _mm512_inserti32x4(_mm512_castsi128_si512(b[0]), b[1], 1);
                w = _mm512_inserti32x4(_mm512_inserti32x4(w, b[2], 2), b[3], 3);
                r[l] = _mm512_xor_si512(w, flip);
            }
            transpose16(r);
            int nj = D4 - j0 < 16 ? D4 - j0 : 16;
            for (int m = 0; m < nj; m++) _mm512_storeu_si512((void *)(packed + ((size_t)p * D4 + j0 + m) * 16), r[m]);
        }
        /* A vector with m < mmin (a zero vector among them) has s = 0 and x8 = 0, so dx = x and r2
         * its measured squared norm: knn.c's bound then reduces to |q.x| <= |q| R_x, still valid, and
         * a zero vector (R_x ~ 2^-63) is screened out. Why: "off" (r2 = +inf) made every pair of a
         * zero vector an exact rescore, the CPU kNN 2.5x slower where 9 rows in 10 are zero
         * (`litetopk bench knn --backend cpu --B 64 --N 200000 -k 128 --dist zero --threads 1`:
         * 55.4-56.3 ms against 22.0-22.2 on clustered rows). Off (+inf) only for a norm above
         * 2^100, inf or NaN. (The kNN screens a tile holding a nonzero such vector in bf16 instead;
         * the indexer screens a key only where its scale is > 0.) */
        for (int l = 0; l < nv; l++) {
            xs[p * 16 + l] = sc[l];
            xr2[p * 16 + l] = xn[p * 16 + l] <= 0x1p100f ? _mm512_reduce_add_ps(_mm512_load_ps(r2 + 16 * l)) : INFINITY;
        }
    }
}

/* Query: q8 as signed bytes (4 per word, zero padded); out[0] scale (0: off), out[1] residual sum of
 * squares (+inf: off); *corr = 128 * sum q8 (the offset of the unsigned base bytes). */
T512VN static void k8_pack_query_s(const float *q, int D, uint32_t *q4, float *out, int32_t *corr, int pow2) {
    int D4 = (D + 3) / 4;
    float inv, sc;
    q8_scale(q, D, &inv, &sc, pow2, 0x1p-50f); /* queries: s_q >= 2^-57 */
    __m512 vi = _mm512_set1_ps(inv), vs = _mm512_set1_ps(sc), acc = _mm512_setzero_ps();
    __m512i sum = _mm512_setzero_si512();
    for (int d0 = 0; d0 < 4 * D4; d0 += 16) {
        int n = D - d0;
        __m512 f = n >= 16 ? _mm512_loadu_ps(q + d0) : ld_tail(q + d0, n);
        __m512i xi = q8_chunk(f, vi, vs, &acc);
        sum = _mm512_add_epi32(sum, xi);
        __m128i b = _mm512_cvtepi32_epi8(xi);
        int nw = D4 - d0 / 4 < 4 ? D4 - d0 / 4 : 4;
        _mm_mask_storeu_epi32(q4 + d0 / 4, (__mmask8)((1u << nw) - 1), b);
    }
    out[0] = sc;
    out[1] = sc > 0.0f ? _mm512_reduce_add_ps(acc) : INFINITY;
    /* Unsigned: a NaN/inf query converts to INT_MIN lanes (the screen is then off, out[1] = +inf, and
     * corr unused); neither the lane sum nor the product may be signed overflow. The sum is taken
     * here lane by lane: GCC's _mm512_reduce_add_epi32 adds in signed int (UBSan, the fuzz-args
     * replay in a GCC sanitizer build). */
    uint32_t lanes[16], tot = 0;
    _mm512_storeu_si512((void *)lanes, sum);
    for (int i = 0; i < 16; i++) tot += lanes[i];
    *corr = (int32_t)(128u * tot);
}

/* The kNN's query form (scale m / 127) and the indexer's (power-of-two scale, e4m3 data). */
T512VN static void k8_pack_query(const float *q, int D, uint32_t *q4, float *out, int32_t *corr) {
    k8_pack_query_s(q, D, q4, out, corr, 0);
}
T512VN static void k8_idx_pack_query(const float *q, int D, uint32_t *q4, float *out, int32_t *corr) {
    k8_pack_query_s(q, D, q4, out, corr, 1);
}

/* The indexer's e4m3 keys packed straight from their bytes. A key's power-of-two scale s = 2^E is a
 * function of its largest magnitude code cmax (c = byte & 0x7f, ordered as the magnitudes), and so,
 * for each of the 19 exponents E (e4m3's 2^-9 .. 448 over 127: E in [-16, 2]), |x8| = RNE(v(c) / s)
 * is a 128-entry byte table, as is an upper bound of the squared residual in units of s^2 / 1020:
 * r2 = ceil(1020 (v/s - |x8|)^2) (<= 255, the residual being <= 1/2). One vpermt2b looks up 64
 * bytes (its index is the byte's low 7 bits: the sign is ignored), so a 64-byte chunk is two
 * lookups, the sign applied, and two vpdpbusd: the residual sum and sum x8^2. x8 and s are exactly
 * q8_pick's (the tables come from the same float operations), so the packed bytes are what
 * k8_pack_tile's power-of-two form gave. The bounds: sum dx^2 <= s^2 / 1020 sum r2 = R^2 and, by
 * the triangle inequality, |k| <= s |x8| + R (|x8| exact from its int sum; the int sums are exact
 * in fp32 for D <= 1024, and the float operations after them within 2^-20, inside the 2^-12 the
 * screen adds: indexer.c). |k| so bounded is within R / |k| ~ 0.5% of |k| on DSA keys, and |k|
 * enters the screen's bound only through its small terms. A NaN byte (c = 0x7f) turns the key off
 * (s = 0, xn = NaN, xr2 = +inf), an all-zero key has s = 0. Why: the earlier form (16-bit tables,
 * three two-register word lookups a 32-byte half, a squared-value table for |k|) was a third of the
 * fused decode at next_n = 2 (perf, `litetopk bench decode --backend cpu --B 8 --ctx 65536
 * --next-n 2 --algos fused`: k8_idx_pack_keys 12.5% of all samples against the screen's 16.3% and
 * the exact rescoring's 4.9%). */
static uint8_t k8e_x8[19][128] __attribute__((aligned(64))), k8e_r2[19][128] __attribute__((aligned(64)));
static int8_t k8e_row[128];   /* cmax -> table row (E + 16), -1: no scale (0 or NaN) */
static float k8e_s[128];      /* cmax -> s */
#define K8E_R2_UNIT 1020.0    /* r2 table units: s^2 / K8E_R2_UNIT */

static float e4m3_value(int c) { /* magnitude of code c (c < 0x7f) */
    const int e = c >> 3, f = c & 7;
    return e == 0 ? ldexpf((float)f, -9) : ldexpf((float)(8 + f), e - 10);
}

__attribute__((constructor)) static void k8e_init(void) {
    for (int cm = 0; cm < 128; cm++) {
        k8e_row[cm] = -1;
        if (cm == 0 || cm == 0x7f) continue;
        float t = e4m3_value(cm) / 127.0f; /* q8_pick with pow2 */
        uint32_t u;
        memcpy(&u, &t, 4);
        u = (u + 0x7fffffu) & 0xff800000u;
        memcpy(&t, &u, 4);
        k8e_s[cm] = t;
        k8e_row[cm] = (int8_t)(((int)(u >> 23) - 127) + 16);
    }
    for (int r = 0; r < 19; r++) {
        const float sc = ldexpf(1.0f, r - 16), inv = 1.0f / sc;
        for (int c = 0; c < 128; c++) {
            const float v = c == 0x7f ? 0.0f : e4m3_value(c);
            const float q = v * inv;
            if (!(q <= 127.5f)) { /* above any key's largest value at this scale: never looked up */
                k8e_x8[r][c] = k8e_r2[r][c] = 0;
                continue;
            }
            const float x8 = rintf(q);
            const double d = (double)q - (double)x8;
            k8e_x8[r][c] = (uint8_t)x8;
            k8e_r2[r][c] = (uint8_t)ceil(d * d * K8E_R2_UNIT);
        }
    }
}

/* The indexer's screen needs AVX-512 VNNI (vpdpbusd) and VBMI (vpermt2b, the pack's lookups). */
int ltkc_cpu_idx8(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
}

#define T512VB __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma")))

/* Keys s0..s0+n-1 (n <= 64) of an e4m3 [S, D] array (row stride in bytes), packed as k8_pack_tile
 * lays them out (power-of-two scales), with their scales and squared-norm and residual bounds. */
T512VB static void k8_idx_pack_keys(const uint8_t *kv, int64_t stride, int64_t s0, int n, int D, uint32_t *packed,
                                    float *xn, float *xs, float *xr2) {
    const int D4 = (D + 3) / 4, np = (n + 15) / 16;
    const __m512i m7 = _mm512_set1_epi8(0x7f), hi = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    for (int p = 0; p < np; p++) {
        const int nv = n - p * 16 < 16 ? n - p * 16 : 16;
        int rowi[16];
        for (int l = 0; l < 16; l++) { /* each key's largest magnitude code */
            rowi[l] = -1;
            if (l >= nv) continue;
            const uint8_t *k = kv + (s0 + p * 16 + l) * stride;
            __m512i mx = _mm512_setzero_si512();
            for (int d = 0; d < D; d += 64) {
                const __mmask64 mk = D - d >= 64 ? ~0ull : (1ull << (D - d)) - 1;
                mx = _mm512_max_epu8(mx, _mm512_and_si512(_mm512_maskz_loadu_epi8(mk, k + d), m7));
            }
            __m256i h = _mm256_max_epu8(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1));
            __m128i q = _mm_max_epu8(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            q = _mm_max_epu8(q, _mm_srli_si128(q, 8));
            q = _mm_max_epu8(q, _mm_srli_si128(q, 4));
            q = _mm_max_epu8(q, _mm_srli_si128(q, 2));
            q = _mm_max_epu8(q, _mm_srli_si128(q, 1));
            const int cm = _mm_extract_epi8(q, 0);
            const int j = p * 16 + l;
            rowi[l] = k8e_row[cm];
            xs[j] = rowi[l] >= 0 ? k8e_s[cm] : 0.0f;
            if (cm == 0x7f) xn[j] = NAN, xr2[j] = INFINITY;
            else if (cm == 0) xn[j] = 0.0f, xr2[j] = 0.0f;
        }
        __m512i sr[16], sn[16];
        for (int l = 0; l < 16; l++) sr[l] = sn[l] = _mm512_setzero_si512();
        for (int j0 = 0; j0 < D4; j0 += 16) {
            const int d0 = 4 * j0;
            const __mmask64 mk = D - d0 >= 64 ? ~0ull : (1ull << (D - d0)) - 1;
            __m512i r[16];
            for (int l = 0; l < 16; l++) {
                if (rowi[l] < 0) { /* x8 = 0: zero, NaN or padding keys */
                    r[l] = hi;
                    continue;
                }
                const uint8_t *tx = k8e_x8[rowi[l]], *tr = k8e_r2[rowi[l]];
                /* masked-off tail bytes are 0: code 0 looks up x8 = 0 and r2 = 0 */
                const __m512i b = _mm512_maskz_loadu_epi8(mk, kv + (s0 + p * 16 + l) * stride + d0);
                const __m512i x8 = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)tx), b,
                                                            _mm512_load_si512((const void *)(tx + 64)));
                const __m512i r2 = _mm512_permutex2var_epi8(_mm512_load_si512((const void *)tr), b,
                                                            _mm512_load_si512((const void *)(tr + 64)));
                /* x8 + 128 (x8 <= 127): 128 | |x8| for a positive byte, 128 - |x8| for a negative one */
                r[l] = _mm512_mask_sub_epi8(_mm512_or_si512(x8, hi), _mm512_movepi8_mask(b), hi, x8);
                sr[l] = _mm512_dpbusd_epi32(sr[l], r2, ones);
                sn[l] = _mm512_dpbusd_epi32(sn[l], x8, x8);
            }
            transpose16(r);
            const int nj = D4 - j0 < 16 ? D4 - j0 : 16;
            for (int m = 0; m < nj; m++) _mm512_storeu_si512((void *)(packed + ((size_t)p * D4 + j0 + m) * 16), r[m]);
        }
        for (int l = 0; l < nv; l++) {
            if (rowi[l] < 0) continue;
            const int j = p * 16 + l;
            const float s2 = xs[j] * xs[j];
            /* R^2 and (s |x8| + R)^2, each raised by 2^-20 over the rounding of these few operations */
            const float rr = s2 * (float)(1.0 / K8E_R2_UNIT) * (float)_mm512_reduce_add_epi32(sr[l]) * (1.0f + 0x1p-20f);
            const float nk = xs[j] * sqrtf((float)_mm512_reduce_add_epi32(sn[l])) + sqrtf(rr);
            xr2[j] = rr;
            xn[j] = nk * nk * (1.0f + 0x1p-20f);
        }
    }
}

/* acc += the u8 x s8 dot of each lane (vpdpbusd) in place: with the intrinsic, gcc kept each of
 * k8_idx_screen's 16 accumulators in two registers and copied between them every step (2 moves per
 * vpdpbusd, ~15% of the loop); a tied asm operand keeps one. */
T512VN static inline void k8_dp(__m512i *acc, __m512i k, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(*acc) : "v"(k), "v"(b));
}

/* Indexer int8 screen of one row against a 64-key tile packed by k8_pack_tile (4 panels of 16):
 * S_j = sum_h wq[h] max(I_hj, 0) in fp32, with I_hj = q8_h . k8_j exact in int32 (the unsigned
 * offset of the tile bytes removed with corr[h]) and wq[h] = fl(w_h s_q,h); then the rigorous upper
 * bound UB_j of the canonical score (indexer.c's screen comment) and bit j of the result set iff
 * !(UB_j < edge). Same blocking as b_idx_score (4 heads x 4 panels of accumulators), with
 * vpdpbusd: 64 products an instruction instead of 32. */
T512VN static uint64_t k8_idx_screen(const uint32_t *q4, const int32_t *corr, const float *wq, int H, int D,
                                     const uint32_t *packed, const float *kb, const float *rc, float edge,
                                     const uint8_t *pf, int pf_lines) {
    const int D4 = (D + 3) / 4;
    const size_t ps = (size_t)D4 * 16;
    const int pf_step = H >= 4 ? (pf_lines + H / 4 - 1) / (H / 4) : pf_lines;
    const __m512i z = _mm512_setzero_si512();
    __m512 S[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int h = 0;
    for (; h + 4 <= H; h += 4) {
        /* 16 named accumulators (an a[4][4] array made gcc copy them around the loop), started at
         * -corr: the unsigned offset of the tile bytes comes off for free */
        const uint32_t *qh = q4 + (size_t)h * D4;
        for (int l = 0; l < pf_step && pf_lines > 0; l++, pf_lines--, pf += 64) __builtin_prefetch(pf, 0, 2);
#define K8A(x) __m512i a##x##0, a##x##1, a##x##2, a##x##3;                                           \
    a##x##0 = a##x##1 = a##x##2 = a##x##3 = _mm512_set1_epi32(-corr[h + x]);
        K8A(0) K8A(1) K8A(2) K8A(3)
#undef K8A
        for (int j = 0; j < D4; j++) {
            const __m512i k0 = _mm512_loadu_si512((const void *)(packed + j * 16));
            const __m512i k1 = _mm512_loadu_si512((const void *)(packed + ps + j * 16));
            const __m512i k2 = _mm512_loadu_si512((const void *)(packed + 2 * ps + j * 16));
            const __m512i k3 = _mm512_loadu_si512((const void *)(packed + 3 * ps + j * 16));
#define K8D(x)                                                                                        \
    {                                                                                                 \
        const __m512i b = _mm512_set1_epi32((int)qh[(size_t)x * D4 + j]);                             \
        k8_dp(&a##x##0, k0, b);                                                                       \
        k8_dp(&a##x##1, k1, b);                                                                       \
        k8_dp(&a##x##2, k2, b);                                                                       \
        k8_dp(&a##x##3, k3, b);                                                                       \
    }
            K8D(0) K8D(1) K8D(2) K8D(3)
#undef K8D
        }
#define K8E(x)                                                                                        \
    {                                                                                                 \
        const __m512 wv = _mm512_set1_ps(wq[h + x]);                                                  \
        S[0] = _mm512_fmadd_ps(wv, _mm512_cvtepi32_ps(_mm512_max_epi32(a##x##0, z)), S[0]);           \
        S[1] = _mm512_fmadd_ps(wv, _mm512_cvtepi32_ps(_mm512_max_epi32(a##x##1, z)), S[1]);           \
        S[2] = _mm512_fmadd_ps(wv, _mm512_cvtepi32_ps(_mm512_max_epi32(a##x##2, z)), S[2]);           \
        S[3] = _mm512_fmadd_ps(wv, _mm512_cvtepi32_ps(_mm512_max_epi32(a##x##3, z)), S[3]);           \
    }
        K8E(0) K8E(1) K8E(2) K8E(3)
#undef K8E
    }
    for (; h < H; h++) {
        __m512i a[4] = {z, z, z, z};
        const uint32_t *qh = q4 + (size_t)h * D4;
        for (int j = 0; j < D4; j++) {
            __m512i b = _mm512_set1_epi32((int)qh[j]);
            for (int y = 0; y < 4; y++)
                a[y] = _mm512_dpbusd_epi32(a[y], _mm512_loadu_si512((const void *)(packed + y * ps + j * 16)), b);
        }
        __m512i c = _mm512_set1_epi32(corr[h]);
        __m512 wv = _mm512_set1_ps(wq[h]);
        for (int y = 0; y < 4; y++)
            S[y] = _mm512_fmadd_ps(wv, _mm512_cvtepi32_ps(_mm512_max_epi32(_mm512_sub_epi32(a[y], c), z)), S[y]);
    }
    /* the bound of indexer.c's screen, 16 keys at a time: kb = [c1 | kv|k| | kv R_k] x 64 keys,
     * rc = [A+, B+, A, W] */
    const __m512 Ap = _mm512_set1_ps(rc[0]), Bp = _mm512_set1_ps(rc[1]), A = _mm512_set1_ps(rc[2]);
    const __m512 W = _mm512_set1_ps(rc[3]);
    const __m512 up = _mm512_set1_ps(1.0f + 0x1p-12f), e = _mm512_set1_ps(edge);
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    uint64_t m = 0;
    for (int y = 0; y < 4; y++) {
        const __m512 c1 = _mm512_loadu_ps(kb + 16 * y), bn = _mm512_loadu_ps(kb + 64 + 16 * y);
        const __m512 br = _mm512_loadu_ps(kb + 128 + 16 * y);
        const __m512 at = _mm512_mul_ps(c1, S[y]);
        __m512 bnd = _mm512_mul_ps(_mm512_fmadd_ps(Ap, br, _mm512_mul_ps(Bp, _mm512_add_ps(bn, br))), up);
        bnd = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0x1p-12f), A), bn, bnd);
        bnd = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0x1p-100f), W), bn, bnd);
        const __m512 sl = _mm512_fmadd_ps(_mm512_and_ps(at, absm), _mm512_set1_ps(0x1p-20f), _mm512_mul_ps(bnd, up));
        const __m512 ub = _mm512_add_ps(_mm512_add_ps(at, sl), _mm512_set1_ps(0x1p-140f));
        m |= (uint64_t)_mm512_cmp_ps_mask(ub, e, _CMP_NLT_UQ) << (16 * y); /* NaN: kept */
    }
    return m;
}

/* Upper bound of the canonical rank score from the exact integer dot I (knn.c has the bound):
 * A = fl(fl(s_q s_x) I), V = fl(A + fl(|A| 2^-21 + E)), E = a1 rx + a2 nx + (qa3 + ex).
 * qa: s_q, a1, a2, qa3, qn, sqrt(qn); xa SoA: nx, ex, xn, sqrt(xn), s_x, rx. */
T512VN static inline __mmask16 screen8_epi(__m512i acc, int metric, const float *qa, const float *xa, int xs, int j,
                                          float edge) {
    const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 nx = _mm512_loadu_ps(xa + j), ex = _mm512_loadu_ps(xa + xs + j);
    __m512 sx = _mm512_loadu_ps(xa + 4 * xs + j), rx = _mm512_loadu_ps(xa + 5 * xs + j);
    __m512 A = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(qa[0]), sx), _mm512_cvtepi32_ps(acc));
    __m512 E = _mm512_fmadd_ps(_mm512_set1_ps(qa[1]), rx,
                               _mm512_fmadd_ps(_mm512_set1_ps(qa[2]), nx, _mm512_add_ps(_mm512_set1_ps(qa[3]), ex)));
    __m512 V = _mm512_add_ps(A, _mm512_fmadd_ps(_mm512_and_ps(A, absm), _mm512_set1_ps(0x1p-21f), E)), U;
    if (metric == LTK_METRIC_IP) {
        U = V;
    } else if (metric == LTK_METRIC_L2) {
        __m512 xn = _mm512_loadu_ps(xa + 2 * xs + j);
        U = _mm512_sub_ps(_mm512_setzero_ps(),
                          _mm512_fmadd_ps(_mm512_set1_ps(-2.0f), V, _mm512_add_ps(_mm512_set1_ps(qa[4]), xn)));
    } else {
        __m512 xn = _mm512_loadu_ps(xa + 2 * xs + j), sxx = _mm512_loadu_ps(xa + 3 * xs + j);
        __m512 den = _mm512_mul_ps(_mm512_set1_ps(qa[5]), sxx);
        __mmask16 ok = _mm512_cmp_ps_mask(xn, _mm512_setzero_ps(), _CMP_NEQ_UQ); /* canonical: 0 iff a norm is 0 */
        if (qa[4] == 0.0f) ok = 0;
        U = _mm512_maskz_div_ps(ok, V, den);
    }
    return _mm512_cmp_ps_mask(U, _mm512_set1_ps(edge), _CMP_NLT_UQ); /* !(U < edge): NaN passes */
}

#define SCREEN8_FN(QR, PR)                                                                                      \
    T512VN static void screen8_##QR##_##PR(const uint32_t *qp, int D4, const uint32_t *packed, int p0, int nx,    \
                                           int metric, const float *qa, const float *xa, int xs, const float *edge, \
                                           uint64_t *mask, int mw, pfcur *pc) {                                  \
        __m512i a[QR][PR];                                                                                       \
        for (int x = 0; x < QR; x++)                                                                             \
            for (int y = 0; y < PR; y++) a[x][y] = _mm512_set1_epi32(-(int32_t)ltk_f32_bits(qa[LTKC_QA8 * x + 6])); \
        const uint32_t *pk = packed + (size_t)p0 * D4 * 16;                                                      \
        for (int j = 0; j < D4; j++) {                                                                           \
            if (pc->vleft > 0) pf_step(pc);                                                                      \
            __m512i k[PR];                                                                                       \
            for (int y = 0; y < PR; y++) k[y] = _mm512_loadu_si512((const void *)(pk + ((size_t)y * D4 + j) * 16)); \
            for (int x = 0; x < QR; x++) {                                                                       \
                __m512i b = _mm512_set1_epi32((int)qp[(size_t)x * D4 + j]);                                      \
                for (int y = 0; y < PR; y++) a[x][y] = _mm512_dpbusd_epi32(a[x][y], k[y], b);                    \
            }                                                                                                    \
        }                                                                                                        \
        for (int x = 0; x < QR; x++)                                                                             \
            for (int y = 0; y < PR; y++) {                                                                       \
                int j = (p0 + y) * 16;                                                                           \
                __mmask16 m = screen8_epi(a[x][y], metric, qa + LTKC_QA8 * x, xa, xs, j, edge[x]);               \
                if (nx - j < 16) m &= (__mmask16)((1u << (nx - j)) - 1);                                         \
                mask[(size_t)x * mw + (j >> 6)] |= (uint64_t)m << (j & 63);                                      \
            }                                                                                                    \
    }
SCREEN8_FN(8, 3)
SCREEN8_FN(8, 1)
SCREEN8_FN(4, 3)
SCREEN8_FN(4, 1)
SCREEN8_FN(1, 3)
SCREEN8_FN(1, 1)

/* qa: LTKC_QA8 floats per query (the correction in word 6, as int32 bits); xa SoA [6][16 * panels]. */
T512VN static void k8_screen(const uint32_t *q4, int nq, const uint32_t *packed, int nx, int D, int metric,
                             const float *qa, const float *xa, const float *edge, uint64_t *mask, int mw,
                             const ltkc_pf *pf) {
    int D4 = (D + 3) / 4, np = (nx + 15) / 16, xs = np * 16;
    for (int i = 0; i < nq * mw; i++) mask[i] = 0;
    pfcur pcur = {NULL, 0, 0, 1, 0, 0}, *pc = &pcur;
    if (pf && pf->n > 0) {
        int groups = nq / 8 + (nq % 8) / 4 + nq % 4;
        int64_t steps = (int64_t)groups * (np / 3 + np % 3) * D4, lines = (int64_t)pf->n * pf->lpv;
        pcur = (pfcur){pf->base, pf->stride, 0, pf->lpv, pf->n, (int)((lines + steps - 1) / steps)};
    }
    int i = 0;
    while (i < nq) {
        int qr = nq - i >= 8 ? 8 : (nq - i >= 4 ? 4 : 1);
        const uint32_t *qp = q4 + (size_t)i * D4;
        const float *qi = qa + (size_t)LTKC_QA8 * i;
        int p = 0;
        for (; p + 3 <= np; p += 3) {
            if (qr == 8) screen8_8_3(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else if (qr == 4) screen8_4_3(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else screen8_1_3(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
        }
        for (; p < np; p++) {
            if (qr == 8) screen8_8_1(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else if (qr == 4) screen8_4_1(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
            else screen8_1_1(qp, D4, packed, p, nx, metric, qi, xa, xs, edge + i, mask + (size_t)i * mw, mw, pc);
        }
        i += qr;
    }
    while (pc->vleft > 0) pf_step(pc);
}

const ltkc_kern ltkc_kern_avx512 = {
    .name = "avx512",
    .has_bf16 = 0,
    .dots_block = v_dots_block,
    .dots_pairs = v_dots_pairs,
    .gate_mask = v_gate_mask,
    .keys_f32 = v_keys_f32,
    .idx_pack_q = f_idx_pack_q,
    .idx_pack_tile = f_idx_pack_tile,
    .idx_score = f_idx_score,
};

/* The bf16 table keeps the fp32 indexer entries for F32 data (geometry bf16 = 0). */
static void bf_pack_q(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst) {
    if (g->bf16) b_idx_pack_q(q, dt, g, dst);
    else f_idx_pack_q(q, dt, g, dst);
}
static void bf_pack_tile(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0, int n,
                         const ltkc_idx_geom *g, void *tile) {
    if (g->bf16) b_idx_pack_tile(kv, dt, stride, s_list, s0, n, g, tile);
    else f_idx_pack_tile(kv, dt, stride, s_list, s0, n, g, tile);
}
static void bf_score(const void *qrow, const float *w, const void *tile, const float *scale, const ltkc_idx_geom *g,
                     float *out) {
    if (g->bf16) b_idx_score(qrow, w, tile, scale, g, out);
    else f_idx_score(qrow, w, tile, scale, g, out);
}

const ltkc_kern ltkc_kern_avx512bf16 = {
    .name = "avx512bf16",
    .has_bf16 = 1,
    .dots_block = v_dots_block,
    .dots_pairs = v_dots_pairs,
    .gate_mask = v_gate_mask,
    .keys_f32 = v_keys_f32,
    .knn_pack_tile = k_pack_tile,
    .knn_pack_query = k_pack_query,
    .knn_screen = k_screen,
    .knn8_pack_tile = k8_pack_tile,
    .knn8_pack_query = k8_pack_query,
    .knn8_screen = k8_screen,
    .idx8_pack_keys = k8_idx_pack_keys,
    .idx8_pack_query = k8_idx_pack_query,
    .idx8_screen = k8_idx_screen,
    .idx_pack_q = bf_pack_q,
    .idx_pack_tile = bf_pack_tile,
    .idx_score = bf_score,
};
#else
int ltkc_cpu_vnni(void) { return 0; }
int ltkc_cpu_idx8(void) { return 0; }
#endif
