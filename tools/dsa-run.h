/* Runs a generated DSA workload chunk by chunk through ltk_indexer_topk, as a serving engine's
 * chunked prefill does: chunk c holds queries [c*chunk, (c+1)*chunk), sees the keys cached so far
 * (S = ctx + (c+1)*chunk) and, with a state, starts from the hot set the previous chunk left.
 * Shared by `litetopk demo` and `litetopk bench dsa`. */
#ifndef LTK_TOOLS_DSA_RUN_H
#define LTK_TOOLS_DSA_RUN_H

#include "gen.h"
#include "litetopk.h"

typedef struct dsa_inputs {
    gen_dsa host;      /* generated arrays (host) */
    int on_device;     /* 1: the pointers below are CUDA device memory */
    void *q, *kv;
    float *kv_scale, *weights;
    int32_t *ks, *ke;
    int64_t ctx, chunk, nchunks;
    int32_t k;
    uint32_t flags;
} dsa_inputs;

/* Generates and uploads. chunk <= 0 means one call for all T rows. */
ltk_status dsa_inputs_make(const gen_dsa_spec *spec, int64_t chunk, int32_t k, uint32_t flags, int on_device,
                           dsa_inputs *in);
void dsa_inputs_free(dsa_inputs *in);

typedef struct dsa_path {
    ltk_exec exec;          /* backend, algo, threads, workspace */
    int use_state;
    ltk_indexer_state *state;
    int32_t *out_idx;       /* [T, k] in the backend's memory */
    float *out_scores;
} dsa_path;

/* Largest workspace any chunk needs; allocated once so the timed runs allocate nothing. */
/* The hot set's capacity the paths use: k' = 3k keys, capped by the API limit. */
int32_t dsa_hot_capacity(int32_t k);
ltk_status dsa_path_init(const dsa_inputs *in, ltk_backend backend, ltk_algo algo, int32_t threads, int use_state,
                         dsa_path *p);
void dsa_path_free(const dsa_inputs *in, dsa_path *p);

/* Per-chunk details of a run (optional). */
typedef struct dsa_chunk_report {
    ltk_stats stats;
    double hot_hit;   /* share of this chunk's top-k entries that were in the hot set it started from; -1 if none */
    int32_t hot_size; /* keys in that hot set */
} dsa_chunk_report;

/* Runs every chunk once (the state is reset first: a cold start per run). With `total` the stats are
 * summed over chunks; with `per_chunk` (nchunks entries) also reported per chunk (the CUDA backend
 * synchronises for stats, so timed runs pass NULL for both). */
ltk_status dsa_path_run(const dsa_inputs *in, dsa_path *p, ltk_stats *total, dsa_chunk_report *per_chunk);

/* Adds chunk stats into a running total (sums, maxima). */
void dsa_stats_add(ltk_stats *total, const ltk_stats *s);

#endif
