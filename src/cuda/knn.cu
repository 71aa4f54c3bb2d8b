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
 * This file: the plan of the workspace, the graph of step 3-4, and the host run. The scoring main
 * loops: mma.sync m16n8k16 (bf16/f16, fp32 accumulation; fp32: SIMT FMA in a fixed order) on sm_80
 * and later (knn-portable.cu); on sm_90a a wgmma + TMA main loop with the same epilogues
 * (knn-sm90.cu, the default on sm_90; LTK_CUDA_PORTABLE=1 turns it off). The per-query kernels of
 * steps 1, 3, 4 and 5: knn-select.cu. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "knn.cuh"

#define KNN_MAXCHUNK ((int64_t)1 << 30) /* corpus rows a chunk: local indices stay int32 */

static int64_t knn_chunk_rows = KNN_MAXCHUNK; /* tests lower it to exercise the merge */

/* Sample rows for a chunk of nr rows and this k. The threshold is the r-th largest sampled score,
 * aimed at 2k candidates (r ~ 2 k m / nr), or at 1.6k where that rank is >= 100 (knn_thr_rank);
 * the count's spread depends on r alone (~1/sqrt(r)): m = KNN_SAMPLE_MUL nr / k (r = 64), within
 * [8192, KNN_SAMPLE] and <= nr. Where the floor binds (k = 8,192 at N = 1M: r = 102 at 1.6k) the
 * larger sample buys 20% fewer candidates. Why: at k = 8,192, N = 1M the full 32,768-row sample
 * (r = 512) cost 23 us of scan and 31 us of threshold per call (H200); 4,096 rows at 2k candidates
 * (16k a query) and 8,192 at 1.6k (13k) took 0.574 and 0.559 ms a call at B = 64, while
 * m = 64 nr / k everywhere lost 1-2% at k = 2048-4096 (an A/B in one process of these rules).
 * P(fewer than k candidates) = P(Poisson(32) >= 64) ~ 1e-7 a query at r = 64 with 2k,
 * P(Poisson(64) >= 102) ~ 1e-6 at r = 102 with 1.6k. Monotone in nr, so the plan's m (of the
 * largest chunk) bounds every chunk's. */
#define KNN_SAMPLE_MUL 32
static int64_t knn_sample_rows(int64_t nr, int k) {
    int64_t m = (KNN_SAMPLE_MUL * nr + k - 1) / k;
    if (m < 8192) m = 8192;
    if (m > KNN_SAMPLE) m = KNN_SAMPLE;
    m = (m + 3) & ~(int64_t)3; /* whole 16-byte vectors per query row of the sample (threshold kernel) */
    return m < nr ? m : nr;
}
/* The sample of a chunk of nr rows: *m rows (at most knn_sample_rows) every *stride-th from row
 * 0, the stride the smallest prime >= max(nr / knn_sample_rows, 5). Why a prime: a power-of-two
 * stride sampled every tenth row of a corpus whose other rows are 0 twice as often as the corpus
 * holds it (rows i % 10 == 0 at stride 128: every fifth sample), and hit only 1/128 of the sources
 * of a corpus of copies placed by a multiplicative hash (the low 7 bits of 128 j times an odd
 * constant are 0), so the threshold missed by 2x and more and the exact fallback ran (bench knn
 * --dist zero / dup, k = 8192: 9.2 and 7.1 ms against 0.52, records of a0059b7). A prime shares
 * a factor only with periods that are its multiples. */
static void knn_sample_layout(int64_t nr, int k, int64_t *m, int64_t *stride) {
    const int64_t m0 = knn_sample_rows(nr, k);
    int64_t p = nr / m0 > 5 ? nr / m0 : 5;
    for (;; p++) {
        int prime = 1;
        for (int64_t d = 2; d * d <= p && prime; d++) prime = p % d != 0;
        if (prime) break;
    }
    *stride = p;
    *m = (nr / p < m0 ? nr / p : m0) & ~(int64_t)3; /* (whole 16-byte vectors a query row, as knn_sample_rows) */
}

extern "C" void ltk_cuda_knn_debug_chunk(int64_t rows) { knn_chunk_rows = rows > 0 ? rows : KNN_MAXCHUNK; }

