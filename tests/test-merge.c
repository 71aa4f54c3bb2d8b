/* ltk_topk_merge on the host backends: against a brute force written from the header's contract
 * (ORDER, ties by the lower id, -0 as +0, NaN last, padding) on both input layouts, and a G-way
 * key-sharded indexer call (contiguous and interleaved shards, each shard's local top-k with global
 * ids, then the merge) equal bit for bit to the unsharded call. */
#include "harness.h"

#include <litetopk.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the contract's order, on its own --------------------------------------------------------- */
typedef struct { float s; int32_t id; } cand;

static int cand_nan(float x) { return x != x; }
static int cmp_cand(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    const int na = cand_nan(a->s), nb = cand_nan(b->s);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->s != b->s) return a->s > b->s ? -1 : 1; /* -0 == +0: equal, so by id */
    return (a->id > b->id) - (a->id < b->id);
}

static const float grid[] = {3.0f, 1.5f, 1.0f, 0.0f, -0.0f, -2.0f, 7.25f, INFINITY, -INFINITY};

static float draw_score(int mode) {
    const double u = rng_unit();
    if (u < 0.03) return NAN;
    if (mode == 0) return grid[rng_below(sizeof grid / sizeof grid[0])]; /* ties everywhere */
    return (float)rng_normal();
}

/* One case: rows x lists x len candidates in a layout (0: [rows, lists, len] with padded strides,
 * 1: rank-major [lists, rows, len]); every backend against the brute force. */
static void merge_case(int64_t rows, int lists, int len, int k, int mode, int layout, double pad_frac, int unsorted) {
    const int64_t ls = layout == 0 ? len + (int)rng_below(3) : (int64_t)rows * (len + 1);
    const int64_t rs = layout == 0 ? lists * ls + (int)rng_below(3) : len + 1;
    const int64_t total = layout == 0 ? rows * rs : lists * ls;
    float *sc = malloc(sizeof(float) * (size_t)(total + 1));
    int32_t *id = malloc(sizeof(int32_t) * (size_t)(total + 1));
    /* global ids: distinct across the whole row (shards are disjoint), drawn from [0, 4 n) */
    const int64_t n = (int64_t)lists * len;
    int32_t *pool = malloc(sizeof(int32_t) * (size_t)(4 * n));
    for (int64_t i = 0; i < total; i++) sc[i] = NAN, id[i] = -7; /* gaps: never read as candidates */
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < 4 * n; i++) pool[i] = (int32_t)i;
        for (int64_t i = 0; i < n; i++) { /* partial shuffle: the first n are a random subset */
            const int64_t j = i + rng_below(4 * n - i);
            const int32_t t = pool[i];
            pool[i] = pool[j], pool[j] = t;
        }
        for (int g = 0; g < lists; g++)
            for (int j = 0; j < len; j++) {
                const int64_t o = r * rs + g * ls + j;
                sc[o] = draw_score(mode);
                id[o] = rng_unit() < pad_frac ? -1 : pool[g * len + j];
            }
    }
    const int64_t os = k + 2;
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(rows * os));
    float *outs = malloc(sizeof(float) * (size_t)(rows * os));
    cand *v = malloc(sizeof(cand) * (size_t)n);
    const ltk_backend bes[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU};
    for (size_t b = 0; b < 2; b++) {
        for (int64_t i = 0; i < rows * os; i++) out[i] = 0x5a5a5a5a, outs[i] = 12345.0f;
        ltk_merge_args a;
        memset(&a, 0, sizeof a);
        a.rows = rows, a.lists = lists, a.list_len = len, a.k = k;
        a.scores = sc, a.ids = id, a.row_stride = rs, a.list_stride = ls;
        a.out_idx = out, a.out_scores = outs, a.out_stride = os;
        a.flags = unsorted ? LTK_FLAG_UNSORTED : 0;
        ltk_exec e = {bes[b], LTK_ALGO_FUSED, NULL, NULL, 0, 2, NULL};
        test_ctx("%s rows %lld lists %d len %d k %d mode %d layout %d pad %.2f unsorted %d", ltk_backend_name(bes[b]),
                 (long long)rows, lists, len, k, mode, layout, pad_frac, unsorted);
        if (!CHECK(ltk_topk_merge(&a, &e) == LTK_OK, "merge failed: %s", ltk_last_error())) continue;
        for (int64_t r = 0; r < rows; r++) {
            int64_t m = 0;
            for (int g = 0; g < lists; g++)
                for (int j = 0; j < len; j++) {
                    const int64_t o = r * rs + g * ls + j;
                    if (id[o] >= 0) v[m].s = sc[o], v[m++].id = id[o];
                }
            qsort(v, (size_t)m, sizeof *v, cmp_cand);
            const int32_t *oi = out + r * os;
            const float *oc = outs + r * os;
            if (unsorted) { /* the set: sort the output by the same order */
                cand *w = malloc(sizeof(cand) * (size_t)k);
                for (int j = 0; j < k; j++) w[j].s = oc[j], w[j].id = oi[j];
                int nv = 0;
                while (nv < k && w[nv].id >= 0) nv++;
                qsort(w, (size_t)nv, sizeof *w, cmp_cand);
                for (int j = 0; j < nv; j++) {
                    if (!CHECK(w[j].id == v[j].id, "row %lld rank %d: id %d, want %d", (long long)r, j, w[j].id, v[j].id))
                        break;
                }
                CHECK(nv == (m < k ? m : k), "row %lld: %d valid ids, want %lld", (long long)r, nv, (long long)(m < k ? m : k));
                free(w);
            } else {
                for (int j = 0; j < k; j++) {
                    const int32_t want = j < m ? v[j].id : -1;
                    const float ws = j < m ? v[j].s + 0.0f : -INFINITY;
                    if (!CHECK(oi[j] == want && t_same_f32(oc[j], ws), "row %lld slot %d: (%d, %a), want (%d, %a)",
                               (long long)r, j, oi[j], (double)oc[j], want, (double)ws))
                        break;
                }
            }
            CHECK(oi[k] == 0x5a5a5a5a && oi[k + 1] == 0x5a5a5a5a && oc[k] == 12345.0f,
                  "row %lld: written past k in its stride", (long long)r);
        }
    }
    free(v), free(out), free(outs), free(pool), free(sc), free(id);
}

