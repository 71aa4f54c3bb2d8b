"""The per-thread plan cache of repeated calls (litetopk/_fast.py): a repeated call takes it and gives
what the full path gives; any change of an argument's layout, dtype, device or option goes back to the
full checks and their errors; the per-call checks (alignment, host ranges, a closed state,
LTK_BACKEND) still fire on a cached layout."""
import threading

import numpy as np
import pytest

import litetopk
from litetopk import _fast, _ops
from test_decode import make_cache


@pytest.fixture(autouse=True)
def fresh_cache():
    _fast.clear()
    yield
    _fast.clear()


@pytest.fixture
def no_full_path(monkeypatch):
    """After this fixture is used, a call that reaches the full checks fails the test."""
    def arm():
        def boom(*a, **k):
            raise AssertionError("took the full path")
        for n in ("_decode_prepare", "_indexer_prepare", "_knn_prepare", "_select_prepare", "_prefill_prepare"):
            monkeypatch.setattr(_ops, n, boom)
    return arm


def decode_inputs(rng, B=3, next_n=1, H=4, D=32, block_kv=16, max_blocks=4):
    cache, keys, scales, table, q, w = make_cache(rng, B, next_n, H, D, block_kv, max_blocks)
    lens = rng.integers(1, max_blocks * block_kv + 1, B).astype(np.int32)
    return q, cache, w, lens, table


def indexer_inputs(rng, T=5, S=80, H=4, D=16):
    q = rng.standard_normal((T, H, D), dtype=np.float32)
    kv = rng.standard_normal((S, D), dtype=np.float32)
    sc = rng.uniform(0.5, 1.5, S).astype(np.float32)
    w = rng.standard_normal((T, H), dtype=np.float32)
    ks = np.zeros(T, np.int32)
    ke = np.arange(S - T + 1, S + 1, dtype=np.int32)
    return q, kv, sc, w, ks, ke


def test_repeated_calls_hit_and_match(rng, no_full_path):
    q, cache, w, lens, table = decode_inputs(rng)
    iq, ikv, isc, iw, ks, ke = indexer_inputs(rng)
    x = rng.standard_normal((4, 300), dtype=np.float32)
    base = rng.standard_normal((200, 16), dtype=np.float32)
    qq = rng.standard_normal((3, 16), dtype=np.float32)
    calls = {
        "decode": lambda: litetopk.decode_topk(q, cache, w, lens, table, 10, dtype="e4m3", sorted=True,
                                               return_scores=True),
        "paged": lambda: litetopk.fp8_paged_mqa_topk((q, None), cache, w, lens, table, None, 0, 10, dtype="e4m3"),
        "indexer": lambda: litetopk.indexer_topk(iq, ikv, isc, iw, ks, ke, 7, sorted=True, return_scores=True),
        "mqa": lambda: litetopk.fp8_mqa_topk((iq, None), (ikv, isc), iw, ks, ke, 7),
        "knn": lambda: litetopk.knn_topk(qq, base, 5, metric="l2"),
        "select": lambda: litetopk.select_topk(x, 9, np.array([0, 5, 100, 0], np.int32),
                                               np.array([300, 6, 250, 0], np.int32)),
        "select1d": lambda: litetopk.select_topk(x[1], 9),
        "prefill": lambda: litetopk.prefill(iq, ikv[:5], isc[:5], iw, 3, return_scores=True),
    }
    first = {n: f() for n, f in calls.items()}
    assert len(_fast.plans()) == len(calls)
    no_full_path()
    for n, f in calls.items():
        a, b = first[n], f()
        a = a if isinstance(a, tuple) else (a,)
        b = b if isinstance(b, tuple) else (b,)
        for u, v in zip(a, b):
            assert u is not v  # fresh outputs every call
            np.testing.assert_array_equal(u, v, err_msg=n)


def test_given_outputs_and_workspace(rng, no_full_path):
    q, cache, w, lens, table = decode_inputs(rng)
    kw = dict(dtype="e4m3", sorted=True)
    ws = np.empty(max(litetopk.workspace_size("decode", q, cache, w, lens, table, 10, **kw), 1), np.uint8)
    want = litetopk.decode_topk(q, cache, w, lens, table, 10, **kw)
    out = np.full((3, 10), 7, np.int32)
    assert litetopk.decode_topk(q, cache, w, lens, table, 10, out=out, workspace=ws, **kw) is out
    out[:] = 7
    no_full_path()
    assert litetopk.decode_topk(q, cache, w, lens, table, 10, out=out, workspace=ws, **kw) is out
    np.testing.assert_array_equal(out, want)
    # new data under the same layout: the plan writes the new pointers
    q2 = q.copy()
    q2[0] ^= 0x80  # flips the sign of request 0's queries
    r2 = litetopk.decode_topk(q2, cache, w, lens, table, 10, **kw)
    assert not np.array_equal(r2[0], want[0]) and np.array_equal(r2[1:], want[1:])


