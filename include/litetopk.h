/*
 * litetopk.h — exact fused score + top-k (C11, no CUDA headers needed).
 *
 * Three operations, each with a CPU and (when built) a CUDA backend behind the same call:
 *
 *   ltk_indexer_topk  the DSA/CSA lightning indexer of DeepSeek V3.2/V4 and GLM-5:
 *                       I[t,s] = kv_scale[s] * sum_h w[t,h] * max(0, sum_d q[t,h,d] * k[s,d])
 *                     then the exact top-k keys of each query row over s in [ks[t], ke[t]).
 *   ltk_knn_topk      brute-force k-nearest neighbours (inner product, L2, cosine).
 *   ltk_select_topk   exact top-k of each row of a given score matrix.
 *
 * The fused paths never write the full score matrix: they sample a few keys to set a threshold bin,
 * gate scores tile by tile while they are produced, keep only candidates at or above the threshold
 * bin, refresh the threshold from a histogram, and select exactly inside the final threshold bin
 * (LiteTopK). Exactness does not depend on the sample: a bad sample only costs time.
 *
 * ORDER (all operations). Entries are ranked by score descending; equal scores by the LOWER index
 * first. -0.0 and +0.0 are equal. -inf ranks below every finite score; NaN ranks below everything,
 * -inf included (a NaN entry is returned only when a row has fewer than k non-NaN valid entries).
 * With this total order the top-k set is unique, so results are deterministic and testable bit for bit.
 * Output is sorted in that order unless LTK_FLAG_UNSORTED is given (then the order within the k
 * slots is unspecified, the SET is the same).
 *
 * PADDING. A row with fewer valid entries than k fills the remaining slots with index -1 and
 * score -inf.
 *
 * EXACTNESS. The returned set is the exact top-k of the scores the backend computes. Backends
 * differ only in floating-point rounding of the scores (fp32 accumulation in a fixed order on the
 * CPU; FP8/bf16 tensor cores on the GPU), never in selection.
 *
 * ERRORS. Every function returns an ltk_status; LTK_OK is 0, errors are negative. A per-thread
 * message with details is available from ltk_last_error(). Invalid arguments never abort and
 * never cause a write outside the documented outputs.
 *
 * ALIGNMENT. Every array pointer must be aligned to its element size: 4 bytes for fp32 and int32
 * arrays, 8 for int64, 2 for fp16/bf16, 1 for e4m3 (what malloc, cudaMalloc, numpy and torch give,
 * and any strided view of them). A misaligned pointer is refused with LTK_EINVAL.
 *
 * MEMORY. Each operation has a *_workspace_size() query. Pass a workspace of at least that many
 * bytes in ltk_exec (host memory for CPU backends, device memory for CUDA) and the call allocates
 * nothing (CUDA-graph capturable on the CUDA backend). With workspace == NULL the call takes its
 * own and returns it (convenience path); on CUDA from a stream-ordered pool of the library's, on the
 * call's stream, so that neither step waits for the device (LTK_CUDA_POOL_KEEP_MB: what the pool
 * keeps between calls).
 */
#ifndef LITETOPK_H
#define LITETOPK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LTK_VERSION_MAJOR 0
#define LTK_VERSION_MINOR 1
#define LTK_VERSION_PATCH 0

/* Limits, checked by every call (and by the CLI's options and the Python binding). */
#define LTK_INDEXER_MAX_K 8192   /* indexer and prefill top-k */
#define LTK_INDEXER_MAX_H 128    /* indexer heads */
#define LTK_INDEXER_MAX_D 256    /* indexer head dimension */
#define LTK_KNN_MAX_K 16384      /* kNN neighbours */
#define LTK_KNN_MAX_D 65536      /* kNN dimension */
#define LTK_SELECT_MAX_K 65536   /* select top-k */
#define LTK_STATE_MAX_SIZE (1 << 20) /* hot-set keys of an ltk_indexer_state */
#define LTK_DECODE_MAX_NEXT_N 8  /* decode: query rows per request */
#define LTK_DECODE_MAX_BLOCK 1024 /* decode: tokens per cache block */
#define LTK_BLOCK_MAX_SIZE 64    /* candidate indexer: keys per block */
#define LTK_BLOCKS_MAX_K 4096    /* candidate indexer: blocks published a row, block ids listed a row */
#define LTK_MAX_ROWS 2147483647LL    /* T, S, B, rows, cols, L: 2^31 - 1 */

