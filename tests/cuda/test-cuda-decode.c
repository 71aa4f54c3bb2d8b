/* GPU decode (src/cuda/decode.cu on the indexer's kernels) against the CPU backend, whose decode
 * test-decode checks against a brute force.
 *   test-cuda-decode            every test, each in its own process
 *   test-cuda-decode --small    the small cases (for compute-sanitizer)
 *   test-cuda-decode --graph-bench B CTX NEXT_N   a decode step as a direct call and as a replayed
 *                               CUDA graph (GPU time, event medians), one JSON line
 * Inputs on the dyadic grid of test-decode (every score exact in fp32) must match the CPU bit for
 * bit, ties and NaN included; free inputs (DSA-like codes, long rows: the filter path) within a
 * stated tolerance. Every case also checks, on the GPU: fused == materialize bit for bit, physical
 * slots == the table's mapping of the logical positions, seq_lens == lens, the unsorted set == the
 * sorted set and the short-row rule; and one CUDA graph captured with some lengths and replayed with
 * others gives the direct call's bits. Block strides that are not a multiple of 16 bytes, D != 128
 * and block_kv < 32 take the portable kernel; the rest the sm_90a one. */
#include "gpu-util.h"
#include "../paged-cache.h"

typedef struct dcase {
    int B, next_n, H, D, k, block_kv, pad; /* pad: extra bytes a block */
    int len_mode;                          /* 0 random in [0, max], 1 edges around k, 2 equal */
    int max_len;
    int grid;    /* 1: dyadic grid (exact); 0: free codes (tolerance) */
    int special; /* NaN/inf scales and NaN keys */
} dcase;

typedef struct dprob {
    dcase c;
    int64_t num_blocks, block_stride, bt_stride, rows;
    int max_blocks;
    uint8_t *cache, *q;
    int32_t *table, *lens, *seq_lens;
    float *w;
    /* device copies */
    uint8_t *d_cache, *d_q;
    int32_t *d_table, *d_lens, *d_seq;
    float *d_w;
} dprob;

static void prob_make(const dcase *c, dprob *p) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->rows = (int64_t)c->B * c->next_n;
    p->max_blocks = (c->max_len + c->block_kv - 1) / c->block_kv + (int)rng_below(2);
    p->num_blocks = (int64_t)c->B * p->max_blocks + 3;
    p->block_stride = (int64_t)c->block_kv * (c->D + 4) + c->pad;
    const size_t cb = (size_t)(p->num_blocks * p->block_stride);
    p->cache = malloc(cb);
    pc_fill_blocks(p->cache, p->num_blocks, p->block_stride, c->block_kv, c->D, c->pad, c->grid, c->special);
    p->bt_stride = p->max_blocks + 1; /* a row stride wider than the table */
    const size_t tn = (size_t)(c->B * p->bt_stride + 1);
    p->table = pc_table(c->B, p->max_blocks, p->num_blocks, p->bt_stride);
    p->lens = malloc(sizeof(int32_t) * (size_t)p->rows);
    p->seq_lens = malloc(sizeof(int32_t) * (size_t)c->B);
    pc_lens(c->B, c->next_n, c->len_mode, c->k, c->max_len, p->seq_lens, p->lens);
    const int64_t qn = p->rows * c->H * c->D;
    p->q = malloc((size_t)qn);
    for (int64_t x = 0; x < qn; x++) p->q[x] = c->grid ? pc_grid_code() : pc_free_code();
    p->w = malloc(sizeof(float) * (size_t)(p->rows * c->H));
    for (int64_t x = 0; x < p->rows * c->H; x++)
        p->w[x] = c->grid ? (float)rng_range(-8, 8) * 0.25f : (float)(rng_normal() * 0.1);
    p->d_cache = gu_upload(p->cache, cb);
    p->d_q = gu_upload(p->q, (size_t)qn);
    p->d_table = gu_upload(p->table, sizeof(int32_t) * tn);
    p->d_lens = gu_upload(p->lens, sizeof(int32_t) * (size_t)p->rows);
    p->d_seq = gu_upload(p->seq_lens, sizeof(int32_t) * (size_t)c->B);
    p->d_w = gu_upload(p->w, sizeof(float) * (size_t)(p->rows * c->H));
}