/* A fused call over at most cuda_knn_dense scores (B x N, 2^23 by default: 32 MB of them) runs as
 * materialize: the scores written, then select.cu. Why: there the fused call's fixed stages (the
 * sample, its threshold, the check and the fallback's launches) cost more than writing and reading
 * the scores; in one process on the H200 (litetopk.knn_topk, bench/gpu_knn_small.py, records of
 * 3fad31b) materialize took 0.11-0.15 against fused 0.16-0.17 ms at B = 1, N = 100K-200K, D = 384
 * bf16, 0.12-0.14 against 0.14 at B = 64, N = 100K, and 0.18-0.25 against 0.25-0.34 for every D = 100
 * and fp32 shape at B = 1; fused won from B = 64 at N = 200K (0.17-0.18 against 0.19-0.20 ms, 12.8M
 * scores) and at B = 1000 (0.44-0.85 against 0.94-1.85). Set the same way for the size query and
 * the call, so the workspace matches the path. */
static int knn_dense(const ltk_knn_args *a, const ltk_exec *e) {
    if (e && e->algo == LTK_ALGO_MATERIALIZE) return 1;
    const int fused = !e || e->algo == LTK_ALGO_FUSED;
    return fused && a->B * a->N <= ltk_tune_get()->cuda_knn_dense;
}

/* ---- plan ---------------------------------------------------------------------------------- */
typedef struct knn_plan {
    int64_t qb;       /* queries per batch */
    int64_t chunk;    /* corpus rows per launch chunk */
    int nch;
    int kp;
    int64_t cap, m;
    int64_t stage; /* candidate keys the final select stages in shared memory (before the device's limit) */
    size_t o_qn, o_samp, o_thr, o_thrlim, o_cnt, o_ckey, o_crel, o_fbany, o_fbon, o_fbhist, o_fbcnt, o_fbkk, o_fbpre, o_fbmask,
        o_fbout, o_fbshift, o_fbtop, o_res, o_rescnt, o_stfb, o_stc, o_S, o_sidx, o_ssc, o_sws, total;
    size_t sel_ws;
} knn_plan;

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
    pl->m = knn_sample_rows(pl->chunk, a->k);
    {   /* twice the expected candidates of the largest chunk (n r / m, or every row when no sample) */
        const int64_t n = pl->chunk, r = knn_thr_rank(a->k, pl->m, n, pl->cap);
        int64_t ex = n <= pl->cap ? n : (r * n + pl->m - 1) / pl->m;
        int64_t sc = 2 * ex + 1024;
        pl->stage = (sc < pl->cap ? sc : pl->cap + 15) / 16 * 16;
    }
    int64_t Q = pl->qb;
    int mat = knn_dense(a, e);
    size_t o = 0;
#define KNN_ADD(field, bytes) \
    pl->field = o;            \
    o = ltk_al256(o + (size_t)(bytes));
    KNN_ADD(o_qn, Q * 4);
    KNN_ADD(o_samp, mat ? 0 : Q * pl->m * 4);
    KNN_ADD(o_thr, Q * 4);
    KNN_ADD(o_thrlim, Q * 4);
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

/* ---- launches ------------------------------------------------------------------------------ */
/* One scoring pass: the wgmma + TMA main loop where it applies (knn-sm90.cu), else mma.sync. */
template <int DT, int MODE>
static ltk_status knn_score_launch(const knn_params &p, int sms, cudaStream_t st) {
    if constexpr (DT != 0)
        if (p.sm90 && ltk_knn_sm90_fits(p, DT)) return ltk_knn_sm90_launch<DT, MODE>(p, sms, st);
    return ltk_knn_mma_launch<DT, MODE>(p, sms, st);
}

/* The exact fallback: 6 histogram passes over the chunk's rows (each followed by a step that picks
 * the digit) and a take pass, for the queries the check marked; each launch exits at once when no
 * query of its blocks needs it. */
template <int DT> static ltk_status knn_fallback_passes(const knn_params &p, const knn_ctl &c, int sms, cudaStream_t st) {
    for (int pass = 0; pass < 6; pass++) {
        LTK_FORWARD_IF((knn_score_launch<DT, KNN_HIST>(p, sms, st)));
        LTK_FORWARD_IF(ltk_knn_fb_step(c, st));
    }
    LTK_FORWARD_IF((knn_score_launch<DT, KNN_TAKE>(p, sms, st)));
    return LTK_OK;
}

