/* The paged FP8 cache of the decode tests (test-decode on the host backends, test-cuda-decode on
 * the GPU): e4m3 codes on the dyadic grid (every score exact in fp32) or free, blocks in the layout
 * of ltk_decode_args, a shuffled page table with garbage past each request's pages, and lengths
 * drawn around k. Include after harness.h (its RNG). */
#ifndef LTK_TEST_PAGED_CACHE_H
#define LTK_TEST_PAGED_CACHE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* e4m3 of exponent field 6..8: +-{0.5 .. 3.75} in steps of 1/16 */
static inline uint8_t pc_grid_code(void) {
    return (uint8_t)((rng_below(2) << 7) | ((6 + rng_below(3)) << 3) | rng_below(8));
}
/* any e4m3 code but NaN */
static inline uint8_t pc_free_code(void) {
    uint8_t v;
    do v = (uint8_t)rng_below(256);
    while ((v & 0x7f) == 0x7f);
    return v;
}

/* num_blocks blocks of block_kv * D key codes, then block_kv scales (powers of two in [1/4, 4]),
 * then pad bytes 0xee; `special` mixes in NaN, inf and 0 scales and NaN key elements. */
static inline void pc_fill_blocks(uint8_t *cache, int64_t num_blocks, int64_t block_stride, int block_kv, int D, int pad,
                                  int grid, int special) {
    for (int64_t blk = 0; blk < num_blocks; blk++) {
        uint8_t *base = cache + blk * block_stride;
        for (int64_t x = 0; x < (int64_t)block_kv * D; x++) base[x] = grid ? pc_grid_code() : pc_free_code();
        float *sc = (float *)(base + (int64_t)block_kv * D);
        for (int j = 0; j < block_kv; j++) {
            sc[j] = ldexpf(1.0f, (int)rng_range(-2, 2));
            if (special) {
                int64_t u = rng_below(40);
                if (u == 0) sc[j] = NAN;
                else if (u == 1) sc[j] = INFINITY;
                else if (u == 2) base[j * D + rng_below(D)] = 0x7f; /* a NaN key element */
                else if (u == 3) sc[j] = 0.0f;
            }
        }
        for (int x = 0; x < pad; x++) base[(int64_t)block_kv * (D + 4) + x] = 0xee;
    }
}

/* A table of B rows of bt_stride entries (+1 past the end): request b's max_blocks pages scattered
 * over the cache, never shared; -12345 everywhere else. Caller frees. */
static inline int32_t *pc_table(int64_t B, int max_blocks, int64_t num_blocks, int64_t bt_stride) {
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)num_blocks);
    for (int64_t i = 0; i < num_blocks; i++) perm[i] = (int32_t)i;
    for (int64_t i = num_blocks - 1; i > 0; i--) {
        int64_t j = rng_below(i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    const size_t tn = (size_t)(B * bt_stride + 1);
    int32_t *table = malloc(sizeof(int32_t) * tn);
    for (size_t i = 0; i < tn; i++) table[i] = -12345;
    for (int64_t i = 0; i < B * max_blocks; i++) table[(i / max_blocks) * bt_stride + i % max_blocks] = perm[i];
    free(perm);
    return table;
}

/* seq_lens[B] (mode 0: random in [0, max_len]; 1: the edges 0, 1, k-1, k, k+1, max_len; 2: max_len)
 * and the rows' lengths lens[B * next_n] by vLLM's convention. */
static inline void pc_lens(int B, int next_n, int mode, int k, int max_len, int32_t *seq_lens, int32_t *lens) {
    for (int b = 0; b < B; b++) {
        int sl;
        if (mode == 0) sl = (int)rng_range(0, max_len);
        else if (mode == 1) {
            const int edges[] = {0, 1, k - 1, k, k + 1, max_len};
            sl = edges[rng_below(6)];
        } else sl = max_len;
        sl = sl > max_len ? max_len : sl < 0 ? 0 : sl;
        seq_lens[b] = sl;
        for (int r = 0; r < next_n; r++) {
            int n = sl - next_n + r + 1;
            lens[b * next_n + r] = n < 0 ? 0 : n;
        }
    }
}

#endif
