/* The CUDA candidate indexer (DeepSeek-V4.1; the contract is ltk_blocks_topk and ltk_candidates_topk
 * in litetopk.h, the design in docs/design.md "The candidate indexer"): host drivers and their
 * small kernels; the scoring is the indexer's scan (indexer-sm90.cu, indexer-portable.cu).
 *
 * Publication (ltk_blocks_topk), per sub-chunk of rows: the scan in block-max mode writes each
 * row's block maxima (one float a block: 1/b of the scores, which are never written), then the GPU
 * select (select.cu) takes the top block_k of the row's blocks, and a finishing kernel applies the
 * contract's row rules (the identity of a short row, the newest block pinned first, ids ascending).
 * With the row's ordinary top-k asked for, each sub-chunk is instead one indexer call on its slice of
 * the rows that writes the block maxima from its own scans (ltk_cuda_indexer_blockmax), then the
 * same select and finishing kernel.
 *
 * Consumer (ltk_candidates_topk): a prep kernel sorts and deduplicates each row's list into a
 * per-row block table of the blocks that meet the row's range, ascending, and the row's column range
 * in it (the first and last listed blocks may straddle the row's bounds); then the listed blocks
 * are a paged key source (ltk_paged_src, contig) for the decode operation's pipeline: the scan reads
 * them block by block (one TMA box of b key rows each on sm_90a), writes the rows' scores into
 * dense windows and the exact select takes the top k. Columns ascend with positions, so ties by the
 * lower column are ties by the lower key. A map kernel turns columns into keys. The materialize
 * algorithm (the in-library baseline) gathers the listed keys into a dense buffer first and scans
 * that.
 *
 * The decode forms (ltk_decode_blocks_topk, ltk_decode_candidates_topk) run the same drivers over a
 * decode call's indexer view (decode.cu): the publication's scan reads the paged cache as the
 * decode scan does; the consumer's listed blocks are sub-blocks of the cache's pages (contig 2).
 *
 * Graph-safe: launch geometry from the shapes only; lists, ranges and counts are read on the device. */
#include <cuda_runtime.h>

#include <string.h>

#include "indexer.cuh"
#include "ptx.cuh"
#include "select.cuh"

/* Block maxima of a sub-chunk of rows: 1 GB (T = 8192 rows over S = 256K keys in blocks of 8 is one
 * sub-chunk; at S = 1M, 2,048 rows a sub-chunk). Why not 512 MB: two scans of 4,096 rows (2,048
 * q-blocks, 15.5 waves of 132 CTAs) each ended on a half-empty wave, ~0.7 ms apiece (H200). */
#define BLK_BUDGET ((size_t)1 << 30)
/* The materialize algorithm's gathered keys of a sub-chunk of rows: 512 MB (T = 8192 rows listing
 * 512 blocks of 8 FP8 keys: 4 GB, eight sub-chunks). */
#define GATHER_BUDGET ((size_t)512 << 20)
/* The row kernels are one CTA a row over select.cuh's block routines (their LTK_SEL_NT threads). */
#define SORT_THREADS LTK_SEL_NT

static __host__ __device__ int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }
static int pow2_at_least(int64_t n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

/* Entries idx[0..m) (ids >= 0) and their scores (sc may be NULL) sorted by ascending id, through
 * s[0..n2) (n2 >= m a power of two): the id in the high word inverted, so that the descending
 * network puts the lowest first and the zero padding last. Called by the whole CTA. */
static __device__ void cx_sort_row_by_index(int32_t *idx, float *sc, int m, int n2, uint64_t *s) {
    for (int i = threadIdx.x; i < n2; i += SORT_THREADS)
        s[i] = i < m ? ((uint64_t)(0xffffffffu - (uint32_t)idx[i]) << 32) | (sc ? __float_as_uint(sc[i]) : 0u) : 0ull;
    __syncthreads();
    ltk_bitonic_desc(s, n2);
    for (int i = threadIdx.x; i < m; i += SORT_THREADS) {
        idx[i] = (int32_t)(0xffffffffu - (uint32_t)(s[i] >> 32));
        if (sc) sc[i] = __uint_as_float((uint32_t)s[i]);
    }
    __syncthreads();
}

/* Local rows r of a sub-chunk: the row's blocks [starts, ends) for the select, and (convert) the
 * rank keys the atomic scan left turned into the floats they stand for (0, nothing: NaN). */
__global__ void cx_blk_ranges_kernel(const int32_t *ks, const int32_t *ke, int64_t r0, int64_t nr, int64_t S, int32_t b,
                                     int32_t *starts, int32_t *ends, float *buf, int64_t ld, int convert) {
    for (int64_t r = blockIdx.x; r < nr; r += gridDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, ke, r0 + r, S, &lo, &hi);
        const int64_t j0 = lo < hi ? lo / b : 0, j1 = lo < hi ? (hi - 1) / b + 1 : 0;
        if (threadIdx.x == 0) {
            starts[r] = (int32_t)j0;
            ends[r] = (int32_t)j1;
        }
        if (convert)
            for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
                uint32_t *x = (uint32_t *)buf + r * ld + j;
                *x = __float_as_uint(ltk_rank_key_to_f32(*x));
            }
    }
}

/* The finishing kernel's bitmap of a row's blocks, in words: rows of up to 64K blocks (S = 512K in
 * blocks of 8) put their list in ascending order by it, longer ones by a bitonic sort. Why: the
 * sort of 2048 ids a row was ~0.5 ms of the publication at T = 8192, S = 256K (H200). */
#define CX_BITS 2048

/* The contract's row rules over the select's output (litetopk.h, ltk_blocks_topk): a row of at
 * most block_k blocks returned whole (ascending, unscored) where loose and unscored; the newest
 * block first at +inf (PIN_NEWEST); ascending ids (BY_INDEX). Pinned rows by rank (the
 * select sorted them): the others are the first block_k - 1 of its list without the pinned one.
 * Pinned rows in any order (the select left them unsorted): the pinned block's slot is the one
 * it holds, else the worst of the list's (the least block maximum in ORDER, from buf), and
 * BY_INDEX orders them after (their scores again from buf). Why not sorted by rank first: the by-rank sort of 2048 of 32K blocks
 * is then skipped, and the by-index sort is needed either way. */
