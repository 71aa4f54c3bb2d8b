/* `litetopk demo`: a long-context DSA indexer prefill, run with the fused path and the materialize
 * path side by side on the same inputs, checked bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "devmem.h"
#include "dsa-run.h"

static const char demo_usage[] = "demo [--backend auto|cpu|cuda|ref] [--quick] [options]";
static const char demo_about[] =
    "Runs a seeded long-context DeepSeek-style indexer workload (H=64, D=128, k=2048, e4m3 q and k with\n"
    "per-key scales, causal ranges, several chunks carrying the hot set through ltk_indexer_state) with the\n"
    "fused path and the materialize path, checks that both return bit-identical top-k rows, and prints\n"
    "time, effective TFLOP/s (2*H*D*visible keys / time), workspace and the fused path's statistics.\n"
    "GPU when one is present (S = 1M keys, 4 chunks of 2048 queries), else the CPU (S = 64K keys, 4 chunks\n"
    "of 64 queries).\n"
    "Exit status 1 if the two paths disagree.";

typedef struct demo_result {
    double ms;
    size_t ws_bytes;
    ltk_stats stats;
} demo_result;

static ltk_status run_path(const dsa_inputs *in, ltk_backend backend, ltk_algo algo, int32_t threads, int reps,
                           dsa_path *p, demo_result *res, dsa_chunk_report *chunks) {
    ltk_status st = dsa_path_init(in, backend, algo, threads, 1, p);
    if (st) return st;
    res->ws_bytes = p->exec.workspace_bytes;
    devmem_timer timer;
    st = devmem_timer_init(&timer, in->on_device);
    if (st) return st;
    /* First run: collects statistics and the outputs that are compared (and warms the GPU up). */
    double ms = 0.0;
    if (!st) st = devmem_timer_start(&timer);
    if (!st) st = dsa_path_run(in, p, &res->stats, chunks);
    if (!st) st = devmem_timer_stop(&timer, &ms);
    res->ms = ms;
    /* Timed runs without statistics (stats make the CUDA backend synchronise per call): best of reps. */
    for (int r = 0; r < reps && !st; r++) {
        st = devmem_timer_start(&timer);
        if (!st) st = dsa_path_run(in, p, NULL, NULL);
        if (!st) st = devmem_timer_stop(&timer, &ms);
        if (!st && (r == 0 || ms < res->ms)) res->ms = ms;
    }
    devmem_timer_free(&timer);
    return st;
}

