/* The shared runner of `litetopk bench dsa|knn|select` (bench-dsa.c, bench-knn.c, bench-select.c):
 * one operation as a small table of callbacks, the options every operation takes, and bench_all,
 * which runs each requested algo on the same inputs in one process (one checked run with statistics,
 * also the warm-up, then the median of the timed runs), compares fused with materialize bit for bit,
 * prints the table and appends the JSON records. */
#ifndef LTK_TOOLS_BENCH_H
#define LTK_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "litetopk.h"

/* ---- one benchmarked operation ------------------------------------------------------------ */
typedef struct bench_op {
    const char *name;
    void *ctx;
    /* Per algo: allocates the workspace (and state) and reports its size. */
    ltk_status (*setup)(void *ctx, ltk_algo algo, size_t *aux_bytes);
    ltk_status (*run)(void *ctx, ltk_stats *stats);
    ltk_status (*run_alloc)(void *ctx); /* optional: the same call without a workspace */
    ltk_status (*fetch)(void *ctx, void *idx, float *scores); /* outputs to host */
    void (*teardown)(void *ctx);
    void (*json_shape)(void *ctx, cli_json *j);
    int64_t rows;
    int32_t k;
    int idx_size;
    double flops;       /* 0 if not meaningful */
    double bytes_read;  /* for GB/s, 0 if not meaningful */
    double floor_bytes; /* one read of the input (kNN: the corpus), compared with the device copy rate */
    int fp8_ceiling;    /* FP8 scores: measure the sustained FP8 GEMM rate beside them (ceiling_tflops) */
    const char *dtype;
    char shape[160];
} bench_op;

typedef struct bench_env {
    ltk_backend backend;
    int on_device;
    int32_t threads;
    int64_t reps, warmup;
    int warmup_ms; /* on the device: warm-up runs also until this much GPU time (0 = the count only) */
    const char *json;
    char device[256];
    uint32_t flags;
    ltk_algo algos[3];
    int nalgos;
} bench_env;

/* The options every operation takes (parsed by bench_parse with the operation's own). */
typedef struct bench_common {
    const char *backend_s, *algos_s, *json;
    int64_t reps, warmup, threads, seed, k;
    int unsorted;
} bench_common;

/* Parses argv[3..] with the operation's options followed by the common ones; CLI_EXIT_OK, or an exit
 * code to return (-1: --help was printed). */
int bench_parse(const char *cmd, const char *usage, const char *about, int argc, char **argv, cli_opt *op_opts,
                int n_op, bench_common *c);
/* The environment from the common options: algos, backend (resolved unless no_backend: a dump-only
 * run), reps and warm-up defaults by device. CLI_EXIT_OK or an exit code. */
int bench_env_init(const char *cmd, const bench_common *c, int no_backend, bench_env *env);
/* In an operation's main(argc, argv): parse its options array and the common ones into *c, and
 * return from main on --help (0) or bad usage. */
#define BENCH_PARSE(cmd, usage, about, opts, c)                                                               \
    do {                                                                                                      \
        int rc_ = bench_parse(cmd, usage, about, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), c);   \
        if (rc_) return rc_ < 0 ? CLI_EXIT_OK : rc_;                                                          \
    } while (0)

int bench_all(const bench_env *env, bench_op *op);

/* An operation that is one library call on device-resident buffers (kNN, select): its callbacks
 * for bench_op (ctx = the bench_call) allocate the workspace the size query asks for, run the call,
 * and download the outputs. */
typedef struct bench_call {
    const bench_env *env;
    const char *what; /* "ltk_knn_topk", for messages */
    const void *args;
    ltk_status (*size)(const void *args, const ltk_exec *e, size_t *bytes);
    ltk_status (*call)(const void *args, const ltk_exec *e);
    void *out_idx;    /* device or host, as env->on_device */
    float *out_scores;
    size_t n_out;     /* rows * k */
    int idx_size;     /* 4 or 8 */
    ltk_exec exec;
} bench_call;
ltk_status bench_call_setup(void *ctx, ltk_algo algo, size_t *aux_bytes);
ltk_status bench_call_run(void *ctx, ltk_stats *stats);
ltk_status bench_call_run_alloc(void *ctx);
ltk_status bench_call_fetch(void *ctx, void *idx, float *scores);
void bench_call_teardown(void *ctx);

/* The operations (cmd-bench.c dispatches argv[2]). */
int bench_dsa_main(int argc, char **argv);
int bench_knn_main(int argc, char **argv);
int bench_select_main(int argc, char **argv);
int bench_decode_main(int argc, char **argv);
int bench_blocks_main(int argc, char **argv);
int bench_merge_main(int argc, char **argv);

#endif