__global__ void __launch_bounds__(SORT_THREADS)
    cx_blk_finish_kernel(const int32_t *ks, const int32_t *ke, int64_t r0, int64_t nr, int64_t S, int32_t b,
                         int32_t block_k, uint32_t flags, int32_t *out_blocks, float *out_scores, int64_t stride,
                         const float *buf, int64_t ld, int n2) {
    extern __shared__ uint64_t cx_s[];
    __shared__ int pin_at;
    __shared__ unsigned long long worst;
    __shared__ uint32_t bits_s[CX_BITS];
    __shared__ uint32_t warp_sums[SORT_THREADS / 32];
    const int loose = (flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) != 0, by = (flags & LTK_FLAG_BY_INDEX) != 0;
    for (int64_t r = blockIdx.x; r < nr; r += gridDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, ke, r0 + r, S, &lo, &hi);
        const int64_t j0 = lo < hi ? lo / b : 0, nb = lo < hi ? (hi - 1) / b + 1 - j0 : 0;
        int32_t *ob = out_blocks + (r0 + r) * stride;
        float *os = out_scores ? out_scores + (r0 + r) * stride : NULL;
        const int m = (int)(nb < block_k ? nb : block_k);
        if (nb <= block_k && loose && !os) {
            for (int j = threadIdx.x; j < block_k; j += SORT_THREADS) ob[j] = j < nb ? (int32_t)(j0 + j) : -1;
            continue;
        }
        const int64_t pin = (flags & LTK_FLAG_PIN_NEWEST) && nb > 0 ? j0 + nb - 1 : -1;
        if (pin >= 0 && loose) {
            if (threadIdx.x == 0) pin_at = m, worst = ~0ull;
            __syncthreads();
            for (int j = threadIdx.x; j < m; j += SORT_THREADS) {
                const int32_t id = ob[j];
                if (id == pin) atomicMin(&pin_at, j);
                atomicMin(&worst, ((uint64_t)ltk_rank_key(buf[r * ld + id]) << 32) | (0xffffffffu - (uint32_t)id));
            }
            __syncthreads();
            const int at = pin_at;
            const int32_t drop = (int32_t)(0xffffffffu - (uint32_t)worst); /* (ids are unique in the list) */
            for (int j = threadIdx.x; j < m; j += SORT_THREADS)
                if (at < m ? j == at : ob[j] == drop) {
                    ob[j] = (int32_t)pin;
                    if (os) os[j] = __int_as_float(0x7f800000);
                }
            __syncthreads();
        } else if (pin >= 0) {
            int32_t *id_s = (int32_t *)cx_s;
            float *sc_s = (float *)(id_s + n2);
            if (threadIdx.x == 0) pin_at = m;
            __syncthreads();
            for (int j = threadIdx.x; j < m; j += SORT_THREADS) {
                id_s[j] = ob[j];
                sc_s[j] = os ? os[j] : 0.0f;
                if (ob[j] == pin) atomicMin(&pin_at, j);
            }
            __syncthreads();
            const int at = pin_at;
            for (int j = threadIdx.x; j < m; j += SORT_THREADS) {
                const int src = j - 1 < at ? j - 1 : j; /* (at = m: the last of the list drops out) */
                ob[j] = j == 0 ? (int32_t)pin : id_s[src];
                if (os) os[j] = j == 0 ? __int_as_float(0x7f800000) : sc_s[src];
            }
            __syncthreads();
        }
        if (by && nb <= CX_BITS * 32) { /* a bitmap of the row's blocks, read in order */
            for (int w = threadIdx.x; w < CX_BITS; w += SORT_THREADS) bits_s[w] = 0u;
            __syncthreads();
            for (int j = threadIdx.x; j < m; j += SORT_THREADS) {
                const int64_t x = ob[j] - j0;
                atomicOr(&bits_s[x >> 5], 1u << (x & 31));
            }
            __syncthreads();
            const int nw = (int)((nb + 31) / 32), per = (CX_BITS + SORT_THREADS - 1) / SORT_THREADS;
            const int w0 = threadIdx.x * per;
            uint32_t mine = 0, total;
            for (int w = w0; w < w0 + per && w < nw; w++) mine += __popc(bits_s[w]);
            uint32_t at = ltk_block_scan(mine, warp_sums, &total);
            for (int w = w0; w < w0 + per && w < nw; w++)
                for (uint32_t v = bits_s[w]; v; v &= v - 1) {
                    const int64_t id = j0 + 32 * w + __ffs(v) - 1;
                    ob[at] = (int32_t)id;
                    if (os) os[at] = id == pin ? __int_as_float(0x7f800000) : buf[r * ld + id];
                    at++;
                }
            __syncthreads();
        } else if (by) {
            cx_sort_row_by_index(ob, os, m, n2, cx_s);
        }
    }
}

/* Rows of an ordinary top-k put in ascending index order (BY_INDEX), their -1 padding kept. */
__global__ void __launch_bounds__(SORT_THREADS)
    cx_sort_kernel(int32_t *out_idx, float *out_scores, int64_t stride, int32_t k, int64_t T, int n2) {
    extern __shared__ uint64_t cx_s[];
    __shared__ int cnt;
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        int32_t *oi = out_idx + t * stride;
        if (threadIdx.x == 0) cnt = 0;
        __syncthreads();
        int mine = 0;
        for (int j = threadIdx.x; j < k; j += SORT_THREADS) mine += oi[j] >= 0;
        atomicAdd(&cnt, mine);
        __syncthreads();
        cx_sort_row_by_index(oi, out_scores ? out_scores + t * stride : NULL, cnt, n2, cx_s);
    }
}

/* A decode consumer's cache: its listed logical blocks become sub-blocks of the cache's pages
 * (contig 2), page table[request][id * b / page_kv], part (id * b % page_kv) / b; -1 where the page
 * is unmapped (its positions score NaN). */
typedef struct cx_dec_pages {
    const int32_t *bt;
    int64_t bt_stride, num_blocks;
    int32_t max_blocks, page_kv, next_n;
    int32_t *phys; /* NULL: not a decode call */
} cx_dec_pages;

