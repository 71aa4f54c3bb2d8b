/* Internal interface of the CUDA indexer: the parameter block shared by the scoring kernels
 * (indexer-sm90.cu, indexer-portable.cu), the per-row state they read and write, the small device
 * helpers every indexer kernel must compute identically (bins, threshold edges, dtype decoding),
 * and the host launchers each kernel file provides to the driver in indexer.cu.
 *
 * Row numbering: a launch covers `nrows` "local" rows. Local row r is absolute row row0 + r, or
 * row_list[r] in list mode (exact fallback). Per-row state arrays are indexed by the local row. */
#ifndef LTK_CUDA_INDEXER_CUH
#define LTK_CUDA_INDEXER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda-common.cuh"

#define LTK_NB 256 /* histogram bins per row */

/* Scoring modes of the scan kernels. */
enum {
    LTK_SCAN_FUSED = 0,       /* gate + candidates + histogram + refresh */
    LTK_SCAN_SCORE_ONLY = 1,  /* same epilogue, gate edge +inf: nothing written */
    LTK_SCAN_MATERIALIZE = 2, /* every in-range score written to logits */
    LTK_SCAN_BLOCKMAX = 3,    /* the candidate indexer's publication alone: the block maxima below and
                               * nothing else */
};
/* Block maxima (ltk_scan_params.bsz > 0, in any mode: the publication beside the mode's own work):
 * per block of bsz keys, the largest in-range score in ORDER, written to bm[r * bm_ld + block]
 * (absolute block ids; ltk_scan_params.bsz_direct: as a float by one plain store; else as its
 * rank key by atomicMax into a zeroed buffer, converted after). */

/* One candidate: the raw fp32 score and the absolute key index. */
typedef struct ltk_cand {
    float score;
    int32_t idx;
} ltk_cand;

/* A paged key source (the decode operation's cache): key i of absolute row t is token i % bkv of
 * block bt[(t / next_n) * bt_stride + i / bkv], whose bkv * D e4m3 key bytes start at
 * cache + block * bstride and are followed by its bkv fp32 scales. A table entry outside
 * [0, nblocks), or a block past max_blocks, reads as zero keys with a NaN scale: its positions score
 * NaN and rank last (the device cannot report a bad table without a host sync). cache == NULL: the
 * contiguous source of the indexer (kv, kv_stride, kv_scale).
 * contig = 1 (the candidate indexer's listed blocks, candidates.cu): no cache layout, block id j
 * is keys [j * bkv, (j + 1) * bkv) of the indexer's own key array, `cache` its bytes (kv, any
 * dtype), row stride kv_stride elements, nkeys rows, scales from `scale` (NULL = 1); nblocks =
 * ceil(nkeys / bkv), bstride unused.
 * contig = 2 (the candidate indexer's decode consumer): listed sub-blocks of a paged cache of
 * page_kv-token pages (layout as above, stride bstride): sub-block e is tokens
 * [(e % r) * bkv, (e % r + 1) * bkv) of page e / r, r = page_kv / bkv (a power of two); nblocks =
 * pages * r; an unmapped one (-1) scores NaN. */
typedef struct ltk_paged_src {
    const uint8_t *cache;
    int64_t nblocks, bstride;
    const int32_t *bt;
    int64_t bt_stride;
    int32_t bkv, max_blocks, next_n;
    int32_t contig;
    const float *scale;
    int64_t kv_stride, nkeys;
    int32_t page_kv;
} ltk_paged_src;

