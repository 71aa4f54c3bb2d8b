/* Exact brute-force kNN top-k on the GPU (inner product, L2 via norms, cosine).
 *
 * One scoring kernel, four epilogues (same arithmetic in all, so fused == materialize bit for bit):
 *   STORE  writes every score (the materialize algo, and the threshold sample)
 *   GATE   LiteTopK filter: an entry passes iff its rank key >= the query's sampled threshold t;
 *          passing entries go to the query's candidate buffer (count kept also past capacity)
 *   HIST   exact fallback, one radix pass: histogram of one 11-bit digit of the composite
 *          (key, ~index) of the entries still matching the query's prefix
 *   TAKE   exact fallback, final gather of the entries at or above the radix threshold
 * Scores are recomputed in HIST/TAKE instead of materialised: the fallback needs no [B, N] buffer.
 *
 * Per corpus chunk (<= 2^30 rows, int32 local indices; larger corpora are split and merged):
 *   1. sample: STORE over m strided rows (every (N/m)-th row), t = the r-th best sampled key with
 *      r ~ 2k m / N (a guess, verified in 3)
 *   2. GATE over the chunk
 *   3. check: if a query's count is >= k and fits the buffer, its exact top-k is among its
 *      candidates; otherwise it is marked for the fallback (counted in ltk_stats.fallback_rows)
 *   4. up to 6 HIST passes + 1 TAKE pass; launched always, CTAs whose query block has nothing to
 *      redo return at once (no host synchronisation)
 *   5. final select per query (select.cuh: radix on composites, bitonic sort)
 * Tensor cores: mma.sync m16n8k16 (bf16/f16, fp32 accumulation) on sm_80 and later; on sm_90a a
 * wgmma + TMA main loop with the same epilogues (knn-sm90.cu, the default on sm_90; LTK_CUDA_KNN_SM90=0 turns it off).
 * fp32: SIMT FMA in a fixed order (exact fp32 arithmetic; TF32 is not exact and is not used) —
 * compute-bound, about an fp32-GEMM rate. */
#include <pthread.h>
#include <string.h>
#include <stdlib.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ltk-cuda.h"
#include "knn.cuh"
#include "select.cuh"

#define KNN_NT 256
#define KNN_BM 256 /* base rows per tile */
#define KNN_ST 4   /* cp.async stages */
#define KNN_ROWB 64 /* bytes of one row per stage (32 bf16 / 16 f32) */
#define KNN_SAMPLE 32768
#define KNN_QBATCH 1024
#define KNN_MAXCHUNK ((int64_t)1 << 30)


static int64_t knn_chunk_rows = KNN_MAXCHUNK; /* tests lower it to exercise the merge */

/* Sample rows for a chunk of nr rows and this k. The threshold is the r-th largest sampled score,
 * aimed at 2k candidates (r ~ 2 k m / nr), or at 1.6k where that rank is >= 100 (knn_thr_rank);
 * the count's spread depends on r alone (~1/sqrt(r)): m = 32 nr / k (r = 64), within [8192,
 * KNN_SAMPLE] and <= nr. Where the floor binds (k = 8,192 at N = 1M: r = 102 at 1.6k) the larger
 * sample buys 20% fewer candidates. Why: at k = 8,192, N = 1M the full 32,768-row sample (r = 512)
 * cost 23 us of scan and 31 us of threshold per call (H200, s7-run1); 4,096 rows at 2k candidates
 * (16k a query) and 8,192 at 1.6k (13k) took 0.574 and 0.559 ms a call at B = 64 (s9-run3,
 * bench/knn_sample_ab.py), while m = 64 nr / k everywhere lost 1-2% at k = 2048-4096.
 * P(fewer than k candidates) = P(Poisson(32) >= 64) ~ 1e-7 a query at r = 64 with 2k,
 * P(Poisson(64) >= 102) ~ 1e-6 at r = 102 with 1.6k. Monotone in nr, so the plan's m (of the
 * largest chunk) bounds every chunk's. LTK_CUDA_KNN_SAMPLE_MUL (the 32) and LTK_CUDA_KNN_CAND_PCT
 * (a fixed target in percent of k instead of the 160 / 200 rule) override them for A/B runs, read
 * at every plan on the host (the device gets them in knn_ctl). */
static int knn_env_int(const char *name, int dflt, int lo, int hi) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    long v = strtol(e, NULL, 10);
    return v < lo ? lo : (v > hi ? hi : (int)v);
}
static int knn_sample_mul(void) { return knn_env_int("LTK_CUDA_KNN_SAMPLE_MUL", 32, 1, 1024); }
static int knn_cand_pct(void) { /* 0: the 160 / 200 rule of knn_thr_rank */
    const int v = knn_env_int("LTK_CUDA_KNN_CAND_PCT", 0, 0, 1600);
    return v == 0 ? 0 : (v < 110 ? 110 : v);
}
static int64_t knn_sample_rows(int64_t nr, int k, int mul) {
    int64_t m = (mul * nr + k - 1) / k;
    if (m < 8192) m = 8192;
    if (m > KNN_SAMPLE) m = KNN_SAMPLE;
    m = (m + 3) & ~(int64_t)3; /* whole 16-byte vectors per query row of the sample (threshold kernel) */
    return m < nr ? m : nr;
}
extern "C" void ltk_cuda_knn_debug_chunk(int64_t rows) { knn_chunk_rows = rows > 0 ? rows : KNN_MAXCHUNK; }


/* ---- PTX wrappers (sm_80+) ---------------------------------------------------------------- *
 * Built for an older target (e.g. a CMake default of sm_75) they compile to a trap; the host side
 * refuses devices below compute capability 8.0 before launching anything. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define KNN_SM80(...) __trap()
#else
#define KNN_SM80(...) __VA_ARGS__
#endif
static __device__ __forceinline__ void knn_cp16(uint32_t dst, const void *src, bool ok) {
    KNN_SM80(asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory"));
}
static __device__ __forceinline__ void knn_cp_commit() { KNN_SM80(asm volatile("cp.async.commit_group;" ::: "memory")); }
template <int N> static __device__ __forceinline__ void knn_cp_wait() {
    KNN_SM80(asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"));
}
static __device__ __forceinline__ void knn_ldsm4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    KNN_SM80(asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                          : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                          : "r"(addr)));
}
template <int DT>
static __device__ __forceinline__ void knn_mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();
#else
    if (DT == 1)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <int DT> static __device__ __forceinline__ float knn_ld(const void *p, int64_t i) {
    if (DT == 0) return ((const float *)p)[i];
    uint16_t u = ((const uint16_t *)p)[i];
    return DT == 1 ? ltk_h2f(u) : __uint_as_float((uint32_t)u << 16);
}

/* Swizzled 16-byte unit of (row, chunk) in a 64-byte-row tile: conflict-free ldmatrix. */
static __device__ __forceinline__ int knn_swz(int row, int ch) { return row * 4 + (ch ^ ((row >> 1) & 3)); }

struct knn_smem {
    uint4 a[KNN_ST][KNN_BM * 4];
    uint4 b[KNN_ST][KNN_BQ * 4];
    float xn[KNN_BM];
    float qn[KNN_BQ];
    uint32_t thr[KNN_BQ];
};

template <int DT>
static __device__ __forceinline__ void knn_load_stage(const knn_params &p, knn_smem *sm, int st, int64_t n0, int q0, int k0) {
    const int esz = DT == 0 ? 4 : 2, epc = 16 / esz; /* elements per 16-byte unit */
    if (p.vec) {
#pragma unroll
        for (int i = 0; i < KNN_BM * 4 / KNN_NT; i++) {
            int c = threadIdx.x + i * KNN_NT, row = c >> 2, ch = c & 3;
            int64_t g = n0 + row;
            int kk = k0 + ch * epc;
            bool ok = g < p.n && kk < p.D;
            const char *src = (const char *)p.x + ((ok ? g : 0) * p.x_stride + (ok ? kk : 0)) * esz;
            knn_cp16((uint32_t)__cvta_generic_to_shared(&sm->a[st][knn_swz(row, ch)]), src, ok);
        }
        {
            int c = threadIdx.x, row = c >> 2, ch = c & 3;
            int qq = q0 + row, kk = k0 + ch * epc;
            bool ok = qq < p.nq && kk < p.D;
            const char *src = (const char *)p.q + ((ok ? (int64_t)qq : 0) * p.q_stride + (ok ? kk : 0)) * esz;
            knn_cp16((uint32_t)__cvta_generic_to_shared(&sm->b[st][knn_swz(row, ch)]), src, ok);
        }
    } else { /* any stride / D / alignment: element loads, zero padding */
        for (int e = threadIdx.x; e < (KNN_BM + KNN_BQ) * 4 * epc; e += KNN_NT) {
            int unit = e / epc, w = e % epc;
            bool isq = unit >= KNN_BM * 4;
            int u2 = isq ? unit - KNN_BM * 4 : unit, row = u2 >> 2, ch = u2 & 3;
            int kk = k0 + ch * epc + w;
            float v = 0.0f;
            if (isq) {
                int qq = q0 + row;
                if (qq < p.nq && kk < p.D) v = knn_ld<DT>(p.q, (int64_t)qq * p.q_stride + kk);
            } else {
                int64_t g = n0 + row;
                if (g < p.n && kk < p.D) v = knn_ld<DT>(p.x, g * p.x_stride + kk);
            }
            uint4 *dst = isq ? &sm->b[st][knn_swz(row, ch)] : &sm->a[st][knn_swz(row, ch)];
            if (DT == 0) ((float *)dst)[w] = v;
            else if (DT == 1) ((__half *)dst)[w] = __float2half_rn(v); /* exact: v came from a half */
            else ((__nv_bfloat16 *)dst)[w] = __float2bfloat16_rn(v);
        }
    }
}

/* The CTA's work items (tile, query block) are w = blockIdx.x + i * gridDim.x; consecutive CTAs
 * take the query blocks of one base tile, so a tile read from HBM is reused from L2. The cp.async
 * pipeline runs over the flattened sequence of (item, k-step), so the next item's first stages
 * load while this item's epilogue runs (no per-item pipeline bubble). */
