/* GPU tests of the CUDA indexer (ltk_indexer_topk on LTK_BACKEND_CUDA).
 *
 *   small_*  fused (and materialize) against exact float64 scores computed here: the returned set
 *            must hold every key whose exact score is above the exact k-th best by more than the
 *            tolerance (FP8 tensor-core accumulation: ~2e-4 of the row's largest |score|; 2e-3
 *            used), and nothing below it by more than the tolerance; counts, padding, ranges,
 *            order and reported scores checked; fused == materialize bit for bit (same scores,
 *            exact selection); adversarial inputs (flat rows that overflow the candidate buffer,
 *            ties at k, NaN/inf scores via kv_scale, k = 1, k = S, k > S, empty ranges, causal,
 *            S not a tile multiple), the portable path (LTK_CUDA_PORTABLE=1), a gate that passes
 *            nothing (every row on the exact fallback), bad carried samples, the hot-set vote,
 *            workspace bounds, CUDA-graph capture, statistics.
 *   large_*  fused vs materialize bit for bit on DSA-sized shapes (H 64/32, k up to 8192, 64-bit
 *            key offsets), plus a few rows against the exact scores.
 * Outputs are poisoned before every run and surrounded by canaries.
 * Exits 77 (skipped) when no CUDA device is present. */
#define _POSIX_C_SOURCE 200809L
#include "gpu-util.h" /* and harness.h */
#include "ltk-tune.h" /* ltk_tune_set: the portable path, the dense dispatch and the no-pass gate */

#include <float.h>

typedef struct {
    int64_t T, S;
    int H, D, k;
    ltk_dtype dt;
    int ranges;   /* 0 none, 1 random (some empty), 2 causal at the end, 3 causal sliding window, 4 all empty */
    int kv_mode;  /* 0 random, 1 flat, 2 ties (3 distinct keys), 3 NaN/inf scales, 4 DSA-like */
    uint32_t flags;
    int scores;   /* request out_scores */
    int64_t q_pad, kv_pad, out_pad;
    int pos_w;    /* positive weights */
    int sc_off;   /* kv_scale starts this many floats into its buffer (1-3: not 16-byte aligned) */
} cfg_t;

typedef struct {
    cfg_t c;
    size_t es;
    int64_t qs, kvs, os;
    uint8_t *hq, *hkv;
    float *hsc, *hw;
    int32_t *hks, *hke;
    void *dq, *dkv;
    float *dsc, *dw;
    float *dsc_buf; /* what dsc points into (sc_off floats before it) */
    int32_t *dks, *dke;
} inp_t;

#define POISON 0x7f7f7f7f
#define GUARD 64 /* elements of canary before and after each output buffer */

static double dec(const inp_t *in, const uint8_t *base, int64_t i) { return dec_val(base, in->c.dt, i); }

static void put(const inp_t *in, uint8_t *base, int64_t i, float v) {
    switch (in->c.dt) {
    case LTK_DTYPE_E4M3: base[i] = t_f32_e4m3(v); break;
    case LTK_DTYPE_BF16: ((uint16_t *)base)[i] = t_f32_bf16(v); break;
    default: ((float *)base)[i] = v;
    }
}

static float rnd_val(void) {
    /* e4m3-friendly magnitudes 2^-4 .. 2^3 with random sign */
    double m = ldexp(1.0 + rng_unit(), (int)rng_range(-4, 2));
    return (float)(rng_below(2) ? m : -m);
}

static void inp_free(inp_t *in) {
    free(in->hq);
    free(in->hkv);
    free(in->hsc);
    free(in->hw);
    free(in->hks);
    free(in->hke);
    cudaFree(in->dq);
    cudaFree(in->dkv);
    cudaFree(in->dsc_buf);
    cudaFree(in->dw);
    cudaFree(in->dks);
    cudaFree(in->dke);
    memset(in, 0, sizeof *in);
}

static void inp_make(inp_t *in, const cfg_t *c) {
    memset(in, 0, sizeof *in);
    in->c = *c;
    in->es = ltk_dtype_size(c->dt);
    in->qs = (int64_t)c->H * c->D + c->q_pad;
    in->kvs = c->D + c->kv_pad;
    in->os = c->k + c->out_pad;
    const int64_t T = c->T, S = c->S;
    in->hq = malloc(in->es * (size_t)(T * in->qs + 1));
    in->hkv = malloc(in->es * (size_t)(S * in->kvs + 1));
    in->hsc = malloc(sizeof(float) * (size_t)(S + 1));
    in->hw = malloc(sizeof(float) * (size_t)(T * c->H + 1));
    /* padding holds NaN codes: reading it would show */
    memset(in->hq, 0x7f, in->es * (size_t)(T * in->qs + 1));
    memset(in->hkv, 0x7f, in->es * (size_t)(S * in->kvs + 1));
    if (c->kv_mode == 4 && c->dt == LTK_DTYPE_E4M3 && c->q_pad == 0 && c->kv_pad == 0) {
        gu_gen_dsa(rng_u64(), T, S, c->H, c->D, in->hq, in->hkv, in->hsc, in->hw);
    } else {
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < (int64_t)c->H * c->D; i++) put(in, in->hq, t * in->qs + i, rnd_val());
        for (int64_t s = 0; s < S; s++) {
            int64_t src = s;
            if (c->kv_mode == 1) src = 0;
            if (c->kv_mode == 2) src = s % 3;
            for (int d = 0; d < c->D; d++) {
                if (src == s) put(in, in->hkv, s * in->kvs + d, rnd_val());
                else memcpy(in->hkv + in->es * (size_t)(s * in->kvs + d), in->hkv + in->es * (size_t)(src * in->kvs + d),
                            in->es);
            }
            float sc = (float)(0.5 + rng_unit());
            if (c->kv_mode == 1 || c->kv_mode == 2) sc = 1.0f;
            if (c->kv_mode == 3) {
                double u = rng_unit();
                sc = u < 0.08 ? NAN : u < 0.12 ? INFINITY : u < 0.16 ? -INFINITY : u < 0.20 ? 0.0f : sc;
            }
            in->hsc[s] = sc;
        }
        for (int64_t i = 0; i < T * c->H; i++) {
            float w = (float)rng_normal() / sqrtf((float)c->D * (float)c->H);
            in->hw[i] = c->pos_w ? fabsf(w) : w;
        }
    }
    if (c->ranges) {
        in->hks = malloc(sizeof(int32_t) * (size_t)(T + 1));
        in->hke = malloc(sizeof(int32_t) * (size_t)(T + 1));
        for (int64_t t = 0; t < T; t++) {
            int64_t a = 0, b = S;
            if (c->ranges == 1) {
                if (rng_below(7) == 0) a = b = rng_range(0, S);
                else {
                    a = rng_range(0, S);
                    b = rng_range(a, S);
                    if (rng_below(3) == 0) a = 0;
                }
            } else if (c->ranges == 2 || c->ranges == 3) {
                b = S - T + t + 1;
                b = b < 0 ? 0 : (b > S ? S : b);
                a = c->ranges == 3 ? (b - S / 2 > 0 ? b - S / 2 : 0) : 0;
            } else if (c->ranges == 4) {
                a = b = rng_range(0, S);
            }
            in->hks[t] = (int32_t)a;
            in->hke[t] = (int32_t)b;
        }
    }
    in->dq = gu_upload(in->hq, in->es * (size_t)(T * in->qs));
    in->dkv = gu_upload(in->hkv, in->es * (size_t)(S * in->kvs));
    in->dsc_buf = gu_upload(NULL, sizeof(float) * (size_t)(S + c->sc_off));
    in->dsc = in->dsc_buf + c->sc_off;
    GPU_CHECK(cudaMemcpy(in->dsc, in->hsc, sizeof(float) * (size_t)S, cudaMemcpyHostToDevice));
    in->dw = gu_upload(in->hw, sizeof(float) * (size_t)(T * c->H));
    if (c->ranges) {
        in->dks = gu_upload(in->hks, sizeof(int32_t) * (size_t)T);
        in->dke = gu_upload(in->hke, sizeof(int32_t) * (size_t)T);
    }
}

