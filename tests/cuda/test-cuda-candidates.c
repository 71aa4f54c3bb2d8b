/* GPU candidate indexer (src/cuda/candidates.cu on the indexer's kernels) against the CPU backend,
 * whose operations test-candidates checks against a brute force.
 *   test-cuda-candidates            every test, each in its own process
 *   test-cuda-candidates --small    the small cases (for compute-sanitizer)
 * Inputs are FP8 codes of powers of two (+-1/2, 1, 2), weights in quarters, scales powers of two:
 * every partial sum of a score is exact in fp32 in any order, so the GPU (tensor-core and portable
 * kernels alike) must give the CPU's bits, ties included, and ties are frequent. Some keys hold a
 * NaN element (their scores are NaN and rank last; a block of them only is NaN). Poisoned outputs;
 * every flag, the pinned newest block, ranges straddling blocks, lists in any order with repeats,
 * -1 padding and ids past the keys; block sizes 8 and 16 (the sm_90a block maxima by plain stores)
 * and 4 and 32 (by atomics; the consumer's blocks of 4 take the portable kernel), D = 64 (the
 * portable kernel throughout). Also on the GPU: fused == materialize bit for bit, and a consumer
 * listing every block of each row returns ltk_indexer_topk's bits. */
#include "gpu-util.h"
#include "../paged-cache.h"
#include "ltk-tune.h" /* ltk_tune_set: the publication's sub-chunks */

typedef struct prob {
    int64_t T, S;
    int H, D;
    uint8_t *q, *kv;
    float *scale, *w;
    int32_t *ks, *ke;
    uint8_t *d_q, *d_kv;
    float *d_scale, *d_w;
    int32_t *d_ks, *d_ke;
} prob;

static uint8_t pow2_code(void) { return (uint8_t)((rng_below(2) << 7) | ((6 + rng_below(3)) << 3)); }

/* range_mode 0: random [a, b); 1: every row [0, S); 2: causal-like ends near S with random starts */
static void prob_make(prob *p, int64_t T, int64_t S, int H, int D, int range_mode, int nan_keys) {
    memset(p, 0, sizeof *p);
    p->T = T, p->S = S, p->H = H, p->D = D;
    const size_t qn = (size_t)(T * H * D), kn = (size_t)(S * D);
    p->q = malloc(qn + 1), p->kv = malloc(kn + 1);
    p->scale = malloc(sizeof(float) * (size_t)(S + 1)), p->w = malloc(sizeof(float) * (size_t)(T * H + 1));
    p->ks = malloc(sizeof(int32_t) * (size_t)(T + 1)), p->ke = malloc(sizeof(int32_t) * (size_t)(T + 1));
    for (size_t i = 0; i < qn; i++) p->q[i] = pow2_code();
    for (size_t i = 0; i < kn; i++) p->kv[i] = pow2_code();
    for (int64_t s = 0; s < S; s++) {
        p->scale[s] = ldexpf(1.0f, (int)rng_range(-2, 2));
        if (nan_keys && rng_below(29) == 0) p->kv[s * D + rng_below(D)] = 0x7f; /* a NaN element */
    }
    if (nan_keys && S >= 64) /* one block of NaN keys only (blocks of up to 32) */
        for (int64_t s = 32; s < 64; s++) p->kv[s * D] = 0x7f;
    for (int64_t i = 0; i < T * H; i++) p->w[i] = (float)rng_range(-2, 2) * 0.25f;
    for (int64_t t = 0; t < T; t++) {
        int64_t a = rng_below(S + 1), b = rng_below(S + 1);
        if (a > b) { int64_t x = a; a = b; b = x; }
        if (range_mode == 1) a = 0, b = S;
        if (range_mode == 2) b = S - rng_below(S / 8 + 1), a = rng_below(b / 2 + 1);
        if (rng_below(5) == 0) a = 0;
        p->ks[t] = (int32_t)a, p->ke[t] = (int32_t)b;
    }
    p->d_q = gu_upload(p->q, qn), p->d_kv = gu_upload(p->kv, kn);
    p->d_scale = gu_upload(p->scale, sizeof(float) * (size_t)S), p->d_w = gu_upload(p->w, sizeof(float) * (size_t)(T * H));
    p->d_ks = gu_upload(p->ks, sizeof(int32_t) * (size_t)T), p->d_ke = gu_upload(p->ke, sizeof(int32_t) * (size_t)T);
}

