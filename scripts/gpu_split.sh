#!/usr/bin/env bash
# One device call for several GPUs: runs the GPU tests (the split tests need 2 devices), shows the
# topology, and benches synthetic models made here with -sm none, layer, row and row with its
# all-reduces over peer access (MGI_P2P=1) (one GPU vs two), the load of each split from the page
# cache (whole process to first token), and the batch table on one GPU and on the layer split. Logs under $OUT (at most 8 files), a short summary last.
# Usage: SHARED=dir [MODELS="8b:q4_k_m 70b:q4_k_m"] [NO_TESTS=1] [NO_BATCH=1] [TEST_TIMEOUT=560] scripts/gpu_split.sh
# The GPU suite alone takes most of a 10-minute device call (test_kernels ~5 min): make the
# models and benches in a second call (NO_TESTS=1).
set -u
B=${BUILD:-build}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_split}
SHARED=${SHARED:-../shared}
export OUT SHARED
mkdir -p "$OUT"
[ -d prebuilt-lib ] && export LD_LIBRARY_PATH="$PWD/prebuilt-lib:${LD_LIBRARY_PATH:-}"
if ! [ -x $B/mgi ] || ldd $B/mgi 2>&1 | grep -q "not found"; then
    make -j32 CUDA_ARCH=90 all >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
{ nvidia-smi topo -m; $B/mgi devices; } >"$OUT/topo.txt" 2>&1
if [ -z "${NO_TESTS:-}" ]; then
    BUILD=$B timeout "${TEST_TIMEOUT:-560}" bash tests/run.sh gpu >"$OUT/test-gpu.log" 2>&1
fi
: >"$OUT/bench.txt"
for mq in ${MODELS:-8b:q4_k_m}; do
    shape=${mq%%:*} q=${mq#*:} m=/tmp/$shape-$q.gguf
    [ -f "$m" ] || timeout 300 $B/scripts/mkmodel --shape "$shape" --quant "$q" -o "$m" \
        --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" >/dev/null 2>>"$OUT/runs.log" || continue
    for split in ${SPLITS:-none layer row row-p2p}; do
        # row-p2p: the row split with its decode all-reduces over peer access (MGI_P2P=1)
        sm=${split%-p2p} p2p=; [ "$split" != "$sm" ] && p2p=1
        # whole process from the page cache to the first generated token
        t0=$(date +%s%N)
        MGI_P2P=$p2p timeout 120 $B/mgi -m "$m" -sm "$sm" -p hello -n 1 --temp 0 >/dev/null 2>>"$OUT/runs.log"
        echo "== $shape $q $split: exit $?, whole process $((($(date +%s%N) - t0) / 1000000)) ms" >>"$OUT/runs.log"
        echo "== $shape $q $split" >>"$OUT/bench.txt"
        MGI_P2P=$p2p timeout 240 $B/mgi bench -m "$m" -sm "$sm" -p 512 -n 128 -r "${REPS:-3}" --bw 4278 \
            >>"$OUT/bench.txt" 2>>"$OUT/runs.log"
    done
done
if [ -z "${NO_BATCH:-}" ] && [ -f /tmp/8b-q4_k_m.gguf ]; then
    MGI=$B/mgi BATCH_FLAGS="-sm none" timeout 400 bash scripts/gpu_batch.sh /tmp/8b-q4_k_m.gguf >"$OUT/batch.txt" 2>&1
    if [ "$($B/mgi devices 2>/dev/null | grep -cE '^[0-9]+ ')" -ge 2 ]; then
        echo "== -sm layer" >>"$OUT/batch.txt"
        MGI=$B/mgi BATCH_FLAGS="-sm layer" timeout 400 bash scripts/gpu_batch.sh /tmp/8b-q4_k_m.gguf >>"$OUT/batch.txt" 2>&1
    fi
fi
cat "$OUT/topo.txt" | head -12
grep -E "^(FAIL|SKIP)" "$OUT/test-gpu.log" 2>/dev/null | head -30
tail -1 "$OUT/test-gpu.log" 2>/dev/null
grep -E "^==|mgi:" "$OUT/runs.log"
grep -E "^(\||==)" "$OUT/bench.txt"
cat "$OUT/batch.txt" 2>/dev/null
