/* Device building blocks of the exact GPU select (select.cu) and of the kNN's final select (knn-select.cu).
 *
 * Everything ranks by one 64-bit "composite": (rank key << 32) | ~rel, where the rank key is
 * ltk_rank_key() of the score (larger = better, NaN = 0, -0 == +0) and rel the entry's position in
 * its row (or in a candidate list whose order agrees with the index order among equal keys). ~rel
 * makes the lower index the larger composite, so the composite is unique per entry and the top-k
 * of a row is exactly the k largest composites: ties are settled inside the radix select, no
 * separate tie pass over unordered data is needed. 16-bit dtypes use a 16-bit rank key built from
 * their own bits (f16 -> f32 -> top 16 bits would merge distinct f16 values).
 *
 * All block-level routines assume blockDim.x == LTK_SEL_NT and are called by every thread. */
#ifndef LTK_CUDA_SELECT_CUH
#define LTK_CUDA_SELECT_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "../ltk-order.h"

#define LTK_SEL_NT 512      /* threads per select CTA */
#define LTK_SEL_BINS 2048   /* 11-bit digits */
#define LTK_FULL 0xffffffffu

/* ---- rank keys ------------------------------------------------------------------------------ */
static __device__ __forceinline__ uint32_t ltk_key32(uint32_t u) {
    uint32_t a = u & 0x7fffffffu;
    uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    k = (a == 0u) ? 0x80000000u : k;
    return (a > 0x7f800000u) ? 0u : k;
}
/* 16-bit IEEE-like formats; nan_above = 0x7c00 (f16) or 0x7f80 (bf16). */
static __device__ __forceinline__ uint32_t ltk_key16(uint32_t u, uint32_t nan_above) {
    u &= 0xffffu;
    uint32_t a = u & 0x7fffu;
    uint32_t k = (u & 0x8000u) ? (~u & 0xffffu) : (u | 0x8000u);
    k = (a == 0u) ? 0x8000u : k;
    return (a > nan_above) ? 0u : k;
}