static void prob_free(dprob *p) {
    free(p->cache), free(p->table), free(p->lens), free(p->seq_lens), free(p->q), free(p->w);
    cudaFree(p->d_cache), cudaFree(p->d_q), cudaFree(p->d_table), cudaFree(p->d_lens), cudaFree(p->d_seq);
    cudaFree(p->d_w);
}

static ltk_decode_args prob_args(const dprob *p, int dev, int32_t *idx, float *sc, uint32_t flags) {
    const dcase *c = &p->c;
    ltk_decode_args a = {.B = c->B, .next_n = c->next_n, .H = c->H, .D = c->D, .k = c->k, .dtype = LTK_DTYPE_E4M3,
                         .q = dev ? p->d_q : p->q, .kv_cache = dev ? p->d_cache : p->cache,
                         .num_blocks = p->num_blocks, .block_kv = c->block_kv, .block_stride = p->block_stride,
                         .block_table = dev ? p->d_table : p->table, .bt_stride = p->bt_stride,
                         .max_blocks = p->max_blocks, .lens = dev ? p->d_lens : p->lens, .max_len = c->max_len,
                         .weights = dev ? p->d_w : p->w, .out_idx = idx, .out_scores = sc, .flags = flags};
    return a;
}

/* One call; host outputs (poisoned before). dev: the CUDA backend on device copies. */
static int run(const dprob *p, int dev, ltk_algo algo, uint32_t flags, int with_scores, int use_seq, int32_t *idx,
               float *sc) {
    const size_t n = (size_t)p->rows * p->c.k;
    memset(idx, 0x7b, n * 4);
    if (sc) memset(sc, 0x7b, n * 4);
    int32_t *oi = idx;
    float *os = with_scores ? sc : NULL;
    if (dev) {
        oi = gu_alloc(n * 4);
        os = with_scores ? gu_alloc(n * 4) : NULL;
        GPU_CHECK(cudaMemset(oi, 0x7b, n * 4));
        if (os) GPU_CHECK(cudaMemset(os, 0x7b, n * 4));
    }
    ltk_decode_args a = prob_args(p, dev, oi, os, flags);
    if (use_seq) a.lens = NULL, a.seq_lens = dev ? p->d_seq : p->seq_lens;
    ltk_exec e = {.backend = dev ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU, .algo = algo};
    ltk_status st = ltk_decode_topk(&a, &e);
    CHECK(st == LTK_OK, "%s/%d: %s: %s", dev ? "cuda" : "cpu", (int)algo, ltk_status_str(st), ltk_last_error());
    if (dev) {
        GPU_CHECK(cudaDeviceSynchronize());
        GPU_CHECK(cudaMemcpy(idx, oi, n * 4, cudaMemcpyDeviceToHost));
        if (os) GPU_CHECK(cudaMemcpy(sc, os, n * 4, cudaMemcpyDeviceToHost));
        cudaFree(oi), cudaFree(os);
    }
    return st == LTK_OK;
}

/* GPU sorted output against the CPU's. The portable kernel sums in fp32 on exact inputs: on the grid
 * it must give the CPU's bits. The sm_90a kernel's FP8 tensor-core accumulation keeps ~2e-4 of the
 * row's largest |score| (test-cuda-indexer's bound; 2e-3 used): there every returned position must
 * be within tol of the CPU's k-th, its score within tol of the CPU's score of it where the CPU
 * returned it, and every CPU entry above the GPU's k-th by more than tol returned. */
