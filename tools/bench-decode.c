/* `litetopk bench decode`: one decode step of a batch of requests over a paged FP8 cache (the layout
 * vLLM and SGLang use), fused against materialize (bench.h runs and records it); with --blocks, the
 * candidate indexer's decode publication (ltk_decode_blocks_topk) and its consumer
 * (ltk_decode_candidates_topk over one publication's lists, top -k among their positions) first, on
 * the same inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "devmem.h"
#include "gen.h"

typedef struct decode_bench {
    bench_call call; /* first: bench_op's ctx for the generic callbacks */
    ltk_decode_args args;
    ltk_decode_blocks_args blk;
    ltk_decode_candidates_args cons;
    int64_t b_size, n_blk; /* --b, --blocks (0: no publication) */
    int phase;             /* the op being run: 2 the publication, 1 its consumer, 0 the decode step */
    void *q, *cache, *table, *lens, *weights;
    int64_t ctx;
    int mixed;
    double cached; /* positions in the batch's contexts: what one read of the cache covers */
} decode_bench;

static ltk_status decode_size(const void *a, const ltk_exec *e, size_t *bytes) {
    return ltk_decode_workspace_size(a, e, bytes);
}
static ltk_status decode_call(const void *a, const ltk_exec *e) { return ltk_decode_topk(a, e); }
static ltk_status blocks_size(const void *a, const ltk_exec *e, size_t *bytes) {
    return ltk_decode_blocks_workspace_size(a, e, bytes);
}
static ltk_status blocks_call(const void *a, const ltk_exec *e) { return ltk_decode_blocks_topk(a, e); }
static ltk_status cons_size(const void *a, const ltk_exec *e, size_t *bytes) {
    return ltk_decode_candidates_workspace_size(a, e, bytes);
}
static ltk_status cons_call(const void *a, const ltk_exec *e) { return ltk_decode_candidates_topk(a, e); }
static void decode_json(void *c, cli_json *j) {
    decode_bench *b = c;
    cli_json_int(j, "B", b->args.B), cli_json_int(j, "next_n", b->args.next_n), cli_json_int(j, "H", b->args.H);
    cli_json_int(j, "D", b->args.D), cli_json_int(j, "k", b->args.k), cli_json_int(j, "block_kv", b->args.block_kv);
    cli_json_int(j, "ctx", b->ctx), cli_json_bool(j, "mixed", b->mixed);
    cli_json_bool(j, "physical", (b->args.flags & LTK_FLAG_PHYSICAL) != 0);
    static const char *const calls[3] = {"decode", "candidates", "blocks"};
    cli_json_str(j, "call", calls[b->phase]);
    if (b->phase) cli_json_int(j, "block_size", b->b_size), cli_json_int(j, "block_k", b->n_blk);
}

static const char decode_usage[] =
    "bench decode [--B N --ctx N --mixed --next-n N --H N --D N -k K --block N --physical --blocks N --b N]\n"
    "                      [--backend auto|cpu|cuda|ref] [--algos fused,materialize,score_only] [--reps N] [--json FILE]";
static const char decode_about[] =
    "One decode step: B requests of --ctx cached positions each (--mixed: lengths uniform in\n"
    "[ctx/8, ctx]), next_n query rows a request seeing seq_len - next_n + r + 1 positions (vLLM's\n"
    "convention), scattered over a paged cache of --block-token blocks (block_kv*D e4m3 key bytes, then\n"
    "block_kv fp32 scales); each request is the DSA workload of bench dsa (tools/gen.c). TFLOP/s = 2 H D (visible positions) / time; on CUDA also each time over one\n"
    "read of the cache at the device copy rate measured in the same process. --blocks N: first the\n"
    "candidate indexer's decode publication (ltk_decode_blocks_topk: the top N blocks of --b positions a\n"
    "row, the newest partial block pinned, ids ascending) on the same inputs, then its consumer\n"
    "(ltk_decode_candidates_topk: top -k among the positions of one publication's lists; its floor is\n"
    "those positions read once a row, B next_n blocks b (D + 4) bytes, at the copy rate).";

/* The cache, the table and the inputs, on the host. Each request is the DSA workload of the prefill
 * benchmarks (tools/gen.c, gen_dsa_make: rotated e4m3 keys with per-token scales, topic runs, heavy
 * hitters, the q scale folded into the weights) with its next_n queries at the end of its context,
 * laid into blocks scattered over the cache by a shuffled table. */
