#!/usr/bin/env bash
# mgi batch end to end on the tiny real model: 20 mixed requests (plain and JSONL, greedy and
# seeded) give the same results per id with -np 1, 4 and 8, equal to single mgi runs; bad lines
# are isolated; --resume after SIGTERM finishes every id exactly once; a system prompt is computed
# once and shared, with results equal to runs with it prepended; usage limits.
set -u
. "$(dirname "$0")/lib.sh"
# --cpu-exact throughout: these checks hold mgi's exact f32 CPU path to llama.cpp's goldens and
# to itself bit for bit (tests/e2e/cpu_fast.sh holds the fast path to it).
F32=$SHARED/models/aidreams260K-f32.gguf
if [ ! -f "$F32" ]; then echo "SKIP e2e batch: no $F32 (set SHARED)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP e2e batch: python3 is needed to read JSON lines"; exit 0; fi

# 20 requests: plain lines (greedy via the flags) and JSON lines with their own settings.
python3 - "$TMP/req.jsonl" <<'PY'
import json, sys
words = ["Once upon a time", "The little dog", "Lily went to the park", "Tom had a red ball",
         "One day a bird", "Mom said", "The sun was", "There was a big tree", "Ben and Sue", "The cat"]
with open(sys.argv[1], "w") as f:
    for i in range(20):
        p = words[i % 10] + ("" if i < 10 else " and")
        if i % 4 == 0:
            f.write(p + "\n")
        else:
            r = {"id": "r%d" % i, "prompt": p, "n_predict": 8 + i}
            if i % 4 == 1: r.update(temperature=0.9, seed=100 + i)
            if i % 4 == 2: r.update(temperature=0.7, seed=7, top_k=20, top_p=0.9, min_p=0.1, repeat_penalty=1.1,
                                    presence_penalty=0.4, frequency_penalty=0.3)
            if i % 4 == 3: r.update(temperature=0)
            if i % 4 == 3 and i >= 10: r.update(presence_penalty=1.5)
            f.write(json.dumps(r) + "\n")
PY
# Per id: finish_reason, tokens, text (sorted by id), to compare runs.
summary() {
    python3 -c '
import json, sys
rows = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    rows[json.dumps(o["id"])] = (o["finish_reason"], o["tokens"], o.get("text"))
for k in sorted(rows): print(k, json.dumps(rows[k]))' "$1"
}
for np in 1 4 8; do
    "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np $np -n 24 --temp 0 -t 2 >"$TMP/out$np" 2>"$TMP/err$np"
    rc=$?
    n=$(wc -l <"$TMP/out$np")
    if [ $rc -eq 0 ] && [ "$n" -eq 20 ]; then pass "batch -np $np: 20 result lines"
    else fail "batch -np $np: 20 result lines" "exit $rc, $n lines: $(tail -1 "$TMP/err$np")"; fi
    summary "$TMP/out$np" >"$TMP/sum$np" 2>"$TMP/sumerr" || fail "batch -np $np output is JSON" "$(tail -1 "$TMP/sumerr")"
