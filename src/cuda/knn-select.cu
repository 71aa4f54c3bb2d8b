/* The kNN's per-query kernels around the scoring loop (knn.cu runs them in this order for each
 * corpus chunk): the threshold from the sample, the check of the GATE's candidates, the steps of
 * the exact fallback between its histogram passes, the final select of each query (select.cuh's
 * radix select on composites, then a bucket or bitonic sort), the merge of the chunks into the
 * call's output, and the materialize path's packing of select.cu's output. */
#include <pthread.h>

#include "knn.cuh"

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

/* Row indices of a tie class in shared memory, lower first (knn_final_staged). */
struct knn_src_rel {
    const uint32_t *r;
    int64_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return (uint64_t)(uint32_t)~r[i] << 32; }
};

/* The sample's rank keys staged in shared memory (knn_thr_smem). */
struct knn_src_skeys {
    const uint32_t *k;
    int64_t cnt;
    __device__ int64_t n() const { return cnt; }
    __device__ uint64_t comp(int64_t i) const { return (uint64_t)k[i] << 32; }
};

/* Index (in sample order) of the j-th sampled key equal to v (1 <= j <= their count): each warp
 * counts a contiguous segment by ballots (lanes on consecutive keys: no bank conflicts), one block
 * scan over the warps' counts, the owner warp walks its segment again. */
template <class Src>
static __device__ int64_t knn_thr_nth_tie(const Src &src, uint32_t v, uint32_t j, ltk_sel_smem *sm) {
    const int64_t n = src.n(), nw = LTK_SEL_NT / 32, seg = ((n + nw - 1) / nw + 31) & ~(int64_t)31;
    const int lane = threadIdx.x & 31;
    const int64_t s0 = (int64_t)(threadIdx.x >> 5) * seg, s1 = s0 + seg < n ? s0 + seg : n;
    uint32_t cnt = 0, tot;
    for (int64_t b = s0; b < s1; b += 32) {
        const int64_t i = b + lane;
        cnt += __popc(__ballot_sync(LTK_FULL, i < s1 && (uint32_t)(src.comp(i) >> 32) == v));
    }
    if (threadIdx.x == 0) sm->found_rel = 0xffffffffu;
    const uint32_t e = __shfl_sync(LTK_FULL, ltk_block_scan(lane == 0 ? cnt : 0u, sm->warp, &tot), 0);
    if (e < j && j <= e + cnt) { /* (warp-uniform) */
        uint32_t left = j - e;
        for (int64_t b = s0; b < s1; b += 32) {
            const int64_t i = b + lane;
            const uint32_t m = __ballot_sync(LTK_FULL, i < s1 && (uint32_t)(src.comp(i) >> 32) == v);
            const uint32_t c = __popc(m);
            if (left <= c) {
                if (lane == 0) sm->found_rel = (uint32_t)(b + __fns(m, 0, (int)left));
                break;
            }
            left -= c;
        }
    }
    __syncthreads();
    const int64_t r = sm->found_rel;
    __syncthreads();
    return r;
}

/* After the threshold's passes (the r-th sampled key's top 22 bits in sm->prefix): where the keys
 * at or above that prefix predict more than half the cap (a tie class at the threshold: equal
 * rows, a plateau), the r-th key v exactly (one more pass), and, when the class at v is what
 * overflows, a bound lim on the row: below it the gate takes keys >= v, from it keys > v only.
 * Every key above v then lands among the candidates, and of v's class the lowest-index ones; the
 * check's rule stays exact (>= k candidates: every entry left out is beaten by k of them, ties by
 * the lower index). lim: the row of the j-th sampled tie, j the sampled ties needed for k less a
 * 4-sigma lower bound of the keys above v, plus 4 sigma; a multiple of 256 (the sm_90a gate tests
 * it once per 128 rows). Why: all-equal corpora overflowed the cap whatever the threshold, and the
 * exact fallback's seven passes took 15-17 ms against 0.45 for clustered rows (B = 64, N = 1M x
 * 768 bf16, bench knn --dist equal, records of a0059b7). */
