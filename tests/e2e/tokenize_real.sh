#!/usr/bin/env bash
# `mgi tokenize` on the two real models (tests/e2e/lib.sh's real_models): SmolLM2-135M-Instruct
# (byte-level BPE, pre-tokenizer smollm) and gemma-3-270m (SentencePiece). The prompts of
# ../shared/golden/real/*-p*.json give llama.cpp's ids; tests/golden/tokenize/real.tsv holds what
# llama.cpp's llama-tokenize gives on more text (unicode, digits, code, CJK, emoji, spaces,
# special tokens), made by tests/golden/tokenize/make_real.sh.
set -u
. "$(dirname "$0")/lib.sh"
if [ ! -x "$MGI" ]; then fail "tokenize real" "$MGI is not built"; e2e_done; fi
real_models || e2e_done

# the golden prompts: JSON read with python3's standard library
for f in "$SHARED"/golden/real/smollm2-p*.json "$SHARED"/golden/real/gemma3-p*.json; do
    [ -f "$f" ] || { fail "tokenize real golden" "$f missing"; continue; }
    case $(basename "$f") in smollm2*) m=$SMOLLM ;; *) m=$GEMMA3 ;; esac
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(d["prompt"]); print(d["prompt_tokens"])' \
        "$f" "$TMP/prompt" >"$TMP/want"
    # the file's text as it is (no escapes): --no-escape; -f reads it byte for byte
    got=$("$MGI" tokenize -m "$m" -f "$TMP/prompt" --no-escape --ids --log-disable 2>"$TMP/err")
    if [ "$got" = "$(cat "$TMP/want")" ]; then pass "tokenize real: $(basename "$f") prompt ids"
    else fail "tokenize real: $(basename "$f") prompt ids" "got $got, want $(cat "$TMP/want") ($(head -c 200 "$TMP/err"))"; fi
done

# llama-tokenize's ids on more text
n=0
while IFS=$'\t' read -r model flags text want; do
    n=$((n + 1))
    args=()
    [ "$flags" != - ] && read -ra args <<<"$flags"
    case $model in SmolLM2*) m=$SMOLLM ;; gemma-3*) m=$GEMMA3 ;; *) m=$SHARED/vocab/$model ;; esac
    got=$("$MGI" tokenize -m "$m" -p "$text" --ids --log-disable "${args[@]}" 2>"$TMP/err")
    name="tokenize real: ${model%.gguf} $flags '$(printf '%s' "$text" | head -c 40)'"
    if [ "$got" = "$want" ]; then pass "$name"
    else fail "$name" "got $got, want $want ($(head -c 200 "$TMP/err"))"; fi
done <tests/golden/tokenize/real.tsv
[ "$n" -ge 200 ] || fail "tokenize real: cases" "only $n cases in tests/golden/tokenize/real.tsv"

# the pre-tokenizer and the BOS default come from the file
"$MGI" info "$SMOLLM" 2>/dev/null | grep -q 'tokenizer: *gpt2 (pre smollm)' && pass "tokenize real: SmolLM2 is gpt2 with pre smollm" \
    || fail "tokenize real: SmolLM2 is gpt2 with pre smollm" "$("$MGI" info "$SMOLLM" 2>&1 | grep tokenizer)"
e2e_done