done
check "batch -np 1, 4 and 8 give identical results per id" cmp -s "$TMP/sum1" "$TMP/sum4"
check "batch -np 8 equals -np 1" cmp -s "$TMP/sum1" "$TMP/sum8"
# The summary's speed lines: the first step of -np 8 holds 8 prompts and no generating sequence
# (a prompt-only step), and at least the last steps only decode; a prompt-only step's tokens are
# prompt tokens, so no more than were evaluated.
ev=$(sed -n 's/.*prompt tokens: \([0-9]*\) evaluated.*/\1/p' "$TMP/err8")
po=$(sed -n 's/.*prompt-only steps: \([0-9]*\) tokens in.*/\1/p' "$TMP/err8")
if [ -n "$po" ] && [ -n "$ev" ] && [ "$po" -gt 0 ] && [ "$po" -le "$ev" ] && grep -q "decode-only steps: " "$TMP/err8"
then pass "batch summary: prompt-only ($po of $ev prompt tokens) and decode-only step speeds"
else fail "batch summary: prompt-only and decode-only step speeds" "$(grep 'batch:' "$TMP/err8" | tr '\n' ' ')"; fi
# The warm-up step (on by default on a GPU, forced here on the CPU) leaves no trace in the results.
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 8 -n 24 --temp 0 -t 2 --warmup >"$TMP/outw" 2>"$TMP/errw"
summary "$TMP/outw" >"$TMP/sumw" 2>/dev/null
if cmp -s "$TMP/sum1" "$TMP/sumw" && grep -q "warm-up step of" "$TMP/errw"; then pass "batch --warmup: same results"
else fail "batch --warmup: same results" "$(grep 'batch:' "$TMP/errw" | head -2 | tr '\n' ' ')"; fi
# Small steps and passes (prefill chunks mixed with decode tokens), no continuous batching, no
# prefix sharing: still the same results.
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 5 -b 7 -ub 3 -n 24 --temp 0 >"$TMP/outb" 2>/dev/null
summary "$TMP/outb" >"$TMP/sumb" 2>/dev/null
check "batch -b 7 -ub 3 equals -np 1" cmp -s "$TMP/sum1" "$TMP/sumb"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 4 -nocb --no-prefix-reuse -n 24 --temp 0 >"$TMP/outc" 2>/dev/null
summary "$TMP/outc" >"$TMP/sumc" 2>/dev/null
check "batch -nocb --no-prefix-reuse equals -np 1" cmp -s "$TMP/sum1" "$TMP/sumc"

# Each result equals mgi run with the same settings.
python3 - "$TMP/req.jsonl" "$TMP/out8" >"$TMP/runs.sh" <<'PY'
import json, shlex, sys
reqs = [l.rstrip("\n") for l in open(sys.argv[1])]
out = {json.dumps(json.loads(l)["id"]): json.loads(l) for l in open(sys.argv[2])}
for i, line in enumerate(reqs):
    if line.startswith("{"):
        r = json.loads(line); rid = json.dumps(r["id"])
    else:
        r = {"prompt": line}; rid = str(i + 1)
    args = ["-p", r["prompt"], "-n", str(r.get("n_predict", 24)), "--temp", str(r.get("temperature", 0)),
            "-s", str(r.get("seed", 1))]
    for k, flag in (("top_k", "--top-k"), ("top_p", "--top-p"), ("min_p", "--min-p"), ("repeat_penalty", "--repeat-penalty"),
                    ("presence_penalty", "--presence-penalty"), ("frequency_penalty", "--frequency-penalty")):
        if k in r: args += [flag, str(r[k])]
    o = out[rid]
    print('"$MGI" --cpu-exact -m "$F32" --log-disable -t 2 %s >"$TMP/run.txt" 2>/dev/null; ' % " ".join(shlex.quote(a) for a in args) +
          'printf %%s %s | cmp -s - "$TMP/run.txt" || echo %s' % (shlex.quote(o["text"]), shlex.quote(rid)))
PY
bad_ids=$(. "$TMP/runs.sh")
if [ -z "$bad_ids" ]; then pass "batch results equal single mgi runs (20 prompts, greedy and seeded)"
else fail "batch results equal single mgi runs" "differ for ids: $bad_ids"; fi

# llama.cpp's presence penalty: at 100 over the whole history (prompt included), greedy picks never
# repeat a token of the prompt or of their own, where plain greedy does.
printf '%s\n' '{"id": 1, "prompt": "Once upon a time", "temperature": 0, "n_predict": 40}' \
    '{"id": 2, "prompt": "Once upon a time", "temperature": 0, "n_predict": 40, "presence_penalty": 100, "repeat_last_n": -1}' \
    >"$TMP/pen.jsonl"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/pen.jsonl" --ordered >"$TMP/pen.out" 2>/dev/null
"$MGI" tokenize -m "$F32" -p "Once upon a time" --ids >"$TMP/pen.ids" 2>/dev/null
python3 -c '
import json, sys
o = [json.loads(l) for l in open(sys.argv[1])]
prompt = json.load(open(sys.argv[2]))
plain, pen = o[0]["tokens"], o[1]["tokens"]
ok = len(plain) == len(pen) == 40 and len(set(plain)) < 40 and len(set(pen)) == 40 and not set(pen) & set(prompt)
sys.exit(0 if ok else 1)' "$TMP/pen.out" "$TMP/pen.ids"
check "batch presence_penalty 100: 40 greedy tokens all new (plain greedy repeats)" test $? -eq 0

