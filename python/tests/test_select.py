"""select_topk on numpy arrays (host backends) against the numpy oracle: exact indices."""
import numpy as np
import pytest

import litetopk
from oracle import bf16_decode, bf16_encode, ml_dtypes, topk_row

BACKENDS = ["cpu", "ref"]


def oracle_select(scores, k, starts=None, ends=None, relative=True):
    scores = np.asarray(scores, np.float64)
    rows, cols = scores.shape
    oi = np.full((rows, k), -1, np.int64)
    ov = np.full((rows, k), -np.inf)
    for r in range(rows):
        lo = 0 if starts is None else int(starts[r])
        hi = cols if ends is None else int(ends[r])
        i, v = topk_row(scores[r], lo, hi, k)
        if relative:
            i = np.where(i >= 0, i - lo, -1)
        oi[r], ov[r] = i, v
    return ov, oi


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [1, 7, 64, 200, 300])
def test_select_f32_sorted_exact(rng, backend, k):
    s = rng.standard_normal((9, 200)).astype(np.float32)
    v, i = litetopk.select_topk(s, k, backend=backend)
    ov, oi = oracle_select(s, k)
    assert i.dtype == np.int32 and v.dtype == np.float32 and i.shape == (9, k)
    np.testing.assert_array_equal(i, oi)
    np.testing.assert_array_equal(v, ov.astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_select_unsorted_same_set(rng, backend):
    s = rng.standard_normal((5, 333)).astype(np.float32)
    v, i = litetopk.select_topk(s, 40, sorted=False, backend=backend)
    ov, oi = oracle_select(s, 40)
    for r in range(5):
        assert set(i[r].tolist()) == set(oi[r].tolist())
        np.testing.assert_array_equal(s[r, i[r]], v[r])


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "bf16raw"])
def test_select_half_types(rng, dt):
    x = rng.standard_normal((4, 150)).astype(np.float32)
    if dt == "float16":
        s = x.astype(np.float16)
        ref = s.astype(np.float64)
        v, i = litetopk.select_topk(s, 20)
    elif dt == "bfloat16":
        if ml_dtypes is None:
            pytest.skip("ml_dtypes not installed")
        s = x.astype(ml_dtypes.bfloat16)
        ref = s.astype(np.float64)
        v, i = litetopk.select_topk(s, 20)
    else:
        raw = bf16_encode(x)
        ref = bf16_decode(raw)
        v, i = litetopk.select_topk(raw, 20, dtype="bf16")
    ov, oi = oracle_select(ref, 20)
    np.testing.assert_array_equal(i, oi)
    np.testing.assert_array_equal(v.astype(np.float64), ov)


@pytest.mark.parametrize("relative", [True, False])
def test_select_ranges_and_padding(rng, relative):
    rows, cols, k = 8, 120, 16
    s = rng.standard_normal((rows, cols)).astype(np.float32)
    starts = np.array([0, 5, 50, 100, 119, 120, 30, 0], np.int32)
    ends = np.array([120, 10, 66, 120, 120, 120, 30, 16], np.int32)
    v, i = litetopk.select_topk(s, k, starts, ends, relative=relative)
    ov, oi = oracle_select(s, k, starts, ends, relative=relative)
    np.testing.assert_array_equal(i, oi)
    np.testing.assert_array_equal(v, ov.astype(np.float32))
    assert np.all(i[5] == -1) and np.all(np.isneginf(v[5]))  # empty range
    # Python lists are accepted for host calls
    v2, i2 = litetopk.select_topk(s, k, starts.tolist(), ends.tolist(), relative=relative)
    np.testing.assert_array_equal(i2, i)


def test_select_ties_lower_index_first():
    s = np.zeros((3, 50), np.float32)
    s[1, ::5] = 1.0  # 10 tied winners, k boundary inside them
    s[2, :] = -0.0
    s[2, 7::9] = 0.0  # -0 == +0: pure index order
    v, i = litetopk.select_topk(s, 6)
    np.testing.assert_array_equal(i[0], np.arange(6))
    np.testing.assert_array_equal(i[1], np.arange(0, 30, 5))
    np.testing.assert_array_equal(i[2], np.arange(6))
    v, i = litetopk.select_topk(s, 6, sorted=False)
    assert set(i[1].tolist()) == set(range(0, 30, 5))


def test_select_nan_and_inf_order():
    s = np.array([[np.nan, -np.inf, 1.0, np.nan, -1.0, np.inf, -np.inf, 0.0]], np.float32)
    v, i = litetopk.select_topk(s, 8)
    np.testing.assert_array_equal(i[0], [5, 2, 7, 4, 1, 6, 0, 3])
    assert np.isnan(v[0, 6]) and np.isnan(v[0, 7])
    v, i = litetopk.select_topk(s, 5)
    np.testing.assert_array_equal(i[0], [5, 2, 7, 4, 1])


