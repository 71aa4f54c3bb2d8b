/* sm_90a scoring main loop of the kNN (bf16 / f16): wgmma with fp32 accumulation, TMA loads into
 * an mbarrier ring, one producer thread and two math warp groups, a persistent grid of one CTA per
 * SM. It replaces only the main loop of knn-portable.cu's mma.sync kernel: the work items (256 base rows x
 * 64 queries, or x 128 queries for launches of >= 256: ks_cfg below), the epilogues (knn_emit:
 * STORE / GATE / HIST / TAKE) and everything around them (sample, threshold, check, exact
 * fallback, final select) are the same code.
 *
 * Why: the mma.sync loop runs at ~140 TFLOP/s whatever the batch (bench/results/h200/
 * NOTES-select-knn.md), so B = 64 x 5M x 768 bf16 takes 2x the corpus read; this loop only has to
 * keep up with HBM (64 queries x 2 FLOP per 2-byte element: ~270 TFLOP/s at 4.25 TB/s).
 *
 * Layout. A k-step is 64 elements (128 bytes) of D: the base tile [256 rows x 128 B] and the query
 * tile [64 or 128 rows x 128 B], both K-major with the 128-byte swizzle TMA writes: 5 stages of
 * 40 KB (64-query items) or 4 of 48 KB (128). The queries are the M side and the base rows the N
 * side. 64-query items: math warp group g multiplies the 64 queries by base rows 128g..128g+127,
 * 4 wgmma m64n128k16 a step, 64 fp32 accumulators a thread (query 16 w + lane/4 (+8), base row
 * 8 j + 2 (lane % 4) (+1)). 128-query items: group g multiplies queries 64g..64g+63 by all 256
 * rows, two such accumulator sets (setmaxnreg gives the math groups 232 registers). Why this way
 * round: the first version (m64n64, base rows as M) read a third more shared memory per FLOP, close
 * to the whole shared-memory bandwidth at the tensor rate, and ran at ~230 TFLOP/s; a 128-wide N
 * cuts that by a quarter, and the thresholds of a thread's two queries stay in registers. Each
 * warp group keeps one wgmma group in flight (wait<1>, the stage of step kt-1 is released while
 * step kt runs) and meets the other only at the ring's barriers (and, with 128-query items under
 * L2 / cosine, once an item to share |x|^2). For L2 and cosine each base row's |x|^2 is summed by
 * one math thread from the same shared-memory tiles in element order, so every mode of this
 * kernel sees the same bits.
 *
 * The default on sm_90 (LTK_CUDA_PORTABLE=1 turns it off, with the indexer's sm_90a scan): it passed
 * test-cuda-knn and the sanitizers on the H200 and ran 1.6x faster than the mma.sync loop. */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "../ltk-order.h"
#include "knn.cuh"
#include "ptx.cuh"

#define KS_BN 256                   /* base rows per work item */
#define KS_BK 64                    /* elements of D per stage: one 128-byte swizzle row */
#define KS_THREADS 384              /* producer warp group + 2 math warp groups */
#define KS_MATH_WARPS 8
#define KS_X_BYTES (KS_BN * 128)    /* 32 KB */
/* Queries per work item, QI = 64 or 128. 64: the two math groups split the item's base rows (128
 * each) and share its 64 queries. 128 (large batches): group g takes queries 64g..64g+63 against
 * all 256 rows, two m64n128 accumulators a thread. Why: a batch of B queries reads the corpus
 * B / QI times through L2; at B = 1024 with QI = 64 the loop ran at 57-59% of the GEMM rate with
 * neither L2 (65%) nor the tensor pipe (60%) saturated (ncu, knn-gate): a stage of 128 queries
 * carries twice the FLOPs for 1.2x the bytes. */
template <int QI> struct ks_cfg {
    enum {
        NST = QI == 128 ? 4 : 5,        /* stages: 48 KB or 40 KB each */
        Q_BYTES = QI * 128,
        STAGE_BYTES = KS_X_BYTES + Q_BYTES,
        NACC = QI == 128 ? 2 : 1,       /* m64n128 accumulator sets a thread */
    };
};
template <int QI> struct ks_misc {
    float xn[2][KS_BN]; /* |x|^2 of the item's rows, by item parity */
    uint64_t full[ks_cfg<QI>::NST], empty[ks_cfg<QI>::NST];
};
/* GATE: a staging list per math warp after ks_misc (ks_gate below). */
#define KS_LIST 256 /* staged entries per math warp */
struct ks_list {
    uint32_t key[KS_LIST], rel[KS_LIST];
    uint16_t q[KS_LIST]; /* query in the batch (< KNN_QBATCH) */
};
static_assert(sizeof(ks_list) % 16 == 0, "lists stay 16-byte aligned");
template <int QI, int MODE> constexpr int ks_smem() {
    return ks_cfg<QI>::NST * ks_cfg<QI>::STAGE_BYTES + (int)sizeof(ks_misc<QI>) +
           (MODE == KNN_GATE ? KS_MATH_WARPS * (int)sizeof(ks_list) : 0) + 1024; /* base alignment slack */
}
/* Register split of the 128-query build: the launch gives 168 a thread (65536 / 384); the producer
 * group gives back 128 x (168 - 40), which the math groups take: 256 x (232 - 168). */