static void prob_free(prob *p) {
    free(p->q), free(p->kv), free(p->scale), free(p->w), free(p->ks), free(p->ke);
    cudaFree(p->d_q), cudaFree(p->d_kv), cudaFree(p->d_scale), cudaFree(p->d_w), cudaFree(p->d_ks), cudaFree(p->d_ke);
}

static ltk_indexer_args ix_of(const prob *p, int dev, int32_t k, int32_t *oi, float *os, uint32_t flags) {
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = p->T, a.S = p->S, a.H = p->H, a.D = p->D, a.k = k, a.dtype = LTK_DTYPE_E4M3;
    a.q = dev ? p->d_q : p->q, a.kv = dev ? p->d_kv : p->kv, a.kv_scale = dev ? p->d_scale : p->scale;
    a.weights = dev ? p->d_w : p->w, a.ks = dev ? p->d_ks : p->ks, a.ke = dev ? p->d_ke : p->ke;
    a.out_idx = oi, a.out_scores = os, a.flags = flags;
    return a;
}

/* Host or device buffers of n int32 and n floats, poisoned. */
typedef struct outs { int32_t *i; float *s; size_t n; int dev; } outs;
static outs outs_make(size_t n, int dev) {
    outs o = {NULL, NULL, n, dev};
    if (dev) {
        o.i = gu_alloc(4 * n), o.s = gu_alloc(4 * n);
        GPU_CHECK(cudaMemset(o.i, 0x7b, 4 * n));
        GPU_CHECK(cudaMemset(o.s, 0x7b, 4 * n));
    } else {
        o.i = malloc(4 * n), o.s = malloc(4 * n);
        memset(o.i, 0x7b, 4 * n), memset(o.s, 0x7b, 4 * n);
    }
    return o;
}
/* The outputs on the host (device buffers copied and freed). */
static void outs_host(outs *o) {
    if (!o->dev) return;
    int32_t *i = malloc(4 * o->n);
    float *s = malloc(4 * o->n);
    GPU_CHECK(cudaMemcpy(i, o->i, 4 * o->n, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(s, o->s, 4 * o->n, cudaMemcpyDeviceToHost));
    cudaFree(o->i), cudaFree(o->s);
    o->i = i, o->s = s, o->dev = 0;
}
static void outs_free(outs *o) { free(o->i), free(o->s); }

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Rows of width k at stride ld, bit for bit; as sets where `unsorted` (the scores then not compared,
 * as their order follows the ids'). */
static int same_rows(const char *what, int64_t T, int32_t k, int64_t ld, const int32_t *gi, const float *gs,
                     const int32_t *ci, const float *cs, int unsorted) {
    int32_t *a = malloc(4 * (size_t)k), *b = malloc(4 * (size_t)k);
    int ok = 1;
    for (int64_t t = 0; t < T && ok; t++) {
        memcpy(a, gi + t * ld, 4 * (size_t)k), memcpy(b, ci + t * ld, 4 * (size_t)k);
        if (unsorted) qsort(a, (size_t)k, 4, cmp_i32), qsort(b, (size_t)k, 4, cmp_i32);
        for (int32_t j = 0; j < k && ok; j++) {
            ok = CHECK(a[j] == b[j], "%s: row %lld slot %d: gpu %d, cpu %d", what, (long long)t, j, a[j], b[j]);
            if (ok && gs && !unsorted)
                ok = CHECK(t_same_f32(gs[t * ld + j], cs[t * ld + j]), "%s: row %lld slot %d (id %d): gpu %.9g, cpu %.9g",
                           what, (long long)t, j, a[j], (double)gs[t * ld + j], (double)cs[t * ld + j]);
        }
    }
    free(a), free(b);
    return ok;
}

/* ---- ltk_blocks_topk ---------------------------------------------------------------------------- */
static void blocks_run(const prob *p, int dev, int32_t b, int32_t bk, int32_t k, uint32_t flags, int scores,
                       outs *ob, outs *oi) {
    const int64_t bstride = bk + 5;
    *ob = outs_make((size_t)(p->T * bstride + 1), dev);
    *oi = outs_make((size_t)(p->T * (k + 2) + 1), dev);
    ltk_blocks_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(p, dev, k, k ? oi->i : NULL, k && scores ? oi->s : NULL, flags);
    a.ix.out_stride = k + 2;
    a.block_size = b, a.block_k = bk, a.out_blocks = ob->i, a.out_block_scores = scores ? ob->s : NULL;
    a.blocks_stride = bstride;
    ltk_exec e = {.backend = dev ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU, .algo = LTK_ALGO_FUSED};
    ltk_status st = ltk_blocks_topk(&a, &e);
    CHECK(st == LTK_OK, "blocks on %s: %s: %s", dev ? "cuda" : "cpu", ltk_status_str(st), ltk_last_error());
    if (dev) GPU_CHECK(cudaDeviceSynchronize());
    outs_host(ob), outs_host(oi);
}

static void blocks_case(const prob *p, int32_t b, int32_t bk, int32_t k, uint32_t flags, int scores) {
    test_ctx("blocks T=%lld S=%lld H=%d D=%d b=%d block_k=%d k=%d flags=0x%x scores=%d", (long long)p->T,
             (long long)p->S, p->H, p->D, b, bk, k, flags, scores);
    outs gb, gi, cb, ci;
    blocks_run(p, 1, b, bk, k, flags, scores, &gb, &gi);
    blocks_run(p, 0, b, bk, k, flags, scores, &cb, &ci);
    const int uns = (flags & LTK_FLAG_UNSORTED) && !(flags & LTK_FLAG_BY_INDEX);
    /* (a pinned row's first entry stays first when unsorted: compared as a set all the same) */
    if (same_rows("block ids", p->T, bk, bk + 5, gb.i, scores ? gb.s : NULL, cb.i, scores ? cb.s : NULL, uns) && k)
        same_rows("keys", p->T, k, k + 2, gi.i, scores ? gi.s : NULL, ci.i, scores ? ci.s : NULL, uns);
    for (int64_t t = 0; t < p->T && scores; t++) /* the padding past block_k untouched */
        if (!CHECK(gb.i[t * (bk + 5) + bk] == 0x7b7b7b7b, "row %lld: written past block_k", (long long)t)) break;
    outs_free(&gb), outs_free(&gi), outs_free(&cb), outs_free(&ci);
}

/* ---- ltk_candidates_topk ------------------------------------------------------------------------ */
/* Ascending ids, -1 (any negative) last. */
static int cmp_listed(const void *a, const void *b) {
    const uint32_t x = (uint32_t)*(const int32_t *)a, y = (uint32_t)*(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Lists of n ids a row (every third row ascending, as a publication's BY_INDEX output): mostly blocks of the row's range in random order, with repeats, -1, ids past
 * the keys and blocks outside the range mixed in. */
static int32_t *make_lists(const prob *p, int32_t b, int32_t n, int64_t ld) {
    int32_t *l = malloc(sizeof(int32_t) * (size_t)(p->T * ld + 1));
    const int64_t nbk = (p->S + b - 1) / b;
    for (int64_t t = 0; t < p->T; t++) {
        const int64_t lo = p->ks[t] / b, hi = p->ke[t] > p->ks[t] ? (p->ke[t] - 1) / b + 1 : lo + 1;
        for (int32_t i = 0; i < n; i++) {
            const int64_t u = rng_below(20);
            int64_t id = lo + rng_below(hi - lo);
            if (u == 0) id = -1;
            else if (u == 1) id = nbk + rng_below(3);
            else if (u == 2) id = rng_below(nbk);
            else if (u == 3 && i > 0) id = l[t * ld + i - 1];
            l[t * ld + i] = (int32_t)id;
        }
        if (t % 3 == 0) qsort(l + t * ld, (size_t)n, sizeof(int32_t), cmp_listed); /* a publication's order */
        for (int64_t i = n; i < ld; i++) l[t * ld + i] = -7; /* past n_blocks: not read */
    }
    return l;
}

static void cand_run(const prob *p, int dev, const int32_t *lists, int32_t b, int32_t n, int64_t ld, int32_t k,
                     uint32_t flags, int scores, ltk_algo algo, outs *oi) {
    *oi = outs_make((size_t)(p->T * (k + 3) + 1), dev);
    int32_t *dl = dev ? gu_upload(lists, sizeof(int32_t) * (size_t)(p->T * ld)) : NULL;
    ltk_candidates_args a;
    memset(&a, 0, sizeof a);
    a.ix = ix_of(p, dev, k, oi->i, scores ? oi->s : NULL, flags);
    a.ix.out_stride = k + 3;
    a.block_size = b, a.n_blocks = n, a.blocks = dev ? dl : lists, a.blocks_stride = ld;
    ltk_exec e = {.backend = dev ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU, .algo = algo};
    ltk_status st = ltk_candidates_topk(&a, &e);
    CHECK(st == LTK_OK, "candidates on %s: %s: %s", dev ? "cuda" : "cpu", ltk_status_str(st), ltk_last_error());
    if (dev) GPU_CHECK(cudaDeviceSynchronize());
    cudaFree(dl);
    outs_host(oi);
}

static void cand_case(const prob *p, int32_t b, int32_t n, int32_t k, uint32_t flags, int scores) {
    test_ctx("candidates T=%lld S=%lld H=%d D=%d b=%d n_blocks=%d k=%d flags=0x%x scores=%d", (long long)p->T,
             (long long)p->S, p->H, p->D, b, n, k, flags, scores);
    const int64_t ld = n + 2;
    int32_t *lists = make_lists(p, b, n, ld);
    outs g, m, c;
    cand_run(p, 1, lists, b, n, ld, k, flags, scores, LTK_ALGO_FUSED, &g);
    cand_run(p, 1, lists, b, n, ld, k, flags, scores, LTK_ALGO_MATERIALIZE, &m);
    cand_run(p, 0, lists, b, n, ld, k, flags, scores, LTK_ALGO_FUSED, &c);
    const int uns = (flags & LTK_FLAG_UNSORTED) && !(flags & LTK_FLAG_BY_INDEX);
    if (same_rows("cuda vs cpu", p->T, k, k + 3, g.i, scores ? g.s : NULL, c.i, scores ? c.s : NULL, uns))
        same_rows("fused vs materialize", p->T, k, k + 3, g.i, scores ? g.s : NULL, m.i, scores ? m.s : NULL, uns);
    free(lists), outs_free(&g), outs_free(&m), outs_free(&c);
}

/* Every block of each row listed (in reverse, some twice): the row's ordinary top-k on the GPU. */
static void cand_all_case(const prob *p, int32_t b, int32_t k, uint32_t flags) {
    test_ctx("candidates listing all T=%lld S=%lld H=%d b=%d k=%d flags=0x%x", (long long)p->T, (long long)p->S, p->H,
             b, k, flags);
    const int32_t n = (int32_t)((p->S + b - 1) / b + 8);
    int32_t *lists = malloc(sizeof(int32_t) * (size_t)(p->T * n));
    for (int64_t t = 0; t < p->T; t++)
        for (int32_t i = 0; i < n; i++) lists[t * n + i] = i < n - 8 ? n - 9 - i : (int32_t)rng_below(n - 8);
    outs g, x = outs_make((size_t)(p->T * (k + 3) + 1), 1);
    cand_run(p, 1, lists, b, n, n, k, flags, 1, LTK_ALGO_FUSED, &g);
    ltk_indexer_args a = ix_of(p, 1, k, x.i, x.s, flags);
    a.out_stride = k + 3;
    ltk_exec e = {.backend = LTK_BACKEND_CUDA, .algo = LTK_ALGO_FUSED};
    ltk_status st = ltk_indexer_topk(&a, &e);
    CHECK(st == LTK_OK, "indexer: %s", ltk_last_error());
    GPU_CHECK(cudaDeviceSynchronize());
    outs_host(&x);
    same_rows("all blocks listed vs the indexer", p->T, k, k + 3, g.i, g.s, x.i, x.s, (flags & LTK_FLAG_UNSORTED) != 0);
    free(lists), outs_free(&g), outs_free(&x);
}

static const uint32_t blk_flags[] = {0, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX, LTK_FLAG_PIN_NEWEST,
                                     LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX, LTK_FLAG_ABSOLUTE | LTK_FLAG_UNSORTED};
static const uint32_t cand_flags[] = {0, LTK_FLAG_ABSOLUTE, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX,
                                      LTK_FLAG_ABSOLUTE | LTK_FLAG_BY_INDEX};

static void cand_small(void) {
    const int shapes[][2] = {{64, 128}, {32, 128}, {16, 128}, {64, 64}}; /* H, D (D = 64: portable) */
    const int32_t bs[] = {8, 16, 4, 32};
    for (int si = 0; si < 4; si++) {
        prob p;
        prob_make(&p, 37, 3000, shapes[si][0], shapes[si][1], 0, 1);
        for (int bi = 0; bi < 4; bi++) {
            if (si > 0 && bi > 1) continue;
            for (size_t f = 0; f < sizeof blk_flags / sizeof *blk_flags; f++) {
                blocks_case(&p, bs[bi], 64, f % 2 ? 0 : 50, blk_flags[f], (int)(f + bi) % 2);
                blocks_case(&p, bs[bi], 700, 3000, blk_flags[f], (int)(f + bi + 1) % 2); /* short rows whole */
            }
            for (size_t f = 0; f < sizeof cand_flags / sizeof *cand_flags; f++) {
                cand_case(&p, bs[bi], 48, 100, cand_flags[f], (int)(f + bi) % 2);
                cand_case(&p, bs[bi], 200, 40, cand_flags[f], (int)(f + bi + 1) % 2);
            }
        }
        prob_free(&p);
    }
    prob p;
    prob_make(&p, 9, 2000, 64, 128, 1, 1);
    cand_all_case(&p, 8, 256, 0);
    cand_all_case(&p, 16, 256, LTK_FLAG_UNSORTED);
    prob_free(&p);
}

/* Long rows: the scan's row splits, the sub-chunks' select, the consumer's dense windows. */
static void cand_full(void) {
    prob p;
    prob_make(&p, 300, 70000, 64, 128, 2, 1);
    blocks_case(&p, 8, 512, 2048, 0, 1);
    blocks_case(&p, 8, 512, 0, LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX, 0);
    blocks_case(&p, 16, 256, 0, LTK_FLAG_UNSORTED, 1);
    blocks_case(&p, 4, 1024, 0, 0, 1);
    cand_case(&p, 8, 512, 2048, 0, 1);
    cand_case(&p, 16, 256, 2048, LTK_FLAG_UNSORTED, 0);
    cand_case(&p, 8, 4096, 2048, LTK_FLAG_BY_INDEX, 1);
    prob_free(&p);
    prob_make(&p, 2100, 9000, 64, 128, 2, 0); /* > 2048 rows: several units a row group */
    blocks_case(&p, 8, 128, 512, LTK_FLAG_PIN_NEWEST, 1);
    cand_case(&p, 8, 128, 512, 0, 1);
    prob_free(&p);
    prob_make(&p, 5, 300000, 64, 128, 1, 0); /* few rows, long: many splits a row */
    blocks_case(&p, 8, 2048, 2048, 0, 1);
    blocks_case(&p, 16, 2048, 0, LTK_FLAG_BY_INDEX, 1);
    prob_free(&p);
}

/* The publication's sub-chunks of rows (the test hook ltk_tune.cuda_blk_rows): with the row's
 * ordinary top-k, each sub-chunk is an indexer call on its slice of the rows that writes the block
 * maxima from the same scans; both outputs must not depend on where the slices fall. */
static void dec_blocks_case(int B, int next_n, int block_kv, int D, int max_len, int32_t b, int32_t bk, int32_t k,
                            uint32_t flags, int scores);
static void cand_slices(void) {
    const ltk_tune saved = *ltk_tune_get();
    ltk_tune t = saved;
    t.cuda_blk_rows = 64;
    ltk_tune_set(&t);
    prob p;
    prob_make(&p, 300, 20000, 64, 128, 2, 1); /* fused filter (T < 1,024), five sub-chunks */
    blocks_case(&p, 8, 256, 1024, 0, 1);
    blocks_case(&p, 16, 128, 512, LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX, 0);
    prob_free(&p);
    t.cuda_blk_rows = 700;
    ltk_tune_set(&t);
    prob_make(&p, 2100, 9000, 64, 128, 2, 0); /* dense windows for fused (T >= 1,024 a slice) */
    blocks_case(&p, 8, 128, 512, LTK_FLAG_UNSORTED, 0);
    prob_free(&p);
    prob_make(&p, 41, 3000, 32, 64, 0, 1); /* the portable scan (D = 64): block maxima by atomics */
    t.cuda_blk_rows = 16;
    ltk_tune_set(&t);
    blocks_case(&p, 8, 64, 50, 0, 1);
    blocks_case(&p, 4, 700, 3000, LTK_FLAG_UNSORTED, 0); /* every row short */
    prob_free(&p);
    t.cuda_blk_rows = 3; /* decode: whole requests of next_n 2 a sub-chunk */
    ltk_tune_set(&t);
    dec_blocks_case(5, 2, 64, 128, 5000, 8, 128, 64, LTK_FLAG_PHYSICAL, 1);
    dec_blocks_case(5, 2, 64, 128, 5000, 16, 128, 64, LTK_FLAG_PHYSICAL | LTK_FLAG_BY_INDEX, 0);
    ltk_tune_set(&saved);
}

/* ---- the decode forms (ltk_decode_blocks_topk, ltk_decode_candidates_topk) over a paged cache - */
/* The cache of paged-cache.h with keys of powers of two (every score exact in fp32, as above), the
 * CUDA calls against the CPU's, bit for bit: the publication, then the consumer of the CPU's lists
 * (mutilated). D = 128: the sm_90a scans (the publication's portable where block_kv < 32); D = 64:
 * the portable ones. */
/* The decode call's inputs on the host or the device (the outputs left to the caller). */
typedef struct dec_in {
    int B, next_n, H, D, block_kv, max_blocks, max_len;
    int64_t num_blocks;
    const uint8_t *q[2], *cache[2];
    const int32_t *table[2], *lens[2];
    const float *w[2];
} dec_in;
static ltk_decode_args dec_args(const dec_in *in, int dev, int32_t k, uint32_t flags) {
    ltk_decode_args d;
    memset(&d, 0, sizeof d);
    d.B = in->B, d.next_n = in->next_n, d.H = in->H, d.D = in->D, d.k = k, d.dtype = LTK_DTYPE_E4M3;
    d.q = in->q[dev], d.kv_cache = in->cache[dev], d.num_blocks = in->num_blocks, d.block_kv = in->block_kv;
    d.block_table = in->table[dev], d.max_blocks = in->max_blocks, d.lens = in->lens[dev], d.max_len = in->max_len;
    d.weights = in->w[dev], d.flags = flags;
    return d;
}

static void dec_blocks_case(int B, int next_n, int block_kv, int D, int max_len, int32_t b, int32_t bk, int32_t k,
                            uint32_t flags, int scores) {
    test_ctx("decode forms B=%d next_n=%d block_kv=%d D=%d max_len=%d b=%d block_k=%d k=%d flags=0x%x scores=%d", B,
             next_n, block_kv, D, max_len, b, bk, k, flags, scores);
    const int H = 64;
    const int64_t rows = (int64_t)B * next_n;
    const int max_blocks = (max_len + block_kv - 1) / block_kv;
    const int64_t num_blocks = (int64_t)B * max_blocks + 3, bstride = (int64_t)block_kv * (D + 4);
    uint8_t *cache = malloc((size_t)(num_blocks * bstride));
    pc_fill_blocks(cache, num_blocks, bstride, block_kv, D, 0, 1, 0); /* (its scales: powers of two) */
    for (int64_t blk = 0; blk < num_blocks; blk++) /* keys of +-1/2, 1, 2: exact scores, as above */
        for (int64_t x = 0; x < (int64_t)block_kv * D; x++) cache[blk * bstride + x] = pow2_code();
    int32_t *table = pc_table(B, max_blocks, num_blocks, max_blocks);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)rows), *seq = malloc(sizeof(int32_t) * (size_t)B);
    pc_lens(B, next_n, 0, k > 0 ? k : 8, max_len, seq, lens);
    uint8_t *q = malloc((size_t)(rows * H * D));
    for (int64_t x = 0; x < rows * H * D; x++) q[x] = pow2_code();
    float *w = malloc(sizeof(float) * (size_t)(rows * H));
    for (int64_t x = 0; x < rows * H; x++) w[x] = (float)rng_range(-2, 2) * 0.25f;
    uint8_t *d_cache = gu_upload(cache, (size_t)(num_blocks * bstride)), *d_q = gu_upload(q, (size_t)(rows * H * D));
    int32_t *d_table = gu_upload(table, sizeof(int32_t) * (size_t)(B * max_blocks + 1));
    int32_t *d_lens = gu_upload(lens, sizeof(int32_t) * (size_t)rows);
    float *d_w = gu_upload(w, sizeof(float) * (size_t)(rows * H));
    const dec_in in = {B, next_n, H, D, block_kv, max_blocks, max_len, num_blocks, {q, d_q}, {cache, d_cache},
                       {table, d_table}, {lens, d_lens}, {w, d_w}};
    outs gb[2], gi[2];
    for (int dev = 0; dev < 2; dev++) {
        gb[dev] = outs_make((size_t)(rows * (bk + 2) + 1), dev);
        gi[dev] = outs_make((size_t)(rows * (k + 1) + 1), dev);
        ltk_decode_blocks_args a;
        memset(&a, 0, sizeof a);
        ltk_decode_args *d = &a.dx;
        *d = dec_args(&in, dev, k, flags);
        d->out_idx = k ? gi[dev].i : NULL, d->out_scores = k && scores ? gi[dev].s : NULL, d->out_stride = k ? k + 1 : 0;
        a.block_size = b, a.block_k = bk, a.out_blocks = gb[dev].i, a.out_block_scores = scores ? gb[dev].s : NULL;
        a.blocks_stride = bk + 2;
        ltk_exec e = {.backend = dev ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU, .algo = LTK_ALGO_FUSED};
        ltk_status st = ltk_decode_blocks_topk(&a, &e);
        CHECK(st == LTK_OK, "decode blocks on %s: %s", dev ? "cuda" : "cpu", ltk_last_error());
        if (dev) GPU_CHECK(cudaDeviceSynchronize());
        outs_host(&gb[dev]), outs_host(&gi[dev]);
    }
    const int uns = (flags & LTK_FLAG_UNSORTED) && !(flags & LTK_FLAG_BY_INDEX);
    if (same_rows("decode block ids", rows, bk, bk + 2, gb[1].i, scores ? gb[1].s : NULL, gb[0].i, scores ? gb[0].s : NULL,
                  uns) && k)
        same_rows("decode keys", rows, k, k + 1, gi[1].i, scores ? gi[1].s : NULL, gi[0].i, scores ? gi[0].s : NULL, uns);
    /* the consumer of the CPU's published lists, some ids replaced by -1, repeats and ids past the keys */
    if (k) {
        const int64_t nbk = (max_len + b - 1) / b;
        for (int64_t x = 0; x < rows * (bk + 2); x++) {
            const int64_t u = rng_below(16);
            if (u == 0) gb[0].i[x] = -1;
            else if (u == 1) gb[0].i[x] = (int32_t)(nbk + rng_below(3));
            else if (u == 2 && x > 0) gb[0].i[x] = gb[0].i[x - 1];
        }
        int32_t *d_lists = gu_upload(gb[0].i, sizeof(int32_t) * (size_t)(rows * (bk + 2)));
        outs ci[2];
        for (int dev = 0; dev < 2; dev++) {
            ci[dev] = outs_make((size_t)(rows * (k + 1) + 1), dev);
            ltk_decode_candidates_args c;
            memset(&c, 0, sizeof c);
            ltk_decode_args *d = &c.dx;
            *d = dec_args(&in, dev, k, flags & ~LTK_FLAG_PIN_NEWEST);
            d->out_idx = ci[dev].i, d->out_scores = scores ? ci[dev].s : NULL, d->out_stride = k + 1;
            c.block_size = b, c.n_blocks = bk, c.blocks = dev ? d_lists : gb[0].i, c.blocks_stride = bk + 2;
            ltk_exec e = {.backend = dev ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU, .algo = LTK_ALGO_FUSED};
            ltk_status st = ltk_decode_candidates_topk(&c, &e);
            CHECK(st == LTK_OK, "decode candidates on %s: %s", dev ? "cuda" : "cpu", ltk_last_error());
            if (dev) GPU_CHECK(cudaDeviceSynchronize());
            outs_host(&ci[dev]);
        }
        same_rows("decode candidates", rows, k, k + 1, ci[1].i, scores ? ci[1].s : NULL, ci[0].i, scores ? ci[0].s : NULL,
                  uns);
        for (int dev = 0; dev < 2; dev++) outs_free(&ci[dev]);
        cudaFree(d_lists);
    }
    for (int dev = 0; dev < 2; dev++) outs_free(&gb[dev]), outs_free(&gi[dev]);
    cudaFree(d_cache), cudaFree(d_q), cudaFree(d_table), cudaFree(d_lens), cudaFree(d_w);
    free(cache), free(table), free(lens), free(seq), free(q), free(w);
}

static void cand_decode(void) {
    static const uint32_t fl[] = {0, LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX, LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX,
                                  LTK_FLAG_PHYSICAL | LTK_FLAG_BY_INDEX, LTK_FLAG_PHYSICAL | LTK_FLAG_PIN_NEWEST};
    for (int f = 0; f < 6; f++) {
        dec_blocks_case(5, 1, 64, 128, 3000, 8, 64, f % 2 ? 0 : 100, fl[f], f % 2 == 0);
        dec_blocks_case(3, 2, 64, 128, 5000, 16, 128, 64, fl[f], f % 2);
        dec_blocks_case(4, 1, 16, 128, 1500, 8, 40, 32, fl[f], 1); /* 16-token pages */
        dec_blocks_case(3, 2, 32, 64, 1200, 8, 30, 40, fl[f], f % 2); /* D = 64: the portable kernel */
    }
    dec_blocks_case(2, 4, 64, 128, 70000, 8, 2048, 512, LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX, 1); /* long: splits */
}

static const t_test tests[] = {T_ENTRY(cand_small), T_ENTRY(cand_full), T_ENTRY(cand_decode), T_ENTRY(cand_slices)};

int main(int argc, char **argv) {
    char small[] = "small";
    if (argc > 1 && !strcmp(argv[1], "--small")) argv[1] = small;
    return T_RUN_ISOLATED(tests, 900, gu_no_cuda);
}
