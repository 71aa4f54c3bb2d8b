/* The indexer's final exact selection on the GPU, one CTA per row:
 *   - short rows (ke - ks <= k, unsorted, no scores): 0..len-1 then -1, nothing scored;
 *   - candidate rows: the exact top-k of the row's candidates (all keys scoring at least the gate
 *     edge, raw fp32 scores): radix select on a 64-bit composite (rank key << 32 | ~index), which is
 *     unique per entry, so ties go to the lower index inside the select; then a bitonic sort of the
 *     k winners (deterministic output even when unsorted is allowed). A row whose buffer
 *     overflowed, or that holds fewer candidates than it needs (NaN scores never pass the gate),
 *     is listed for the exact dense fallback instead;
 *   - dense rows (materialize, fallback): the same select over a window of materialized scores,
 *     merged with the best k of the previous windows when a row spans several windows. */
#include "indexer.cuh"
#include "select.cuh"

#define SEL_THREADS 512
#define SEL_KMAX 8192
/* A candidate row of up to SEL_STAGE entries (48 KB) is copied to shared memory once, and the radix
 * passes, the gather and the statistics read it there. Why: read from global memory, each of the
 * up to 8 passes waited on L2 latency (0.8 ms a call at 8,192 rows, LTK_CUDA_TRACE). */
#define SEL_STAGE 6144

/* ---- short rows ---------------------------------------------------------------------------- */
__global__ void sel_short_kernel(const int32_t *ks, const int32_t *ke, int64_t T, int64_t S, int32_t k,
                                 int32_t *out, int64_t stride, int absolute) {
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, ke, t, S, &lo, &hi);
        int64_t n = hi - lo;
        if (n > k) continue;
        for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
            out[t * stride + j] = j < n ? (int32_t)(absolute ? lo + j : j) : -1;
    }
}

extern "C" ltk_status ltk_idx_short_rows(const ltk_indexer_args *a, cudaStream_t st) {
    if (a->T <= 0) return LTK_OK;
    int64_t grid = a->T < 65536 ? a->T : 65536;
    sel_short_kernel<<<(unsigned)grid, 128, 0, st>>>(a->ks, a->ke, a->T, a->S, a->k, a->out_idx, a->out_stride,
                                                      (a->flags & LTK_FLAG_ABSOLUTE) != 0);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- block-level exact top-k ---------------------------------------------------------------- */
struct sel_smem {
    uint32_t hist[256];
    uint32_t wsum[SEL_THREADS / 32];
    uint32_t cnt;
    uint32_t digit, above, bucket;
};

static __device__ __forceinline__ uint64_t sel_comp(float s, int32_t idx) {
    return ((uint64_t)ltk_rank_key(s) << 32) | (uint32_t)~(uint32_t)idx;
}

/* Source of (score, absolute index) entries: a dense window row, then a candidate list. */
struct sel_src {
    const float *dense; /* dense[i] for i < nd, index dbase + i */
    int64_t nd, dbase;
    const ltk_cand *cand; /* then cand[i - nd] for i < nd + nc */
    int64_t nc;
    __device__ int64_t n() const { return nd + nc; }
    __device__ void get(int64_t i, float *s, int32_t *idx) const {
        if (i < nd) {
            *s = __ldcg(dense + i);
            *idx = (int32_t)(dbase + i);
        } else {
            ltk_cand c = cand[i - nd];
            *s = c.score;
            *idx = c.idx;
        }
    }
};

/* Digit d of hist[256] with sum_{j>d} hist < kk <= sum_{j>=d}; warp 0 writes digit/above/bucket. */
static __device__ void sel_find_digit(sel_smem *sm, uint32_t kk) {
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        uint32_t v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = sm->hist[lane * 8 + i];
        const uint2 r = ltk_warp_top_bin(v, kk, lane); /* (digit, count above it) */
        if (lane == 0) {
            sm->digit = r.x;
            sm->above = r.y;
            sm->bucket = sm->hist[r.x];
        }
    }
    __syncthreads();
}

/* ---- sorting the winners: select.cuh's bitonic network (ltk_sort_regs), raw bits travelling along ---- */
static_assert(SEL_THREADS == LTK_SEL_NT, "the shared sort assumes LTK_SEL_NT threads");

/* Selects the top `need` (1 <= need <= n) entries of src and leaves them sorted best first in
 * comp[0..need), with their raw score bits in raw[0..need). comp/raw hold np (power of two >=
 * need) slots. */