# llama.cpp's --ignore-eos: the end-of-text token is never picked (its logit is -inf), so a
# greedy text that ends at token 114 goes on with the next best token instead; the first 114
# tokens are the same. For the flag and the JSONL field, and mgi run's text equals the batch's.
printf '%s\n' '{"id": 1, "prompt": "Tom had a red ball", "temperature": 0, "n_predict": 120}' \
    '{"id": 2, "prompt": "Tom had a red ball", "temperature": 0, "n_predict": 120, "ignore_eos": true}' \
    '{"id": 3, "prompt": "Tom had a red ball", "temperature": 1, "seed": 3, "n_predict": 120, "ignore_eos": true}' \
    >"$TMP/eos.jsonl"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/eos.jsonl" --ordered -ngl 0 >"$TMP/eos.out" 2>/dev/null
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/eos.jsonl" --ordered -ngl 0 --ignore-eos >"$TMP/eos2.out" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "Tom had a red ball" -n 120 --temp 0 --ignore-eos -ngl 0 --log-disable >"$TMP/eos-run.txt" 2>/dev/null
python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
run = open(sys.argv[3]).read()
stop, go = a[0]["tokens"], a[1]["tokens"]
ok = a[0]["finish_reason"] == "stop" and len(go) > len(stop) and go[:len(stop)] == stop and 2 not in go
ok = ok and 2 not in a[2]["tokens"] and a[2]["finish_reason"] == "length"
ok = ok and b[0]["tokens"] == go and b[1]["tokens"] == go and run == a[1]["text"]
sys.exit(0 if ok else 1)' "$TMP/eos.out" "$TMP/eos2.out" "$TMP/eos-run.txt"
check "batch and run --ignore-eos never pick the end-of-text token (greedy goes on past it, as llama.cpp)" test $? -eq 0

# Logit biases, llama.cpp's -l and llama-server's "logit_bias": banning greedy's first pick (446)
# changes the text, the JSONL field gives mgi run -l's text, a per-request bias outside the
# vocabulary fails that request alone.
printf '%s\n' '{"id": 1, "prompt": "Once upon a time", "temperature": 0, "n_predict": 16, "logit_bias": [[446, false]]}' \
    '{"id": 2, "prompt": "Once upon a time", "temperature": 0, "n_predict": 16, "logit_bias": {"280": 3.5}}' \
    '{"id": 3, "prompt": "Once upon a time", "temperature": 0, "n_predict": 16, "logit_bias": [[99999, 1]]}' \
    '{"id": 4, "prompt": "Once upon a time", "temperature": 0, "n_predict": 16}' >"$TMP/lb.jsonl"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/lb.jsonl" --ordered -ngl 0 >"$TMP/lb.out" 2>/dev/null
lb_rc=$?
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 16 --temp 0 -ngl 0 --log-disable -l 446-inf >"$TMP/lb1.txt" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 16 --temp 0 -ngl 0 --log-disable -l 280+3.5 >"$TMP/lb2.txt" 2>/dev/null
python3 -c '
import json, sys
o = [json.loads(l) for l in open(sys.argv[1])]
ok = o[0]["text"] == open(sys.argv[2]).read() and o[1]["text"] == open(sys.argv[3]).read()
ok = ok and 446 not in o[0]["tokens"] and o[0]["text"] != o[3]["text"] and o[1]["text"] != o[3]["text"]
ok = ok and o[2]["finish_reason"] == "error" and "99999" in o[2].get("error", "") and o[3]["finish_reason"] == "length"
sys.exit(0 if ok else 1)' "$TMP/lb.out" "$TMP/lb1.txt" "$TMP/lb2.txt"
check "batch logit_bias ([[id, false]], {\"id\": bias}) equals run -l; one out of the vocabulary fails alone" \
    test $? -eq 0 -a $lb_rc -eq 0

# --ordered keeps input order.
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 8 -n 24 --temp 0 --ordered >"$TMP/ord" 2>/dev/null
python3 -c '
import json, sys
ids = [json.loads(l)["id"] for l in open(sys.argv[1])]
want = [i + 1 if i % 4 == 0 else "r%d" % i for i in range(20)]
sys.exit(0 if ids == want else 1)' "$TMP/ord"
check "batch --ordered writes results in input order" test $? -eq 0

