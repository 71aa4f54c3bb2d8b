#!/usr/bin/env python3
"""Reassemble the MiniLM set on the GPU machine from parts carried there (the device tool carries at
most 64 MiB a call, the fp32 base is 308 MB): the base travels as fp16 in three .npy parts and is
written back as data/minilm_base.fbin holding those fp16 values widened to fp32 (so the f32 run
uses the fp16-rounded vectors; the bf16 run rounds them again). The queries travel as fp32.

Here:   python3 bench/minilm_assemble.py --split data        (writes gpu-data1..3/)
There:  python3 bench/minilm_assemble.py --join gpu-data1 gpu-data2 gpu-data3 --out data
"""
import argparse
import glob
import os
import shutil

import numpy as np
from benchio import read_fbin, write_fbin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", metavar="DATA")
    ap.add_argument("--join", nargs="+", metavar="DIR")
    ap.add_argument("--out", default="data")
    a = ap.parse_args()
    if a.split:
        xb = read_fbin(os.path.join(a.split, "minilm_base.fbin")).astype(np.float16)
        cuts = np.linspace(0, xb.shape[0], 4).astype(int)
        for i in range(3):
            d = f"gpu-data{i + 1}"
            os.makedirs(d, exist_ok=True)
            np.save(f"{d}/minilm_base_f16_part{i}.npy", xb[cuts[i]:cuts[i + 1]])
        shutil.copy(os.path.join(a.split, "minilm_query.fbin"), "gpu-data1/minilm_query.fbin")
    if a.join:
        parts = sorted(sum((glob.glob(os.path.join(d, "minilm_base_f16_part*.npy")) for d in a.join), []),
                       key=lambda p: p[-5])
        assert len(parts) == 3, parts
        xb = np.concatenate([np.load(p) for p in parts]).astype(np.float32)
        os.makedirs(a.out, exist_ok=True)
        write_fbin(os.path.join(a.out, "minilm_base.fbin"), xb)
        shutil.copy(os.path.join(a.join[0], "minilm_query.fbin"), os.path.join(a.out, "minilm_query.fbin"))
        print(f"base {xb.shape} (fp16 values as fp32), queries copied to {a.out}")


if __name__ == "__main__":
    main()