#define KS_REG_PRODUCER 40
#define KS_REG_MATH 232
static_assert(128 * (168 - KS_REG_PRODUCER) >= 256 * (KS_REG_MATH - 168), "setmaxnreg pool");
static_assert(65536 / KS_THREADS / 8 * 8 == 168, "the launch allocation the split assumes");

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Spin on an mbarrier phase; a wait past 10 s traps (a protocol bug becomes a launch error that
 * the host reports, not a hung process). */
static __device__ __forceinline__ void ks_wait(uint64_t *bar, uint32_t parity) {
    if (ltk_mbar_try_wait(bar, parity)) return;
    const uint64_t t0 = ltk_globaltimer();
    while (!ltk_mbar_try_wait(bar, parity))
        if (ltk_globaltimer() - t0 > 10000000000ull) __trap();
}
/* The 8 elements of 16-byte chunk ch of row r of a swizzled 128-byte-row tile, squared and summed
 * into acc in element order. */
template <int DT> static __device__ __forceinline__ float ks_sq8(const uint8_t *tile, int r, int ch, float acc) {
    const uint4 u = *(const uint4 *)(tile + r * 128 + ((ch ^ (r & 7)) << 4));
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float v0, v1;
        if (DT == 1) {
            v0 = __half2float(__ushort_as_half((unsigned short)(w[j] & 0xffffu)));
            v1 = __half2float(__ushort_as_half((unsigned short)(w[j] >> 16)));
        } else {
            v0 = __uint_as_float(w[j] << 16);
            v1 = __uint_as_float(w[j] & 0xffff0000u);
        }
        acc = fmaf(v0, v0, acc);
        acc = fmaf(v1, v1, acc);
    }
    return acc;
}
#endif

/* The GATE epilogue of one item: the thread's 64 entries of one accumulator set (queries qa and
 * qa + 8, base rows 128 half + 8 j + 2 (lane % 4) (+1)) gated into a bit mask; the passing entries
 * go to the warp's staging list in shared memory (positions from a warp scan, no atomics), which
 * the warp flushes to the candidate lists only when the next item's passes would not fit.
 * Why: a returning global atomicAdd a thread and query with passes (the previous epilogue, itself
 * replacing one per passing entry) stalled the math warps on an L2 round trip in nearly every
 * item once ~1% of the scores pass (k = 8,192: 16k candidates a query), while both math groups sat
 * in their epilogues and the tensor cores idled: the gated scan ran 1.15x the score-only scan at
 * B = 64, N = 2M, k = 8192 (940 vs 821 us at k = 128). Staged, a flush pays one round
 * trip for up to KS_LIST entries, with one atomic per distinct query of each 32 (the paper's
 * per-warp staging lists flushed in batches). */

/* Rounds of 32 entries whose atomics a flush keeps in flight together. A whole list's 8 for 64-query
 * items (one L2 round trip a flush) measured 414 against 416 us at k = 8,192 (B = 64, N = 1M,
 * within the spread), and flushing from idle warps instead gained nothing:
 * the gated scan's extra time at large k is not the flush's wait. */
#define KS_FLUSH_R 4

/* Moves the warp's fill staged entries to the candidate lists (every lane, warp-uniform fill). */
static __device__ __forceinline__ __attribute__((unused)) void ks_flush(const knn_params &p, const ks_list *l, int fill, int lane) {
    __syncwarp(); /* the lanes' staging stores are visible to the warp */
    for (int b0 = 0; b0 < fill; b0 += 32 * KS_FLUSH_R) {
        /* KS_FLUSH_R rounds of 32: their atomics in flight together, then the writes */
        uint32_t at[KS_FLUSH_R], peers[KS_FLUSH_R], q[KS_FLUSH_R];
#pragma unroll
        for (int r = 0; r < KS_FLUSH_R; r++) {
            const int i = b0 + 32 * r + lane;
            q[r] = i < fill ? (uint32_t)l->q[i] : 0xffffffffu;
            peers[r] = __match_any_sync(LTK_FULL, q[r]);
            at[r] = 0;
            if (q[r] != 0xffffffffu && lane == __ffs(peers[r]) - 1) at[r] = atomicAdd(&p.cnt[q[r]], (uint32_t)__popc(peers[r]));
        }
#pragma unroll
        for (int r = 0; r < KS_FLUSH_R; r++) {
            const int i = b0 + 32 * r + lane;
            const uint32_t pos = __shfl_sync(LTK_FULL, at[r], __ffs(peers[r]) - 1) + __popc(peers[r] & ((1u << lane) - 1u));
            if (q[r] != 0xffffffffu && (int64_t)pos < p.cap) {
                p.ckey[(int64_t)q[r] * p.cap + pos] = l->key[i];
                p.crel[(int64_t)q[r] * p.cap + pos] = l->rel[i];
            }
        }
    }
    __syncwarp(); /* the list is read before it is refilled */
}

