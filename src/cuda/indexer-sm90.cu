/* sm_90a scoring kernel of the indexer: FP8 e4m3 wgmma with fp32 accumulation, TMA loads into a
 * multi-stage mbarrier pipeline, one producer warp group and four math warp groups, a persistent
 * grid of one CTA per SM, and the LiteTopK epilogue (gate, per-warp staging lists, histogram,
 * threshold refresh by an otherwise idle producer-group warp). The key scales of each tile come
 * by TMA with the tile.
 *
 * Tiles. A CTA's work unit is (q-block, key split): BQ = 128/H query rows, so the B operand is the
 * BQ x H query-heads (N = 128) times D = 128; the A operand is a tile of 256 keys, 64 per math warp
 * group (wgmma m64n128k32, four K steps). Units run split-major so that the CTAs resident at one
 * time stream the same key tiles (L2 reuse across the 132 SMs).
 *
 * Epilogue per (key, query), all on CUDA cores while the next tile's wgmma runs in the other warp
 * groups: relu(acc) * w summed over the thread's heads, a 4-lane reduce-scatter (each lane ends
 * with whole (key, query) sums), * kv_scale. The same code produces the scores of every mode
 * (fused, score-only, materialize, and the sample pass), so the scores are identical bits in all
 * of them; the fused mode gates `score >= edge(th)` against the row's current threshold. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <string.h>

#include "indexer.cuh"
#include "ptx.cuh"

#define SM90_BKV 256
/* Kernel variants (template VAR): the plain scan (contiguous keys or a paged cache, every mode but
 * block maxima), the candidate indexer's block maxima (LTK_SCAN_BLOCKMAX) and its listed blocks
 * (ltk_paged_src.contig). */
enum { SM90_VAR_PLAIN = 0, SM90_VAR_BLOCKMAX = 1, SM90_VAR_LISTED = 2 };
/* The scales of an unmapped listed sub-block (cp.async copies them: it cannot fill a NaN). */
__device__ __align__(16) const float sm90_nan4[4] = {__builtin_nanf(""), __builtin_nanf(""), __builtin_nanf(""),
                                                     __builtin_nanf("")};
#define SM90_MATH_WG 4
#define SM90_THREADS (128 * (1 + SM90_MATH_WG))
#define SM90_MATH_WARPS (4 * SM90_MATH_WG)
#define SM90_WSTRIDE 36 /* floats per lane-quad weight row (padding: conflict-free 16-byte loads) */
/* Register split. setmaxnreg.inc takes registers only from the CTA's pool, which holds what
 * setmaxnreg.dec released: 128 * (launch - producer) must cover 512 * (math - launch), or the math
 * warps wait forever (the first version asked for 8192 with 7168 released and hung). The launch
 * allocation is the __launch_bounds__ cap, 65536 / 640 rounded down to 8 = 96; the host checks
 * that ptxas kept it (cudaFuncAttributes::numRegs) before it uses this kernel. */
#define SM90_REG_LAUNCH ((65536 / SM90_THREADS) & ~7)
#define SM90_REG_PRODUCER 32
#define SM90_PAGED_PRODUCERS 3 /* producer warps of a paged source (warps 0, 2, 3; see the producer) */
#define SM90_REG_MATH 112
static_assert(128 * (SM90_REG_LAUNCH - SM90_REG_PRODUCER) >= 128 * SM90_MATH_WG * (SM90_REG_MATH - SM90_REG_LAUNCH),
              "setmaxnreg: the math warps would ask the CTA pool for more registers than the producer releases");

/* Per-row state of the current unit, in shared memory. */
struct sm90_row {
    float edge;   /* gate: score >= edge (refreshed by the refresh warp, plain store) */
    int32_t th;   /* threshold bin behind edge */
    float smin, delta;
    int32_t lo, hi; /* scanned keys [lo, hi) (clamped range within the column window; empty = skip) */
    int32_t lr;     /* local row, -1 if none */
    int32_t valid;
};

template <int H> struct sm90_cfg {
    enum {
        /* TMA stages in flight: 5 where shared memory allows (H = 64, 32: 221-223 KB of 227); H =
         * 16's larger staging lists leave room for 4. Why: streamed from HBM (decode) the scan kept
         * 57% of the DRAM bandwidth busy with 4, its warps waiting on the stages' data (ncu, B = 8
         * at 1M, score only). Measured with 5: prefill fused T = 8192, S = 1M 147.1 ms (148.2-148.4
         * with 4; litetopk bench dsa, base and new builds alternating in one call); decode within the ~15% a
         * call varies between processes. */
        NSTAGE = H == 16 ? 4 : 5,
        BQ = 128 / H,
        NE = 2 * BQ / 4,                   /* owned (key, query) sums per lane after the reduce-scatter */
        LISTQ = H == 64 ? 64 : 32,         /* staging entries per (warp, query) */
        LANE_Q = NE >= 2 ? NE / 2 : 1,     /* queries a lane owns sums of (one list slot each) */
        LANE_ADD = NE >= 2 ? 2 : 1,        /* sums a lane adds to one slot per tile, at most */
        LANE_CAP = BQ * LISTQ / 32 / LANE_Q, /* staged entries per (lane, slot): 4 for H = 16, 32, 64 */
        JPQ = H / 8,                       /* accumulator column groups (of 8) per query */
        KV_BYTES = NSTAGE * SM90_BKV * 128,
        Q_BYTES = 2 * 128 * 128,
        STAGE_BYTES = SM90_MATH_WARPS * BQ * LISTQ * 8,
        HIST_BYTES = BQ * LTK_NB * 4,
        W_BYTES = 4 * SM90_WSTRIDE * 4,
        KVS_BYTES = NSTAGE * SM90_BKV * 4, /* kv_scale of each stage's keys */
        OFF_Q = KV_BYTES,
        OFF_KVS = OFF_Q + Q_BYTES, /* 1024-aligned: a TMA destination */
        OFF_STAGE = OFF_KVS + KVS_BYTES,
        OFF_HIST = OFF_STAGE + STAGE_BYTES,
        OFF_W = OFF_HIST + HIST_BYTES,
        OFF_ROW = OFF_W + W_BYTES,
        OFF_MISC = OFF_ROW + 8 * (int)sizeof(sm90_row),
        OFF_BAR = OFF_MISC + 16,
        SMEM = OFF_BAR + 8 * (2 * NSTAGE + 4) + 1024 /* base alignment slack */
    };
};

static_assert(sm90_cfg<16>::SMEM <= 232448 && sm90_cfg<32>::SMEM <= 232448 && sm90_cfg<64>::SMEM <= 232448,
              "the sm_90a scan's shared memory exceeds the 227 KB a CTA may opt in to on sm_90");
static_assert(sm90_cfg<16>::LANE_CAP > sm90_cfg<16>::LANE_ADD && sm90_cfg<32>::LANE_CAP > sm90_cfg<32>::LANE_ADD &&
                  sm90_cfg<64>::LANE_CAP > sm90_cfg<64>::LANE_ADD,
              "a lane's list must hold a tile's passes after a flush");

/* The device code below exists only in the sm_90a pass (other passes compile an empty kernel). */
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Row bookkeeping shared by all roles (each computes it from global memory, identically). */
static __device__ __forceinline__ int64_t sm90_nrows(const ltk_scan_params &p) {
    if (!p.row_list) return p.nrows;
    int64_t c = (int64_t)*(volatile const int32_t *)p.row_count - p.list_off;
    return c < 0 ? 0 : (c > p.nrows ? p.nrows : c);
}
static __device__ __forceinline__ int64_t sm90_abs_row(const ltk_scan_params &p, int64_t lr) {
    return p.row_list ? (int64_t)p.row_list[p.list_off + lr] : p.row0 + lr;
}
/* Local row of slot q of q-block qb, or nrows for an empty slot (ltk_scan_params.group: with
 * groups, a q-block holds rows of one group only, and slots past the group's end are empty). */