static void row_range(const inp_t *in, int64_t t, int64_t *lo, int64_t *hi) {
    *lo = in->hks ? in->hks[t] : 0;
    *hi = in->hke ? in->hke[t] : in->c.S;
}

/* float64 score of (t, s), NaN kept through the ReLU as the reference does; *mag (if not NULL) gets
 * |kv_scale| * sum_h |w_h| * sum_d |q_hd * k_d|, the scale of the FP8 tensor-core rounding error. */
static double exact_score_mag(const inp_t *in, int64_t t, int64_t s, double *mag) {
    const cfg_t *c = &in->c;
    double acc = 0.0, m = 0.0;
    for (int h = 0; h < c->H; h++) {
        double dot = 0.0, am = 0.0;
        for (int d = 0; d < c->D; d++) {
            double pr = dec(in, in->hq, t * in->qs + (int64_t)h * c->D + d) * dec(in, in->hkv, s * in->kvs + d);
            dot += pr;
            am += fabs(pr);
        }
        acc += (double)in->hw[t * c->H + h] * (dot > 0.0 ? dot : (isnan(dot) ? dot : 0.0));
        m += fabs((double)in->hw[t * c->H + h]) * am;
    }
    if (mag) *mag = m * fabs((double)in->hsc[s]);
    return acc * (double)in->hsc[s];
}

/* ORDER as a double: NaN below -inf below every finite score */
static double rankv(double x) {
    if (isnan(x)) return -1.7e308;
    if (isinf(x)) return x > 0 ? 1.6e308 : -1.6e308;
    return x;
}

typedef struct {
    int32_t *idx;   /* host copy, T * os (+guards) */
    float *sc;
    int ok;         /* status of the call */
} out_t;

/* Runs the indexer on the GPU with poisoned, guarded outputs; copies them back and checks the
 * guards and the untouched padding columns. */