static void test_merge_vs_brute(void) {
    for (int it = 0; it < 60; it++) {
        const int lists = 1 + (int)rng_below(8), len = 1 + (int)rng_below(it < 40 ? 40 : 600);
        const int k = 1 + (int)rng_below(it % 3 == 0 ? lists * len + 8 : len + 4);
        merge_case(1 + rng_below(6), lists, len, k, it & 1, (it >> 1) & 1, it % 5 == 0 ? 0.6 : 0.1, it % 7 == 3);
    }
    /* a whole row of one value: the tie class is every candidate, k from it by id */
    for (int it = 0; it < 4; it++) {
        const int lists = 4, len = 512;
        merge_case(2, lists, len, 100 + it * 300, 0, it & 1, 0.0, 0);
    }
}

/* ---- a key-sharded indexer call, simulated -------------------------------------------------- */
/* Global key s lives on rank (s / I) % G at local position (s / (I G)) I + s % I (I = S: contiguous
 * shards of S / G keys would need a rank count that divides S; the interleave covers both: I >= S / G
 * rounded up is the contiguous split). */
static void sharded_case(int G, int64_t I, int64_t T, int64_t S, int H, int D, int k) {
    float *q = malloc(sizeof(float) * (size_t)(T * H * D)), *w = malloc(sizeof(float) * (size_t)(T * H));
    float *kv = malloc(sizeof(float) * (size_t)(S * D)), *scale = malloc(sizeof(float) * (size_t)S);
    int32_t *ks = malloc(sizeof(int32_t) * (size_t)T), *ke = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t i = 0; i < T * H * D; i++) q[i] = (float)rng_normal();
    for (int64_t i = 0; i < T * H; i++) w[i] = (float)rng_normal();
    for (int64_t i = 0; i < S * D; i++) kv[i] = (float)rng_normal();
    for (int64_t s = 0; s < S; s++) scale[s] = 0.5f + (float)rng_unit();
    if (S > 8) /* a few copies of one key: ties across ranks */
        for (int c = 0; c < 6; c++) {
            const int64_t d = rng_below(S), src = rng_below(S);
            memcpy(kv + d * D, kv + src * D, sizeof(float) * (size_t)D);
            scale[d] = scale[src];
        }
    for (int64_t t = 0; t < T; t++) {
        int64_t a = rng_below(S + 1), b = rng_below(S + 1);
        if (t == 0) a = 0, b = S;
        ks[t] = (int32_t)(a < b ? a : b), ke[t] = (int32_t)(a < b ? b : a);
    }
    int32_t *want = malloc(sizeof(int32_t) * (size_t)(T * k));
    float *wants = malloc(sizeof(float) * (size_t)(T * k));
    ltk_exec ce = {LTK_BACKEND_CPU, LTK_ALGO_FUSED, NULL, NULL, 0, 2, NULL};
    ltk_indexer_args ia;
    memset(&ia, 0, sizeof ia);
    ia.T = T, ia.S = S, ia.H = H, ia.D = D, ia.k = k, ia.dtype = LTK_DTYPE_F32;
    ia.q = q, ia.kv = kv, ia.kv_scale = scale, ia.weights = w, ia.ks = ks, ia.ke = ke;
    ia.out_idx = want, ia.out_scores = wants, ia.flags = LTK_FLAG_ABSOLUTE;
    test_ctx("sharded G %d I %lld T %lld S %lld H %d D %d k %d", G, (long long)I, (long long)T, (long long)S, H, D, k);
    if (!CHECK(ltk_indexer_topk(&ia, &ce) == LTK_OK, "unsharded indexer: %s", ltk_last_error())) goto out0;
    /* the shards: keys, scales, their global ids, and each row's local range */
    int32_t *cid = malloc(sizeof(int32_t) * (size_t)(G * T * k));
    float *csc = malloc(sizeof(float) * (size_t)(G * T * k));
    float *skv = malloc(sizeof(float) * (size_t)(S * D + 1)), *ssc = malloc(sizeof(float) * (size_t)(S + 1));
    int32_t *gid = malloc(sizeof(int32_t) * (size_t)(S + 1));
    int32_t *lks = malloc(sizeof(int32_t) * (size_t)T), *lke = malloc(sizeof(int32_t) * (size_t)T);
    int ok = 1;
    for (int g = 0; g < G && ok; g++) {
        int64_t n = 0;
        for (int64_t s = 0; s < S; s++)
            if ((s / I) % G == g) {
                memcpy(skv + n * D, kv + s * D, sizeof(float) * (size_t)D);
                ssc[n] = scale[s];
                gid[n++] = (int32_t)s;
            }
        for (int64_t t = 0; t < T; t++) { /* the locals of [ks, ke): an interval, as the map is monotone */
            int64_t lo = 0, hi = 0;
            for (int64_t i = 0; i < n; i++) {
                if (gid[i] < ks[t]) lo++;
                if (gid[i] < ke[t]) hi++;
            }
            lks[t] = (int32_t)lo, lke[t] = (int32_t)hi;
        }
        ltk_indexer_args la = ia;
        la.S = n, la.kv = n ? skv : kv, la.kv_scale = n ? ssc : scale, la.ks = lks, la.ke = lke;
        la.out_idx = cid + (int64_t)g * T * k, la.out_scores = csc + (int64_t)g * T * k;
        ok = CHECK(ltk_indexer_topk(&la, &ce) == LTK_OK, "shard %d: %s", g, ltk_last_error());
        for (int64_t i = 0; ok && i < T * k; i++) { /* local -> global ids */
            int32_t *p = cid + (int64_t)g * T * k + i;
            if (*p >= 0) *p = gid[*p];
        }
    }
    if (ok) {
        int32_t *got = malloc(sizeof(int32_t) * (size_t)(T * k));
        float *gots = malloc(sizeof(float) * (size_t)(T * k));
        ltk_merge_args m;
        memset(&m, 0, sizeof m);
        m.rows = T, m.lists = G, m.list_len = k, m.k = k, m.scores = csc, m.ids = cid;
        m.row_stride = k, m.list_stride = T * k; /* rank-major, as an all-gather into dim 0 leaves it */
        m.out_idx = got, m.out_scores = gots;
        if (CHECK(ltk_topk_merge(&m, &ce) == LTK_OK, "merge: %s", ltk_last_error()))
            for (int64_t i = 0; i < T * k; i++)
                if (!CHECK(got[i] == want[i] && t_same_f32(gots[i], wants[i] + 0.0f),
                           "row %lld slot %lld: merged (%d, %a), unsharded (%d, %a)", (long long)(i / k),
                           (long long)(i % k), got[i], (double)gots[i], want[i], (double)wants[i]))
                    break;
        free(got), free(gots);
    }
    free(cid), free(csc), free(skv), free(ssc), free(gid), free(lks), free(lke);