template <int BQ>
static __device__ __forceinline__ int64_t sm90_unit_row(const ltk_scan_params &p, int64_t qb, int q, int64_t nrows) {
    if (p.group <= 0) return qb * BQ + q;
    /* 32-bit: q-blocks and rows are < 2^31, and a 64-bit division is a call (a stack frame, spills) */
    const uint32_t qpg = ((uint32_t)p.group + BQ - 1) / BQ, g = (uint32_t)qb / qpg;
    const uint32_t sub = ((uint32_t)qb - g * qpg) * BQ + q;
    const int64_t lr = (int64_t)g * p.group + sub;
    return sub < (uint32_t)p.group && lr < nrows ? lr : nrows;
}
/* Scanned range of local row lr (empty when the row is absent or answered without a scan). */
static __device__ __forceinline__ void sm90_scan_range(const ltk_scan_params &p, int64_t lr, int64_t nrows,
                                                       int32_t *lo, int32_t *hi) {
    *lo = 0;
    *hi = 0;
    if (lr >= nrows) return;
    int64_t t = sm90_abs_row(p, lr), a, b;
    ltk_row_range(p.ks, p.ke, t, p.S, &a, &b);
    if (p.skip_short && b - a <= p.k) return;
    a = a > p.col_lo ? a : p.col_lo;
    b = b < p.col_hi ? b : p.col_hi;
    if (a < b) {
        *lo = (int32_t)a;
        *hi = (int32_t)b;
    }
}
/* Smallest tile >= t (and < t1) that some row of the unit can see; t1 if none. */
template <int BQ>
static __device__ __forceinline__ int32_t sm90_next_tile(int32_t t, int32_t t1, const int32_t *lo, const int32_t *hi) {
    int32_t best = t1;
#pragma unroll
    for (int q = 0; q < BQ; q++) {
        if (lo[q] < hi[q]) {
            int32_t a = lo[q] / SM90_BKV, b = (hi[q] - 1) / SM90_BKV;
            int32_t c = t > a ? t : a;
            if (c <= b && c < best) best = c;
        }
    }
    return best;
}
/* Tile range [t0, t1) of split s of the unit's rows. */
template <int BQ>
static __device__ __forceinline__ void sm90_split_tiles(const int32_t *lo, const int32_t *hi, int s, int nsplit,
                                                        int32_t *t0, int32_t *t1) {
    int32_t a = 0x7fffffff, b = 0;
#pragma unroll
    for (int q = 0; q < BQ; q++) {
        if (lo[q] < hi[q]) {
            int32_t x = lo[q] / SM90_BKV, y = (hi[q] - 1) / SM90_BKV + 1;
            a = x < a ? x : a;
            b = y > b ? y : b;
        }
    }
    if (a >= b) {
        *t0 = *t1 = 0;
        return;
    }
    int32_t per = (b - a + nsplit - 1) / nsplit;
    int32_t x = a + s * per, y = x + per;
    *t0 = x < b ? x : b;
    *t1 = y < b ? y : b;
}

/* 1 if the union of the unit's visible tile ranges has no gap, so that the tile after t is t + 1
 * (the common case: the rows of a unit are neighbours). Then the math loop steps by one instead of
 * asking sm90_next_tile, ~8 instructions per row per tile in a loop that runs out of issue slots. */
template <int BQ>
static __device__ __forceinline__ bool sm90_tiles_contiguous(const int32_t *lo, const int32_t *hi) {
    int32_t bmax = -1;
#pragma unroll
    for (int q = 0; q < BQ; q++)
        if (lo[q] < hi[q]) bmax = max(bmax, (hi[q] - 1) / SM90_BKV);
    bool ok = true;
#pragma unroll
    for (int q = 0; q < BQ; q++) {
        if (!(lo[q] < hi[q])) continue;
        const int32_t e = (hi[q] - 1) / SM90_BKV + 1; /* the tile after row q's last */
        if (e > bmax) continue;
        bool covered = false;
#pragma unroll
        for (int r = 0; r < BQ; r++)
            covered |= lo[r] < hi[r] && lo[r] / SM90_BKV <= e && e <= (hi[r] - 1) / SM90_BKV;
        ok &= covered;
    }
    return ok;
}

/* Block-table entry blk of a paged unit (-1 past the table or past what its rows see); the range
 * check against the cache is made where it is used, so that the load is not waited for here. */
static __device__ __forceinline__ int32_t sm90_pg_fetch(const ltk_scan_params &p, const int32_t *btr, int32_t blk,
                                                        int32_t hmax) {
    return blk < p.pg.max_blocks && (int64_t)blk * p.pg.bkv < hmax ? btr[blk] : -1;
}

/* Watchdog of the spin waits (params.watchdog_ns, 0 = off). A wait that never ends cannot be
 * told from a slow kernel on the host; this records which role waited on what (unit, tile, stage,
 * parity) in host-mapped memory (params.diag, readable after the context is lost) and traps, so a
 * protocol bug becomes one line (printed by indexer.cu) and a launch error instead of a hang. Plain
 * stores, no printf: a call here would make ptxas spill in the math loop. Named barriers
 * (bar.sync) cannot be bounded: a stall there shows as the partner role reporting instead. */
static __device__ __forceinline__ void sm90_stall(int32_t *diag, int role, int what, int64_t u, int64_t it, int32_t t,
                                                  int stage, uint32_t parity, int32_t extra) {
    if (diag && atomicCAS(diag, 0, 1) == 0) {
        volatile int32_t *d = diag;
        d[1] = (int32_t)blockIdx.x;
        d[2] = (int32_t)threadIdx.x;
        d[3] = role; /* 0 producer, 1 refresh, 2 math */
        d[4] = what; /* 0 qempty, 1 kv empty, 2 qfull, 3 kv full, 4 done count */
        d[5] = (int32_t)u;
        d[6] = (int32_t)it;
        d[7] = t;
        d[8] = stage;
        d[9] = (int32_t)parity;
        d[10] = extra;
        __threadfence_system();
        d[0] = 2; /* record complete */
        __threadfence_system();
    }
    __trap();
}
static __device__ __forceinline__ void sm90_wait(uint64_t *bar, uint32_t parity, const ltk_scan_params &p, int role,
                                                 int what, int64_t u, int64_t it, int32_t t, int stage) {
    if (ltk_mbar_try_wait(bar, parity)) return;
    const uint64_t t0 = ltk_globaltimer();
    while (!ltk_mbar_try_wait(bar, parity)) {
        if (p.watchdog_ns > 0 && ltk_globaltimer() - t0 > (uint64_t)p.watchdog_ns)
            sm90_stall(p.diag, role, what, u, it, t, stage, parity, 0);
    }
}

/* One warp appends what its lanes staged to the rows' buffers. Each lane keeps its own list per
 * query it owns (slot j: the query (c * NE + 2j) / 2 of lane class c = lane & 3), so that staging
 * a passing sum is a plain shared store with no warp vote. Here the lanes owning one query (one
 * or two lane classes) sum their counts with a shuffle scan, one lane reserves the slots with one
 * atomicAdd, and each lane copies its entries. Slots past the capacity are counted but not
 * written (the row's count then exceeds cap and the host side redoes the row exactly). */