#if defined(_WIN32) && defined(LTK_SHARED_BUILD)
#  define LTK_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define LTK_API __attribute__((visibility("default")))
#else
#  define LTK_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes. Values are ABI: pinned, never reused.
 * ------------------------------------------------------------------------------------------- */
#define LTK_STATUS_LIST(X)                                                                   \
    X(LTK_OK, 0, "success")                                                                  \
    X(LTK_EINVAL, -1, "invalid argument")                                                    \
    X(LTK_EUNSUPPORTED, -2, "unsupported by this backend")                                   \
    X(LTK_ENOBACKEND, -3, "backend not available in this build or on this machine")          \
    X(LTK_ENOMEM, -4, "out of memory")                                                       \
    X(LTK_EWORKSPACE, -5, "workspace too small")                                             \
    X(LTK_ECUDA, -6, "CUDA error")                                                           \
    X(LTK_EINTERNAL, -7, "internal error")                                                   \
    X(LTK_EIO, -8, "I/O error")                                                              \
    X(LTK_EFORMAT, -9, "malformed file")

typedef enum ltk_status {
#define LTK_X_ENUM(name, value, text) name = value,
    LTK_STATUS_LIST(LTK_X_ENUM)
#undef LTK_X_ENUM
} ltk_status;

/* Short fixed text for a status ("invalid argument"); never NULL. */
LTK_API const char *ltk_status_str(ltk_status status);
/* Details of the last error raised on the calling thread ("" if none). Valid until the next call. */
LTK_API const char *ltk_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Enumerations
 * ------------------------------------------------------------------------------------------- */
typedef enum ltk_dtype {
    LTK_DTYPE_F32 = 0,
    LTK_DTYPE_F16 = 1,  /* IEEE binary16 */
    LTK_DTYPE_BF16 = 2,
    LTK_DTYPE_E4M3 = 3, /* float8 e4m3fn (OCP FP8, max 448, no inf, 0x7f/0xff NaN) */
} ltk_dtype;

typedef enum ltk_metric {
    LTK_METRIC_IP = 0,  /* score = <q, x>, larger is better */
    LTK_METRIC_L2 = 1,  /* score = |q|^2 + |x|^2 - 2<q, x> (squared distance), SMALLER is better */
    LTK_METRIC_COS = 2, /* score = <q, x> / (|q| |x|), larger is better; 0 when a norm is 0 */
} ltk_metric;

typedef enum ltk_backend {
    LTK_BACKEND_AUTO = 0, /* CUDA when built and a device is present, else CPU; env LTK_BACKEND overrides */
    LTK_BACKEND_REF = 1,  /* scalar oracle: float64 accumulation, full sort; slow */
    LTK_BACKEND_CPU = 2,  /* threaded SIMD sample-filter-select */
    LTK_BACKEND_CUDA = 3, /* NVIDIA GPU; pointers are device pointers */
} ltk_backend;

typedef enum ltk_algo {
    LTK_ALGO_FUSED = 0,       /* sample, filter while scoring, refresh, select (default). Where the
                               * filter cannot pay for its fixed stages the call runs as dense
                               * windows inside the same workspace (same scores, same exact result):
                               * CUDA, >= 1,024 rows over <= 262,144 keys; CPU, <= 12 k keys */
    LTK_ALGO_MATERIALIZE = 1, /* same scoring code writes every score, then exact select (baseline) */
    LTK_ALGO_SCORE_ONLY = 2,  /* benchmarking: scoring work only, selection switched off; outputs unspecified */
} ltk_algo;

/* Flags (bitwise OR) */
#define LTK_FLAG_UNSORTED 0x1u /* output order within a row unspecified (the set is unchanged) */
#define LTK_FLAG_ABSOLUTE 0x2u /* indexer/select: indices are absolute, not relative to the row start */
#define LTK_FLAG_PHYSICAL 0x4u /* decode: physical cache slots instead of logical positions (see ltk_decode_args) */
#define LTK_FLAG_PIN_NEWEST 0x8u /* blocks: a row's newest block ranks first (see ltk_blocks_args) */
#define LTK_FLAG_BY_INDEX 0x10u  /* blocks, candidates: the set in ascending index order instead of by rank */

