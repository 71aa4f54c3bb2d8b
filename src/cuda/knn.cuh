/* What the kNN scoring kernels share (knn.cu: mma.sync, any sm_80+; knn-sm90.cu: wgmma + TMA): the
 * launch parameters, the ranking score of a dot product, and the four epilogues of one entry.
 * The same arithmetic in every mode of one kernel, so fused == materialize bit for bit. */
#ifndef LTK_CUDA_KNN_CUH
#define LTK_CUDA_KNN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "ltk-cuda.h"
#include "select.cuh"

#define KNN_BQ 64 /* queries per tile (fb_any is kept per block of KNN_BQ queries) */

enum { KNN_STORE = 0, KNN_GATE = 1, KNN_HIST = 2, KNN_TAKE = 3 };

struct knn_params {
    const void *q;        /* first query of the batch */
    int64_t q_stride;
    const void *x;        /* first base row of the launch range */
    int64_t x_stride;     /* elements between consecutive scored rows */
    int32_t D, metric, nq; /* nq: queries in this batch */
    int64_t n;            /* rows in this launch */
    int vec;              /* 16-byte cp.async path usable */
    int sub;              /* GATE, sm_90a: per-query staging lists (default; LTK_CUDA_KNN_SUBLISTS=0 off) */
    int sm90;             /* host only: the sm_90a main loop is enabled for this call */
    const float *qn;      /* [nq] query squared norms */
    /* STORE */
    float *S;
    int64_t ld;
    /* GATE */
    const uint32_t *thr;
    uint32_t *cnt, *ckey, *crel;
    int64_t cap;
    /* HIST / TAKE */
    const uint32_t *fb_any; /* per query block */
    const uint32_t *fb_on;
    const uint64_t *fb_prefix, *fb_mask;
    const int32_t *fb_shift, *fb_top;
    uint32_t *fb_hist;      /* [nq][2048] */
    uint64_t *fb_out;       /* [nq][kp] */
    uint32_t *fb_cnt;
    int32_t kp;
};

/* Final score in the ranking space (larger = better): IP dot, L2 -(|q|^2 + |x|^2 - 2 dot), COS.
 * + 0.0f turns -0 into +0 so every path reports the same bits. */
static __device__ __forceinline__ float knn_score(float dot, float qn, float xn, int metric) {
    float s;
    if (metric == LTK_METRIC_IP) s = dot;
    else if (metric == LTK_METRIC_L2) s = -((qn + xn) - 2.0f * dot);
    else s = (qn > 0.0f && xn > 0.0f) ? dot / (sqrtf(qn) * sqrtf(xn)) : 0.0f;
    return s + 0.0f;
}

/* One scored entry: (local row index, query in batch, score). */
template <int MODE>
static __device__ __forceinline__ void knn_emit(const knn_params &p, const uint32_t *thr_s, int64_t g, int qq, int ql,
                                                float s) {
    if (g >= p.n || qq >= p.nq) return;
    if (MODE == KNN_STORE) {
        p.S[(int64_t)qq * p.ld + g] = s;
        return;
    }
    uint32_t key = ltk_key32(__float_as_uint(s));
    if (MODE == KNN_GATE) {
        if (key >= thr_s[ql]) {
            uint32_t pos = atomicAdd(&p.cnt[qq], 1u);
            if ((int64_t)pos < p.cap) {
                p.ckey[(int64_t)qq * p.cap + pos] = key;
                p.crel[(int64_t)qq * p.cap + pos] = (uint32_t)g;
            }
        }
        return;
    }
    if (!p.fb_on[qq]) return;
    uint64_t c = ltk_comp(key, (uint32_t)g), m = p.fb_mask[qq], pre = p.fb_prefix[qq];
    if (MODE == KNN_HIST) {
        int top = p.fb_top[qq], sh = p.fb_shift[qq];
        if (top > 0 && (c & m) == pre)
            atomicAdd(&p.fb_hist[(int64_t)qq * LTK_SEL_BINS + ((c >> sh) & ((1ull << (top - sh)) - 1))], 1u);
    } else {
        if ((c & m) >= pre) {
            uint32_t pos = atomicAdd(&p.fb_cnt[qq], 1u);
            if ((int)pos < p.kp) p.fb_out[(int64_t)qq * p.kp + pos] = c;
        }
    }
}


/* sm_90a main loop (knn-sm90.cu). enabled: once per call — sm_90, sm_90a code in this build, a driver
 * with cuTensorMapEncodeTiled, and LTK_CUDA_KNN_SM90 not "0" (the default since it passed the GPU tests).
 * fits: per launch — bf16/f16 and 16-byte aligned rows and strides (what TMA needs). */
int ltk_knn_sm90_enabled(int cc_major, int cc_minor);
int ltk_knn_sm90_fits(const knn_params &p, int dt);
template <int DT, int MODE> ltk_status ltk_knn_sm90_launch(const knn_params &p, int sms, cudaStream_t st);

#endif
