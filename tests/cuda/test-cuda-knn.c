/* GPU kNN (src/cuda/knn*.cu) against a float64 host oracle (sets equal up to ties within the score
 * tolerance), fused == materialize bit for bit, adversarial corpora (duplicates -> exact fallback,
 * NaN rows), int64 indices across corpus chunks, canaries, and the paths the tuning table's test
 * hooks reach (ltk-tune.h: set with ltk_tune_set).
 *   test-cuda-knn          every test, each in its own process (harness.h; "N passed, N failed")
 *   test-cuda-knn --small  a few small cases (compute-sanitizer; LTK_TEST_TIMEOUT_S=0 there) */
#include "gpu-util.h"

void ltk_cuda_knn_debug_chunk(int64_t rows);

typedef struct {
    int64_t B, N;
    int D, k, dtype, metric;
    int gen;          /* 0 randn, 1 all-identical base, 2 NaN rows, 3 few distinct vectors, 4 clustered */
    int64_t qpad, xpad, opad;
    int scores;
    int64_t chunk;    /* corpus chunk override (0 = default) */
    uint32_t flags;
} kcase;

static const char *met_name[] = {"ip", "l2", "cos"};

static void put(void *p, int dt, int64_t i, float v) {
    if (dt == LTK_DTYPE_F32) ((float *)p)[i] = v;
    else if (dt == LTK_DTYPE_F16) ((uint16_t *)p)[i] = t_f32_f16(v);
    else ((uint16_t *)p)[i] = t_f32_bf16(v);
}
static float get(const void *p, int dt, int64_t i) {
    if (dt == LTK_DTYPE_F32) return ((const float *)p)[i];
    uint16_t v = ((const uint16_t *)p)[i];
    return dt == LTK_DTYPE_F16 ? t_f16_f32(v) : t_bf16_f32(v);
}

typedef struct {
    double s;
    int64_t i;
} dent;
static int cmp_dent(const void *pa, const void *pb) { /* larger s first, NaN last, lower index */
    const dent *a = pa, *b = pb;
    int na = isnan(a->s), nb = isnan(b->s);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The call's arguments for case c over device buffers (strides with the case's paddings). */
static ltk_knn_args case_args(const kcase *c, void *dq, void *dx, int64_t *doi, float *dos) {
    ltk_knn_args a;
    memset(&a, 0, sizeof a);
    a.B = c->B;
    a.N = c->N;
    a.D = c->D;
    a.k = c->k;
    a.dtype = (ltk_dtype)c->dtype;
    a.metric = (ltk_metric)c->metric;
    a.queries = dq;
    a.q_stride = c->D + c->qpad;
    a.base = dx;
    a.base_stride = c->D + c->xpad;
    a.out_idx = doi;
    a.out_scores = c->scores ? dos : NULL;
    a.out_stride = c->k + c->opad;
    a.flags = c->flags;
    return a;
}

static int run_gpu(const kcase *c, void *dq, void *dx, int64_t *doi, float *dos, ltk_algo algo, ltk_stats *st) {
    ltk_knn_args a = case_args(c, dq, dx, doi, dos);
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    e.algo = algo;
    e.stats = st;
    ltk_cuda_knn_debug_chunk(c->chunk);
    size_t wsb = 0;
    ltk_status s = ltk_cuda_knn_workspace(&a, &e, &wsb);
    if (s != LTK_OK) return (int)s;
    void *ws = gu_alloc(wsb);
    GPU_CHECK(cudaMemset(ws, 0x5a, wsb));
    s = ltk_cuda_knn(&a, &e, ws, wsb);
    if (s != LTK_OK) printf("  status %d: %s\n", (int)s, ltk_last_error());
    GPU_CHECK(cudaDeviceSynchronize());
    cudaFree(ws);
    ltk_cuda_knn_debug_chunk(0);
    return (int)s;
}

/* A value of (pair, dimension), the same for both rows of a pair: every score comes twice, so the
 * k-th is tied about every other query and the tie is broken by row index. */
