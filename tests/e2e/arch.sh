#!/usr/bin/env bash
# Every architecture on synthetic files against llama.cpp: each variant of
# tests/golden/arch/variants.txt is written by build/scripts/mkmodel (its sha256 must be the one
# the golden was made from) and mgi tokenize must give llama.cpp's prompt ids; then mgi's
# perplexity must be within 0.2% of llama-perplexity's (every running estimate and the final
# one) and mgi's greedy ids (mgi batch) the same as
# llama-completion's up to the first step where llama.cpp's two best logits were closer than
# 0.01 (later tokens are then free); without such a near-tie mgi run's text is byte-identical too.
# A variant mgi refuses (exit 2, one line on stderr) says SKIP; a variant it runs must match,
# if it is enforced:
ENFORCED="llama llama-hd128 llama-rope-freqs llama-linear llama-yarn qwen2 qwen3 gemma3 gemma2 phi3"
# Every variant of variants.txt is enforced since mgi reads rope_freqs.weight and rope.scaling.*.
# Every variant must run, never SKIP (models/ runs each of these architectures).
MUST_RUN="llama llama-hd128 llama-rope-freqs llama-linear llama-yarn qwen2 qwen3 gemma3 gemma2 phi3"
set -u
. tests/e2e/lib.sh
# --cpu-exact throughout: these checks hold mgi's exact f32 CPU path to llama.cpp's goldens and
# to itself bit for bit (tests/e2e/cpu_fast.sh holds the fast path to it).
BUILD=${BUILD:-build}
MKMODEL=$BUILD/scripts/mkmodel
GOLD=tests/golden/arch
TEXT=$SHARED/golden/perplexity/text.txt
TOL=0.002

if [ ! -x "$MKMODEL" ]; then echo "SKIP e2e arch: $MKMODEL is not built (make all)"; exit 0; fi
if [ ! -f "$TEXT" ]; then echo "SKIP e2e arch: no $TEXT (set SHARED)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP e2e arch: python3 is needed to read the golden json"; exit 0; fi

# verdict NAME OK WHY: PASS or FAIL for an enforced variant, SKIP (with what was seen) otherwise.
verdict() {
    local variant=$1 name=$2 ok=$3 why=$4
    if [[ " $ENFORCED " == *" $variant "* ]]; then
        if [ "$ok" = 1 ]; then pass "$name ($why)"; else fail "$name" "$why"; fi
    else
        echo "SKIP $name: not enforced yet ($([ "$ok" = 1 ] && echo matches || echo differs): $why)"
    fi
}

