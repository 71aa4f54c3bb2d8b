/* Shared helpers of the GPU select / kNN tests (C11, CUDA runtime API only).
 * The tests call the CUDA entry points of src/cuda/cuda-common.cuh directly, with arguments resolved as
 * the front end would (strides filled in), and compare with a host oracle that ranks exactly as
 * the ref backend does (score desc, lower index first, -0 == +0, NaN last). */
#ifndef LTK_CUDA_TEST_UTIL_H
#define LTK_CUDA_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cuda/cuda-common.cuh"

static int g_pass, g_fail;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (cond) {                                            \
            g_pass++;                                          \
        } else {                                               \
            g_fail++;                                          \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);        \
            printf(__VA_ARGS__);                               \
            printf("\n");                                      \
        }                                                      \
    } while (0)

#define CUDA_OK(expr)                                                                                  \
    do {                                                                                               \
        cudaError_t e_ = (expr);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #expr); \
            exit(2);                                                                                   \
        }                                                                                              \
    } while (0)

/* splitmix64: seeded, reproducible */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unif(void) { return (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
static float rng_normal(void) { /* sum of 4 uniforms: bell-shaped, cheap */
    return (float)((rng_unif() + rng_unif() + rng_unif() + rng_unif() - 2.0) * 1.7320508);
}

static uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint16_t f32_to_bf16(float x) {
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static uint16_t f32_to_f16(float x) {
    uint32_t u = f2u(x), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) {                                    /* subnormal / zero */
        float m = u2f(a) * 16777216.0f;                       /* x / 2^-24 */
        return (uint16_t)(sign | (uint32_t)lrintf(m));
    }
    uint32_t e = ((a >> 23) - 112u) << 10, man = (a >> 13) & 0x3ffu, rest = a & 0x1fffu;
    uint32_t h = e | man;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}
static float f16_to_f32(uint16_t h) { /* = ltk_f16_to_f32 */
    uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (ex == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
    if (ex == 0) {
        float mag = ldexpf((float)man, -24);
        return sign ? -mag : mag;
    }
    return u2f(sign | ((ex + 112) << 23) | (man << 13));
}
static float bf16_to_f32(uint16_t v) { return u2f((uint32_t)v << 16); }

/* host rank key (= ltk_rank_key) */
static uint32_t hkey(float x) { return ltk_rank_key(x); }

/* same float, NaN == NaN */
static int same_bits(float a, float b) { return (isnan(a) && isnan(b)) || f2u(a) == f2u(b); }

typedef struct {
    uint32_t key;
    int64_t idx;
} hent;
static int cmp_hent(const void *pa, const void *pb) {
    const hent *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static void *dmalloc(size_t n) {
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, n ? n : 16));
    return p;
}
static void *dupload(const void *h, size_t n) {
    void *d = dmalloc(n);
    if (n) CUDA_OK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

static double now_ms_events(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
