/* The kNN's portable scoring main loop (any sm_80+): mma.sync m16n8k16 (bf16/f16, fp32
 * accumulation) over a cp.async pipeline, or for fp32 SIMT FMA in a fixed order (exact fp32
 * arithmetic; TF32 is not exact and is not used) — compute-bound, about an fp32-GEMM rate. The
 * epilogues (knn_emit: STORE / GATE / HIST / TAKE) are knn.cuh's, shared with the sm_90a loop of
 * knn-sm90.cu, which replaces this one on sm_90 for bf16/f16. Also the queries' squared norms. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "knn.cuh"
#include "ptx.cuh"

#define KNN_NT 256
#define KNN_BM 256 /* base rows per tile */
#define KNN_ST 4   /* cp.async stages */

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
    uint32_t thr[KNN_BQ], lim[KNN_BQ];
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
            ltk_cp_async16((uint32_t)__cvta_generic_to_shared(&sm->a[st][knn_swz(row, ch)]), src, ok);
        }
        {
            int c = threadIdx.x, row = c >> 2, ch = c & 3;
            int qq = q0 + row, kk = k0 + ch * epc;
            bool ok = qq < p.nq && kk < p.D;
            const char *src = (const char *)p.q + ((ok ? (int64_t)qq : 0) * p.q_stride + (ok ? kk : 0)) * esz;
            ltk_cp_async16((uint32_t)__cvta_generic_to_shared(&sm->b[st][knn_swz(row, ch)]), src, ok);
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
        ltk_cp_async_commit();
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
        ltk_cp_async_wait<KNN_ST - 2>();
        __syncthreads();
        {
            int64_t nx = s + KNN_ST - 1;
            if (nx < nsteps) {
                int64_t w2 = blockIdx.x + (nx / nk) * (int64_t)gridDim.x;
                knn_load_stage<DT>(p, sm, (int)(nx % KNN_ST), (w2 / qblocks) * KNN_BM, (int)(w2 % qblocks) * KNN_BQ,
                                   (int)(nx % nk) * KB);
            }
            ltk_cp_async_commit();
        }
        if (kt == 0 && tid < KNN_BQ) { /* read in this item's epilogue, after several barriers */
            int qq = q0 + tid;
            sm->qn[tid] = (p.metric != LTK_METRIC_IP && qq < p.nq) ? p.qn[qq] : 0.0f;
            if (MODE == KNN_GATE) {
                sm->thr[tid] = qq < p.nq ? p.thr[qq] : 0xffffffffu;
                sm->lim[tid] = qq < p.nq ? p.thr_lim[qq] : 0xffffffffu;
            }
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
                    ltk_ldmatrix_x4(bbase + knn_swz(row, ch) * 16, r0, r1, r2, r3);
                    bf[np * 2][0] = r0;
                    bf[np * 2][1] = r1;
                    bf[np * 2 + 1][0] = r2;
                    bf[np * 2 + 1][1] = r3;
                }
#pragma unroll
                for (int mt = 0; mt < 4; mt++) {
                    int row = wm * 64 + mt * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
                    ltk_ldmatrix_x4(abase + knn_swz(row, ch) * 16, af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
                }
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) ltk_mma_m16n8k16<DT>(&acc[(mt * 4 + nt) * 4], af[mt], bf[nt][0], bf[nt][1]);
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
                            knn_emit<MODE>(p, sm->thr, sm->lim, n0 + row, q0 + ql, ql, sc);
                        }
            } else {
                const int tx = tid & 15, ty = tid >> 4;
#pragma unroll
                for (int i = 0; i < 16; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        int row = ty + 16 * i, ql = tx + 16 * j;
                        float sc = knn_score(acc[i * 4 + j], sm->qn[ql], sm->xn[row], p.metric);
                        knn_emit<MODE>(p, sm->thr, sm->lim, n0 + row, q0 + ql, ql, sc);
                    }
            }
        }
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = 0.0f;
        xacc = 0.0f;
    }
    ltk_cp_async_wait<0>();
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

template <int DT, int MODE> ltk_status ltk_knn_mma_launch(const knn_params &p, int sms, cudaStream_t st) {
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)knn_score_kernel<DT, MODE>, sizeof(knn_smem)));
    int64_t ntiles = (p.n + KNN_BM - 1) / KNN_BM, qblocks = (p.nq + KNN_BQ - 1) / KNN_BQ;
    int64_t items = ntiles * qblocks, grid = (int64_t)sms * 2;
    if (grid > items) grid = items;
    if (grid < 1) return LTK_OK;
    knn_score_kernel<DT, MODE><<<(unsigned)grid, KNN_NT, sizeof(knn_smem), st>>>(p);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

template <int DT>
ltk_status ltk_knn_qnorm(const void *q, int64_t q_stride, int D, int nq, float *qn, int32_t *st_fb, int32_t *st_cand,
                         cudaStream_t st) {
    knn_qnorm_kernel<DT><<<(nq + 7) / 8, 256, 0, st>>>(q, q_stride, D, nq, qn, st_fb, st_cand);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

#define KNN_INST(DT)                                                                                         \
    template ltk_status ltk_knn_mma_launch<DT, KNN_STORE>(const knn_params &, int, cudaStream_t);             \
    template ltk_status ltk_knn_mma_launch<DT, KNN_GATE>(const knn_params &, int, cudaStream_t);              \
    template ltk_status ltk_knn_mma_launch<DT, KNN_HIST>(const knn_params &, int, cudaStream_t);              \
    template ltk_status ltk_knn_mma_launch<DT, KNN_TAKE>(const knn_params &, int, cudaStream_t);              \
    template ltk_status ltk_knn_qnorm<DT>(const void *, int64_t, int, int, float *, int32_t *, int32_t *, cudaStream_t);
KNN_INST(0)
KNN_INST(1)
KNN_INST(2)