/* ---------------------------------------------------------------------------------------------
 * Execution options and statistics
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_stats {
    int64_t rows;             /* rows processed by the call */
    int64_t short_rows;       /* rows with <= k valid entries, answered without a scan */
    int64_t candidates;       /* candidates written, summed over rows */
    int64_t candidates_max;   /* largest per-row candidate count */
    int64_t bin_entries;      /* entries in the final threshold bin, summed over rows */
    int64_t bin_entries_max;  /* largest threshold-bin size */
    int64_t compactions;      /* candidate-buffer tighten-and-compact events */
    int64_t fallback_rows;    /* rows redone exactly: dense fallback, or a rescan from the conservative start */
    /* Optional per-row detail (host memory, length = rows of the call), or NULL. */
    int32_t *row_candidates;
    int32_t *row_bin_entries;
} ltk_stats;

typedef struct ltk_exec {
    ltk_backend backend;    /* LTK_BACKEND_AUTO by default (zero-initialised struct) */
    ltk_algo algo;          /* LTK_ALGO_FUSED by default */
    void *stream;           /* cudaStream_t for the CUDA backend (NULL = default stream); ignored on CPU */
    void *workspace;        /* NULL = allocate internally; else >= *_workspace_size() bytes (device memory on CUDA) */
    size_t workspace_bytes;
    int32_t num_threads;    /* CPU backend: 0 = all cores */
    ltk_stats *stats;       /* optional, host memory; filled on return (the CUDA backend then synchronises) */
} ltk_exec;

/* ---------------------------------------------------------------------------------------------
 * Indexer top-k (DSA / CSA lightning indexer)
 *
 *   I[t,s] = kv_scale[s] * sum_{h<H} w[t,h] * max(0, sum_{d<D} q[t,h,d] * k[s,d])
 *
 * Shapes and strides (strides in ELEMENTS, the innermost dimension is contiguous):
 *   q          [T, H, D]  dtype (E4M3, BF16 or F32); element (t,h,d) at q[t*q_stride_t + h*D + d]
 *   kv         [S, D]     dtype;                     element (s,d)   at kv[s*kv_stride_s + d]
 *   kv_scale   [S]  fp32  per-key scale applied after the ReLU and head sum; NULL means 1
 *   weights    [T, H] fp32, w[t*w_stride_t + h]; q scale and softmax factors already folded in
 *              (e.g. vLLM: w * q_scale * D^-0.5 * H^-0.5); any sign allowed
 *   ks, ke     [T] int32, half-open visible range [ks[t], ke[t]) per row, 0 <= ks <= ke <= S;
 *              NULL means [0, S). Causal prefill: ke[t] = ctx + t + 1. CSA: ke[t] = (pos_t + 1) / m.
 *   out_idx    [T, k] int32, row t at out_idx[t*out_stride]; index relative to ks[t]
 *              (absolute s with LTK_FLAG_ABSOLUTE); -1 padding
 *   out_scores [T, k] fp32 or NULL, same stride; -inf padding
 * Limits: 1 <= H <= LTK_INDEXER_MAX_H (128), 1 <= D <= LTK_INDEXER_MAX_D (256),
 * 1 <= k <= LTK_INDEXER_MAX_K (8192), S and T <= 2^31 - 1.
 * A row with ke - ks <= k returns its keys in index order (0..len-1, then -1) when
 * LTK_FLAG_UNSORTED is set and out_scores is NULL, without scoring anything; otherwise they are
 * scored and sorted.
 * Non-finite inputs are allowed; scores follow IEEE arithmetic and the ORDER rules above.
 *
 * Cross-chunk state: when `state` is non-NULL, the call samples its initial threshold from the
 * state's hot set (keys voted most often by the previous call's top-k; entries outside a row's range
 * are ignored), and on return replaces the hot set with the `sample_size` keys that appear most
 * often in this call's outputs (votes desc, then larger = more recent index first; deduplicated).
 * With no state, or an empty one (cold start), each row samples a strided subset of its range plus
 * its most recent keys: no dense pass is needed. Results are exact whatever the sample holds.
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_indexer_state ltk_indexer_state;

typedef struct ltk_indexer_args {
    int64_t T, S;
    int32_t H, D, k;
    ltk_dtype dtype;
    const void *q;
    int64_t q_stride_t;        /* elements between rows t; 0 means H*D */
    const void *kv;
    int64_t kv_stride_s;       /* 0 means D */
    const float *kv_scale;
    const float *weights;
    int64_t w_stride_t;        /* 0 means H */
    const int32_t *ks, *ke;
    int32_t *out_idx;
    float *out_scores;
    int64_t out_stride;        /* 0 means k */
    uint32_t flags;
    ltk_indexer_state *state;  /* optional; must belong to the same backend */
} ltk_indexer_args;

