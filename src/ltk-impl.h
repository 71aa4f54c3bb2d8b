/* Private interface between the front end (litetopk.c) and the backends.
 * The front end validates every argument once; backends may assume well-formed input
 * (non-NULL required pointers, shapes within the documented limits, strides >= row lengths,
 * and on host backends valid ks/ke ranges). */
#ifndef LTK_IMPL_H
#define LTK_IMPL_H

#include "litetopk.h"
#include "ltk-order.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records a formatted detail message for ltk_last_error() and returns `status`. */
ltk_status ltk_error(ltk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ltk_clear_error(void);

#define LTK_RETURN_IF(cond, status, ...)                \
    do {                                                \
        if (cond) return ltk_error((status), __VA_ARGS__); \
    } while (0)
#define LTK_FORWARD_IF(expr)                 \
    do {                                     \
        ltk_status ltk_fwd_ = (expr);        \
        if (ltk_fwd_ != LTK_OK) return ltk_fwd_; \
    } while (0)

/* Hot-set storage: `keys` points to capacity+1 int32 in the backend's memory space:
 * keys[0] = number held, keys[1..] = absolute key indices, best first. `tag` is LTK_STATE_TAG in a
 * live state (the front end refuses anything else: a foreign pointer cast to a state, a freed one). */
#define LTK_STATE_TAG 0x6c746b53u /* "ltkS" */
struct ltk_indexer_state {
    uint32_t tag;
    ltk_backend backend;
    int32_t capacity;
    int32_t *keys;
};
/* Checks that `st` is a live state; LTK_EINVAL with a message naming `what` otherwise. */
ltk_status ltk_state_check(const ltk_indexer_state *st, const char *what);
/* The indexer's shape, element type and input strides (0 = packed: resolved in place) and the
 * alignment of its inputs, as ltk_indexer_topk and ltk_prefill_run both take them. */
ltk_status ltk_check_indexer_inputs(int32_t H, int32_t D, int32_t k, ltk_dtype dtype, int64_t *q_stride_t,
                                    int64_t *kv_stride_s, int64_t *w_stride_t, const void *q, const void *kv,
                                    const float *kv_scale, const float *weights);
/* Whether p is aligned to `align` bytes (NULL counts as aligned: the required-pointer checks come first). */
static inline int ltk_aligned(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

/* Resolved argument copies with defaults filled in (strides, ranges). */
typedef struct ltk_backend_i {
    const char *name;
    int (*available)(void);
    /* Optional text appended to ltk_info(); may be NULL. */
    void (*info)(char *buf, size_t cap);

    ltk_status (*indexer_workspace)(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*indexer)(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    ltk_status (*knn_workspace)(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*knn)(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    ltk_status (*select_workspace)(const ltk_select_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*select)(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);

    /* Memory in the backend's space (workspace convenience path, state storage). */
    ltk_status (*mem_alloc)(size_t bytes, void **ptr);
    void (*mem_free)(void *ptr);
    /* Copies between host and the backend's memory space (for state get/set). */
    ltk_status (*mem_to_host)(void *dst, const void *src, size_t bytes);
    ltk_status (*mem_from_host)(void *dst, const void *src, size_t bytes);
    /* Optional (NULL on host backends): waits for the work enqueued on `stream`. The prefill
     * driver calls it before reusing a buffer that enqueued work may still read. */
    ltk_status (*stream_sync)(void *stream);
    /* Optional (NULL on host backends): writes the prefill driver's causal ranges of rows
     * t0 .. t0+rows-1 (ks = 0, ke = (t + 1) / m) on `stream`, so chunks follow each other with no
     * host copy and no synchronisation. */
    ltk_status (*causal_ranges)(int32_t *ks, int32_t *ke, int64_t t0, int64_t rows, int32_t m, void *stream);
    /* The decode operation (ltk_decode_args: strides, max_len resolved; on host backends every length
     * and table entry checked). NULL where a backend has none yet: the front end says so. */
    ltk_status (*decode_workspace)(const ltk_decode_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*decode)(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    /* Optional (NULL: mem_alloc / mem_free): the workspace of a call made without one, ordered on
     * `stream`, so that taking and returning it neither waits for the device nor stops a capture. */
    ltk_status (*ws_alloc)(size_t bytes, void *stream, void **ptr);
    void (*ws_free)(void *ptr, void *stream);
    /* The candidate indexer's two operations (ix resolved as the indexer's; on host backends every
     * range checked). NULL where a backend has none yet: the front end says so. */
    ltk_status (*blocks_workspace)(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*blocks)(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    ltk_status (*candidates_workspace)(const ltk_candidates_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*candidates)(const ltk_candidates_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    /* Its decode forms on a device backend (NULL on the host backends: the front end runs
     * decode-candidates.c for them; NULL elsewhere: unsupported). */
    ltk_status (*decode_blocks_workspace)(const ltk_decode_blocks_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*decode_blocks)(const ltk_decode_blocks_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    ltk_status (*decode_candidates_workspace)(const ltk_decode_candidates_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*decode_candidates)(const ltk_decode_candidates_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
    /* The merge of candidate lists (strides resolved). NULL where a backend has none yet. */
    ltk_status (*merge_workspace)(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes);
    ltk_status (*merge)(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
} ltk_backend_i;

/* The convenience path's workspace through the backend (ws_alloc, else mem_alloc). */
static inline ltk_status ltk_ws_take(const ltk_backend_i *bi, size_t bytes, void *stream, void **ptr) {
    return bi->ws_alloc ? bi->ws_alloc(bytes, stream, ptr) : bi->mem_alloc(bytes, ptr);
}
static inline void ltk_ws_give(const ltk_backend_i *bi, void *ptr, void *stream) {
    if (!ptr) return;
    if (bi->ws_free) bi->ws_free(ptr, stream);
    else bi->mem_free(ptr);
}

/* Decode helpers every backend shares (the resolved args of the front end). The length of row t
 * as given: lens[t], or seq_lens[b] - next_n + r + 1 (the front end checks it for host backends). */
static inline int64_t ltk_decode_len_given(const ltk_decode_args *a, int64_t t) {
    return a->lens ? (int64_t)a->lens[t]
                   : (int64_t)a->seq_lens[t / a->next_n] - a->next_n + (int32_t)(t % a->next_n) + 1;
}
/* ... clamped to [0, max_len]: what the backends read */
static inline int32_t ltk_decode_len(const ltk_decode_args *a, int64_t t) {
    const int64_t n = ltk_decode_len_given(a, t);
    return (int32_t)(n < 0 ? 0 : n > a->max_len ? a->max_len : n);
}
/* The block holding position i of request b, and where its keys and scales are. */
static inline int32_t ltk_decode_block(const ltk_decode_args *a, int64_t b, int64_t i) {
    return a->block_table[b * a->bt_stride + i / a->block_kv];
}
static inline const uint8_t *ltk_decode_keys(const ltk_decode_args *a, int32_t block) {
    return a->kv_cache + (size_t)block * (size_t)a->block_stride;
}
static inline const float *ltk_decode_scales(const ltk_decode_args *a, int32_t block) {
    return (const float *)(ltk_decode_keys(a, block) + (size_t)a->block_kv * (size_t)a->D);
}
/* The output of logical position i: itself, or its physical slot. */
static inline int32_t ltk_decode_out(const ltk_decode_args *a, int64_t b, int32_t i) {
    if (!(a->flags & LTK_FLAG_PHYSICAL) || i < 0) return i;
    return ltk_decode_block(a, b, i) * a->block_kv + i % a->block_kv;
}

/* The candidate indexer's decode forms on the host backends (decode-candidates.c; arguments
 * validated, strides resolved). */
ltk_status ltk_decode_blocks_run(const ltk_decode_blocks_args *a, const ltk_exec *e);
ltk_status ltk_decode_candidates_run(const ltk_decode_candidates_args *a, const ltk_exec *e);

/* The backend an exec resolves to (checks availability and the exec fields). */
ltk_status ltk_backend_lookup(const ltk_exec *e, const ltk_backend_i **out);

extern const ltk_backend_i ltk_backend_ref;
extern const ltk_backend_i ltk_backend_cpu;
#ifdef LTK_WITH_CUDA
extern const ltk_backend_i ltk_backend_cuda;
#endif

/* Shared host helpers (src/common.c) ------------------------------------------------------- */
float ltk_e4m3_to_f32(uint8_t v);
float ltk_f16_to_f32(uint16_t v);
float ltk_bf16_to_f32(uint16_t v);
/* Element i of a typed array, as float. */
float ltk_load_f32(const void *p, ltk_dtype dt, int64_t i);
/* Host allocations aligned to 64 bytes (NULL on failure). */
void *ltk_aligned_alloc(size_t bytes);
void ltk_aligned_free(void *p);
/* The memory entries of the host backends' vtables. */
ltk_status ltk_host_alloc(size_t bytes, void **ptr);
ltk_status ltk_host_copy(void *dst, const void *src, size_t bytes);

/* Hot-set update shared by host backends: votes over the top-k output (absolute indices),
 * keeps the `capacity` most voted (votes desc, index desc). `idx` rows of `k` with stride. */
/* Deduplicates `idx` (first occurrence kept, negatives dropped, at most capacity kept) and
 * stores it through `copy` (host->backend memory). */
ltk_status ltk_state_set_host_list(ltk_indexer_state *st, const int32_t *idx, int32_t count,
                                   ltk_status (*copy)(void *dst, const void *src, size_t bytes));
ltk_status ltk_state_vote_host(ltk_indexer_state *st, const int32_t *idx, int64_t rows, int32_t k,
                               int64_t stride, const int32_t *ks, int absolute, void *scratch, size_t scratch_bytes);
/* Scratch bytes ltk_state_vote_host needs for `rows` x `k` indices (it allocates when given less). */
size_t ltk_state_vote_host_scratch(int64_t rows, int32_t k);

#ifdef __cplusplus
}
#endif
#endif
