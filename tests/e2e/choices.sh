#!/usr/bin/env bash
# Several continuations of one prompt on the real SmolLM2-135M-Instruct: "n" in mgi batch (native
# and OpenAI lines) and mgi run -np N. The prompt is evaluated once (the stderr counters); choice
# i samples with seed + i, so it equals a single run with that seed; greedy choices are all the
# single run's text; stops, logprobs and JSON Schemas hold per choice; bad n or -np are refused.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$MGI" ]; then fail "choices" "$MGI is not built"; e2e_done; fi
real_models || e2e_done
P="Hello my name is"
SEED=$((RANDOM % 10000 + 1))
pyget() {  # file, python expression on the list L of the file's JSON lines
    python3 -c 'import json,sys
L = [json.loads(l) for l in open(sys.argv[1])]
print(eval(sys.argv[2]))' "$1" "$2"
}

# --- mgi batch, native lines -------------------------------------------------------------------
echo "{\"id\": \"n3\", \"prompt\": \"$P\", \"n\": 3, \"n_predict\": 12, \"temperature\": 0.9, \"seed\": $SEED}" >"$TMP/n3.jsonl"
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/n3.jsonl" >"$TMP/n3.out" 2>"$TMP/n3.err"
check "batch n 3 exits 0" [ $? -eq 0 ]
check "batch n 3: choices with indices 0..2, seeds seed..seed+2" [ "$(pyget "$TMP/n3.out" '[(c["index"], c["seed"] - '$SEED') for c in L[0]["choices"]]')" = "[(0, 0), (1, 1), (2, 2)]" ]
# 12 tokens a choice, fewer only where the model ended it (a sampled end of generation at seed + i)
check "batch n 3: n_generated counts every choice" [ "$(pyget "$TMP/n3.out" 'L[0]["n_generated"] == sum(c["n_generated"] for c in L[0]["choices"]) > 0 and all(c["n_generated"] == 12 or (c["finish_reason"] == "stop" and c["n_generated"] < 12) for c in L[0]["choices"])')" = True ]
np=$(pyget "$TMP/n3.out" 'L[0]["n_prompt"]')
check "batch n 3: the prompt ($np tokens) is evaluated once" grep -q "prompt tokens: $np evaluated, $((2 * np)) reused" "$TMP/n3.err"
check "batch n 3: sampled choices differ" [ "$(pyget "$TMP/n3.out" 'len(set(c["text"] for c in L[0]["choices"])) > 1')" = True ]
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/n3.jsonl" >"$TMP/n3b.out" 2>/dev/null
check "batch n 3: reproducible at a fixed seed" [ "$(pyget "$TMP/n3.out" '[c["tokens"] for c in L[0]["choices"]]')" = "$(pyget "$TMP/n3b.out" '[c["tokens"] for c in L[0]["choices"]]')" ]
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 12 --temp 0.9 -s $((SEED + 1)) --log-disable >"$TMP/run1" 2>/dev/null
check "batch n 3: choice 1 is mgi run's text at seed + 1" [ "$(pyget "$TMP/n3.out" 'L[0]["choices"][1]["text"]')" = "$(cat "$TMP/run1")" ]

SCHEMA='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}}, "required": ["name", "age"], "additionalProperties": false}'
cat >"$TMP/per.jsonl" <<J
{"id": "lp", "prompt": "$P", "n": 2, "n_predict": 8, "temperature": 0, "logprobs": true, "top_logprobs": 2}
{"id": "stop", "prompt": "$P", "n": 2, "n_predict": 30, "temperature": 0, "stop": "marketing"}
{"id": "json", "prompt": "A JSON object describing a cat:", "n": 3, "max_tokens": 80, "temperature": 0.9, "seed": $SEED, "json_schema": $SCHEMA}
{"id": "n0", "prompt": "x", "n": 0}
{"id": "nneg", "prompt": "x", "n": -1}
{"id": "nbig", "prompt": "x", "n": 100000}
{"id": "nstr", "prompt": "x", "n": "2"}
J
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/per.jsonl" --ordered >"$TMP/per.out" 2>"$TMP/per.err"
check "batch per-choice file exits 0" [ $? -eq 0 ]
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 8 --temp 0 --log-disable >"$TMP/greedy8" 2>/dev/null
check "batch greedy n 2: both choices are the greedy run's text" [ "$(pyget "$TMP/per.out" '[c["text"] for c in L[0]["choices"]]')" = "$(python3 -c 'import sys; print([open(sys.argv[1]).read()] * 2)' "$TMP/greedy8")" ]
check "batch greedy n 2 logprobs: each choice has one entry per token, its token the top alternative" [ "$(pyget "$TMP/per.out" 'all(len(c["logprobs"]) == c["n_generated"] == 8 and all(e["id"] == e["top_logprobs"][0]["id"] for e in c["logprobs"]) for c in L[0]["choices"])')" = True ]
check "batch n 2 stop: each choice ends before the stop string" [ "$(pyget "$TMP/per.out" '[(c["finish_reason"], "marketing" in c["text"], len(c["text"]) > 0) for c in L[1]["choices"]]')" = "[('stop', False, True), ('stop', False, True)]" ]
check "batch n 3 json_schema: every choice is an object of the schema" [ "$(pyget "$TMP/per.out" 'all(c["finish_reason"] == "stop" and sorted(json.loads(c["text"])) == ["age", "name"] for c in L[2]["choices"])')" = True ]
for k in 3 4 5 6; do
    id=$(pyget "$TMP/per.out" "L[$k]['id']")
    check "batch bad n ($id) is an error line naming \"n\"" [ "$(pyget "$TMP/per.out" "(L[$k]['finish_reason'], '\"n\"' in L[$k]['error'])")" = "('error', True)" ]
