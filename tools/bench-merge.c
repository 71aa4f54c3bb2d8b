/* `litetopk bench merge`: the merge of key-sharded candidate lists (ltk_topk_merge), rows x G lists
 * of k candidates, rank-major [G, rows, k] as an all-gather leaves them (bench.h runs and records
 * it). List g holds the interleaved ids j G + g of a shard, its scores from --dist (tools/gen.h;
 * default normal); --sorted sorts each list descending, as a local top-k's sorted output comes.
 * The merge does not rely on a list's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "devmem.h"
#include "gen.h"

typedef struct merge_bench {
    bench_call call; /* first: bench_op's ctx for the generic callbacks */
    const char *dist;
    int64_t sorted;
    ltk_merge_args args;
    float *scores;
    int32_t *ids;
} merge_bench;

static ltk_status merge_size(const void *a, const ltk_exec *e, size_t *bytes) { return ltk_merge_workspace_size(a, e, bytes); }
static ltk_status merge_call(const void *a, const ltk_exec *e) { return ltk_topk_merge(a, e); }
static void merge_json(void *c, cli_json *j) {
    merge_bench *b = c;
    cli_json_int(j, "rows", b->args.rows), cli_json_int(j, "lists", b->args.lists);
    cli_json_int(j, "list_len", b->args.list_len), cli_json_int(j, "k", b->args.k);
    cli_json_str(j, "dist", b->dist), cli_json_int(j, "sorted", b->sorted);
}

static int desc_f32(const void *x, const void *y) { /* NaN last */
    const float a = *(const float *)x, b = *(const float *)y;
    if (a != a || b != b) return (a != a) - (b != b);
    return (a < b) - (a > b);
}

static const char merge_usage[] = "bench merge [--rows N --lists G --list-len L -k K --dist NAME --sorted] [--backend auto|cpu|ref] [--reps N] [--json FILE]";
static const char merge_about[] =
    "The exact merge of G ranks' local top-k lists (score, global id) into the global top-k, rank-major\n"
    "input [G, rows, L]; GB/s of candidates read (8 bytes each).";

int bench_merge_main(int argc, char **argv) {
    const char *cmd = "bench merge";
    int64_t rows = 8192, lists = 8, len = -1;
    int sorted = 0;
    const char *dist_s = "normal";
    cli_opt opts[] = {
        {"--dist", NULL, CLI_STR, &dist_s, "NAME", "candidate scores (tools/gen.h's generators, as bench select; default normal)", 0, 0, 0},
        {"--sorted", NULL, CLI_FLAG, &sorted, NULL, "each list sorted descending (a sorted local top-k)", 0, 1, 0},
        {"--rows", NULL, CLI_INT, &rows, "N", "rows (default 8192)", 1, INT32_MAX, 0},
        {"--lists", NULL, CLI_INT, &lists, "G", "candidate lists a row: the ranks (default 8)", 1, 4096, 0},
        {"--list-len", NULL, CLI_INT, &len, "L", "candidates a list (default k)", 1, INT32_MAX, 0},
    };
    bench_common c;
    BENCH_PARSE(cmd, merge_usage, merge_about, opts, &c);
    if (!strcmp(c.algos_s, "fused,materialize")) c.algos_s = "fused"; /* one path: the merge */
    int rc;
    bench_env env;
    if ((rc = bench_env_init(cmd, &c, 0, &env)) != CLI_EXIT_OK) return rc;
    const int64_t k = c.k < 0 ? 2048 : c.k;
    if (len < 0) len = k;
    if (lists * len > INT32_MAX) return cli_usage_error(cmd, "lists x list-len = %lld is over 2^31-1", (long long)(lists * len));
    static merge_bench b;
    memset(&b, 0, sizeof b);
    const int64_t n = lists * rows * len;
    float *hs = malloc(sizeof(float) * (size_t)n);
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)n);
    gen_score_dist dist;
    if (!gen_score_dist_parse(dist_s, &dist)) {
        free(hs), free(hi);
        return cli_usage_error(cmd, "unknown --dist '%s'", dist_s);
    }
    ltk_status st = hs && hi ? LTK_OK : LTK_ENOMEM;
    if (!st) {
        /* one list per (rank, row) from the generator, whose rows are lists here */
        float *x = NULL;
        st = gen_scores(lists * rows, len, dist, k, (uint64_t)c.seed, &x);
        if (!st) {
            memcpy(hs, x, sizeof(float) * (size_t)n);
            free(x);
            for (int64_t g = 0; g < lists; g++)
                for (int64_t i = 0; i < rows * len; i++) hi[g * rows * len + i] = (int32_t)((i % len) * lists + g);
            if (sorted)
                for (int64_t l = 0; l < lists * rows; l++) qsort(hs + l * len, (size_t)len, sizeof(float), desc_f32);
        }
    }
    if (!st) st = devmem_alloc(env.on_device, sizeof(float) * (size_t)n, (void **)&b.scores);
    if (!st) st = devmem_alloc(env.on_device, sizeof(int32_t) * (size_t)n, (void **)&b.ids);
    if (!st) st = devmem_upload(env.on_device, b.scores, hs, sizeof(float) * (size_t)n);
    if (!st) st = devmem_upload(env.on_device, b.ids, hi, sizeof(int32_t) * (size_t)n);
    free(hs), free(hi);
    bench_call *bc = &b.call;
    if (!st) st = devmem_alloc(env.on_device, (size_t)(rows * k) * sizeof(int32_t), &bc->out_idx);
    if (!st) st = devmem_alloc(env.on_device, (size_t)(rows * k) * sizeof(float), (void **)&bc->out_scores);
    int exit_code = CLI_EXIT_FAIL;
    if (!st) {
        b.dist = gen_score_dist_name(dist), b.sorted = sorted;
        b.args.rows = rows, b.args.lists = (int32_t)lists, b.args.list_len = (int32_t)len, b.args.k = (int32_t)k;
        b.args.scores = b.scores, b.args.ids = b.ids;
        b.args.row_stride = len, b.args.list_stride = rows * len; /* rank-major */
        b.args.out_idx = bc->out_idx, b.args.out_scores = bc->out_scores;
        b.args.flags = env.flags;
        bc->env = &env, bc->what = "ltk_topk_merge", bc->args = &b.args, bc->size = merge_size;
        bc->call = merge_call, bc->n_out = (size_t)(rows * k), bc->idx_size = 4;
        bench_op op;
        memset(&op, 0, sizeof op);
        op.dtype = "f32";
        op.name = "merge", op.ctx = &b, op.setup = bench_call_setup, op.run = bench_call_run;
        op.run_alloc = bench_call_run_alloc;
        op.fetch = bench_call_fetch, op.teardown = bench_call_teardown, op.json_shape = merge_json;
        op.rows = rows, op.k = (int32_t)k, op.idx_size = 4;
        op.bytes_read = (double)n * 8.0;
        op.floor_bytes = op.bytes_read;
        snprintf(op.shape, sizeof op.shape, "rows=%lld lists=%lld list_len=%lld k=%lld dist=%s%s", (long long)rows,
                 (long long)lists, (long long)len, (long long)k, b.dist, sorted ? " sorted" : "");
        exit_code = bench_all(&env, &op);
    } else {
        fprintf(stderr, "litetopk %s: %s\n", cmd, st == LTK_ENOMEM ? "out of memory" : tool_last_error());
    }
    devmem_free(env.on_device, b.scores), devmem_free(env.on_device, b.ids);
    devmem_free(env.on_device, bc->out_idx), devmem_free(env.on_device, bc->out_scores);
    return exit_code;
}