def test_changed_layout_is_checked_again(rng):
    q, cache, w, lens, table = decode_inputs(rng)
    litetopk.decode_topk(q, cache, w, lens, table, 10, dtype="e4m3")
    with pytest.raises(ValueError, match="weights: expected shape"):
        litetopk.decode_topk(q, cache, w[:2], lens, table, 10, dtype="e4m3")
    with pytest.raises(TypeError, match="weights: expected float32"):
        litetopk.decode_topk(q, cache, w.astype(np.float64), lens, table, 10, dtype="e4m3")
    wt = np.asfortranarray(w)  # same shape, dtype and values, other strides
    with pytest.raises(ValueError, match="contiguous"):
        litetopk.decode_topk(q, cache, wt, lens, table, 10, dtype="e4m3")
    with pytest.raises(TypeError, match="k must be an int"):
        litetopk.decode_topk(q, cache, w, lens, table, True, dtype="e4m3")  # True == 1, and is refused
    litetopk.decode_topk(q, cache, w, lens, table, 1, dtype="e4m3")
    with pytest.raises(TypeError, match="k must be an int"):
        litetopk.decode_topk(q, cache, w, lens, table, True, dtype="e4m3")
    out = np.empty((3, 10), np.int32)
    litetopk.decode_topk(q, cache, w, lens, table, 10, dtype="e4m3", out=out)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        litetopk.decode_topk(q, cache, w, lens, table, 10, dtype="e4m3", out=out)
    with pytest.raises(TypeError, match="int32"):
        litetopk.decode_topk(q, cache, w, lens, table, 10, dtype="e4m3", out=np.empty((3, 10), np.int64))