def test_select_1d_row_stride_and_out(rng):
    big = rng.standard_normal((6, 300)).astype(np.float32)
    s = big[:, 20:220]  # row stride 300, inner contiguous: no copy needed
    ov, oi = oracle_select(s, 10)
    v, i = litetopk.select_topk(s, 10)
    np.testing.assert_array_equal(i, oi)
    v1, i1 = litetopk.select_topk(s[3], 10)
    assert v1.shape == (10,) and i1.shape == (10,)
    np.testing.assert_array_equal(i1, oi[3])
    out_v = np.full((6, 32), 7.0, np.float32)
    out_i = np.full((6, 32), 7, np.int32)
    rv, ri = litetopk.select_topk(s, 10, out=(out_v[:, :10], out_i[:, :10]))
    assert rv.base is out_v and ri.base is out_i
    np.testing.assert_array_equal(out_i[:, :10], oi)
    assert np.all(out_i[:, 10:] == 7) and np.all(out_v[:, 10:] == 7.0)  # nothing written past k


def test_select_stats_and_workspace(rng):
    s = rng.standard_normal((4, 100)).astype(np.float32)
    st = litetopk.Stats(per_row=True)
    litetopk.select_topk(s, 5, stats=st)
    assert st.rows == 4 and st.row_candidates.shape == (4,)
    assert "rows" in st.as_dict() and "Stats(" in repr(st)
    n = litetopk.workspace_size("select", s, 5)
    assert isinstance(n, int) and n >= 0
    ws = np.empty(max(n, 1), np.uint8)
    v, i = litetopk.select_topk(s, 5, workspace=ws)
    np.testing.assert_array_equal(i, oracle_select(s, 5)[1])
    if n > 0:
        with pytest.raises(litetopk.WorkspaceTooSmallError):
            litetopk.select_topk(s, 5, workspace=np.empty(n - 1, np.uint8))


def test_select_empty_shapes():
    v, i = litetopk.select_topk(np.zeros((0, 10), np.float32), 3)
    assert v.shape == (0, 3) and i.shape == (0, 3)
    v, i = litetopk.select_topk(np.zeros((2, 0), np.float32), 3)
    assert np.all(i == -1) and np.all(np.isneginf(v))


def test_select_errors(rng):
    s = rng.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(TypeError):
        litetopk.select_topk(s.astype(np.float64), 3)
    with pytest.raises(TypeError):
        litetopk.select_topk(s.astype(np.int32), 3)
    with pytest.raises(TypeError):
        litetopk.select_topk(s.tolist(), 3)
    with pytest.raises(TypeError):
        litetopk.select_topk(s.view(np.uint16), 3)  # raw storage without dtype=
    with pytest.raises(TypeError):
        litetopk.select_topk(s, 3, dtype="bf16")  # contradicts float32
    with pytest.raises(ValueError, match="contiguous"):
        litetopk.select_topk(s[:, ::2], 3)
    with pytest.raises(ValueError):
        litetopk.select_topk(s[None], 3)
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 0)
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 70000)
    with pytest.raises(TypeError):
        litetopk.select_topk(s, True)
    with pytest.raises(TypeError):
        litetopk.select_topk(s, 2.5)
    st = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="both"):
        litetopk.select_topk(s, 3, st, None)
    with pytest.raises(ValueError, match="row 2"):
        litetopk.select_topk(s, 3, st, np.array([1, 2, 65, 4], np.int32))
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, np.array([0, 0, 5, 0], np.int32), np.array([1, 2, 4, 4], np.int32))
    with pytest.raises(TypeError):
        litetopk.select_topk(s, 3, st.astype(np.int64), st.astype(np.int64))
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, st[:3], st[:3])
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, [0, 0, 0, 2**40], [1, 1, 1, 1])
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, out=(np.empty((4, 2), np.float32), np.empty((4, 2), np.int32)))
    with pytest.raises(TypeError):
        litetopk.select_topk(s, 3, out=(np.empty((4, 3), np.float64), np.empty((4, 3), np.int32)))
    ro = np.empty((4, 3), np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        litetopk.select_topk(s, 3, out=(np.empty((4, 3), np.float32), ro))
    with pytest.raises(ValueError, match="row stride"):
        litetopk.select_topk(s, 3, out=(np.empty((4, 3), np.float32), np.empty((4, 8), np.int32)[:, :3]))
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, backend="cuda")
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, backend="gpu")
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, algo="fast")
    with pytest.raises(ValueError):
        litetopk.select_topk(s, 3, num_threads=-1)
    be = s.astype(s.dtype.newbyteorder(">"))
    with pytest.raises(TypeError):
        litetopk.select_topk(be, 3)
    unaligned = np.zeros(4 * 64 * 4 + 8, np.uint8)[1:1 + 4 * 64 * 4].view(np.float32).reshape(4, 64)
    assert not unaligned.flags.aligned
    with pytest.raises(ValueError, match="aligned"):
        litetopk.select_topk(unaligned, 3)
