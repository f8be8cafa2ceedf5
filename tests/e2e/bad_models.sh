#!/usr/bin/env bash
# The model-level malformed corpus (tests/malformed/gen_bad_models.c) through the CLI: mgi run,
# perplexity and bench refuse every file with exit 2, one "mgi: " line naming the problem and
# nothing on stdout; mgi info and tokenize never crash on them (they may well succeed: these
# files are valid GGUF). Under make test-asan the same runs check for leaks on the error paths.
source "$(dirname "$0")/lib.sh"
gen=$BUILD/tests/malformed/gen_bad_models
if [ ! -x "$gen" ]; then
    fail "bad models" "generator $gen not built"
    e2e_done
fi
"$gen" --good "$TMP/bad" >"$TMP/cases" || fail "bad-model generator" "exit $?"
printf 'Once upon a time there was a little dog.\n' >"$TMP/text"

# refused CASE COMMAND EXPECTED CMD...: exit 2, one "mgi: " line containing EXPECTED, empty stdout.
refused() {
    local name=$1 what=$2 want=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne 2 ] || [ "$(wc -l <"$TMP/err")" -ne 1 ] || ! grep -q '^mgi: ' "$TMP/err" || [ -s "$TMP/out" ]; then
        fail "bad model $name ($what)" "exit $rc, stdout $(wc -c <"$TMP/out") bytes, stderr: $(head -c 400 "$TMP/err")"
    elif ! grep -qF -- "$want" "$TMP/err"; then
        fail "bad model $name ($what)" "message lacks '$want': $(cat "$TMP/err")"
    else
        pass "bad model $name ($what)"
    fi
}

# lenient CASE COMMAND CMD...: commands that may accept these files (info, tokenize): exit 0, or
# exit 2 with one line and empty stdout; never a crash or (under ASan) a leak.
lenient() {
    local name=$1 what=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$?
    if [ "$rc" -ne 0 ] && { [ "$rc" -ne 2 ] || [ -s "$TMP/out" ] || [ "$(wc -l <"$TMP/err")" -ne 1 ]; }; then
        fail "bad model $name ($what)" "exit $rc, stderr: $(head -c 400 "$TMP/err")"
    else
        pass "bad model $name ($what, exit $rc)"
    fi
}

n=0
while IFS=$'\t' read -r file want; do
    [ -n "$file" ] || continue
    name=$(basename "$file" .gguf)
    if [ "$want" = OK ]; then   # the base of each architecture every case varies: it must run
        # Greedy and past EOS: a random first token could be EOS (or a control token with no
        # text), which would leave stdout empty by chance.
        if "$MGI" run -m "$file" -p hi -n 4 --temp 0 --ignore-eos --log-disable >"$TMP/out" 2>"$TMP/err" </dev/null; then
            if [ ! -s "$TMP/err" ]; then pass "bad models: the base model $name runs"
            else fail "bad models: the base model $name runs" "stdout $(wc -c <"$TMP/out") bytes, stderr: $(head -c 300 "$TMP/err")"; fi
        else
            fail "bad models: the base model $name runs" "exit $?: $(head -c 300 "$TMP/err")"
        fi
        continue
    fi
    n=$((n + 1))
    refused "$name" run "$want" "$MGI" run -m "$file" -p hi -n 1
    refused "$name" perplexity "$want" "$MGI" perplexity -m "$file" -f "$TMP/text"
    refused "$name" bench "$want" "$MGI" bench -m "$file" -p 1 -n 1 -r 1 --bw 1
    lenient "$name" info "$MGI" info "$file"
    lenient "$name" tokenize "$MGI" tokenize -m "$file" -p hi
done <"$TMP/cases"
check "bad-model corpus has >= 40 files ($n)" [ "$n" -ge 40 ]
e2e_done