# Bad lines are isolated: each gets its own error line, the rest go on.
cat >"$TMP/bad.jsonl" <<'J'
{"id": "ok1", "prompt": "Once upon a time", "n_predict": 5}
{"id": "neg", "prompt": "Once", "n_predict": -5}
{this is not json
{"id": "unk", "prompt": "The dog", "n_predict": 5, "colour": "blue"}
{"id": "long", "prompt": "Once upon a time there was a lighthouse keeper who counted the ships every night and wrote their names in a book", "n_predict": 5}
{"id": "typ", "prompt": 42}
{"id": "ok2", "prompt": "Lily", "n_predict": 5}
J
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/bad.jsonl" -np 4 -c 128 --temp 0 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
python3 - "$TMP/bad.out" <<'PY'
import json, sys
rows = {json.dumps(o["id"]): o for o in map(json.loads, open(sys.argv[1]))}
want = {'"ok1"': "length", '"neg"': "error", "3": "error", '"unk"': "length", '"long"': "error", '"typ"': "error",
        '"ok2"': "length"}
got = {k: v["finish_reason"] for k, v in rows.items()}
if got != want: print("got", got); sys.exit(1)
if "-5" not in rows['"neg"']["error"] or "32" not in rows['"long"']["error"]: print(rows); sys.exit(1)
PY
check "batch isolates bad lines (not JSON, negative n_predict, wrong type, prompt past the context)" test $? -eq 0
check "batch exits 0 when some lines are bad" test $rc -eq 0
if grep -q 'unknown field "colour" ignored' "$TMP/bad.err"; then pass "batch warns about unknown fields on stderr"
else fail "batch warns about unknown fields on stderr" "$(head -3 "$TMP/bad.err")"; fi

# A system prompt is computed once and shared; results equal runs with it prepended.
printf 'the dog ran\nthe cat sat\nthe bird sang\nthe fish swam\n' >"$TMP/sys.txt"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/sys.txt" -np 4 -n 12 --temp 0 --system-prompt "Once upon a time, in a garden, " \
    >"$TMP/sys.out" 2>"$TMP/sys.err"
reused=$(sed -n 's/.*evaluated, \([0-9]*\) reused.*/\1/p' "$TMP/sys.err")
if [ "${reused:-0}" -ge 30 ]; then pass "batch system prompt shared ($reused prompt tokens reused)"
else fail "batch system prompt shared" "reused '${reused}': $(tail -1 "$TMP/sys.err")"; fi
ok=1
while IFS= read -r p; do
    "$MGI" --cpu-exact -m "$F32" -p "Once upon a time, in a garden, $p" -n 12 --temp 0 --log-disable >"$TMP/run.txt" 2>/dev/null
    python3 -c '
import json, sys
rows = {o["prompt"]: o["text"] for o in map(json.loads, open(sys.argv[1]))}
sys.exit(0 if rows[sys.argv[2]] == open(sys.argv[3]).read() else 1)' "$TMP/sys.out" "$p" "$TMP/run.txt" || ok=0
done <"$TMP/sys.txt"
check "batch with a system prompt equals runs with it prepended" test $ok -eq 1
printf 'Once upon a time, in a garden, ' >"$TMP/sysf"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/sys.txt" -np 2 -n 12 --temp 0 -sysf "$TMP/sysf" >"$TMP/sysf.out" 2>/dev/null
python3 -c '
import json, sys
a = sorted((o["id"], o["tokens"]) for o in map(json.loads, open(sys.argv[1])))
b = sorted((o["id"], o["tokens"]) for o in map(json.loads, open(sys.argv[2])))
sys.exit(0 if a == b else 1)' "$TMP/sys.out" "$TMP/sysf.out"
check "batch -sysf equals --system-prompt" test $? -eq 0

# Automatic prefix reuse: a repeated prompt takes all but its last token from the cache.
printf 'Once upon a time there was\nOnce upon a time there was\n' | "$MGI" batch --cpu-exact -m "$F32" -f - -n 4 --temp 0 >"$TMP/pre.out" 2>/dev/null
python3 -c '
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if b["n_reused"] == b["n_prompt"] - 1 and a["n_reused"] == 0 and a["tokens"] == b["tokens"] else 1)' "$TMP/pre.out"
check "batch reuses a common prefix across requests (n_reused)" test $? -eq 0

