/* The CUDA indexer's host driver: the plan of the workspace and the sequence of kernels on the
 * caller's stream (the kernels: indexer-*.cu, declared in indexer.cuh).
 *
 * Fused indexer, per sub-chunk of rows (the candidate buffer is sized for a sub-chunk, which
 * bounds the workspace independently of T):
 *   sample scan (the scan kernel in materialize mode over the gathered sample keys)
 *   -> prep (per-row bins and initial threshold) -> fused scan -> exact select of the candidates
 *   -> exact dense fallback for rows whose buffer overflowed (materialize for those rows only)
 * then, with a state, the hot-set vote. Nothing is allocated and nothing waits on the host
 * unless exec->stats is set (the statistics are copied back).
 * The scan kernel is the sm_90a one (indexer-sm90.cu) on sm_90 when the shapes allow it, else (and
 * under LTK_CUDA_PORTABLE=1) the portable one (indexer-portable.cu). Switches come from the tuning
 * table (ltk-tune.h), read once a process. */
#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "indexer.cuh"

/* ---- plan ----------------------------------------------------------------------------- */
#define CAND_BUDGET ((size_t)768 << 20) /* candidate buffer: keeps the fused workspace under 1 GB at T=8192 */
/* A fused decode call (paged keys) runs as dense windows of at most this many score bytes, so its
 * workspace depends on the batch (rows x k) and this bound, never on max_len beyond it. Why dense:
 * the scores are 4 bytes a position a row next to the 132 bytes a position the scan reads, and on
 * the H200 the filter's fixed stages (the per-request sample, the prep, the candidate select)
 * made it 1.3-4.5x slower than the dense select at every decode shape measured (next_n = 1, B 1-256,
 * 4K-1M positions: `litetopk bench decode`, bench/results/h200/decode.jsonl). At this bound the
 * batches of next_n 4 at 64K-256K (256-1,024 rows) take two windows and are 2-3% slower than the
 * materialize path's one (B = 64 at 256K: 1.412 against 1.368 ms back to back); 256 MB would fit
 * them in one (not yet measured). */
#define DECODE_BUDGET ((size_t)128 << 20)

typedef struct idx_plan {
    int sm90, bq, skip_short, algo, ext_select;
    int dense_for_fused; /* a fused call run as dense windows (short rows: fused_dense_wanted) */
    const ltk_paged_src *pg; /* the decode operation's paged keys (decode.cu), or NULL */
    int capturing;           /* the stream is being captured: no host allocation (the watchdog's) */
    ltk_cuda_dev dev;
    int64_t T, S, S_r;
    int32_t k;
    /* fused */
    int64_t cap, tsub, m_hot, m_cold, win, m_max;
    /* dense windows: materialize sub-chunks and fallback batches */
    int64_t dense_rows, dense_W, nwin;
    size_t ext_ws;
    /* layout (byte offsets) */
    size_t o_big, big_bytes; /* candidates / logits / vote scratch */
    size_t o_run, o_runcnt;  /* running best of multi-window rows */
    size_t o_smin, o_delta, o_th, o_cnt;
    size_t o_P, o_kvg, o_scg, o_lohi, o_fb, o_fbcnt, o_se;
    size_t o_stc, o_stb, o_stf;
    size_t o_rh; /* fused: the gate histograms carried between a row's key splits (sm_90a) */
    size_t total; /* bytes (while planning: laid out so far) */
    /* the candidate indexer's block maxima beside the call's own work (ltk_cuda_indexer_blockmax):
     * bm_bsz > 0 keys a block, row t's at bm[t * bm_ld] */
    int32_t bm_bsz;
    int bm_direct;
    float *bm;
    int64_t bm_ld;
} idx_plan;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* The sm_90a scan is the default on sm_90 (it passed the GPU tests and the sanitizers on the H200
 * before it became the default); LTK_CUDA_PORTABLE=1 selects the portable scan. */
static int sm90_wanted(void) { return !ltk_tune_get()->cuda_portable; }

/* Logits per materialize sub-chunk: LTK_CUDA_MAT_BUDGET_MB, 4 GiB by default (benchmarks compare
 * against the 512 MB budget vLLM uses; whole MiB, so a window always holds at least 256K columns). */
static size_t mat_budget(void) { return (size_t)ltk_tune_get()->cuda_mat_budget_mb << 20; }

/* A fused call over few keys runs as dense windows: the same scan writes every score into the
 * candidate region, then the exact select (same bits as the filtered path). Why: the filter saves
 * a write and a read of T x S scores, but costs ~3 ms of fixed stages a call at 8,192 rows (sample
 * scan, prep, candidate select, vote) and a gate share of the scan that grows as S shrinks; on the
 * H200 dense windows were faster up to S = 256K (8,192 rows: 5.1 vs 9.0 ms at 32K, 40.8 vs 42.4 at
 * 256K), about even at 384-512K. Calls with many rows and
 * S <= 262,144 keys (LTK_CUDA_FUSED_DENSE_S; 0 = never). Few rows keep the filter: a dense select
 * of one row is one CTA over the whole row. */
static int fused_dense_wanted(const ltk_indexer_args *a) {
    return a->T >= 1024 && a->S > 0 && a->S <= ltk_tune_get()->cuda_fused_dense_s;
}

/* Lays out a region of `bytes` at the end of the workspace so far (p->total), 256-byte aligned. */
static void take(idx_plan *p, size_t *field, size_t bytes) {
    *field = p->total;
    p->total += ltk_al256(bytes);
}

