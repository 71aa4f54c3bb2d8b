"""prefill(): the whole-sequence driver equals one direct indexer call with causal/CSA ranges."""
import numpy as np
import pytest

import litetopk
from test_indexer import make_problem


def problem(rng, L, m, H=4, D=16, dtype="f32"):
    p = make_problem(rng, T=L, S=L // m, H=H, D=D, dtype=dtype, causal=False)
    p["ks"] = np.zeros(L, np.int32)
    p["ke"] = ((np.arange(L) + 1) // m).astype(np.int32)
    return p


def direct(p, k):
    return litetopk.indexer_topk(p["q"], p["kv"], p["kv_scale"], p["weights"], p["ks"], p["ke"], k, relative=False,
                                 sorted=True, return_scores=True, **p["kw"])


@pytest.mark.parametrize("m,chunk", [(1, 0), (1, 7), (4, 16), (3, 100)])
def test_prefill_equals_direct(rng, m, chunk):
    L, k = 96, 10
    p = problem(rng, L, m, dtype="e4m3" if m == 4 else "f32")
    ri, rs = direct(p, k)
    gi, gs = litetopk.prefill(p["q"], p["kv"], p["kv_scale"], p["weights"], k, m=m, chunk=chunk, sorted=True,
                              return_scores=True, **p["kw"])
    np.testing.assert_array_equal(gi, ri)
    np.testing.assert_array_equal(gs, rs)
    ui = litetopk.prefill(p["q"], p["kv"], p["kv_scale"], p["weights"], k, m=m, chunk=chunk, **p["kw"])
    for t in range(L):
        assert set(ui[t].tolist()) == set(ri[t].tolist())


def test_prefill_callback_and_store_false(rng):
    L, m, k, C = 64, 2, 6, 16
    p = problem(rng, L, m)
    ri, rs = direct(p, k)
    seen = []
    got = np.full((L, k), -9, np.int32)

    def cb(first, idx, scores):
        assert scores is None and idx.shape[1] == k
        got[first:first + idx.shape[0]] = idx  # copy out: the rows live in the workspace
        seen.append((first, idx.shape[0]))

    res, nbytes = litetopk.prefill(p["q"], p["kv"], p["kv_scale"], p["weights"], k, m=m, chunk=C, sorted=True,
                                   store=False, callback=cb, return_workspace_bytes=True)
    assert res is None and nbytes > 0
    assert seen == [(0, 16), (16, 16), (32, 16), (48, 16)]
    np.testing.assert_array_equal(got, ri)
    assert nbytes == litetopk.workspace_size("prefill", p["q"], p["kv"], p["kv_scale"], p["weights"], k, m=m,
                                             chunk=C, store=False, callback=cb)
    # with outputs, the callback sees views of them, scores included
    firsts = []
    out_i, out_s = litetopk.prefill(p["q"], p["kv"], p["kv_scale"], p["weights"], k, m=m, chunk=C, sorted=True,
                                    return_scores=True, callback=lambda f, i, s: firsts.append((f, s.shape)))
    assert firsts == [(f, (16, k)) for f in (0, 16, 32, 48)]
    np.testing.assert_array_equal(out_s, rs)


def test_prefill_callback_exception_stops(rng):
    p = problem(rng, 40, 1)
    calls = []

    def cb(first, idx, scores):
        calls.append(first)
        if first >= 10:
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        litetopk.prefill(p["q"], p["kv"], p["kv_scale"], p["weights"], 4, chunk=10, callback=cb)
    assert calls == [0, 10]


def test_prefill_errors(rng):
    p = problem(rng, 32, 2)
    q, kv, sc, w = p["q"], p["kv"], p["kv_scale"], p["weights"]
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv[:-1], sc[:-1], w, 4, m=2)
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv, sc, w, 4, m=1)  # kv must be [L // m, D]
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv, sc, w, 4, m=0)
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv, sc, w, 4, m=2, chunk=-1)
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv, sc, w, 4, m=2, store=False)
    with pytest.raises(TypeError):
        litetopk.prefill(q, kv, sc, w, 4, m=2, callback=3)
    with pytest.raises(TypeError):
        litetopk.prefill(q, kv.astype(np.float16), sc, w, 4, m=2)
    with pytest.raises(ValueError):
        litetopk.prefill(q, kv, sc, w, 4, m=2, out=np.empty((32, 5), np.int32))
    with pytest.raises(litetopk.WorkspaceTooSmallError):
        litetopk.prefill(q, kv, sc, w, 4, m=2, workspace=np.empty(8, np.uint8))
    assert litetopk.prefill(q[:0], kv[:0], sc[:0], w[:0], 4, m=2).shape == (0, 4)
