/* Internals of the fused CPU backend (src/cpu/): workspace carving, the exact select engine and
 * the SIMD kernel table; the per-row gate state is row.h's.
 *
 * Canonical scores (what fused and materialize both rank, bit for bit):
 *   kNN:     dot(q, x) in fp32 "dot form": 16 lanes, lane l accumulates q[d]*x[d] for d = l mod 16
 *            with one FMA per chunk in increasing d (zero padded tail), then the fixed tree
 *            (l, l+8), (l, l+4), (l, l+2), (l, l+1), lower lane as first operand. Every kernel
 *            (AVX-512, AVX2, scalar) computes exactly this, so the kNN score is machine independent.
 *            IP: dot; L2: dist = fmaf(-2, dot, qn + xn), ranked by -dist; COS: dot / (sqrt(qn)*sqrt(xn)),
 *            0 when a squared norm is 0 (NaN stays NaN); qn, xn are the canonical dots of a vector with itself.
 *   indexer: per (row, key): a_h = q_h . k in "outer form" (one accumulator per key, d increasing):
 *            vdpbf16ps on bf16 pairs (AVX-512 BF16 and dtype E4M3/BF16: exact products), else fp32
 *            FMA; then S = fma(w_h, max(0, a_h), S) for h = 0..H-1 from +0, times kv_scale.
 *   A NaN score is canonicalised to 0x7fc00000 so that NaN payload propagation (which depends
 *   on operand order chosen by the compiler) can never make two paths differ.
 */
#ifndef LTK_CPU_IMPL_H
#define LTK_CPU_IMPL_H

#include "../ltk-impl.h"

#include <stddef.h>
#include <stdint.h>

#define LTKC_NB 2048 /* histogram bins per row */
#define LTKC_CANON_NAN 0x7fc00000u

/* ---- workspace carving: the same code sizes (base == NULL) and places ------------------------- */
typedef struct {
    char *base;
    size_t off;
} ltkc_ws;

static inline void *ltkc_take(ltkc_ws *w, size_t bytes) {
    size_t o = (w->off + 63) & ~(size_t)63;
    w->off = o + bytes;
    return w->base ? (void *)(w->base + o) : NULL;
}

int ltkc_threads(const ltk_exec *e);

static inline float ltkc_canon(float x) { return x != x ? ltk_bits_f32(LTKC_CANON_NAN) : x; }

/* ---- exact select engine (select.c) ------------------------------------------------------------ */
/* k-th largest key of keys[0..n) (1 <= k <= n); *take_eq = how many entries equal to it belong to
 * the top k (the first ones by position). hist: 2048 scratch words. */
uint32_t ltkc_kth_key(const uint32_t *keys, int64_t n, int64_t k, int64_t *take_eq, uint32_t *hist);
/* Positions (ascending) of entries with key > K plus the first take_eq with key == K. */
int64_t ltkc_filter_top(const uint32_t *keys, int64_t n, uint32_t K, int64_t take_eq, int32_t *out_pos);
/* Sorts composite keys ((~rank_key) << 32 | pos) ascending = score desc, position asc. */
void ltkc_sort_u64(uint64_t *a, uint64_t *tmp, int64_t n);
static inline uint64_t ltkc_composite(uint32_t key, int64_t pos) {
    return ((uint64_t)(~key) << 32) | (uint32_t)pos;
}

/* Select over one typed row (the select API and the materialize paths). */
typedef struct {
    uint32_t *hist;  /* 2048 */
    uint32_t *bkey;  /* cap */
    int32_t *bpos;   /* cap */
    int64_t cap;
} ltkc_selws;
/* Writes m = min(n, k) entries (unsorted) of the top k of row[0..n) to out_key/out_pos. */
int64_t ltkc_select_row(const void *row, ltk_dtype dt, int64_t n, int64_t k, const ltkc_selws *w,
                        uint32_t *out_key, int32_t *out_pos);
int64_t ltkc_select_cap(int64_t n, int64_t k);

/* ---- kernels (kern-*.c), chosen once at run time ------------------------------------------------ */
/* Indexer tile geometry: IDX_NK keys per tile, as IDX_NK/16 panels of 16 keys. */
#define LTKC_IDX_NK 64

typedef struct {
    int H, D;
    int bf16;          /* 1: q/kv as bf16 pairs + vdpbf16ps; 0: fp32 */
    int dp;            /* elements per head row in the q block (D2 pairs or D floats) */
} ltkc_idx_geom;