typedef struct ltk_scan_params {
    int mode;
    int64_t nrows;           /* local rows of this launch (upper bound in list mode) */
    int64_t row0;            /* absolute row of local row 0 (no list) */
    const int32_t *row_list; /* list mode: absolute rows, count in *row_count (clamped to nrows) */
    const int32_t *row_count;
    int64_t list_off;        /* list mode: first list entry of this launch */
    int64_t T, S;            /* call shape (S of the key source) */
    int32_t H, D, k;
    int dtype;
    /* inputs */
    const void *q;
    int64_t q_stride;
    const void *kv;
    int64_t kv_stride;
    const float *kv_scale;   /* NULL = 1 */
    const float *weights;
    int64_t w_stride;
    const int32_t *ks, *ke;  /* NULL = [0, S) */
    int skip_short;          /* rows with ke-ks <= k are not scanned (answered by the short-row kernel) */
    int64_t col_lo, col_hi;  /* only keys in [col_lo, col_hi) are scanned */
    /* fused state (local rows) */
    ltk_cand *cand;
    int64_t cap;             /* candidate capacity per row */
    int32_t *cand_cnt;       /* candidates offered per row (may exceed cap: overflow) */
    int32_t *th;             /* threshold bin per row, raised with atomicMax */
    const float *smin, *delta;
    /* materialize output: logits[r * ld + (key - col_lo)] */
    float *logits;
    int64_t ld;
    int nsplit;              /* key splits per q-block (persistent scheduling unit = q-block x split) */
    int32_t *row_hist;       /* sm_90a fused, nsplit > 1: [nrows][LTK_NB] gate histogram carried from one
                              * split of a row to the next (raised with atomicMax; NULL = none) */
    int nopass;              /* test hook (ltk_tune.cuda_scan_nopass): the fused scan's gate passes nothing */
    int64_t watchdog_ns;     /* sm_90a: a barrier wait longer than this records where (diag) and traps (0 = off) */
    int32_t *diag;           /* host-mapped watchdog record (indexer.cu, diag_ptr), may be NULL */
    ltk_paged_src pg;        /* paged keys (decode), or pg.cache NULL */
    int32_t bsz;             /* > 0: block maxima of bsz keys (above), in any mode */
    int bsz_direct;          /* block maxima: 1 = floats by plain stores (sm_90a, bsz 8 or 16) */
    float *bm;               /* block maxima of local row r at bm[r * bm_ld + block] */
    int64_t bm_ld;
    int group;               /* > 0: local rows come in groups of `group` that share their keys (one
                              * decode request's next_n rows, or 1 for a row list); a q-block then
                              * holds rows of one group only. 0: q-blocks pack consecutive rows. */
} ltk_scan_params;

/* q-blocks of a launch of nrows local rows (packed by bq, or by groups: see ltk_scan_params.group). */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int64_t ltk_scan_qblocks(int64_t nrows, int bq, int group) {
    if (group <= 0) return (nrows + bq - 1) / bq;
    return (nrows + group - 1) / group * ((group + bq - 1) / bq);
}

/* ---- device helpers shared by every indexer kernel ---------------------------------------- */
#ifdef __CUDACC__
/* Bin of a score: clamp(floor((x - smin) * delta), 0, NB-1); monotone non-decreasing in x
 * (NaN maps to 0; callers never bin a NaN that matters). */
static __device__ __forceinline__ int ltk_bin(float x, float smin, float delta) {
    float v = floorf(__fmul_rn(__fsub_rn(x, smin), delta));
    v = fminf(fmaxf(v, 0.0f), (float)(LTK_NB - 1));
    return (int)v;
}

/* The smallest float e with ltk_bin(e) >= th (th >= 1), found by bisection over the rank-key order
 * (bin is monotone in that order), so the gate `score >= e` is exactly `bin(score) >= th`.
 * th <= 0 gives -inf (everything but NaN passes). */
static __device__ __forceinline__ float ltk_edge(int th, float smin, float delta) {
    if (th <= 0) return __int_as_float((int)0xff800000u);
    uint32_t lo = 0x007fffffu, hi = 0xff800000u; /* rank keys of -inf and +inf */
    if (ltk_bin(ltk_rank_key_to_f32(hi), smin, delta) < th) return __int_as_float(0x7f800000); /* only +inf */
    while (lo < hi) {
        uint32_t mid = lo + ((hi - lo) >> 1);
        if (ltk_bin(ltk_rank_key_to_f32(mid), smin, delta) >= th) hi = mid;
        else lo = mid + 1;
    }
    return ltk_rank_key_to_f32(lo);
}

