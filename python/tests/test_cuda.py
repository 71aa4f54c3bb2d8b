"""CUDA tensors on the CUDA backend: vs the CPU backend and the float64 oracle, the current
stream, no host synchronisation, CUDA-graph capture with a workspace, and the vLLM call form
(fp8_mqa_topk) against a torch reference of DeepGEMM's logits + a masked top-k."""
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import litetopk  # noqa: E402
from oracle import check_topk_sets, indexer_abs_scale, indexer_scores  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

DEV = torch.device("cuda", torch.cuda.current_device())
HAVE_CUDA_BACKEND = litetopk.backend_available("cuda")
needs_backend = pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="the library was built without the CUDA backend")


@pytest.mark.skipif(HAVE_CUDA_BACKEND, reason="the CUDA backend is built")
@pytest.mark.filterwarnings("ignore")
def test_cuda_tensors_without_cuda_backend_raise():
    """A CPU-only library given CUDA tensors goes through every Python check and the stream lookup,
    then raises BackendUnavailableError (a RuntimeError): never a crash, never host pointers."""
    x = torch.randn(4, 100, device=DEV)
    with pytest.raises(litetopk.BackendUnavailableError, match="cuda"):
        litetopk.select_topk(x, 5)
    q8, k8, sc, w, ks, ke = fp8_problem(T=4, S=64, H=32, D=128)
    with pytest.raises(RuntimeError):
        litetopk.fp8_mqa_topk((q8, None), (k8, sc), w, ks, ke, 8)
    with pytest.raises(RuntimeError):
        litetopk.knn_topk(x, x, 2)
    with pytest.raises(RuntimeError):
        litetopk.IndexerState(8, backend="cuda")
    with pytest.raises(RuntimeError):
        litetopk.workspace_size("select", x, 5)


def supported(fn, *a, **kw):
    """Runs fn; an op the CUDA backend reports as unsupported skips the test (stated, not hidden)."""
    try:
        return fn(*a, **kw)
    except litetopk.UnsupportedError as e:
        pytest.skip(f"CUDA backend: {e}")