template <int NE, int LANE_Q, int LANE_CAP>
static __device__ __forceinline__ void sm90_flush_lanes(const ltk_scan_params &p, const sm90_row *row_s,
                                                        const ltk_cand *list, int32_t *n, int lane) {
    const int c = lane & 3;
#pragma unroll
    for (int j = 0; j < LANE_Q; j++) {
        const int v = n[j];
        int incl = v; /* inclusive prefix over the lanes of class c (lanes c, c + 4, ...) */
#pragma unroll
        for (int d = 4; d < 32; d <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, incl, d);
            if (lane >= d) incl += y;
        }
        int excl = incl - v;
        int qtot = __shfl_sync(0xffffffffu, incl, 28 + c);
        if (NE == 1) { /* classes 2q and 2q + 1 own query q: the even class goes first */
            const int other = __shfl_sync(0xffffffffu, incl, 28 + (c ^ 1));
            if (c & 1) excl += other;
            qtot += other;
        }
        const int leader = NE == 1 ? (c & ~1) : c;
        const int q = (c * NE + 2 * j) >> 1;
        const int32_t lr = row_s[q].lr;
        int32_t base = 0;
        if (lane == leader && qtot > 0) base = atomicAdd(p.cand_cnt + lr, qtot);
        base = __shfl_sync(0xffffffffu, base, leader);
        for (int e = 0; e < v; e++) {
            const int64_t pos = (int64_t)base + excl + e;
            if (pos < p.cap) p.cand[(int64_t)lr * p.cap + pos] = list[(j * LANE_CAP + e) * 32 + lane];
        }
        n[j] = 0;
    }
}

#endif

/* NN: the wgmma N, the query-heads of a q-block that exist (128; 64 or 32 when a decode request has
 * fewer rows than the q-block's BQ: the slots past NN / H are then empty and cost no tensor work). */
template <int NN> static __device__ __forceinline__ void sm90_wgmma(float *acc, uint64_t da, uint64_t db, int kk) {
    if (NN == 128) ltk_wgmma_m64n128k32_e4m3(acc, da, db, kk);
    else if (NN == 64) ltk_wgmma_m64n64k32_e4m3(acc, da, db, kk);
    else ltk_wgmma_m64n32k32_e4m3(acc, da, db, kk);
}