/* One warp over a 256-bin histogram, lane l holding bins 8l..8l+7 in v: the highest bin d whose
 * count from the top (bins >= d) reaches kk, or 0 if none does (.x), and the count in bins > d
 * (.y). Every lane gets both. Shared by the refresh (threshold bin), the prep's radix passes and the
 * candidate select's radix passes. */
static __device__ __forceinline__ uint2 ltk_warp_top_bin(const uint32_t v[LTK_NB / 32], uint32_t kk, int lane) {
    uint32_t sum = 0;
#pragma unroll
    for (int i = 0; i < LTK_NB / 32; i++) sum += v[i];
    uint32_t suf = sum; /* bins >= 8 lane */
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t y = __shfl_down_sync(0xffffffffu, suf, o);
        if (lane + o < 32) suf += y;
    }
    /* the highest lane whose suffix reaches kk holds d (lane 0 if none does: d = 0) */
    const uint32_t m = __ballot_sync(0xffffffffu, suf >= kk);
    const int L = m ? 31 - __clz((int)m) : 0;
    uint32_t acc = suf - sum;
    int d = (LTK_NB / 32) * L;
#pragma unroll
    for (int i = LTK_NB / 32 - 1; i >= 1; i--) {
        if (acc + v[i] >= kk) {
            d = (LTK_NB / 32) * L + i;
            break;
        }
        acc += v[i];
    }
    return make_uint2((uint32_t)__shfl_sync(0xffffffffu, d, L), __shfl_sync(0xffffffffu, acc, L));
}

/* Threshold refresh of one row by one warp: th = max{b : sum_{j>=b} hist[j] >= k} (0 if none).
 * Reads with atomicOr: the histogram is being incremented concurrently by the math warps. */
static __device__ __forceinline__ int32_t ltk_refresh_th(int32_t *hist, int32_t k, int lane) {
    int32_t *h = hist + lane * (LTK_NB / 32);
    uint32_t v[LTK_NB / 32];
#pragma unroll
    for (int i = 0; i < LTK_NB / 32; i++) v[i] = (uint32_t)atomicOr(h + i, 0);
    return (int32_t)ltk_warp_top_bin(v, (uint32_t)k, lane).x;
}

/* Clamped visible range of row t (device ranges are not validated by the front end). */
static __device__ __forceinline__ void ltk_row_range(const int32_t *ks, const int32_t *ke, int64_t t, int64_t S,
                                                     int64_t *lo, int64_t *hi) {
    int64_t a = ks ? (int64_t)ks[t] : 0, b = ke ? (int64_t)ke[t] : S;
    a = a < 0 ? 0 : (a > S ? S : a);
    b = b < a ? a : (b > S ? S : b);
    *lo = a;
    *hi = b;
}

/* The cache block of position i of absolute row t of a paged source, or -1 (see ltk_paged_src). */
static __device__ __forceinline__ int32_t ltk_pg_block(const ltk_paged_src &g, int64_t t, int64_t i) {
    const int64_t blk = i / g.bkv;
    if (i < 0 || blk >= g.max_blocks) return -1;
    const int32_t id = g.bt[(t / g.next_n) * g.bt_stride + blk];
    return id >= 0 && id < g.nblocks ? id : -1;
}

/* Exact decoders (every e4m3 value is a float; NaN stays NaN). */
static __device__ __forceinline__ float ltk_e4m3_f32(uint32_t v) {
    uint32_t s = (v & 0x80u) << 24, e = (v >> 3) & 0xfu, m = v & 7u;
    if (e == 0xfu && m == 7u) return __uint_as_float(s | 0x7fc00000u);
    if (e == 0u) {
        float mag = (float)m * 0.001953125f; /* m * 2^-9 */
        return s ? -mag : mag;
    }
    return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}
