#!/usr/bin/env python3
"""The README's measured tables, made from the record files (bench/results/<machine>/<op>.jsonl).

  python3 bench/report.py                 print every table (markdown)
  python3 bench/report.py --write README.md   replace the blocks between the README's
                                          <!-- report:NAME --> and <!-- /report:NAME --> markers
  python3 bench/report.py --check README.md   exit 1 when those blocks differ from the records (ctest)
  python3 bench/report.py --plots         also redraw the plots beside the records (needs matplotlib)

Each table takes one run of one harness: the newest date and commit of that harness in the record
(a run appends lines, it never edits them), so every figure of a table comes from one process's
side-by-side measurement. Standard library only, so ctest can check the README anywhere.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")


def load(machine, op):
    path = os.path.join(RESULTS, machine, op + ".jsonl")
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.strip().startswith("{")]


def newest_run(recs, harness):
    """The records of the newest (date, commit) of one harness: one run, one process each."""
    mine = [r for r in recs if r.get("harness") == harness]
    if not mine:
        return []
    # newest by date, then by timestamp within it (a commit hash says nothing of its age); where
    # harnesses write no timestamp, a clean commit before a dirty tree's, then the later in the record
    last = max(enumerate(mine), key=lambda ir: (ir[1].get("date", ""), ir[1].get("timestamp", ""),
                                                 not str(ir[1].get("commit", "")).endswith("-dirty"), ir[0]))[1]
    best = (last.get("date", ""), last.get("commit", ""))
    return [r for r in mine if (r.get("date", ""), r.get("commit", "")) == best]


def words(ours_ms, theirs_ms, theirs="it"):
    if not ours_ms or not theirs_ms:
        return ""
    if abs(ours_ms - theirs_ms) <= 0.01 * max(ours_ms, theirs_ms):
        return f"as fast as {theirs}"
    if ours_ms < theirs_ms:
        return f"**{theirs_ms / ours_ms:.2f}x faster**"
    return f"{ours_ms / theirs_ms:.2f}x slower"


def size(n):
    """262144 -> 256K, 1048576 -> 1M"""
    for div, suf in ((2**20, "M"), (2**10, "K")):
        if n >= div and n % (div // 4) == 0:
            return f"{n / div:g}{suf}"
    return f"{n:,}"


def mib(b):
    if b is None:
        return ""
    return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def ms(x):
    if x is None:
        return ""
    return f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.3g} ms" if x < 1 else f"{x:.1f} ms" if x >= 10 else f"{x:.2f} ms"


def provenance(run, record):
    r = run[0]
    cmd = r.get("command", "")
    ceil = [x.get("ceiling_tflops") for x in run if x.get("ceiling_tflops")]
    copy = [x.get("copy_GBps") for x in run if x.get("copy_GBps")]
    extra = ""
    if ceil:
        extra += f", sustained FP8 GEMM measured beside it {min(ceil):,.0f}-{max(ceil):,.0f} TFLOP/s"
    if copy:
        extra += f", device copy {copy[0]:,.0f} GB/s"
    return (f"one process on {r.get('device', '?')}, commit `{r.get('commit', '?')}`, {r.get('date', '?')}{extra}; "
            f"record [`{record}`]({record}); command: `{cmd}`")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# ---- one function per table ---------------------------------------------------------------------
def dsa_h200():
    run = newest_run(load("h200", "dsa"), "bench/dsa_torch.py")
    if not run:
        return None
    by = {}
    for r in run:
        by[(r["H"], r["S"], r["algo"])] = r
    rows = []
    for H, S in sorted({(r["H"], r["S"]) for r in run}, key=lambda x: (-x[0], x[1])):
        f, m, s, t = (by.get((H, S, a)) for a in ("fused", "materialize", "score_only", "torch"))
        if not f:
            continue
        g = lambda r: r["median_ms"] if r else None  # noqa: E731
        rows.append([f"T={f['T']}, S={size(S)}, H={H}, k={f['k']}", f"{ms(g(f))} ({mib(f.get('aux_bytes'))})",
                     f"{ms(g(m))} ({mib(m.get('aux_bytes')) if m else ''})", ms(g(s)),
                     f"{ms(g(t))} ({mib(t.get('aux_bytes')) if t else ''})", words(g(f), g(t), "torch"),
                     words(g(f), g(m), "materialize")])
    return ("Indexer top-k (DeepSeek V3.2 DSA shape, e4m3, causal, hot set carried), "
            + provenance(run, "bench/results/h200/dsa.jsonl") + "\n\n"
            + table(["shape", "litetopk fused (aux)", "materialize: same scores written + GPU select (aux)",
                     "score only (selection off)", "Triton FP8 logits + torch.topk (logits chunk)", "fused vs torch",
                     "fused vs materialize"], rows))


def prefill_h200():
    run = newest_run(load("h200", "prefill"), "bench/prefill_torch.py")
    if not run:
        return None
    by = {(r["m"], r["k"], r["L"], r["algo"]): r for r in run}
    rows = []
    for m, k, L in sorted({(r["m"], r["k"], r["L"]) for r in run}):
        f, t = by.get((m, k, L, "fused")), by.get((m, k, L, "materialize"))
        if not f:
            continue
        name = "V4-Flash CSA (m=4, k=512)" if m == 4 else "V3.2 DSA (m=1, k=2048)"
        rows.append([f"{name}, L={size(L)}", f"{ms(f['median_ms'])} ({mib(f.get('aux_bytes'))})",
                     f"{ms(t['median_ms'])} ({mib(t.get('aux_bytes'))})" if t else "",
                     f"{f.get('tflops', 0):.0f}", words(f["median_ms"], t["median_ms"] if t else None, "materialize")])
    return ("Whole-sequence prefill (`ltk_prefill_run`, chunks of 8192 rows), "
            + provenance(run, "bench/results/h200/prefill.jsonl") + "\n\n"
            + table(["sequence", "litetopk fused (aux)", "materialize, 512 MB logits budget (aux)", "fused TFLOP/s",
                     "fused vs materialize"], rows))


def knn_h200():
    run = newest_run(load("h200", "knn"), "bench/gpu_knn_torch.py")
    run = [r for r in run if r.get("B") == 64]
    if not run:
        return None
    by = {(r["N"], r["k"], r["algo"]): r for r in run}
    rows = []
    for N, k in sorted({(r["N"], r["k"]) for r in run}):
        f, t = by.get((N, k, "fused")), by.get((N, k, "torch"))
        if not f:
            continue
        rows.append([f"N={size(N)}, k={k}", ms(f["median_ms"]), ms(t["median_ms"]) if t else "",
                     words(f["median_ms"], t["median_ms"] if t else None, "torch"),
                     f"{f['median_ms'] / f['floor_ms']:.2f}x" if f.get("floor_ms") else ""])
    r0 = run[0]
    return (f"kNN top-k, B=64 queries x N base vectors, D={r0['D']}, {r0['dtype']}, inner product, "
            + provenance(run, "bench/results/h200/knn.jsonl") + "\n\n"
            + table(["corpus, k", "litetopk fused", "cuBLAS GEMM + torch.topk", "fused vs torch",
                     "fused time / one read of the corpus at the copy rate"], rows))


def select_h200():
    run = newest_run(load("h200", "select"), "bench/gpu_select_torch.py")
    if not run:
        return None
    by = {(r["rows"], r["cols"], r["k"], r["dtype"], r["input"], r["sorted"], r["algo"]): r for r in run}
    rows = []
    for key in sorted({(r["rows"], r["cols"], r["k"], r["dtype"], r["input"]) for r in run}):
        f, t = by.get(key + (True, "radix")), by.get(key + (True, "torch"))
        if not f:
            continue
        rows.append([f"{key[0]} x {key[1]:,}, k={key[2]}, {key[3]}, {key[4]}", ms(f["median_ms"]),
                     ms(t["median_ms"]) if t else "", words(f["median_ms"], t["median_ms"] if t else None, "torch")])
    return ("Select top-k of given score rows (sorted output), "
            + provenance(run, "bench/results/h200/select.jsonl") + "\n\n"
            + table(["rows x cols, k, dtype, rows' values", "litetopk select", "torch.topk", "litetopk vs torch"], rows))


def select_dist_h200():
    """The distribution suite of `litetopk bench select --dist` (fp32, k = 2048): the newest commit's
    run of the whole suite (10 distributions or more: a spot check of a few does not replace it) and,
    where the same day's records hold it, the commit it was measured against."""
    mine = [r for r in load("h200", "select") if r.get("harness") == "litetopk bench select"
            and r.get("dtype") in ("f32", "float32") and r.get("k") == 2048]
    suite, first = {}, {}  # (date, commit): its distributions; its first line (the older code ran first)
    for r in mine:
        key = (r["date"], r["commit"])
        suite.setdefault(key, set()).add(r["dist"])
        first[key] = min(first.get(key, "~"), r.get("timestamp", ""))
    full = [key for key, d in suite.items() if len(d) >= 10]
    if not full:
        return None
    day, newest = max(full, key=lambda key: (key[0], first[key]))
    today = [r for r in mine if r["date"] == day]
    run = [r for r in today if r["commit"] == newest]
    base = {(r["rows"], r["dist"]): r for r in today if r["commit"] != newest and first[(day, r["commit"])] < first[(day, newest)]}
    ours = {(r["rows"], r["dist"]): r for r in run}
    before = sorted({r["commit"] for r in today if r["commit"] != newest and first[(day, r["commit"])] < first[(day, newest)]})
    rows = []
    dists = [d for d in dict.fromkeys(r["dist"] for r in run)]
    for d in dists:
        row = [d]
        for R in (64, 8192):
            o, n, b = ours.get((R, d)), ours.get((R, "normal")), base.get((R, d))
            row += [ms(o["median_ms"]) if o else "", f"{o['median_ms'] / n['median_ms']:.2f}x" if o and n else "",
                    ms(b["median_ms"]) if b else ""]
        rows.append(row)
    bc = ", ".join(f"`{c}`" for c in before) or "-"
    return ("Select over every distribution of the suite (`tools/gen.c`; fp32 rows of 1,048,576, k = 2048, sorted), "
            + provenance(run, "bench/results/h200/select.jsonl") + f"; 'before': commit {bc} in the same session\n\n"
            + table(["rows' values", "64 rows", "x normal", "before", "8192 rows", "x normal", "before"], rows))


