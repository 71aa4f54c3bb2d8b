/* The shared runner of `litetopk bench` (bench.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"
#include "devmem.h"

typedef struct bench_result {
    ltk_algo algo;
    double median_ms, min_ms, first_ms;
    double host_us, host_alloc_us, b2b_ms; /* device only (0: not measured) */
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

#define HOST_CALLS 15 /* calls a host-time measure enqueues behind one hold (< the launch queue) */

/* Host time of one call (median of HOST_CALLS, microseconds): the calls are enqueued while the
 * stream is held (devmem_hold), so none waits for the GPU, and what is timed is the library's own
 * host cost: planning, argument building, launches, and any allocation or synchronisation (a call
 * that waits for the device shows the hold). alloc: without a workspace (the convenience path). */
static ltk_status host_us_of(bench_op *op, int alloc, double *us) {
    double t[HOST_CALLS];
    ltk_status st = devmem_hold(30.0);
    for (int i = 0; i < HOST_CALLS && !st; i++) {
        const double t0 = devmem_now_s();
        st = alloc ? op->run_alloc(op->ctx) : op->run(op->ctx, NULL);
        t[i] = (devmem_now_s() - t0) * 1e6;
    }
    ltk_status s2 = devmem_sync(1);
    if (st) return st;
    if (s2) return s2;
    qsort(t, HOST_CALLS, sizeof(double), cmp_double);
    *us = t[HOST_CALLS / 2];
    return LTK_OK;
}

/* GPU time a call when calls follow each other (ms): events around HOST_CALLS calls. Against the
 * timed runs (one call between two events, then a wait) it shows what a call started from an idle
 * GPU adds: the launch latency and the host time the GPU waits for. */