done
echo "{\"id\": 1, \"prompt\": \"x\", \"n\": 3}" >"$TMP/np2.jsonl"
"$MGI" batch -m "$SMOLLM" -t 2 -np 2 -f "$TMP/np2.jsonl" >"$TMP/np2.out" 2>/dev/null
check "batch n 3 with -np 2 is an error line naming -np" [ "$(pyget "$TMP/np2.out" "'-np' in L[0]['error'] and '\"n\" 3' in L[0]['error']")" = True ]

# --- OpenAI lines ------------------------------------------------------------------------------
cat >"$TMP/oa.jsonl" <<J
{"custom_id": "c2", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Say hi"}], "n": 2, "max_tokens": 8, "logprobs": true, "temperature": 0.8, "seed": $SEED}}
{"custom_id": "t2", "method": "POST", "url": "/v1/completions", "body": {"prompt": "$P", "n": 2, "max_tokens": 6, "temperature": 0}}
{"custom_id": "bad", "method": "POST", "url": "/v1/completions", "body": {"prompt": "$P", "n": 0}}
J
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/oa.jsonl" --ordered >"$TMP/oa.out" 2>/dev/null
check "openai n 2 chat: two choices, usage counts both" [ "$(pyget "$TMP/oa.out" '(lambda b: ([c["index"] for c in b["choices"]], b["usage"]["completion_tokens"] == sum(len(c["logprobs"]["content"]) for c in b["choices"]) > 8, all(c["message"]["role"] == "assistant" for c in b["choices"])))(L[0]["response"]["body"])')" = "([0, 1], True, True)" ]
check "openai n 2 completion: greedy choices equal" [ "$(pyget "$TMP/oa.out" '(lambda b: (len(b["choices"]), b["choices"][0]["text"] == b["choices"][1]["text"]))(L[1]["response"]["body"])')" = "(2, True)" ]
check "openai n 0: status 400 naming n" [ "$(pyget "$TMP/oa.out" '(lambda r: (r["status_code"], "\"n\"" in r["body"]["error"]["message"]))(L[2]["response"])')" = "(400, True)" ]

# --- mgi run -np -------------------------------------------------------------------------------
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 16 --temp 0 --log-disable >"$TMP/one" 2>/dev/null
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 16 --temp 0 -np 4 >"$TMP/np4" 2>"$TMP/np4.err"
check "run -np 4 exits 0" [ $? -eq 0 ]
check "run -np 4: four headers in order" [ "$(grep '^--- sequence' "$TMP/np4" | tr '\n' '|')" = "--- sequence 1 of 4 ---|--- sequence 2 of 4 ---|--- sequence 3 of 4 ---|--- sequence 4 of 4 ---|" ]
check "run -np 4 --temp 0: every sequence is the single run's text" [ "$(python3 -c 'import sys
t = open(sys.argv[1]).read().split("\n")
one = open(sys.argv[2]).read()
seqs = [t[i + 1] for i in range(len(t)) if t[i].startswith("--- sequence")]
print(len(seqs) == 4 and all(s == one for s in seqs))' "$TMP/np4" "$TMP/one")" = True ]
np=$("$MGI" tokenize -m "$SMOLLM" -p "$P" --ids 2>/dev/null | python3 -c 'import sys; print(len(eval(sys.stdin.read())))')
check "run -np 4: the prompt ($np tokens) is evaluated once, shared by the other three" grep -q "one prompt of $np tokens: $np prompt tokens evaluated, $((3 * np)) shared" "$TMP/np4.err"
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 16 -s $SEED -np 3 --jsonl >"$TMP/j1" 2>/dev/null
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 16 -s $SEED -np 3 --jsonl >"$TMP/j2" 2>/dev/null
check "run -np 3 --jsonl: indices 0..2, seed + i, n_tokens" [ "$(pyget "$TMP/j1" '[(r["index"], r["seed"] - '$SEED', r["n_tokens"] == len(r["tokens"])) for r in L]')" = "[(0, 0, True), (1, 1, True), (2, 2, True)]" ]
check "run -np 3 sampled: reproducible at a fixed seed" cmp -s "$TMP/j1" "$TMP/j2"
check "run -np 3 sampled: the sequences differ" [ "$(pyget "$TMP/j1" 'len(set(r["text"] for r in L)) > 1')" = True ]
"$MGI" -m "$SMOLLM" -t 2 -p "$P" -n 16 -s $((SEED + 2)) --log-disable >"$TMP/run2" 2>/dev/null
check "run -np 3: sequence 2 is the single run at seed + 2" [ "$(pyget "$TMP/j1" 'L[2]["text"]')" = "$(cat "$TMP/run2")" ]
expect_error "run -np 0 refused" 1 "$MGI" -m "$SMOLLM" -p "$P" -np 0
expect_error "run -np 129 refused" 1 "$MGI" -m "$SMOLLM" -p "$P" -np 129
expect_error "run -np with -cnv refused" 1 "$MGI" -m "$SMOLLM" -p "$P" -np 2 -cnv
expect_error "run -np with -r refused" 1 "$MGI" -m "$SMOLLM" -p "$P" -np 2 -r x
e2e_done
