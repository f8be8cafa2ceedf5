#!/usr/bin/env bash
# mgi on the CUDA backend from the command line: the default runs on the GPU and greedy text
# equals the CPU's (-ngl 0) and partial offload's (-ngl 2) on aidreams260K f32; a missing device is a
# usage error naming the flag; on two devices the split flags, mgi batch and the prompt cache on
# layer and row splits against one GPU, and a stalled peer ends in one error line and exit 3 within
# the (shortened) NCCL timeout. Without a CUDA device: SKIP.
. tests/e2e/lib.sh
F32="$SHARED/models/aidreams260K-f32.gguf"
if "$MGI" devices 2>&1 | grep -q "no CUDA device"; then echo "SKIP gpu cli: no CUDA device"; exit 0; fi
if [ ! -f "$F32" ]; then echo "SKIP gpu cli: no $F32 (set SHARED)"; exit 0; fi

"$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 >"$TMP/gpu.txt" 2>"$TMP/gpu.err"
rc=$?
if [ $rc -eq 0 ] && grep -q "backend CUDA" "$TMP/gpu.err"; then pass "gpu cli: default runs on CUDA"
else fail "gpu cli: default runs on CUDA" "exit $rc: $(grep -m1 -E 'mgi:|backend' "$TMP/gpu.err")"; fi
"$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 -ngl 0 --cpu-exact >"$TMP/cpu.txt" 2>"$TMP/cpu.err"
if cmp -s "$TMP/gpu.txt" "$TMP/cpu.txt" && grep -q "backend CPU" "$TMP/cpu.err"; then
    pass "gpu cli: greedy text equals -ngl 0 (CPU)"
else fail "gpu cli: greedy text equals -ngl 0 (CPU)" "gpu '$(head -c 80 "$TMP/gpu.txt")' cpu '$(head -c 80 "$TMP/cpu.txt")'"; fi
"$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 -dev 0 -ngl 99 >"$TMP/dev.txt" 2>/dev/null
check "gpu cli: -dev 0 -ngl 99 gives the same text" cmp -s "$TMP/gpu.txt" "$TMP/dev.txt"
"$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 -ngl 2 --cpu-exact >"$TMP/ngl2.txt" 2>"$TMP/ngl2.err"
check "gpu cli: -ngl 2 (2 of 4 layers on the GPU) gives the same text" cmp -s "$TMP/gpu.txt" "$TMP/ngl2.txt"
expect_error "gpu cli: -dev 99 is refused" 1 "$MGI" -m "$F32" -p hi -n 2 -dev 99
# --ignore-eos as llama.cpp: greedy goes on past the end-of-text token with the next best one (the
# device's second pick per row) where this prompt's text would end at token 114; GPU = CPU, for
# mgi run (its steps launched ahead) and mgi batch (a row with the field, one without).
"$MGI" -m "$F32" -p "Tom had a red ball" -n 120 --temp 0 --ignore-eos >"$TMP/ie-gpu.txt" 2>/dev/null
"$MGI" -m "$F32" -p "Tom had a red ball" -n 120 --temp 0 --ignore-eos -ngl 0 --cpu-exact >"$TMP/ie-cpu.txt" 2>/dev/null
"$MGI" -m "$F32" -p "Tom had a red ball" -n 120 --temp 0 >"$TMP/ie-stop.txt" 2>/dev/null
if [ -s "$TMP/ie-gpu.txt" ] && cmp -s "$TMP/ie-gpu.txt" "$TMP/ie-cpu.txt" &&
    [ "$(wc -c <"$TMP/ie-gpu.txt")" -gt "$(wc -c <"$TMP/ie-stop.txt")" ]; then
    pass "gpu cli: --ignore-eos greedy goes on past the end-of-text token, as on the CPU"
else fail "gpu cli: --ignore-eos greedy" "gpu $(wc -c <"$TMP/ie-gpu.txt") bytes, cpu $(wc -c <"$TMP/ie-cpu.txt"), without $(wc -c <"$TMP/ie-stop.txt")"; fi
printf '%s\n' '{"id": 1, "prompt": "Tom had a red ball", "temperature": 0, "n_predict": 120, "ignore_eos": true}' \
    '{"id": 2, "prompt": "Tom had a red ball", "temperature": 0, "n_predict": 120}' >"$TMP/ie.jsonl"
"$MGI" batch -m "$F32" -f "$TMP/ie.jsonl" -np 2 --ordered >"$TMP/ie-b-gpu.out" 2>/dev/null
"$MGI" batch -m "$F32" -f "$TMP/ie.jsonl" -np 2 --ordered -ngl 0 --cpu-exact >"$TMP/ie-b-cpu.out" 2>/dev/null
if [ -s "$TMP/ie-b-gpu.out" ] && python3 -c '
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if [x["tokens"] for x in g] == [x["tokens"] for x in c] and 2 not in g[0]["tokens"] and
         g[1]["finish_reason"] == "stop" and len(g[0]["tokens"]) > len(g[1]["tokens"]) else 1)' "$TMP/ie-b-gpu.out" "$TMP/ie-b-cpu.out"