/* ---- the check and the fallback as a CUDA graph with a conditional node ----------------------
 * Why: the 13 fallback launches are almost always empty, yet cost ~30 us a call (B = 64, N = 1M:
 * 6% of the call). Reading the flag on the host was slower (the GPU idles until the next launch
 * arrives), so the decision stays on the device: a graph of [check -> IF
 * (any query needs it) { the 13 launches }], launched in the stream where they were. Built on the
 * first call with given arguments (captured from the same launch code), then replayed; a few are
 * kept per process. Used for chunks of >= KNN_GRAPH_ROWS rows, where building one (~0.1-0.2 ms of
 * host time) hides behind the GATE scan; not while the caller's stream is being captured (plain
 * launches then). The test hook ltk_tune.cuda_knn_graph: -1 never, 1 for every sampled chunk (a
 * failure to build is then an error instead of a silent return to plain launches). */
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
    const int g = ltk_tune_get()->cuda_knn_graph;
    return g < 0 ? 0 : g > 0 ? 1 : 2;
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
    kp.func = (void *)ltk_knn_check_cond_kernel();
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
        return ltk_knn_check(c, st);
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
        key.qi64 = ltk_tune_get()->cuda_knn_qi64 != 0; /* (the sm_90a loop's item size: not in p) */
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
    LTK_FORWARD_IF(ltk_knn_check(c, st));
    return knn_fallback_passes<DT>(p, c, sms, st);
}

/* ---- the run --------------------------------------------------------------------------------- */
/* Shared memory of the final kernels: the scratch and kp composites (what the output kernels take,
 * smem_out), LTK_BUCKET_MAX more composites (ltk_topk_bucket), then the staged candidate keys, as
 * many as the device's shared memory allows. */
typedef struct knn_fin {
    size_t smem_out, smem_final;
    int64_t stage;
} knn_fin;

static ltk_status knn_fin_plan(const ltk_knn_args *a, const knn_plan *pl, const ltk_cuda_dev *dv, knn_fin *f) {
    f->smem_out = sizeof(ltk_sel_smem) + (size_t)pl->kp * 8;
    const size_t fin_base = f->smem_out + (size_t)LTK_BUCKET_MAX * 8;
    /* what the final and output kernels may take dynamically: the opt-in limit less their static
     * shared memory (the output kernel's chunk counts). Without it, k = 8,193..~11,000 on a sampled
     * corpus (staging clamped to the limit) failed the attribute set with "invalid argument" (the
     * MiniLM set at k = 10,000). */
    const int64_t fin_limit = (int64_t)dv->smem_optin - ltk_knn_fin_static_smem();
    int64_t stage = pl->stage;
    if ((int64_t)fin_base + stage * 4 > fin_limit) stage = (fin_limit - (int64_t)fin_base) / 4 / 16 * 16;
    if (stage < 2 * (int64_t)a->k) stage = 0; /* too few to matter: the global-memory select */
    f->stage = stage;
    f->smem_final = fin_base + (size_t)stage * 4;
    return ltk_knn_fin_smem_reserve(f->smem_final);
}

/* One batch of nq queries (from query b0) on its way through the chunks. */
typedef struct knn_batch {
    const ltk_knn_args *a;
    const ltk_exec *e;
    const knn_plan *pl;
    unsigned char *ws;
    cudaStream_t st;
    int dev, sms, sm90, mat, score_only;
    knn_fin fin;
    int64_t b0;
    int nq;
    const char *qptr;
    float *qn;
    int qn_done;
    knn_out o;  /* what the output kernel writes */
    knn_out fo; /* what the final kernel writes: the output (one chunk, fused: no output launch) or res */
} knn_batch;

/* |q|^2 and the statistics' reset, once a batch: before anything that reads them. For inner product
 * the first chunk's sample scan reads neither and goes first: the GPU starts the call's first long
 * kernel one launch earlier (the host is on the critical path until the GATE scan). */
template <int DT> static ltk_status knn_qnorm_once(knn_batch *b) {
    if (b->qn_done) return LTK_OK;
    LTK_FORWARD_IF(ltk_knn_qnorm<DT>(b->qptr, b->a->q_stride, b->a->D, b->nq, b->qn,
                                     (int32_t *)(b->ws + b->pl->o_stfb), (int32_t *)(b->ws + b->pl->o_stc), b->st));
    b->qn_done = 1;
    return LTK_OK;
}

/* Materialize, one chunk: every score stored, the select of select.cu, its output packed as the
 * chunk's results. */
