/* The per-row gate state of the fused CPU paths (bins, histogram, threshold, candidate buffer):
 * the inline push and refresh the scoring loops run per score, and the out-of-line steps of row.c
 * (sample set-up, the exact overflow compaction, the final select). */
#ifndef LTK_CPU_ROW_H
#define LTK_CPU_ROW_H

#include "cpu-impl.h"

/* EDGE: a fixed float gate, no histogram (kNN's predicted start); an overflow compacts exactly. */
enum { LTKC_MODE_BINS = 0, LTKC_MODE_EXACT = 1, LTKC_MODE_ALL = 2, LTKC_MODE_EDGE = 3 };

typedef struct {
    float smin, delta; /* bin(x) = clamp(floor((x - smin) * delta), 0, NB-1) */
    float edge;        /* gate: score >= edge (NaN never passes); MODE_ALL ignores it */
    float kth_s;       /* MODE_EXACT: pass iff (s, i) ranks before (kth_s, kth_i) */
    int64_t kth_i;
    int32_t th, mode;
    int64_t k, cap, count;
    int64_t cnt_ge;    /* sum of hist[j] for j >= th */
    int64_t appended, compactions;
    float *score;
    int64_t *idx;
    uint32_t *hist;
} ltkc_row;

/* Scratch for compaction, sample and final select: keys, pos [max(cap, sample)], hist[2048]. */
typedef struct {
    uint32_t *keys;
    int32_t *pos;
    uint32_t *hist;
} ltkc_rowtmp;

static inline int32_t ltkc_bin(const ltkc_row *r, float x) {
    float v = (x - r->smin) * r->delta;
    if (!(v >= 1.0f)) return 0; /* also NaN, -inf */
    if (v >= (float)(LTKC_NB - 1)) return LTKC_NB - 1;
    return (int32_t)v;
}

void ltkc_row_setup(ltkc_row *r, float *score, int64_t *idx, uint32_t *hist, int64_t cap, int64_t k, int mode);
/* Bins and initial threshold from m sample scores (distinct valid keys of the row). */
void ltkc_row_init_sample(ltkc_row *r, const float *s, int64_t m, const ltkc_rowtmp *t);
/* Only the bins (smin, delta) from the finite sample scores. */
void ltkc_row_sample_bins(ltkc_row *r, const float *s, int64_t m);
void ltkc_row_overflow(ltkc_row *r, const ltkc_rowtmp *t);
float ltkc_edge_of(const ltkc_row *r, int32_t th);

static inline void ltkc_row_refresh(ltkc_row *r) {
    if (r->mode != LTKC_MODE_BINS) return;
    int32_t th = r->th;
    while (th < LTKC_NB - 1 && r->cnt_ge - (int64_t)r->hist[th] >= r->k) r->cnt_ge -= r->hist[th++];
    if (th != r->th) {
        r->th = th;
        r->edge = ltkc_edge_of(r, th);
    }
}

/* Adds (s, i) that passed the float gate (or any entry in MODE_ALL). Entries arrive in index order. */
static inline void ltkc_row_push(ltkc_row *r, float s, int64_t i, const ltkc_rowtmp *t) {
    if (r->mode == LTKC_MODE_BINS) {
        if (!(s >= r->edge)) return;
        int32_t b = ltkc_bin(r, s);
        r->hist[b]++;
        if (b >= r->th) r->cnt_ge++;
    } else if (r->mode == LTKC_MODE_EXACT) {
        if (!ltk_better(s, i, r->kth_s, r->kth_i)) return;
    } else if (r->mode == LTKC_MODE_EDGE) {
        if (!(s >= r->edge)) return;
    }
    if (r->count == r->cap) ltkc_row_overflow(r, t);
    r->score[r->count] = s;
    r->idx[r->count] = i;
    r->count++;
    r->appended++;
}

/* Final select of the row's buffer: writes up to k positions (into the buffer) of the best
 * entries, sorted unless `unsorted`; returns how many (< k only if the row has < k non-NaN
 * entries in MODE_BINS/EXACT, or n < k in MODE_ALL). *bin_entries = entries in the final bin. */
int64_t ltkc_row_final(ltkc_row *r, const ltkc_rowtmp *t, uint64_t *sort_a, uint64_t *sort_b, int unsorted,
                       int32_t *out_pos, int64_t *bin_entries);
/* Same over arbitrary (score, idx) arrays in index order (kNN thread merge). */
int64_t ltkc_final_arrays(const float *score, int64_t n, int64_t k, const ltkc_rowtmp *t, uint64_t *sort_a,
                          uint64_t *sort_b, int unsorted, int32_t *out_pos);

#endif
