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
        if pin and ids:
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


def paged_problem(rng, B=3, next_n=2, H=4, D=16, block_kv=16, max_len=200):
    """A paged cache of e4m3 codes of +-{0.5, 1, 2} (exact scores), a shuffled table, lengths."""
    codes = lambda n: ((rng.integers(0, 2, n) << 7) | ((6 + rng.integers(0, 3, n)) << 3)).astype(np.uint8)  # noqa: E731
    mb = (max_len + block_kv - 1) // block_kv
    nblk = B * mb + 1
    cache = np.zeros((nblk, block_kv * (D + 4)), np.uint8)
    cache[:, :block_kv * D] = codes(nblk * block_kv * D).reshape(nblk, -1)
    cache[:, block_kv * D:] = (2.0 ** rng.integers(-2, 3, (nblk, block_kv))).astype(np.float32).view(np.uint8)
    table = rng.permutation(nblk)[:B * mb].reshape(B, mb).astype(np.int32)
    lens = rng.integers(0, max_len + 1, (B, next_n)).astype(np.int32)
    q = codes(B * next_n * H * D).reshape(B, next_n, H, D)
    w = (rng.integers(-4, 5, (B * next_n, H)) * 0.25).astype(np.float32)
    return q, cache, w, lens, table


def request_keys(cache, table, b, D, block_kv):
    """Request b's keys and scales, contiguous, from the cache as built."""
    rows = cache[table[b]]
    kv = rows[:, :block_kv * D].reshape(-1, D)
    sc = rows[:, block_kv * D:].copy().view(np.float32).reshape(-1)
    return np.ascontiguousarray(kv), np.ascontiguousarray(sc)


@pytest.mark.parametrize("physical", [False, True])
def test_decode_forms_equal_prefill_forms(physical):
    rng = np.random.default_rng(21)
    B, next_n, H, D, bkv = 3, 2, 4, 16, 16
    q, cache, w, lens, table = paged_problem(rng, B, next_n, H, D, bkv)
    nb, k = 10, 24
    lists = rng.integers(-1, 30, (B * next_n, 12)).astype(np.int32)
    for be in ("cpu", "ref"):
        blk, bsc, idx, isc = litetopk.decode_blocks_topk(q, cache, w, lens, table, nb, topk=k, physical=physical,
                                                    return_scores=True, block_kv=bkv, dtype="e4m3", backend=be)
        cidx = litetopk.decode_candidates_topk(q, cache, w, lens, table, lists, k, physical=physical, sorted=True,
                                               block_kv=bkv, dtype="e4m3", backend=be)
        for b in range(B):
            kv, sc = request_keys(cache, table, b, D, bkv)
            rs = slice(b * next_n, (b + 1) * next_n)
            ks, ke = np.zeros(next_n, np.int32), lens[b].copy()
            e_blk, e_bsc, e_idx, e_isc = litetopk.blocks_topk(q[b], kv, sc, w[rs], ks, ke, nb, topk=k, return_scores=True,
                                                       dtype="e4m3", backend="ref")
            e_c = litetopk.candidates_topk(q[b], kv, sc, w[rs], ks, ke, lists[rs], k, sorted=True, dtype="e4m3",
                                           backend="ref")
            if physical:
                slot = lambda p: np.where(p >= 0, table[b][np.maximum(p, 0) // bkv] * bkv + p % bkv, -1)  # noqa: E731
                e_idx, e_c = slot(e_idx), slot(e_c)
            assert np.array_equal(blk[rs], e_blk) and np.array_equal(bsc[rs].view(np.int32), e_bsc.view(np.int32))
            assert np.array_equal(idx[rs], e_idx) and np.array_equal(isc[rs].view(np.int32), e_isc.view(np.int32))
            assert np.array_equal(cidx[rs], e_c), (be, b)