static __device__ __forceinline__ int32_t cx_phys_of(const cx_dec_pages &pg, int64_t t, int32_t id, int32_t b) {
    if (id < 0) return -1;
    const int64_t pos = (int64_t)id * b, pi = pos / pg.page_kv;
    const int32_t page = pi < pg.max_blocks ? pg.bt[(t / pg.next_n) * pg.bt_stride + pi] : -1;
    return page >= 0 && page < pg.num_blocks ? (int32_t)(page * (int64_t)(pg.page_kv / b) + (pos % pg.page_kv) / b) : -1;
}

/* The consumer's per-row block table: the listed ids that exist and meet the row's range, once
 * each, ascending, -1 after; cs, ce the row's columns [cs, ce) in it (the first and last listed
 * blocks may straddle the row's bounds, the others lie inside); in a decode call also the table's
 * cache sub-blocks (pg.phys). Launched by ltk_launch_pdl after the decode rows' lengths, and the
 * sub-blocks written here rather than by a kernel of their own: at B = 64, 64K, 2048 blocks of 8
 * a row that kernel took 5.2 us and each boundary a launch latency, in a consumer call of ~125 us
 * (ncu on H100, `litetopk bench decode --blocks 2048`). */
__global__ void __launch_bounds__(SORT_THREADS)
    cx_prep_kernel(const int32_t *ks, const int32_t *ke, int64_t T, int64_t S, int32_t b, const int32_t *blocks,
                   int64_t blocks_stride, int32_t nlist, int32_t *btab, int32_t *cs, int32_t *ce, int n2,
                   cx_dec_pages pg) {
    ltk_pdl_wait();
    ltk_pdl_launch();
    extern __shared__ uint64_t cx_s[];
    __shared__ uint32_t warp_sums[SORT_THREADS / 32];
    __shared__ int32_t last_s;
    const int64_t nbk = ceil_div(S > 0 ? S : 1, b);
    const int per = n2 > SORT_THREADS ? n2 / SORT_THREADS : 1;
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, ke, t, S, &lo, &hi);
        const int32_t *bl = blocks + t * blocks_stride;
        for (int i = threadIdx.x; i < n2; i += SORT_THREADS) {
            const int64_t j = i < nlist ? bl[i] : -1;
            const bool ok = j >= 0 && j < nbk && j * b < hi && (j + 1) * b > lo;
            cx_s[i] = ok ? (uint64_t)(0xffffffffu - (uint32_t)j) : 0ull;
        }
        /* a list already ascending (a publication's BY_INDEX output, -1 padding and repeats
         * after) is left as it is */
        __syncthreads();
        bool ordered = true;
        for (int i = threadIdx.x; i + 1 < n2; i += SORT_THREADS) ordered &= cx_s[i] >= cx_s[i + 1];
        if (!__syncthreads_and(ordered)) ltk_bitonic_desc(cx_s, n2);
        /* keep the first of each run of equal ids: thread x owns sorted positions [x per, x per + per) */
        const int i0 = threadIdx.x * per;
        uint32_t mine = 0;
        for (int i = i0; i < i0 + per && i < n2; i++) mine += cx_s[i] != 0 && (i == 0 || cx_s[i - 1] != cx_s[i]);
        uint32_t total;
        uint32_t at = ltk_block_scan(mine, warp_sums, &total);
        int32_t *row = btab + t * nlist, *prow = pg.phys ? pg.phys + t * nlist : NULL;
        for (int i = i0; i < i0 + per && i < n2; i++)
            if (cx_s[i] != 0 && (i == 0 || cx_s[i - 1] != cx_s[i])) {
                const int32_t id = (int32_t)(0xffffffffu - (uint32_t)cx_s[i]);
                row[at] = id;
                if (prow) prow[at] = cx_phys_of(pg, t, id, b);
                at++;
            }
        for (int i = (int)total + threadIdx.x; i < nlist; i += SORT_THREADS) {
            row[i] = -1;
            if (prow) prow[i] = -1;
        }
        for (int i = i0; i < i0 + per && i < n2; i++) /* the last valid id: the end of the sorted run */
            if (cx_s[i] != 0 && (i + 1 == n2 || cx_s[i + 1] == 0)) last_s = (int32_t)(0xffffffffu - (uint32_t)cx_s[i]);
        __syncthreads();
        if (threadIdx.x == 0) {
            int64_t c0 = 0, c1 = 0;
            if (total > 0) {
                const int64_t first = 0xffffffffu - (uint32_t)cx_s[0], last = last_s;
                c0 = lo > first * b ? lo - first * b : 0;
                c1 = (int64_t)(total - 1) * b + (hi - last * b < b ? hi - last * b : b);
            }
            cs[t] = (int32_t)c0;
            ce[t] = (int32_t)c1;
        }
        __syncthreads();
    }
}

/* The consumer's outputs, columns of the row's block table turned into keys (relative to the
 * row's start unless absolute); by_index: then ascending. */
__global__ void __launch_bounds__(SORT_THREADS)
    cx_map_kernel(int32_t *out_idx, float *out_scores, int64_t stride, int32_t k, int64_t T, const int32_t *btab,
                  int32_t nlist, int32_t b, const int32_t *ks, int64_t S, int absolute, int by_index, int n2) {
    ltk_pdl_wait(); /* (launched by ltk_launch_pdl after the select's last kernel) */
    ltk_pdl_launch();
    extern __shared__ uint64_t cx_s[];
    __shared__ int cnt;
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        int64_t lo, hi;
        ltk_row_range(ks, NULL, t, S, &lo, &hi);
        const int64_t base = absolute ? 0 : lo;
        int32_t *oi = out_idx + t * stride;
        if (threadIdx.x == 0) cnt = 0;
        __syncthreads();
        int mine = 0;
        for (int j = threadIdx.x; j < k; j += SORT_THREADS) {
            const int32_t c = oi[j];
            if (c >= 0) {
                oi[j] = (int32_t)((int64_t)btab[t * nlist + c / b] * b + c % b - base);
                mine++;
            }
        }
        if (by_index) {
            atomicAdd(&cnt, mine);
            __syncthreads();
            cx_sort_row_by_index(oi, out_scores ? out_scores + t * stride : NULL, cnt, n2, cx_s);
        }
    }
}
/* The materialize algorithm's gather: rows r0 .. r0 + nr's listed blocks, densely, key rows of
 * row_bytes bytes (pieces of sizeof(P)) at a stride of g_stride bytes, and their scales; blocks past
 * a row's count and keys past S are zeros. Its block table is the identity (bt_id[j] = j). */
