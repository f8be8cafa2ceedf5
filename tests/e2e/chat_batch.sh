#!/usr/bin/env bash
# mgi batch with chat requests on the real SmolLM2-135M-Instruct: "messages" rendered with the
# model's template (the same answer as mgi run -st), "stop" ending the text before the stop
# string, max_tokens, and bad requests each getting their own error line while the rest go on.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$MGI" ]; then fail "chat batch" "$MGI is not built"; e2e_done; fi
real_models || e2e_done
SYS="You are a helpful assistant."
Q='[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the capital of France?"}]'
cat >"$TMP/in.jsonl" <<J
{"id": "paris", "messages": $Q, "temperature": 0, "max_tokens": 30}
{"id": "stop", "messages": $Q, "temperature": 0, "max_tokens": 30, "stop": [" Paris", "zzz"]}
{"id": "short", "messages": $Q, "temperature": 0, "max_tokens": 3}
{"id": "norole", "messages": [{"content": "hi"}]}
{"id": "nocontent", "messages": [{"role": "user"}]}
{"id": "raises", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
{"id": "badjson", "messages": [
J
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/in.jsonl" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "chat batch exits 0 with bad lines among good ones" [ $rc -eq 0 ]
field() {  # id, python expression on the line's object r
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["id"] == sys.argv[2]: print(eval(sys.argv[3]))' "$TMP/out" "$1" "$2"
}
"$MGI" -m "$SMOLLM" -t 2 --temp 0 -n 30 -st -sys "$SYS" -p "What is the capital of France?" --log-disable >"$TMP/run" 2>/dev/null
check "chat batch messages answer with Paris" grep -q Paris <<<"$(field paris 'r["text"]')"
check "chat batch messages give mgi run -st's text" [ "$(field paris 'r["text"]')" = "$(cat "$TMP/run")" ]
check "chat batch prompt is the rendered template" [ "$(field paris 'r["prompt"]')" = "$(cat tests/golden/chat/smollm2-capital.txt)" ]
check "chat batch n_prompt is the peer's token count" [ "$(field paris 'r["n_prompt"]')" = 27 ]
check "chat batch stop ends the text before the stop string" [ "$(field stop 'r["text"]')" = "The capital of France is" ]
check "chat batch stop's finish_reason is stop" [ "$(field stop 'r["finish_reason"]')" = stop ]
check "chat batch stop ends generation once it appears" [ "$(field stop 'r["n_generated"]')" -lt "$(field paris 'r["n_generated"]')" ]
check "chat batch max_tokens is n_predict" [ "$(field short 'r["n_generated"], r["finish_reason"]')" = "(3, 'length')" ]
check "chat batch a message without role is that line's error" grep -q 'without \\"role' <<<"$(grep '"norole"' "$TMP/out")"
check "chat batch a message without content is that line's error" grep -q 'without \\"content' <<<"$(grep '"nocontent"' "$TMP/out")"
check "chat batch a template error is that line's error" grep -q 'chat template: .*can only concatenate' <<<"$(grep '"raises"' "$TMP/out")"
check "chat batch every line has its result" [ "$(wc -l <"$TMP/out")" -eq 7 ]
# logprobs: greedy picks are the top alternative, the tokens are those of a run without
# logprobs (where the backend picks), and each logprob is a log-probability
printf '%s\n' '{"id": "lp", "prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "logprobs": true, "top_logprobs": 3}' \
    '{"id": "plain", "prompt": "The capital of France is", "n_predict": 6, "temperature": 0}' \
    '{"id": "np", "prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "n_probs": 2}' >"$TMP/lp.jsonl"
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/lp.jsonl" >"$TMP/out" 2>/dev/null
check "chat batch logprobs: the chosen token is the top alternative" [ "$(field lp 'all(e["id"] == e["top_logprobs"][0]["id"] and e["logprob"] == e["top_logprobs"][0]["logprob"] for e in r["logprobs"])')" = True ]
check "chat batch logprobs: the same tokens as without" [ "$(field lp 'r["tokens"]')" = "$(field plain 'r["tokens"]')" ]
check "chat batch logprobs: 3 alternatives, descending, probabilities" [ "$(field lp 'all(len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"] >= e["top_logprobs"][2]["logprob"] and sum(__import__("math").exp(t["logprob"]) for t in e["top_logprobs"]) <= 1 for e in r["logprobs"])')" = True ]
check "chat batch logprobs: bytes spell the token" [ "$(field lp 'all(bytes(e["bytes"]).decode() == e["token"] for e in r["logprobs"])')" = True ]
check "chat batch n_probs 2 gives 2 alternatives" [ "$(field np 'set(len(e["top_logprobs"]) for e in r["logprobs"])')" = "{2}" ]
check "chat batch no logprobs field unless asked" [ "$(field plain '"logprobs" in r')" = False ]
e2e_done
