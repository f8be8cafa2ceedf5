#!/usr/bin/env bash
# mgi run -cnv / -st on the real SmolLM2-135M-Instruct: a greedy single-turn answer, its rendered
# prompt token-for-token as llama.cpp's llama-tokenize gives it (tests/golden/chat/smollm2-capital.*,
# made with the peer), a two-turn conversation over a pipe whose second reply depends on the first
# and evaluates only the new tokens, --reasoning-format, --chat-template-kwargs, end of input and
# signals, and bad input: one "mgi: " line, exit 1 (usage) or 2 (bad input).
source "$(dirname "$0")/lib.sh"
if [ ! -x "$MGI" ]; then fail "chat" "$MGI is not built"; e2e_done; fi
GC=tests/golden/chat
real_models || e2e_done
SYS="You are a helpful assistant."
RUN=("$MGI" -m "$SMOLLM" -t 2 --temp 0)

# single turn: the answer, and the prompt's ids against the peer's
"${RUN[@]}" -cnv -st -sys "$SYS" -p "What is the capital of France?" --verbose-prompt >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -q "Paris" "$TMP/out"; then pass "chat -st answers the capital of France with Paris"
else fail "chat -st Paris" "exit $rc, stdout '$(head -c 200 "$TMP/out")', $(tail -c 300 "$TMP/err")"; fi
ids=$(grep -E '^ *[0-9]+ -> ' "$TMP/err" | awk '{printf "%s%s", (NR > 1 ? ", " : ""), $1}')
check "chat -st prompt is llama-tokenize's ids for the rendered template" [ "[$ids]" = "$(cat $GC/smollm2-capital.ids)" ]
# the same ids from mgi tokenize on the text the template gives (mgi template, the golden text)
check "chat golden text is what mgi template renders" cmp -s <(printf '{"messages": [{"role": "system", "content": "%s"}, {"role": "user", "content": "What is the capital of France?"}], "add_generation_prompt": true}' "$SYS" | "$MGI" template -m "$SMOLLM" -f -) $GC/smollm2-capital.txt
check "chat mgi tokenize of the rendered text matches the peer" [ "$("$MGI" tokenize -m "$SMOLLM" -f $GC/smollm2-capital.txt --no-escape)" = "$(cat $GC/smollm2-capital.ids)" ]
# -st with the prompt on stdin
echo "What is the capital of France?" | "${RUN[@]}" -st -sys "$SYS" >"$TMP/out2" 2>/dev/null
check "chat -st reads the one prompt from stdin" cmp -s "$TMP/out" "$TMP/out2"

# two turns over a pipe: turn 2 recalls turn 1, and only the new tokens are evaluated
printf 'Remember the number 42.\nWhat number did I ask you to remember?\n' |
    "${RUN[@]}" -cnv -sys "$SYS" -n 40 >"$TMP/two" 2>"$TMP/two.err"
rc=$?
check "chat -cnv two turns over a pipe exit 0 at end of input" [ $rc -eq 0 ]
check "chat -cnv prints two replies" [ "$(grep -c . "$TMP/two")" -eq 2 ]
check "chat -cnv turn 2 recalls the number from turn 1" grep -q 42 <(sed -n 2p "$TMP/two")
"${RUN[@]}" -st -sys "$SYS" -n 40 -p "What number did I ask you to remember?" >"$TMP/alone" 2>/dev/null
check "chat the same question without turn 1 does not give 42" bash -c "! grep -q 42 '$TMP/alone'"
t1=$(grep '^chat turn 1:' "$TMP/two.err"); t2=$(grep '^chat turn 2:' "$TMP/two.err")
read -r p1 g1 <<<"$(echo "$t1" | sed -E 's/.*: ([0-9]+) prompt tokens, .* ([0-9]+) generated/\1 \2/')"
read -r p2 r2 e2 <<<"$(echo "$t2" | sed -E 's/.*: ([0-9]+) prompt tokens, ([0-9]+) reused from the cache, ([0-9]+) evaluated.*/\1 \2 \3/')"
# the cache holds turn 1's prompt and every reply token but the last (-n 40 stops before evaluating it)
if [ -n "$r2" ] && [ "$r2" -ge $((p1 + g1 - 2)) ] && [ $((r2 + e2)) -eq "$p2" ] && [ "$e2" -lt 30 ]; then
    pass "chat -cnv turn 2 reuses the KV cache ($t2)"
else fail "chat -cnv KV reuse" "turn 1: '$t1'; turn 2: '$t2'"; fi

# end of input at once: no turn, exit 0; a signal while waiting for a turn: 143
"${RUN[@]}" -cnv </dev/null >"$TMP/out" 2>"$TMP/err"
check "chat -cnv with empty input exits 0" [ $? -eq 0 ]
(sleep 30 | "${RUN[@]}" -cnv >"$TMP/out" 2>"$TMP/err") &
sleep 3
pid=$(pgrep -n -f -- "-m $SMOLLM -t 2 --temp 0 -cnv$" || true)
if [ -n "$pid" ]; then
    kill -TERM "$pid"; wait $!
    rc=$?
    check "chat -cnv SIGTERM while waiting for a turn exits 143" [ $rc -eq 143 ]
    check "chat -cnv SIGTERM ends with the summary line" grep -q "^chat: 0 turns" "$TMP/err"
else fail "chat -cnv SIGTERM" "the process was not found"; fi

# --reasoning-format: a template that opens <think> itself; the 135M model never closes it, so
# deepseek sends the whole reply to stderr and none leaves it on stdout
cat >"$TMP/think.jinja" <<'T'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}
T
"${RUN[@]}" -st -n 12 --chat-template-file "$TMP/think.jinja" -p "Hi" --reasoning-format deepseek --log-disable >"$TMP/out" 2>"$TMP/err"
check "chat --reasoning-format deepseek: the open reasoning goes to stderr" [ "$(tr -d '\n' <"$TMP/out")" = "" -a -s "$TMP/err" ]
"${RUN[@]}" -st -n 12 --chat-template-file "$TMP/think.jinja" -p "Hi" --reasoning-format none --log-disable >"$TMP/out2" 2>/dev/null
check "chat --reasoning-format none: the same text stays on stdout" [ "$(cat "$TMP/out2")" = "$(cat "$TMP/err")" ]
"${RUN[@]}" -st -n 4 --chat-template-file "$TMP/think.jinja" -p "Hi" --chat-template-kwargs '{"enable_thinking": false}' --verbose-prompt >/dev/null 2>"$TMP/err"
check "chat --chat-template-kwargs reaches the template" grep -q "^</think>" "$TMP/err"

# bad input
expect_error "chat -sys without -cnv" 1 "${RUN[@]}" -sys "$SYS" -p hi
expect_error "chat --chat-template-kwargs not an object" 1 "${RUN[@]}" -cnv --chat-template-kwargs '[1]'
expect_error "chat --reasoning-format unknown" 1 "${RUN[@]}" -cnv --reasoning-format r1
expect_error "chat -i is refused" 1 "${RUN[@]}" -i
expect_error "chat --chat-template-file missing" 2 "${RUN[@]}" -st -p hi --chat-template-file "$TMP/nonexistent.jinja"
printf '{{ raise_exception("no system role here") }}' >"$TMP/raise.jinja"
expect_error "chat template that raises" 2 "${RUN[@]}" -st -p hi --chat-template-file "$TMP/raise.jinja" --log-disable
printf '{%% for m in messages %%}' >"$TMP/broken.jinja"
expect_error "chat template that does not parse" 2 "${RUN[@]}" -st -p hi --chat-template-file "$TMP/broken.jinja" --log-disable
e2e_done
