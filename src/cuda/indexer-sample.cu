/* The indexer's sample stage on the GPU, all on the stream (no host synchronisation):
 *   union   : [lo, hi) = the union of the scanned rows' ranges (device ranges are clamped);
 *   list    : the sample keys P: the hot set carried in the ltk_indexer_state (filtered to [lo, hi),
 *             deduplicated), then a strided subset of [lo, hi - win) plus the most recent window
 *             [hi - win, hi), minus keys already taken from the hot set: no key twice, no dense pass;
 *   gather  : P's key rows copied to a dense key source, scored by the same scan kernel (so the
 *             sample scores are the scan's scores bit for bit);
 *   prep    : per row, over the sample keys inside its own range: s_min, s_max, the k-th best, the
 *             bins and the initial threshold bin (design.md, step 1). */
#include "indexer.cuh"

#define SMP_THREADS 1024
#define SMP_HOT_MAX 16384 /* hot keys sorted in shared memory */

/* ---- union of the scanned ranges ------------------------------------------------------------ */
__global__ void __launch_bounds__(SMP_THREADS) smp_union_kernel(const int32_t *ks, const int32_t *ke, int64_t T,
                                                                int64_t S, int32_t k, int skip_short, int64_t *lohi) {
    __shared__ int64_t s_lo[32], s_hi[32];
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t t = threadIdx.x; t < T; t += SMP_THREADS) {
        int64_t a, b;
        ltk_row_range(ks, ke, t, S, &a, &b);
        if (a >= b || (skip_short && b - a <= k)) continue;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    for (int o = 16; o > 0; o >>= 1) {
        int64_t x = __shfl_xor_sync(0xffffffffu, lo, o), y = __shfl_xor_sync(0xffffffffu, hi, o);
        lo = x < lo ? x : lo;
        hi = y > hi ? y : hi;
    }
    if ((threadIdx.x & 31) == 0) {
        s_lo[threadIdx.x >> 5] = lo;
        s_hi[threadIdx.x >> 5] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < SMP_THREADS / 32; w++) {
            lo = s_lo[w] < lo ? s_lo[w] : lo;
            hi = s_hi[w] > hi ? s_hi[w] : hi;
        }
        if (lo >= hi) lo = hi = 0;
        lohi[0] = lo;
        lohi[1] = hi;
    }
}

