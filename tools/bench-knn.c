/* `litetopk bench knn`: brute-force kNN on clustered unit-norm embeddings (or --base/--queries files),
 * fused against materialize; on CUDA each time is also given over one read of the corpus at the
 * device copy rate measured in the same process (bench.h runs and records it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "devmem.h"
#include "gen.h"
#include "io.h"

typedef struct knn_bench {
    bench_call call; /* first: bench_op's ctx for the generic callbacks */
    ltk_knn_args args;
    void *base, *queries;
    const char *dist;
} knn_bench;

static ltk_status knn_size(const void *a, const ltk_exec *e, size_t *bytes) { return ltk_knn_workspace_size(a, e, bytes); }
static ltk_status knn_call(const void *a, const ltk_exec *e) { return ltk_knn_topk(a, e); }
static void knn_json(void *c, cli_json *j) {
    knn_bench *b = c;
    cli_json_int(j, "B", b->args.B), cli_json_int(j, "N", b->args.N), cli_json_int(j, "D", b->args.D);
    cli_json_int(j, "k", b->args.k), cli_json_str(j, "metric", cli_metric_name(b->args.metric));
    cli_json_str(j, "dist", b->dist);
}

static const char knn_usage[] =
    "bench knn [--B N --N N --D N -k K --dtype T --metric M --dist D --base FILE --queries FILE --dump PREFIX]\n"
    "                      [--backend auto|cpu|cuda|ref] [--algos fused,materialize,score_only]\n"
    "                      [--reps N] [--json FILE]";
static const char knn_about[] =
    "Brute-force kNN on clustered unit-norm embeddings (or --base/--queries files); --dump PREFIX writes\n"
    "PREFIX.base.fbin and PREFIX.queries.fbin (--reps 0: only that). On CUDA also the device copy rate and\n"
    "each time over one read of the corpus. TFLOP/s = 2 B N D / time. --dist reshapes the generated base:\n"
    "clustered (default), dup (N/16 distinct rows), equal, zero (9 rows in 10), scale-hi|-lo (x 1e15 / 1e-15),\n"
    "nonfinite (NaN and inf elements in 2 rows of 1000); tools/gen.h documents each.";

/* Loads both files as float32, or generates seeded embeddings; *base and *queries are malloc'd. */
static ltk_status knn_inputs(const char *cmd, const char *base_path, const char *query_path, int gpu, uint64_t seed,
                             const char *dist, int64_t *B, int64_t *N, int64_t *D, float **base, float **queries) {
    if (base_path) {
        io_matrix raw = {0}, mb = {0}, mq = {0};
        ltk_status st = io_read(base_path, &raw);
        if (!st) st = io_convert(&raw, IO_ELEM_F32, &mb);
        io_matrix_free(&raw);
        if (!st) st = io_read(query_path, &raw);
        if (!st) st = io_convert(&raw, IO_ELEM_F32, &mq);
        io_matrix_free(&raw);
        if (!st && (mb.cols != mq.cols || mb.rows == 0 || mq.rows == 0 || mb.cols == 0))
            st = tool_fail(LTK_EINVAL, "%s: base %lld x %lld and queries %lld x %lld do not match", cmd,
                           (long long)mb.rows, (long long)mb.cols, (long long)mq.rows, (long long)mq.cols);
        if (st) {
            io_matrix_free(&mb), io_matrix_free(&mq);
            return st;
        }
        *N = mb.rows, *B = mq.rows, *D = mb.cols;
        *base = mb.data, *queries = mq.data;
        return LTK_OK;
    }
    if (*B < 0) *B = gpu ? 1024 : 256;
    if (*N < 0) *N = gpu ? 1000000 : 100000;
    int64_t clusters = (int64_t)sqrt((double)*N);
    ltk_status st = gen_embeddings(*N, (int32_t)*D, clusters, seed, 0, base);
    if (!st) st = gen_embeddings(*B, (int32_t)*D, clusters, seed, 1, queries);
    if (!st) gen_knn_dist_apply(*base, *N, (int32_t)*D, dist, seed);
    if (st) free(*base), free(*queries), *base = *queries = NULL;
    return st;
}

static ltk_status knn_dump(const char *dump, const float *base, const float *queries, int64_t B, int64_t N, int64_t D) {
    char p1[4096], p2[4096];
    snprintf(p1, sizeof p1, "%s.base.fbin", dump);
    snprintf(p2, sizeof p2, "%s.queries.fbin", dump);
    io_matrix m1 = {N, D, IO_ELEM_F32, (void *)base}, m2 = {B, D, IO_ELEM_F32, (void *)queries};
    ltk_status st = io_write(p1, &m1);
    if (!st) st = io_write(p2, &m2);
    if (!st)
        printf("wrote %s (%lld x %lld) and %s (%lld x %lld)\n", p1, (long long)N, (long long)D, p2, (long long)B,
               (long long)D);
    return st;
}