/* Score of passing entry `bit` of pm[h], again: acc is indexed by a run-time value only here, on
 * the passing entries: a tree of 31 selects on the bits of `bit` (no local memory: see the SASS).
 * Why a tree: the compare-and-select chain it replaces (32 ISETP + 32 FSEL a pass) was 10% of the
 * 128-query kernel's instructions at B = 1024, k = 1024 (ncu). */
template <bool IP>
static __device__ __forceinline__ float ks_entry(const knn_params &p, const float (&acc)[64], const float *xn,
                                                 float qn, int h, int bit, int row) {
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; j++) v[j] = (bit & 1) ? acc[4 * j + 2 * h + 1] : acc[4 * j + 2 * h];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = (bit & 2) ? v[2 * j + 1] : v[2 * j];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = (bit & 4) ? v[2 * j + 1] : v[2 * j];
#pragma unroll
    for (int j = 0; j < 2; j++) v[j] = (bit & 8) ? v[2 * j + 1] : v[2 * j];
    v[0] = (bit & 16) ? v[1] : v[0];
    return IP ? v[0] + 0.0f : knn_score(v[0], qn, xn[row], p.metric);
}

/* The gate of one item's accumulator set into pm[h] (bit 2 j + b: entry (row rb + 8 j + b, query
 * qa + 8 h) passes; rb = 128 half + 2 (lane % 4)), the launch's row bound and the batch's query
 * bound applied. */
template <bool IP>
static __device__ __forceinline__ void ks_mask(const knn_params &p, const float (&acc)[64], const float *xn,
                                               const float (&qn_r)[2], const uint32_t (&thr_r)[2], int half, int lane,
                                               int64_t n0, int qa, uint32_t (&pm)[2]) {
    const int64_t lim = p.n - n0; /* rows of this item inside the launch */
    const int rb = half * 128 + 2 * (lane & 3);
    /* The gate as one float compare a score: key32(sc) >= thr <=> sc >= ltk_rank_key_floor(thr)
     * (thr > 0; tests/test-order.c). Why: converting each score to its key first made this
     * epilogue ~22 instructions a score, 41% of the math warps' samples at B = 1024 while the tensor
     * pipe idled (ncu); the compare and the mask now take ~2.5. */
    const float thf[2] = {ltk_rank_key_floor(thr_r[0]), ltk_rank_key_floor(thr_r[1])};
    pm[0] = pm[1] = 0u;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) { /* branch-free: FSETP, then the bit into the mask */
            const int h = e >> 1, row = rb + 8 * j + (e & 1);
            const float sc = IP ? acc[4 * j + e] : knn_score(acc[4 * j + e], qn_r[h], xn[row], p.metric); /* (-0 >= t iff +0 >= t) */
            pm[h] |= (uint32_t)(sc >= thf[h]) << (2 * j + (e & 1));
        }
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (thr_r[h] == 0u) pm[h] = 0xffffffffu; /* every entry, NaN too */
    if (lim < KS_BN) { /* the last item of the launch: only its rows inside */
        uint32_t in = 0u;
#pragma unroll
        for (int i = 0; i < 32; i++) in |= (uint32_t)(rb + 8 * (i >> 1) + (i & 1) < lim) << i;
        pm[0] &= in;
        pm[1] &= in;
    }
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (qa + 8 * h >= p.nq) pm[h] = 0u;
}

/* The passing entries of pm (query qq) straight to the candidate list in global memory: when one
 * item holds more than a staging list (a low threshold). */
template <bool IP>
static __device__ __forceinline__ void ks_direct(const knn_params &p, const float (&acc)[64], const float *xn, float qn,
                                                 int h, uint32_t pm, int rb, int64_t n0, int64_t qq) {
    uint32_t at = atomicAdd(&p.cnt[qq], (uint32_t)__popc(pm));
    for (uint32_t mm = pm; mm; mm &= mm - 1, at++) {
        const int bit = __ffs(mm) - 1, row = rb + 8 * (bit >> 1) + (bit & 1);
        const float sc = ks_entry<IP>(p, acc, xn, qn, h, bit, row);
        if ((int64_t)at < p.cap) {
            p.ckey[qq * p.cap + at] = ltk_key32(__float_as_uint(sc));
            p.crel[qq * p.cap + at] = (uint32_t)(n0 + row);
        }
    }
}

