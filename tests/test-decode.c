/* test-decode: ltk_decode_topk over a paged cache on every host backend.
 *
 * The oracle here is a brute force written from the header alone (keys, scales and positions read
 * through the page table from the block layout, float64 scores, a full sort by the ORDER). Inputs
 * are drawn on dyadic grids (e4m3 codes of a narrow exponent range, weights of quarter steps,
 * power-of-two scales) so every score is exact in float32 as in float64: the ref and the CPU
 * backends must then match the brute force bit for bit, ties included. A realistic shape (H = 64,
 * D = 128, unrestricted codes) is compared within a stated tolerance instead. Every case also
 * checks: CPU fused == materialize bit for bit, physical slots == the table's mapping of the logical
 * positions, lens == the seq_lens convention, the unsorted set == the sorted set, the short-row rule,
 * outputs written inside their canaries only, and a workspace that does not depend on the lengths. */
#include "harness.h"

#include "decode.h"
#include "paged-cache.h"
#include "litetopk.h"

#include <stdlib.h>

enum { POISON = 0x7b };

typedef struct dcase {
    int B, next_n, H, D, k, block_kv, pad; /* pad: extra bytes a block (a multiple of 4) */
    int len_mode;                          /* 0 random in [0, max], 1 edges around k, 2 equal */
    int max_len;
    int grid;                              /* 1: dyadic grid (exact); 0: free codes (tolerance) */
    int special;                           /* 1: NaN/inf scales and NaN keys mixed in */
    ltk_dtype dtype;                       /* of q */
} dcase;

typedef struct dprob {
    dcase c;
    int64_t num_blocks, block_stride;
    int max_blocks;
    uint8_t *cache;
    int32_t *table, *lens, *seq_lens;
    void *q;
    float *w;
} dprob;

static void prob_make(const dcase *c, dprob *p) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->max_blocks = (c->max_len + c->block_kv - 1) / c->block_kv + (int)rng_below(2);
    p->num_blocks = (int64_t)c->B * p->max_blocks + 3;
    p->block_stride = (int64_t)c->block_kv * (c->D + 4) + c->pad;
    p->cache = malloc((size_t)(p->num_blocks * p->block_stride));
    pc_fill_blocks(p->cache, p->num_blocks, p->block_stride, c->block_kv, c->D, c->pad, c->grid, c->special);
    p->table = pc_table(c->B, p->max_blocks, p->num_blocks, p->max_blocks + 1); /* a row stride wider than the table */
    p->lens = malloc(sizeof(int32_t) * (size_t)(c->B * c->next_n));
    p->seq_lens = malloc(sizeof(int32_t) * (size_t)c->B);
    pc_lens(c->B, c->next_n, c->len_mode, c->k, c->max_len, p->seq_lens, p->lens);
    const int64_t rows = (int64_t)c->B * c->next_n, qn = rows * c->H * c->D;
    p->q = malloc((size_t)qn * ltk_dtype_size(c->dtype));
    for (int64_t x = 0; x < qn; x++) {
        uint8_t code = c->grid ? pc_grid_code() : pc_free_code();
        if (c->dtype == LTK_DTYPE_E4M3) ((uint8_t *)p->q)[x] = code;
        else if (c->dtype == LTK_DTYPE_F32) ((float *)p->q)[x] = (float)dec_e4m3(code);
        else { /* bf16: the e4m3 value, exact */
            float v = (float)dec_e4m3(code);
            ((uint16_t *)p->q)[x] = (uint16_t)(t_f32_bits(v) >> 16);
        }
    }
    p->w = malloc(sizeof(float) * (size_t)(rows * c->H));
    for (int64_t x = 0; x < rows * c->H; x++)
        p->w[x] = c->grid ? (float)rng_range(-8, 8) * 0.25f : (float)(rng_normal() * 0.1);
}

static void prob_free(dprob *p) {
    free(p->cache), free(p->table), free(p->lens), free(p->seq_lens), free(p->q), free(p->w);
}

