/* Exact, deterministic GPU top-k select over materialised rows (f32 / f16 / bf16).
 *
 * Fast tier (k <= 8192): one pass over HBM in the common case.
 *   1. Sample: 16K keys of the row in 8-entry runs spread over the valid range (one 32-byte sector
 *      each); t = the r-th best sampled key with r ~ 2k * m / n. Only a guess: it is VERIFIED below.
 *   2. Scan: stream the row once (16-byte loads, 4 in flight per thread); entries with key >= t go
 *      to a shared-memory candidate buffer (warp-aggregated appends). A chunk whose buffer
 *      overflows with t > 0 (a tie class at t larger than the buffer: flat rows, few distinct
 *      values, a zero plateau) is rescanned keeping only the entries above t and counting the
 *      ties (sel_rescan_ties). Few rows: P CTAs split each row; the last CTA to finish (atomic
 *      ticket) gathers the row's candidates from L2.
 *   3. Verify: if the row has >= k entries above t, or the candidates hold every entry >= t and
 *      there are >= k, the exact top-k is among them: radix-select the k largest composites
 *      (key, ~index) there. If fewer than k are above t and a rescanned chunk left ties out, the
 *      k-th key is t: the answer is every entry above t and the lowest-index k - (above) ties,
 *      from one ordered pass that stops once it has them (sel_take_ties; the class is never stored
 *      nor sorted, and a dense class is found in the row's first blocks: 64 x 1M, k = 2048 on the
 *      H200, all-equal rows 0.136 ms against 3.09 on the dense path, bench/results/h200/
 *      select.jsonl). Otherwise (bad sample, NaN-heavy row, a buffer overflow of entries above t)
 *      the same CTA redoes the row on the exact dense path (4): slower, never wrong, counted in
 *      ltk_stats.fallback_rows.
 *   5. Sort the k composites (bitonic in shared memory) unless LTK_FLAG_UNSORTED; reload the
 *      reported scores from the input so their bits are the input's (-0 stays -0).
 * General tier (k > 8192) and the fallback (4): radix passes over the key bits straight from the
 *   row (11-bit digits, early exit when the threshold bucket is exactly what is needed), then an
 *   ordered prefix count that takes the LOWEST indices among entries equal to the k-th key, then a
 *   gather. k > 16384 sorts with CUB's segmented radix sort.
 * Outputs are deterministic: the set always; the order too unless LTK_FLAG_UNSORTED (then the
 * order within the k slots may vary from run to run, as the contract allows). */
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda-common.cuh"
#include "ptx.cuh"
#include "select.cuh"

/* k up to 8192 in the fast tier: at k = 8192 its buffer shrinks to what 227 KB of shared memory
 * holds (~19.5K candidates against 4k), one CTA an SM. Why: the general tier is one CTA a row
 * streaming it three times; 64 x 5M bf16 at k = 8192 took 7.78 ms against torch.topk's 2.52 in the
 * same process (bench/results/h200/select.jsonl, bench/gpu_select_torch.py). */
#define SEL_FAST_KMAX 8192
#define SEL_SAMPLE_MAX 16384
#define SEL_MINCHUNK 16384
#define SEL_SMEM_SORT_MAX 16384 /* general tier: bitonic in shared memory up to this padded k */
#define SEL_GEN_BUDGET ((size_t)256 << 20)

struct sel_params {
    const void *scores;
    int64_t rows, cols, row_stride;
    const int32_t *starts, *ends;
    int32_t k, kp; /* kp: k rounded up to a power of two */
    int32_t *out_idx;
    float *out_scores;
    int64_t out_stride;
    uint32_t flags;
    int P;        /* CTAs per row (fast tier) */
    uint32_t cap; /* candidate capacity of one CTA */
    /* workspace */
    uint32_t *row_t, *row_cnt, *row_done, *row_ovf, *row_eq, *row_gt; /* row_ovf: 1 overflow, 2 ties left out */
    int32_t *st_cand, *st_fb;
    uint32_t *gkey, *grel; /* P > 1: row r's candidates at r * P * cap */
    uint64_t *gsel;        /* general tier, global sort: rows of kp composites */
    int64_t row0;          /* first row of this launch (general tier batches) */
};

static __device__ __forceinline__ void sel_row_range(const sel_params &p, int64_t r, int64_t *s, int64_t *n) {
    int64_t lo = 0, hi = p.cols;
    if (p.starts) {
        /* Device ranges are not validated by the front end: clamp so nothing is read out of bounds. */
        lo = p.starts[r];
        hi = p.ends[r];
        lo = lo < 0 ? 0 : (lo > p.cols ? p.cols : lo);
        hi = hi < lo ? lo : (hi > p.cols ? p.cols : hi);
    }
    *s = lo;
    *n = hi - lo;
}

template <int DT>
static __device__ __forceinline__ const typename ltk_dt<DT>::raw *sel_row_ptr(const sel_params &p, int64_t r, int64_t s) {
    return (const typename ltk_dt<DT>::raw *)p.scores + r * p.row_stride + s;
}

/* Writes row r's k outputs from `cnt` composites in c[] (sorted or not), padding the rest. The
 * scores are read back from the row (its bits, -0 and NaN payloads kept), LTK_SEL_U a thread in
 * flight before any store. Why: one load-store pair per step made a chain of k / LTK_SEL_NT
 * dependent row reads from DRAM in the one CTA that finishes a row (ncu, decode B = 8 at 1M: the
 * long-scoreboard stalls of the select's tail sat on those loads). */
template <int DT>
static __device__ void sel_write(const sel_params &p, int64_t r, int64_t s, const typename ltk_dt<DT>::raw *row,
                                 const uint64_t *c, uint32_t cnt) {
    int32_t *oi = p.out_idx + r * p.out_stride;
    float *os = p.out_scores ? p.out_scores + r * p.out_stride : NULL;
    int32_t base = (p.flags & LTK_FLAG_ABSOLUTE) ? (int32_t)s : 0;
    for (int j0 = 0; j0 < p.k; j0 += LTK_SEL_NT * LTK_SEL_U) {
        uint32_t rel[LTK_SEL_U], raw[LTK_SEL_U];
        bool ok[LTK_SEL_U];
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int j = j0 + u * LTK_SEL_NT + threadIdx.x;
            const uint64_t cj = j < p.k && (uint32_t)j < cnt ? c[j] : 0ull;
            ok[u] = cj != 0;
            rel[u] = ltk_comp_rel(cj);
            raw[u] = os && ok[u] ? (uint32_t)row[rel[u]] : 0u;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int j = j0 + u * LTK_SEL_NT + threadIdx.x;
            if (j >= p.k) continue;
            oi[j] = ok[u] ? (int32_t)rel[u] + base : -1;
            if (os) os[j] = ok[u] ? ltk_dt<DT>::val(raw[u]) : -INFINITY;
        }
    }
}