extern "C" ltk_status ltk_idx_union(const int32_t *ks, const int32_t *ke, int64_t T, int64_t S, int32_t k,
                                    int skip_short, int64_t *lohi, cudaStream_t st) {
    smp_union_kernel<<<1, SMP_THREADS, 0, st>>>(ks, ke, T, S, k, skip_short, lohi);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- sample list ----------------------------------------------------------------------------- */
/* Exclusive block scan (SMP_THREADS threads) of one value per thread. */
static __device__ int32_t smp_block_scan(int32_t v, int32_t *ws, int32_t *total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int32_t x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) ws[w] = x;
    __syncthreads();
    if (w == 0) {
        int32_t s = ws[lane];
        for (int o = 1; o < 32; o <<= 1) {
            int32_t y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        ws[lane] = s;
    }
    __syncthreads();
    int32_t r = (w ? ws[w - 1] : 0) + x - v;
    *total = ws[31];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(SMP_THREADS)
    smp_list_kernel(const int32_t *hot, int32_t hot_cap, int64_t m_hot, int64_t m_cold, int64_t win,
                    int64_t *lohi, int32_t *P, int64_t m_max) {
    extern __shared__ int32_t hs[]; /* [hot_np] sorted hot keys */
    __shared__ int32_t ws[32];
    const int64_t lo = lohi[0], hi = lohi[1];
    int hot_np = 1;
    while (hot_np < m_hot) hot_np <<= 1;
    if (m_hot == 0) hot_np = 0;
    /* 1. the first m_hot hot keys inside [lo, hi), in the state's order (best first) */
    int32_t nh = 0;
    if (hot && m_hot > 0) {
        int64_t cnt = hot[0];
        cnt = cnt < 0 ? 0 : (cnt > hot_cap ? hot_cap : cnt);
        for (int64_t b = 0; b < cnt && nh < m_hot; b += SMP_THREADS) {
            int64_t i = b + threadIdx.x;
            int32_t key = i < cnt ? hot[1 + i] : -1;
            int32_t ok = key >= 0 && key >= lo && key < hi;
            int32_t tot, pos = smp_block_scan(ok, ws, &tot);
            if (ok && nh + pos < m_hot) hs[nh + pos] = key;
            nh = nh + tot < m_hot ? nh + tot : (int32_t)m_hot;
        }
    }
    for (int i = nh + threadIdx.x; i < hot_np; i += SMP_THREADS) hs[i] = 0x7fffffff;
    __syncthreads();
    /* 2. sort ascending (bitonic), then drop duplicates: a key scored twice would make the
     *    sample's k-th best illegally tight */
    for (int size = 2; size <= hot_np; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < hot_np / 2; i += SMP_THREADS) {
                int a = 2 * i - (i & (stride - 1)), b = a + stride;
                bool up = (a & size) == 0;
                int32_t x = hs[a], y = hs[b];
                if ((x > y) == up) {
                    hs[a] = y;
                    hs[b] = x;
                }
            }
            __syncthreads();
        }
    int32_t nu = 0;
    for (int b = 0; b < nh; b += SMP_THREADS) {
        int i = b + threadIdx.x;
        int32_t ok = i < nh && (i == 0 || hs[i] != hs[i - 1]);
        int32_t key = i < nh ? hs[i] : 0;
        int32_t tot, pos = smp_block_scan(ok, ws, &tot);
        if (ok && nu + pos < m_max) P[nu + pos] = key;
        nu += tot;
    }
    if (nu > m_max) nu = (int32_t)m_max;
    /* 3. cold part: strided over [lo, hi - w), then the window [hi - w, hi), skipping hot keys */
    const int64_t n = hi - lo;
    const int64_t w = win < n ? win : n;
    const int64_t span = n - w;
    const int64_t ms = m_cold < span ? m_cold : span;
    const int64_t ncold = ms + w;
    int64_t out = nu, nstr = 0; /* nstr: strided keys written (they follow the hot ones in P) */
    for (int64_t b = 0; b < ncold && out < m_max; b += SMP_THREADS) {
        int64_t j = b + threadIdx.x;
        int64_t key = -1;
        if (j < ms) key = lo + (j * span) / ms;
        else if (j < ncold) key = hi - w + (j - ms);
        int32_t ok = key >= 0;
        if (ok && nh > 0) { /* binary search in the sorted hot keys */
            int a = 0, z = nh - 1;
            while (a < z) {
                int mid = (a + z) >> 1;
                if (hs[mid] < key) a = mid + 1;
                else z = mid;
            }
            if (hs[a] == key) ok = 0;
        }
        const int32_t nsb = __syncthreads_count(ok && j < ms);
        int32_t tot, pos = smp_block_scan(ok, ws, &tot);
        if (ok && out + pos < m_max) P[out + pos] = (int32_t)key;
        nstr += nsb;
        out += tot;
    }
    if (out > m_max) out = m_max;
    if (threadIdx.x == 0) { /* where the uniform (strided) part of the sample lies, for the prep */
        const int64_t s0 = nu < m_max ? nu : m_max;
        lohi[2] = s0;
        lohi[3] = s0 + nstr < m_max ? nstr : m_max - s0;
        lohi[4] = lo + span; /* the strided keys cover [lo, lo + span) */
    }
    for (int64_t i = out + threadIdx.x; i < m_max; i += SMP_THREADS) P[i] = -1;
}

extern "C" ltk_status ltk_idx_sample_list(const int32_t *hot, int32_t hot_cap, int64_t m_hot, int64_t m_cold,
                                          int64_t win, int64_t *lohi, int32_t *P, int64_t m_max,
                                          cudaStream_t st) {
    if (m_hot > SMP_HOT_MAX) m_hot = SMP_HOT_MAX;
    int hot_np = 1;
    while (hot_np < m_hot) hot_np <<= 1;
    size_t smem = m_hot > 0 ? sizeof(int32_t) * (size_t)hot_np : 0;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)smp_list_kernel, sizeof(int32_t) * SMP_HOT_MAX));
    smp_list_kernel<<<1, SMP_THREADS, smem, st>>>(hot, hot_cap, m_hot, m_cold, win, lohi, P, m_max);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- gather -------------------------------------------------------------------------------- */
