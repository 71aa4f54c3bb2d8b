/* `litetopk bench dsa|knn|select`: the fused path against the materialize(+select) path of the same
 * backend on the same inputs, in one process: one checked run with statistics (also the warm-up),
 * then the median of repeated timed runs; a table on stdout and JSON lines with --json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "commands.h"
#include "devmem.h"
#include "dsa-run.h"
#include "gen.h"
#include "io.h"

/* ---- one benchmarked operation ------------------------------------------------------------ */
typedef struct bench_op {
    const char *name;
    void *ctx;
    /* Per algo: allocates the workspace (and state) and reports its size. */
    ltk_status (*setup)(void *ctx, ltk_algo algo, size_t *aux_bytes);
    ltk_status (*run)(void *ctx, ltk_stats *stats);
    ltk_status (*fetch)(void *ctx, void *idx, float *scores); /* outputs to host */
    void (*teardown)(void *ctx);
    void (*json_shape)(void *ctx, cli_json *j);
    int64_t rows;
    int32_t k;
    int idx_size;
    double flops;      /* 0 if not meaningful */
    double bytes_read; /* for GB/s, 0 if not meaningful */
    double floor_bytes; /* one read of the input (kNN: the corpus), compared with the device copy rate */
    const char *dtype;
    char shape[160];
} bench_op;

typedef struct bench_env {
    ltk_backend backend;
    int on_device;
    int32_t threads;
    int64_t reps, warmup;
    const char *json;
    char device[256];
    uint32_t flags;
    ltk_algo algos[3];
    int nalgos;
} bench_env;

typedef struct bench_result {
    ltk_algo algo;
    double median_ms, min_ms, first_ms;
    size_t aux;
    ltk_stats stats;
    void *idx;
    float *scores;
    int exact; /* -1 not compared */
} bench_result;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static ltk_status bench_one(const bench_env *env, bench_op *op, ltk_algo algo, bench_result *r) {
    memset(r, 0, sizeof *r);
    r->algo = algo;
    r->exact = -1;
    devmem_timer timer;
    double *ms = calloc((size_t)(env->reps > 0 ? env->reps : 1), sizeof(double));
    if (!ms) return tool_fail(LTK_ENOMEM, "out of memory");
    ltk_status st = devmem_timer_init(&timer, env->on_device);
    if (st) {
        free(ms);
        return st;
    }
    st = op->setup(op->ctx, algo, &r->aux);
    /* Checked run: statistics and outputs; it also warms caches, clocks and the CUDA context up. */
    if (!st) st = devmem_timer_start(&timer);
    if (!st) st = op->run(op->ctx, &r->stats);
    if (!st) st = devmem_timer_stop(&timer, &r->first_ms);
    if (!st && algo != LTK_ALGO_SCORE_ONLY) {
        size_t n = (size_t)op->rows * (size_t)op->k;
        r->idx = malloc(n * (size_t)op->idx_size + 1);
        r->scores = malloc(n * sizeof(float) + 1);
        st = (!r->idx || !r->scores) ? tool_fail(LTK_ENOMEM, "out of memory for outputs")
                                     : op->fetch(op->ctx, r->idx, r->scores);
    }
    /* Progress on stderr when the runs are long enough to look like a hang (a CPU dsa bench takes
     * 13-14 s); stdout keeps only the table. */
    const int talk = !st && r->first_ms >= 500.0;
    if (talk)
        fprintf(stderr, "  [bench %s] %s: checked run %.1f s; %lld warm-up + %lld timed runs to go (~%.0f s)\n", op->name,
                cli_algo_name(algo), r->first_ms * 1e-3, (long long)env->warmup, (long long)env->reps,
                r->first_ms * 1e-3 * (double)(env->warmup + env->reps));
    for (int64_t w = 0; w < env->warmup && !st; w++) st = op->run(op->ctx, NULL);
    for (int64_t i = 0; i < env->reps && !st; i++) {
        st = devmem_timer_start(&timer);
        if (!st) st = op->run(op->ctx, NULL);
        if (!st) st = devmem_timer_stop(&timer, &ms[i]);
        if (!st && talk) fprintf(stderr, "  [bench %s] %s: run %lld/%lld %.1f s\n", op->name, cli_algo_name(algo),
                                 (long long)(i + 1), (long long)env->reps, ms[i] * 1e-3);
    }
    if (!st) {
        if (env->reps > 0) {
            qsort(ms, (size_t)env->reps, sizeof(double), cmp_double);
            r->min_ms = ms[0];
            r->median_ms = env->reps % 2 ? ms[env->reps / 2] : 0.5 * (ms[env->reps / 2 - 1] + ms[env->reps / 2]);
        } else {
            r->min_ms = r->median_ms = r->first_ms;
        }
    }
    op->teardown(op->ctx);
    devmem_timer_free(&timer);
    free(ms);
    return st;
}

