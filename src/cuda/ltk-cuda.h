/* Entry points shared between the CUDA sources. cuda.cu owns the backend table and the indexer;
 * select.cu owns the exact GPU radix select (also used by the indexer's materialize path and its
 * exact fallback); knn.cu owns the kNN operation. Same contracts as the vtable in ltk-impl.h:
 * arguments validated by the front end, pointers are device pointers, work is enqueued on
 * (cudaStream_t)exec->stream, no host synchronisation unless exec->stats is set. */
#ifndef LTK_CUDA_H
#define LTK_CUDA_H
#include "../ltk-impl.h"
#ifdef __cplusplus
extern "C" {
#endif
ltk_status ltk_cuda_select_workspace(const ltk_select_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltk_cuda_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
ltk_status ltk_cuda_knn_workspace(const ltk_knn_args *a, const ltk_exec *e, size_t *bytes);
ltk_status ltk_cuda_knn(const ltk_knn_args *a, const ltk_exec *e, void *ws, size_t ws_bytes);
#ifdef __cplusplus
}
#endif
#endif
