#!/usr/bin/env python3
"""Cuts one trace CSV into N contiguous time blocks, each its own workload `<workload>_blockK`.

The kepler-nx12 trace is one run with no per-row workload label, so leave-one-workload-out has
nothing to hold out; contiguous blocks give a blocked time-series cross-validation instead (a
block is never on both sides of a split).

    python3 benches/split_trace_blocks.py ../shared/datasets/power/kepler-nx12/stressng_v06.csv 4 /tmp/kepler
"""
import os
import sys

src, blocks, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
header, *rows = open(src).read().splitlines()
os.makedirs(out, exist_ok=True)
for b in range(blocks):
    part = rows[b * len(rows) // blocks:(b + 1) * len(rows) // blocks]
    cells = [r.split(",") for r in part]
    for c in cells:
        c[2] = f"{c[2]}_block{b + 1}"
    with open(os.path.join(out, f"block{b + 1}.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(",".join(c) for c in cells) + "\n")
