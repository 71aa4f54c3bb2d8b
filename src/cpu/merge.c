/* The merge of candidate lists on the CPU (ltk_topk_merge): a row a thread. A row's candidates
 * (id >= 0) become rank keys; when more than k, the k-th key K by the radix select of select.c;
 * every candidate at or above K then as a composite ((~key) << 32 | id) and one radix sort, so
 * that ties go to the lower id whatever the candidates' positions (they come rank by rank, and
 * interleaved shards give ids out of order). A tie class at K larger than k is sorted whole: at
 * most the row's candidates, in linear time. */
#include "cpu-impl.h"

#include <omp.h>
#include <string.h>

typedef struct {
    uint32_t *key, *hist;
    int32_t *id;
    uint64_t *ca, *cb;
} mrg_thread;

static size_t merge_layout(const ltk_merge_args *a, int nth, void *base, mrg_thread *th) {
    ltkc_ws w = {(char *)base, 0};
    const size_t n = (size_t)a->lists * (size_t)a->list_len;
    for (int t = 0; t < nth; t++) {
        mrg_thread s;
        s.key = ltkc_take(&w, sizeof(uint32_t) * n);
        s.id = ltkc_take(&w, sizeof(int32_t) * n);
        s.ca = ltkc_take(&w, sizeof(uint64_t) * n);
        s.cb = ltkc_take(&w, sizeof(uint64_t) * n);
        s.hist = ltkc_take(&w, sizeof(uint32_t) * LTKC_NB);
        if (th) th[t] = s;
    }
    return w.off + 64;
}

static int merge_threads(const ltk_merge_args *a, const ltk_exec *e) {
    int nth = ltkc_threads(e);
    if (nth > 64) nth = 64;
    if (a->rows < nth) nth = a->rows > 0 ? (int)a->rows : 1;
    return nth;
}

ltk_status ltkc_merge_ws(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes) {
    *bytes = merge_layout(a, merge_threads(a, e), NULL, NULL);
    return LTK_OK;
}

ltk_status ltkc_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    int nth = merge_threads(a, e);
    while (nth > 1 && merge_layout(a, nth, NULL, NULL) > wsb) nth--;
    LTK_RETURN_IF(merge_layout(a, nth, NULL, NULL) > wsb || !ws, LTK_EWORKSPACE,
                  "cpu merge: workspace of %zu bytes is too small", wsb);
    mrg_thread th[64];
    merge_layout(a, nth, (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63), th);
    const int64_t k = a->k;
#pragma omp parallel for schedule(dynamic, 16) num_threads(nth)
    for (int64_t r = 0; r < a->rows; r++) {
        mrg_thread *s = &th[omp_get_thread_num()];
        int64_t m = 0;
        for (int32_t g = 0; g < a->lists; g++) {
            const int64_t o = r * a->row_stride + g * a->list_stride;
            const float *sc = a->scores + o;
            const int32_t *id = a->ids + o;
            for (int32_t j = 0; j < a->list_len; j++) {
                if (id[j] < 0) continue;
                s->key[m] = ltk_rank_key(sc[j]);
                s->id[m++] = id[j];
            }
        }
        int64_t c = 0;
        if (m > k) {
            int64_t te;
            const uint32_t K = ltkc_kth_key(s->key, m, k, &te, s->hist);
            for (int64_t i = 0; i < m; i++)
                if (s->key[i] >= K) s->ca[c++] = ltkc_composite(s->key[i], s->id[i]);
        } else {
            for (int64_t i = 0; i < m; i++) s->ca[c++] = ltkc_composite(s->key[i], s->id[i]);
        }
        ltkc_sort_u64(s->ca, s->cb, c);
        if (c > k) c = k;
        int32_t *oi = a->out_idx + r * a->out_stride;
        float *os = a->out_scores ? a->out_scores + r * a->out_stride : NULL;
        for (int64_t j = 0; j < c; j++) {
            oi[j] = (int32_t)(uint32_t)s->ca[j];
            if (os) os[j] = ltk_rank_key_to_f32(~(uint32_t)(s->ca[j] >> 32));
        }
        for (int64_t j = c; j < k; j++) {
            oi[j] = -1;
            if (os) os[j] = -__builtin_inff();
        }
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
    }
    return LTK_OK;
}