/* What every algorithm's plan starts from: the device, the algorithm actually run, the shape. */
static ltk_status plan_common(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, idx_plan *p) {
    memset(p, 0, sizeof *p);
    p->pg = pg;
    p->capturing = ltk_stream_capturing((cudaStream_t)e->stream);
    LTK_FORWARD_IF(ltk_cuda_device(&p->dev));
    p->algo = e->algo;
    if (p->algo == LTK_ALGO_FUSED && (fused_dense_wanted(a) || pg)) {
        p->algo = LTK_ALGO_MATERIALIZE;
        p->dense_for_fused = 1;
    }
    p->T = a->T;
    p->S = a->S;
    p->S_r = round_up(a->S > 0 ? a->S : 1, 256);
    p->k = a->k;
    p->skip_short = (a->flags & LTK_FLAG_UNSORTED) && a->out_scores == NULL;
    p->sm90 = sm90_wanted() && a->S > 0 &&
              (pg ? ltk_sm90_paged_supported(a, pg, p->dev.major, p->dev.minor)
                  : ltk_sm90_supported(a, p->dev.major, p->dev.minor));
    p->bq = p->sm90 ? ltk_sm90_rows_per_block(a->H) : 1;
    return LTK_OK;
}

/* Score only: the scan's row counters and thresholds, nothing else. */
static void plan_score_only(idx_plan *p) {
    const int64_t T = p->T;
    p->tsub = T;
    p->cap = 0;
    take(p, &p->o_cnt, 4 * (T > 0 ? T : 1));
    take(p, &p->o_th, 4 * (T > 0 ? T : 1));
}

/* Materialize (also a fused call run as dense windows): sub-chunks of dense_rows rows, each row's
 * keys in nwin windows of dense_W columns, within the logits budget. */
static void plan_dense(idx_plan *p) {
    /* (a fused call's dense windows stay inside the fused workspace's candidate budget; a decode
     * call's inside DECODE_BUDGET) */
    const size_t budget = p->dense_for_fused ? (p->pg ? DECODE_BUDGET : CAND_BUDGET) : mat_budget();
    const int64_t T = p->T;
    int64_t W = p->S_r;
    if ((size_t)W * 4 > budget) W = (int64_t)(budget / 4 / 256) * 256;
    p->dense_W = W;
    p->nwin = ceil_div(p->S_r, W);
    int64_t rows = (int64_t)(budget / ((size_t)W * 4));
    rows = rows < 1 ? 1 : rows;
    p->dense_rows = rows < T ? rows : (T > 0 ? T : 1);
    if (p->pg && p->dense_rows < T) { /* whole requests: a scan's row groups are requests */
        const int64_t nn = p->pg->next_n;
        p->dense_rows = p->dense_rows >= nn ? p->dense_rows / nn * nn : nn;
    }
    take(p, &p->o_big, (size_t)p->dense_rows * W * 4);
    p->big_bytes = (size_t)p->dense_rows * W * 4;
}

/* Fused: the candidate buffer of a sub-chunk of tsub rows, the sample, and the exact fallback's
 * dense windows inside the candidate region. */
static ltk_status plan_fused(const ltk_indexer_args *a, idx_plan *p) {
    const size_t es = ltk_dtype_size(a->dtype);
    const int64_t T = a->T, k = a->k;
    /* candidate capacity: 12k (room for the ~k(1 + ln(S/k)) entries a random-order stream admits
     * before the gate settles), at least 2k, never more than a row can hold */
    int64_t cap = 12 * k;
    if (cap > p->S_r) cap = p->S_r;
    if (cap < 2 * k) cap = 2 * k;
    int64_t want_rows = T < (int64_t)p->bq * p->dev.nsm * 2 ? T : (int64_t)p->bq * p->dev.nsm * 2;
    if (want_rows < 1) want_rows = 1;
    if ((size_t)want_rows * (size_t)cap * 8 > CAND_BUDGET) {
        cap = (int64_t)(CAND_BUDGET / 8 / (size_t)want_rows);
        if (cap < 2 * k) cap = 2 * k;
    }
    /* the sample: hot keys, a strided subset, the most recent window */
    p->m_hot = a->state ? (a->state->capacity < 16384 ? a->state->capacity : 16384) : 0;
    /* strided keys: enough for the prep's quantile estimate (PREP_Q k of the row) to rest on
     * >= 24 of them up to len = 4096 * 4k / 24 keys a row (~1.4M at k = 2048). With a hot set
     * and short rows, where the sample pass is a large share of the call, k of them as before
     * (H200: the larger sample cost 6-9% on prefills of S <= 64K keys, saved 1-2% at 1M). */
    const int64_t m_cold_q = 2 * k > 4096 ? 2 * k : 4096;
    const int long_rows = p->S_r >= 64 * m_cold_q;
    p->m_cold = !a->state || long_rows ? m_cold_q : k;
    /* Over long rows the strided estimate sets the start (H200, T=8192 S=1M: the same 5.1k
     * candidates a row with and without a hot set), so only the best k hot keys are scored
     * there, not the whole set: the sample scan is 8,192 x m keys a call. */
    if (long_rows && p->m_hot > k) p->m_hot = k;
    p->win = k / 2 < 1024 ? k / 2 : 1024;
    if (p->win < 1) p->win = 1;
    p->m_max = round_up(p->m_hot + p->m_cold + p->win, 256);
    if (p->m_max > p->S_r) p->m_max = p->S_r; /* no more distinct keys than S */
    if (cap * 2 < p->m_max) cap = p->m_max / 2; /* sample scores live in the row's candidate slots */
    cap = round_up(cap, 8);
    p->cap = cap;
    int64_t tsub = (int64_t)(CAND_BUDGET / ((size_t)cap * 8));
    if (tsub < 1) tsub = 1;
    if (tsub > T) tsub = T;
    if (tsub < 1) tsub = 1;
    int64_t nsub = ceil_div(T > 0 ? T : 1, tsub);
    tsub = round_up(ceil_div(T > 0 ? T : 1, nsub), p->bq);
    if (tsub > T && T > 0) tsub = T;
    p->tsub = tsub;
    p->big_bytes = (size_t)tsub * (size_t)cap * 8;
    /* fallback: dense windows inside the candidate region */
    int64_t W = p->S_r;
    size_t region = p->big_bytes;
    if ((size_t)W * 4 > region) W = (int64_t)(region / 4 / 256) * 256;
    if (W < 256) W = 256;
    p->dense_W = W;
    p->nwin = ceil_div(p->S_r, W);
    int64_t rows = (int64_t)(region / ((size_t)W * 4));
    rows = rows < 1 ? 1 : rows;
    p->dense_rows = rows < tsub ? rows : tsub;
    if ((size_t)p->dense_rows * W * 4 > p->big_bytes) p->big_bytes = (size_t)p->dense_rows * W * 4;
    /* the vote's scratch overlays the same region */
    if (a->state) {
        size_t vb = 0;
        LTK_FORWARD_IF(ltk_idx_vote_workspace(T, a->k, a->S, a->state->capacity, &vb));
        if (vb > p->big_bytes) p->big_bytes = vb;
    }
    take(p, &p->o_big, p->big_bytes);
    take(p, &p->o_smin, 4 * tsub);
    take(p, &p->o_delta, 4 * tsub);
    take(p, &p->o_th, 4 * tsub);
    take(p, &p->o_cnt, 4 * tsub);
    take(p, &p->o_P, 4 * p->m_max);
    take(p, &p->o_kvg, (size_t)p->m_max * a->D * es);
    take(p, &p->o_scg, 4 * p->m_max);
    take(p, &p->o_rh, p->sm90 ? 4 * (size_t)tsub * LTK_NB : 0); /* (only the sm_90a scan carries it) */
    take(p, &p->o_lohi, 48); /* union range, then where the strided part of the sample lies */
    take(p, &p->o_fb, 4 * tsub);
    take(p, &p->o_fbcnt, 4);
    return LTK_OK;
}