static void compare_cpu(const dprob *p, int exact, const int32_t *gi, const float *gs, const int32_t *ci,
                        const float *cs) {
    const dcase *c = &p->c;
    float *byp = malloc(sizeof(float) * (size_t)(c->max_len + 1));
    char *has = malloc((size_t)c->max_len + 1);
    for (int64_t t = 0; t < p->rows; t++) {
        const int32_t *a = gi + t * c->k, *b = ci + t * c->k;
        const float *x = gs + t * c->k, *y = cs + t * c->k;
        if (exact) {
            for (int j = 0; j < c->k; j++)
                if (!CHECK(a[j] == b[j] && t_same_f32(x[j], y[j]), "row %lld slot %d: gpu %d (%g), cpu %d (%g)",
                           (long long)t, j, a[j], (double)x[j], b[j], (double)y[j]))
                    break;
            continue;
        }
        double mx = 0;
        int na = 0, nb = 0, nan_a = 0, nan_b = 0;
        for (int j = 0; j < c->k; j++) {
            if (isfinite(y[j]) && fabs(y[j]) > mx) mx = fabs(y[j]);
            na += a[j] >= 0, nb += b[j] >= 0;
            nan_a += a[j] >= 0 && isnan(x[j]), nan_b += b[j] >= 0 && isnan(y[j]);
        }
        const double tol = 2e-3 * mx + 1e-30;
        /* an infinite scale times a head sum near 0: its sign (or a NaN for an exact 0) depends on
         * the accumulation; such positions are not compared (special inputs only) */
        if (c->special) nan_a = nan_b = 0;
        if (!CHECK(na == nb && nan_a == nan_b, "row %lld: %d entries (%d NaN), cpu %d (%d NaN)", (long long)t, na, nan_a,
                   nb, nan_b))
            continue;
        memset(has, 0, (size_t)c->max_len + 1);
        double ckth = INFINITY, gkth = INFINITY; /* the k-th non-NaN finite scores */
        for (int j = 0; j < nb; j++) {
            has[b[j]] = 1, byp[b[j]] = y[j];
            if (!isnan(y[j])) ckth = y[j];
        }
        for (int j = 0; j < na; j++)
            if (!isnan(x[j])) gkth = x[j];
        int ok = 1;
        char *seen = calloc((size_t)c->max_len + 1, 1);
        for (int j = 0; j < na && ok; j++) {
            const int32_t i = a[j];
            ok &= CHECK(i < p->lens[t] && !seen[i], "row %lld slot %d: position %d (len %d) bad or repeated",
                        (long long)t, j, i, p->lens[t]);
            if (!ok) break;
            seen[i] = 1;
            if (isnan(x[j]) || (c->special && isinf(x[j]))) continue;
            if (has[i]) {
                if (!(c->special && isinf(byp[i])))
                    ok &= CHECK(x[j] == byp[i] || fabs((double)x[j] - (double)byp[i]) <= tol,
                            "row %lld position %d: gpu %.9g, cpu %.9g (tol %g)", (long long)t, i, (double)x[j],
                                (double)byp[i], tol);
            } else
                ok &= CHECK(fabs((double)x[j] - ckth) <= tol || x[j] == ckth,
                            "row %lld position %d (%.9g): not in the cpu's list, whose k-th is %.9g (tol %g)",
                            (long long)t, i, (double)x[j], ckth, tol);
        }
        for (int j = 0; j < nb && ok; j++)
            if (!isnan(y[j]) && !(c->special && isinf(y[j])) && !seen[b[j]])
                ok &= CHECK(!((double)y[j] > gkth + tol), "row %lld: cpu position %d (%.9g) above the gpu's k-th %.9g missing",
                            (long long)t, b[j], (double)y[j], gkth);
        free(seen);
    }
    free(byp), free(has);
}

