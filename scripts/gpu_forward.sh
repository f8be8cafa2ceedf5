#!/usr/bin/env bash
# One device call for the CUDA backend: builds (unless the carried build/ runs here), runs the GPU
# tests, times `mgi run` decode on synthetic 8b models made here (t/s, GB/s and % of the 4278 GB/s
# roofline, bytes per token = every weight but token_embd; load time), runs `mgi bench` (8b q4_0,
# q4_k_m with -d 0,4096, 1b q4_0) and, with ncu present, the kernel times of one decode step.
# Logs under $OUT (at most 7 files), a short summary last.
# Usage: SHARED=dir [NO_NCU=1] scripts/gpu_forward.sh [quant...]   (default: q4_0 q4_k_m)
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_forward}
SHARED=${SHARED:-../shared}
export OUT SHARED
mkdir -p "$OUT"
[ -d prebuilt-lib ] && export LD_LIBRARY_PATH="$PWD/prebuilt-lib:${LD_LIBRARY_PATH:-}"
if ! [ -x build/mgi ] || ldd build/mgi build/tests/gpu/test_forward 2>&1 | grep -q "not found"; then
    make -j16 CUDA_ARCH=90 all build/tests/gpu/test_forward build/tests/gpu/test_kernels >"$OUT/build.log" 2>&1 ||
        { tail -20 "$OUT/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm,clocks.mem --format=csv,noheader >"$OUT/smi.txt" 2>&1
BUILD=build timeout "${TEST_TIMEOUT:-560}" bash tests/run.sh gpu >"$OUT/test-gpu.log" 2>&1
: >"$OUT/summary.txt"
for q in "${@:-q4_0 q4_k_m}"; do
    for qq in $q; do
        m=/tmp/8b-$qq.gguf
        timeout 120 build/scripts/mkmodel --shape 8b --quant "$qq" -o "$m" \
            --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" >/dev/null 2>>"$OUT/runs.log" || continue
        bytes=$(build/mgi info "$m" --tensors | awk '$1 ~ /\.weight$/ && $1 != "token_embd.weight" {s += $NF} END {printf "%.0f", s}')
        for r in 1 2; do
            timeout 90 build/mgi -m "$m" -p "hello" -n 128 --temp 0 --ignore-eos >/dev/null 2>"/tmp/run-$qq-$r.log"
            echo "exit $?" >>"/tmp/run-$qq-$r.log"
            { echo "== 8b $qq run $r"; cat "/tmp/run-$qq-$r.log"; } >>"$OUT/runs.log"
        done
        tps=$(grep -E '^ +eval time' "/tmp/run-$qq-2.log" | sed -E 's/.*, *([0-9.]+) tokens per second.*/\1/')
        loads=$(grep -h 'load time' "/tmp/run-$qq-1.log" "/tmp/run-$qq-2.log" | awk '{printf "%s ", $4}')
        awk -v q="$qq" -v b="$bytes" -v t="${tps:-0}" -v l="$loads" 'BEGIN {
            g = b * t / 1e9; printf "8b %-7s tg128 %8.1f t/s  %7.1f GB/s  %5.1f%% of 4278 GB/s  (%.3f GB/token)  load ms: %s\n",
            q, t, g, 100 * g / 4278, b / 1e9, l }' >>"$OUT/summary.txt"
    done
done
# the first bench measures its own ceiling (device copy); the second uses docs/PERF.md's 4278 GB/s
bench() { timeout 150 build/mgi bench -r 3 "$@" >>"$OUT/bench.txt" 2>>"$OUT/runs.log"; }
: >"$OUT/bench.txt"
timeout 60 build/scripts/mkmodel --shape 1b --quant q4_0 -o /tmp/1b-q4_0.gguf \
    --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" >/dev/null 2>>"$OUT/runs.log"
[ -f /tmp/8b-q4_0.gguf ] && bench -m /tmp/8b-q4_0.gguf,/tmp/1b-q4_0.gguf -p 512 -n 128
[ -f /tmp/8b-q4_k_m.gguf ] && bench --bw 4278 -m /tmp/8b-q4_k_m.gguf -p 512 -n 128 -d 0,4096
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "${NO_NCU:-}" ] && [ -n "$ncu" ] && [ -f /tmp/8b-q4_k_m.gguf ]; then
    timeout 150 "$ncu" --clock-control none --metrics gpu__time_duration.sum --launch-skip 1300 --launch-count 360 \
        --print-summary per-kernel build/mgi -m /tmp/8b-q4_k_m.gguf -p hello -n 8 --temp 0 --ignore-eos \
        >"$OUT/ncu.txt" 2>&1
fi
rm -f /tmp/8b-*.gguf /tmp/1b-q4_0.gguf
cat "$OUT/smi.txt"
grep -E "^(FAIL|SKIP)" "$OUT/test-gpu.log" | head -30
tail -1 "$OUT/test-gpu.log"
cat "$OUT/summary.txt"
grep -h "bandwidth ceiling" "$OUT/runs.log"
grep -E "^\|" "$OUT/bench.txt"
