#!/usr/bin/env bash
# The fast CPU path (mgi's default on the CPU: activations as pairs of 8-bit rows, a persistent
# thread pool) against the exact f32 reference (--cpu-exact), through
# tests/unit/test_cpu_fidelity.c: teacher-forced KLD and top-1 agreement and greedy agreement up
# to the first near-tie, on synthetic q4_0 and q4_k_m files (mkmodel's tiny shape, and outside
# AddressSanitizer its 1b shape, the issue's own files: ~1.5 minutes for both) and the two
# real models, all held to a mean KLD of 5e-4 and 95% top-1 (issue 24). The real ones sat at
# ~4e-3 with 8-bit activations alone, as llama.cpp's own path does. Then SmolLM2's chat with its
# default system prompt, whose first token is a near-tie (exact top-2 margin 0.08) that 8-bit
# activations tipped into word salad: the fast answer must equal the exact one. gemma3's
# perplexity on the fast path must be within 0.5% of llama.cpp's as it is on the exact one
# (tests/e2e/arch_real.sh). Also the thread-count warning of -t 0 and of more threads than cores.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}

for q in q4_0 q4_k_m; do
    "$BUILD/scripts/mkmodel" --shape tiny --quant $q -o "$TMP/tiny-$q.gguf" >/dev/null 2>"$TMP/mk.err" ||
        fail "mkmodel tiny $q" "$(head -c 300 "$TMP/mk.err")"
done
models=("$TMP/tiny-q4_0.gguf" "$TMP/tiny-q4_k_m.gguf")
if [ -n "${MGI_ASAN:-}" ]; then
    echo "SKIP fast CPU fidelity on the 1b and real models under AddressSanitizer: minutes there (make test checks them)"
else
    for q in q4_0 q4_k_m; do
        "$BUILD/scripts/mkmodel" --shape 1b --quant $q -o "$TMP/1b-$q.gguf" >/dev/null 2>"$TMP/mk.err" ||
            fail "mkmodel 1b $q" "$(head -c 300 "$TMP/mk.err")"
        models+=("$TMP/1b-$q.gguf")
    done
    real_models && models+=("$SMOLLM" "$GEMMA3")
fi
"$BUILD/tests/test_cpu_fidelity" "${models[@]}"
[ $? -eq 0 ] || fail "fast CPU fidelity" "test_cpu_fidelity failed"

if [ -n "${SMOLLM:-}" ]; then
    q="What is the capital of France?"
    "$MGI" -m "$SMOLLM" -cnv -st -p "$q" --temp 0 -n 12 -t 2 >"$TMP/chat-fast.out" 2>/dev/null
    "$MGI" -m "$SMOLLM" -cnv -st -p "$q" --temp 0 -n 12 -t 2 --cpu-exact >"$TMP/chat-exact.out" 2>/dev/null
    answer=$(head -c 60 "$TMP/chat-exact.out")
    check "SmolLM2 chat with its default system prompt: the fast answer equals the exact one ($answer)" \
        cmp -s "$TMP/chat-fast.out" "$TMP/chat-exact.out"
    grep -q Paris "$TMP/chat-exact.out" ||
        fail "SmolLM2 chat on the exact path" "no Paris in: $(head -c 200 "$TMP/chat-exact.out")"
fi

if [ -n "${GEMMA3:-}" ]; then
    want=$(grep -o 'PPL = [0-9.]*' "$SHARED/golden/real/gemma3-ppl.txt" | head -1 | cut -d' ' -f3)
    got=$("$MGI" perplexity -m "$GEMMA3" -f "$SHARED/golden/real/text.txt" -c 128 -b 128 -t 2 2>/dev/null |
          grep -o 'Final estimate: PPL = [0-9.]*' | cut -d' ' -f5)
    if [ -n "$got" ] && awk -v g="$got" -v w="$want" 'BEGIN { d = (g - w) / w; exit !(d < 0.005 && d > -0.005) }'; then
        pass "gemma3 perplexity on the fast path: $got within 0.5% of llama.cpp's $want"
    else
        fail "gemma3 perplexity on the fast path" "mgi '$got', llama.cpp $want (tolerance 0.5%)"
    fi
fi

# -t 0 and more threads than cores: one warning line, then the core count.
F32=$SHARED/models/aidreams260K-f32.gguf
for t in 0 256; do
    "$MGI" -m "$F32" -p "Once" -n 2 -t $t --log-disable >"$TMP/t.out" 2>"$TMP/t.err"
    rc=$?
    lines=$(wc -l <"$TMP/t.err")
    check "-t $t: runs with one warning line ($(head -1 "$TMP/t.err"))" \
        test "$rc" -eq 0 -a "$lines" -eq 1 -a -s "$TMP/t.out"
    grep -q "using the $(nproc) cores" "$TMP/t.err" || fail "-t $t: the core count" "$(cat "$TMP/t.err")"
done
e2e_done
