#!/usr/bin/env bash
# mgi batch reading OpenAI Batch API files on the real SmolLM2-135M-Instruct: chat and
# completion lines answered in OpenAI's output format (n choices too), a bad url or body or a bad
# field answered with status 400 on that line while the rest go on, and a run killed halfway resumed
# (--resume, matched on custom_id) with every custom_id written exactly once.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$MGI" ]; then fail "chat openai" "$MGI is not built"; e2e_done; fi
real_models || e2e_done
Q='[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the capital of France?"}]'
cat >"$TMP/in.jsonl" <<J
{"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "smollm", "messages": $Q, "max_completion_tokens": 30, "temperature": 0, "n": 1}}
{"custom_id": "q2", "method": "POST", "url": "/v1/completions", "body": {"prompt": "The capital of France is", "max_tokens": 5, "temperature": 0, "stop": ["."]}}
{"custom_id": "emb", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}
{"custom_id": "nobody", "method": "POST", "url": "/v1/chat/completions", "body": "hi"}
{"custom_id": "norole", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"content": "x"}]}}
{"custom_id": "n3", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": $Q, "n": 3, "max_tokens": 4}}
{"custom_id": "n0", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": $Q, "n": 0}}
J
"$MGI" batch -m "$SMOLLM" -t 2 -f "$TMP/in.jsonl" >"$TMP/out" 2>"$TMP/err"
check "openai batch exits 0" [ $? -eq 0 ]
get() {  # custom_id, python expression on the line's object r
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["custom_id"] == sys.argv[2]: print(eval(sys.argv[3]))' "$TMP/out" "$1" "$2"
}
check "openai chat line answers Paris in choices[0].message.content" grep -q Paris <<<"$(get q1 'r["response"]["body"]["choices"][0]["message"]["content"]')"
check "openai chat line has OpenAI's envelope" [ "$(get q1 'r["response"]["status_code"], r["response"]["body"]["object"], r["error"], r["id"].startswith("batch_req_"), sorted(r)')" = "(200, 'chat.completion', None, True, ['custom_id', 'error', 'id', 'response'])" ]
check "openai chat usage counts the peer's 27 prompt tokens" [ "$(get q1 'r["response"]["body"]["usage"]["prompt_tokens"], r["response"]["body"]["usage"]["total_tokens"] - r["response"]["body"]["usage"]["completion_tokens"]')" = "(27, 27)" ]
check "openai completion line: text, stop before the stop string" [ "$(get q2 'r["response"]["body"]["object"], r["response"]["body"]["choices"][0]["text"], r["response"]["body"]["choices"][0]["finish_reason"]')" = "('text_completion', ' Paris', 'stop')" ]
check "openai n 3: three choices, indices 0..2" [ "$(get n3 '[c["index"] for c in r["response"]["body"]["choices"]]')" = "[0, 1, 2]" ]
for c in emb nobody norole n0; do
    check "openai $c is status 400 with an error message" [ "$(get $c 'r["response"]["status_code"], bool(r["response"]["body"]["error"]["message"])')" = "(400, True)" ]
done
check "openai unknown url named in the error" grep -q '/v1/chat/completions or /v1/completions' <<<"$(get emb 'r["response"]["body"]["error"]["message"]')"

# killed after the first result, resumed: each custom_id once
for i in 1 2 3 4 5; do
    echo "{\"custom_id\": \"r$i\", \"method\": \"POST\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Count to $i:\", \"max_tokens\": 24, \"temperature\": 0}}"
done >"$TMP/resume.jsonl"
"$MGI" batch -m "$SMOLLM" -t 2 -np 1 -f "$TMP/resume.jsonl" -o "$TMP/res.out" 2>/dev/null &
pid=$!
for _ in $(seq 1 300); do [ -s "$TMP/res.out" ] && break; sleep 0.1; done
kill -TERM $pid; wait $pid
rc=$?
first=$(wc -l <"$TMP/res.out")
"$MGI" batch -m "$SMOLLM" -t 2 -np 1 -f "$TMP/resume.jsonl" -o "$TMP/res.out" --resume 2>/dev/null
rc2=$?
ids=$(python3 -c 'import json,sys; print(" ".join(sorted(json.loads(l)["custom_id"] for l in open(sys.argv[1]))))' "$TMP/res.out")
if [ $rc -eq 143 ] && [ "$first" -ge 1 ] && [ "$first" -lt 5 ] && [ $rc2 -eq 0 ] && [ "$ids" = "r1 r2 r3 r4 r5" ]; then
    pass "openai killed run resumed: each custom_id once ($first before the kill)"
else fail "openai resume" "kill exit $rc with $first lines, resume exit $rc2, ids '$ids'"; fi
e2e_done