/* Same conversion as the host's ltk_f16_to_f32 (payload bits kept), so reported scores match. */
static __device__ __forceinline__ float ltk_h2f(uint32_t h) {
    uint32_t sign = (h >> 15) << 31, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (ex == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    if (ex == 0u) {
        float mag = (float)man * 5.9604644775390625e-8f; /* 2^-24, exact */
        return sign ? -mag : mag;
    }
    return __uint_as_float(sign | ((ex + 112u) << 23) | (man << 13));
}

/* dtype traits: DT 0 = f32, 1 = f16, 2 = bf16 (ltk_dtype values). */
template <int DT> struct ltk_dt;
template <> struct ltk_dt<0> {
    typedef uint32_t raw;
    enum { KB = 32, VW = 4 };
    static __device__ __forceinline__ uint32_t key(uint32_t u) { return ltk_key32(u); }
    static __device__ __forceinline__ float val(uint32_t u) { return __uint_as_float(u); }
};
template <> struct ltk_dt<1> {
    typedef uint16_t raw;
    enum { KB = 16, VW = 8 };
    static __device__ __forceinline__ uint32_t key(uint32_t u) { return ltk_key16(u, 0x7c00u); }
    static __device__ __forceinline__ float val(uint32_t u) { return ltk_h2f(u & 0xffffu); }
};
template <> struct ltk_dt<2> {
    typedef uint16_t raw;
    enum { KB = 16, VW = 8 };
    static __device__ __forceinline__ uint32_t key(uint32_t u) { return ltk_key16(u, 0x7f80u); }
    static __device__ __forceinline__ float val(uint32_t u) { return __uint_as_float((u & 0xffffu) << 16); }
};

static __device__ __forceinline__ uint64_t ltk_comp(uint32_t key, uint32_t rel) {
    return ((uint64_t)key << 32) | (uint32_t)~rel;
}
static __device__ __forceinline__ uint32_t ltk_comp_rel(uint64_t c) { return ~(uint32_t)c; }
static __device__ __forceinline__ uint32_t ltk_comp_key(uint64_t c) { return (uint32_t)(c >> 32); }

/* ---- shared scratch of every select CTA ------------------------------------------------------- */
struct ltk_sel_smem {
    uint32_t hist[LTK_SEL_BINS];
    uint32_t warp[LTK_SEL_NT / 32];
    uint32_t cnt;       /* candidate / gather counter */
    uint32_t eq;        /* select.cu's scan: entries whose key is the threshold's (not stored) */
    uint32_t ovf;       /* overflow flag */
    uint32_t digit, above, bucket; /* result of the last bucket search */
    uint32_t found_rel, last;
    uint32_t kmin, kmax, bmax; /* ltk_sort_bucket: key range, largest bucket */
    uint64_t prefix, mask;
    uint32_t kk;
};

/* Exclusive block scan of one value per thread; returns the prefix, *total the block sum. */
static __device__ __forceinline__ uint32_t ltk_block_scan(uint32_t v, uint32_t *warp_sums, uint32_t *total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    uint32_t x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(LTK_FULL, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[w] = x;
    __syncthreads();
    if (w == 0) {
        uint32_t s = lane < LTK_SEL_NT / 32 ? warp_sums[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(LTK_FULL, s, o);
            if (lane >= o) s += y;
        }
        if (lane < LTK_SEL_NT / 32) warp_sums[lane] = s; /* inclusive */
    }
    __syncthreads();
    uint32_t before = w ? warp_sums[w - 1] : 0u;
    *total = warp_sums[LTK_SEL_NT / 32 - 1];
    uint32_t r = before + x - v;
    __syncthreads(); /* warp_sums reusable on return */
    return r;
}

/* Finds the digit d of hist[0..nbins) with sum_{j>d} < kk <= sum_{j>=d}; writes digit, above
 * (= sum_{j>d}) and bucket (= hist[d]) to sm. nbins <= LTK_SEL_BINS, a power of two. */
static __device__ void ltk_find_bucket(ltk_sel_smem *sm, int nbins, uint32_t kk) {
    const int per = LTK_SEL_BINS / LTK_SEL_NT; /* 4 bins per thread, highest digits first */
    int hi = nbins - per * (int)threadIdx.x;  /* this thread owns bins [hi-per, hi) */
    uint32_t s = 0;
#pragma unroll
    for (int j = 1; j <= per; j++)
        if (hi - j >= 0) s += sm->hist[hi - j];
    uint32_t tot;
    uint32_t e = ltk_block_scan(s, sm->warp, &tot);
    if (e < kk && kk <= e + s) {
        uint32_t acc = e;
        for (int j = 1; j <= per; j++) {
            uint32_t h = sm->hist[hi - j];
            if (acc + h >= kk) {
                sm->digit = (uint32_t)(hi - j);
                sm->above = acc;
                sm->bucket = h;
                break;
            }
            acc += h;
        }
    }
    __syncthreads();
}

/* Histogram add. Flat rows put every entry of a warp in one bin, and unaggregated shared atomics
 * on one address serialise: when the whole warp agrees, its leader adds 32 at once. */
static __device__ __forceinline__ void ltk_hist_add_agg(uint32_t *hist, bool act, uint32_t d) {
    uint32_t d0 = __shfl_sync(LTK_FULL, d, 0);
    if (__all_sync(LTK_FULL, act && d == d0)) {
        if ((threadIdx.x & 31) == 0) atomicAdd(&hist[d0], 32u);
    } else if (act) {
        atomicAdd(&hist[d], 1u);
    }
}

/* Histogram add aggregated over any lanes of the warp that share a digit: one atomic per distinct
 * digit (the indexer's candidate select; in the kNN's selects it measured slower). For
 * candidate lists, whose keys sit just above a threshold and share their top bits, the warp holds
 * a few distinct digits but rarely one, and the per-lane atomics of ltk_hist_add_agg then
 * serialise on those few addresses. */
static __device__ __forceinline__ void ltk_hist_add_match(uint32_t *hist, bool act, uint32_t d) {
    const uint32_t peers = __match_any_sync(LTK_FULL, act ? d : 0xffffffffu); /* digits are < 2^11 */
    if (act && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[d], (uint32_t)__popc(peers));
}

#define LTK_SEL_U 8 /* entries per thread per step: independent loads in flight */

/* Radix select on composites. `Src` provides: int64_t n() const; uint64_t comp(int64_t i) const.
 * Passes over the composite bits from `hi_bit` down to `lo_bit` (11-bit digits, the last one
 * narrower), stopping early once the threshold bucket holds exactly the entries still needed.
 * On return sm->prefix / sm->mask: entry i is in the top-k iff (comp(i) & mask) >= prefix, and
 * sm->kk entries of the final bucket (comp & mask) == prefix are still to be taken (all of it
 * when it stopped early or the mask is complete; otherwise a tie to settle by the caller).
 * prefix0 / mask0: bits already known (the passes then count only entries that match them, k
 * of those still to take, and hi_bit starts below them). Requires k <= n. AGG: 0 a shared atomic per entry, 1 one per warp when the whole warp shares a
 * digit (raw rows: flat ones). */
template <class Src, int AGG>
static __device__ void ltk_radix_select(const Src &src, uint32_t k, int hi_bit, int lo_bit, ltk_sel_smem *sm,
                                        uint64_t prefix0 = 0, uint64_t mask0 = 0) {
    uint64_t prefix = prefix0, mask = mask0;
    uint32_t kk = k;
    const int64_t n = src.n();
    for (int top = hi_bit; top > lo_bit;) {
        int w = top - lo_bit < 11 ? top - lo_bit : 11;
        int sh = top - w;
        for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
        __syncthreads();
        const uint64_t dm = ((1ull << w) - 1);
        for (int64_t i0 = 0; i0 < n; i0 += (int64_t)LTK_SEL_NT * LTK_SEL_U) {
            uint64_t c[LTK_SEL_U];
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
                c[u] = i < n ? src.comp(i) : 0ull;
            }
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
                bool act = i < n && (c[u] & mask) == prefix;
                uint32_t d = (uint32_t)((c[u] >> sh) & dm);
                if (AGG) ltk_hist_add_agg(sm->hist, act, d);
                else if (act) atomicAdd(&sm->hist[d], 1u);
            }
        }
        __syncthreads();
        ltk_find_bucket(sm, 1 << w, kk);
        uint32_t d = sm->digit;
        kk -= sm->above;
        prefix |= (uint64_t)d << sh;
        mask |= dm << sh;
        top = sh;
        bool done = sm->bucket == kk;
        __syncthreads();
        if (done) break;
    }
    if (threadIdx.x == 0) {
        sm->prefix = prefix;
        sm->mask = mask;
        sm->kk = kk;
    }
    __syncthreads();
}

/* Slot of this lane's entry in a list that the warp appends to (counter: shared or global),
 * taking slots only for the lanes with take; one atomic a warp. Every lane of the warp calls it;
 * the result is meaningful where take. */
static __device__ __forceinline__ uint32_t ltk_warp_append(bool take, uint32_t *counter) {
    const uint32_t b = __ballot_sync(LTK_FULL, take);
    if (!b) return 0u;
    const int lane = threadIdx.x & 31, lead = __ffs(b) - 1;
    uint32_t base = 0;
    if (lane == lead) base = atomicAdd(counter, (uint32_t)__popc(b));
    return __shfl_sync(LTK_FULL, base, lead) + __popc(b & ((1u << lane) - 1u));
}

/* Appends every entry with (comp & mask) >= prefix to dst (capacity cap) at arbitrary positions;
 * returns the count taken (block-uniform). */