/* Cache lines a kernel prefetches (into L2) while it runs, spread over its inner loop: n vectors
 * of lpv 64-byte lines, stride bytes apart (the next kNN tile). */
typedef struct ltkc_pf {
    const char *base;
    int64_t stride;
    int n, lpv;
} ltkc_pf;

typedef struct ltkc_kern {
    const char *name;
    int has_bf16; /* vdpbf16ps indexer path and kNN screening */

    /* kNN canonical dots. out[i*ldo + j] = dot(Q_i, X_j), i < nq, j < nx. */
    void (*dots_block)(const float *Q, int64_t ldq, int nq, const float *X, int64_t ldx, int nx, int D, float *out,
                       int64_t ldo);
    /* n independent pairs: out[p] = dot(qp[p], xp[p]). */
    void (*dots_pairs)(const float *const *qp, const float *const *xp, int n, int D, float *out);
    /* bit j of mask[j/64] set iff s[j] >= edge, j < n. */
    void (*gate_mask)(const float *s, int n, float edge, uint64_t *mask);
    /* rank keys of n floats */
    void (*keys_f32)(const float *s, int64_t n, uint32_t *keys);

    /* kNN bf16 screening (NULL unless has_bf16). Panels of 16 vectors, pairs of d. */
    /* also xn[j] = canonical squared norm of vector j (dots_pairs of x with itself), j < nx */
    void (*knn_pack_tile)(const float *X, int64_t ldx, int nx, int D, uint32_t *packed, float *xn);
    void (*knn_pack_query)(const float *q, int D, uint32_t *pairs);
    /* For queries i < nq and vectors j < nx (nx multiple of 16 in the packed tile, lanes >= nx
     * ignored): approx dot -> rigorous upper bound U of the canonical rank score (see knn.c), pass
     * bit iff !(U < edge[i]). qa: per-query params [4*nq], xa: per-vector params [2*nxp]. */
    void (*knn_screen)(const uint32_t *qpairs, int nq, const uint32_t *packed, int nx, int D, int metric,
                       const float *qa, const float *xa, const float *edge, uint64_t *mask, int mask_words,
                       const struct ltkc_pf *pf);

    /* kNN int8 screening (NULL unless the table has AVX-512 kernels; usable iff ltkc_cpu_vnni()).
     * Words of 4 bytes per lane: unsigned x8 + 128 for the tile, signed q8 for the query; knn.c has
     * the quantisation and the bound. pack_tile also writes the canonical squared norms xn, the
     * scales xs (0: off) and the residual sums of squares xr2 (+inf: off); pack_query writes its
     * scale and residual sum of squares to out[2] and 128 * sum(q8) to corr. screen: as
     * knn_screen with LTKC_QA8 floats per query and xa SoA [6][xs]. D <= 1024. */
    void (*knn8_pack_tile)(const float *X, int64_t ldx, int nx, int D, uint32_t *packed, float *xn, float *xs,
                           float *xr2);
    void (*knn8_pack_query)(const float *q, int D, uint32_t *q4, float *out, int32_t *corr);
    void (*knn8_screen)(const uint32_t *q4, int nq, const uint32_t *packed, int nx, int D, int metric, const float *qa,
                        const float *xa, const float *edge, uint64_t *mask, int mask_words, const struct ltkc_pf *pf);

    /* Indexer int8 screen (NULL unless AVX-512; usable iff ltkc_cpu_idx8()). pack_keys: e4m3 keys
     * s0..s0+n-1 (n <= 64) packed as knn8_pack_tile lays them out (from their bytes, with upper bounds
     * of the squared norms and residual sums), pack_query as knn8_pack_query, both with power-of-two
     * scales. screen: one
     * row's H heads (q4 [H][D4], corr[H] from idx8_pack_query, wq[h] = w_h times its scale) against
     * that tile; kb = per-key [c1 | kv|k| | kv R_k] (64 each), rc = the row's A+, B+, A, W; bit j of the
     * result iff the upper bound of key j's canonical score is not below edge (indexer.c). */
    void (*idx8_pack_keys)(const uint8_t *kv, int64_t stride, int64_t s0, int n, int D,
                           uint32_t *packed, float *xn, float *xs, float *xr2);
    void (*idx8_pack_query)(const float *q, int D, uint32_t *q4, float *out, int32_t *corr);
    /* pf, pf_lines: 64-byte lines to prefetch into L2 while screening (the next tile; NULL, 0: none) */
    uint64_t (*idx8_screen)(const uint32_t *q4, const int32_t *corr, const float *wq, int H, int D,
                            const uint32_t *packed, const float *kb, const float *rc, float edge,
                            const uint8_t *pf, int pf_lines);

    /* Indexer. q block for one row: [H][dp] (pairs or floats); tile: layout private to the kernel. */
    void (*idx_pack_q)(const void *q, ltk_dtype dt, const ltkc_idx_geom *g, void *dst);
    /* Decodes keys kv rows s_list[0..n) (n <= IDX_NK) into a tile; missing lanes are zero. */
    void (*idx_pack_tile)(const void *kv, ltk_dtype dt, int64_t stride, const int64_t *s_list, int64_t s0, int n,
                          const ltkc_idx_geom *g, void *tile);
    /* Scores of one row against a tile: out[j] = canonical I for tile key j (j < IDX_NK);
     * scale: kv_scale of the tile keys (NULL = 1). */
    void (*idx_score)(const void *qrow, const float *w, const void *tile, const float *scale, const ltkc_idx_geom *g,
                      float *out);
} ltkc_kern;

