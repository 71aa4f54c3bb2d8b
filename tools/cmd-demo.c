/* `litetopk demo`: a long-context DSA indexer prefill, then a few decode steps of a batch of requests
 * over a paged FP8 cache, each run with the fused path and the materialize path side by side on the
 * same inputs, checked bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "devmem.h"
#include "dsa-run.h"
#include "gen.h"

static const char demo_usage[] = "demo [--backend auto|cpu|cuda|ref] [--quick] [options]";
static const char demo_about[] =
    "Runs a seeded long-context DeepSeek-style indexer workload (H=64, D=128, k=2048, e4m3 q and k with\n"
    "per-key scales, causal ranges, several chunks carrying the hot set through ltk_indexer_state) with the\n"
    "fused path and the materialize path, checks that both return bit-identical top-k rows, and prints\n"
    "time, effective TFLOP/s (2*H*D*visible keys / time), workspace and the fused path's statistics.\n"
    "GPU when one is present (S = 1M keys, 4 chunks of 2048 queries), else the CPU (S = 64K keys, 4 chunks\n"
    "of 64 queries).\n"
    "Then a few decode steps (ltk_decode_topk): a batch of requests over a paged FP8 cache (blocks of 64\n"
    "positions scattered by a shuffled table, mixed lengths that grow by one position a step), fused and\n"
    "materialize again, checked bit for bit (GPU: 64 requests of up to 64K positions; CPU: 8 of up to 16K).\n"
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

/* The decode phase: `steps` decode steps of B requests of up to ctx positions (H = 64, D = 128,
 * block_kv 64, next_n 1, random e4m3 codes and per-position scales), fused and materialize on the
 * same inputs each step. Returns the number of rows where the two disagree, or -1 on an error. */
