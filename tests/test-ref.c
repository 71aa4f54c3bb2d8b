/* test-ref: the float64 oracle (LTK_BACKEND_REF) against a brute force written here from the
 * header alone: dtype decoding from the bit layouts, scores from the formulas in float64, a full
 * sort by the documented ORDER (score desc / L2 distance asc, ties by the lower index, -0 == +0,
 * NaN last), padding, flags and the short-row rule.
 *
 * Inputs are drawn on dyadic grids (small integers times powers of two, e4m3/bf16/f16 codes with a
 * bounded exponent range) so that every sum and product is exact in float64: the oracle and the
 * brute force must then agree exactly whatever their summation order, and exact ties are frequent.
 * One test uses unrestricted floats and compares up to 1e-12 relative. */
#include "harness.h"

#include "decode.h"
#include "litetopk.h"

static const char *dt_name(ltk_dtype dt) {
    static const char *n[] = {"f32", "f16", "bf16", "e4m3"};
    return (unsigned)dt < 4 ? n[dt] : "?";
}

/* ---- grid generators (exact float64 arithmetic downstream) -------------------------------- */
static void gen_grid(void *p, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: ((float *)p)[i] = (float)rng_range(-8, 8) * 0.25f; break;
    case LTK_DTYPE_E4M3: {
        uint8_t v;
        do v = (uint8_t)rng_below(256);
        while ((v & 0x7f) == 0x7f);
        ((uint8_t *)p)[i] = v;
        break;
    }
    case LTK_DTYPE_BF16: {
        uint16_t s = (uint16_t)(rng_below(2) << 15), e = (uint16_t)rng_range(120, 134), m = (uint16_t)rng_below(128);
        ((uint16_t *)p)[i] = rng_below(8) == 0 ? s : (uint16_t)(s | (e << 7) | m);
        break;
    }
    case LTK_DTYPE_F16: {
        uint16_t s = (uint16_t)(rng_below(2) << 15), e = (uint16_t)rng_range(10, 20), m = (uint16_t)rng_below(1024);
        ((uint16_t *)p)[i] = rng_below(8) == 0 ? s : (uint16_t)(s | (e << 10) | m);
        break;
    }
    }
}
static const float grid_w[] = {-2.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
static const float grid_scale[] = {0.0f, 0.25f, 0.5f, 1.0f, 1.5f, 2.0f, -1.0f, 1.0f};


/* NaN-coded filler for stride padding: the oracle must never read it. */
static void put_nan(void *p, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: ((float *)p)[i] = NAN; break;
    case LTK_DTYPE_E4M3: ((uint8_t *)p)[i] = 0x7f; break;
    case LTK_DTYPE_F16: ((uint16_t *)p)[i] = 0x7e00; break;
    case LTK_DTYPE_BF16: ((uint16_t *)p)[i] = 0x7fc0; break;
    }
}

/* Occasionally replaces element i by NaN or +-inf (e4m3 has only NaN). IEEE arithmetic on them
 * does not depend on the summation order, so exactness still holds. */
static void maybe_special(void *p, ltk_dtype dt, int64_t i, int on) {
    if (!on || rng_below(30) != 0) return;
    int64_t r = rng_below(3);
    switch (dt) {
    case LTK_DTYPE_F32: ((float *)p)[i] = r == 0 ? NAN : (r == 1 ? INFINITY : -INFINITY); break;
    case LTK_DTYPE_E4M3: ((uint8_t *)p)[i] = r == 0 ? 0x7f : 0xff; break;
    case LTK_DTYPE_F16: ((uint16_t *)p)[i] = r == 0 ? 0x7e00 : (r == 1 ? 0x7c00 : 0xfc00); break;
    case LTK_DTYPE_BF16: ((uint16_t *)p)[i] = r == 0 ? 0x7fc0 : (r == 1 ? 0x7f80 : 0xff80); break;
    }
}

/* ---- the ORDER ---------------------------------------------------------------------------- */
typedef struct {
    double s;
    int64_t idx;
} ent;
static int g_ascending; /* L2: the smaller distance ranks first */

/* Negative when a ranks before b: NaN after everything (NaNs by index), then value (desc, or asc
 * for L2; -0 == +0 because they compare equal), then the lower index. */
static int ent_order(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    int an = a->s != a->s, bn = b->s != b->s;
    if (an != bn) return an ? 1 : -1;
    if (!an && a->s != b->s) return (a->s < b->s) == (g_ascending != 0) ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}