/* Short row (n <= k): every valid entry is in the answer. */
template <int DT>
static __device__ void sel_short_row(const sel_params &p, int64_t r, int64_t s, int64_t n, uint64_t *buf, int bufcap,
                                     bool global_buf) {
    const typename ltk_dt<DT>::raw *row = sel_row_ptr<DT>(p, r, s);
    if (p.flags & LTK_FLAG_UNSORTED) { /* index order: deterministic and no sort */
        int32_t *oi = p.out_idx + r * p.out_stride;
        float *os = p.out_scores ? p.out_scores + r * p.out_stride : NULL;
        int32_t base = (p.flags & LTK_FLAG_ABSOLUTE) ? (int32_t)s : 0;
        for (int j = threadIdx.x; j < p.k; j += LTK_SEL_NT) {
            oi[j] = j < n ? j + base : -1;
            if (os) os[j] = j < n ? ltk_dt<DT>::val(row[j]) : -INFINITY;
        }
        return;
    }
    int np = 1;
    while (np < n) np <<= 1;
    if (global_buf) np = bufcap; /* the CUB pass sorts the whole padded segment */
    for (int j = threadIdx.x; j < np; j += LTK_SEL_NT)
        buf[j] = j < n ? ltk_comp(ltk_dt<DT>::key(row[j]), (uint32_t)j) : 0ull;
    __syncthreads();
    if (global_buf) return;
    ltk_bitonic_desc(buf, np);
    sel_write<DT>(p, r, s, row, buf, (uint32_t)n);
}

/* ---- sampling ------------------------------------------------------------------------------- */

/* A key t at or below the r-th largest of the m sampled keys in buf, with at most r + r / 4 of
 * them at or above it (exactly the r-th key when the bins narrow to single keys). Linear bins over
 * the sample's own range [min, max], zoomed into the bin that holds the r-th key until that bin
 * holds at most r / 4 keys: ReLU-summed scores share their sign and most exponent bits, and 11-bit
 * radix digits from the top put the whole sample into a few bins (three passes, their atomics on a
 * few addresses, every time); over the range one pass usually settles it. A bin of one key value
 * (a plateau, few distinct values) ends at that exact key, which the tie path needs. */
static __device__ uint32_t sel_sample_quantile(const uint32_t *buf, uint32_t m, uint32_t r, ltk_sel_smem *sm,
                                               uint32_t *eq) {
    const int lane = threadIdx.x & 31;
    uint32_t mn = 0xffffffffu, mx = 0u;
    for (uint32_t i = threadIdx.x; i < m; i += LTK_SEL_NT) {
        const uint32_t v = buf[i];
        mn = min(mn, v);
        mx = max(mx, v);
    }
    mn = __reduce_min_sync(LTK_FULL, mn);
    mx = __reduce_max_sync(LTK_FULL, mx);
    if (threadIdx.x == 0) sm->kmin = 0xffffffffu, sm->kmax = 0u;
    __syncthreads();
    if (lane == 0) {
        atomicMin(&sm->kmin, mn);
        atomicMax(&sm->kmax, mx);
    }
    __syncthreads();
    uint32_t lo = sm->kmin;
    const uint32_t span = sm->kmax - lo;
    /* keys in [lo, lo + 2^w) are binned by (key - lo) >> sh into 2^(w - sh) <= LTK_SEL_BINS bins */
    int w = span ? 32 - __clz(span) : 0;
    uint32_t kk = r;
    *eq = w == 0 ? m : 0u; /* (a flat sample: every key is lo) */
    const uint32_t slack = r / 4 > 1u ? r / 4 : 1u;
    while (w > 0) {
        const int sh = w > 11 ? w - 11 : 0, nb = 1 << (w - sh);
        for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
        __syncthreads();
        const uint64_t top = (uint64_t)lo + ((uint64_t)1 << w); /* (keys at or above it: counted before) */
        for (uint32_t i0 = 0; i0 < m; i0 += LTK_SEL_NT) { /* (warp-uniform trips: the add is warp-wide) */
            const uint32_t i = i0 + threadIdx.x, v = i < m ? buf[i] : 0u;
            const bool act = i < m && v >= lo && (uint64_t)v < top;
            ltk_hist_add_agg(sm->hist, act, act ? (v - lo) >> sh : 0u);
        }
        __syncthreads();
        ltk_find_bucket(sm, nb, kk);
        const uint32_t d = sm->digit, above = sm->above, bucket = sm->bucket;
        __syncthreads();
        lo += d << sh;
        kk -= above;
        if (sh == 0) *eq = bucket; /* the bin is one key value: its count */
        w = sh;
        if (bucket <= slack || bucket == kk) break; /* few keys in the bin, or all of them needed */
    }
    return lo;
}

/* Returns a key t such that, with high probability, about 2k entries of the row have key >= t
 * (0 = take everything, used when the row fits the candidate buffer). Deterministic. *cls: the
 * row's entries of key t as the sample predicts them (0 when t is a bin edge, not a key). */
template <int DT>
static __device__ uint32_t sel_sample_threshold(const typename ltk_dt<DT>::raw *row, int64_t n, int k, uint32_t cap,
                                                uint32_t *buf, int64_t bufcap, ltk_sel_smem *sm, int64_t *cls) {
    *cls = 0;
    if (n <= (int64_t)cap) return 0u;
    /* m: enough that the r-th sampled key below is at r >= 64 (m >= 32 n / k), at least n / 32 and
     * at most n / 8. Why not n / 8 throughout: at n = 64K, k = 2048 that is 8,192 keys (r = 512)
     * for a quantile that 2,048 (r = 128) already gives to 9%; the sample is one CTA's latency
     * chain in front of every decode select. */
    int64_t m = n / 32;
    if (m < 32 * n / k) m = 32 * n / k;
    if (m > n / 8) m = n / 8;
    m &= ~(int64_t)7;
    if (m > SEL_SAMPLE_MAX) m = SEL_SAMPLE_MAX;
    if (m > bufcap) m = bufcap & ~(int64_t)7;
    int64_t nb = m / 8;
    if (nb < 2) return 0u;
    typedef typename ltk_dt<DT>::raw raw;
    const int VW = ltk_dt<DT>::VW, VR = 8 / VW; /* elements a 16-byte vector, vectors a run of 8 */
    const int64_t a0 = (int64_t)((16u - ((uintptr_t)row & 15u)) & 15u) / (int64_t)sizeof(raw);
    if (((uintptr_t)row & (sizeof(raw) - 1)) == 0 && n - a0 >= m) {
        /* runs of 8 starting on 16-byte boundaries, read as vectors: one load round trip for up
         * to LTK_SEL_U x LTK_SEL_NT vectors (16,384 f32 keys: one, against four scalar ones) */
        const int64_t step = (n - a0 - 8) / (nb - 1); /* >= 8 since n - a0 >= m: runs never overlap */
        const int64_t nv = m / VW;
        for (int64_t i0 = 0; i0 < nv; i0 += LTK_SEL_NT * LTK_SEL_U) {
            uint4 v[LTK_SEL_U];
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                const int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x, run = i / VR;
                v[u] = i < nv ? __ldcg((const uint4 *)(row + a0 + (run * step) / VW * VW) + i % VR) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                const int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
                if (i >= nv) continue;
                const uint32_t ws[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int j = 0; j < VW; j++)
                    buf[i * VW + j] = ltk_dt<DT>::key(VW == 4 ? ws[j] : (ws[j >> 1] >> ((j & 1) * 16)));
            }
        }
    } else {
        const int64_t step = (n - 8) / (nb - 1); /* >= 8 since n >= m: runs never overlap */
        for (int64_t i0 = 0; i0 < m; i0 += LTK_SEL_NT * LTK_SEL_U) {
            uint32_t v[LTK_SEL_U];
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
                v[u] = i < m ? (uint32_t)row[(i >> 3) * step + (i & 7)] : 0u;
            }
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
                if (i < m) buf[i] = ltk_dt<DT>::key(v[u]);
            }
        }
    }
    __syncthreads();
    /* r ~ 2k m / n puts about 2k entries at or above t (0.8 of the buffer where that is less: k =
     * 8192, whose 19.5K buffer would overflow at 3 sigma of a 2k target, r = 256). r also needs to
     * be large enough that the r-th sampled key is a stable quantile (relative spread ~ 1/sqrt(r):
     * at r = 64 a count below k is a 4-sigma event), but not so large that the expected count
     * r n / m overflows the buffer. */
    int64_t want = 2 * (int64_t)k;
    if (want > (int64_t)cap * 4 / 5) want = (int64_t)cap * 4 / 5;
    int64_t rr = (want * m + n - 1) / n;
    int64_t rv = (int64_t)cap * m / (2 * n);
    rv = rv < 16 ? 16 : (rv > 64 ? 64 : rv);
    if (rr < rv) rr = rv;
    if (rr > m) return 0u;
    uint32_t eq;
    const uint32_t t = sel_sample_quantile(buf, (uint32_t)m, (uint32_t)rr, sm, &eq);
    /* the class's lower 4-sigma bound (a sample count of eq has sd ~sqrt(eq)): a class predicted
     * at its buffer's size is then over it with near certainty */
    const float lo4 = (float)eq - 4.0f * sqrtf((float)eq);
    *cls = lo4 > 0.0f ? (int64_t)lo4 * n / m : 0;
    return t;
}