def decode_h200():
    recs = load("h200", "decode")
    grid = [r for r in recs if r.get("H") == 64 and "A/B" not in r.get("note", "")]
    run = newest_run(grid, "litetopk bench decode")
    if not run:
        return None
    by = {}
    for r in run:
        by.setdefault((r["B"], r["ctx"], r["next_n"], r.get("mixed", False)), {})[r["algo"]] = r
    rows = []
    for (B, ctx, nn, mixed), a in sorted(by.items(), key=lambda x: (x[0][2], x[0][0], x[0][1])):
        f, m, so = a.get("fused"), a.get("materialize"), a.get("score_only")
        any_ = f or m or so
        # (records since the two floors were written: floor_ms is the larger, read_floor_ms the read)
        read = any_.get("read_floor_ms", any_.get("floor_ms"))
        flop = any_["tflops"] * any_["median_ms"] / any_["ceiling_tflops"] if any_.get("ceiling_tflops") else None
        floor = max(read or 0, flop or 0)
        b2b = f.get("b2b_ms") if f else None
        rows.append([f"B={B} ctx={size(ctx)}{' mixed' if mixed else ''} next_n={nn}", ms(f and f["median_ms"]),
                     ms(b2b), ms(m and m["median_ms"]), ms(read), ms(flop),
                     f"{f['median_ms'] / floor:.2f}x" if f and floor else "",
                     f"{b2b / floor:.2f}x" if b2b and floor else ""])
    torch_run = newest_run(load("h200", "decode_torch"), "bench/decode_torch.py")
    trows = [[f"B={r['B']} ctx={size(r['ctx'])} next_n={r['next_n']}", ms(r["litetopk_ms"]), ms(r["torch_ms"]),
              f"**{r['speedup']:.1f}x faster**", f"{r['recall_vs_torch']:.4f}"]
             for r in sorted(torch_run, key=lambda r: (r["B"], r["ctx"]))]
    r0 = run[0]
    out = ("Decode step (`ltk_decode_topk`, paged FP8 cache, H=64, D=128, k=2048, block_kv 64, sorted with "
           "scores), " + provenance(run, "bench/results/h200/decode.jsonl") + ". Floors: one read of the cache "
           f"at the copy rate measured in the process ({r0.get('copy_GBps', 0):.0f} GB/s), and the scoring FLOPs at "
           f"the FP8 GEMM rate measured in it ({r0.get('ceiling_tflops', 0):.0f} TFLOP/s). Fused and materialize take "
           "the same dense path here (design.md, the decode operation); a call's time varies ~15% between "
           "processes (the record's order A/B lines), so their differences below are noise. 'One call': CUDA "
           "events around a call from an idle GPU, the median of 10; 'back to back': 20 calls issued together, "
           "the GPU time a call (a serving loop's steps).\n\n")
    out += table(["shape", "fused, one call", "fused, back to back", "materialize, one call", "read floor",
                  "FLOP floor", "one call / floor", "back to back / floor"], rows)
    if trows:
        out += ("\n\nAgainst the baseline a user writes with torch (per request: page gather, `torch._scaled_mm` FP8 "
                "scores, ReLU-weighted head sum, `torch.topk`), through the Python binding, " +
                provenance(torch_run, "bench/results/h200/decode_torch.jsonl") + ".\n\n")
        out += table(["shape", "litetopk", "torch", "litetopk vs torch", "recall vs torch"], trows)
    return out


