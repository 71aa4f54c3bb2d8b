"""litetopk: exact fused score + top-k (DSA/CSA lightning indexer, kNN, select) for numpy and torch.

A thin ctypes binding over ``liblitetopk.so``. All operations share one order: score descending,
equal scores by the lower index, ``-0.0 == +0.0``, NaN last; rows short of k valid entries are
padded with index -1 and score -inf. See ``include/litetopk.h`` for the C contract.
"""
from ._ffi import (BackendUnavailableError, CudaError, FileError, InternalError, InvalidArgumentError,
                   LiteTopKError, OutOfMemoryError, UnsupportedError, WorkspaceTooSmallError, candidate_paths,
                   library_path)
from ._ops import (IndexerState, Stats, backend_available, backends, blocks_topk, candidates_topk, decode_blocks_topk,
                   decode_candidates_topk, decode_topk,
                   fp8_mqa_topk, fp8_paged_mqa_topk, indexer_topk, info, knn_topk, merge_topk, prefill, select_topk,
                   stable_topk_from_candidates, workspace_size)
from ._v41 import (candidate_publish_decode, candidate_select_decode, fp8_mqa_candidate_blocks,
                   fp8_paged_mqa_candidate_blocks, sparse_mqa_topk_paged_decode, sparse_mqa_topk_prefill_chunk)

__version__ = "0.1.0"

__all__ = [
    "indexer_topk", "fp8_mqa_topk", "decode_topk", "blocks_topk", "candidates_topk", "decode_blocks_topk", "decode_candidates_topk", "fp8_paged_mqa_topk",
    "fp8_mqa_candidate_blocks", "fp8_paged_mqa_candidate_blocks", "sparse_mqa_topk_paged_decode",
    "sparse_mqa_topk_prefill_chunk", "candidate_publish_decode", "candidate_select_decode", "knn_topk", "select_topk", "merge_topk", "stable_topk_from_candidates", "prefill", "IndexerState", "Stats", "workspace_size",
    "info", "backends", "backend_available", "library_path", "candidate_paths",
    "LiteTopKError", "InvalidArgumentError", "UnsupportedError", "BackendUnavailableError", "OutOfMemoryError",
    "WorkspaceTooSmallError", "CudaError", "InternalError", "FileError",
]