def fp8_problem(T, S, H, D, seed=0, ctx=None, requests=1):
    """Inputs as vLLM prepares them: e4m3 q (no scale), per-token k quantisation amax/448,
    weights with the scales folded in, causal ranges over `requests` packed requests."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    qf = torch.randn(T, H, D, device=DEV, generator=g)
    kf = torch.randn(S, D, device=DEV, generator=g)
    q_scale = qf.abs().amax(-1, keepdim=True).clamp(min=1e-4) / 448
    q8 = (qf / q_scale).to(torch.float8_e4m3fn)
    k_scale = kf.abs().amax(-1).clamp(min=1e-4) / 448
    k8 = (kf / k_scale[:, None]).to(torch.float8_e4m3fn)
    w = torch.randn(T, H, device=DEV, generator=g) * q_scale.squeeze(-1) * D ** -0.5 * H ** -0.5
    per = S // requests
    tq = T // requests
    ks = torch.arange(T, device=DEV).div(tq, rounding_mode="floor").clamp(max=requests - 1).to(torch.int32) * per
    ctx = per - tq if ctx is None else ctx
    ke = (ks + ctx + (torch.arange(T, device=DEV) % tq) + 1).clamp(max=S).to(torch.int32)
    return q8, k8, k_scale.float().contiguous(), w.float().contiguous(), ks, ke


def torch_ref_logits(q8, k8, k_scale, w, ks, ke):
    """DeepGEMM's reference pattern (written here): fp32 einsum, relu, head-weighted sum, key scale,
    -inf outside [ks, ke)."""
    s = torch.einsum("thd,sd->ths", q8.float(), k8.float())
    logits = (s.relu() * w[:, :, None]).sum(1) * k_scale[None, :]
    pos = torch.arange(k8.shape[0], device=q8.device)
    mask = (pos[None, :] >= ks[:, None]) & (pos[None, :] < ke[:, None])
    return logits.masked_fill(~mask, float("-inf"))


@needs_backend
def test_cuda_select_equals_cpu():
    g = torch.Generator(device=DEV).manual_seed(1)
    x = torch.randn(64, 5000, device=DEV, generator=g)
    x[3] = 0.5  # flat row
    x[4, ::3] = float("nan")
    starts = torch.randint(0, 2000, (64,), device=DEV, dtype=torch.int32, generator=g)
    ends = (starts + torch.randint(0, 3000, (64,), device=DEV, dtype=torch.int32, generator=g)).clamp(max=5000)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        xd = x.to(dt)
        v, i = supported(litetopk.select_topk, xd, 300, starts, ends)
        assert v.device == DEV and i.device == DEV and i.dtype == torch.int32
        cv, ci = litetopk.select_topk(xd.cpu(), 300, starts.cpu(), ends.cpu())
        assert torch.equal(i.cpu(), ci)
        assert torch.equal(v.cpu().nan_to_num(7.0), cv.nan_to_num(7.0))


@needs_backend
def test_cuda_indexer_vs_oracle_and_materialize():
    q8, k8, sc, w, ks, ke = fp8_problem(T=32, S=3000, H=32, D=128, seed=2)
    k = 256
    i, s = supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, k, sorted=True, return_scores=True)
    assert i.device == DEV and i.dtype == torch.int32
    m_i, m_s = supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, k, sorted=True, return_scores=True,
                         algo="materialize")
    assert torch.equal(i, m_i) and torch.equal(s.view(torch.int32), m_s.view(torch.int32))
    o = indexer_scores(q8.float().cpu().numpy(), k8.float().cpu().numpy(), sc.cpu().numpy(), w.cpu().numpy())
    ksn, ken, ic, scn = ks.cpu().numpy(), ke.cpu().numpy(), i.cpu().numpy(), s.cpu().numpy()
    # Hopper's FP8 wgmma accumulates with ~13 fraction bits (aligned to the largest product), so a
    # score's error scales with sum_h |w| |q|.|k| |scale| (mag), not with the score: 2^-11 * mag
    # (a 4x margin; a wrong head, key or weight would be off by >= 2^-7 * mag)
    mag = indexer_abs_scale(q8.float().cpu().numpy(), k8.float().cpu().numpy(), sc.cpu().numpy(), w.cpu().numpy())
    for t in range(q8.shape[0]):
        tol = 1e-4 * np.abs(o[t, ksn[t]:ken[t]]).max() + 2.0 ** -11 * mag[t] + 1e-6
        check_topk_sets(ic[t], o[t], int(ksn[t]), int(ken[t]), k, tol, sorted_=True, got_scores=scn[t])


@needs_backend
def test_cuda_fp8_mqa_topk_vllm_form():
    """What vLLM runs: fp8_fp4_mqa_logits((q, None), (k, k_scale), w, ks, ke, clean_logits=False) then
    top_k_per_row_prefill into a -1 pre-filled buffer -> one call; compared on value sets."""
    T, S, H, D, topk = 128, 8192, 64, 128, 512
    q8, k8, sc, w, ks, ke = fp8_problem(T, S, H, D, seed=3, requests=2, ctx=None)
    ke[:8] = ks[:8] + torch.arange(1, 9, device=DEV, dtype=torch.int32) * 64  # some rows shorter than topk
    buf = torch.full((T + 16, topk), -1, dtype=torch.int32, device=DEV)
    idx = supported(litetopk.fp8_mqa_topk, (q8, None), (k8, sc), w, ks, ke, topk, clean_logits=False,
                    out=buf[:T])
    assert idx.data_ptr() == buf.data_ptr()
    logits = torch_ref_logits(q8, k8, sc, w, ks, ke)
    n = (ke - ks).long()
    ref_vals = torch.topk(logits, topk, dim=-1).values
    valid = idx >= 0
    assert torch.equal(valid.sum(1), n.clamp(max=topk))  # -1 only as padding
    absidx = (idx.long() + ks[:, None].long()).clamp(min=0)
    got = torch.where(valid, logits.gather(1, absidx), torch.full_like(ref_vals, float("-inf")))
    got = got.sort(dim=1, descending=True).values
    mag = torch.einsum("thd,sd->ths", q8.float().abs(), k8.float().abs())
    mag = (torch.einsum("ths,th->ts", mag, w.abs()) * sc.abs()[None, :]).amax(1, keepdim=True)
    tol = 1e-4 * logits.masked_fill(logits.isinf(), 0).abs().amax(1, keepdim=True) + 2.0 ** -11 * mag + 1e-6
    del mag
    both = torch.isfinite(ref_vals)
    assert torch.equal(both, torch.isfinite(got))
    assert ((got - ref_vals).abs()[both] <= tol.expand_as(got)[both]).all()
    # distinct, in range, relative to ks
    for t in range(0, T, 17):
        row = idx[t][idx[t] >= 0]
        assert row.unique().numel() == row.numel() and int(row.max()) < int(n[t])
    # short rows: vLLM's 0..len-1 then -1
    assert idx[0].tolist() == list(range(64)) + [-1] * (topk - 64)


@needs_backend
def test_cuda_uses_current_stream_without_host_sync():
    g = torch.Generator(device=DEV).manual_seed(4)
    x = torch.randn(32, 20000, device=DEV, generator=g)
    ev, ei = supported(litetopk.select_topk, x, 100)
    q8, k8, sc, w, ks, ke = fp8_problem(T=16, S=2048, H=64, D=128, seed=5)
    e_idx = supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, 64, sorted=True)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    buf = torch.zeros_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # a long kernel, then the input is written: a call on any other stream would read zeros,
        # and a call that synchronises the host would take as long as the sleep
        torch.cuda._sleep(400_000_000)
        buf.copy_(x)
        t0 = time.perf_counter()
        prev = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")  # any torch-level sync in the binding raises
        try:
            v, i = litetopk.select_topk(buf, 100)
            idx = litetopk.indexer_topk(q8, k8, sc, w, ks, ke, 64, sorted=True)
        finally:
            torch.cuda.set_sync_debug_mode(prev)
        host_s = time.perf_counter() - t0
        assert not side.query(), "the sleep finished before the calls returned: the host waited"
    side.synchronize()
    assert torch.equal(i, ei) and torch.equal(v, ev)
    assert torch.equal(idx, e_idx)
    assert host_s < 0.1, f"calls took {host_s:.3f} s on the host"
    # an explicit stream argument
    with torch.cuda.stream(side):
        buf.zero_()
    side2 = torch.cuda.Stream()
    v2, i2 = litetopk.select_topk(x, 100, stream=side2)
    side2.synchronize()
    assert torch.equal(i2, ei)


@needs_backend
def test_cuda_graph_capture_with_workspace():
    q8, k8, sc, w, ks, ke = fp8_problem(T=32, S=4096, H=64, D=128, seed=6)
    k = 256
    n = litetopk.workspace_size("indexer", q8, k8, sc, w, ks, ke, k)
    ws = torch.empty(max(n, 1), dtype=torch.uint8, device=DEV)
    out = torch.empty(32, k, dtype=torch.int32, device=DEV)
    x = torch.randn(16, 10000, device=DEV)
    ns = litetopk.workspace_size("select", x, 128)
    ws2 = torch.empty(max(ns, 1), dtype=torch.uint8, device=DEV)
    sv, si = torch.empty(16, 128, device=DEV), torch.empty(16, 128, dtype=torch.int32, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the capture (lazy init, module loading)
        supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, k, sorted=True, out=out, workspace=ws)
        supported(litetopk.select_topk, x, 128, out=(sv, si), workspace=ws2)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        litetopk.indexer_topk(q8, k8, sc, w, ks, ke, k, sorted=True, out=out, workspace=ws)
        litetopk.select_topk(x, 128, out=(sv, si), workspace=ws2)
    q2, k2, sc2, w2, _, _ = fp8_problem(T=32, S=4096, H=64, D=128, seed=7)
    q8.copy_(q2), k8.copy_(k2), sc.copy_(sc2), w.copy_(w2)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    ref = litetopk.indexer_topk(q8, k8, sc, w, ks, ke, k, sorted=True)
    rv, ri = litetopk.select_topk(x, 128)
    assert torch.equal(out, ref)
    assert torch.equal(si, ri) and torch.equal(sv, rv)


@needs_backend
def test_cuda_state_across_chunks():
    q8, k8, sc, w, ks, ke = fp8_problem(T=64, S=4096, H=32, D=128, seed=8, ctx=4096 - 64)
    k = 128
    full = supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, k, sorted=True)
    with litetopk.IndexerState(3 * k, backend="cuda") as st:
        assert st.backend == "cuda"
        parts = [litetopk.indexer_topk(q8[c:c + 16], k8, sc, w[c:c + 16], ks[c:c + 16], ke[c:c + 16], k,
                                       sorted=True, state=st) for c in range(0, 64, 16)]
        hot = st.get()
        assert 0 < len(hot) <= 3 * k
        st.set(hot[::-1].copy())
        again = litetopk.indexer_topk(q8, k8, sc, w, ks, ke, k, sorted=True, state=st)
        st.reset()
        assert len(st.get()) == 0
    assert torch.equal(torch.cat(parts), full) and torch.equal(again, full)


@needs_backend
def test_cuda_knn_equals_cpu():
    g = torch.Generator(device=DEV).manual_seed(9)
    q = torch.randn(16, 64, device=DEV, generator=g)
    x = torch.randn(5000, 64, device=DEV, generator=g)
    for metric in ("ip", "l2", "cos"):
        s, i = supported(litetopk.knn_topk, q, x, 50, metric=metric)
        assert i.dtype == torch.int64 and i.device == DEV
        cs, ci = litetopk.knn_topk(q.cpu(), x.cpu(), 50, metric=metric)
        torch.testing.assert_close(s.cpu(), cs, rtol=1e-4, atol=1e-3)
        # sets equal up to near-ties at the boundary
        for b in range(16):
            diff = set(i[b].tolist()) ^ set(ci[b].tolist())
            assert len(diff) <= 2, (metric, b, diff)


@needs_backend
def test_cuda_stats_and_errors():
    q8, k8, sc, w, ks, ke = fp8_problem(T=8, S=1024, H=64, D=128, seed=10)
    st = litetopk.Stats(per_row=True)
    supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, 64, stats=st)
    assert st.rows == 8 and st.row_candidates.shape == (8,)
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q8, k8, sc, w, ks.cpu(), ke.cpu(), 64)  # mixed devices
    with pytest.raises(TypeError):
        litetopk.indexer_topk(q8, k8, sc, w, [0] * 8, [1] * 8, 64)  # lists only for host calls
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q8, k8, sc, w, ks, ke, 64, backend="cpu")
    with pytest.raises(ValueError, match="contiguous"):
        litetopk.indexer_topk(q8, k8.t().contiguous().t(), sc, w, ks, ke, 64)
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q8, k8, sc, w, ks, ke, 64, out=torch.empty(8, 64, dtype=torch.int32))
    with pytest.raises(ValueError):
        litetopk.indexer_topk(q8, k8, sc, w, ks, ke, 64, workspace=torch.empty(10, dtype=torch.uint8))
    with pytest.raises(TypeError):
        litetopk.indexer_topk(q8, k8, sc, w, ks.long(), ke.long(), 64)
    with litetopk.IndexerState(8, backend="cpu") as hs:
        with pytest.raises(ValueError, match="backend"):
            litetopk.indexer_topk(q8, k8, sc, w, ks, ke, 64, state=hs)


@needs_backend
def test_cuda_prefill_equals_direct_and_callback():
    L, m, k, C = 2048, 4, 128, 512
    q8, k8, sc, w, _, _ = fp8_problem(T=L, S=L // m, H=64, D=128, seed=11)
    ks = torch.zeros(L, dtype=torch.int32, device=DEV)
    ke = ((torch.arange(L, device=DEV) + 1) // m).to(torch.int32)
    ref = supported(litetopk.indexer_topk, q8, k8, sc, w, ks, ke, k, relative=False, sorted=True)
    got, nbytes = supported(litetopk.prefill, q8, k8, sc, w, k, m=m, chunk=C, sorted=True,
                            return_workspace_bytes=True)
    assert torch.equal(got, ref) and nbytes > 0
    buf = torch.full((L, k), -9, dtype=torch.int32, device=DEV)

    def cb(first, idx, scores):
        assert idx.device == DEV and idx.shape == (C, k) and scores is None
        buf[first:first + idx.shape[0]].copy_(idx)  # on the same stream: ordered before the next chunk

    assert litetopk.prefill(q8, k8, sc, w, k, m=m, chunk=C, sorted=True, store=False, callback=cb) is None
    torch.cuda.synchronize()
    assert torch.equal(buf, ref)


@needs_backend
def test_cuda_candidate_indexer_equals_cpu():
    """blocks_topk and candidates_topk on CUDA tensors (the sm_90a kernels on Hopper) against the CPU
    backend on the same tensors copied to the host, bit for bit: FP8 codes of +-1/2, 1, 2 and
    weights in quarters make every score exact in fp32 whatever the summation order."""
    g = torch.Generator().manual_seed(5)
    T, S, H, D = 24, 2000, 64, 128
    pick = lambda *shape: (torch.tensor([0.5, 1.0, 2.0])[torch.randint(0, 3, shape, generator=g)]  # noqa: E731
                           * (torch.randint(0, 2, shape, generator=g) * 2 - 1))
    q8, k8 = pick(T, H, D).to(torch.float8_e4m3fn), pick(S, D).to(torch.float8_e4m3fn)
    sc = 2.0 ** torch.randint(-2, 3, (S,), generator=g).float()
    w = torch.randint(-2, 3, (T, H), generator=g).float() * 0.25
    ks = torch.randint(0, S // 3, (T,), generator=g).to(torch.int32)
    ke = torch.maximum(ks, torch.randint(S // 2, S + 1, (T,), generator=g).to(torch.int32))
    host = (q8, k8, sc, w, ks, ke)
    dev = tuple(x.to(DEV) for x in host)
    bl_d, bs_d = supported(litetopk.blocks_topk, *dev, 64, return_scores=True)
    bl_c, bs_c = litetopk.blocks_topk(*host, 64, return_scores=True, backend="cpu")
    assert bl_d.device == DEV
    assert torch.equal(bl_d.cpu(), bl_c) and torch.equal(bs_d.cpu().view(torch.int32), bs_c.view(torch.int32))
    i_d, s_d = supported(litetopk.candidates_topk, *dev, bl_d, 100, sorted=True, return_scores=True)
    i_c, s_c = litetopk.candidates_topk(*host, bl_c, 100, sorted=True, return_scores=True, backend="cpu")
    assert torch.equal(i_d.cpu(), i_c) and torch.equal(s_d.cpu().view(torch.int32), s_c.view(torch.int32))


@needs_backend
@pytest.mark.parametrize("physical", [False, True])
def test_cuda_decode_candidate_forms_equal_cpu(physical):
    """decode_blocks_topk (with the row's own top-k) and decode_candidates_topk on CUDA tensors over a
    paged cache (H = 64, D = 128, block_kv 64: the sm_90a paged scan on Hopper) against the CPU backend
    on the same tensors copied to the host, bit for bit (exact codes and weights, test_candidates'
    paged_problem), with lengths 0 to past a block, a shuffled table and lists with -1 and repeats."""
    from test_candidates import paged_problem
    rng = np.random.default_rng(33)
    B, next_n, H, D, bkv = 5, 2, 64, 128, 64
    q, cache, w, lens, table = paged_problem(rng, B, next_n, H, D, bkv, max_len=1500)
    lens[0, 0], lens[1] = 0, [1, 70]
    nb, k = 20, 100
    lists = rng.integers(-1, 1500 // 8, (B * next_n, 40)).astype(np.int32)
    lists[:, 1] = lists[:, 0]
    host = (torch.from_numpy(q).view(torch.float8_e4m3fn), torch.from_numpy(cache), torch.from_numpy(w),
            torch.from_numpy(lens), torch.from_numpy(table))
    dev = tuple(x.to(DEV) for x in host)
    kw = dict(block_kv=bkv, physical=physical)
    got = supported(litetopk.decode_blocks_topk, *dev, nb, topk=k, return_scores=True, **kw)
    ref = litetopk.decode_blocks_topk(*host, nb, topk=k, return_scores=True, backend="cpu", **kw)
    assert got[0].device == DEV
    for g_, r_ in zip(got, ref):
        g_ = g_.cpu()
        assert torch.equal(g_.view(torch.int32), r_.view(torch.int32))
    li = torch.from_numpy(lists)
    c_d = supported(litetopk.decode_candidates_topk, *dev, li.to(DEV), k, sorted=True, return_scores=True, **kw)
    c_c = litetopk.decode_candidates_topk(*host, li, k, sorted=True, return_scores=True, backend="cpu", **kw)
    for g_, r_ in zip(c_d, c_c):
        assert torch.equal(g_.cpu().view(torch.int32), r_.view(torch.int32))