/* CPU threads a call with num_threads = n uses (0 = all: the OpenMP default). */
static int64_t effective_threads(int32_t n) {
    if (n > 0) return n;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Runs every requested algo, compares fused with materialize, prints, writes JSON. */
static int bench_all(const bench_env *env, bench_op *op) {
    bench_result res[3];
    int n = 0, failed = 0;
    char b1[32];
    printf("litetopk bench %s on %s (%s), commit %s\n  %s dtype=%s%s, %lld timed reps\n", op->name,
           ltk_backend_name(env->backend), env->device, cli_commit(), op->shape, op->dtype,
           (env->flags & LTK_FLAG_UNSORTED) ? " unsorted" : "", (long long)env->reps);
    /* The floor of a scan on the device: one read of its input at the device-to-device copy rate
     * measured here, in the same process (bytes read + written per second, as bench/ scripts do). */
    double copy_gbps = 0.0, floor_ms = 0.0;
    if (env->on_device && op->floor_bytes > 0) {
        if (devmem_copy_gbps((size_t)1 << 30, &copy_gbps) == LTK_OK && copy_gbps > 0) {
            floor_ms = op->floor_bytes / (copy_gbps * 1e6);
            printf("  device copy %.0f GB/s: one read of the input (%.3g GB) takes %.4f ms; column 'x read' is\n"
                   "  each time over that floor (1.000x = as fast as reading the input once)\n",
                   copy_gbps, op->floor_bytes / 1e9, floor_ms);
        } else {
            printf("  (device copy bandwidth not measured: %s)\n", tool_last_error());
        }
    }
    printf("  %-12s %11s %11s %9s %12s %10s %9s %9s %9s%s\n", "algo", "median ms", "min ms",
           op->flops > 0 ? "TFLOP/s" : "GB/s", "workspace", "cand/row", "cand max", "bin/row", "fallback",
           floor_ms > 0 ? "  x read" : "");
    fflush(stdout);
    for (int i = 0; i < env->nalgos; i++) {
        ltk_status st = bench_one(env, op, env->algos[i], &res[n]);
        if (st) {
            fprintf(stderr, "litetopk bench %s (%s): %s\n", op->name, cli_algo_name(env->algos[i]), tool_last_error());
            free(res[n].idx), free(res[n].scores);
            failed = 1;
            continue;
        }
        bench_result *r = &res[n++];
        double rate = op->flops > 0 ? op->flops / (r->median_ms * 1e-3) / 1e12 : op->bytes_read / (r->median_ms * 1e-3) / 1e9;
        printf("  %-12s %11.3f %11.3f %9.4g %12s %10.1f %9lld %9.1f %9lld", cli_algo_name(r->algo), r->median_ms,
               r->min_ms, rate, cli_bytes((double)r->aux, b1, sizeof b1), cli_stats_mean(r->stats.candidates, &r->stats),
               (long long)r->stats.candidates_max, cli_stats_mean(r->stats.bin_entries, &r->stats),
               (long long)r->stats.fallback_rows);
        if (floor_ms > 0) printf(" %8.3fx", r->median_ms / floor_ms);
        printf("\n");
        fflush(stdout);
    }
    /* Exactness: fused and materialize rank the same scores, so their outputs must match bit for bit. */
    bench_result *fu = NULL, *ma = NULL;
    for (int i = 0; i < n; i++) {
        if (res[i].algo == LTK_ALGO_FUSED) fu = &res[i];
        if (res[i].algo == LTK_ALGO_MATERIALIZE) ma = &res[i];
    }
    if (fu && ma) {
        char what[256];
        int64_t bad = cli_compare_topk(op->rows, op->k, op->idx_size, fu->idx, fu->scores, ma->idx, ma->scores, what,
                                       sizeof what);
        fu->exact = ma->exact = bad == 0;
        if (bad) {
            printf("  exactness: fused != materialize on %lld of %lld rows; first: %s\n", (long long)bad,
                   (long long)op->rows, what);
            failed = 1;
        } else {
            char words[160];
            printf("  exactness: fused == materialize on all %lld rows; %s (median)\n", (long long)op->rows,
                   cli_speed_words(fu->median_ms, "fused", ma->median_ms, "materialize", words, sizeof words));
        }
    }
    if (env->json) {
        char when[32];
        cli_utc_now(when, sizeof when);
        for (int i = 0; i < n; i++) {
            bench_result *r = &res[i];
            cli_json j;
            cli_json_begin(&j);
            cli_json_str(&j, "op", op->name);
            cli_json_str(&j, "backend", ltk_backend_name(env->backend));
            cli_json_str(&j, "algo", cli_algo_name(r->algo));
            op->json_shape(op->ctx, &j);
            cli_json_str(&j, "dtype", op->dtype);
            cli_json_bool(&j, "sorted", !(env->flags & LTK_FLAG_UNSORTED));
            cli_json_num(&j, "median_ms", r->median_ms);
            cli_json_num(&j, "min_ms", r->min_ms);
            cli_json_int(&j, "reps", env->reps);
            cli_json_int(&j, "aux_bytes", (int64_t)r->aux);
            cli_json_str(&j, "device", env->device);
            cli_json_str(&j, "commit", cli_commit());
            cli_json_int(&j, "threads", env->on_device ? 0 : effective_threads(env->threads));
            cli_json_num(&j, "candidates_mean", cli_stats_mean(r->stats.candidates, &r->stats));
            cli_json_int(&j, "candidates_max", r->stats.candidates_max);
            cli_json_num(&j, "bin_entries_mean", cli_stats_mean(r->stats.bin_entries, &r->stats));
            cli_json_int(&j, "bin_entries_max", r->stats.bin_entries_max);
            cli_json_int(&j, "fallback_rows", r->stats.fallback_rows);
            cli_json_int(&j, "compactions", r->stats.compactions);
            cli_json_int(&j, "short_rows", r->stats.short_rows);
            if (op->flops > 0) cli_json_num(&j, "tflops", op->flops / (r->median_ms * 1e-3) / 1e12);
            if (op->bytes_read > 0) cli_json_num(&j, "GBps", op->bytes_read / (r->median_ms * 1e-3) / 1e9);
            if (floor_ms > 0) {
                cli_json_num(&j, "copy_GBps", copy_gbps);
                cli_json_num(&j, "floor_ms", floor_ms);
                cli_json_num(&j, "x_floor", r->median_ms / floor_ms);
            }
            if (r->exact >= 0) cli_json_bool(&j, "exact_vs_materialize", r->exact);
            cli_json_str(&j, "timestamp", when);
            /* the record's keys for bench/report.py: one harness's newest (date, commit) is one run */
            char harness[64], date[16];
            snprintf(harness, sizeof harness, "litetopk bench %s", op->name);
            snprintf(date, sizeof date, "%.10s", when);
            cli_json_str(&j, "harness", harness);
            cli_json_str(&j, "date", date);
            cli_json_end(&j);
            if (cli_json_append(env->json, &j)) failed = 1;
        }
    }
    for (int i = 0; i < n; i++) free(res[i].idx), free(res[i].scores);
    return failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- dsa ---------------------------------------------------------------------------------- */
typedef struct dsa_bench {
    dsa_inputs in;
    dsa_path path;
    const bench_env *env;
    int use_state;
    int64_t T, S, H, D, k, chunk;
} dsa_bench;

static ltk_status dsa_setup(void *c, ltk_algo algo, size_t *aux) {
    dsa_bench *b = c;
    ltk_status st = dsa_path_init(&b->in, b->env->backend, algo, b->env->threads, b->use_state, &b->path);
    *aux = b->path.exec.workspace_bytes;
    return st;
}
static ltk_status dsa_run_once(void *c, ltk_stats *stats) {
    dsa_bench *b = c;
    return dsa_path_run(&b->in, &b->path, stats, NULL);
}
static ltk_status dsa_fetch(void *c, void *idx, float *scores) {
    dsa_bench *b = c;
    size_t n = (size_t)b->in.host.T * (size_t)b->k;
    ltk_status st = devmem_download(b->in.on_device, idx, b->path.out_idx, n * sizeof(int32_t));
    if (!st) st = devmem_download(b->in.on_device, scores, b->path.out_scores, n * sizeof(float));
    return st;
}
static void dsa_teardown(void *c) {
    dsa_bench *b = c;
    dsa_path_free(&b->in, &b->path);
}
static void dsa_json(void *c, cli_json *j) {
    dsa_bench *b = c;
    cli_json_int(j, "T", b->T), cli_json_int(j, "S", b->S), cli_json_int(j, "H", b->H), cli_json_int(j, "D", b->D);
    cli_json_int(j, "k", b->k), cli_json_int(j, "chunk", b->chunk);
    cli_json_bool(j, "state", b->use_state);
}

/* ---- knn ---------------------------------------------------------------------------------- */
typedef struct knn_bench {
    const bench_env *env;
    ltk_knn_args args;
    ltk_exec exec;
    void *base, *queries;
    int64_t *out_idx;
    float *out_scores;
} knn_bench;

/* The exec of one algo with a preallocated workspace of the size the library asked for: the timed
 * calls allocate nothing, as in a serving loop. */
static void bench_exec_init(const bench_env *env, ltk_exec *e, ltk_algo algo) {
    memset(e, 0, sizeof *e);
    e->backend = env->backend, e->algo = algo, e->num_threads = env->threads;
}
static ltk_status bench_workspace(const bench_env *env, ltk_exec *e, ltk_status size_st, const char *what, size_t need,
                                  size_t *aux) {
    if (size_st) return tool_fail(size_st, "%s: %s", what, ltk_last_error());
    *aux = need;
    ltk_status st = LTK_OK;
    if (need) {
        st = devmem_alloc(env->on_device, need, &e->workspace);
        e->workspace_bytes = need;
    }
    return st;
}
static void bench_workspace_free(const bench_env *env, ltk_exec *e) {
    devmem_free(env->on_device, e->workspace);
    e->workspace = NULL;
}

static ltk_status knn_setup(void *c, ltk_algo algo, size_t *aux) {
    knn_bench *b = c;
    bench_exec_init(b->env, &b->exec, algo);
    size_t need = 0;
    ltk_status st = ltk_knn_workspace_size(&b->args, &b->exec, &need);
    return bench_workspace(b->env, &b->exec, st, "ltk_knn_workspace_size", need, aux);
}
static ltk_status knn_run_once(void *c, ltk_stats *stats) {
    knn_bench *b = c;
    ltk_exec e = b->exec;
    e.stats = stats;
    ltk_status st = ltk_knn_topk(&b->args, &e);
    return st ? tool_fail(st, "ltk_knn_topk: %s", ltk_last_error()) : LTK_OK;
}
static ltk_status knn_fetch(void *c, void *idx, float *scores) {
    knn_bench *b = c;
    size_t n = (size_t)b->args.B * (size_t)b->args.k;
    ltk_status st = devmem_download(b->env->on_device, idx, b->out_idx, n * sizeof(int64_t));
    if (!st) st = devmem_download(b->env->on_device, scores, b->out_scores, n * sizeof(float));
    return st;
}
static void knn_teardown(void *c) {
    knn_bench *b = c;
    bench_workspace_free(b->env, &b->exec);
}
static void knn_json(void *c, cli_json *j) {
    knn_bench *b = c;
    cli_json_int(j, "B", b->args.B), cli_json_int(j, "N", b->args.N), cli_json_int(j, "D", b->args.D);
    cli_json_int(j, "k", b->args.k), cli_json_str(j, "metric", cli_metric_name(b->args.metric));
}

/* ---- select ------------------------------------------------------------------------------- */
typedef struct select_bench {
    const bench_env *env;
    ltk_select_args args;
    ltk_exec exec;
    void *scores;
    int32_t *out_idx;
    float *out_scores;
    const char *dist;
} select_bench;

static ltk_status select_setup(void *c, ltk_algo algo, size_t *aux) {
    select_bench *b = c;
    bench_exec_init(b->env, &b->exec, algo);
    size_t need = 0;
    ltk_status st = ltk_select_workspace_size(&b->args, &b->exec, &need);
    return bench_workspace(b->env, &b->exec, st, "ltk_select_workspace_size", need, aux);
}
static ltk_status select_run_once(void *c, ltk_stats *stats) {
    select_bench *b = c;
    ltk_exec e = b->exec;
    e.stats = stats;
    ltk_status st = ltk_select_topk(&b->args, &e);
    return st ? tool_fail(st, "ltk_select_topk: %s", ltk_last_error()) : LTK_OK;
}
static ltk_status select_fetch(void *c, void *idx, float *scores) {
    select_bench *b = c;
    size_t n = (size_t)b->args.rows * (size_t)b->args.k;
    ltk_status st = devmem_download(b->env->on_device, idx, b->out_idx, n * sizeof(int32_t));
    if (!st) st = devmem_download(b->env->on_device, scores, b->out_scores, n * sizeof(float));
    return st;
}
static void select_teardown(void *c) {
    select_bench *b = c;
    bench_workspace_free(b->env, &b->exec);
}
static void select_json(void *c, cli_json *j) {
    select_bench *b = c;
    cli_json_int(j, "rows", b->args.rows), cli_json_int(j, "cols", b->args.cols), cli_json_int(j, "k", b->args.k);
    cli_json_str(j, "dist", b->dist);
}

/* ---- option handling ---------------------------------------------------------------------- */
static const char bench_usage[] =
    "bench dsa|knn|select [shape options] [--backend auto|cpu|cuda|ref] [--algos fused,materialize,score_only]\n"
    "                      [--reps N] [--json FILE]";
static const char bench_about[] =
    "Runs the fused path and the materialize(+select) path of one backend on the same generated inputs,\n"
    "checks that they agree bit for bit, then reports the median of --reps timed runs (CUDA: cudaEvents on\n"
    "device buffers; CPU: a monotonic clock) and appends one JSON object per line and algo to --json.\n"
    "  bench dsa     the DSA indexer: T queries at the end of an S-key causal context, in calls of --chunk\n"
    "                rows with the hot set carried between calls (--cold: none)\n"
    "  bench knn     brute-force kNN on clustered unit-norm embeddings (or --base/--queries files);\n"
    "                --dump PREFIX writes PREFIX.base.fbin and PREFIX.queries.fbin (--reps 0: only that);\n"
    "                on CUDA also the device copy rate and each time over one read of the corpus\n"
    "  bench select  top-k of a given score matrix (--dist dsa|normal|offset|ties)\n"
    "Run 'litetopk bench <op> --help' for the options of one operation.";

enum { OP_DSA, OP_KNN, OP_SELECT };

int cmd_bench(int argc, char **argv) {
    if (argc < 3 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
        cli_print_help(argc < 3 ? stderr : stdout, "bench", bench_usage, bench_about, NULL, 0);
        return argc < 3 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    int op_kind;
    if (!strcmp(argv[2], "dsa")) op_kind = OP_DSA;
    else if (!strcmp(argv[2], "knn")) op_kind = OP_KNN;
    else if (!strcmp(argv[2], "select")) op_kind = OP_SELECT;
    else return cli_usage_error("bench", "unknown operation '%s' (dsa, knn, select)", argv[2]);
    const char *cmd = op_kind == OP_DSA ? "bench dsa" : op_kind == OP_KNN ? "bench knn" : "bench select";

    const char *backend_s = "auto", *algos_s = "fused,materialize", *json = NULL, *dtype_s = NULL, *metric_s = "ip",
               *dist_s = "dsa", *dump = NULL, *base_path = NULL, *query_path = NULL;
    int64_t reps = -1, warmup = -1, threads = 0, seed = 12345, k = -1, T = -1, S = -1, H = 64, D = -1, chunk = -1,
            B = -1, N = -1, rows = -1, cols = -1, rho_pct = 95;
    int unsorted = 0, cold = 0;
    cli_opt common[] = {
        {"--backend", NULL, CLI_STR, &backend_s, "NAME", "auto (default), cpu, cuda or ref", 0, 0, 0},
        {"--algos", NULL, CLI_STR, &algos_s, "LIST", "comma list of fused, materialize, score_only", 0, 0, 0},
        {"--reps", NULL, CLI_INT, &reps, "N", "timed runs, median reported (default: GPU 20, CPU 5)", 0, 100000, 0},
        {"--warmup", NULL, CLI_INT, &warmup, "N", "extra untimed runs after the checked one (default: GPU 2, CPU 0)", 0, 1000, 0},
        {"--json", NULL, CLI_STR, &json, "FILE", "append one JSON object per line and algo", 0, 0, 0},
        {"--threads", NULL, CLI_INT, &threads, "N", "CPU threads (0 = all cores)", 0, 4096, 0},
        {"--seed", NULL, CLI_INT, &seed, "N", "generator seed", 0, INT64_MAX, 0},
        {"--unsorted", NULL, CLI_FLAG, &unsorted, NULL, "LTK_FLAG_UNSORTED (the vLLM convention)", 0, 0, 0},
        {"--k", "-k", CLI_INT, &k, "K", "top-k per row", 1, LTK_SELECT_MAX_K, 0},
    };
    cli_opt dsa_opts[] = {
        {"--T", NULL, CLI_INT, &T, "N", "query rows (default: GPU 4096, CPU 128)", 1, INT32_MAX, 0},
        {"--S", NULL, CLI_INT, &S, "N", "keys; the last query sees all of them (default: GPU 128K, CPU 32K)", 1, INT32_MAX, 0},
        {"--H", NULL, CLI_INT, &H, "N", "heads (default 64)", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "head dimension (default 128)", 1, LTK_INDEXER_MAX_D, 0},
        {"--chunk", NULL, CLI_INT, &chunk, "N", "query rows per call (default: GPU 2048, CPU 64)", 1, INT32_MAX, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "e4m3 (default), bf16 or f32", 0, 0, 0},
        {"--rho", NULL, CLI_INT, &rho_pct, "PCT", "adjacent-query correlation in percent (default 95)", 0, 100, 0},
        {"--cold", NULL, CLI_FLAG, &cold, NULL, "no hot-set state between chunks", 0, 0, 0},
    };
    cli_opt knn_opts[] = {
        {"--B", NULL, CLI_INT, &B, "N", "queries (default: GPU 1024, CPU 256)", 1, INT32_MAX, 0},
        {"--N", NULL, CLI_INT, &N, "N", "base vectors (default: GPU 1M, CPU 100000)", 1, INT32_MAX, 0},
        {"--D", NULL, CLI_INT, &D, "N", "dimension (default 128)", 1, LTK_KNN_MAX_D, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "f32 (default), f16 or bf16", 0, 0, 0},
        {"--metric", NULL, CLI_STR, &metric_s, "M", "ip (default), l2 or cos", 0, 0, 0},
        {"--dump", NULL, CLI_STR, &dump, "PREFIX", "write PREFIX.base.fbin and PREFIX.queries.fbin (float32)", 0, 0, 0},
        {"--base", NULL, CLI_STR, &base_path, "FILE", "load base vectors instead of generating", 0, 0, 0},
        {"--queries", NULL, CLI_STR, &query_path, "FILE", "load query vectors instead of generating", 0, 0, 0},
    };
    cli_opt select_opts[] = {
        {"--rows", NULL, CLI_INT, &rows, "N", "rows (default: GPU 2048, CPU 64)", 1, INT32_MAX, 0},
        {"--cols", NULL, CLI_INT, &cols, "N", "columns (default 128K)", 1, INT32_MAX, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "f32 (default), f16 or bf16", 0, 0, 0},
        {"--dist", NULL, CLI_STR, &dist_s, "NAME", "dsa (default), normal, offset (N(0,1)+100) or ties", 0, 0, 0},
    };
    cli_opt opts[32];
    int nopts = 0;
    cli_opt *extra = op_kind == OP_DSA ? dsa_opts : op_kind == OP_KNN ? knn_opts : select_opts;
    int nextra = op_kind == OP_DSA   ? (int)(sizeof dsa_opts / sizeof dsa_opts[0])
                 : op_kind == OP_KNN ? (int)(sizeof knn_opts / sizeof knn_opts[0])
                                     : (int)(sizeof select_opts / sizeof select_opts[0]);
    for (int i = 0; i < nextra; i++) opts[nopts++] = extra[i];
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) opts[nopts++] = common[i];
    int rc = cli_parse(cmd, bench_usage, bench_about, argc, argv, 3, opts, nopts);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc) return rc;

    bench_env env;
    memset(&env, 0, sizeof env);
    ltk_backend want;
    if (!cli_parse_backend(backend_s, &want)) return cli_usage_error(cmd, "unknown backend '%s'", backend_s);
    /* --algos */
    {
        char list[128];
        snprintf(list, sizeof list, "%s", algos_s);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
            ltk_algo a;
            if (!cli_parse_algo(tok, &a)) return cli_usage_error(cmd, "unknown algo '%s'", tok);
            for (int i = 0; i < env.nalgos; i++)
                if (env.algos[i] == a) return cli_usage_error(cmd, "algo '%s' listed twice", tok);
            env.algos[env.nalgos++] = a;
        }
        if (env.nalgos == 0) return cli_usage_error(cmd, "--algos is empty");
    }
    ltk_dtype dtype = op_kind == OP_DSA ? LTK_DTYPE_E4M3 : LTK_DTYPE_F32;
    if (dtype_s && !cli_parse_dtype(dtype_s, &dtype)) return cli_usage_error(cmd, "unknown dtype '%s'", dtype_s);
    if (op_kind == OP_DSA && dtype == LTK_DTYPE_F16) return cli_usage_error(cmd, "the indexer takes e4m3, bf16 or f32");
    if (op_kind != OP_DSA && dtype == LTK_DTYPE_E4M3) return cli_usage_error(cmd, "%s takes f32, f16 or bf16", cmd);
    ltk_metric metric;
    if (!cli_parse_metric(metric_s, &metric)) return cli_usage_error(cmd, "unknown metric '%s'", metric_s);
    gen_score_dist dist;
    if (!gen_score_dist_parse(dist_s, &dist)) return cli_usage_error(cmd, "unknown --dist '%s'", dist_s);
    if ((base_path != NULL) != (query_path != NULL)) return cli_usage_error(cmd, "--base and --queries go together");
    if (base_path && (opts[0].given || opts[1].given || opts[2].given)) /* --B --N --D of knn_opts */
        return cli_usage_error(cmd, "--B/--N/--D come from the files when --base/--queries are given");

    int dump_only = op_kind == OP_KNN && dump && opts[nextra + 2].given && reps == 0;
    if (!dump_only) {
        if (!cli_resolve_backend(cmd, want, &env.backend)) return CLI_EXIT_FAIL;
    } else {
        env.backend = LTK_BACKEND_CPU;
    }
    env.on_device = env.backend == LTK_BACKEND_CUDA;
    env.threads = (int32_t)threads;
    env.reps = reps >= 0 ? reps : (env.on_device ? 20 : 5);
    env.warmup = warmup >= 0 ? warmup : (env.on_device ? 2 : 0);
    env.json = json;
    env.flags = unsorted ? LTK_FLAG_UNSORTED : 0;
    devmem_device_name(env.on_device, env.device, sizeof env.device);
    const int gpu = env.on_device;

    bench_op op;
    memset(&op, 0, sizeof op);
    op.dtype = cli_dtype_name(dtype);
    int exit_code = CLI_EXIT_FAIL;
    ltk_status st = LTK_OK;

    if (op_kind == OP_DSA) {
        static dsa_bench b;
        memset(&b, 0, sizeof b);
        if (k < 0) k = 2048;
        if (T < 0) T = gpu ? 4096 : 128;
        if (S < 0) S = gpu ? 131072 : 32768;
        if (D < 0) D = 128;
        if (chunk < 0) chunk = gpu ? 2048 : 64;
        if (k > LTK_INDEXER_MAX_K)
            return cli_usage_error(cmd, "k=%lld: the indexer takes k <= %d", (long long)k, LTK_INDEXER_MAX_K);
        if (T > S) return cli_usage_error(cmd, "T=%lld exceeds S=%lld (the queries are the last T keys)", (long long)T,
                                          (long long)S);
        if (chunk > T) chunk = T;
        b.env = &env, b.use_state = !cold, b.T = T, b.S = S, b.H = H, b.D = D, b.k = k, b.chunk = chunk;
        gen_dsa_spec spec = {S - T, T, (int32_t)H, (int32_t)D, dtype, (uint64_t)seed, (double)rho_pct / 100.0};
        st = dsa_inputs_make(&spec, chunk, (int32_t)k, env.flags, env.on_device, &b.in);
        if (st) goto fail;
        op.name = "dsa", op.ctx = &b, op.setup = dsa_setup, op.run = dsa_run_once, op.fetch = dsa_fetch;
        op.teardown = dsa_teardown, op.json_shape = dsa_json;
        op.rows = T, op.k = (int32_t)k, op.idx_size = 4;
        op.flops = 2.0 * (double)H * (double)D * b.in.host.visible;
        snprintf(op.shape, sizeof op.shape, "T=%lld S=%lld H=%lld D=%lld k=%lld chunk=%lld%s", (long long)T,
                 (long long)S, (long long)H, (long long)D, (long long)k, (long long)chunk,
                 cold ? " cold" : " hot-set carry");
        exit_code = bench_all(&env, &op);
        dsa_inputs_free(&b.in);
        return exit_code;
    }

    if (op_kind == OP_KNN) {
        static knn_bench b;
        memset(&b, 0, sizeof b);
        float *base = NULL, *queries = NULL;
        io_matrix mb = {0}, mq = {0};
        if (k < 0) k = 100;
        if (k > LTK_KNN_MAX_K) return cli_usage_error(cmd, "k=%lld: kNN takes k <= %d", (long long)k, LTK_KNN_MAX_K);
        if (base_path) {
            io_matrix raw = {0};
            st = io_read(base_path, &raw);
            if (!st) st = io_convert(&raw, IO_ELEM_F32, &mb);
            io_matrix_free(&raw);
            if (!st) st = io_read(query_path, &raw);
            if (!st) st = io_convert(&raw, IO_ELEM_F32, &mq);
            io_matrix_free(&raw);
            if (st) goto fail;
            if (mb.cols != mq.cols || mb.rows == 0 || mq.rows == 0 || mb.cols == 0) {
                fprintf(stderr, "litetopk %s: base %lld x %lld and queries %lld x %lld do not match\n", cmd,
                        (long long)mb.rows, (long long)mb.cols, (long long)mq.rows, (long long)mq.cols);
                io_matrix_free(&mb), io_matrix_free(&mq);
                return CLI_EXIT_FAIL;
            }
            N = mb.rows, B = mq.rows, D = mb.cols;
            base = mb.data, queries = mq.data;
        } else {
            if (B < 0) B = gpu ? 1024 : 256;
            if (N < 0) N = gpu ? 1000000 : 100000;
            if (D < 0) D = 128;
            int64_t clusters = (int64_t)sqrt((double)N);
            st = gen_embeddings(N, (int32_t)D, clusters, (uint64_t)seed, 0, &base);
            if (!st) st = gen_embeddings(B, (int32_t)D, clusters, (uint64_t)seed, 1, &queries);
            if (st) {
                free(base), free(queries);
                goto fail;
            }
        }
        /* What the library sees, also what --dump writes, so other tools search the same values. */
        gen_round_to(base, N * D, dtype);
        gen_round_to(queries, B * D, dtype);
        if (dump) {
            char p1[4096], p2[4096];
            snprintf(p1, sizeof p1, "%s.base.fbin", dump);
            snprintf(p2, sizeof p2, "%s.queries.fbin", dump);
            io_matrix m1 = {N, D, IO_ELEM_F32, base}, m2 = {B, D, IO_ELEM_F32, queries};
            st = io_write(p1, &m1);
            if (!st) st = io_write(p2, &m2);
            if (st) {
                free(base), free(queries);
                goto fail;
            }
            printf("wrote %s (%lld x %lld) and %s (%lld x %lld)\n", p1, (long long)N, (long long)D, p2, (long long)B,
                   (long long)D);
        }
        if (dump_only) {
            free(base), free(queries);
            return CLI_EXIT_OK;
        }
        void *eb = NULL, *eq = NULL;
        st = gen_encode(base, N * D, dtype, &eb);
        if (!st) st = gen_encode(queries, B * D, dtype, &eq);
        free(base), free(queries);
        size_t es = ltk_dtype_size(dtype);
        if (!st) st = devmem_clone(env.on_device, eb, (size_t)(N * D) * es, &b.base);
        if (!st) st = devmem_clone(env.on_device, eq, (size_t)(B * D) * es, &b.queries);
        free(eb), free(eq);
        if (!st) st = devmem_alloc(env.on_device, (size_t)(B * k) * sizeof(int64_t), (void **)&b.out_idx);
        if (!st) st = devmem_alloc(env.on_device, (size_t)(B * k) * sizeof(float), (void **)&b.out_scores);
        if (!st) {
            b.env = &env;
            b.args.B = B, b.args.N = N, b.args.D = (int32_t)D, b.args.k = (int32_t)k, b.args.dtype = dtype;
            b.args.metric = metric, b.args.queries = b.queries, b.args.base = b.base;
            b.args.out_idx = b.out_idx, b.args.out_scores = b.out_scores, b.args.flags = env.flags;
            op.name = "knn", op.ctx = &b, op.setup = knn_setup, op.run = knn_run_once, op.fetch = knn_fetch;
            op.teardown = knn_teardown, op.json_shape = knn_json;
            op.rows = B, op.k = (int32_t)k, op.idx_size = 8;
            op.flops = 2.0 * (double)B * (double)N * (double)D;
            op.floor_bytes = (double)N * (double)D * (double)es;
            snprintf(op.shape, sizeof op.shape, "B=%lld N=%lld D=%lld k=%lld metric=%s%s", (long long)B, (long long)N,
                     (long long)D, (long long)k, cli_metric_name(metric), base_path ? " (files)" : "");
            exit_code = bench_all(&env, &op);
        }
        devmem_free(env.on_device, b.base), devmem_free(env.on_device, b.queries);
        devmem_free(env.on_device, b.out_idx), devmem_free(env.on_device, b.out_scores);
        if (st) goto fail;
        return exit_code;
    }

    /* select */
    {
        static select_bench b;
        memset(&b, 0, sizeof b);
        if (k < 0) k = 2048;
        if (rows < 0) rows = gpu ? 2048 : 64;
        if (cols < 0) cols = 131072;
        float *x = NULL;
        void *enc = NULL;
        st = gen_scores(rows, cols, dist, (uint64_t)seed, &x);
        if (!st) st = gen_encode(x, rows * cols, dtype, &enc);
        free(x);
        if (!st) st = devmem_clone(env.on_device, enc, (size_t)(rows * cols) * ltk_dtype_size(dtype), &b.scores);
        free(enc);
        if (!st) st = devmem_alloc(env.on_device, (size_t)(rows * k) * sizeof(int32_t), (void **)&b.out_idx);
        if (!st) st = devmem_alloc(env.on_device, (size_t)(rows * k) * sizeof(float), (void **)&b.out_scores);
        if (!st) {
            b.env = &env;
            b.dist = gen_score_dist_name(dist);
            b.args.rows = rows, b.args.cols = cols, b.args.k = (int32_t)k, b.args.dtype = dtype;
            b.args.scores = b.scores, b.args.out_idx = b.out_idx, b.args.out_scores = b.out_scores;
            b.args.flags = env.flags;
            op.name = "select", op.ctx = &b, op.setup = select_setup, op.run = select_run_once;
            op.fetch = select_fetch, op.teardown = select_teardown, op.json_shape = select_json;
            op.rows = rows, op.k = (int32_t)k, op.idx_size = 4;
            op.bytes_read = (double)rows * (double)cols * (double)ltk_dtype_size(dtype);
            snprintf(op.shape, sizeof op.shape, "rows=%lld cols=%lld k=%lld dist=%s", (long long)rows,
                     (long long)cols, (long long)k, b.dist);
            exit_code = bench_all(&env, &op);
        }
        devmem_free(env.on_device, b.scores);
        devmem_free(env.on_device, b.out_idx), devmem_free(env.on_device, b.out_scores);
        if (st) goto fail;
        return exit_code;
    }
fail:
    fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
    return CLI_EXIT_FAIL;
}