then pass "gpu cli: mgi batch ignore_eos per request, one row past the end-of-text token, one stopping there (= CPU)"
else fail "gpu cli: mgi batch ignore_eos" "$(head -c 300 "$TMP/ie-b-gpu.out")"; fi
# The real models (tests/e2e/lib.sh: real_models): SmolLM2-135M, a plain Llama, gives the CPU's
# greedy text on the GPU (SKIP where the GPU does not take its Q4_1 weights); so does gemma-3-270m
# (Gemma 3's windowed layers, post norms, GELU gate and input scale on the general layer).
if real_models_or_skip "gpu cli: real models"; then
    "$MGI" -m "$SMOLLM" -p "The capital of France is" -n 24 --temp 0 >"$TMP/sm-gpu.txt" 2>"$TMP/sm-gpu.err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q "not supported by the CUDA backend" "$TMP/sm-gpu.err"; then
        echo "SKIP gpu cli: SmolLM2-135M on the GPU: $(grep -m1 '^mgi:' "$TMP/sm-gpu.err")"
    else
        "$MGI" -m "$SMOLLM" -p "The capital of France is" -n 24 --temp 0 -ngl 0 --cpu-exact >"$TMP/sm-cpu.txt" 2>/dev/null
        if [ $rc -eq 0 ] && [ -s "$TMP/sm-gpu.txt" ] && cmp -s "$TMP/sm-gpu.txt" "$TMP/sm-cpu.txt"; then
            pass "gpu cli: SmolLM2-135M greedy text on the GPU equals the CPU's"
        else fail "gpu cli: SmolLM2-135M greedy text on the GPU equals the CPU's" "exit $rc, gpu '$(head -c 80 "$TMP/sm-gpu.txt")' cpu '$(head -c 80 "$TMP/sm-cpu.txt")'"; fi
    fi
    # head 256, n_embd 640 (k of 10 chunks: the prompt GEMM's tail loop): greedy text, and the
    # perplexity of 128-token passes (the prompt GEMMs and attention) within 0.1% of the CPU's.
    # 11 tokens: the 12th is a near-tie (" largest" over " capital" by 0.014 logits on the exact
    # path; mgi batch's top_logprobs), which the GPU's 8-bit decode activations may flip (the
    # head-256 tensor-core attention, itself closer to f64 than the tiled kernel it replaced, did).
    "$MGI" -m "$GEMMA3" -p "The capital of France is" -n 11 --temp 0 >"$TMP/g3-gpu.txt" 2>"$TMP/g3-gpu.err"
    rc=$?
    "$MGI" -m "$GEMMA3" -p "The capital of France is" -n 11 --temp 0 -ngl 0 --cpu-exact >"$TMP/g3-cpu.txt" 2>/dev/null
    if [ $rc -eq 0 ] && [ -s "$TMP/g3-gpu.txt" ] && cmp -s "$TMP/g3-gpu.txt" "$TMP/g3-cpu.txt"; then
        pass "gpu cli: gemma-3-270m greedy text on the GPU equals the CPU's"
    else fail "gpu cli: gemma-3-270m greedy text on the GPU equals the CPU's" "exit $rc, gpu '$(head -c 80 "$TMP/g3-gpu.txt")' cpu '$(head -c 80 "$TMP/g3-cpu.txt")' $(head -c 200 "$TMP/g3-gpu.err")"; fi
    head -c 6000 README.md >"$TMP/g3-text.txt"
    ppl() { "$MGI" perplexity -m "$GEMMA3" -f "$TMP/g3-text.txt" -c 128 --log-disable "$@" 2>&1 | sed -n 's/.*PPL = \([0-9.]*\).*/\1/p'; }
    g=$(ppl -b 128); c=$(ppl -b 128 -ngl 0 --cpu-exact); g64=$(ppl -b 64)
    if python3 -c 'import sys; g, c, h = map(float, sys.argv[1:]); sys.exit(0 if abs(g / c - 1) < 1e-3 and abs(h / c - 1) < 1e-3 else 1)' "$g" "$c" "$g64" 2>/dev/null
    then pass "gpu cli: gemma-3-270m perplexity -c 128 on the GPU (-b 128: $g, -b 64: $g64) within 0.1% of the CPU's ($c)"
    else fail "gpu cli: gemma-3-270m perplexity -c 128 on the GPU within 0.1% of the CPU's" "gpu -b 128 '$g' -b 64 '$g64' cpu '$c'"; fi