template <int DT, int MODE>
static __global__ void __launch_bounds__(KNN_NT, 2) knn_score_kernel(knn_params p) {
    extern __shared__ __align__(16) unsigned char smraw[];
    knn_smem *sm = (knn_smem *)smraw;
    const int64_t ntiles = (p.n + KNN_BM - 1) / KNN_BM;
    const int qblocks = (p.nq + KNN_BQ - 1) / KNN_BQ;
    const int64_t items = ntiles * qblocks;
    if ((MODE == KNN_HIST || MODE == KNN_TAKE) && !p.fb_any[qblocks]) return; /* nothing to redo */
    const int KB = DT == 0 ? 16 : 32; /* elements of D per stage */
    const int nk = (p.D + KB - 1) / KB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if ((int64_t)blockIdx.x >= items) return;
    const int64_t my_items = (items - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int64_t nsteps = my_items * nk;
#pragma unroll 1
    for (int s = 0; s < KNN_ST - 1; s++) {
        if (s < nsteps) {
            int64_t w = blockIdx.x + (s / nk) * (int64_t)gridDim.x;
            knn_load_stage<DT>(p, sm, s, (w / qblocks) * KNN_BM, (int)(w % qblocks) * KNN_BQ, (int)(s % nk) * KB);
        }
        knn_cp_commit();
    }
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    float xacc = 0.0f; /* |x|^2 of row tid, accumulated in a fixed order */
#pragma unroll 1
    for (int64_t s = 0; s < nsteps; s++) {
        const int kt = (int)(s % nk);
        const int64_t w = blockIdx.x + (s / nk) * (int64_t)gridDim.x;
        const int64_t n0 = (w / qblocks) * KNN_BM;
        const int q0 = (int)(w % qblocks) * KNN_BQ;
        knn_cp_wait<KNN_ST - 2>();
        __syncthreads();
        {
            int64_t nx = s + KNN_ST - 1;
            if (nx < nsteps) {
                int64_t w2 = blockIdx.x + (nx / nk) * (int64_t)gridDim.x;
                knn_load_stage<DT>(p, sm, (int)(nx % KNN_ST), (w2 / qblocks) * KNN_BM, (int)(w2 % qblocks) * KNN_BQ,
                                   (int)(nx % nk) * KB);
            }
            knn_cp_commit();
        }
        if (kt == 0 && tid < KNN_BQ) { /* read in this item's epilogue, after several barriers */
            int qq = q0 + tid;
            sm->qn[tid] = (p.metric != LTK_METRIC_IP && qq < p.nq) ? p.qn[qq] : 0.0f;
            if (MODE == KNN_GATE) sm->thr[tid] = qq < p.nq ? p.thr[qq] : 0xffffffffu;
        }
        const int st = (int)(s % KNN_ST);
        if (p.metric != LTK_METRIC_IP) {
            const uint4 *ra = sm->a[st];
#pragma unroll
            for (int ch = 0; ch < 4; ch++) {
                uint4 u = ra[knn_swz(tid, ch)];
                uint32_t ws[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (DT == 0) {
                        float v = __uint_as_float(ws[j]);
                        xacc = fmaf(v, v, xacc);
                    } else {
                        float v0 = DT == 1 ? __half2float(__ushort_as_half((unsigned short)(ws[j] & 0xffff)))
                                           : __uint_as_float(ws[j] << 16);
                        float v1 = DT == 1 ? __half2float(__ushort_as_half((unsigned short)(ws[j] >> 16)))
                                           : __uint_as_float(ws[j] & 0xffff0000u);
                        xacc = fmaf(v0, v0, xacc);
                        xacc = fmaf(v1, v1, xacc);
                    }
                }
            }
        }
        if (DT != 0) {
            /* warp tile: 64 base rows (wm) x 32 queries (wn); 4 m16 x 4 n8 tiles, 2 k16 steps */
            const int wm = warp & 3, wn = warp >> 2;
            uint32_t abase = (uint32_t)__cvta_generic_to_shared(sm->a[st]);
            uint32_t bbase = (uint32_t)__cvta_generic_to_shared(sm->b[st]);
#pragma unroll
            for (int ks = 0; ks < 2; ks++) {
                uint32_t af[4][4], bf[4][2];
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    int row = wn * 32 + np * 16 + (lane & 7) + ((lane >> 4) << 3), ch = ks * 2 + ((lane >> 3) & 1);
                    uint32_t r0, r1, r2, r3;
                    knn_ldsm4(bbase + knn_swz(row, ch) * 16, r0, r1, r2, r3);
                    bf[np * 2][0] = r0;
                    bf[np * 2][1] = r1;
                    bf[np * 2 + 1][0] = r2;
                    bf[np * 2 + 1][1] = r3;
                }
#pragma unroll
                for (int mt = 0; mt < 4; mt++) {
                    int row = wm * 64 + mt * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
                    knn_ldsm4(abase + knn_swz(row, ch) * 16, af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
                }
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) knn_mma<DT>(&acc[(mt * 4 + nt) * 4], af[mt], bf[nt][0], bf[nt][1]);
            }
        } else {
            /* SIMT fp32: thread owns base rows ty + 16 i (i < 16) and queries tx + 16 j (j < 4) */
            const int tx = tid & 15, ty = tid >> 4;
            const float *fa = (const float *)sm->a[st], *fb = (const float *)sm->b[st];
#pragma unroll
            for (int kk = 0; kk < 16; kk++) {
                const int ch = kk >> 2, wi = kk & 3;
                float av[16], bv[4];
#pragma unroll
                for (int i = 0; i < 16; i++) av[i] = fa[knn_swz(ty + 16 * i, ch) * 4 + wi];
#pragma unroll
                for (int j = 0; j < 4; j++) bv[j] = fb[knn_swz(tx + 16 * j, ch) * 4 + wi];
#pragma unroll
                for (int i = 0; i < 16; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i * 4 + j] = fmaf(av[i], bv[j], acc[i * 4 + j]);
            }
        }
        if (kt != nk - 1) continue;
        /* ---- epilogue of this item ---- */
        if (p.metric != LTK_METRIC_IP) sm->xn[tid] = xacc;
        __syncthreads();
        const bool active = !(MODE == KNN_HIST || MODE == KNN_TAKE) || p.fb_any[q0 / KNN_BQ];
        if (active) {
            if (DT != 0) {
                const int wm = warp & 3, wn = warp >> 2;
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int nt = 0; nt < 4; nt++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            int row = wm * 64 + mt * 16 + (lane >> 2) + ((e >> 1) << 3);
                            int ql = wn * 32 + nt * 8 + 2 * (lane & 3) + (e & 1);
                            float sc = knn_score(acc[(mt * 4 + nt) * 4 + e], sm->qn[ql], sm->xn[row], p.metric);
                            knn_emit<MODE>(p, sm->thr, n0 + row, q0 + ql, ql, sc);
                        }
            } else {
                const int tx = tid & 15, ty = tid >> 4;
#pragma unroll
                for (int i = 0; i < 16; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        int row = ty + 16 * i, ql = tx + 16 * j;
                        float sc = knn_score(acc[i * 4 + j], sm->qn[ql], sm->xn[row], p.metric);
                        knn_emit<MODE>(p, sm->thr, n0 + row, q0 + ql, ql, sc);
                    }
            }
        }
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = 0.0f;
        xacc = 0.0f;
    }
    knn_cp_wait<0>();
}

/* |q|^2 per query, fixed order (a warp per query, lane-strided partial sums, tree combine). */
template <int DT>
static __global__ void knn_qnorm_kernel(const void *q, int64_t q_stride, int D, int nq, float *qn, int32_t *st_fb,
                                        int32_t *st_cand) {
    int qq = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (qq >= nq) return;
    if (lane == 0) { /* the call's per-query statistics start here (a memset launch each before) */
        st_fb[qq] = 0;
        st_cand[qq] = 0;
    }
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) {
        float v = knn_ld<DT>(q, (int64_t)qq * q_stride + d);
        s = fmaf(v, v, s);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(LTK_FULL, s, o);
    if (lane == 0) qn[qq] = s;
}

/* ---- per-query control kernels (one CTA of LTK_SEL_NT threads per query) ----------------------- */
struct knn_ctl {
    int nq, k, kp;
    int64_t n, m, cap;
    const float *samp; /* [nq][m] sample scores */
    uint32_t *thr, *cnt;
    uint32_t *fb_any, *fb_on, *fb_hist, *fb_cnt, *fb_kk;
    uint64_t *fb_prefix, *fb_mask, *fb_out;
    int32_t *fb_shift, *fb_top;
    const uint32_t *ckey, *crel;
    /* per-chunk results: sorted composites (key, ~local index), count */
    uint64_t *res;
    int32_t *res_cnt, *st_fb, *st_cand;
    int thr_smem;   /* the threshold's radix passes over the sample staged in shared memory (knn_thr_smem) */
    int stage;      /* final select: candidate keys it stages in shared memory (0: none) */
    int sort_bucket; /* final select: 2 knn_final_bucket, 1 radix + ltk_sort_bucket, 0 radix + bitonic (knn_sort_bucket) */
    int cand_pct;    /* candidate target of the threshold, percent of k (knn_cand_pct) */
};

/* Rank r of the threshold in the sample of m (of n rows): ~1.6k expected candidates where that
 * rank is >= 100, else ~2k (pct = 0; else pct percent of k), and a stable quantile (16 <= r <= 64
 * where that stays below half the cap), so that the expected count n r / m neither falls below k
 * nor reaches the cap. Host (stage sizing) and device. */
static __host__ __device__ __forceinline__ int64_t knn_thr_rank(int k, int64_t m, int64_t n, int64_t cap, int pct) {
    int64_t r;
    if (pct == 0) {
        r = (160 * (int64_t)k * m + 100 * n - 1) / (100 * n);
        if (r < 100) r = (2 * (int64_t)k * m + n - 1) / n;
    } else {
        r = (pct * (int64_t)k * m + 100 * n - 1) / (100 * n);
    }
    int64_t rv = cap * m / (2 * n);
    rv = rv < 16 ? 16 : (rv > 64 ? 64 : rv);
    return r < rv ? rv : r;
}

/* The threshold's radix passes stop at composite bit 42: the key's top 22 bits (sign, exponent, 13
 * mantissa bits). Why: any threshold at or below the r-th sampled score is exact (the candidates
 * only have to hold the top k), and one of these buckets spans 2^-13 of its octave, so the extra
 * candidates are the few sampled scores within that of the r-th; the third pass cost a third of
 * the kernel. */