template <typename P>
__global__ void cx_gather_kernel(const uint8_t *kv, int64_t kv_stride_b, const float *kv_scale, int64_t S, int32_t b,
                                 const int32_t *btab, int32_t n_blocks, int64_t r0, int64_t nr, int64_t row_bytes,
                                 int64_t g_stride, uint8_t *g, float *gs, int32_t *bt_id) {
    const int64_t nrow = nr * n_blocks * b, pieces = row_bytes / (int64_t)sizeof(P);
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < nrow * pieces; x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t gr = x / pieces, pc = x % pieces, blk = gr / b;
        const int32_t id = btab[(r0 + blk / n_blocks) * n_blocks + blk % n_blocks];
        const int64_t key = (int64_t)id * b + gr % b;
        P v;
        memset(&v, 0, sizeof v);
        if (id >= 0 && key < S) v = *(const P *)(kv + key * kv_stride_b + (int64_t)sizeof(P) * pc);
        *(P *)(g + gr * g_stride + (int64_t)sizeof(P) * pc) = v;
        if (pc == 0) {
            if (kv_scale) gs[gr] = id >= 0 && key < S ? kv_scale[key] : 0.0f;
            if (gr % b == 0) bt_id[blk] = (int32_t)blk;
        }
    }
}

/* ---- publication driver ------------------------------------------------------------------- */
typedef struct blk_plan {
    int64_t nbk, ld, rows;      /* blocks a row (S / b rounded up), buffer row length, rows a sub-chunk */
    int n2;                     /* the finishing sort's size */
    size_t sel_ws;              /* select.cu's workspace for a sub-chunk */
    size_t ix_ws;               /* the ordinary top-k's indexer workspace (a sub-chunk's call) */
    size_t o_buf, o_se, o_sel, o_ix, o_rng, total;
} blk_plan;

/* A decode call's publication (dx non-NULL): its cache, and ba's scoring inputs the indexer's view
 * of it (decode.cu), the rows' ranges in the workspace (o_rng). */
typedef struct blk_src {
    const ltk_decode_args *dx;
    ltk_paged_src pg;
} blk_src;

/* The ordinary top-k's decode call: dx's flags without the candidate ones (BY_INDEX: unsorted and
 * logical, then sorted by position here; slots are mapped here after it either way). */
static ltk_decode_args blk_plain_decode(const ltk_decode_args *dx) {
    ltk_decode_args d = *dx;
    d.flags &= ~(LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX);
    if (dx->flags & LTK_FLAG_BY_INDEX) d.flags = (d.flags | LTK_FLAG_UNSORTED) & ~LTK_FLAG_PHYSICAL;
    return d;
}

static ltk_indexer_args blk_plain_args(const ltk_blocks_args *ba) {
    ltk_indexer_args a = ba->ix;
    a.flags &= ~(LTK_FLAG_PIN_NEWEST | LTK_FLAG_BY_INDEX);
    if (ba->ix.flags & LTK_FLAG_BY_INDEX) a.flags |= LTK_FLAG_UNSORTED;
    return a;
}

/* The ordinary top-k's indexer call for rows [r0, r0 + nr) of the publication (its block maxima
 * written by the same scans: ltk_cuda_indexer_blockmax): the prefill rows' own arguments, or the
 * decode call's indexer view (pg: its cache, the rows' ranges ks / ke, whole requests) sliced. */
static ltk_indexer_args blk_topk_slice(const ltk_blocks_args *ba, const blk_src *src, const int32_t *ks,
                                       const int32_t *ke, int64_t r0, int64_t nr, ltk_paged_src *pg) {
    ltk_indexer_args a;
    if (src) {
        const ltk_decode_args d = blk_plain_decode(src->dx);
        ltk_cuda_decode_source(&d, &a, pg);
        a.ks = ks, a.ke = ke;
        pg->bt += r0 / src->dx->next_n * pg->bt_stride;
    } else {
        a = blk_plain_args(ba);
    }
    a.T = nr;
    a.q = (const uint8_t *)a.q + (size_t)r0 * (size_t)a.q_stride_t * ltk_dtype_size(a.dtype);
    a.weights += r0 * a.w_stride_t;
    if (a.ks) a.ks += r0, a.ke += r0;
    a.out_idx += r0 * a.out_stride;
    if (a.out_scores) a.out_scores += r0 * a.out_stride;
    return a;
}

static ltk_select_args blk_select_args(const ltk_blocks_args *ba, const blk_plan *p, int64_t rows) {
    ltk_select_args sa;
    memset(&sa, 0, sizeof sa);
    sa.rows = rows;
    sa.cols = p->nbk;
    sa.k = ba->block_k;
    sa.dtype = LTK_DTYPE_F32;
    sa.row_stride = p->ld;
    sa.out_stride = ba->blocks_stride;
    sa.flags = LTK_FLAG_ABSOLUTE;
    if (ba->ix.flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) sa.flags |= LTK_FLAG_UNSORTED;
    return sa;
}

