"""indexer_topk / fp8_mqa_topk / IndexerState on numpy arrays against the float64 oracle."""
import numpy as np
import pytest

import litetopk
from oracle import (bf16_decode, bf16_encode, check_topk_sets, e4m3_decode, e4m3_encode, indexer_abs_scale,
                    indexer_scores, ml_dtypes)

EPS32 = np.finfo(np.float32).eps


def make_problem(rng, T=12, S=200, H=4, D=16, dtype="f32", causal=True, ctx=None, scale=True):
    """Inputs in the storage the binding takes, plus decoded float64 copies for the oracle."""
    qf = rng.standard_normal((T, H, D))
    kf = rng.standard_normal((S, D))
    w = rng.standard_normal((T, H)).astype(np.float32)
    kv_scale = (rng.random(S) + 0.5).astype(np.float32) if scale else None
    if dtype == "f32":
        q, kv = qf.astype(np.float32), kf.astype(np.float32)
        qd, kd, kw = q.astype(np.float64), kv.astype(np.float64), {}
    elif dtype == "e4m3":
        q, kv = e4m3_encode(qf * 8), e4m3_encode(kf * 8)
        qd, kd, kw = e4m3_decode(q), e4m3_decode(kv), {"dtype": "e4m3"}
    elif dtype == "bf16":
        q, kv = bf16_encode(qf), bf16_encode(kf)
        qd, kd, kw = bf16_decode(q), bf16_decode(kv), {"dtype": "bf16"}
    else:
        raise ValueError(dtype)
    if causal:
        ctx = S - T if ctx is None else ctx
        ke = np.minimum(ctx + np.arange(T) + 1, S).astype(np.int32)
        ks = np.zeros(T, np.int32)
    else:
        ks = ke = None
    return dict(q=q, kv=kv, kv_scale=kv_scale, weights=w, ks=ks, ke=ke, kw=kw,
                oracle=indexer_scores(qd, kd, kv_scale, w),
                tol=_tol(qd, kd, kv_scale, w, D, H))


def _tol(qd, kd, sc, w, D, H):
    # fp32 accumulation error bound, generous: backends differ only in rounding (design.md, Scores)
    return 4 * (D + H + 4) * EPS32 * indexer_abs_scale(qd, kd, sc, w) + 1e-30


def call(p, k, **kw):
    return litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"], k, **p["kw"], **kw)


def check_all(p, idx, k, relative=True, sorted_=False, scores=None):
    T, S = p["oracle"].shape
    for t in range(T):
        lo = 0 if p["ks"] is None else int(p["ks"][t])
        hi = S if p["ke"] is None else int(p["ke"][t])
        check_topk_sets(idx[t], p["oracle"][t], lo, hi, k, p["tol"][t], base=lo if relative else 0,
                        sorted_=sorted_, got_scores=None if scores is None else scores[t])


@pytest.mark.parametrize("backend", ["cpu", "ref"])
@pytest.mark.parametrize("dtype", ["f32", "e4m3", "bf16"])
def test_indexer_vs_oracle(rng, backend, dtype):
    p = make_problem(rng, T=10, S=180, dtype=dtype)
    idx, sc = call(p, 24, backend=backend, sorted=True, return_scores=True)
    assert idx.dtype == np.int32 and idx.shape == (10, 24) and sc.dtype == np.float32
    check_all(p, idx, 24, sorted_=True, scores=sc)


@pytest.mark.parametrize("relative", [True, False])
@pytest.mark.parametrize("sorted_", [True, False])
def test_indexer_flags(rng, relative, sorted_):
    p = make_problem(rng, T=8, S=150, ctx=100)
    p["ks"] = np.array([0, 10, 50, 100, 3, 0, 90, 107], np.int32)
    p["ke"] = np.array([101, 102, 103, 104, 105, 106, 107, 108], np.int32)
    idx = call(p, 20, relative=relative, sorted=sorted_)
    check_all(p, idx, 20, relative=relative, sorted_=sorted_)


def test_indexer_short_rows_unscored(rng):
    # ke - ks <= k, unsorted, no scores: 0..len-1 then -1, without scoring (vLLM's convention)
    p = make_problem(rng, T=6, S=40, ctx=0)
    p["q"][:] = np.nan  # would poison any score: the short rows must not look at it
    idx = call(p, 8)
    for t in range(6):
        n = t + 1
        np.testing.assert_array_equal(idx[t], list(range(n)) + [-1] * (8 - n))
    idx = call(p, 8, relative=False)
    np.testing.assert_array_equal(idx[2], [0, 1, 2] + [-1] * 5)