/* The class at t, as the sample predicts it (its lower 4-sigma bound), would overflow a chunk's
 * buffer: the chunk then goes straight to the tie scan (entries above t stored, ties counted)
 * instead of a first scan that aborts on the overflow and the rescan after it. Why: 64 x 1M
 * distinct16 took 1.52x and nonfinite 1.64x the normal rows' time, reading most chunks ~1.5 times
 * (bench/results/h200/select.jsonl at 85e32b1); with twice the buffer as the bar, their classes
 * (16K and 13K a chunk against 8K) still took the aborted scan. A wrong guess costs speed, never
 * exactness: both scans feed the same verify. */
static __device__ __forceinline__ bool sel_class_overflows(int64_t cls, int P, uint32_t cap) {
    return cls / P > (int64_t)cap;
}

template <int DT>
static __global__ void __launch_bounds__(LTK_SEL_NT) sel_sample_kernel(sel_params p) {
    ltk_pdl_wait();
    ltk_pdl_launch();
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint32_t *buf = (uint32_t *)(smraw + sizeof(ltk_sel_smem));
    int64_t r = blockIdx.x, s, n;
    sel_row_range(p, r, &s, &n);
    if (threadIdx.x == 0) { /* tickets and counters of the last-CTA pattern (stream-ordered before the scan) */
        p.row_cnt[r] = 0;
        p.row_done[r] = 0;
        p.row_ovf[r] = 0;
        p.row_eq[r] = 0;
        p.row_gt[r] = 0;
    }
    if (n <= p.k) return;
    int64_t cls;
    uint32_t t = sel_sample_threshold<DT>(sel_row_ptr<DT>(p, r, s), n, p.k, p.cap, buf, SEL_SAMPLE_MAX, sm, &cls);
    if (threadIdx.x == 0) {
        p.row_t[r] = t;
        if (sel_class_overflows(cls, p.P, p.cap)) p.row_ovf[r] = 4u; /* (after the zero above: same thread) */
    }
}

/* ---- scan --------------------------------------------------------------------------------- */
/* Entries [c0, c1) of a row (at most the buffer's capacity) as candidates, in order: f32 rows
 * aligned to 16 bytes by cp.async into the key buffer, made keys in place; others entry by entry. */
template <int DT>
static __device__ void sel_stage_chunk(const typename ltk_dt<DT>::raw *row, int64_t c0, int64_t c1, uint32_t *ckey,
                                       uint32_t *crel) {
    const int n = (int)(c1 - c0);
    const typename ltk_dt<DT>::raw *e0 = row + c0;
    if (sizeof(*e0) == 4 && (((uintptr_t)e0 | (uintptr_t)ckey) & 15u) == 0) {
        for (int i = threadIdx.x; i < n / 4; i += LTK_SEL_NT)
            ltk_cp_async16(ltk_smem_addr(ckey + 4 * i), e0 + 4 * i, true);
        ltk_cp_async_commit();
        for (int i = (n & ~3) + threadIdx.x; i < n; i += LTK_SEL_NT) ckey[i] = (uint32_t)e0[i];
        ltk_cp_async_wait<0>();
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) {
            ckey[i] = ltk_dt<DT>::key(ckey[i]);
            crel[i] = (uint32_t)(c0 + i);
        }
    } else {
        for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) {
            ckey[i] = ltk_dt<DT>::key(e0[i]);
            crel[i] = (uint32_t)(c0 + i);
        }
    }
}

/* This lane's first slot for its nmine passing entries of this warp step: a warp scan and one
 * shared atomic per warp. The slots run on past cap; the caller stores only below it. */
static __device__ __forceinline__ uint32_t sel_warp_base(uint32_t nmine, uint32_t *counter) {
    const int lane = threadIdx.x & 31;
    uint32_t x = nmine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(LTK_FULL, x, o);
        if (lane >= o) x += y;
    }
    uint32_t tot = __shfl_sync(LTK_FULL, x, 31), base = 0;
    if (lane == 31) base = atomicAdd(counter, tot);
    return __shfl_sync(LTK_FULL, base, 31) + x - nmine;
}

/* One entry per thread (head / tail of a chunk). */
static __device__ __forceinline__ void sel_append1(bool pass, uint32_t key, uint32_t rel, uint32_t *ckey,
                                                   uint32_t *crel, uint32_t cap, uint32_t *counter) {
    if (!__any_sync(LTK_FULL, pass)) return;
    uint32_t pos = sel_warp_base(pass ? 1u : 0u, counter);
    if (pass && pos < cap) {
        ckey[pos] = key;
        crel[pos] = rel;
    }
}

/* Scans [c0, c1) of a row (positions relative to the row start) and appends entries with key >= t
 * (TIES = 0), or with key > t while counting those equal to t in sm->eq (TIES = 1: the rescan of a
 * chunk that overflowed, with t > 0). sm->cnt counts every appended entry, also beyond cap; a warp
 * stops early once the buffer has overflowed. Why two modes: the tie test costs normal rows ~10%
 * in this loop (8192 x 1M on the H200: 13.1 ms against 11.9), and only a chunk whose ties
 * overflowed the buffer needs it. */
