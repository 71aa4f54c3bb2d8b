/* `litetopk bench blocks`: DeepSeek-V4.1's candidate indexer on the DSA workload (T queries at the end
 * of an S-key causal context, one call): the source layer's publication (ltk_blocks_topk: the top
 * --blocks blocks of --b keys a row, the newest partial block pinned, ids ascending as SGLang's block
 * table), the consumer layers' scoring of those lists (ltk_candidates_topk, top -k), and the plain
 * indexer top-k (ltk_indexer_topk) on the same inputs beside them, in one process; then the
 * publication together with the row's own top-k (-k) in one call, as V4.1's source layer needs both
 * ("blocks_topk": one scan for both on CUDA, compared with the plain indexer's line). The consumer's
 * line reads against two floors: its listed keys read once (T * blocks * b rows of D + 4 bytes) at
 * the copy rate, and its FLOPs at the sustained FP8 GEMM rate, both measured in the process. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "devmem.h"
#include "dsa-run.h"
#include "gen.h"

typedef struct blocks_bench {
    bench_call call;
    ltk_blocks_args pub, pubk;
    ltk_candidates_args cons;
    ltk_indexer_args plain;
    int64_t T, S, H, D, k, b, nblk;
    const char *what;
} blocks_bench;

static ltk_status pub_size(const void *a, const ltk_exec *e, size_t *bytes) { return ltk_blocks_workspace_size(a, e, bytes); }
static ltk_status pub_call(const void *a, const ltk_exec *e) { return ltk_blocks_topk(a, e); }
static ltk_status cons_size(const void *a, const ltk_exec *e, size_t *bytes) {
    return ltk_candidates_workspace_size(a, e, bytes);
}
static ltk_status cons_call(const void *a, const ltk_exec *e) { return ltk_candidates_topk(a, e); }
static ltk_status plain_size(const void *a, const ltk_exec *e, size_t *bytes) { return ltk_indexer_workspace_size(a, e, bytes); }
static ltk_status plain_call(const void *a, const ltk_exec *e) { return ltk_indexer_topk(a, e); }

static void blocks_json(void *c, cli_json *j) {
    blocks_bench *b = c;
    cli_json_str(j, "call", b->what);
    cli_json_int(j, "T", b->T), cli_json_int(j, "S", b->S), cli_json_int(j, "H", b->H), cli_json_int(j, "D", b->D);
    cli_json_int(j, "k", b->k), cli_json_int(j, "block_size", b->b), cli_json_int(j, "block_k", b->nblk);
}

static const char blocks_usage[] = "bench blocks [--T N --S N --H N --D N -k K --b N --blocks N --dtype T] [--backend auto|cpu|cuda|ref]\n"
    "                      [--algos fused,materialize] [--reps N] [--json FILE]";
static const char blocks_about[] =
    "DeepSeek-V4.1's candidate indexer on the DSA workload (tools/gen.c; T queries at the end of an S-key\n"
    "causal context, one call): the publication (ltk_blocks_topk: the top --blocks blocks of --b keys a row,\n"
    "the newest partial block pinned, ids ascending), the consumer's scoring of those lists\n"
    "(ltk_candidates_topk, top -k among their keys) and the plain indexer top-k (ltk_indexer_topk) on the\n"
    "same inputs, one after the other in one process; then the publication with the row's own top -k in\n"
    "the same call (blocks_topk). Defaults: V4.1's b = 8, 2048 blocks, k = 512.";

int bench_blocks_main(int argc, char **argv) {
    const char *cmd = "bench blocks", *dtype_s = "e4m3";
    int64_t T = -1, S = -1, H = 64, D = 128, bs = 8, nblk = 2048;
    cli_opt opts[] = {
        {"--T", NULL, CLI_INT, &T, "N", "query rows (default: GPU 8192, CPU 64)", 1, INT32_MAX, 0},
        {"--S", NULL, CLI_INT, &S, "N", "keys; the last query sees all of them (default: GPU 256K, CPU 32K)", 1, INT32_MAX, 0},
        {"--H", NULL, CLI_INT, &H, "N", "heads (default 64)", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "head dimension (default 128)", 1, LTK_INDEXER_MAX_D, 0},
        {"--b", NULL, CLI_INT, &bs, "N", "keys a block (default 8)", 1, LTK_BLOCK_MAX_SIZE, 0},
        {"--blocks", NULL, CLI_INT, &nblk, "N", "blocks published a row (default 2048)", 1, LTK_BLOCKS_MAX_K, 0},
        {"--dtype", NULL, CLI_STR, &dtype_s, "T", "e4m3 (default), bf16 or f32", 0, 0, 0},
    };
    bench_common c;
    BENCH_PARSE(cmd, blocks_usage, blocks_about, opts, &c);
    int rc;
    ltk_dtype dtype;
    if (!cli_parse_dtype(dtype_s, &dtype) || dtype == LTK_DTYPE_F16)
        return cli_usage_error(cmd, "dtype '%s': the indexer takes e4m3, bf16 or f32", dtype_s);
    bench_env env;
    if ((rc = bench_env_init(cmd, &c, 0, &env)) != CLI_EXIT_OK) return rc;
    const int dev = env.on_device;
    int64_t k = c.k < 0 ? 512 : c.k;
    if (T < 0) T = dev ? 8192 : 64;
    if (S < 0) S = dev ? 262144 : 32768;
    if (k > LTK_INDEXER_MAX_K) return cli_usage_error(cmd, "k=%lld: the indexer takes k <= %d", (long long)k, LTK_INDEXER_MAX_K);
    if (T > S) return cli_usage_error(cmd, "T=%lld exceeds S=%lld (the queries are the last T keys)", (long long)T, (long long)S);
    gen_dsa_spec spec = {S - T, T, (int32_t)H, (int32_t)D, dtype, (uint64_t)c.seed, 0.95, "dsa", k};
    dsa_inputs in;
    ltk_status st = dsa_inputs_make(&spec, 0, (int32_t)k, 0, dev, &in);
    if (st) {
        fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
        return CLI_EXIT_FAIL;
    }
    static blocks_bench b;
    memset(&b, 0, sizeof b);
    b.T = T, b.S = S, b.H = H, b.D = D, b.k = k, b.b = bs, b.nblk = nblk;
    ltk_indexer_args ix;
    memset(&ix, 0, sizeof ix);
    ix.T = T, ix.S = S, ix.H = (int32_t)H, ix.D = (int32_t)D, ix.dtype = dtype, ix.q = in.q, ix.kv = in.kv;
    ix.kv_scale = in.kv_scale, ix.weights = in.weights, ix.ks = in.ks, ix.ke = in.ke;
    int32_t *lists = NULL, *own_idx = NULL;
    float *own_scores = NULL;
    if (!st) st = devmem_alloc(dev, sizeof(int32_t) * (size_t)(T * nblk), (void **)&lists);
    if (!st) st = devmem_alloc(dev, sizeof(int32_t) * (size_t)(T * (nblk > k ? nblk : k)), &b.call.out_idx);
    if (!st) st = devmem_alloc(dev, sizeof(float) * (size_t)(T * (nblk > k ? nblk : k)), (void **)&b.call.out_scores);
    if (!st) st = devmem_alloc(dev, sizeof(int32_t) * (size_t)(T * k), (void **)&own_idx);
    if (!st) st = devmem_alloc(dev, sizeof(float) * (size_t)(T * k), (void **)&own_scores);
    /* the consumer's lists: one publication, outside the timings */
    b.pub.ix = ix, b.pub.block_size = (int32_t)bs, b.pub.block_k = (int32_t)nblk, b.pub.out_blocks = lists;
    b.pub.ix.flags = LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX;
    ltk_exec e0 = {env.backend, LTK_ALGO_FUSED, NULL, NULL, 0, env.threads, NULL};
    if (!st && ltk_blocks_topk(&b.pub, &e0) != LTK_OK) {
        fprintf(stderr, "litetopk %s: ltk_blocks_topk: %s\n", cmd, ltk_last_error());
        st = LTK_EINTERNAL;
    }
    int exit_code = CLI_EXIT_FAIL;
    if (!st) {
        b.pub.out_blocks = b.call.out_idx, b.pub.out_block_scores = b.call.out_scores;
        b.cons.ix = ix, b.cons.ix.k = (int32_t)k, b.cons.ix.out_idx = b.call.out_idx, b.cons.ix.out_scores = b.call.out_scores;
        b.cons.ix.flags = env.flags;
        b.cons.block_size = (int32_t)bs, b.cons.n_blocks = (int32_t)nblk, b.cons.blocks = lists;
        b.plain = b.cons.ix;
        /* the publication and the row's own top-k (sorted, with scores, as the plain line) */
        b.pubk = b.pub;
        b.pubk.ix.k = (int32_t)k, b.pubk.ix.out_idx = own_idx, b.pubk.ix.out_scores = own_scores;
        static const char *const names[4] = {"blocks", "candidates", "indexer", "blocks_topk"};
        exit_code = CLI_EXIT_OK;
        for (int i = 0; i < 4 && exit_code == CLI_EXIT_OK; i++) {
            bench_call *bc = &b.call;
            bc->env = &env, bc->idx_size = 4;
            b.what = names[i];
            if (i == 0) bc->what = "ltk_blocks_topk", bc->args = &b.pub, bc->size = pub_size, bc->call = pub_call;
            if (i == 1) bc->what = "ltk_candidates_topk", bc->args = &b.cons, bc->size = cons_size, bc->call = cons_call;
            if (i == 2) bc->what = "ltk_indexer_topk", bc->args = &b.plain, bc->size = plain_size, bc->call = plain_call;
            if (i == 3) bc->what = "ltk_blocks_topk", bc->args = &b.pubk, bc->size = pub_size, bc->call = pub_call;
            const int32_t kk = (int32_t)(i == 0 || i == 3 ? nblk : k);
            bc->n_out = (size_t)T * (size_t)kk;
            bench_op op;
            memset(&op, 0, sizeof op);
            op.dtype = cli_dtype_name(dtype);
            op.name = "blocks", op.ctx = &b, op.setup = bench_call_setup, op.run = bench_call_run;
            op.run_alloc = bench_call_run_alloc, op.fetch = bench_call_fetch, op.teardown = bench_call_teardown;
            op.json_shape = blocks_json, op.rows = T, op.k = kk, op.idx_size = 4;
            op.flops = 2.0 * (double)H * (double)D * (i == 1 ? (double)T * (double)nblk * (double)bs : in.host.visible);
            if (i == 1) { /* the consumer's floors: its listed keys read once (a key row and its scale
                           * each), and its FLOPs at the sustained FP8 GEMM rate, both measured here */
                op.floor_bytes = (double)T * (double)nblk * (double)bs * ((double)D * (double)ltk_dtype_size(dtype) + 4.0);
                op.fp8_ceiling = dtype == LTK_DTYPE_E4M3;
            }
            snprintf(op.shape, sizeof op.shape, "%s T=%lld S=%lld H=%lld D=%lld k=%lld b=%lld blocks=%lld", names[i],
                     (long long)T, (long long)S, (long long)H, (long long)D, (long long)k, (long long)bs, (long long)nblk);
            if (bench_all(&env, &op) != CLI_EXIT_OK) exit_code = CLI_EXIT_FAIL;
        }
    } else if (st != LTK_EINTERNAL) {
        fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
    }
    devmem_free(dev, lists), devmem_free(dev, b.call.out_idx), devmem_free(dev, b.call.out_scores);
    devmem_free(dev, own_idx), devmem_free(dev, own_scores);
    dsa_inputs_free(&in);
    return exit_code;
}