template <int DT>
static ltk_status knn_chunk_mat(knn_batch *b, knn_params *pp, int64_t r0, int64_t nr, uint64_t *res, int32_t *res_cnt) {
    const ltk_knn_args *a = b->a;
    const knn_plan *pl = b->pl;
    const int esz = DT == 0 ? 4 : 2;
    knn_params &p = *pp;
    p.x = (const char *)a->base + r0 * a->base_stride * esz;
    p.x_stride = a->base_stride;
    p.n = nr;
    p.S = (float *)(b->ws + pl->o_S);
    p.ld = nr;
    LTK_FORWARD_IF((knn_score_launch<DT, KNN_STORE>(p, b->sms, b->st)));
    ltk_select_args sa;
    memset(&sa, 0, sizeof sa);
    sa.rows = b->nq;
    sa.cols = nr;
    sa.k = a->k;
    sa.dtype = LTK_DTYPE_F32;
    sa.scores = p.S;
    sa.row_stride = nr;
    sa.out_idx = (int32_t *)(b->ws + pl->o_sidx);
    sa.out_scores = (float *)(b->ws + pl->o_ssc);
    sa.out_stride = a->k;
    ltk_exec se = *b->e;
    se.stats = NULL;
    size_t need = 0;
    LTK_FORWARD_IF(ltk_cuda_select_workspace(&sa, &se, &need));
    LTK_RETURN_IF(need > pl->sel_ws, LTK_EINTERNAL, "knn materialize: select workspace %zu > planned %zu", need,
                  pl->sel_ws);
    LTK_FORWARD_IF(ltk_cuda_select(&sa, &se, b->ws + pl->o_sws, need));
    return ltk_knn_mat_pack(sa.out_idx, sa.out_scores, b->nq, a->k, pl->kp, res, res_cnt, b->st);
}

/* The control block of one chunk of nr rows. */
static void knn_ctl_init(const knn_batch *b, int64_t nr, uint64_t *res, int32_t *res_cnt, knn_ctl *c) {
    const knn_plan *pl = b->pl;
    unsigned char *ws = b->ws;
    memset(c, 0, sizeof *c);
    c->nq = b->nq;
    c->k = b->a->k;
    c->kp = pl->kp;
    c->n = nr;
    c->cap = pl->cap;
    knn_sample_layout(nr, b->a->k, &c->m, &c->sstride);
    c->samp = (const float *)(ws + pl->o_samp);
    c->thr = (uint32_t *)(ws + pl->o_thr);
    c->thr_lim = (uint32_t *)(ws + pl->o_thrlim);
    c->cnt = (uint32_t *)(ws + pl->o_cnt);
    c->fb_any = (uint32_t *)(ws + pl->o_fbany);
    c->fb_on = (uint32_t *)(ws + pl->o_fbon);
    c->fb_hist = (uint32_t *)(ws + pl->o_fbhist);
    c->fb_cnt = (uint32_t *)(ws + pl->o_fbcnt);
    c->fb_kk = (uint32_t *)(ws + pl->o_fbkk);
    c->fb_prefix = (uint64_t *)(ws + pl->o_fbpre);
    c->fb_mask = (uint64_t *)(ws + pl->o_fbmask);
    c->fb_out = (uint64_t *)(ws + pl->o_fbout);
    c->fb_shift = (int32_t *)(ws + pl->o_fbshift);
    c->fb_top = (int32_t *)(ws + pl->o_fbtop);
    c->ckey = (const uint32_t *)(ws + pl->o_ckey);
    c->crel = (const uint32_t *)(ws + pl->o_crel);
    c->res = res;
    c->res_cnt = res_cnt;
    c->st_fb = (int32_t *)(ws + pl->o_stfb);
    c->st_cand = (int32_t *)(ws + pl->o_stc);
    c->thr_smem = ltk_knn_thr_smem(b->dev);
    c->stage = (int)b->fin.stage;
    c->tiebound = !ltk_tune_get()->cuda_knn_tiebound_off;
}