template <int DT, int TIES>
static __device__ void sel_scan(const typename ltk_dt<DT>::raw *row, int64_t c0, int64_t c1, uint32_t t,
                                uint32_t *ckey, uint32_t *crel, uint32_t cap, ltk_sel_smem *sm) {
    typedef typename ltk_dt<DT>::raw raw;
    const int VW = ltk_dt<DT>::VW, U = 4;
    const int64_t len = c1 - c0;
    if (len <= 0) return;
    const raw *e0 = row + c0;
    int64_t head = (int64_t)((16u - ((uintptr_t)e0 & 15u)) & 15u) / (int64_t)sizeof(raw);
    if (((uintptr_t)e0 & (sizeof(raw) - 1)) != 0) head = len; /* misaligned element pointer: scalar */
    if (head > len) head = len;
    /* stored: key >= t1; counted: key == t (TIES). No key is 0xffffffff (+inf is 0xff800000 as a
     * key, NaN is 0), so t + 1 does not wrap. */
    const uint32_t t1 = TIES ? t + 1u : t;
    uint32_t eq = 0;
    /* head, scalar */
    for (int64_t i0 = 0; i0 < head; i0 += LTK_SEL_NT) {
        int64_t i = i0 + threadIdx.x;
        uint32_t key = i < head ? ltk_dt<DT>::key(e0[i]) : 0u;
        if (TIES) eq += i < head && key == t;
        sel_append1(i < head && key >= t1, key, (uint32_t)(c0 + i), ckey, crel, cap, &sm->cnt);
    }
    const int64_t nv = (len - head) / VW;
    const uint4 *vp = (const uint4 *)(e0 + head);
    const int64_t step = (int64_t)LTK_SEL_NT * U;
    for (int64_t v0 = 0; v0 < nv; v0 += step) {
        uint32_t seen = 0;
        if ((threadIdx.x & 31) == 0) seen = *(volatile uint32_t *)&sm->cnt;
        if (__shfl_sync(LTK_FULL, seen, 0) > cap) break; /* warp-uniform: the buffer overflowed */
        uint4 w[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t vi = v0 + u * LTK_SEL_NT + threadIdx.x;
            if (vi < nv) w[u] = __ldcs(vp + vi);
            else w[u] = make_uint4(0u, 0u, 0u, 0u);
        }
        uint32_t pm = 0; /* bit u*VW + j: element j of vector u passes */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t vi = v0 + u * LTK_SEL_NT + threadIdx.x;
            bool ok = vi < nv;
            uint32_t ws[4] = {w[u].x, w[u].y, w[u].z, w[u].w};
#pragma unroll
            for (int j = 0; j < VW; j++) {
                uint32_t bits = VW == 4 ? ws[j] : (ws[j >> 1] >> ((j & 1) * 16));
                const uint32_t key = ltk_dt<DT>::key(bits);
                if (ok && key >= t1) pm |= 1u << (u * VW + j);
                if (TIES) eq += ok && key == t;
            }
        }
        if (__any_sync(LTK_FULL, pm != 0)) {
            /* Each passing element is stored from its register by an unrolled walk over the pass
             * mask. Compacting them first into an array indexed by a running count put that array in
             * local memory (ptxas -v: 640-byte stack frames in the f32 sel_fast_kernel; 48 this way). */
            uint32_t pos = sel_warp_base((uint32_t)__popc(pm), &sm->cnt);
#pragma unroll
            for (int u = 0; u < U; u++) {
                uint32_t ws[4] = {w[u].x, w[u].y, w[u].z, w[u].w};
                int64_t vi = v0 + u * LTK_SEL_NT + threadIdx.x;
#pragma unroll
                for (int j = 0; j < VW; j++)
                    if ((pm >> (u * VW + j)) & 1u) {
                        if (pos < cap) {
                            uint32_t bits = VW == 4 ? ws[j] : (ws[j >> 1] >> ((j & 1) * 16));
                            ckey[pos] = ltk_dt<DT>::key(bits);
                            crel[pos] = (uint32_t)(c0 + head + vi * VW + j);
                        }
                        pos++;
                    }
            }
        }
    }
    /* tail, scalar */
    for (int64_t i0 = head + nv * VW; i0 < len; i0 += LTK_SEL_NT) {
        int64_t i = i0 + threadIdx.x;
        uint32_t key = i < len ? ltk_dt<DT>::key(e0[i]) : 0u;
        if (TIES) eq += i < len && key == t;
        sel_append1(i < len && key >= t1, key, (uint32_t)(c0 + i), ckey, crel, cap, &sm->cnt);
    }
    if (TIES) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) eq += __shfl_xor_sync(LTK_FULL, eq, o);
        if ((threadIdx.x & 31) == 0 && eq) atomicAdd(&sm->eq, eq);
    }
}

/* The rescan of an overflowed chunk, out of line: its tie counting must not raise the register
 * pressure of the main scan, which every row runs. */
template <int DT>
static __device__ __noinline__ void sel_rescan_ties(const typename ltk_dt<DT>::raw *row, int64_t c0, int64_t c1,
                                                    uint32_t t, uint32_t *ckey, uint32_t *crel, uint32_t cap,
                                                    ltk_sel_smem *sm) {
    sel_scan<DT, 1>(row, c0, c1, t, ckey, crel, cap, sm);
}

/* The r lowest-index entries of row [0, n) whose key is t, as composites at dst[0..r): one ordered
 * pass in blocks of LTK_SEL_NT x 16 entries (thread i holds 16 consecutive ones, ranked by a block
 * scan) that stops at the first block holding the r-th. The caller knows the row has >= r of them. */
template <int DT>
static __device__ void sel_take_ties(const typename ltk_dt<DT>::raw *row, int64_t n, uint32_t t, uint32_t r,
                                     uint64_t *dst, ltk_sel_smem *sm) {
    typedef typename ltk_dt<DT>::raw raw;
    const int J = 16, VW = ltk_dt<DT>::VW; /* entries a 16-byte vector */
    const bool vec = ((uintptr_t)row & 15u) == 0;  /* (then every thread's 16 entries are aligned) */
    uint32_t found = 0; /* block-uniform */
    for (int64_t b = 0; b < n && found < r; b += (int64_t)LTK_SEL_NT * J) {
        const int64_t i0 = b + (int64_t)threadIdx.x * J;
        uint32_t m = 0;
        /* every load of the block in flight before the first compare: one memory round trip a
         * block, not one per unrolled group (a 5%-dense class at k = 2048 is five blocks) */
        if (vec && i0 + J <= n) {
            uint4 v[J / VW];
#pragma unroll
            for (int u = 0; u < J / VW; u++) v[u] = __ldcg((const uint4 *)(row + i0) + u);
#pragma unroll
            for (int u = 0; u < J / VW; u++) {
                const uint32_t ws[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int j = 0; j < VW; j++) {
                    const uint32_t bits = VW == 4 ? ws[j] : (ws[j >> 1] >> ((j & 1) * 16));
                    if (ltk_dt<DT>::key(bits) == t) m |= 1u << (u * VW + j);
                }
            }
        } else {
            raw v[J];
#pragma unroll
            for (int j = 0; j < J; j++) v[j] = i0 + j < n ? row[i0 + j] : raw();
#pragma unroll
            for (int j = 0; j < J; j++)
                if (i0 + j < n && ltk_dt<DT>::key(v[j]) == t) m |= 1u << j;
        }
        uint32_t total;
        uint32_t rank = found + ltk_block_scan((uint32_t)__popc(m), sm->warp, &total);
        for (; m && rank < r; m &= m - 1, rank++) dst[rank] = ltk_comp(t, (uint32_t)(i0 + __ffs(m) - 1));
        found += total;
    }
}

