"""decode_topk / fp8_paged_mqa_topk: the paged cache as vLLM lays it out, against a float64 oracle."""
import numpy as np
import pytest

import litetopk
from oracle import e4m3_decode, indexer_scores


def make_cache(rng, B, next_n, H, D, block_kv, max_blocks, lens_per_row=None, grid=True):
    """vLLM's cache view [num_blocks, block_kv, 1, D + 4] with scattered pages, and what it holds."""
    num_blocks = B * max_blocks + 2
    cache = np.zeros((num_blocks, block_kv * (D + 4)), np.uint8)
    if grid:  # e4m3 codes of exponent 6..8: every score exact in float32 too
        keys = ((rng.integers(0, 2, (num_blocks, block_kv, D)) << 7) | ((6 + rng.integers(0, 3, (num_blocks, block_kv, D))) << 3)
                | rng.integers(0, 8, (num_blocks, block_kv, D))).astype(np.uint8)
    else:
        keys = rng.integers(0, 0x7E, (num_blocks, block_kv, D), dtype=np.uint8) | (rng.integers(0, 2, (num_blocks, block_kv, D), dtype=np.uint8) << 7)
    scales = (2.0 ** rng.integers(-2, 3, (num_blocks, block_kv))).astype(np.float32)
    cache[:, :block_kv * D] = keys.reshape(num_blocks, -1)
    cache[:, block_kv * D:] = scales.view(np.uint8).reshape(num_blocks, -1)
    table = rng.permutation(num_blocks)[:B * max_blocks].reshape(B, max_blocks).astype(np.int32)
    q = ((rng.integers(0, 2, (B, next_n, H, D)) << 7) | ((6 + rng.integers(0, 3, (B, next_n, H, D))) << 3)
         | rng.integers(0, 8, (B, next_n, H, D))).astype(np.uint8)
    w = (rng.integers(-8, 9, (B * next_n, H)) * 0.25).astype(np.float32)
    return cache.reshape(num_blocks, block_kv, 1, D + 4), keys, scales, table, q, w