def cpu():
    out = []
    # the table's shape only (bench/run-cpu.sh); the record also holds the distribution suite's lines
    knn = [r for r in load("cpu", "knn") if (r.get("B"), r.get("N"), r.get("D")) == (64, 1000000, 384)
           and r.get("dist", "clustered") == "clustered"]
    if knn:
        by = {(r["k"], r["backend"], r["algo"]): r for r in knn}
        rows = []
        for k in sorted({r["k"] for r in knn}):
            f, m = by.get((k, "cpu", "fused")), by.get((k, "cpu", "materialize"))
            fa, fb = by.get((k, "faiss-cpu", "IndexFlatIP")), by.get((k, "faiss-cpu", "IndexFlatIP_blas0"))
            if not f:
                continue
            best = min((x["median_ms"] for x in (fa, fb) if x), default=None)
            rows.append([f"k={k}", f"{ms(f['median_ms'])} ({mib(f.get('aux_bytes'))})",
                         f"{ms(m['median_ms'])} ({mib(m.get('aux_bytes'))})" if m else "",
                         f"{ms(fa['median_ms']) if fa else ''} / {ms(fb['median_ms']) if fb else ''}",
                         words(f["median_ms"], best, "faiss")])
        r0 = knn[0]
        out.append(f"kNN top-k on the CPU, B={r0['B']} x N={r0['N']:,}, D={r0['D']}, fp32, inner product: "
                   f"{r0.get('device')}, {r0.get('threads')} threads, commit `{r0.get('commit')}`; record "
                   "[`bench/results/cpu/knn.jsonl`](bench/results/cpu/knn.jsonl); commands: `bench/run-cpu.sh`\n\n"
                   + table(["k", "litetopk fused (aux)", "materialize + select (aux)",
                            "faiss-cpu IndexFlatIP: default / BLAS forced", "fused vs faiss's faster"], rows))
    dsa = load("cpu", "dsa")
    if dsa:
        by = {}
        for r in dsa:
            by.setdefault(r["algo"], r)
        f, m = by.get("fused"), by.get("materialize")
        if f and m:
            out.append(f"Indexer top-k on the CPU, T={f['T']}, S={f['S']:,}, H={f['H']}, k={f['k']}, e4m3: "
                       f"{f.get('device')}, commit `{f.get('commit')}`; record "
                       "[`bench/results/cpu/dsa.jsonl`](bench/results/cpu/dsa.jsonl); command: `litetopk bench dsa "
                       f"--T {f['T']} --S {f['S']} --H {f['H']} --D {f['D']} -k {f['k']} --chunk {f['chunk']} "
                       "--backend cpu`\n\n"
                       + table(["path", "time", "aux memory"],
                               [["litetopk fused", ms(f["median_ms"]), mib(f.get("aux_bytes"))],
                                ["materialize + select", ms(m["median_ms"]), mib(m.get("aux_bytes"))],
                                ["fused vs materialize", words(f["median_ms"], m["median_ms"], "materialize"), ""]]))
    return "\n\n".join(out) if out else None


