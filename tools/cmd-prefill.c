/* `litetopk prefill`: the whole-sequence indexer of one long prompt through ltk_prefill_run
 * (StreamIndex's job, fused): chunks of query tokens, causal or CSA-compressed visibility
 * (token t sees keys j < (t+1)/m), the hot set carried between chunks, a workspace bounded
 * independently of L. Optionally the materialize path on the same inputs, checked bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "devmem.h"
#include "gen.h"

static const char prefill_usage[] =
    "prefill [--shape v32|v4-flash|v4-pro] [--L N] [--chunk N] [--algos fused,materialize,score_only] [--json FILE]";
static const char prefill_about[] =
    "Runs the indexer over a whole synthetic sequence of L tokens with ltk_prefill_run: DeepSeek V3.2\n"
    "(H=64 D=128 m=1 k=2048), V4-Flash (m=4 k=512) or V4-Pro (m=4 k=1024). Prints time, effective TFLOP/s\n"
    "(2*H*D*sum_t (t+1)/m / time) and the workspace of each path; with both paths, checks that they\n"
    "return identical indices and scores. One JSON line per path with --json (op \"prefill\").";

typedef struct shape {
    const char *name;
    int32_t H, D, m, k;
} shape;

static const shape shapes[] = {
    {"v32", 64, 128, 1, 2048},
    {"v4-flash", 64, 128, 4, 512},
    {"v4-pro", 64, 128, 4, 1024},
};

/* sum over tokens t < L of (t+1)/m, in closed form. */
static double visible_pairs(int64_t L, int64_t m) {
    int64_t q = L / m, r = L % m;
    return (double)m * (double)(q - 1) * (double)q / 2.0 + (double)q * (double)(r + 1);
}

