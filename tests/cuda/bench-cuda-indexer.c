/* Benchmark of the CUDA indexer on DSA-shaped inputs: T queries at the end of a context of S keys
 * (causal: ke = S - T + t + 1), keys randn quantised per key to e4m3 (scale amax/448), queries
 * randn in e4m3, weights randn * D^-0.5 * H^-0.5. For each S: fused with a hot-set state (the
 * state comes from a previous call on the same inputs, as the next chunk of a request would see
 * it), fused from a cold start, score_only, materialize. CUDA-event medians over --reps runs with
 * a preallocated workspace. One JSON line per (S, algo) in the design.md format, plus candidate
 * and threshold-bin statistics of the fused path; a table at the end.
 *
 * usage: bench-cuda-indexer [--T 8192] [--S 262144,524288,786432,1048576] [--H 64] [--k 2048]
 *                           [--reps 5] [--algos fused,fused_cold,score_only,materialize] [--json FILE] */
#define _POSIX_C_SOURCE 200809L
#include "gpu-util.h"

#include <omp.h>
#include <stdarg.h>
#include <time.h>

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static double pct(int32_t *v, int64_t n, double p) {
    if (n == 0) return 0.0;
    qsort(v, (size_t)n, sizeof(int32_t), cmp_i32);
    int64_t i = (int64_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* Progress on stderr with the time since the start and since the last line: a stall shows where. */
static double g_t0, g_tl;
static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    double t = t_now();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%7.2f s %+7.2f s] ", t - g_t0, t - g_tl);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    g_tl = t;
}

typedef struct {
    const char *algo;
    double ms, tflops;
    size_t aux;
    double cmean, cp99, cmax, bmean, bp99, bmax;
    long long fb;
    int have_stats;
} result;