#define KNN_THR_LO 42

struct knn_src_samp {
    const float *s;
    int64_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return (uint64_t)ltk_key32(__float_as_uint(s[i])) << 32; }
};

/* The sample's rank keys staged in shared memory (knn_thr_smem). */
struct knn_src_skeys {
    const uint32_t *k;
    int64_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return (uint64_t)k[i] << 32; }
};

static __global__ void __launch_bounds__(LTK_SEL_NT) knn_threshold_kernel(knn_ctl c) {
    __shared__ ltk_sel_smem sm;
    extern __shared__ __align__(16) uint32_t thr_keys[]; /* c.m rank keys when c.thr_smem, else absent (uint4 stores) */
    const int qq = blockIdx.x;
    if (threadIdx.x == 0) {
        c.cnt[qq] = 0;
        c.fb_on[qq] = 0;
        c.fb_cnt[qq] = 0;
        if (qq % KNN_BQ == 0) c.fb_any[qq / KNN_BQ] = 0;
        if (qq == 0) c.fb_any[(c.nq + KNN_BQ - 1) / KNN_BQ] = 0; /* "any block" slot */
    }
    /* the fallback's first histogram pass adds into this (a memset launch before) */
    for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) c.fb_hist[(int64_t)qq * LTK_SEL_BINS + i] = 0;
    uint32_t t = 0;
    if (c.n > c.cap && c.m >= 16) {
        const int64_t r = knn_thr_rank(c.k, c.m, c.n, c.cap, c.cand_pct);
        if (r <= c.m) {
            if (c.thr_smem) { /* one read of the sample, then the passes from shared memory */
                const float *sp = c.samp + (int64_t)qq * c.m;
                if ((c.m & 3) == 0) { /* 16-byte loads, 4 in flight a thread: ncu found the scalar
                                       * staging loop a quarter of the kernel, waiting on L2 */
                    const float4 *sp4 = (const float4 *)sp;
                    uint4 *tk4 = (uint4 *)thr_keys;
                    const int n4 = (int)(c.m >> 2);
                    for (int i0 = 0; i0 < n4; i0 += 4 * LTK_SEL_NT) {
                        float4 v[4];
#pragma unroll
                        for (int u = 0; u < 4; u++) {
                            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
                            if (i < n4) v[u] = sp4[i];
                        }
#pragma unroll
                        for (int u = 0; u < 4; u++) {
                            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
                            if (i < n4)
                                tk4[i] = make_uint4(ltk_key32(__float_as_uint(v[u].x)), ltk_key32(__float_as_uint(v[u].y)),
                                                    ltk_key32(__float_as_uint(v[u].z)), ltk_key32(__float_as_uint(v[u].w)));
                        }
                    }
                } else {
                    for (int64_t i = threadIdx.x; i < c.m; i += LTK_SEL_NT) thr_keys[i] = ltk_key32(__float_as_uint(sp[i]));
                }
                __syncthreads();
                knn_src_skeys src = {thr_keys, c.m};
                ltk_radix_select<knn_src_skeys, 1>(src, (uint32_t)r, 64, KNN_THR_LO, &sm);
            } else {
                knn_src_samp src = {c.samp + (int64_t)qq * c.m, c.m};
                ltk_radix_select<knn_src_samp, 1>(src, (uint32_t)r, 64, KNN_THR_LO, &sm);
            }
            t = (uint32_t)(sm.prefix >> 32);
        }
    }
    if (threadIdx.x == 0) c.thr[qq] = t;
}

/* After GATE: decide per query whether the candidates are provably complete (true: it needs the
 * exact fallback), and reset the fallback's per-query state. */
static __device__ bool knn_check_query(const knn_ctl &c, int qq) {
    uint32_t n = c.cnt[qq];
    bool fb = (int64_t)n > c.cap || ((int64_t)n < c.k && (int64_t)n < c.n);
    c.fb_on[qq] = fb;
    c.st_fb[qq] += fb ? 1 : 0;
    c.st_cand[qq] += (int32_t)n;
    c.fb_prefix[qq] = 0;
    c.fb_mask[qq] = 0;
    c.fb_shift[qq] = 53;
    c.fb_top[qq] = 64;
    c.fb_kk[qq] = (uint32_t)(c.n < c.k ? c.n : c.k);
    c.fb_cnt[qq] = 0;
    if (fb) {
        atomicExch(&c.fb_any[qq / KNN_BQ], 1u);
        atomicExch(&c.fb_any[(c.nq + KNN_BQ - 1) / KNN_BQ], 1u);
    }
    return fb;
}

static __global__ void knn_check_kernel(knn_ctl c) {
    int qq = blockIdx.x * blockDim.x + threadIdx.x;
    if (qq < c.nq) (void)knn_check_query(c, qq);
}

/* The same check as the first node of the fallback graph (knn_graph_build): one CTA, which then
 * sets the graph's condition, so that the fallback passes run only when some query needs them. */
static __global__ void __launch_bounds__(256) knn_check_cond_kernel(knn_ctl c, cudaGraphConditionalHandle h) {
    int any = 0;
    for (int qq = threadIdx.x; qq < c.nq; qq += 256) any |= knn_check_query(c, qq) ? 1 : 0;
    any = __syncthreads_or(any);
    if (threadIdx.x == 0) cudaGraphSetConditional(h, any ? 1u : 0u);
}

/* Between HIST passes: pick the digit, narrow the prefix, clear the histogram. */
static __global__ void __launch_bounds__(LTK_SEL_NT) knn_fb_step_kernel(knn_ctl c) {
    __shared__ ltk_sel_smem sm;
    const int qq = blockIdx.x;
    if (!c.fb_on[qq] || c.fb_top[qq] <= 0) return;
    uint32_t *h = c.fb_hist + (int64_t)qq * LTK_SEL_BINS;
    int top = c.fb_top[qq], w = top < 11 ? top : 11, sh = top - w;
    for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) {
        sm.hist[i] = i < (1 << w) ? h[i] : 0u;
        h[i] = 0;
    }
    __syncthreads();
    uint32_t kk = c.fb_kk[qq];
    ltk_find_bucket(&sm, 1 << w, kk);
    if (threadIdx.x == 0) {
        kk -= sm.above;
        c.fb_prefix[qq] |= (uint64_t)sm.digit << sh;
        c.fb_mask[qq] |= ((1ull << w) - 1) << sh;
        c.fb_kk[qq] = kk;
        int ntop = sm.bucket == kk ? 0 : sh; /* bucket exactly what is needed: done */
        c.fb_top[qq] = ntop;
        int nw = ntop < 11 ? ntop : 11;
        c.fb_shift[qq] = ntop - nw;
    }
}

/* Copies the n candidate keys of src to shared memory (skeys); mn / mx: the smallest and largest
 * this thread copied. LTK_SEL_U loads in flight a thread, as in the radix passes (one L2 round trip
 * each otherwise). */
static __device__ __forceinline__ void knn_stage_keys(const ltk_src_cand_glob &src, int n, uint32_t *skeys, uint32_t &mn,
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

/* The final select with the candidates' keys staged in shared memory (skeys, cnt <= c.stage): the
 * radix passes run over the 32-bit keys there, and only the winners' row indices are read from
 * global memory. Returns false, with nothing written to the output, when more than LTK_SEL_BINS
 * entries share the k-th key (the caller then runs the composite select over global memory).
 * Why: the global-memory passes re-read 8-byte composites from L2 three times, a round trip every
 * LTK_SEL_U entries a thread. Measured (H200, B = 64, N = 1M, s7-run6): 16.4 -> 15.7 us at
 * k = 1024; 83 us either way at k = 8192, where the 8192-entry sort is the cost. */
static __device__ bool knn_final_staged(const ltk_src_cand_glob &src, int k, int kp, ltk_sel_smem *sm, uint64_t *sb,
                                        uint32_t *skeys, bool staged, uint32_t *got) {
    const int n = (int)src.cnt;
    if (!staged) { /* (block-uniform; staged: knn_final_bucket left them there) */
        uint32_t mn, mx;
        knn_stage_keys(src, n, skeys, mn, mx);
    }
    __syncthreads();
    knn_src_skeys ks = {skeys, n};
    ltk_radix_select<knn_src_skeys, 1>(ks, (uint32_t)k, 64, 32, sm);
    /* Entries above the final bucket are in; of the bucket, kk. The bucket holds more than kk only
     * when the k-th key itself is tied (the mask then covers the whole key): those entries go to a
     * list, and the kk of lowest row index are taken. Why not the composite select over global
     * memory for ties: with bf16 data ~1% of queries tie at the k-th key, and the CTA that does
     * pays both selects while the others wait (97 vs 83 us at k = 8192, s7-run5). */
    const uint64_t prefix = sm->prefix, mask = sm->mask;
    const uint32_t kk = sm->kk, bucket = sm->bucket;
    const bool tie = bucket != kk;
    if (tie && bucket > LTK_SEL_BINS) return false; /* (block-uniform) a flat tail: the composite select */
    uint32_t *tie_rel = sm->hist; /* free after the select */
    if (threadIdx.x == 0) {
        sm->cnt = 0;
        sm->last = 0;
    }
    for (int j = threadIdx.x; j < kp; j += LTK_SEL_NT) sb[j] = 0ull;
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
        uint32_t key[LTK_SEL_U], rel[LTK_SEL_U], tk = 0, tt = 0; /* bit u: entry u taken / tied */
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) { /* the winners' row indices: loads in flight together */
            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
            key[u] = i < n ? skeys[i] : 0u;
            const uint64_t kc = ((uint64_t)key[u] << 32) & mask;
            const bool take = i < n && (kc > prefix || (!tie && kc == prefix));
            const bool tied = i < n && tie && kc == prefix;
            rel[u] = take || tied ? __ldcg(src.rel + i) : 0u;
            tk |= (uint32_t)take << u;
            tt |= (uint32_t)tied << u;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const bool take = (tk >> u) & 1u;
            const uint32_t pos = ltk_warp_append(take, &sm->cnt);
            if (take && pos < (uint32_t)kp) sb[pos] = ltk_comp(key[u], rel[u]);
            if ((tt >> u) & 1u) tie_rel[atomicAdd(&sm->last, 1u)] = rel[u]; /* rare */
        }
    }
    __syncthreads();
    if (tie) { /* rank each tied entry by row index (distinct): the kk lowest follow the k - kk above */
        const uint32_t above = sm->cnt, kt = (uint32_t)(prefix >> 32);
        for (uint32_t t = threadIdx.x; t < bucket; t += LTK_SEL_NT) {
            const uint32_t r = tie_rel[t];
            uint32_t rank = 0;
            for (uint32_t j = 0; j < bucket; j++) rank += tie_rel[j] < r;
            if (rank < kk && above + rank < (uint32_t)kp) sb[above + rank] = ltk_comp(kt, r);
        }
        __syncthreads();
        if (threadIdx.x == 0) sm->cnt = above + kk;
        __syncthreads();
    }
    *got = sm->cnt < (uint32_t)kp ? sm->cnt : (uint32_t)kp;
    __syncthreads();
    return true;
}