static ltk_status run_gpu(const inp_t *in, ltk_algo algo, ltk_indexer_state *state, ltk_stats *stats,
                          int32_t **idx_out, float **sc_out) {
    const cfg_t *c = &in->c;
    const int64_t n = c->T * in->os + 2 * GUARD;
    int32_t *di = NULL;
    float *ds = NULL;
    GPU_CHECK(cudaMalloc((void **)&di, sizeof(int32_t) * (size_t)n));
    GPU_CHECK(cudaMemset(di, 0x7f, sizeof(int32_t) * (size_t)n));
    if (c->scores) {
        GPU_CHECK(cudaMalloc((void **)&ds, sizeof(float) * (size_t)n));
        GPU_CHECK(cudaMemset(ds, 0x7f, sizeof(float) * (size_t)n));
    }
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = c->T;
    a.S = c->S;
    a.H = c->H;
    a.D = c->D;
    a.k = c->k;
    a.dtype = c->dt;
    a.q = in->dq;
    a.q_stride_t = in->qs;
    a.kv = in->dkv;
    a.kv_stride_s = in->kvs;
    a.kv_scale = in->dsc;
    a.weights = in->dw;
    a.ks = in->dks;
    a.ke = in->dke;
    a.out_idx = di + GUARD;
    a.out_scores = ds ? ds + GUARD : NULL;
    a.out_stride = in->os;
    a.flags = c->flags;
    a.state = state;
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    e.algo = algo;
    e.stats = stats;
    ltk_status st = ltk_indexer_topk(&a, &e);
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
        fprintf(stderr, "    CUDA error after the call: %s\n", cudaGetErrorString(ce));
        exit(3);
    }
    int32_t *hi = malloc(sizeof(int32_t) * (size_t)n);
    float *hs = c->scores ? malloc(sizeof(float) * (size_t)n) : NULL;
    GPU_CHECK(cudaMemcpy(hi, di, sizeof(int32_t) * (size_t)n, cudaMemcpyDeviceToHost));
    if (hs) GPU_CHECK(cudaMemcpy(hs, ds, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
    cudaFree(di);
    cudaFree(ds);
    if (st == LTK_OK && algo != LTK_ALGO_SCORE_ONLY) {
        int bad = 0;
        for (int64_t i = 0; i < GUARD && !bad; i++)
            bad |= !CHECK(hi[i] == POISON && hi[n - 1 - i] == POISON, "output canary overwritten (idx)");
        for (int64_t t = 0; t < c->T && !bad; t++)
            for (int64_t j = c->k; j < in->os && !bad; j++)
                bad |= !CHECK(hi[GUARD + t * in->os + j] == POISON, "row %lld: padding column %lld written", (long long)t,
                              (long long)j);
        if (hs)
            for (int64_t i = 0; i < GUARD && !bad; i++) {
                uint32_t u0, u1;
                memcpy(&u0, &hs[i], 4);
                memcpy(&u1, &hs[n - 1 - i], 4);
                bad |= !CHECK(u0 == POISON && u1 == POISON, "output canary overwritten (scores)");
            }
    }
    *idx_out = hi;
    if (sc_out) *sc_out = hs;
    else free(hs);
    return st;
}

static int cmpd(const void *a, const void *b) { /* descending */
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Checks row t of a GPU result against exact scores. Returns 1 if fine. */
static int check_row(const inp_t *in, int64_t t, const int32_t *oi, const float *os, double tol_rel) {
    const cfg_t *c = &in->c;
    int64_t lo, hi;
    row_range(in, t, &lo, &hi);
    lo = lo < 0 ? 0 : lo;
    hi = hi > c->S ? c->S : hi;
    const int64_t n = hi > lo ? hi - lo : 0;
    const int64_t base = (c->flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
    const int64_t need = n < c->k ? n : c->k;
    for (int64_t j = 0; j < c->k; j++) {
        if (oi[j] == POISON) return CHECK(0, "row %lld slot %lld never written", (long long)t, (long long)j);
    }
    for (int64_t j = need; j < c->k; j++) {
        if (!CHECK(oi[j] == -1, "row %lld slot %lld: %d, want -1 padding", (long long)t, (long long)j, oi[j])) return 0;
        if (os && !CHECK(isinf(os[j]) && os[j] < 0, "row %lld slot %lld: padding score %g", (long long)t, (long long)j,
                         os[j]))
            return 0;
    }
    if (need == 0) return 1;
    if ((c->flags & LTK_FLAG_UNSORTED) && !os && n <= c->k) {
        for (int64_t j = 0; j < n; j++)
            if (!CHECK(oi[j] == lo + j - base, "short row %lld slot %lld: %d, want %lld", (long long)t, (long long)j,
                       oi[j], (long long)(lo + j - base)))
                return 0;
        return 1;
    }
    double *ex = malloc(sizeof(double) * (size_t)n);
    double *rk = malloc(sizeof(double) * (size_t)n);
    double *mg = malloc(sizeof(double) * (size_t)n);
    char *sel = calloc((size_t)n, 1);
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; i++) ex[i] = exact_score_mag(in, t, lo + i, &mg[i]);
    double mx = 0.0, mgx = 0.0;
    for (int64_t i = 0; i < n; i++) {
        rk[i] = rankv(ex[i]);
        if (isfinite(ex[i]) && fabs(ex[i]) > mx) mx = fabs(ex[i]);
        if (isfinite(mg[i]) && mg[i] > mgx) mgx = mg[i];
    }
    /* FP8 wgmma on Hopper does not accumulate in full fp32: products are aligned to the largest
     * exponent and kept to ~13 fraction bits (truncated), so a score is exact only to ~2^-13 of
     * sum_h |w_h| sum_d |q_hd k_d| (mag), not of |score|: rows whose heads cancel (a single key, a
     * flat row) have |score| << mag. Replaying the two failures of the second H200 run on the CPU
     * with such a truncating accumulator gives the GPU's errors; a layout bug errs by >= 2^-7 mag. */
    const double tol = tol_rel * mx + (c->dt == LTK_DTYPE_E4M3 ? ldexp(mgx, -11) : 0.0) + 1e-6;
    free(mg);
    int ok = 1;
    for (int64_t j = 0; j < need && ok; j++) {
        int64_t i = (int64_t)oi[j] + base - lo;
        ok &= CHECK(i >= 0 && i < n, "row %lld slot %lld: index %d outside the range [%lld, %lld)", (long long)t,
                    (long long)j, oi[j], (long long)lo, (long long)hi);
        if (!ok) break;
        ok &= CHECK(!sel[i], "row %lld: index %d returned twice", (long long)t, oi[j]);
        sel[i] = 1;
    }
    /* the exact need-th best value */
    double kth = 0.0;
    if (ok) {
        double *tmp = malloc(sizeof(double) * (size_t)n);
        memcpy(tmp, rk, sizeof(double) * (size_t)n);
        qsort(tmp, (size_t)n, sizeof(double), cmpd);
        kth = tmp[need - 1];
        free(tmp);
    }
    for (int64_t j = 0; j < need && ok; j++) {
        int64_t i = (int64_t)oi[j] + base - lo;
        ok &= CHECK(rk[i] >= kth - tol, "row %lld: key %lld (exact %.9g) is below the exact k-th best %.9g by more than %g",
                    (long long)t, (long long)(lo + i), ex[i], kth, tol);
        if (os && ok) {
            double g = os[j];
            int same = (isnan(g) && isnan(ex[i])) || (isinf(g) && isinf(ex[i]) && (g > 0) == (ex[i] > 0)) ||
                       (isfinite(ex[i]) && fabs(g - ex[i]) <= tol);
            ok &= CHECK(same, "row %lld slot %lld: score %.9g, exact %.9g (tol %g)", (long long)t, (long long)j, g, ex[i],
                        tol);
        }
        if (j > 0 && os && ok && !(c->flags & LTK_FLAG_UNSORTED)) {
            /* best first: score descending (NaN last), ties by lower index */
            double a = rankv(os[j - 1]), b = rankv(os[j]);
            ok &= CHECK(a > b || (a == b && oi[j - 1] < oi[j]), "row %lld: slots %lld/%lld out of order", (long long)t,
                        (long long)j - 1, (long long)j);
        }
    }
    for (int64_t i = 0; i < n && ok; i++)
        if (rk[i] > kth + tol)
            ok &= CHECK(sel[i], "row %lld: key %lld (exact %.9g) above the k-th best %.9g + %g is missing", (long long)t,
                        (long long)(lo + i), ex[i], kth, tol);
    free(ex);
    free(rk);
    free(sel);
    return ok;
}

typedef struct {
    int32_t idx;
    uint32_t bits;
} pair_t;
static int cmp_pair(const void *a, const void *b) {
    const pair_t *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Same rows bit for bit; with LTK_FLAG_UNSORTED the order inside a row is free, so each row is
 * compared as a set of (index, score bits). */
static int same_outputs(const inp_t *in, const int32_t *i1, const float *s1, const int32_t *i2, const float *s2,
                        const char *what) {
    const int64_t n = in->c.T * in->os + 2 * GUARD;
    if (in->c.flags & LTK_FLAG_UNSORTED) {
        const int k = in->c.k;
        pair_t *a = malloc(sizeof(pair_t) * (size_t)k), *b = malloc(sizeof(pair_t) * (size_t)k);
        int ok = 1;
        for (int64_t t = 0; t < in->c.T && ok; t++) {
            for (int j = 0; j < k; j++) {
                int64_t o = GUARD + t * in->os + j;
                a[j].idx = i1[o];
                b[j].idx = i2[o];
                a[j].bits = s1 ? t_f32_bits(s1[o]) : 0;
                b[j].bits = s2 ? t_f32_bits(s2[o]) : 0;
            }
            qsort(a, (size_t)k, sizeof(pair_t), cmp_pair);
            qsort(b, (size_t)k, sizeof(pair_t), cmp_pair);
            for (int j = 0; j < k && ok; j++)
                ok = CHECK(a[j].idx == b[j].idx && a[j].bits == b[j].bits,
                           "%s (as sets): row %lld: (%d, 0x%08x) vs (%d, 0x%08x)", what, (long long)t, a[j].idx, a[j].bits,
                           b[j].idx, b[j].bits);
        }
        free(a);
        free(b);
        return ok;
    }
    for (int64_t i = 0; i < n; i++) {
        if (i1[i] != i2[i]) {
            int64_t r = (i - GUARD) / in->os, j = (i - GUARD) % in->os;
            return CHECK(0, "%s: row %lld slot %lld index %d vs %d", what, (long long)r, (long long)j, i1[i], i2[i]);
        }
    }
    if (s1 && s2 && memcmp(s1, s2, sizeof(float) * (size_t)n) != 0) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t a, b;
            memcpy(&a, &s1[i], 4);
            memcpy(&b, &s2[i], 4);
            if (a != b) {
                int64_t r = (i - GUARD) / in->os, j = (i - GUARD) % in->os;
                return CHECK(0, "%s: row %lld slot %lld score bits 0x%08x vs 0x%08x", what, (long long)r, (long long)j, a, b);
            }
        }
    }
    return 1;
}

static const char *cfg_str(const cfg_t *c) {
    static char b[256];
    snprintf(b, sizeof b, "T=%lld S=%lld H=%d D=%d k=%d dt=%d ranges=%d kv=%d flags=%u scores=%d pad=%lld/%lld/%lld",
             (long long)c->T, (long long)c->S, c->H, c->D, c->k, (int)c->dt, c->ranges, c->kv_mode, c->flags, c->scores,
             (long long)c->q_pad, (long long)c->kv_pad, (long long)c->out_pad);
    return b;
}

/* Progress of the bigger cases on stderr (unbuffered), so a stall shows where it happened. */
static double g_phase_t0;
static int g_phase_on;
static void phase(const char *what) {
    if (!g_phase_on) return;
    double t = t_now();
    fprintf(stderr, "      %-34s %8.2f s\n", what, t - g_phase_t0);
    g_phase_t0 = t;
}

/* fused vs exact (all rows, or `rows_checked` spread rows), fused vs materialize bit for bit */
static void run_case(const cfg_t *c, double tol, int64_t rows_checked, int want_fallback) {
    inp_t in;
    g_phase_on = (double)c->T * (double)c->S >= 1e7;
    g_phase_t0 = t_now();
    if (g_phase_on) fprintf(stderr, "    case %s\n", cfg_str(c));
    inp_make(&in, c);
    phase("generate + upload");
    test_ctx("%s", cfg_str(c));
    int32_t *fi = NULL, *mi = NULL;
    float *fs = NULL, *ms = NULL;
    int32_t *rowc = calloc((size_t)c->T + 1, sizeof(int32_t)), *rowb = calloc((size_t)c->T + 1, sizeof(int32_t));
    ltk_stats stf;
    memset(&stf, 0, sizeof stf);
    stf.row_candidates = rowc;
    stf.row_bin_entries = rowb;
    ltk_status s1 = run_gpu(&in, LTK_ALGO_FUSED, NULL, &stf, &fi, &fs);
    CHECK(s1 == LTK_OK, "fused: status %d (%s)", (int)s1, ltk_last_error());
    phase("fused (with stats)");
    ltk_status s2 = run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &mi, &ms);
    CHECK(s2 == LTK_OK, "materialize: status %d (%s)", (int)s2, ltk_last_error());
    phase("materialize");
    if (s1 == LTK_OK && s2 == LTK_OK) {
        same_outputs(&in, fi, fs, mi, ms, "fused vs materialize");
        int64_t step = rows_checked <= 0 || rows_checked >= c->T ? 1 : c->T / rows_checked;
        for (int64_t t = 0; t < c->T && T_FAILURES() == 0; t += step)
            check_row(&in, t, fi + GUARD + t * in.os, fs ? fs + GUARD + t * in.os : NULL, tol);
        phase("compare + exact rows (host)");
        if (g_phase_on)
            fprintf(stderr, "      stats: candidates/row %.0f (max %lld), fallback rows %lld\n",
                    (double)stf.candidates / (double)(c->T > 0 ? c->T : 1), (long long)stf.candidates_max,
                    (long long)stf.fallback_rows);
        CHECK(stf.rows == c->T, "stats.rows %lld", (long long)stf.rows);
        if (want_fallback >= 0)
            CHECK(want_fallback ? stf.fallback_rows > 0 : stf.fallback_rows == 0, "fallback_rows %lld (want %s)",
                  (long long)stf.fallback_rows, want_fallback ? "> 0" : "0");
        int64_t sum = 0;
        for (int64_t t = 0; t < c->T; t++) sum += rowc[t];
        CHECK(sum == stf.candidates, "per-row candidates sum %lld != stats.candidates %lld", (long long)sum,
              (long long)stf.candidates);
    }
    free(fi);
    free(fs);
    free(mi);
    free(ms);
    free(rowc);
    free(rowb);
    inp_free(&in);
}

