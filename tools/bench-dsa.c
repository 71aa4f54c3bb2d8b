/* `litetopk bench dsa`: the DSA indexer, T queries at the end of an S-key causal context, in calls of
 * --chunk rows with the hot set carried between calls (bench.h runs and records it). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "devmem.h"
#include "dsa-run.h"
#include "gen.h"

typedef struct dsa_bench {
    dsa_inputs in;
    dsa_path path;
    const bench_env *env;
    int use_state;
    int64_t T, S, H, D, k, chunk;
    const char *dist;
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
    cli_json_str(j, "dist", b->dist);
}

static const char dsa_usage[] = "bench dsa [--T N --S N --H N --D N -k K --chunk N --dtype T --cold --dist D] [--backend auto|cpu|cuda|ref] [--algos fused,materialize,score_only]\n"
    "                      [--reps N] [--json FILE]";
static const char dsa_about[] =
    "The DSA indexer: T queries at the end of an S-key causal context (ke = S - T + t + 1), in calls of\n"
    "--chunk rows with the hot set carried between calls (--cold: none); fused against materialize on the\n"
    "same generated inputs (tools/gen.c, gen_dsa_make). TFLOP/s = 2 H D (visible keys) / time.\n"
    "--dist reshapes the inputs so that every row's scores follow one distribution of the suite: dsa\n"
    "(default), equal, zero, distinct2|4|16, plateau0|-half|-k1|-k|-4k (m = 0, k/2, k-1, k, 4k keys\n"
    "score > 0, the rest exactly 0), scale-hi|-lo (scores x 1e30 / 1e-30); tools/gen.h documents each.";

int bench_dsa_main(int argc, char **argv) {
    const char *cmd = "bench dsa", *dtype_s = "e4m3", *dist = "dsa";
    int64_t T = -1, S = -1, H = 64, D = 128, chunk = -1, rho_pct = 95;
    int cold = 0;
    cli_opt opts[] = {
        {"--T", NULL, CLI_INT, &T, "N", "query rows (default: GPU 4096, CPU 128)", 1, INT32_MAX, 0},
        {"--S", NULL, CLI_INT, &S, "N", "keys; the last query sees all of them (default: GPU 128K, CPU 32K)", 1, INT32_MAX, 0},
        {"--H", NULL, CLI_INT, &H, "N", "heads (default 64)", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "head dimension (default 128)", 1, LTK_INDEXER_MAX_D, 0},
        {"--chunk", NULL, CLI_INT, &chunk, "N", "query rows per call (default: GPU 2048, CPU 64)", 1, INT32_MAX, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "e4m3 (default), bf16 or f32", 0, 0, 0},
        {"--rho", NULL, CLI_INT, &rho_pct, "PCT", "adjacent-query correlation in percent (default 95)", 0, 100, 0},
        {"--cold", NULL, CLI_FLAG, &cold, NULL, "no hot-set state between chunks", 0, 0, 0},
        {"--dist", NULL, CLI_STR, &dist, "D", "score distribution of the suite (default dsa; see below)", 0, 0, 0},
    };
    bench_common c;
    BENCH_PARSE(cmd, dsa_usage, dsa_about, opts, &c);
    int rc;
    ltk_dtype dtype;
    if (!cli_parse_dtype(dtype_s, &dtype) || dtype == LTK_DTYPE_F16)
        return cli_usage_error(cmd, "dtype '%s': the indexer takes e4m3, bf16 or f32", dtype_s);
    bench_env env;
    if ((rc = bench_env_init(cmd, &c, 0, &env)) != CLI_EXIT_OK) return rc;
    const int gpu = env.on_device;
    int64_t k = c.k;
    if (k < 0) k = 2048;
    if (T < 0) T = gpu ? 4096 : 128;
    if (S < 0) S = gpu ? 131072 : 32768;
    if (chunk < 0) chunk = gpu ? 2048 : 64;
    if (k > LTK_INDEXER_MAX_K)
        return cli_usage_error(cmd, "k=%lld: the indexer takes k <= %d", (long long)k, LTK_INDEXER_MAX_K);
    if (T > S)
        return cli_usage_error(cmd, "T=%lld exceeds S=%lld (the queries are the last T keys)", (long long)T,
                               (long long)S);
    if (chunk > T) chunk = T;
    if (!gen_dsa_dist_known(dist)) return cli_usage_error(cmd, "--dist %s: not one of the suite (litetopk help bench dsa)", dist);
    static dsa_bench b;
    memset(&b, 0, sizeof b);
    b.env = &env, b.use_state = !cold, b.T = T, b.S = S, b.H = H, b.D = D, b.k = k, b.chunk = chunk, b.dist = dist;
    gen_dsa_spec spec = {S - T, T, (int32_t)H, (int32_t)D, dtype, (uint64_t)c.seed, (double)rho_pct / 100.0, dist, k};
    ltk_status st = dsa_inputs_make(&spec, chunk, (int32_t)k, env.flags, env.on_device, &b.in);
    if (st) {
        fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
        return CLI_EXIT_FAIL;
    }
    bench_op op;
    memset(&op, 0, sizeof op);
    op.dtype = cli_dtype_name(dtype);
    op.name = "dsa", op.ctx = &b, op.setup = dsa_setup, op.run = dsa_run_once, op.fetch = dsa_fetch;
    op.teardown = dsa_teardown, op.json_shape = dsa_json;
    op.rows = T, op.k = (int32_t)k, op.idx_size = 4;
    op.fp8_ceiling = 1;
    op.flops = 2.0 * (double)H * (double)D * b.in.host.visible;
    snprintf(op.shape, sizeof op.shape, "T=%lld S=%lld H=%lld D=%lld k=%lld chunk=%lld%s dist=%s", (long long)T,
             (long long)S, (long long)H, (long long)D, (long long)k, (long long)chunk, cold ? " cold" : " hot-set carry",
             dist);
    int exit_code = bench_all(&env, &op);
    dsa_inputs_free(&b.in);
    return exit_code;
}