/* Every entry of query qq in these 128 rows passes in each lane of the quad (pm all ones: a tie
 * class below its position bound, a flat corpus): one atomic a quad, and the slots in row order,
 * so that a warp's store covers one 32-byte sector a quad instead of one a lane, and each score is
 * read from the accumulator at a compile-time index. Why: an item whose 16K entries all passed
 * went through ks_direct, a returning atomic a lane and 32 sectors a store, and delayed its CTA by
 * ~40 us, which the persistent schedule then added to the whole scan (B = 64, N = 1M x 768 bf16,
 * all base rows equal: the gated scan 414-420 us against 373 for clustered rows, ncu; the same
 * bytes from DRAM, fewer instructions). Called quad-uniformly. */
template <bool IP>
static __device__ __forceinline__ void ks_direct_full(const knn_params &p, const float (&acc)[64], const float *xn,
                                                      float qn, int h, int half, int lane, int64_t n0, int64_t qq) {
    const unsigned qm = 0xfu << (lane & 28);
    uint32_t base = 0;
    if ((lane & 3) == 0) base = atomicAdd(&p.cnt[qq], 128u);
    base = __shfl_sync(qm, base, lane & 28);
    const int q = lane & 3;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const int off = 8 * j + 2 * q + b, row = half * 128 + off;
            const float v = acc[4 * j + 2 * h + b];
            const float sc = IP ? v + 0.0f : knn_score(v, qn, xn[row], p.metric);
            const int64_t at = (int64_t)base + off;
            if (at < p.cap) {
                p.ckey[qq * p.cap + at] = ltk_key32(__float_as_uint(sc));
                p.crel[qq * p.cap + at] = (uint32_t)(n0 + row);
            }
        }
}

template <bool IP, bool FULL>
static __device__ __forceinline__ void ks_gate(const knn_params &p, const float (&acc)[64], const float *xn,
                                               const float (&qn_r)[2], const uint32_t (&thr_r)[2], int half, int lane,
                                               int64_t n0, int qa, ks_list *l, int &fill) {
    const int rb = half * 128 + 2 * (lane & 3);
    uint32_t pm[2];
    ks_mask<IP>(p, acc, xn, qn_r, thr_r, half, lane, n0, qa, pm);
    const int nt = __popc(pm[0]) + __popc(pm[1]);
    int incl = nt; /* warp inclusive scan of the passes */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(LTK_FULL, incl, o);
        if (lane >= o) incl += y;
    }
    const int tot = __shfl_sync(LTK_FULL, incl, 31);
    if (tot == 0) return;
    if (fill + tot > KS_LIST) {
        ks_flush(p, l, fill, lane);
        fill = 0;
    }
    if (tot > KS_LIST) { /* more than a list in one item (a low threshold): straight to global memory */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            /* (FULL: not in the 128-query build, where ptxas then spilled 112 bytes in the loop) */
            const uint32_t full = FULL ? __ballot_sync(LTK_FULL, pm[h] == 0xffffffffu) : 0u;
            if (FULL && ((full >> (lane & 28)) & 0xfu) == 0xfu) ks_direct_full<IP>(p, acc, xn, qn_r[h], h, half, lane, n0, qa + 8 * h);
            else if (pm[h]) ks_direct<IP>(p, acc, xn, qn_r[h], h, pm[h], rb, n0, qa + 8 * h);
        }
        return;
    }
    int at = fill + incl - nt;
#pragma unroll
    for (int h = 0; h < 2; h++)
        for (uint32_t mm = pm[h]; mm; mm &= mm - 1, at++) {
            const int bit = __ffs(mm) - 1, row = rb + 8 * (bit >> 1) + (bit & 1);
            const float sc = ks_entry<IP>(p, acc, xn, qn_r[h], h, bit, row);
            l->key[at] = ltk_key32(__float_as_uint(sc));
            l->rel[at] = (uint32_t)(n0 + row);
            l->q[at] = (uint16_t)(qa + 8 * h);
        }
    fill += tot;
}

/* ---- per-query staging (64-query items, one query block; other shapes stage in one list a warp)
 * A warp's 16 queries (qw .. qw + 15) each get a sub-list of KS_SUB entries in the warp's list
 * (key / rel [KS_SUB lq + i]); when one would overflow, the warp flushes all 16: one atomic a
 * query and contiguous runs of up to KS_SUB entries, instead of one atomic per distinct query of
 * each 32 entries and two scattered 4-byte stores an entry. Why: at k = 8,192 (B = 64, N = 1M)
 * the gated scan ran ~38 us longer than at k = 1,024 with DRAM throughput 80% against 90% and L2
 * already at 95% (ncu); the scattered candidate writes' L2 transactions were the cost.
 * Measured in one process: 422 -> 385-391 us at k = 8192, 378 -> 375 at k = 1024. */