def blocks_h200():
    run = newest_run(load("h200", "blocks"), "litetopk bench blocks")
    if not run:
        return None
    by = {(r["block_size"], r["call"], r["algo"]): r for r in run}
    rows, brows = [], []
    for b in sorted({r["block_size"] for r in run}):
        pub, plain = by.get((b, "blocks", "fused")), by.get((b, "indexer", "fused"))
        cons, cmat = by.get((b, "candidates", "fused")), by.get((b, "candidates", "materialize"))
        both = by.get((b, "blocks_topk", "fused"))
        if not (pub and plain and cons):
            continue
        if both:
            brows.append([f"b={b}, {pub['block_k']} blocks, k={cons['k']}", ms(both["median_ms"]),
                          ms(pub["median_ms"] + plain["median_ms"]), ms(plain["median_ms"]),
                          f"{both['median_ms'] / plain['median_ms']:.3f}x"])
        rows.append([f"b={b}, {pub['block_k']} blocks, k={cons['k']}", ms(pub["median_ms"]), ms(plain["median_ms"]),
                     f"{pub['median_ms'] / plain['median_ms']:.3f}x", ms(cons["median_ms"]),
                     ms(cons.get("read_floor_ms")),
                     f"{cons['median_ms'] / cons['read_floor_ms']:.3f}x" if cons.get("read_floor_ms") else "",
                     ms(cmat["median_ms"]) if cmat else "", words(cons["median_ms"], cmat["median_ms"] if cmat else None,
                                                                  "materialize")])
    r0 = run[0]
    dec = newest_run(load("h200", "decode_blocks"), "litetopk bench decode_blocks")
    dec_tab = ""
    if dec:
        plain = {(r["B"], r["ctx"], r["next_n"], r["algo"]): r for r in load("h200", "decode")
                 if r.get("commit") == dec[0].get("commit") and r.get("date") == dec[0].get("date")}
        drows = []
        for r in sorted((x for x in dec if x["algo"] == "fused"), key=lambda x: (x["next_n"], x["B"], x["ctx"])):
            p = plain.get((r["B"], r["ctx"], r["next_n"], "fused"))
            drows.append([f"B={r['B']} ctx={size(r['ctx'])} next_n={r['next_n']}, b={r['block_size']}, "
                          f"{r['block_k']} blocks", ms(r["median_ms"]), ms(p["median_ms"]) if p else "",
                          f"{r['median_ms'] / p['median_ms']:.2f}x" if p else "", ms(r.get("read_floor_ms")),
                          f"{r['x_floor']:.2f}x" if r.get("x_floor") else ""])
        dec_tab = ("\n\nThe decode publication (`ltk_decode_blocks_topk` over the paged cache, block_kv 64, blocks "
                   "only, pinned, ids ascending) beside the decode step (`ltk_decode_topk`, k=2048) on the same "
                   "inputs, " + provenance(dec, "bench/results/h200/decode_blocks.jsonl") + "\n\n"
                   + table(["shape", "publication", "decode step", "publication / decode", "cache read floor",
                            "publication / floor"], drows))
    return ("DeepSeek-V4.1's candidate indexer (`ltk_blocks_topk`, `ltk_candidates_topk`), T=" + str(r0["T"])
            + f", S={size(r0['S'])} compressed keys, H={r0['H']}, e4m3, causal; the publication pins the newest "
            "block and returns ids ascending, the consumer scores the published lists, "
            + provenance(run, "bench/results/h200/blocks.jsonl")
            + ". Read floor: the listed keys (rows of 128 B and a 4-byte scale) read once at the copy rate measured "
            "in the process; the consumer's materialize gathers them densely first, then the indexer's dense path.\n\n"
            + table(["shape", "publication", "plain fused indexer", "publication / plain", "consumer",
                     "consumer read floor", "consumer / floor", "consumer materialize", "consumer vs materialize"],
                    rows)
            + ("\n\nThe source layer's two outputs in one call (`ltk_blocks_topk` with `ix.k` = k: the publication "
               "and the row's own top-k, sorted with scores, the block maxima written by the indexer's own scans), "
               "against the two calls it replaces and the plain fused indexer, same run:\n\n"
               + table(["shape", "publication + own top-k, one call", "publication, then the indexer", "plain fused indexer",
                        "one call / plain"], brows) if brows else "")
            + dec_tab)