/* Materialize with one window a row: the GPU select of select.cu, which holds whole rows, sized
 * for both row counts the sub-chunk loop uses (the select's plan depends on the row count: few rows
 * split each row over CTAs and need more scratch). Without it (a shape it refuses), the dense select
 * of indexer-select.cu. */
static void plan_ext_select(const ltk_indexer_args *a, const ltk_exec *e, idx_plan *p) {
    ltk_select_args sa;
    memset(&sa, 0, sizeof sa);
    sa.rows = p->dense_rows;
    sa.cols = a->S;
    sa.k = a->k;
    sa.dtype = LTK_DTYPE_F32;
    sa.row_stride = p->dense_W;
    sa.out_stride = a->out_stride;
    sa.flags = a->flags;
    sa.starts = a->ks;
    sa.ends = a->ke;
    ltk_exec se = *e;
    se.stats = NULL;
    se.workspace = NULL;
    se.workspace_bytes = 0;
    size_t b = 0, b_tail = 0;
    const int64_t tail = a->T % p->dense_rows;
    ltk_status sb = ltk_cuda_select_workspace(&sa, &se, &b);
    if (sb == LTK_OK && tail > 0) {
        sa.rows = tail;
        sb = ltk_cuda_select_workspace(&sa, &se, &b_tail);
        if (b_tail > b) b = b_tail;
    }
    if (sb == LTK_OK) {
        p->ext_select = 1;
        p->ext_ws = b;
        take(p, &p->o_se, ltk_al256(b) + 8 * (size_t)p->dense_rows);
    }
    ltk_clear_error();
}

static ltk_status make_plan(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, idx_plan *p) {
    LTK_FORWARD_IF(plan_common(a, pg, e, p));
    const int64_t T = a->T;
    if (p->algo == LTK_ALGO_SCORE_ONLY) {
        plan_score_only(p);
        p->total += 256;
        return LTK_OK;
    }
    if (p->algo == LTK_ALGO_FUSED) {
        LTK_FORWARD_IF(plan_fused(a, p));
    } else {
        plan_dense(p);
        if (a->state) { /* the vote's scratch overlays the logits region (the only one so far) */
            size_t vb = 0;
            LTK_FORWARD_IF(ltk_idx_vote_workspace(T, a->k, a->S, a->state->capacity, &vb));
            if (vb > p->big_bytes) {
                p->big_bytes = vb;
                p->total = 0;
                take(p, &p->o_big, p->big_bytes);
            }
        }
    }
    if (p->nwin > 1) { /* the running best of rows whose keys span several windows */
        take(p, &p->o_run, (size_t)p->dense_rows * (size_t)a->k * 8);
        take(p, &p->o_runcnt, 4 * p->dense_rows);
    }
    if (p->algo == LTK_ALGO_MATERIALIZE && p->nwin == 1 && T > 0 && a->S > 0) plan_ext_select(a, e, p);
    take(p, &p->o_stc, 4 * (T > 0 ? T : 1));
    take(p, &p->o_stb, 4 * (T > 0 ? T : 1));
    take(p, &p->o_stf, 4 * (T > 0 ? T : 1));
    p->total += 256; /* the base is aligned up to 256 bytes (TMA sources live in it) */
    return LTK_OK;
}

/* ---- watchdog and trace ----------------------------------------------------------------- */
/* Debugging knobs (tuning table):
 *   LTK_CUDA_WATCHDOG_S (default 10, 0 = off): the sm_90a scan traps with a printed line when one
 *     of its barrier waits exceeds this (a hang becomes a launch error that names the wait);
 *   LTK_CUDA_TRACE=1: every stage of the indexer synchronises the stream and prints its wall time
 *     on stderr (a stall then shows as the last stage printed). Not while a graph is captured. */
static int64_t watchdog_ns(void) {
    const double s = ltk_tune_get()->cuda_watchdog_s;
    return s > 0 ? (int64_t)(s * 1e9) : 0;
}

/* The sm_90a watchdog record: host-mapped pinned memory, so it can be read after a trap has lost
 * the context. Printed by the next failing trace step and at exit (the tests exit on a CUDA error). */
static int32_t *diag_host = NULL, *diag_dev = NULL;

static void diag_print(void) {
    volatile int32_t *d = diag_host;
    if (!d || d[0] != 2) return;
    static const char *roles[] = {"producer (TMA thread)", "refresh warp", "math warp", "kv_scale warp"};
    static const char *whats[] = {"Q-empty barrier", "KV-empty barrier", "Q-full barrier", "KV-full barrier",
                                  "done count (math warps never finished the unit)"};
    fprintf(stderr,
            "[ltk cuda] sm90 WATCHDOG: block %d thread %d, %s, waited on the %s: unit %d (it %d of this CTA), "
            "tile %d, stage/slot %d, parity %d, extra %d\n",
            d[1], d[2], d[3] >= 0 && d[3] < 4 ? roles[d[3]] : "?", d[4] >= 0 && d[4] < 5 ? whats[d[4]] : "?", d[5], d[6],
            d[7], d[8], d[9], d[10]);
    d[0] = 3; /* printed once */
}