#define KS_SUB (KS_LIST / 16)
static __device__ __forceinline__ __attribute__((unused)) void ks_flush_sub(const knn_params &p, ks_list *l, int qw, int lane,
                                                    const uint32_t (&sf)[2]) {
    uint32_t *fills = (uint32_t *)l->q; /* 16 counts in the q array, unused by this path */
    if ((lane & 3) == 0) {
        fills[lane >> 2] = sf[0];
        fills[(lane >> 2) + 8] = sf[1];
    }
    __syncwarp(); /* the counts and the lanes' staging stores */
    uint32_t f = 0, base = 0;
    if (lane < 16) {
        f = fills[lane];
        if (f) base = atomicAdd(&p.cnt[qw + lane], f);
    }
#pragma unroll
    for (int idx0 = 0; idx0 < 16 * KS_SUB; idx0 += 32) { /* a half-warp a sub-list */
        const int idx = idx0 + lane, sub = idx / KS_SUB, i = idx % KS_SUB;
        const uint32_t fs = __shfl_sync(LTK_FULL, f, sub), bs = __shfl_sync(LTK_FULL, base, sub);
        const int64_t pos = (int64_t)bs + i;
        if (i < (int)fs && pos < p.cap) {
            const int64_t g = (int64_t)(qw + sub) * p.cap + pos;
            p.ckey[g] = l->key[idx];
            p.crel[g] = l->rel[idx];
        }
    }
    __syncwarp(); /* the lists are read before they are refilled */
}

/* ks_gate with per-query sub-lists; sf[h]: the fill of this lane's sub-list (lane / 4) + 8 h (the
 * same in the lane's quad). */
template <bool IP>
static __device__ __forceinline__ void ks_gate_sub(const knn_params &p, const float (&acc)[64], const float *xn,
                                                   const float (&qn_r)[2], const uint32_t (&thr_r)[2], int half,
                                                   int lane, int64_t n0, int qa, ks_list *l, uint32_t (&sf)[2]) {
    const int rb = half * 128 + 2 * (lane & 3), qw = qa - (lane >> 2), ql = lane & 3;
    uint32_t pm[2];
    ks_mask<IP>(p, acc, xn, qn_r, thr_r, half, lane, n0, qa, pm);
    uint32_t off[2], tq[2]; /* this lane's offset in its quad's passes of query h, the quad's total */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t c = __popc(pm[h]);
        uint32_t x = c, y = __shfl_up_sync(LTK_FULL, x, 1, 4);
        if (ql >= 1) x += y;
        y = __shfl_up_sync(LTK_FULL, x, 2, 4);
        if (ql >= 2) x += y;
        tq[h] = __shfl_sync(LTK_FULL, x, 3, 4);
        off[h] = x - c;
    }
    if (!__any_sync(LTK_FULL, tq[0] | tq[1])) return;
    if (__any_sync(LTK_FULL, sf[0] + tq[0] > KS_SUB || sf[1] + tq[1] > KS_SUB)) {
        ks_flush_sub(p, l, qw, lane, sf);
        sf[0] = sf[1] = 0u;
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (tq[h] == 128u) { /* (quad-uniform) every entry */
            ks_direct_full<IP>(p, acc, xn, qn_r[h], h, half, lane, n0, qa + 8 * h);
            continue;
        }
        if (tq[h] > KS_SUB) { /* (quad-uniform) more than a sub-list in one item: straight to global memory */
            if (pm[h]) ks_direct<IP>(p, acc, xn, qn_r[h], h, pm[h], rb, n0, qa + 8 * h);
            continue;
        }
        const int lq = (lane >> 2) + 8 * h;
        uint32_t at = sf[h] + off[h];
        for (uint32_t mm = pm[h]; mm; mm &= mm - 1, at++) {
            const int bit = __ffs(mm) - 1, row = rb + 8 * (bit >> 1) + (bit & 1);
            const float sc = ks_entry<IP>(p, acc, xn, qn_r[h], h, bit, row);
            l->key[lq * KS_SUB + at] = ltk_key32(__float_as_uint(sc));
            l->rel[lq * KS_SUB + at] = (uint32_t)(n0 + row);
        }
        sf[h] += tq[h];
    }
}

