#!/usr/bin/env bash
# One device call: GPU tests and the kernel lab, logs under $OUT, a short table last.
# Runs the binaries in prebuilt/ (built elsewhere with `make build/tests/gpu/test_kernels kbench`),
# or builds them here when there are none.
# Usage: [NCU=1] scripts/gpu_check.sh [kbench-filter]
# NCU=1 adds Nsight Compute profiles of the production matvec and attention kernels (ncu.txt).
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv >"$OUT/smi.txt" 2>&1
bin=prebuilt
if ! [ -x "$bin/test_kernels" ]; then
    make -j16 CUDA_ARCH=90 build/tests/gpu/test_kernels kbench >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
    mkdir -p prebuilt && cp build/tests/gpu/test_kernels build/kbench/* prebuilt/
fi
for f in "$bin"/*; do  # a program whose libraries this machine lacks is reported, not run
    if ldd "$f" 2>&1 | grep -q "not found"; then echo "cannot run $f: $(ldd "$f" 2>&1 | grep 'not found' | head -1)"; mv "$f" "$f.skip"; fi
done
labs=$(for f in "$bin"/*; do case $f in */test_kernels|*.skip) ;; *) printf '%s ' "$(basename "$f")";; esac; done)
"$bin/test_kernels" >"$OUT/test_kernels.log" 2>&1
echo "test_kernels exit $?" >>"$OUT/test_kernels.log"
for lab in $labs; do
    "$bin/$lab" "${1:-}" >"$OUT/kbench_$lab.log" 2>&1
    echo "exit $?" >>"$OUT/kbench_$lab.log"
done
if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    sections="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis"
    for v in 3 4; do
        echo "=== matvec v$v Q4_0 14336x4096" >>"$OUT/ncu.txt"
        timeout 120 ncu --clock-control none -k regex:'^matvec_v2($|<)' -s 1 -c 1 $sections "$bin/matvec" profile Q4_0 14336 4096 $v >>"$OUT/ncu.txt" 2>&1
    done
    echo "=== attention v2, 1 seq, 32/8 heads, len 16384" >>"$OUT/ncu.txt"
    timeout 120 ncu --clock-control none -k regex:'attn_split_v2' -s 46 -c 1 $sections "$bin/attention" >>"$OUT/ncu.txt" 2>&1
fi
cat "$OUT/smi.txt"
grep -E "^(FAIL|SKIP)" "$OUT/test_kernels.log"
echo "test_kernels: $(grep -c '^PASS' "$OUT/test_kernels.log") passed, $(grep -c '^FAIL' "$OUT/test_kernels.log") failed; $(tail -1 "$OUT/test_kernels.log")"
for lab in $labs; do echo "== $lab"; grep -E "^(#|\||PASS|FAIL|exit)" "$OUT/kbench_$lab.log"; done