static int32_t *diag_ptr(void) {
    static int tried = 0;
    if (!tried) {
        tried = 1;
        void *h = NULL, *dp = NULL;
        if (cudaHostAlloc(&h, 64, cudaHostAllocMapped) == cudaSuccess && cudaHostGetDevicePointer(&dp, h, 0) == cudaSuccess) {
            memset(h, 0, 64);
            diag_host = (int32_t *)h;
            diag_dev = (int32_t *)dp;
            atexit(diag_print);
        } else {
            (void)cudaGetLastError();
        }
    }
    return diag_dev;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

extern "C" void ltk_trace_begin(ltk_trace *tr, cudaStream_t st) {
    tr->on = ltk_tune_get()->cuda_trace && !ltk_stream_capturing(st);
    tr->t0 = tr->on ? now_ms() : 0.0;
}

extern "C" ltk_status ltk_trace_step(ltk_trace *tr, cudaStream_t st, const char *fmt, ...) {
    if (!tr->on) return LTK_OK;
    cudaError_t e = cudaStreamSynchronize(st);
    double t = now_ms();
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[ltk cuda] %-44s %9.2f ms%s%s\n", what, t - tr->t0, e == cudaSuccess ? "" : "  ERROR ",
            e == cudaSuccess ? "" : cudaGetErrorString(e));
    tr->t0 = t;
    if (e != cudaSuccess) {
        diag_print();
        return ltk_cuda_error(e, what, __FILE__, __LINE__);
    }
    return LTK_OK;
}

/* ---- scans --------------------------------------------------------------------------------- */
/* Target fill of the persistent grid's waves: 0.99 (0.96 at first). Why it matters: at T = 8192,
 * S = 1M a unit is ~4,000 tiles (~4.5 ms), so a last wave of 4 units on 132 SMs (the 0.97 fill
 * that 0.96 accepted) leaves the rest of the GPU idle for a whole unit. H200 (one process,
 * alternating): 0.99 picks 3 splits there; fused 152.6 -> 150.3 ms at H = 64, 83.1 -> 82.2 ms at
 * H = 32, V3.2 prefill at L = 1M 10,038 -> 9,883 ms. The splits of a row share their gate
 * histogram (row_hist), or each would admit ~k more candidates. */
#define NSPLIT_FILL 0.99

/* Key splits per q-block so that the persistent grid's last wave is nearly full (at most smax). */
static int choose_nsplit(int64_t units1, int nsm, int64_t tiles, double target, int smax) {
    int best = 1;
    double best_eff = 0.0;
    for (int s = 1; s <= smax; s++) {
        if (s > 1 && tiles / s < 16) break;
        int64_t u = units1 * s;
        int64_t waves = ceil_div(u, nsm);
        double eff = (double)u / (double)(waves * nsm);
        if (eff >= target) return s;
        if (eff > best_eff + 1e-9) {
            best_eff = eff;
            best = s;
        }
    }
    return best;
}

static ltk_status run_scan(const idx_plan *pl, ltk_scan_params *sp, cudaStream_t st) {
    int64_t nqb = ltk_scan_qblocks(sp->nrows, pl->bq, sp->group);
    /* the portable scan keeps no histogram between splits: it stays at the old fill target */
    const double target = pl->sm90 ? NSPLIT_FILL : 0.96;
    /* Decode: a batch of few requests over long contexts splits each over many CTAs (B = 1 at 1M:
     * 132 splits of 31 tiles), the prefill's 16 at most would leave most SMs idle. (The portable
     * scan is a CTA per row, with no splits.) */
    const int smax = pl->pg && pl->sm90 ? 256 : 16;
    sp->nsplit = choose_nsplit(nqb, pl->dev.nsm, ceil_div(sp->col_hi - sp->col_lo, 256), target, smax);
    if (sp->nsplit == 1 || !pl->sm90) sp->row_hist = NULL;
    /* a carried histogram starts empty; cleared only when a row has several splits to carry it */
    if (sp->row_hist) LTK_CUDA_TRY(cudaMemsetAsync(sp->row_hist, 0, 4 * (size_t)sp->nrows * LTK_NB, st));
    return pl->sm90 ? ltk_sm90_scan(sp, pl->dev.nsm, st) : ltk_portable_scan(sp, pl->dev.nsm, st);
}

static void scan_base(const ltk_indexer_args *a, const idx_plan *pl, ltk_scan_params *sp) {
    memset(sp, 0, sizeof *sp);
    sp->T = a->T;
    sp->S = a->S;
    sp->H = a->H;
    sp->D = a->D;
    sp->k = a->k;
    sp->dtype = a->dtype;
    sp->q = a->q;
    sp->q_stride = a->q_stride_t;
    sp->kv = a->kv;
    sp->kv_stride = a->kv_stride_s;
    sp->kv_scale = a->kv_scale;
    sp->weights = a->weights;
    sp->w_stride = a->w_stride_t;
    sp->ks = a->ks;
    sp->ke = a->ke;
    sp->skip_short = pl->skip_short;
    sp->col_lo = 0;
    sp->col_hi = a->S;
    sp->watchdog_ns = watchdog_ns();
    /* (cudaHostAlloc is not allowed while a stream is captured: a first call made under capture
     * runs without the record, and the watchdog still traps) */
    sp->diag = pl->sm90 && sp->watchdog_ns > 0 && !pl->capturing ? diag_ptr() : NULL;
    if (pl->pg) { /* paged keys: rows in request groups; the scales follow each block's keys (or,
                   * listed blocks of a key array, are the array's) */
        sp->pg = *pl->pg;
        sp->group = pl->pg->next_n;
        sp->kv = NULL;
        sp->kv_scale = pl->pg->contig == 1 ? pl->pg->scale
                       : (const float *)(pl->pg->cache + (size_t)(pl->pg->contig == 2 ? pl->pg->page_kv : pl->pg->bkv) * a->D);
    }
}