template <class Src>
static __device__ uint32_t ltk_gather(const Src &src, uint64_t prefix, uint64_t mask, uint64_t *dst, uint32_t cap,
                                      ltk_sel_smem *sm) {
    if (threadIdx.x == 0) sm->cnt = 0;
    __syncthreads();
    const int64_t n = src.n();
    for (int64_t i0 = 0; i0 < n; i0 += (int64_t)LTK_SEL_NT * LTK_SEL_U) {
        uint64_t cu[LTK_SEL_U];
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
            cu[u] = i < n ? src.comp(i) : 0ull;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            int64_t i = i0 + u * LTK_SEL_NT + threadIdx.x;
            uint64_t c = cu[u];
            bool take = i < n && (c & mask) >= prefix;
            uint32_t pos = ltk_warp_append(take, &sm->cnt);
            if (take && pos < cap) dst[pos] = c;
        }
    }
    __syncthreads();
    uint32_t r = sm->cnt;
    __syncthreads();
    return r;
}

/* Bitonic sort of s[0..np) descending, np a power of two (pad with 0: below every real composite).
 * Pair i (= tid + j * NT) touches only the 64-element block i / 32 while the stride is <= 32, and
 * that block always belongs to the same warp: consecutive such stages need only __syncwarp. */
static __device__ void ltk_bitonic_desc(uint64_t *s, int np) {
    for (int size = 2; size <= np; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < (np >> 1); i += LTK_SEL_NT) {
                int lo = 2 * i - (i & (stride - 1));
                int hi = lo + stride;
                bool desc = (lo & size) == 0;
                uint64_t a = s[lo], b = s[hi];
                if ((a < b) == desc) {
                    s[lo] = b;
                    s[hi] = a;
                }
            }
            int next = stride > 1 ? stride >> 1 : size; /* first stride of the next size is size */
            if (stride <= 32 && next <= 32 && !(stride == 1 && size == np)) __syncwarp();
            else __syncthreads();
        }
    }
}

/* Slot of logical position e while ltk_sort_regs round-trips through shared memory: the low 4
 * bits XOR bits 4..7. Why: thread t holds positions t E .. t E + E - 1, so for a fixed j the 32
 * lanes of a warp touched 8-byte words E apart, the same bank for E = 16: 16- to 32-way conflicts
 * on every register/shared-memory round trip (ncu: 40% excess wavefronts in the kNN's
 * k = 8,192 final select). Swizzled, each half-warp hits 16 distinct words for E <= 16, and the
 * wide stages (32 consecutive positions a warp) stay conflict-free: the XOR permutes inside
 * aligned blocks of 16. */
static __device__ __forceinline__ int ltk_sort_swz(int e) { return e ^ ((e >> 4) & 15); }

/* The same network for composites that carry a 32-bit payload (raw, when RAW), shared by the
 * indexer's select and the kNN's: one stage in shared memory (every thread, then a barrier);
 * SWZ: the slots of ltk_sort_regs' round trips. */
template <bool RAW, bool SWZ = false>
static __device__ __forceinline__ void ltk_sort_stage_smem(uint64_t *comp, uint32_t *raw, int np, int size,
                                                           int stride) {
    for (int i = threadIdx.x; i < np / 2; i += LTK_SEL_NT) {
        int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        bool desc = (lo & size) == 0;
        if (SWZ) { /* (desc is of the logical position; the slots are swizzled) */
            lo = ltk_sort_swz(lo);
            hi = ltk_sort_swz(hi);
        }
        uint64_t a = comp[lo], b = comp[hi];
        if ((a < b) == desc) {
            comp[lo] = b;
            comp[hi] = a;
            if (RAW) {
                uint32_t t = raw[lo];
                raw[lo] = raw[hi];
                raw[hi] = t;
            }
        }
    }
    __syncthreads();
}

/* The same network with E = np / LTK_SEL_NT elements a thread in registers (thread t holds
 * elements t E .. t E + E - 1): strides below E swap registers, strides below 32 E exchange with
 * a lane of the same warp by shuffles, and only the wider ones go through shared memory. Why: the
 * all-shared-memory network (66 stages at k = 2048) made the candidate select shared-memory bound
 * (87% L1 throughput, 0.85 ms per 4,096 rows, ncu). */
template <int E, bool RAW> static __device__ void ltk_sort_regs(uint64_t *comp, uint32_t *raw, int np) {
    const int t = threadIdx.x, lane = t & 31;
    const int nt = np / E;
    uint64_t c[E];
    uint32_t r[E];
    /* the input's order does not matter to a sort: read it coalesced (position j nt + t) */
#pragma unroll
    for (int j = 0; j < E; j++) {
        c[j] = comp[j * nt + t];
        r[j] = RAW ? raw[j * nt + t] : 0u;
    }
    /* every thread's input read before the first round trip writes others' slots (racecheck: E = 16,
     * k = 5000, the register stages up to size 32 E having no barrier of their own) */
    __syncthreads();
    for (int size = 2; size <= np; size <<= 1) {
        int stride = size >> 1;
        if (stride >= 32 * E) {
#pragma unroll
            for (int j = 0; j < E; j++) {
                comp[ltk_sort_swz(t * E + j)] = c[j];
                if (RAW) raw[ltk_sort_swz(t * E + j)] = r[j];
            }
            __syncthreads();
            for (; stride >= 32 * E; stride >>= 1) ltk_sort_stage_smem<RAW, true>(comp, raw, np, size, stride);
#pragma unroll
            for (int j = 0; j < E; j++) {
                c[j] = comp[ltk_sort_swz(t * E + j)];
                if (RAW) r[j] = raw[ltk_sort_swz(t * E + j)];
            }
        }
        for (; stride >= E; stride >>= 1) {
            const int lm = stride / E;             /* partner lane: lane ^ lm, same j */
            const bool lower = (lane & lm) == 0;   /* my elements precede the partner's */
#pragma unroll
            for (int j = 0; j < E; j++) {
                const uint64_t pc = __shfl_xor_sync(0xffffffffu, c[j], lm);
                const uint32_t pr = RAW ? __shfl_xor_sync(0xffffffffu, r[j], lm) : 0u;
                const bool desc = ((t * E + j) & size) == 0;
                /* the pair's first element keeps the larger key when descending */
                if (lower == desc ? pc > c[j] : pc < c[j]) {
                    c[j] = pc;
                    r[j] = pr;
                }
            }
        }
#pragma unroll
        for (int s = E / 2; s >= 1; s >>= 1) {
            if (s > stride) continue; /* (stride is now min(size / 2, E / 2)) */
#pragma unroll
            for (int j = 0; j < E; j++) {
                if (j & s) continue;
                const int jj = j | s;
                const bool desc = ((t * E + j) & size) == 0;
                if ((c[j] < c[jj]) == desc) {
                    const uint64_t x = c[j];
                    c[j] = c[jj];
                    c[jj] = x;
                    const uint32_t y = r[j];
                    r[j] = r[jj];
                    r[jj] = y;
                }
            }
        }
    }
    /* out in natural order: through the swizzled slots, then transposed (two conflict-free
     * passes instead of one with E-way conflicts) */
#pragma unroll
    for (int j = 0; j < E; j++) {
        comp[ltk_sort_swz(t * E + j)] = c[j];
        if (RAW) raw[ltk_sort_swz(t * E + j)] = r[j];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < E; j++) {
        c[j] = comp[ltk_sort_swz(j * nt + t)];
        if (RAW) r[j] = raw[ltk_sort_swz(j * nt + t)];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < E; j++) {
        comp[j * nt + t] = c[j];
        if (RAW) raw[j * nt + t] = r[j];
    }
    __syncthreads();
}