def test_indexer_padding_scores(rng):
    p = make_problem(rng, T=4, S=30, ctx=2)
    idx, sc = call(p, 10, sorted=True, return_scores=True)
    for t in range(4):
        n = 2 + t + 1
        assert np.all(idx[t, n:] == -1) and np.all(np.isneginf(sc[t, n:]))
        assert np.all(idx[t, :n] >= 0)
    check_all(p, idx, 10, sorted_=True, scores=sc)


@pytest.mark.parametrize("dtype", ["f32", "e4m3"])
def test_fused_equals_materialize(rng, dtype):
    p = make_problem(rng, T=16, S=260, H=8, D=32, dtype=dtype)
    a_i, a_s = call(p, 32, algo="fused", sorted=True, return_scores=True)
    b_i, b_s = call(p, 32, algo="materialize", sorted=True, return_scores=True)
    np.testing.assert_array_equal(a_i, b_i)
    np.testing.assert_array_equal(a_s.view(np.uint32), b_s.view(np.uint32))  # bit for bit


def test_indexer_ties_and_flat_rows(rng):
    T, S, H, D, k = 4, 120, 2, 8, 10
    q = np.ones((T, H, D), np.float32)
    kv = np.ones((S, D), np.float32)
    w = np.ones((T, H), np.float32)
    idx = litetopk.indexer_topk(q, kv, None, w, None, None, k, sorted=True)
    np.testing.assert_array_equal(idx, np.tile(np.arange(k), (T, 1)))  # all equal: lowest indices
    kv[::7] *= 2  # 18 tied winners, boundary inside them
    idx = litetopk.indexer_topk(q, kv, None, w, None, None, k, sorted=True)
    np.testing.assert_array_equal(idx[0], np.arange(0, 7 * k, 7))


def test_indexer_nan_last(rng):
    p = make_problem(rng, T=3, S=20, causal=False)
    p["kv"][[2, 5, 11]] = np.nan
    p["oracle"] = indexer_scores(p["q"].astype(np.float64), p["kv"].astype(np.float64), p["kv_scale"], p["weights"])
    idx, sc = call(p, 20, sorted=True, return_scores=True)
    for t in range(3):
        assert set(idx[t, -3:].tolist()) == {2, 5, 11} and np.all(np.isnan(sc[t, -3:]))
        assert not np.any(np.isnan(sc[t, :-3]))
    idx = call(p, 17, sorted=True)
    assert not ({2, 5, 11} & set(idx.ravel().tolist()))


def test_indexer_negative_weights_and_scale_forms(rng):
    p = make_problem(rng, T=6, S=90, causal=False)
    p["weights"] = -np.abs(p["weights"])
    p["oracle"] = indexer_scores(p["q"].astype(np.float64), p["kv"].astype(np.float64), p["kv_scale"], p["weights"])
    idx = call(p, 12, sorted=True)
    check_all(p, idx, 12, sorted_=True)
    a = litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"][:, None], p["weights"], None, None, 12, sorted=True)
    b = litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"].view(np.uint8).reshape(90, 4), p["weights"], None,
                              None, 12, sorted=True)  # vLLM's uint8 [S, 4] scale storage
    np.testing.assert_array_equal(a, idx)
    np.testing.assert_array_equal(b, idx)
    ones = litetopk.indexer_topk(p["q"], p["kv"], np.ones(90, np.float32), p["weights"], None, None, 12, sorted=True)
    none = litetopk.indexer_topk(p["q"], p["kv"], None, p["weights"], None, None, 12, sorted=True)
    np.testing.assert_array_equal(ones, none)