/* The block maxima of the scan's rows, local row 0 = absolute row row0 (ltk_cuda_indexer_blockmax),
 * on the scans that visit every key of their rows once: the fused scan, the dense windows of rows
 * in order, score only (not the sample's scan, nor the fallback's, whose rows the fused scan has
 * covered). Short rows are scanned too (their block maxima are the publication's even where the
 * row's own top-k skips them: the selects still do). */
static void scan_bm(const idx_plan *pl, ltk_scan_params *sp, int64_t row0) {
    if (pl->bm_bsz <= 0) return;
    sp->bsz = pl->bm_bsz;
    sp->bsz_direct = pl->bm_direct;
    sp->bm = pl->bm + row0 * pl->bm_ld;
    sp->bm_ld = pl->bm_ld;
    sp->skip_short = 0;
}

/* Exact dense top-k of rows [row0, row0 + nrows) or of the rows of a device list, window by
 * window: the scan kernel materializes scores into `logits`, then the dense select. */
static ltk_status dense_rows(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, int64_t row0, int64_t nrows,
                             const int32_t *list, const int32_t *list_count, int64_t list_off, cudaStream_t st,
                             ltk_trace *tr) {
    float *logits = (float *)(ws + pl->o_big);
    ltk_cand *run = pl->nwin > 1 ? (ltk_cand *)(ws + pl->o_run) : NULL;
    int32_t *run_cnt = pl->nwin > 1 ? (int32_t *)(ws + pl->o_runcnt) : NULL;
    for (int64_t w = 0; w < pl->nwin; w++) {
        ltk_scan_params sp;
        scan_base(a, pl, &sp);
        sp.mode = LTK_SCAN_MATERIALIZE;
        sp.nrows = nrows;
        sp.row0 = row0;
        sp.row_list = list;
        sp.row_count = list_count;
        sp.list_off = list_off;
        sp.col_lo = w * pl->dense_W;
        sp.col_hi = sp.col_lo + pl->dense_W < a->S ? sp.col_lo + pl->dense_W : a->S;
        sp.logits = logits;
        sp.ld = pl->dense_W;
        if (!list) scan_bm(pl, &sp, row0);
        LTK_FORWARD_IF(run_scan(pl, &sp, st));
        LTK_FORWARD_IF(ltk_trace_step(tr, st, "dense scan rows %lld+%lld%s win %lld/%lld", (long long)(list ? list_off : row0),
                                  (long long)nrows, list ? " (fallback list)" : "", (long long)w, (long long)pl->nwin));
        if (pl->ext_select && !list) {
            ltk_select_args sa;
            memset(&sa, 0, sizeof sa);
            sa.rows = nrows;
            sa.cols = a->S; /* not dense_W: the columns past S hold no scores */
            sa.k = a->k;
            sa.dtype = LTK_DTYPE_F32;
            sa.scores = logits;
            sa.row_stride = pl->dense_W;
            if (a->ks && pl->pg) { /* the decode operation's ranges are clamped already (decode.cu) */
                sa.starts = a->ks + row0;
                sa.ends = a->ke + row0;
            } else if (a->ks) { /* clamped copies: device ranges are not validated by the front end */
                int32_t *se_r = (int32_t *)(ws + pl->o_se + ltk_al256(pl->ext_ws));
                LTK_FORWARD_IF(ltk_idx_clamp_ranges(a->ks, a->ke, row0, nrows, a->S, se_r, se_r + nrows, st));
                sa.starts = se_r;
                sa.ends = se_r + nrows;
            }
            sa.out_idx = a->out_idx + row0 * a->out_stride;
            sa.out_scores = a->out_scores ? a->out_scores + row0 * a->out_stride : NULL;
            sa.out_stride = a->out_stride;
            sa.flags = a->flags;
            ltk_exec se;
            memset(&se, 0, sizeof se);
            se.backend = LTK_BACKEND_CUDA;
            se.algo = LTK_ALGO_FUSED;
            se.stream = (void *)st;
            se.workspace = ws + pl->o_se;
            se.workspace_bytes = pl->ext_ws;
            LTK_FORWARD_IF(ltk_cuda_select(&sa, &se, ws + pl->o_se, pl->ext_ws));
        } else {
            LTK_FORWARD_IF(ltk_idx_select_dense(a, row0, nrows, list, list_count, list_off, logits, pl->dense_W,
                                                sp.col_lo, sp.col_hi, run, run_cnt, w == 0, w == pl->nwin - 1,
                                                pl->skip_short, st));
        }
        LTK_FORWARD_IF(ltk_trace_step(tr, st, "dense select%s", pl->ext_select && !list ? " (select.cu)" : ""));
    }
    return LTK_OK;
}

