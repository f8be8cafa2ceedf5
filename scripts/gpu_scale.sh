#!/usr/bin/env bash
# One device call on a machine of 4 or more GPUs (the scaling issue): test_p2p, the split tests
# and the CLI checks (four-device cases included; the last two again with MGI_P2P=1), then, for
# synthetic 8b and 70b q4_k_m models made here, `mgi bench -p 512 -n 128` on one GPU and with
# -sm layer and -sm row (row also with MGI_P2P=1) over 2 and 4 devices (each device's time
# computing and in NCCL comes from bench's stderr), the load of each from the page cache (whole
# process to the first token), and `mgi batch` at -np 64 on one GPU and split over 4 devices. Logs
# under $OUT (at most 8 files), a short summary last. On two GPUs: DEVS="1 2".
# Usage: SHARED=dir [BUILD=dir] [NO_TESTS=1] [MODELS="8b:q4_k_m 70b:q4_k_m"] [DEVS="1 2 4"]
#        [NO_BATCH=1] scripts/gpu_scale.sh
set -u
B=${BUILD:-build}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_scale}
SHARED=${SHARED:-../shared}
export OUT SHARED BUILD=$B
mkdir -p "$OUT"
[ -d prebuilt-lib ] && export LD_LIBRARY_PATH="$PWD/prebuilt-lib:${LD_LIBRARY_PATH:-}"
if ! [ -x $B/mgi ] || ldd $B/mgi 2>&1 | grep -q "not found"; then
    make -j32 CUDA_ARCH=90 all build/tests/gpu/test_split build/tests/gpu/test_p2p >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
{ nvidia-smi topo -m; $B/mgi devices; } >"$OUT/topo.txt" 2>&1
n_gpu=$($B/mgi devices 2>/dev/null | grep -cE '^[0-9]+ ')
if [ -z "${NO_TESTS:-}" ]; then  # the multi-device tests only; the one-GPU suite is make test-gpu's
    { timeout 60 $B/tests/gpu/test_p2p; echo "test_p2p exit $?"
      timeout "${TEST_TIMEOUT:-300}" $B/tests/gpu/test_split; echo "test_split exit $?"
      MGI=$B/mgi timeout 200 bash tests/gpu/cli.sh; echo "cli.sh exit $?"
      # the row split's all-reduce over peer access (opt-in until these pass on real devices)
      MGI_P2P=1 timeout "${TEST_TIMEOUT:-300}" $B/tests/gpu/test_split; echo "test_split MGI_P2P=1 exit $?"
      MGI_P2P=1 MGI=$B/mgi timeout 200 bash tests/gpu/cli.sh; echo "cli.sh MGI_P2P=1 exit $?"
    } >"$OUT/test-split.log" 2>&1
fi
devlist() { seq -s, 0 $(($1 - 1)); }
: >"$OUT/bench.txt"
for mq in ${MODELS:-8b:q4_k_m 70b:q4_k_m}; do
    shape=${mq%%:*} q=${mq#*:} m=/tmp/$shape-$q.gguf
    [ -f "$m" ] || timeout 400 $B/scripts/mkmodel --shape "$shape" --quant "$q" -o "$m" \
        --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" >/dev/null 2>>"$OUT/runs.log" || continue
    for nd in ${DEVS:-1 2 4}; do
        [ "$nd" -le "$n_gpu" ] || continue
        for sm in layer row; do
            [ "$nd" = 1 ] && { [ $sm = row ] && continue; sm=none; }
            # whole process from the page cache to the first generated token
            t0=$(date +%s%N)
            timeout 120 $B/mgi -m "$m" -sm $sm -dev "$(devlist "$nd")" -p hello -n 1 --temp 0 >/dev/null 2>>"$OUT/runs.log"
            echo "== $shape $q -sm $sm on $nd: exit $?, whole process $((($(date +%s%N) - t0) / 1000000)) ms" >>"$OUT/runs.log"
            echo "== $shape $q -sm $sm on $nd devices" >>"$OUT/bench.txt"
            timeout 240 $B/mgi bench -m "$m" -sm $sm -dev "$(devlist "$nd")" -p 512 -n 128 -r "${REPS:-3}" \
                --bw 4278 >>"$OUT/bench.txt" 2>>"$OUT/runs.log"
            [ $sm = row ] || continue
            echo "== $shape $q -sm row on $nd devices, MGI_P2P=1" >>"$OUT/bench.txt"
            MGI_P2P=1 timeout 240 $B/mgi bench -m "$m" -sm row -dev "$(devlist "$nd")" -p 512 -n 128 \
                -r "${REPS:-3}" --bw 4278 >>"$OUT/bench.txt" 2>>"$OUT/runs.log"
        done
    done
done
if [ -z "${NO_BATCH:-}" ] && [ -f /tmp/8b-q4_k_m.gguf ]; then
    for cfg in "none:1" "layer:4" "row:4"; do
        sm=${cfg%%:*} nd=${cfg#*:}
        [ "$nd" -le "$n_gpu" ] || continue
        echo "== batch 8b q4_k_m -sm $sm on $nd devices" >>"$OUT/batch.txt"
        MGI=$B/mgi BATCH_FLAGS="-sm $sm -dev $(devlist "$nd")" timeout 300 bash scripts/gpu_batch.sh \
            /tmp/8b-q4_k_m.gguf ${BATCH_NP:-64} >>"$OUT/batch.txt" 2>&1
    done
fi
head -14 "$OUT/topo.txt"
grep -E "^(FAIL|SKIP)|exit [0-9]" "$OUT/test-split.log" 2>/dev/null | head -30
grep -c "^PASS" "$OUT/test-split.log" 2>/dev/null
grep -E "^==|mgi:|time share" "$OUT/runs.log"
grep -E "^(==|\|)" "$OUT/bench.txt"
cat "$OUT/batch.txt" 2>/dev/null
