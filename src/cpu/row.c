/* Per-row gate state: bins from the sample, threshold refresh, overflow (tighten and compact,
 * then exact compaction), and the final exact select of the candidates (docs/design.md 1-5). */
#include "row.h"

#include <math.h>
#include <string.h>

void ltkc_row_setup(ltkc_row *r, float *score, int64_t *idx, uint32_t *hist, int64_t cap, int64_t k, int mode) {
    memset(r, 0, sizeof *r);
    r->score = score;
    r->idx = idx;
    r->hist = hist;
    r->cap = cap;
    r->k = k;
    r->mode = mode;
    r->smin = 0.0f;
    r->delta = 1.0f;
    r->edge = -INFINITY;
    if (mode == LTKC_MODE_BINS) memset(hist, 0, sizeof(uint32_t) * LTKC_NB);
}

/* Smallest float x (by the total order) with bin(x) >= th: bin is monotone, so the set of such
 * x is an up-set and a binary search over rank keys finds its lower end exactly. */
float ltkc_edge_of(const ltkc_row *r, int32_t th) {
    if (th <= 0) return -INFINITY;
    uint32_t lo = 0x007fffffu /* -inf: bin 0 */, hi = 0xff800000u /* +inf: bin NB-1 */;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ltkc_bin(r, ltk_rank_key_to_f32(mid)) >= th) hi = mid;
        else lo = mid;
    }
    return ltk_rank_key_to_f32(hi);
}

void ltkc_row_sample_bins(ltkc_row *r, const float *s, int64_t m) {
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < m; i++) {
        float x = s[i];
        if (isfinite(x)) {
            if (x < mn) mn = x;
            if (x > mx) mx = x;
        }
    }
    if (mn > mx) mn = mx = 0.0f;
    double w = (double)mx - (double)mn;
    if (!(w > 0.0)) w = fabs((double)mn) * 0x1p-10; /* degenerate range: width from the magnitude */
    if (!(w >= 1e-30)) w = 1e-30;
    r->smin = mn;
    r->delta = (float)((double)LTKC_NB / w); /* in [3e-36, 2e33]: a normal positive float */
}

void ltkc_row_init_sample(ltkc_row *r, const float *s, int64_t m, const ltkc_rowtmp *t) {
    if (r->mode != LTKC_MODE_BINS) return;
    ltkc_row_sample_bins(r, s, m);
    r->th = 0;
    if (m >= r->k) {
        for (int64_t i = 0; i < m; i++) t->keys[i] = ltk_rank_key(s[i]);
        int64_t te;
        uint32_t K = ltkc_kth_key(t->keys, m, r->k, &te, t->hist);
        r->th = ltkc_bin(r, ltk_rank_key_to_f32(K)); /* K == 0 (NaN) gives bin 0 */
    }
    r->edge = ltkc_edge_of(r, r->th);
}

/* Keeps the k best of the buffer (order preserved) and switches to the exact pair gate. */
static void exact_compact(ltkc_row *r, const ltkc_rowtmp *t) {
    int64_t n = r->count, te, keep = 0;
    for (int64_t i = 0; i < n; i++) t->keys[i] = ltk_rank_key(r->score[i]);
    uint32_t K = ltkc_kth_key(t->keys, n, r->k, &te, t->hist);
    for (int64_t i = 0; i < n; i++) {
        uint32_t key = t->keys[i];
        if (key > K || (key == K && te-- > 0)) {
            if (key == K) { /* the last equal one kept is the k-th best */
                r->kth_s = r->score[i];
                r->kth_i = r->idx[i];
            }
            r->score[keep] = r->score[i];
            r->idx[keep] = r->idx[i];
            keep++;
        }
    }
    r->count = keep;
    r->mode = LTKC_MODE_EXACT;
    r->edge = r->kth_s;
}

void ltkc_row_overflow(ltkc_row *r, const ltkc_rowtmp *t) {
    r->compactions++;
    if (r->mode == LTKC_MODE_BINS) {
        ltkc_row_refresh(r);
        int64_t keep = 0;
        for (int64_t i = 0; i < r->count; i++) {
            if (ltkc_bin(r, r->score[i]) >= r->th) {
                r->score[keep] = r->score[i];
                r->idx[keep] = r->idx[i];
                keep++;
            }
        }
        r->count = keep;
        if (keep <= r->cap - r->cap / 4) return;
    }
    exact_compact(r, t); /* flat row: everything in one bin */
}