template <int H, int NN, int VAR>
__global__ void __launch_bounds__(SM90_THREADS, 1)
    ltk_sm90_scan_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_kv,
                         const __grid_constant__ CUtensorMap tm_ks, const ltk_scan_params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    ltk_pdl_wait(); /* (launched by ltk_launch_pdl: the kernel before it may still be finishing) */
    ltk_pdl_launch();
    typedef sm90_cfg<H> cfg;
    const int BQ = cfg::BQ, NE = cfg::NE, LANE_Q = cfg::LANE_Q, LANE_CAP = cfg::LANE_CAP;
    /* No static shared memory in this kernel: the dynamic buffer starts at the (1024-aligned) base
     * of the CTA's window, as the 128-byte swizzle of TMA and wgmma requires. Indexing the
     * __shared__ array directly keeps shared-space addressing (LDS/STS, not generic loads). */
    extern __shared__ __align__(1024) uint8_t smem[];
    uint8_t *kv_s = smem;
    uint8_t *q_s = smem + cfg::OFF_Q;
    ltk_cand *stage_s = (ltk_cand *)(smem + cfg::OFF_STAGE);
    int32_t *hist_s = (int32_t *)(smem + cfg::OFF_HIST);
    float *w_s = (float *)(smem + cfg::OFF_W);
    float *kvs_s = (float *)(smem + cfg::OFF_KVS);
    sm90_row *row_s = (sm90_row *)(smem + cfg::OFF_ROW);
    int32_t *done_s = (int32_t *)(smem + cfg::OFF_MISC);
    uint64_t *full_b = (uint64_t *)(smem + cfg::OFF_BAR);
    uint64_t *empty_b = full_b + cfg::NSTAGE;
    uint64_t *qfull_b = empty_b + cfg::NSTAGE;
    uint64_t *qempty_b = qfull_b + 2;

    const int64_t nrows = sm90_nrows(p);
    const int64_t nqb = ltk_scan_qblocks(nrows, BQ, p.group);
    const int64_t nunits = nqb * p.nsplit;
    if (nunits == 0) return; /* uniform: no barrier has been touched */

    /* via a shuffle so that the compiler knows warp (and wg, stage offsets, descriptors) are
     * warp-uniform: the descriptors are then built in uniform registers, not moved by R2UR */
    const int warp = __shfl_sync(0xffffffffu, (int)(threadIdx.x >> 5), 0), lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < cfg::NSTAGE; s++) {
            ltk_mbar_init(&full_b[s], VAR == SM90_VAR_LISTED ? 33 : 1); /* (listed: the lanes' scale copies too) */
            ltk_mbar_init(&empty_b[s], VAR == SM90_VAR_LISTED ? 32 * SM90_MATH_WARPS : SM90_MATH_WARPS);
        }
        for (int s = 0; s < 2; s++) {
            ltk_mbar_init(&qfull_b[s], 1);
            ltk_mbar_init(&qempty_b[s], SM90_MATH_WARPS);
        }
        ltk_fence_mbar_init();
        ltk_tma_prefetch_desc(&tm_q);
        ltk_tma_prefetch_desc(&tm_kv);
        if (p.kv_scale && VAR != SM90_VAR_LISTED) ltk_tma_prefetch_desc(&tm_ks); /* (listed blocks: no scale map) */
    }
    __syncthreads();

    const bool fused = p.mode == LTK_SCAN_FUSED;
    if (warp < 4) {
        /* ------ producer warp group: TMA warp, refresh warp, two warps idle (contiguous keys) or
         * producers too (a paged source) ------ */
        ltk_setmaxnreg_dec<SM90_REG_PRODUCER>();
        const bool paged = p.pg.cache != NULL;
        if (warp == 0 || (paged && warp >= 2)) {
            /* The TMA thread is lane 0; with a paged source the whole warp stays, each lane looking
             * up one cache block of a tile (a per-thread array of them spilled in the producer's
             * 32 registers), and lane 0 takes the entries by shuffle.
             * A paged source has SM90_PAGED_PRODUCERS producer warps (0, 2 and 3: the producer
             * group's otherwise idle ones), producer pw issuing the tiles whose place in the CTA's
             * tile sequence is pw modulo their count; every producer walks the whole sequence,
             * so the stages and phases stay the consumers'. Why: one block-table lookup and two TMAs
             * a cache block are ~300 producer instructions a 256-key tile, and one warp issuing them
             * was the scan's bound (ncu, B = 8 at 1M, next_n 1: the producer busy in every sample,
             * its empty-stage waits almost never taken, the math warps' full-stage wait 38% of all
             * stall samples, DRAM 73%; at next_n 4 the same wait 20%, DRAM 36%). */
            const int npw = paged ? SM90_PAGED_PRODUCERS : 1;
            const int pw = warp == 0 ? 0 : warp - 1;
            if (lane != 0 && !paged) return;
            int stage = 0, turn = 0; /* turn: the producer whose tile is next */
            uint32_t phase = 0;
            int64_t it = 0;
            for (int64_t u = blockIdx.x; u < nunits; u += gridDim.x, it++) {
                const int64_t qb = u % nqb;
                const int s = (int)(u / nqb);
                int32_t lo[BQ], hi[BQ];
#pragma unroll
                for (int q = 0; q < BQ; q++) sm90_scan_range(p, sm90_unit_row<BQ>(p, qb, q, nrows), nrows, &lo[q], &hi[q]);
                const int qs = (int)(it & 1);
                if (lane == 0 && pw == 0) {
                    sm90_wait(&qempty_b[qs], (uint32_t)((it >> 1) & 1) ^ 1u, p, 0, 0, u, it, -1, qs);
                    ltk_mbar_arrive_expect_tx(&qfull_b[qs], NN * 128);
#pragma unroll
                    for (int q = 0; q < NN / H; q++) {
                        int64_t lr = sm90_unit_row<BQ>(p, qb, q, nrows);
                        int64_t t = sm90_abs_row(p, lr < nrows ? lr : 0);
                        ltk_tma_load_3d(q_s + qs * 16384 + q * H * 128, &tm_q, &qfull_b[qs], 0, 0, (int32_t)t);
                    }
                }
                int32_t t0, t1;
                sm90_split_tiles<BQ>(lo, hi, s, p.nsplit, &t0, &t1);
                /* paged: the unit's rows are one request's; its block-table row, and the last
                 * position any of them sees (blocks past it are not looked up) */
                const int32_t *btr = NULL;
                int32_t hmax = 0;
                /* Block-table entries, 32 a window (lane l holds block base + l), the next window
                 * loaded when the current one is entered. Why: one table read per tile before its
                 * TMA made the producer wait a global-load latency every tile (~1.4 us a tile under
                 * full HBM load, H200: the scan at 3.1 TB/s, score only, B = 8 at 1M). */
                int32_t cur = -1, nxt = -1, cur_base = INT32_MIN / 2, nxt_base = INT32_MIN / 2;
                if (paged) {
                    btr = p.pg.bt + (int64_t)((uint32_t)sm90_abs_row(p, sm90_unit_row<BQ>(p, qb, 0, nrows)) /
                                              (uint32_t)p.pg.next_n) * p.pg.bt_stride;
#pragma unroll
                    for (int q = 0; q < BQ; q++) hmax = hi[q] > hmax ? hi[q] : hmax;
                }
                for (int32_t t = sm90_next_tile<BQ>(t0, t1, lo, hi); t < t1; t = sm90_next_tile<BQ>(t + 1, t1, lo, hi)) {
                    const bool mine = turn == pw;
                    if (++turn == npw) turn = 0;
                    if (!mine) {
                        /* (another producer's tile: only the stage moves on) */
                    } else if (paged) {
                        /* One box per cache block: the tile's 256 / bkv blocks land where one
                         * 256-row box would (each at a multiple of 1024 bytes, so the 128-byte
                         * swizzle is the same), their scales beside them. An unmapped block is a
                         * coordinate outside the map: TMA fills zero keys and NaN scales. */
                        const int nb = SM90_BKV / p.pg.bkv;
                        const int32_t need = t * nb;
                        if (need < cur_base || need + nb > cur_base + 32) {
                            if (need >= nxt_base && need + nb <= nxt_base + 32) {
                                cur = nxt;
                                cur_base = nxt_base;
                            } else {
                                cur_base = need;
                                cur = sm90_pg_fetch(p, btr, need + lane, hmax);
                            }
                            nxt_base = cur_base + 32;
                            nxt = sm90_pg_fetch(p, btr, nxt_base + lane, hmax); /* used a window later */
                        }
                        if (VAR == SM90_VAR_LISTED) {
                            /* Listed blocks of the key array (candidates.cu): a 2-D TMA box of the
                             * bkv rows id * bkv for each, issued by its own lane (past the array
                             * zero-filled), the default L2 policy, as neighbouring rows list many
                             * of the same blocks; the scales by cp.async (lane l rows 8 l .. 8 l + 7),
                             * each lane's copies one of the stage barrier's 1 + 32 arrivals. A box of
                             * a block's 8 scales (32 bytes) would land off the 128-byte alignment
                             * TMA wants of its destination. Why a lane a box, not a loop on lane 0:
                             * the loop's boxes of 1 KB cost ~47 ns each an SM, the scan growing
                             * linearly with their count (H200, T = 8192, 2048 blocks of 8 a row,
                             * score only: 8.9 ms, 3.6 in blocks of 64 for the same keys); issued by
                             * the lanes, 4.7 ms. (cp.async for the keys too, each producer waiting
                             * on its copies, was 11.6 ms: too few bytes in flight.) */
                            /* every lane waits for the stage itself, as every consumer lane frees it:
                             * its cp.async writes the scales the consumers read (an acquire by lane 0
                             * then __syncwarp left racecheck reporting hazards on them) */
                            sm90_wait(&empty_b[stage], phase ^ 1u, p, 0, 1, u, it, t, stage);
                            if (lane == 0) ltk_mbar_arrive_expect_tx(&full_b[stage], SM90_BKV * 128);
                            __syncwarp();
                            const int bsh = __ffs(p.pg.bkv) - 1, wnd = need - cur_base;
                            int32_t id = __shfl_sync(0xffffffffu, cur, (wnd + lane) & 31);
                            id = id >= 0 && id < p.pg.nblocks ? id : -1;
                            /* (contig 2, sub-blocks of cache pages: id = page * r + part) */
                            const int rsh = p.pg.contig == 2 ? __ffs(p.pg.page_kv >> bsh) - 1 : 0;
                            if (lane < nb) {
                                uint8_t *dst = kv_s + stage * (SM90_BKV * 128) + lane * p.pg.bkv * 128;
                                if (p.pg.contig == 2)
                                    ltk_tma_load_3d(dst, &tm_kv, &full_b[stage], 0,
                                                    id >= 0 ? (id & ((1 << rsh) - 1)) * p.pg.bkv : 0, id >= 0 ? id >> rsh : -1);
                                else
                                    ltk_tma_load_2d(dst, &tm_kv, &full_b[stage], 0, id >= 0 ? id * p.pg.bkv : -p.pg.bkv);
                            }
                            {
                                const int r = 8 * lane;
                                int32_t sid = __shfl_sync(0xffffffffu, id, r >> bsh);
                                const uint32_t sdst = ltk_smem_addr(kvs_s + stage * SM90_BKV + r);
                                if (p.pg.contig == 2) { /* the page's scales, or NaN for an unmapped one */
                                    const uint8_t *src = sid >= 0 ? (const uint8_t *)p.kv_scale +
                                                                        (int64_t)(sid >> rsh) * p.pg.bstride +
                                                                        4 * ((sid & ((1 << rsh) - 1)) * p.pg.bkv + (r & (p.pg.bkv - 1)))
                                                                  : (const uint8_t *)sm90_nan4;
#pragma unroll
                                    for (int h = 0; h < 2; h++) ltk_cp_async16_n(sdst + 16 * h, src + (sid >= 0 ? 16 * h : 0), 16u);
                                } else {
                                    const int64_t k0 = (int64_t)sid * p.pg.bkv + (r & (p.pg.bkv - 1));
#pragma unroll
                                    for (int h = 0; h < 2; h++) {
                                        const int64_t left = sid >= 0 && p.kv_scale ? p.pg.nkeys - (k0 + 4 * h) : 0;
                                        const uint32_t nbytes = left <= 0 ? 0u : left >= 4 ? 16u : (uint32_t)left * 4u;
                                        ltk_cp_async16_n(sdst + 16 * h,
                                                         nbytes ? (const void *)(p.kv_scale + k0 + 4 * h) : (const void *)p.pg.cache,
                                                         nbytes);
                                    }
                                }
                                ltk_cp_async_mbar_arrive_noinc(&full_b[stage]);
                            }
                        } else {
                            if (lane == 0) {
                                sm90_wait(&empty_b[stage], phase ^ 1u, p, 0, 1, u, it, t, stage);
                                ltk_mbar_arrive_expect_tx(&full_b[stage], SM90_BKV * 128 + SM90_BKV * 4);
                            }
                            for (int j = 0; j < nb; j++) {
                                int32_t id = __shfl_sync(0xffffffffu, cur, need - cur_base + j);
                                id = id >= 0 && id < p.pg.nblocks ? id : -1;
                                if (lane == 0) {
                                    /* A paged unit reads each cache block once (its rows are one
                                     * request's): the blocks leave L2 first, and the scores the scan
                                     * writes for the select after it stay. (The policy is made at
                                     * each use: a register held across the loop spilled in the
                                     * producer's 32.) */
                                    const uint64_t pol_once = ltk_l2_evict_first();
                                    ltk_tma_load_3d_hint(kv_s + stage * (SM90_BKV * 128) + j * p.pg.bkv * 128, &tm_kv,
                                                         &full_b[stage], 0, 0, id, pol_once);
                                    ltk_tma_load_2d_hint(kvs_s + stage * SM90_BKV + j * p.pg.bkv, &tm_ks, &full_b[stage],
                                                         0, id, pol_once);
                                }
                            }
                        }
                    } else {
                        sm90_wait(&empty_b[stage], phase ^ 1u, p, 0, 1, u, it, t, stage);
                        ltk_mbar_arrive_expect_tx(&full_b[stage], SM90_BKV * 128 + (p.kv_scale ? SM90_BKV * 4 : 0));
                        ltk_tma_load_2d(kv_s + stage * (SM90_BKV * 128), &tm_kv, &full_b[stage], 0, t * SM90_BKV);
                        /* the tile's key scales beside it (zero-filled past S, as the reference's 0) */
                        if (p.kv_scale) ltk_tma_load_2d(kvs_s + stage * SM90_BKV, &tm_ks, &full_b[stage], t * SM90_BKV, 0);
                    }
                    if (++stage == cfg::NSTAGE) {
                        stage = 0;
                        phase ^= 1u;
                    }
                }
            }
        } else if (warp == 1) {
            /* Refresh warp: recomputes each row's threshold bin from the unit's histogram (and the
             * row's global bin, raised by other units of the row) and republishes the gate edge. */
            for (int64_t u = blockIdx.x; u < nunits; u += gridDim.x) {
                ltk_named_bar_sync(1, 512 + 32);
                ltk_named_bar_sync(2, 512 + 32);
                if (!fused) continue;
                const int64_t qb = u % nqb;
                const uint64_t w0 = ltk_globaltimer();
                for (;;) {
                    /* The exit test must be warp-uniform: lanes reading the counter on their own
                     * can leave at different rounds, and then the lanes still in the loop wait in
                     * full-mask shuffles while the others sit at the aligned bar.sync of the next
                     * unit (the stall of runs 1-3, seen only with several units per CTA). */
                    const int32_t dn = __shfl_sync(0xffffffffu, atomicOr(done_s, 0), 0);
                    if (dn >= SM90_MATH_WARPS) break;
                    if (p.watchdog_ns > 0 && ltk_globaltimer() - w0 > (uint64_t)p.watchdog_ns && lane == 0)
                        sm90_stall(p.diag, 1, 4, u, -1, -1, -1, 0, dn);
#pragma unroll 1
                    for (int q = 0; q < BQ; q++) {
                        volatile sm90_row *r = row_s + q;
                        if (!__shfl_sync(0xffffffffu, r->valid, 0)) continue; /* uniform, as above */
                        int32_t th = ltk_refresh_th(hist_s + q * LTK_NB, p.k, lane);
                        int32_t lr = r->lr;
                        int32_t g = *(volatile int32_t *)(p.th + lr);
                        /* lane 0 alone reads and writes r->th (racecheck: no lane-to-lane hazard) */
                        int32_t cur = 0;
                        if (lane == 0) cur = r->th;
                        cur = __shfl_sync(0xffffffffu, cur, 0);
                        int32_t best = th > g ? th : g;
                        if (best > cur) {
                            if (lane == 0) {
                                /* publish with a single store (atomic so that racecheck sees it) */
                                atomicExch((int32_t *)&row_s[q].edge, __float_as_int(ltk_edge(best, r->smin, r->delta)));
                                r->th = best;
                                if (th > g) atomicMax(p.th + lr, th);
                            }
                        }
                        __syncwarp();
                    }
                    __nanosleep(2000);
                }
                /* Carry the unit's histogram to the row's next split. Why: each split started from
                 * an empty histogram, so it admitted ~k entries of its own before its refresh could
                 * raise the gate (H200, T = 8192, S = 1M: 5.1k candidates a row with one split,
                 * 7.0k with three, 8.6k with five at H = 32). The unit's counts are loaded from
                 * row_hist at its start, so the total is written back with a max: a split that ran
                 * at the same time as another of its row only loses counts (a lower gate), never
                 * counts a key twice. */
                if (p.row_hist) {
                    __threadfence_block(); /* after the math warps' done (their adds come before it) */
                    for (int i = lane; i < BQ * LTK_NB; i += 32) {
                        const int32_t v = atomicOr(hist_s + i, 0);
                        const int64_t lr = sm90_unit_row<BQ>(p, qb, i / LTK_NB, nrows);
                        if (v > 0 && lr < nrows) atomicMax(p.row_hist + lr * LTK_NB + i % LTK_NB, v);
                    }
                }
            }
        }
        return;
    }

    /* ---------------- math warp groups ------------------------------------------------------- */
    ltk_setmaxnreg_inc<SM90_REG_MATH>();
    const int wg = warp / 4 - 1;          /* 0..3 */
    const int mt = threadIdx.x - 128;     /* 0..511 */
    const int wq = warp - 4;              /* math warp 0..15 */
    const int c = lane & 3;
    const int mrow = (warp & 3) * 16 + (lane >> 2);
    ltk_cand *my_stage = stage_s + wq * (32 * LANE_Q * LANE_CAP);
    float acc[NN / 2];
