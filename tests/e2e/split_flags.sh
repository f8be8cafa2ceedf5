#!/usr/bin/env bash
# The multi-GPU flags (-dev, -mg, -sm, -ts, -ngl) on every model-running subcommand: bad values
# exit 1 with one line naming the flag, before any model is read; mgi info prints the plan (here,
# without a GPU, the CPU line).
source "$(dirname "$0")/lib.sh"
M=$SHARED/models/aidreams260K-f32.gguf
T=$TMP/text.txt
printf 'one two three four five six seven eight nine ten %.0s' $(seq 40) >"$T"

# bad value: name|arguments (the flag each names comes first in its arguments)
bad=("-sm bad|-sm rows" "-ts negative|-ts 1,-1" "-ts not a number|-ts 3,x" "-ts empty item|-ts 3,,1"
     "-ts 17 values|-ts 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1" "-mg negative|-mg -1" "-mg 16|-mg 16"
     "-dev name|-dev GPU0" "-dev negative|-dev 0,-1" "-dev empty|-dev " "-ngl bad|-ngl lots")
for cmd in "run -p hi -n 1" "batch -ns 1 -n 1" "perplexity -f $T" "info"; do
    sub=${cmd%% *}
    for b in "${bad[@]}"; do
        name=${b%%|*} args=${b#*|} flag=${args%% *}
        val=${args#* }
        # shellcheck disable=SC2086
        expect_error "$sub $name" 1 "$MGI" $cmd -m "$M" "$flag" "$val"
        check "$sub $name: the message names $flag" grep -q -- "^mgi: $flag" "$TMP/err"
    done
done
for f in "-sm rows" "-ts 1/-1" "-mg x" "-dev CUDAx"; do
    # shellcheck disable=SC2086
    expect_error "bench $f" 1 "$MGI" bench -m "$M" $f
done
grep_err() { grep -q -- "$1" "$TMP/err"; }
"$MGI" info "$M" -sm diagonal >/dev/null 2>"$TMP/err"
check "-sm message names the flag and modes" grep_err "^mgi: -sm: 'diagonal' is not a split mode (none, layer or row)$"
"$MGI" run -m "$M" -ts 2,-3 -p hi >/dev/null 2>"$TMP/err"
check "-ts message names the flag and value" grep_err '^mgi: -ts: share -3 is negative'

# Good values are accepted (the CPU runs here; on a GPU machine the plan decides).
for f in "-sm none" "-sm layer" "-sm row" "-ts 3,1" "-ts 3/1" "-ts 0.5,0,2" "-dev 0" "-dev CUDA0,CUDA1" "-mg 1" "-ngl all" "-ngl -1"; do
    # shellcheck disable=SC2086
    "$MGI" info "$M" $f >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if grep -q '^plan: CPU (no CUDA device' "$TMP/out"; then
        check "info $f accepted" [ "$rc" -eq 0 ]
    else
        check "info $f planned (GPU present)" grep -q '^plan: ' "$TMP/out"
    fi
done

# The plan section of mgi info.
"$MGI" info "$M" >"$TMP/out" 2>"$TMP/err"
check "info exit 0" [ $? -eq 0 ]
if grep -q '^plan: CPU (no CUDA device: ' "$TMP/out"; then
    check "info plan CPU sizes" grep -qE '^  cpu +all 4 layers, weights 1.02 MiB, KV 384.00 KiB \(f32, 192 cells\), batch 128$' "$TMP/out"
    "$MGI" info "$M" -c 64 -np 2 -b 32 >"$TMP/out" 2>"$TMP/err"
    check "info plan -c -np -b" grep -qE '^  cpu +all 4 layers, .*\(f32, 192 cells\), batch 32$' "$TMP/out"
else
    check "info plan device table" grep -qE '^  device +name +holds +weights +KV +scratch +free +free after$' "$TMP/out"
fi
"$MGI" info "$M" -ngl 0 >"$TMP/out" 2>"$TMP/err"
check "info plan -ngl 0" grep -q '^plan: CPU (-ngl 0)$' "$TMP/out"
"$MGI" info "$M" -dev none >"$TMP/out" 2>"$TMP/err"
check "info plan -dev none" grep -q '^plan: CPU (-ngl 0)$' "$TMP/out"
check "info plan last" [ "$(grep -c '' "$TMP/out")" -gt 2 ]
expect_error "info -c too large" 1 "$MGI" info "$M" -c 1000
expect_error "info -np 0" 1 "$MGI" info "$M" -np 0
expect_error "info plan flags on a vocabulary" 2 "$MGI" info "$SHARED/vocab/ggml-vocab-gpt-2.gguf" -c 64
"$MGI" info "$SHARED/vocab/ggml-vocab-gpt-2.gguf" >"$TMP/out" 2>"$TMP/err"
check "info vocabulary plan none" grep -q '^plan: *none (not a model mgi runs' "$TMP/out"
e2e_done
