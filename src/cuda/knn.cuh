/* Internal interface of the CUDA kNN: what the scoring kernels share (knn-portable.cu: mma.sync,
 * any sm_80+; knn-sm90.cu: wgmma + TMA) — the launch parameters, the ranking score of a dot product,
 * and the four epilogues of one entry, the same arithmetic in every mode of one kernel, so fused ==
 * materialize bit for bit — and the per-query control block of the select kernels (knn-select.cu),
 * with the host launchers each kernel file provides to the driver in knn.cu. */
#ifndef LTK_CUDA_KNN_CUH
#define LTK_CUDA_KNN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda-common.cuh"
#include "select.cuh"

#define KNN_BQ 64 /* queries per tile (fb_any is kept per block of KNN_BQ queries) */
#define KNN_SAMPLE 32768 /* most sample rows a chunk (the threshold kernel stages them: 128 KB) */
#define KNN_QBATCH 1024 /* most queries a batch */

enum { KNN_STORE = 0, KNN_GATE = 1, KNN_HIST = 2, KNN_TAKE = 3 };

struct knn_params {
    const void *q;        /* first query of the batch */
    int64_t q_stride;
    const void *x;        /* first base row of the launch range */
    int64_t x_stride;     /* elements between consecutive scored rows */
    int32_t D, metric, nq; /* nq: queries in this batch */
    int64_t n;            /* rows in this launch */
    int vec;              /* 16-byte cp.async path usable */
    int sm90;             /* host only: the sm_90a main loop is enabled for this call */
    const float *qn;      /* [nq] query squared norms */
    /* STORE */
    float *S;
    int64_t ld;
    /* GATE: an entry of local row g passes iff its key >= thr, or > thr where g >= thr_lim (a tie
     * class at thr bounded by position: knn_threshold_kernel) */
    const uint32_t *thr, *thr_lim;
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
    else s = (qn == 0.0f || xn == 0.0f) ? 0.0f : dot / (sqrtf(qn) * sqrtf(xn)); /* NaN norms stay NaN (ref.c) */
    return s + 0.0f;
}

