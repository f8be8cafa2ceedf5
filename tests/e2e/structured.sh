#!/usr/bin/env bash
# Structured output end to end (GBNF grammars and JSON Schemas, llama.cpp's flags and
# llama-server's request fields): 50 requests with different schemas through mgi batch at
# temperature 1 with fixed seeds all stop with JSON that validates (a small validator in
# structured_check.py, standard library only), on SmolLM2 and on a synthetic model; greedy output
# under a grammar that accepts anything equals the output without one, token for token; mgi run
# --grammar / -j keep to the language; bad grammars and schemas are one line, exit 2 (batch: that
# request's error line).
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
CHECK_PY="$(dirname "$0")/structured_check.py"
if ! command -v python3 >/dev/null; then echo "SKIP e2e structured: python3 is needed to read JSON lines"; exit 0; fi
real_models || e2e_done
TINY=$TMP/tiny.gguf
if ! "$BUILD/scripts/mkmodel" --shape tiny --quant q4_0 --ctx 1024 -o "$TINY" >"$TMP/mk.out" 2>&1; then
    fail "structured: synthetic model" "mkmodel failed: $(tail -c 300 "$TMP/mk.out")"; e2e_done
fi
check "structured: the test's validator rejects invalid values and accepts valid ones" \
    python3 "$CHECK_PY" selftest

# --- 50 schemas, sampled -------------------------------------------------------------------------
python3 "$CHECK_PY" write "$TMP/s50.jsonl" 1 384
for m in "$TINY" "$SMOLLM"; do
    name=$(basename "$m")
    "$MGI" batch -m "$m" -f "$TMP/s50.jsonl" -np 8 -t 2 >"$TMP/s50.out" 2>"$TMP/s50.err"
    rc=$?
    why=$(python3 "$CHECK_PY" check "$TMP/s50.out" 2>&1)
    if [ $rc -eq 0 ] && [ -z "$why" ]; then
        pass "structured $name: 50 schemas (objects, bounded arrays, enums, \$defs, anyOf) at temperature 1: every text stops as valid JSON"
    else
        fail "structured $name: 50 schemas at temperature 1 give valid JSON" "exit $rc: $why $(tail -1 "$TMP/s50.err")"
    fi
done

# --- a grammar that accepts anything changes no greedy pick --------------------------------------
# A grammar matches UTF-8 text, so a byte token that breaks UTF-8 (a random model picks them) is
# never allowed: a request whose plain text is valid UTF-8 must give the same tokens under the
# grammar; one whose plain text breaks it must agree up to that token and stay valid UTF-8.
same_greedy() {
    python3 -c '
import json, sys
a = {o["id"]: o for o in map(json.loads, open(sys.argv[1]))}
b = {o["id"]: o for o in map(json.loads, open(sys.argv[2]))}
if len(a) != 8 or sorted(a) != sorted(b): print("ids differ: %s vs %s" % (sorted(a), sorted(b))); sys.exit()
clean = 0
for k in sorted(a):
    x, y = a[k], b[k]
    if "\ufffd" not in x["text"]:
        clean += 1
        if (x["finish_reason"], x["tokens"]) != (y["finish_reason"], y["tokens"]):
            print("id %s: %s %s vs %s %s" % (k, x["finish_reason"], x["tokens"], y["finish_reason"], y["tokens"]))
    else:
        n = 0
        while n < min(len(x["tokens"]), len(y["tokens"])) and x["tokens"][n] == y["tokens"][n]: n += 1
        if "\ufffd" in y["text"] or n == len(x["tokens"]):
            print("id %s: the grammar let through text that is not UTF-8: %r" % (k, y["text"][:80]))
if clean < 5: print("only %d of 8 plain texts are valid UTF-8: the check would be vacuous" % clean)' "$1" "$2"
}
printf '%s\n' "The capital of France is" "Once upon a time" "def fib(n):" "1, 2, 3, 4," "Dear John," \
    "The weather today" "SELECT * FROM" "In 1492," >"$TMP/plain.txt"