static cfg_t base_cfg(int64_t T, int64_t S, int H, int k) {
    cfg_t c;
    memset(&c, 0, sizeof c);
    c.T = T;
    c.S = S;
    c.H = H;
    c.D = 128;
    c.k = k;
    c.dt = LTK_DTYPE_E4M3;
    c.scores = 1;
    return c;
}

/* ---- small shapes ------------------------------------------------------------------------- */
static void small_random_vs_exact(void) {
    static const int Hs[] = {64, 32, 16};
    static const int ks[] = {1, 7, 100, 512, 2048};
    static const int64_t Ss[] = {1, 33, 256, 1000, 3001, 8192};
    static const int64_t Ts[] = {1, 2, 5, 33};
    for (int it = 0; it < 28 && T_FAILURES() == 0; it++) {
        cfg_t c = base_cfg(Ts[rng_below(4)], Ss[rng_below(6)], Hs[rng_below(3)], ks[rng_below(5)]);
        c.ranges = (int)rng_below(4);
        c.kv_mode = rng_below(3) == 0 ? 4 : 0;
        c.flags = (uint32_t)rng_below(4);
        c.scores = rng_below(3) != 0;
        c.out_pad = rng_below(2) ? rng_range(1, 9) : 0;
        if (rng_below(4) == 0) {
            c.q_pad = 16 * rng_range(1, 3);
            c.kv_pad = 16 * rng_range(1, 3);
            c.kv_mode = 0;
        }
        run_case(&c, 2e-3, 0, -1);
    }
}