template <int E>
static __device__ void sel_topk(const sel_src &src, uint32_t need, uint64_t *comp, uint32_t *raw, int np,
                                sel_smem *sm) {
    const int64_t n = src.n();
    const int64_t nr = (n + SEL_THREADS - 1) / SEL_THREADS * SEL_THREADS;
    uint64_t prefix = 0, mask = 0;
    uint32_t kk = need;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += SEL_THREADS) sm->hist[i] = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < nr; i += SEL_THREADS) {
            bool act = false;
            uint32_t d = 0;
            if (i < n) {
                float s;
                int32_t idx;
                src.get(i, &s, &idx);
                uint64_t c = sel_comp(s, idx);
                act = (c & mask) == prefix;
                d = (uint32_t)(c >> shift) & 255u;
            }
            /* aggregate equal digits in the warp: flat rows put every entry in one bin */
            ltk_hist_add_match(sm->hist, act, d);
        }
        __syncthreads();
        sel_find_digit(sm, kk);
        const uint32_t d = sm->digit;
        kk -= sm->above;
        prefix |= (uint64_t)d << shift;
        mask |= 255ull << shift;
        const bool done = sm->bucket == kk;
        __syncthreads();
        if (done) break;
    }
    /* gather the winners: (comp & mask) >= prefix, exactly `need` of them */
    if (threadIdx.x == 0) sm->cnt = 0;
    for (int i = threadIdx.x; i < np; i += SEL_THREADS) comp[i] = 0; /* padding below every entry */
    __syncthreads();
    for (int64_t i = threadIdx.x; i < nr; i += SEL_THREADS) {
        bool take = false;
        uint64_t c = 0;
        float s = 0.0f;
        if (i < n) {
            int32_t idx;
            src.get(i, &s, &idx);
            c = sel_comp(s, idx);
            take = (c & mask) >= prefix;
        }
        const uint32_t pos = ltk_warp_append(take, &sm->cnt);
        if (take && pos < need) {
            comp[pos] = c;
            raw[pos] = __float_as_uint(s);
        }
    }
    __syncthreads();
    if constexpr (E > 1) {
        if (np == E * SEL_THREADS) {
            ltk_sort_regs<E, true>(comp, raw, np);
            return;
        }
    }
    /* fewer winners than the kernel was built for (short rows), or k <= 512: all in shared memory */
    for (int size = 2; size <= np; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) ltk_sort_stage_smem<true>(comp, raw, np, size, stride);
}

/* Writes a sorted selection (need entries) and the padding of output row t. */
static __device__ void sel_write(const ltk_indexer_args &a, int64_t t, int64_t lo, uint32_t need, const uint64_t *comp,
                                 const uint32_t *raw) {
    const int64_t base = (a.flags & LTK_FLAG_ABSOLUTE) ? 0 : lo;
    int32_t *oi = a.out_idx + t * a.out_stride;
    float *os = a.out_scores ? a.out_scores + t * a.out_stride : NULL;
    for (int j = threadIdx.x; j < a.k; j += SEL_THREADS) {
        if ((uint32_t)j < need) {
            int32_t idx = (int32_t)~(uint32_t)comp[j];
            oi[j] = (int32_t)(idx - base);
            if (os) os[j] = __uint_as_float(raw[j]);
        } else {
            oi[j] = -1;
            if (os) os[j] = __int_as_float((int)0xff800000u);
        }
    }
}

static __device__ __forceinline__ int sel_np(uint32_t need) {
    int np = 1;
    while ((uint32_t)np < need) np <<= 1;
    return np;
}

/* Each select kernel is built for E in {1, 2, 4, 8, 16} (winners a thread holds in registers
 * while they are sorted) and launched for its k (LTK_BY_E, k <= SEL_KMAX), so that a small k does
 * not pay the registers of k = 8,192 (one kernel for all E held 105 registers a thread, one CTA an
 * SM). */
#define SEL_BY_E(k, LAUNCH) LTK_BY_E(ltk_sort_e_of(k), LAUNCH)

