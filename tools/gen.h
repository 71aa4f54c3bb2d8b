/* Seeded synthetic inputs for the demo, the benchmarks and the tests: a DSA indexer workload, kNN
 * embeddings and score matrices. Same seed, same bytes (on one machine and libm). */
#ifndef LTK_TOOLS_GEN_H
#define LTK_TOOLS_GEN_H

#include <stdint.h>

#include "err.h"
#include "litetopk.h"

/* ---- random numbers: xoshiro256** seeded by splitmix64 ------------------------------------ */
typedef struct gen_rng {
    uint64_t s[4];
    double spare;
    int has_spare;
} gen_rng;

void gen_rng_seed(gen_rng *r, uint64_t seed);
uint64_t gen_u64(gen_rng *r);
double gen_uniform(gen_rng *r); /* [0, 1) */
double gen_normal(gen_rng *r);  /* N(0, 1) */

/* ---- DSA indexer workload ----------------------------------------------------------------- */
typedef struct gen_dsa_spec {
    int64_t ctx;     /* keys before the first query (prefix already in the cache) */
    int64_t T;       /* query tokens; key ctx + t is query t's own key, so S = ctx + T */
    int32_t H, D;
    ltk_dtype dtype; /* E4M3 (with per-key fp32 scales), BF16 or F32 */
    uint64_t seed;
    double rho;      /* correlation of adjacent queries' head vectors (0 = independent) */
    /* NULL or "dsa": the workload above; otherwise one of gen_dsa_dists (its inputs reshaped so that
     * every row's scores follow it; k sets the plateaus' m) */
    const char *dist;
    int64_t k;
} gen_dsa_spec;

/* The indexer's distribution suite (issue 22), named as the select's where they mean the same:
 *   dsa                      the workload above
 *   equal                    every key and scale the first key's: every score of a row equal
 *   zero                     every score exactly 0: keys the first key, every query head its negation
 *   distinct2/4/16           key s is key s mod n (with its scale): n distinct scores a row
 *   plateau0, plateau-half, plateau-k1, plateau-k, plateau-4k
 *                            m = 0, k/2, k - 1, k, 4k keys (at random positions) score > 0, the rest
 *                            exactly 0: every query head is the first key, the others its negation
 *   scale-hi, scale-lo       the scores times 1e30 / 1e-30 (kv_scale, or the weights without one) */
extern const char *const gen_dsa_dists[];
int gen_dsa_dist_known(const char *name);

typedef struct gen_dsa {
    int64_t T, S;
    int32_t H, D;
    ltk_dtype dtype;
    void *q;         /* [T, H, D] dtype */
    void *kv;        /* [S, D] dtype */
    float *kv_scale; /* [S]; NULL unless E4M3 */
    float *weights;  /* [T, H], q scale * D^-0.5 * H^-0.5 folded in */
    int32_t *ks, *ke;/* [T]: causal, ks = 0, ke = ctx + t + 1 */
    double visible;  /* sum over t of ke - ks (for FLOP counts) */
} gen_dsa;

ltk_status gen_dsa_make(const gen_dsa_spec *spec, gen_dsa *out);
void gen_dsa_free(gen_dsa *d);

/* ---- kNN embeddings ----------------------------------------------------------------------- */
/* Unit-norm vectors drawn from an anisotropic mixture of sqrt(N) clusters, so inner products look
 * like real sentence-embedding cosines (mean ~0.3-0.5, a thin upper tail). Queries come from the
 * same mixture. Output float32 [rows, D]. */
ltk_status gen_embeddings(int64_t rows, int32_t D, int64_t clusters, uint64_t seed, uint64_t stream, float **out);

/* The kNN's distributions (`bench knn --dist`), applied to a base from gen_embeddings, seeded:
 *   clustered   as generated (the default)
 *   dup         every row a copy of one of N/16 distinct rows (each score 16 times: ties at the k-th)
 *   equal       every row row 0 (one score a query: a flat row)
 *   zero        9 rows in 10 the zero vector (scores exactly 0: the plateau under k = N/10)
 *   scale-hi    x 1e15 (inner products ~1e15; f16 stores inf, so its scores are inf or NaN)
 *   scale-lo    x 1e-15 (inner products ~1e-15; f16 flushes the vectors to 0: a flat row)
 *   nonfinite   1 row in 1000 holds a NaN element, 1 in 1000 a +inf one (NaN scores rank last) */
extern const char *const gen_knn_dists[];
int gen_knn_dist_known(const char *name);
void gen_knn_dist_apply(float *base, int64_t N, int32_t D, const char *name, uint64_t seed);

/* ---- score matrices for select ------------------------------------------------------------ */
typedef enum gen_score_dist {
    GEN_SCORES_DSA = 0, /* bulk N(30, 2.5^2) plus a 1% exponential upper tail: concentrated like DSA rows */
    GEN_SCORES_NORMAL,  /* N(0, 1) */
    GEN_SCORES_OFFSET,  /* N(0, 1) + 100: shares high bits, hard for fp16-bucket radix selectors */
    GEN_SCORES_TIES,    /* N(0, 1) rounded to 1/4: thousands of exact ties around the k-th */
    GEN_SCORES_SHIFT4,  /* N(0, 1) * 1e-3 + 1e4: 15 shared high bits */
    GEN_SCORES_EQUAL,   /* every score 1 */
    GEN_SCORES_DISTINCT2, GEN_SCORES_DISTINCT4, GEN_SCORES_DISTINCT16, /* uniform over 2, 4, 16 values */
    /* the zero plateau: m entries a row > 0 (at random columns), the rest exactly 0, m = 0, k/2,
     * k - 1, k, 4k: ReLU-summed indexer rows where few keys score above 0 */
    GEN_SCORES_PLATEAU0, GEN_SCORES_PLATEAU_HALF, GEN_SCORES_PLATEAU_KM1, GEN_SCORES_PLATEAU_K,
    GEN_SCORES_PLATEAU_4K,
    GEN_SCORES_INC,      /* the column index */
    GEN_SCORES_DEC,      /* cols - column */
    GEN_SCORES_HEAVY,    /* N(0, 1) / U(0, 1): a heavy (Cauchy-like) tail */
    GEN_SCORES_OUTLIERS, /* N(0, 1) with 8 entries a row at 1e30 */
    GEN_SCORES_NONFINITE, /* N(0, 1) with 10% NaN, 5% +inf, 5% -inf */
    GEN_SCORES_COUNT
} gen_score_dist;

int gen_score_dist_parse(const char *name, gen_score_dist *out);
const char *gen_score_dist_name(gen_score_dist d);
/* float32 [rows, cols]; k sets the plateaus' m. Seeded: the same matrix for a (seed, shape, k). */
ltk_status gen_scores(int64_t rows, int64_t cols, gen_score_dist dist, int64_t k, uint64_t seed, float **out);

/* Converts float32 to F32/F16/BF16/E4M3 storage (new buffer). */
ltk_status gen_encode(const float *src, int64_t n, ltk_dtype dtype, void **out);
/* Rounds in place to the values `dtype` can hold (what the library will see). */
void gen_round_to(float *x, int64_t n, ltk_dtype dtype);

#endif