int cmd_prefill(int argc, char **argv) {
    const char *shape_s = "v4-flash", *backend_s = "auto", *algos_s = "fused,materialize", *json = NULL;
    int64_t L = -1, chunk = -1, H = -1, D = -1, m = -1, k = -1, seed = 20260601, threads = 0, reps = 1;
    int progress = 0;
    cli_opt opts[] = {
        {"--shape", NULL, CLI_STR, &shape_s, "NAME", "v32, v4-flash (default) or v4-pro", 0, 0, 0},
        {"--L", NULL, CLI_INT, &L, "N", "tokens (default: GPU 65536, CPU 4096)", 1, INT32_MAX, 0},
        {"--chunk", NULL, CLI_INT, &chunk, "N", "query tokens per chunk (default: GPU 8192, CPU 512)", 1, 1 << 20, 0},
        {"--H", NULL, CLI_INT, &H, "N", "override the shape's heads", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "override the shape's head dimension", 1, LTK_INDEXER_MAX_D, 0},
        {"--m", NULL, CLI_INT, &m, "N", "override the compression ratio", 1, 1 << 20, 0},
        {"--k", "-k", CLI_INT, &k, "N", "override the shape's top-k", 1, LTK_INDEXER_MAX_K, 0},
        {"--backend", NULL, CLI_STR, &backend_s, "NAME", "auto (default), cpu, cuda or ref", 0, 0, 0},
        {"--algos", NULL, CLI_STR, &algos_s, "LIST", "fused,materialize (default), or any of fused, materialize, score_only (the scan alone, no selection: a ceiling)", 0, 0, 0},
        {"--reps", NULL, CLI_INT, &reps, "N", "timed runs per path, median reported (default 1)", 1, 100, 0},
        {"--threads", NULL, CLI_INT, &threads, "N", "CPU threads (0 = all cores)", 0, 4096, 0},
        {"--seed", NULL, CLI_INT, &seed, "N", "generator seed", 0, INT64_MAX, 0},
        {"--progress", NULL, CLI_FLAG, &progress, NULL, "one line per chunk on stderr", 0, 0, 0},
        {"--json", NULL, CLI_STR, &json, "FILE", "append one JSON line per path", 0, 0, 0},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse("prefill", prefill_usage, prefill_about, argc, argv, 2, opts, nopts);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc) return rc;
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shape_s, shapes[i].name)) sh = &shapes[i];
    if (!sh) return cli_usage_error("prefill", "unknown shape '%s' (v32, v4-flash, v4-pro)", shape_s);
    int run_fused = strstr(algos_s, "fused") != NULL, run_mat = strstr(algos_s, "materialize") != NULL;
    int run_score = strstr(algos_s, "score_only") != NULL;
    if (!run_fused && !run_mat && !run_score)
        return cli_usage_error("prefill", "--algos: expected fused, materialize and/or score_only");
    ltk_backend want, backend;
    if (!cli_parse_backend(backend_s, &want)) return cli_usage_error("prefill", "unknown backend '%s'", backend_s);
    if (!cli_resolve_backend("prefill", want, &backend)) return CLI_EXIT_FAIL;
    const int on_device = backend == LTK_BACKEND_CUDA;
    if (H < 0) H = sh->H;
    if (D < 0) D = sh->D;
    if (m < 0) m = sh->m;
    if (k < 0) k = sh->k;
    if (L < 0) L = on_device ? 65536 : 4096;
    if (chunk < 0) chunk = on_device ? 8192 : 512;

    /* Inputs: the demo's DSA generator with no prefix (ctx = 0, T = L query tokens, L keys), of which
     * the first L/m serve as the compressed keys. Adjacent queries are correlated (rho 0.95), so the
     * hot set carried between chunks matters, as it does on real indexers. */
    gen_dsa_spec spec = {0, L, (int32_t)H, (int32_t)D, LTK_DTYPE_E4M3, (uint64_t)seed, 0.95, NULL, 0};
    gen_dsa g;
    ltk_status st = gen_dsa_make(&spec, &g);
    if (st) {
        fprintf(stderr, "litetopk prefill: %s\n", tool_last_error());
        return CLI_EXIT_FAIL;
    }
    int64_t S = L / m;
    size_t out_n = (size_t)L * (size_t)k;
    void *q = NULL, *kv = NULL;
    float *scale = NULL, *w = NULL, *sc[2] = {NULL, NULL};
    int32_t *idx[2] = {NULL, NULL};
    int32_t *host_idx[2] = {malloc(out_n * sizeof(int32_t)), malloc(out_n * sizeof(int32_t))};
    float *host_sc[2] = {malloc(out_n * sizeof(float)), malloc(out_n * sizeof(float))};
    int exit_code = CLI_EXIT_FAIL;
    if (!host_idx[0] || !host_idx[1] || !host_sc[0] || !host_sc[1]) {
        fprintf(stderr, "litetopk prefill: out of memory for %lld x %lld outputs\n", (long long)L, (long long)k);
        goto done;
    }
    st = devmem_clone(on_device, g.q, (size_t)L * (size_t)(H * D), &q);
    if (!st) st = devmem_clone(on_device, g.kv, (size_t)(S > 0 ? S : 1) * (size_t)D, &kv);
    if (!st) st = devmem_clone(on_device, g.kv_scale, (size_t)(S > 0 ? S : 1) * sizeof(float), (void **)&scale);
    if (!st) st = devmem_clone(on_device, g.weights, (size_t)L * (size_t)H * sizeof(float), (void **)&w);
    for (int i = 0; i < 2 && !st; i++) {
        st = devmem_alloc(on_device, out_n * sizeof(int32_t), (void **)&idx[i]);
        if (!st) st = devmem_alloc(on_device, out_n * sizeof(float), (void **)&sc[i]);
    }
    if (st) {
        fprintf(stderr, "litetopk prefill: %s\n", tool_last_error());
        goto done;
    }

    char device[256], b1[32];
    devmem_device_name(on_device, device, sizeof device);
    const double flops = 2.0 * (double)H * (double)D * visible_pairs(L, m);
    printf("litetopk prefill: %s on %s (%s): L=%lld tokens, %lld keys (m=%lld), H=%lld D=%lld k=%lld, chunk %lld\n",
           sh->name, ltk_backend_name(backend), device, (long long)L, (long long)S, (long long)m, (long long)H,
           (long long)D, (long long)k, (long long)chunk);
    double ceiling = 0.0; /* the sustained FP8 GEMM rate beside the figures (tools/ceiling.c) */
    if (on_device) {
        if (devmem_fp8_gemm_tflops(1.0, &ceiling) == LTK_OK && ceiling > 0)
            printf("  sustained FP8 GEMM (cuBLASLt e4m3 8192^3, 1 s after warm-up): %.0f TFLOP/s\n", ceiling);
        else
            printf("  (FP8 GEMM ceiling not measured: %s)\n", tool_last_error());
    }
    printf("  %-12s %12s %10s %14s\n", "path", "time (ms)", "TFLOP/s", "workspace");
    /* score_only writes no selection: it shares the materialize outputs, never compared */
    const ltk_algo algos[3] = {LTK_ALGO_FUSED, LTK_ALGO_MATERIALIZE, LTK_ALGO_SCORE_ONLY};
    const int want_algo[3] = {run_fused, run_mat, run_score};
    for (int ia = 0; ia < 3; ia++) {
        const int i = ia < 2 ? ia : 1;
        if (!want_algo[ia]) continue;
        ltk_exec e = {.backend = backend, .algo = algos[ia], .num_threads = (int32_t)threads};
        ltk_prefill_args a = {.L = L, .m = (int32_t)m, .H = (int32_t)H, .D = (int32_t)D, .k = (int32_t)k,
                              .dtype = LTK_DTYPE_E4M3, .q = q, .kv = kv, .kv_scale = scale, .weights = w,
                              .chunk = chunk, .out_idx = idx[i], .out_scores = sc[i], .progress = progress};
        size_t ws_bytes = 0;
        st = ltk_prefill_workspace_size(&a, &e, &ws_bytes);
        void *ws = NULL;
        if (!st) st = devmem_alloc(on_device, ws_bytes, &ws);
        e.workspace = ws, e.workspace_bytes = ws_bytes;
        double times[100];
        for (int r = 0; r < reps && !st; r++) {
            devmem_timer timer;
            st = devmem_timer_init(&timer, on_device);
            if (!st) st = devmem_timer_start(&timer);
            if (!st) st = ltk_prefill_run(&a, &e);
            if (!st) st = devmem_timer_stop(&timer, &times[r]);
            devmem_timer_free(&timer);
        }
        devmem_free(on_device, ws);
        if (st) {
            fprintf(stderr, "litetopk prefill: %s: %s\n", ltk_status_str(st), ltk_last_error());
            goto done;
        }
        for (int x = 1; x < reps; x++) /* insertion sort for the median */
            for (int y = x; y > 0 && times[y] < times[y - 1]; y--) {
                double t = times[y];
                times[y] = times[y - 1], times[y - 1] = t;
            }
        double ms = times[reps / 2];
        printf("  %-12s %12.3f %10.4g %14s", cli_algo_name(algos[ia]), ms, flops / (ms * 1e-3) / 1e12,
               cli_bytes((double)ws_bytes, b1, sizeof b1));
        if (ceiling > 0) printf("  %.1f%% of the FP8 GEMM", 100.0 * flops / (ms * 1e-3) / 1e12 / ceiling);
        printf("\n");
        if (json) {
            cli_json j;
            cli_json_begin(&j);
            cli_json_str(&j, "op", "prefill");
            cli_json_str(&j, "backend", ltk_backend_name(backend));
            cli_json_str(&j, "algo", cli_algo_name(algos[ia]));
            cli_json_str(&j, "shape", sh->name);
            cli_json_int(&j, "L", L);
            cli_json_int(&j, "S", S);
            cli_json_int(&j, "m", m);
            cli_json_int(&j, "k", k);
            cli_json_int(&j, "H", H);
            cli_json_int(&j, "D", D);
            cli_json_int(&j, "chunk", chunk);
            cli_json_str(&j, "dtype", "e4m3");
            cli_json_num(&j, "median_ms", ms);
            cli_json_int(&j, "aux_bytes", (int64_t)ws_bytes);
            cli_json_num(&j, "tflops", flops / (ms * 1e-3) / 1e12);
            cli_json_int(&j, "threads", threads);
            cli_json_str(&j, "device", device);
            cli_json_str(&j, "commit", cli_commit());
            if (ceiling > 0) cli_json_num(&j, "ceiling_tflops", ceiling);
            char when[32], date[16];
            cli_utc_now(when, sizeof when);
            snprintf(date, sizeof date, "%.10s", when);
            cli_json_str(&j, "timestamp", when);
            cli_json_str(&j, "harness", "litetopk prefill");
            cli_json_str(&j, "date", date);
            cli_json_end(&j);
            if (cli_json_append(json, &j)) goto done;
        }
        if (ia == 2) continue;
        st = devmem_download(on_device, host_idx[i], idx[i], out_n * sizeof(int32_t));
        if (!st) st = devmem_download(on_device, host_sc[i], sc[i], out_n * sizeof(float));
        if (st) {
            fprintf(stderr, "litetopk prefill: %s\n", tool_last_error());
            goto done;
        }
    }
    exit_code = CLI_EXIT_OK;
    if (run_fused && run_mat) {
        char what[256];
        int64_t bad = cli_compare_topk(L, (int32_t)k, 4, host_idx[0], host_sc[0], host_idx[1], host_sc[1], what,
                                       sizeof what);
        if (bad == 0) {
            printf("  exactness: fused == materialize on all %lld tokens (index sets and score bits)\n", (long long)L);
        } else {
            printf("  exactness: FAILED on %lld of %lld tokens; first: %s\n", (long long)bad, (long long)L, what);
            exit_code = CLI_EXIT_FAIL;
        }
    }
done:
    devmem_free(on_device, q), devmem_free(on_device, kv), devmem_free(on_device, scale), devmem_free(on_device, w);
    for (int i = 0; i < 2; i++) {
        devmem_free(on_device, idx[i]), devmem_free(on_device, sc[i]);
        free(host_idx[i]), free(host_sc[i]);
    }
    gen_dsa_free(&g);
    return exit_code;
}
