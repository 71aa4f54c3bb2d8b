/* Portable scoring kernel of the indexer (sm_80 and later; every dtype, H, D): CUDA cores, fp32
 * arithmetic on exactly decoded inputs, one CTA per query row. Same modes and per-row state as the
 * sm_90a kernel (fused gate + candidates + histogram + refresh, score-only, materialize), and one
 * fixed accumulation order, so its fused and materialize paths see the same scores bit for bit.
 * Slow next to the tensor-core path; it exists so the library is exact on any recent GPU. */
#include "indexer.cuh"
#include "ptx.cuh"

#define PT_THREADS 256
#define PT_KEYS 32 /* keys per tile: one per lane */

__global__ void __launch_bounds__(PT_THREADS) ltk_portable_scan_kernel(const ltk_scan_params p) {
    extern __shared__ float pt_smem[];
    const int D = p.D, H = p.H, DP = p.D + 1; /* padded key rows: lanes read different banks */
    float *ktile = pt_smem;                   /* [PT_KEYS][DP] */
    float *red = ktile + PT_KEYS * DP;        /* [8][PT_KEYS] per-warp partial sums */
    int32_t *hist = (int32_t *)(red + 8 * PT_KEYS);
    __shared__ float edge_s;
    __shared__ int32_t blk_s[PT_KEYS]; /* paged: each key's cache block (-1 unmapped) */
    __shared__ int32_t th_s;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    int64_t nrows = p.nrows;
    if (p.row_list) {
        int64_t c = (int64_t)*p.row_count - p.list_off;
        nrows = c < 0 ? 0 : (c > p.nrows ? p.nrows : c);
    }
    for (int64_t lr = blockIdx.x; lr < nrows; lr += gridDim.x) {
        const int64_t t = p.row_list ? (int64_t)p.row_list[p.list_off + lr] : p.row0 + lr;
        int64_t lo, hi;
        ltk_row_range(p.ks, p.ke, t, p.S, &lo, &hi);
        if (p.skip_short && hi - lo <= p.k) continue;
        lo = lo > p.col_lo ? lo : p.col_lo;
        hi = hi < p.col_hi ? hi : p.col_hi;
        if (lo >= hi) continue;
        const bool fused = p.mode == LTK_SCAN_FUSED;
        float smin = 0.0f, delta = 0.0f;
        if (threadIdx.x == 0) {
            th_s = 0;
            edge_s = __int_as_float(0x7f800000); /* score-only: nothing passes */
            if (fused) {
                th_s = p.th[lr];
                edge_s = ltk_edge(th_s, p.smin[lr], p.delta[lr]);
            }
        }
        if (fused) {
            smin = p.smin[lr];
            delta = p.delta[lr];
        }
        for (int i = threadIdx.x; i < LTK_NB; i += PT_THREADS) hist[i] = 0;
        __syncthreads();
        /* warp 0's copy of the threshold bin (uniform: ltk_refresh_th gives every lane the same).
         * Why a register: lane 0 comparing and updating the shared copy was an intra-warp hazard for
         * racecheck (the other lanes' load of it may be issued before the lane test). */
        int32_t th_w = th_s;
        const int64_t qrow = t * p.q_stride;
        int tiles = 0;
        for (int64_t k0 = lo; k0 < hi; k0 += PT_KEYS, tiles++) {
            /* key tile, decoded once */
            if (p.pg.cache) { /* paged: the block of each key, then its e4m3 bytes (zero if unmapped) */
                if (threadIdx.x < PT_KEYS)
                    blk_s[threadIdx.x] = k0 + threadIdx.x < hi ? ltk_pg_block(p.pg, t, k0 + threadIdx.x) : -1;
                __syncthreads();
                for (int i = threadIdx.x; i < PT_KEYS * D; i += PT_THREADS) {
                    int kk = i / D, d = i % D;
                    const int32_t b = blk_s[kk];
                    const int64_t tok = (k0 + kk) % p.pg.bkv;
                    float v = 0.0f;
                    if (b >= 0 && p.pg.contig == 2) { /* listed sub-blocks of cache pages */
                        const int32_t r = p.pg.page_kv / p.pg.bkv;
                        const int64_t row = (int64_t)(b % r) * p.pg.bkv + tok;
                        v = ltk_e4m3_f32(p.pg.cache[(int64_t)(b / r) * p.pg.bstride + row * D + d]);
                    } else if (b >= 0 && p.pg.contig) { /* listed blocks of the key array (any dtype) */
                        const int64_t row = (int64_t)b * p.pg.bkv + tok;
                        if (row < p.pg.nkeys) v = ltk_load_elem(p.pg.cache, p.dtype, row * p.pg.kv_stride + d);
                    } else if (b >= 0) {
                        v = ltk_e4m3_f32(p.pg.cache[b * p.pg.bstride + tok * D + d]);
                    }
                    ktile[kk * DP + d] = v;
                }
            } else {
                for (int i = threadIdx.x; i < PT_KEYS * D; i += PT_THREADS) {
                    int kk = i / D, d = i % D;
                    int64_t key = k0 + kk;
                    ktile[kk * DP + d] = key < hi ? ltk_load_elem(p.kv, p.dtype, key * p.kv_stride + d) : 0.0f;
                }
            }
            __syncthreads();
            /* warp w takes heads w, w+8, ...; lane = key */
            float part = 0.0f;
            for (int h = warp; h < H; h += 8) {
                float dot = 0.0f;
                const float *kr = ktile + lane * DP;
                for (int d = 0; d < D; d++)
                    dot = __fmaf_rn(ltk_load_elem(p.q, p.dtype, qrow + (int64_t)h * D + d), kr[d], dot);
                part = __fmaf_rn(p.weights[t * p.w_stride + h], ltk_relu_nan(dot), part);
            }
            red[warp * PT_KEYS + lane] = part;
            __syncthreads();
            if (warp == 0) {
                const int64_t key = k0 + lane;
                float s = red[lane];
                for (int w = 1; w < 8; w++) s = __fadd_rn(s, red[w * PT_KEYS + lane]);
                if (key < hi) {
                    float scl = 1.0f;
                    if (p.pg.cache && p.pg.contig == 2) {
                        const int32_t b = blk_s[lane], r = p.pg.page_kv / p.pg.bkv;
                        const int64_t row = (int64_t)(b % r) * p.pg.bkv + key % p.pg.bkv;
                        scl = b < 0 ? __int_as_float(0x7fc00000)
                                    : *(const float *)(p.pg.cache + (int64_t)(b / r) * p.pg.bstride +
                                                       (int64_t)p.pg.page_kv * D + 4 * row);
                    } else if (p.pg.cache && p.pg.contig) {
                        const int32_t b = blk_s[lane];
                        const int64_t row = (int64_t)b * p.pg.bkv + key % p.pg.bkv;
                        scl = b < 0 || row >= p.pg.nkeys ? __int_as_float(0x7fc00000) : p.pg.scale ? p.pg.scale[row] : 1.0f;
                    } else if (p.pg.cache) {
                        const int32_t b = blk_s[lane];
                        scl = b >= 0 ? *(const float *)(p.pg.cache + b * p.pg.bstride + (int64_t)p.pg.bkv * D +
                                                         4 * (key % p.pg.bkv))
                                     : __int_as_float(0x7fc00000);
                    } else if (p.kv_scale) {
                        scl = p.kv_scale[key];
                    }
                    s = __fmul_rn(s, scl);
                }
                const bool in = key < hi;
                if (p.bsz > 0) {
                    /* the block's largest score in ORDER: the max of rank keys (zeroed buffer) */
                    const uint32_t rk = in ? ltk_rank_key(s) : 0u;
                    if (rk) atomicMax((uint32_t *)p.bm + lr * p.bm_ld + key / p.bsz, rk);
                }
                if (p.mode == LTK_SCAN_MATERIALIZE) {
                    if (in) p.logits[lr * p.ld + (key - p.col_lo)] = s;
                } else if (p.mode != LTK_SCAN_BLOCKMAX) {
                    const bool pass = in && s >= *(volatile float *)&edge_s;
                    const uint32_t m = __ballot_sync(0xffffffffu, pass);
                    if (m) {
                        int32_t base = 0;
                        if (lane == 0) base = atomicAdd(p.cand_cnt + lr, __popc(m));
                        base = __shfl_sync(0xffffffffu, base, 0);
                        if (pass) {
                            int64_t pos = (int64_t)base + __popc(m & ((1u << lane) - 1u));
                            if (pos < p.cap) {
                                ltk_cand e;
                                e.score = s;
                                e.idx = (int32_t)key;
                                p.cand[lr * p.cap + pos] = e;
                            }
                            atomicAdd(hist + ltk_bin(s, smin, delta), 1);
                        }
                    }
                    if (fused && (tiles & 7) == 7) {
                        __syncwarp();
                        int32_t th = ltk_refresh_th(hist, p.k, lane);
                        if (th > th_w) {
                            th_w = th;
                            if (lane == 0) edge_s = ltk_edge(th, smin, delta);
                        }
                    }
                }
            }
            __syncthreads();
        }
    }
}

extern "C" ltk_status ltk_portable_scan(const ltk_scan_params *p, int nsm, cudaStream_t st) {
    size_t smem = sizeof(float) * ((size_t)PT_KEYS * (p->D + 1) + 8 * PT_KEYS) + sizeof(int32_t) * LTK_NB;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)ltk_portable_scan_kernel,
                                         sizeof(float) * (PT_KEYS * 257 + 8 * PT_KEYS) + 4 * LTK_NB));
    if (p->nrows <= 0) return LTK_OK;
    int64_t grid = p->nrows < (int64_t)nsm * 8 ? p->nrows : (int64_t)nsm * 8;
    ltk_portable_scan_kernel<<<(unsigned)grid, PT_THREADS, smem, st>>>(*p);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}