static ltk_status blk_make(const ltk_blocks_args *ba, const blk_src *src, const ltk_exec *e, blk_plan *p) {
    memset(p, 0, sizeof *p);
    const ltk_indexer_args *a = &ba->ix;
    const int64_t T = a->T, group = src ? src->dx->next_n : 1; /* (a decode sub-chunk: whole requests) */
    p->nbk = a->S > 0 ? ceil_div(a->S, ba->block_size) : 1;
    p->ld = (p->nbk + 63) / 64 * 64;
    int64_t rows = (int64_t)(BLK_BUDGET / ((size_t)p->ld * 4)) / group * group;
    const int64_t hook = ltk_tune_get()->cuda_blk_rows; /* (a test hook) */
    if (hook > 0 && hook < rows) rows = hook / group * group;
    rows = rows < group ? group : rows;
    p->rows = T < rows ? (T > 0 ? T : 1) : rows;
    p->n2 = pow2_at_least(ba->block_k);
    ltk_exec se = *e;
    se.stats = NULL, se.workspace = NULL, se.workspace_bytes = 0;
    ltk_select_args sa = blk_select_args(ba, p, p->rows);
    size_t b1 = 0, b2 = 0;
    LTK_FORWARD_IF(ltk_cuda_select_workspace(&sa, &se, &b1));
    if (T % p->rows) {
        sa.rows = T % p->rows;
        LTK_FORWARD_IF(ltk_cuda_select_workspace(&sa, &se, &b2));
    }
    p->sel_ws = b1 > b2 ? b1 : b2;
    if (a->k > 0 && a->out_idx) /* the sub-chunks' calls (planned with ranges present, as they run) */
        for (int i = 0; i < 2; i++) {
            const int64_t nr = i == 0 ? p->rows : T % p->rows;
            if (nr == 0 || T == 0) continue;
            ltk_paged_src pg;
            const int32_t *any = (const int32_t *)(uintptr_t)256; /* (the plan reads no range) */
            ltk_indexer_args ia = blk_topk_slice(ba, src, src ? any : a->ks, src ? any : a->ke, 0, nr, &pg);
            size_t b = 0;
            LTK_FORWARD_IF(ltk_cuda_indexer_paged_workspace(&ia, src ? &pg : NULL, &se, &b));
            p->ix_ws = b > p->ix_ws ? b : p->ix_ws;
        }
    p->o_buf = 0;
    p->o_se = ltk_al256((size_t)p->rows * (size_t)p->ld * 4);
    p->o_sel = p->o_se + ltk_al256(8 * (size_t)p->rows);
    p->o_ix = p->o_sel + ltk_al256(p->sel_ws);
    p->o_rng = p->o_ix + ltk_al256(p->ix_ws);
    p->total = p->o_rng + (src ? 2 * ltk_al256(4 * (size_t)(T > 0 ? T : 1)) : 0) + 256;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_blocks_workspace(const ltk_blocks_args *ba, const ltk_exec *e, size_t *bytes) {
    blk_plan p;
    LTK_FORWARD_IF(blk_make(ba, NULL, e, &p));
    *bytes = p.total;
    return LTK_OK;
}

static ltk_status blk_run(const ltk_blocks_args *ba, const blk_src *src, const ltk_exec *e, void *wsv, size_t ws_bytes);

extern "C" ltk_status ltk_cuda_blocks(const ltk_blocks_args *ba, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    return blk_run(ba, NULL, e, wsv, ws_bytes);
}

/* The decode form: the prefill form's arguments over the decode call's indexer view. */
static void blk_decode_view(const ltk_decode_blocks_args *da, ltk_blocks_args *ba, blk_src *src) {
    memset(ba, 0, sizeof *ba);
    src->dx = &da->dx;
    ltk_cuda_decode_source(&da->dx, &ba->ix, &src->pg);
    ba->ix.flags = (da->dx.flags & ~LTK_FLAG_PHYSICAL) | LTK_FLAG_ABSOLUTE;
    if (da->dx.k == 0) ba->ix.k = 0, ba->ix.out_idx = NULL, ba->ix.out_scores = NULL;
    ba->block_size = da->block_size, ba->block_k = da->block_k;
    ba->out_blocks = da->out_blocks, ba->out_block_scores = da->out_block_scores, ba->blocks_stride = da->blocks_stride;
}

extern "C" ltk_status ltk_cuda_decode_blocks_workspace(const ltk_decode_blocks_args *da, const ltk_exec *e, size_t *bytes) {
    if (da->dx.dtype != LTK_DTYPE_E4M3)
        return ltk_error(LTK_EUNSUPPORTED, "cuda decode blocks: q must be e4m3 (bf16 and f32 queries are for the host backends)");
    ltk_blocks_args ba;
    blk_src src;
    blk_decode_view(da, &ba, &src);
    blk_plan p;
    LTK_FORWARD_IF(blk_make(&ba, &src, e, &p));
    *bytes = p.total;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_decode_blocks(const ltk_decode_blocks_args *da, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    if (da->dx.dtype != LTK_DTYPE_E4M3)
        return ltk_error(LTK_EUNSUPPORTED, "cuda decode blocks: q must be e4m3 (bf16 and f32 queries are for the host backends)");
    ltk_blocks_args ba;
    blk_src src;
    blk_decode_view(da, &ba, &src);
    return blk_run(&ba, &src, e, wsv, ws_bytes);
}

static ltk_status blk_run(const ltk_blocks_args *ba0, const blk_src *src, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    blk_plan p;
    LTK_FORWARD_IF(blk_make(ba0, src, e, &p));
    if (ws_bytes < p.total)
        return ltk_error(LTK_EWORKSPACE, "workspace of %zu bytes is smaller than the %zu bytes required", ws_bytes, p.total);
    cudaStream_t st = (cudaStream_t)e->stream;
    uint8_t *ws = (uint8_t *)(uintptr_t)ltk_al256((uintptr_t)wsv);
    ltk_blocks_args bav = *ba0;
    const ltk_blocks_args *ba = &bav;
    const ltk_indexer_args *a = &ba->ix;
    const int64_t T = a->T;
    if (src && T > 0) { /* the decode rows' ranges: [0, len) */
        int32_t *ks = (int32_t *)(ws + p.o_rng), *ke = (int32_t *)(ws + p.o_rng + ltk_al256(4 * (size_t)T));
        LTK_FORWARD_IF(ltk_cuda_decode_ranges(src->dx, ks, ke, st));
        bav.ix.ks = ks, bav.ix.ke = ke;
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    if (T == 0) return LTK_OK;
    const size_t fin_smem = 8 * (size_t)p.n2;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)cx_blk_finish_kernel, fin_smem));
    float *buf = (float *)(ws + p.o_buf);
    int32_t *starts = (int32_t *)(ws + p.o_se), *ends = starts + p.rows;
    ltk_trace tr;
    ltk_trace_begin(&tr, st);
    const int topk = a->k > 0 && a->out_idx != NULL;
    ltk_exec ie = *e;
    ie.stats = NULL;
    ie.workspace = ws + p.o_ix;
    ie.workspace_bytes = p.ix_ws;
    for (int64_t r0 = 0; r0 < T; r0 += p.rows) {
        const int64_t nr = T - r0 < p.rows ? T - r0 : p.rows;
        int direct = 1;
        if (topk) { /* the row's ordinary top-k, and the block maxima from the same scans */
            ltk_paged_src pg;
            const ltk_indexer_args ia = blk_topk_slice(ba, src, a->ks, a->ke, r0, nr, &pg);
            LTK_FORWARD_IF(ltk_cuda_indexer_blockmax(&ia, src ? &pg : NULL, &ie, ws + p.o_ix, p.ix_ws, ba->block_size,
                                                     buf, p.ld, &direct));
        } else if (a->S > 0) {
            LTK_FORWARD_IF(ltk_cuda_blockmax_scan(a, src ? &src->pg : NULL, ba->block_size, r0, nr, buf, p.ld, &direct, st));
        }
        LTK_FORWARD_IF(ltk_trace_step(&tr, st, "blocks: %s rows %lld+%lld%s", topk ? "indexer with block maxima" : "block-max scan",
                                      (long long)r0, (long long)nr, direct ? "" : " (atomic)"));
        const unsigned g = (unsigned)(nr < 65535 ? nr : 65535);
        cx_blk_ranges_kernel<<<g, 256, 0, st>>>(a->ks, a->ke, r0, nr, a->S, ba->block_size, starts, ends, buf, p.ld,
                                                !direct);
        LTK_CUDA_TRY(cudaGetLastError());
        ltk_select_args sa = blk_select_args(ba, &p, nr);
        sa.scores = buf;
        sa.starts = starts;
        sa.ends = ends;
        sa.out_idx = ba->out_blocks + r0 * ba->blocks_stride;
        sa.out_scores = ba->out_block_scores ? ba->out_block_scores + r0 * ba->blocks_stride : NULL;
        ltk_exec se;
        memset(&se, 0, sizeof se);
        se.backend = LTK_BACKEND_CUDA;
        se.stream = (void *)st;
        se.workspace = ws + p.o_sel;
        se.workspace_bytes = p.sel_ws;
        LTK_FORWARD_IF(ltk_cuda_select(&sa, &se, ws + p.o_sel, p.sel_ws));
        LTK_FORWARD_IF(ltk_trace_step(&tr, st, "blocks: ranges + select of %d", ba->block_k));
        cx_blk_finish_kernel<<<g, SORT_THREADS, fin_smem, st>>>(a->ks, a->ke, r0, nr, a->S, ba->block_size, ba->block_k,
                                                                a->flags, ba->out_blocks, ba->out_block_scores,
                                                                ba->blocks_stride, buf, p.ld, p.n2);
        LTK_CUDA_TRY(cudaGetLastError());
        LTK_FORWARD_IF(ltk_trace_step(&tr, st, "blocks: finish"));
    }
    if (topk && (a->flags & LTK_FLAG_BY_INDEX)) {
        const int n2 = pow2_at_least(a->k);
        LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)cx_sort_kernel, 8 * (size_t)n2));
        cx_sort_kernel<<<(unsigned)(T < 65535 ? T : 65535), SORT_THREADS, 8 * (size_t)n2, st>>>(
            a->out_idx, a->out_scores, a->out_stride, a->k, T, n2);
        LTK_CUDA_TRY(cudaGetLastError());
    }
    if (topk && src && (src->dx->flags & LTK_FLAG_PHYSICAL)) LTK_FORWARD_IF(ltk_cuda_decode_physical(src->dx, st));
    return LTK_OK;
}