#pragma unroll
    for (int i = 0; i < NN / 2; i++) acc[i] = 0.0f;

    int stage = 0;
    uint32_t phase = 0;
    int64_t it = 0;
    for (int64_t u = blockIdx.x; u < nunits; u += gridDim.x, it++) {
        const int64_t qb = u % nqb;
        const int s = (int)(u / nqb);
        ltk_named_bar_sync(1, 512 + 32); /* the previous unit is finished by everyone */
        /* ---- unit setup: row state, weights (permuted for the accumulator layout), histogram ---- */
        if (mt < BQ) {
            sm90_row r;
            int64_t lr = sm90_unit_row<BQ>(p, qb, mt, nrows);
            int32_t lo, hi;
            sm90_scan_range(p, lr, nrows, &lo, &hi);
            r.lo = lo;
            r.hi = hi;
            r.valid = lo < hi;
            r.lr = lr < nrows ? (int32_t)lr : -1;
            r.th = 0;
            r.smin = 0.0f;
            r.delta = 0.0f;
            r.edge = __int_as_float(0x7f800000); /* score-only: nothing passes */
            if (fused && r.valid && !p.nopass) {
                r.smin = p.smin[lr];
                r.delta = p.delta[lr];
                r.th = p.th[lr];
                r.edge = ltk_edge(r.th, r.smin, r.delta);
            }
            row_s[mt] = r;
        }
        for (int i = mt; i < BQ * LTK_NB; i += 512) {
            int32_t v = 0;
            if (fused && p.row_hist) { /* the counts of the row's earlier splits (see the refresh warp) */
                const int64_t lr = sm90_unit_row<BQ>(p, qb, i / LTK_NB, nrows);
                if (lr < nrows) v = *(volatile int32_t *)(p.row_hist + lr * LTK_NB + i % LTK_NB);
            }
            hist_s[i] = v;
        }
        if (mt < 4 * 32) {
            int cq = mt >> 5, jj = mt & 31;
            int col = (jj >> 1) * 8 + 2 * cq + (jj & 1);
            int q = col / H, h = col % H;
            int64_t lr = sm90_unit_row<BQ>(p, qb, q, nrows);
            float w = 0.0f;
            if (lr < nrows) w = p.weights[sm90_abs_row(p, lr) * p.w_stride + h];
            w_s[cq * SM90_WSTRIDE + jj] = w;
        }
        if (mt == 0) *done_s = 0;
        ltk_named_bar_sync(2, 512 + 32);

        int32_t lo[BQ], hi[BQ];
#pragma unroll
        for (int q = 0; q < BQ; q++) {
            lo[q] = row_s[q].lo;
            hi[q] = row_s[q].hi;
        }
        int32_t t0, t1;
        sm90_split_tiles<BQ>(lo, hi, s, p.nsplit, &t0, &t1);
        /* owned (key-row, query) sums of this lane: f = c * NE + i, query f >> 1, row f & 1 */
        int32_t my_lo[NE], my_hi[NE];
#pragma unroll
        for (int i = 0; i < NE; i++) {
            int f = c * NE + i;
            my_lo[i] = row_s[f >> 1].lo; /* lane-dependent index: read shared memory, not lo[] */
            my_hi[i] = row_s[f >> 1].hi;
        }
        int32_t cnt[LANE_Q]; /* entries this lane has staged per slot */
#pragma unroll
        for (int j = 0; j < LANE_Q; j++) cnt[j] = 0;

        const int qs = (int)(it & 1);
        sm90_wait(&qfull_b[qs], (uint32_t)((it >> 1) & 1), p, 2, 2, u, it, -1, qs);
        const uint64_t desc_b = ltk_desc_sw128(q_s + qs * 16384);
        /* The thread's 32 head weights stay in registers for the whole unit. Why: loaded per
         * tile (8 LDS.128) they were a third of the kernel's shared-memory wavefronts, and the
         * wgmma operands alone need 75% of the shared-memory bandwidth at the tensor peak. */
        float wr[32];
#pragma unroll
        for (int j = 0; j < 32; j++) wr[j] = w_s[c * SM90_WSTRIDE + j];

        const bool contig = sm90_tiles_contiguous<BQ>(lo, hi);
        for (int32_t t = sm90_next_tile<BQ>(t0, t1, lo, hi); t < t1;
             t = contig ? t + 1 : sm90_next_tile<BQ>(t + 1, t1, lo, hi)) {
            /* unsigned: the last tile of an S close to 2^31 may reach past INT32_MAX (never in range) */
            const uint32_t kbase = (uint32_t)t * SM90_BKV + wg * 64 + mrow;
            sm90_wait(&full_b[stage], phase, p, 2, 3, u, it, t, stage);
            /* kv_scale of this lane's two key rows, loaded by TMA with the tile. Why: a bounds-checked
             * global load per tile was ~35 of the ~260 instructions a math thread issues per tile,
             * and issue slots, not the tensor cores, are what this loop runs out of (ncu). */
            float scl[2] = {1.0f, 1.0f};
            if (p.kv_scale) {
#pragma unroll
                for (int r = 0; r < 2; r++) scl[r] = kvs_s[stage * SM90_BKV + wg * 64 + mrow + 8 * r];
            }
            const uint64_t desc_a = ltk_desc_sw128(kv_s + stage * (SM90_BKV * 128) + wg * (64 * 128));
#pragma unroll
            for (int i = 0; i < NN / 2; i++) ltk_fence_operand(acc[i]);
            ltk_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) sm90_wgmma<NN>(acc, desc_a + 2 * kk, desc_b + 2 * kk, kk);
            ltk_wgmma_commit();
            ltk_wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < NN / 2; i++) ltk_fence_operand(acc[i]);
            /* every lane's kv_scale read of this stage is ordered before lane 0 frees it (the next
             * TMA into the stage overwrites the scales; the wait above orders only the wgmma) */
            __syncwarp();
            if (VAR == SM90_VAR_LISTED || lane == 0) ltk_mbar_arrive(&empty_b[stage]);
            if (++stage == cfg::NSTAGE) {
                stage = 0;
                phase ^= 1u;
            }

            /* ---- epilogue: relu * w over this lane's heads, per (row, query) ---- */
            float part[2 * BQ];
