#!/usr/bin/env bash
# mgi template: chat templates rendered through the CLI against transformers' outputs
# ($SHARED/golden/chat), the model's own template (SmolLM2), ChatML for a model without one
# (gemma-3), BOS/EOS from a vocabulary-only file, and bad input: one "mgi: " line, exit 2
# (1 for usage), never a crash or a hang.
source "$(dirname "$0")/lib.sh"
G=$SHARED/golden/chat
export SOURCE_DATE_EPOCH=1768435200
if [ ! -x "$MGI" ]; then fail "template" "$MGI is not built"; e2e_done; fi

# One case of cases.json as its own file, as mgi template -f reads it.
case_file() {
    python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[sys.argv[2]], open(sys.argv[3], "w"))' \
        "$G/cases.json" "$1" "$TMP/$1.json"
}
for c in single system closed multiturn unicode; do case_file $c; done

# golden renders, byte-exact: templates with dates, tools sections, thinking, namespaces, macros
for pair in Qwen-Qwen3-0.6B:multiturn meta-llama-Llama-3.1-8B-Instruct:system google-gemma-4-31B-it:unicode \
            deepseek-ai-DeepSeek-V3.1:closed Mistral-Small-3.2-24B-Instruct-2506:single \
            ibm-granite-granite-4.0:system Kimi-K3:unicode ByteDance-Seed-OSS:multiturn; do
    stem=${pair%%:*} c=${pair##*:}
    "$MGI" template --chat-template-file "$G/templates/$stem.jinja" -f "$TMP/$c.json" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$TMP/out" "$G/expected/$stem.$c.txt"; then
        pass "template $stem.$c byte-identical to transformers"
    else
        fail "template $stem.$c" "exit $rc, $(head -c 200 "$TMP/err"), cmp: $(cmp "$TMP/out" "$G/expected/$stem.$c.txt" 2>&1)"
    fi
done
expect_error "template a template that raises in transformers is refused (firefunction)" 2 \
    "$MGI" template --chat-template-file "$G/templates/fireworks-ai-llama-3-firefunction-v2.jinja" -f "$TMP/single.json"
check "template the raise names the undefined variable" grep -q "'functions' is undefined" "$TMP/err"

if real_models; then
    # SmolLM2's own tokenizer.chat_template (the same as the golden copy); bos/eos from the case
    "$MGI" template -m "$SMOLLM" -f "$TMP/system.json" >"$TMP/out" 2>"$TMP/err"
    check "template -m SmolLM2 renders its own template as transformers" cmp -s "$TMP/out" "$G/expected/SmolLM2-135M-Instruct.system.txt"
    # bos/eos from the model's vocabulary when the case gives none
    printf '{"messages": [], "add_generation_prompt": false}' >"$TMP/empty.json"
    printf '[{{ bos_token }}|{{ eos_token }}]' >"$TMP/specials.jinja"
    check "template -m gives the model's BOS/EOS text (SmolLM2)" \
        [ "$("$MGI" template -m "$SMOLLM" --chat-template-file "$TMP/specials.jinja" -f "$TMP/empty.json")" = "[<|im_start|>|<|im_end|>]" ]
    # gemma-3-270m's file has no template: ChatML, as llama.cpp
    "$MGI" template -m "$GEMMA3" -f "$TMP/closed.json" >"$TMP/out" 2>"$TMP/err"
    printf '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n' >"$TMP/want"
    check "template -m gemma-3 without a template falls back to ChatML" cmp -s "$TMP/out" "$TMP/want"
    printf '{"messages": [{"role": "user"}], "add_generation_prompt": true}' >"$TMP/nocontent.json"
    expect_error "template a message without content, as SmolLM2's template treats it" 2 \
        "$MGI" template -m "$SMOLLM" -f "$TMP/nocontent.json"
fi
check "template -m a vocabulary-only file (BOS/EOS of llama-spm)" \
    [ "$("$MGI" template -m "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --chat-template-file "$TMP/specials.jinja" -f "$TMP/empty.json")" = "[<s>|</s>]" ]
"$MGI" template -m "$SHARED/vocab/ggml-vocab-llama-spm.gguf" -f "$TMP/single.json" >"$TMP/out" 2>"$TMP/err"
printf '<|im_start|>user\nHello! Who are you?<|im_end|>\n<|im_start|>assistant\n' >"$TMP/want"
check "template -m a vocabulary-only file without a template: ChatML" cmp -s "$TMP/out" "$TMP/want"
"$MGI" template -m "$SHARED/vocab/ggml-vocab-qwen2.gguf" -f "$TMP/single.json" >"$TMP/out" 2>"$TMP/err"
printf '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello! Who are you?<|im_end|>\n<|im_start|>assistant\n' >"$TMP/want"
check "template -m a vocabulary-only file with its own template (qwen2)" cmp -s "$TMP/out" "$TMP/want"
check "template prints the render exactly, no newline added" \
    [ "$("$MGI" template --chat-template '{{ "x" }}' -f "$TMP/empty.json" | od -An -c | tr -d ' ')" = "x" ]
check "template -f - reads the case from standard input" \
    [ "$(printf '{"a": 5}' | "$MGI" template --chat-template '{{ a * 2 }}' -f -)" = "10" ]
check "template --chat-template chatml (llama.cpp's built-in name)" \
    [ "$("$MGI" template --chat-template chatml -f "$TMP/single.json")" = "$(printf '<|im_start|>user\nHello! Who are you?<|im_end|>\n<|im_start|>assistant')" ]
expect_error "template other built-in names are refused, not rendered as text" 1 "$MGI" template --chat-template llama3 -f "$TMP/single.json"
check "template --help" [ "$("$MGI" template --help | head -c 19)" = "usage: mgi template" ]

# bad input: one line, exit 2, quickly
printf '{%% for m in messages %%}\n{{ m.role | nosuch }}{%% endfor %%}' >"$TMP/unknown_filter.jinja"
expect_error "template unknown filter" 2 "$MGI" template --chat-template-file "$TMP/unknown_filter.jinja" -f "$TMP/single.json"
check "template unknown filter names line and column" grep -q "unknown_filter.jinja:2:13: no filter named 'nosuch'" "$TMP/err"
printf 'ok\n{%% if x %%}\n{{ 1 + }}' >"$TMP/syntax.jinja"
expect_error "template syntax error" 2 "$MGI" template --chat-template-file "$TMP/syntax.jinja" -f "$TMP/single.json"
check "template syntax error names line and column" grep -q "syntax.jinja:3:8: syntax error" "$TMP/err"
printf '{%% for i in range(1000000) %%}{%% for j in range(1000000) %%}{%% endfor %%}{%% endfor %%}' >"$TMP/forever.jinja"
expect_error "template a loop that never ends is bounded" 2 timeout 60 "$MGI" template --chat-template-file "$TMP/forever.jinja" -f "$TMP/single.json"
printf '{%% macro f(x) %%}{{ f(x) }}{%% endmacro %%}{{ f(1) }}' >"$TMP/recurse.jinja"
expect_error "template a macro that recurses without end is bounded" 2 timeout 60 "$MGI" template --chat-template-file "$TMP/recurse.jinja" -f "$TMP/single.json"
printf '{{ raise_exception("Conversation roles must alternate") }}' >"$TMP/raise.jinja"
expect_error "template raise_exception" 2 "$MGI" template --chat-template-file "$TMP/raise.jinja" -f "$TMP/single.json"
check "template raise_exception's message" grep -q "Conversation roles must alternate" "$TMP/err"
# a message without a role: Qwen3's template skips it, Llama 3.1's fails on it (as in transformers)
printf '{"messages": [{"content": "no role"}], "add_generation_prompt": true}' >"$TMP/norole.json"
check "template a message without a role, as Qwen3's template treats it (skipped)" \
    [ "$("$MGI" template --chat-template-file "$G/templates/Qwen-Qwen3-0.6B.jinja" -f "$TMP/norole.json")" = "<|im_start|>assistant" ]
expect_error "template a message without a role, as Llama 3.1's template treats it (an error)" 2 \
    "$MGI" template --chat-template-file "$G/templates/meta-llama-Llama-3.1-8B-Instruct.jinja" -f "$TMP/norole.json"
check "template the missing role is named" grep -q "has no attribute 'role'" "$TMP/err"
printf '[1, 2]' >"$TMP/list.json"
expect_error "template CASE.json that is not an object" 2 "$MGI" template --chat-template '{{ "x" }}' -f "$TMP/list.json"
printf '{\n  "messages": [,]\n}' >"$TMP/broken.json"
expect_error "template CASE.json that is not JSON" 2 "$MGI" template --chat-template '{{ "x" }}' -f "$TMP/broken.json"
check "template bad JSON names line and column" grep -q "broken.json:2:16: not valid JSON" "$TMP/err"
printf '{"messages": []}\n  trailing' >"$TMP/trailing.json"
expect_error "template CASE.json with text after the object" 2 "$MGI" template --chat-template '{{ "x" }}' -f "$TMP/trailing.json"
check "template the stray text's line and column" grep -q "trailing.json:2:3: not valid JSON" "$TMP/err"
expect_error "template missing CASE.json" 2 "$MGI" template --chat-template '{{ "x" }}' -f "$TMP/none.json"
expect_error "template missing template file" 2 "$MGI" template --chat-template-file "$TMP/none.jinja" -f "$TMP/single.json"
expect_error "template missing model" 2 "$MGI" template -m "$TMP/none.gguf" -f "$TMP/single.json"
expect_error "template without -f is a usage error" 1 "$MGI" template --chat-template '{{ "x" }}'
expect_error "template without a template is a usage error" 1 "$MGI" template -f "$TMP/single.json"
expect_error "template unknown flag is a usage error" 1 "$MGI" template --bogus
e2e_done
