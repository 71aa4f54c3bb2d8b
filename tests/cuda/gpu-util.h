/* The GPU half of the test toolkit (tests/harness.h is the rest: registry, runner, RNG, dtypes,
 * guarded blocks), the one header of the GPU tests and the GPU indexer benchmark: CUDA error checks,
 * device buffers, event timing, the no-device probe, the threaded DSA-like input generator, and the
 * library's CUDA entry points (src/cuda/cuda-common.cuh: the select and kNN tests call them
 * directly, with arguments resolved as the front end would, so that they reach every kernel path).
 * C11 + the CUDA runtime API. */
#ifndef LTK_TESTS_GPU_UTIL_H
#define LTK_TESTS_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cuda/cuda-common.cuh"
#include "harness.h"
#include "litetopk.h"

#define GPU_CHECK(expr)                                                                                   \
    do {                                                                                                  \
        cudaError_t g_e_ = (expr);                                                                        \
        if (g_e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(g_e_));      \
            exit(2);                                                                                      \
        }                                                                                                 \
    } while (0)

/* DSA inputs as the production pipeline quantises them: keys randn quantised per key to e4m3 with
 * scale amax/448 (kv_scale = scale), queries randn cast to e4m3, weights randn * D^-0.5 * H^-0.5.
 * One random stream (harness.h) per key and per query row: the data depend on the seed alone, not
 * on the number of threads. */
static inline void gu_gen_dsa(uint64_t seed, int64_t T, int64_t S, int H, int D, uint8_t *q, uint8_t *kv,
                              float *kv_scale, float *w) {
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < S; s++) {
        uint64_t st = t_mix64(seed ^ (0x1000000000ull + (uint64_t)s));
        float x[512], amax = 0.0f;
        for (int d = 0; d < D; d++) {
            x[d] = (float)rng_stream_normal(&st);
            amax = fmaxf(amax, fabsf(x[d]));
        }
        float sc = fmaxf(amax, 1e-4f) / 448.0f;
        for (int d = 0; d < D; d++) kv[s * D + d] = t_f32_e4m3(x[d] / sc);
        kv_scale[s] = sc;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        uint64_t st = t_mix64(seed ^ (0x2000000000ull + (uint64_t)t));
        for (int64_t i = 0; i < (int64_t)H * D; i++) q[t * H * D + i] = t_f32_e4m3((float)rng_stream_normal(&st));
        for (int h = 0; h < H; h++) w[t * H + h] = (float)rng_stream_normal(&st) / sqrtf((float)D * (float)H);
    }
}

/* Device memory of `bytes` (at least 16: an empty buffer is still a valid pointer). */
static inline void *gu_alloc(size_t bytes) {
    void *d = NULL;
    GPU_CHECK(cudaMalloc(&d, bytes ? bytes : 16));
    return d;
}
/* A device copy of h (h NULL: the buffer as allocated). */
static inline void *gu_upload(const void *h, size_t bytes) {
    void *d = gu_alloc(bytes);
    if (bytes && h) GPU_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static inline double now_ms_events(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    GPU_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

static inline int gu_device_present(void);
/* For T_RUN_ISOLATED: every test skips (exit 77) where no CUDA device is usable; says so. */
static inline int gu_no_cuda(void) {
    if (gu_device_present() && ltk_backend_available(LTK_BACKEND_CUDA)) return 0;
    printf("no CUDA device: skipped\n");
    return 1;
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