/* Exact dense path for one row: key passes over the row, ordered tie scan, gather. */
template <int DT>
static __device__ uint32_t sel_dense(const typename ltk_dt<DT>::raw *row, int64_t n, uint32_t k, uint64_t *dst,
                                     uint32_t dstcap, ltk_sel_smem *sm) {
    ltk_src_row<DT> src = {row, n};
    ltk_row_threshold<DT>(src, k, sm);
    return ltk_gather(src, sm->prefix, sm->mask, dst, dstcap, sm);
}

/* Sorts (unless unsorted) and writes k composites held in shared memory: by the bucket sort
 * (ltk_sort_bucket) when scratch holds them (the candidate buffer, free once they are gathered),
 * else, or on a crowded bucket, by the register network (E: ltk_sort_desc's elements a thread,
 * kp / LTK_SEL_NT, from the host). Why: the network took ~21 of the fast kernel's 53 us at
 * decode B = 64, 64K (ncu stall samples over its code); with the bucket sort and PDL, B = 256 at
 * 64K (one CTA a row, this path) went 0.649 -> 0.627 ms back to back (bench/results/h200/
 * decode.jsonl, the A/B lines). The all-shared network before the register one: 66 barrier
 * stages at k = 2048, half of that kernel (59.8 us sorted, 31.9 unsorted). */
template <int DT, int E>
static __device__ void sel_finish_smem(const sel_params &p, int64_t r, int64_t s, uint64_t *sb, uint32_t got,
                                       uint64_t *scratch, uint32_t scratch_cap, ltk_sel_smem *sm) {
    const typename ltk_dt<DT>::raw *row = sel_row_ptr<DT>(p, r, s);
    if (!(p.flags & LTK_FLAG_UNSORTED)) {
        __syncthreads();
        if (!(got <= scratch_cap && ltk_sort_bucket(sb, got, scratch, sm))) {
            for (int j = got + threadIdx.x; j < p.kp; j += LTK_SEL_NT) sb[j] = 0ull;
            __syncthreads();
            ltk_sort_desc<E>(sb, p.kp);
        }
    }
    sel_write<DT>(p, r, s, row, sb, got);
}

/* ---- fast tier ----------------------------------------------------------------------------- */
/* 2 CTAs an SM (64 registers). The 16-bit kernels spill a little under that cap; without it they
 * took 105 registers (1 CTA an SM) and ran no faster (bf16 64 x 1M: 0.170 ms either way). k > 4096
 * (SE = 16) holds one CTA an SM by its shared memory anyway, and its register sort needs the room. */