struct knn_out {
    int nq, k, kp, nch, metric;
    int64_t chunk_rows, out_stride;
    const uint64_t *res;  /* [nch][nq][kp] */
    const int32_t *res_cnt; /* [nch][nq] */
    int64_t *out_idx;
    float *out_scores;
};

static __device__ __forceinline__ float knn_report(uint32_t key, int metric) {
    float s = ltk_rank_key_to_f32(key);
    if (metric == LTK_METRIC_L2) s = s == 0.0f ? 0.0f : -s; /* distance; never -0 */
    return s;
}

/* One query's output row from its cnt sorted composites s (rows relative to the corpus: one
 * chunk), padded to k with -1 and the metric's worst score. */
static __device__ __forceinline__ void knn_write_row(const knn_out &o, int qq, const uint64_t *s, int cnt) {
    int64_t *oi = o.out_idx + (int64_t)qq * o.out_stride;
    float *os = o.out_scores ? o.out_scores + (int64_t)qq * o.out_stride : NULL;
    const float pad = o.metric == LTK_METRIC_L2 ? INFINITY : -INFINITY;
    for (int j = threadIdx.x; j < o.k; j += LTK_SEL_NT) {
        if (j < cnt) {
            const uint64_t v = s[j];
            oi[j] = (int64_t)ltk_comp_rel(v);
            if (os) os[j] = knn_report(ltk_comp_key(v), o.metric);
        } else {
            oi[j] = -1;
            if (os) os[j] = pad;
        }
    }
}

/* Bucket of a candidate key (ascending bucket: descending key): ltk_key_bucket of its distance
 * above the smallest (src/ltk-order.h: d itself below 256, then 256 buckets an octave). Why not
 * equal widths: near the threshold the candidates are densest, and a few far above it (a query's
 * own cluster on clustered embeddings) stretched the range until the bulk crowded a few buckets
 * (the CLI's k = 8,192 went back to the radix select, s10-run3); buckets of relative width 2^-8
 * hold ~n / 700 at most on an exponential tail. */
static __device__ __forceinline__ uint32_t knn_bucket(uint32_t key, uint32_t kmin, int sh) {
    return LTK_SEL_BINS - 1 - ltk_key_bucket(key, kmin, sh);
}

/* The final select and its sort in one: the k best of the n candidates (k < n <= stage), sorted
 * descending, from one histogram of key buckets (knn_bucket). Keys staged in shared memory as in
 * knn_final_staged (skeys); the histogram over [kmin, kmax] in LTK_SEL_BINS buckets, highest key
 * first; every bucket up to the one holding the k-th entry (b*) is scattered into sb (room for
 * k + LTK_BUCKET_MAX composites), each entry then placed by its count of larger composites in its
 * bucket, into out (the staging area again, once the keys are read: it holds >= k composites when
 * stage >= 2k); of b* only its best k - above land below position k. Returns out, or NULL (nothing
 * decided, the keys still staged) when a bucket up to b* holds more than LTK_BUCKET_MAX entries
 * (flat or tied tails): the caller then runs knn_final_staged. Why: at k = 8,192 (13k candidates
 * a query, B = 64, N = 1M) the final select took 42 us, half of it in three 11-bit radix passes
 * and the gather, the rest in the bucket sort (ncu, s10-run1): one histogram serves both. */
static __device__ const uint64_t *knn_final_bucket(const ltk_src_cand_glob &src, uint32_t k, ltk_sel_smem *sm,
                                                   uint64_t *sb, uint32_t *skeys) {
    const int n = (int)src.cnt, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        sm->kmin = 0xffffffffu;
        sm->kmax = 0u;
        sm->bmax = 0u;
        sm->digit = LTK_SEL_BINS; /* (set below: some bucket holds the k-th entry, as k < n) */
    }
    for (int i = threadIdx.x; i < LTK_SEL_BINS; i += LTK_SEL_NT) sm->hist[i] = 0;
    uint32_t mn, mx;
    knn_stage_keys(src, n, skeys, mn, mx);
    mn = __reduce_min_sync(LTK_FULL, mn);
    mx = __reduce_max_sync(LTK_FULL, mx);
    __syncthreads(); /* (the initial values above before the atomics) */
    if (lane == 0) {
        atomicMin(&sm->kmin, mn);
        atomicMax(&sm->kmax, mx);
    }
    __syncthreads();
    const uint32_t kmin = sm->kmin, span = sm->kmax - kmin;
    const int sh = ltk_key_bucket_shift(span); /* (span >> sh < 2^15) */
#define KNN_BUCKET(key) knn_bucket(key, kmin, sh)
    for (int i = threadIdx.x; i < n; i += LTK_SEL_NT) atomicAdd(&sm->hist[KNN_BUCKET(skeys[i])], 1u);
    __syncthreads();
    /* bucket starts (exclusive scan, LTK_SEL_BINS / LTK_SEL_NT bins a thread), b*, and the largest
     * bucket that holds winners (those starting below k) */
    const int per = LTK_SEL_BINS / LTK_SEL_NT, b0 = per * threadIdx.x;
    uint32_t cnt[LTK_SEL_BINS / LTK_SEL_NT], loc = 0, big = 0, tot;
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
    if (sm->bmax > LTK_BUCKET_MAX || sm->digit >= LTK_SEL_BINS) return NULL; /* (block-uniform) */
    /* entries up to b*: the start of the next bucket (the scatter below moves only starts up to b*) */
    const uint32_t bstar = sm->digit, nw = bstar + 1 < LTK_SEL_BINS ? sm->hist[bstar + 1] : (uint32_t)n;
    /* scatter the entries of buckets <= b*: their row indices are read from global memory (loads in
     * flight together) only for those */
    for (int i0 = 0; i0 < n; i0 += LTK_SEL_NT * LTK_SEL_U) {
        uint32_t key[LTK_SEL_U], rel[LTK_SEL_U], b[LTK_SEL_U];
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const int i = i0 + u * LTK_SEL_NT + threadIdx.x;
            key[u] = i < n ? skeys[i] : 0u;
            b[u] = i < n ? KNN_BUCKET(key[u]) : (uint32_t)LTK_SEL_BINS;
            rel[u] = b[u] <= bstar ? __ldcg(src.rel + i) : 0u;
        }
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++)
            if (b[u] <= bstar) sb[atomicAdd(&sm->hist[b[u]], 1u)] = ltk_comp(key[u], rel[u]);
    }
    __syncthreads();
    /* place: each entry at its bucket's start plus its count of larger composites there (distinct:
     * the row index breaks key ties, lower first); of b*, only ranks below k - above */
    uint64_t *out = (uint64_t *)skeys;
    for (uint32_t p = threadIdx.x; p < nw; p += LTK_SEL_NT) {
        const uint64_t c = sb[p];
        const uint32_t bk = KNN_BUCKET(ltk_comp_key(c));
        const uint32_t lo = bk ? sm->hist[bk - 1] : 0u, hi = sm->hist[bk];
        uint32_t rank = 0;
        for (uint32_t j = lo; j < hi; j++) rank += sb[j] > c;
        if (lo + rank < k) out[lo + rank] = c;
    }
#undef KNN_BUCKET
    __syncthreads();
    return out;
}

/* Writes one query's sorted result (s[0..got), descending): to the call's output when o.out_idx
 * (a single chunk: no merge to follow, and no output launch), else to res for knn_output_kernel. */
static __device__ void knn_final_store(const knn_ctl &c, const knn_out &o, int qq, const uint64_t *s, uint32_t got) {
    if (o.out_idx) {
        knn_write_row(o, qq, s, (int)got);
        return;
    }
    for (int j = threadIdx.x; j < c.kp; j += LTK_SEL_NT) c.res[(int64_t)qq * c.kp + j] = j < (int)got ? s[j] : 0ull;
    if (threadIdx.x == 0) c.res_cnt[qq] = (int32_t)(got < (uint32_t)c.k ? got : (uint32_t)c.k);
}

/* Final select of one query of one chunk: candidates (or the fallback's gathered composites),
 * sorted descending, then stored (knn_final_store). Shared memory: the scratch, sb (kp +
 * LTK_BUCKET_MAX composites), then c.stage staged keys. sort_bucket (LTK_CUDA_KNN_SORT): 2 the
 * bucket select (knn_final_bucket) where it applies, else as 1; 1 the radix select, then the
 * bucket sort for k > 2048; 0 the radix select and the bitonic network. */
