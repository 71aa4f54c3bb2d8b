"""Small I/O shared by the benchmark scripts: the .fbin format of the big-ann benchmarks (int32
rows, int32 dim, then float32 rows) and JSON lines to stdout and an optional file."""
import json

import numpy as np


def read_fbin(path):
    with open(path, "rb") as f:
        n, d = np.fromfile(f, dtype=np.int32, count=2)
        return np.fromfile(f, dtype=np.float32, count=int(n) * int(d)).reshape(int(n), int(d))


def write_fbin(path, x):
    with open(path, "wb") as f:
        np.array(x.shape, dtype=np.int32).tofile(f)
        np.ascontiguousarray(x, dtype=np.float32).tofile(f)


def emit_jsonl(rec, out=None):
    """One record as a JSON line on stdout and, when out is an open file, appended there."""
    line = json.dumps(rec)
    print(line, flush=True)
    if out:
        out.write(line + "\n")
        out.flush()