template <class Src>
static __device__ void knn_thr_class(const knn_ctl &c, const Src &src, int64_t r, ltk_sel_smem *sm, uint32_t *t,
                                     uint32_t *lim) {
    *t = (uint32_t)(sm->prefix >> 32);
    *lim = 0xffffffffu;
    const uint32_t kk = sm->kk, bkt = sm->bucket;
    const double f = (double)c.n / (double)c.m; /* rows a sample */
    if (!c.tiebound || bkt == kk || 2.0 * (double)(r - kk + bkt) * f <= (double)c.cap) return; /* (block-uniform) */
    ltk_radix_select<Src, 1>(src, kk, KNN_THR_LO, 32, sm, sm->prefix, sm->mask);
    const uint32_t v = (uint32_t)(sm->prefix >> 32), kk2 = sm->kk, eq = sm->bucket;
    const double gt = (double)(r - kk2); /* sampled keys above v */
    *t = v;
    if (2.0 * (gt + (double)eq) * f <= (double)c.cap || v == 0u || v == 0xffffffffu) return;
    const double gt_lo = gt - 4.0 * sqrt(gt) - 1.0 > 0.0 ? gt - 4.0 * sqrt(gt) - 1.0 : 0.0;
    const double x = (double)c.k / f - gt_lo; /* sampled ties needed, expected */
    if (x <= 0.0) {
        *lim = 0u;
        return;
    }
    const double jd = ceil(x + 4.0 * sqrt(x) + 4.0);
    if (jd > (double)eq) return; /* too few sampled ties to place the bound: the class unbounded */
    const int64_t i = knn_thr_nth_tie(src, v, (uint32_t)jd, sm);
    if (i < 0 || i == 0xffffffffll) return;
    const int64_t l = ((i + 1) * c.sstride + 255) & ~(int64_t)255;
    if (l < c.n) *lim = (uint32_t)l;
}

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
    uint32_t t = 0, lim = 0xffffffffu;
    if (c.n > c.cap && c.m >= 16) {
        const int64_t r = knn_thr_rank(c.k, c.m, c.n, c.cap);
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
                knn_thr_class(c, src, r, &sm, &t, &lim);
            } else {
                knn_src_samp src = {c.samp + (int64_t)qq * c.m, c.m};
                ltk_radix_select<knn_src_samp, 1>(src, (uint32_t)r, 64, KNN_THR_LO, &sm);
                knn_thr_class(c, src, r, &sm, &t, &lim);
            }
        }
    }
    if (threadIdx.x == 0) {
        c.thr[qq] = t;
        c.thr_lim[qq] = lim;
    }
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

/* The final select with the candidates' keys staged in shared memory (skeys, cnt <= c.stage): the
 * radix passes run over the 32-bit keys there, and only the winners' row indices are read from
 * global memory; *got: the entries left in sb (unsorted). Why: the global-memory passes re-read 8-byte composites from L2 three times, a round trip every
 * LTK_SEL_U entries a thread. Measured (H200, B = 64, N = 1M): 16.4 -> 15.7 us at
 * k = 1024; 83 us either way at k = 8192, where the 8192-entry sort is the cost. */
static __device__ void knn_final_staged(const ltk_src_cand_glob &src, int k, int kp, ltk_sel_smem *sm, uint64_t *sb,
                                        uint32_t *skeys, bool staged, uint32_t *got) {
    const int n = (int)src.cnt;
    if (!staged) { /* (block-uniform; staged: ltk_topk_bucket left them there) */
        uint32_t mn, mx;
        ltk_stage_keys(src, n, skeys, mn, mx);
    }
    __syncthreads();
    knn_src_skeys ks = {skeys, n};
    ltk_radix_select<knn_src_skeys, 1>(ks, (uint32_t)k, 64, 32, sm);
    /* Entries above the final bucket are in; of the bucket, kk. The bucket holds more than kk only
     * when the k-th key itself is tied (the mask then covers the whole key): the class's row
     * indices go to skeys, over keys already read, and a radix select on them takes the kk lowest
     * (the sort after orders everything). Why not the composite select over global memory for
     * ties: with bf16 data ~1% of queries tie at the k-th key, and the CTA that does pays both
     * selects while the others wait (97 vs 83 us at k = 8192); and a class of thousands (a tie
     * class bounded by position, knn_thr_class) took it 114 us, where ranking each tied entry
     * against the others cost O(class^2) below 2048. */
    const uint64_t prefix = sm->prefix, mask = sm->mask;
    const uint32_t kk = sm->kk, bucket = sm->bucket;
    const bool tie = bucket != kk;
    uint32_t *tie_rel = skeys; /* slot j < the keys read so far: a barrier a step orders them */
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
        if (tie) __syncthreads(); /* (block-uniform) this step's keys read before ties overwrite them */
#pragma unroll
        for (int u = 0; u < LTK_SEL_U; u++) {
            const bool take = (tk >> u) & 1u;
            const uint32_t pos = ltk_warp_append(take, &sm->cnt);
            if (take && pos < (uint32_t)kp) sb[pos] = ltk_comp(key[u], rel[u]);
            const bool tied = (tt >> u) & 1u;
            const uint32_t tp = ltk_warp_append(tied, &sm->last);
            if (tied) tie_rel[tp] = rel[u];
        }
    }
    __syncthreads();
    if (tie) { /* the kk lowest row indices of the class (distinct: the select ends exact) */
        const uint32_t kt = (uint32_t)(prefix >> 32);
        knn_src_rel rs = {tie_rel, (int64_t)bucket};
        ltk_radix_select<knn_src_rel, 0>(rs, kk, 64, 32, sm);
        const uint64_t tp = sm->prefix, tm = sm->mask;
        for (uint32_t i0 = 0; i0 < bucket; i0 += LTK_SEL_NT) {
            const uint32_t i = i0 + threadIdx.x;
            const bool take = i < bucket && (rs.comp(i) & tm) >= tp;
            const uint32_t pos = ltk_warp_append(take, &sm->cnt);
            if (take && pos < (uint32_t)kp) sb[pos] = ltk_comp(kt, tie_rel[i]);
        }
        __syncthreads();
    }
    *got = sm->cnt < (uint32_t)kp ? sm->cnt : (uint32_t)kp;
    __syncthreads();
}

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
 * LTK_BUCKET_MAX composites), then c.stage staged keys. Select and sort from one bucket histogram
 * (ltk_topk_bucket) where the keys are staged and no bucket is crowded; otherwise the radix
 * select, then the bucket sort (ltk_sort_bucket, E >= 8: k > 2048) or, on a crowded bucket or for
 * smaller k, the bitonic network. H200, B = 64, N = 1M: the bucket sort took the final select
 * 43.8 -> 26.7 us at k = 4096, 83 -> 50 us at k = 8192 (against the radix select and the network). */
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
            if (2 * c.k <= c.stage) { /* (block-uniform) */
                const uint64_t *s = ltk_topk_bucket(src, (uint32_t)c.k, sm, sb, stage);
                if (s) {
                    knn_final_store(c, o, qq, s, (uint32_t)c.k);
                    return;
                }
                staged = true; /* a crowded bucket: the radix select over the keys it staged */
            }
            knn_final_staged(src, c.k, c.kp, sm, sb, stage, staged, &got);
            done = true;
        }
        if (!done) {
            ltk_radix_select<ltk_src_cand_glob, 1>(src, (uint32_t)c.k, 64, 0, sm);
            got = ltk_gather(src, sm->prefix, sm->mask, sb, c.kp, sm);
            for (int j = got + threadIdx.x; j < c.kp; j += LTK_SEL_NT) sb[j] = 0ull;
            __syncthreads();
        }
    }
    /* (the bucket sort's scratch is the staging area: its stage keys hold stage / 2 composites) */
    if (!(E >= 8 && 2 * got <= (uint32_t)c.stage && ltk_sort_bucket(sb, got, (uint64_t *)stage, sm)))
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