int main(int argc, char **argv) {
    /* unbuffered: a killed run keeps everything it printed */
    setvbuf(stdout, NULL, _IONBF, 0);
    setvbuf(stderr, NULL, _IONBF, 0);
    g_t0 = g_tl = t_now();
    int64_t T = 8192;
    int H = 64, D = 128, k = 2048, reps = 5;
    const char *Slist = "262144,524288,786432,1048576";
    const char *algos = "fused,fused_cold,score_only,materialize";
    const char *json = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--T")) T = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--S")) Slist = argv[i + 1];
        else if (!strcmp(argv[i], "--H")) H = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k")) k = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--algos")) algos = argv[i + 1];
        else if (!strcmp(argv[i], "--json")) json = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!gu_device_present()) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    int64_t Ss[16];
    int nS = 0;
    for (const char *p = Slist; *p && nS < 16;) {
        Ss[nS++] = atoll(p);
        const char *c = strchr(p, ',');
        if (!c) break;
        p = c + 1;
    }
    int64_t Smax = 0;
    for (int i = 0; i < nS; i++) Smax = Ss[i] > Smax ? Ss[i] : Smax;
    struct cudaDeviceProp prop;
    GPU_CHECK(cudaGetDeviceProperties(&prop, 0));
    char device[300];
    snprintf(device, sizeof device, "%s sm_%d%d %d SMs", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    const char *commit = getenv("LTK_COMMIT") ? getenv("LTK_COMMIT") : "unknown";
    FILE *jf = json ? fopen(json, "a") : NULL;

    /* inputs for the largest S; smaller contexts use a prefix of the keys */
    printf("generating T=%lld S=%lld H=%d D=%d (%d threads)\n", (long long)T, (long long)Smax, H, D,
           omp_get_max_threads());
    uint8_t *hq = malloc((size_t)(T * H * D)), *hkv = malloc((size_t)(Smax * D));
    float *hsc = malloc(sizeof(float) * (size_t)Smax), *hw = malloc(sizeof(float) * (size_t)(T * H));
    gu_gen_dsa(0x5eed1234ull, T, Smax, H, D, hq, hkv, hsc, hw);
    progress("generated inputs");
    void *dq = gu_upload(hq, (size_t)(T * H * D)), *dkv = gu_upload(hkv, (size_t)(Smax * D));
    float *dsc = gu_upload(hsc, sizeof(float) * (size_t)Smax), *dw = gu_upload(hw, sizeof(float) * (size_t)(T * H));
    progress("uploaded (CUDA context created)");
    int32_t *hks = calloc((size_t)T, sizeof(int32_t)), *hke = malloc(sizeof(int32_t) * (size_t)T);
    int32_t *dks = gu_upload(hks, sizeof(int32_t) * (size_t)T), *dke = NULL;
    GPU_CHECK(cudaMalloc((void **)&dke, sizeof(int32_t) * (size_t)T));
    int32_t *dout = NULL;
    GPU_CHECK(cudaMalloc((void **)&dout, sizeof(int32_t) * (size_t)(T * k)));
    cudaStream_t st;
    GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    GPU_CHECK(cudaEventCreate(&e0));
    GPU_CHECK(cudaEventCreate(&e1));
    int32_t *rowc = malloc(sizeof(int32_t) * (size_t)T), *rowb = malloc(sizeof(int32_t) * (size_t)T);

    result table[16][8];
    int nres[16] = {0};
    for (int si = 0; si < nS; si++) {
        const int64_t S = Ss[si];
        for (int64_t t = 0; t < T; t++) {
            int64_t e = S - T + t + 1;
            hke[t] = (int32_t)(e < 0 ? 0 : e);
        }
        GPU_CHECK(cudaMemcpy(dke, hke, sizeof(int32_t) * (size_t)T, cudaMemcpyHostToDevice));
        ltk_indexer_args a;
        memset(&a, 0, sizeof a);
        a.T = T;
        a.S = S;
        a.H = H;
        a.D = D;
        a.k = k;
        a.dtype = LTK_DTYPE_E4M3;
        a.q = dq;
        a.kv = dkv;
        a.kv_scale = dsc;
        a.weights = dw;
        a.ks = dks;
        a.ke = dke;
        a.out_idx = dout;
        a.flags = LTK_FLAG_UNSORTED;
        for (const char *p = algos; *p;) {
            char name[32];
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            if (len >= sizeof name) len = sizeof name - 1;
            memcpy(name, p, len);
            name[len] = 0;
            p = c ? c + 1 : p + len;
            ltk_exec ex;
            memset(&ex, 0, sizeof ex);
            ex.backend = LTK_BACKEND_CUDA;
            ex.stream = st;
            ltk_indexer_state *state = NULL;
            int use_state = !strcmp(name, "fused");
            if (!strcmp(name, "fused") || !strcmp(name, "fused_cold")) ex.algo = LTK_ALGO_FUSED;
            else if (!strcmp(name, "score_only")) ex.algo = LTK_ALGO_SCORE_ONLY;
            else if (!strcmp(name, "materialize")) ex.algo = LTK_ALGO_MATERIALIZE;
            else {
                fprintf(stderr, "unknown algo %s\n", name);
                continue;
            }
            if (use_state && ltk_indexer_state_create(LTK_BACKEND_CUDA, 3 * k, &state) != LTK_OK) {
                fprintf(stderr, "state: %s\n", ltk_last_error());
                return 1;
            }
            a.state = state;
            size_t wsb = 0;
            if (ltk_indexer_workspace_size(&a, &ex, &wsb) != LTK_OK) {
                fprintf(stderr, "%s: workspace: %s\n", name, ltk_last_error());
                return 1;
            }
            void *ws = NULL;
            GPU_CHECK(cudaMalloc(&ws, wsb ? wsb : 16));
            progress("S=%lld %s: workspace %.0f MiB, warm-up call", (long long)S, name, (double)wsb / 1048576.0);
            ex.workspace = ws;
            ex.workspace_bytes = wsb;
            result r;
            memset(&r, 0, sizeof r);
            r.algo = strdup(name);
            r.aux = wsb + (state ? sizeof(int32_t) * (size_t)(3 * k + 1) : 0);
            /* warm-up (with a state: this call also seeds the hot set the timed calls start from) */
            if (ltk_indexer_topk(&a, &ex) != LTK_OK) {
                fprintf(stderr, "%s S=%lld: %s\n", name, (long long)S, ltk_last_error());
                return 1;
            }
            GPU_CHECK(cudaStreamSynchronize(st));
            progress("S=%lld %s: warm-up done, %d timed reps", (long long)S, name, reps < 64 ? reps : 64);
            double ts[64];
            int nr = reps < 64 ? reps : 64;
            for (int rep = 0; rep < nr; rep++) {
                GPU_CHECK(cudaEventRecord(e0, st));
                ltk_status s = ltk_indexer_topk(&a, &ex);
                GPU_CHECK(cudaEventRecord(e1, st));
                GPU_CHECK(cudaEventSynchronize(e1));
                if (s != LTK_OK) {
                    fprintf(stderr, "%s: %s\n", name, ltk_last_error());
                    return 1;
                }
                float ms = 0;
                GPU_CHECK(cudaEventElapsedTime(&ms, e0, e1));
                ts[rep] = ms;
            }
            for (int i = 0; i < nr; i++) /* insertion sort for the median */
                for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
                    double x = ts[j];
                    ts[j] = ts[j - 1];
                    ts[j - 1] = x;
                }
            r.ms = ts[nr / 2];
            progress("S=%lld %s: reps done (median %.3f ms)", (long long)S, name, ts[nr / 2]);
            r.tflops = 2.0 * (double)T * (double)S * H * D / (r.ms * 1e-3) / 1e12;
            if (ex.algo == LTK_ALGO_FUSED) {
                ltk_stats sts;
                memset(&sts, 0, sizeof sts);
                sts.row_candidates = rowc;
                sts.row_bin_entries = rowb;
                ex.stats = &sts;
                if (ltk_indexer_topk(&a, &ex) == LTK_OK) {
                    int64_t n = 0;
                    double sc = 0, sb = 0;
                    for (int64_t t = 0; t < T; t++) {
                        sc += rowc[t];
                        sb += rowb[t];
                        n++;
                    }
                    r.cmean = sc / (double)n;
                    r.bmean = sb / (double)n;
                    r.cp99 = pct(rowc, n, 0.99);
                    r.cmax = rowc[n - 1];
                    r.bp99 = pct(rowb, n, 0.99);
                    r.bmax = rowb[n - 1];
                    r.fb = (long long)sts.fallback_rows;
                    r.have_stats = 1;
                }
                ex.stats = NULL;
                progress("S=%lld %s: stats call done", (long long)S, name);
            }
            char line[1024];
            int m = snprintf(line, sizeof line,
                             "{\"op\": \"dsa\", \"backend\": \"cuda\", \"algo\": \"%s\", \"T\": %lld, \"S\": %lld, "
                             "\"H\": %d, \"D\": %d, \"k\": %d, \"dtype\": \"e4m3\", \"chunk\": %lld, \"median_ms\": %.3f, "
                             "\"aux_bytes\": %zu, \"tflops\": %.1f, \"causal\": 1, \"state\": %d, \"reps\": %d, "
                             "\"device\": \"%s\", \"commit\": \"%s\"",
                             ex.algo == LTK_ALGO_FUSED ? "fused" : name, (long long)T, (long long)S, H, D, k, (long long)T,
                             r.ms, r.aux, r.tflops, use_state, nr, device, commit);
            if (r.have_stats)
                m += snprintf(line + m, sizeof line - (size_t)m,
                              ", \"candidates_mean\": %.1f, \"candidates_p99\": %.0f, \"candidates_max\": %.0f, "
                              "\"bin_mean\": %.1f, \"bin_p99\": %.0f, \"bin_max\": %.0f, \"fallback_rows\": %lld",
                              r.cmean, r.cp99, r.cmax, r.bmean, r.bp99, r.bmax, r.fb);
            snprintf(line + m, sizeof line - (size_t)m, "}");
            printf("%s\n", line);
            fflush(stdout);
            if (jf) {
                fprintf(jf, "%s\n", line);
                fflush(jf);
            }
            table[si][nres[si]++] = r;
            cudaFree(ws);
            ltk_indexer_state_free(state);
            a.state = NULL;
        }
    }
    printf("\n%-9s %-11s %10s %8s %9s %11s %9s %9s\n", "S", "algo", "ms", "TFLOP/s", "aux MiB", "cand/row", "bin/row",
           "fallback");
    for (int si = 0; si < nS; si++)
        for (int i = 0; i < nres[si]; i++) {
            result *r = &table[si][i];
            printf("%-9lld %-11s %10.2f %8.0f %9.0f %11.0f %9.1f %9lld\n", (long long)Ss[si], r->algo, r->ms, r->tflops,
                   (double)r->aux / 1048576.0, r->cmean, r->bmean, r->fb);
        }
    if (jf) fclose(jf);
    return 0;
}