for m in "$TINY" "$SMOLLM"; do
    name=$(basename "$m")
    "$MGI" batch -m "$m" -f "$TMP/plain.txt" -np 4 -n 24 --temp 0 -t 2 >"$TMP/g0.out" 2>"$TMP/g0.err"
    "$MGI" batch -m "$m" -f "$TMP/plain.txt" -np 4 -n 24 --temp 0 -t 2 --grammar 'root ::= [^\x00]*' \
        >"$TMP/g1.out" 2>"$TMP/g1.err"
    why=$(same_greedy "$TMP/g0.out" "$TMP/g1.out" 2>&1)
    if [ -z "$why" ]; then
        pass "structured $name: greedy with an accept-anything grammar equals greedy without one, token for token (every plain text that is UTF-8)"
    else
        fail "structured $name: greedy with an accept-anything grammar equals without" "$why $(tail -1 "$TMP/g1.err")"
    fi
done

# --- the flags: mgi run and mgi batch ------------------------------------------------------------
out=$("$MGI" run -m "$SMOLLM" -p "Is the sky blue? Answer:" --grammar 'root ::= " "? ("yes" | "no")' --temp 1 -s 3 \
      -t 2 2>"$TMP/run.err")
rc=$?
if [ $rc -eq 0 ] && { [ "$out" = yes ] || [ "$out" = no ] || [ "$out" = " yes" ] || [ "$out" = " no" ]; }; then
    pass "structured: mgi run --grammar gives a sentence of the grammar ('$out')"
else
    fail "structured: mgi run --grammar" "exit $rc, text '$out': $(tail -1 "$TMP/run.err")"