template <int DT, int MODE, int QI>
__global__ void __launch_bounds__(KS_THREADS, 1)
    ks_score_kernel(const __grid_constant__ CUtensorMap tm_x, const __grid_constant__ CUtensorMap tm_q,
                    const knn_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef ks_cfg<QI> cfg;
    const int KS_NST = cfg::NST, KS_STAGE_BYTES = cfg::STAGE_BYTES, NACC = cfg::NACC;
    extern __shared__ __align__(1024) uint8_t smem[];
    uint8_t *stages = smem; /* stage s: base tile at s * KS_STAGE_BYTES, query tile after it */
    ks_misc<QI> *m = (ks_misc<QI> *)(smem + KS_NST * KS_STAGE_BYTES);

    const int64_t ntiles = (p.n + KS_BN - 1) / KS_BN;
    const int qblocks = (p.nq + QI - 1) / QI;
    const int64_t items = ntiles * qblocks;
    /* uniform: nothing to redo (fb_any holds one flag per KNN_BQ queries, then the "any" slot) */
    if ((MODE == KNN_HIST || MODE == KNN_TAKE) && !p.fb_any[(p.nq + KNN_BQ - 1) / KNN_BQ]) return;
    if ((int64_t)blockIdx.x >= items) return;
    const int nk = (p.D + KS_BK - 1) / KS_BK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    if (threadIdx.x == 0) {
        for (int s = 0; s < KS_NST; s++) {
            ltk_mbar_init(&m->full[s], 1);
            ltk_mbar_init(&m->empty[s], KS_MATH_WARPS);
        }
        ltk_fence_mbar_init();
        ltk_tma_prefetch_desc(&tm_x);
        ltk_tma_prefetch_desc(&tm_q);
    }
    __syncthreads();

    if (warp < 4) {
        /* ---- producer: one thread streams (item, k-step) pairs through the ring ---- */
        if (QI == 128) ltk_setmaxnreg_dec<KS_REG_PRODUCER>();
        if (threadIdx.x != 0) return;
        int stage = 0;
        uint32_t phase = 0;
        for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
            const int32_t n0 = (int32_t)((w / qblocks) * KS_BN), q0 = (int32_t)(w % qblocks) * QI;
            for (int kt = 0; kt < nk; kt++) {
                ks_wait(&m->empty[stage], phase ^ 1u);
                uint8_t *a = stages + stage * KS_STAGE_BYTES;
                ltk_mbar_arrive_expect_tx(&m->full[stage], KS_STAGE_BYTES);
                ltk_tma_load_2d(a, &tm_x, &m->full[stage], kt * KS_BK, n0);
                ltk_tma_load_2d(a + KS_X_BYTES, &tm_q, &m->full[stage], kt * KS_BK, q0);
                if (++stage == KS_NST) {
                    stage = 0;
                    phase ^= 1u;
                }
            }
        }
        return;
    }

    /* ---- math warp groups: each on its own, meeting the other only at the ring's barriers (and,
     * for L2 / cosine with 128-query items, where each group reads the other's |x|^2) ---- */
    if (QI == 128) ltk_setmaxnreg_inc<KS_REG_MATH>();
    const int mt = threadIdx.x - 128;            /* 0..255: also the base row whose |x|^2 it sums */
    const int wg = mt >> 7, wl = (mt >> 5) & 3;
    const int qg = QI == 128 ? 64 * wg : 0;      /* the group's first query in the item */
    const int qa = qg + 16 * wl + (lane >> 2);   /* this thread's queries: qa and qa + 8 */
    const bool need_xn = p.metric != LTK_METRIC_IP;
    /* GATE: this warp's staging list (an expression, not a live register: the 128-query build's
     * math threads hold 128 accumulators) and its fill (warp-uniform) */
#define KS_MY_LIST ((ks_list *)((uint8_t *)m + sizeof(ks_misc<QI>)) + (mt >> 5))
    int fill = 0;
    uint32_t sf[2] = {0u, 0u}; /* (per-query staging) */
    const bool subl = MODE == KNN_GATE && QI == 64 && qblocks == 1;
    float acc[NACC][64];
#pragma unroll
    for (int s2 = 0; s2 < NACC; s2++)