/* Sorts s[0..np) descending (np a power of two, padded with 0), called by every thread of an
 * LTK_SEL_NT block after a barrier: in registers (ltk_sort_regs) when np = E * LTK_SEL_NT, else the
 * all-shared-memory network. E is a template parameter of the calling kernel (ltk_sort_e_of picks
 * it for k on the host) so that a small k does not pay the registers of a large one. Why: at
 * k = 8,192 the kNN's final select (117 us a call) was shared-memory bound, 72% L1 throughput with
 * 40% excess wavefronts (ncu), its 91-stage network the main user; the register
 * network keeps 10 of those stages there. */
template <int E> static __device__ void ltk_sort_desc(uint64_t *s, int np) {
    if constexpr (E >= 2) {
        if (np == E * LTK_SEL_NT) {
            ltk_sort_regs<E, false>(s, NULL, np);
            return;
        }
    }
    ltk_bitonic_desc(s, np);
}
/* Sorts the n real composites of s[0..n) descending by a bucket sort (the rest of s stays 0), with
 * scratch for n composites; false, with s untouched, when a bucket would exceed LTK_BUCKET_MAX
 * entries (the caller then uses ltk_sort_desc). Buckets: 2048 equal ranges of the key between the
 * smallest and the largest key of the entries, highest first; inside a bucket each entry's place
 * is its count of larger composites there (composites are distinct, so the order is the sort's).
 * Why: the bitonic network of 8192 entries takes 91 compare-exchange stages over 16 entries a
 * thread, ~60 of the kNN final select's 83 us at k = 8192; this is a few passes over
 * shared memory. Called by every thread after a barrier. The kNN final select's default for
 * k > 2048 (H200: 83 -> 50 us at k = 8192). */
#define LTK_BUCKET_MAX 128
static __device__ bool ltk_sort_bucket(uint64_t *s, uint32_t n, uint64_t *scratch, ltk_sel_smem *sm) {
    const int lane = threadIdx.x & 31;
    if (n == 0) return true; /* (block-uniform; and the key range below would be empty) */
    if (threadIdx.x == 0) {
        sm->kmin = 0xffffffffu;
        sm->kmax = 0u;
        sm->bmax = 0u;
    }
    for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
    __syncthreads();
    for (uint32_t i0 = 0; i0 < n; i0 += LTK_SEL_NT) { /* key range (one atomic a warp) */
        const uint32_t i = i0 + threadIdx.x;
        const uint32_t key = i < n ? (uint32_t)(s[i] >> 32) : 0u;
        const uint32_t mn = __reduce_min_sync(LTK_FULL, i < n ? key : 0xffffffffu);
        const uint32_t mx = __reduce_max_sync(LTK_FULL, key);
        if (lane == 0) {
            atomicMin(&sm->kmin, mn);
            atomicMax(&sm->kmax, mx);
        }
    }
    __syncthreads();
    const uint32_t kmin = sm->kmin;
    int sh = 0;
    while (sh < 32 && ((sm->kmax - kmin) >> sh) >= (uint32_t)LTK_SEL_BINS) sh++;
    /* bucket b = 2047 - ((key - kmin) >> sh): ascending b is descending key */
    for (uint32_t i = threadIdx.x; i < n; i += LTK_SEL_NT)
        atomicAdd(&sm->hist[LTK_SEL_BINS - 1 - (((uint32_t)(s[i] >> 32) - kmin) >> sh)], 1u);
    __syncthreads();
    /* starts of the buckets (exclusive scan, 4 bins a thread) and the largest bucket */
    const int per = LTK_SEL_BINS / LTK_SEL_NT, b0 = per * threadIdx.x;
    uint32_t cnt[LTK_SEL_BINS / LTK_SEL_NT], loc = 0, big = 0;
#pragma unroll
    for (int j = 0; j < per; j++) {
        cnt[j] = sm->hist[b0 + j];
        loc += cnt[j];
        big = cnt[j] > big ? cnt[j] : big;
    }
    uint32_t tot;
    uint32_t st = ltk_block_scan(loc, sm->warp, &tot);
    big = __reduce_max_sync(LTK_FULL, big);
    if (lane == 0) atomicMax(&sm->bmax, big);
#pragma unroll
    for (int j = 0; j < per; j++) {
        sm->hist[b0 + j] = st; /* start; the scatter below turns it into the bucket's end */
        st += cnt[j];
    }
    __syncthreads();
    if (sm->bmax > LTK_BUCKET_MAX) return false; /* (block-uniform) */
    for (uint32_t i = threadIdx.x; i < n; i += LTK_SEL_NT) {
        const uint64_t c = s[i];
        const uint32_t b = LTK_SEL_BINS - 1 - (((uint32_t)(c >> 32) - kmin) >> sh);
        scratch[atomicAdd(&sm->hist[b], 1u)] = c;
    }
    __syncthreads();
    for (uint32_t p = threadIdx.x; p < n; p += LTK_SEL_NT) {
        const uint64_t c = scratch[p];
        const uint32_t b = LTK_SEL_BINS - 1 - (((uint32_t)(c >> 32) - kmin) >> sh);
        const uint32_t lo = b ? sm->hist[b - 1] : 0u, hi = sm->hist[b];
        uint32_t rank = 0;
        for (uint32_t j = lo; j < hi; j++) rank += scratch[j] > c;
        s[lo + rank] = c;
    }
    __syncthreads();
    return true;
}