template <int DT, int SE> /* SE: the sort's elements a thread (sel_finish_smem) */
static __global__ void __launch_bounds__(LTK_SEL_NT, SE > 8 ? 1 : 2) sel_fast_kernel(sel_params p) {
    ltk_pdl_wait();
    ltk_pdl_launch();
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));   /* kp composites */
    uint32_t *ckey = (uint32_t *)(sb + p.kp + LTK_BUCKET_MAX), *crel = ckey + p.cap; /* cap candidates */
    const int64_t r = blockIdx.x;
    const int c = blockIdx.y, P = p.P;
    int64_t s, n;
    sel_row_range(p, r, &s, &n);
    const typename ltk_dt<DT>::raw *row = sel_row_ptr<DT>(p, r, s);
    if (n <= p.k) {
        if (c == 0) {
            sel_short_row<DT>(p, r, s, n, sb, p.kp, false);
            if (threadIdx.x == 0) {
                p.st_cand[r] = -1; /* short row */
                p.st_fb[r] = 0;
            }
        }
        return;
    }
    int64_t cls = 0;
    uint32_t t = P == 1 ? sel_sample_threshold<DT>(row, n, p.k, p.cap, ckey, 2 * (int64_t)p.cap, sm, &cls) : p.row_t[r];
    const bool big = t && (P == 1 ? sel_class_overflows(cls, 1, p.cap) : (__ldcg(&p.row_ovf[r]) & 4u) != 0);
    if (threadIdx.x == 0) sm->cnt = 0, sm->eq = 0;
    __syncthreads();
    int64_t L = ((n + P - 1) / P + 63) & ~(int64_t)63;
    int64_t c0 = (int64_t)c * L, c1 = c0 + L < n ? c0 + L : n;
    if (t == 0u && c1 - c0 <= (int64_t)p.cap) {
        /* every entry passes (the row fits the buffer): the chunk is copied, not appended. Why: the
         * appends (a shuffle scan and a shared atomic a warp step) took 12 us for 8K entries
         * (globaltimer stamps, decode B = 64 at 8K on the H200) */
        sel_stage_chunk<DT>(row, c0, c1, ckey, crel);
        if (threadIdx.x == 0) sm->cnt = (uint32_t)(c1 - c0);
    } else if (big) {
        sel_rescan_ties<DT>(row, c0, c1, t, ckey, crel, p.cap, sm);
    } else {
        sel_scan<DT, 0>(row, c0, c1, t, ckey, crel, p.cap, sm);
    }
    __syncthreads();
    /* This chunk: gt entries above t and eqc at t. When the buffer held every entry >= t they are
     * counted there (only when P > 1: one CTA a row reads neither, below, unless a rescan set inc);
     * when it overflowed and t > 0, the chunk is rescanned for the entries above t only, its ties
     * counted (a large tie class: flat rows, few values, a zero plateau), and the row is
     * "incomplete": some ties are not among its candidates. */
    uint32_t cnt = sm->cnt, gt, eqc;
    bool ovf = cnt > p.cap, inc = false;
    if (big) { /* the tie scan's counts, as after a rescan below */
        gt = cnt;
        eqc = sm->eq;
        inc = eqc > 0;
    } else if (!ovf && P == 1) {
        /* ties below need inc, which only a rescan sets; the fallback test needs gt + eqc, which
         * is cnt: the two counts are not needed */
        gt = cnt;
        eqc = 0;
    } else if (!ovf) {
        uint32_t g = 0, q = 0;
        for (uint32_t j = threadIdx.x; j < cnt; j += LTK_SEL_NT) g += ckey[j] > t, q += ckey[j] == t;
        uint32_t tot;
        (void)ltk_block_scan(g, sm->warp, &tot);
        gt = tot;
        (void)ltk_block_scan(q, sm->warp, &tot);
        eqc = tot;
    } else if (t) {
        __syncthreads();
        if (threadIdx.x == 0) sm->cnt = 0, sm->eq = 0;
        __syncthreads();
        sel_rescan_ties<DT>(row, c0, c1, t, ckey, crel, p.cap, sm);
        __syncthreads();
        cnt = gt = sm->cnt;
        eqc = sm->eq;
        ovf = cnt > p.cap;
        inc = eqc > 0;
    } else {
        gt = cnt, eqc = 0;
    }
    uint32_t have = ovf ? p.cap : cnt;
    __syncthreads();

    int64_t total = have, G = gt, E = eqc;
    bool use_glob = false;
    if (P > 1) {
        /* Publish this chunk's candidates; the last CTA of the row finishes it. */
        uint32_t *gk = p.gkey + (size_t)r * P * p.cap, *gr = p.grel + (size_t)r * P * p.cap;
        if (threadIdx.x == 0) {
            sm->digit = atomicAdd(&p.row_cnt[r], have);
            if (ovf || inc) atomicOr(&p.row_ovf[r], (ovf ? 1u : 0u) | (inc ? 2u : 0u));
            if (eqc) atomicAdd(&p.row_eq[r], eqc);
            atomicAdd(&p.row_gt[r], gt);
        }
        __syncthreads();
        uint32_t base = sm->digit;
        for (uint32_t j = threadIdx.x; j < have; j += LTK_SEL_NT) {
            gk[base + j] = ckey[j];
            gr[base + j] = crel[j];
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) sm->last = atomicAdd(&p.row_done[r], 1u) == (uint32_t)P - 1;
        __syncthreads();
        if (!sm->last) return;
        __threadfence();
        total = *(volatile uint32_t *)&p.row_cnt[r];
        const uint32_t fl = *(volatile uint32_t *)&p.row_ovf[r];
        ovf = (fl & 1u) != 0;
        inc = (fl & 2u) != 0;
        E = *(volatile uint32_t *)&p.row_eq[r];
        G = *(volatile uint32_t *)&p.row_gt[r];
        use_glob = true;
    }
    const uint32_t *gk = use_glob ? p.gkey + (size_t)r * P * p.cap : ckey;
    const uint32_t *gr = use_glob ? p.grel + (size_t)r * P * p.cap : crel;
    /* The k-th key is t and some ties are not among the candidates: the answer is every entry above
     * t and the lowest-index k - G ties, from the ordered pass (a dense tie class: found early). */
    const bool ties = !ovf && G < p.k && G + E >= p.k && inc;
    bool fallback = ovf || G + E < p.k;
    uint32_t got;
    if (ties) {
        if (threadIdx.x == 0) sm->kk = 0;
        __syncthreads();
        for (uint32_t j = threadIdx.x; j < (uint32_t)total; j += LTK_SEL_NT)
            if (gk[j] != t) sb[atomicAdd(&sm->kk, 1u)] = ltk_comp(gk[j], gr[j]); /* (candidates are >= t) */
        sel_take_ties<DT>(row, n, t, p.k - (uint32_t)G, sb + G, sm);
        __syncthreads();
        got = p.k;
    } else if (!fallback) {
        if (use_glob && total > p.k && total <= 2 * (int64_t)p.cap && (uint32_t)p.k <= p.cap) {
            /* the k best, sorted, from one histogram of the row's candidates (keys staged in the
             * CTA's candidate buffer, 2 cap keys, which then holds the k composites out: k <= cap,
             * not given where a small shared memory shrank cap); a crowded bucket leaves it to the
             * radix passes */
            ltk_src_cand_glob src = {gk, gr, total};
            const uint64_t *top = ltk_topk_bucket(src, (uint32_t)p.k, sm, sb, ckey);
            if (top) {
                if (threadIdx.x == 0) {
                    p.st_cand[r] = (int32_t)total;
                    p.st_fb[r] = 0;
                }
                sel_write<DT>(p, r, s, row, top, (uint32_t)p.k);
                return;
            }
        }
        if (!use_glob && total > p.k && (uint32_t)p.k <= p.cap) {
            /* one CTA a row: the same, its candidates (keys and rows, 2 cap words) in place */
            ltk_src_cand_smem src = {ckey, crel, (uint32_t)total};
            const uint64_t *top = ltk_topk_bucket(src, (uint32_t)p.k, sm, sb, ckey);
            if (top) {
                if (threadIdx.x == 0) {
                    p.st_cand[r] = (int32_t)total;
                    p.st_fb[r] = 0;
                }
                sel_write<DT>(p, r, s, row, top, (uint32_t)p.k);
                return;
            }
        }
        if (use_glob && total <= (int64_t)p.cap) {
            /* the row's candidates fit this CTA's buffer: the radix passes read shared memory, not
             * L2 (each pass otherwise waits an L2 latency a few times over) */
            for (uint32_t j = threadIdx.x; j < (uint32_t)total; j += LTK_SEL_NT) {
                ckey[j] = __ldcg(gk + j);
                crel[j] = __ldcg(gr + j);
            }
            __syncthreads();
            use_glob = false;
        }
        /* Fewer than k candidates above t (all of them are >= t): the k-th key is t, and the answer
         * is every entry above t and the k - G lowest positions among the ties. The passes then
         * start at the position bits: from the key bits they narrowed to t's digit three times
         * over a crowded class before reaching them (rows with few distinct values near the k-th:
         * shift4, 8192 x 1M, bench/results/h200/select.jsonl). */
        uint32_t kq = (uint32_t)p.k;
        uint64_t pf0 = 0, mk0 = 0;
        int hb = 32 + ltk_dt<DT>::KB;
        {
            uint32_t g = (uint32_t)G;
            if (!use_glob) {
                uint32_t c = 0, tot;
                for (uint32_t j = threadIdx.x; j < (uint32_t)total; j += LTK_SEL_NT) c += ckey[j] > t;
                (void)ltk_block_scan(c, sm->warp, &tot);
                g = tot;
            }
            if (g < (uint32_t)p.k) {
                /* positions are < n <= 2^31: the top 32 - hb bits of ~rel are ones */
                hb = 32 - __clz((uint32_t)(n - 1));
                const uint32_t ones = hb < 32 ? 0xffffffffu << hb : 0u;
                pf0 = ((uint64_t)t << 32) | ones;
                mk0 = 0xffffffff00000000ull | ones;
                kq = (uint32_t)p.k - g;
            }
        }
        if (use_glob) {
            ltk_src_cand_glob src = {gk, gr, total};
            ltk_radix_select<ltk_src_cand_glob, true>(src, kq, hb, 0, sm, pf0, mk0);
            got = ltk_gather(src, sm->prefix, sm->mask, sb, p.kp, sm);
        } else {
            ltk_src_cand_smem src = {ckey, crel, (uint32_t)total};
            ltk_radix_select<ltk_src_cand_smem, true>(src, kq, hb, 0, sm, pf0, mk0);
            got = ltk_gather(src, sm->prefix, sm->mask, sb, p.kp, sm);
        }
    } else {
        got = sel_dense<DT>(row, n, p.k, sb, p.kp, sm);
    }
    if (threadIdx.x == 0) {
        p.st_cand[r] = (int32_t)(total > INT32_MAX ? INT32_MAX : total);
        p.st_fb[r] = fallback ? 1 : 0;
    }
    sel_finish_smem<DT, SE>(p, r, s, sb, got, (uint64_t *)ckey, p.cap, sm);
}