/* Every build of the select's register sort (E = 1, 2, 4, 8, 16 entries a thread for k up to 512,
 * 1,024, 2,048, 4,096, 8,192), each against the exact float64 selection; rows of fewer keys than
 * the kernel's width take the shared-memory network (the k > n case). */
static void small_sort_widths(void) {
    static const int ks[] = {300, 1000, 2000, 3000, 4096, 5000, 8192};
    for (int i = 0; i < 7 && T_FAILURES() == 0; i++) {
        cfg_t c = base_cfg(3, 2 * ks[i] + 77, i % 2 ? 32 : 64, ks[i]);
        c.ranges = i % 3; /* none, random (rows shorter than k too), causal */
        c.scores = 1;
        run_case(&c, 2e-3, 0, -1);
    }
}

static void small_portable_vs_exact(void) {
    const ltk_tune saved = *ltk_tune_get(); /* (the caller may have forced the portable path) */
    ltk_tune t = saved;
    t.cuda_portable = 1;
    ltk_tune_set(&t);
    static const int Hs[] = {64, 8, 4, 128};
    static const int Ds[] = {128, 64, 100};
    static const ltk_dtype dts[] = {LTK_DTYPE_E4M3, LTK_DTYPE_BF16, LTK_DTYPE_F32};
    for (int it = 0; it < 10 && T_FAILURES() == 0; it++) {
        cfg_t c = base_cfg(rng_range(1, 9), rng_range(1, 1500), Hs[rng_below(4)], (int)rng_range(1, 300));
        c.D = Ds[rng_below(3)];
        c.dt = dts[rng_below(3)];
        c.ranges = (int)rng_below(4);
        c.flags = (uint32_t)rng_below(4);
        c.scores = rng_below(3) != 0;
        c.q_pad = rng_below(2) ? rng_range(1, 5) : 0;
        c.kv_pad = rng_below(2) ? rng_range(1, 5) : 0;
        run_case(&c, c.dt == LTK_DTYPE_F32 ? 1e-4 : 2e-3, 0, -1);
    }
    /* the portable path on the adversarial inputs too */
    cfg_t c = base_cfg(4, 3000, 64, 50);
    c.kv_mode = 1;
    run_case(&c, 2e-3, 0, 1);
    c = base_cfg(5, 2000, 32, 64);
    c.kv_mode = 3;
    c.pos_w = 1;
    run_case(&c, 2e-3, 0, -1);
    ltk_tune_set(&saved);
}

/* The sm_90a scan's gate passing nothing (the test hook ltk_tune.cuda_scan_nopass): every row then
 * holds fewer candidates than it needs and takes the exact dense fallback, which must still return
 * the exact top-k, bit for bit as materialize. (Shapes of the sm_90a scan; the portable scan has no
 * such hook and runs the cases as usual.) */
static void small_nopass_fallback(void) {
    const ltk_tune saved = *ltk_tune_get();
    ltk_tune t = saved;
    t.cuda_scan_nopass = 1;
    ltk_tune_set(&t);
    cfg_t c = base_cfg(33, 5000, 64, 100);
    c.ranges = 2;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(70, 3001, 32, 512);
    c.kv_mode = 4;
    c.flags = LTK_FLAG_UNSORTED;
    run_case(&c, 2e-3, 0, -1);
    ltk_tune_set(&saved);
}

/* kv_scale not 16-byte aligned (offset 1-3 floats): the sm_90a scan loads the scales by TMA and
 * needs 16-byte alignment, so these calls take the portable path; offset 4 keeps the sm_90a path
 * with a base that is not the allocation's. Exact either way. */
static void small_scale_offset(void) {
    for (int off = 1; off <= 4 && T_FAILURES() == 0; off++) {
        cfg_t c = base_cfg(off == 4 ? 33 : 5, off % 2 ? 3001 : 1000, off == 2 ? 32 : 64, off == 3 ? 7 : 512);
        c.ranges = off % 3;
        c.sc_off = off;
        run_case(&c, 2e-3, 0, -1);
    }
}

static void small_flat_overflow(void) {
    /* every score of a row equal: the gate passes everything, the buffer overflows, the rows are
     * redone on the exact fallback, and the answer is the lowest k indices */
    for (int H = 64; H >= 16; H /= 2) {
        cfg_t c = base_cfg(6, 7000, H, 64);
        c.kv_mode = 1;
        run_case(&c, 2e-3, 0, 1);
    }
    cfg_t c = base_cfg(9, 9000, 64, 100);
    c.kv_mode = 1;
    c.ranges = 1;
    run_case(&c, 2e-3, 0, -1);
}

static void small_ties_at_k(void) {
    cfg_t c = base_cfg(7, 5000, 64, 1000);
    c.kv_mode = 2;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(5, 4000, 32, 1334); /* k lands inside a tie group */
    c.kv_mode = 2;
    c.ranges = 2;
    run_case(&c, 2e-3, 0, -1);
}

static void small_nan_inf(void) {
    cfg_t c = base_cfg(6, 3000, 64, 200);
    c.kv_mode = 3;
    c.pos_w = 1;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(5, 300, 64, 280); /* fewer non-NaN keys than k: NaN keys returned last */
    c.kv_mode = 3;
    c.pos_w = 1;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(3, 1000, 32, 2000); /* k > n: every key, NaN ones last */
    c.kv_mode = 3;
    c.pos_w = 1;
    run_case(&c, 2e-3, 0, -1);
}