/* E for a sort of n entries (padded to np, the next power of two): np / LTK_SEL_NT, at least 1
 * (host side). */
static inline int ltk_sort_e_of(int64_t n) {
    int64_t np = 1;
    while (np < n) np <<= 1;
    return np / LTK_SEL_NT > 1 ? (int)(np / LTK_SEL_NT) : 1;
}
/* LAUNCH(E) with the kernel built for E (from ltk_sort_e_of) in {1, 2, 4, 8, 16}; larger E gets 16:
 * callers that sort more than 8,192 entries dispatch E = 32 themselves (the kNN). */
#define LTK_BY_E(e, LAUNCH)     \
    switch (e) {                \
    case 1: LAUNCH(1); break;   \
    case 2: LAUNCH(2); break;   \
    case 4: LAUNCH(4); break;   \
    case 8: LAUNCH(8); break;   \
    default: LAUNCH(16); break; \
    }

/* Sources of composites ------------------------------------------------------------------------ */
struct ltk_src_cand_smem { /* candidates held in shared memory */
    const uint32_t *key, *rel;
    uint32_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return ltk_comp(key[i], rel[i]); }
};
struct ltk_src_cand_glob { /* candidates in global memory (L2-resident) */
    const uint32_t *key, *rel;
    int64_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return ltk_comp(__ldcg(key + i), __ldcg(rel + i)); }
};
template <int DT> struct ltk_src_row { /* a raw row: composite from the value and its position */
    const typename ltk_dt<DT>::raw *p; /* first valid element */
    int64_t len;
    __device__ int64_t n() const { return len; }
    __device__ uint64_t comp(int64_t i) const { return ltk_comp(ltk_dt<DT>::key(p[i]), (uint32_t)i); }
};

/* Over a raw row the index digits need not be radix-selected: after the key passes, the kk tied
 * entries to take are the FIRST kk of the threshold key in index order, found by one ordered
 * prefix count that stops as soon as it has them (a flat row reads only ~kk entries).
 * Returns the rel of the kk-th tied entry. */
template <int DT>
static __device__ uint32_t ltk_tie_scan(const ltk_src_row<DT> &src, uint32_t tkey, uint32_t kk, ltk_sel_smem *sm) {
    const int V = 8; /* consecutive entries per thread per tile */
    uint32_t need = kk;
    for (int64_t t0 = 0; t0 < src.len; t0 += (int64_t)LTK_SEL_NT * V) {
        int64_t b = t0 + (int64_t)threadIdx.x * V;
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < V; j++)
            if (b + j < src.len && ltk_dt<DT>::key(src.p[b + j]) == tkey) m |= 1u << j;
        uint32_t c = __popc(m), tot;
        uint32_t e = ltk_block_scan(c, sm->warp, &tot);
        if (e < need && need <= e + c) {
            uint32_t r = need - e; /* r-th set bit of m */
            for (int j = 0; j < V; j++)
                if ((m >> j) & 1u)
                    if (--r == 0) {
                        sm->found_rel = (uint32_t)(b + j);
                        break;
                    }
        }
        if (tot >= need) break;
        need -= tot;
    }
    __syncthreads();
    uint32_t r = sm->found_rel;
    __syncthreads();
    return r;
}

/* Exact top-k threshold of a raw row [p, p+len) (len >= k): key passes, then the ordered tie
 * scan. Leaves prefix/mask in sm such that the take rule is (comp & mask) >= prefix. */
template <int DT>
static __device__ void ltk_row_threshold(const ltk_src_row<DT> &src, uint32_t k, ltk_sel_smem *sm) {
    ltk_radix_select<ltk_src_row<DT>, true>(src, k, 32 + ltk_dt<DT>::KB, 32, sm);
    uint32_t kk = sm->kk;
    uint64_t prefix = sm->prefix;
    bool tie = sm->bucket != kk; /* bucket larger than what is needed: settle by index */
    __syncthreads();
    if (tie) {
        uint32_t rel = ltk_tie_scan<DT>(src, (uint32_t)(prefix >> 32), kk, sm);
        if (threadIdx.x == 0) {
            sm->prefix = (prefix & 0xffffffff00000000ull) | (uint32_t)~rel;
            sm->mask = ~0ull;
        }
        __syncthreads();
    }
}

/* Copies the n candidate keys of src to shared memory (skeys); mn / mx: the smallest and largest
 * this thread copied. LTK_SEL_U loads in flight a thread, as in the radix passes (one L2 round trip
 * each otherwise). */
static __device__ __forceinline__ void ltk_stage_keys(const ltk_src_cand_glob &src, int n, uint32_t *skeys, uint32_t &mn,
                                                      uint32_t &mx) {
    mn = 0xffffffffu;
    mx = 0u;
    for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
        uint32_t v[LTK_SEL_U];
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
            v[u] = i < n ? __ldcg(src.key + i) : 0u;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
            if (i < n) {
                skeys[i] = v[u];
                mn = min(mn, v[u]);
                mx = max(mx, v[u]);
            }
        }
    }
}

/* Bucket of a candidate key (ascending bucket: descending key): ltk_key_bucket of its distance
 * above the smallest (src/ltk-order.h: d itself below 256, then 256 buckets an octave). Why not
 * equal widths: near the threshold the candidates are densest, and a few far above it (a query's
 * own cluster on clustered embeddings) stretched the range until the bulk crowded a few buckets
 * (the CLI's k = 8,192 went back to the radix select); buckets of relative width 2^-8
 * hold ~n / 700 at most on an exponential tail. */
