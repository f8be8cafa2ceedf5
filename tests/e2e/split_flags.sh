#!/usr/bin/env bash
# The multi-GPU flags (-dev, -mg, -sm, -ts, --layer-split, -ngl) on every model-running subcommand: bad values
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

# --layer-split (the last layer of each device, inclusive, the model's indices; 4 layers here).
# Lists no plan can take exit 1 naming the flag and the numbers, GPUs or not; those that need
# the model are checked against its layer count at plan time (or on the CPU path without GPUs).
ls_bad=("not increasing|--layer-split 0,0,3|^mgi: --layer-split: value 2 (0) is not above the one before it (0)"
        "decreasing|--layer-split 2,1,3|^mgi: --layer-split: value 2 (1) is not above the one before it (2)"
        "negative|--layer-split -1,3|^mgi: --layer-split: -1 is out of range"
        "not a number|--layer-split 1,x|^mgi: --layer-split: 'x' is not an integer"
        "empty item|--layer-split 1,,3|^mgi: --layer-split: '1,,3' has an empty item"
        "17 values|--layer-split 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16|^mgi: --layer-split: .* more than 16 items"
        "short of the last layer|--layer-split 0,1,2|^mgi: --layer-split 0,1,2: the last value (2) must be the model's last layer, 3 (4 layers, 0..3)$"
        "past the last layer|--layer-split 1,4|^mgi: --layer-split 1,4: the last value (4) must be the model's last layer, 3 (4 layers, 0..3)$"
        "-sm row|-sm row --layer-split 1,3|^mgi: --layer-split 1,3 with -sm row: --layer-split is for -sm layer only; drop one of the two flags$"
        "-sm none after|--layer-split 1,3 -sm none|^mgi: -sm none with --layer-split 1,3: --layer-split is for -sm layer only"
        "more devices than -dev|-dev 0 --layer-split 1,3|^mgi: --layer-split 1,3 with -dev 0: 2 last layers for 1 device; give one last layer per device$"
        "-ngl 0|--layer-split 1,3 -ngl 0|^mgi: -ngl 0 with --layer-split 1,3: no layer is on a device"
        "-dev none|--layer-split 1,3 -dev none|^mgi: -dev none with --layer-split 1,3: no layer is on a device"
        "-ngl inside the CPU's layers|-ngl 2 --layer-split 1,3|^mgi: --layer-split 1,3: -ngl 2 leaves layers 0-1 to the CPU, so the first device's last layer (1) must be 2..3 (the list counts the model's layers)$")