const ltkc_kern *ltkc_kernels(void);
/* The indexer's int8 screen setup (indexer.c; also called by tests/test-cpu-screen.c): one row's
 * screened heads and bound constants rcon[4], and one tile of keys with their bound terms kb[3*64]. */
int ltkc_idx8_row(const ltkc_kern *K, const uint8_t *q, const float *w, int H, int D, float *qf, uint32_t *q4,
                  int32_t *corr, float *wq, float *rcon, int32_t *hs_out);
void ltkc_idx8_keys(const ltkc_kern *K, const uint8_t *kv, int64_t stride, const float *kv_scale, int64_t s0, int n,
                    int D, uint32_t *tile8, float *kxn, float *kxs, float *kxr2, float *kb);
int ltkc_cpu_vnni(void); /* AVX-512 VNNI present (the knn8 entries may run) */
int ltkc_cpu_idx8(void); /* AVX-512 VNNI and VBMI present (the idx8 entries may run) */
/* The kNN screens' parameters (knn.c; also called by tests/test-cpu-screen.c): one query's int8
 * form and LTKC_QA8 floats, and a tile's per-vector SoA [4 or 6][n rounded up to 16]. */
void ltkc_knn8_query(const ltkc_kern *K, const float *q, int D, float qn, uint32_t *q4, float *qa);
void ltkc_knn_tile_params(int D, int n, const float *xn, const float *s8, const float *xr2, float *soa);
#define LTKC_QA8 8       /* floats per query of the int8 screen: s_q, a1, a2, qa3, qn, sqrt(qn), corr bits, 0 */
extern const ltkc_kern ltkc_kern_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const ltkc_kern ltkc_kern_avx512;
extern const ltkc_kern ltkc_kern_avx512bf16;
extern const ltkc_kern ltkc_kern_avx2;
#define LTKC_X86 1
#endif

size_t ltkc_idx_tile_bytes(const ltkc_idx_geom *g);

/* ---- operations ---------------------------------------------------------------------------------- */
ltk_status ltkc_select_ws(const ltk_select_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t wsb);
ltk_status ltkc_merge_ws(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t wsb);
ltk_status ltkc_knn_ws(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t wsb);
ltk_status ltkc_indexer_ws(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_indexer(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t wsb);
/* The indexer over keys read in place (the decode operation's pages): keys [64 i, 64 i + 64) at
 * keys[i] (D bytes a key, e4m3 only) and their scales at scales[i]; a->kv and a->kv_scale unused.
 * The workspace is ltkc_indexer_ws's. */
typedef struct ltkc_kv_tiles {
    const uint8_t *const *keys;
    const float *const *scales;
} ltkc_kv_tiles;
ltk_status ltkc_indexer_tiles(const ltk_indexer_args *a, const ltkc_kv_tiles *tl, const ltk_exec *e, void *ws,
                              size_t wsb);
ltk_status ltkc_decode_ws(const ltk_decode_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_decode(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t wsb);
ltk_status ltkc_blocks_ws(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_blocks(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t wsb);
ltk_status ltkc_candidates_ws(const ltk_candidates_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltkc_candidates(const ltk_candidates_args *a, const ltk_exec *e, void *ws, size_t wsb);

/* Rank of the predicted start in an unbiased sample of n of N keys (row.c; see docs/design.md). */
int64_t ltkc_pred_rank(int64_t n, int64_t k, int64_t N);
/* The same with the tail probability eps instead of 1e-6. */
int64_t ltkc_pred_rank_tail(int64_t n, int64_t k, int64_t N, double eps);

#endif