fi
"$MGI" bench -m "$F32" -p 16 -n 8 -r 1 -ngl 2 >"$TMP/bench-ngl.txt" 2>&1
check "gpu cli: bench with partial offload (-ngl 2) runs on CPU+CUDA" grep -q "CPU+CUDA" "$TMP/bench-ngl.txt"
n_dev=$("$MGI" devices 2>/dev/null | grep -cE '^[0-9]+ ')
if [ "$n_dev" -ge 2 ]; then
    "$MGI" info "$F32" -sm row -c 128 -dev 0,1 >"$TMP/plan.txt" 2>&1
    check "gpu cli: mgi info -sm row -dev 0,1 plans both devices" grep -q "plan: -sm row on 2 devices" "$TMP/plan.txt"
    "$MGI" bench -m "$F32" -p 16 -n 8 -r 1 -sm layer,row >"$TMP/bench-sm.txt" 2>"$TMP/bench-sm.err"
    check "gpu cli: bench -sm layer,row reports each device's time share" \
        test "$(grep -c 'time share' "$TMP/bench-sm.err")" -ge 2
    "$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 -sm row -ts 1,1 >"$TMP/row.txt" 2>/dev/null
    check "gpu cli: -sm row -ts 1,1 gives the same text" cmp -s "$TMP/gpu.txt" "$TMP/row.txt"
    # mgi batch on the splits: each request's text equals one GPU's (greedy and seeded, 4 sequences
    # decoded together), and a prompt cache saved on one GPU is reused on a split, and back.
    printf '%s\n' "Once upon a time" "The little dog ran to the" "She opened the door and saw" \
        "Tom had a red ball" "The sun was" >"$TMP/prompts.txt"
    texts() { python3 -c 'import json, sys
for l in open(sys.argv[1]): r = json.loads(l); print(r["id"], r["finish_reason"], json.dumps(r["text"]))' "$1"; }
    for opt in "--temp 0" "--temp 0.8 -s 11"; do
        "$MGI" batch -m "$F32" -f "$TMP/prompts.txt" -n 24 $opt -np 4 -sm none >"$TMP/b-none.jsonl" 2>/dev/null
        texts "$TMP/b-none.jsonl" | sort >"$TMP/b-none.txt"
        for sm in layer row; do
            "$MGI" batch -m "$F32" -f "$TMP/prompts.txt" -n 24 $opt -np 4 -sm $sm -ts 1,1 >"$TMP/b-$sm.jsonl" \
                2>"$TMP/b-$sm.err"
            texts "$TMP/b-$sm.jsonl" | sort >"$TMP/b-$sm.txt"
            if [ "$(wc -l <"$TMP/b-$sm.txt")" -eq 5 ] && cmp -s "$TMP/b-none.txt" "$TMP/b-$sm.txt"; then
                pass "gpu cli: batch -sm $sm -np 4 ($opt): every request's text equals one GPU's"
            else
                fail "gpu cli: batch -sm $sm -np 4 ($opt)" "$(diff "$TMP/b-none.txt" "$TMP/b-$sm.txt" | head -3 | tr '\n' ' ') $(grep -m1 'mgi:' "$TMP/b-$sm.err")"
            fi
        done
    done
    P="Once upon a time there was a little dog who liked to run"
    "$MGI" -m "$F32" -p "$P" -n 24 --temp 0 -sm none >"$TMP/pc-fresh.txt" 2>/dev/null
    rm -f "$TMP/pc.bin"
    "$MGI" -m "$F32" -p "$P" -n 24 --temp 0 -sm none --prompt-cache "$TMP/pc.bin" >/dev/null 2>&1
    for sm in row layer; do
        "$MGI" -m "$F32" -p "$P" -n 24 --temp 0 -sm $sm -ts 1,1 --prompt-cache "$TMP/pc.bin" --prompt-cache-ro \
            >"$TMP/pc-$sm.txt" 2>"$TMP/pc-$sm.err"
        if grep -q "reused [1-9][0-9]* of" "$TMP/pc-$sm.err" && cmp -s "$TMP/pc-fresh.txt" "$TMP/pc-$sm.txt"; then
            pass "gpu cli: a prompt cache from one GPU reused on -sm $sm gives the same text"
        else
            fail "gpu cli: prompt cache from one GPU on -sm $sm" "$(grep -m1 -E 'prompt cache|mgi:' "$TMP/pc-$sm.err")"
        fi
    done
    rm -f "$TMP/pc.bin"
    "$MGI" -m "$F32" -p "$P" -n 24 --temp 0 -sm row -ts 1,1 --prompt-cache "$TMP/pc.bin" >/dev/null 2>&1
    "$MGI" -m "$F32" -p "$P" -n 24 --temp 0 -sm none --prompt-cache "$TMP/pc.bin" >"$TMP/pc-back.txt" 2>"$TMP/pc-back.err"
    if grep -q "reused [1-9][0-9]* of" "$TMP/pc-back.err" && cmp -s "$TMP/pc-fresh.txt" "$TMP/pc-back.txt"; then
        pass "gpu cli: a prompt cache saved on -sm row reused on one GPU gives the same text"
    else
        fail "gpu cli: prompt cache from -sm row on one GPU" "$(grep -m1 -E 'prompt cache|mgi:' "$TMP/pc-back.err")"
    fi
    # A deep model's first row-split decode step over peer access (MGI_P2P=1) runs eagerly, before
    # its graphs are captured: ~1400 launches a device at 160 layers. Issued a device at a time,
    # they once filled the first device's queue while its stream waited at the first all-reduce
    # for shares the host had not issued yet: a hang until the all-reduce's timeout. The text
    # must equal the NCCL (or virtual devices' local) all-reduce's: two shares add the same either
    # way.
    if "${BUILD:-build}/scripts/mkmodel" --shape demo --quant q4_0 --layers 160 -o "$TMP/deep.gguf" >/dev/null 2>&1; then
        "$MGI" -m "$TMP/deep.gguf" -p "Once upon a time" -n 8 --temp 0 -sm row -ts 1,1 >"$TMP/deep-row.txt" 2>/dev/null
        t0=$(date +%s)
        MGI_P2P=1 MGI_NCCL_TIMEOUT=10 timeout 60 "$MGI" -m "$TMP/deep.gguf" -p "Once upon a time" -n 8 --temp 0 \
            -sm row -ts 1,1 >"$TMP/deep-p2p.txt" 2>"$TMP/deep-p2p.err"
        rc=$? el=$(($(date +%s) - t0))
        if [ $rc -eq 0 ] && [ -s "$TMP/deep-row.txt" ] && cmp -s "$TMP/deep-row.txt" "$TMP/deep-p2p.txt"; then
            pass "gpu cli: 160 layers, -sm row over peer access (MGI_P2P=1): same text as without, in ${el}s"
        else
            fail "gpu cli: 160 layers, -sm row over peer access (MGI_P2P=1)" \
                "exit $rc after ${el}s: $(grep -m1 'mgi: ' "$TMP/deep-p2p.err")"
        fi
        rm -f "$TMP/deep.gguf"
    else
        fail "gpu cli: 160 layers over peer access" "${BUILD:-build}/scripts/mkmodel could not write the model"
    fi
    # A peer that stops answering (engine/cuda_comm.c: MGI_FAULT=nccl-peer-stall keeps the last
    # device out of the all-reduces and the first device's sends): one error line, exit 3, no hang;
    # the line must be the stall's (no progress, or NCCL's own error), not some other failure.
    for sm in row layer; do
        if [ -n "$MGI_VIRTUAL_DEVICES" ]; then echo "SKIP gpu cli: stalled peer: virtual devices have none"; break; fi
        t0=$(date +%s)
        MGI_FAULT=nccl-peer-stall MGI_NCCL_TIMEOUT=3 timeout 90 "$MGI" -m "$F32" -p "Once upon a time" -n 8 \
            --temp 0 -sm $sm >"$TMP/fault.txt" 2>"$TMP/fault.err"
        rc=$? el=$(($(date +%s) - t0))
        if [ $rc -eq 3 ] && [ "$(grep -c '^mgi: ' "$TMP/fault.err")" -eq 1 ] &&
            grep -qE '^mgi: .*device [0-9].*(no progress|NCCL)' "$TMP/fault.err" && [ $el -lt 45 ]; then
            pass "gpu cli: -sm $sm with a stalled peer fails in ${el}s with exit 3 and one line naming the device"
        else
            fail "gpu cli: -sm $sm with a stalled peer" "exit $rc after ${el}s: $(grep -m1 'mgi: ' "$TMP/fault.err")"
        fi
    done
else
    echo "SKIP gpu cli: split flags: fewer than 2 CUDA devices"
fi
if [ "$n_dev" -ge 4 ]; then
    "$MGI" info "$F32" -sm row -c 128 -dev 0,1,2,3 >"$TMP/plan4.txt" 2>&1
    check "gpu cli: mgi info -sm row -dev 0,1,2,3 plans four devices" grep -q "plan: -sm row on 4 devices" \
        "$TMP/plan4.txt"
    for sm in layer row; do
        "$MGI" -m "$F32" -p "Once upon a time" -n 24 --temp 0 -sm $sm -dev 0,1,2,3 -ts 1,1,1,1 \
            >"$TMP/four.txt" 2>/dev/null
        check "gpu cli: -sm $sm over 4 devices gives the same text" cmp -s "$TMP/gpu.txt" "$TMP/four.txt"
    done
else
    echo "SKIP gpu cli: four-device splits: fewer than 4 CUDA devices"
fi
e2e_done