/* ---- consumer driver ---------------------------------------------------------------------- */
typedef struct cand_plan {
    ltk_indexer_args ia; /* the paged indexer call over the listed blocks (columns, absolute) */
    ltk_paged_src pg;
    int n2_prep, n2_map, materialize;
    int64_t grows;                /* materialize: rows a gathered sub-chunk */
    int64_t row_bytes, g_stride;  /* materialize: a key row's bytes, gathered at this stride */
    size_t o_bt, o_cs, o_ce, o_g, o_gs, o_gbt, o_ix, ix_bytes, total;
    const ltk_decode_args *dx;   /* a decode call's consumer: its cache pages, in sub-blocks (contig 2) */
    size_t o_phys, o_rng;        /* decode: the sub-block table, the rows' ranges */
} cand_plan;

static ltk_status cand_make(const ltk_candidates_args *ca, const ltk_decode_args *dx, const ltk_exec *e, int sizing,
                            cand_plan *p) {
    memset(p, 0, sizeof *p);
    const ltk_indexer_args *a = &ca->ix;
    const int64_t T = a->T, b = ca->block_size, nb = ca->n_blocks, cols = nb * b;
    const size_t es = ltk_dtype_size(a->dtype);
    p->dx = dx;
    p->materialize = e->algo == LTK_ALGO_MATERIALIZE && !dx; /* (decode: the fused path serves both) */
    p->n2_prep = pow2_at_least(nb);
    p->n2_map = pow2_at_least(a->k);
    ltk_indexer_args *ia = &p->ia;
    *ia = *a;
    ia->S = cols;
    ia->kv = NULL;
    ia->kv_scale = NULL;
    ia->state = NULL;
    ia->flags = LTK_FLAG_ABSOLUTE | ((a->flags & (LTK_FLAG_UNSORTED | LTK_FLAG_BY_INDEX)) ? LTK_FLAG_UNSORTED : 0u);
    ltk_paged_src *g = &p->pg;
    g->cache = (const uint8_t *)a->kv;
    g->nblocks = a->S > 0 ? ceil_div(a->S, b) : 1;
    g->bkv = (int32_t)b;
    g->max_blocks = (int32_t)nb;
    g->next_n = 1;
    g->contig = 1;
    g->scale = a->kv_scale;
    g->kv_stride = a->kv_stride_s;
    g->nkeys = a->S > 0 ? a->S : 1;
    g->bt_stride = nb;
    if (dx) { /* sub-blocks of b tokens of the cache's pages */
        const int64_t r = dx->block_kv / b;
        g->cache = dx->kv_cache ? dx->kv_cache : (const uint8_t *)dx->block_table;
        g->contig = 2;
        g->page_kv = dx->block_kv;
        g->bstride = dx->block_stride;
        g->nblocks = dx->num_blocks * r > 0 ? dx->num_blocks * r : 1;
        g->scale = NULL;
    }
    p->o_bt = 0;
    p->o_cs = ltk_al256(4 * (size_t)T * (size_t)nb);
    p->o_ce = p->o_cs + ltk_al256(4 * (size_t)(T > 0 ? T : 1));
    size_t at = p->o_ce + ltk_al256(4 * (size_t)(T > 0 ? T : 1));
    if (dx) {
        p->o_phys = at;
        at += ltk_al256(4 * (size_t)T * (size_t)nb);
        p->o_rng = at;
        at += 2 * ltk_al256(4 * (size_t)(T > 0 ? T : 1));
    }
    int64_t rows_ix = T;
    if (p->materialize) {
        p->row_bytes = (int64_t)a->D * (int64_t)es;
        p->g_stride = (p->row_bytes + 15) / 16 * 16;
        const size_t per_row = (size_t)cols * ((size_t)p->g_stride + 4) + 4 * (size_t)nb;
        int64_t r = (int64_t)(GATHER_BUDGET / per_row);
        r = r < 1 ? 1 : r;
        p->grows = T < r ? (T > 0 ? T : 1) : r;
        p->o_g = at;
        at += ltk_al256((size_t)p->grows * (size_t)cols * (size_t)p->g_stride);
        p->o_gs = at;
        at += ltk_al256((size_t)p->grows * (size_t)cols * 4);
        p->o_gbt = at;
        at += ltk_al256((size_t)p->grows * (size_t)nb * 4);
        rows_ix = p->grows;
        g->cache = (const uint8_t *)(uintptr_t)256; /* (sizing: any aligned non-NULL address) */
        g->nblocks = p->grows * nb;
        g->kv_stride = p->g_stride / (int64_t)es;
        g->nkeys = p->grows * cols;
    }
    p->o_ix = at;
    if (sizing) {
        ltk_indexer_args x = *ia;
        x.T = rows_ix;
        x.ks = x.ke = (const int32_t *)(uintptr_t)256; /* planned with ranges present, as the call runs */
        ltk_exec ie = *e;
        ie.algo = e->algo == LTK_ALGO_SCORE_ONLY ? LTK_ALGO_SCORE_ONLY : LTK_ALGO_FUSED;
        ie.stats = NULL;
        size_t b1 = 0, b2 = 0;
        LTK_FORWARD_IF(ltk_cuda_indexer_paged_workspace(&x, g, &ie, &b1));
        if (p->materialize && T % p->grows) { /* (the last sub-chunk's plan) */
            x.T = T % p->grows;
            LTK_FORWARD_IF(ltk_cuda_indexer_paged_workspace(&x, g, &ie, &b2));
        }
        p->ix_bytes = b1 > b2 ? b1 : b2;
    }
    p->total = p->o_ix + p->ix_bytes + 256;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_candidates_workspace(const ltk_candidates_args *ca, const ltk_exec *e, size_t *bytes) {
    cand_plan p;
    LTK_FORWARD_IF(cand_make(ca, NULL, e, 1, &p));
    *bytes = p.total;
    return LTK_OK;
}

static ltk_status cand_run(const ltk_candidates_args *ca, const ltk_decode_args *dx, const ltk_exec *e, void *wsv,
                           size_t ws_bytes);

extern "C" ltk_status ltk_cuda_candidates(const ltk_candidates_args *ca, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    return cand_run(ca, NULL, e, wsv, ws_bytes);
}

/* The decode consumer: the prefill form's arguments over the decode call's indexer view (ranges
 * written into the workspace by cand_run). Blocks of b tokens must tile the cache's pages in a
 * power-of-two count (b = 8, 16 in 64- or 32-token pages). */
static ltk_status cand_decode_view(const ltk_decode_candidates_args *da, ltk_candidates_args *ca) {
    const ltk_decode_args *d = &da->dx;
    if (d->dtype != LTK_DTYPE_E4M3)
        return ltk_error(LTK_EUNSUPPORTED, "cuda decode candidates: q must be e4m3 (bf16 and f32 queries are for the host backends)");
    const int32_t r = d->block_kv / da->block_size;
    if (d->block_kv % da->block_size || (r & (r - 1)))
        return ltk_error(LTK_EUNSUPPORTED, "cuda decode candidates: block_size=%d must divide block_kv=%d into a power of two "
                         "(the host backends take any)", da->block_size, d->block_kv);
    memset(ca, 0, sizeof *ca);
    ltk_paged_src unused;
    ltk_cuda_decode_source(d, &ca->ix, &unused);
    ca->ix.flags = (d->flags & ~LTK_FLAG_PHYSICAL) | LTK_FLAG_ABSOLUTE;
    ca->block_size = da->block_size, ca->n_blocks = da->n_blocks, ca->blocks = da->blocks;
    ca->blocks_stride = da->blocks_stride;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_decode_candidates_workspace(const ltk_decode_candidates_args *da, const ltk_exec *e,
                                                           size_t *bytes) {
    ltk_candidates_args ca;
    LTK_FORWARD_IF(cand_decode_view(da, &ca));
    cand_plan p;
    LTK_FORWARD_IF(cand_make(&ca, &da->dx, e, 1, &p));
    *bytes = p.total;
    return LTK_OK;
}

extern "C" ltk_status ltk_cuda_decode_candidates(const ltk_decode_candidates_args *da, const ltk_exec *e, void *wsv,
                                                 size_t ws_bytes) {
    ltk_candidates_args ca;
    LTK_FORWARD_IF(cand_decode_view(da, &ca));
    return cand_run(&ca, &da->dx, e, wsv, ws_bytes);
}

static ltk_status cand_run(const ltk_candidates_args *ca0, const ltk_decode_args *dx, const ltk_exec *e, void *wsv,
                           size_t ws_bytes) {
    cand_plan p;
    LTK_FORWARD_IF(cand_make(ca0, dx, e, 0, &p)); /* (p.total without the indexer's part, which checks its own) */
    ltk_candidates_args cav = *ca0;
    const ltk_candidates_args *ca = &cav;
    if (ws_bytes < p.total)
        return ltk_error(LTK_EWORKSPACE, "workspace of %zu bytes is smaller than the %zu bytes required", ws_bytes, p.total);
    cudaStream_t st = (cudaStream_t)e->stream;
    uint8_t *ws = (uint8_t *)(uintptr_t)ltk_al256((uintptr_t)wsv);
    const size_t ix_room = ws_bytes - (size_t)(ws - (uint8_t *)wsv) - p.o_ix;
    if (dx && cav.ix.T > 0) { /* the decode rows' ranges: [0, len) */
        int32_t *ks = (int32_t *)(ws + p.o_rng), *ke = (int32_t *)(ws + p.o_rng + ltk_al256(4 * (size_t)cav.ix.T));
        LTK_FORWARD_IF(ltk_cuda_decode_ranges(dx, ks, ke, st));
        cav.ix.ks = ks, cav.ix.ke = ke;
    }
    const ltk_indexer_args *a = &ca->ix;
    const int64_t T = a->T, b = ca->block_size, nb = ca->n_blocks;
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = T;
    }
    if (T == 0) return LTK_OK;
    int32_t *btab = (int32_t *)(ws + p.o_bt), *cs = (int32_t *)(ws + p.o_cs), *ce = (int32_t *)(ws + p.o_ce);
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)cx_prep_kernel, 8 * (size_t)p.n2_prep));
    const int by_index = (a->flags & LTK_FLAG_BY_INDEX) != 0;
    const size_t map_smem = by_index ? 8 * (size_t)p.n2_map : 0;
    LTK_FORWARD_IF(ltk_cuda_smem_reserve((const void *)cx_map_kernel, map_smem));
    const unsigned grow = (unsigned)(T < 65535 ? T : 65535);
    ltk_cuda_dev dv;
    LTK_FORWARD_IF(ltk_cuda_device(&dv));
    const int pdl = dv.major >= 9;
    cx_dec_pages dpg;
    memset(&dpg, 0, sizeof dpg);
    if (dx && !p.materialize) { /* the listed blocks as sub-blocks of the cache's pages, for the scan */
        dpg.bt = dx->block_table, dpg.bt_stride = dx->bt_stride, dpg.num_blocks = dx->num_blocks;
        dpg.max_blocks = dx->max_blocks, dpg.page_kv = dx->block_kv, dpg.next_n = dx->next_n;
        dpg.phys = (int32_t *)(ws + p.o_phys);
    }
    LTK_CUDA_TRY(ltk_launch_pdl(pdl, cx_prep_kernel, dim3(grow), dim3(SORT_THREADS), 8 * (size_t)p.n2_prep, st, a->ks,
                                a->ke, T, a->S, (int32_t)b, ca->blocks, ca->blocks_stride, (int32_t)nb, btab, cs, ce,
                                p.n2_prep, dpg));
    ltk_trace tr;
    ltk_trace_begin(&tr, st);
    LTK_FORWARD_IF(ltk_trace_step(&tr, st, "candidates: prep"));
    ltk_exec ie = *e;
    ie.algo = e->algo == LTK_ALGO_SCORE_ONLY ? LTK_ALGO_SCORE_ONLY : LTK_ALGO_FUSED; /* (score only: the scan alone) */
    ie.stats = NULL;
    if (!p.materialize) {
        p.pg.bt = dpg.phys ? dpg.phys : btab;
        p.ia.ks = cs;
        p.ia.ke = ce;
        LTK_FORWARD_IF(ltk_cuda_indexer_paged(&p.ia, &p.pg, &ie, ws + p.o_ix, ix_room));
    } else {
        const size_t es = ltk_dtype_size(a->dtype);
        const uintptr_t align = (uintptr_t)a->kv | (uintptr_t)(a->kv_stride_s * (int64_t)es) | (uintptr_t)p.row_bytes;
        for (int64_t r0 = 0; r0 < T; r0 += p.grows) {
            const int64_t nr = T - r0 < p.grows ? T - r0 : p.grows;
            uint8_t *g = ws + p.o_g;
            float *gs = (float *)(ws + p.o_gs);
            int32_t *gbt = (int32_t *)(ws + p.o_gbt);
            const int64_t units = nr * nb * b * (p.row_bytes / ((align & 15) == 0 ? 16 : (align & 3) == 0 ? 4 : 1));
            const unsigned grid = (unsigned)(units / 256 + 1 < 132 * 16 ? units / 256 + 1 : 132 * 16);
#define CX_GATHER(P)                                                                                                   \
    cx_gather_kernel<P><<<grid, 256, 0, st>>>((const uint8_t *)a->kv, a->kv_stride_s * (int64_t)es, a->kv_scale, a->S, \
                                              (int32_t)b, btab, (int32_t)nb, r0, nr, p.row_bytes, p.g_stride, g, gs, gbt)
            if ((align & 15) == 0) CX_GATHER(uint4);
            else if ((align & 3) == 0) CX_GATHER(uint32_t);
            else CX_GATHER(uint8_t);
#undef CX_GATHER
            LTK_CUDA_TRY(cudaGetLastError());
            LTK_FORWARD_IF(ltk_trace_step(&tr, st, "candidates: gather rows %lld+%lld", (long long)r0, (long long)nr));
            ltk_indexer_args x = p.ia;
            x.T = nr;
            x.q = (const uint8_t *)a->q + (size_t)r0 * (size_t)a->q_stride_t * es;
            x.weights = a->weights + r0 * a->w_stride_t;
            x.ks = cs + r0;
            x.ke = ce + r0;
            x.out_idx = a->out_idx + r0 * a->out_stride;
            x.out_scores = a->out_scores ? a->out_scores + r0 * a->out_stride : NULL;
            ltk_paged_src pg = p.pg;
            pg.cache = g;
            pg.bt = gbt;
            pg.nblocks = nr * nb;
            pg.nkeys = nr * nb * b;
            pg.scale = a->kv_scale ? gs : NULL;
            LTK_FORWARD_IF(ltk_cuda_indexer_paged(&x, &pg, &ie, ws + p.o_ix, ix_room));
        }
    }
    if (e->algo == LTK_ALGO_SCORE_ONLY) return LTK_OK;
    LTK_FORWARD_IF(ltk_trace_step(&tr, st, "candidates: scan + select"));
    LTK_CUDA_TRY(ltk_launch_pdl(pdl, cx_map_kernel, dim3(grow), dim3(SORT_THREADS), map_smem, st, a->out_idx,
                                a->out_scores, a->out_stride, a->k, T, (const int32_t *)btab, (int32_t)nb, (int32_t)b,
                                a->ks, a->S, (int)((a->flags & LTK_FLAG_ABSOLUTE) != 0), by_index, p.n2_map));
    if (dx && (dx->flags & LTK_FLAG_PHYSICAL)) LTK_FORWARD_IF(ltk_cuda_decode_physical(dx, st));
    return LTK_OK;
}