LTK_API ltk_status ltk_indexer_workspace_size(const ltk_indexer_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_indexer_topk(const ltk_indexer_args *args, const ltk_exec *exec);

/* Hot-set state for one request across its chunks. sample_size = k' (e.g. 3*k); 1..LTK_STATE_MAX_SIZE.
 * A CUDA state keeps its keys in device memory and is updated on the call's stream. Every state
 * function and ltk_indexer_topk check that the pointer is a state made by this library (a pointer
 * to anything else is refused with LTK_EINVAL; using a freed state is undefined, as with free()). */
LTK_API ltk_status ltk_indexer_state_create(ltk_backend backend, int32_t sample_size, ltk_indexer_state **out);
LTK_API void ltk_indexer_state_free(ltk_indexer_state *state);
LTK_API ltk_status ltk_indexer_state_reset(ltk_indexer_state *state); /* back to cold start */
/* Copies up to `cap` hot keys (absolute indices, best first) to host memory `idx`; *count = number held. */
LTK_API ltk_status ltk_indexer_state_get(const ltk_indexer_state *state, int32_t *idx, int32_t cap, int32_t *count);
/* Replaces the hot set with `count` absolute indices (host memory). Any values are accepted:
 * duplicates and negative entries are dropped, out-of-range ones ignored at use. */
LTK_API ltk_status ltk_indexer_state_set(ltk_indexer_state *state, const int32_t *idx, int32_t count);

/* ---------------------------------------------------------------------------------------------
 * Whole-sequence prefill driver (StreamIndex-style, fused): runs the indexer over all L query
 * tokens of one sequence in chunks of `chunk` rows, carrying the hot set from chunk to chunk.
 *   q        [L, H, D]  the indexer queries of every token (strides as in ltk_indexer_args)
 *   kv       [L / m, D] the (CSA-compressed) indexer keys, kv_scale [L / m], weights [L, H]
 *   token t sees compressed keys j < (t + 1) / m   (m = 1: plain causal DSA, j <= t)
 * Indices are absolute key positions (0-based), -1 padded. Output goes to out_idx/out_scores
 * ([L, k], row stride out_stride) when given; the callback, when given, is called after each chunk
 * with that chunk's rows (pointers into the outputs, or into the workspace when the outputs are
 * NULL: valid only during the callback; device pointers on the CUDA backend, after the chunk's
 * work has been enqueued on exec->stream). A non-zero return from the callback stops the run
 * with LTK_EINVAL ("stopped by callback"). The workspace is bounded independently of L: it holds
 * one chunk's indexer workspace, its ranges, one chunk of outputs when out_idx is NULL, and the
 * hot set.
 * ------------------------------------------------------------------------------------------- */
typedef int (*ltk_prefill_callback)(int64_t first_row, int64_t rows, const int32_t *idx, const float *scores,
                                    int64_t stride, void *user);

typedef struct ltk_prefill_args {
    int64_t L;                 /* query tokens */
    int32_t m;                 /* compression ratio, >= 1 */
    int32_t H, D, k;
    ltk_dtype dtype;
    const void *q;
    int64_t q_stride_t;        /* 0 means H*D */
    const void *kv;
    int64_t kv_stride_s;       /* 0 means D */
    const float *kv_scale;     /* [L/m] or NULL */
    const float *weights;
    int64_t w_stride_t;        /* 0 means H */
    int64_t chunk;             /* query rows per chunk; 0 means 8192 */
    int32_t sample_size;       /* hot-set size k'; 0 means 3*k */
    int32_t *out_idx;          /* [L, k] or NULL */
    float *out_scores;         /* [L, k] or NULL */
    int64_t out_stride;        /* 0 means k */
    uint32_t flags;            /* LTK_FLAG_UNSORTED allowed */
    ltk_prefill_callback callback;
    void *user;
    int progress;              /* non-zero: one progress line per chunk on stderr */
} ltk_prefill_args;

LTK_API ltk_status ltk_prefill_workspace_size(const ltk_prefill_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_prefill_run(const ltk_prefill_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * Decode-stage indexer top-k over a paged FP8 cache: what a serving engine runs for every generated
 * token, in every layer (DeepGEMM's fp8_paged_mqa_logits and a separate top-k, in one call that
 * writes no logits). Request b has next_n query rows (speculative decoding); row t = b*next_n + r.
 *
 *   I[t, i] = scale(b, i) * sum_{h<H} w[t,h] * max(0, sum_{d<D} q[t,h,d] * key(b, i)[d])
 *
 *   q           [B, next_n, H, D] dtype (E4M3 on every backend; BF16 and F32 on the host backends),
 *               row t at q + t*q_stride elements, heads packed
 *   kv_cache    bytes; block p at kv_cache + p*block_stride holds block_kv*D e4m3 key bytes (token j of
 *               the block at byte j*D) followed by block_kv fp32 scales: the layout vLLM and SGLang
 *               use (8,448 bytes for a 64-token block of D = 128)
 *   block_table [B, max_blocks] int32, row b at block_table + b*bt_stride: position i of request b is
 *               token i % block_kv of block block_table[b, i / block_kv]
 *   lens        [B, next_n] int32: row t sees positions [0, lens[t]); or lens NULL and
 *   seq_lens    [B] int32: row (b, r) sees [0, seq_lens[b] - next_n + r + 1) (vLLM's convention;
 *               a non-positive length is an empty row)
 *   weights     [B*next_n, H] fp32, row t at weights + t*w_stride
 *   out_idx     [B*next_n, k] int32, row t at out_idx + t*out_stride: logical positions i, or with
 *               LTK_FLAG_PHYSICAL the slots block_table[b, i / block_kv] * block_kv + i % block_kv
 *               (SGLang, FlashMLA); -1 padding
 *   out_scores  [B*next_n, k] fp32 or NULL, same stride; -inf padding
 * ORDER as everywhere, ties by the lower logical position. A row with len <= k returns 0..len-1 (as
 * slots with LTK_FLAG_PHYSICAL) unscored when LTK_FLAG_UNSORTED is set and out_scores is NULL, as
 * vLLM's top_k_per_row_decode does; otherwise scored and sorted.
 * max_len is the capacity: every length <= max_len <= max_blocks*block_kv (0 means the latter). The
 * workspace depends on B, next_n, H, D, k, block_kv and max_len only, never on the lengths, and the
 * CUDA call's launches do not either: one captured CUDA graph replays for any lengths up to max_len.
 * The host backends check every length and every table entry a call reads (LTK_EINVAL otherwise);
 * the CUDA backend cannot without a host sync: it clamps lengths to [0, max_len], never reads a block
 * whose table entry is outside [0, num_blocks), and scores its positions NaN (they rank last).
 * Limits: 1 <= next_n <= LTK_DECODE_MAX_NEXT_N, 1 <= block_kv <= LTK_DECODE_MAX_BLOCK, H, D and k as
 * the indexer's, block_kv*D a multiple of 4, block_stride a multiple of 4.
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_decode_args {
    int64_t B;
    int32_t next_n, H, D, k;
    ltk_dtype dtype;           /* of q */
    const void *q;
    int64_t q_stride;          /* elements between query rows; 0 means H*D */
    const uint8_t *kv_cache;
    int64_t num_blocks;        /* blocks in the cache: table entries must lie in [0, num_blocks) */
    int32_t block_kv;          /* tokens per block (64 and 32 in use) */
    int64_t block_stride;      /* bytes between blocks; 0 means block_kv*(D+4) */
    const int32_t *block_table;
    int64_t bt_stride;         /* elements between block-table rows; 0 means max_blocks */
    int32_t max_blocks;        /* columns of the block table */
    const int32_t *lens;       /* [B, next_n], or NULL with seq_lens */
    const int32_t *seq_lens;   /* [B], or NULL with lens */
    int32_t max_len;           /* 0 means max_blocks*block_kv */
    const float *weights;
    int64_t w_stride;          /* 0 means H */
    int32_t *out_idx;
    float *out_scores;
    int64_t out_stride;        /* 0 means k */
    uint32_t flags;            /* LTK_FLAG_UNSORTED, LTK_FLAG_PHYSICAL */
} ltk_decode_args;

LTK_API ltk_status ltk_decode_workspace_size(const ltk_decode_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_decode_topk(const ltk_decode_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * DeepSeek-V4.1's two-level candidate indexer (prefill form: contiguous keys, each row's range
 * [ks, ke) as in ltk_indexer_args). Block j holds keys [j*b, (j+1)*b), b = block_size (8 and 16 in
 * use), ids absolute (aligned to key 0, whatever the row's range); only a block's keys inside the
 * row's range count, and a block with none of them is not the row's.
 *
 * ltk_blocks_topk, the source layer: for each row t the exact top block_k blocks ranked by the
 * block's score, the largest I[t,s] (the indexer's scores) over its keys in the row, in ORDER (a
 * block of NaN scores only is NaN, ranking last), ties by the lower block id. With
 * LTK_FLAG_PIN_NEWEST the block holding key ke[t] - 1 (full or partial) ranks first and reports
 * +inf, as SGLang's and vLLM's publications force it (vLLM's select_candidate_blocks pins block
 * (ke - ks - 1) / b of every non-empty row, SGLang's amax8_varlen the row's last block; their other
 * ties follow torch.topk and are not reproducible; ours are).
 *   out_blocks        [T, block_k] int32 block ids, row t at out_blocks + t*blocks_stride; -1 padding
 *   out_block_scores  [T, block_k] fp32 or NULL, same stride; -inf padding
 * By rank; LTK_FLAG_BY_INDEX ascending ids (SGLang's block table); LTK_FLAG_UNSORTED any order. A
 * row of at most block_k blocks returns them all, ascending, unscored when LTK_FLAG_UNSORTED or
 * LTK_FLAG_BY_INDEX is set and out_block_scores is NULL. ix.k >= 1 with ix.out_idx also returns the
 * row's ordinary top-k from the same scores, exactly as ltk_indexer_topk (flags apply to both
 * outputs); ix.k = 0 with ix.out_idx NULL: blocks only.
 *
 * ltk_candidates_topk, the consumer layers: for each row t only the keys of its listed blocks are
 * scored, and the exact top ix.k among them returned as ltk_indexer_topk returns (relative to
 * ks[t], or absolute with LTK_FLAG_ABSOLUTE; -1 padding; ORDER, ties by the lower key; with
 * LTK_FLAG_BY_INDEX ascending keys).
 *   blocks            [T, n_blocks] int32 block ids, row t at blocks + t*blocks_stride, in any
 *                     order; an id outside [0, ceil(S / b)) (-1 padding, say) lists nothing, and a
 *                     repeated id lists its keys once (vLLM pads with repeats)
 * A row of at most ix.k candidate keys returns them ascending, unscored, when LTK_FLAG_UNSORTED or
 * LTK_FLAG_BY_INDEX is set and ix.out_scores is NULL.
 * Limits: 1 <= block_size <= LTK_BLOCK_MAX_SIZE, 1 <= block_k, n_blocks <= LTK_BLOCKS_MAX_K, the
 * rest as the indexer's; ix.state must be NULL. Backends: ref, CPU and CUDA (device pointers,
 * lists and ranges read on the device; graph-safe).
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_blocks_args {
    ltk_indexer_args ix;       /* the scores' inputs and ranges; the ordinary top-k (ix.k = 0: none) */
    int32_t block_size, block_k;
    int32_t *out_blocks;
    float *out_block_scores;
    int64_t blocks_stride;     /* 0 means block_k */
} ltk_blocks_args;

typedef struct ltk_candidates_args {
    ltk_indexer_args ix;       /* the scores' inputs and ranges, k and the outputs */
    int32_t block_size, n_blocks;
    const int32_t *blocks;
    int64_t blocks_stride;     /* 0 means n_blocks */
} ltk_candidates_args;

LTK_API ltk_status ltk_blocks_workspace_size(const ltk_blocks_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_blocks_topk(const ltk_blocks_args *args, const ltk_exec *exec);
LTK_API ltk_status ltk_candidates_workspace_size(const ltk_candidates_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_candidates_topk(const ltk_candidates_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * The candidate indexer's decode forms: the keys of ltk_decode_args' paged FP8 cache, row t of
 * request b = t / next_n seeing positions [0, len_t) (lens or seq_lens, as ltk_decode_topk). Block
 * j holds logical positions [j*b, (j+1)*b) of the request (b = block_size, ids from position 0);
 * the rest as the prefill forms above with ks[t] = 0 and ke[t] = len_t.
 *
 * ltk_decode_blocks_topk: out_blocks [B*next_n, block_k] logical block ids (and scores), ranked,
 * pinned, ordered and padded as ltk_blocks_topk's; dx.k >= 1 with dx.out_idx also returns the
 * row's ordinary top-k exactly as ltk_decode_topk (positions, or slots with LTK_FLAG_PHYSICAL);
 * dx.k = 0 with dx.out_idx NULL: blocks only. Flags: LTK_FLAG_UNSORTED, LTK_FLAG_BY_INDEX,
 * LTK_FLAG_PIN_NEWEST, LTK_FLAG_PHYSICAL (the ordinary top-k's slots).
 * ltk_decode_candidates_topk: blocks [B*next_n, n_blocks] logical block ids a row, in any order
 * (repeats once; an id with no position below the row's length lists nothing); out_idx the exact
 * top dx.k of the listed positions as ltk_decode_topk returns them (positions, or slots with
 * LTK_FLAG_PHYSICAL; LTK_FLAG_BY_INDEX: ascending positions).
 * Limits: as ltk_decode_topk's and the prefill forms'. Backends: ref and CPU (each request's keys
 * are gathered, the publication's whole context, the consumer's listed blocks only, and the
 * prefill form runs on them; the gather buffers are allocated by the call: the workspace query
 * says 0); CUDA both (graph-safe, q e4m3; the publication's scan reads the cache as
 * ltk_decode_topk's; the consumer's block_size must divide block_kv into a power of two, else
 * LTK_EUNSUPPORTED, and a listed block whose page is unmapped scores NaN).
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_decode_blocks_args {
    ltk_decode_args dx;        /* the cache, the rows and their lengths; the ordinary top-k (dx.k = 0: none) */
    int32_t block_size, block_k;
    int32_t *out_blocks;
    float *out_block_scores;
    int64_t blocks_stride;     /* 0 means block_k */
} ltk_decode_blocks_args;

typedef struct ltk_decode_candidates_args {
    ltk_decode_args dx;        /* the cache, the rows and their lengths, k and the outputs */
    int32_t block_size, n_blocks;
    const int32_t *blocks;
    int64_t blocks_stride;     /* 0 means n_blocks */
} ltk_decode_candidates_args;

LTK_API ltk_status ltk_decode_blocks_workspace_size(const ltk_decode_blocks_args *args, const ltk_exec *exec,
                                                    size_t *bytes);
LTK_API ltk_status ltk_decode_blocks_topk(const ltk_decode_blocks_args *args, const ltk_exec *exec);
LTK_API ltk_status ltk_decode_candidates_workspace_size(const ltk_decode_candidates_args *args, const ltk_exec *exec,
                                                        size_t *bytes);
LTK_API ltk_status ltk_decode_candidates_topk(const ltk_decode_candidates_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * kNN top-k (brute force)
 *   queries [B, D], base [N, D] (dtype F32, F16 or BF16; strides in elements, 0 = D)
 *   out_idx [B, k] int64 (-1 padding), out_scores [B, k] fp32 or NULL (padding: -inf, or +inf for L2)
 * For L2 the best entries are the SMALLEST distances: the order is distance ascending, ties by
 * lower index, NaN last. k may exceed N (padding). Limits: 1 <= k <= LTK_KNN_MAX_K (16384),
 * 1 <= D <= LTK_KNN_MAX_D (65536).
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_knn_args {
    int64_t B, N;
    int32_t D;
    int32_t k;
    ltk_dtype dtype;
    ltk_metric metric;
    const void *queries;
    int64_t q_stride;
    const void *base;
    int64_t base_stride;
    int64_t *out_idx;
    float *out_scores;
    int64_t out_stride;    /* 0 means k */
    uint32_t flags;
} ltk_knn_args;

LTK_API ltk_status ltk_knn_workspace_size(const ltk_knn_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_knn_topk(const ltk_knn_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * Select top-k over given scores (drop-in for a radix top-k over materialised logits)
 *   scores [rows, cols] dtype F32, F16 or BF16, row r at scores[r*row_stride] (elements, 0 = cols)
 *   starts, ends [rows] int32 or NULL: valid range [starts[r], ends[r]) within [0, cols)
 *   out_idx [rows, k] int32, relative to starts[r] (absolute with LTK_FLAG_ABSOLUTE); -1 padding
 *   out_scores [rows, k] fp32 or NULL; -inf padding
 * Limits: 1 <= k <= LTK_SELECT_MAX_K (65536), cols <= 2^31 - 1.
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_select_args {
    int64_t rows, cols;
    int32_t k;
    ltk_dtype dtype;
    const void *scores;
    int64_t row_stride;
    const int32_t *starts, *ends;
    int32_t *out_idx;
    float *out_scores;
    int64_t out_stride;    /* 0 means k */
    uint32_t flags;
} ltk_select_args;

LTK_API ltk_status ltk_select_workspace_size(const ltk_select_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_select_topk(const ltk_select_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * Merge of candidate lists (key sharding: each of G ranks scores its own shard of the keys and
 * returns its exact local top-k with global ids; the merge returns the exact global top-k)
 *   scores [rows, lists, list_len] fp32, element (r, g, j) at scores[r*row_stride + g*list_stride + j]
 *   ids    the same layout, int32 global ids; an id < 0 is no candidate (its score, which must be
 *          readable memory like every other, is ignored)
 *   out_idx [rows, k] int32 ids, row r at out_idx + r*out_stride; -1 padding
 *   out_scores [rows, k] fp32 or NULL (the candidates' scores; -0 as +0); -inf padding
 * Strides in elements; 0 means dense: list_stride = list_len, row_stride = lists * list_len. So
 * both layouts of an all-gather fit: [rows, G * k] (vLLM's gather along the candidates: lists = 1,
 * list_len = G * k, or lists = G, list_len = k) and [G, rows, k] (rank-major: list_stride = rows *
 * k, row_stride = k).
 * The result is the top k of the row's candidates in ORDER, ties by the LOWER id (not by position),
 * NaN last. Why it is the global top-k: a key of the global top-k has at most k - 1 keys above it,
 * so it is in its own shard's local top-k, provided each list holds its shard's exact top-k (or
 * every key of a shard with fewer) under the same order. Each id is taken as given: an id listed
 * twice may be returned twice (shards are disjoint). The outputs must not overlap the inputs.
 * Flags: LTK_FLAG_UNSORTED.
 * Limits: 1 <= k <= LTK_SELECT_MAX_K, 1 <= lists, 1 <= list_len, lists * list_len <= 2^31 - 1.
 * Backends: ref, CPU and CUDA (device pointers; k <= 16384 there, LTK_EUNSUPPORTED above).
 * ------------------------------------------------------------------------------------------- */
typedef struct ltk_merge_args {
    int64_t rows;
    int32_t lists, list_len;
    int32_t k;
    const float *scores;
    const int32_t *ids;
    int64_t row_stride, list_stride; /* 0 means dense (see above) */
    int32_t *out_idx;
    float *out_scores;
    int64_t out_stride;              /* 0 means k */
    uint32_t flags;
} ltk_merge_args;

LTK_API ltk_status ltk_merge_workspace_size(const ltk_merge_args *args, const ltk_exec *exec, size_t *bytes);
LTK_API ltk_status ltk_topk_merge(const ltk_merge_args *args, const ltk_exec *exec);

/* ---------------------------------------------------------------------------------------------
 * Backends and build information
 * ------------------------------------------------------------------------------------------- */
/* 1 if the backend is compiled in and usable on this machine (CUDA: a device is present). */
LTK_API int ltk_backend_available(ltk_backend backend);
/* "ref", "cpu", "cuda", "auto". */
LTK_API const char *ltk_backend_name(ltk_backend backend);
/* The backend LTK_BACKEND_AUTO resolves to now. */
LTK_API ltk_backend ltk_backend_resolve(ltk_backend backend);
/* Human-readable build options, backends and devices (NUL-terminated, truncated to cap). */
LTK_API ltk_status ltk_info(char *buf, size_t cap);
/* Size in bytes of one element of a dtype (0 if unknown). */
LTK_API size_t ltk_dtype_size(ltk_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif /* LITETOPK_H */