/* ---- stats ------------------------------------------------------------------------------------ */
static ltk_status fill_stats(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, cudaStream_t st,
                             ltk_stats *s) {
    int32_t *row_c = s->row_candidates, *row_b = s->row_bin_entries;
    memset(s, 0, offsetof(ltk_stats, row_candidates));
    s->rows = a->T;
    LTK_CUDA_TRY(cudaStreamSynchronize(st));
    const int64_t T = a->T;
    if (T <= 0) return LTK_OK;
    int32_t *h = (int32_t *)malloc(sizeof(int32_t) * (size_t)T * 5);
    if (!h) return ltk_error(LTK_ENOMEM, "stats staging allocation failed");
    int32_t *hc = h, *hb = h + T, *hf = h + 2 * T, *hks = h + 3 * T, *hke = h + 4 * T;
    ltk_status r = LTK_OK;
    cudaError_t e = cudaSuccess;
    if (pl->algo == LTK_ALGO_FUSED) {
        if (e == cudaSuccess) e = cudaMemcpy(hc, ws + pl->o_stc, 4 * (size_t)T, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess) e = cudaMemcpy(hb, ws + pl->o_stb, 4 * (size_t)T, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess) e = cudaMemcpy(hf, ws + pl->o_stf, 4 * (size_t)T, cudaMemcpyDeviceToHost);
    } else {
        memset(hc, 0, 12 * (size_t)T);
    }
    /* a fused call run as dense windows: every visible key of a row went to its select */
    const int all_keys = pl->dense_for_fused;
    if (e == cudaSuccess && a->ks) e = cudaMemcpy(hks, a->ks, 4 * (size_t)T, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && a->ke) e = cudaMemcpy(hke, a->ke, 4 * (size_t)T, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) r = ltk_cuda_error(e, "copying indexer statistics", __FILE__, __LINE__);
    if (r == LTK_OK) {
        for (int64_t t = 0; t < T; t++) {
            int64_t lo = a->ks ? hks[t] : 0, hi = a->ke ? hke[t] : a->S;
            lo = lo < 0 ? 0 : (lo > a->S ? a->S : lo);
            hi = hi < lo ? lo : (hi > a->S ? a->S : hi);
            int scanned = !(pl->skip_short && hi - lo <= a->k);
            if (!scanned) s->short_rows++;
            if (all_keys && scanned) hc[t] = (int32_t)(hi - lo);
            s->candidates += hc[t];
            if (hc[t] > s->candidates_max) s->candidates_max = hc[t];
            s->bin_entries += hb[t];
            if (hb[t] > s->bin_entries_max) s->bin_entries_max = hb[t];
            s->fallback_rows += hf[t] != 0;
            if (row_c) row_c[t] = hc[t];
            if (row_b) row_b[t] = hb[t];
        }
    }
    free(h);
    return r;
}

/* ---- the indexer ------------------------------------------------------------------------------ */
extern "C" ltk_status ltk_cuda_indexer_paged_workspace(const ltk_indexer_args *a, const ltk_paged_src *pg,
                                                       const ltk_exec *e, size_t *bytes) {
    idx_plan pl;
    LTK_FORWARD_IF(make_plan(a, pg, e, &pl));
    *bytes = pl.total;
    return LTK_OK;
}
extern "C" ltk_status ltk_cuda_indexer_workspace(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes) {
    return ltk_cuda_indexer_paged_workspace(a, NULL, e, bytes);
}

/* The fused call's sample, shared by every row of the call (each row uses the keys inside its own
 * range): the union of the rows' ranges, the key list, and the keys' rows gathered densely. */
static ltk_status fused_sample(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, cudaStream_t st,
                               ltk_trace *tr) {
    int32_t *P = (int32_t *)(ws + pl->o_P);
    int64_t *lohi = (int64_t *)(ws + pl->o_lohi);
    LTK_FORWARD_IF(ltk_idx_union(a->ks, a->ke, a->T, a->S, a->k, pl->skip_short, lohi, st));
    LTK_FORWARD_IF(ltk_idx_sample_list(a->state ? a->state->keys : NULL, a->state ? a->state->capacity : 0, pl->m_hot,
                                       pl->m_cold, pl->win, lohi, P, pl->m_max, st));
    LTK_FORWARD_IF(ltk_idx_gather(a, P, pl->m_max, ws + pl->o_kvg, (float *)(ws + pl->o_scg), st));
    return ltk_trace_step(tr, st, "sample union+list+gather (m=%lld)", (long long)pl->m_max);
}

/* Rows [r0, r0 + nr): the sample scan, the prep (per-row bins and first threshold), then the fused
 * scan that writes every row's candidates. */
static ltk_status fused_scan(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, int64_t r0, int64_t nr,
                             cudaStream_t st, ltk_trace *tr) {
    ltk_cand *cand = (ltk_cand *)(ws + pl->o_big);
    const int64_t m_pad = pl->m_max;
    /* sample scores into the rows' candidate slots (as floats, 2*cap per row) */
    ltk_scan_params sp;
    scan_base(a, pl, &sp);
    sp.mode = LTK_SCAN_MATERIALIZE;
    sp.row0 = r0;
    sp.nrows = nr;
    sp.S = m_pad;
    sp.kv = ws + pl->o_kvg;
    sp.kv_stride = a->D;
    sp.kv_scale = a->kv_scale ? (const float *)(ws + pl->o_scg) : NULL;
    sp.ks = sp.ke = NULL;
    sp.skip_short = 0;
    sp.col_lo = 0;
    sp.col_hi = m_pad;
    sp.logits = (float *)cand;
    sp.ld = 2 * pl->cap;
    LTK_FORWARD_IF(run_scan(pl, &sp, st));
    LTK_FORWARD_IF(ltk_trace_step(tr, st, "sample scan rows %lld+%lld (%s, nsplit %d)", (long long)r0, (long long)nr,
                              pl->sm90 ? "sm90" : "portable", sp.nsplit));
    int32_t *cnt = (int32_t *)(ws + pl->o_cnt), *th = (int32_t *)(ws + pl->o_th);
    float *smin = (float *)(ws + pl->o_smin), *delta = (float *)(ws + pl->o_delta);
    LTK_FORWARD_IF(ltk_idx_prep(a, r0, nr, (const float *)cand, 2 * pl->cap, (const int32_t *)(ws + pl->o_P), pl->m_max,
                                (const int64_t *)(ws + pl->o_lohi), pl->skip_short, smin, delta, th, cnt, st));
    LTK_FORWARD_IF(ltk_trace_step(tr, st, "prep"));
    scan_base(a, pl, &sp);
    sp.mode = LTK_SCAN_FUSED;
    sp.row0 = r0;
    sp.nrows = nr;
    sp.cand = cand;
    sp.cap = pl->cap;
    sp.cand_cnt = cnt;
    sp.th = th;
    sp.smin = smin;
    sp.delta = delta;
    sp.row_hist = pl->sm90 ? (int32_t *)(ws + pl->o_rh) : NULL; /* (run_scan clears it) */
    sp.nopass = ltk_tune_get()->cuda_scan_nopass; /* (a test hook: every row then takes the fallback) */
    scan_bm(pl, &sp, r0);
    LTK_FORWARD_IF(run_scan(pl, &sp, st));
    return ltk_trace_step(tr, st, "fused scan rows %lld+%lld (nsplit %d, cap %lld)", (long long)r0, (long long)nr,
                      sp.nsplit, (long long)pl->cap);
}

