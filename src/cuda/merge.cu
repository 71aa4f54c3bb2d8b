/* The merge of candidate lists on CUDA (ltk_topk_merge): one select CTA a row.
 *
 * A candidate is the composite (rank key << 32 | ~id): larger is better, and at equal keys the lower
 * id is the larger composite, so the k largest composites are the contract's top k (ties by id,
 * NaN last). Two kernels:
 * - mrg_fast_kernel (a row of at most MRG_FAST_N candidates: G x 2048 for G <= 8): every candidate
 *   is read once, its 32-bit key kept in shared memory (padding 0, NaN 1, a real key above both), and
 *   the k-th key K found by zoomed histograms over the row's key range (at most three passes of
 *   2048 bins); a class at K larger than the entries still needed
 *   is narrowed the same way over its ~ids. Then the winners' scores and ids are read again (L2)
 *   into composites and sorted. Why: the general kernel below reads the row from global memory at
 *   each of its up to eight 11-bit passes over 64-bit composites (8192 rows x 8 x 2048: 3.51 ms on
 *   an H100, bench/results/h100/merge.jsonl).
 * - mrg_kernel (longer rows): ltk_radix_select over all 64 bits, the candidates read from global
 *   memory at every pass; then the entries above the threshold composite and the kk still needed
 *   at it (more than one only where an id is repeated; a counter takes exactly kk of them), the
 *   bitonic network over the next power of two, and the store. */
#include <cuda_runtime.h>

#include <string.h>

#include "cuda-common.cuh"
#include "select.cuh"

#define MRG_MAX_K 16384 /* the sorted composites in shared memory: 128 KB */

struct mrg_src {
    const float *sc;
    const int32_t *id;
    int32_t len;
    int64_t lstride;
    int64_t cnt; /* lists x list_len */
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const {
        const int32_t g = (int32_t)i / len, j = (int32_t)i - g * len;
        const int64_t o = (int64_t)g * lstride + j;
        const int32_t d = __ldg(id + o);
        if (d < 0) return 0ull;
        return ltk_comp(ltk_key32(__float_as_uint(__ldg(sc + o))), (uint32_t)d);
    }
};

static __global__ void __launch_bounds__(LTK_SEL_NT) mrg_kernel(ltk_merge_args a, int kp) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));
    __shared__ uint32_t n_above, n_at;
    const int64_t r = blockIdx.x;
    const mrg_src src = {a.scores + r * a.row_stride, a.ids + r * a.row_stride, a.list_len, a.list_stride,
                         (int64_t)a.lists * a.list_len};
    /* the row's candidates */
    uint32_t mine = 0;
    for (int64_t i = threadIdx.x; i < src.cnt; i += LTK_SEL_NT) {
        const int32_t g = (int32_t)i / src.len, j = (int32_t)i - g * src.len;
        mine += __ldg(src.id + (int64_t)g * src.lstride + j) >= 0;
    }
    uint32_t m;
    ltk_block_scan(mine, sm->warp, &m);
    for (int j = threadIdx.x; j < kp; j += LTK_SEL_NT) sb[j] = 0ull;
    if (threadIdx.x == 0) n_above = 0, n_at = 0;
    uint64_t prefix = 1ull, mask = ~0ull; /* every real candidate */
    uint32_t kk = 0;
    const uint32_t k = (uint32_t)a.k;
    __syncthreads();
    if (m > k) {
        ltk_radix_select<mrg_src, 1>(src, k, 64, 0, sm);
        prefix = sm->prefix, mask = sm->mask, kk = sm->kk;
    }
    /* above the threshold (< k of them), then kk at it */
    for (int64_t i = threadIdx.x; i - threadIdx.x < src.cnt; i += LTK_SEL_NT) {
        const uint64_t c = i < src.cnt ? src.comp(i) : 0ull;
        const uint64_t cm = c & mask;
        const bool real = c != 0ull;
        const bool above = real && (m <= k ? true : cm > prefix);
        const bool at = real && m > k && cm == prefix;
        const uint32_t pa = ltk_warp_append(above, &n_above);
        if (above && pa < (uint32_t)kp) sb[pa] = c;
        const uint32_t pt = ltk_warp_append(at, &n_at);
        if (at && pt < kk) sb[k - kk + pt] = c;
    }
    __syncthreads();
    const uint32_t got = m < k ? m : k;
    ltk_bitonic_desc(sb, kp);
    int32_t *oi = a.out_idx + r * a.out_stride;
    float *os = a.out_scores ? a.out_scores + r * a.out_stride : NULL;
    for (uint32_t j = threadIdx.x; j < k; j += LTK_SEL_NT) {
        const uint64_t c = sb[j];
        const bool v = j < got;
        oi[j] = v ? (int32_t)ltk_comp_rel(c) : -1;
        if (os) os[j] = v ? ltk_rank_key_to_f32(ltk_comp_key(c)) : -__int_as_float(0x7f800000);
    }
}

