#!/usr/bin/env bash
# The fast CPU path (mgi's default on the CPU: 8-bit activations, a persistent thread pool)
# against the exact f32 reference (--cpu-exact), through tests/unit/test_cpu_fidelity.c:
# teacher-forced KLD and top-1 agreement and greedy agreement up to the first near-tie, on
# synthetic q4_0 and q4_k_m files (mkmodel's tiny shape) and the two real models. The synthetic
# files are held to a mean KLD of 5e-4. The real ones to 1e-2: 8-bit activations move their
# logits by up to ~1.4 (mean KLD 3.5e-3 SmolLM2, 5.2e-3 gemma3 when written), and llama.cpp's own
# 8-bit path sits as far from the exact one: gemma3's perplexity below must be within 0.5% of
# llama.cpp's on the fast path as it is on the exact one (tests/e2e/arch_real.sh). Also the
# thread-count warning of -t 0 and of more threads than cores.
source "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}

for q in q4_0 q4_k_m; do
    "$BUILD/scripts/mkmodel" --shape tiny --quant $q -o "$TMP/tiny-$q.gguf" >/dev/null 2>"$TMP/mk.err" ||
        fail "mkmodel tiny $q" "$(head -c 300 "$TMP/mk.err")"
done
models=("$TMP/tiny-q4_0.gguf" "$TMP/tiny-q4_k_m.gguf")
if [ -n "${MGI_ASAN:-}" ]; then
    echo "SKIP fast CPU fidelity on the real models under AddressSanitizer: minutes there (make test checks them)"
else
    real_models && models+=("$SMOLLM@1e-2" "$GEMMA3@1e-2")
fi
"$BUILD/tests/test_cpu_fidelity" "${models[@]}"
[ $? -eq 0 ] || fail "fast CPU fidelity" "test_cpu_fidelity failed"

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