static int64_t sort_positions(const uint32_t *keys, int32_t *pos, int64_t m, uint64_t *sa, uint64_t *sb) {
    for (int64_t j = 0; j < m; j++) sa[j] = ltkc_composite(keys[pos[j]], pos[j]);
    ltkc_sort_u64(sa, sb, m);
    for (int64_t j = 0; j < m; j++) pos[j] = (int32_t)(uint32_t)sa[j];
    return m;
}

int64_t ltkc_row_final(ltkc_row *r, const ltkc_rowtmp *t, uint64_t *sa, uint64_t *sb, int unsorted, int32_t *out_pos,
                       int64_t *bin_entries) {
    int64_t n = r->count, m = 0;
    *bin_entries = 0;
    if (r->mode == LTKC_MODE_BINS) {
        ltkc_row_refresh(r);
        int64_t nv = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t b = ltkc_bin(r, r->score[i]);
            if (b >= r->th) {
                t->keys[i] = ltk_rank_key(r->score[i]);
                nv++;
                if (b == r->th) (*bin_entries)++;
            } else {
                t->keys[i] = 0; /* below the final threshold bin: never selected (nv > k below) */
            }
        }
        if (nv <= r->k) {
            for (int64_t i = 0; i < n; i++)
                if (t->keys[i]) out_pos[m++] = (int32_t)i;
        } else {
            int64_t te;
            uint32_t K = ltkc_kth_key(t->keys, n, r->k, &te, t->hist);
            m = ltkc_filter_top(t->keys, n, K, te, out_pos);
        }
    } else {
        for (int64_t i = 0; i < n; i++) t->keys[i] = ltk_rank_key(r->score[i]);
        *bin_entries = n;
        if (n <= r->k) {
            for (int64_t i = 0; i < n; i++) out_pos[m++] = (int32_t)i;
        } else {
            int64_t te;
            uint32_t K = ltkc_kth_key(t->keys, n, r->k, &te, t->hist);
            m = ltkc_filter_top(t->keys, n, K, te, out_pos);
        }
    }
    if (!unsorted) sort_positions(t->keys, out_pos, m, sa, sb);
    return m;
}

int64_t ltkc_final_arrays(const float *score, int64_t n, int64_t k, const ltkc_rowtmp *t, uint64_t *sa, uint64_t *sb,
                          int unsorted, int32_t *out_pos) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) t->keys[i] = ltk_rank_key(score[i]);
    if (n <= k) {
        for (int64_t i = 0; i < n; i++) out_pos[m++] = (int32_t)i;
    } else {
        int64_t te;
        uint32_t K = ltkc_kth_key(t->keys, n, k, &te, t->hist);
        m = ltkc_filter_top(t->keys, n, K, te, out_pos);
    }
    if (!unsorted) sort_positions(t->keys, out_pos, m, sa, sb);
    return m;
}

/* Smallest r with P(Poisson(mu) >= r) <= 1e-6, mu = n k / N: the Poisson tail bounds the tail of
 * the number of sample entries above the row's k-th best (binomial/hypergeometric for a random
 * sample, above the mean). 0 when r >= k (no better than the sample's k-th best). */
int64_t ltkc_pred_rank(int64_t n, int64_t k, int64_t N) { return ltkc_pred_rank_tail(n, k, N, 1e-6); }

int64_t ltkc_pred_rank_tail(int64_t n, int64_t k, int64_t N, double eps) {
    double mu = (double)n * (double)k / (double)N;
    int64_t r = 0;
    if (mu < 400.0) {
        double pmf = exp(-mu), tail = 1.0; /* tail = P(X >= r) */
        while (tail > eps && r < n) {
            tail -= pmf;
            r++;
            pmf *= mu / (double)r;
        }
    } else {
        r = (int64_t)ceil(mu + (eps < 1e-5 ? 5.3 : 3.5) * sqrt(mu) + 2.0); /* ~5 (~3.3) sigma plus the skew */
    }
    return r >= k || r > n ? 0 : r;
}