#define MRG_FAST_N (LTK_SEL_NT * 32) /* candidates a row for mrg_fast_kernel: 32 keys a thread */

/* Candidate i of a row (i < n) at offset g * list_stride + j, g = i / list_len. */
struct mrg_row {
    const float *sc;
    const int32_t *id;
    uint32_t len, n;
    int64_t ls;
    bool dense; /* list_stride == list_len: offset i */
    __device__ __forceinline__ int64_t off(uint32_t i) const {
        if (dense) return i;
        const uint32_t g = i / len;
        return (int64_t)g * ls + (i - g * len);
    }
};

/* 32-bit key of a candidate: 0 padding, 1 NaN, else ltk_key32 (-inf's is 0x007fffff, above both). */
static __device__ __forceinline__ uint32_t mrg_key(float s, int32_t id) {
    const uint32_t k = ltk_key32(__float_as_uint(s));
    return id < 0 ? 0u : k ? k : 1u;
}

/* A thread's KPT key slots in shared memory (slot u of thread t at u NT + t). Why not registers:
 * 32 keys a thread took 104 registers, one CTA an SM, 3.03-3.08 ms at 8192 x 8 x 2048 against
 * 2.33 in shared memory at two CTAs an SM (H100, bench/results/h100/merge.jsonl, note "A/B"). */
struct mrg_smem {
    uint32_t *p; /* skeys + threadIdx.x */
    __device__ __forceinline__ uint32_t &operator[](int u) { return p[u * LTK_SEL_NT]; }
    __device__ __forceinline__ uint32_t operator[](int u) const { return p[u * LTK_SEL_NT]; }
};

/* Min, max and count over the active values of the block (into sm->kmin, kmax, cnt). */
template <int KPT>
static __device__ __forceinline__ void mrg_range(const mrg_smem &v, uint32_t act, ltk_sel_smem *sm) {
    uint32_t mn = 0xffffffffu, mx = 0u, c = 0u;
#pragma unroll
    for (int u = 0; u < KPT; u++)
        if (act >> u & 1u) mn = min(mn, v[u]), mx = max(mx, v[u]), c++;
    mn = __reduce_min_sync(LTK_FULL, mn);
    mx = __reduce_max_sync(LTK_FULL, mx);
    c = __reduce_add_sync(LTK_FULL, c);
    __syncthreads(); /* (earlier readers of these words) */
    if (threadIdx.x == 0) sm->kmin = 0xffffffffu, sm->kmax = 0u, sm->cnt = 0u;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) atomicMin(&sm->kmin, mn), atomicMax(&sm->kmax, mx), atomicAdd(&sm->cnt, c);
    __syncthreads();
}

/* The kk-th largest of the active values (1 <= kk <= their count, every one in [lo, hi]): zoomed
 * histograms of 2048 bins over [lo, hi], then over the bin holding it, down to one value or to a
 * bin whose entries are exactly the ones still needed. Returns L; *exact: the answer is every
 * value >= L (kk of them); else every value > L and *need of those equal to L. At most three
 * passes (a 32-bit span, 11 bits a pass). */
template <int KPT>
static __device__ uint32_t mrg_kth(const mrg_smem &v, uint32_t act, uint32_t lo, uint32_t hi, uint32_t kk,
                                   ltk_sel_smem *sm, bool *exact, uint32_t *need) {
    for (;;) {
        const uint32_t span = hi - lo;
        const int sh = span < LTK_SEL_BINS ? 0 : 32 - __clz(span) - 11; /* span >> sh < 2048 */
        for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
        __syncthreads();
#pragma unroll
        for (int u = 0; u < KPT; u++) {
            const bool in = (act >> u & 1u) && v[u] >= lo && v[u] <= hi;
            ltk_hist_add_agg(sm->hist, in, (v[u] - lo) >> sh);
        }
        __syncthreads();
        ltk_find_bucket(sm, LTK_SEL_BINS, kk);
        const uint32_t d = sm->digit, above = sm->above, bucket = sm->bucket;
        __syncthreads();
        kk -= above;
        const uint32_t nlo = lo + (d << sh), w = (1u << sh) - 1u;
        hi = hi - nlo > w ? nlo + w : hi;
        lo = nlo;
        if (bucket == kk || lo == hi) {
            *exact = bucket == kk;
            *need = kk;
            return lo;
        }
    }
}