/* (E >= 16: one CTA an SM, else ptxas held E = 16 to 64 registers and spilled) */
template <int E>
static __global__ void __launch_bounds__(LTK_SEL_NT, E >= 16 ? 1 : 2) knn_final_kernel(knn_ctl c, knn_out o) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));
    uint32_t *stage = (uint32_t *)(sb + c.kp + LTK_BUCKET_MAX);
    const int qq = blockIdx.x;
    uint32_t got;
    if (c.fb_on[qq]) {
        got = c.fb_cnt[qq];
        if (got > (uint32_t)c.kp) got = c.kp;
        for (int j = threadIdx.x; j < c.kp; j += LTK_SEL_NT) sb[j] = j < (int)got ? c.fb_out[(int64_t)qq * c.kp + j] : 0ull;
        __syncthreads();
    } else {
        ltk_src_cand_glob src = {c.ckey + (int64_t)qq * c.cap, c.crel + (int64_t)qq * c.cap, (int64_t)c.cnt[qq]};
        bool done = false;
        if (src.cnt <= c.k) {
            for (int j = threadIdx.x; j < c.kp; j += LTK_SEL_NT) sb[j] = j < src.cnt ? src.comp(j) : 0ull;
            got = (uint32_t)src.cnt;
            __syncthreads();
            done = true;
        } else if (src.cnt <= c.stage) {
            bool staged = false;
            if (c.sort_bucket == 2 && 2 * c.k <= c.stage) { /* (block-uniform) */
                const uint64_t *s = knn_final_bucket(src, (uint32_t)c.k, sm, sb, stage);
                if (s) {
                    knn_final_store(c, o, qq, s, (uint32_t)c.k);
                    return;
                }
                staged = true; /* a crowded bucket: the radix select over the keys it staged */
            }
            done = knn_final_staged(src, c.k, c.kp, sm, sb, stage, staged, &got);
        }
        if (!done) {
            ltk_radix_select<ltk_src_cand_glob, 1>(src, (uint32_t)c.k, 64, 0, sm);
            got = ltk_gather(src, sm->prefix, sm->mask, sb, c.kp, sm);
            for (int j = got + threadIdx.x; j < c.kp; j += LTK_SEL_NT) sb[j] = 0ull;
            __syncthreads();
        }
    }
    /* (the bucket sort's scratch is the staging area: its stage keys hold stage / 2 composites) */
    if (!(E >= 8 && c.sort_bucket && 2 * got <= (uint32_t)c.stage && ltk_sort_bucket(sb, got, (uint64_t *)stage, sm)))
        ltk_sort_desc<E>(sb, c.kp);
    knn_final_store(c, o, qq, sb, got);
}

/* Merge of per-chunk sorted results: position i = chunk * kp + j orders like the global index
 * among equal keys (chunks ascend, each list is sorted by (key desc, index asc)). */
struct knn_src_chunks {
    const uint64_t *res; /* [nch][nq][kp] */
    const int32_t *cnts; /* [nch] of this query (shared memory) */
    int kp, nq, qq, nch;
    __device__ int64_t n() const { return (int64_t)nch * kp; }
    __device__ uint64_t comp(int64_t i) const {
        int ch = (int)(i / kp), j = (int)(i % kp);
        if (j >= cnts[ch]) return 0ull; /* padding: below every real entry */
        uint64_t v = res[((int64_t)ch * nq + qq) * kp + j];
        return (v & 0xffffffff00000000ull) | (uint32_t)~(uint32_t)i;
    }
};

template <int E> static __global__ void __launch_bounds__(LTK_SEL_NT) knn_output_kernel(knn_out o) {
    extern __shared__ __align__(16) unsigned char smraw[];
    ltk_sel_smem *sm = (ltk_sel_smem *)smraw;
    uint64_t *sb = (uint64_t *)(smraw + sizeof(ltk_sel_smem));
    const int qq = blockIdx.x;
    if (o.nch == 1) {
        knn_write_row(o, qq, o.res + (int64_t)qq * o.kp, o.res_cnt[qq]);
        return;
    }
    int64_t *oi = o.out_idx + (int64_t)qq * o.out_stride;
    float *os = o.out_scores ? o.out_scores + (int64_t)qq * o.out_stride : NULL;
    const float pad = o.metric == LTK_METRIC_L2 ? INFINITY : -INFINITY;
    __shared__ int32_t cnts[64];
    for (int ch = threadIdx.x; ch < o.nch; ch += LTK_SEL_NT) cnts[ch] = o.res_cnt[(int64_t)ch * o.nq + qq];
    __syncthreads();
    int total = 0;
    for (int ch = 0; ch < o.nch; ch++) total += cnts[ch];
    knn_src_chunks src = {o.res, cnts, o.kp, o.nq, qq, o.nch};
    uint32_t got;
    if (total <= o.k) { /* everything found is in the answer */
        if (threadIdx.x == 0) sm->cnt = 0;
        __syncthreads();
        for (int64_t i = threadIdx.x; i < src.n(); i += LTK_SEL_NT) {
            uint64_t v = src.comp(i);
            if (v) sb[atomicAdd(&sm->cnt, 1u)] = v;
        }
        __syncthreads();
        got = sm->cnt;
    } else {
        ltk_radix_select<knn_src_chunks, true>(src, (uint32_t)o.k, 64, 0, sm);
        got = ltk_gather(src, sm->prefix, sm->mask, sb, o.kp, sm);
    }
    for (int j = got + threadIdx.x; j < o.kp; j += LTK_SEL_NT) sb[j] = 0ull;
    __syncthreads();
    ltk_sort_desc<E>(sb, o.kp);
    for (int j = threadIdx.x; j < o.k; j += LTK_SEL_NT) {
        if (j < (int)got) {
            uint32_t pos = ~(uint32_t)sb[j];
            int ch = (int)(pos / (uint32_t)o.kp), r = (int)(pos % (uint32_t)o.kp);
            uint64_t v = o.res[((int64_t)ch * o.nq + qq) * o.kp + r];
            oi[j] = (int64_t)ch * o.chunk_rows + ltk_comp_rel(v);
            if (os) os[j] = knn_report(ltk_comp_key(v), o.metric);
        } else {
            oi[j] = -1;
            if (os) os[j] = pad;
        }
    }
}

/* Materialize: per-chunk results from select's int32 output + the stored scores. */
static __global__ void knn_mat_pack_kernel(const int32_t *idx, const float *sc, int nq, int k, int kp, uint64_t *res,
                                    int32_t *res_cnt) {
    const int qq = blockIdx.x;
    int cnt = 0;
    for (int j = threadIdx.x; j < kp; j += blockDim.x) {
        uint64_t v = 0;
        if (j < k && idx[(int64_t)qq * k + j] >= 0)
            v = ltk_comp(ltk_key32(__float_as_uint(sc[(int64_t)qq * k + j])), (uint32_t)idx[(int64_t)qq * k + j]);
        res[(int64_t)qq * kp + j] = v;
    }
    if (threadIdx.x == 0) {
        for (int j = 0; j < k; j++) cnt += idx[(int64_t)qq * k + j] >= 0;
        res_cnt[qq] = cnt;
    }
}

/* ---- host --------------------------------------------------------------------------------- */
typedef struct knn_plan {
    int64_t qb;       /* queries per batch */
    int64_t chunk;    /* corpus rows per launch chunk */
    int nch;
    int kp;
    int64_t cap, m;
    int samp_mul, cand_pct; /* knn_sample_mul, knn_cand_pct at plan time */
    int64_t stage; /* candidate keys the final select stages in shared memory (before the device's limit) */
    size_t o_qn, o_samp, o_thr, o_cnt, o_ckey, o_crel, o_fbany, o_fbon, o_fbhist, o_fbcnt, o_fbkk, o_fbpre, o_fbmask,
        o_fbout, o_fbshift, o_fbtop, o_res, o_rescnt, o_stfb, o_stc, o_S, o_sidx, o_ssc, o_sws, total;
    size_t sel_ws;
} knn_plan;

static size_t knn_al(size_t x) { return (x + 255) & ~(size_t)255; }

static ltk_status knn_make_plan(const ltk_knn_args *a, const ltk_exec *e, knn_plan *pl) {
    memset(pl, 0, sizeof *pl);
    int kp = 1;
    while (kp < a->k) kp <<= 1;
    pl->kp = kp;
    pl->qb = a->B < KNN_QBATCH ? a->B : KNN_QBATCH;
    if (pl->qb < 1) pl->qb = 1;
    pl->chunk = a->N < knn_chunk_rows ? a->N : knn_chunk_rows;
    if (pl->chunk < 1) pl->chunk = 1;
    pl->nch = (int)((a->N + pl->chunk - 1) / pl->chunk);
    if (pl->nch < 1) pl->nch = 1;
    if (pl->nch > 64) return ltk_error(LTK_EUNSUPPORTED, "cuda knn: N=%lld needs %d chunks (at most 64)", (long long)a->N, pl->nch);
    pl->cap = 4 * (int64_t)a->k > 32768 ? 4 * (int64_t)a->k : 32768;
    pl->m = knn_sample_rows(pl->chunk, a->k, pl->samp_mul = knn_sample_mul());
    pl->cand_pct = knn_cand_pct();
    {   /* twice the expected candidates of the largest chunk (n r / m, or every row when no sample) */
        const int64_t n = pl->chunk, r = knn_thr_rank(a->k, pl->m, n, pl->cap, pl->cand_pct);
        int64_t ex = n <= pl->cap ? n : (r * n + pl->m - 1) / pl->m;
        int64_t sc = 2 * ex + 1024;
        pl->stage = (sc < pl->cap ? sc : pl->cap + 15) / 16 * 16;
    }
    int64_t Q = pl->qb;
    int mat = e && e->algo == LTK_ALGO_MATERIALIZE;
    size_t o = 0;
#define KNN_ADD(field, bytes) \
    pl->field = o;            \
    o = knn_al(o + (size_t)(bytes));
    KNN_ADD(o_qn, Q * 4);
    KNN_ADD(o_samp, mat ? 0 : Q * pl->m * 4);
    KNN_ADD(o_thr, Q * 4);
    KNN_ADD(o_cnt, Q * 4);
    KNN_ADD(o_ckey, mat ? 0 : Q * pl->cap * 4);
    KNN_ADD(o_crel, mat ? 0 : Q * pl->cap * 4);
    KNN_ADD(o_fbany, ((Q + KNN_BQ - 1) / KNN_BQ + 1) * 4);
    KNN_ADD(o_fbon, Q * 4);
    KNN_ADD(o_fbhist, mat ? 0 : Q * LTK_SEL_BINS * 4);
    KNN_ADD(o_fbcnt, Q * 4);
    KNN_ADD(o_fbkk, Q * 4);
    KNN_ADD(o_fbpre, Q * 8);
    KNN_ADD(o_fbmask, Q * 8);
    KNN_ADD(o_fbout, mat ? 0 : Q * kp * 8);
    KNN_ADD(o_fbshift, Q * 4);
    KNN_ADD(o_fbtop, Q * 4);
    KNN_ADD(o_res, (size_t)pl->nch * Q * kp * 8);
    KNN_ADD(o_rescnt, (size_t)pl->nch * Q * 4);
    KNN_ADD(o_stfb, Q * 4);
    KNN_ADD(o_stc, Q * 4);
    if (mat) {
        KNN_ADD(o_S, Q * pl->chunk * 4);
        KNN_ADD(o_sidx, Q * a->k * 4);
        KNN_ADD(o_ssc, Q * a->k * 4);
        /* the select's plan depends on its shape: take the largest over the batch and chunk sizes used */
        int64_t rws[2] = {Q, a->B % Q ? a->B % Q : Q}, cls[2] = {pl->chunk, a->N % pl->chunk ? a->N % pl->chunk : pl->chunk};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                ltk_select_args sa;
                memset(&sa, 0, sizeof sa);
                sa.rows = rws[i];
                sa.cols = cls[j];
                sa.k = a->k;
                sa.dtype = LTK_DTYPE_F32;
                sa.row_stride = cls[j];
                sa.out_stride = a->k;
                size_t w = 0;
                LTK_FORWARD_IF(ltk_cuda_select_workspace(&sa, e, &w));
                if (w > pl->sel_ws) pl->sel_ws = w;
            }
        KNN_ADD(o_sws, pl->sel_ws);
    }
