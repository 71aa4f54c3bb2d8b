"""The V4.1 engine drop-ins (_v41.py) against numpy oracles of the engines' conventions: vLLM's
select_candidate_blocks (request-relative ids by rank, the newest block first, -1 padding) and its
consumers, SGLang's SparseBlockTable (ascending ids, INT32_MAX padding, pool blocks, valid lengths)
and its physical-slot consumer. Scores are exact (dyadic grids, e4m3 codes of +-{0.5, 1, 2}), so
the oracles rank in float64 with ties by the lower id, as the contract does."""
import numpy as np
import pytest

import litetopk
from test_candidates import T, grid_problem, order, paged_problem, request_keys, scores64

INT32_MAX = 2 ** 31 - 1


def aligned_problem(rng, b):
    q, kv, w, lo, hi = grid_problem(rng)
    lo = (lo // b * b).astype(np.int32)
    hi = np.maximum(hi, lo).astype(np.int32)
    hi[0] = lo[0]  # an empty row
    hi[1] = lo[1] + 3 * b  # a full newest block
    return q, kv, w, lo, hi


def vllm_blocks(sc, lo, hi, K, b):
    """select_candidate_blocks on exact scores: relative block j = keys lo + j b .., ranked by the
    block's max (ties by the lower id), block (hi - lo - 1) // b first, -1 padding."""
    out = np.full((len(lo), K), -1, np.int32)
    for t in range(len(lo)):
        n = int(hi[t] - lo[t])
        if n <= 0:
            continue
        nb = (n + b - 1) // b
        vals = [max(sc[t, lo[t] + j * b:min(hi[t], lo[t] + (j + 1) * b)]) for j in range(nb)]
        ids = order(vals, list(range(nb)))
        ids.remove(nb - 1)
        ids.insert(0, nb - 1)
        out[t, :min(nb, K)] = ids[:K]
    return out


def listed_topk(sc, lo, hi, rel_blocks, k, b):
    """Exact top-k (relative positions, -1 padded, as a sorted set) of the listed blocks' keys."""
    res = []
    for t in range(len(lo)):
        keys = sorted({lo[t] + j * b + o for j in rel_blocks[t] if j >= 0 for o in range(b)
                       if lo[t] + j * b + o < hi[t]})
        top = order([sc[t, s] for s in keys], keys)[:k]
        res.append(sorted(s - lo[t] for s in top))
    return res


@pytest.mark.parametrize("b,K", [(8, 5), (8, 64), (4, 9)])
def test_vllm_prefill_publish_and_consume(b, K):
    rng = np.random.default_rng(100 + b + K)
    q, kv, w, lo, hi = aligned_problem(rng, b)
    sc = scores64(q, kv, w)
    want = vllm_blocks(sc, lo, hi, K, b)
    out = np.full((T, K), 77, np.int32)  # poisoned: every slot must be written
    got = litetopk.fp8_mqa_candidate_blocks(q, kv, w, lo, hi, K, b, out, backend="cpu")
    assert got is out
    assert np.array_equal(out, want)
    blocks, own = litetopk.fp8_mqa_candidate_blocks(q, kv, w, lo, hi, K, b, topk=6, backend="cpu")
    assert np.array_equal(blocks, want)
    assert np.array_equal(own, litetopk.indexer_topk(q, kv, None, w, lo, hi, 6, sorted=True, backend="cpu"))
    k = 7
    ti = np.full((T, k), 77, np.int32)
    litetopk.sparse_mqa_topk_prefill_chunk(q, None, kv, None, w, lo, hi, want, b, b, k, ti, backend="cpu")
    for t, s in enumerate(listed_topk(sc, lo, hi, want, k, b)):
        assert sorted(x for x in ti[t].tolist() if x >= 0) == s, t
        assert (ti[t] >= 0).sum() == len(s)


def test_vllm_prefill_rejects_unaligned_starts():
    rng = np.random.default_rng(4)
    q, kv, w, lo, hi = grid_problem(rng)
    lo[2] = 8 * (lo[2] // 8) + 3
    with pytest.raises(ValueError, match="multiple of block_size"):
        litetopk.fp8_mqa_candidate_blocks(q, kv, w, lo, hi, 4, 8, backend="cpu")
    with pytest.raises(litetopk.UnsupportedError):
        litetopk.sparse_mqa_topk_prefill_chunk(q, np.ones(1), kv, None, w, lo, hi, np.zeros((T, 2), np.int32), 8,
                                               8, 4, backend="cpu")


def decode_problem(seed, B=3, next_n=2, bkv=16):
    rng = np.random.default_rng(seed)
    q, cache, w, lens, table = paged_problem(rng, B, next_n, 4, 16, bkv)
    lens[0, 0] = 0
    lens[1, 1] = 48  # a full newest block of 8
    return q, cache, w, lens, table


@pytest.mark.parametrize("K", [3, 40])
def test_vllm_decode_publish_and_consume(K):
    B, next_n, D, bkv, b = 3, 2, 16, 16, 8
    q, cache, w, lens, table = decode_problem(9 + K, B, next_n, bkv)
    for be in ("cpu", "ref"):
        got = litetopk.fp8_paged_mqa_candidate_blocks(q, cache.reshape(cache.shape[0], bkv, 1, D + 4), w, lens, table,
                                                      None, 0, K, b, dtype="e4m3", backend=be)
        for bb in range(B):
            kv, sc = request_keys(cache, table, bb, D, bkv)
            rs = slice(bb * next_n, (bb + 1) * next_n)
            ks, ke = np.zeros(next_n, np.int32), lens[bb].copy()
            # the oracle ranks the ref backend's scores of every key (exact on this grid)
            full = litetopk.indexer_topk(q[bb], kv, sc, w[rs], ks, np.full(next_n, kv.shape[0], np.int32),
                                         kv.shape[0], relative=False, sorted=True, return_scores=True, dtype="e4m3",
                                         backend="ref")
            s64 = np.full((next_n, kv.shape[0]), -np.inf)
            for r in range(next_n):
                s64[r, full[0][r]] = full[1][r]
            assert np.array_equal(got[rs], vllm_blocks(s64, ks, ke, K, b)), (be, bb)
    # the consumer: vLLM's per-row layout (q [rows, 1, H, D], a table row per query)
    rows = B * next_n
    qr = q.reshape(rows, 1, *q.shape[2:])
    tr = np.repeat(table, next_n, axis=0)
    k = 9
    ti = np.full((rows, k), 77, np.int32)
    litetopk.sparse_mqa_topk_paged_decode(qr, None, cache.reshape(cache.shape[0], bkv, 1, D + 4), w, lens.reshape(-1),
                                          tr, np.arange(rows, dtype=np.int32), got, b, b, k, ti, dtype="e4m3",
                                          backend="cpu")
    want = litetopk.decode_candidates_topk(q, cache, w, lens, table, got, k, block_size=b, block_kv=bkv, sorted=True,
                                           dtype="e4m3", backend="ref")
    for t in range(rows):
        assert sorted(x for x in ti[t].tolist() if x >= 0) == sorted(x for x in want[t].tolist() if x >= 0), t


def test_sglang_decode_table_and_select():
    B, next_n, D, bkv, b, K = 3, 2, 16, 16, 8, 5
    q, cache, w, lens, table = decode_problem(31, B, next_n, bkv)
    rows = B * next_n
    qr = q.reshape(rows, 1, *q.shape[2:])
    tr = np.repeat(table, next_n, axis=0)
    sl = lens.reshape(-1).copy()
    cache4 = cache.reshape(cache.shape[0], bkv, 1, D + 4)
    blocks, phys, valid = litetopk.candidate_publish_decode(qr, cache4, w, sl, tr, K, b, dtype="e4m3", backend="cpu")
    ranked = litetopk.fp8_paged_mqa_candidate_blocks(q, cache4, w, lens, table, None, 0, K, b, dtype="e4m3",
                                                     backend="cpu")
    per = bkv // b
    for t in range(rows):
        ids = sorted(x for x in ranked[t].tolist() if x >= 0)
        n = len(ids)
        assert blocks[t].tolist() == ids + [INT32_MAX] * (K - n), t
        assert phys[t].tolist() == [tr[t, i // per] * per + i % per for i in ids] + [INT32_MAX] * (K - n)
        nb = (sl[t] + b - 1) // b
        assert valid[t] == (b * (min(nb, K) - 1) + (sl[t] - 1) % b + 1 if sl[t] > 0 else 0)
    k = 6
    pi = np.full((rows, k), 77, np.int32)
    litetopk.candidate_select_decode(qr, cache4, w, sl, tr, blocks, k, pi, dtype="e4m3", backend="cpu")
    want = litetopk.decode_candidates_topk(q, cache, w, lens, table, np.where(blocks == INT32_MAX, -1, blocks), k,
                                           block_size=b, block_kv=bkv, physical=True, sorted=True, dtype="e4m3",
                                           backend="ref")
    for t in range(rows):
        assert sorted(pi[t].tolist()) == sorted(want[t].tolist()), t


def test_torch_paths_equal_numpy():
    """The torch branches of the conventions (relative ids, INT32_MAX padding, pool blocks, valid
    lengths) give the numpy branches' arrays, on CPU tensors."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(77)
    q, kv, w, lo, hi = aligned_problem(rng, 8)
    want = litetopk.fp8_mqa_candidate_blocks(q, kv, w, lo, hi, 6, 8, backend="cpu")
    got = litetopk.fp8_mqa_candidate_blocks(*(torch.from_numpy(x) for x in (q, kv, w, lo, hi)), 6, 8, backend="cpu")
    assert np.array_equal(got.numpy(), want)
    B, next_n, D, bkv = 3, 2, 16, 16
    qd, cache, wd, lens, table = decode_problem(5, B, next_n, bkv)
    rows = B * next_n
    args = (qd.reshape(rows, 1, *qd.shape[2:]), cache.reshape(cache.shape[0], bkv, 1, D + 4), wd, lens.reshape(-1).copy(),
            np.repeat(table, next_n, axis=0))
    want = litetopk.candidate_publish_decode(*args, 5, 8, dtype="e4m3", backend="cpu")
    got = litetopk.candidate_publish_decode(*(torch.from_numpy(np.ascontiguousarray(x)) for x in args), 5, 8,
                                            dtype="e4m3", backend="cpu")
    for g, e in zip(got, want):
        assert np.array_equal(g.numpy(), e)