/* Fused (and score only), one chunk: steps 1-5 of the file's comment. */
template <int DT>
static ltk_status knn_chunk_fused(knn_batch *b, knn_params *pp, int vec, int64_t r0, int64_t nr, uint64_t *res,
                                  int32_t *res_cnt) {
    const ltk_knn_args *a = b->a;
    const int esz = DT == 0 ? 4 : 2;
    knn_params &p = *pp;
    knn_ctl c;
    knn_ctl_init(b, nr, res, res_cnt, &c);
    /* 1. sample: every c.sstride-th row */
    if (nr > c.cap && !b->score_only) {
        knn_params ps = p;
        ps.x = (const char *)a->base + r0 * a->base_stride * esz;
        ps.x_stride = a->base_stride * c.sstride;
        ps.vec = vec && ((ps.x_stride * esz) % 16 == 0);
        ps.n = c.m;
        ps.S = (float *)c.samp;
        ps.ld = c.m;
        LTK_FORWARD_IF((knn_score_launch<DT, KNN_STORE>(ps, b->sms, b->st)));
    }
    LTK_FORWARD_IF(knn_qnorm_once<DT>(b));
    LTK_FORWARD_IF(ltk_knn_threshold(c, b->st));
    if (b->score_only) { /* nothing passes */
        LTK_CUDA_TRY(cudaMemsetAsync(c.thr, 0xff, (size_t)b->nq * 4, b->st));
        LTK_CUDA_TRY(cudaMemsetAsync(c.thr_lim, 0xff, (size_t)b->nq * 4, b->st));
    }
    /* 2. GATE */
    p.x = (const char *)a->base + r0 * a->base_stride * esz;
    p.x_stride = a->base_stride;
    p.n = nr;
    p.thr = c.thr;
    p.thr_lim = c.thr_lim;
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
    LTK_FORWARD_IF((knn_score_launch<DT, KNN_GATE>(p, b->sms, b->st)));
    if (b->score_only) return LTK_OK;
    /* 3. check, 4. exact fallback passes (only when a query needs them) */
    LTK_FORWARD_IF(knn_check_and_fallback<DT>(p, c, b->sms, b->dev, b->st));
    /* 5. final select */
    return ltk_knn_final(c, b->fo, b->fin.smem_final, b->st);
}

/* Chunk ch of the corpus for the batch: its results go to res[ch] (the final kernel's output
 * directly when there is one chunk). */
template <int DT> static ltk_status knn_chunk(knn_batch *b, int ch) {
    const ltk_knn_args *a = b->a;
    const knn_plan *pl = b->pl;
    const int esz = DT == 0 ? 4 : 2;
    int64_t r0 = (int64_t)ch * pl->chunk, nr = a->N - r0 < pl->chunk ? a->N - r0 : pl->chunk;
    knn_params p;
    memset(&p, 0, sizeof p);
    p.q = b->qptr;
    p.q_stride = a->q_stride;
    p.D = a->D;
    p.metric = (int)a->metric;
    p.nq = b->nq;
    p.qn = b->qn;
    p.kp = pl->kp;
    uintptr_t align = (uintptr_t)a->queries | (uintptr_t)a->base;
    int vec = (align % 16 == 0) && ((a->D * esz) % 16 == 0) && ((a->q_stride * esz) % 16 == 0) &&
              ((a->base_stride * esz) % 16 == 0);
    p.vec = vec;
    p.sm90 = b->sm90;
    uint64_t *res = (uint64_t *)(b->ws + pl->o_res) + (size_t)ch * b->nq * pl->kp;
    int32_t *res_cnt = (int32_t *)(b->ws + pl->o_rescnt) + (size_t)ch * b->nq;
    if (nr <= 0) { /* N == 0 */
        LTK_CUDA_TRY(cudaMemsetAsync(res, 0, (size_t)b->nq * pl->kp * 8, b->st));
        LTK_CUDA_TRY(cudaMemsetAsync(res_cnt, 0, (size_t)b->nq * 4, b->st));
        return LTK_OK;
    }
    if (b->mat) return knn_chunk_mat<DT>(b, &p, r0, nr, res, res_cnt);
    return knn_chunk_fused<DT>(b, &p, vec, r0, nr, res, res_cnt);
}

/* The call's statistics of one batch (copied back: the host waits). */
static ltk_status knn_batch_stats(const knn_batch *b) {
    const int nq = b->nq;
    ltk_stats *S = b->e->stats;
    int32_t *h = (int32_t *)malloc((size_t)nq * 8);
    LTK_RETURN_IF(!h, LTK_ENOMEM, "stats");
    cudaError_t ce = cudaMemcpyAsync(h, b->ws + b->pl->o_stfb, (size_t)nq * 4, cudaMemcpyDeviceToHost, b->st);
    if (ce == cudaSuccess) ce = cudaMemcpyAsync(h + nq, b->ws + b->pl->o_stc, (size_t)nq * 4, cudaMemcpyDeviceToHost, b->st);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(b->st);
    if (ce != cudaSuccess) {
        free(h);
        return ltk_cuda_error(ce, "knn stats", __FILE__, __LINE__);
    }
    for (int i = 0; i < nq; i++) {
        S->fallback_rows += h[i] > 0;
        S->candidates += h[nq + i];
        if (h[nq + i] > S->candidates_max) S->candidates_max = h[nq + i];
        if (S->row_candidates) S->row_candidates[b->b0 + i] = h[nq + i];
        if (S->row_bin_entries) S->row_bin_entries[b->b0 + i] = 0; /* (the call's bin_entries: 0, not counted) */
    }
    free(h);
    return LTK_OK;
}