static int cmp_double_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void check_case(const dcase *c) {
    test_ctx("B=%d next_n=%d H=%d D=%d k=%d block_kv=%d pad=%d lens=%d max_len=%d grid=%d special=%d", c->B, c->next_n,
             c->H, c->D, c->k, c->block_kv, c->pad, c->len_mode, c->max_len, c->grid, c->special);
    dprob p;
    prob_make(c, &p);
    const size_t n = (size_t)p.rows * c->k;
    int32_t *ci = malloc(n * 4), *gi = malloc(n * 4), *mi = malloc(n * 4), *xi = malloc(n * 4);
    float *cs = malloc(n * 4), *gs = malloc(n * 4), *ms = malloc(n * 4);
    if (run(&p, 0, LTK_ALGO_FUSED, 0, 1, 0, ci, cs) && run(&p, 1, LTK_ALGO_FUSED, 0, 1, 0, gi, gs)) {
        /* the portable kernel runs where the sm_90a one cannot (ltk_sm90_paged_supported) or is off */
        const int portable = c->D != 128 || c->block_kv < 32 || (p.block_stride % 16) || (c->H != 16 && c->H != 32 &&
                             c->H != 64) || getenv("LTK_CUDA_PORTABLE");
        compare_cpu(&p, portable && c->grid, gi, gs, ci, cs);
        if (run(&p, 1, LTK_ALGO_MATERIALIZE, 0, 1, 0, mi, ms))
            CHECK(!memcmp(gi, mi, n * 4) && !memcmp(gs, ms, n * 4), "cuda fused != materialize");
        if (run(&p, 1, LTK_ALGO_FUSED, 0, 1, 1, mi, ms))
            CHECK(!memcmp(gi, mi, n * 4) && !memcmp(gs, ms, n * 4), "cuda seq_lens != lens");
        if (run(&p, 1, LTK_ALGO_FUSED, LTK_FLAG_PHYSICAL, 0, 0, xi, NULL)) {
            for (size_t x = 0; x < n; x++) {
                const int64_t b = (int64_t)(x / (size_t)c->k) / c->next_n;
                const int32_t i = gi[x];
                const int32_t want = i < 0 ? -1 : p.table[b * p.bt_stride + i / c->block_kv] * c->block_kv + i % c->block_kv;
                if (!CHECK(xi[x] == want, "physical slot %zu: %d, want %d", x, xi[x], want)) break;
            }
        }
        if (run(&p, 1, LTK_ALGO_FUSED, LTK_FLAG_UNSORTED, 0, 0, xi, NULL)) {
            for (int64_t t = 0; t < p.rows; t++) {
                const int32_t len = p.lens[t];
                int32_t *u = xi + t * c->k, *s = gi + t * c->k;
                if (len <= c->k) {
                    for (int j = 0; j < c->k; j++)
                        if (!CHECK(u[j] == (j < len ? j : -1), "short row %lld slot %d: %d", (long long)t, j, u[j])) break;
                    continue;
                }
                qsort(u, (size_t)c->k, 4, cmp_i32);
                int32_t *v = malloc((size_t)c->k * 4);
                memcpy(v, s, (size_t)c->k * 4);
                qsort(v, (size_t)c->k, 4, cmp_i32);
                CHECK(!memcmp(u, v, (size_t)c->k * 4), "row %lld: unsorted set != sorted set", (long long)t);
                free(v);
            }
        }
    }
    free(ci), free(gi), free(mi), free(xi), free(cs), free(gs), free(ms);
    prob_free(&p);
}

