/* The one total order every backend ranks by (see litetopk.h, ORDER):
 * score descending, ties by lower index, -0 == +0, NaN below -inf.
 * A float maps to an unsigned "rank key" such that a larger key is a better score; NaN maps to 0.
 * Usable from C and CUDA. */
#ifndef LTK_ORDER_H
#define LTK_ORDER_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#  define LTK_HD __host__ __device__ __forceinline__
#else
#  define LTK_HD static inline
#endif

LTK_HD uint32_t ltk_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}

LTK_HD float ltk_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}

/* Larger key = better. NaN -> 0, -inf -> 0x007fffff, -0/+0 -> 0x80000000, +inf -> 0xff800000. */
LTK_HD uint32_t ltk_rank_key(float x) {
    uint32_t u = ltk_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0u; /* NaN */
    if ((u & 0x7fffffffu) == 0u) return 0x80000000u; /* -0 == +0 */
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Inverse of ltk_rank_key for non-NaN keys (0 maps back to a NaN). */
LTK_HD float ltk_rank_key_to_f32(uint32_t key) {
    if (key == 0u) return ltk_bits_f32(0x7fc00000u);
    return ltk_bits_f32((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

/* The lowest float whose key is >= key, for key > 0: a gate "ltk_rank_key(x) >= key" is then the
 * plain compare "x >= ltk_rank_key_floor(key)" (false for NaN x; -0 >= +0 holds, as their keys are
 * equal; denormals compare exactly unless flushed). +0 .. +inf for keys of non-negative floats,
 * -inf for keys at or below -inf's, the negative float ~key between, a NaN (nothing passes) above
 * +inf's key. Key 0 (every score passes, NaN too) has no such float: callers test it apart. */
LTK_HD float ltk_rank_key_floor(uint32_t key) {
    if (key >= 0x80000000u) return ltk_bits_f32(key & 0x7fffffffu);
    if (key <= 0x007fffffu) return ltk_bits_f32(0xff800000u); /* -inf */
    return ltk_bits_f32(~key);
}

/* Buckets of keys at or above kmin, finer near kmin, for key ranges of any width (ltk_topk_bucket in
 * select.cuh: the CUDA kNN's final select and the last CTA of a select row): ltk_key_bucket_shift(kmax
 * - kmin) gives sh, then the bucket of key is d = (key - kmin) >> sh (< 2^15) itself below 256,
 * above it a float of d with 8 mantissa bits (256 buckets an octave): 0 .. 2047, non-decreasing in
 * key, consecutive buckets one apart (tests/test-order.c). */
LTK_HD int ltk_top_bit(uint32_t u) { /* u > 0 */
#if defined(__CUDA_ARCH__)
    return 31 - __clz(u);
#elif defined(__GNUC__)
    return 31 - __builtin_clz(u);
#else
    int e = 0;
    while (u >> (e + 1)) e++;
    return e;
#endif
}
LTK_HD int ltk_key_bucket_shift(uint32_t span) { return span >> 15 ? ltk_top_bit(span) - 14 : 0; }
LTK_HD uint32_t ltk_key_bucket(uint32_t key, uint32_t kmin, int sh) {
    const uint32_t d = (key - kmin) >> sh;
    if (d < 256u) return d;
    const int e = ltk_top_bit(d); /* 8 .. 14 */
    return ((uint32_t)(e - 7) << 8) | ((d >> (e - 8)) & 255u);
}

/* 1 if (score a, index ia) ranks strictly before (score b, index ib). */
LTK_HD int ltk_better(float a, int64_t ia, float b, int64_t ib) {
    uint32_t ka = ltk_rank_key(a), kb = ltk_rank_key(b);
    return ka > kb || (ka == kb && ia < ib);
}

#endif