TABLES = {"dsa-h200": dsa_h200, "prefill-h200": prefill_h200, "knn-h200": knn_h200, "select-h200": select_h200,
          "select-dist-h200": select_dist_h200,
          "decode-h200": decode_h200, "blocks-h200": blocks_h200,
          "cpu": cpu}


def render():
    return {name: fn() for name, fn in TABLES.items()}


def splice(text, blocks):
    for name, body in blocks.items():
        if body is None:
            continue
        pat = re.compile(rf"(<!-- report:{re.escape(name)} -->\n).*?(<!-- /report:{re.escape(name)} -->)", re.S)
        text = pat.sub(lambda mt: mt.group(1) + body + "\n" + mt.group(2), text)
    return text


def plots():
    h = os.path.join(RESULTS, "h200")
    py = sys.executable
    subprocess.run([py, os.path.join(ROOT, "bench", "plot_h200.py"), os.path.join(h, "dsa.jsonl"),
                    os.path.join(h, "prefill.jsonl"), "--out", h], check=True)
    knn = [r for r in load("h200", "knn") if r.get("harness") == "bench/gpu_knn_torch.py"]
    tmp = os.path.join(h, ".knn-plot.jsonl")
    with open(tmp, "w") as f:
        for r in newest_run(knn, "bench/gpu_knn_torch.py"):
            f.write(json.dumps(r) + "\n")
    try:
        subprocess.run([py, os.path.join(ROOT, "bench", "plot_knn.py"), tmp, "--out", os.path.join(h, "knn_h200.png")],
                       check=True)
    finally:
        os.unlink(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", metavar="README")
    ap.add_argument("--check", metavar="README")
    ap.add_argument("--plots", action="store_true")
    a = ap.parse_args()
    blocks = render()
    if a.plots:
        plots()
    if a.write or a.check:
        path = a.write or a.check
        old = open(path).read()
        new = splice(old, blocks)
        missing = [n for n, b in blocks.items() if b is not None and f"<!-- report:{n} -->" not in old]
        if missing:
            print(f"{path}: no markers for {', '.join(missing)}", file=sys.stderr)
            return 1
        if a.check:
            if new != old:
                print(f"{path}: the measured tables differ from bench/results (run bench/report.py --write {path})",
                      file=sys.stderr)
                return 1
            print(f"{path}: tables match the records")
            return 0
        open(path, "w").write(new)
        return 0
    for name, body in blocks.items():
        if body:
            print(f"## {name}\n\n{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