static __device__ __forceinline__ uint32_t ltk_cand_bucket(uint32_t key, uint32_t kmin, int sh) {
    return LTK_SEL_BINS - 1 - ltk_key_bucket(key, kmin, sh);
}

/* Candidates in global memory: keys staged into skeys; in shared memory: already there (skeys is
 * src.key), their range read. */
static __device__ __forceinline__ void ltk_bucket_stage(const ltk_src_cand_glob &src, int n, uint32_t *skeys,
                                                        uint32_t &mn, uint32_t &mx) {
    ltk_stage_keys(src, n, skeys, mn, mx);
}
static __device__ __forceinline__ void ltk_bucket_stage(const ltk_src_cand_smem &src, int n, uint32_t *skeys,
                                                        uint32_t &mn, uint32_t &mx) {
    (void)skeys;
    mn = 0xffffffffu;
    mx = 0u;
    for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) {
        mn = min(mn, src.key[i]);
        mx = max(mx, src.key[i]);
    }
}
static __device__ __forceinline__ uint32_t ltk_bucket_rel(const ltk_src_cand_glob &src, int i) { return __ldcg(src.rel + i); }
static __device__ __forceinline__ uint32_t ltk_bucket_rel(const ltk_src_cand_smem &src, int i) { return src.rel[i]; }

/* The smallest and largest staged key of bucket b, into *lo and *hi (shared words the caller set
 * to ~0 and 0; a barrier after). */
static __device__ __forceinline__ void ltk_bucket_minmax(const uint32_t *skeys, int n, uint32_t kmin, int sh, uint32_t b,
                                                         uint32_t *lo, uint32_t *hi) {
    uint32_t mz = 0xffffffffu, xz = 0u;
    for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) {
        const uint32_t key = skeys[i];
        if (key >= kmin && ltk_cand_bucket(key, kmin, sh) == b) mz = min(mz, key), xz = max(xz, key);
    }
    mz = __reduce_min_sync(LTK_FULL, mz);
    xz = __reduce_max_sync(LTK_FULL, xz);
    if ((threadIdx.x & 31) == 0) atomicMin(lo, mz), atomicMax(hi, xz);
}

/* Scatters the entries of buckets <= bstar into sb at their buckets' starts in hist (which become
 * their ends); their row indices are read (from global memory for a global source, loads in flight
 * together) only for those. pick: of bstar, only the entries with lowmask - rel >= pfx. */
template <class Src>
static __device__ __forceinline__ void ltk_bucket_scatter(const Src &src, int n, const uint32_t *skeys, uint32_t kmin,
                                                          int sh, uint32_t bstar, bool pick, uint64_t lowmask,
                                                          uint64_t pfx, uint64_t *sb, ltk_sel_smem *sm) {
    for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
        uint32_t key[LTK_SEL_U], rel[LTK_SEL_U], b[LTK_SEL_U];
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
            key[u] = i < n ? skeys[i] : 0u;
            b[u] = i < n && key[u] >= kmin ? ltk_cand_bucket(key[u], kmin, sh) : (uint32_t)LTK_SEL_BINS;
            rel[u] = b[u] <= bstar ? ltk_bucket_rel(src, i) : 0u;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            bool take = b[u] <= bstar;
            if (pick && b[u] == bstar) take = lowmask - rel[u] >= pfx;
            if (take) sb[atomicAdd(&sm->hist[b[u]], 1u)] = ltk_comp(key[u], rel[u]);
        }
    }
}

/* ltk_topk_bucket where a bucket up to b* holds more than LTK_BUCKET_MAX entries and zooming cannot
 * spread it (b* one key: a tie class; or the zooms spent with b* itself not crowded): the k best,
 * sorted, in sb, or NULL (b* of several keys and crowded, or the padded sort not fitting sb's k +
 * LTK_BUCKET_MAX). hist holds the bucket starts of the histogram over [kmin, ...) at shift sh, tot
 * its entries, above the entries before b*. Of b*, the k - above best: for one key, the lowest
 * positions, found by radix passes of 8 bits over (2^hb - 1 - rel) of its entries (the histogram
 * in sb, which the scatter fills only afterwards); for a b* of at most LTK_BUCKET_MAX entries, by
 * their ranks among themselves. Every bucket up to b* is scattered into sb (as ltk_topk_bucket
 * does, b* only its winners), then sb[0, k) sorted by the bitonic network (pad to a power of two)
 * instead of ranking entries within their buckets, which is quadratic in a crowded bucket. Why: a
 * row of few distinct values crowds every bucket near the k-th key with one key each, and the
 * radix passes over the composites, the gather and the register sort that took them instead made
 * such rows 2.7x slower than normal ones (2048 x 8192 ties 0.48 ms against 0.176 normal, k = 2048,
 * bench/results/h200/select.jsonl); with it 0.478 -> 0.422 ms on an H100, while 64 x 1M ties, whose
 * last CTA reads the row indices from L2 in each pass over the class, went 0.165 -> 0.170 ms against
 * the radix passes (base and new alternating in one call, bench/results/h100/select.jsonl). */