template <int DT>
static ltk_status knn_run(const ltk_knn_args *a, const ltk_exec *e, const knn_plan *pl, unsigned char *ws,
                          cudaStream_t st, const ltk_cuda_dev *dv, int sm90) {
    const int esz = DT == 0 ? 4 : 2;
    knn_batch b;
    memset(&b, 0, sizeof b);
    b.a = a;
    b.e = e;
    b.pl = pl;
    b.ws = ws;
    b.st = st;
    b.dev = dv->dev;
    b.sms = dv->nsm;
    b.sm90 = sm90;
    b.mat = knn_dense(a, e);
    b.score_only = e->algo == LTK_ALGO_SCORE_ONLY;
    LTK_FORWARD_IF(knn_fin_plan(a, pl, dv, &b.fin));
    /* one chunk, fused: the final kernel writes the call's output itself (no output launch) */
    const int direct = pl->nch == 1 && !b.mat && a->N > 0;
    for (int64_t b0 = 0; b0 < a->B; b0 += pl->qb) {
        b.b0 = b0;
        b.nq = (int)(a->B - b0 < pl->qb ? a->B - b0 : pl->qb);
        b.qptr = (const char *)a->queries + b0 * a->q_stride * esz;
        b.qn = (float *)(ws + pl->o_qn);
        b.qn_done = 0;
        knn_out *o = &b.o;
        memset(o, 0, sizeof *o);
        o->nq = b.nq;
        o->k = a->k;
        o->kp = pl->kp;
        o->nch = pl->nch;
        o->metric = (int)a->metric;
        o->chunk_rows = pl->chunk;
        o->out_stride = a->out_stride;
        o->res = (const uint64_t *)(ws + pl->o_res);
        o->res_cnt = (const int32_t *)(ws + pl->o_rescnt);
        o->out_idx = a->out_idx + b0 * a->out_stride;
        o->out_scores = a->out_scores ? a->out_scores + b0 * a->out_stride : NULL;
        b.fo = *o;
        if (!direct) b.fo.out_idx = NULL;
        if (a->metric != LTK_METRIC_IP || b.mat || b.score_only) LTK_FORWARD_IF(knn_qnorm_once<DT>(&b));
        for (int ch = 0; ch < pl->nch; ch++) LTK_FORWARD_IF(knn_chunk<DT>(&b, ch));
        LTK_FORWARD_IF(knn_qnorm_once<DT>(&b)); /* (N = 0: no chunk ran one) */
        if (b.score_only) continue;
        if (!direct) LTK_FORWARD_IF(ltk_knn_output(b.o, b.fin.smem_out, st));
        if (e->stats) LTK_FORWARD_IF(knn_batch_stats(&b));
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
    ltk_cuda_dev dv;
    LTK_FORWARD_IF(ltk_cuda_device(&dv));
    const int sm90 = a->dtype != LTK_DTYPE_F32 && ltk_knn_sm90_enabled(dv.major, dv.minor);
    LTK_RETURN_IF(dv.major < 8, LTK_EUNSUPPORTED, "cuda knn needs compute capability 8.0 or newer (device has %d.x)",
                  dv.major);
    cudaStream_t st = (cudaStream_t)e->stream;
    switch (a->dtype) {
    case LTK_DTYPE_F32: return knn_run<0>(a, e, &pl, (unsigned char *)ws, st, &dv, sm90);
    case LTK_DTYPE_F16: return knn_run<1>(a, e, &pl, (unsigned char *)ws, st, &dv, sm90);
    case LTK_DTYPE_BF16: return knn_run<2>(a, e, &pl, (unsigned char *)ws, st, &dv, sm90);
    default: return ltk_error(LTK_EUNSUPPORTED, "cuda knn: dtype %d", (int)a->dtype);
    }
}
