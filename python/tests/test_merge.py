"""merge_topk (key sharding's merge) on numpy arrays, and torch CPU tensors where torch is installed:
both host backends against a brute force of the contract (ties by the lower id, NaN last, -0 as +0,
-1 padding) on both layouts, and a G-way sharded select (contiguous and interleaved shards) merged
equal to the unsharded select_topk."""
import numpy as np
import pytest

import litetopk

GRID = np.array([3.0, 1.5, 0.0, -0.0, -2.0, np.inf, -np.inf, np.nan], np.float32)


def brute(scores, ids, k):
    """(values, ids) [rows, k] of the contract, rows of candidates side by side."""
    rows = scores.shape[0]
    vo = np.full((rows, k), -np.inf, np.float32)
    io = np.full((rows, k), -1, np.int32)
    for r in range(rows):
        c = [(s, i) for s, i in zip(scores[r], ids[r]) if i >= 0]
        c.sort(key=lambda p: (np.isnan(p[0]), -p[0] if not np.isnan(p[0]) else 0.0, p[1]))
        for j, (s, i) in enumerate(c[:k]):
            vo[r, j], io[r, j] = s + np.float32(0.0), i
    return vo, io


def problem(rng, rows, G, L, pad=0.1):
    scores = GRID[rng.integers(0, len(GRID), (G, rows, L))]
    ids = np.empty((G, rows, L), np.int32)
    for r in range(rows):
        ids[:, r, :] = rng.permutation(4 * G * L)[: G * L].reshape(G, L)
    ids[rng.random((G, rows, L)) < pad] = -1
    return scores, ids


def same(a, b):
    return np.array_equal(a.view(np.uint32), b.view(np.uint32)) or np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("backend", ["ref", "cpu"])
@pytest.mark.parametrize("G,L,k", [(1, 5, 3), (4, 50, 64), (8, 40, 200), (3, 300, 100)])
def test_merge_vs_brute(backend, G, L, k):
    rng = np.random.default_rng(G * 1000 + L + k)
    sc, ids = problem(rng, 5, G, L)
    flat_s = np.ascontiguousarray(sc.transpose(1, 0, 2).reshape(5, G * L))
    flat_i = np.ascontiguousarray(ids.transpose(1, 0, 2).reshape(5, G * L))
    wv, wi = brute(flat_s, flat_i, k)
    for s, i in ((flat_s, flat_i), (sc, ids)):  # [rows, G k] and rank-major [G, rows, k]
        v, o = litetopk.merge_topk(s, i, k, backend=backend)
        assert np.array_equal(o, wi)
        assert np.array_equal(v, wv, equal_nan=True)
        assert same(v[~np.isnan(v)], wv[~np.isnan(wv)])  # -0 comes back as +0
    v, o = litetopk.merge_topk(flat_s, flat_i, k, sorted=False, backend=backend)
    for r in range(5):
        assert set(o[r][o[r] >= 0]) == set(wi[r][wi[r] >= 0])
    assert litetopk.stable_topk_from_candidates(flat_s, flat_i, k).tolist() == wi.tolist()


@pytest.mark.parametrize("interleave", [None, 1, 16])
@pytest.mark.parametrize("G", [2, 4, 8])
def test_sharded_select(G, interleave):
    rng = np.random.default_rng(G * 31 + (interleave or 0))
    rows, S, k = 6, 3000, 128
    x = rng.integers(-20, 20, (rows, S)).astype(np.float32)  # ties across shards
    x[0, ::7] = np.nan
    want_v, want_i = litetopk.select_topk(x, k, backend="cpu")
    I = (S + G - 1) // G if interleave is None else interleave
    owner = (np.arange(S) // I) % G
    cs, ci = np.empty((G, rows, k), np.float32), np.empty((G, rows, k), np.int32)
    for g in range(G):
        gid = np.nonzero(owner == g)[0].astype(np.int32)
        v, i = litetopk.select_topk(np.ascontiguousarray(x[:, gid]), k, backend="cpu")
        cs[g], ci[g] = v, np.where(i >= 0, gid[np.maximum(i, 0)], -1)
    v, i = litetopk.merge_topk(cs, ci, k, backend="cpu")
    assert np.array_equal(i, want_i)
    assert np.array_equal(v, want_v, equal_nan=True)


def test_merge_torch_and_errors():
    rng = np.random.default_rng(5)
    sc, ids = problem(rng, 3, 4, 20)
    wv, wi = litetopk.merge_topk(sc, ids, 30, backend="cpu")
    torch = pytest.importorskip("torch")
    v, i = litetopk.merge_topk(torch.from_numpy(sc), torch.from_numpy(ids), 30, backend="cpu")
    assert i.dtype == torch.int32 and np.array_equal(i.numpy(), wi)
    assert np.array_equal(v.numpy(), wv, equal_nan=True)


def test_merge_bad_args():
    s = np.zeros((2, 8), np.float32)
    i = np.zeros((2, 8), np.int32)
    with pytest.raises(TypeError):
        litetopk.merge_topk(s, i.astype(np.int64), 4)
    with pytest.raises(ValueError):
        litetopk.merge_topk(s, i[:, :4], 4)
    with pytest.raises((ValueError, litetopk.InvalidArgumentError)):
        litetopk.merge_topk(s, i, 0)
