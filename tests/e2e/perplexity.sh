#!/usr/bin/env bash
# mgi perplexity against llama-perplexity's figures in ../shared/golden/perplexity (-c 64 -b 64).
# Tolerances, relative: f32 model 1e-3 on every running estimate, the final PPL and its +/-
# (llama.cpp keeps its KV cache in f16; we measure ~2e-4); mixq model 5e-3 on the final PPL and
# its +/- (llama.cpp also quantises activations to 8 bits for quantised weights; we measure ~1.5e-3).
set -u
MGI=${MGI:-build/mgi}
# --cpu-exact throughout: these checks hold mgi's exact f32 CPU path to llama.cpp's goldens and
# to itself bit for bit (tests/e2e/cpu_fast.sh holds the fast path to it).
SHARED=${SHARED:-../shared}
DIR=$SHARED/golden/perplexity
if [ ! -f "$DIR/README.md" ] || [ ! -f "$DIR/text.txt" ]; then echo "SKIP e2e perplexity: no $DIR (set SHARED)"; exit 0; fi

# compare NAME MODEL TOL: our output against the README's row for MODEL.
compare() {
    local name=$1 model=$2 tol=$3 out rc
    out=$("$MGI" perplexity --cpu-exact -m "$SHARED/models/$model" -f "$DIR/text.txt" -c 64 -b 64 --log-disable 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then echo "FAIL $name: exit $rc: $out"; return; fi
    grep -F "| $model |" "$DIR/README.md" | awk -v out="$out" -v tol="$tol" -v name="$name" '
        function rel(a, b) { d = (a - b) / b; return d < 0 ? -d : d }
        {
            split($0, col, "|")
            want_n = split(col[3], want, ",")
            match(col[4], /PPL = [0-9.]+ \+\/- [0-9.]+/)
            split(substr(col[4], RSTART, RLENGTH), wf, " ")
            # ours: "[1]x,[2]y,...\nFinal estimate: PPL = p +/- u"
            n = split(out, lines, "\n")
            got_n = 0; worst = 0
            for (i = 1; i <= n; i++) {
                if (lines[i] ~ /^Final estimate: PPL = /) { split(lines[i], f, " "); gp = f[5]; gu = f[7] }
                else if (lines[i] ~ /^\[1\]/) {
                    m = split(lines[i], est, ",")
                    for (j = 1; j <= m; j++) if (est[j] != "") { sub(/^\[[0-9]+\]/, "", est[j]); got[++got_n] = est[j] }
                }
            }
            bad = ""
            if (gp == "" || gu == "") bad = "no Final estimate line"
            else {
                if (rel(gp, wf[3]) > tol) bad = bad sprintf(" PPL %s vs %s;", gp, wf[3])
                if (rel(gu, wf[5]) > tol) bad = bad sprintf(" +/- %s vs %s;", gu, wf[5])
                worst = rel(gp, wf[3])
            }
            if (want_n > 1 || want[1] ~ /[0-9]/) {
                if (got_n != want_n) bad = bad sprintf(" %d running estimates, golden %d;", got_n, want_n)
                else for (j = 1; j <= want_n; j++) {
                    if (rel(got[j], want[j] + 0) > tol) bad = bad sprintf(" [%d] %s vs %s;", j, got[j], want[j] + 0)
                    if (rel(got[j], want[j] + 0) > worst) worst = rel(got[j], want[j] + 0)
                }
            }
            if (bad == "") printf "PASS %s (PPL = %s +/- %s, golden %s +/- %s, worst relative difference %.2g <= %g)\n", name, gp, gu, wf[3], wf[5], worst, tol
            else printf "FAIL %s:%s\n", name, bad
            found = 1
        }
        END { if (!found) printf "FAIL %s: no golden row in README.md\n", name }'
}

compare "perplexity f32 vs llama.cpp" aidreams260K-f32.gguf 1e-3
compare "perplexity mixq vs llama.cpp" aidreams260K-mixq.gguf 5e-3

# Too short a text for the context: refused in one line.
short=$(mktemp)
trap 'rm -f "$short"' EXIT
echo "The lighthouse keeper counted the ships." >"$short"
out=$("$MGI" perplexity --cpu-exact -m "$SHARED/models/aidreams260K-f32.gguf" -f "$short" -c 64 2>&1 >/dev/null)
rc=$?
lines=$(printf '%s' "$out" | grep -c '')
if [ $rc -ne 0 ] && [ "$lines" -eq 1 ]; then echo "PASS perplexity refuses a text shorter than 2 chunks ($out)"
else echo "FAIL perplexity refuses a text shorter than 2 chunks: exit $rc, $lines lines: $out"; fi

# llama-perplexity processes escapes in its -f text (on by default): the text with each newline
# written as \n scores as the text itself; --no-escape scores the backslashes.
esc=$(mktemp)
trap 'rm -f "$short" "$esc"' EXIT
python3 -c 'import sys; sys.stdout.write(open(sys.argv[1]).read().replace("\n", "\\n"))' "$SHARED/golden/perplexity/text.txt" >"$esc"
ppl() { "$MGI" perplexity --cpu-exact -m "$SHARED/models/aidreams260K-f32.gguf" -c 64 -ngl 0 "$@" 2>/dev/null | grep '^Final estimate'; }
p_text=$(ppl -f "$SHARED/golden/perplexity/text.txt") p_esc=$(ppl -f "$esc") p_raw=$(ppl -f "$esc" --no-escape)
if ! grep -q '\\n' "$SHARED/golden/perplexity/text.txt" && grep -q '\\n' "$esc" && [ -n "$p_text" ] &&
    [ "$p_text" = "$p_esc" ] && [ -n "$p_raw" ] && [ "$p_raw" != "$p_text" ]; then
    echo "PASS perplexity turns \\n in the text into newlines, as llama-perplexity ($p_esc); --no-escape does not ($p_raw)"
else echo "FAIL perplexity escapes: text '$p_text', escaped '$p_esc', --no-escape '$p_raw'"; fi
