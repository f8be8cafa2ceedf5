#!/usr/bin/env bash
# One device call: GPU tests and the kernel lab, logs under $OUT, a short table last.
# Runs the binaries in prebuilt/ when they start on this machine (built elsewhere with
# `make build/tests/gpu/test_kernels kbench`), else builds them here.
# Usage: scripts/gpu_check.sh [kbench-filter]
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv >"$OUT/smi.txt" 2>&1
bin=prebuilt
if ! [ -x "$bin/test_kernels" ] || ldd "$bin"/* 2>&1 | grep -q "not found"; then bin=; fi
if [ -z "$bin" ]; then
    make -j16 CUDA_ARCH=90 build/tests/gpu/test_kernels kbench >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
    mkdir -p prebuilt && cp build/tests/gpu/test_kernels build/kbench/* prebuilt/
    bin=prebuilt
fi
for f in "$bin"/*; do case $f in */test_kernels) ;; *) printf '%s ' "$(basename "$f")";; esac; done >"$OUT/labs.txt"
"$bin/test_kernels" >"$OUT/test_kernels.log" 2>&1
echo "test_kernels exit $?" >>"$OUT/test_kernels.log"
for lab in $(cat "$OUT/labs.txt"); do
    "$bin/$lab" "${1:-}" >"$OUT/kbench_$lab.log" 2>&1
    echo "exit $?" >>"$OUT/kbench_$lab.log"
done
cat "$OUT/smi.txt"
grep -E "^(FAIL|SKIP)" "$OUT/test_kernels.log"
echo "test_kernels: $(grep -c '^PASS' "$OUT/test_kernels.log") passed, $(grep -c '^FAIL' "$OUT/test_kernels.log") failed; $(tail -1 "$OUT/test_kernels.log")"
for lab in $(cat "$OUT/labs.txt"); do echo "== $lab"; grep -E "^(#|\||PASS|FAIL|exit)" "$OUT/kbench_$lab.log"; done