while read -r name args; do
    case "$name" in ''|'#'*) continue ;; esac
    js=$GOLD/$name.json f=$TMP/$name.gguf
    if [ ! -f "$js" ]; then fail "arch $name" "no golden $js (scripts/arch_goldens.sh writes it)"; continue; fi
    # shellcheck disable=SC2086
    if ! "$MKMODEL" $args -o "$f" >/dev/null 2>"$TMP/mk.err"; then
        fail "arch $name" "mkmodel $args failed: $(head -c 300 "$TMP/mk.err")"; continue
    fi
    sha=$(sha256sum "$f" | cut -d' ' -f1)
    want_sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$js")
    if [ "$sha" != "$want_sha" ]; then
        fail "arch $name: mkmodel writes the golden's file" \
            "sha256 $sha, golden made from $want_sha: the generator changed, so the goldens no longer describe its files (regenerate them with scripts/arch_goldens.sh)"
        rm -f "$f"; continue
    fi
    pass "arch $name: mkmodel writes the golden's file (sha256 ${sha:0:16}...)"

    # the prompts' ids (mgi tokenize runs on every architecture's vocabulary today): BOS, and
    # Gemma's tokenizer.ggml.add_space_prefix false
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["greedy"]["runs"]: print(r["prompt"])' "$js" >"$TMP/prompts"
    : >"$TMP/ptoks"
    while IFS= read -r p; do "$MGI" tokenize -m "$f" -p "$p" --ids 2>>"$TMP/tok.err" >>"$TMP/ptoks"; done <"$TMP/prompts"
    res=$(python3 - "$js" "$TMP/ptoks" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["greedy"]["runs"]
got = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
bad = [f"'{r['prompt']}': {g}, llama.cpp {r['prompt_tokens']}" for r, g in zip(runs, got) if g != r["prompt_tokens"]]
if len(got) != len(runs): bad.append(f"{len(got)} of {len(runs)} prompts tokenized")
print(("0 " + "; ".join(bad)) if bad else f"1 {len(runs)} prompts, {sum(len(r['prompt_tokens']) for r in runs)} ids")
EOF
)
    if [ "${res%% *}" = 1 ]; then pass "arch $name: prompt ids as llama.cpp's (${res#* })"
    else fail "arch $name: prompt ids as llama.cpp's" "${res#* } $(head -c 200 "$TMP/tok.err")"; fi

    "$MGI" perplexity --cpu-exact -m "$f" -f "$TEXT" -c 128 -b 128 --log-disable >"$TMP/ppl" 2>"$TMP/ppl.err" </dev/null
    rc=$?
    if [ $rc -ne 0 ]; then
        if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/ppl.err")" -eq 1 ] && [[ " $MUST_RUN " != *" $name "* ]]; then
            echo "SKIP arch $name: mgi does not run it yet ($(cat "$TMP/ppl.err"))"
        else
            fail "arch $name: perplexity" "exit $rc: $(head -c 300 "$TMP/ppl.err")"
        fi
        rm -f "$f"; continue
    fi
    res=$(python3 - "$js" "$TMP/ppl" "$TOL" <<'EOF'
import json, re, sys
g = json.load(open(sys.argv[1]))["perplexity"]["fa_off"]
out = open(sys.argv[2]).read()
tol = float(sys.argv[3])
est = [float(v) for v in re.findall(r"\[\d+\]([0-9.]+)", out)]
m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
if not m:
    print("0 no Final estimate line"); sys.exit()
rel = lambda a, b: abs(a - b) / b
bad = []
if len(est) != len(g["estimates"]):
    bad.append(f"{len(est)} running estimates, golden {len(g['estimates'])}")
worst = max([rel(a, b) for a, b in zip(est, g["estimates"])] + [rel(float(m.group(1)), g["final"])])
if worst > tol:
    bad.append(f"worst relative difference {worst:.3g} > {tol}")
print(("0 " + "; ".join(bad) + f"; PPL {m.group(1)} vs {g['final']}") if bad else
      f"1 PPL {m.group(1)}, golden {g['final']}, worst relative difference {worst:.2g} <= {tol}")
EOF
)
    verdict "$name" "arch $name: perplexity within 0.2% of llama.cpp" "${res%% *}" "${res#* }"

    # greedy: every prompt of the golden, ids from mgi batch, text from mgi run
    n_runs=$(grep -c '' "$TMP/prompts")
    "$MGI" batch --cpu-exact -m "$f" -f "$TMP/prompts" -n 16 --temp 0 -c 128 --ordered --log-disable >"$TMP/batch" 2>"$TMP/batch.err" </dev/null
    rc=$?
    k=0
    while IFS= read -r p; do
        k=$((k + 1))
        "$MGI" --cpu-exact -m "$f" -p "$p" -n 16 --temp 0 -c 128 --log-disable >"$TMP/run.$k" 2>/dev/null </dev/null
    done <"$TMP/prompts"
    res=$(python3 - "$js" "$TMP" "$rc" "$n_runs" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["greedy"]
tmp, rc, n_runs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if rc != 0:
    print(f"0 mgi batch exit {rc}: {open(tmp + '/batch.err').read()[:300]}"); sys.exit()
got = {}
for line in open(tmp + "/batch"):
    o = json.loads(line)
    got[o["prompt"]] = o
ptoks = [json.loads(l) for l in open(tmp + "/ptoks") if l.strip()]
bad, notes = [], []
for k, r in enumerate(g["runs"]):
    o = got.get(r["prompt"])
    if o is None:
        bad.append(f"no result for '{r['prompt']}'"); continue
    if k >= len(ptoks) or ptoks[k] != r["prompt_tokens"]:
        bad.append(f"'{r['prompt']}': prompt ids {ptoks[k] if k < len(ptoks) else None}, llama.cpp {r['prompt_tokens']}")
        continue
    want, ids, tie = r["tokens"], o["tokens"], r["first_near_tie"]
    upto = len(want) if tie is None else tie
    if ids[:upto] != want[:upto] or (tie is None and ids != want):
        first = next((i for i in range(min(len(ids), len(want))) if ids[i] != want[i]), min(len(ids), len(want)))
        bad.append(f"'{r['prompt']}': ids differ at step {first} (mgi {ids[first:first+3]}, llama.cpp {want[first:first+3]})")
        continue
    if tie is None:
        text = open(f"{tmp}/run.{k + 1}", "rb").read()
        if text != bytes.fromhex(r["text_hex"]):
            bad.append(f"'{r['prompt']}': mgi run printed {text[:60]!r}, llama.cpp {bytes.fromhex(r['text_hex'])[:60]!r}")
            continue
        notes.append(f"{len(want)} ids and text")
    else:
        notes.append(f"{upto} ids before a near-tie")
print(("0 " + "; ".join(bad)) if bad else f"1 {n_runs} prompts: " + ", ".join(notes))
EOF
)
    verdict "$name" "arch $name: greedy ids as llama.cpp's" "${res%% *}" "${res#* }"
    rm -f "$f"
done <"$GOLD/variants.txt"
e2e_done