int cmd_demo(int argc, char **argv) {
    const char *backend_s = "auto", *dtype_s = "e4m3";
    int quick = 0;
    int64_t ctx = -1, chunk = -1, chunks = -1, H = 64, D = 128, k = -1, seed = 20260601, threads = 0, reps = -1;
    cli_opt opts[] = {
        {"--backend", NULL, CLI_STR, &backend_s, "NAME", "auto (default), cpu, cuda or ref", 0, 0, 0},
        {"--quick", NULL, CLI_FLAG, &quick, NULL, "small shape that finishes in seconds (smoke test)", 0, 0, 0},
        {"--ctx", NULL, CLI_INT, &ctx, "N", "keys before the first query (default: GPU 1040384, CPU 65280)", 0, INT32_MAX, 0},
        {"--chunk", NULL, CLI_INT, &chunk, "N", "queries per call (default: GPU 2048, CPU 64)", 1, 1 << 20, 0},
        {"--chunks", NULL, CLI_INT, &chunks, "N", "calls, the hot set carried between them (default 4)", 1, 4096, 0},
        {"--H", NULL, CLI_INT, &H, "N", "indexer heads (default 64)", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "head dimension (default 128)", 1, LTK_INDEXER_MAX_D, 0},
        {"--k", "-k", CLI_INT, &k, "N", "top-k per query (default 2048)", 1, LTK_INDEXER_MAX_K, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "e4m3 (default), bf16 or f32", 0, 0, 0},
        {"--seed", NULL, CLI_INT, &seed, "N", "generator seed", 0, INT64_MAX, 0},
        {"--threads", NULL, CLI_INT, &threads, "N", "CPU threads (0 = all cores)", 0, 4096, 0},
        {"--reps", NULL, CLI_INT, &reps, "N", "timed repetitions after the checked run (default: GPU 3, CPU 0)", 0, 1000, 0},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse("demo", demo_usage, demo_about, argc, argv, 2, opts, nopts);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc) return rc;
    ltk_backend want, backend;
    ltk_dtype dtype;
    if (!cli_parse_backend(backend_s, &want)) return cli_usage_error("demo", "unknown backend '%s'", backend_s);
    if (!cli_parse_dtype(dtype_s, &dtype) || dtype == LTK_DTYPE_F16)
        return cli_usage_error("demo", "dtype '%s': expected e4m3, bf16 or f32", dtype_s);
    if (!cli_resolve_backend("demo", want, &backend)) return CLI_EXIT_FAIL;
    const int on_device = backend == LTK_BACKEND_CUDA;

    /* Shapes: a GPU gets the end of a 1M-key prefill, where fusing pays (bench/results/h200/dsa.jsonl:
     * fused 1.08x faster than materialize at S = 1M, on par at 256K, where the filter's fixed sample
     * and select stages cost about what they save); the CPU 64K keys; --quick (and the slow ref
     * oracle) a small one. Explicit options override. */
    int64_t d_ctx, d_chunk, d_chunks = 4, d_k = 2048;
    if (quick || backend == LTK_BACKEND_REF) {
        d_ctx = 1024 - 16, d_chunk = 8, d_chunks = 2, d_k = 128;
        if (!quick) fprintf(stderr, "note: the ref backend is a slow oracle; using the --quick shape\n");
    } else if (on_device) {
        d_ctx = 1048576 - 4 * 2048, d_chunk = 2048;
    } else {
        d_ctx = 65536 - 4 * 64, d_chunk = 64;
    }
    if (ctx < 0) ctx = d_ctx;
    if (chunk < 0) chunk = d_chunk;
    if (chunks < 0) chunks = d_chunks;
    if (k < 0) k = d_k;
    if (reps < 0) reps = on_device ? 3 : 0;
    if (ctx + chunk * chunks > INT32_MAX) return cli_usage_error("demo", "ctx + chunk*chunks exceeds 2^31-1 keys");

    char device[256], b1[32], b2[32];
    devmem_device_name(on_device, device, sizeof device);
    gen_dsa_spec spec = {ctx, chunk * chunks, (int32_t)H, (int32_t)D, dtype, (uint64_t)seed, 0.95};
    int64_t T = spec.T, S = ctx + T;
    printf("litetopk demo: DSA indexer prefill on %s (%s)\n", ltk_backend_name(backend), device);
    printf("  H=%lld D=%lld k=%lld dtype=%s; %lld cached keys + %lld chunks x %lld queries (S=%lld),\n"
           "  causal ke = ctx + t + 1, a hot set of up to %lld keys (3k) carried between chunks, adjacent queries\n"
           "  correlated (rho %.2f)\n",
           (long long)H, (long long)D, (long long)k, cli_dtype_name(dtype), (long long)ctx, (long long)chunks,
           (long long)chunk, (long long)S, (long long)dsa_hot_capacity((int32_t)k), spec.rho);
    fflush(stdout);

    double t_gen = devmem_now_s();
    dsa_inputs in;
    ltk_status st = dsa_inputs_make(&spec, chunk, (int32_t)k, 0, on_device, &in);
    if (st) {
        fprintf(stderr, "litetopk demo: %s\n", tool_last_error());
        return CLI_EXIT_FAIL;
    }
    printf("  inputs generated%s in %.2f s\n\n", on_device ? " and uploaded" : "", devmem_now_s() - t_gen);
    fflush(stdout);

    dsa_path fused, mat;
    demo_result rf, rm;
    memset(&fused, 0, sizeof fused), memset(&mat, 0, sizeof mat);
    memset(&rf, 0, sizeof rf), memset(&rm, 0, sizeof rm);
    dsa_chunk_report *chunk_rep = calloc((size_t)in.nchunks, sizeof *chunk_rep);
    size_t out_n = (size_t)T * (size_t)k;
    int32_t *idx_f = malloc(out_n * sizeof(int32_t)), *idx_m = malloc(out_n * sizeof(int32_t));
    float *sc_f = malloc(out_n * sizeof(float)), *sc_m = malloc(out_n * sizeof(float));
    int exit_code = CLI_EXIT_FAIL;
    if (!chunk_rep || !idx_f || !idx_m || !sc_f || !sc_m) {
        fprintf(stderr, "litetopk demo: out of memory\n");
        goto done;
    }
    st = run_path(&in, backend, LTK_ALGO_FUSED, (int32_t)threads, (int)reps, &fused, &rf, chunk_rep);
    if (!st) st = devmem_download(on_device, idx_f, fused.out_idx, out_n * sizeof(int32_t));
    if (!st) st = devmem_download(on_device, sc_f, fused.out_scores, out_n * sizeof(float));
    if (!st) st = run_path(&in, backend, LTK_ALGO_MATERIALIZE, (int32_t)threads, (int)reps, &mat, &rm, NULL);
    if (!st) st = devmem_download(on_device, idx_m, mat.out_idx, out_n * sizeof(int32_t));
    if (!st) st = devmem_download(on_device, sc_m, mat.out_scores, out_n * sizeof(float));
    if (st) {
        fprintf(stderr, "litetopk demo: %s\n", tool_last_error());
        goto done;
    }

    const double flops = 2.0 * (double)H * (double)D * in.host.visible;
    printf("  %-12s %12s %10s %14s\n", "path", "time (ms)", "TFLOP/s", "workspace");
    printf("  %-12s %12.3f %10.4g %14s\n", "fused", rf.ms, flops / (rf.ms * 1e-3) / 1e12,
           cli_bytes((double)rf.ws_bytes, b1, sizeof b1));
    printf("  %-12s %12.3f %10.4g %14s\n", "materialize", rm.ms, flops / (rm.ms * 1e-3) / 1e12,
           cli_bytes((double)rm.ws_bytes, b2, sizeof b2));
    char w1[160], w2[160];
    printf("  %s; %s\n", cli_speed_words(rf.ms, "fused", rm.ms, "materialize", w1, sizeof w1),
           cli_size_words((double)rf.ws_bytes, "fused", (double)rm.ws_bytes, "materialize", "workspace", w2, sizeof w2));
    printf("  (%s; %.3g TFLOP of scoring over %.4g visible (query, key) pairs)\n\n",
           reps > 0 ? "best of the timed repetitions" : "single run, statistics on", flops / 1e12, in.host.visible);

    const ltk_stats *s = &rf.stats;
    printf("  fused statistics: %lld rows (%lld short), candidates/row mean %.0f max %lld, threshold bin mean %.1f "
           "max %lld,\n  compactions %lld, fallback rows %lld\n",
           (long long)s->rows, (long long)s->short_rows, cli_stats_mean(s->candidates, s), (long long)s->candidates_max,
           cli_stats_mean(s->bin_entries, s), (long long)s->bin_entries_max, (long long)s->compactions,
           (long long)s->fallback_rows);
    for (int64_t c = 0; c < in.nchunks; c++) {
        const dsa_chunk_report *r = &chunk_rep[c];
        printf("    chunk %lld: %s candidates/row %.0f, bin %.1f, fallbacks %lld", (long long)c,
               r->hot_size > 0 ? "hot set  " : "cold start", cli_stats_mean(r->stats.candidates, &r->stats),
               cli_stats_mean(r->stats.bin_entries, &r->stats), (long long)r->stats.fallback_rows);
        if (r->hot_hit >= 0) printf(", %.1f%% of top-k in the %d-key hot set", 100.0 * r->hot_hit, r->hot_size);
        printf("\n");
    }

    char what[256];
    int64_t bad = cli_compare_topk(T, (int32_t)k, 4, idx_f, sc_f, idx_m, sc_m, what, sizeof what);
    if (bad == 0) {
        printf("\n  exactness: fused == materialize on all %lld rows (index sets and score bits)\n", (long long)T);
        exit_code = CLI_EXIT_OK;
    } else {
        printf("\n  exactness: FAILED on %lld of %lld rows; first: %s\n", (long long)bad, (long long)T, what);
    }
done:
    dsa_path_free(&in, &fused);
    dsa_path_free(&in, &mat);
    dsa_inputs_free(&in);
    free(chunk_rep), free(idx_f), free(idx_m), free(sc_f), free(sc_m);
    return exit_code;
}