static ltk_status make_inputs(decode_bench *b, const ltk_decode_args *a, uint64_t seed, uint8_t **cache, int32_t **table,
                              int32_t **lens, uint8_t **q, float **w, double *visible) {
    gen_rng r;
    gen_rng_seed(&r, seed);
    const int64_t nb = a->num_blocks, bs = a->block_stride, rows = a->B * a->next_n;
    const size_t qrow = (size_t)a->H * (size_t)a->D;
    *cache = calloc((size_t)(nb * bs), 1);
    *table = malloc(sizeof(int32_t) * (size_t)(a->B * a->max_blocks));
    *lens = malloc(sizeof(int32_t) * (size_t)a->B);
    *q = malloc((size_t)rows * qrow);
    *w = malloc(sizeof(float) * (size_t)(rows * a->H));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)nb);
    if (!*cache || !*table || !*lens || !*q || !*w || !perm) {
        free(perm);
        return tool_fail(LTK_ENOMEM, "bench decode: out of memory for the inputs");
    }
    for (int64_t i = 0; i < nb; i++) perm[i] = (int32_t)i;
    for (int64_t i = nb - 1; i > 0; i--) {
        int64_t j = (int64_t)(gen_u64(&r) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    memcpy(*table, perm, sizeof(int32_t) * (size_t)(a->B * a->max_blocks));
    free(perm);
    *visible = 0;
    ltk_status st = LTK_OK;
    for (int64_t i = 0; i < a->B && !st; i++) {
        int64_t n = b->mixed ? b->ctx / 8 + (int64_t)(gen_uniform(&r) * (double)(b->ctx - b->ctx / 8 + 1)) : b->ctx;
        if (n > b->ctx) n = b->ctx;
        if (n < a->next_n) n = a->next_n;
        (*lens)[i] = (int32_t)n;
        b->cached += (double)n;
        gen_dsa_spec spec = {n - a->next_n, a->next_n, a->H, a->D, LTK_DTYPE_E4M3, seed * 1000003u + (uint64_t)i, 0.95, NULL, 0};
        gen_dsa d;
        st = gen_dsa_make(&spec, &d);
        if (st) break;
        for (int64_t pos = 0; pos < n; pos++) { /* position pos -> block table[i, pos / block_kv] */
            const int32_t blk = (*table)[i * a->max_blocks + pos / a->block_kv];
            uint8_t *base = *cache + (size_t)blk * (size_t)bs;
            memcpy(base + (size_t)(pos % a->block_kv) * (size_t)a->D, (const uint8_t *)d.kv + (size_t)pos * (size_t)a->D,
                   (size_t)a->D);
            ((float *)(base + (size_t)a->block_kv * (size_t)a->D))[pos % a->block_kv] = d.kv_scale[pos];
        }
        memcpy(*q + (size_t)(i * a->next_n) * qrow, d.q, (size_t)a->next_n * qrow);
        memcpy(*w + (size_t)(i * a->next_n) * (size_t)a->H, d.weights, sizeof(float) * (size_t)(a->next_n * a->H));
        *visible += d.visible;
        gen_dsa_free(&d);
    }
    return st;
}

int bench_decode_main(int argc, char **argv) {
    const char *cmd = "bench decode";
    int64_t B = -1, ctx = -1, next_n = 1, H = 64, D = 128, block = 64, nblk = 0, bsz = 8;
    int mixed = 0, physical = 0;
    cli_opt opts[] = {
        {"--B", NULL, CLI_INT, &B, "N", "requests (default: GPU 64, CPU 8)", 1, INT32_MAX, 0},
        {"--ctx", NULL, CLI_INT, &ctx, "N", "cached positions a request (default: GPU 64K, CPU 16K)", 1, INT32_MAX, 0},
        {"--mixed", NULL, CLI_FLAG, &mixed, NULL, "lengths uniform in [ctx/8, ctx] instead of all ctx", 0, 0, 0},
        {"--next-n", NULL, CLI_INT, &next_n, "N", "query rows a request (speculative decoding; default 1)", 1,
         LTK_DECODE_MAX_NEXT_N, 0},
        {"--H", NULL, CLI_INT, &H, "N", "heads (default 64)", 1, LTK_INDEXER_MAX_H, 0},
        {"--D", NULL, CLI_INT, &D, "N", "head dimension (default 128)", 1, LTK_INDEXER_MAX_D, 0},
        {"--block", NULL, CLI_INT, &block, "N", "tokens a cache block (default 64)", 1, LTK_DECODE_MAX_BLOCK, 0},
        {"--physical", NULL, CLI_FLAG, &physical, NULL, "physical slots out (SGLang) instead of positions", 0, 0, 0},
        {"--blocks", NULL, CLI_INT, &nblk, "N", "also the decode publication of N blocks a row (default 0: off)", 0,
         LTK_BLOCKS_MAX_K, 0},
        {"--b", NULL, CLI_INT, &bsz, "N", "positions a block of the publication (default 8)", 1, LTK_BLOCK_MAX_SIZE, 0},
    };
    bench_common c;
    BENCH_PARSE(cmd, decode_usage, decode_about, opts, &c);
    int rc;
    bench_env env;
    if ((rc = bench_env_init(cmd, &c, 0, &env)) != CLI_EXIT_OK) return rc;
    int64_t k = c.k < 0 ? 2048 : c.k;
    if (k > LTK_INDEXER_MAX_K) return cli_usage_error(cmd, "k=%lld: decode takes k <= %d", (long long)k, LTK_INDEXER_MAX_K);
    if (B < 0) B = env.on_device ? 64 : 8;
    if (ctx < 0) ctx = env.on_device ? 65536 : 16384;
    if ((block * D) % 4) return cli_usage_error(cmd, "block*D must be a multiple of 4");

    static decode_bench b;
    memset(&b, 0, sizeof b);
    b.ctx = ctx, b.mixed = mixed;
    ltk_decode_args *a = &b.args;
    a->B = B, a->next_n = (int32_t)next_n, a->H = (int32_t)H, a->D = (int32_t)D, a->k = (int32_t)k;
    a->dtype = LTK_DTYPE_E4M3, a->block_kv = (int32_t)block;
    a->max_blocks = (int32_t)((ctx + block - 1) / block);
    a->num_blocks = B * a->max_blocks;
    a->block_stride = block * (D + 4);
    a->max_len = (int32_t)ctx;
    a->flags = env.flags | (physical ? LTK_FLAG_PHYSICAL : 0);
    uint8_t *cache = NULL, *q = NULL;
    int32_t *table = NULL, *lens = NULL;
    float *w = NULL;
    double visible = 0;
    ltk_status st = make_inputs(&b, a, (uint64_t)c.seed, &cache, &table, &lens, &q, &w, &visible);
    const int dev = env.on_device;
    const size_t rows = (size_t)(B * next_n);
    if (!st) st = devmem_clone(dev, cache, (size_t)(a->num_blocks * a->block_stride), &b.cache);
    if (!st) st = devmem_clone(dev, table, sizeof(int32_t) * (size_t)(B * a->max_blocks), &b.table);
    if (!st) st = devmem_clone(dev, lens, sizeof(int32_t) * (size_t)B, &b.lens);
    if (!st) st = devmem_clone(dev, q, rows * (size_t)(H * D), &b.q);
    if (!st) st = devmem_clone(dev, w, sizeof(float) * rows * (size_t)H, &b.weights);
    free(cache), free(table), free(lens), free(q), free(w);
    bench_call *bc = &b.call;
    const size_t kmax = (size_t)(nblk > k ? nblk : k);
    if (!st) st = devmem_alloc(dev, rows * kmax * sizeof(int32_t), &bc->out_idx);
    if (!st) st = devmem_alloc(dev, rows * kmax * sizeof(float), (void **)&bc->out_scores);
    int32_t *lists = NULL;
    if (!st && nblk > 0) st = devmem_alloc(dev, rows * (size_t)nblk * sizeof(int32_t), (void **)&lists);
    int exit_code = CLI_EXIT_FAIL;
    b.b_size = bsz, b.n_blk = nblk;
    for (int phase = nblk > 0 ? 2 : 0; !st && phase >= 0; phase--) {
        const int pub = phase == 2;
        a->q = b.q, a->kv_cache = b.cache, a->block_table = b.table, a->seq_lens = b.lens, a->weights = b.weights;
        a->out_idx = bc->out_idx, a->out_scores = bc->out_scores;
        b.phase = phase;
        bc->env = &env, bc->what = "ltk_decode_topk", bc->args = a, bc->size = decode_size, bc->call = decode_call;
        bc->n_out = rows * (size_t)k, bc->idx_size = 4;
        if (pub) { /* blocks only, as V4.1's source layer publishes them (SGLang's block table) */
            memset(&b.blk, 0, sizeof b.blk);
            b.blk.dx = *a;
            b.blk.dx.k = 0, b.blk.dx.out_idx = NULL, b.blk.dx.out_scores = NULL;
            b.blk.dx.flags = LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX;
            b.blk.block_size = (int32_t)bsz, b.blk.block_k = (int32_t)nblk, b.blk.out_blocks = bc->out_idx;
            bc->what = "ltk_decode_blocks_topk", bc->args = &b.blk, bc->size = blocks_size, bc->call = blocks_call;
            bc->n_out = rows * (size_t)nblk;
        }
        if (phase == 1) { /* the consumer, on the lists of one publication outside the timings */
            ltk_decode_blocks_args one = b.blk;
            one.out_blocks = lists;
            ltk_exec e0 = {env.backend, LTK_ALGO_FUSED, NULL, NULL, 0, env.threads, NULL};
            if (ltk_decode_blocks_topk(&one, &e0) != LTK_OK || devmem_sync(dev) != LTK_OK) {
                fprintf(stderr, "litetopk %s: ltk_decode_blocks_topk: %s\n", cmd, ltk_last_error());
                exit_code = CLI_EXIT_FAIL;
                break;
            }
            memset(&b.cons, 0, sizeof b.cons);
            b.cons.dx = *a;
            b.cons.block_size = (int32_t)bsz, b.cons.n_blocks = (int32_t)nblk, b.cons.blocks = lists;
            bc->what = "ltk_decode_candidates_topk", bc->args = &b.cons, bc->size = cons_size, bc->call = cons_call;
        }
        bench_op op;
        memset(&op, 0, sizeof op);
        op.dtype = "e4m3";
        op.name = "decode", op.ctx = &b, op.setup = bench_call_setup, op.run = bench_call_run;
        op.run_alloc = bench_call_run_alloc;
        op.fetch = bench_call_fetch, op.teardown = bench_call_teardown, op.json_shape = decode_json;
        op.rows = (int64_t)rows, op.k = (int32_t)(pub ? nblk : k), op.idx_size = 4;
        if (pub) op.name = "decode_blocks";
        if (phase == 1) op.name = "decode_candidates";
        op.fp8_ceiling = 1;
        op.flops = 2.0 * (double)H * (double)D * visible;
        /* the floor: each request's cache read once (its next_n rows share it) */
        op.floor_bytes = b.cached * (double)(D + 4);
        if (phase == 1) { /* the listed positions (at most the visible ones) read once a row */
            const double listed = (double)rows * (double)nblk * (double)bsz;
            const double pos = listed < visible ? listed : visible;
            op.flops = 2.0 * (double)H * (double)D * pos;
            op.floor_bytes = pos * (double)(D + 4);
        }
        static const char *const what[3] = {"", "consumer ", "publication "};
        snprintf(op.shape, sizeof op.shape, "%sB=%lld ctx=%lld%s next_n=%lld H=%lld D=%lld k=%lld%s block=%lld%s",
                 what[phase], (long long)B, (long long)ctx, mixed ? " (mixed)" : "", (long long)next_n, (long long)H,
                 (long long)D, pub ? (long long)nblk : (long long)k, phase == 1 ? " of listed blocks" : "",
                 (long long)block, physical && !pub ? " physical" : "");
        exit_code = bench_all(&env, &op);
        if (exit_code != CLI_EXIT_OK) break;
    }
    if (st) fprintf(stderr, "litetopk %s: %s\n", cmd, tool_last_error());
    devmem_free(dev, b.cache), devmem_free(dev, b.table), devmem_free(dev, b.lens), devmem_free(dev, b.q);
    devmem_free(dev, b.weights), devmem_free(dev, bc->out_idx), devmem_free(dev, bc->out_scores);
    devmem_free(dev, lists);
    return exit_code;
}
