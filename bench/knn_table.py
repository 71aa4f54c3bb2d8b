#!/usr/bin/env python3
"""Summary table of a gpu_knn_torch.py JSON file: per (N, k) the torch line, the corpus-read floor and, per main
loop, fused / score-only / materialize times, fused over the floor and torch over fused.
    python3 bench/knn_table.py bench/results/h200/knn-gate/knn.jsonl
"""
import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
t={}
for r in rs:
    if r.get('sweep'): print(f"sweep B={r['B']:5d} {r['main_loop']:13s} {r['median_ms']:8.3f} ms {r['TFLOPs']:.0f} TFLOP/s ({r['TFLOPs']/r['gemm_TFLOPs']*100:.0f}% of gemm {r['gemm_TFLOPs']:.0f})"); continue
    t[(r['N'],r['k'],r['algo'],r['main_loop'] if r['algo']!='torch' else '')]=r
loops=sorted({k[3] for k in t if k[3]})
for N in sorted({k[0] for k in t}):
  for k in sorted({k[1] for k in t}):
    to=t[(N,k,'torch','')]; fl=to['floor_ms']
    s=f"N={N>>20}M k={k:5d} torch {to['median_ms']:.3f} floor {fl:.3f} |"
    for lp in loops:
        f=t[(N,k,'fused',lp)]; so=t.get((N,k,'score_only',lp)); m=t[(N,k,'materialize',lp)]
        s+=f" {lp}: f {f['median_ms']:.3f} so {so['median_ms'] if so else 0:.3f} m {m['median_ms']:.3f} f/fl {f['median_ms']/fl:.2f} t/f {to['median_ms']/f['median_ms']:.2f} eq {int(f['fused_eq_materialize'])} |"
    print(s)