fi
schema='{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":120},"pets":{"type":"array","items":{"enum":["cat","dog"]},"maxItems":2}},"required":["name","age","pets"]}'
printf '%s' "$schema" >"$TMP/schema.json"
for flags in "-j $schema" "-jf $TMP/schema.json" "--json-schema-file $TMP/schema.json"; do
    # shellcheck disable=SC2086
    "$MGI" run -m "$SMOLLM" -p "A person as JSON:" ${flags} --temp 1 -s 11 -n 200 -t 2 >"$TMP/run.out" 2>"$TMP/run.err"
    rc=$?
    why=$(python3 -c '
import json, sys
sys.path.insert(0, sys.argv[3])
from structured_check import validate
s = json.load(open(sys.argv[2]))
try:
    v = json.loads(open(sys.argv[1]).read())
except ValueError as e:
    print("not JSON: %s" % e); sys.exit()
print("; ".join(validate(v, s, s)))' "$TMP/run.out" "$TMP/schema.json" "$(dirname "$CHECK_PY")")
    if [ $rc -eq 0 ] && [ -z "$why" ]; then pass "structured: mgi run ${flags%% *}: valid JSON ($(tr -s ' \n\t' ' ' <"$TMP/run.out" | head -c 80))"
    else fail "structured: mgi run ${flags%% *}" "exit $rc: $why $(head -c 200 "$TMP/run.out") $(tail -1 "$TMP/run.err")"; fi
done
# The flags' grammar is every request's default in mgi batch; a request's own field replaces it.
printf '%s\n' "Pick a colour:" '{"id":"own","prompt":"Pick a number:","grammar":"root ::= [0-9]"}' >"$TMP/dflt.jsonl"
"$MGI" batch -m "$SMOLLM" -f "$TMP/dflt.jsonl" --grammar 'root ::= "red" | "blue"' --temp 1 -s 5 -t 2 \
    >"$TMP/dflt.out" 2>"$TMP/dflt.err"
texts=$(python3 -c '
import json, sys
print(" ".join("%s=%s/%s" % (o["id"], o["text"], o["finish_reason"]) for o in map(json.loads, open(sys.argv[1]))))' \
    "$TMP/dflt.out" 2>&1)
if echo "$texts" | grep -Eq '(^| )1=(red|blue)/stop( |$)' && echo "$texts" | grep -Eq '(^| )own=[0-9]/stop( |$)'; then
    pass "structured: batch --grammar applies to every request, a request's \"grammar\" replaces it ($texts)"
else
    fail "structured: batch --grammar default and per-request grammar" "$texts $(tail -1 "$TMP/dflt.err")"
fi

# --- bad input -----------------------------------------------------------------------------------
# Compiled before the model loads: a model path that does not exist is never reached.
expect_error "structured: run --grammar that does not parse" 2 "$MGI" run -m /nonexistent.gguf -p x --grammar 'root ::= ("a"'
expect_error "structured: run --grammar with a rule never defined" 2 "$MGI" run -m /nonexistent.gguf -p x --grammar 'root ::= item'
expect_error "structured: run --grammar with left recursion" 2 "$MGI" run -m /nonexistent.gguf -p x --grammar 'root ::= root "a" | "a"'
expect_error "structured: run --grammar that can match nothing" 2 "$MGI" run -m /nonexistent.gguf -p x --grammar 'root ::= "a" root'
expect_error "structured: run -j with an unsupported keyword" 2 "$MGI" run -m /nonexistent.gguf -p x -j '{"type":"string","not":{"const":"a"}}'
expect_error "structured: run -j that is not JSON" 2 "$MGI" run -m /nonexistent.gguf -p x -j '{"type":'
expect_error "structured: run -jf of a missing file" 2 "$MGI" run -m /nonexistent.gguf -p x -jf "$TMP/none.json"
expect_error "structured: batch --grammar-file that does not parse" 2 \
    sh -c "printf 'root ::= [a-' >'$TMP/bad.gbnf'; exec '$MGI' batch -m /nonexistent.gguf -f '$TMP/plain.txt' --grammar-file '$TMP/bad.gbnf'"
expect_error "structured: run --grammar and -j together" 1 "$MGI" run -m "$SMOLLM" -p x --grammar 'root ::= "a"' -j '{}'
if grep -q -- '--grammar' "$TMP/err" && grep -q -- '-j' "$TMP/err"; then pass "structured: the message names both flags"
else fail "structured: the message names both flags" "$(cat "$TMP/err")"; fi
for f in "--grammar" "-j" "--json-schema"; do
    "$MGI" run -m /nonexistent.gguf -p x "$f" 'x' >/dev/null 2>"$TMP/err"
    if grep -q -- "^mgi: $f" "$TMP/err"; then pass "structured: the error names $f"
    else fail "structured: the error names $f" "$(cat "$TMP/err")"; fi
done
# mgi batch: each bad request gets its own error line naming the field; the good one runs.
cat >"$TMP/bad.jsonl" <<'JSONL'
{"id":"parse","prompt":"x","grammar":"root ::= (\"a\""}
{"id":"undef","prompt":"x","grammar":"root ::= item"}
{"id":"leftrec","prompt":"x","grammar":"root ::= root \"a\" | \"a\""}
{"id":"nothing","prompt":"x","grammar":"root ::= \"a\" root"}
{"id":"keyword","prompt":"x","json_schema":{"type":"string","not":{"const":"a"}}}
{"id":"rfkeyword","prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","uniqueItems":true}}}}
{"id":"rftype","prompt":"x","response_format":{"type":"xml"}}
{"id":"both","prompt":"x","grammar":"root ::= \"a\"","json_schema":{}}
{"id":"notstring","prompt":"x","grammar":12}
{"id":"good","prompt":"Say a or b:","grammar":"root ::= \"a\" | \"b\"","temperature":0}
{"id":"obj","prompt":"JSON:","response_format":{"type":"json_object"},"n_predict":6,"temperature":0}
JSONL
"$MGI" batch -m "$SMOLLM" -f "$TMP/bad.jsonl" -t 2 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
res=$(python3 -c '
import json, sys
want = {"parse": "grammar", "undef": "grammar", "leftrec": "grammar", "nothing": "grammar", "keyword": "json_schema",
        "rfkeyword": "response_format", "rftype": "response_format", "both": "grammar", "notstring": "grammar"}
rows = {o["id"]: o for o in map(json.loads, open(sys.argv[1]))}
bad = [k for k, f in want.items() if k not in rows or rows[k]["finish_reason"] != "error" or f not in rows[k].get("error", "")]
g = rows.get("good", {})
if g.get("finish_reason") != "stop" or g.get("text") not in ("a", "b"): bad.append("good: %r" % g.get("text"))
# json_object without a schema: any JSON object, as llama-server (an object, not any value)
if not rows.get("obj", {}).get("text", "").lstrip().startswith("{"): bad.append("obj: %r" % rows.get("obj"))
print(" ".join(bad))' "$TMP/bad.out" 2>&1)
if [ $rc -eq 0 ] && [ -z "$res" ] && [ "$(wc -l <"$TMP/bad.out")" -eq 11 ]; then
    pass "structured: batch gives each bad grammar or schema its own error line naming the field; the good request runs"
else
    fail "structured: batch bad grammar lines" "exit $rc: $res $(tail -1 "$TMP/bad.err")"
fi
e2e_done