template <class Src>
static __device__ __noinline__ const uint64_t *ltk_topk_crowded(const Src &src, int n, uint32_t k, uint32_t kmin, int sh,
                                                    uint32_t bstar, uint32_t above, uint32_t tot, ltk_sel_smem *sm,
                                                    uint64_t *sb, const uint32_t *skeys) {
#define LTK_CAND_BUCKET(key) ltk_cand_bucket(key, kmin, sh)
    const int lane = threadIdx.x & 31;
    uint32_t np = 1;
    while (np < k) np <<= 1;
    const uint32_t start = sm->hist[bstar], nxt = bstar + 1 < LTK_SEL_BINS ? sm->hist[bstar + 1] : tot;
    const uint32_t cnt = nxt - start, need = k - above; /* (start == above; 1 <= need <= cnt) */
    if (np > k + LTK_BUCKET_MAX) return NULL; /* (block-uniform from here on: shared values after barriers) */
    __syncthreads();
    if (threadIdx.x == 0) sm->kmin = 0xffffffffu, sm->kmax = 0u, sm->found_rel = 0u;
    __syncthreads();
    ltk_bucket_minmax(skeys, n, kmin, sh, bstar, &sm->kmin, &sm->kmax);
    __syncthreads();
    const uint32_t K = sm->kmin;
    const bool onekey = K == sm->kmax;
    if (!onekey && cnt > LTK_BUCKET_MAX) return NULL;
    /* one key: the need lowest positions of the class, as the need largest v = lowmask - rel */
    const bool pick = onekey && need < cnt;
    uint64_t lowmask = 0, pfx = 0;
    if (pick) {
        /* The class's row indices are in global memory for a global source: LTK_SEL_U loads in
         * flight a thread, here and in the passes below (one dependent L2 round trip a step
         * otherwise, ~12 a pass for the last CTA of 64 x 1M ties). */
        uint32_t mr = 0u;
        for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
            uint32_t r[LTK_SEL_U];
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) {
                const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
                r[u] = i < n && skeys[i] == K ? ltk_bucket_rel(src, i) : 0u;
            }
#pragma unroll
            for (int u = 0; u < LTK_SEL_U; u++) mr = max(mr, r[u]);
        }
        mr = __reduce_max_sync(LTK_FULL, mr);
        if (lane == 0) atomicMax(&sm->found_rel, mr);
        __syncthreads();
        const int hb = sm->found_rel ? 32 - __clz(sm->found_rel) : 0;
        lowmask = ((uint64_t)1 << hb) - 1;
        uint32_t *h2 = (uint32_t *)sb; /* 256 counters: sb holds >= 2 (1 + LTK_BUCKET_MAX) words */
        uint32_t kk = need;
        for (int top = hb; top > 0;) {
            const int s2 = top > 8 ? top - 8 : 0;
            const uint32_t nb = 1u << (top - s2);
            for (int i = threadIdx.x; i < 256; i += LTK_SEL_NT) h2[i] = 0u;
            __syncthreads();
            for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
                uint32_t r[LTK_SEL_U];
                bool in[LTK_SEL_U];
#pragma unroll
                for (int u = 0; u < LTK_SEL_U; u++) {
                    const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
                    in[u] = i < n && skeys[i] == K;
                    r[u] = in[u] ? ltk_bucket_rel(src, i) : 0u;
                }
#pragma unroll
                for (int u = 0; u < LTK_SEL_U; u++) {
                    const uint64_t v = lowmask - r[u];
                    if (in[u] && (v >> top) == (pfx >> top)) atomicAdd(&h2[(uint32_t)(v >> s2) & (nb - 1)], 1u);
                }
            }
            __syncthreads();
            /* the digit d with sum_{j>d} < kk <= sum_{j>=d}, highest digits first (thread t: digit nb-1-t) */
            const uint32_t c = threadIdx.x < nb ? h2[nb - 1 - threadIdx.x] : 0u;
            uint32_t all;
            const uint32_t st = ltk_block_scan(c, sm->warp, &all);
            if (threadIdx.x < nb && st < kk && kk <= st + c) sm->digit = nb - 1 - threadIdx.x, sm->bucket = st;
            __syncthreads();
            pfx |= (uint64_t)sm->digit << s2;
            kk -= sm->bucket;
            top = s2;
            __syncthreads();
        }
        /* pfx is the need-th largest v of the class: exactly need entries have v >= pfx */
    }
    /* the buckets up to b* (of b*, with pick, only v >= pfx) */
    ltk_bucket_scatter(src, n, skeys, kmin, sh, bstar, pick, lowmask, pfx, sb, sm);
    __syncthreads();
    if (!onekey) { /* b*'s cnt <= LTK_BUCKET_MAX entries at [above, above + cnt): its need best, in order */
        uint64_t c = 0;
        uint32_t rank = 0;
        if (threadIdx.x < cnt) {
            c = sb[above + threadIdx.x];
            for (uint32_t j = above; j < above + cnt; j++) rank += sb[j] > c;
        }
        __syncthreads();
        if (threadIdx.x < cnt && rank < need) sb[above + rank] = c;
        __syncthreads();
    }
    for (uint32_t j = k + threadIdx.x; j < np; j += LTK_SEL_NT) sb[j] = 0ull;
    __syncthreads();
    ltk_bitonic_desc(sb, (int)np);
    __syncthreads();
    return sb;
#undef LTK_CAND_BUCKET
}

/* The final select and its sort in one: the k best of the n candidates (k < n <= stage), sorted
 * descending, from one histogram of key buckets (ltk_cand_bucket). Keys staged in shared memory
 * (skeys, ltk_stage_keys); the histogram over [kmin, kmax] in LTK_SEL_BINS buckets, highest key
 * first; every bucket up to the one holding the k-th entry (b*) is scattered into sb (room for
 * k + LTK_BUCKET_MAX composites), each entry then placed by its count of larger composites in its
 * bucket, into out (the staging area again, once the keys are read: it holds >= k composites when
 * stage >= 2k); of b* only its best k - above land below position k. Returns out, or NULL (nothing
 * decided, the keys still staged) when a bucket up to b* holds more than LTK_BUCKET_MAX entries
 * (flat or tied tails): the caller then selects by radix passes. Src: candidates in global memory
 * (ltk_src_cand_glob) or in shared memory at skeys (ltk_src_cand_smem, rel beside them: out then
 * overwrites both, after the scatter). Users: the kNN's final select (knn-select.cu) and the fast
 * tier of select.cu (a row's last CTA, and a row of one CTA). Why: at k = 8,192 (13k
 * candidates a query, B = 64, N = 1M) the kNN's final select took 42 us, half of it in three 11-bit
 * radix passes and the gather, the rest in the bucket sort (ncu): one histogram serves both. */