def test_indexer_ml_dtypes_equals_raw(rng):
    if ml_dtypes is None:
        pytest.skip("ml_dtypes not installed")
    p = make_problem(rng, T=5, S=70, dtype="e4m3")
    raw_i, raw_s = call(p, 9, sorted=True, return_scores=True)
    q8, k8 = p["q"].view(ml_dtypes.float8_e4m3fn), p["kv"].view(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(e4m3_decode(p["q"]), q8.astype(np.float64))  # our decoder matches
    i, s = litetopk.indexer_topk(q8, k8, p["kv_scale"], p["weights"], p["ks"], p["ke"], 9, sorted=True,
                                 return_scores=True)
    np.testing.assert_array_equal(i, raw_i)
    np.testing.assert_array_equal(s, raw_s)
    pb = make_problem(rng, T=5, S=70, dtype="bf16")
    rb = call(pb, 9, sorted=True)
    ib = litetopk.indexer_topk(pb["q"].view(ml_dtypes.bfloat16), pb["kv"].view(ml_dtypes.bfloat16), pb["kv_scale"],
                               pb["weights"], pb["ks"], pb["ke"], 9, sorted=True)
    np.testing.assert_array_equal(ib, rb)


def test_indexer_strided_inputs_and_out(rng):
    p = make_problem(rng, T=6, S=80, H=2, D=8, causal=False)
    qbig = np.zeros((6, 3 * 16), np.float32)
    qbig[:, 5:21] = p["q"].reshape(6, 16)
    qv = qbig[:, 5:21].reshape(6, 2, 8)  # row stride 48 > H*D
    kbig = np.zeros((80, 20), np.float32)
    kbig[:, 4:12] = p["kv"]
    wbig = np.zeros((6, 5), np.float32)
    wbig[:, 1:3] = p["weights"]
    ref = call(p, 7, sorted=True)
    out = np.full((10, 16), 99, np.int32)
    got = litetopk.indexer_topk(qv, kbig[:, 4:12], p["kv_scale"], wbig[:, 1:3], None, None, 7, sorted=True,
                                out=out[2:8, 3:10])
    assert got.base is out
    np.testing.assert_array_equal(out[2:8, 3:10], ref)
    assert np.all(out[:2] == 99) and np.all(out[2:8, 10:] == 99)
    oi, os_ = np.empty((6, 7), np.int32), np.empty((6, 7), np.float32)
    ri, rs = litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"], p["weights"], None, None, 7, sorted=True,
                                   out=(oi, os_))
    assert ri is oi and rs is os_
    np.testing.assert_array_equal(oi, ref)


def test_indexer_state(rng):
    p = make_problem(rng, T=10, S=200)
    base = call(p, 16, sorted=True)
    with litetopk.IndexerState(48, backend="cpu") as st:
        assert st.backend == "cpu" and len(st.get()) == 0
        a = call(p, 16, sorted=True, state=st)
        np.testing.assert_array_equal(a, base)
        hot = st.get()
        assert 0 < len(hot) <= 48 and hot.dtype == np.int32
        assert len(np.unique(hot)) == len(hot)
        b = call(p, 16, sorted=True, state=st)  # warm start: same exact answer
        np.testing.assert_array_equal(b, base)
        st.set([5, 5, -1, 3, 10 ** 6])  # duplicates/negatives dropped, out of range ignored at use
        assert st.get().tolist()[:2] == [5, 3]
        c = call(p, 16, sorted=True, state=st)
        np.testing.assert_array_equal(c, base)
        st.set(np.arange(199, -1, -1))  # more than sample_size: at most 48 kept
        assert len(st.get()) == 48
        st.reset()
        assert len(st.get()) == 0
        with pytest.raises(TypeError):
            st.set([1.5])
    with pytest.raises(ValueError, match="closed"):
        st.get()
    with pytest.raises(ValueError, match="closed"):
        call(p, 16, state=st)
    st.close()  # idempotent
    with pytest.raises(ValueError):
        litetopk.IndexerState(0, backend="cpu")
    with pytest.raises(ValueError):
        litetopk.IndexerState(16, backend="nope")
    with litetopk.IndexerState(8, backend="ref") as sr:
        with pytest.raises(ValueError, match="backend"):
            call(p, 4, state=sr, backend="cpu")
        call(p, 4, state=sr)  # auto follows the state's host backend
    with pytest.raises(TypeError):
        call(p, 4, state=object())