#pragma unroll
            for (int f = 0; f < 2 * BQ; f++) part[f] = 0.0f;
#pragma unroll
            for (int j2 = 0; j2 < NN / 16; j2++) {
#pragma unroll
                for (int h2 = 0; h2 < 2; h2++) {
                    const int j = 2 * j2 + h2;
                    const int q = j / cfg::JPQ;
                    const float w0 = wr[2 * j], w1 = wr[2 * j + 1];
                    part[2 * q] = __fmaf_rn(w0, ltk_relu_nan(acc[4 * j + 0]), part[2 * q]);
                    part[2 * q] = __fmaf_rn(w1, ltk_relu_nan(acc[4 * j + 1]), part[2 * q]);
                    part[2 * q + 1] = __fmaf_rn(w0, ltk_relu_nan(acc[4 * j + 2]), part[2 * q + 1]);
                    part[2 * q + 1] = __fmaf_rn(w1, ltk_relu_nan(acc[4 * j + 3]), part[2 * q + 1]);
                }
            }
            /* reduce-scatter over the 4 lanes of a quad: lane c ends with sums f in [c*NE, c*NE+NE) */
            float va[BQ];
            {
                const int bh = (c >> 1) & 1;
#pragma unroll
                for (int i = 0; i < BQ; i++) {
                    float keep = bh ? part[BQ + i] : part[i];
                    float send = bh ? part[i] : part[BQ + i];
                    va[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 2));
                }
            }
            float sc[NE];
            {
                const int bl = c & 1;
#pragma unroll
                for (int i = 0; i < NE; i++) {
                    float keep = bl ? va[NE + i] : va[i];
                    float send = bl ? va[i] : va[NE + i];
                    sc[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 1));
                }
            }
#pragma unroll
            for (int i = 0; i < NE; i++) {
                const int f = c * NE + i;
                sc[i] = __fmul_rn(sc[i], (f & 1) ? scl[1] : scl[0]);
            }

            if (VAR == SM90_VAR_BLOCKMAX) {
                /* The block's largest score in ORDER. The 8 keys of a block of 8 are one lane
                 * class's 8 quads (lanes c, c + 4, ..., c + 28: rows mrow = 16 w + lane / 4), a
                 * block of 16 also the sum's other row (f ^ 1: the next lane class, or this lane's
                 * next sum). Direct: fmaxf of the scores, keys out of range NaN, as fmaxf returns
                 * the number of a (NaN, number) pair and NaN only for two NaNs: ORDER's max; the
                 * + 0 makes -0 the +0 ORDER does not tell from it. Why floats, not rank keys, and
                 * shifts, not divisions: this loop is issue-bound, and the rank-key round trip
                 * and a 64-bit division by bsz made the scan 33% slower than score-only (H200,
                 * T = 8192, S = 256K). Else rank keys (NaN and out of range 0) by atomicMax. */
                float m[NE];
#pragma unroll
                for (int i = 0; i < NE; i++) {
                    const int f = c * NE + i;
                    const uint32_t key = kbase + 8 * (f & 1);
                    m[i] = key - (uint32_t)my_lo[i] < (uint32_t)(my_hi[i] - my_lo[i]) ? sc[i] : __int_as_float(0x7fc00000);
                }
                if (p.bsz_direct) {
#pragma unroll
                    for (int i = 0; i < NE; i++) {
                        m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 4));
                        m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 8));
                        m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 16));
                    }
                    if (p.bsz == 16) {
                        if (NE == 1) {
                            m[0] = fmaxf(m[0], __shfl_xor_sync(0xffffffffu, m[0], 1));
                        } else {
#pragma unroll
                            for (int i = 0; i + 1 < NE; i += 2) m[i] = m[i + 1] = fmaxf(m[i], m[i + 1]);
                        }
                    }
                    if (lane < 4) {
                        const int bsh = p.bsz == 16 ? 4 : 3;
#pragma unroll
                        for (int i = 0; i < NE; i++) {
                            const int f = c * NE + i;
                            if (p.bsz == 16 && (f & 1)) continue;
                            const uint32_t kb = (uint32_t)(kbase + 8 * (f & 1)) & ~(uint32_t)(p.bsz - 1);
                            if (kb < (uint32_t)my_hi[i] && kb + (uint32_t)p.bsz > (uint32_t)my_lo[i])
                                p.bm[(int64_t)row_s[f >> 1].lr * p.bm_ld + (kb >> bsh)] = m[i] + 0.0f;
                        }
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < NE; i++) {
                        const int f = c * NE + i;
                        const uint32_t key = kbase + 8 * (f & 1);
                        const uint32_t rk = ltk_rank_key(m[i]);
                        if (rk != 0u)
                            atomicMax((uint32_t *)p.bm + (int64_t)row_s[f >> 1].lr * p.bm_ld + key / (uint32_t)p.bsz, rk);
                    }
                }
                /* the publication alone, or the row's own top-k from the same scores next */
                if (p.mode == LTK_SCAN_BLOCKMAX) continue;
            }
            if (p.mode == LTK_SCAN_MATERIALIZE) {
#pragma unroll
                for (int i = 0; i < NE; i++) {
                    const int f = c * NE + i;
                    const uint32_t key = kbase + 8 * (f & 1);
                    if (key - (uint32_t)my_lo[i] < (uint32_t)(my_hi[i] - my_lo[i])) {
                        const int32_t lr = row_s[f >> 1].lr;
                        p.logits[(int64_t)lr * p.ld + ((int64_t)key - p.col_lo)] = sc[i];
                    }
                }
                continue;
            }
            /* ---- gate; a passing sum goes to this lane's own list for its query ---- */
            /* the rows' edges, read by BQ lanes and shuffled: 32 lanes reading 1-2 addresses with
             * atomics (an atomic so that racecheck sees the refresh warp's store) were serialised,
             * 16% of the kernel's shared-memory wavefronts in ncu */
            float edge_l = 0.0f;
            if (lane < BQ) edge_l = __int_as_float(atomicOr((int32_t *)&row_s[lane].edge, 0));
            bool full = false;
