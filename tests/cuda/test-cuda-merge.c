/* GPU merge of candidate lists (src/cuda/merge.cu) against the CPU backend, bit for bit: ids and
 * scores, both layouts, ties on a small grid (and whole rows of one value), NaN, +-inf, -0,
 * padding, rows with fewer than k candidates, k from 1 to the CUDA limit (16384), and repeated ids.
 *   test-cuda-merge            every test, each in its own process
 *   test-cuda-merge --small    a few small cases (for compute-sanitizer) */
#include "gpu-util.h"

static const float grid[] = {3.0f, 1.5f, 0.0f, -0.0f, -2.0f, INFINITY, -INFINITY};

static uint32_t g_flags; /* LTK_FLAG_UNSORTED for the cases that set it */

typedef struct {
    uint32_t key;
    int32_t id;
    float s;
} mcand;
static int cmp_mcand(const void *x, const void *y) { /* the contract's order: key down, id up */
    const mcand *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}
static int cmp_desc(const void *x, const void *y) {
    const float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* mode 0: grid values (ties), 1: randn, 2: one value, 3: randn with each list sorted descending
 * (as local top-k lists come), 4: 90% NaN (the k-th key inside the NaN class); dup: ids repeat
 * within a row */
static void gpu_case(int64_t rows, int lists, int len, int k, int mode, int layout, double pad, int dup) {
    const int64_t ls = layout == 0 ? len + 1 : rows * (int64_t)(len + 3);
    const int64_t rs = layout == 0 ? lists * ls + 5 : len + 3;
    const int64_t total = layout == 0 ? rows * rs : lists * ls;
    float *sc = malloc(sizeof(float) * (size_t)total);
    int32_t *id = malloc(sizeof(int32_t) * (size_t)total);
    for (int64_t i = 0; i < total; i++) sc[i] = NAN, id[i] = -3;
    const int64_t n = (int64_t)lists * len;
    for (int64_t r = 0; r < rows; r++)
        for (int g = 0; g < lists; g++)
            for (int j = 0; j < len; j++) {
                const int64_t o = r * rs + g * ls + j;
                const double u = rng_unit();
                sc[o] = u < (mode == 4 ? 0.9 : 0.03) ? NAN
                        : mode == 0              ? grid[rng_below(7)]
                        : mode == 2              ? 0.25f
                                                 : (float)rng_normal();
                /* distinct ids: a permutation of [0, n) scaled, interleaved by rank */
                const int64_t base = (int64_t)j * lists + g;
                id[o] = rng_unit() < pad ? -1 : (int32_t)(dup ? rng_below(n / 2 + 1) : (base * 7919) % (n * 4 + 1));
            }
    if (mode == 3)
        for (int64_t r = 0; r < rows; r++)
            for (int g = 0; g < lists; g++) {
                float *l = sc + r * rs + g * ls;
                for (int j = 0; j < len; j++)
                    if (isnan(l[j])) l[j] = 0.0f;
                qsort(l, (size_t)len, sizeof *l, cmp_desc);
            }
    const int64_t os = k + 1;
    int32_t *want = malloc(sizeof(int32_t) * (size_t)(rows * os)), *got = malloc(sizeof(int32_t) * (size_t)(rows * os));
    float *wants = malloc(sizeof(float) * (size_t)(rows * os)), *gots = malloc(sizeof(float) * (size_t)(rows * os));
    ltk_merge_args a;
    memset(&a, 0, sizeof a);
    a.rows = rows, a.lists = lists, a.list_len = len, a.k = k, a.scores = sc, a.ids = id;
    a.row_stride = rs, a.list_stride = ls, a.out_idx = want, a.out_scores = wants, a.out_stride = os;
    ltk_exec ce = {LTK_BACKEND_CPU, LTK_ALGO_FUSED, NULL, NULL, 0, 0, NULL};
    test_ctx("rows %lld lists %d len %d k %d mode %d layout %d pad %.2f dup %d", (long long)rows, lists, len, k, mode,
             layout, pad, dup);
    if (!CHECK(ltk_topk_merge(&a, &ce) == LTK_OK, "cpu merge: %s", ltk_last_error())) goto out;
    float *dsc = gu_upload(sc, sizeof(float) * (size_t)total);
    int32_t *did = gu_upload(id, sizeof(int32_t) * (size_t)total);
    int32_t *dout = gu_alloc(sizeof(int32_t) * (size_t)(rows * os));
    float *douts = gu_alloc(sizeof(float) * (size_t)(rows * os));
    GPU_CHECK(cudaMemset(dout, 0x7b, sizeof(int32_t) * (size_t)(rows * os))); /* poison */
    GPU_CHECK(cudaMemset(douts, 0x7b, sizeof(float) * (size_t)(rows * os)));
    ltk_merge_args d = a;
    d.scores = dsc, d.ids = did, d.out_idx = dout, d.out_scores = douts, d.flags = g_flags;
    ltk_exec ge = {LTK_BACKEND_CUDA, LTK_ALGO_FUSED, NULL, NULL, 0, 0, NULL};
    if (CHECK(ltk_topk_merge(&d, &ge) == LTK_OK, "cuda merge: %s", ltk_last_error())) {
        GPU_CHECK(cudaDeviceSynchronize());
        GPU_CHECK(cudaMemcpy(got, dout, sizeof(int32_t) * (size_t)(rows * os), cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemcpy(gots, douts, sizeof(float) * (size_t)(rows * os), cudaMemcpyDeviceToHost));
        for (int64_t r = 0; r < rows; r++) {
            if (g_flags & LTK_FLAG_UNSORTED) { /* a set: sort the GPU's (score, id) in the contract's order */
                mcand *c = malloc(sizeof(mcand) * (size_t)k);
                for (int j = 0; j < k; j++) {
                    const int64_t i = r * os + j;
                    const uint32_t rk = ltk_rank_key(gots[i]); /* NaN 0: then 1, below every real key */
                    c[j].key = got[i] < 0 ? 0u : rk ? rk : 1u, c[j].id = got[i], c[j].s = gots[i];
                }
                qsort(c, (size_t)k, sizeof *c, cmp_mcand);
                for (int j = 0; j < k; j++) got[r * os + j] = c[j].id, gots[r * os + j] = c[j].s;
                free(c);
            }
            for (int j = 0; j < k; j++) {
                const int64_t i = r * os + j;
                if (!CHECK(got[i] == want[i] && t_same_f32(gots[i], wants[i]), "row %lld slot %d: (%d, %a), cpu (%d, %a)",
                           (long long)r, j, got[i], (double)gots[i], want[i], (double)wants[i]))
                    break;
            }
            CHECK(got[r * os + k] == 0x7b7b7b7b, "row %lld: written past k", (long long)r);
        }
    }
    cudaFree(dsc), cudaFree(did), cudaFree(dout), cudaFree(douts);
out:
    free(sc), free(id), free(want), free(got), free(wants), free(gots);
}

static void test_small(void) {
    gpu_case(3, 2, 5, 4, 0, 0, 0.2, 0);
    gpu_case(2, 3, 40, 100, 0, 1, 0.1, 0); /* fewer than k */
    gpu_case(2, 4, 64, 64, 1, 0, 0.0, 0);
}

static void test_merge_grid(void) {
    for (int it = 0; it < 40; it++) {
        const int lists = 1 + (int)rng_below(16), len = 1 + (int)rng_below(it < 20 ? 64 : 2048);
        const int k = 1 + (int)rng_below(it % 3 == 0 ? lists * len + 4 : len + 2);
        gpu_case(1 + rng_below(40), lists, len, k < 16384 ? k : 16384, it % 3, it & 1, it % 5 == 0 ? 0.5 : 0.05, 0);
    }
}

static void test_merge_shapes(void) {
    gpu_case(512, 8, 2048, 2048, 1, 1, 0.0, 0);   /* the DCP shape, rank-major */
    gpu_case(64, 8, 2048, 2048, 2, 0, 0.0, 0);    /* whole rows of one value: ties by id */
    gpu_case(8, 4, 8192, 16384, 1, 1, 0.01, 0);  /* k at the CUDA limit */
    gpu_case(16, 4, 300, 200, 0, 0, 0.0, 1);     /* repeated ids */
    gpu_case(64, 8, 2048, 2048, 3, 1, 0.0, 0);    /* sorted lists (local top-k outputs) */
    gpu_case(64, 1, 16384, 2048, 3, 0, 0.0, 0);   /* vLLM's [rows, G k]: one list of 8 x 2048 */
    gpu_case(64, 8, 2048, 2048, 4, 0, 0.05, 0);   /* the k-th key a NaN: ties by id inside NaN */
    gpu_case(32, 40, 100, 1000, 1, 1, 0.1, 0);    /* many short lists (list_len < the CTA) */
    gpu_case(32, 16, 1024, 2048, 0, 0, 0.0, 1);   /* 16K candidates, grid ties, repeated ids */
    gpu_case(16, 8, 2049, 2048, 1, 1, 0.0, 0);    /* over 16K candidates: the general kernel */
    g_flags = LTK_FLAG_UNSORTED;
    gpu_case(64, 8, 2048, 2048, 1, 1, 0.0, 0);
    gpu_case(64, 8, 2048, 2048, 0, 0, 0.02, 0);
    gpu_case(16, 4, 300, 200, 0, 0, 0.0, 1);
    g_flags = 0;
}

static void test_merge_limits(void) {
    float *d = gu_alloc(64);
    ltk_merge_args a;
    memset(&a, 0, sizeof a);
    a.rows = 1, a.lists = 1, a.list_len = 4, a.k = 16385, a.scores = d, a.ids = (int32_t *)d;
    a.out_idx = gu_alloc(4 * 16385);
    ltk_exec ge = {LTK_BACKEND_CUDA, LTK_ALGO_FUSED, NULL, NULL, 0, 0, NULL};
    ASSERT_STATUS(ltk_topk_merge(&a, &ge), LTK_EUNSUPPORTED, "16384");
    cudaFree(d), cudaFree(a.out_idx);
}

int main(int argc, char **argv) {
    static const t_test tests[] = {T_ENTRY(test_small), T_ENTRY(test_merge_grid), T_ENTRY(test_merge_shapes),
                                   T_ENTRY(test_merge_limits)};
    char small[] = "small";
    if (argc > 1 && !strcmp(argv[1], "--small")) argv[1] = small;
    return T_RUN_ISOLATED(tests, 600, gu_no_cuda);
}