/* One scored entry: (local row index, query in batch, score). */
template <int MODE>
static __device__ __forceinline__ void knn_emit(const knn_params &p, const uint32_t *thr_s, const uint32_t *lim_s,
                                                int64_t g, int qq, int ql, float s) {
    if (g >= p.n || qq >= p.nq) return;
    if (MODE == KNN_STORE) {
        p.S[(int64_t)qq * p.ld + g] = s;
        return;
    }
    uint32_t key = ltk_key32(__float_as_uint(s));
    if (MODE == KNN_GATE) {
        if (key >= thr_s[ql] + (uint32_t)(g >= (int64_t)lim_s[ql])) {
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


/* ---- per-query control of the select kernels (one CTA of LTK_SEL_NT threads per query) ---------- */
struct knn_ctl {
    int nq, k, kp;
    int64_t n, m, cap;
    const float *samp; /* [nq][m] sample scores: rows 0, sstride, 2 sstride, ... of the chunk */
    int64_t sstride;
    uint32_t *thr, *thr_lim, *cnt;
    uint32_t *fb_any, *fb_on, *fb_hist, *fb_cnt, *fb_kk;
    uint64_t *fb_prefix, *fb_mask, *fb_out;
    int32_t *fb_shift, *fb_top;
    const uint32_t *ckey, *crel;
    /* per-chunk results: sorted composites (key, ~local index), count */
    uint64_t *res;
    int32_t *res_cnt, *st_fb, *st_cand;
    int thr_smem;   /* the threshold's radix passes over the sample staged in shared memory (ltk_knn_thr_smem) */
    int stage;      /* final select: candidate keys it stages in shared memory (0: none) */
    int tiebound;   /* the threshold may bound a tie class by position (knn_thr_class) */
};

/* What the final and output kernels write: the call's rows of one batch. */
struct knn_out {
    int nq, k, kp, nch, metric;
    int64_t chunk_rows, out_stride;
    const uint64_t *res;  /* [nch][nq][kp] */
    const int32_t *res_cnt; /* [nch][nq] */
    int64_t *out_idx;
    float *out_scores;
};

/* Rank r of the threshold in the sample of m (of n rows): ~1.6k expected candidates where that
 * rank is >= 100, else ~2k, and a stable quantile (16 <= r <= 64 where that stays below half the
 * cap), so that the expected count n r / m neither falls below k nor reaches the cap. Host (stage
 * sizing) and device. */
static __host__ __device__ __forceinline__ int64_t knn_thr_rank(int k, int64_t m, int64_t n, int64_t cap) {
    int64_t r = (160 * (int64_t)k * m + 100 * n - 1) / (100 * n);
    if (r < 100) r = (2 * (int64_t)k * m + n - 1) / n;
    int64_t rv = cap * m / (2 * n);
    rv = rv < 16 ? 16 : (rv > 64 ? 64 : rv);
    return r < rv ? rv : r;
}

/* ---- host launchers ---------------------------------------------------------------------------- */
/* knn-portable.cu: the mma.sync main loop (SIMT FMA for fp32) in mode MODE, and the queries'
 * squared norms (which also zero the call's per-query statistics). */
template <int DT, int MODE> ltk_status ltk_knn_mma_launch(const knn_params &p, int sms, cudaStream_t st);
template <int DT>
ltk_status ltk_knn_qnorm(const void *q, int64_t q_stride, int D, int nq, float *qn, int32_t *st_fb, int32_t *st_cand,
                         cudaStream_t st);

/* knn-sm90.cu: the sm_90a main loop. enabled: once per call — sm_90, sm_90a code in this build, a
 * driver with cuTensorMapEncodeTiled, and not LTK_CUDA_PORTABLE=1 (the default since it passed the
 * GPU tests). fits: per launch — bf16/f16 and 16-byte aligned rows and strides (what TMA needs). */
int ltk_knn_sm90_enabled(int cc_major, int cc_minor);
int ltk_knn_sm90_fits(const knn_params &p, int dt);
template <int DT, int MODE> ltk_status ltk_knn_sm90_launch(const knn_params &p, int sms, cudaStream_t st);

/* knn-select.cu: the per-query kernels of one chunk, in call order. */
ltk_status ltk_knn_threshold(const knn_ctl &c, cudaStream_t st); /* the sample's r-th best: the GATE's threshold */
ltk_status ltk_knn_check(const knn_ctl &c, cudaStream_t st);     /* which queries need the exact fallback */
const void *ltk_knn_check_cond_kernel(void); /* the same check as a graph's first node: (knn_ctl, handle) */
ltk_status ltk_knn_fb_step(const knn_ctl &c, cudaStream_t st);   /* between the fallback's histogram passes */
/* The final select of every query of the chunk (smem: dynamic shared memory, ltk_knn_fin_smem_reserve). */
ltk_status ltk_knn_final(const knn_ctl &c, const knn_out &o, size_t smem, cudaStream_t st);
/* The merge of the chunks' results into the call's output. */
ltk_status ltk_knn_output(const knn_out &o, size_t smem, cudaStream_t st);
/* Materialize: a chunk's results from the select's output (k entries a query) and its scores. */
ltk_status ltk_knn_mat_pack(const int32_t *idx, const float *sc, int nq, int k, int kp, uint64_t *res,
                            int32_t *res_cnt, cudaStream_t st);
/* 1 if the threshold kernel may stage KNN_SAMPLE keys in shared memory on device dev. */
int ltk_knn_thr_smem(int dev);
/* The largest static shared memory of the final and output kernels. */
int64_t ltk_knn_fin_static_smem(void);
/* Raises the final and output kernels' dynamic shared memory limit to fin_smem (never lowers it). */
ltk_status ltk_knn_fin_smem_reserve(size_t fin_smem);

#endif