for cmd in "info" "run -p hi -n 1" "batch -ns 1 -n 1"; do
    sub=${cmd%% *}
    for b in "${ls_bad[@]}"; do
        name=${b%%|*} rest=${b#*|}
        args=${rest%%|*} want=${rest#*|}
        # shellcheck disable=SC2086
        expect_error "$sub --layer-split $name" 1 "$MGI" $cmd -m "$M" $args
        check "$sub --layer-split $name: the message" grep -q -- "$want" "$TMP/err"
    done
done
# Accepted lists: on this machine's CPU the plan is the CPU's; with GPUs each device's layers.
for f in "--layer-split 3" "--layer-split 1,3" "--layer-split 1/3" "--layer-split 0,1,2,3" "-ngl 2 --layer-split 2,3" \
         "-ts 0,1 --layer-split 1,3" "-dev 0,1 --layer-split 1,3"; do
    # shellcheck disable=SC2086
    "$MGI" info "$M" $f >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if grep -q '^plan: CPU (no CUDA device' "$TMP/out"; then
        check "info $f accepted (CPU)" [ "$rc" -eq 0 ]
    else
        echo "SKIP info $f: a GPU is present, tests/gpu checks its plan"
    fi
done
n_gpu=$("$MGI" devices 2>/dev/null | grep -cE '^[0-9]+ ')
if [ "$n_gpu" -ge 2 ]; then
    "$MGI" info "$M" -dev 0,1 --layer-split 0,3 >"$TMP/out" 2>"$TMP/err"
    check "info --layer-split 0,3 plans layers 0-0 and 1-3" \
        sh -c "grep -qE '^  0 .* layers 0-0 ' '$TMP/out' && grep -qE '^  1 .* layers 1-3 ' '$TMP/out'"
else
    echo "SKIP info --layer-split device table: needs 2 CUDA devices ($n_gpu here); test_plan checks the plan on fake devices"
fi

# bench: --layer-split values separated by '/', a comma sweeps several (as -ts in bench); each
# recorded in the layer_split field and column. The lists are checked as in the other commands.
"$MGI" bench -m "$M" -p 8 -n 2 -r 1 --bw 10 --no-warmup --layer-split 1/3,3 -o jsonl >"$TMP/ls.jsonl" 2>"$TMP/err"
check "bench --layer-split sweep exits 0" [ $? -eq 0 ]
check "bench --layer-split sweep records" python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert [x["layer_split"] for x in r] == ["1/3", "1/3", "3", "3"], r
assert all(x["split_mode"] == "layer" for x in r)' "$TMP/ls.jsonl"
"$MGI" bench -m "$M" -p 8 -n 0 -r 1 --bw 10 --no-warmup --layer-split 0/1/3 >"$TMP/out" 2>"$TMP/err"
check "bench --layer-split md column" sh -c "grep -q '| *layer_split |' '$TMP/out' && grep -q '| *0/1/3 |' '$TMP/out'"
"$MGI" bench -m "$M" -p 8 -n 0 -r 1 --bw 10 --no-warmup -o json >"$TMP/out" 2>"$TMP/err"
check "bench without --layer-split records it empty" python3 -c '
import json, sys
assert all(x["layer_split"] == "" for x in json.load(open(sys.argv[1])))' "$TMP/out"
b_bad=("short of the last layer|--layer-split 1/2|^mgi: --layer-split 1,2: the last value (2) must be the model's last layer, 3"
       "not increasing|--layer-split 3/1|^mgi: --layer-split: value 2 (1) is not above the one before it (3)"
       "not a number|--layer-split 1/3,x|^mgi: --layer-split: 'x' is not an integer"
       "swept -sm row|--layer-split 1/3 -sm layer,row|^mgi: --layer-split 1/3 with -sm row: --layer-split is for -sm layer only"
       "-ngl 0|--layer-split 1/3 -ngl 99,0|^mgi: --layer-split 1/3 with -ngl 0: no layer is on a device"
       "-dev none|-dev none --layer-split 1/3|^mgi: --layer-split 1/3 with -dev none: no layer is on a device"
       "more than -dev|--layer-split 1/3 -dev 0|^mgi: --layer-split 1/3 with -dev: 2 last layers for 1 device")
for b in "${b_bad[@]}"; do
    name=${b%%|*} rest=${b#*|}
    args=${rest%%|*} want=${rest#*|}
    # shellcheck disable=SC2086
    expect_error "bench --layer-split $name" 1 "$MGI" bench -m "$M" -p 8 -n 0 -r 1 --bw 10 $args
    check "bench --layer-split $name: the message" grep -q -- "$want" "$TMP/err"
done

# Cross-flag values no plan can take, refused at parse time (any machine): one line naming both.
x_bad=("-ts all zero|-ts 0,0|^mgi: -ts 0,0: every share is 0; give at least one device a share above 0$"
       "-ts more than -dev|-dev 0,1 -ts 1,1,1|^mgi: -ts 1,1,1 with -dev 0,1: 3 shares for 2 devices; give one share per device$"
       "-dev fewer than -ts|-ts 1,1,1 -dev 0,1|^mgi: -dev 0,1 with -ts 1,1,1: 3 shares for 2 devices"
       "-mg past -dev|-dev CUDA0,CUDA1 -mg 2|^mgi: -mg 2 with -dev 0,1: -mg is an index into the -dev list, 0..1 here$"
       "-dev shorter than -mg|-mg 1 -dev 0|^mgi: -dev 0 with -mg 1: -mg is an index into the -dev list, 0..0 here$")
for cmd in "info" "run -p hi -n 1" "batch -ns 1 -n 1" "perplexity -f $T"; do
    sub=${cmd%% *}
    for b in "${x_bad[@]}"; do
        name=${b%%|*} rest=${b#*|}
        args=${rest%%|*} want=${rest#*|}
        # shellcheck disable=SC2086
        expect_error "$sub $name" 1 "$MGI" $cmd -m "$M" $args
        check "$sub $name: the message" grep -q -- "$want" "$TMP/err"
    done
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