/* The exact fallback of a sub-chunk of nr rows: the rows the candidate select listed, as dense
 * windows in batches that fit the candidate region. The count is on the device: read it (one host
 * round trip, ~20 us of idle GPU) unless the stream is being captured, then launch the worst case
 * (kernels of an empty batch exit at once). Why not always the worst case: at T=8192, S=1M that was
 * 22 batches of a 132-CTA scan and a select per half call, ~0.2 ms of empty launches (as a traced
 * call, LTK_CUDA_TRACE=1, showed). */
static ltk_status fused_fallback(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, int64_t nr,
                                 int want_stats, cudaStream_t st, ltk_trace *tr) {
    int32_t *fb = (int32_t *)(ws + pl->o_fb), *fbcnt = (int32_t *)(ws + pl->o_fbcnt);
    int64_t nb = ceil_div(nr, pl->dense_rows);
    if (nb * pl->nwin > 2 && !ltk_stream_capturing(st)) {
        int32_t h = 0;
        LTK_CUDA_TRY(cudaMemcpyAsync(&h, fbcnt, 4, cudaMemcpyDeviceToHost, st));
        LTK_CUDA_TRY(cudaStreamSynchronize(st));
        nb = ceil_div(h, pl->dense_rows);
    }
    for (int64_t b = 0; b < nb; b++)
        LTK_FORWARD_IF(dense_rows(a, pl, ws, 0, pl->dense_rows, fb, fbcnt, b * pl->dense_rows, st, tr));
    if (want_stats) LTK_FORWARD_IF(ltk_idx_mark_fallback(fb, fbcnt, 0, (int32_t *)(ws + pl->o_stf), nr, st));
    return LTK_OK;
}

/* The fused call, sub-chunk by sub-chunk of tsub rows: scans, the exact select of each row's
 * candidates, the fallback of the rows it could not answer. */
static ltk_status fused(const ltk_indexer_args *a, const idx_plan *pl, uint8_t *ws, int want_stats, cudaStream_t st,
                        ltk_trace *tr) {
    const int64_t T = a->T;
    int32_t *cnt = (int32_t *)(ws + pl->o_cnt);
    float *smin = (float *)(ws + pl->o_smin), *delta = (float *)(ws + pl->o_delta);
    int32_t *fb = (int32_t *)(ws + pl->o_fb), *fbcnt = (int32_t *)(ws + pl->o_fbcnt);
    int32_t *stc = (int32_t *)(ws + pl->o_stc), *stb = (int32_t *)(ws + pl->o_stb);
    const ltk_cand *cand = (const ltk_cand *)(ws + pl->o_big);
    if (a->S > 0) LTK_FORWARD_IF(fused_sample(a, pl, ws, st, tr));
    for (int64_t r0 = 0; r0 < T; r0 += pl->tsub) {
        const int64_t nr = T - r0 < pl->tsub ? T - r0 : pl->tsub;
        if (a->S > 0) LTK_FORWARD_IF(fused_scan(a, pl, ws, r0, nr, st, tr));
        else LTK_CUDA_TRY(cudaMemsetAsync(cnt, 0, 4 * (size_t)nr, st));
        LTK_CUDA_TRY(cudaMemsetAsync(fbcnt, 0, 4, st));
        LTK_FORWARD_IF(ltk_idx_select_cands(a, r0, nr, cand, pl->cap, cnt, smin, delta, pl->skip_short, fb, fbcnt,
                                            want_stats ? stc : NULL, want_stats ? stb : NULL, st));
        if (tr->on) {
            int32_t h = 0;
            LTK_CUDA_TRY(cudaMemcpyAsync(&h, fbcnt, 4, cudaMemcpyDeviceToHost, st));
            LTK_FORWARD_IF(ltk_trace_step(tr, st, "select candidates (%d fallback rows)", (int)h));
        }
        if (a->S > 0) LTK_FORWARD_IF(fused_fallback(a, pl, ws, nr, want_stats, st, tr));
    }
    return LTK_OK;
}

/* Score only: the scan with the gate edge at +inf (nothing written), for benchmarks. */
static ltk_status score_only(const ltk_indexer_args *a, const ltk_exec *e, const idx_plan *pl, uint8_t *ws,
                             cudaStream_t st, ltk_trace *tr) {
    if (a->S > 0) {
        ltk_scan_params sp;
        scan_base(a, pl, &sp);
        sp.mode = LTK_SCAN_SCORE_ONLY;
        sp.row0 = 0;
        sp.nrows = a->T;
        sp.cand_cnt = (int32_t *)(ws + pl->o_cnt);
        sp.th = (int32_t *)(ws + pl->o_th);
        sp.cap = 0;
        scan_bm(pl, &sp, 0);
        LTK_FORWARD_IF(run_scan(pl, &sp, st));
        LTK_FORWARD_IF(ltk_trace_step(tr, st, "score-only scan (nsplit %d)", sp.nsplit));
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->T;
        LTK_CUDA_TRY(cudaStreamSynchronize(st));
    }
    return LTK_OK;
}

/* The candidate indexer's publication (candidates.cu): rows [row0, row0 + nrows)'s block maxima of
 * bsz keys, block j of local row r at out[r * ld + j] (absolute block ids, every block meeting the
 * row's range written). *direct = 1: floats by plain stores; 0: rank keys by atomicMax, into the
 * rows zeroed here (the caller converts them). No workspace: the scan alone. */