static ltk_decode_args prob_args(const dprob *p, int32_t *idx, float *sc, uint32_t flags) {
    const dcase *c = &p->c;
    ltk_decode_args a = {.B = c->B, .next_n = c->next_n, .H = c->H, .D = c->D, .k = c->k, .dtype = c->dtype,
                         .q = p->q, .kv_cache = p->cache, .num_blocks = p->num_blocks, .block_kv = c->block_kv,
                         .block_stride = p->block_stride, .block_table = p->table, .bt_stride = p->max_blocks + 1,
                         .max_blocks = p->max_blocks, .lens = p->lens, .max_len = c->max_len, .weights = p->w,
                         .out_idx = idx, .out_scores = sc, .flags = flags};
    return a;
}

/* ---- the brute force ------------------------------------------------------------------------ */
typedef struct { double s; int32_t i; } bent;

static int bent_cmp(const void *x, const void *y) {
    const bent *a = x, *b = y;
    int na = isnan(a->s), nb = isnan(b->s);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static double q_at(const dprob *p, int64_t x) {
    switch (p->c.dtype) {
    case LTK_DTYPE_E4M3: return dec_e4m3(((const uint8_t *)p->q)[x]);
    case LTK_DTYPE_F32: return ((const float *)p->q)[x];
    default: return dec_bf16(((const uint16_t *)p->q)[x]);
    }
}

/* Row t's entries, sorted; *bound = an upper bound on the rounding of any score (for tolerances). */
static int32_t brute_row(const dprob *p, int64_t t, bent *out, double *bound) {
    const dcase *c = &p->c;
    const int64_t b = t / c->next_n;
    const int32_t len = p->lens[t];
    *bound = 0;
    for (int32_t i = 0; i < len; i++) {
        const int32_t blk = p->table[b * (p->max_blocks + 1) + i / c->block_kv];
        const uint8_t *base = p->cache + blk * p->block_stride;
        const uint8_t *key = base + (i % c->block_kv) * c->D;
        const double scale = ((const float *)(base + c->block_kv * c->D))[i % c->block_kv];
        double acc = 0, mag = 0;
        for (int h = 0; h < c->H; h++) {
            double dot = 0, am = 0;
            for (int d = 0; d < c->D; d++) {
                double qv = q_at(p, (t * c->H + h) * c->D + d), kv = dec_e4m3(key[d]);
                dot += qv * kv, am += fabs(qv * kv);
            }
            double w = p->w[t * c->H + h];
            acc += w * (dot > 0 ? dot : (isnan(dot) ? dot : 0.0));
            mag += fabs(w) * am;
        }
        out[i].s = acc * scale;
        out[i].i = i;
        if (isfinite(mag * scale) && fabs(mag * scale) > *bound) *bound = fabs(mag * scale);
    }
    qsort(out, (size_t)len, sizeof *out, bent_cmp);
    return len;
}

/* ---- checks ---------------------------------------------------------------------------------- */
static int run(const dprob *p, ltk_backend be, ltk_algo algo, uint32_t flags, int with_scores, int32_t **idx_out,
               float **sc_out) {
    const dcase *c = &p->c;
    const size_t n = (size_t)c->B * c->next_n * c->k;
    int32_t *idx = t_guarded_alloc(n * 4 + 4, 0);
    float *sc = with_scores ? t_guarded_alloc(n * 4 + 4, 0) : NULL;
    memset(idx, POISON, n * 4 + 4);
    if (sc) memset(sc, POISON, n * 4 + 4);
    ltk_decode_args a = prob_args(p, idx, sc, flags);
    ltk_stats stats; /* statistics on: their own code path (the CPU sums the chunks' counters) */
    memset(&stats, 0xab, sizeof stats);
    stats.row_candidates = NULL, stats.row_bin_entries = NULL;
    ltk_exec e = {.backend = be, .algo = algo, .stats = (flags & LTK_FLAG_PHYSICAL) ? &stats : NULL};
    size_t ws = 0;
    ltk_status st = ltk_decode_workspace_size(&a, &e, &ws);
    void *wbuf = NULL;
    if (st == LTK_OK && ws) {
        wbuf = malloc(ws);
        e.workspace = wbuf, e.workspace_bytes = ws;
    }
    if (st == LTK_OK) st = ltk_decode_topk(&a, &e);
    free(wbuf);
    CHECK(st == LTK_OK, "%s/%d: %s: %s", ltk_backend_name(be), (int)algo, ltk_status_str(st), ltk_last_error());
    CHECK(t_guarded_ok(idx) && (!sc || t_guarded_ok(sc)), "canaries around the outputs broken");
    if (e.stats && st == LTK_OK)
        CHECK(stats.rows == (int64_t)c->B * c->next_n && stats.fallback_rows >= 0 && stats.candidates >= 0,
              "statistics: rows %lld, fallback %lld", (long long)stats.rows, (long long)stats.fallback_rows);
    const uint8_t *tail = (const uint8_t *)idx + n * 4;
    CHECK(tail[0] == POISON && tail[3] == POISON, "a byte past the last row was written");
    *idx_out = idx, *sc_out = sc;
    return st == LTK_OK;
}

static void free_out(int32_t *idx, float *sc) { t_guarded_free(idx), t_guarded_free(sc); }

/* A sorted output with scores against the brute force: exact (grid) or within the rounding bound. */
static void check_sorted(const dprob *p, const int32_t *idx, const float *sc, const char *who) {
    const dcase *c = &p->c;
    bent *all = malloc(sizeof(bent) * (size_t)(c->max_len > 0 ? c->max_len : 1));
    for (int64_t t = 0; t < (int64_t)c->B * c->next_n; t++) {
        double bound;
        const int32_t len = brute_row(p, t, all, &bound);
        const int32_t *oi = idx + t * c->k;
        const float *os = sc + t * c->k;
        const int32_t want = len < c->k ? len : c->k;
        for (int32_t j = want; j < c->k; j++)
            if (!CHECK(oi[j] == -1 && isinf(os[j]) && os[j] < 0, "%s row %lld slot %d: padding %d / %g", who,
                       (long long)t, j, oi[j], (double)os[j]))
                break;
        if (c->grid) { /* exact: the same positions in the same order, the same score bits */
            for (int32_t j = 0; j < want; j++)
                if (!CHECK(oi[j] == all[j].i && t_same_f32(os[j], (float)all[j].s),
                           "%s row %lld slot %d: got %d (%g), want %d (%g)", who, (long long)t, j, oi[j], (double)os[j],
                           all[j].i, all[j].s))
                    break;
            continue;
        }
        /* tolerance: every returned position within tol of the k-th, every clearly better one returned */
        const double tol = 2e-6 * bound + 1e-30, kth = want > 0 ? all[want - 1].s : 0;
        char *seen = calloc((size_t)(len > 0 ? len : 1), 1);
        for (int32_t j = 0; j < want; j++) {
            if (!CHECK(oi[j] >= 0 && oi[j] < len && !seen[oi[j]], "%s row %lld slot %d: bad position %d", who,
                       (long long)t, j, oi[j]))
                break;
            seen[oi[j]] = 1;
        }
        for (int32_t j = 0; j < len; j++) {
            const bent *e = &all[j];
            if (isnan(kth) || isnan(e->s)) continue;
            if (e->s > kth + tol && !CHECK(seen[e->i], "%s row %lld: position %d (%g) above the k-th %g missing", who,
                                           (long long)t, e->i, e->s, kth))
                break;
        }
        free(seen);
    }
    free(all);
}

static void check_case(const dcase *c) {
    test_ctx("B=%d next_n=%d H=%d D=%d k=%d block_kv=%d pad=%d lens=%d max_len=%d grid=%d special=%d dtype=%d", c->B,
             c->next_n, c->H, c->D, c->k, c->block_kv, c->pad, c->len_mode, c->max_len, c->grid, c->special,
             (int)c->dtype);
    dprob p;
    prob_make(c, &p);
    const size_t n = (size_t)c->B * c->next_n * c->k;
    int32_t *ri, *ci, *mi, *pi, *ui, *si;
    float *rs, *cs, *ms, *ps, *us, *ss;
    if (!run(&p, LTK_BACKEND_REF, LTK_ALGO_FUSED, 0, 1, &ri, &rs)) goto out0;
    check_sorted(&p, ri, rs, "ref");
    if (!run(&p, LTK_BACKEND_CPU, LTK_ALGO_FUSED, 0, 1, &ci, &cs)) goto out1;
    check_sorted(&p, ci, cs, "cpu");
    /* fused == materialize, bit for bit */
    if (run(&p, LTK_BACKEND_CPU, LTK_ALGO_MATERIALIZE, 0, 1, &mi, &ms)) {
        CHECK(memcmp(ci, mi, n * 4) == 0 && memcmp(cs, ms, n * 4) == 0, "cpu fused != materialize");
        free_out(mi, ms);
    }
    /* physical slots: the table's mapping of the logical positions */
    if (run(&p, LTK_BACKEND_CPU, LTK_ALGO_FUSED, LTK_FLAG_PHYSICAL, 1, &pi, &ps)) {
        for (size_t x = 0; x < n; x++) {
            const int64_t t = (int64_t)(x / (size_t)c->k), b = t / c->next_n;
            const int32_t i = ci[x];
            const int32_t want = i < 0 ? -1 : p.table[b * (p.max_blocks + 1) + i / c->block_kv] * c->block_kv + i % c->block_kv;
            if (!CHECK(pi[x] == want, "physical slot %zu: %d, want %d", x, pi[x], want)) break;
        }
        free_out(pi, ps);
    }
    /* unsorted: the same set; without scores the short rows are 0..len-1 */
    for (int b = 0; b < 2; b++) {
        const ltk_backend be = b ? LTK_BACKEND_CPU : LTK_BACKEND_REF;
        if (!run(&p, be, LTK_ALGO_FUSED, LTK_FLAG_UNSORTED, 0, &ui, &us)) continue;
        for (int64_t t = 0; t < (int64_t)c->B * c->next_n; t++) {
            const int32_t len = p.lens[t], *u = ui + t * c->k, *s = (b ? ci : ri) + t * c->k;
            char *have = calloc((size_t)len + 1, 1);
            int ok = 1;
            for (int32_t j = 0; j < c->k; j++) {
                if (len <= c->k) ok &= u[j] == (j < len ? j : -1);
                else if (u[j] >= 0 && u[j] < len) have[u[j]] = 1;
                else ok = 0;
            }
            if (len > c->k)
                for (int32_t j = 0; j < c->k; j++) ok &= s[j] >= 0 && have[s[j]];
            free(have);
            if (!CHECK(ok, "%s unsorted row %lld (len %d): not the sorted set / short-row rule",
                       ltk_backend_name(be), (long long)t, len))
                break;
        }
        free_out(ui, us);
    }
    /* seq_lens: vLLM's convention gives the same rows as the lens it implies */
    {
        int32_t *lens = p.lens;
        p.lens = NULL;
        int32_t *idx = t_guarded_alloc(n * 4, 0);
        float *sc = t_guarded_alloc(n * 4, 0);
        ltk_decode_args a = prob_args(&p, idx, sc, 0);
        a.seq_lens = p.seq_lens;
        ltk_exec e = {.backend = LTK_BACKEND_CPU};
        ASSERT_STATUS(ltk_decode_topk(&a, &e), LTK_OK, NULL);
        CHECK(memcmp(idx, ci, n * 4) == 0 && memcmp(sc, cs, n * 4) == 0, "seq_lens != lens");
        free_out(idx, sc);
        p.lens = lens;
    }
    /* the workspace does not depend on the lengths (graph capture sizes it once) */
    {
        ltk_decode_args a = prob_args(&p, ci, cs, 0);
        ltk_exec e = {.backend = LTK_BACKEND_CPU};
        size_t w1 = 0, w2 = 0;
        ASSERT_STATUS(ltk_decode_workspace_size(&a, &e, &w1), LTK_OK, NULL);
        int32_t *zero = calloc((size_t)(c->B * c->next_n), 4);
        a.lens = zero;
        ASSERT_STATUS(ltk_decode_workspace_size(&a, &e, &w2), LTK_OK, NULL);
        ASSERT_EQ_INT((long long)w1, (long long)w2);
        free(zero);
    }
    (void)si, (void)ss;
    free_out(ci, cs);
out1:
    free_out(ri, rs);
out0:
    prob_free(&p);
}

static void test_decode_grid(void) {
    const dcase cs[] = {
        {.B = 3, .next_n = 1, .H = 4, .D = 32, .k = 16, .block_kv = 64, .max_len = 300, .grid = 1, .dtype = LTK_DTYPE_E4M3},
        {.B = 4, .next_n = 2, .H = 8, .D = 32, .k = 50, .block_kv = 32, .pad = 16, .len_mode = 1, .max_len = 700, .grid = 1,
         .dtype = LTK_DTYPE_E4M3},
        {.B = 2, .next_n = 4, .H = 3, .D = 16, .k = 7, .block_kv = 64, .pad = 4, .len_mode = 1, .max_len = 200, .grid = 1,
         .dtype = LTK_DTYPE_BF16},
        {.B = 5, .next_n = 3, .H = 2, .D = 64, .k = 33, .block_kv = 16, .len_mode = 0, .max_len = 500, .grid = 1,
         .dtype = LTK_DTYPE_F32},
        {.B = 1, .next_n = 8, .H = 4, .D = 32, .k = 1, .block_kv = 64, .len_mode = 2, .max_len = 129, .grid = 1,
         .dtype = LTK_DTYPE_E4M3},
        {.B = 6, .next_n = 2, .H = 4, .D = 32, .k = 64, .block_kv = 64, .len_mode = 1, .max_len = 1000, .grid = 1,
         .special = 1, .dtype = LTK_DTYPE_E4M3},
        /* pages of two 64-key tiles: the CPU reads the second tile of a page in place */
        {.B = 3, .next_n = 2, .H = 4, .D = 32, .k = 40, .block_kv = 128, .pad = 8, .len_mode = 0, .max_len = 900,
         .dtype = LTK_DTYPE_E4M3},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_case(&cs[i]);
}

/* Contexts longer than the CPU's 64K-key chunk: the chunks' lists merge exactly. */
static void test_decode_chunks(void) {
    const dcase c = {.B = 2, .next_n = 2, .H = 2, .D = 16, .k = 300, .block_kv = 64, .len_mode = 2, .max_len = 140000,
                     .grid = 1, .dtype = LTK_DTYPE_E4M3};
    check_case(&c);
}

/* DeepSeek's shape with free codes: within the rounding bound of float32 accumulation. */
static void test_decode_realistic(void) {
    const dcase cs[] = {
        {.B = 3, .next_n = 2, .H = 64, .D = 128, .k = 256, .block_kv = 64, .len_mode = 0, .max_len = 3000, .dtype = LTK_DTYPE_E4M3},
        {.B = 2, .next_n = 1, .H = 32, .D = 128, .k = 100, .block_kv = 32, .pad = 64, .len_mode = 1, .max_len = 1500,
         .dtype = LTK_DTYPE_E4M3},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_case(&cs[i]);
}

/* Bad arguments: the documented status, a message, and untouched outputs. */
static void test_decode_validation(void) {
    const dcase c = {.B = 2, .next_n = 2, .H = 2, .D = 16, .k = 4, .block_kv = 32, .len_mode = 2, .max_len = 100, .grid = 1,
                     .dtype = LTK_DTYPE_E4M3};
    dprob p;
    prob_make(&c, &p);
    const size_t n = (size_t)c.B * c.next_n * c.k;
    int32_t *idx = t_guarded_alloc(n * 4, 0);
    memset(idx, POISON, n * 4);
    const ltk_decode_args good = prob_args(&p, idx, NULL, 0);
    static const ltk_backend bes[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU};
    for (int bi = 0; bi < 2; bi++) {
        ltk_exec e = {.backend = bes[bi]};
#define BAD(mutation, msg)                                                         \
    do {                                                                           \
        ltk_decode_args a = good;                                                  \
        mutation;                                                                  \
        test_ctx("%s: %s", ltk_backend_name(bes[bi]), #mutation);                  \
        ASSERT_STATUS(ltk_decode_topk(&a, &e), LTK_EINVAL, msg);                   \
        size_t w_ = 0;                                                             \
        ASSERT_STATUS(ltk_decode_workspace_size(&a, &e, &w_), LTK_EINVAL, msg);    \
        const uint8_t *b_ = (const uint8_t *)idx;                                  \
        int same_ = 1;                                                             \
        for (size_t x_ = 0; x_ < n * 4; x_++) same_ &= b_[x_] == POISON;           \
        ASSERT_TRUE(same_ && t_guarded_ok(idx));                                   \
    } while (0)
        int32_t big[4] = {1, 2, 101, 3}, neg[4] = {1, -1, 2, 3};
        BAD(a.lens = big, "exceeds max_len");
        BAD(a.lens = neg, "< 0");
        BAD(a.block_table = NULL, "required");
        BAD(a.lens = NULL, "exactly one");
        BAD(a.seq_lens = p.seq_lens, "exactly one");
        BAD(a.next_n = 0, "next_n");
        BAD(a.next_n = LTK_DECODE_MAX_NEXT_N + 1, "next_n");
        BAD(a.block_kv = 0, "block_kv");
        BAD(a.block_stride = p.block_stride + 2, "block_stride");
        BAD(a.block_stride = 16, "block_stride");
        BAD(a.max_len = p.max_blocks * c.block_kv + 1, "max_len");
        BAD(a.flags = LTK_FLAG_ABSOLUTE, "flags");
        BAD(a.k = 0, "k=0");
        BAD(a.H = 0, "H=0");
        BAD(a.bt_stride = p.max_blocks - 1, "bt_stride");
        BAD(a.kv_cache = p.cache + 1, "aligned");
        BAD(a.out_stride = 1, "out_stride");
        BAD(a.num_blocks = 0, "outside the cache");
        BAD(a.max_len = 40; a.lens = big, "exceeds max_len");
        {
            const int32_t saved = p.table[0];
            p.table[0] = (int32_t)p.num_blocks; /* a table entry past the cache */
            BAD((void)0, "outside the cache");
            p.table[0] = -1;
            BAD((void)0, "outside the cache");
            p.table[0] = saved;
        }
#undef BAD
        /* a length within the table but garbage past it is never read: shorter rows are fine */
        ltk_decode_args a = good;
        int32_t small[4] = {0, 1, 31, 32};
        a.lens = small;
        ASSERT_STATUS(ltk_decode_topk(&a, &e), LTK_OK, NULL);
        memset(idx, POISON, n * 4);
    }
    /* B = 0 needs no pointers */
    ltk_decode_args z = {.B = 0, .next_n = 1, .H = 1, .D = 16, .k = 1, .block_kv = 64};
    ltk_exec e = {.backend = LTK_BACKEND_CPU};
    ASSERT_STATUS(ltk_decode_topk(&z, &e), LTK_OK, NULL);
    t_guarded_free(idx);
    prob_free(&p);
}

int main(int argc, char **argv) {
    static const t_test tests[] = {
        T_ENTRY(test_decode_grid),
        T_ENTRY(test_decode_chunks),
        T_ENTRY(test_decode_realistic),
        T_ENTRY(test_decode_validation),
    };
    return T_RUN_ALL(tests);
}