#define MRG_U 4 /* slots whose loads are in flight together (8 spilled at 64 registers) */

/* One row of at most MRG_FAST_N candidates; slot u of thread t is candidate u * LTK_SEL_NT + t.
 * E: the sort's elements a thread (ltk_sort_desc). */
template <int KPT, int E>
static __global__ void __launch_bounds__(LTK_SEL_NT, 2) mrg_fast_kernel(ltk_merge_args a, int kp) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));
    __shared__ uint32_t n_dup;
    const int64_t r = blockIdx.x;
    const uint32_t k = (uint32_t)a.k, t = threadIdx.x;
    const mrg_row row = {a.scores + r * a.row_stride, a.ids + r * a.row_stride, (uint32_t)a.list_len,
                         (uint32_t)a.lists * (uint32_t)a.list_len, a.list_stride, a.list_stride == a.list_len};
    /* the keys: MRG_U slots' loads in flight together */
    mrg_smem key = {(uint32_t *)(sb + kp) + threadIdx.x};
    uint32_t real = 0u;
#pragma unroll
    for (int u0 = 0; u0 < KPT; u0 += MRG_U) {
        float s[MRG_U];
        int32_t d[MRG_U];
#pragma unroll
        for (int u = 0; u < MRG_U; u++) {
            const uint32_t i = (uint32_t)(u0 + u) * LTK_SEL_NT + t;
            s[u] = 0.0f, d[u] = -1;
            if (u0 + u < KPT && i < row.n) {
                const int64_t o = row.off(i);
                d[u] = __ldg(row.id + o), s[u] = __ldg(row.sc + o);
            }
        }
#pragma unroll
        for (int u = 0; u < MRG_U; u++)
            if (u0 + u < KPT) {
                key[u0 + u] = mrg_key(s[u], d[u]);
                real |= (uint32_t)(key[u0 + u] != 0u) << (u0 + u);
            }
    }
    mrg_range<KPT>(key, real, sm);
    const uint32_t m = sm->cnt;
    /* take: the slots above the k-th key (or every real one when m <= k); tie: the slots at it */
    uint32_t take = real, tie = 0u, ntie = 0u, L2 = 0u;
    bool exact2 = true;
    if (m > k) {
        bool exact;
        uint32_t need;
        const uint32_t K = mrg_kth<KPT>(key, real, sm->kmin, sm->kmax, k, sm, &exact, &need);
        take = 0u;
#pragma unroll
        for (int u = 0; u < KPT; u++) {
            take |= (uint32_t)((real >> u & 1u) && (exact ? key[u] >= K : key[u] > K)) << u;
            tie |= (uint32_t)(!exact && (real >> u & 1u) && key[u] == K) << u;
        }
        if (!exact) { /* the need lowest ids of the class at K: the need largest ~id */
#pragma unroll
            for (int u = 0; u < KPT; u++)
                key[u] = tie >> u & 1u ? ~(uint32_t)__ldg(row.id + row.off((uint32_t)u * LTK_SEL_NT + t)) : 0u;
            mrg_range<KPT>(key, tie, sm); /* (the class holds more than need: !exact) */
            L2 = mrg_kth<KPT>(key, tie, sm->kmin, sm->kmax, need, sm, &exact2, &ntie);
#pragma unroll
            for (int u = 0; u < KPT; u++) {
                const bool in = tie >> u & 1u;
                take |= (uint32_t)(in && (exact2 ? key[u] >= L2 : key[u] > L2)) << u;
            }
            /* !exact2: ntie of the class's entries whose id is repeated at ~L2 */
            if (exact2) tie = 0u;
        } else {
            tie = 0u;
        }
    }
    __syncthreads(); /* (every thread has read sm->cnt) */
    if (t == 0) sm->cnt = 0u, n_dup = 0u;
    __syncthreads();
    /* the winners' composites, read again (L2) */