static void small_edges(void) {
    cfg_t c;
    c = base_cfg(4, 5000, 64, 1); /* k = 1 */
    run_case(&c, 2e-3, 0, 0);
    c = base_cfg(4, 777, 64, 777); /* k = S */
    run_case(&c, 2e-3, 0, 0);
    c = base_cfg(3, 500, 32, 900); /* k > S */
    run_case(&c, 2e-3, 0, 0);
    c = base_cfg(3, 500, 32, 900);
    c.flags = LTK_FLAG_UNSORTED;
    c.scores = 0;
    run_case(&c, 2e-3, 0, 0);
    c = base_cfg(8, 3000, 64, 50); /* empty ranges */
    c.ranges = 4;
    run_case(&c, 2e-3, 0, 0);
    c = base_cfg(40, 2000, 64, 64); /* causal */
    c.ranges = 2;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(33, 4099, 16, 300); /* sliding window, S not a tile multiple, absolute */
    c.ranges = 3;
    c.flags = LTK_FLAG_ABSOLUTE;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(2, 257, 64, 256);
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(3, 0, 64, 10); /* no keys at all */
    run_case(&c, 2e-3, 0, 0);
}

/* votes desc, then larger key first */
typedef struct {
    int32_t key, votes;
} kvote;
static int cmp_kvote(const void *a, const void *b) {
    const kvote *x = a, *y = b;
    if (x->votes != y->votes) return x->votes > y->votes ? -1 : 1;
    return (x->key < y->key) - (x->key > y->key);
}
static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void small_state(void) {
    cfg_t c = base_cfg(33, 6000, 64, 200);
    c.ranges = 2;
    c.kv_mode = 4;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s", cfg_str(&c));
    ltk_indexer_state *st = NULL;
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_CUDA, 600, &st), LTK_OK, NULL);
    int32_t *i1 = NULL, *i2 = NULL, *i3 = NULL, *im = NULL;
    float *s1 = NULL, *s2 = NULL, *s3 = NULL, *sm = NULL;
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &im, &sm), LTK_OK, NULL);
    /* cold start with a state: the result is exact and the hot set becomes the vote of the output */
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, st, NULL, &i1, &s1), LTK_OK, NULL);
    same_outputs(&in, i1, s1, im, sm, "fused (cold state) vs materialize");
    {
        int64_t n = 0;
        kvote *v = malloc(sizeof(kvote) * (size_t)(c.T * c.k + 1));
        int32_t *all = malloc(sizeof(int32_t) * (size_t)(c.T * c.k + 1));
        for (int64_t t = 0; t < c.T; t++) {
            int64_t lo, hi;
            row_range(&in, t, &lo, &hi);
            for (int j = 0; j < c.k; j++) {
                int32_t x = i1[GUARD + t * in.os + j];
                if (x >= 0) all[n++] = (int32_t)(x + lo);
            }
        }
        qsort(all, (size_t)n, sizeof(int32_t), cmp_i32);
        int64_t u = 0;
        for (int64_t i = 0; i < n;) {
            int64_t j = i;
            while (j < n && all[j] == all[i]) j++;
            v[u].key = all[i];
            v[u].votes = (int32_t)(j - i);
            u++;
            i = j;
        }
        qsort(v, (size_t)u, sizeof(kvote), cmp_kvote);
        int32_t got[600], cnt = 0;
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 600, &cnt), LTK_OK, NULL);
        int64_t want = u < 600 ? u : 600;
        CHECK(cnt == want, "hot set holds %d keys, want %lld", cnt, (long long)want);
        for (int64_t i = 0; i < want && i < cnt; i++)
            if (!CHECK(got[i] == v[i].key, "hot key %lld: %d, want %d (votes %d)", (long long)i, got[i], v[i].key,
                       v[i].votes))
                break;
        free(v);
        free(all);
    }
    /* warm start from the hot set */
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, st, NULL, &i2, &s2), LTK_OK, NULL);
    same_outputs(&in, i2, s2, im, sm, "fused (hot state) vs materialize");
    /* bad carried samples: duplicates, negatives, out of range, the best keys repeated */
    int32_t bad[1200];
    for (int i = 0; i < 1200; i++) {
        int r = (int)rng_below(6);
        bad[i] = r == 0 ? -(int32_t)rng_range(1, 100) : r == 1 ? (int32_t)(c.S + rng_range(0, 1000))
                 : r == 2 ? i1[GUARD + 0] : r == 3 ? 0x7fffffff : (int32_t)rng_below(c.S);
    }
    ASSERT_STATUS(ltk_indexer_state_set(st, bad, 1200), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, st, NULL, &i3, &s3), LTK_OK, NULL);
    same_outputs(&in, i3, s3, im, sm, "fused (bad state) vs materialize");
    for (int64_t t = 0; t < c.T && T_FAILURES() == 0; t += 8) check_row(&in, t, i3 + GUARD + t * in.os, s3 + GUARD + t * in.os, 2e-3);
    ltk_indexer_state_free(st);
    free(i1);
    free(i2);
    free(i3);
    free(im);
    free(s1);
    free(s2);
    free(s3);
    free(sm);
    inp_free(&in);
}