out0:
    free(q), free(w), free(kv), free(scale), free(ks), free(ke), free(want), free(wants);
}

static void test_sharded_indexer(void) {
    const int Gs[] = {2, 3, 4, 8};
    for (int i = 0; i < 4; i++) {
        const int G = Gs[i];
        const int64_t S = 600 + rng_below(3000);
        sharded_case(G, (S + G - 1) / G, 6, S, 4, 32, 64 + (int)rng_below(200)); /* contiguous shards */
        sharded_case(G, 1, 6, S, 4, 32, 64 + (int)rng_below(200));               /* interleaved by key */
        sharded_case(G, 16, 6, S, 4, 32, 300);                                    /* interleave 16 */
        sharded_case(G, 1, 4, 40, 4, 32, 64);                                     /* shards shorter than k */
    }
}

static void test_merge_bad_args(void) {
    float sc[8] = {0};
    int32_t id[8] = {0}, out[8];
    ltk_merge_args a;
    memset(&a, 0, sizeof a);
    a.rows = 2, a.lists = 2, a.list_len = 2, a.k = 4, a.scores = sc, a.ids = id, a.out_idx = out;
    ltk_exec e = {LTK_BACKEND_CPU, LTK_ALGO_FUSED, NULL, NULL, 0, 1, NULL};
    ASSERT_STATUS(ltk_topk_merge(&a, &e), LTK_OK, NULL);
    ltk_merge_args b = a;
    b.k = 0;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "k");
    b = a, b.lists = 0;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "lists");
    b = a, b.ids = NULL;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "ids");
    b = a, b.out_idx = NULL;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "out_idx");
    b = a, b.flags = LTK_FLAG_ABSOLUTE;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "flags");
    b = a, b.row_stride = -1;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "stride");
    b = a, b.out_stride = 3;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "out_stride");
    b = a, b.scores = (const float *)((const char *)sc + 1);
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "aligned");
    b = a, b.lists = 65536, b.list_len = 65536;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_EINVAL, "candidates");
    size_t need = 0;
    ASSERT_STATUS(ltk_merge_workspace_size(&a, &e, &need), LTK_OK, NULL);
    ASSERT_TRUE(need > 0);
    b = a, b.rows = 0, b.out_idx = NULL, b.scores = NULL, b.ids = NULL;
    ASSERT_STATUS(ltk_topk_merge(&b, &e), LTK_OK, NULL);
}

int main(int argc, char **argv) {
    static const t_test tests[] = {T_ENTRY(test_merge_vs_brute), T_ENTRY(test_sharded_indexer),
                                   T_ENTRY(test_merge_bad_args)};
    return T_RUN_ALL(tests);
}