# Killed with SIGTERM mid-run, then --resume: every id exactly once, results as an uninterrupted run.
python3 -c '
import json
for i in range(16): print(json.dumps({"id": i, "prompt": ["Once upon a time", "The dog", "Lily"][i % 3], "n_predict": 100, "ignore_eos": True, "temperature": 0}))' >"$TMP/long.jsonl"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/long.jsonl" -np 2 -t 1 -o "$TMP/full.out" 2>/dev/null
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/long.jsonl" -np 2 -t 1 -o "$TMP/part.out" 2>"$TMP/kill.err" &
pid=$!
for _ in $(seq 100); do [ -s "$TMP/part.out" ] && break; sleep 0.05; done
kill -TERM $pid
wait $pid
rc=$?
n_before=$(wc -l <"$TMP/part.out")
if [ $rc -eq 143 ] && [ "$n_before" -ge 1 ] && [ "$n_before" -lt 16 ]; then pass "batch SIGTERM exits 143 with $n_before whole lines written"
else fail "batch SIGTERM exits 143 mid-run" "exit $rc, $n_before lines"; fi
printf '{"id": 99, "text": "half a li' >>"$TMP/part.out"   # a line cut by a kill
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/long.jsonl" -np 2 -o "$TMP/part.out" --resume 2>"$TMP/resume.err"
rc=$?
summary "$TMP/full.out" >"$TMP/sum_full"
summary "$TMP/part.out" >"$TMP/sum_part" 2>/dev/null
n_after=$(wc -l <"$TMP/part.out")
if [ $rc -eq 0 ] && [ "$n_after" -eq 16 ] && cmp -s "$TMP/sum_full" "$TMP/sum_part"; then
    pass "batch --resume after SIGTERM: every id once, equal to an uninterrupted run"
else fail "batch --resume after SIGTERM" "exit $rc, $n_after lines: $(tail -1 "$TMP/resume.err")"; fi
check "batch --resume cut the partial line" grep -q "partial last line" "$TMP/resume.err"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/long.jsonl" -np 2 -o "$TMP/part.out" --resume 2>/dev/null
check "batch --resume of a finished run adds nothing" test "$(wc -l <"$TMP/part.out")" -eq 16

# -ns synthetic run; empty input; limits.
"$MGI" batch --cpu-exact -m "$F32" -ns 6 -np 3 -n 4 --temp 0 >"$TMP/ns.out" 2>"$TMP/ns.err"
check "batch -ns 6 runs six built-in prompts" test "$(wc -l <"$TMP/ns.out")" -eq 6
: >"$TMP/empty.txt"
"$MGI" batch --cpu-exact -m "$F32" -f "$TMP/empty.txt" >"$TMP/e.out" 2>"$TMP/e.err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$TMP/e.out" ] && grep -q "no requests" "$TMP/e.err"; then pass "batch on an empty file: exit 0, a note, no output"
else fail "batch on an empty file" "exit $rc: $(cat "$TMP/e.err")"; fi
printf 'Once\n' | "$MGI" batch --cpu-exact -m "$F32" -f - -n 3 --temp 0 >"$TMP/stdin.out" 2>/dev/null
check "batch -f - reads stdin" test "$(wc -l <"$TMP/stdin.out")" -eq 1
if [ -w /dev/full ]; then
    expect_error "batch output on a full disk: one line, exit 3" 3 "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/sys.txt" -n 2 -o /dev/full --log-disable
fi
expect_error "batch -np 0 refused" 1 "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 0
expect_error "batch -np past the context refused" 1 "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" -np 9 -c 8
expect_error "batch --resume without -o refused" 1 "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/req.jsonl" --resume
expect_error "batch without requests refused" 1 "$MGI" batch --cpu-exact -m "$F32"
expect_error "batch missing input file" 2 "$MGI" batch --cpu-exact -m "$F32" -f "$TMP/no-such-file"
e2e_done