static __device__ __forceinline__ float ltk_load_elem(const void *p, int dtype, int64_t i) {
    switch (dtype) {
    case LTK_DTYPE_E4M3: return ltk_e4m3_f32(((const uint8_t *)p)[i]);
    case LTK_DTYPE_BF16: return __uint_as_float((uint32_t)((const uint16_t *)p)[i] << 16);
    default: return ((const float *)p)[i];
    }
}
#endif

/* ---- host launchers --------------------------------------------------------------------------- */
#ifdef __cplusplus
extern "C" {
#endif
/* The indexer over a paged key source (decode.cu builds `a` with kv NULL, ks zeros, ke the rows'
 * lengths, S the capacity, T = B * next_n, no state); pg NULL is ltk_cuda_indexer. A fused call
 * runs as dense windows (indexer.cu, DECODE_BUDGET). */
ltk_status ltk_cuda_indexer_paged_workspace(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e,
                                            size_t *bytes);
ltk_status ltk_cuda_indexer_paged(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, void *ws,
                                  size_t ws_bytes);
/* A decode call's indexer arguments and paged source (decode.cu), and its rows' ranges on st. */
void ltk_cuda_decode_source(const ltk_decode_args *d, ltk_indexer_args *a, ltk_paged_src *pg);
ltk_status ltk_cuda_decode_ranges(const ltk_decode_args *d, int32_t *ks, int32_t *ke, cudaStream_t st);
ltk_status ltk_cuda_decode_physical(const ltk_decode_args *d, cudaStream_t st);
/* The candidate indexer's block maxima of rows [row0, row0 + nrows) (indexer.cu; see there); pg
 * NULL: the indexer's own keys, else a decode call's cache (row0, nrows whole requests). */
ltk_status ltk_cuda_blockmax_scan(const ltk_indexer_args *a, const ltk_paged_src *pg, int32_t bsz, int64_t row0,
                                  int64_t nrows, float *out, int64_t ld, int *direct, cudaStream_t st);
/* The indexer call (ltk_cuda_indexer_paged) with the block maxima of its rows written by the same
 * scans: row t's block j at bm[t * bm_ld + j], every block meeting the row's range. *direct as
 * ltk_cuda_blockmax_scan's (0: rank keys, the buffer zeroed here; the caller converts them). */
ltk_status ltk_cuda_indexer_blockmax(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, void *ws,
                                     size_t ws_bytes, int32_t bsz, float *bm, int64_t bm_ld, int *direct);
/* LTK_CUDA_TRACE (the tuning table): a host driver's stages, each waited for and printed with the
 * time since the last (stderr); off while the stream is captured (indexer.cu). */
typedef struct ltk_trace {
    int on;
    double t0;
} ltk_trace;
void ltk_trace_begin(ltk_trace *tr, cudaStream_t st);
ltk_status ltk_trace_step(ltk_trace *tr, cudaStream_t st, const char *fmt, ...);
/* 1 if the sm_90a scan kernel can run these shapes on the current device. */
int ltk_sm90_supported(const ltk_indexer_args *a, int cc_major, int cc_minor);
int ltk_sm90_rows_per_block(int32_t H);
/* 1 if the sm_90a scan can read this paged source (D = 128, block_kv a power of two in [32, 256],
 * 16-byte aligned cache and block stride; listed blocks of a key array: [8, 256], 16-byte aligned
 * rows and scales) for these shapes. */
int ltk_sm90_paged_supported(const ltk_indexer_args *a, const ltk_paged_src *g, int cc_major, int cc_minor);

/* 1 if the sm_90a scan writes block maxima of bsz keys by plain stores (LTK_SCAN_BLOCKMAX). */
int ltk_sm90_blockmax_direct(int32_t bsz);

/* Launches the sm_90a scan (grid = min(units, nsm) persistent CTAs). */
ltk_status ltk_sm90_scan(const ltk_scan_params *p, int nsm, cudaStream_t st);
ltk_status ltk_portable_scan(const ltk_scan_params *p, int nsm, cudaStream_t st);

/* indexer-sample.cu */
ltk_status ltk_idx_union(const int32_t *ks, const int32_t *ke, int64_t T, int64_t S, int32_t k, int skip_short,
                         int64_t *lohi, cudaStream_t st);
/* Builds the sample key list P[0..m_max) (absolute keys, -1 padding): the hot set (filtered to
 * [lo, hi)), then a strided subset of [lo, hi - win) and the window [hi - win, hi). lohi[0..1] is
 * the union range (ltk_idx_union); lohi[2..4] receive where the strided part lies in P (start,
 * count) and the end of the key range it covers ([lohi[0], lohi[4])). */
ltk_status ltk_idx_sample_list(const int32_t *hot, int32_t hot_cap, int64_t m_hot, int64_t m_cold, int64_t win,
                               int64_t *lohi, int32_t *P, int64_t m_max, cudaStream_t st);
/* Gathers the sample's key rows (and scales) into a dense key source; padding rows are zero. */
ltk_status ltk_idx_gather(const ltk_indexer_args *a, const int32_t *P, int64_t m_pad, void *kvg, float *scaleg,
                          cudaStream_t st);
/* Per-row threshold setup from the sample scores sc[r * ld + j] (j < m_max); lohi as filled by
 * ltk_idx_sample_list. */
ltk_status ltk_idx_prep(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const float *sc, int64_t ld,
                        const int32_t *P, int64_t m_max, const int64_t *lohi, int skip_short, float *smin,
                        float *delta, int32_t *th, int32_t *cand_cnt, cudaStream_t st);

/* indexer-select.cu */
ltk_status ltk_idx_short_rows(const ltk_indexer_args *a, cudaStream_t st);
/* Exact top-k of every row's candidates; rows that overflowed (or hold fewer candidates than they
 * need) are appended to fb_list instead. Stats per absolute row in st_cand / st_bin (may be NULL). */
ltk_status ltk_idx_select_cands(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const ltk_cand *cand,
                                int64_t cap, const int32_t *cand_cnt, const float *smin, const float *delta,
                                int skip_short, int32_t *fb_list, int32_t *fb_count, int32_t *st_cand,
                                int32_t *st_bin, cudaStream_t st);
/* Exact top-k over materialized score windows. Local row r is absolute row (list ? list[off + r] :
 * row0 + r); its scores for keys [col_lo, col_hi) are at logits[r * ld + key - col_lo]. With
 * `run` (k entries per local row, counts in run_cnt), the previous windows' best are merged in;
 * `final` writes the call's outputs, else the merged best go back to `run`. */
ltk_status ltk_idx_select_dense(const ltk_indexer_args *a, int64_t row0, int64_t nrows, const int32_t *list,
                                const int32_t *list_count, int64_t list_off, const float *logits, int64_t ld,
                                int64_t col_lo, int64_t col_hi, ltk_cand *run, int32_t *run_cnt, int first,
                                int final, int skip_short, cudaStream_t st);
/* starts/ends[r] = clamped range of row row0 + r (for the select of select.cu). */
ltk_status ltk_idx_clamp_ranges(const int32_t *ks, const int32_t *ke, int64_t row0, int64_t nrows, int64_t S,
                                int32_t *starts, int32_t *ends, cudaStream_t st);
/* Zeroes the row counters (and marks fallback rows in the stats). */
ltk_status ltk_idx_mark_fallback(const int32_t *fb_list, const int32_t *fb_count, int64_t row0_abs_unused,
                                 int32_t *st_fb, int64_t nmax, cudaStream_t st);

/* indexer-vote.cu */
ltk_status ltk_idx_vote_workspace(int64_t T, int32_t k, int64_t S, int32_t cap, size_t *bytes);
ltk_status ltk_idx_vote(const ltk_indexer_args *a, ltk_indexer_state *state, void *ws, size_t ws_bytes,
                        cudaStream_t st);
#ifdef __cplusplus
}
#endif

#endif