def test_indexer_stats_and_workspace(rng):
    p = make_problem(rng, T=7, S=64)
    st = litetopk.Stats(per_row=True)
    call(p, 8, stats=st)
    assert st.rows == 7 and st.row_bin_entries.shape == (7,)
    n = litetopk.workspace_size("indexer", p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"], 8)
    assert n >= 0
    n2 = litetopk.workspace_size("indexer", p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"], 8,
                                 algo="materialize", return_scores=True)
    assert n2 >= 0
    ws = np.empty(max(n, 1), np.uint8)
    a = call(p, 8, workspace=ws, sorted=True)
    np.testing.assert_array_equal(a, call(p, 8, sorted=True))
    if n > 0:
        with pytest.raises(litetopk.WorkspaceTooSmallError):
            call(p, 8, workspace=np.empty(n - 1, np.uint8))
    with pytest.raises(ValueError):
        litetopk.workspace_size("nope", p["q"])
    with pytest.raises(TypeError):
        litetopk.workspace_size("indexer", p["q"], p["kv"])


def test_fp8_mqa_topk_vllm_call(rng):
    p = make_problem(rng, T=12, S=150, H=4, D=16, dtype="e4m3", ctx=30)
    T, topk = 12, 20
    ks = np.array([0] * 6 + [20] * 6, np.int32)  # two requests packed in one K buffer
    ke = (ks + np.array(list(range(31, 37)) * 2)).astype(np.int32)
    if ml_dtypes is not None:
        q = p["q"].view(ml_dtypes.float8_e4m3fn)
        k = p["kv"].view(ml_dtypes.float8_e4m3fn)
    else:
        pytest.skip("ml_dtypes not installed (fp8_mqa_topk takes typed fp8 arrays)")
    buf = np.full((32, topk), -7, np.int32)  # vLLM's topk_indices_buffer, larger than T
    got = litetopk.fp8_mqa_topk((q, None), (k, p["kv_scale"]), p["weights"], ks, ke, topk, clean_logits=False,
                                out=buf[:T])
    assert got.base is buf and np.all(buf[T:] == -7)
    direct = litetopk.indexer_topk(q, k, p["kv_scale"], p["weights"], ks, ke, topk)
    np.testing.assert_array_equal(got, direct)
    p["ks"], p["ke"] = ks, ke
    check_all(p, got, topk, relative=True)
    # legacy form: q tensor, kv tuple
    np.testing.assert_array_equal(litetopk.fp8_mqa_topk(q, (k, p["kv_scale"]), p["weights"], ks, ke, topk), got)
    with pytest.raises(litetopk.UnsupportedError):
        litetopk.fp8_mqa_topk((q, p["weights"]), (k, p["kv_scale"]), p["weights"], ks, ke, topk)
    with pytest.raises(RuntimeError):
        litetopk.fp8_mqa_topk((q, p["weights"]), (k, p["kv_scale"]), p["weights"], ks, ke, topk)
    n = litetopk.workspace_size("fp8_mqa", (q, None), (k, p["kv_scale"]), p["weights"], ks, ke, topk,
                                clean_logits=False)
    assert n >= 0


def test_fp8_mqa_topk_raw_uint8(rng):
    # numpy has no float8: raw uint8 storage works with dtype="e4m3", and without it the message says
    # exactly that (and names ml_dtypes), for fp8_mqa_topk as for indexer_topk
    p = make_problem(rng, T=6, S=90, H=4, D=16, dtype="e4m3", ctx=30)
    T, topk = 6, 12
    ks, ke = np.zeros(T, np.int32), np.full(T, 90, np.int32)
    got = litetopk.fp8_mqa_topk((p["q"], None), (p["kv"], p["kv_scale"]), p["weights"], ks, ke, topk, dtype="e4m3")
    direct = litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"], p["weights"], ks, ke, topk, dtype="e4m3")
    np.testing.assert_array_equal(got, direct)
    p["ks"], p["ke"] = ks, ke
    check_all(p, got, topk, relative=True)
    with pytest.raises(TypeError, match=r"dtype='e4m3'.*ml_dtypes"):
        litetopk.fp8_mqa_topk((p["q"], None), (p["kv"], p["kv_scale"]), p["weights"], ks, ke, topk)
    with pytest.raises(TypeError, match=r"dtype='e4m3'.*ml_dtypes"):
        litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"], p["weights"], ks, ke, topk)


def test_indexer_empty():
    q = np.zeros((0, 2, 8), np.float32)
    idx = litetopk.indexer_topk(q, np.zeros((5, 8), np.float32), None, np.zeros((0, 2), np.float32), None, None, 4)
    assert idx.shape == (0, 4)
    idx = litetopk.indexer_topk(np.zeros((2, 2, 8), np.float32), np.zeros((0, 8), np.float32), None,
                                np.zeros((2, 2), np.float32), None, None, 4, sorted=True)
    assert np.all(idx == -1)


def test_indexer_errors(rng):
    p = make_problem(rng, T=4, S=50, H=2, D=8)
    q, kv, sc, w, ks, ke = p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"]
    I = litetopk.indexer_topk
    with pytest.raises(TypeError):
        I(q.astype(np.float16), kv.astype(np.float16), sc, w, ks, ke, 4)  # f16 not an indexer type
    with pytest.raises(TypeError):
        I(q, kv.astype(np.float64), sc, w, ks, ke, 4)
    with pytest.raises(TypeError):
        I(q, e4m3_encode(kv), sc, w, ks, ke, 4, dtype="e4m3")  # q f32 contradicts dtype
    with pytest.raises(TypeError):
        I(e4m3_encode(q), e4m3_encode(kv), sc, w, ks, ke, 4)  # raw uint8 without dtype=
    with pytest.raises(TypeError):
        I(q, kv, sc, w.astype(np.float16), ks, ke, 4)
    with pytest.raises(TypeError):
        I(q, kv, sc.astype(np.float64), w, ks, ke, 4)
    with pytest.raises(ValueError):
        I(q[0], kv, sc, w, ks, ke, 4)
    with pytest.raises(ValueError):
        I(q, kv[:, :4], sc, w, ks, ke, 4)
    with pytest.raises(ValueError):
        I(q, kv, sc[:10], w, ks, ke, 4)
    with pytest.raises(ValueError):
        I(q, kv, sc, w[:, :1], ks, ke, 4)
    with pytest.raises(ValueError, match="contiguous"):
        I(q, np.asfortranarray(kv), sc, w, ks, ke, 4)
    with pytest.raises(ValueError, match="packed"):
        I(np.concatenate([q, q], axis=2)[:, :, :8], kv, sc, w, ks, ke, 4)  # head stride 2*D
    with pytest.raises(ValueError, match="contiguous"):
        I(q, kv, sc, w, np.zeros(8, np.int32)[::2], ke, 4)
    with pytest.raises(ValueError, match="row 1"):
        I(q, kv, sc, w, ks, np.array([1, 51, 1, 1], np.int32), 4)
    with pytest.raises(ValueError, match="row 0"):
        I(q, kv, sc, w, np.array([-1, 0, 0, 0], np.int32), ke, 4)
    with pytest.raises(ValueError):
        I(q, kv, sc, w, np.array([5, 0, 0, 0], np.int32), np.array([4, 1, 1, 1], np.int32), 4)
    with pytest.raises(TypeError):
        I(q, kv, sc, w, ks.astype(np.int64), ke.astype(np.int64), 4)
    with pytest.raises(ValueError, match="both"):
        I(q, kv, sc, w, ks, None, 4)
    with pytest.raises(ValueError):
        I(q, kv, sc, w, ks, ke, 0)
    with pytest.raises(ValueError):
        I(q, kv, sc, w, ks, ke, 8193)
    with pytest.raises(ValueError):  # H > 128: the library's limit, raised as InvalidArgumentError
        I(np.zeros((1, 129, 8), np.float32), kv, None, np.zeros((1, 129), np.float32), None, None, 4)
    with pytest.raises(litetopk.InvalidArgumentError) as ei:
        I(np.zeros((1, 2, 300), np.float32), np.zeros((5, 300), np.float32), None, np.zeros((1, 2), np.float32),
          None, None, 4)
    assert "D=300" in str(ei.value) and ei.value.status == -1
    with pytest.raises(ValueError):
        I(q, kv, sc, w, ks, ke, 4, out=np.empty((4, 5), np.int32))
    with pytest.raises(ValueError):
        I(q, kv, sc, w, ks, ke, 4, out=(np.empty((4, 4), np.int32), np.empty((4, 4), np.float32), None))
    with pytest.raises(TypeError):
        I(q, kv, sc, w, ks, ke, 4, out=np.empty((4, 4), np.int64))
    with pytest.raises(TypeError):
        I(q.tolist(), kv, sc, w, ks, ke, 4)
    with pytest.raises(TypeError):
        I(q, kv, sc, w, ks, ke, 4, dtype="int4")
    with pytest.raises(ValueError):
        I(q, kv, sc, w, ks, ke, 4, backend="cuda")