static int ent_by_idx(const void *pa, const void *pb) {
    const ent *a = pa, *b = pb;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int same_value(float a, float b) { return (a != a && b != b) || a == b; }

typedef struct {
    int32_t k;
    int64_t lo;    /* the row's absolute start */
    int64_t base;  /* subtracted from absolute indices: lo, or 0 with LTK_FLAG_ABSOLUTE */
    int sorted;     /* output must be in ORDER */
    int short_rule; /* the indexer's UNSORTED-without-scores shortcut applies (n <= k) */
    int bits;       /* compare scores bit for bit (select ranks the given floats) */
    float pad;      /* -inf, or +inf for L2 */
} rowspec;

/* One output row against the brute force. `v` holds the row's n entries with absolute indices
 * (sorted here). Returns 1 when the row is right. */
static int check_row(const char *what, int64_t row, ent *v, int64_t n, const rowspec *rs, const int64_t *gi,
                     const float *gs) {
    qsort(v, (size_t)n, sizeof *v, ent_order);
    int32_t k = rs->k;
    int64_t m = n < k ? n : k;
    if (rs->short_rule) {
        for (int32_t j = 0; j < k; j++) {
            int64_t want = j < n ? rs->lo + j - rs->base : -1;
            if (!CHECK(gi[j] == want, "%s row %lld slot %d: short-row rule wants index %lld, got %lld", what,
                       (long long)row, j, (long long)want, (long long)gi[j]))
                return 0;
        }
        return 1;
    }
    if (rs->sorted) {
        for (int32_t j = 0; j < k; j++) {
            int64_t want = j < m ? v[j].idx - rs->base : -1;
            if (!CHECK(gi[j] == want, "%s row %lld slot %d: index %lld, want %lld (brute score %.17g)", what,
                       (long long)row, j, (long long)gi[j], (long long)want, j < m ? v[j].s : 0.0))
                return 0;
            if (gs) {
                float ws = j < m ? (float)v[j].s : rs->pad;
                int ok = rs->bits ? t_same_f32(gs[j], ws) : same_value(gs[j], ws);
                if (!CHECK(ok, "%s row %lld slot %d (index %lld): score %.9g (0x%08x), want %.9g (0x%08x)", what,
                           (long long)row, j, (long long)gi[j], gs[j], t_f32_bits(gs[j]), ws, t_f32_bits(ws)))
                    return 0;
            }
        }
        return 1;
    }
    /* Unsorted: the same set of (index, score) pairs, padding in any slot. */
    ent *want = malloc(sizeof(ent) * (size_t)(m ? m : 1)), *got = malloc(sizeof(ent) * (size_t)k);
    int64_t ng = 0, npad = 0;
    int ok = 1;
    for (int64_t j = 0; j < m; j++) want[j] = (ent){(float)v[j].s, v[j].idx - rs->base};
    for (int32_t j = 0; j < k && ok; j++) {
        if (gi[j] == -1) {
            npad++;
            if (gs)
                ok = CHECK(t_same_f32(gs[j], rs->pad), "%s row %lld slot %d: padding score %.9g", what, (long long)row,
                           j, gs[j]);
        } else got[ng++] = (ent){gs ? gs[j] : 0.0, gi[j]};
    }
    ok = ok && CHECK(ng == m && npad == k - m, "%s row %lld: %lld valid + %lld padding slots, want %lld + %lld",
                     what, (long long)row, (long long)ng, (long long)npad, (long long)m, (long long)(k - m));
    if (ok) {
        qsort(want, (size_t)m, sizeof *want, ent_by_idx);
        qsort(got, (size_t)m, sizeof *got, ent_by_idx);
        for (int64_t j = 0; j < m && ok; j++) {
            ok = CHECK(got[j].idx == want[j].idx, "%s row %lld: unsorted set has index %lld where %lld is wanted",
                       what, (long long)row, (long long)got[j].idx, (long long)want[j].idx);
            if (ok && gs)
                ok = CHECK(rs->bits ? t_same_f32((float)got[j].s, (float)want[j].s)
                                    : same_value((float)got[j].s, (float)want[j].s),
                           "%s row %lld index %lld: score %.9g, want %.9g", what, (long long)row,
                           (long long)got[j].idx, got[j].s, want[j].s);
        }
    }
    free(want);
    free(got);
    return ok;
}

/* Slots [k, stride) of every row must still hold the poison. */
static int stride_gap_intact(const void *out, size_t el, int64_t rows, int32_t k, int64_t stride) {
    const uint8_t *b = out;
    for (int64_t r = 0; r < rows; r++)
        for (size_t i = (size_t)(r * stride + k) * el; i < (size_t)((r + 1) * stride) * el; i++)
            if (b[i] != 0x7b) return CHECK(0, "row %lld: write into the stride gap (slot %zu)", (long long)r, i / el - (size_t)(r * stride));
    return 1;
}

/* ---- dtype decoding ----------------------------------------------------------------------- */
/* All 256 e4m3 codes through the indexer (H = D = 1, S = 256, k = 256): row 0 has q = +1, w = +1,
 * scoring max(0, x); row 1 has q = -1, w = -1, scoring min(0, x). Together they give x. */
static void test_e4m3_decode(void) {
    static const struct {
        uint8_t code;
        double value;
    } known[] = {
        {0x00, 0.0},   {0x01, 0.001953125}, {0x07, 0.013671875}, {0x08, 0.015625}, {0x30, 0.5},
        {0x38, 1.0},   {0x3c, 1.5},         {0x40, 2.0},         {0x77, 240.0},    {0x78, 256.0},
        {0x7d, 416.0}, {0x7e, 448.0},       {0x81, -0.001953125}, {0xb8, -1.0},    {0xc4, -3.0},
        {0xfe, -448.0},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        test_ctx("the test's own decoder, code 0x%02x", known[i].code);
        ASSERT_TRUE(dec_e4m3(known[i].code) == known[i].value);
    }
    test_ctx("%s", "");
    uint8_t kv[256], q[2] = {0x38, 0xb8};
    for (int i = 0; i < 256; i++) kv[i] = (uint8_t)i;
    float w[2] = {1.0f, -1.0f};
    int32_t idx[2 * 256];
    float sc[2 * 256];
    ltk_indexer_args a = {.T = 2, .S = 256, .H = 1, .D = 1, .k = 256, .dtype = LTK_DTYPE_E4M3, .q = q, .kv = kv,
                          .weights = w, .out_idx = idx, .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    float s0[256], s1[256];
    int seen[256] = {0};
    for (int j = 0; j < 256; j++) {
        int32_t i0 = idx[j], i1 = idx[256 + j];
        ASSERT_TRUE(i0 >= 0 && i0 < 256 && i1 >= 0 && i1 < 256);
        seen[i0] |= 1, seen[i1] |= 2;
        s0[i0] = sc[j], s1[i1] = sc[256 + j];
    }
    for (int c = 0; c < 256; c++) ASSERT_EQ_INT(seen[c], 3);
    int nan_codes = 0;
    for (int c = 0; c < 256; c++) {
        float got = c < 0x80 ? s0[c] : s1[c];
        double want = dec_e4m3((uint8_t)c);
        test_ctx("oracle e4m3 code 0x%02x: %.9g, want %.9g", c, got, want);
        if (want != want) {
            nan_codes++;
            ASSERT_TRUE(isnan(got));
        } else {
            ASSERT_TRUE((double)got == want);
        }
    }
    ASSERT_EQ_INT(nan_codes, 2); /* 0x7f and 0xff only: e4m3fn has no infinities */
    test_ctx("%s", "");
    /* 448 is the largest finite value; NaN ranks last (the two NaN codes, by index). */
    ASSERT_EQ_INT(idx[0], 0x7e);
    ASSERT_SAME_F32(sc[0], 448.0f);
    ASSERT_EQ_INT(idx[1], 0x7d);
    ASSERT_EQ_INT(idx[254], 0x7f);
    ASSERT_EQ_INT(idx[255], 0xff);
    ASSERT_TRUE(isnan(sc[255]));
    /* Row 1: min(0, x) is 0 for every non-negative code: those lead, by index, with 0x00 first. */
    ASSERT_EQ_INT(idx[256], 0x00);
    ASSERT_EQ_INT(idx[257], 0x01);
}

/* Every f16 / bf16 bit pattern through select (k = cols = 65536): each decoded value bit for bit,
 * and the whole order (+inf first, 0x0000 before 0x8000 as -0 == +0, -inf, then the NaNs by index). */
static void exhaustive_16(ltk_dtype dt) {
    enum { N = 65536 };
    uint16_t *s = malloc(sizeof(uint16_t) * N);
    int32_t *idx = malloc(sizeof(int32_t) * N);
    int64_t *gi = malloc(sizeof(int64_t) * N);
    float *sc = malloc(sizeof(float) * N);
    ent *v = malloc(sizeof(ent) * N);
    for (int i = 0; i < N; i++) s[i] = (uint16_t)i;
    ltk_select_args a = {.rows = 1, .cols = N, .k = N, .dtype = dt, .scores = s, .out_idx = idx, .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ltk_status st = ltk_select_topk(&a, &e);
    if (CHECK(st == LTK_OK, "%s", ltk_last_error())) {
        for (int i = 0; i < N; i++) {
            v[i] = (ent){dt == LTK_DTYPE_F16 ? dec_f16((uint16_t)i) : dec_bf16((uint16_t)i), i};
            gi[i] = idx[i];
        }
        g_ascending = 0;
        rowspec rs = {.k = N, .sorted = 1, .bits = 1, .pad = -INFINITY};
        check_row(dt_name(dt), 0, v, N, &rs, gi, sc);
        /* Spot values, independent of the decoder above. */
        CHECK(idx[0] == (dt == LTK_DTYPE_F16 ? 0x7c00 : 0x7f80) && isinf(sc[0]), "+inf first");
        CHECK(sc[1] == (dt == LTK_DTYPE_F16 ? 65504.0f : 3.38953139e38f), "largest finite second: %.9g", sc[1]);
        int64_t first_zero = -1;
        for (int j = 0; j < N; j++)
            if (sc[j] == 0.0f) {
                first_zero = j;
                break;
            }
        CHECK(first_zero >= 0 && idx[first_zero] == 0 && idx[first_zero + 1] == 0x8000 &&
                  t_f32_bits(sc[first_zero + 1]) == 0x80000000u,
              "zeros: +0 (index 0) then -0 (index 0x8000, sign kept)");
        CHECK(first_zero > 0 && sc[first_zero - 1] == (dt == LTK_DTYPE_F16 ? 5.96046448e-08f : 9.18354962e-41f),
              "smallest positive subnormal just before the zeros: %.9g", first_zero > 0 ? sc[first_zero - 1] : 0.0f);
    }
    free(s), free(idx), free(gi), free(sc), free(v);
}
static void test_f16_decode_and_order(void) { exhaustive_16(LTK_DTYPE_F16); }
static void test_bf16_decode_and_order(void) { exhaustive_16(LTK_DTYPE_BF16); }

/* ---- indexer ------------------------------------------------------------------------------ */
typedef struct {
    int64_t T, S;
    int32_t H, D, k;
    ltk_dtype dt;
    uint32_t flags;
    int scores, scale, ranges, strided, special;
} icfg;

static double brute_indexer_score(const icfg *c, const void *q, int64_t qs, const void *kv, int64_t kvs,
                                  const float *w, int64_t ws, const float *scale, int64_t t, int64_t s) {
    double acc = 0.0;
    for (int32_t h = 0; h < c->H; h++) {
        double dot = 0.0;
        for (int32_t d = 0; d < c->D; d++) dot += dec_val(q, c->dt, t * qs + h * c->D + d) * dec_val(kv, c->dt, s * kvs + d);
        double relu = dot != dot ? dot : (dot > 0.0 ? dot : 0.0); /* IEEE: NaN propagates */
        acc += (double)w[t * ws + h] * relu;
    }
    return acc * (scale ? (double)scale[s] : 1.0);
}

/* One random case on the grid against the brute force; returns 1 when every row is right. */
static int indexer_case(const icfg *c, ltk_indexer_state *state, int32_t cap) {
    size_t el = ltk_dtype_size(c->dt);
    int64_t qs = (int64_t)c->H * c->D + (c->strided ? 3 : 0), kvs = c->D + (c->strided ? 2 : 0);
    int64_t ws = c->H + (c->strided ? 1 : 0), os = c->k + (c->strided ? 2 : 0);
    void *q = malloc(el * (size_t)(c->T * qs + 1)), *kv = malloc(el * (size_t)(c->S * kvs + 1));
    float *w = malloc(sizeof(float) * (size_t)(c->T * ws + 1)), *scale = malloc(sizeof(float) * (size_t)(c->S + 1));
    int32_t *ks = malloc(sizeof(int32_t) * (size_t)(c->T + 1)), *ke = malloc(sizeof(int32_t) * (size_t)(c->T + 1));
    int32_t *oi = malloc(sizeof(int32_t) * (size_t)(c->T * os));
    float *osc = malloc(sizeof(float) * (size_t)(c->T * os));
    int64_t *gi = malloc(sizeof(int64_t) * (size_t)c->k);
    ent *v = malloc(sizeof(ent) * (size_t)(c->S + 1));
    for (int64_t i = 0; i < c->T * qs; i++)
        if (i % qs < (int64_t)c->H * c->D) gen_grid(q, c->dt, i), maybe_special(q, c->dt, i, c->special);
        else put_nan(q, c->dt, i);
    for (int64_t i = 0; i < c->S * kvs; i++)
        if (i % kvs < c->D) gen_grid(kv, c->dt, i), maybe_special(kv, c->dt, i, c->special);
        else put_nan(kv, c->dt, i);
    for (int64_t i = 0; i < c->T * ws; i++) w[i] = i % ws < c->H ? grid_w[rng_below(8)] : NAN;
    for (int64_t i = 0; i < c->S; i++) scale[i] = grid_scale[rng_below(8)], maybe_special(scale, LTK_DTYPE_F32, i, c->special);
    for (int64_t t = 0; t < c->T; t++) {
        int64_t a = rng_range(0, c->S), b = rng_range(0, c->S);
        if (rng_below(6) == 0) b = a; /* empty row */
        ks[t] = (int32_t)(a < b ? a : b), ke[t] = (int32_t)(a < b ? b : a);
    }
    memset(oi, 0x7b, sizeof(int32_t) * (size_t)(c->T * os));
    memset(osc, 0x7b, sizeof(float) * (size_t)(c->T * os));
    ltk_indexer_args a = {.T = c->T, .S = c->S, .H = c->H, .D = c->D, .k = c->k, .dtype = c->dt, .q = q,
                          .q_stride_t = c->strided ? qs : 0, .kv = kv, .kv_stride_s = c->strided ? kvs : 0,
                          .kv_scale = c->scale ? scale : NULL, .weights = w, .w_stride_t = c->strided ? ws : 0,
                          .ks = c->ranges ? ks : NULL, .ke = c->ranges ? ke : NULL, .out_idx = oi,
                          .out_scores = c->scores ? osc : NULL, .out_stride = c->strided ? os : 0, .flags = c->flags,
                          .state = state};
    ltk_stats stats;
    memset(&stats, 0x7b, sizeof stats);
    ltk_exec e = {.backend = LTK_BACKEND_REF, .stats = &stats};
    test_ctx("indexer T=%lld S=%lld H=%d D=%d k=%d %s flags=%u scores=%d scale=%d ranges=%d strided=%d special=%d",
             (long long)c->T, (long long)c->S, c->H, c->D, c->k, dt_name(c->dt), c->flags, c->scores, c->scale,
             c->ranges, c->strided, c->special);
    ltk_status st = ltk_indexer_topk(&a, &e);
    int ok = CHECK(st == LTK_OK, "status %s: %s", ltk_status_str(st), ltk_last_error());
    ok = ok && CHECK(stats.rows == c->T, "stats.rows %lld", (long long)stats.rows);
    g_ascending = 0;
    for (int64_t t = 0; t < c->T && ok; t++) {
        int64_t lo = c->ranges ? ks[t] : 0, hi = c->ranges ? ke[t] : c->S, n = hi - lo;
        for (int64_t s = lo; s < hi; s++)
            v[s - lo] = (ent){brute_indexer_score(c, q, qs, kv, kvs, w, ws, c->scale ? scale : NULL, t, s), s};
        rowspec rs = {.k = c->k, .lo = lo, .base = (c->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo,
                      .sorted = !(c->flags & LTK_FLAG_UNSORTED),
                      .short_rule = (c->flags & LTK_FLAG_UNSORTED) && !c->scores && n <= c->k, .pad = -INFINITY};
        for (int32_t j = 0; j < c->k; j++) gi[j] = oi[t * os + j];
        ok = check_row("indexer", t, v, n, &rs, gi, c->scores ? osc + t * os : NULL);
    }
    ok = ok && stride_gap_intact(oi, sizeof(int32_t), c->T, c->k, os);
    if (c->scores) ok = ok && stride_gap_intact(osc, sizeof(float), c->T, c->k, os);
    if (!c->scores) {
        const uint8_t *b = (const uint8_t *)osc;
        for (size_t i = 0; i < sizeof(float) * (size_t)(c->T * os) && ok; i++)
            ok = CHECK(b[i] == 0x7b, "out_scores is NULL, yet the scores buffer changed");
    }
    /* The hot set after the call: the keys voted most often (votes desc, larger index first). */
    if (ok && state) {
        int32_t cnt = -1;
        int32_t *keys = malloc(sizeof(int32_t) * (size_t)(c->T * c->k + 1));
        int32_t *votes = calloc((size_t)c->S + 1, sizeof(int32_t));
        for (int64_t t = 0; t < c->T; t++)
            for (int32_t j = 0; j < c->k; j++) {
                int32_t x = oi[t * os + j];
                if (x >= 0) votes[x + ((c->flags & LTK_FLAG_ABSOLUTE) || !c->ranges ? 0 : ks[t])]++;
            }
        st = ltk_indexer_state_get(state, keys, c->T * c->k + 1, &cnt);
        int64_t distinct = 0;
        for (int64_t s = 0; s < c->S; s++) distinct += votes[s] > 0;
        ok = CHECK(st == LTK_OK, "state_get: %s", ltk_last_error()) &&
             CHECK(cnt == (distinct < cap ? distinct : cap), "hot set holds %d keys, want min(%lld voted, capacity %d)",
                   cnt, (long long)distinct, cap);
        for (int32_t i = 0; i < cnt && ok; i++) {
            int32_t x = keys[i];
            ok = CHECK(x >= 0 && x < c->S && votes[x] > 0, "hot key %d has no vote", x);
            /* every better-ranked key (more votes, or as many and larger) is listed before it */
            for (int64_t s = 0; s < c->S && ok; s++)
                if (votes[s] > votes[x] || (votes[s] == votes[x] && votes[s] > 0 && s > x)) {
                    int found = 0;
                    for (int32_t j = 0; j < i; j++) found |= keys[j] == s;
                    ok = CHECK(found, "hot set: key %lld (%d votes) should precede key %d (%d votes)", (long long)s,
                               votes[s], x, votes[x]);
                }
        }
        free(keys);
        free(votes);
    }
    free(q), free(kv), free(w), free(scale), free(ks), free(ke), free(oi), free(osc), free(gi), free(v);
    return ok;
}

static void test_indexer_vs_brute(void) {
    static const ltk_dtype dts[] = {LTK_DTYPE_F32, LTK_DTYPE_BF16, LTK_DTYPE_E4M3};
    for (int it = 0; it < 4000; it++) {
        icfg c = {.T = rng_range(1, 5), .S = rng_range(0, 40), .H = (int32_t)rng_range(1, 4),
                  .D = (int32_t)rng_range(1, 8), .dt = dts[it % 3], .flags = (uint32_t)rng_below(4),
                  .scores = (int)rng_below(2), .scale = (int)rng_below(2), .ranges = (int)rng_below(2),
                  .strided = (int)rng_below(2), .special = it % 4 == 3};
        c.k = (int32_t)rng_range(1, c.S + 4);
        if (!indexer_case(&c, NULL, 0)) return;
    }
}

/* The vote that replaces the hot set, whatever the state held before (junk included). */
static void test_indexer_state_vote(void) {
    for (int it = 0; it < 60; it++) {
        icfg c = {.T = rng_range(1, 6), .S = rng_range(1, 40), .H = 2, .D = 3, .dt = LTK_DTYPE_F32,
                  .flags = (uint32_t)rng_below(4), .scores = 1, .scale = 1, .ranges = (int)rng_below(2)};
        c.k = (int32_t)rng_range(1, c.S + 2);
        ltk_indexer_state *st = NULL;
        int32_t cap = (int32_t)rng_range(1, 3 * c.k);
        ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_REF, cap, &st), LTK_OK, NULL);
        int32_t junk[6] = {-5, (int32_t)c.S + 3, 0, 0, INT32_MAX, 1};
        ASSERT_STATUS(ltk_indexer_state_set(st, junk, 6), LTK_OK, NULL);
        int ok = indexer_case(&c, st, cap);
        ltk_indexer_state_free(st);
        if (!ok) return;
    }
}

/* Unrestricted float inputs: equal up to float64 rounding (1e-12 of the row's magnitude). */
static void test_indexer_float_inputs(void) {
    enum { T = 3, S = 200, H = 4, D = 16, K = 20 };
    float *q = malloc(sizeof(float) * T * H * D), *kv = malloc(sizeof(float) * S * D), w[T * H], scale[S];
    int32_t idx[T * K];
    float sc[T * K];
    for (int i = 0; i < T * H * D; i++) q[i] = (float)rng_normal();
    for (int i = 0; i < S * D; i++) kv[i] = (float)rng_normal();
    for (int i = 0; i < T * H; i++) w[i] = (float)rng_normal();
    for (int i = 0; i < S; i++) scale[i] = (float)(0.5 + rng_unit());
    ltk_indexer_args a = {.T = T, .S = S, .H = H, .D = D, .k = K, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                          .kv_scale = scale, .weights = w, .out_idx = idx, .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    icfg c = {.T = T, .S = S, .H = H, .D = D, .k = K, .dt = LTK_DTYPE_F32};
    ent v[S];
    g_ascending = 0;
    for (int t = 0; t < T; t++) {
        double mag = 0;
        for (int s = 0; s < S; s++) {
            v[s] = (ent){brute_indexer_score(&c, q, H * D, kv, D, w, H, scale, t, s), s};
            mag = fmax(mag, fabs(v[s].s));
        }
        qsort(v, S, sizeof *v, ent_order);
        for (int j = 0; j < K; j++) {
            int32_t x = idx[t * K + j];
            ASSERT_TRUE(x >= 0 && x < S);
            double sx = brute_indexer_score(&c, q, H * D, kv, D, w, H, scale, t, x);
            test_ctx("row %d slot %d index %d", t, j, x);
            ASSERT_TRUE(fabs(sx - v[j].s) <= 1e-12 * mag);              /* the j-th best value */
            ASSERT_TRUE(fabs((double)sc[t * K + j] - sx) <= 1e-6 * fabs(sx) + 1e-30); /* its float */
            for (int i = 0; i < j; i++) ASSERT_TRUE(idx[t * K + i] != x);
        }
    }
    free(q), free(kv);
}

/* ---- kNN ---------------------------------------------------------------------------------- */
static void test_knn_vs_brute(void) {
    static const ltk_dtype dts[] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16};
    for (int it = 0; it < 4000; it++) {
        int64_t B = rng_range(1, 4), N = rng_range(0, 30);
        int32_t D = (int32_t)rng_range(1, 10), k = (int32_t)rng_range(1, (int32_t)N + 4);
        ltk_dtype dt = dts[it % 3];
        ltk_metric metric = (ltk_metric)(it / 3 % 3);
        uint32_t flags = (uint32_t)rng_below(2);
        int scores = (int)rng_below(2), strided = (int)rng_below(2);
        size_t el = ltk_dtype_size(dt);
        int64_t qs = D + (strided ? 1 : 0), bs = D + (strided ? 3 : 0), os = k + (strided ? 1 : 0);
        void *q = malloc(el * (size_t)(B * qs)), *base = malloc(el * (size_t)(N * bs + 1));
        int64_t *oi = malloc(sizeof(int64_t) * (size_t)(B * os));
        float *osc = malloc(sizeof(float) * (size_t)(B * os));
        int special = it % 5 == 4;
        for (int64_t i = 0; i < B * qs; i++)
            if (i % qs < D) gen_grid(q, dt, i), maybe_special(q, dt, i, special);
            else put_nan(q, dt, i);
        for (int64_t i = 0; i < N * bs; i++)
            if (i % bs < D) gen_grid(base, dt, i), maybe_special(base, dt, i, special);
            else put_nan(base, dt, i);
        /* zero vectors (cosine: score 0), and exact duplicates (ties) */
        for (int64_t r = 0; r < N; r++) {
            int64_t kind = rng_below(8);
            if (kind == 0)
                for (int32_t d = 0; d < D; d++) memset((char *)base + el * (size_t)(r * bs + d), 0, el);
            else if (kind == 1 && r > 0)
                memcpy((char *)base + el * (size_t)(r * bs), (char *)base + el * (size_t)(rng_below(r) * bs), el * (size_t)D);
        }
        if (rng_below(6) == 0) memset(q, 0, el * (size_t)D); /* a zero query (cosine: all 0) */
        memset(oi, 0x7b, sizeof(int64_t) * (size_t)(B * os));
        memset(osc, 0x7b, sizeof(float) * (size_t)(B * os));
        ltk_knn_args a = {.B = B, .N = N, .D = D, .k = k, .dtype = dt, .metric = metric, .queries = q,
                          .q_stride = strided ? qs : 0, .base = base, .base_stride = strided ? bs : 0,
                          .out_idx = oi, .out_scores = scores ? osc : NULL, .out_stride = strided ? os : 0,
                          .flags = flags};
        ltk_stats stats;
        ltk_exec e = {.backend = LTK_BACKEND_REF, .stats = &stats};
        test_ctx("knn B=%lld N=%lld D=%d k=%d %s metric=%d flags=%u scores=%d strided=%d special=%d", (long long)B,
                 (long long)N, D, k, dt_name(dt), (int)metric, flags, scores, strided, special);
        ltk_status st = ltk_knn_topk(&a, &e);
        int ok = CHECK(st == LTK_OK, "%s", ltk_last_error()) && CHECK(stats.rows == B, "stats.rows");
        ent *v = malloc(sizeof(ent) * (size_t)(N + 1));
        g_ascending = metric == LTK_METRIC_L2;
        for (int64_t b = 0; b < B && ok; b++) {
            double qn = 0;
            for (int32_t d = 0; d < D; d++) qn += dec_val(q, dt, b * qs + d) * dec_val(q, dt, b * qs + d);
            for (int64_t i = 0; i < N; i++) {
                double xn = 0, dot = 0;
                for (int32_t d = 0; d < D; d++) {
                    double x = dec_val(base, dt, i * bs + d);
                    xn += x * x;
                    dot += dec_val(q, dt, b * qs + d) * x;
                }
                double s = metric == LTK_METRIC_IP   ? dot
                           : metric == LTK_METRIC_L2 ? qn + xn - 2.0 * dot
                           : (qn == 0.0 || xn == 0.0) ? 0.0
                                                      : dot / (sqrt(qn) * sqrt(xn));
                v[i] = (ent){s, i};
            }
            rowspec rs = {.k = k, .sorted = !(flags & LTK_FLAG_UNSORTED),
                          .pad = metric == LTK_METRIC_L2 ? INFINITY : -INFINITY};
            ok = check_row("knn", b, v, N, &rs, oi + b * os, scores ? osc + b * os : NULL);
        }
        ok = ok && stride_gap_intact(oi, sizeof(int64_t), B, k, os);
        free(v), free(q), free(base), free(oi), free(osc);
        if (!ok) return;
    }
}

/* ---- select ------------------------------------------------------------------------------- */
static void gen_select_value(void *p, ltk_dtype dt, int64_t i, int mode) {
    if (dt == LTK_DTYPE_F32) {
        float x;
        int64_t r = rng_below(16);
        if (mode == 0) x = (float)rng_range(-3, 3); /* heavy ties */
        else if (r == 0) x = NAN;
        else if (r == 1) x = rng_below(2) ? INFINITY : -INFINITY;
        else if (r == 2) x = rng_below(2) ? 0.0f : -0.0f;
        else if (r == 3) x = t_bits_f32((uint32_t)rng_below(0x800000) | (rng_below(2) ? 0x80000000u : 0)); /* subnormal */
        else if (r == 4) x = t_bits_f32(rng_u32()); /* any pattern, NaN payloads included */
        else x = (float)rng_normal();
        ((float *)p)[i] = x;
    } else {
        uint16_t u = (uint16_t)rng_u32();
        if (mode == 0) u = (uint16_t)(u & 0x8007) | (dt == LTK_DTYPE_F16 ? 0x3c00 : 0x3f80); /* few values */
        ((uint16_t *)p)[i] = u;
    }
}

static void test_select_vs_brute(void) {
    static const ltk_dtype dts[] = {LTK_DTYPE_F32, LTK_DTYPE_F16, LTK_DTYPE_BF16};
    for (int it = 0; it < 4000; it++) {
        int64_t R = rng_range(1, 5), C = rng_range(0, 60);
        int32_t k = (int32_t)rng_range(1, (int32_t)C + 4);
        ltk_dtype dt = dts[it % 3];
        uint32_t flags = (uint32_t)rng_below(4);
        int scores = (int)rng_below(2), strided = (int)rng_below(2), ranges = (int)rng_below(2), mode = it / 3 % 2;
        size_t el = ltk_dtype_size(dt);
        int64_t rsd = C + (strided ? 5 : 0), os = k + (strided ? 3 : 0);
        void *m = malloc(el * (size_t)(R * rsd + 1));
        int32_t *st_ = malloc(sizeof(int32_t) * (size_t)R), *en = malloc(sizeof(int32_t) * (size_t)R);
        int32_t *oi = malloc(sizeof(int32_t) * (size_t)(R * os));
        int64_t *gi = malloc(sizeof(int64_t) * (size_t)k);
        float *osc = malloc(sizeof(float) * (size_t)(R * os));
        ent *v = malloc(sizeof(ent) * (size_t)(C + 1));
        for (int64_t i = 0; i < R * rsd; i++) {
            if (i % rsd < C) gen_select_value(m, dt, i, mode);
            else if (dt == LTK_DTYPE_F32) ((float *)m)[i] = INFINITY; /* padding must never be selected */
            else ((uint16_t *)m)[i] = dt == LTK_DTYPE_F16 ? 0x7c00 : 0x7f80;
        }
        for (int64_t r = 0; r < R; r++) {
            int64_t x = rng_range(0, C), y = rng_range(0, C);
            st_[r] = (int32_t)(x < y ? x : y), en[r] = (int32_t)(x < y ? y : x);
        }
        memset(oi, 0x7b, sizeof(int32_t) * (size_t)(R * os));
        memset(osc, 0x7b, sizeof(float) * (size_t)(R * os));
        ltk_select_args a = {.rows = R, .cols = C, .k = k, .dtype = dt, .scores = m, .row_stride = strided ? rsd : 0,
                             .starts = ranges ? st_ : NULL, .ends = ranges ? en : NULL, .out_idx = oi,
                             .out_scores = scores ? osc : NULL, .out_stride = strided ? os : 0, .flags = flags};
        ltk_exec e = {.backend = LTK_BACKEND_REF};
        test_ctx("select rows=%lld cols=%lld k=%d %s flags=%u scores=%d strided=%d ranges=%d mode=%d", (long long)R,
                 (long long)C, k, dt_name(dt), flags, scores, strided, ranges, mode);
        ltk_status st = ltk_select_topk(&a, &e);
        int ok = CHECK(st == LTK_OK, "%s", ltk_last_error());
        g_ascending = 0;
        for (int64_t r = 0; r < R && ok; r++) {
            int64_t lo = ranges ? st_[r] : 0, hi = ranges ? en[r] : C;
            for (int64_t cix = lo; cix < hi; cix++) v[cix - lo] = (ent){dec_val(m, dt, r * rsd + cix), cix};
            rowspec rs = {.k = k, .lo = lo, .base = (flags & LTK_FLAG_ABSOLUTE) ? 0 : lo,
                          .sorted = !(flags & LTK_FLAG_UNSORTED), .bits = 1, .pad = -INFINITY};
            for (int32_t j = 0; j < k; j++) gi[j] = oi[r * os + j];
            ok = check_row("select", r, v, hi - lo, &rs, gi, scores ? osc + r * os : NULL);
        }
        ok = ok && stride_gap_intact(oi, sizeof(int32_t), R, k, os);
        free(m), free(st_), free(en), free(oi), free(gi), free(osc), free(v);
        if (!ok) return;
    }
}

/* ---- the contract's rules, spelled out ---------------------------------------------------- */
static void test_order_rules(void) {
    /* ties by the lower index; -0 == +0 (index 5 before 6); -inf below finite; NaN below -inf */
    float s[8] = {3, 1, 3, NAN, -INFINITY, -0.0f, 0.0f, 3};
    int32_t idx[10];
    float sc[10];
    ltk_select_args a = {.rows = 1, .cols = 8, .k = 10, .dtype = LTK_DTYPE_F32, .scores = s, .out_idx = idx,
                         .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ASSERT_STATUS(ltk_select_topk(&a, &e), LTK_OK, NULL);
    static const int32_t want[10] = {0, 2, 7, 1, 5, 6, 4, 3, -1, -1};
    for (int j = 0; j < 10; j++) ASSERT_EQ_INT(idx[j], want[j]);
    ASSERT_SAME_F32(sc[4], -0.0f);
    ASSERT_SAME_F32(sc[5], 0.0f);
    ASSERT_TRUE(isinf(sc[6]) && sc[6] < 0);
    ASSERT_TRUE(isnan(sc[7]));
    ASSERT_TRUE(isinf(sc[8]) && sc[8] < 0 && isinf(sc[9]) && sc[9] < 0);
    /* more NaNs than S - k: the NaNs with the lowest indices are returned, after the rest */
    float s2[5] = {NAN, 5, NAN, NAN, 1};
    a.scores = s2, a.cols = 5, a.k = 3;
    ASSERT_STATUS(ltk_select_topk(&a, &e), LTK_OK, NULL);
    ASSERT_EQ_INT(idx[0], 1);
    ASSERT_EQ_INT(idx[1], 4);
    ASSERT_EQ_INT(idx[2], 0);
    /* ranges: relative by default, absolute with the flag; an empty range is all padding */
    float s3[2 * 5] = {10, 20, 30, 40, 50, 10, 20, 30, 40, 50};
    int32_t st[2] = {1, 3}, en[2] = {4, 3};
    a = (ltk_select_args){.rows = 2, .cols = 5, .k = 2, .dtype = LTK_DTYPE_F32, .scores = s3, .starts = st,
                          .ends = en, .out_idx = idx};
    ASSERT_STATUS(ltk_select_topk(&a, &e), LTK_OK, NULL);
    ASSERT_EQ_INT(idx[0], 2);
    ASSERT_EQ_INT(idx[1], 1);
    ASSERT_EQ_INT(idx[2], -1);
    ASSERT_EQ_INT(idx[3], -1);
    a.flags = LTK_FLAG_ABSOLUTE;
    ASSERT_STATUS(ltk_select_topk(&a, &e), LTK_OK, NULL);
    ASSERT_EQ_INT(idx[0], 3);
    ASSERT_EQ_INT(idx[1], 2);
    ASSERT_EQ_INT(idx[2], -1);
}

static void test_knn_rules(void) {
    /* L2: ascending distance, ties by index, +inf padding; IP and cosine pad with -inf */
    float q[2] = {0, 0}, base[3 * 2] = {1, 0, 0, 1, 0, 0}; /* distances 1, 1, 0 */
    int64_t idx[5];
    float sc[5];
    ltk_knn_args a = {.B = 1, .N = 3, .D = 2, .k = 5, .dtype = LTK_DTYPE_F32, .metric = LTK_METRIC_L2, .queries = q,
                      .base = base, .out_idx = idx, .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ASSERT_STATUS(ltk_knn_topk(&a, &e), LTK_OK, NULL);
    static const int64_t want[5] = {2, 0, 1, -1, -1};
    for (int j = 0; j < 5; j++) ASSERT_EQ_INT(idx[j], want[j]);
    ASSERT_SAME_F32(sc[0], 0.0f);
    ASSERT_SAME_F32(sc[1], 1.0f);
    ASSERT_SAME_F32(sc[3], INFINITY);
    ASSERT_SAME_F32(sc[4], INFINITY);
    /* cosine with a zero query: every score 0, so index order */
    a.metric = LTK_METRIC_COS;
    ASSERT_STATUS(ltk_knn_topk(&a, &e), LTK_OK, NULL);
    ASSERT_EQ_INT(idx[0], 0);
    ASSERT_EQ_INT(idx[1], 1);
    ASSERT_EQ_INT(idx[2], 2);
    ASSERT_TRUE(sc[0] == 0 && sc[1] == 0 && sc[2] == 0);
    ASSERT_SAME_F32(sc[3], -INFINITY);
    /* cosine with a zero base vector: 0 for it, not NaN */
    float q2[2] = {1, 1}, base2[3 * 2] = {-1, 0, 0, 0, 1, 1};
    a.queries = q2, a.base = base2;
    ASSERT_STATUS(ltk_knn_topk(&a, &e), LTK_OK, NULL);
    ASSERT_EQ_INT(idx[0], 2);
    ASSERT_EQ_INT(idx[1], 1);
    ASSERT_EQ_INT(idx[2], 0);
    ASSERT_TRUE(sc[1] == 0.0f);
    ASSERT_TRUE(fabsf(sc[0] - 1.0f) < 1e-6f && fabsf(sc[2] + 0.70710678f) < 1e-6f);
    /* a NaN coordinate gives a NaN score, ranked last, for every metric */
    float base3[3 * 2] = {NAN, 0, 0, 1, 2, 2};
    a.base = base3, a.k = 3;
    for (int mtr = 0; mtr < 3; mtr++) {
        a.metric = (ltk_metric)mtr;
        test_ctx("metric %d with a NaN base vector", mtr);
        ASSERT_STATUS(ltk_knn_topk(&a, &e), LTK_OK, NULL);
        ASSERT_EQ_INT(idx[2], 0);
        ASSERT_TRUE(isnan(sc[2]));
    }
}

/* The oracle ignores the host's denormal modes: with FTZ/DAZ set (as a -ffast-math program does),
 * subnormal inputs still rank by their true values and come back unflushed, the same bits as with
 * the modes clear. x86 only (MXCSR); elsewhere the test has nothing to set. */
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
static void run_subnormal(int ftz_daz, int32_t *sel_idx, float *sel_val, int64_t *knn_idx, float *knn_val) {
    /* select: subnormal f32 scores of distinct magnitudes (a flushing reader sees 0 for all) */
    uint32_t bits[6] = {0x00000005u, 0x00000009u, 0x80000003u, 0x00000001u, 0x00000007u, 0x00400000u};
    float sc[6];
    memcpy(sc, bits, sizeof sc);
    /* kNN: a subnormal query against unit base vectors: scores are the query's own components */
    float qv[2], base[6] = {1, 0, 0, 1, 0.5f, 0.5f};
    uint32_t qb[2] = {0x00000010u, 0x00000020u};
    memcpy(qv, qb, sizeof qv);
    unsigned saved = _mm_getcsr();
    if (ftz_daz) _mm_setcsr(saved | 0x8040u);
    ltk_select_args sa = {.rows = 1, .cols = 6, .k = 4, .dtype = LTK_DTYPE_F32, .scores = sc, .out_idx = sel_idx,
                          .out_scores = sel_val};
    ltk_knn_args ka = {.B = 1, .N = 3, .D = 2, .k = 3, .dtype = LTK_DTYPE_F32, .queries = qv, .base = base,
                       .out_idx = knn_idx, .out_scores = knn_val};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ltk_status s1 = ltk_select_topk(&sa, &e), s2 = ltk_knn_topk(&ka, &e);
    unsigned after = _mm_getcsr();
    _mm_setcsr(saved);
    ASSERT_STATUS(s1, LTK_OK, NULL);
    ASSERT_STATUS(s2, LTK_OK, NULL);
    ASSERT_TRUE(after == (ftz_daz ? (saved | 0x8040u) : saved)); /* the caller's modes are restored */
}

static void test_ref_ignores_ftz_daz(void) {
    int32_t i0[4], i1[4];
    float v0[4], v1[4], kv0[3], kv1[3];
    int64_t k0[3], k1[3];
    run_subnormal(0, i0, v0, k0, kv0);
    run_subnormal(1, i1, v1, k1, kv1);
    const int32_t want[4] = {5, 1, 4, 0}; /* 0x00400000 > 9 > 7 > 5 (in units of the smallest subnormal) */
    for (int j = 0; j < 4; j++) {
        ASSERT_EQ_INT(i0[j], want[j]);
        ASSERT_EQ_INT(i1[j], want[j]);
        ASSERT_TRUE(memcmp(&v0[j], &v1[j], 4) == 0);
    }
    for (int j = 0; j < 3; j++) {
        ASSERT_EQ_INT((int)k0[j], (int)k1[j]);
        ASSERT_TRUE(memcmp(&kv0[j], &kv1[j], 4) == 0);
    }
    ASSERT_EQ_INT((int)k1[0], 1); /* q = (16, 32) x 2^-149: base row 1 (0, 1) scores highest */
}
#else
static void test_ref_ignores_ftz_daz(void) {}
#endif

static void test_short_row_rule(void) {
    /* ke - ks <= k with UNSORTED and no scores: index order, unscored; otherwise scored and sorted */
    float q[1] = {1}, kv[6] = {1, 5, 2, 9, 3, 7}, w[1] = {1};
    int32_t ks[1] = {1}, ke[1] = {5}, idx[6];
    float sc[6];
    ltk_indexer_args a = {.T = 1, .S = 6, .H = 1, .D = 1, .k = 6, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                          .weights = w, .ks = ks, .ke = ke, .out_idx = idx, .flags = LTK_FLAG_UNSORTED};
    ltk_exec e = {.backend = LTK_BACKEND_REF};
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    static const int32_t rel[6] = {0, 1, 2, 3, -1, -1}, abs_[6] = {1, 2, 3, 4, -1, -1};
    for (int j = 0; j < 6; j++) ASSERT_EQ_INT(idx[j], rel[j]);
    a.flags = LTK_FLAG_UNSORTED | LTK_FLAG_ABSOLUTE;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    for (int j = 0; j < 6; j++) ASSERT_EQ_INT(idx[j], abs_[j]);
    /* sorted: by score (5, 9, 2, 3 at 1..4 -> relative 2, 0, 3, 1) */
    a.flags = 0;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    static const int32_t sorted[6] = {2, 0, 3, 1, -1, -1};
    for (int j = 0; j < 6; j++) ASSERT_EQ_INT(idx[j], sorted[j]);
    /* unsorted with scores: the scored set (checked as such in test_indexer_vs_brute), scores match */
    a.flags = LTK_FLAG_UNSORTED;
    a.out_scores = sc;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    for (int j = 0; j < 6; j++)
        if (idx[j] >= 0) ASSERT_SAME_F32(sc[j], kv[idx[j] + 1]);
        else ASSERT_SAME_F32(sc[j], -INFINITY);
    /* the shortcut is for short rows only: a longer row is scored even without out_scores */
    a.out_scores = NULL;
    a.k = 2;
    a.flags = LTK_FLAG_UNSORTED;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_OK, NULL);
    ASSERT_TRUE((idx[0] == 2 && idx[1] == 0) || (idx[0] == 0 && idx[1] == 2));
}

int main(int argc, char **argv) {
    static const t_test tests[] = {
        T_ENTRY(test_e4m3_decode),       T_ENTRY(test_f16_decode_and_order), T_ENTRY(test_bf16_decode_and_order),
        T_ENTRY(test_order_rules),       T_ENTRY(test_knn_rules),            T_ENTRY(test_short_row_rule),
        T_ENTRY(test_indexer_vs_brute),  T_ENTRY(test_indexer_state_vote),   T_ENTRY(test_indexer_float_inputs),
        T_ENTRY(test_knn_vs_brute),      T_ENTRY(test_select_vs_brute),     T_ENTRY(test_ref_ignores_ftz_daz),
    };
    return T_RUN_ALL(tests);
}