#undef KNN_ADD
    pl->total = o;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_knn_workspace(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes) {
    knn_plan pl;
    LTK_FORWARD_IF(knn_make_plan(a, e, &pl));
    *bytes = pl.total;
    return LTK_OK;
}

template <int DT, int MODE>
static ltk_status knn_score_launch(const knn_params &p, int sms, cudaStream_t st) {
    if constexpr (DT != 0) /* the wgmma + TMA main loop where it applies (knn-sm90.cu) */
        if (p.sm90 && ltk_knn_sm90_fits(p, DT)) return ltk_knn_sm90_launch<DT, MODE>(p, sms, st);
    LTK_SEL_TRY(cudaFuncSetAttribute(knn_score_kernel<DT, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(knn_smem)));
    int64_t ntiles = (p.n + KNN_BM - 1) / KNN_BM, qblocks = (p.nq + KNN_BQ - 1) / KNN_BQ;
    int64_t items = ntiles * qblocks, grid = (int64_t)sms * 2;
    if (grid > items) grid = items;
    if (grid < 1) return LTK_OK;
    knn_score_kernel<DT, MODE><<<(unsigned)grid, KNN_NT, sizeof(knn_smem), st>>>(p);
    LTK_SEL_TRY(cudaGetLastError());
    return LTK_OK;
}

/* The GATE's per-query staging lists (knn-sm90.cu ks_gate_sub), on by default for 64-query items
 * with one query block; LTK_CUDA_KNN_SUBLISTS=0 keeps the shared list (A/B). H200, B = 64, N = 1M
 * (s11-run1, same process): the gated scan 422 -> 385-391 us at k = 8192, 378 -> 375 at k = 1024;
 * the CLI's fused call 1.29-1.30x -> 1.22-1.23x one corpus read at k = 8192. Read at every call. */
static int knn_sublists(void) {
    const char *e = getenv("LTK_CUDA_KNN_SUBLISTS");
    return !(e && !strcmp(e, "0"));
}

/* The final select: by default select and sort from one bucket histogram (knn_final_bucket, where
 * no bucket is crowded); LTK_CUDA_KNN_SORT=bucket the radix select, then ltk_sort_bucket for
 * k > 2048 (falling back to the bitonic network on a crowded bucket), =bitonic the radix select
 * and the network alone (A/B). H200, B = 64, N = 1M (s8-run2, `knn_timeline.py`): the bucket sort
 * took the final select 43.8 -> 26.7 us at k = 4096, 83 -> 50 us at k = 8192. Read at every call. */
static int knn_sort_bucket(void) {
    const char *e = getenv("LTK_CUDA_KNN_SORT");
    if (e && !strcmp(e, "bitonic")) return 0;
    if (e && !strcmp(e, "bucket")) return 1;
    return 2;
}

/* The threshold kernel reads the sample once into shared memory (c.m <= KNN_SAMPLE keys, 128 KB)
 * and runs its radix passes there; the same keys, so the same threshold. Why: ncu found that
 * kernel (29-34 us a call, 5% of a call at N = 1M) latency-bound, its passes re-reading the sample
 * from L2; staged, 31.3 -> 26.9 us (H200, B = 64, N = 1M, s7-run1). Where the device refuses 128 KB
 * (sm_86/89) or LTK_CUDA_KNN_THR=global (A/B), the passes read the sample from global memory. The
 * histogram aggregation per distinct digit (LTK_CUDA_KNN_HIST=match, session 6) measured
 * slower in the same run (threshold 31 -> 45 us, final select at k = 8,192 110 -> 118 us): removed. */
static int knn_thr_smem(int dev) {
    const char *e = getenv("LTK_CUDA_KNN_THR");
    if ((e && !strcmp(e, "global")) || dev < 0 || dev >= 64) return 0;
    static int attr_ok[64]; /* per device: 0 not tried, 1 set, -1 refused (one value for every call:
                             * concurrent first calls set the same) */
    if (attr_ok[dev] == 0) {
        cudaError_t e = cudaFuncSetAttribute(knn_threshold_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             KNN_SAMPLE * 4);
        if (e != cudaSuccess) (void)cudaGetLastError();
        attr_ok[dev] = e == cudaSuccess ? 1 : -1;
    }
    return attr_ok[dev] > 0;
}

/* LAUNCH(E) with the final / output kernel built for a sort of kp entries (register budget per E;
 * k <= 16,384 reaches E = 32). */
#define KNN_BY_E(kp, LAUNCH)                     \
    do {                                         \
        const int e_ = ltk_sort_e_of(kp);        \
        if (e_ > 16) LAUNCH(32);                 \
        else LTK_BY_E(e_, LAUNCH);               \
    } while (0)

/* The dynamic shared memory of the final and output kernels, set only when a call needs more than
 * before on this device (each call paid two attribute sets at its start, while the GPU waits for
 * the first launch). Raised under a lock and never lowered, so that no call can shrink the limit
 * under another's launch; one record for all dtypes (a per-template copy of it let an fp32 call
 * lower the limit that a bf16 call's record still counted on). */
#define KNN_FIN_KERNELS                                                                                        \
    {(const void *)knn_final_kernel<1>,   (const void *)knn_final_kernel<2>,  (const void *)knn_final_kernel<4>,  \
     (const void *)knn_final_kernel<8>,   (const void *)knn_final_kernel<16>, (const void *)knn_final_kernel<32>, \
     (const void *)knn_output_kernel<1>,  (const void *)knn_output_kernel<2>, (const void *)knn_output_kernel<4>, \
     (const void *)knn_output_kernel<8>,  (const void *)knn_output_kernel<16>, (const void *)knn_output_kernel<32>}

/* The largest static shared memory of those kernels (fixed by the build: read once). */
static int64_t knn_fin_static_smem(void) {
    static int64_t v = -1;
    if (__atomic_load_n(&v, __ATOMIC_ACQUIRE) < 0) {
        const void *fns[] = KNN_FIN_KERNELS;
        int64_t mx = 0;
        for (int i = 0; i < 12; i++) {
            cudaFuncAttributes fa;
            if (cudaFuncGetAttributes(&fa, fns[i]) != cudaSuccess) {
                (void)cudaGetLastError();
                mx = 1024; /* (then the attribute set below reports the error) */
                break;
            }
            if ((int64_t)fa.sharedSizeBytes > mx) mx = (int64_t)fa.sharedSizeBytes;
        }
        __atomic_store_n(&v, mx, __ATOMIC_RELEASE);
    }
    return v;
}