static void small_workspace_graph(void) {
    cfg_t c = base_cfg(17, 5000, 64, 128);
    c.ranges = 2;
    c.kv_mode = 4;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s", cfg_str(&c));
    int32_t *ref = NULL;
    float *refs = NULL;
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, NULL, NULL, &ref, &refs), LTK_OK, NULL);
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = c.T;
    a.S = c.S;
    a.H = c.H;
    a.D = c.D;
    a.k = c.k;
    a.dtype = c.dt;
    a.q = in.dq;
    a.kv = in.dkv;
    a.kv_scale = in.dsc;
    a.weights = in.dw;
    a.ks = in.dks;
    a.ke = in.dke;
    a.out_stride = in.os;
    int32_t *di = NULL;
    float *ds = NULL;
    const int64_t n = c.T * in.os + 2 * GUARD;
    GPU_CHECK(cudaMalloc((void **)&di, 4 * (size_t)n));
    GPU_CHECK(cudaMalloc((void **)&ds, 4 * (size_t)n));
    a.out_idx = di + GUARD;
    a.out_scores = ds + GUARD;
    cudaStream_t s;
    GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    e.stream = s;
    size_t wsb = 0;
    ASSERT_STATUS(ltk_indexer_workspace_size(&a, &e, &wsb), LTK_OK, NULL);
    /* workspace with canaries on both sides */
    uint8_t *wsd = NULL;
    GPU_CHECK(cudaMalloc((void **)&wsd, wsb + 2 * 4096));
    GPU_CHECK(cudaMemset(wsd, 0x5a, wsb + 2 * 4096));
    e.workspace = wsd + 4096;
    e.workspace_bytes = wsb - 1;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e), LTK_EWORKSPACE, NULL);
    e.workspace_bytes = wsb;
    /* capture one call into a graph, replay it twice over poisoned outputs */
    GPU_CHECK(cudaMemset(di, 0x7f, 4 * (size_t)n));
    GPU_CHECK(cudaMemset(ds, 0x7f, 4 * (size_t)n));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    GPU_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    ltk_status cst = ltk_indexer_topk(&a, &e);
    GPU_CHECK(cudaStreamEndCapture(s, &g));
    ASSERT_TRUE(cst == LTK_OK);
    GPU_CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 2; rep++) {
        GPU_CHECK(cudaMemsetAsync(di, 0x7f, 4 * (size_t)n, s));
        GPU_CHECK(cudaMemsetAsync(ds, 0x7f, 4 * (size_t)n, s));
        GPU_CHECK(cudaGraphLaunch(ge, s));
        GPU_CHECK(cudaStreamSynchronize(s));
        int32_t *hi = malloc(4 * (size_t)n);
        float *hs = malloc(4 * (size_t)n);
        GPU_CHECK(cudaMemcpy(hi, di, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        GPU_CHECK(cudaMemcpy(hs, ds, 4 * (size_t)n, cudaMemcpyDeviceToHost));
        same_outputs(&in, hi, hs, ref, refs, "graph replay vs direct call");
        free(hi);
        free(hs);
    }
    uint8_t *canary = malloc(2 * 4096);
    GPU_CHECK(cudaMemcpy(canary, wsd, 4096, cudaMemcpyDeviceToHost));
    GPU_CHECK(cudaMemcpy(canary + 4096, wsd + 4096 + wsb, 4096, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 2 * 4096; i++)
        if (!CHECK(canary[i] == 0x5a, "workspace canary byte %d overwritten", i)) break;
    free(canary);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(wsd);
    cudaFree(di);
    cudaFree(ds);
    free(ref);
    free(refs);
    inp_free(&in);
}

static void small_determinism_score_only(void) {
    cfg_t c = base_cfg(20, 8000, 32, 300);
    c.ranges = 1;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s", cfg_str(&c));
    int32_t *a = NULL, *b = NULL, *z = NULL;
    float *as = NULL, *bs = NULL;
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, NULL, NULL, &a, &as), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, NULL, NULL, &b, &bs), LTK_OK, NULL);
    same_outputs(&in, a, as, b, bs, "two identical fused runs");
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_SCORE_ONLY, NULL, NULL, &z, NULL), LTK_OK, NULL);
    free(a);
    free(b);
    free(z);
    free(as);
    free(bs);
    inp_free(&in);
}

/* one tiny case for racecheck (which slows every shared-memory access by orders of magnitude) */
static void small_race(void) {
    cfg_t c = base_cfg(3, 700, 64, 50);
    c.ranges = 2;
    run_case(&c, 2e-3, 0, -1);
    c = base_cfg(2, 600, 16, 16); /* flat: 600 equal scores overflow the 384 slots: dense fallback */
    c.kv_mode = 1;
    run_case(&c, 2e-3, 0, 1);
}

/* ---- medium shapes: more q-blocks than the 132 persistent CTAs (several work units per CTA, the
 * path the small shapes never reach), still cheap; run before the large ones -------------------- */
static void medium_h64_causal(void) {
    /* 256 q-blocks of 2 rows: units 0..131 then 132..255 on the same CTAs (mbarrier phases, Q
     * double buffer and the refresh warp carried across units) */
    cfg_t c = base_cfg(512, 65536 + 19, 64, 2048);
    c.ranges = 2;
    c.kv_mode = 4;
    run_case(&c, 2e-3, 2, -1);
}

static void medium_h16_splits(void) {
    /* 38 q-blocks of 8 rows x ~10 key splits = ~380 units: several per CTA, split-major order */
    cfg_t c = base_cfg(300, 65536, 16, 512);
    c.ranges = 3;
    c.kv_mode = 4;
    run_case(&c, 2e-3, 2, -1);
}

static void medium_fused_dense(void) {
    /* >= 1,024 rows of <= 131,072 keys: a fused call runs as dense windows (fused_dense_wanted in
     * indexer.cu); stats then count every visible key of a row as its candidate. Then the same shape
     * class through the filter (LTK_CUDA_FUSED_DENSE_S=0): both bit-exact against materialize. */
    cfg_t c = base_cfg(1024, 40000, 64, 1024);
    c.kv_mode = 4;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s (dense dispatch)", cfg_str(&c));
    int32_t *fi = NULL, *mi = NULL;
    float *fs = NULL, *ms = NULL;
    ltk_stats sf;
    memset(&sf, 0, sizeof sf);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, NULL, &sf, &fi, &fs), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &mi, &ms), LTK_OK, NULL);
    same_outputs(&in, fi, fs, mi, ms, "fused (dense windows) vs materialize");
    CHECK(sf.candidates == c.T * c.S && sf.fallback_rows == 0, "dense dispatch stats: candidates %lld (want %lld)",
          (long long)sf.candidates, (long long)(c.T * c.S));
    free(fi);
    free(fs);
    free(mi);
    free(ms);
    inp_free(&in);
    const ltk_tune saved = *ltk_tune_get();
    ltk_tune t = saved;
    t.cuda_fused_dense_s = 0;
    ltk_tune_set(&t);
    c = base_cfg(1024, 40000 + 5, 64, 1024);
    c.ranges = 2;
    c.kv_mode = 4;
    run_case(&c, 2e-3, 2, 0);
    ltk_tune_set(&saved);
}

static void medium_h32_materialize_only(void) {
    /* the materialize scan alone over 250 units (no refresh warp, no candidates) against exact
     * scores: separates a scan bug from a fused-epilogue bug */
    cfg_t c = base_cfg(1000, 20000, 32, 64);
    c.ranges = 2;
    c.kv_mode = 4;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s (materialize only)", cfg_str(&c));
    int32_t *mi = NULL;
    float *ms = NULL;
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &mi, &ms), LTK_OK, NULL);
    for (int64_t t = 0; t < c.T && T_FAILURES() == 0; t += 173)
        check_row(&in, t, mi + GUARD + t * in.os, ms + GUARD + t * in.os, 2e-3);
    free(mi);
    free(ms);
    inp_free(&in);
}

/* ---- large shapes ------------------------------------------------------------------------- */
static void large_h64_causal(void) {
    cfg_t c = base_cfg(512, 262144 + 37, 64, 2048);
    c.ranges = 2;
    c.kv_mode = 4;
    run_case(&c, 2e-3, 2, 0);
}

static void large_h32_k512(void) {
    cfg_t c = base_cfg(1024, 300000, 32, 512);
    c.ranges = 2;
    c.kv_mode = 4;
    run_case(&c, 2e-3, 2, 0);
}

