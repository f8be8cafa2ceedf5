#!/usr/bin/env bash
# mgi info on the shared models and vocabularies, its value dump, and bad input.
source "$(dirname "$0")/lib.sh"
f32=$SHARED/models/aidreams260K-f32.gguf
mixq=$SHARED/models/aidreams260K-mixq.gguf
spm=$SHARED/vocab/ggml-vocab-llama-spm.gguf
gpt2=$SHARED/vocab/ggml-vocab-gpt-2.gguf

# Summary lines: "label   value".
field() { grep -E "^$1 " "$TMP/info" | sed -E "s/^$1 +//"; }
if "$MGI" info "$f32" >"$TMP/info" 2>"$TMP/err"; then
    check "info f32 architecture" [ "$(field architecture:)" = llama ]
    check "info f32 n_embd" [ "$(field n_embd)" = 64 ]
    check "info f32 n_layer" [ "$(field n_layer)" = 4 ]
    check "info f32 n_head" [ "$(field n_head)" = 4 ]
    check "info f32 n_ff" [ "$(field n_ff)" = 172 ]
    check "info f32 context" [ "$(field 'context length')" = 128 ]
    check "info f32 tokenizer" grep -q '^tokenizer: *llama, 512 tokens' "$TMP/info"
    check "info f32 tensors" grep -q '^tensors: *39,' "$TMP/info"
    check "info f32 only F32" grep -qE '^  F32 +39 tensors' "$TMP/info"
else
    fail "info f32" "exit $?: $(cat "$TMP/err")"
fi
if "$MGI" info "$mixq" >"$TMP/info" 2>"$TMP/err"; then
    check "info mixq types Q5_0" grep -qE '^  Q5_0 +23 tensors' "$TMP/info"
    check "info mixq types Q8_0" grep -qE '^  Q8_0 +3 tensors' "$TMP/info"
    check "info mixq types F16" grep -qE '^  F16 +4 tensors' "$TMP/info"
    check "info mixq types F32" grep -qE '^  F32 +9 tensors' "$TMP/info"
else
    fail "info mixq" "exit $?: $(cat "$TMP/err")"
fi
if "$MGI" info "$spm" >"$TMP/info" 2>"$TMP/err"; then
    check "info spm vocab" grep -q '^tokenizer: *llama (pre default), 32000 tokens' "$TMP/info"
    check "info spm no tensors" grep -q '^tensors: *0,' "$TMP/info"
else
    fail "info spm" "exit $?: $(cat "$TMP/err")"
fi
if "$MGI" info -m "$gpt2" >"$TMP/info" 2>"$TMP/err"; then
    check "info gpt2 vocab" grep -q '^tokenizer: *gpt2 (pre gpt-2), 50257 tokens' "$TMP/info"
    check "info gpt2 arch" [ "$(field architecture:)" = gpt2 ]
else
    fail "info gpt2" "exit $?: $(cat "$TMP/err")"
fi

"$MGI" info "$mixq" --tensors >"$TMP/tensors" 2>"$TMP/err"
check "info --tensors lists 39" [ "$(grep -c '\.weight ' "$TMP/tensors")" = 39 ]
check "info --tensors row" grep -qE '^blk\.0\.ffn_down\.weight +F16 +\[172, 64\] 22016$' "$TMP/tensors"

# --values: exactly N lines of numbers, nothing else on stdout.
"$MGI" info "$mixq" --tensor blk.0.attn_q.weight --values 100 >"$TMP/vals" 2>"$TMP/err"
check "info --values 100 lines" [ "$(wc -l <"$TMP/vals")" = 100 ]
check "info --values numbers" [ -z "$(grep -vE '^-?[0-9.e+-]+$' "$TMP/vals")" ]
"$MGI" info "$mixq" --tensor output_norm.weight --values all >"$TMP/vals" 2>"$TMP/err"
check "info --values all" [ "$(wc -l <"$TMP/vals")" = 64 ]

# The recipe: what the forward pass will run, per architecture.
if "$MGI" info "$f32" >"$TMP/info" 2>"$TMP/err"; then
    check "info recipe llama" grep -q '^recipe: *llama: RMSNorm before attention and FFN, SiLU-gated FFN$' "$TMP/info"
    check "info recipe llama rope" grep -q '^rope *adjacent pairs, 16 of 16 values, base 10000, no scaling$' "$TMP/info"
    check "info recipe llama attention" grep -q '^attention *scale 0.25, full causal$' "$TMP/info"
    check "info recipe llama gpu" grep -q '^gpu *the plain Llama layer: CPU or CUDA$' "$TMP/info"
else
    fail "info recipe llama" "exit $?: $(cat "$TMP/err")"