static ltk_status b2b_ms_of(bench_op *op, devmem_timer *timer, double *ms) {
    double total = 0;
    ltk_status st = devmem_timer_start(timer);
    for (int i = 0; i < HOST_CALLS && !st; i++) st = op->run(op->ctx, NULL);
    if (!st) st = devmem_timer_stop(timer, &total);
    *ms = total / HOST_CALLS;
    return st;
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
    /* then, for calls under 5 ms, batches of 10 until warmup_ms of device time (at most 1,000 runs) */
    for (double spent = 0, b = 0; env->warmup_ms > 0 && r->first_ms < 5.0 && spent < env->warmup_ms && b < 100 && !st; b++) {
        double t = 0;
        st = devmem_timer_start(&timer);
        for (int w = 0; w < 10 && !st; w++) st = op->run(op->ctx, NULL);
        if (!st) st = devmem_timer_stop(&timer, &t);
        spent += t;
    }
    for (int64_t i = 0; i < env->reps && !st; i++) {
        st = devmem_timer_start(&timer);
        if (!st) st = op->run(op->ctx, NULL);
        if (!st) st = devmem_timer_stop(&timer, &ms[i]);
        if (!st && talk) fprintf(stderr, "  [bench %s] %s: run %lld/%lld %.1f s\n", op->name, cli_algo_name(algo),
                                 (long long)(i + 1), (long long)env->reps, ms[i] * 1e-3);
    }
    /* the host's share, on the device (a call of >= 50 ms is all GPU time: not measured there) */
    if (!st && env->on_device && r->first_ms < 50.0) {
        st = host_us_of(op, 0, &r->host_us);
        if (!st && op->run_alloc) st = host_us_of(op, 1, &r->host_alloc_us);
        if (!st) st = b2b_ms_of(op, &timer, &r->b2b_ms);
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
int bench_all(const bench_env *env, bench_op *op) {
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
    /* The ceiling of an FP8 scan: the sustained FP8 GEMM rate, measured here, in the same process,
     * so that a record's TFLOP/s is read against the board and clock it ran on. */
    double ceiling = 0.0;
    if (env->on_device && op->fp8_ceiling && op->flops > 0) {
        if (devmem_fp8_gemm_tflops(1.0, &ceiling) == LTK_OK && ceiling > 0)
            printf("  sustained FP8 GEMM (cuBLASLt e4m3 8192^3, 1 s after warm-up): %.0f TFLOP/s; column '%%ceil' is\n"
                   "  each TFLOP/s over it\n", ceiling);
        else
            printf("  (FP8 GEMM ceiling not measured: %s)\n", tool_last_error());
    }
    /* An op with both a read and FP8 scoring (decode) has two floors, the read at the copy rate and
     * the FLOPs at the ceiling; the larger binds (next_n = 4 at H = 64 is compute-bound), and 'x
     * floor' is over it. */
    const double read_floor_ms = floor_ms;
    const double flop_floor_ms = floor_ms > 0 && ceiling > 0 ? op->flops / (ceiling * 1e9) : 0.0;
    if (flop_floor_ms > 0) {
        printf("  the scoring FLOPs at that rate take %.4f ms: the floor is the larger, %.4f ms (%s-bound)\n",
               flop_floor_ms, flop_floor_ms > floor_ms ? flop_floor_ms : floor_ms,
               flop_floor_ms > floor_ms ? "compute" : "bandwidth");
        if (flop_floor_ms > floor_ms) floor_ms = flop_floor_ms;
    }
    printf("  %-12s %11s %11s %9s %12s %10s %9s %9s %9s%s%s\n", "algo", "median ms", "min ms",
           op->flops > 0 ? "TFLOP/s" : "GB/s", "workspace", "cand/row", "cand max", "bin/row", "fallback",
           floor_ms > 0 ? (flop_floor_ms > 0 ? " x floor" : "  x read") : "", ceiling > 0 ? "  %ceil" : "");
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
        if (ceiling > 0) printf(" %6.1f%%", 100.0 * rate / ceiling);
        if (r->host_us > 0)
            printf("  host %.1f us (%.1f without a workspace), %.4f ms back to back", r->host_us, r->host_alloc_us,
                   r->b2b_ms);
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
                cli_json_num(&j, "read_floor_ms", read_floor_ms);
                if (flop_floor_ms > 0) cli_json_num(&j, "flop_floor_ms", flop_floor_ms);
                cli_json_num(&j, "x_floor", r->median_ms / floor_ms);
            }
            if (ceiling > 0) cli_json_num(&j, "ceiling_tflops", ceiling);
            if (r->host_us > 0) cli_json_num(&j, "host_us", r->host_us);
            if (r->host_alloc_us > 0) cli_json_num(&j, "host_alloc_us", r->host_alloc_us);
            if (r->b2b_ms > 0) cli_json_num(&j, "b2b_ms", r->b2b_ms);
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

/* ---- one library call ---------------------------------------------------------------------- */
/* The exec of one algo with a preallocated workspace of the size the library asked for: the timed
 * calls allocate nothing, as in a serving loop. */
ltk_status bench_call_setup(void *ctx, ltk_algo algo, size_t *aux) {
    bench_call *b = ctx;
    memset(&b->exec, 0, sizeof b->exec);
    b->exec.backend = b->env->backend, b->exec.algo = algo, b->exec.num_threads = b->env->threads;
    size_t need = 0;
    ltk_status st = b->size(b->args, &b->exec, &need);
    if (st) return tool_fail(st, "%s workspace size: %s", b->what, ltk_last_error());
    *aux = need;
    if (need) {
        st = devmem_alloc(b->env->on_device, need, &b->exec.workspace);
        b->exec.workspace_bytes = need;
    }
    return st;
}

ltk_status bench_call_run(void *ctx, ltk_stats *stats) {
    bench_call *b = ctx;
    ltk_exec e = b->exec;
    e.stats = stats;
    ltk_status st = b->call(b->args, &e);
    return st ? tool_fail(st, "%s: %s", b->what, ltk_last_error()) : LTK_OK;
}

ltk_status bench_call_run_alloc(void *ctx) {
    bench_call *b = ctx;
    ltk_exec e = b->exec;
    e.workspace = NULL, e.workspace_bytes = 0;
    ltk_status st = b->call(b->args, &e);
    return st ? tool_fail(st, "%s (no workspace): %s", b->what, ltk_last_error()) : LTK_OK;
}

ltk_status bench_call_fetch(void *ctx, void *idx, float *scores) {
    bench_call *b = ctx;
    ltk_status st = devmem_download(b->env->on_device, idx, b->out_idx, b->n_out * (size_t)b->idx_size);
    if (!st) st = devmem_download(b->env->on_device, scores, b->out_scores, b->n_out * sizeof(float));
    return st;
}

void bench_call_teardown(void *ctx) {
    bench_call *b = ctx;
    devmem_free(b->env->on_device, b->exec.workspace);
    b->exec.workspace = NULL;
}

/* ---- the options every operation takes ---------------------------------------------------- */
int bench_parse(const char *cmd, const char *usage, const char *about, int argc, char **argv, cli_opt *op_opts,
                int n_op, bench_common *c) {
    memset(c, 0, sizeof *c);
    c->backend_s = "auto", c->algos_s = "fused,materialize";
    c->reps = -1, c->warmup = -1, c->seed = 12345, c->k = -1;
    cli_opt common[] = {
        {"--backend", NULL, CLI_STR, &c->backend_s, "NAME", "auto (default), cpu, cuda or ref", 0, 0, 0},
        {"--algos", NULL, CLI_STR, &c->algos_s, "LIST", "comma list of fused, materialize, score_only", 0, 0, 0},
        {"--reps", NULL, CLI_INT, &c->reps, "N", "timed runs, median reported (default: GPU 20, CPU 5)", 0, 100000, 0},
        {"--warmup", NULL, CLI_INT, &c->warmup, "N", "extra untimed runs after the checked one (default: GPU 2, then more until 50 ms; CPU 0)", 0, 1000, 0},
        {"--json", NULL, CLI_STR, &c->json, "FILE", "append one JSON object per line and algo", 0, 0, 0},
        {"--threads", NULL, CLI_INT, &c->threads, "N", "CPU threads (0 = all cores)", 0, 4096, 0},
        {"--seed", NULL, CLI_INT, &c->seed, "N", "generator seed", 0, INT64_MAX, 0},
        {"--unsorted", NULL, CLI_FLAG, &c->unsorted, NULL, "LTK_FLAG_UNSORTED (the vLLM convention)", 0, 0, 0},
        {"--k", "-k", CLI_INT, &c->k, "K", "top-k per row", 1, LTK_SELECT_MAX_K, 0},
    };
    cli_opt opts[32];
    int nopts = 0;
    for (int i = 0; i < n_op && nopts < 32; i++) opts[nopts++] = op_opts[i];
    for (size_t i = 0; i < sizeof common / sizeof common[0] && nopts < 32; i++) opts[nopts++] = common[i];
    int rc = cli_parse(cmd, usage, about, argc, argv, 3, opts, nopts);
    for (int i = 0; i < n_op; i++) op_opts[i].given = opts[i].given;
    return rc;
}

int bench_env_init(const char *cmd, const bench_common *c, int no_backend, bench_env *env) {
    memset(env, 0, sizeof *env);
    ltk_backend want;
    if (!cli_parse_backend(c->backend_s, &want)) return cli_usage_error(cmd, "unknown backend '%s'", c->backend_s);
    char list[128];
    snprintf(list, sizeof list, "%s", c->algos_s);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        ltk_algo a;
        if (!cli_parse_algo(tok, &a)) return cli_usage_error(cmd, "unknown algo '%s'", tok);
        for (int i = 0; i < env->nalgos; i++)
            if (env->algos[i] == a) return cli_usage_error(cmd, "algo '%s' listed twice", tok);
        env->algos[env->nalgos++] = a;
    }
    if (env->nalgos == 0) return cli_usage_error(cmd, "--algos is empty");
    if (!no_backend) {
        if (!cli_resolve_backend(cmd, want, &env->backend)) return CLI_EXIT_FAIL;
    } else {
        env->backend = LTK_BACKEND_CPU;
    }
    env->on_device = env->backend == LTK_BACKEND_CUDA;
    env->threads = (int32_t)c->threads;
    env->reps = c->reps >= 0 ? c->reps : (env->on_device ? 20 : 5);
    env->warmup = c->warmup >= 0 ? c->warmup : (env->on_device ? 2 : 0);
    /* Why a time as well: with 2 warm-up runs the algorithm timed first in a process ran at lower
     * clocks than the second (H200 decode, fused first: medians 3-15% above materialize's, the same
     * kernels, while the back-to-back figures agreed within 2%; bench/results/h200/decode.jsonl). */
    env->warmup_ms = c->warmup >= 0 ? 0 : (env->on_device ? 50 : 0);
    env->json = c->json;
    env->flags = c->unsorted ? LTK_FLAG_UNSORTED : 0;
    devmem_device_name(env->on_device, env->device, sizeof env->device);
    return CLI_EXIT_OK;
}