def oracle(keys, scales, table, q, w, lens, k, block_kv):
    """Per row: the sorted (position, score) top-k by the ORDER, from the logical view of the cache."""
    B, next_n, H, D = q.shape
    out = []
    for b in range(B):
        pos = np.arange(table.shape[1] * block_kv)
        blk = table[b, pos // block_kv]
        kv = e4m3_decode(keys[blk, pos % block_kv])
        sc = scales[blk, pos % block_kv]
        s = indexer_scores(e4m3_decode(q[b]), kv, sc, w[b * next_n:(b + 1) * next_n])
        for r in range(next_n):
            n = lens[b, r]
            row = s[r, :n]
            order = sorted(range(n), key=lambda i: (np.isnan(row[i]), -row[i] if not np.isnan(row[i]) else 0, i))[:k]
            out.append((order, row[order]))
    return out


@pytest.mark.parametrize("block_kv,next_n", [(64, 1), (32, 2), (64, 4)])
def test_decode_matches_oracle(rng, block_kv, next_n):
    B, H, D, k, max_blocks = 3, 4, 32, 20, 5
    cache, keys, scales, table, q, w = make_cache(rng, B, next_n, H, D, block_kv, max_blocks)
    cap = max_blocks * block_kv
    lens = rng.integers(0, cap + 1, (B, next_n)).astype(np.int32)
    lens[0, 0] = k - 1  # short rows too
    want = oracle(keys, scales, table, q, w, lens, k, block_kv)
    for algo in ("fused", "materialize"):
        idx, sc = litetopk.decode_topk(q, cache, w, lens, table, k, sorted=True, return_scores=True, dtype="e4m3",
                                       backend="cpu", algo=algo)
        assert idx.shape == (B * next_n, k) and idx.dtype == np.int32
        for t, (order, vals) in enumerate(want):
            n = len(order)
            np.testing.assert_array_equal(idx[t, :n], order)
            np.testing.assert_array_equal(sc[t, :n], vals.astype(np.float32))
            assert (idx[t, n:] == -1).all() and np.isneginf(sc[t, n:]).all()
    # physical slots: the table's mapping of the same positions
    phys = litetopk.decode_topk(q, cache, w, lens, table, k, sorted=True, physical=True, dtype="e4m3", backend="cpu")
    logical = litetopk.decode_topk(q, cache, w, lens, table, k, sorted=True, dtype="e4m3", backend="cpu")
    rows_b = np.repeat(np.arange(B), next_n)[:, None]
    mapped = np.where(logical >= 0, table[rows_b, np.maximum(logical, 0) // block_kv] * block_kv
                      + np.maximum(logical, 0) % block_kv, -1)
    np.testing.assert_array_equal(phys, mapped)


def test_fp8_paged_mqa_topk_vllm_call(rng):
    """vLLM's decode arguments: 1-D seq_lens (row r sees seq_len - next_n + r + 1), max_model_len, the
    schedule metadata ignored; unsorted with vLLM's short-row rule."""
    B, next_n, H, D, k, block_kv, max_blocks = 4, 2, 8, 32, 16, 64, 4
    cache, keys, scales, table, q, w = make_cache(rng, B, next_n, H, D, block_kv, max_blocks)
    seq_lens = np.array([5, 100, 256, 17], np.int32)
    got = litetopk.fp8_paged_mqa_topk((q, None), cache, w, seq_lens, table, None, 1 << 20, k, dtype="e4m3")
    lens = np.maximum(seq_lens[:, None] - next_n + np.arange(next_n)[None, :] + 1, 0).astype(np.int32)
    want = oracle(keys, scales, table, q, w, lens, k, block_kv)
    for t, (order, _) in enumerate(want):
        n = lens.reshape(-1)[t]
        if n <= k:
            np.testing.assert_array_equal(got[t], np.r_[np.arange(n), -np.ones(k - n)].astype(np.int32))
        else:
            assert set(got[t].tolist()) == set(order)
    n = litetopk.workspace_size("fp8_paged_mqa", (q, None), cache, w, seq_lens, table, None, 1 << 20, k, dtype="e4m3")
    assert n >= 0


def test_decode_errors(rng):
    B, next_n, H, D, k, block_kv, max_blocks = 2, 1, 2, 16, 4, 32, 2
    cache, keys, scales, table, q, w = make_cache(rng, B, next_n, H, D, block_kv, max_blocks)
    lens = np.array([[10], [70]], np.int32)  # 70 > max_blocks * block_kv
    with pytest.raises(litetopk.InvalidArgumentError, match="exceeds max_len"):
        litetopk.decode_topk(q, cache, w, lens, table, k, dtype="e4m3", backend="cpu")
    bad = table.copy()
    bad[1, 0] = 10_000
    with pytest.raises(litetopk.InvalidArgumentError, match="outside the cache"):
        litetopk.decode_topk(q, cache, w, np.array([[1], [2]], np.int32), bad, k, dtype="e4m3", backend="cpu")
    with pytest.raises(ValueError, match="lens"):
        litetopk.decode_topk(q, cache, w, np.zeros((3,), np.int32), table, k, dtype="e4m3", backend="cpu")
    with pytest.raises(TypeError, match="dtype='e4m3'"):
        litetopk.decode_topk(q, cache, w, np.array([[1], [2]], np.int32), table, k, backend="cpu")


@pytest.mark.parametrize("next_n,physical", [(1, False), (2, True)])
def test_decode_cuda_matches_cpu(rng, next_n, physical):
    """The CUDA kernel (torch tensors) against the CPU backend (numpy) bit for bit. The scores must be
    exact on both: Hopper's FP8 tensor cores accumulate with fewer bits than fp32, so each head dot
    here is a sum of four +-1 products (q is zero past its first four dimensions) and four heads are
    weighted by quarters; the scales are powers of two."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not litetopk.backend_available("cuda"):
        pytest.skip("no CUDA device")
    B, H, D, k, block_kv, max_blocks = 3, 64, 128, 20, 64, 5
    cache, keys, scales, table, q, w = make_cache(rng, B, next_n, H, D, block_kv, max_blocks)
    one = np.uint8(0x38)  # e4m3 1.0; 0xB8 is -1.0
    q[...] = 0
    q[..., :4] = one | (rng.integers(0, 2, q[..., :4].shape) << 7).astype(np.uint8)
    flat = cache.reshape(cache.shape[0], -1)
    assert np.shares_memory(flat, cache)
    for b in range(flat.shape[0]):  # each block's keys, a view of its first block_kv * D bytes
        kb = flat[b, :block_kv * D].reshape(block_kv, D)
        kb[:, :4] = one | (rng.integers(0, 2, (block_kv, 4)) << 7).astype(np.uint8)
    w[:, 4:] = 0.0
    lens = rng.integers(0, max_blocks * block_kv + 1, (B, next_n)).astype(np.int32)
    lens[0, 0] = k - 1
    kw = dict(sorted=True, return_scores=True, dtype="e4m3", physical=physical)
    want_i, want_s = litetopk.decode_topk(q, cache, w, lens, table, k, backend="cpu", **kw)
    dev = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (q, cache, w, lens, table)]
    got_i, got_s = litetopk.decode_topk(*dev, k, **kw)
    np.testing.assert_array_equal(got_i.cpu().numpy(), want_i)
    np.testing.assert_array_equal(got_s.cpu().numpy().view(np.uint32), want_s.view(np.uint32))
