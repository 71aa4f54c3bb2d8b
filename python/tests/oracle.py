"""float64 numpy oracle for the tests, and fp8/bf16 encoders that need no ml_dtypes."""
import numpy as np

try:
    import ml_dtypes
except ImportError:  # the raw-storage paths are tested either way
    ml_dtypes = None


def _e4m3_table():
    t = np.empty(256, np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 7
        if e == 15 and m == 7:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * (m / 8.0) * 2.0 ** -6
        else:
            t[b] = s * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return t


E4M3 = _e4m3_table()
_POS = E4M3[:0x7F]  # finite non-negative codes, increasing


def e4m3_decode(u8):
    return E4M3[np.asarray(u8, np.uint8)]


def e4m3_encode(x):
    """Nearest e4m3 code (saturating at 448), as uint8. Round-half direction does not matter here."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(_POS, a), 0, len(_POS) - 1)
    lo = np.clip(hi - 1, 0, len(_POS) - 1)
    code = np.where(np.abs(_POS[lo] - a) <= np.abs(_POS[hi] - a), lo, hi).astype(np.uint8)
    return np.where(np.signbit(x) & (code != 0), code | 0x80, code).astype(np.uint8)


def bf16_encode(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_decode(u16):
    return (np.asarray(u16, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def indexer_scores(q, kv, kv_scale, w):
    """float64 I[t, s] for decoded float inputs q [T,H,D], kv [S,D], kv_scale [S] or None, w [T,H]."""
    dots = np.einsum("thd,sd->ths", q.astype(np.float64), kv.astype(np.float64), optimize=True)
    relu = np.where(np.isnan(dots), dots, np.maximum(dots, 0.0))
    s = np.einsum("ths,th->ts", relu, w.astype(np.float64), optimize=True)
    if kv_scale is not None:
        s = s * np.asarray(kv_scale, np.float64)[None, :]
    return s


def indexer_abs_scale(q, kv, kv_scale, w):
    """max_s of sum_h |w| |q|.|k| |scale| per row: the magnitude the rounding error scales with."""
    a = np.einsum("thd,sd->ths", np.abs(q.astype(np.float64)), np.abs(kv.astype(np.float64)), optimize=True)
    s = np.einsum("ths,th->ts", a, np.abs(w.astype(np.float64)), optimize=True)
    if kv_scale is not None:
        s = s * np.abs(np.asarray(kv_scale, np.float64))[None, :]
    return np.nan_to_num(s, nan=0.0, posinf=0.0).max(axis=1) if s.shape[1] else np.zeros(s.shape[0])


def order(scores, idx):
    """Indices of `scores` sorted by the library ORDER: score desc, NaN last, ties by lower idx."""
    scores = np.asarray(scores, np.float64)
    nan = np.isnan(scores)
    key = np.where(nan, 0.0, -scores) + 0.0  # + 0.0 folds -0.0 into +0.0
    return np.lexsort((idx, key, nan))


def topk_row(scores_row, lo, hi, k):
    """Oracle (indices absolute, scores) of the best k of scores_row[lo:hi], -1/-inf padded."""
    idx = np.arange(lo, hi)
    vals = scores_row[lo:hi]
    o = order(vals, idx)[:k]
    out_i = np.full(k, -1, np.int64)
    out_s = np.full(k, -np.inf)
    out_i[: len(o)] = idx[o]
    out_s[: len(o)] = vals[o]
    return out_i, out_s


def check_topk_sets(got_idx, oracle_scores, lo, hi, k, tol, base=None, sorted_=False, got_scores=None):
    """Checks one row of an approximate-score top-k against float64 oracle scores.

    Every returned index is valid, distinct, and its oracle score is >= the oracle k-th score - tol;
    every key whose oracle score is > k-th + tol is returned; padding -1 only after min(k, n) entries.
    """
    base = lo if base is None else base
    got = np.asarray(got_idx, np.int64)
    n = hi - lo
    m = min(k, n)
    valid = got[got >= 0]
    assert len(valid) == m, f"expected {m} indices, got {len(valid)}: {got}"
    if sorted_:
        assert np.all(got[:m] >= 0) and np.all(got[m:] == -1), f"padding must follow the entries: {got}"
    absidx = valid + base
    assert len(np.unique(absidx)) == m, f"duplicate indices: {got}"
    assert np.all((absidx >= lo) & (absidx < hi)), f"index out of range [{lo}, {hi}): {absidx}"
    if m == 0:
        return
    row = oracle_scores[lo:hi]
    oi, os_ = topk_row(oracle_scores, lo, hi, k)
    kth = os_[m - 1]
    gs = oracle_scores[absidx]
    if np.isnan(kth) or not np.isfinite(kth):
        return  # non-finite boundary: sets checked by the dedicated NaN/inf tests
    assert np.all(np.nan_to_num(gs, nan=-np.inf) >= kth - tol), \
        f"returned a key scoring {np.nanmin(gs)} below the k-th {kth} - tol {tol}"
    must = np.arange(lo, hi)[np.nan_to_num(row, nan=-np.inf) > kth + tol]
    missing = np.setdiff1d(must, absidx)
    assert len(missing) == 0, f"missing keys {missing} scoring above k-th + tol"
    if sorted_:
        # best first within tolerance
        assert np.all(np.diff(gs) <= tol), f"not sorted: {gs}"
    if got_scores is not None:
        gsc = np.asarray(got_scores, np.float64)
        np.testing.assert_allclose(gsc[got >= 0], gs, rtol=0, atol=tol)
        assert np.all(np.isneginf(gsc[got < 0]))
