"""knn_topk on numpy arrays against the float64 oracle."""
import numpy as np
import pytest

import litetopk
from oracle import check_topk_sets, ml_dtypes

EPS32 = np.finfo(np.float32).eps


def oracle_scores(q, x, metric):
    """Scores ranked DESCENDING (L2 as -distance), float64."""
    q, x = q.astype(np.float64), x.astype(np.float64)
    dot = q @ x.T
    if metric == "ip":
        return dot
    qn, xn = (q * q).sum(1), (x * x).sum(1)
    if metric == "l2":
        return -(qn[:, None] + xn[None, :] - 2 * dot)
    den = np.sqrt(qn)[:, None] * np.sqrt(xn)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, dot / np.where(den > 0, den, 1), 0.0)


@pytest.mark.parametrize("metric", ["ip", "l2", "cos"])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_knn_vs_oracle(rng, metric, dt):
    if dt == "bfloat16":
        if ml_dtypes is None:
            pytest.skip("ml_dtypes not installed")
        dt = ml_dtypes.bfloat16
    B, N, D, k = 7, 300, 24, 17
    q = rng.standard_normal((B, D)).astype(dt)
    x = rng.standard_normal((N, D)).astype(dt)
    x[5] = 0  # zero norm: cosine 0
    sc, idx = litetopk.knn_topk(q, x, k, metric=metric)
    assert sc.dtype == np.float32 and idx.dtype == np.int64 and idx.shape == (B, k)
    o = oracle_scores(q, x, metric)
    mag = np.abs(q.astype(np.float64)).sum(1).max() * np.abs(x.astype(np.float64)).max() + 1
    tol = 8 * D * EPS32 * mag * (mag if metric == "l2" else 1)
    for b in range(B):
        ours = -sc[b] if metric == "l2" else sc[b]
        check_topk_sets(idx[b], o[b], 0, N, k, tol, base=0, sorted_=True)
        np.testing.assert_allclose(ours, o[b][idx[b]], rtol=1e-5, atol=tol)
    if metric == "l2":
        assert np.all(np.diff(sc, axis=1) >= -tol)  # ascending distance


@pytest.mark.parametrize("metric,pad", [("ip", -np.inf), ("l2", np.inf), ("cos", -np.inf)])
def test_knn_padding(rng, metric, pad):
    q = rng.standard_normal((3, 8)).astype(np.float32)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    sc, idx = litetopk.knn_topk(q, x, 9, metric=metric)
    assert np.all(idx[:, 5:] == -1) and np.all(sc[:, 5:] == pad)
    assert all(set(r[:5].tolist()) == set(range(5)) for r in idx)


def test_knn_ties_unsorted_out_and_strides(rng):
    x = np.ones((40, 4), np.float32)
    q = np.ones((2, 4), np.float32)
    sc, idx = litetopk.knn_topk(q, x, 6)
    np.testing.assert_array_equal(idx, np.tile(np.arange(6), (2, 1)))
    xb = rng.standard_normal((50, 12)).astype(np.float32)
    qb = rng.standard_normal((4, 12)).astype(np.float32)
    ref_s, ref_i = litetopk.knn_topk(np.ascontiguousarray(qb[:, 2:10]), np.ascontiguousarray(xb[:, 2:10]), 5)
    out = (np.empty((4, 5), np.float32), np.empty((4, 5), np.int64))
    s2, i2 = litetopk.knn_topk(qb[:, 2:10], xb[:, 2:10], 5, out=out)
    assert s2 is out[0] and i2 is out[1]
    np.testing.assert_array_equal(i2, ref_i)
    s3, i3 = litetopk.knn_topk(qb[:, 2:10], xb[:, 2:10], 5, sorted=False)
    for b in range(4):
        assert set(i3[b].tolist()) == set(ref_i[b].tolist())
    a_s, a_i = litetopk.knn_topk(qb, xb, 5, algo="fused")
    m_s, m_i = litetopk.knn_topk(qb, xb, 5, algo="materialize")
    np.testing.assert_array_equal(a_i, m_i)
    np.testing.assert_array_equal(a_s, m_s)
    assert litetopk.workspace_size("knn", qb, xb, 5, metric="l2") >= 0
    st = litetopk.Stats()
    litetopk.knn_topk(qb, xb, 5, stats=st)
    assert st.rows == 4


def test_knn_errors(rng):
    q = rng.standard_normal((3, 8)).astype(np.float32)
    x = rng.standard_normal((20, 8)).astype(np.float32)
    with pytest.raises(TypeError):
        litetopk.knn_topk(q.astype(np.float64), x.astype(np.float64), 3)
    with pytest.raises(TypeError):
        litetopk.knn_topk(q, x.astype(np.float16), 3)
    with pytest.raises(ValueError):
        litetopk.knn_topk(q, x[:, :4], 3)
    with pytest.raises(ValueError):
        litetopk.knn_topk(q, x, 3, metric="hamming")
    with pytest.raises(ValueError):
        litetopk.knn_topk(q, x, 0)
    with pytest.raises(ValueError):
        litetopk.knn_topk(q, x, 20000)
    with pytest.raises(ValueError, match="contiguous"):
        litetopk.knn_topk(q, np.asfortranarray(x), 3)
    with pytest.raises(ValueError):
        litetopk.knn_topk(q[0], x, 3)
    with pytest.raises(ValueError):
        litetopk.knn_topk(q, x, 3, out=(np.empty((3, 3), np.float32),))
    with pytest.raises(TypeError):
        litetopk.knn_topk(q, x, 3, out=(np.empty((3, 3), np.float32), np.empty((3, 3), np.int32)))
    with pytest.raises(TypeError):
        litetopk.knn_topk(q.astype(np.float16).view(np.uint16), x.astype(np.float16).view(np.uint16), 3,
                          dtype="e4m3")