#pragma unroll
            for (int i = 0; i < NE; i++) {
                const int f = c * NE + i;
                const int qf = f >> 1;
                const int j = NE >= 2 ? i >> 1 : 0;
                const uint32_t key = kbase + 8 * (f & 1);
                const float edge = __shfl_sync(0xffffffffu, edge_l, qf);
                /* Why lane-private lists: a warp-wide ballot, popc and count update per passing
                 * warp-tile (~40 instructions) was the gate's whole cost over the scan alone
                 * (~5% of a V3.2 prefill); now a pass is one shared store and one histogram add. */
                if (sc[i] >= edge && key - (uint32_t)my_lo[i] < (uint32_t)(my_hi[i] - my_lo[i])) {
                    ltk_cand e;
                    e.score = sc[i];
                    e.idx = (int32_t)key;
                    my_stage[(j * LANE_CAP + cnt[j]) * 32 + lane] = e;
                    cnt[j]++;
                    /* fire-and-forget: only the refresh warp reads the histogram */
                    atomicAdd(hist_s + qf * LTK_NB + ltk_bin(sc[i], row_s[qf].smin, row_s[qf].delta), 1);
                }
            }
#pragma unroll
            for (int j = 0; j < LANE_Q; j++) full |= cnt[j] > LANE_CAP - cfg::LANE_ADD; /* no room for a next tile */
            if (__any_sync(0xffffffffu, full)) sm90_flush_lanes<NE, LANE_Q, LANE_CAP>(p, row_s, my_stage, cnt, lane);
        }
        /* ---- end of unit: release the Q tile, flush what is staged, tell the refresh warp ---- */
        if (lane == 0) ltk_mbar_arrive(&qempty_b[qs]);
        if (p.mode != LTK_SCAN_MATERIALIZE && p.mode != LTK_SCAN_BLOCKMAX) {
            bool some = false;
#pragma unroll
            for (int j = 0; j < LANE_Q; j++) some |= cnt[j] > 0;
            if (__any_sync(0xffffffffu, some)) sm90_flush_lanes<NE, LANE_Q, LANE_CAP>(p, row_s, my_stage, cnt, lane);
        }
        __syncwarp();
        if (lane == 0) {
            __threadfence_block(); /* the warp's histogram adds before its done (the carry reads them) */
            atomicAdd(done_s, 1);
        }
    }
#endif
}

/* ---- host side ---------------------------------------------------------------------------- */
extern "C" int ltk_sm90_rows_per_block(int32_t H) { return 128 / H; }
extern "C" int ltk_sm90_blockmax_direct(int32_t bsz) { return bsz == 8 || bsz == 16; }

/* 1 if this build holds sm_90a code for the current device (the 80-only build has none). */
static int sm90_image_ok(void) {
    static int ok = -1;
    if (ok < 0) {
        cudaFuncAttributes fa;
        cudaError_t e = cudaFuncGetAttributes(&fa, ltk_sm90_scan_kernel<64, 128, SM90_VAR_PLAIN>);
        if (e != cudaSuccess) (void)cudaGetLastError();
        /* the register split above assumes the launch allocation; anything else could deadlock */
        ok = e == cudaSuccess && fa.binaryVersion == 90 && fa.numRegs == SM90_REG_LAUNCH;
    }
    return ok;
}

extern "C" int ltk_sm90_supported(const ltk_indexer_args *a, int cc_major, int cc_minor) {
    if (cc_major != 9 || cc_minor != 0) return 0;
    if (a->dtype != LTK_DTYPE_E4M3 || a->D != 128) return 0;
    if (a->H != 16 && a->H != 32 && a->H != 64) return 0;
    if (((uintptr_t)a->q & 15) || ((uintptr_t)a->kv & 15) || ((uintptr_t)a->kv_scale & 15)) return 0;
    if ((a->q_stride_t & 15) || (a->kv_stride_s & 15)) return 0;
    if (ltk_cuda_tmap_encoder() == NULL) return 0;
    return sm90_image_ok();
}

extern "C" int ltk_sm90_paged_supported(const ltk_indexer_args *a, const ltk_paged_src *g, int cc_major, int cc_minor) {
    if (cc_major != 9 || cc_minor != 0) return 0;
    if (a->dtype != LTK_DTYPE_E4M3 || a->D != 128) return 0;
    if (a->H != 16 && a->H != 32 && a->H != 64) return 0;
    /* (a cache block's scales come by TMA, in boxes of bkv * 4 bytes, 128 at least; listed blocks
     * of 8 keys are 1 KB boxes, each landing at a multiple of 1024 bytes, where the 128-byte swizzle
     * of a 256-row box would put it, and their scales by cp.async, a lane's 8 from one block) */
    if (g->bkv < (g->contig ? 8 : 32) || g->bkv > SM90_BKV || (g->bkv & (g->bkv - 1))) return 0;
    if (((uintptr_t)a->q & 15) || (a->q_stride_t & 15) || ((uintptr_t)g->cache & 15)) return 0;
    if (g->nblocks < 1 || g->nblocks > INT32_MAX) return 0;
    if (g->contig == 2) {
        if (g->page_kv % g->bkv || ((g->page_kv / g->bkv) & (g->page_kv / g->bkv - 1)) || (g->bstride & 15) ||
            g->bstride >= ((int64_t)1 << 40) || g->page_kv > 256)
            return 0;
    } else if (g->contig) {
        if ((g->kv_stride & 15) || ((uintptr_t)g->scale & 15) || g->nkeys < 1 || g->nkeys > INT32_MAX) return 0;
    } else if ((g->bstride & 15) || g->bstride >= ((int64_t)1 << 40)) {
        return 0;
    }
    if (ltk_cuda_tmap_encoder() == NULL) return 0;
    return sm90_image_ok();
}

/* The paged source's maps: keys as [nblocks][bkv][128] bytes (boxes of one block), scales as
 * [nblocks][bkv] fp32 after each block's keys, NaN outside the map (an unmapped block). */
