#!/usr/bin/env bash
# The real gemma-3-270m (arch gemma3: scaled input, GELU FFN, post-norms, per-head Q/K norms,
# sliding-window layers with their own RoPE base) against llama.cpp's runs in
# ../shared/golden/real: prompt tokens and teacher-forced greedy steps (tests/unit/test_arch_real.c),
# perplexity on text.txt at -c 128 -b 128 within 0.5% of llama.cpp's, greedy text through mgi run
# (one-token decode steps over the KV cache) equal to llama.cpp's on the prompt where no near-tie
# parts them, and mgi info showing the recipe.
source "$(dirname "$0")/lib.sh"
real_models || e2e_done
golden=$SHARED/golden/real

MGI_REAL_GEMMA3=$GEMMA3 "$BUILD/tests/test_arch_real"
rc=$?
[ "$rc" -eq 0 ] || fail "arch_real teacher-forced checks" "test_arch_real exit $rc"

want=$(sed -n 's/.*PPL = \([0-9.]*\).*/\1/p' "$golden/gemma3-ppl.txt")
if "$MGI" perplexity -m "$GEMMA3" -f "$golden/text.txt" -c 128 -b 128 -t 2 >"$TMP/ppl" 2>&1; then
    got=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p' "$TMP/ppl")
    if [ -n "$got" ] && [ -n "$want" ] && awk -v g="$got" -v w="$want" 'BEGIN { d = (g - w) / w; exit !(d < 0.005 && d > -0.005) }'; then
        pass "gemma3 perplexity $got within 0.5% of llama.cpp's $want"
    else
        fail "gemma3 perplexity" "mgi $got, llama.cpp $want (more than 0.5% apart)"
    fi
else
    fail "gemma3 perplexity" "exit $?: $(tail -c 300 "$TMP/ppl")"
fi

# p2 agrees over all 32 steps in the teacher-forced check, so the CLI's text must equal llama.cpp's.
prompt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt"], end="")' "$golden/gemma3-p2.json")
want_text=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_text_llama_cpp"], end="")' "$golden/gemma3-p2.json")
got_text=$("$MGI" run -m "$GEMMA3" -p "$prompt" -n 32 --temp 0 -c 256 -t 2 --log-disable 2>"$TMP/err")
if [ "$got_text" = "$want_text" ]; then pass "gemma3 greedy text equals llama.cpp's (p2, 32 tokens)"
else fail "gemma3 greedy text (p2)" "got '$(printf %s "$got_text" | head -c 200)', want '$(printf %s "$want_text" | head -c 200)'"; fi

"$MGI" info "$GEMMA3" >"$TMP/info" 2>&1
check "gemma3 info: window 512 on 15 of 18 layers, global 5 11 17" grep -q '^attention *scale 0.0625, window 512 on 15 of 18 layers (global: 5 11 17)$' "$TMP/info"
check "gemma3 info: NEOX, base 1e6 global, 10000 windowed" grep -q '^rope *NEOX (i, i + n_rot/2), 256 of 256 values, base 1e+06 (windowed layers: 10000), no scaling$' "$TMP/info"
check "gemma3 info: head size 256 from key_length" grep -q '^head size *256 (attention.key_length)$' "$TMP/info"

e2e_done
