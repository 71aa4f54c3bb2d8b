"""DeepSeek-V4.1's candidate indexer in vLLM and SGLang: fused drop-ins for the calls they make.

Each engine's source layer writes dense logits and then takes block maxima and a top-k of blocks;
its consumer layers score the listed blocks into dense logits and take a top-k. Here each pair is
one exact call over the FP8 inputs (``blocks_topk`` / ``candidates_topk`` and their decode forms),
and the engine's output conventions are applied to the result: vLLM's request-relative block ids
by rank with the newest block first and ``-1`` padding, SGLang's ascending ids padded with
``INT32_MAX`` with their pool blocks and valid lengths. The contracts are those of the peers' code
(vLLM ``select_candidate_blocks`` and ``sparse_mqa_logits_paged_decode``, vllm#56254; SGLang
``DeepGemmCandidateIndexer``, sglang#39671/#40352); where ours differ (ties, NaN, the alignment of
prefill blocks) the docstrings say so.
"""
import numpy as np

from . import _ffi
from ._arrays import is_tensor
from ._ops import _split_kv, _split_q, blocks_topk, candidates_topk, decode_blocks_topk, decode_candidates_topk

INT32_MAX = 2 ** 31 - 1


def _no_q_scale(q_scale, what):
    if q_scale is not None:
        raise _ffi.UnsupportedError(_ffi.LTK_EUNSUPPORTED,
                                    f"{what}: a q scale (the MXFP4 q path) is not supported; pass FP8 q and "
                                    "q_scale=None with the q scale folded into weights")


def _host_ks(ks):
    """ks on the host (numpy or a CPU tensor), else None (a device tensor: no synchronisation)."""
    if is_tensor(ks):
        return ks.numpy() if ks.device.type == "cpu" else None
    return np.asarray(ks)


def _check_aligned(ks, b, what):
    h = _host_ks(ks)
    if h is not None and h.size and np.any(h % b):
        raise ValueError(f"{what}: cu_seq_len_k_start must be a multiple of block_size={b} (blocks are counted from "
                         "key 0 of the packed keys; see the docstring)")


