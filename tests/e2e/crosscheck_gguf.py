#!/usr/bin/env python3
"""Cross-check mgi's reader and dequantisers against llama.cpp's own Python package (gguf-py):
every tensor of MODEL dumped by `mgi info --tensor NAME --values all` must equal gguf-py's
dequantisation (within 1e-6 of the tensor's largest magnitude).
Usage: crosscheck_gguf.py MGI MODEL; prints a one-line summary, exits 1 on a mismatch."""
import subprocess, sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

mgi, model = sys.argv[1:3]
r = GGUFReader(model)
worst = 0.0
for t in r.tensors:
    ref = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1)
    out = subprocess.run([mgi, "info", model, "--tensor", t.name, "--values", "all"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{t.name}: mgi exited {out.returncode}: {out.stderr.strip()}"); sys.exit(1)
    ours = np.array(out.stdout.split(), dtype=np.float64)
    if ours.shape != ref.shape:
        print(f"{t.name}: {ours.size} values, gguf-py has {ref.size}"); sys.exit(1)
    # Relative to the tensor's largest value: differences in the order of float operations
    # (d*q - m) may move values near zero by an ulp of the scale, not of the value.
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(ours - ref))) / scale if scale > 0 else 0.0
    if err > 1e-6:
        print(f"{t.name} ({t.tensor_type.name}): max relative difference {err:.3g}"); sys.exit(1)
    worst = max(worst, err)
print(f"{len(r.tensors)} tensors equal, max relative difference {worst:.2g}")