/* One graph captured with the lengths of one draw, replayed with others: the direct call's bits. */
static void check_graph(const dcase *c) {
    test_ctx("graph: B=%d next_n=%d H=%d k=%d max_len=%d", c->B, c->next_n, c->H, c->k, c->max_len);
    dprob p;
    prob_make(c, &p);
    const size_t n = (size_t)p.rows * c->k;
    int32_t *oi = gu_alloc(n * 4);
    float *os = gu_alloc(n * 4);
    ltk_decode_args a = prob_args(&p, 1, oi, os, 0);
    ltk_exec e = {.backend = LTK_BACKEND_CUDA, .algo = LTK_ALGO_FUSED};
    size_t wsb = 0;
    CHECK(ltk_decode_workspace_size(&a, &e, &wsb) == LTK_OK, "workspace: %s", ltk_last_error());
    void *ws = gu_alloc(wsb);
    cudaStream_t st;
    GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    e.stream = st, e.workspace = ws, e.workspace_bytes = wsb;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    /* a first call outside the capture, as engines warm up before they capture (the library's
     * one-time setup, e.g. kernel attributes, then happens outside it) */
    CHECK(ltk_decode_topk(&a, &e) == LTK_OK, "warm-up call: %s", ltk_last_error());
    GPU_CHECK(cudaStreamSynchronize(st));
    GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    ltk_status s = ltk_decode_topk(&a, &e);
    GPU_CHECK(cudaStreamEndCapture(st, &g));
    CHECK(s == LTK_OK, "captured call: %s", ltk_last_error());
    GPU_CHECK(cudaGraphInstantiate(&ge, g, 0));
    int32_t *hi = malloc(n * 4), *di = malloc(n * 4);
    float *hs = malloc(n * 4), *ds = malloc(n * 4);
    for (int rep = 0; rep < 3; rep++) {
        for (int64_t t = 0; t < p.rows; t++) p.lens[t] = (int32_t)rng_range(0, c->max_len);
        GPU_CHECK(cudaMemcpy(p.d_lens, p.lens, 4 * (size_t)p.rows, cudaMemcpyHostToDevice));
        GPU_CHECK(cudaMemset(oi, 0x7b, n * 4));
        GPU_CHECK(cudaGraphLaunch(ge, st));
        GPU_CHECK(cudaStreamSynchronize(st));
        GPU_CHECK(cudaMemcpy(hi, oi, n * 4, cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemcpy(hs, os, n * 4, cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemset(oi, 0x7b, n * 4));
        CHECK(ltk_decode_topk(&a, &e) == LTK_OK, "direct call: %s", ltk_last_error());
        GPU_CHECK(cudaStreamSynchronize(st));
        GPU_CHECK(cudaMemcpy(di, oi, n * 4, cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemcpy(ds, os, n * 4, cudaMemcpyDeviceToHost));
        CHECK(!memcmp(hi, di, n * 4) && !memcmp(hs, ds, n * 4), "replay %d != direct call", rep);
    }
    free(hi), free(di), free(hs), free(ds);
    cudaGraphExecDestroy(ge), cudaGraphDestroy(g), cudaStreamDestroy(st);
    cudaFree(oi), cudaFree(os), cudaFree(ws);
    prob_free(&p);
}

/* Device data the front end cannot check: lengths past max_len or negative, table entries outside
 * the cache. Clamped lengths, NaN for the unmapped block, every index in range. */
static void check_bad_device_data(void) {
    dcase c = {.B = 3, .next_n = 2, .H = 64, .D = 128, .k = 64, .block_kv = 64, .len_mode = 2, .max_len = 1000, .grid = 1};
    test_ctx("bad device data");
    dprob p;
    prob_make(&c, &p);
    p.lens[0] = -5, p.lens[1] = 1 << 30, p.lens[2] = 777;
    p.table[1 * p.bt_stride + 2] = (int32_t)p.num_blocks + 5; /* request 1, positions 128..191 */
    p.table[2 * p.bt_stride + 0] = -7;                         /* request 2, positions 0..63 */
    GPU_CHECK(cudaMemcpy(p.d_lens, p.lens, 4 * (size_t)p.rows, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(p.d_table, p.table, 4 * (size_t)(c.B * p.bt_stride + 1), cudaMemcpyHostToDevice));
    const size_t n = (size_t)p.rows * c.k;
    int32_t *gi = malloc(n * 4);
    float *gs = malloc(n * 4);
    if (run(&p, 1, LTK_ALGO_FUSED, 0, 1, 0, gi, gs)) {
        for (int64_t t = 0; t < p.rows; t++) {
            int64_t len = p.lens[t] < 0 ? 0 : p.lens[t] > c.max_len ? c.max_len : p.lens[t];
            for (int j = 0; j < c.k; j++) {
                const int32_t i = gi[t * c.k + j];
                if (!CHECK(i >= -1 && i < len, "row %lld slot %d: index %d outside [0, %lld)", (long long)t, j, i,
                           (long long)len))
                    break;
                const int64_t b = t / c.next_n;
                const int bad = (b == 1 && i >= 128 && i < 192) || (b == 2 && i >= 0 && i < 64);
                if (bad && !CHECK(isnan(gs[t * c.k + j]), "row %lld: unmapped position %d scored %g", (long long)t, i,
                                  (double)gs[t * c.k + j]))
                    break;
            }
        }
    }
    free(gi), free(gs);
    prob_free(&p);
}

static const dcase small_cases[] = {
    {3, 1, 64, 128, 16, 64, 0, 0, 2000, 1, 0},   {2, 2, 32, 128, 64, 32, 16, 1, 700, 1, 0},
    {4, 4, 16, 128, 8, 64, 4, 0, 1500, 1, 1},    {2, 3, 64, 64, 32, 16, 0, 0, 900, 1, 0},
    {5, 2, 64, 128, 100, 64, 0, 1, 3000, 1, 1},  {1, 1, 64, 128, 1, 256, 0, 2, 5000, 1, 0},
};
static const dcase full_cases[] = {
    {2, 1, 64, 128, 2048, 64, 0, 2, 300000, 0, 0},  /* long rows: filter, many splits */
    {2, 2, 64, 128, 2048, 64, 0, 2, 200000, 1, 0},
    {64, 2, 64, 128, 512, 64, 0, 0, 20000, 0, 0},   /* a batch of mixed lengths */
    {8, 4, 64, 128, 2048, 64, 0, 0, 70000, 0, 1},   /* next_n 4: two q-blocks a request */
    {16, 1, 32, 128, 1024, 32, 0, 0, 50000, 0, 0},  /* H = 32, block_kv 32 */
    {600, 2, 64, 128, 256, 64, 0, 0, 3000, 1, 0},   /* >= 1024 rows: the dense windows */
    {4, 2, 64, 128, 2048, 64, 4, 0, 40000, 0, 0},   /* portable (stride % 16 != 0) */
};

static void decode_small(void) {
    for (size_t i = 0; i < sizeof small_cases / sizeof *small_cases; i++) check_case(&small_cases[i]);
    check_bad_device_data();
}
static void decode_full(void) {
    for (size_t i = 0; i < sizeof full_cases / sizeof *full_cases; i++) check_case(&full_cases[i]);
}
static void decode_graph(void) {
    const dcase c = {64, 1, 64, 128, 2048, 64, 0, 0, 65536, 0, 0};
    check_graph(&c);
    const dcase c2 = {3, 2, 64, 128, 16, 64, 0, 0, 3000, 1, 0};
    check_graph(&c2);
}

/* --graph-bench B CTX NEXT_N: the GPU time of one decode step (H = 64, k = 2048, block_kv 64, free
 * codes, lengths ctx) as a direct call and as a captured CUDA graph replayed, CUDA-event medians of
 * 30 back-to-back calls after a warm-up; one JSON line on stdout. */
static int graph_bench(int B, int ctx, int next_n) {
    if (gu_no_cuda()) return 77;
    t_init_seed();
    const dcase c = {B, next_n, 64, 128, 2048, 64, 0, 2, ctx, 0, 0};
    dprob p;
    prob_make(&c, &p);
    const size_t n = (size_t)p.rows * c.k;
    int32_t *oi = gu_alloc(n * 4);
    ltk_decode_args a = prob_args(&p, 1, oi, NULL, LTK_FLAG_UNSORTED);
    ltk_exec e = {.backend = LTK_BACKEND_CUDA, .algo = LTK_ALGO_FUSED};
    size_t wsb = 0;
    if (ltk_decode_workspace_size(&a, &e, &wsb) != LTK_OK) return 1;
    void *ws = gu_alloc(wsb);
    cudaStream_t st;
    GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    e.stream = st, e.workspace = ws, e.workspace_bytes = wsb;
    cudaEvent_t e0, e1;
    GPU_CHECK(cudaEventCreate(&e0));
    GPU_CHECK(cudaEventCreate(&e1));
    double t_direct[30], t_graph[30];
    for (int i = 0; i < 3; i++) ltk_decode_topk(&a, &e);
    for (int i = 0; i < 30; i++) {
        GPU_CHECK(cudaEventRecord(e0, st));
        if (ltk_decode_topk(&a, &e) != LTK_OK) return 1;
        GPU_CHECK(cudaEventRecord(e1, st));
        GPU_CHECK(cudaEventSynchronize(e1));
        t_direct[i] = now_ms_events(e0, e1);
    }
    cudaGraph_t g;
    cudaGraphExec_t ge;
    GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    ltk_status s = ltk_decode_topk(&a, &e);
    GPU_CHECK(cudaStreamEndCapture(st, &g));
    if (s != LTK_OK) return 1;
    GPU_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; i++) GPU_CHECK(cudaGraphLaunch(ge, st));
    for (int i = 0; i < 30; i++) {
        GPU_CHECK(cudaEventRecord(e0, st));
        GPU_CHECK(cudaGraphLaunch(ge, st));
        GPU_CHECK(cudaEventRecord(e1, st));
        GPU_CHECK(cudaEventSynchronize(e1));
        t_graph[i] = now_ms_events(e0, e1);
    }
    qsort(t_direct, 30, sizeof(double), cmp_double_asc);
    qsort(t_graph, 30, sizeof(double), cmp_double_asc);
    const char *commit = getenv("LTK_COMMIT");
    printf("{\"op\": \"decode\", \"algo\": \"graph\", \"harness\": \"test-cuda-decode --graph-bench\", \"commit\": \"%s\", "
           "\"B\": %d, \"ctx\": %d, \"next_n\": %d, \"H\": 64, \"k\": 2048, "
           "\"direct_ms\": %.4f, \"graph_ms\": %.4f, \"ratio\": %.3f}\n",
           commit ? commit : "?", B, ctx, next_n, t_direct[15], t_graph[15], t_graph[15] / t_direct[15]);
    return 0;
}

static const t_test tests[] = {T_ENTRY(decode_small), T_ENTRY(decode_full), T_ENTRY(decode_graph)};

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--graph-bench")) return graph_bench(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    char small[] = "small";
    if (argc > 1 && !strcmp(argv[1], "--small")) argv[1] = small;
    return T_RUN_ISOLATED(tests, 900, gu_no_cuda);
}