/* ---- candidate rows ------------------------------------------------------------------------ */
template <int E>
__global__ void __launch_bounds__(SEL_THREADS)
    sel_cand_kernel(const ltk_indexer_args a, int64_t row0, const ltk_cand *cand, int64_t cap, const int32_t *cand_cnt,
                    const float *smin, const float *delta, int skip_short, int32_t *fb_list, int32_t *fb_count,
                    int32_t *st_cand, int32_t *st_bin, int64_t stage_cap) {
    extern __shared__ uint64_t sel_dyn[];
    __shared__ sel_smem sm;
    __shared__ uint32_t s_bin;
    const int64_t r = blockIdx.x, t = row0 + r;
    int64_t lo, hi;
    ltk_row_range(a.ks, a.ke, t, a.S, &lo, &hi);
    const int64_t n = hi - lo;
    if (skip_short && n <= a.k) return; /* answered by the short-row kernel */
    const uint32_t need = (uint32_t)(n < a.k ? n : a.k);
    const int64_t cnt = cand_cnt[r];
    if (st_cand && threadIdx.x == 0) st_cand[t] = (int32_t)(cnt < 0x7fffffff ? cnt : 0x7fffffff);
    if (cnt > cap || cnt < (int64_t)need) {
        if (threadIdx.x == 0) fb_list[atomicAdd(fb_count, 1)] = (int32_t)t;
        return;
    }
    if (need == 0) {
        sel_write(a, t, lo, 0, NULL, NULL);
        return;
    }
    const int np = sel_np(need);
    uint64_t *comp = sel_dyn;
    uint32_t *raw = (uint32_t *)(sel_dyn + np);
    sel_src src;
    src.dense = NULL;
    src.nd = 0;
    src.dbase = 0;
    src.cand = cand + r * cap;
    src.nc = cnt;
    if (cnt <= stage_cap) {
        ltk_cand *stage = (ltk_cand *)(raw + (np > 1 ? np : 2)); /* 8-byte aligned: np is a power of two */
        const uint2 *g = (const uint2 *)src.cand; /* read once: evict first */
        for (int64_t i = threadIdx.x; i < cnt; i += SEL_THREADS) {
            const uint2 v = __ldcs(g + i);
            stage[i].score = __uint_as_float(v.x);
            stage[i].idx = (int32_t)v.y;
        }
        __syncthreads();
        src.cand = stage;
    }
    sel_topk<E>(src, need, comp, raw, np, &sm);
    sel_write(a, t, lo, need, comp, raw);
    if (st_bin) {
        /* candidates in the bin of the k-th best: the size of the final threshold bin */
        if (threadIdx.x == 0) s_bin = 0;
        __syncthreads();
        const float sm_ = smin[r], de = delta[r];
        const int b = ltk_bin(__uint_as_float(raw[need - 1]), sm_, de);
        uint32_t c = 0;
        for (int64_t i = threadIdx.x; i < cnt; i += SEL_THREADS) c += ltk_bin(src.cand[i].score, sm_, de) == b;
        atomicAdd(&s_bin, c);
        __syncthreads();
        if (threadIdx.x == 0) st_bin[t] = (int32_t)s_bin;
    }
}

static size_t sel_dyn_bytes(int32_t k) {
    size_t np = 1;
    while (np < (size_t)k) np <<= 1;
    return np * sizeof(uint64_t) + (np > 1 ? np : 2) * sizeof(uint32_t);
}

static ltk_status sel_set_attrs(void);

