/* Scalar number formats used by the tool: float <-> e4m3 / f16 / bf16 conversions (round to nearest
 * even), and the ORDER of litetopk.h as a sortable key. Header-only so tests and fuzzers share it. */
#ifndef LTK_TOOLS_NUM_H
#define LTK_TOOLS_NUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t num_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float num_bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- bf16: the upper half of an f32 ------------------------------------------------------- */
static inline uint16_t num_f32_to_bf16(float x) {
    uint32_t u = num_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* keep NaN a NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                         /* nearest even */
    return (uint16_t)(u >> 16);
}

static inline float num_bf16_to_f32(uint16_t v) { return num_bits_f32((uint32_t)v << 16); }

/* ---- IEEE binary16 ------------------------------------------------------------------------ */
static inline float num_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return num_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float mag = ldexpf((float)man, -24);
        return sign ? -mag : mag;
    }
    return num_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t num_f32_to_f16(float x) {
    uint32_t u = num_f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (absu < 0x38800000u) {
        /* Result is subnormal (or zero) in f16: value / 2^-24 rounded to nearest even.
         * The scaling by 2^24 is exact in f32 and rintf rounds half to even. */
        float mag = num_bits_f32(absu) * 16777216.0f;
        return (uint16_t)(sign | (uint16_t)rintf(mag));
    }
    /* Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even. */
    uint32_t v = absu - 0x38000000u; /* exponent bias 127 -> 15 */
    v += 0x0fffu + ((v >> 13) & 1u);
    return (uint16_t)(sign | (uint16_t)(v >> 13));
}

/* ---- float8 e4m3fn (OCP): bias 7, max 448, no inf, S.1111.111 is NaN ----------------------- */
static inline float num_e4m3_to_f32(uint8_t v) {
    uint32_t exp = (v >> 3) & 0xfu, man = v & 0x7u;
    float mag;
    if (exp == 0xf && man == 0x7) return NAN;
    if (exp == 0) mag = ldexpf((float)man, -9);
    else mag = ldexpf((float)(8 + man), (int)exp - 10);
    return (v & 0x80) ? -mag : mag;
}

/* Saturating conversion (values beyond 448 clamp to 448, as the quantisers in the DSA pipelines
 * clamp before the cast), round to nearest even. Scaling by powers of two is exact, so rintf
 * rounds the real 3-bit mantissa; a mantissa that rounds up to 8 carries into the exponent. */
static inline uint8_t num_f32_to_e4m3(float x) {
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    float a = fabsf(x);
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);
    if (a < 0.015625f) /* below 2^-6: subnormal steps of 2^-9 (8 rounds up to the smallest normal) */
        return (uint8_t)(sign | (uint8_t)rintf(a * 512.0f));
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): the exponent of 1.m is e - 1 */
    int m = (int)rintf((ldexpf(a, 1 - e) - 1.0f) * 8.0f);
    int biased = e + 6;
    if (m == 8) m = 0, biased++;
    return (uint8_t)(sign | (uint8_t)(biased << 3 | m));
}

/* ---- ORDER of litetopk.h as an unsigned key: larger key = better; NaN -> 0; -0 == +0 ------- */
static inline uint32_t num_rank_key(float x) {
    uint32_t u = num_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0u;
    if ((u & 0x7fffffffu) == 0u) return 0x80000000u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

#endif