int bench_knn_main(int argc, char **argv) {
    const char *cmd = "bench knn", *dtype_s = "f32", *metric_s = "ip", *dump = NULL, *base_path = NULL,
               *query_path = NULL, *dist = "clustered";
    int64_t B = -1, N = -1, D = 128;
    cli_opt opts[] = {
        {"--B", NULL, CLI_INT, &B, "N", "queries (default: GPU 1024, CPU 256)", 1, INT32_MAX, 0},
        {"--N", NULL, CLI_INT, &N, "N", "base vectors (default: GPU 1M, CPU 100000)", 1, INT32_MAX, 0},
        {"--D", NULL, CLI_INT, &D, "N", "dimension (default 128)", 1, LTK_KNN_MAX_D, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "f32 (default), f16 or bf16", 0, 0, 0},
        {"--metric", NULL, CLI_STR, &metric_s, "M", "ip (default), l2 or cos", 0, 0, 0},
        {"--dist", NULL, CLI_STR, &dist, "D", "base distribution (default clustered; see below)", 0, 0, 0},
        {"--dump", NULL, CLI_STR, &dump, "PREFIX", "write PREFIX.base.fbin and PREFIX.queries.fbin (float32)", 0, 0, 0},
        {"--base", NULL, CLI_STR, &base_path, "FILE", "load base vectors instead of generating", 0, 0, 0},
        {"--queries", NULL, CLI_STR, &query_path, "FILE", "load query vectors instead of generating", 0, 0, 0},
    };
    bench_common c;
    BENCH_PARSE(cmd, knn_usage, knn_about, opts, &c);
    int rc;
    ltk_dtype dtype;
    ltk_metric metric;
    if (!cli_parse_dtype(dtype_s, &dtype) || dtype == LTK_DTYPE_E4M3)
        return cli_usage_error(cmd, "dtype '%s': kNN takes f32, f16 or bf16", dtype_s);
    if (!cli_parse_metric(metric_s, &metric)) return cli_usage_error(cmd, "unknown metric '%s'", metric_s);
    if ((base_path != NULL) != (query_path != NULL)) return cli_usage_error(cmd, "--base and --queries go together");
    if (!gen_knn_dist_known(dist)) return cli_usage_error(cmd, "--dist %s: not one of the suite (litetopk help bench knn)", dist);
    if (base_path && strcmp(dist, "clustered")) return cli_usage_error(cmd, "--dist reshapes generated inputs, not --base files");
    if (base_path && (opts[0].given || opts[1].given || opts[2].given))
        return cli_usage_error(cmd, "--B/--N/--D come from the files when --base/--queries are given");
    const int dump_only = dump && c.reps == 0;
    bench_env env;
    if ((rc = bench_env_init(cmd, &c, dump_only, &env)) != CLI_EXIT_OK) return rc;
    int64_t k = c.k < 0 ? 100 : c.k;
    if (k > LTK_KNN_MAX_K) return cli_usage_error(cmd, "k=%lld: kNN takes k <= %d", (long long)k, LTK_KNN_MAX_K);

    float *base = NULL, *queries = NULL;
    ltk_status st = knn_inputs(cmd, base_path, query_path, env.on_device, (uint64_t)c.seed, dist, &B, &N, &D, &base, &queries);
    /* What the library sees, also what --dump writes, so other tools search the same values. */
    if (!st) gen_round_to(base, N * D, dtype), gen_round_to(queries, B * D, dtype);
    if (!st && dump) st = knn_dump(dump, base, queries, B, N, D);
    if (st || dump_only) {
        free(base), free(queries);
        if (st) fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
        return st ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    static knn_bench b;
    memset(&b, 0, sizeof b);
    b.dist = base_path ? "files" : dist;
    void *eb = NULL, *eq = NULL;
    st = gen_encode(base, N * D, dtype, &eb);
    if (!st) st = gen_encode(queries, B * D, dtype, &eq);
    free(base), free(queries);
    const size_t es = ltk_dtype_size(dtype);
    if (!st) st = devmem_clone(env.on_device, eb, (size_t)(N * D) * es, &b.base);
    if (!st) st = devmem_clone(env.on_device, eq, (size_t)(B * D) * es, &b.queries);
    free(eb), free(eq);
    bench_call *bc = &b.call;
    if (!st) st = devmem_alloc(env.on_device, (size_t)(B * k) * sizeof(int64_t), &bc->out_idx);
    if (!st) st = devmem_alloc(env.on_device, (size_t)(B * k) * sizeof(float), (void **)&bc->out_scores);
    int exit_code = CLI_EXIT_FAIL;
    if (!st) {
        b.args.B = B, b.args.N = N, b.args.D = (int32_t)D, b.args.k = (int32_t)k, b.args.dtype = dtype;
        b.args.metric = metric, b.args.queries = b.queries, b.args.base = b.base;
        b.args.out_idx = bc->out_idx, b.args.out_scores = bc->out_scores, b.args.flags = env.flags;
        bc->env = &env, bc->what = "ltk_knn_topk", bc->args = &b.args, bc->size = knn_size, bc->call = knn_call;
        bc->n_out = (size_t)(B * k), bc->idx_size = 8;
        bench_op op;
        memset(&op, 0, sizeof op);
        op.dtype = cli_dtype_name(dtype);
        op.name = "knn", op.ctx = &b, op.setup = bench_call_setup, op.run = bench_call_run;
        op.run_alloc = bench_call_run_alloc;
        op.fetch = bench_call_fetch, op.teardown = bench_call_teardown, op.json_shape = knn_json;
        op.rows = B, op.k = (int32_t)k, op.idx_size = 8;
        op.flops = 2.0 * (double)B * (double)N * (double)D;
        op.floor_bytes = (double)N * (double)D * (double)es;
        snprintf(op.shape, sizeof op.shape, "B=%lld N=%lld D=%lld k=%lld metric=%s%s%s", (long long)B, (long long)N,
                 (long long)D, (long long)k, cli_metric_name(metric), base_path ? " (files)" : " dist=",
                 base_path ? "" : dist);
        exit_code = bench_all(&env, &op);
    } else {
        fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
    }
    devmem_free(env.on_device, b.base), devmem_free(env.on_device, b.queries);
    devmem_free(env.on_device, bc->out_idx), devmem_free(env.on_device, bc->out_scores);
    return exit_code;
}