template <class Src>
static __device__ const uint64_t *ltk_topk_bucket(const Src &src, uint32_t k, ltk_sel_smem *sm, uint64_t *sb,
                                                   uint32_t *skeys) {
    const int n = (int)src.cnt, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        sm->kmin = 0xffffffffu;
        sm->kmax = 0u;
        sm->bmax = 0u;
        sm->digit = LTK_SEL_BINS; /* (set below: some bucket holds the k-th entry, as k < n) */
    }
    for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
    uint32_t mn, mx;
    ltk_bucket_stage(src, n, skeys, mn, mx);
    mn = __reduce_min_sync(LTK_FULL, mn);
    mx = __reduce_max_sync(LTK_FULL, mx);
    __syncthreads(); /* (the initial values above before the atomics) */
    if (lane == 0) {
        atomicMin(&sm->kmin, mn);
        atomicMax(&sm->kmax, mx);
    }
    __syncthreads();
    /* Buckets over [kmin, kmax]; where one up to b* is crowded, kmin rises to the smallest key of
     * b* and the histogram is taken again over the keys from there (twice at most). Why: over a
     * whole row (one CTA a row, t = 0) kmin is the row's smallest score, the span the keys' whole
     * range, and a bucket of the top octave one float exponent wide: decode rows put their best
     * 2048 of 8192 in a few buckets and took the radix passes and the register sort. */
    uint32_t kmin, tot;
    int sh;
    for (int zoom = 0;; zoom++) {
        kmin = sm->kmin;
        sh = ltk_key_bucket_shift(sm->kmax - kmin); /* (span >> sh < 2^15) */
        if (zoom) { /* (the first histogram was cleared before the staging) */
            for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
            __syncthreads();
        }
#define LTK_CAND_BUCKET(key) ltk_cand_bucket(key, kmin, sh)
        for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) {
            const uint32_t key = skeys[i];
            if (key >= kmin) atomicAdd(&sm->hist[LTK_CAND_BUCKET(key)], 1u);
        }
        __syncthreads();
        /* bucket starts (exclusive scan, LTK_SEL_BINS / LTK_SEL_NT bins a thread), b*, and the
         * largest bucket that holds winners (those starting below k) */
        const int per = LTK_SEL_BINS / LTK_SEL_NT, b0 = per * threadIdx.x;
        uint32_t cnt[LTK_SEL_BINS / LTK_SEL_NT], loc = 0, big = 0;
#pragma unroll
        for (int j = 0; j < per; j++) {
            cnt[j] = sm->hist[b0 + j];
            loc += cnt[j];
        }
        uint32_t st = ltk_block_scan(loc, sm->warp, &tot);
#pragma unroll
        for (int j = 0; j < per; j++) {
            if (st < k) big = cnt[j] > big ? cnt[j] : big;
            if (st < k && k <= st + cnt[j]) {
                sm->digit = (uint32_t)(b0 + j);
                sm->above = st;
            }
            sm->hist[b0 + j] = st; /* start; the scatter turns it into the bucket's end */
            st += cnt[j];
        }
        big = __reduce_max_sync(LTK_FULL, big);
        if (lane == 0) atomicMax(&sm->bmax, big);
        __syncthreads();
        if (sm->digit >= LTK_SEL_BINS) return NULL; /* (block-uniform) */
        if (sm->bmax <= LTK_BUCKET_MAX) break;
        /* a crowded bucket still, or b* one key (sh = 0, d < 256: a tie class): the sorted tail */
        if (zoom == 2 || (sh == 0 && sm->digit >= LTK_SEL_BINS - 256))
            return ltk_topk_crowded(src, n, k, kmin, sh, sm->digit, sm->above, tot, sm, sb, skeys);
        const uint32_t bz = sm->digit, az = sm->above;
        __syncthreads();
        if (threadIdx.x == 0) {
            sm->kmin = 0xffffffffu;
            sm->bmax = 0u;
            sm->digit = LTK_SEL_BINS;
        }
        __syncthreads();
        ltk_bucket_minmax(skeys, n, kmin, sh, bz, &sm->kmin, &sm->bmax); /* (bmax: free until the next histogram) */
        __syncthreads();
        /* (block-uniform) b* starts at kmin (no narrower range), or holds one key (a tie class:
         * crowded at any width; 64 x 1M ties took 0.158 ms against 0.151 when it zoomed twice) */
        if (sm->kmin == kmin || sm->kmin == sm->bmax)
            return ltk_topk_crowded(src, n, k, kmin, sh, bz, az, tot, sm, sb, skeys);
        __syncthreads();
        if (threadIdx.x == 0) sm->bmax = 0u;
#undef LTK_CAND_BUCKET
    }
#define LTK_CAND_BUCKET(key) ltk_cand_bucket(key, kmin, sh)
    /* entries up to b*: the start of the next bucket (the scatter below moves only starts up to b*) */
    const uint32_t bstar = sm->digit, nw = bstar + 1 < LTK_SEL_BINS ? sm->hist[bstar + 1] : tot;
    ltk_bucket_scatter(src, n, skeys, kmin, sh, bstar, false, 0, 0, sb, sm);
    __syncthreads();
    /* place: each entry at its bucket's start plus its count of larger composites there (distinct:
     * the row index breaks key ties, lower first); of b*, only ranks below k - above */
    uint64_t *out = (uint64_t *)skeys;
    for (uint32_t p = threadIdx.x; p < nw; p += LTK_SEL_NT) {
        const uint64_t c = sb[p];
        const uint32_t bk = LTK_CAND_BUCKET(ltk_comp_key(c));
        const uint32_t lo = bk ? sm->hist[bk - 1] : 0u, hi = sm->hist[bk];
        uint32_t rank = 0;
        for (uint32_t j = lo; j < hi; j++) rank += sb[j] > c;
        if (lo + rank < k) out[lo + rank] = c;
    }
#undef LTK_CAND_BUCKET
    __syncthreads();
    return out;
}

#endif
