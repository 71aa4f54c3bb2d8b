/* What every CUDA operation shares: the entry points of the operations (cuda.cu holds the backend
 * table that calls them; the GPU tests call them directly), the one CUDA error check, the
 * stream-capture query, the workspace alignment, the device facts and the tensor-map encoder (the
 * functions implemented in cuda.cu). Same contracts as the vtable in ltk-impl.h: arguments
 * validated by the front end, pointers are device pointers, work is enqueued on
 * (cudaStream_t)exec->stream, no host synchronisation unless exec->stats is set.
 *
 * Host-only and C-compatible: the GPU tests (C11) include it too. */
#ifndef LTK_CUDA_COMMON_CUH
#define LTK_CUDA_COMMON_CUH

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "../ltk-impl.h"
#include "../ltk-tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the operations ----------------------------------------------------------------------- */
ltk_status ltk_cuda_indexer_workspace(const ltk_indexer_args *a, const ltk_exec *e, size_t *bytes); /* indexer.cu */
ltk_status ltk_cuda_indexer(const ltk_indexer_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_select_workspace(const ltk_select_args *a, const ltk_exec *e, size_t *bytes); /* select.cu */
ltk_status ltk_cuda_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_knn_workspace(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes); /* knn.cu */
ltk_status ltk_cuda_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_decode_workspace(const ltk_decode_args *a, const ltk_exec *e, size_t *bytes); /* decode.cu */
ltk_status ltk_cuda_decode(const ltk_decode_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_blocks_workspace(const ltk_blocks_args *a, const ltk_exec *e, size_t *bytes); /* candidates.cu */
ltk_status ltk_cuda_blocks(const ltk_blocks_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_candidates_workspace(const ltk_candidates_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltk_cuda_candidates(const ltk_candidates_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_decode_blocks_workspace(const ltk_decode_blocks_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltk_cuda_decode_blocks(const ltk_decode_blocks_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_decode_candidates_workspace(const ltk_decode_candidates_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltk_cuda_decode_candidates(const ltk_decode_candidates_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_merge_workspace(const ltk_merge_args *a, const ltk_exec *e, size_t *bytes); /* merge.cu */
ltk_status ltk_cuda_merge(const ltk_merge_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);

/* ---- errors ------------------------------------------------------------------------------- */
/* Records a failed CUDA call for ltk_last_error() ("what: message (name) at file:line") and returns
 * LTK_ENOMEM for an allocation failure, else LTK_ECUDA. Clears the error the runtime keeps for
 * cudaGetLastError (a launch configuration error is not sticky), so that the next call starts clean. */
ltk_status ltk_cuda_error(cudaError_t e, const char *what, const char *file, int line);

/* The one check of a CUDA runtime call (after a launch: LTK_CUDA_TRY(cudaGetLastError())). */
#define LTK_CUDA_TRY(expr)                                                             \
    do {                                                                               \
        cudaError_t ltk_ce_ = (expr);                                                  \
        if (ltk_ce_ != cudaSuccess) return ltk_cuda_error(ltk_ce_, #expr, __FILE__, __LINE__); \
    } while (0)

/* 1 if the stream is being captured into a graph: then nothing may wait on the host, and device-side
 * counts cannot be read to skip launches (the graph must hold the worst case). */
static inline int ltk_stream_capturing(cudaStream_t st) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cs) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1; /* be conservative */
    }
    return cs != cudaStreamCaptureStatusNone;
}

/* Workspace regions start on 256-byte boundaries: cudaMalloc's alignment, which TMA sources and
 * 16-byte vector loads rely on. */
static inline size_t ltk_al256(size_t x) { return (x + 255) & ~(size_t)255; }

/* ---- the device --------------------------------------------------------------------------- */
typedef struct ltk_cuda_dev {
    int dev;        /* cudaGetDevice() */
    int nsm;        /* multiprocessors */
    int major, minor; /* compute capability */
    int smem_optin; /* dynamic + static shared memory a block may opt in to (bytes) */
} ltk_cuda_dev;
/* Facts of the current device, queried once per device and then kept (they cannot change while the
 * process runs); the device itself is asked for on every call (the caller may switch devices). */
ltk_status ltk_cuda_device(ltk_cuda_dev *d);

/* Lets kernel `fn` launch with up to `bytes` of dynamic shared memory on the current device
 * (cudaFuncAttributeMaxDynamicSharedMemorySize, set once a (kernel, device) and raised when a launch
 * needs more). */
ltk_status ltk_cuda_smem_reserve(const void *fn, size_t bytes);

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link); NULL when the
 * driver has none. */
void *ltk_cuda_tmap_encoder(void);

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) && defined(__cplusplus)
/* Launches kernel k on st; with pdl (sm_90+) it may start while the stream's previous kernel
 * finishes (cudaLaunchAttributeProgrammaticStreamSerialization): k calls ltk_pdl_wait (ptx.cuh)
 * before it touches global memory. Why: a decode step is five dependent kernels of 3-280 us, and
 * each boundary cost a launch latency (B = 64 at 64K: the kernels' ncu durations add to 219 us,
 * the call took 237). Captured into a graph, the edge stays programmatic. */
template <typename... P, typename... A>
static inline cudaError_t ltk_launch_pdl(int pdl, void (*k)(P...), dim3 grid, dim3 block, size_t smem,
                                         cudaStream_t st, A &&...args) {
    cudaLaunchConfig_t c = {};
    c.gridDim = grid;
    c.blockDim = block;
    c.dynamicSmemBytes = smem;
    c.stream = st;
    cudaLaunchAttribute at[1] = {};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = at;
    c.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&c, k, static_cast<A &&>(args)...);
}
#endif
#endif