#pragma unroll
        for (int i = 0; i < 64; i++) acc[s2][i] = 0.0f; /* (overwritten: the first k-step has scale-d 0) */
    int stage = 0;
    uint32_t phase = 0;
    int64_t it = 0;
    for (int64_t w = blockIdx.x; w < items; w += gridDim.x, it++) {
        const int64_t n0 = (w / qblocks) * KS_BN;
        const int q0 = (int)(w % qblocks) * QI;
        float qn_r[2] = {0.0f, 0.0f};
        uint32_t thr_r[2] = {0xffffffffu, 0xffffffffu};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int qq = q0 + qa + 8 * h;
            if (qq < p.nq) {
                if (need_xn) qn_r[h] = p.qn[qq];
                /* past the query's tie bound only keys above its threshold (the bound is a multiple
                 * of 256, KS_BN: the item's rows lie on one side of it) */
                if (MODE == KNN_GATE) thr_r[h] = p.thr[qq] + (uint32_t)(n0 >= (int64_t)p.thr_lim[qq]);
            }
        }
        float *xn = m->xn[it & 1];
        /* 64-query items: this group's previous epilogue has read its xn (its own rows only) */
        if (QI == 64) ltk_named_bar_sync(1 + wg, 128);
        float xs = 0.0f;
        int prev = 0;
        for (int kt = 0; kt < nk; kt++) {
            ks_wait(&m->full[stage], phase);
            const uint8_t *a = stages + stage * KS_STAGE_BYTES;
#pragma unroll
            for (int s2 = 0; s2 < NACC; s2++)
#pragma unroll
                for (int i = 0; i < 64; i++) ltk_fence_operand(acc[s2][i]);
            ltk_wgmma_fence();
            if (QI == 64) {
                const uint64_t da = ltk_desc_sw128(a + KS_X_BYTES);
                const uint64_t db = ltk_desc_sw128(a + wg * (128 * 128));
#pragma unroll
                for (int kk = 0; kk < 4; kk++) ltk_wgmma_m64n128k16_16b<DT>(acc[0], da + 2 * kk, db + 2 * kk, kt > 0 || kk > 0);
            } else {
                const uint64_t da = ltk_desc_sw128(a + KS_X_BYTES + wg * (64 * 128));
#pragma unroll
                for (int s2 = 0; s2 < NACC; s2++) {
                    const uint64_t db = ltk_desc_sw128(a + s2 * (128 * 128));
#pragma unroll
                    for (int kk = 0; kk < 4; kk++)
                        ltk_wgmma_m64n128k16_16b<DT>(acc[s2], da + 2 * kk, db + 2 * kk, kt > 0 || kk > 0);
                }
            }
            ltk_wgmma_commit();
            if (need_xn) { /* while the tensor cores run: this thread's base row, in element order */
#pragma unroll
                for (int c = 0; c < 8; c++) xs = ks_sq8<DT>(a, mt, c, xs);
            }
            if (kt > 0) { /* step kt-1 is done: its stage goes back to the producer */
                ltk_wgmma_wait<1>();
                if (lane == 0) ltk_mbar_arrive(&m->empty[prev]);
            }
            prev = stage;
            if (++stage == KS_NST) {
                stage = 0;
                phase ^= 1u;
            }
        }
        ltk_wgmma_wait<0>();
#pragma unroll
        for (int s2 = 0; s2 < NACC; s2++)
#pragma unroll
            for (int i = 0; i < 64; i++) ltk_fence_operand(acc[s2][i]);
        if (lane == 0) ltk_mbar_arrive(&m->empty[prev]);
        if (need_xn) xn[mt] = xs;
        /* xn of the rows this thread reads is visible: its own group's (64-query items), both groups'
         * (128-query items; the other parity buffer is still being read by the slower group, which
         * passed this barrier of the previous item before either could write it again) */
        if (QI == 64) ltk_named_bar_sync(1 + wg, 128);
        else if (need_xn) ltk_named_bar_sync(1, 256);
        if ((MODE == KNN_HIST || MODE == KNN_TAKE) && !p.fb_any[(q0 + qg) / KNN_BQ]) continue;
#pragma unroll
        for (int s2 = 0; s2 < NACC; s2++) {
            const int half = QI == 64 ? wg : s2; /* which 128 rows of the item acc[s2] holds */
            if constexpr (MODE == KNN_GATE) {
                /* inner product (the common case) without the |x|^2 reads: fewer live registers */
                if (subl) {
                    if (p.metric == LTK_METRIC_IP) ks_gate_sub<true>(p, acc[s2], xn, qn_r, thr_r, half, lane, n0, q0 + qa, KS_MY_LIST, sf);
                    else ks_gate_sub<false>(p, acc[s2], xn, qn_r, thr_r, half, lane, n0, q0 + qa, KS_MY_LIST, sf);
                } else if (p.metric == LTK_METRIC_IP) ks_gate<true, QI == 64>(p, acc[s2], xn, qn_r, thr_r, half, lane, n0, q0 + qa, KS_MY_LIST, fill);
                else ks_gate<false, QI == 64>(p, acc[s2], xn, qn_r, thr_r, half, lane, n0, q0 + qa, KS_MY_LIST, fill);
            } else {
#pragma unroll
                for (int j = 0; j < 16; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int h = e >> 1, row = half * 128 + 8 * j + 2 * (lane & 3) + (e & 1);
                        const float sc = knn_score(acc[s2][4 * j + e], qn_r[h], xn[row], p.metric);
                        knn_emit<MODE>(p, thr_r, thr_r, n0 + row, q0 + qa + 8 * h, h, sc);
                    }
            }
        }
    }
    if (subl) {
        if (__any_sync(LTK_FULL, sf[0] | sf[1])) ks_flush_sub(p, KS_MY_LIST, qa - (lane >> 2), lane, sf); /* (q0 = 0) */
    } else if (MODE == KNN_GATE && fill) ks_flush(p, KS_MY_LIST, fill, lane);