extern "C" ltk_status ltk_idx_select_cands(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const ltk_cand *cand,
                                           int64_t cap, const int32_t *cand_cnt, const float *smin, const float *delta,
                                           int skip_short, int32_t *fb_list, int32_t *fb_count, int32_t *st_cand,
                                           int32_t *st_bin, cudaStream_t st) {
    if (nrows <= 0) return LTK_OK;
    LTK_FORWARD_IF(sel_set_attrs());
    const int64_t stage_cap = cap < SEL_STAGE ? cap : SEL_STAGE;
    const size_t smem = sel_dyn_bytes(a->k) + (size_t)stage_cap * sizeof(ltk_cand);
#define SEL_CAND_LAUNCH(E_)                                                                                       \
    sel_cand_kernel<E_><<<(unsigned)nrows, SEL_THREADS, smem, st>>>(*a, row0, cand, cap, cand_cnt, smin, delta, \
                                                                    skip_short, fb_list, fb_count, st_cand, st_bin, \
                                                                    stage_cap)
    SEL_BY_E(a->k, SEL_CAND_LAUNCH)
#undef SEL_CAND_LAUNCH
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- dense rows (materialize and fallback) --------------------------------------------------- */
template <int E>
__global__ void __launch_bounds__(SEL_THREADS)
    sel_dense_kernel(const ltk_indexer_args a, int64_t row0, const int32_t *list, const int32_t *list_count,
                     int64_t list_off, const float *logits, int64_t ld, int64_t col_lo, int64_t col_hi, ltk_cand *run,
                     int32_t *run_cnt, int first, int final, int skip_short) {
    extern __shared__ uint64_t sel_dyn[];
    __shared__ sel_smem sm;
    const int64_t r = blockIdx.x;
    if (list) {
        int64_t c = (int64_t)*list_count - list_off;
        if (r >= c) return;
    }
    const int64_t t = list ? (int64_t)list[list_off + r] : row0 + r;
    int64_t lo, hi;
    ltk_row_range(a.ks, a.ke, t, a.S, &lo, &hi);
    const int64_t n = hi - lo;
    if (skip_short && n <= a.k) return;
    /* this window's part of the row */
    const int64_t wlo = lo > col_lo ? lo : col_lo, whi = hi < col_hi ? hi : col_hi;
    sel_src src;
    src.dense = logits + r * ld + (wlo - col_lo);
    src.nd = whi > wlo ? whi - wlo : 0;
    src.dbase = wlo;
    src.cand = run ? run + r * (int64_t)a.k : NULL;
    src.nc = (run && !first) ? run_cnt[r] : 0;
    const int64_t have = src.n();
    const uint32_t need = (uint32_t)(have < a.k ? have : a.k);
    const int np = sel_np(need > 0 ? need : 1);
    uint64_t *comp = sel_dyn;
    uint32_t *raw = (uint32_t *)(sel_dyn + np);
    if (need > 0) sel_topk<E>(src, need, comp, raw, np, &sm);
    if (final) {
        sel_write(a, t, lo, need, comp, raw);
    } else {
        __syncthreads(); /* every read of the old run list is done */
        for (uint32_t j = threadIdx.x; j < need; j += SEL_THREADS) {
            ltk_cand c;
            c.score = __uint_as_float(raw[j]);
            c.idx = (int32_t)~(uint32_t)comp[j];
            run[r * (int64_t)a.k + j] = c;
        }
        if (threadIdx.x == 0) run_cnt[r] = (int32_t)need;
    }
}

static ltk_status sel_set_attrs(void) {
    const size_t b = sel_dyn_bytes(SEL_KMAX), bc = b + SEL_STAGE * sizeof(ltk_cand);
    const void *cand[] = {(const void *)sel_cand_kernel<1>, (const void *)sel_cand_kernel<2>,
                          (const void *)sel_cand_kernel<4>, (const void *)sel_cand_kernel<8>,
                          (const void *)sel_cand_kernel<16>};
    const void *dense[] = {(const void *)sel_dense_kernel<1>, (const void *)sel_dense_kernel<2>,
                           (const void *)sel_dense_kernel<4>, (const void *)sel_dense_kernel<8>,
                           (const void *)sel_dense_kernel<16>};
    for (int i = 0; i < 5; i++) {
        LTK_FORWARD_IF(ltk_cuda_smem_reserve(cand[i], bc));
        LTK_FORWARD_IF(ltk_cuda_smem_reserve(dense[i], b));
    }
    return LTK_OK;
}

extern "C" ltk_status ltk_idx_select_dense(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const int32_t *list,
                                           const int32_t *list_count, int64_t list_off, const float *logits, int64_t ld,
                                           int64_t col_lo, int64_t col_hi, ltk_cand *run, int32_t *run_cnt, int first,
                                           int final, int skip_short, cudaStream_t st) {
    if (nrows <= 0) return LTK_OK;
    LTK_FORWARD_IF(sel_set_attrs());
#define SEL_DENSE_LAUNCH(E_)                                                                                   \
    sel_dense_kernel<E_><<<(unsigned)nrows, SEL_THREADS, sel_dyn_bytes(a->k), st>>>(                          \
        *a, row0, list, list_count, list_off, logits, ld, col_lo, col_hi, run, run_cnt, first, final, skip_short)
    SEL_BY_E(a->k, SEL_DENSE_LAUNCH)
#undef SEL_DENSE_LAUNCH
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- fallback statistics --------------------------------------------------------------------- */
__global__ void sel_mark_fb_kernel(const int32_t *fb_list, const int32_t *fb_count, int32_t *st_fb, int64_t nmax) {
    int64_t c = *fb_count;
    c = c < nmax ? c : nmax;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c; i += (int64_t)gridDim.x * blockDim.x)
        st_fb[fb_list[i]] = 1;
}

extern "C" ltk_status ltk_idx_mark_fallback(const int32_t *fb_list, const int32_t *fb_count, int64_t unused,
                                            int32_t *st_fb, int64_t nmax, cudaStream_t st) {
    (void)unused;
    if (!st_fb || nmax <= 0) return LTK_OK;
    sel_mark_fb_kernel<<<64, 256, 0, st>>>(fb_list, fb_count, st_fb, nmax);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- clamped ranges -------------------------------------------------------------------------- */
__global__ void sel_clamp_kernel(const int32_t *ks, const int32_t *ke, int64_t row0, int64_t nrows, int64_t S,
                                 int32_t *starts, int32_t *ends) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < nrows; r += (int64_t)gridDim.x * blockDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, ke, row0 + r, S, &lo, &hi);
        starts[r] = (int32_t)lo;
        ends[r] = (int32_t)hi;
    }
}

extern "C" ltk_status ltk_idx_clamp_ranges(const int32_t *ks, const int32_t *ke, int64_t row0, int64_t nrows, int64_t S,
                                           int32_t *starts, int32_t *ends, cudaStream_t st) {
    if (nrows <= 0) return LTK_OK;
    sel_clamp_kernel<<<(unsigned)((nrows + 255) / 256 < 1024 ? (nrows + 255) / 256 : 1024), 256, 0, st>>>(
        ks, ke, row0, nrows, S, starts, ends);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}