#pragma unroll
    for (int u = 0; u < KPT; u++) {
        const uint32_t i = (uint32_t)u * LTK_SEL_NT + t;
        /* of the class at K (key[u] holds ~id), the entries at ~L2 while ntie last */
        const bool at = (tie >> u & 1u) && key[u] == L2;
        const uint32_t pd = ltk_warp_append(at, &n_dup);
        const bool w = (take >> u & 1u) || (at && pd < ntie);
        uint64_t c = 0ull;
        if (w) {
            const int64_t o = row.off(i);
            const int32_t d = __ldg(row.id + o);
            c = ltk_comp(mrg_key(__ldg(row.sc + o), d), (uint32_t)d);
        }
        const uint32_t p = ltk_warp_append(w, &sm->cnt);
        if (w && p < (uint32_t)kp) sb[p] = c;
    }
    __syncthreads();
    const uint32_t got = m < k ? m : k; /* == sm->cnt */
    const bool sorted = !(a.flags & LTK_FLAG_UNSORTED);
    if (sorted) {
        for (uint32_t j = got + t; j < (uint32_t)kp; j += LTK_SEL_NT) sb[j] = 0ull;
        __syncthreads();
        ltk_sort_desc<E>(sb, kp);
        __syncthreads();
    }
    int32_t *oi = a.out_idx + r * a.out_stride;
    float *os = a.out_scores ? a.out_scores + r * a.out_stride : NULL;
    for (uint32_t j = t; j < k; j += LTK_SEL_NT) {
        const uint64_t c = j < got ? sb[j] : 0ull;
        const bool v = j < got;
        const uint32_t kc = ltk_comp_key(c);
        oi[j] = v ? (int32_t)ltk_comp_rel(c) : -1;
        if (os) os[j] = v ? ltk_rank_key_to_f32(kc == 1u ? 0u : kc) : -__int_as_float(0x7f800000);
    }
}

extern "C" ltk_status ltk_cuda_merge_workspace(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes) {
    (void)e;
    LTK_RETURN_IF(a->k > MRG_MAX_K, LTK_EUNSUPPORTED, "cuda merge: k=%d over %d (the sorted candidates in shared memory)",
                  a->k, MRG_MAX_K);
    *bytes = 0;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t ws_bytes) {
    (void)ws, (void)ws_bytes;
    size_t need;
    LTK_FORWARD_IF(ltk_cuda_merge_workspace(a, e, &need));
    if (a->rows > 0) {
        int kp = 2;
        while (kp < a->k) kp <<= 1;
        size_t smem = sizeof(ltk_sel_smem) + 8 * (size_t)kp;
        const int64_t n = (int64_t)a->lists * a->list_len;
        cudaStream_t st = (cudaStream_t)e->stream;
        const unsigned rows = (unsigned)a->rows;
        if (n <= MRG_FAST_N) {
            const int kpt = n <= LTK_SEL_NT * 8 ? 8 : n <= LTK_SEL_NT * 16 ? 16 : 32, E = ltk_sort_e_of(a->k);
            smem += 4 * (size_t)kpt * LTK_SEL_NT;
#define MRG_LAUNCH_E(EE)                                                                          \
    do {                                                                                          \
        LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)mrg_fast_kernel<KPT_, EE>, smem));     \
        mrg_fast_kernel<KPT_, EE><<<rows, LTK_SEL_NT, smem, st>>>(*a, kp);                        \
    } while (0)
#define MRG_LAUNCH_K(KK)                    \
    do {                                    \
        enum { KPT_ = KK };                 \
        LTK_BY_E(E, MRG_LAUNCH_E);          \
    } while (0)
            if (kpt == 8) MRG_LAUNCH_K(8);
            else if (kpt == 16) MRG_LAUNCH_K(16);
            else MRG_LAUNCH_K(32);
#undef MRG_LAUNCH_K
#undef MRG_LAUNCH_E
        } else {
            LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)mrg_kernel, smem));
            mrg_kernel<<<rows, LTK_SEL_NT, smem, st>>>(*a, kp);
        }
        LTK_CUDA_TRY(cudaGetLastError());
    }
    if (e->stats) {
        LTK_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)e->stream));
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
    }
    return LTK_OK;
}