/* ---- general tier (k > 8192) --------------------------------------------------------------- */
template <int DT>
static __global__ void __launch_bounds__(LTK_SEL_NT) sel_general_kernel(sel_params p, int smem_sort) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    const int64_t b = blockIdx.x, r = p.row0 + b;
    uint64_t *dst = smem_sort ? (uint64_t *)(smraw + sizeof(ltk_sel_smem)) : p.gsel + (size_t)b * p.kp;
    int64_t s, n;
    sel_row_range(p, r, &s, &n);
    const typename ltk_dt<DT>::raw *row = sel_row_ptr<DT>(p, r, s);
    if (threadIdx.x == 0) {
        p.st_cand[r] = 0;
        p.st_fb[r] = 0;
    }
    if (n <= p.k) {
        if (threadIdx.x == 0) p.st_cand[r] = -1;
        sel_short_row<DT>(p, r, s, n, dst, p.kp, !smem_sort);
        return;
    }
    uint32_t got = sel_dense<DT>(row, n, p.k, dst, p.kp, sm);
    if (smem_sort || (p.flags & LTK_FLAG_UNSORTED)) {
        sel_finish_smem<DT, 1>(p, r, s, dst, got, NULL, 0, sm); /* global dst with UNSORTED: written unsorted */
        return;
    }
    for (int j = got + threadIdx.x; j < p.kp; j += LTK_SEL_NT) dst[j] = 0ull;
}

/* After the CUB sort: writes rows [row0, row0+nb) from sorted composites. */
template <int DT>
static __global__ void __launch_bounds__(LTK_SEL_NT) sel_write_kernel(sel_params p, const uint64_t *sorted) {
    const int64_t b = blockIdx.x, r = p.row0 + b;
    int64_t s, n;
    sel_row_range(p, r, &s, &n);
    if (n <= p.k && (p.flags & LTK_FLAG_UNSORTED)) return; /* already written */
    sel_write<DT>(p, r, s, sel_row_ptr<DT>(p, r, s), sorted + (size_t)b * p.kp, (uint32_t)p.k);
}

static __global__ void sel_offsets_kernel(int *off, int nseg, int seg) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= nseg) off[i] = i * seg;
}

/* ---- host ---------------------------------------------------------------------------------- */
typedef struct sel_plan {
    int fast;
    int pdl; /* launches by ltk_launch_pdl (sm_90+) */
    int P;
    uint32_t cap;
    int32_t kp;
    size_t smem;          /* dynamic shared memory of the main kernel */
    size_t sample_smem;
    int64_t rb;           /* general tier: rows per launch */
    int smem_sort;
    size_t cub_bytes;
    /* workspace layout (byte offsets) */
    size_t o_rowt, o_cnt, o_done, o_ovf, o_eq, o_gt, o_stc, o_stf, o_gkey, o_grel, o_gsel, o_gsel2, o_off, o_cub, total;
} sel_plan;

template <int DT, int E>
static ltk_status sel_kernel_attrs(size_t fast_smem, size_t gen_smem, size_t sample_smem) {
    if (fast_smem) LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)sel_fast_kernel<DT, E>, fast_smem));
    if (gen_smem) LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)sel_general_kernel<DT>, gen_smem));
    if (sample_smem) LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)sel_sample_kernel<DT>, sample_smem));
    return LTK_OK;
}

static ltk_status sel_make_plan(const ltk_select_args *a, sel_plan *pl) {
    memset(pl, 0, sizeof *pl);
    ltk_cuda_dev dv;
    LTK_FORWARD_IF(ltk_cuda_device(&dv));
    const int sms = dv.nsm, smem_optin = dv.smem_optin;
    int32_t kp = 1;
    while (kp < a->k) kp <<= 1;
    pl->kp = kp;
    pl->pdl = dv.major >= 9;
    size_t base = sizeof(ltk_sel_smem);
    pl->fast = a->k <= SEL_FAST_KMAX;
    if (pl->fast) {
        pl->cap = (uint32_t)(4 * a->k > 8192 ? 4 * a->k : 8192);
        const size_t sbb = ((size_t)kp + LTK_BUCKET_MAX) * 8; /* (ltk_topk_bucket's room past kp) */
        pl->smem = base + sbb + (size_t)pl->cap * 8;
        if ((int)pl->smem > smem_optin) { /* small-smem GPUs: shrink the buffer (more fallbacks, still exact) */
            pl->cap = (uint32_t)(((size_t)smem_optin - base - sbb) / 8) & ~255u;
            pl->smem = base + sbb + (size_t)pl->cap * 8;
        }
        int per_sm = (int)(((size_t)smem_optin + 1024) / (pl->smem + 1024));
        if (per_sm < 1) per_sm = 1;
        if (per_sm > 2048 / LTK_SEL_NT) per_sm = 2048 / LTK_SEL_NT;
        int64_t slots = (int64_t)sms * per_sm;
        int64_t P = 1;
        if (a->rows > 0 && a->rows < slots) {
            P = slots / a->rows;
            int64_t pmax = (a->cols + SEL_MINCHUNK - 1) / SEL_MINCHUNK;
            if (P > pmax) P = pmax;
            if (P < 1) P = 1;
        }
        pl->P = (int)P;
        pl->sample_smem = P > 1 ? base + SEL_SAMPLE_MAX * 4 : 0;
    } else {
        pl->smem_sort = kp <= SEL_SMEM_SORT_MAX && base + (size_t)kp * 8 <= (size_t)smem_optin;
        pl->smem = base + (pl->smem_sort ? (size_t)kp * 8 : 0);
        int64_t rb = a->rows;
        if (!pl->smem_sort) {
            int64_t lim = (int64_t)(SEL_GEN_BUDGET / ((size_t)kp * 16));
            if (lim < 1) lim = 1;
            if (rb > lim) rb = lim;
        }
        pl->rb = rb;
        pl->P = 1;
    }
    int64_t R = a->rows;
    size_t o = 0;
    pl->o_rowt = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_cnt = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_done = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_ovf = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_eq = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_gt = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_stc = o; o = ltk_al256(o + (size_t)R * 4);
    pl->o_stf = o; o = ltk_al256(o + (size_t)R * 4);
    size_t gc = pl->fast && pl->P > 1 ? (size_t)R * pl->P * pl->cap * 4 : 0;
    pl->o_gkey = o; o = ltk_al256(o + gc);
    pl->o_grel = o; o = ltk_al256(o + gc);
    size_t gs = (!pl->fast && !pl->smem_sort) ? (size_t)pl->rb * kp * 8 : 0;
    pl->o_gsel = o; o = ltk_al256(o + gs);
    if (gs && !(a->flags & LTK_FLAG_UNSORTED)) {
        pl->o_gsel2 = o; o = ltk_al256(o + gs);
        pl->o_off = o; o = ltk_al256(o + (size_t)(pl->rb + 1) * 4);
        size_t cb = 0;
        LTK_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeysDescending(
            (void *)NULL, cb, (const uint64_t *)NULL, (uint64_t *)NULL, (int)(pl->rb * kp), (int)pl->rb,
            (const int *)NULL, (const int *)NULL + 1, 0, 64));
        pl->cub_bytes = cb;
        pl->o_cub = o; o = ltk_al256(o + cb);
    }
    pl->total = o;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_select_workspace(const ltk_select_args *a, const ltk_exec *e, size_t *bytes) {
    (void)e;
    sel_plan pl;
    LTK_FORWARD_IF(sel_make_plan(a, &pl));
    *bytes = pl.total;
    return LTK_OK;
}