def _block_offset(ks, b):
    """ks // b as a column, in the namespace of ks."""
    return (ks // b).reshape(-1, 1)


def _rel_in_place(blocks, ks, b):
    """Absolute block ids -> ids relative to each row's start (ks // b), -1 kept."""
    off = _block_offset(ks, b)
    if is_tensor(blocks):
        torch = __import__("torch")
        blocks.copy_(torch.where(blocks >= 0, blocks - off.to(blocks.dtype), blocks))
    else:
        np.subtract(blocks, off.astype(blocks.dtype), out=blocks, where=blocks >= 0)
    return blocks


def fp8_mqa_candidate_blocks(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, topk_blocks, block_size=8,
                             out=None, *, topk=0, backend="auto", algo="fused", workspace=None, stats=None,
                             dtype=None, num_threads=0, stream=None):
    """vLLM's prefill source layer, ``fp8_fp4_mqa_logits`` + ``select_candidate_blocks``, fused::

        logits = fp8_fp4_mqa_logits((q, None), (k, k_scale), weights, ks, ke, clean_logits=False)
        select_candidate_blocks(logits, ks, ke, topk_blocks, block_size, out)

    becomes ``litetopk.fp8_mqa_candidate_blocks((q, None), (k, k_scale), weights, ks, ke,
    topk_blocks, block_size, out)``; no logits are written.

    Returns ``out`` (int32 ``[T, topk_blocks]``, written in place when given): block ids relative to
    the row's start (block ``j`` holds keys ``ks + j * block_size ..``), ranked by the block's
    largest score, the newest block ``(ke - ks - 1) // block_size`` first (+inf, as vLLM pins it),
    ``-1`` padding; a row of at most ``topk_blocks`` blocks lists them ascending (vLLM's order
    there is torch.topk's; the set is the same). ``topk > 0`` also returns the row's ordinary
    top-k (``top_k_per_row_prefill``'s output, relative to ``ks``; sorted, as the blocks are by
    rank) from the same scan.

    Differences from vLLM: ties between blocks go to the lower id (vLLM's follow torch.topk and
    are unspecified); a block whose scores are all NaN ranks last (vLLM's max lets NaN through).
    Blocks are counted from key 0 of the packed keys, so ``ks`` must be a multiple of
    ``block_size`` (checked when ``ks`` is on the host): vLLM's own consumer
    (``candidate_blocks_to_sparse_indices``) adds ``ks // block_size`` to these ids, which agrees
    with its publication only then.
    """
    q = _split_q(q)
    k, k_scale = _split_kv(kv)
    _check_aligned(cu_seq_len_k_start, block_size, "fp8_mqa_candidate_blocks")
    res = blocks_topk(q, k, k_scale, weights, cu_seq_len_k_start, cu_seq_len_k_end, topk_blocks,
                      block_size=block_size, pin_newest=True, by_index=False, topk=topk, relative=True, sorted=True,
                      out=out, backend=backend, algo=algo, workspace=workspace, stats=stats, dtype=dtype,
                      num_threads=num_threads, stream=stream)
    blocks = res[0] if topk > 0 else res
    _rel_in_place(blocks, cu_seq_len_k_start, block_size)
    return res


def fp8_paged_mqa_candidate_blocks(q, kv_cache, weights, seq_lens, block_table, schedule_meta, max_context_len,
                                   topk_blocks, block_size=8, out=None, *, topk=0, physical=False, backend="auto",
                                   algo="fused", stats=None, dtype=None, num_threads=0):
    """vLLM's decode source layer, ``fp8_fp4_paged_mqa_logits`` + ``select_candidate_blocks``,
    fused::

        logits = fp8_fp4_paged_mqa_logits(q, kv_cache, weights, seq_lens, block_table, schedule_meta,
                                          max_model_len, clean_logits=False)
        select_candidate_blocks(logits, None, seq_lens.reshape(-1)[:n], topk_blocks, block_size,
                                candidate_blocks[:n], row_repeat)

    becomes ``litetopk.fp8_paged_mqa_candidate_blocks(q, kv_cache, weights, seq_lens, block_table,
    schedule_meta, max_model_len, topk_blocks, block_size, candidate_blocks[:n])``.

    ``q`` [B, next_n, H, D] e4m3 (or ``(q, None)``); ``seq_lens`` [B] (row ``r`` of a request sees
    ``seq_len - next_n + r + 1`` positions) or [B, next_n]; ``schedule_meta`` is not needed.
    Returns ``out`` (int32 ``[B * next_n, topk_blocks]``): logical block ids from position 0,
    ranked, the row's newest block first, ``-1`` padding, as :func:`fp8_mqa_candidate_blocks`;
    ``topk > 0`` also returns ``top_k_per_row_decode``'s output (``physical`` slots on request).

    Difference from vLLM with next_n > 1: vLLM's call gives every row of a request the request's
    length (``row_repeat``), so it pins the request's newest block in every row; here each row pins
    its own newest visible block and lists only blocks it can see.
    """
    q = _split_q(q)
    return decode_blocks_topk(q, kv_cache, weights, seq_lens, block_table, topk_blocks, block_size=block_size,
                              pin_newest=True, by_index=False, topk=topk, physical=physical, sorted=True, out=out,
                              max_len=max_context_len, backend=backend, algo=algo, stats=stats, dtype=dtype,
                              num_threads=num_threads)


def sparse_mqa_topk_paged_decode(q, q_scale, kv_cache, weights, context_lens, block_table, row_indices,
                                 candidate_blocks, candidate_block_size, sparse_block_kv, topk_tokens,
                                 topk_indices=None, *, backend="auto", algo="fused", stats=None, dtype=None,
                                 num_threads=0, **_engine_only):
    """vLLM's decode consumer ``sparse_mqa_logits_paged_decode`` (sparse logits of the listed
    blocks, top-k, remap to positions) in one exact call, on an FP8 cache.

    Arguments as vLLM passes them: ``q`` [rows, 1, H, D] e4m3 (``q_scale`` must be None: the q scale
    folded into ``weights``), ``kv_cache`` the e4m3 paged cache, ``weights`` fp32 [rows, H],
    ``context_lens`` int32 [rows], ``block_table`` int32 [rows, pages] (a row per query),
    ``candidate_blocks`` int32 [rows, n] (the publication's logical block ids, any order, ``-1``
    padded), ``topk_tokens`` k. ``row_indices``, ``sparse_block_kv`` and the scratch keywords
    (``row_ks``, ``sparse_indices``, ``end``, ``col_indices``, ``workspace``, ``kernel_metadata``)
    are accepted and not needed. Returns ``topk_indices`` (int32 [rows, k], written in place when
    given): request-local logical positions, unsorted, ``-1`` padded, as vLLM's; unlike its top-k
    the set is exact, ties by the lower position.
    """
    _no_q_scale(q_scale, "sparse_mqa_topk_paged_decode")
    q = _split_q(q)
    rows = q.shape[0]
    lens = context_lens.reshape(rows, 1)
    return decode_candidates_topk(q, kv_cache, weights, lens, block_table, candidate_blocks, topk_tokens,
                                  block_size=candidate_block_size, physical=False, sorted=False, out=topk_indices,
                                  backend=backend, algo=algo, stats=stats, dtype=dtype, num_threads=num_threads)


def sparse_mqa_topk_prefill_chunk(q, q_scale, k_quant, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke,
                                  candidate_blocks, candidate_block_size, sparse_block_kv, topk_tokens,
                                  topk_indices=None, *, backend="auto", algo="fused", workspace=None, stats=None,
                                  dtype=None, num_threads=0, stream=None, **_engine_only):
    """vLLM's prefill consumer ``sparse_mqa_logits_prefill_chunk`` in one exact call, on FP8 keys.

    ``q`` [T, H, D] e4m3 (``q_scale`` None), ``k_quant`` [S, D] e4m3, ``k_scale`` fp32 [S],
    ``weights`` fp32 [T, H], ``cu_seqlen_ks`` / ``cu_seqlen_ke`` each row's key range,
    ``candidate_blocks`` int32 [T, n]: the ids :func:`fp8_mqa_candidate_blocks` returns (relative
    to the row's start; ``ks`` a multiple of the block size, as there). Returns ``topk_indices``
    (int32 [T, k]): positions relative to ``ks``, unsorted, ``-1`` padded.
    """
    _no_q_scale(q_scale, "sparse_mqa_topk_prefill_chunk")
    _check_aligned(cu_seqlen_ks, candidate_block_size, "sparse_mqa_topk_prefill_chunk")
    off = _block_offset(cu_seqlen_ks, candidate_block_size)
    if is_tensor(candidate_blocks):
        torch = __import__("torch")
        blocks = torch.where(candidate_blocks >= 0, candidate_blocks + off.to(candidate_blocks.dtype),
                             candidate_blocks)
    else:
        blocks = np.where(candidate_blocks >= 0, candidate_blocks + off.astype(np.int32), candidate_blocks)
        blocks = blocks.astype(np.int32)
    return candidates_topk(q, k_quant, k_scale, weights, cu_seqlen_ks, cu_seqlen_ke, blocks, topk_tokens,
                           block_size=candidate_block_size, relative=True, sorted=False, out=topk_indices,
                           backend=backend, algo=algo, workspace=workspace, stats=stats, dtype=dtype,
                           num_threads=num_threads, stream=stream)


def _page_size(k_cache, page_size, what):
    if k_cache.ndim == 4:
        page_size = k_cache.shape[1]
    if page_size is None:
        raise ValueError(f"{what}: page_size is needed with the 2-D cache view [pages, bytes]")
    return int(page_size)


def candidate_publish_decode(q, k_cache, weights, seq_lens, page_table, topk_blocks=2048, block_size=8, *,
                             page_size=None, topk=0, backend="auto", algo="fused", stats=None, dtype=None,
                             num_threads=0):
    """SGLang's ``DeepGemmCandidateIndexer.publish_decode`` (paged logits, then
    ``candidate_row_lens``, ``amax_topk_blocks`` and ``sort_candidate_blocks``) in one exact call.

    ``q`` [rows, 1, H, D] e4m3, ``k_cache`` the e4m3 paged cache (pages of ``page_size`` tokens, a
    power of two >= ``block_size``), ``weights`` fp32 [rows, H], ``seq_lens`` int32 [rows],
    ``page_table`` int32 [rows, pages]. Returns ``(blocks, phys_blocks, valid_lens)`` as SGLang's
    SparseBlockTable holds them: ``blocks`` int32 [rows, topk_blocks] logical block ids ascending,
    ``INT32_MAX`` padded (the newest block always among them); ``phys_blocks`` the same blocks as
    pool blocks ``page_table[r, id // (page_size / b)] * (page_size / b) + id % (page_size / b)``;
    ``valid_lens`` int32 [rows], the positions they hold. ``topk > 0`` also returns the layer's
    own top-k as physical slots (``topk_transform_paged_v2``'s ``page_indices``). Ties go to the
    lower block id and an all-NaN block ranks last (SGLang's ``fmaxf`` block maxima skip NaN).
    """
    q = _split_q(q)
    rows = q.shape[0]
    lens = seq_lens.reshape(rows, 1)
    page_size = _page_size(k_cache, page_size, "candidate_publish_decode")
    res = decode_blocks_topk(q, k_cache, weights, lens, page_table, topk_blocks, block_size=block_size,
                             pin_newest=True, by_index=True, topk=topk, physical=True, sorted=True,
                             block_kv=page_size if k_cache.ndim == 2 else None, backend=backend, algo=algo,
                             stats=stats, dtype=dtype, num_threads=num_threads)
    blocks = res[0] if topk > 0 else res
    per = page_size // block_size
    if per * block_size != page_size or per & (per - 1):
        raise ValueError(f"candidate_publish_decode: page_size {page_size} over block_size {block_size} must be a "
                         "power of two")
    if is_tensor(blocks):
        torch = __import__("torch")
        ok = blocks >= 0
        ids = torch.where(ok, blocks, torch.zeros_like(blocks))
        phys = torch.gather(page_table, 1, (ids // per).long()) * per + ids % per
        phys = torch.where(ok, phys, torch.full_like(phys, INT32_MAX)).to(torch.int32)
        blocks.copy_(torch.where(ok, blocks, torch.full_like(blocks, INT32_MAX)))
        nb = (seq_lens.to(torch.int64) + block_size - 1) // block_size
        kept = torch.clamp(nb, max=topk_blocks)
        valid = torch.where(seq_lens > 0, block_size * (kept - 1) + (seq_lens.to(torch.int64) - 1) % block_size + 1,
                            torch.zeros_like(nb)).to(torch.int32)
    else:
        ok = blocks >= 0
        ids = np.where(ok, blocks, 0)
        phys = np.take_along_axis(np.asarray(page_table), ids // per, axis=1) * per + ids % per
        phys = np.where(ok, phys, INT32_MAX).astype(np.int32)
        blocks[~ok] = INT32_MAX
        sl = np.asarray(seq_lens).astype(np.int64)
        kept = np.minimum((sl + block_size - 1) // block_size, topk_blocks)
        valid = np.where(sl > 0, block_size * (kept - 1) + (sl - 1) % block_size + 1, 0).astype(np.int32)
    out = (blocks, phys, valid)
    return out + tuple(res[1:]) if topk > 0 else out


def candidate_select_decode(q, k_cache, weights, seq_lens, page_table, blocks, topk, page_indices=None, *,
                            block_size=8, page_size=None, backend="auto", algo="fused", stats=None, dtype=None,
                            num_threads=0):
    """SGLang's ``DeepGemmCandidateIndexer.select_decode`` (sparse logits of the published blocks,
    then ``topk_transform_bf16_small``) in one exact call.

    Inputs as :func:`candidate_publish_decode`, plus its ``blocks`` (ascending logical ids, the
    ``INT32_MAX`` padding lists nothing). Returns ``page_indices`` (int32 [rows, topk], written in
    place when given): physical index-pool slots, unordered, ``-1`` padded, the exact top-k of the
    listed positions with ties by the lower position (SGLang's are arbitrary, its scores bf16).
    """
    q = _split_q(q)
    rows = q.shape[0]
    lens = seq_lens.reshape(rows, 1)
    bkv = _page_size(k_cache, page_size, "candidate_select_decode") if k_cache.ndim == 2 else None
    return decode_candidates_topk(q, k_cache, weights, lens, page_table, blocks, topk, block_size=block_size,
                                  physical=True, sorted=False, out=page_indices, block_kv=bkv, backend=backend, algo=algo,
                                  stats=stats, dtype=dtype, num_threads=num_threads)