__global__ void smp_gather_kernel(const uint8_t *kv, int64_t row_bytes, int64_t stride_bytes, const float *scale,
                                  const int32_t *P, int64_t m_pad, uint8_t *kvg, float *scaleg) {
    for (int64_t j = blockIdx.x; j < m_pad; j += gridDim.x) {
        int32_t key = P[j];
        uint8_t *dst = kvg + j * row_bytes;
        const uint8_t *src = kv + (int64_t)(key < 0 ? 0 : key) * stride_bytes;
        for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) dst[b] = key >= 0 ? src[b] : (uint8_t)0;
        if (threadIdx.x == 0 && scaleg) scaleg[j] = key >= 0 ? (scale ? scale[key] : 1.0f) : 0.0f;
    }
}

extern "C" ltk_status ltk_idx_gather(const ltk_indexer_args *a, const int32_t *P, int64_t m_pad, void *kvg,
                                     float *scaleg, cudaStream_t st) {
    size_t es = ltk_dtype_size(a->dtype);
    int64_t grid = m_pad < 4096 ? m_pad : 4096;
    if (grid <= 0) return LTK_OK;
    smp_gather_kernel<<<(unsigned)grid, 128, 0, st>>>((const uint8_t *)a->kv, (int64_t)es * a->D,
                                                        (int64_t)es * a->kv_stride_s, a->kv_scale, P, m_pad,
                                                        (uint8_t *)kvg, a->kv_scale ? scaleg : NULL);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* ---- per-row threshold setup ------------------------------------------------------------- */
#define PREP_THREADS 256
#define PREP_Q 4      /* the strided estimate aims at PREP_Q * k keys of the row above it */
#define PREP_R2MIN 24 /* and is used only with at least this many strided keys above it */
/* The row's sample rank keys are staged in shared memory when they fit (m_max <= 24,576 keys):
 * the four radix passes then read them there, not P and the row from global memory five times
 * (0.4 ms a call at 8,192 rows of 11,264 sample keys, LTK_CUDA_TRACE). */
#define PREP_SMEM_MAX (96 * 1024)

static __device__ float prep_block_min(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = sh[0];
    for (int w = 1; w < PREP_THREADS / 32; w++) r = fminf(r, sh[w]);
    __syncthreads();
    return r;
}
static __device__ float prep_block_max(float v, float *sh) { return -prep_block_min(-v, sh); }
static __device__ int64_t prep_block_sum(int64_t v, int64_t *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    int64_t r = 0;
    for (int w = 0; w < PREP_THREADS / 32; w++) r += sh[w];
    __syncthreads();
    return r;
}

/* One radix pass's digit, by one whole warp: the bin (scanning down from the top) that holds the
 * kk-th best of the counted entries; the prefix gains the digit, kk loses what the bins above it
 * hold. Why a warp: one thread walking up to 255 bins, four passes a row, left the rest of the
 * block waiting at the barrier (40% of the prep's stalls, ncu). */
static __device__ __forceinline__ void prep_digit_warp(const int32_t *hist, uint32_t kk, uint32_t prefix, int shift,
                                       uint32_t *prefix_o, uint32_t *kk_o) {
    const int lane = threadIdx.x & 31;
    uint32_t v[LTK_NB / 32];
#pragma unroll
    for (int i = 0; i < LTK_NB / 32; i++) v[i] = (uint32_t)hist[lane * (LTK_NB / 32) + i];
    const uint2 r = ltk_warp_top_bin(v, kk, lane); /* (digit, count above it) */
    if (lane == 0) {
        *prefix_o = prefix | (r.x << shift);
        *kk_o = kk - r.y;
    }
}

/* (5 blocks an SM: 48 registers. With no minimum, ptxas chose 32 registers and spilled.) */
__global__ void __launch_bounds__(PREP_THREADS, 5)
    smp_prep_kernel(const int32_t *ks, const int32_t *ke, int64_t S, int32_t k, int64_t row0, const float *sc,
                    int64_t ld, const int32_t *P, int64_t m_max, const int64_t *lohi, int skip_short, float *smin_o,
                    float *delta_o, int32_t *th_o, int32_t *cand_cnt, int staged) {
    extern __shared__ uint32_t prep_rk[]; /* [m_max] rank keys (0: outside the row, or NaN) if staged */
    __shared__ float shf[PREP_THREADS / 32];
    __shared__ int64_t shi[PREP_THREADS / 32];
    __shared__ int32_t hist[256], hist2[256];
    __shared__ uint32_t s_prefix, s_kk, s_prefix2, s_kk2;
    const int64_t r = blockIdx.x;
    int64_t lo, hi;
    ltk_row_range(ks, ke, row0 + r, S, &lo, &hi);
    const float *row = sc + r * ld;
    if (threadIdx.x == 0) cand_cnt[r] = 0;
    if (hi - lo <= k) { /* short row: everything passes (th 0); skipped rows are never read */
        if (threadIdx.x == 0) {
            smin_o[r] = 0.0f;
            delta_o[r] = 1.0f;
            th_o[r] = 0;
        }
        return;
    }
    /* finite range and count of non-NaN scores of the sample keys inside this row's range */
    float mn = __int_as_float(0x7f800000), mx = __int_as_float(0xff800000);
    int64_t nv = 0, ns = 0; /* ns: non-NaN strided (uniform) sample keys inside the row */
    const int64_t s0 = lohi[2], s1 = lohi[2] + lohi[3];
    for (int64_t j = threadIdx.x; j < m_max; j += PREP_THREADS) {
        int32_t key = P[j];
        const bool in = key >= lo && key < hi;
        float x = in ? row[j] : 0.0f;
        if (staged) prep_rk[j] = in ? ltk_rank_key(x) : 0u;
        if (!in) continue;
        if (x == x) nv++;
        if (x == x && j >= s0 && j < s1) ns++;
        if (isfinite(x)) {
            mn = fminf(mn, x);
            mx = fmaxf(mx, x);
        }
    }
    mn = prep_block_min(mn, shf);
    mx = prep_block_max(mx, shf);
    nv = prep_block_sum(nv, shi);
    ns = prep_block_sum(ns, shi);
    /* A second, tighter threshold from the strided keys alone, which sample the row uniformly: their
     * r2-th best with r2 = PREP_Q k ns / len expects PREP_Q k keys of the row at or above it, and
     * fewer than k with probability P(Poisson(r2 / PREP_Q) >= r2) (< 1e-8 at r2 >= PREP_R2MIN).
     * Why: the sample's k-th best, the safe threshold, sits near rank k len / m of the row (m the
     * sample size), so the gate admits ~k (1 + ln(len / m)) keys as the refresh catches up: ~6k at
     * 1M keys. If the estimate is too high after all, the row holds fewer than k candidates and
     * goes to the exact dense fallback: a slower row, never a wrong one. */
    /* the part of the row the strided keys cover (the window's keys, outside it, only add keys) */
    const int64_t c0 = lo > lohi[0] ? lo : lohi[0], c1 = hi < lohi[4] ? hi : lohi[4];
    const int64_t len = c1 - c0;
    int64_t r2 = ns > 0 && len > 0 ? (PREP_Q * (int64_t)k * ns + len - 1) / len : 0;
    const bool use2 = nv >= k && r2 >= PREP_R2MIN && r2 <= ns;
    if (!use2) r2 = 0;
    float smin = 0.0f, delta = 1.0f;
    if (mn <= mx) {
        float w = __fsub_rn(mx, mn);
        if (!(w > 0.0f) || !isfinite(w) || !isfinite((float)LTK_NB / w)) {
            /* degenerate: a width from the magnitude (or the whole float range) */
            float mag = fmaxf(fabsf(mn), fabsf(mx));
            w = isfinite(w) && w > 0.0f ? w : (mag > 0.0f ? mag : 1.0f);
            w = fmaxf(w, fmaxf(mag * 0.0078125f, 1e-30f));
            if (!isfinite(w)) w = 3.0e38f;
        }
        smin = mn;
        delta = (float)LTK_NB / w;
        if (!(delta > 0.0f) || !isfinite(delta)) delta = 1.0f;
    }
    int32_t th = 0;
    if (nv >= k) {
        /* k-th largest rank key among the non-NaN sample scores: radix select, 8 bits per pass */
        /* radix select, 8 bits per pass: the k-th best of the whole sample and (use2) the r2-th best
         * of its strided part, side by side */
        uint32_t prefix = 0, kk = (uint32_t)k, prefix2 = 0, kk2 = (uint32_t)r2;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = threadIdx.x; i < 256; i += PREP_THREADS) {
                hist[i] = 0;
                hist2[i] = 0;
            }
            __syncthreads();
            const uint32_t hmask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
            /* (plain shared-memory atomics: aggregating equal digits with __match_any_sync made the
             * prep slower, 255 -> 300 us per 4,096 rows, ncu) */
            for (int64_t j = threadIdx.x; j < m_max; j += PREP_THREADS) {
                uint32_t rk;
                if (staged) {
                    rk = prep_rk[j];
                } else {
                    int32_t key = P[j];
                    rk = key >= lo && key < hi ? ltk_rank_key(row[j]) : 0u;
                }
                if (rk == 0u) continue;
                if ((rk & hmask) == prefix) atomicAdd(&hist[(rk >> shift) & 255u], 1);
                if (use2 && j >= s0 && j < s1 && (rk & hmask) == prefix2) atomicAdd(&hist2[(rk >> shift) & 255u], 1);
            }
            __syncthreads();
            if (threadIdx.x < 32) prep_digit_warp(hist, kk, prefix, shift, &s_prefix, &s_kk);
            if (use2 && threadIdx.x >= 32 && threadIdx.x < 64)
                prep_digit_warp(hist2, kk2, prefix2, shift, &s_prefix2, &s_kk2);
            __syncthreads();
            prefix = s_prefix;
            kk = s_kk;
            if (use2) {
                prefix2 = s_prefix2;
                kk2 = s_kk2;
            }
            __syncthreads();
        }
        float kth = ltk_rank_key_to_f32(prefix);
        if (use2) { /* the higher of the two (rank keys order like the floats) */
            const float est = ltk_rank_key_to_f32(prefix2);
            if (prefix2 > prefix && isfinite(est)) kth = est;
        }
        if (isfinite(kth)) {
            /* a small margin below the sample's k-th: the gate stays safe even if a score differed
             * in its last bits between the sample pass and the scan */
            float margin = fmaxf(fabsf(mn), fabsf(mx)) * 0.000244140625f;
            th = ltk_bin(__fsub_rn(kth, margin), smin, delta);
        } else if (kth > 0.0f) {
            th = ltk_bin(kth, smin, delta);
        }
    }
    if (threadIdx.x == 0) {
        smin_o[r] = smin;
        delta_o[r] = delta;
        th_o[r] = th;
    }
}

extern "C" ltk_status ltk_idx_prep(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const float *sc, int64_t ld,
                                   const int32_t *P, int64_t m_max, const int64_t *lohi, int skip_short, float *smin,
                                   float *delta, int32_t *th, int32_t *cand_cnt, cudaStream_t st) {
    if (nrows <= 0) return LTK_OK;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)smp_prep_kernel, PREP_SMEM_MAX));
    const int staged = (size_t)m_max * 4 <= PREP_SMEM_MAX;
    smp_prep_kernel<<<(unsigned)nrows, PREP_THREADS, staged ? (size_t)m_max * 4 : 0, st>>>(
        a->ks, a->ke, a->S, a->k, row0, sc, ld, P, m_max, lohi, skip_short, smin, delta, th, cand_cnt, staged);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}
