/* Host helpers of the CUDA indexer tests and benchmark: e4m3/bf16 encoding, DSA-like input
 * generation (threaded), device upload. C11 + the CUDA runtime API. */
#ifndef LTK_TESTS_GPU_UTIL_H
#define LTK_TESTS_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "litetopk.h"

#define GPU_CHECK(expr)                                                                                   \
    do {                                                                                                  \
        cudaError_t g_e_ = (expr);                                                                        \
        if (g_e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(g_e_));      \
            exit(2);                                                                                      \
        }                                                                                                 \
    } while (0)

static inline float gu_e4m3_f32(uint8_t v) {
    uint32_t s = v >> 7, e = (v >> 3) & 0xf, m = v & 7;
    if (e == 0xf && m == 7) return NAN;
    float mag = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), (int)e - 10);
    return s ? -mag : mag;
}

/* Nearest e4m3 (saturating at 448; NaN -> 0x7f). Positive codes 0x00..0x7e are increasing. */
static inline uint8_t gu_f32_e4m3(float x) {
    if (x != x) return 0x7f;
    uint8_t sign = x < 0 ? 0x80 : 0;
    float a = fabsf(x);
    int lo = 0, hi = 0x7e;
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);
    while (lo < hi) { /* first code with value >= a */
        int mid = (lo + hi) >> 1;
        if (gu_e4m3_f32((uint8_t)mid) < a) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && a - gu_e4m3_f32((uint8_t)(lo - 1)) <= gu_e4m3_f32((uint8_t)lo) - a) lo--;
    return (uint8_t)(sign | lo);
}

static inline float gu_bf16_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t gu_f32_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* splitmix64 streams, one per index block (thread-count independent, reproducible). */
static inline uint64_t gu_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double gu_unit(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    return (double)(gu_mix(*s) >> 11) * (1.0 / 9007199254740992.0);
}
static inline float gu_normal(uint64_t *s) {
    double u = gu_unit(s), v = gu_unit(s);
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* DSA inputs as the production pipeline quantises them: keys randn quantised per key to e4m3 with
 * scale amax/448 (kv_scale = scale), queries randn cast to e4m3, weights randn * D^-0.5 * H^-0.5. */
static inline void gu_gen_dsa(uint64_t seed, int64_t T, int64_t S, int H, int D, uint8_t *q, uint8_t *kv,
                              float *kv_scale, float *w) {
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < S; s++) {
        uint64_t st = gu_mix(seed ^ (0x1000000000ull + (uint64_t)s));
        float x[512], amax = 0.0f;
        for (int d = 0; d < D; d++) {
            x[d] = gu_normal(&st);
            amax = fmaxf(amax, fabsf(x[d]));
        }
        float sc = fmaxf(amax, 1e-4f) / 448.0f;
        for (int d = 0; d < D; d++) kv[s * D + d] = gu_f32_e4m3(x[d] / sc);
        kv_scale[s] = sc;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        uint64_t st = gu_mix(seed ^ (0x2000000000ull + (uint64_t)t));
        for (int64_t i = 0; i < (int64_t)H * D; i++) q[t * H * D + i] = gu_f32_e4m3(gu_normal(&st));
        for (int h = 0; h < H; h++) w[t * H + h] = gu_normal(&st) / sqrtf((float)D * (float)H);
    }
}

static inline void *gu_upload(const void *h, size_t bytes) {
    void *d = NULL;
    GPU_CHECK(cudaMalloc(&d, bytes ? bytes : 16));
    if (bytes && h) GPU_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static inline int gu_device_present(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

#endif