static int64_t demo_decode(ltk_backend backend, int on_device, int64_t B, int64_t ctx, int steps, int32_t k,
                           uint64_t seed, int32_t threads) {
    const int32_t H = 64, D = 128, bkv = 64;
    const int32_t max_blocks = (int32_t)((ctx + steps + bkv - 1) / bkv);
    const int64_t nblocks = B * max_blocks, bstride = (int64_t)bkv * (D + 4);
    gen_rng r;
    gen_rng_seed(&r, seed ^ 0xdecdec);
    uint8_t *cache = malloc((size_t)(nblocks * bstride)), *q = malloc((size_t)(B * H * D));
    int32_t *table = malloc(sizeof(int32_t) * (size_t)nblocks), *lens = malloc(sizeof(int32_t) * (size_t)B);
    float *w = malloc(sizeof(float) * (size_t)(B * H));
    int32_t *out[2] = {NULL, NULL}, *host[2] = {NULL, NULL};
    float *osc[2] = {NULL, NULL}, *hsc[2] = {NULL, NULL};
    void *d_cache = NULL, *d_table = NULL, *d_lens = NULL, *d_q = NULL, *d_w = NULL, *ws = NULL;
    int64_t bad = -1;
    const size_t n = (size_t)B * (size_t)k;
    if (!cache || !q || !table || !lens || !w) goto done;
    for (int64_t blk = 0; blk < nblocks; blk++) {
        uint8_t *base = cache + blk * bstride;
        for (int64_t x = 0; x < (int64_t)bkv * D; x++) {
            uint8_t v = (uint8_t)gen_u64(&r);
            base[x] = (v & 0x7f) == 0x7f ? (uint8_t)(v ^ 1) : v; /* no NaN codes */
        }
        float *sc = (float *)(base + (size_t)bkv * D);
        for (int j = 0; j < bkv; j++) sc[j] = (float)(0.001 + 0.01 * gen_uniform(&r));
    }
    for (int64_t i = 0; i < nblocks; i++) table[i] = (int32_t)i;
    for (int64_t i = nblocks - 1; i > 0; i--) { /* pages scattered over the cache */
        int64_t j = (int64_t)(gen_u64(&r) % (uint64_t)(i + 1));
        int32_t t = table[i];
        table[i] = table[j], table[j] = t;
    }
    for (int64_t b = 0; b < B; b++) lens[b] = (int32_t)(ctx / 2 + (int64_t)(gen_uniform(&r) * (double)(ctx / 2)));
    ltk_status st = devmem_clone(on_device, cache, (size_t)(nblocks * bstride), &d_cache);
    if (!st) st = devmem_clone(on_device, table, sizeof(int32_t) * (size_t)nblocks, &d_table);
    if (!st) st = devmem_alloc(on_device, sizeof(int32_t) * (size_t)B, &d_lens);
    if (!st) st = devmem_alloc(on_device, (size_t)(B * H * D), &d_q);
    if (!st) st = devmem_alloc(on_device, sizeof(float) * (size_t)(B * H), &d_w);
    for (int a = 0; a < 2 && !st; a++) {
        st = devmem_alloc(on_device, n * 4, (void **)&out[a]);
        if (!st) st = devmem_alloc(on_device, n * 4, (void **)&osc[a]);
        host[a] = malloc(n * 4), hsc[a] = malloc(n * 4);
        if (!st && (!host[a] || !hsc[a])) st = LTK_ENOMEM;
    }
    ltk_decode_args da = {.B = B, .next_n = 1, .H = H, .D = D, .k = k, .dtype = LTK_DTYPE_E4M3, .q = d_q,
                          .kv_cache = d_cache, .num_blocks = nblocks, .block_kv = bkv, .block_table = d_table,
                          .max_blocks = max_blocks, .seq_lens = d_lens, .weights = d_w, .out_idx = out[0],
                          .out_scores = osc[0]};
    ltk_exec e = {.backend = backend, .algo = LTK_ALGO_FUSED, .num_threads = threads};
    size_t wsb[2] = {0, 0};
    for (int a = 0; a < 2 && !st; a++) {
        e.algo = a ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED;
        st = ltk_decode_workspace_size(&da, &e, &wsb[a]);
    }
    if (!st) st = devmem_alloc(on_device, wsb[0] > wsb[1] ? wsb[0] : wsb[1], &ws);
    devmem_timer timer;
    if (!st) st = devmem_timer_init(&timer, on_device);
    if (st) {
        fprintf(stderr, "litetopk demo (decode): %s\n", st == LTK_ENOMEM ? "out of memory" : ltk_last_error());
        goto done;
    }
    char b1[32], b2[32];
    printf("\n  decode: %lld requests, %d steps, next_n 1, cache %s in %lld blocks of %d positions\n", (long long)B, steps,
           cli_bytes((double)(nblocks * bstride), b1, sizeof b1), (long long)nblocks, bkv);
    printf("  %-6s %12s %14s %14s %12s\n", "step", "positions", "fused (ms)", "materialize", "exact");
    bad = 0;
    double tot[2] = {0, 0};
    for (int s = 0; s < steps && !st; s++) {
        double visible = 0;
        for (int64_t b = 0; b < B; b++) visible += ++lens[b]; /* each request gains the token it decoded */
        for (int64_t x = 0; x < B * H * D; x++) {
            uint8_t v = (uint8_t)gen_u64(&r);
            q[x] = (v & 0x7f) == 0x7f ? (uint8_t)(v ^ 1) : v;
        }
        for (int64_t x = 0; x < B * H; x++) w[x] = (float)(0.1 * gen_normal(&r));
        st = devmem_upload(on_device, d_lens, lens, sizeof(int32_t) * (size_t)B);
        if (!st) st = devmem_upload(on_device, d_q, q, (size_t)(B * H * D));
        if (!st) st = devmem_upload(on_device, d_w, w, sizeof(float) * (size_t)(B * H));
        double ms[2] = {0, 0};
        for (int a = 0; a < 2 && !st; a++) {
            e.algo = a ? LTK_ALGO_MATERIALIZE : LTK_ALGO_FUSED;
            e.workspace = ws, e.workspace_bytes = wsb[a];
            da.out_idx = out[a], da.out_scores = osc[a];
            for (int rep = 0; rep < 2 && !st; rep++) { /* (the second call is timed: the first warms up) */
                st = devmem_timer_start(&timer);
                if (!st) st = ltk_decode_topk(&da, &e);
                if (!st) st = devmem_timer_stop(&timer, &ms[a]);
            }
            if (!st) st = devmem_download(on_device, host[a], out[a], n * 4);
            if (!st) st = devmem_download(on_device, hsc[a], osc[a], n * 4);
            tot[a] += ms[a];
        }
        if (st) break;
        char what[256];
        const int64_t nb = cli_compare_topk(B, k, 4, host[0], hsc[0], host[1], hsc[1], what, sizeof what);
        bad += nb;
        printf("  %-6d %12.0f %14.3f %14.3f %12s\n", s, visible, ms[0], ms[1], nb ? what : "bit for bit");
    }
    devmem_timer_free(&timer);
    if (st) {
        fprintf(stderr, "litetopk demo (decode): %s\n", ltk_last_error());
        bad = -1;
    } else {
        printf("  workspace: fused %s, materialize %s\n", cli_bytes((double)wsb[0], b1, sizeof b1),
               cli_bytes((double)wsb[1], b2, sizeof b2));
    }
done:
    free(cache), free(q), free(table), free(lens), free(w);
    for (int a = 0; a < 2; a++) {
        devmem_free(on_device, out[a]), devmem_free(on_device, osc[a]);
        free(host[a]), free(hsc[a]);
    }
    devmem_free(on_device, d_cache), devmem_free(on_device, d_table), devmem_free(on_device, d_lens);
    devmem_free(on_device, d_q), devmem_free(on_device, d_w), devmem_free(on_device, ws);
    return bad;
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
    gen_dsa_spec spec = {ctx, chunk * chunks, (int32_t)H, (int32_t)D, dtype, (uint64_t)seed, 0.95, NULL, 0};
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
        const int small = quick || backend == LTK_BACKEND_REF;
        const int64_t dB = small ? 2 : on_device ? 64 : 8, dctx = small ? 1024 : on_device ? 65536 : 16384;
        const int64_t dbad = demo_decode(backend, on_device, dB, dctx, small ? 2 : 4, (int32_t)(small ? 128 : k),
                                         (uint64_t)seed, (int32_t)threads);
        if (dbad == 0) {
            printf("  exactness: decode fused == materialize on every step (index sets and score bits)\n");
        } else {
            if (dbad > 0) printf("  exactness: decode FAILED on %lld rows\n", (long long)dbad);
            exit_code = CLI_EXIT_FAIL;
        }
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