extern "C" ltk_status ltk_cuda_blockmax_scan(const ltk_indexer_args *a, const ltk_paged_src *pg, int32_t bsz,
                                             int64_t row0, int64_t nrows, float *out, int64_t ld, int *direct,
                                             cudaStream_t st) {
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.stream = (void *)st;
    e.algo = LTK_ALGO_SCORE_ONLY;
    idx_plan pl;
    LTK_FORWARD_IF(plan_common(a, pg, &e, &pl));
    pl.skip_short = 0;
    ltk_scan_params sp;
    scan_base(a, &pl, &sp);
    sp.mode = LTK_SCAN_BLOCKMAX;
    sp.row0 = row0;
    sp.nrows = nrows;
    sp.bm = out;
    sp.bm_ld = ld;
    sp.bsz = bsz;
    sp.bsz_direct = pl.sm90 && ltk_sm90_blockmax_direct(bsz);
    *direct = sp.bsz_direct;
    if (!sp.bsz_direct) LTK_CUDA_TRY(cudaMemsetAsync(out, 0, 4 * (size_t)nrows * (size_t)ld, st));
    return run_scan(&pl, &sp, st);
}

extern "C" ltk_status ltk_cuda_indexer(const ltk_indexer_args *a, const ltk_exec *e, void *wsv, size_t ws_bytes) {
    return ltk_cuda_indexer_paged(a, NULL, e, wsv, ws_bytes);
}

static ltk_status indexer_run(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, void *wsv,
                              size_t ws_bytes, int32_t bsz, float *bm, int64_t bm_ld, int *direct);

extern "C" ltk_status ltk_cuda_indexer_paged(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e,
                                             void *wsv, size_t ws_bytes) {
    return indexer_run(a, pg, e, wsv, ws_bytes, 0, NULL, 0, NULL);
}

/* Why the block maxima in the indexer's own scans: DeepSeek-V4.1's source layer wants both its
 * top-k and the publication, and a second scan for the top-k doubled the call (the scan is the
 * whole cost of either). */
extern "C" ltk_status ltk_cuda_indexer_blockmax(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e,
                                                void *wsv, size_t ws_bytes, int32_t bsz, float *bm, int64_t bm_ld,
                                                int *direct) {
    return indexer_run(a, pg, e, wsv, ws_bytes, bsz, bm, bm_ld, direct);
}

static ltk_status indexer_run(const ltk_indexer_args *a, const ltk_paged_src *pg, const ltk_exec *e, void *wsv,
                              size_t ws_bytes, int32_t bsz, float *bm, int64_t bm_ld, int *direct) {
    idx_plan pl;
    LTK_FORWARD_IF(make_plan(a, pg, e, &pl));
    if (ws_bytes < pl.total)
        return ltk_error(LTK_EWORKSPACE, "workspace of %zu bytes is smaller than the %zu bytes required", ws_bytes,
                         pl.total);
    cudaStream_t st = (cudaStream_t)e->stream;
    if (bsz > 0) {
        pl.bm_bsz = bsz;
        pl.bm_direct = pl.sm90 && ltk_sm90_blockmax_direct(bsz);
        pl.bm = bm;
        pl.bm_ld = bm_ld;
        *direct = pl.bm_direct;
        if (!pl.bm_direct && a->T > 0) LTK_CUDA_TRY(cudaMemsetAsync(bm, 0, 4 * (size_t)a->T * (size_t)bm_ld, st));
    }
    uint8_t *ws = (uint8_t *)(uintptr_t)ltk_al256((uintptr_t)wsv);
    ltk_trace tr;
    ltk_trace_begin(&tr, st);
    if (tr.on)
        fprintf(stderr, "[ltk cuda] indexer T=%lld S=%lld H=%d k=%d algo %d: %s scan, tsub %lld, cap %lld, dense %lld rows x %lld (%lld win)\n",
                (long long)a->T, (long long)a->S, a->H, a->k, (int)pl.algo, pl.sm90 ? "sm90" : "portable",
                (long long)pl.tsub, (long long)pl.cap, (long long)pl.dense_rows, (long long)pl.dense_W, (long long)pl.nwin);
    if (a->T == 0) {
        if (e->stats) LTK_FORWARD_IF(fill_stats(a, &pl, ws, st, e->stats));
        return LTK_OK;
    }
    if (pl.algo == LTK_ALGO_SCORE_ONLY) return score_only(a, e, &pl, ws, st, &tr);
    if (e->stats) {
        LTK_CUDA_TRY(cudaMemsetAsync(ws + pl.o_stc, 0, 4 * (size_t)a->T, st));
        LTK_CUDA_TRY(cudaMemsetAsync(ws + pl.o_stb, 0, 4 * (size_t)a->T, st));
        LTK_CUDA_TRY(cudaMemsetAsync(ws + pl.o_stf, 0, 4 * (size_t)a->T, st));
    }
    if (pl.algo == LTK_ALGO_MATERIALIZE) {
        if (a->S > 0) {
            for (int64_t r0 = 0; r0 < a->T; r0 += pl.dense_rows) {
                int64_t nr = a->T - r0 < pl.dense_rows ? a->T - r0 : pl.dense_rows;
                LTK_FORWARD_IF(dense_rows(a, &pl, ws, r0, nr, NULL, NULL, 0, st, &tr));
            }
        } else {
            /* no keys: every row is padding */
            LTK_FORWARD_IF(ltk_idx_select_dense(a, 0, a->T, NULL, NULL, 0, NULL, 0, 0, 0, NULL, NULL, 1, 1, 0, st));
        }
    } else {
        LTK_FORWARD_IF(fused(a, &pl, ws, e->stats != NULL, st, &tr));
    }
    /* (select.cu's short-row path already wrote them when it selected every row) */
    if (pl.skip_short && !(pl.algo == LTK_ALGO_MATERIALIZE && pl.ext_select && a->S > 0))
        LTK_FORWARD_IF(ltk_idx_short_rows(a, st));
    if (a->state) {
        LTK_FORWARD_IF(ltk_idx_vote(a, a->state, ws + pl.o_big, pl.big_bytes, st));
        LTK_FORWARD_IF(ltk_trace_step(&tr, st, "hot-set vote"));
    }
    if (e->stats) LTK_FORWARD_IF(fill_stats(a, &pl, ws, st, e->stats));
    return LTK_OK;
}
