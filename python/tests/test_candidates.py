"""blocks_topk / candidates_topk (DeepSeek-V4.1's candidate indexer) on numpy arrays: the CPU backend
against the ref backend bit for bit on dyadic grids (every score exact in fp32 and float64), against
a numpy brute force of the contract, and the consumer listing every block against indexer_topk."""
import numpy as np
import pytest

import litetopk

T, S, H, D = 7, 300, 3, 8


def grid_problem(rng, S=S):
    q = (rng.integers(-3, 4, (T, H, D)) * 0.5).astype(np.float32)
    kv = rng.integers(-2, 3, (S, D)).astype(np.float32)
    w = (rng.integers(-1, 3, (T, H)) * 0.5).astype(np.float32)
    lo = rng.integers(0, S // 3, T).astype(np.int32)
    hi = np.maximum(lo, rng.integers(S // 2, S + 1, T)).astype(np.int32)
    return q, kv, w, lo, hi


def scores64(q, kv, w):
    dots = np.einsum("thd,sd->ths", q.astype(np.float64), kv.astype(np.float64))
    return np.einsum("th,ths->ts", w.astype(np.float64), np.maximum(dots, 0.0))


def order(vals, ids):
    """ids sorted by (value desc, id asc)."""
    return [i for _, i in sorted(zip(vals, ids), key=lambda p: (-p[0], p[1]))]


@pytest.mark.parametrize("b,nb,pin", [(8, 10, True), (8, 10, False), (3, 200, True), (16, 4, True)])
def test_blocks_match_ref_and_brute(b, nb, pin):
    rng = np.random.default_rng(b * 100 + nb)
    q, kv, w, lo, hi = grid_problem(rng)
    got = {be: litetopk.blocks_topk(q, kv, None, w, lo, hi, nb, block_size=b, pin_newest=pin, by_index=False,
                                    return_scores=True, backend=be) for be in ("cpu", "ref")}
    assert np.array_equal(got["cpu"][0], got["ref"][0])
    assert np.array_equal(got["cpu"][1], got["ref"][1])
    sc = scores64(q, kv, w)
    for t in range(T):
        j0, j1 = lo[t] // b, (hi[t] - 1) // b if hi[t] > lo[t] else lo[t] // b - 1
        ids = list(range(j0, j1 + 1))
        vals = [max(sc[t, max(lo[t], j * b):min(hi[t], (j + 1) * b)]) for j in ids]
        want = order(vals, ids)
        if pin and ids and hi[t] % b:
            want.remove(j1)
            want.insert(0, j1)
        want = (want + [-1] * nb)[:nb]
        assert got["cpu"][0][t].tolist() == want, t


def test_blocks_by_index_and_topk():
    """by_index (the default) orders both outputs by index: the blocks, and the ordinary top-k, which
    is the indexer's set."""
    rng = np.random.default_rng(7)
    q, kv, w, lo, hi = grid_problem(rng)
    blocks, idx = litetopk.blocks_topk(q, kv, None, w, lo, hi, 12, topk=20, backend="cpu")
    ref = litetopk.indexer_topk(q, kv, None, w, lo, hi, 20, sorted=True, backend="cpu")
    for t in range(T):
        row = [x for x in blocks[t].tolist() if x >= 0]
        assert row == sorted(row)
        assert idx[t].tolist() == sorted(ref[t].tolist(), key=lambda x: (x < 0, x))


def test_candidates_all_blocks_is_indexer():
    rng = np.random.default_rng(3)
    q, kv, w, lo, hi = grid_problem(rng)
    nbk = (S + 7) // 8
    lists = np.tile(np.arange(nbk, dtype=np.int32)[::-1], (T, 1))
    for be in ("cpu", "ref"):
        i1, s1 = litetopk.candidates_topk(q, kv, None, w, lo, hi, lists, 25, sorted=True, return_scores=True, backend=be)
        i2, s2 = litetopk.indexer_topk(q, kv, None, w, lo, hi, 25, sorted=True, return_scores=True, backend=be)
        assert np.array_equal(i1, i2) and np.array_equal(s1, s2)


def test_candidates_lists_brute():
    rng = np.random.default_rng(11)
    q, kv, w, lo, hi = grid_problem(rng)
    nbk = (S + 7) // 8
    lists = rng.integers(-1, nbk + 3, (T, 16)).astype(np.int32)  # -1, repeats, ids past the keys
    k = 30
    got = litetopk.candidates_topk(q, kv, None, w, lo, hi, lists, k, relative=False, sorted=True, backend="cpu")
    ref = litetopk.candidates_topk(q, kv, None, w, lo, hi, lists, k, relative=False, sorted=True, backend="ref")
    assert np.array_equal(got, ref)
    sc = scores64(q, kv, w)
    for t in range(T):
        keys = sorted({s for j in lists[t] if 0 <= j < nbk for s in range(j * 8, (j + 1) * 8) if lo[t] <= s < hi[t]})
        want = (order([sc[t, s] for s in keys], keys) + [-1] * k)[:k]
        assert got[t].tolist() == want, t


def test_bad_blocks_argument():
    rng = np.random.default_rng(5)
    q, kv, w, lo, hi = grid_problem(rng)
    with pytest.raises(TypeError):
        litetopk.candidates_topk(q, kv, None, w, lo, hi, np.zeros((T, 4), np.int64), 5, backend="cpu")
    with pytest.raises(ValueError):
        litetopk.candidates_topk(q, kv, None, w, lo, hi, np.zeros((T + 1, 4), np.int32), 5, backend="cpu")
    with pytest.raises(litetopk.InvalidArgumentError):
        litetopk.blocks_topk(q, kv, None, w, lo, hi, 4, block_size=0, backend="cpu")