static ltk_status knn_fin_smem_reserve(size_t fin_smem, int dev) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static size_t set_for[64];
    const int known = dev >= 0 && dev < 64;
    if (known && fin_smem <= __atomic_load_n(&set_for[dev], __ATOMIC_ACQUIRE)) return LTK_OK;
    pthread_mutex_lock(&lock);
    cudaError_t ce = cudaSuccess;
    if (!known || fin_smem > set_for[dev]) {
        const void *fns[] = KNN_FIN_KERNELS;
        for (int i = 0; i < 12 && ce == cudaSuccess; i++)
            ce = cudaFuncSetAttribute(fns[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fin_smem);
        if (ce == cudaSuccess && known) __atomic_store_n(&set_for[dev], fin_smem, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    LTK_SEL_TRY(ce);
    return LTK_OK;
}

/* The exact fallback: 6 histogram passes over the chunk's rows (each followed by a step that picks
 * the digit) and a take pass, for the queries the check marked; each launch exits at once when no
 * query of its blocks needs it. */
template <int DT> static ltk_status knn_fallback_passes(const knn_params &p, const knn_ctl &c, int sms, cudaStream_t st) {
    for (int pass = 0; pass < 6; pass++) {
        LTK_FORWARD_IF((knn_score_launch<DT, KNN_HIST>(p, sms, st)));
        knn_fb_step_kernel<<<c.nq, LTK_SEL_NT, 0, st>>>(c);
        LTK_SEL_TRY(cudaGetLastError());
    }
    LTK_FORWARD_IF((knn_score_launch<DT, KNN_TAKE>(p, sms, st)));
    return LTK_OK;
}

/* ---- the check and the fallback as a CUDA graph with a conditional node ----------------------
 * Why: the 13 fallback launches are almost always empty, yet cost ~30 us a call (B = 64, N = 1M:
 * 6% of the call, s7-run6). Reading the flag on the host was slower (session 5: the GPU idles
 * until the next launch arrives), so the decision stays on the device: a graph of [check -> IF
 * (any query needs it) { the 13 launches }], launched in the stream where they were. Built on the
 * first call with given arguments (captured from the same launch code), then replayed; a few are
 * kept per process. Used for chunks of >= KNN_GRAPH_ROWS rows, where building one (~0.1-0.2 ms of
 * host time) hides behind the GATE scan; not while the caller's stream is being captured (plain
 * launches then). LTK_CUDA_KNN_GRAPH=0 never, =1 for every sampled chunk (tests; a failure to
 * build is then an error instead of a silent return to plain launches). */
#define KNN_GRAPH_ROWS 262144
#define KNN_GRAPHS 8
struct knn_graph_key {
    knn_params p;
    knn_ctl c;
    int dev, sms, dt, qi64;
};
struct knn_graph_ent {
    int used;
    knn_graph_key key;
    cudaGraphExec_t exec;
};
static knn_graph_ent knn_graphs[KNN_GRAPHS];
static int knn_graph_next, knn_graph_broken;
static cudaStream_t knn_graph_cs[64]; /* per device: the stream the bodies are captured from */
static pthread_mutex_t knn_graph_lock = PTHREAD_MUTEX_INITIALIZER;

static int knn_graph_mode(void) { /* 0 off, 1 forced, 2 default (large chunks) */
    const char *e = getenv("LTK_CUDA_KNN_GRAPH");
    if (e && !strcmp(e, "0")) return 0;
    if (e && !strcmp(e, "1")) return 1;
    return 2;
}

/* Builds [check -> IF { fallback passes }] (lock held). */
template <int DT>
static ltk_status knn_graph_build(const knn_params &p, const knn_ctl &c, int sms, int dev, cudaGraphExec_t *out) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t ex = NULL;
    ltk_status s = LTK_OK;
    cudaError_t ce = cudaSuccess;
    cudaGraphConditionalHandle h;
    cudaGraphNode_t chk, cn;
    cudaKernelNodeParams kp = {};
    /* (a union with members whose constructors C++ deletes: plain bytes, zeroed) */
    alignas(cudaGraphNodeParams) unsigned char cp_bytes[sizeof(cudaGraphNodeParams)];
    cudaGraphNodeParams &cp = *reinterpret_cast<cudaGraphNodeParams *>(cp_bytes);
    knn_ctl cc = c;
    void *args[2] = {(void *)&cc, (void *)&h};
    if (!knn_graph_cs[dev]) {
        ce = cudaStreamCreateWithFlags(&knn_graph_cs[dev], cudaStreamNonBlocking);
        if (ce != cudaSuccess) goto fail;
    }
    if ((ce = cudaGraphCreate(&g, 0)) != cudaSuccess) goto fail;
    if ((ce = cudaGraphConditionalHandleCreate(&h, g, 0, cudaGraphCondAssignDefault)) != cudaSuccess) goto fail;
    kp.func = (void *)knn_check_cond_kernel;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    if ((ce = cudaGraphAddKernelNode(&chk, g, NULL, 0, &kp)) != cudaSuccess) goto fail;
    memset(cp_bytes, 0, sizeof cp_bytes);
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = cudaGraphCondTypeIf;
    cp.conditional.size = 1;
    if ((ce = cudaGraphAddNode(&cn, g, &chk, NULL, 1, &cp)) != cudaSuccess) goto fail;
    if (!cp.conditional.phGraph_out || !cp.conditional.phGraph_out[0]) { /* (seen under compute-sanitizer) */
        s = ltk_error(LTK_EUNSUPPORTED, "knn fallback graph: no body graph for the conditional node");
        goto done;
    }
    if ((ce = cudaStreamBeginCaptureToGraph(knn_graph_cs[dev], cp.conditional.phGraph_out[0], NULL, NULL, 0,
                                            cudaStreamCaptureModeThreadLocal)) != cudaSuccess)
        goto fail;
    {
        s = knn_fallback_passes<DT>(p, c, sms, knn_graph_cs[dev]);
        cudaGraph_t body = NULL;
        cudaError_t ce2 = cudaStreamEndCapture(knn_graph_cs[dev], &body);
        if (s != LTK_OK) goto done;
        if ((ce = ce2) != cudaSuccess) goto fail;
    }
    if ((ce = cudaGraphInstantiate(&ex, g, 0)) != cudaSuccess) goto fail;
    cudaGraphDestroy(g);
    *out = ex;
    return LTK_OK;
fail:
    s = ltk_error(LTK_ECUDA, "knn fallback graph: %s", cudaGetErrorString(ce));
done:
    (void)cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    return s;
}

/* Check + fallback for one chunk: LTK_OK when done (by the graph or by plain launches). */
template <int DT>
static ltk_status knn_check_and_fallback(const knn_params &p, const knn_ctl &c, int sms, int dev, cudaStream_t st) {
    if (c.n <= c.cap) { /* no sample: every row is a candidate, cnt = n <= cap, no fallback possible */
        knn_check_kernel<<<(c.nq + 255) / 256, 256, 0, st>>>(c);
        LTK_SEL_TRY(cudaGetLastError());
        return LTK_OK;
    }
    const int mode = knn_graph_mode();
    if (mode && (mode == 1 || c.n >= KNN_GRAPH_ROWS) && dev >= 0 && dev < 64 && !ltk_stream_capturing(st) &&
        !__atomic_load_n(&knn_graph_broken, __ATOMIC_ACQUIRE)) {
        knn_graph_key key;
        memset(&key, 0, sizeof key);
        key.p = p;
        key.c = c;
        key.dev = dev;
        key.sms = sms;
        key.dt = DT;
        const char *qi = getenv("LTK_CUDA_KNN_QI");
        key.qi64 = qi && !strcmp(qi, "64");
        pthread_mutex_lock(&knn_graph_lock);
        cudaGraphExec_t ex = NULL;
        for (int i = 0; i < KNN_GRAPHS && !ex; i++)
            if (knn_graphs[i].used && !memcmp(&knn_graphs[i].key, &key, sizeof key)) ex = knn_graphs[i].exec;
        ltk_status s = LTK_OK;
        if (!ex) {
            s = knn_graph_build<DT>(p, c, sms, dev, &ex);
            if (s == LTK_OK) {
                knn_graph_ent *e = &knn_graphs[knn_graph_next];
                knn_graph_next = (knn_graph_next + 1) % KNN_GRAPHS;
                if (e->used) (void)cudaGraphExecDestroy(e->exec); /* (work already launched completes) */
                e->used = 1;
                e->key = key;
                e->exec = ex;
            }
        }
        cudaError_t ce = s == LTK_OK ? cudaGraphLaunch(ex, st) : cudaSuccess;
        pthread_mutex_unlock(&knn_graph_lock);
        if (s == LTK_OK && ce == cudaSuccess) return LTK_OK;
        if (mode == 1) return s != LTK_OK ? s : ltk_error(LTK_ECUDA, "knn fallback graph launch: %s", cudaGetErrorString(ce));
        (void)cudaGetLastError(); /* default mode: plain launches from now on */
        __atomic_store_n(&knn_graph_broken, 1, __ATOMIC_RELEASE);
    }
    knn_check_kernel<<<(c.nq + 255) / 256, 256, 0, st>>>(c);
    LTK_SEL_TRY(cudaGetLastError());
    return knn_fallback_passes<DT>(p, c, sms, st);
}

template <int DT>
static ltk_status knn_run(const ltk_knn_args *a, const ltk_exec *e, const knn_plan *pl, unsigned char *ws,
                          cudaStream_t st, int dev, int sms, int sm90) {
    const int esz = DT == 0 ? 4 : 2;
    const int mat = e->algo == LTK_ALGO_MATERIALIZE, score_only = e->algo == LTK_ALGO_SCORE_ONLY;
    const size_t fin_smem = sizeof(ltk_sel_smem) + (size_t)pl->kp * 8; /* output kernels */
    /* the final kernels: LTK_BUCKET_MAX more composites (knn_final_bucket), then the staged
     * candidate keys, as many as the device's shared memory allows */
    const size_t fin_base = fin_smem + (size_t)LTK_BUCKET_MAX * 8;
    int smem_optin = 0;
    LTK_SEL_TRY(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    /* what the final and output kernels may take dynamically: the opt-in limit less their static
     * shared memory (the output kernel's chunk counts). Without it, k = 8,193..~11,000 on a sampled
     * corpus (staging clamped to the limit) failed the attribute set with "invalid argument" (the
     * MiniLM set at k = 10,000, s11-run5). */
    const int64_t fin_limit = (int64_t)smem_optin - knn_fin_static_smem();
    int64_t stage = pl->stage;
    if ((int64_t)fin_base + stage * 4 > fin_limit) stage = (fin_limit - (int64_t)fin_base) / 4 / 16 * 16;
    if (stage < 2 * (int64_t)a->k) stage = 0; /* too few to matter: the global-memory select */
    const size_t fin_smem_final = fin_base + (size_t)stage * 4;
    /* one chunk, fused: the final kernel writes the call's output itself (no output launch) */
    const int direct = pl->nch == 1 && !mat && a->N > 0;
    LTK_FORWARD_IF(knn_fin_smem_reserve(fin_smem_final, dev));
    for (int64_t b0 = 0; b0 < a->B; b0 += pl->qb) {
        int nq = (int)(a->B - b0 < pl->qb ? a->B - b0 : pl->qb);
        const char *qptr = (const char *)a->queries + b0 * a->q_stride * esz;
        float *qn = (float *)(ws + pl->o_qn);
        knn_out o;
        memset(&o, 0, sizeof o);
        o.nq = nq;
        o.k = a->k;
        o.kp = pl->kp;
        o.nch = pl->nch;
        o.metric = (int)a->metric;
        o.chunk_rows = pl->chunk;
        o.out_stride = a->out_stride;
        o.res = (const uint64_t *)(ws + pl->o_res);
        o.res_cnt = (const int32_t *)(ws + pl->o_rescnt);
        o.out_idx = a->out_idx + b0 * a->out_stride;
        o.out_scores = a->out_scores ? a->out_scores + b0 * a->out_stride : NULL;
        knn_out fo = o; /* what the final kernel writes: the output (direct) or res */
        if (!direct) fo.out_idx = NULL;
        /* |q|^2 and the statistics' reset: before anything that reads them. For inner product the
         * first chunk's sample scan reads neither and goes first: the GPU starts the call's first
         * long kernel one launch earlier (the host is on the critical path until the GATE scan). */
        int qn_done = 0;
#define KNN_QNORM()                                                                                               \
    if (!qn_done) {                                                                                                \
        knn_qnorm_kernel<DT><<<(nq + 7) / 8, 256, 0, st>>>(qptr, a->q_stride, a->D, nq, qn,                       \
                                                           (int32_t *)(ws + pl->o_stfb), (int32_t *)(ws + pl->o_stc)); \
        LTK_SEL_TRY(cudaGetLastError());                                                                           \
        qn_done = 1;                                                                                               \
    }
        if (a->metric != LTK_METRIC_IP || mat || score_only) KNN_QNORM();
        for (int ch = 0; ch < pl->nch; ch++) {
            int64_t r0 = (int64_t)ch * pl->chunk, nr = a->N - r0 < pl->chunk ? a->N - r0 : pl->chunk;
            knn_params p;
            memset(&p, 0, sizeof p);
            p.q = qptr;
            p.q_stride = a->q_stride;
            p.D = a->D;
            p.metric = (int)a->metric;
            p.nq = nq;
            p.qn = qn;
            p.kp = pl->kp;
            uintptr_t align = (uintptr_t)a->queries | (uintptr_t)a->base;
            int vec = (align % 16 == 0) && ((a->D * esz) % 16 == 0) && ((a->q_stride * esz) % 16 == 0) &&
                      ((a->base_stride * esz) % 16 == 0);
            p.vec = vec;
            p.sm90 = sm90;
            p.sub = knn_sublists();
            uint64_t *res = (uint64_t *)(ws + pl->o_res) + (size_t)ch * nq * pl->kp;
            int32_t *res_cnt = (int32_t *)(ws + pl->o_rescnt) + (size_t)ch * nq;
            if (nr <= 0) { /* N == 0 */
                LTK_SEL_TRY(cudaMemsetAsync(res, 0, (size_t)nq * pl->kp * 8, st));
                LTK_SEL_TRY(cudaMemsetAsync(res_cnt, 0, (size_t)nq * 4, st));
                continue;
            }
            if (mat) {
                p.x = (const char *)a->base + r0 * a->base_stride * esz;
                p.x_stride = a->base_stride;
                p.n = nr;
                p.S = (float *)(ws + pl->o_S);
                p.ld = nr;
                LTK_FORWARD_IF((knn_score_launch<DT, KNN_STORE>(p, sms, st)));
                ltk_select_args sa;
                memset(&sa, 0, sizeof sa);
                sa.rows = nq;
                sa.cols = nr;
                sa.k = a->k;
                sa.dtype = LTK_DTYPE_F32;
                sa.scores = p.S;
                sa.row_stride = nr;
                sa.out_idx = (int32_t *)(ws + pl->o_sidx);
                sa.out_scores = (float *)(ws + pl->o_ssc);
                sa.out_stride = a->k;
                ltk_exec se = *e;
                se.stats = NULL;
                size_t need = 0;
                LTK_FORWARD_IF(ltk_cuda_select_workspace(&sa, &se, &need));
                LTK_RETURN_IF(need > pl->sel_ws, LTK_EINTERNAL, "knn materialize: select workspace %zu > planned %zu", need,
                              pl->sel_ws);
                LTK_FORWARD_IF(ltk_cuda_select(&sa, &se, ws + pl->o_sws, need));
                knn_mat_pack_kernel<<<nq, 256, 0, st>>>(sa.out_idx, sa.out_scores, nq, a->k, pl->kp, res, res_cnt);
                LTK_SEL_TRY(cudaGetLastError());
                continue;
            }
            knn_ctl c;
            memset(&c, 0, sizeof c);
            c.nq = nq;
            c.k = a->k;
            c.kp = pl->kp;
            c.n = nr;
            c.cap = pl->cap;
            c.m = knn_sample_rows(nr, a->k, pl->samp_mul);
            c.cand_pct = pl->cand_pct;
            c.samp = (const float *)(ws + pl->o_samp);
            c.thr = (uint32_t *)(ws + pl->o_thr);
            c.cnt = (uint32_t *)(ws + pl->o_cnt);
            c.fb_any = (uint32_t *)(ws + pl->o_fbany);
            c.fb_on = (uint32_t *)(ws + pl->o_fbon);
            c.fb_hist = (uint32_t *)(ws + pl->o_fbhist);
            c.fb_cnt = (uint32_t *)(ws + pl->o_fbcnt);
            c.fb_kk = (uint32_t *)(ws + pl->o_fbkk);
            c.fb_prefix = (uint64_t *)(ws + pl->o_fbpre);
            c.fb_mask = (uint64_t *)(ws + pl->o_fbmask);
            c.fb_out = (uint64_t *)(ws + pl->o_fbout);
            c.fb_shift = (int32_t *)(ws + pl->o_fbshift);
            c.fb_top = (int32_t *)(ws + pl->o_fbtop);
            c.ckey = (const uint32_t *)(ws + pl->o_ckey);
            c.crel = (const uint32_t *)(ws + pl->o_crel);
            c.res = res;
            c.res_cnt = res_cnt;
            c.st_fb = (int32_t *)(ws + pl->o_stfb);
            c.st_cand = (int32_t *)(ws + pl->o_stc);
            c.thr_smem = knn_thr_smem(dev);
            c.stage = (int)stage;
            c.sort_bucket = knn_sort_bucket();
            /* 1. sample: every (nr/m)-th row */
            if (nr > c.cap && !score_only) {
                knn_params ps = p;
                int64_t stride = nr / c.m;
                ps.x = (const char *)a->base + r0 * a->base_stride * esz;
                ps.x_stride = a->base_stride * stride;
                ps.vec = vec && ((ps.x_stride * esz) % 16 == 0);
                ps.n = c.m;
                ps.S = (float *)c.samp;
                ps.ld = c.m;
                LTK_FORWARD_IF((knn_score_launch<DT, KNN_STORE>(ps, sms, st)));
            }
            KNN_QNORM();
            knn_threshold_kernel<<<nq, LTK_SEL_NT, c.thr_smem ? (size_t)c.m * 4 : 0, st>>>(c);
            LTK_SEL_TRY(cudaGetLastError());
            if (score_only) LTK_SEL_TRY(cudaMemsetAsync(c.thr, 0xff, (size_t)nq * 4, st)); /* nothing passes */
            /* 2. GATE */
            p.x = (const char *)a->base + r0 * a->base_stride * esz;
            p.x_stride = a->base_stride;
            p.n = nr;
            p.thr = c.thr;
            p.cnt = c.cnt;
            p.ckey = (uint32_t *)c.ckey;
            p.crel = (uint32_t *)c.crel;
            p.cap = c.cap;
            p.fb_any = c.fb_any;
            p.fb_on = c.fb_on;
            p.fb_prefix = c.fb_prefix;
            p.fb_mask = c.fb_mask;
            p.fb_shift = c.fb_shift;
            p.fb_top = c.fb_top;
            p.fb_hist = c.fb_hist;
            p.fb_out = c.fb_out;
            p.fb_cnt = c.fb_cnt;
            LTK_FORWARD_IF((knn_score_launch<DT, KNN_GATE>(p, sms, st)));
            if (score_only) continue;
            /* 3. check, 4. exact fallback passes (only when a query needs them) */
            LTK_FORWARD_IF(knn_check_and_fallback<DT>(p, c, sms, dev, st));
            /* 5. final select */
#define KNN_FINAL(E) knn_final_kernel<E><<<nq, LTK_SEL_NT, fin_smem_final, st>>>(c, fo)
            KNN_BY_E(pl->kp, KNN_FINAL);
#undef KNN_FINAL
            LTK_SEL_TRY(cudaGetLastError());
        }
        KNN_QNORM(); /* (N = 0: no chunk ran one) */
#undef KNN_QNORM
        if (score_only) continue;
        if (!direct) {
#define KNN_OUTPUT(E) knn_output_kernel<E><<<nq, LTK_SEL_NT, fin_smem, st>>>(o)
            KNN_BY_E(pl->kp, KNN_OUTPUT);
#undef KNN_OUTPUT
            LTK_SEL_TRY(cudaGetLastError());
        }
        if (e->stats) {
            int32_t *h = (int32_t *)malloc((size_t)nq * 8);
            LTK_RETURN_IF(!h, LTK_ENOMEM, "stats");
            cudaError_t ce = cudaMemcpyAsync(h, ws + pl->o_stfb, (size_t)nq * 4, cudaMemcpyDeviceToHost, st);
            if (ce == cudaSuccess) ce = cudaMemcpyAsync(h + nq, ws + pl->o_stc, (size_t)nq * 4, cudaMemcpyDeviceToHost, st);
            if (ce == cudaSuccess) ce = cudaStreamSynchronize(st);
            if (ce != cudaSuccess) {
                free(h);
                return ltk_error(LTK_ECUDA, "knn stats: %s", cudaGetErrorString(ce));
            }
            for (int i = 0; i < nq; i++) {
                e->stats->fallback_rows += h[i] > 0;
                e->stats->candidates += h[nq + i];
                if (h[nq + i] > e->stats->candidates_max) e->stats->candidates_max = h[nq + i];
                if (e->stats->row_candidates) e->stats->row_candidates[b0 + i] = h[nq + i];
            }
            free(h);
        }
    }
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t ws_bytes) {
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->B;
    }
    if (a->B == 0) return LTK_OK;
    knn_plan pl;
    LTK_FORWARD_IF(knn_make_plan(a, e, &pl));
    LTK_RETURN_IF(ws_bytes < pl.total || !ws, LTK_EWORKSPACE, "knn workspace of %zu bytes < %zu required", ws_bytes,
                  pl.total);
    int dev = 0, sms = 0, major = 0, minor = 0;
    LTK_SEL_TRY(cudaGetDevice(&dev));
    LTK_SEL_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    LTK_SEL_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    LTK_SEL_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    const int sm90 = a->dtype != LTK_DTYPE_F32 && ltk_knn_sm90_enabled(major, minor);
    LTK_RETURN_IF(major < 8, LTK_EUNSUPPORTED, "cuda knn needs compute capability 8.0 or newer (device has %d.x)", major);
    cudaStream_t st = (cudaStream_t)e->stream;
    switch (a->dtype) {
    case LTK_DTYPE_F32: return knn_run<0>(a, e, &pl, (unsigned char *)ws, st, dev, sms, sm90);
    case LTK_DTYPE_F16: return knn_run<1>(a, e, &pl, (unsigned char *)ws, st, dev, sms, sm90);
    case LTK_DTYPE_BF16: return knn_run<2>(a, e, &pl, (unsigned char *)ws, st, dev, sms, sm90);
    default: return ltk_error(LTK_EUNSUPPORTED, "cuda knn: dtype %d", (int)a->dtype);
    }
}