/* The fast tier, its kernel built for E = kp / LTK_SEL_NT (kp <= SEL_FAST_KMAX: E <= 16). */
template <int DT, int E>
static ltk_status sel_launch_fast(const ltk_select_args *a, const sel_plan *pl, sel_params p, cudaStream_t st) {
    LTK_FORWARD_IF((sel_kernel_attrs<DT, E>(pl->smem, 0, pl->sample_smem)));
    if (pl->P > 1) {
        LTK_CUDA_TRY(ltk_launch_pdl(pl->pdl, sel_sample_kernel<DT>, dim3((unsigned)a->rows), dim3(LTK_SEL_NT),
                                    pl->sample_smem, st, p));
    }
    LTK_CUDA_TRY(ltk_launch_pdl(pl->pdl, sel_fast_kernel<DT, E>, dim3((unsigned)a->rows, (unsigned)pl->P),
                                dim3(LTK_SEL_NT), pl->smem, st, p));
    return LTK_OK;
}

template <int DT>
static ltk_status sel_launch(const ltk_select_args *a, const sel_plan *pl, sel_params p, cudaStream_t st,
                             unsigned char *ws) {
    if (pl->fast) {
        static_assert(SEL_FAST_KMAX <= 16 * LTK_SEL_NT, "the fast tier's sort is built for E <= 16");
        switch (ltk_sort_e_of(pl->kp)) {
        case 1: return sel_launch_fast<DT, 1>(a, pl, p, st);
        case 2: return sel_launch_fast<DT, 2>(a, pl, p, st);
        case 4: return sel_launch_fast<DT, 4>(a, pl, p, st);
        case 8: return sel_launch_fast<DT, 8>(a, pl, p, st);
        default: return sel_launch_fast<DT, 16>(a, pl, p, st);
        }
    }
    LTK_FORWARD_IF((sel_kernel_attrs<DT, 1>(0, pl->smem, 0)));
    for (int64_t r0 = 0; r0 < a->rows; r0 += pl->rb) {
        int64_t nb = a->rows - r0 < pl->rb ? a->rows - r0 : pl->rb;
        p.row0 = r0;
        sel_general_kernel<DT><<<(unsigned)nb, LTK_SEL_NT, pl->smem, st>>>(p, pl->smem_sort);
        LTK_CUDA_TRY(cudaGetLastError());
        if (!pl->smem_sort && !(a->flags & LTK_FLAG_UNSORTED)) {
            int *off = (int *)(ws + pl->o_off);
            uint64_t *out = (uint64_t *)(ws + pl->o_gsel2);
            sel_offsets_kernel<<<(unsigned)((nb + 256) / 256), 256, 0, st>>>(off, (int)nb, pl->kp);
            LTK_CUDA_TRY(cudaGetLastError());
            size_t cb = pl->cub_bytes;
            LTK_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeysDescending(
                (void *)(ws + pl->o_cub), cb, (const uint64_t *)p.gsel, out, (int)(nb * pl->kp), (int)nb,
                (const int *)off, (const int *)off + 1, 0, 64, st));
            sel_write_kernel<DT><<<(unsigned)nb, LTK_SEL_NT, 0, st>>>(p, out);
            LTK_CUDA_TRY(cudaGetLastError());
        }
    }
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t ws_bytes) {
    if (a->rows == 0) {
        if (e && e->stats) {
            memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        }
        return LTK_OK;
    }
    sel_plan pl;
    LTK_FORWARD_IF(sel_make_plan(a, &pl));
    LTK_RETURN_IF(ws_bytes < pl.total || (pl.total && !ws), LTK_EWORKSPACE,
                  "select workspace of %zu bytes is smaller than the %zu bytes required", ws_bytes, pl.total);
    cudaStream_t st = (cudaStream_t)(e ? e->stream : NULL);
    unsigned char *w = (unsigned char *)ws;
    sel_params p;
    memset(&p, 0, sizeof p);
    p.scores = a->scores;
    p.rows = a->rows;
    p.cols = a->cols;
    p.row_stride = a->row_stride;
    p.starts = a->starts;
    p.ends = a->ends;
    p.k = a->k;
    p.kp = pl.kp;
    p.out_idx = a->out_idx;
    p.out_scores = a->out_scores;
    p.out_stride = a->out_stride;
    p.flags = a->flags;
    p.P = pl.P;
    p.cap = pl.cap;
    p.row_t = (uint32_t *)(w + pl.o_rowt);
    p.row_cnt = (uint32_t *)(w + pl.o_cnt);
    p.row_done = (uint32_t *)(w + pl.o_done);
    p.row_ovf = (uint32_t *)(w + pl.o_ovf);
    p.row_eq = (uint32_t *)(w + pl.o_eq);
    p.row_gt = (uint32_t *)(w + pl.o_gt);
    p.st_cand = (int32_t *)(w + pl.o_stc);
    p.st_fb = (int32_t *)(w + pl.o_stf);
    p.gkey = (uint32_t *)(w + pl.o_gkey);
    p.grel = (uint32_t *)(w + pl.o_grel);
    p.gsel = (uint64_t *)(w + pl.o_gsel);
    switch (a->dtype) {
    case LTK_DTYPE_F32: LTK_FORWARD_IF(sel_launch<0>(a, &pl, p, st, w)); break;
    case LTK_DTYPE_F16: LTK_FORWARD_IF(sel_launch<1>(a, &pl, p, st, w)); break;
    case LTK_DTYPE_BF16: LTK_FORWARD_IF(sel_launch<2>(a, &pl, p, st, w)); break;
    default: return ltk_error(LTK_EUNSUPPORTED, "cuda select: dtype %d", (int)a->dtype);
    }
    if (e && e->stats) {
        ltk_stats *S = e->stats;
        int64_t R = a->rows;
        int32_t *hc = (int32_t *)malloc(sizeof(int32_t) * (size_t)R * 2);
        LTK_RETURN_IF(!hc, LTK_ENOMEM, "stats buffer");
        cudaError_t ce = cudaMemcpyAsync(hc, p.st_cand, sizeof(int32_t) * (size_t)R, cudaMemcpyDeviceToHost, st);
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync(hc + R, p.st_fb, sizeof(int32_t) * (size_t)R, cudaMemcpyDeviceToHost, st);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(st);
        if (ce != cudaSuccess) {
            free(hc);
            return ltk_cuda_error(ce, "cuda select stats", __FILE__, __LINE__);
        }
        memset(S, 0, offsetof(ltk_stats, row_candidates));
        S->rows = R;
        for (int64_t r = 0; r < R; r++) {
            int32_t c = hc[r] < 0 ? 0 : hc[r];
            S->short_rows += hc[r] < 0;
            S->candidates += c;
            if (c > S->candidates_max) S->candidates_max = c;
            S->fallback_rows += hc[R + r];
            if (S->row_candidates) S->row_candidates[r] = c;
            if (S->row_bin_entries) S->row_bin_entries[r] = 0;
        }
        free(hc);
    }
    return LTK_OK;
}