fi
gen=$BUILD/tests/malformed/gen_bad_models
if [ -x "$gen" ] && "$gen" --good "$TMP/bases" >/dev/null; then
    "$MGI" info "$TMP/bases/good-gemma2.gguf" >"$TMP/info" 2>&1
    check "info recipe gemma2 window and softcaps" grep -q '^attention *scale 0.353553, softcap 50, window 4 on 1 of 2 layers (global: 1)$' "$TMP/info"
    check "info recipe gemma2 logit softcap" grep -q '^logit softcap *30$' "$TMP/info"
    check "info recipe gemma2 post-norms, GELU" grep -q '^recipe: *gemma2: RMSNorm before attention and FFN and after each, GELU (tanh)-gated FFN$' "$TMP/info"
    check "info recipe gemma2 runs on the GPU's general layer" grep -q '^gpu *CPU or CUDA (the general layer)$' "$TMP/info"
    "$MGI" info "$TMP/bases/good-qwen2.gguf" >"$TMP/info" 2>&1
    check "info recipe qwen2 NEOX" grep -q '^rope *NEOX (i, i + n_rot/2), 8 of 8 values' "$TMP/info"
    check "info recipe qwen2 biases" grep -q '^biases *Q/K/V $' "$TMP/info"
    "$MGI" info "$TMP/bases/good-qwen3.gguf" >"$TMP/info" 2>&1
    check "info recipe qwen3 q/k norm" grep -q '^q/k norm *per-head RMSNorm before RoPE$' "$TMP/info"
    "$MGI" info "$TMP/bases/good-phi3.gguf" >"$TMP/info" 2>&1
    check "info recipe phi3 fused, LongRoPE" grep -q '^head size *8 (n_embd / n_head), fused attn_qkv$' "$TMP/info"
    check "info recipe phi3 LongRoPE" grep -q 'LongRoPE (short factors up to 64 positions per sequence, long past it)$' "$TMP/info"
    "$MGI" info "$TMP/bases/good-llama.gguf" >"$TMP/info" 2>&1
    check "info recipe llama rope_freqs" grep -q '^rope .*, rope_freqs.weight (4 factors)$' "$TMP/info"
else
    fail "info recipe bases" "gen_bad_models --good failed or is not built"
fi

# An independent reader: llama.cpp's gguf-py, where it is installed, must dequantise every tensor
# of both models to the same values as mgi.
if python3 -c 'import gguf, numpy' 2>/dev/null; then
    for m in "$f32" "$mixq"; do
        if out=$(python3 tests/e2e/crosscheck_gguf.py "$MGI" "$m" 2>&1); then
            pass "gguf-py cross-check $(basename "$m"): $out"
        else
            fail "gguf-py cross-check $(basename "$m")" "$out"
        fi
    done
else
    echo "SKIP gguf-py cross-check: python3 module gguf not installed (pip install gguf numpy)"
fi

# Bad input: one line, exit 2, nothing on stdout.
: >"$TMP/empty.gguf"
printf 'this is not a gguf file at all\n' >"$TMP/text.gguf"
expect_error "info missing file" 2 "$MGI" info "$TMP/does-not-exist.gguf"
expect_error "info directory" 2 "$MGI" info "$TMP"
expect_error "info empty file" 2 "$MGI" info "$TMP/empty.gguf"
expect_error "info not gguf" 2 "$MGI" info "$TMP/text.gguf"
expect_error "info unknown tensor" 2 "$MGI" info "$f32" --tensor nope --values 3
expect_error "info unknown flag" 1 "$MGI" info "$f32" --bogus
expect_error "info values without tensor" 1 "$MGI" info "$f32" --values 3
expect_error "info bad values" 1 "$MGI" info "$f32" --tensor output_norm.weight --values x
expect_error "info no model" 1 "$MGI" info

# The malformed corpus: every file refused with one line naming the problem, never a crash.
gen=$BUILD/tests/malformed/gen_malformed
if [ -x "$gen" ]; then
    mkdir -p "$TMP/bad"
    "$gen" "$TMP/bad" >"$TMP/cases" || fail "malformed generator" "exit $?"
    n=0
    while IFS=$'\t' read -r file want; do
        [ -n "$file" ] || continue
        n=$((n + 1))
        "$MGI" info "$file" >"$TMP/out" 2>"$TMP/err" </dev/null
        rc=$?
        if [ "$rc" -ne 2 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ] || [ -s "$TMP/out" ]; then
            fail "malformed $(basename "$file")" "exit $rc, stderr: $(head -c 300 "$TMP/err")"
        elif ! grep -qiF -- "$want" "$TMP/err"; then
            fail "malformed $(basename "$file")" "message lacks '$want': $(cat "$TMP/err")"
        else
            pass "malformed $(basename "$file")"
        fi
    done <"$TMP/cases"
    check "malformed corpus has >= 40 files ($n)" [ "$n" -ge 40 ]
else
    fail "malformed corpus" "generator $gen not built"
fi
e2e_done