static ltk_status sm90_tmaps_paged(const ltk_scan_params *p, PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *tkv,
                                   CUtensorMap *tks) {
    const ltk_paged_src *g = &p->pg;
    cuuint32_t one[3] = {1, 1, 1};
    if (g->contig == 2) { /* cache pages [num_blocks][page_kv][128] in boxes of one sub-block */
        const int32_t r = g->page_kv / g->bkv;
        cuuint64_t kdim[3] = {128, (cuuint64_t)g->page_kv, (cuuint64_t)(g->nblocks / r)};
        cuuint64_t kstr[2] = {128, (cuuint64_t)g->bstride};
        cuuint32_t kbox[3] = {128, (cuuint32_t)g->bkv, 1};
        CUresult r2 = enc(tkv, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)g->cache, kdim, kstr, kbox, one,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r2 != CUDA_SUCCESS)
            return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(listed pages) failed with CUresult %d", (int)r2);
        memset(tks, 0, sizeof *tks);
        return LTK_OK;
    }
    if (g->contig) { /* the key array [nkeys][128] in boxes of one block (the scales: no map) */
        cuuint64_t kdim[2] = {128, (cuuint64_t)g->nkeys};
        cuuint64_t kstr[1] = {(cuuint64_t)g->kv_stride};
        cuuint32_t kbox[2] = {128, (cuuint32_t)g->bkv};
        CUresult r = enc(tkv, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)g->cache, kdim, kstr, kbox, one,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(listed kv) failed with CUresult %d", (int)r);
        memset(tks, 0, sizeof *tks);
        return LTK_OK;
    }
    cuuint64_t kdim[3] = {128, (cuuint64_t)g->bkv, (cuuint64_t)g->nblocks};
    cuuint64_t kstr[2] = {128, (cuuint64_t)g->bstride};
    cuuint32_t kbox[3] = {128, (cuuint32_t)g->bkv, 1};
    CUresult r = enc(tkv, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)g->cache, kdim, kstr, kbox, one,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(paged kv) failed with CUresult %d", (int)r);
    cuuint64_t sdim[2] = {(cuuint64_t)g->bkv, (cuuint64_t)g->nblocks};
    cuuint64_t sstr[1] = {(cuuint64_t)g->bstride};
    cuuint32_t sbox[2] = {(cuuint32_t)g->bkv, 1};
    r = enc(tks, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(g->cache + (size_t)g->bkv * 128), sdim, sstr, sbox, one,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
    if (r != CUDA_SUCCESS)
        return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(paged scales) failed with CUresult %d", (int)r);
    return LTK_OK;
}

static ltk_status sm90_tmaps(const ltk_scan_params *p, CUtensorMap *tq, CUtensorMap *tkv, CUtensorMap *tks) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)ltk_cuda_tmap_encoder();
    if (!enc) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled is not available from the driver");
    cuuint64_t qdim[3] = {128, (cuuint64_t)p->H, (cuuint64_t)(p->T > 0 ? p->T : 1)};
    cuuint64_t qstr[2] = {128, (cuuint64_t)p->q_stride};
    cuuint32_t qbox[3] = {128, (cuuint32_t)p->H, 1};
    cuuint32_t one[3] = {1, 1, 1};
    CUresult r = enc(tq, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)p->q, qdim, qstr, qbox, one,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(q) failed with CUresult %d", (int)r);
    if (p->pg.cache) return sm90_tmaps_paged(p, enc, tkv, tks);
    cuuint64_t kdim[2] = {128, (cuuint64_t)(p->S > 0 ? p->S : 1)};
    cuuint64_t kstr[1] = {(cuuint64_t)p->kv_stride};
    cuuint32_t kbox[2] = {128, SM90_BKV};
    r = enc(tkv, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p->kv, kdim, kstr, kbox, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(kv) failed with CUresult %d", (int)r);
    memset(tks, 0, sizeof *tks);
    if (p->kv_scale) { /* [S] fp32 as one row of a 2-D map, boxes of one tile's keys; reads past S
                        * are zero-filled. (The row stride is never used: there is one row.) */
        cuuint64_t sdim[2] = {(cuuint64_t)(p->S > 0 ? p->S : 1), 1};
        cuuint64_t sstr[1] = {((cuuint64_t)(p->S > 0 ? p->S : 1) * 4 + 15) & ~(cuuint64_t)15};
        cuuint32_t sbox[2] = {SM90_BKV, 1};
        r = enc(tks, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p->kv_scale, sdim, sstr, sbox, one,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return ltk_error(LTK_ECUDA, "cuTensorMapEncodeTiled(kv_scale) failed with CUresult %d", (int)r);
    }
    return LTK_OK;
}

template <int H, int NN, int VAR> static ltk_status sm90_launch(const ltk_scan_params *p, int nsm, cudaStream_t st) {
    typedef sm90_cfg<H> cfg;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)ltk_sm90_scan_kernel<H, NN, VAR>, cfg::SMEM));
    CUtensorMap tq, tkv, tks;
    LTK_FORWARD_IF(sm90_tmaps(p, &tq, &tkv, &tks));
    int64_t nqb = ltk_scan_qblocks(p->nrows, cfg::BQ, p->group);
    int64_t units = nqb * p->nsplit;
    if (units <= 0) return LTK_OK;
    int grid = (int)(units < nsm ? units : nsm);
    LTK_CUDA_TRY(ltk_launch_pdl(1, ltk_sm90_scan_kernel<H, NN, VAR>, dim3((unsigned)grid), dim3(SM90_THREADS), cfg::SMEM, st,
                                tq, tkv, tks, *p));
    return LTK_OK;
}

/* The kernel of a variant by H and the query-heads a q-block holds (`used` rows of H heads). */
template <int VAR> static ltk_status sm90_launch_grouped(const ltk_scan_params *p, int nsm, int used, cudaStream_t st) {
    switch (p->H) {
    case 16: return sm90_launch<16, 128, VAR>(p, nsm, st);
    case 32: return used == 1 ? sm90_launch<32, 32, VAR>(p, nsm, st)
                    : used == 2 ? sm90_launch<32, 64, VAR>(p, nsm, st) : sm90_launch<32, 128, VAR>(p, nsm, st);
    case 64: return used == 1 ? sm90_launch<64, 64, VAR>(p, nsm, st) : sm90_launch<64, 128, VAR>(p, nsm, st);
    }
    return ltk_error(LTK_EINTERNAL, "sm90 scan: H=%d not instantiated", p->H);
}

extern "C" ltk_status ltk_sm90_scan(const ltk_scan_params *p, int nsm, cudaStream_t st) {
    /* the query-heads a q-block holds: fewer than 128 when its rows are one decode request's */
    const int bq = 128 / p->H;
    const int used = p->group > 0 && p->group < bq ? p->group : bq;
    /* The candidate indexer's variants are kernels of their own: compiled into the one kernel, the
     * block-max epilogue and the listed-block producer raised the plain H = 64 kernel's spills from
     * 100 to 222 bytes (ptxas -v), in the loop every indexer call runs. The publication runs
     * q-blocks of consecutive rows (NN = 128), the consumer rows one by one (group 1). */
    /* (block maxima, alone or beside the mode's own work: also a decode call's requests of next_n
     * rows) */
    if (p->bsz > 0) return sm90_launch_grouped<SM90_VAR_BLOCKMAX>(p, nsm, used, st);
    if (p->pg.cache && p->pg.contig) {
        switch (p->H) {
        case 16: return sm90_launch<16, 128, SM90_VAR_LISTED>(p, nsm, st);
        case 32: if (used == 1) return sm90_launch<32, 32, SM90_VAR_LISTED>(p, nsm, st); break;
        case 64: if (used == 1) return sm90_launch<64, 64, SM90_VAR_LISTED>(p, nsm, st); break;
        }
        return ltk_error(LTK_EINTERNAL, "sm90 scan: listed blocks of H=%d in groups of %d not instantiated", p->H, used);
    }
    return sm90_launch_grouped<SM90_VAR_PLAIN>(p, nsm, used, st);
}