static float pair_value(int64_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (float)(h & 0xffff) / 32768.0f - 1.0f;
}

static void run_case(const kcase *c) {
    int64_t qs = c->D + c->qpad, xs = c->D + c->xpad, os = c->k + c->opad;
    size_t es = c->dtype == LTK_DTYPE_F32 ? 4 : 2;
    size_t nq = (size_t)(c->B * qs), nx = (size_t)(c->N * xs);
    unsigned char *hq = calloc(nq + 1, es), *hx = calloc(nx + 1, es);
    for (size_t i = 0; i < nq; i++) put(hq, c->dtype, (int64_t)i, (int64_t)(i % qs) < c->D ? rng_normal() : 999.0f);
    float *proto = malloc(sizeof(float) * (size_t)c->D * 8);
    for (int i = 0; i < c->D * 8; i++) proto[i] = rng_normal();
    for (int64_t r = 0; r < c->N; r++)
        for (int64_t d = 0; d < xs; d++) {
            float v = 999.0f;
            if (d < c->D) {
                if (c->gen == 1) v = proto[d];
                else if (c->gen == 2) v = (r % 97 == 5) ? NAN : rng_normal();
                else if (c->gen == 3) v = proto[(r % 8) * c->D + d];
                else if (c->gen == 4) v = proto[(r % 8) * c->D + d] + 0.05f * rng_normal();
                else if (c->gen == 5) v = pair_value((r >> 1) * (int64_t)c->D + d); /* rows in equal pairs */
                else if (c->gen == 6) v = r % 10 == 0 ? rng_normal() : 0.0f; /* nine rows in ten zero */
                else if (c->gen == 7) v = r >= c->N / 2 ? proto[d] : rng_normal(); /* second half equal */
                else v = rng_normal();
            }
            put(hx, c->dtype, r * xs + d, v);
        }
    free(proto);
    void *dq = gu_upload(hq, nq * es), *dx = gu_upload(hx, nx * es);
    size_t on = (size_t)(c->B * os) + 32;
    int64_t *doi = gu_alloc(on * 8), *doi2 = gu_alloc(on * 8);
    float *dos = gu_alloc(on * 4), *dos2 = gu_alloc(on * 4);
    GPU_CHECK(cudaMemset(doi, 0x7f, on * 8));
    GPU_CHECK(cudaMemset(dos, 0x7f, on * 4));
    GPU_CHECK(cudaMemset(doi2, 0x7f, on * 8));
    GPU_CHECK(cudaMemset(dos2, 0x7f, on * 4));
    ltk_stats st, st2;
    memset(&st, 0, sizeof st);
    memset(&st2, 0, sizeof st2);
    char name[256];
    snprintf(name, sizeof name, "B=%lld N=%lld D=%d k=%d dt=%d %s gen=%d pads=%lld/%lld/%lld chunk=%lld scores=%d",
             (long long)c->B, (long long)c->N, c->D, c->k, c->dtype, met_name[c->metric], c->gen, (long long)c->qpad,
             (long long)c->xpad, (long long)c->opad, (long long)c->chunk, c->scores);
    int s1 = run_gpu(c, dq, dx, doi, dos, LTK_ALGO_FUSED, &st);
    int s2 = run_gpu(c, dq, dx, doi2, dos2, LTK_ALGO_MATERIALIZE, &st2);
    CHECK(s1 == 0 && s2 == 0, "%s: status %d / %d", name, s1, s2);
    int64_t *oi = malloc(on * 8), *oi2 = malloc(on * 8);
    float *o = malloc(on * 4), *o2 = malloc(on * 4);
    GPU_CHECK(cudaMemcpy(oi, doi, on * 8, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(o, dos, on * 4, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(oi2, doi2, on * 8, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(o2, dos2, on * 4, cudaMemcpyDeviceToHost));
    /* fused == materialize, bit for bit (indices and scores) */
    int same = 1;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = 0; j < c->k; j++) {
            size_t i = (size_t)(b * os + j);
            if (oi[i] != oi2[i] || (c->scores && !t_same_f32(o[i], o2[i]))) same = 0;
        }
    CHECK(same, "%s: fused != materialize", name);
    /* oracle */
    dent *ent = malloc(sizeof(dent) * (size_t)(c->N + 1));
    double *xn = malloc(sizeof(double) * (size_t)(c->N + 1));
    for (int64_t r = 0; r < c->N; r++) {
        double s = 0;
        for (int d = 0; d < c->D; d++) {
            double v = get(hx, c->dtype, r * xs + d);
            s += v * v;
        }
        xn[r] = s;
    }
    int bad = 0;
    for (int64_t b = 0; b < c->B && bad < 3; b++) {
        double qn = 0, maxabs = 0;
        for (int d = 0; d < c->D; d++) {
            double v = get(hq, c->dtype, b * qs + d);
            qn += v * v;
        }
        for (int64_t r = 0; r < c->N; r++) {
            double dot = 0;
            for (int d = 0; d < c->D; d++) dot += (double)get(hq, c->dtype, b * qs + d) * get(hx, c->dtype, r * xs + d);
            double s;
            if (c->metric == LTK_METRIC_IP) s = dot;
            else if (c->metric == LTK_METRIC_L2) s = -(qn + xn[r] - 2.0 * dot);
            else s = (qn > 0 && xn[r] > 0) ? dot / (sqrt(qn) * sqrt(xn[r])) : 0.0;
            ent[r].s = s;
            ent[r].i = r;
            if (!isnan(s) && fabs(s) > maxabs) maxabs = fabs(s);
        }
        /* the reported score of entry r on the GPU path is checked against ent[r] below */
        double *byidx = malloc(sizeof(double) * (size_t)(c->N + 1));
        for (int64_t r = 0; r < c->N; r++) byidx[r] = ent[r].s;
        qsort(ent, (size_t)c->N, sizeof(dent), cmp_dent);
        double tol = 2e-5 * (maxabs + (c->metric == LTK_METRIC_L2 ? qn : 0.0) + 1.0) * (c->D > 256 ? 4 : 1);
        if (c->metric == LTK_METRIC_COS) tol = 1e-4;
        int64_t want = c->N < c->k ? c->N : c->k;
        double kth = want > 0 ? ent[want - 1].s : 0;
        const int64_t *gi = oi + b * os;
        const float *gs = o + b * os;
        int ok = 1;
        char why[200] = "";
        unsigned char *seen = calloc((size_t)c->N + 1, 1);
        for (int64_t j = 0; j < c->k && ok; j++) {
            if (j >= want) {
                if (gi[j] != -1 || (c->scores && !(isinf(gs[j]) && ((gs[j] > 0) == (c->metric == LTK_METRIC_L2))))) {
                    ok = 0;
                    snprintf(why, sizeof why, "slot %lld: padding expected", (long long)j);
                }
                continue;
            }
            int64_t id = gi[j];
            if (id < 0 || id >= c->N || seen[id]) {
                ok = 0;
                snprintf(why, sizeof why, "slot %lld: bad or duplicate index %lld", (long long)j, (long long)id);
                break;
            }
            seen[id] = 1;
            double rs = byidx[id];
            if (isnan(kth)) continue; /* NaN-filled tail: any NaN entry is as good (ties by index apply on GPU scores) */
            if (!isnan(rs) && rs < kth - tol) {
                ok = 0;
                snprintf(why, sizeof why, "slot %lld: idx %lld ref score %.7g below kth %.7g", (long long)j, (long long)id, rs, kth);
            }
            if (c->scores && !isnan(rs)) {
                double g = c->metric == LTK_METRIC_L2 ? -(double)gs[j] : (double)gs[j];
                if (fabs(g - rs) > tol) {
                    ok = 0;
                    snprintf(why, sizeof why, "slot %lld: idx %lld score %.7g vs ref %.7g", (long long)j, (long long)id, g, rs);
                }
            }
            if (j > 0 && c->scores) { /* sorted: best first, equal scores by index */
                float p = gs[j - 1], q = gs[j];
                int worse = c->metric == LTK_METRIC_L2 ? (q < p) : (q > p);
                if (worse || (p == q && gi[j - 1] > gi[j])) {
                    ok = 0;
                    snprintf(why, sizeof why, "slot %lld: not sorted", (long long)j);
                }
            }
        }
        /* every clearly-better ref entry is present */
        for (int64_t j = 0; ok && j < want; j++)
            if (!isnan(ent[j].s) && ent[j].s > kth + tol && !seen[ent[j].i]) {
                ok = 0;
                snprintf(why, sizeof why, "missing idx %lld (ref %.7g, kth %.7g)", (long long)ent[j].i, ent[j].s, kth);
            }
        for (int64_t j = c->k; j < os; j++)
            if ((uint64_t)gi[j] != 0x7f7f7f7f7f7f7f7full) ok = 0, snprintf(why, sizeof why, "wrote past k");
        if (!ok) {
            bad++;
            CHECK(0, "%s: query %lld: %s", name, (long long)b, why);
        }
        free(seen);
        free(byidx);
    }
    int guard = 1;
    for (size_t j = (size_t)(c->B * os); j < on; j++)
        if ((uint64_t)oi[j] != 0x7f7f7f7f7f7f7f7full || t_f32_bits(o[j]) != 0x7f7f7f7fu) guard = 0;
    CHECK(guard, "%s: canary overwritten", name);
    if (getenv("LTK_TEST_VERBOSE") || c->gen == 1)
        printf("ok? %s  fallback_rows=%lld candidates_max=%lld\n", name, (long long)st.fallback_rows,
               (long long)st.candidates_max);
    /* A flat corpus: the threshold bounds its tie class by position, so no query needs the exact
     * fallback, unless the test hook turns the bound off. (A call the dense dispatch runs as
     * materialize has no filter, and a chunk of at most the cap rows no sample: no fallback.) */
    const int filtered = c->B * c->N > ltk_tune_get()->cuda_knn_dense;
    const int64_t nr = c->chunk > 0 && c->chunk < c->N ? c->chunk : c->N, cap = 4 * (int64_t)c->k > 32768 ? 4 * (int64_t)c->k : 32768;
    if (c->gen == 1 && nr > cap && filtered) {
        if (ltk_tune_get()->cuda_knn_tiebound_off) CHECK(st.fallback_rows > 0, "%s: a flat corpus should take the fallback", name);
        else CHECK(st.fallback_rows == 0, "%s: a flat corpus took the fallback (%lld queries)", name, (long long)st.fallback_rows);
    }
    free(ent);
    free(xn);
    free(hq);
    free(hx);
    free(oi);
    free(oi2);
    free(o);
    free(o2);
    cudaFree(dq);
    cudaFree(dx);
    cudaFree(doi);
    cudaFree(doi2);
    cudaFree(dos);
    cudaFree(dos2);
}

static void kc(int64_t B, int64_t N, int D, int k, int dt, int metric, int gen, int64_t qpad, int64_t xpad, int64_t opad,
               int scores, int64_t chunk) {
    kcase c = {B, N, D, k, dt, metric, gen, qpad, xpad, opad, scores, chunk, 0};
    run_case(&c);
}

/* The tuning table with one field changed (what), until tune_restore. */
static ltk_tune g_tune_saved;
static void tune_with(const char *what, int value) {
    g_tune_saved = *ltk_tune_get();
    ltk_tune t = g_tune_saved;
    if (!strcmp(what, "portable")) t.cuda_portable = value;
    else if (!strcmp(what, "graph")) t.cuda_knn_graph = value;
    else if (!strcmp(what, "qi64")) t.cuda_knn_qi64 = value;
    else if (!strcmp(what, "thr_global")) t.cuda_knn_thr_global = value;
    else if (!strcmp(what, "dense")) t.cuda_knn_dense = value;
    else if (!strcmp(what, "tiebound_off")) t.cuda_knn_tiebound_off = value;
    ltk_tune_set(&t);
}
static void tune_restore(void) { ltk_tune_set(&g_tune_saved); }

/* One fused call captured into a CUDA graph on a non-blocking stream (relaxed mode, workspace
 * given), replayed twice over poisoned outputs: the same bits as a direct call. Under capture the
 * library must not synchronise: the check and fallback are plain launches (the kernels of an
 * unneeded fallback exit at once), so a flat corpus (gen 1) runs the fallback inside the graph. */
static void capture_case(int64_t B, int64_t N, int D, int k, int metric, int gen) {
    const size_t es = 2;
    unsigned char *hq = malloc((size_t)(B * D) * es), *hx = malloc((size_t)(N * D) * es);
    float *proto = malloc(sizeof(float) * (size_t)D);
    for (int d = 0; d < D; d++) proto[d] = rng_normal();
    for (int64_t i = 0; i < B * D; i++) put(hq, LTK_DTYPE_BF16, i, rng_normal());
    for (int64_t i = 0; i < N * D; i++) put(hx, LTK_DTYPE_BF16, i, gen == 1 ? proto[i % D] : rng_normal());
    free(proto);
    void *dq = gu_upload(hq, (size_t)(B * D) * es), *dx = gu_upload(hx, (size_t)(N * D) * es);
    const size_t on = (size_t)(B * k);
    int64_t *doi = gu_alloc(on * 8);
    float *dos = gu_alloc(on * 4);
    const kcase c = {B, N, D, k, LTK_DTYPE_BF16, metric, gen, 0, 0, 0, 1, 0, 0};
    ltk_knn_args a = case_args(&c, dq, dx, doi, dos);
    cudaStream_t s;
    GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    e.algo = LTK_ALGO_FUSED;
    e.stream = s;
    size_t wsb = 0;
    ltk_status st = ltk_cuda_knn_workspace(&a, &e, &wsb);
    void *ws = gu_alloc(wsb + 1);
    char name[160];
    snprintf(name, sizeof name, "graph capture: B=%lld N=%lld D=%d k=%d %s gen=%d", (long long)B, (long long)N, D, k,
             met_name[metric], gen);
    /* direct call: the reference bits */
    if (st == LTK_OK) st = ltk_cuda_knn(&a, &e, ws, wsb);
    GPU_CHECK(cudaStreamSynchronize(s));
    int64_t *ri = malloc(on * 8), *gi = malloc(on * 8);
    float *rs = malloc(on * 4), *gs = malloc(on * 4);
    GPU_CHECK(cudaMemcpy(ri, doi, on * 8, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(rs, dos, on * 4, cudaMemcpyDeviceToHost));
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    ltk_status cst = LTK_EINTERNAL;
    if (st == LTK_OK) {
        GPU_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        cst = ltk_cuda_knn(&a, &e, ws, wsb);
        GPU_CHECK(cudaStreamEndCapture(s, &g));
    }
    int ok = st == LTK_OK && cst == LTK_OK && g && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
    for (int rep = 0; ok && rep < 2; rep++) {
        GPU_CHECK(cudaMemsetAsync(doi, 0x7f, on * 8, s));
        GPU_CHECK(cudaMemsetAsync(dos, 0x7f, on * 4, s));
        GPU_CHECK(cudaGraphLaunch(ge, s));
        GPU_CHECK(cudaStreamSynchronize(s));
        GPU_CHECK(cudaMemcpy(gi, doi, on * 8, cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemcpy(gs, dos, on * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < on && ok; i++) ok = gi[i] == ri[i] && t_same_f32(gs[i], rs[i]);
    }
    CHECK(ok, "%s: status %d / %d (%s), replay %s", name, (int)st, (int)cst, ltk_last_error(),
          ok ? "same" : "differs or failed");
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    free(ri);
    free(gi);
    free(rs);
    free(gs);
    free(hq);
    free(hx);
    cudaFree(ws);
    cudaFree(dq);
    cudaFree(dx);
    cudaFree(doi);
    cudaFree(dos);
}

static const int B16 = LTK_DTYPE_BF16, F16 = LTK_DTYPE_F16, F32 = LTK_DTYPE_F32;

/* The sanitizers' few cases. */
static void knn_small(void) {
    {
        kc(3, 2000, 64, 10, B16, LTK_METRIC_IP, 0, 0, 0, 1, 1, 0);
        kc(2, 20000, 40, 5, F32, LTK_METRIC_L2, 0, 3, 1, 0, 1, 0);
        kc(2, 40000, 16, 7, F16, LTK_METRIC_COS, 1, 0, 0, 0, 1, 0); /* flat, N > cap: fallback passes */
        kc(260, 36000, 16, 5, B16, LTK_METRIC_L2, 1, 0, 0, 0, 1, 0); /* 128-query items (sm_90a), fallback */
        kc(8, 36000, 32, 100, B16, LTK_METRIC_IP, 5, 0, 0, 0, 1, 0);  /* rows in pairs: tied k-th key */
        capture_case(4, 40000, 64, 100, LTK_METRIC_IP, 1);              /* captured, fallback inside */
    }
}

/* The full suite, in parts of under a minute each on an H200 (a hang costs its part alone). */
static void knn_metrics(void) {
    for (int m = 0; m < 3; m++) {
        kc(5, 3000, 64, 10, B16, m, 0, 0, 0, 0, 1, 0);             /* N <= cap: no sample */
        kc(16, 40000, 128, 100, B16, m, 0, 0, 0, 2, 1, 0);         /* sampled gate */
        kc(16, 40000, 128, 100, F16, m, 0, 8, 8, 0, 1, 0);
        kc(8, 30000, 96, 50, F32, m, 0, 0, 4, 0, 1, 0);            /* fp32 SIMT */
        kc(3, 25000, 37, 20, F32, m, 0, 1, 2, 0, 1, 0);            /* odd D: element loads */
        kc(4, 20000, 45, 16, B16, m, 4, 3, 0, 0, 1, 0);            /* clustered, odd D */
    }
}

static void knn_edges(void) {
    kc(70, 20000, 64, 1, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);    /* k = 1, two query blocks */
    kc(2, 1000, 64, 1500, B16, LTK_METRIC_L2, 0, 0, 0, 0, 1, 0);   /* k > N: padding (+inf for L2) */
    kc(2, 1000, 64, 1000, B16, LTK_METRIC_IP, 0, 0, 0, 0, 0, 0);   /* k = N, no scores */
    kc(3, 0, 64, 10, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);        /* N = 0 */
    kc(4, 60000, 64, 5000, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);  /* large k */
    kc(2, 80000, 32, 16384, B16, LTK_METRIC_COS, 0, 0, 0, 0, 1, 0); /* k = 16384 */
    /* k = 10000 on a sampled corpus: the final select's staging clamped to the shared memory left
     * (the output kernels' static shared memory once made that an "invalid argument") */
    kc(2, 120000, 64, 10000, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);
    kc(2, 120000, 64, 9000, B16, LTK_METRIC_L2, 0, 0, 0, 0, 1, 40000); /* the same, 3 chunks */
    kc(3, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);   /* all-identical corpus: exact fallback */
    kc(3, 40000, 64, 3000, B16, LTK_METRIC_L2, 1, 0, 0, 0, 1, 0);
    kc(3, 40000, 64, 100, B16, LTK_METRIC_IP, 3, 0, 0, 0, 1, 0);   /* 8 distinct vectors: heavy ties */
    kc(3, 30000, 64, 50, F32, LTK_METRIC_IP, 2, 0, 0, 0, 1, 0);    /* NaN rows */
    /* tie classes the threshold bounds by position: nine rows in ten zero (the k-th key 0 where
     * fewer than k rows score above it), the second half of the corpus one vector, a flat corpus
     * at large k; sm_90a and portable (fp32) gates, several chunks */
    kc(4, 60000, 64, 100, B16, LTK_METRIC_IP, 6, 0, 0, 0, 1, 0);
    kc(4, 60000, 64, 4000, B16, LTK_METRIC_IP, 6, 0, 0, 0, 1, 0);
    kc(3, 60000, 48, 4000, F32, LTK_METRIC_IP, 6, 0, 0, 0, 1, 0);
    kc(4, 80000, 64, 300, B16, LTK_METRIC_IP, 7, 0, 0, 0, 1, 0);
    kc(3, 80000, 64, 300, B16, LTK_METRIC_L2, 7, 0, 0, 0, 1, 0);
    kc(3, 80000, 40, 300, F32, LTK_METRIC_COS, 7, 0, 0, 0, 1, 0);
    kc(2, 150000, 64, 8192, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    kc(3, 100000, 32, 100, F32, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    kc(4, 120000, 64, 200, B16, LTK_METRIC_IP, 7, 0, 0, 0, 1, 50000);
    kc(5, 80000, 64, 300, F16, LTK_METRIC_COS, 7, 0, 0, 0, 1, 0);
    kc(100, 60000, 64, 500, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0); /* two query blocks: ks_gate's full items */
    kc(100, 60000, 64, 2500, B16, LTK_METRIC_L2, 7, 0, 0, 0, 1, 0);
}

static void knn_chunks(void) {
    kc(4, 50000, 64, 200, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 12345); /* corpus in 5 chunks: int64 merge */
    kc(4, 50000, 64, 200, B16, LTK_METRIC_L2, 3, 0, 0, 0, 1, 9000);  /* chunks + ties across chunks */
    kc(1100, 3000, 32, 8, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);   /* two query batches */
    kc(8, 20000, 768, 64, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);   /* D = 768 */
    kc(16, 40000, 64, 100, B16, LTK_METRIC_IP, 5, 0, 0, 0, 1, 0);  /* rows in pairs: k-th key tied */
    /* chunks of >= 262,144 rows: the check and fallback as a graph with a conditional node (smaller
     * ones take it under the test hook, below): its body skipped, then run (flat corpus) */
    kc(4, 300000, 32, 100, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);
    kc(3, 300000, 16, 50, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    kc(16, 40000, 64, 3000, B16, LTK_METRIC_L2, 5, 0, 0, 0, 1, 0);
}

static void knn_b256(void) {
    /* B >= 256: the sm_90a loop's 128-query items (both math groups on all 256 rows, the last
     * item part padding); each metric, fallback, ties, f16, D = 768 */
    for (int m = 0; m < 3; m++) kc(300, 40000, 128, 100, B16, m, 0, 0, 0, 0, 1, 0);
    kc(260, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);  /* flat: fallback for every query */
    kc(257, 40000, 64, 300, F16, LTK_METRIC_L2, 3, 0, 0, 0, 1, 0);  /* heavy ties */
    kc(258, 40000, 64, 500, B16, LTK_METRIC_IP, 5, 0, 0, 0, 1, 0);  /* rows in pairs */
    kc(256, 30000, 768, 64, B16, LTK_METRIC_COS, 0, 0, 0, 0, 1, 0); /* D = 768 */
}

static void knn_capture(void) {
    /* captured into a CUDA graph: sampled, flat (the fallback inside the graph), a chunk of
     * >= 262,144 rows (whose conditional graph is not used under capture), B >= 256 */
    capture_case(8, 40000, 64, 100, LTK_METRIC_IP, 0);
    capture_case(4, 40000, 64, 100, LTK_METRIC_L2, 1);
    capture_case(16, 300000, 64, 1000, LTK_METRIC_IP, 0);
    capture_case(300, 40000, 128, 64, LTK_METRIC_COS, 0);
}

static void knn_hooks(void) {
    /* the test hooks: the check and fallback as a graph for every sampled chunk (its body skipped,
     * then run on a flat corpus) */
    tune_with("graph", 1);
    kc(16, 40000, 128, 100, B16, LTK_METRIC_L2, 0, 0, 0, 0, 1, 0);
    kc(3, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    tune_restore();
    /* 64-query items of the sm_90a loop on batches of >= 256 queries */
    tune_with("qi64", 1);
    kc(300, 40000, 128, 100, B16, LTK_METRIC_COS, 0, 0, 0, 0, 1, 0);
    kc(260, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    tune_restore();
    /* the threshold's radix passes over the sample in global memory (devices that refuse 128 KB) */
    tune_with("thr_global", 1);
    kc(16, 40000, 128, 100, B16, LTK_METRIC_L2, 0, 0, 0, 0, 1, 0);
    kc(4, 60000, 64, 5000, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0);
    tune_restore();
    /* no position bound on tie classes: flat corpora through the exact fallback, also captured */
    tune_with("tiebound_off", 1);
    kc(3, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    kc(3, 40000, 64, 3000, F32, LTK_METRIC_L2, 1, 0, 0, 0, 1, 0);
    kc(4, 60000, 64, 4000, B16, LTK_METRIC_IP, 6, 0, 0, 0, 1, 0);
    capture_case(4, 40000, 64, 100, LTK_METRIC_L2, 1);
    tune_restore();
    /* the portable main loop (mma.sync) where the sm_90a one would run: LTK_CUDA_PORTABLE=1 */
    tune_with("portable", 1);
    kc(16, 40000, 128, 100, B16, LTK_METRIC_COS, 0, 0, 0, 0, 1, 0);
    kc(260, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    kc(8, 36000, 32, 100, F16, LTK_METRIC_L2, 5, 0, 0, 0, 1, 0);
    kc(4, 80000, 64, 300, B16, LTK_METRIC_IP, 7, 0, 0, 0, 1, 0); /* the bound in the portable gate */
    kc(3, 60000, 64, 2000, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);
    tune_restore();
}

/* A fused call over <= 2^23 scores runs as materialize (knn_dense in knn.cu); the other tests keep
 * the filter (the hook set to 0 in main), these let the dispatch happen: the same checks, fused ==
 * materialize bit for bit included, on both sides of the bound. */
static void knn_dense_dispatch(void) {
    tune_with("dense", 1 << 23);
    kc(64, 100000, 128, 100, B16, LTK_METRIC_IP, 0, 0, 0, 0, 1, 0); /* 6.4M scores: dense */
    kc(1, 200000, 100, 1000, F32, LTK_METRIC_L2, 3, 0, 0, 0, 1, 0); /* heavy ties, dense */
    kc(3, 40000, 64, 100, B16, LTK_METRIC_IP, 1, 0, 0, 0, 1, 0);    /* flat corpus, dense */
    kc(48, 200000, 128, 100, B16, LTK_METRIC_COS, 0, 0, 0, 0, 1, 0); /* 9.6M: fused */
    tune_restore();
}

static const t_test tests[] = {T_ENTRY(knn_small),   T_ENTRY(knn_metrics), T_ENTRY(knn_edges), T_ENTRY(knn_chunks),
                               T_ENTRY(knn_b256),    T_ENTRY(knn_capture), T_ENTRY(knn_hooks),
                               T_ENTRY(knn_dense_dispatch)};

int main(int argc, char **argv) {
    char small[] = "small";
    if (argc > 1 && !strcmp(argv[1], "--small")) argv[1] = small; /* the sanitizers' few cases */
    ltk_tune t = *ltk_tune_get(); /* the filter everywhere but knn_dense_dispatch */
    t.cuda_knn_dense = 0;
    ltk_tune_set(&t);
    return T_RUN_ISOLATED(tests, 900, gu_no_cuda);
}