/* ---- shared memory of the kernels ------------------------------------------------------------ */
/* The threshold kernel reads the sample once into shared memory (c.m <= KNN_SAMPLE keys, 128 KB)
 * and runs its radix passes there; the same keys, so the same threshold. Why: ncu found that
 * kernel (29-34 us a call, 5% of a call at N = 1M) latency-bound, its passes re-reading the sample
 * from L2; staged, 31.3 -> 26.9 us (H200, B = 64, N = 1M). Where the device refuses 128 KB
 * (sm_86/89), the passes read the sample from global memory (the test hook
 * ltk_tune.cuda_knn_thr_global takes that path on any device). The
 * histogram aggregation per distinct digit measured slower in the same run (threshold 31 -> 45 us,
 * final select at k = 8,192 110 -> 118 us). */
int ltk_knn_thr_smem(int dev) {
    if (ltk_tune_get()->cuda_knn_thr_global || dev < 0 || dev >= 64) return 0;
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
int64_t ltk_knn_fin_static_smem(void) {
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

ltk_status ltk_knn_fin_smem_reserve(size_t fin_smem) {
    const void *fns[] = KNN_FIN_KERNELS; /* (ltk_cuda_smem_reserve keeps a record by the current device) */
    for (int i = 0; i < 12; i++) LTK_FORWARD_IF(ltk_cuda_smem_reserve(fns[i], fin_smem));
    return LTK_OK;
}

/* ---- launchers --------------------------------------------------------------------------------- */
ltk_status ltk_knn_threshold(const knn_ctl &c, cudaStream_t st) {
    knn_threshold_kernel<<<c.nq, LTK_SEL_NT, c.thr_smem ? (size_t)c.m * 4 : 0, st>>>(c);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

ltk_status ltk_knn_check(const knn_ctl &c, cudaStream_t st) {
    knn_check_kernel<<<(c.nq + 255) / 256, 256, 0, st>>>(c);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

const void *ltk_knn_check_cond_kernel(void) { return (const void *)knn_check_cond_kernel; }

ltk_status ltk_knn_fb_step(const knn_ctl &c, cudaStream_t st) {
    knn_fb_step_kernel<<<c.nq, LTK_SEL_NT, 0, st>>>(c);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

ltk_status ltk_knn_final(const knn_ctl &c, const knn_out &o, size_t smem, cudaStream_t st) {
#define KNN_FINAL(E) knn_final_kernel<E><<<c.nq, LTK_SEL_NT, smem, st>>>(c, o)
    KNN_BY_E(c.kp, KNN_FINAL);
#undef KNN_FINAL
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

ltk_status ltk_knn_output(const knn_out &o, size_t smem, cudaStream_t st) {
#define KNN_OUTPUT(E) knn_output_kernel<E><<<o.nq, LTK_SEL_NT, smem, st>>>(o)
    KNN_BY_E(o.kp, KNN_OUTPUT);
#undef KNN_OUTPUT
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

ltk_status ltk_knn_mat_pack(const int32_t *idx, const float *sc, int nq, int k, int kp, uint64_t *res,
                            int32_t *res_cnt, cudaStream_t st) {
    knn_mat_pack_kernel<<<nq, 256, 0, st>>>(idx, sc, nq, k, kp, res, res_cnt);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}