def test_workspace_change_is_checked_again(rng):
    x = rng.standard_normal((4, 3000), dtype=np.float32)
    need = litetopk.workspace_size("select", x, 50)
    ws = np.empty(need, np.uint8)
    want = litetopk.select_topk(x, 50, workspace=ws)
    np.testing.assert_array_equal(litetopk.select_topk(x, 50, workspace=ws)[1], want[1])
    if need > 1:
        with pytest.raises(litetopk.WorkspaceTooSmallError):
            litetopk.select_topk(x, 50, workspace=ws[: need // 2])
    with pytest.raises(ValueError, match="workspace must be contiguous"):
        litetopk.select_topk(x, 50, workspace=np.empty(2 * need, np.uint8)[::2])


def test_host_ranges_checked_every_call(rng):
    q, kv, sc, w, ks, ke = indexer_inputs(rng)
    litetopk.indexer_topk(q, kv, sc, w, ks, ke, 7)
    bad = ke.copy()
    bad[2] = kv.shape[0] + 1
    with pytest.raises(ValueError, match="ks/ke row 2"):
        litetopk.indexer_topk(q, kv, sc, w, ks, bad, 7)
    x = rng.standard_normal((2, 50), dtype=np.float32)
    litetopk.select_topk(x, 3, np.array([0, 0], np.int32), np.array([50, 50], np.int32))
    with pytest.raises(ValueError, match="starts/ends row 1"):
        litetopk.select_topk(x, 3, np.array([0, 9], np.int32), np.array([50, 8], np.int32))


def test_misaligned_pointer_checked_every_call(rng):
    x = rng.standard_normal((4, 64), dtype=np.float32)
    buf = np.zeros(4 * 64 * 4 + 8, np.uint8)
    aligned = buf[4:4 + 4 * 64 * 4].view(np.float32).reshape(4, 64)
    aligned[:] = x
    litetopk.select_topk(aligned, 3)
    unaligned = buf[1:1 + 4 * 64 * 4].view(np.float32).reshape(4, 64)
    with pytest.raises(ValueError, match="aligned"):
        litetopk.select_topk(unaligned, 3)


def test_closed_state_checked_every_call(rng):
    q, kv, sc, w, ks, ke = indexer_inputs(rng)
    st = litetopk.IndexerState(21, backend="cpu")
    a = litetopk.indexer_topk(q, kv, sc, w, ks, ke, 7, state=st, sorted=True)
    b = litetopk.indexer_topk(q, kv, sc, w, ks, ke, 7, state=st, sorted=True)
    np.testing.assert_array_equal(a, b)
    st2 = litetopk.IndexerState(21, backend="cpu")  # another state of the same layout: its own handle
    litetopk.indexer_topk(q, kv, sc, w, ks, ke, 7, state=st2, sorted=True)
    assert len(st2.get()) > 0
    st.close()
    with pytest.raises(ValueError, match="closed"):
        litetopk.indexer_topk(q, kv, sc, w, ks, ke, 7, state=st, sorted=True)
    st2.close()


def test_env_backend_change_takes_full_path(rng, monkeypatch):
    x = rng.standard_normal((2, 100), dtype=np.float32)
    monkeypatch.delenv("LTK_BACKEND", raising=False)
    litetopk.select_topk(x, 4)
    seen = []
    real = _ops._select_prepare

    def spy(*a, **k):
        r = real(*a, **k)
        seen.append(r[1].backend)
        return r
    monkeypatch.setattr(_ops, "_select_prepare", spy)
    litetopk.select_topk(x, 4)
    assert seen == []  # cached
    monkeypatch.setenv("LTK_BACKEND", "ref")
    litetopk.select_topk(x, 4)
    assert seen == [litetopk._ffi.BACKEND_REF]


def test_threads_each_get_their_records(rng):
    # one layout, different data per thread: a shared argument record would mix their pointers
    xs = [rng.standard_normal((8, 2000), dtype=np.float32) for _ in range(4)]
    want = [litetopk.select_topk(x, 16, num_threads=1)[1] for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(200):
                if not np.array_equal(litetopk.select_topk(xs[i], 16, num_threads=1)[1], want[i]):
                    errors.append(i)
                    return
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_cache_is_bounded(rng):
    for n in range(_fast.MAX_PLANS + 20):
        litetopk.select_topk(np.zeros(n + 1, np.float32), 1)
    assert len(_fast.plans()) == _fast.MAX_PLANS


def test_numpy_pointer_read():
    base = np.arange(100, dtype=np.float32)
    for x in (base, base[7:], base[::3], base.reshape(10, 10)[3:, 4:], np.zeros(0)):
        assert _ops._fast.np_ptr(x) == x.__array_interface__["data"][0]


torch = None
try:
    import torch  # noqa: F811
except ImportError:
    pass
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


@needs_torch
def test_torch_repeated_and_changed(rng, no_full_path):
    x = torch.from_numpy(rng.standard_normal((4, 300), dtype=np.float32))
    want = litetopk.select_topk(x, 9)
    out = (torch.empty(4, 9), torch.empty(4, 9, dtype=torch.int32))
    litetopk.select_topk(x, 9, out=out)
    no_full_path()
    v, i = litetopk.select_topk(x, 9)
    assert torch.equal(v, want[0]) and torch.equal(i, want[1])
    assert litetopk.select_topk(x, 9, out=out)[1] is out[1] and torch.equal(out[1], want[1])


@needs_torch
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning")
def test_torch_layout_dtype_alignment_checked_again(rng):
    x = torch.from_numpy(rng.standard_normal((4, 64), dtype=np.float32))
    litetopk.select_topk(x, 3)
    with pytest.raises(TypeError, match="dense real"):
        litetopk.select_topk(x.to_sparse(), 3)
    with pytest.raises(TypeError, match="dense real"):
        litetopk.select_topk(x.to_sparse_csr(), 3)
    with pytest.raises(TypeError):
        litetopk.select_topk(x.double(), 3)
    y = x.clone()
    y.resize_(2, 128)  # same tensor object, another shape
    assert litetopk.select_topk(y, 3)[1].shape == (2, 3)
    buf = np.zeros(4 * 64 * 4 + 8, np.uint8)  # torch refuses a misaligned view; from_numpy takes one
    litetopk.select_topk(torch.from_numpy(buf[4:4 + 4 * 64 * 4].view(np.float32).reshape(4, 64)), 3)
    with pytest.raises(ValueError, match="aligned"):
        litetopk.select_topk(torch.from_numpy(buf[2:2 + 4 * 64 * 4].view(np.float32).reshape(4, 64)), 3)
    with pytest.raises(TypeError, match="expected int32, got int64"):
        litetopk.select_topk(x, 3, out=(torch.empty(4, 3), torch.empty(4, 3, dtype=torch.int64)))


@pytest.mark.parametrize("n", [1, 5, 64, 65, 1000])
def test_ranges_ok_matches_full_check(rng, n):
    i32 = np.iinfo(np.int32)
    for _ in range(40):
        lo = rng.integers(0, 50, n).astype(np.int32)
        hi = (lo + rng.integers(0, 50, n)).astype(np.int32)
        length = int(hi.max())
        r = int(rng.integers(0, n))
        case = int(rng.integers(0, 5))
        if case == 1:
            lo[r] = -1
        elif case == 2:
            hi[r] = lo[r] - 1
        elif case == 3:
            hi[r] = length + 1
        elif case == 4:
            lo[r], hi[r] = i32.max, i32.min  # would wrap in an int32 difference
        want = not ((lo < 0) | (hi < lo) | (hi > length)).any()
        assert _fast.ranges_ok(lo, hi, length) == want
        if torch is not None:
            assert _fast.ranges_ok(torch.from_numpy(lo), torch.from_numpy(hi), length) == want
