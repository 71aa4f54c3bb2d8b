/* A first litetopk program: the exact top-k of a few score rows, then a brute-force kNN, each
 * checked against a plain sort. Copy it and build it against an installed litetopk:
 *
 *   cmake:       find_package(litetopk REQUIRED)
 *                target_link_libraries(app PRIVATE litetopk::litetopk)   (or litetopk::litetopk_static)
 *   pkg-config:  cc topk.c $(pkg-config --cflags --libs litetopk) -o topk
 *
 * (examples/CMakeLists.txt does the first; tests/test-install.sh builds both ways.)
 * Host arrays run on the CPU backend; pass device pointers and LTK_BACKEND_CUDA for the GPU. */
#include <litetopk.h>

#include <stdio.h>
#include <stdlib.h>

static float frand(unsigned *s) { /* a small LCG in [-1, 1): the example needs no other library */
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 23) - 1.0f;
}

static int check(ltk_status st, const char *what) {
    if (st == LTK_OK) return 0;
    fprintf(stderr, "%s: %s: %s\n", what, ltk_status_str(st), ltk_last_error());
    return 1;
}

/* the k-th best of n scores by a plain count: the number of entries that beat entry i */
static int64_t rank_of(const float *x, int64_t n, int64_t i) {
    int64_t r = 0;
    for (int64_t j = 0; j < n; j++) r += x[j] > x[i] || (x[j] == x[i] && j < i);
    return r;
}

int main(void) {
    enum { ROWS = 4, COLS = 5000, K = 8, B = 3, N = 4000, D = 32, KNN_K = 5 };
    unsigned seed = 7;
    static float scores[ROWS * COLS], base[N * D], queries[B * D], ip[N];
    for (int i = 0; i < ROWS * COLS; i++) scores[i] = frand(&seed);
    for (int i = 0; i < N * D; i++) base[i] = frand(&seed);
    for (int i = 0; i < B * D; i++) queries[i] = frand(&seed);

    /* 1. select: the K best entries of each row, sorted, ties by the lower index */
    int32_t idx[ROWS * K];
    float val[ROWS * K];
    ltk_select_args s = {.rows = ROWS, .cols = COLS, .k = K, .dtype = LTK_DTYPE_F32, .scores = scores,
                         .out_idx = idx, .out_scores = val};
    ltk_exec e = {.backend = LTK_BACKEND_CPU}; /* workspace NULL: the call allocates its own */
    if (check(ltk_select_topk(&s, &e), "ltk_select_topk")) return 1;
    int bad = 0;
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < K; j++) bad += rank_of(scores + (size_t)r * COLS, COLS, idx[r * K + j]) != j;
    printf("select: row 0 best %d (%.4f), then %d (%.4f), %d (%.4f)\n", idx[0], val[0], idx[1], val[1], idx[2],
           val[2]);

    /* 2. kNN: the KNN_K base vectors of largest inner product with each query */
    int64_t nn[B * KNN_K];
    float nd[B * KNN_K];
    ltk_knn_args a = {.B = B, .N = N, .D = D, .k = KNN_K, .dtype = LTK_DTYPE_F32, .metric = LTK_METRIC_IP,
                      .queries = queries, .base = base, .out_idx = nn, .out_scores = nd};
    if (check(ltk_knn_topk(&a, &e), "ltk_knn_topk")) return 1;
    for (int b = 0; b < B; b++) {
        for (int n = 0; n < N; n++) { /* the same fp32 dot products, summed in a plain loop */
            double acc = 0;
            for (int d = 0; d < D; d++) acc += (double)queries[b * D + d] * base[n * D + d];
            ip[n] = (float)acc;
        }
        /* the library's fp32 sums may round the last bit differently: a neighbour counts as right
         * when at most its position's worth of vectors beat it by more than 1e-4 */
        for (int j = 0; j < KNN_K; j++) {
            int64_t better = 0;
            for (int n = 0; n < N; n++) better += ip[n] > ip[nn[b * KNN_K + j]] + 1e-4f;
            bad += better > j;
        }
    }
    printf("knn:    query 0 nearest %lld (ip %.4f), then %lld (%.4f)\n", (long long)nn[0], nd[0], (long long)nn[1],
           nd[1]);
    printf("%s (%s backend, litetopk %d.%d.%d)\n", bad ? "MISMATCH" : "both checked against a plain count",
           ltk_backend_name(LTK_BACKEND_CPU), LTK_VERSION_MAJOR, LTK_VERSION_MINOR, LTK_VERSION_PATCH);
    return bad != 0;
}
