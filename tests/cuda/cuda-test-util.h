/* What the GPU select and kNN tests share beyond the toolkit (tests/harness.h, tests/cuda/gpu-util.h):
 * the library's CUDA entry points (called directly, with arguments resolved as the front end would,
 * so the tests reach every kernel path) and the host oracle's ranked entry (score key desc, lower
 * index first: the ref backend's order). C11 + the CUDA runtime API. */
#ifndef LTK_CUDA_TEST_UTIL_H
#define LTK_CUDA_TEST_UTIL_H

#include "gpu-util.h"

#include "../../src/cuda/cuda-common.cuh"

typedef struct {
    uint32_t key;
    int64_t idx;
} hent;
T_UNUSED static int cmp_hent(const void *pa, const void *pb) {
    const hent *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}
T_UNUSED static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