static void large_k8192(void) {
    cfg_t c = base_cfg(256, 200000, 64, 8192);
    c.kv_mode = 4;
    run_case(&c, 2e-3, 1, -1);
}

static void large_flat_overflow(void) {
    cfg_t c = base_cfg(64, 100000, 64, 2048);
    c.kv_mode = 1;
    c.ranges = 2;
    run_case(&c, 2e-3, 4, 1);
}

static void large_hot_state(void) {
    cfg_t c = base_cfg(1024, 400000, 64, 2048);
    c.ranges = 2;
    c.kv_mode = 4;
    inp_t in;
    inp_make(&in, &c);
    test_ctx("%s", cfg_str(&c));
    ltk_indexer_state *st = NULL;
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_CUDA, 3 * 2048, &st), LTK_OK, NULL);
    int32_t *i1 = NULL, *i2 = NULL, *im = NULL;
    float *s1 = NULL, *s2 = NULL, *sm = NULL;
    ltk_stats a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &im, &sm), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, st, &a, &i1, &s1), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, st, &b, &i2, &s2), LTK_OK, NULL);
    same_outputs(&in, i1, s1, im, sm, "fused cold vs materialize");
    same_outputs(&in, i2, s2, im, sm, "fused hot vs materialize");
    printf("    cold: candidates/row %.0f (max %lld), bin %.1f (max %lld), fallback %lld\n",
           (double)a.candidates / (double)c.T, (long long)a.candidates_max, (double)a.bin_entries / (double)c.T,
           (long long)a.bin_entries_max, (long long)a.fallback_rows);
    printf("    hot : candidates/row %.0f (max %lld), bin %.1f (max %lld), fallback %lld\n",
           (double)b.candidates / (double)c.T, (long long)b.candidates_max, (double)b.bin_entries / (double)c.T,
           (long long)b.bin_entries_max, (long long)b.fallback_rows);
    CHECK(a.fallback_rows == 0 && b.fallback_rows == 0, "unexpected fallback rows");
    ltk_indexer_state_free(st);
    free(i1);
    free(i2);
    free(im);
    free(s1);
    free(s2);
    free(sm);
    inp_free(&in);
}

/* keys 4 KiB apart: key offsets beyond 2^32 bytes */
static void large_64bit_offsets(void) {
    cfg_t c = base_cfg(16, 1100003, 64, 2048);
    c.kv_mode = 4;
    inp_t in;
    memset(&in, 0, sizeof in);
    in.c = c;
    in.es = 1;
    in.qs = (int64_t)c.H * c.D;
    in.kvs = 4096;
    in.os = c.k;
    /* generate compact, upload with a 4 KiB pitch */
    uint8_t *kvc = malloc((size_t)c.S * 128);
    in.hq = malloc((size_t)(c.T * in.qs));
    in.hsc = malloc(sizeof(float) * (size_t)c.S);
    in.hw = malloc(sizeof(float) * (size_t)(c.T * c.H));
    gu_gen_dsa(rng_u64(), c.T, c.S, c.H, c.D, in.hq, kvc, in.hsc, in.hw);
    test_ctx("%s kv_stride=4096", cfg_str(&c));
    GPU_CHECK(cudaMalloc(&in.dkv, (size_t)c.S * 4096));
    GPU_CHECK(cudaMemcpy2D(in.dkv, 4096, kvc, 128, 128, (size_t)c.S, cudaMemcpyHostToDevice));
    in.dq = gu_upload(in.hq, (size_t)(c.T * in.qs));
    in.dsc = gu_upload(in.hsc, sizeof(float) * (size_t)c.S);
    in.dw = gu_upload(in.hw, sizeof(float) * (size_t)(c.T * c.H));
    int32_t *fi = NULL, *mi = NULL;
    float *fs = NULL, *ms = NULL;
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_FUSED, NULL, NULL, &fi, &fs), LTK_OK, NULL);
    ASSERT_STATUS(run_gpu(&in, LTK_ALGO_MATERIALIZE, NULL, NULL, &mi, &ms), LTK_OK, NULL);
    same_outputs(&in, fi, fs, mi, ms, "fused vs materialize (64-bit offsets)");
    /* one row against exact scores (needs the compact keys on the host) */
    in.hkv = kvc;
    in.kvs = 128;
    check_row(&in, c.T - 1, fi + GUARD + (c.T - 1) * in.os, fs + GUARD + (c.T - 1) * in.os, 2e-3);
    free(fi);
    free(fs);
    free(mi);
    free(ms);
    inp_free(&in);
}

static const t_test tests[] = {
    T_ENTRY(small_random_vs_exact),  T_ENTRY(small_portable_vs_exact), T_ENTRY(small_flat_overflow),
    T_ENTRY(small_ties_at_k),        T_ENTRY(small_nan_inf),           T_ENTRY(small_edges),
    T_ENTRY(small_state),            T_ENTRY(small_workspace_graph),   T_ENTRY(small_determinism_score_only),
    T_ENTRY(small_race),             T_ENTRY(small_scale_offset),      T_ENTRY(small_sort_widths),
    T_ENTRY(small_nopass_fallback),
    T_ENTRY(medium_h32_materialize_only), T_ENTRY(medium_h64_causal), T_ENTRY(medium_h16_splits),
    T_ENTRY(medium_fused_dense),
    T_ENTRY(large_h64_causal),       T_ENTRY(large_h32_k512),          T_ENTRY(large_k8192),
    T_ENTRY(large_flat_overflow),    T_ENTRY(large_hot_state),         T_ENTRY(large_64bit_offsets),
};

/* Every test runs in its own process under a time limit (harness.h, T_RUN_ISOLATED; default 240 s,
 * LTK_TEST_TIMEOUT_S overrides, 0 runs in-process for compute-sanitizer): a hung kernel costs one
 * test, reported "[ TIME ]", and the next test starts on a fresh CUDA context. */
static int no_device(void) {
    if (gu_no_cuda()) return 1;
    const char *child = getenv("LTK_TEST_CHILD");
    if (!(child && strcmp(child, "1") != 0)) { /* once: the first child, or an in-process run */
        char info[2048];
        ltk_info(info, sizeof info);
        printf("%s", info);
        printf("indexer scan: %s\n", ltk_tune_get()->cuda_portable ? "portable (LTK_CUDA_PORTABLE=1)"
                                                                    : "sm_90a when supported (default)");
    }
    return 0;
}

int main(int argc, char **argv) { return T_RUN_ISOLATED(tests, 240, no_device); }