#undef KS_MY_LIST
#endif
}

/* ---- host ------------------------------------------------------------------------------------- */
static int ks_image_ok(void) {
    static int ok = -1;
    if (ok < 0) {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, ks_score_kernel<2, KNN_GATE, 64>);
        if (e != cudaSuccess) (void)cudaGetLastError();
        ok = e == cudaSuccess && fa.binaryVersion == 90;
    }
    return ok;
}

int ltk_knn_sm90_enabled(int cc_major, int cc_minor) {
    if (ltk_tune_get()->cuda_portable) return 0;
    if (cc_major != 9 || cc_minor != 0 || ltk_cuda_tmap_encoder() == NULL) return 0;
    return ks_image_ok();
}

int ltk_knn_sm90_fits(const knn_params &p, int dt) {
    if (dt != 1 && dt != 2) return 0; /* fp32 keeps the exact SIMT loop */
    if (!p.vec || p.n > INT32_MAX) return 0;
    /* TMA: 16-byte aligned rows and row strides */
    return !(((uintptr_t)p.x & 15) || ((uintptr_t)p.q & 15) || ((p.x_stride * 2) & 15) || ((p.q_stride * 2) & 15));
}

static ltk_status ks_tmap(CUtensorMap *tm, const void *base, int D, int64_t rows, int64_t stride, int box_rows, int dt) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)ltk_cuda_tmap_encoder();
    if (!enc) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled is not available from the driver");
    cuuint64_t dim[2] = {(cuuint64_t)D, (cuuint64_t)(rows > 0 ? rows : 1)};
    cuuint64_t str[1] = {(cuuint64_t)stride * 2};
    cuuint32_t box[2] = {KS_BK, (cuuint32_t)box_rows}, one[2] = {1, 1};
    CUresult r = enc(tm, dt == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)base,
                     dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled (kNN) failed with CUresult %d", (int)r);
    return LTK_OK;
}

/* 128-query items from this many queries in a launch (the test hook ltk_tune.cuda_knn_qi64 keeps
 * 64-query items): below it the second group's 64 queries would be mostly padding. */
#define KS_QI128_MIN 256
static int ks_qi128_allowed(void) { return !ltk_tune_get()->cuda_knn_qi64; }

template <int DT, int MODE, int QI> static ltk_status ks_launch(const knn_params &p, int sms, cudaStream_t st) {
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)ks_score_kernel<DT, MODE, QI>, (size_t)ks_smem<QI, MODE>()));
    CUtensorMap tx, tq;
    LTK_FORWARD_IF(ks_tmap(&tx, p.x, p.D, p.n, p.x_stride, KS_BN, DT));
    LTK_FORWARD_IF(ks_tmap(&tq, p.q, p.D, p.nq, p.q_stride, QI, DT));
    const int64_t items = ((p.n + KS_BN - 1) / KS_BN) * ((p.nq + QI - 1) / QI);
    const int grid = (int)(items < sms ? items : sms);
    if (grid < 1) return LTK_OK;
    ks_score_kernel<DT, MODE, QI><<<grid, KS_THREADS, ks_smem<QI, MODE>(), st>>>(tx, tq, p);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

/* The register split above assumes a launch allocation of 168 a thread; with any other the math
 * groups could wait forever in setmaxnreg. Checked once per build of the kernel. */
template <int DT, int MODE> static int ks_qi128_regs_ok(void) {
    static int ok = -1;
    if (ok < 0) {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, ks_score_kernel<DT, MODE, 128>);
        if (e != cudaSuccess) (void)cudaGetLastError();
        ok = e == cudaSuccess && fa.numRegs == 168;
    }
    return ok;
}

template <int DT, int MODE> ltk_status ltk_knn_sm90_launch(const knn_params &p, int sms, cudaStream_t st) {
    if (p.nq >= KS_QI128_MIN && ks_qi128_allowed() && ks_qi128_regs_ok<DT, MODE>())
        return ks_launch<DT, MODE, 128>(p, sms, st);
    return ks_launch<DT, MODE, 64>(p, sms, st);
}

#define KS_INST(DT)                                                                                          \
    template ltk_status ltk_knn_sm90_launch<DT, KNN_STORE>(const knn_params &, int, cudaStream_t);            \
    template ltk_status ltk_knn_sm90_launch<DT, KNN_GATE>(const knn_params &, int, cudaStream_t);             \
    template ltk_status ltk_knn_sm90_launch<DT, KNN_HIST>(const knn_params &, int, cudaStream_t);             \
    template ltk_status ltk_knn_sm90_launch<DT, KNN_TAKE>(const knn_params &, int, cudaStream_t);
KS_INST(1)
KS_INST(2)
