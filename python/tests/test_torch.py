"""torch tensors on the CPU backend: same results as the numpy path, torch outputs, torch errors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import litetopk  # noqa: E402
from oracle import bf16_encode, check_topk_sets, e4m3_encode, e4m3_decode, indexer_scores  # noqa: E402


def t_e4m3(u8):
    return torch.from_numpy(np.ascontiguousarray(u8)).view(torch.float8_e4m3fn)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_select_matches_numpy_and_topk(rng, dt):
    x = torch.from_numpy(rng.standard_normal((6, 257)).astype(np.float32)).to(dt)
    v, i = litetopk.select_topk(x, 33)
    assert isinstance(v, torch.Tensor) and v.dtype == torch.float32 and i.dtype == torch.int32
    assert v.device.type == "cpu" and i.shape == (6, 33)
    tv, ti = torch.topk(x.float(), 33, dim=-1)
    torch.testing.assert_close(v, tv, rtol=0, atol=0)
    xf = x.float()
    for r in range(6):
        kth = float(tv[r, -1])
        above = set(torch.nonzero(xf[r] > kth).flatten().tolist())
        assert above <= set(i[r].tolist()) and above <= set(ti[r].tolist())
        # half types tie often: torch.topk picks any of the tied keys, litetopk the lowest indices
        tied = torch.nonzero(xf[r] == kth).flatten().tolist()
        assert set(i[r].tolist()) - above == set(tied[:33 - len(above)])
    if dt == torch.float32:
        nv, ni = litetopk.select_topk(x.numpy(), 33)
        np.testing.assert_array_equal(i.numpy(), ni)


def test_torch_select_ranges_out_and_errors(rng):
    x = torch.from_numpy(rng.standard_normal((4, 100)).astype(np.float32))
    starts = torch.tensor([0, 10, 50, 99], dtype=torch.int32)
    ends = torch.tensor([100, 20, 50, 100], dtype=torch.int32)
    out = (torch.empty(4, 5), torch.empty(4, 5, dtype=torch.int32))
    v, i = litetopk.select_topk(x, 5, starts, ends, out=out)
    assert v is out[0] and i is out[1]
    assert i[2].tolist() == [-1] * 5 and i[3].tolist() == [0, -1, -1, -1, -1]
    with pytest.raises(ValueError, match="contiguous"):
        litetopk.select_topk(x.t(), 5)
    with pytest.raises(TypeError):
        litetopk.select_topk(x.double(), 5)
    with pytest.raises(TypeError):
        litetopk.select_topk(x, 5, starts.long(), ends.long())
    with pytest.raises(ValueError):
        litetopk.select_topk(x, 5, starts, ends + 1)
    with pytest.raises(ValueError):
        litetopk.select_topk(x, 5, backend="cuda")
    xr = x.clone().requires_grad_(True)
    litetopk.select_topk(xr, 5)  # no autograd through it, but accepted


def test_torch_indexer_fp8_matches_numpy(rng):
    T, S, H, D, k = 9, 140, 4, 16, 12
    q8 = e4m3_encode(rng.standard_normal((T, H, D)) * 8)
    k8 = e4m3_encode(rng.standard_normal((S, D)) * 8)
    sc = (rng.random(S) + 0.5).astype(np.float32)
    w = rng.standard_normal((T, H)).astype(np.float32)
    ke = (S - T + np.arange(T) + 1).astype(np.int32)
    ks = np.zeros(T, np.int32)
    ni, ns = litetopk.indexer_topk(q8, k8, sc, w, ks, ke, k, dtype="e4m3", sorted=True, return_scores=True)
    args = (t_e4m3(q8), t_e4m3(k8), torch.from_numpy(sc), torch.from_numpy(w), torch.from_numpy(ks),
            torch.from_numpy(ke))
    ti, ts = litetopk.indexer_topk(*args, k, sorted=True, return_scores=True)
    assert ti.dtype == torch.int32 and ts.dtype == torch.float32
    np.testing.assert_array_equal(ti.numpy(), ni)
    np.testing.assert_array_equal(ts.numpy(), ns)
    # the vLLM call form
    buf = torch.full((16, k), -5, dtype=torch.int32)
    vi = litetopk.fp8_mqa_topk((args[0], None), (args[1], args[2]), args[3], args[4], args[5], k,
                               clean_logits=False, out=buf[:T])
    assert vi.data_ptr() == buf.data_ptr() and (buf[T:] == -5).all()
    o = indexer_scores(e4m3_decode(q8), e4m3_decode(k8), sc, w)
    for t in range(T):
        check_topk_sets(vi[t].numpy(), o[t], 0, int(ke[t]), k, 1e-3 * np.abs(o[t]).max())
    # bf16 storage through torch.bfloat16
    qb = torch.from_numpy(bf16_encode(rng.standard_normal((T, H, D))).view(np.int16)).view(torch.bfloat16)
    kb = torch.from_numpy(bf16_encode(rng.standard_normal((S, D))).view(np.int16)).view(torch.bfloat16)
    bi = litetopk.indexer_topk(qb, kb, None, args[3], None, None, k, sorted=True)
    ni = litetopk.indexer_topk(qb.view(torch.int16).numpy().view(np.uint16), kb.view(torch.int16).numpy()
                               .view(np.uint16), None, w, None, None, k, dtype="bf16", sorted=True)
    np.testing.assert_array_equal(bi.numpy(), ni)


def test_torch_indexer_errors(rng):
    T, S, H, D = 3, 20, 2, 8
    q = torch.randn(T, H, D)
    kv = torch.randn(S, D)
    w = torch.randn(T, H)
    with pytest.raises(TypeError):
        litetopk.indexer_topk(q.half(), kv.half(), None, w, None, None, 4)
    with pytest.raises(TypeError):
        litetopk.indexer_topk(q, kv.to(torch.float8_e4m3fn), None, w, None, None, 4)
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q.transpose(1, 2).contiguous().transpose(1, 2), kv, None, w, None, None, 4)
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q, kv.t().contiguous().t(), None, w, None, None, 4)
    with pytest.raises(TypeError):
        litetopk.indexer_topk(q, kv, None, w.bfloat16(), None, None, 4)
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q, kv, None, w, torch.zeros(T, dtype=torch.int32), torch.full((T,), 21, dtype=torch.int32), 4)
    with pytest.raises(litetopk.UnsupportedError):
        litetopk.fp8_mqa_topk((q, w), (kv, None), w, None, None, 4)


def test_torch_knn(rng):
    q = torch.randn(5, 16)
    x = torch.randn(100, 16)
    s, i = litetopk.knn_topk(q, x, 7, metric="l2")
    assert i.dtype == torch.int64 and s.dtype == torch.float32
    d = torch.cdist(q.double(), x.double()) ** 2
    ref = torch.topk(d, 7, largest=False)
    assert all(set(i[b].tolist()) == set(ref.indices[b].tolist()) for b in range(5))
    torch.testing.assert_close(s.double(), ref.values, rtol=1e-4, atol=1e-4)
