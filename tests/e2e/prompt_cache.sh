#!/usr/bin/env bash
# mgi run --prompt-cache end to end: a saved prompt state reused gives the same text as a fresh
# run (greedy and seeded); a flipped byte, a truncated file, another model's cache or a foreign
# file is reported in one line, ignored, and the output is still right; --prompt-cache-ro writes
# nothing; a failed save leaves no file. Also SIGINT/SIGTERM during run: what was generated is
# flushed and the exit status is 130/143.
set -u
. "$(dirname "$0")/lib.sh"
# --cpu-exact throughout: these checks hold mgi's exact f32 CPU path to llama.cpp's goldens and
# to itself bit for bit (tests/e2e/cpu_fast.sh holds the fast path to it).
F32=$SHARED/models/aidreams260K-f32.gguf
MIXQ=$SHARED/models/aidreams260K-mixq.gguf
if [ ! -f "$F32" ] || [ ! -f "$MIXQ" ]; then echo "SKIP e2e prompt cache: no aidreams260K models (set SHARED)"; exit 0; fi
P="Once upon a time there was a little dog who liked to run"
C=$TMP/cache.bin
run() { "$MGI" --cpu-exact -m "$F32" -p "$P" -n 30 -t 2 "$@"; }

run --temp 0 --log-disable >"$TMP/fresh" 2>/dev/null
run --temp 0 --prompt-cache "$C" >"$TMP/first" 2>"$TMP/first.err"
check "prompt cache written after the prompt" test -s "$C"
check "prompt cache first run equals a fresh run" cmp -s "$TMP/fresh" "$TMP/first"
run --temp 0 --prompt-cache "$C" >"$TMP/second" 2>"$TMP/second.err"
if grep -q "reused [1-9][0-9]* of" "$TMP/second.err"; then pass "prompt cache reused ($(grep -o 'reused [0-9]* of [0-9]*' "$TMP/second.err"))"
else fail "prompt cache reused" "$(grep 'prompt cache' "$TMP/second.err")"; fi
check "prompt cache round trip equals a fresh run (greedy)" cmp -s "$TMP/fresh" "$TMP/second"
run --temp 0.8 -s 9 --log-disable >"$TMP/fresh_s" 2>/dev/null
run --temp 0.8 -s 9 --prompt-cache "$C" >"$TMP/cached_s" 2>/dev/null
check "prompt cache round trip equals a fresh run (seeded)" cmp -s "$TMP/fresh_s" "$TMP/cached_s"
# A longer prompt sharing a prefix reuses part of the cache.
"$MGI" --cpu-exact -m "$F32" -p "$P and jump" -n 20 --temp 0 --log-disable >"$TMP/fresh_l" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "$P and jump" -n 20 --temp 0 --prompt-cache "$C" --prompt-cache-ro >"$TMP/cached_l" 2>"$TMP/l.err"
check "prompt cache prefix reuse on a longer prompt equals a fresh run" cmp -s "$TMP/fresh_l" "$TMP/cached_l"

# Damaged caches: one line naming the problem, ignored, output still right, exit 0.
damaged() {  # name, needle, file
    local name=$1 needle=$2 file=$3
    run --temp 0 --prompt-cache "$file" --prompt-cache-ro >"$TMP/d.out" 2>"$TMP/d.err"
    local rc=$? lines
    lines=$(grep -c '^mgi: ' "$TMP/d.err")
    if [ $rc -eq 0 ] && [ "$lines" -eq 1 ] && grep -q "^mgi: prompt cache.*$needle.*ignored" "$TMP/d.err" &&
        cmp -s "$TMP/fresh" "$TMP/d.out"; then
        pass "prompt cache $name caught ($(grep '^mgi: ' "$TMP/d.err"))"
    else
        fail "prompt cache $name caught" "exit $rc, $lines error lines: $(head -3 "$TMP/d.err")"
    fi
}
size=$(stat -c %s "$C")
for off in 20 70 $((size / 2)) $((size - 3)); do
    cp "$C" "$TMP/flip"
    python3 -c 'import sys; p, o = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, "rb").read()); b[o] ^= 0x10; open(p, "wb").write(b)' "$TMP/flip" "$off"
    damaged "flipped byte at $off of $size" "" "$TMP/flip"
done
head -c $((size - 100)) "$C" >"$TMP/trunc"
damaged "truncated file" "truncated" "$TMP/trunc"
head -c 30 "$C" >"$TMP/trunc_h"
damaged "truncated header" "truncated" "$TMP/trunc_h"
"$MGI" --cpu-exact -m "$MIXQ" -p "$P" -n 2 --temp 0 --prompt-cache "$TMP/other" >/dev/null 2>&1
damaged "another model's cache" "another model" "$TMP/other"
printf 'this is not a cache file at all, just text\n%.0s' 1 2 3 >"$TMP/text"
damaged "a foreign file" "bad magic" "$TMP/text"
check "prompt cache damaged files untouched by --prompt-cache-ro" cmp -s "$TMP/text" <(printf 'this is not a cache file at all, just text\n%.0s' 1 2 3)
# A damaged cache without -ro is replaced by a good one.
cp "$TMP/trunc" "$TMP/fix"
run --temp 0 --prompt-cache "$TMP/fix" >/dev/null 2>&1
run --temp 0 --prompt-cache "$TMP/fix" >"$TMP/fixed" 2>"$TMP/fixed.err"
if grep -q "reused [1-9]" "$TMP/fixed.err" && cmp -s "$TMP/fresh" "$TMP/fixed"; then pass "prompt cache a damaged file is rewritten"
else fail "prompt cache a damaged file is rewritten" "$(grep 'prompt cache' "$TMP/fixed.err")"; fi
run --temp 0 --prompt-cache "$TMP/ro" --prompt-cache-ro >/dev/null 2>&1
check "prompt cache --prompt-cache-ro writes nothing" test ! -e "$TMP/ro"
run --temp 0 --prompt-cache "$TMP/no/such/dir/c" >"$TMP/nd.out" 2>"$TMP/nd.err"
rc=$?
if [ $rc -eq 3 ] && grep -q "^mgi: prompt cache.*nothing was written" "$TMP/nd.err" && cmp -s "$TMP/fresh" "$TMP/nd.out" &&
    [ -z "$(ls "$TMP" | grep 'tmp\.')" ]; then pass "prompt cache a failed save: one line, exit 3, no partial file, output right"
else fail "prompt cache a failed save" "exit $rc: $(grep '^mgi' "$TMP/nd.err")"; fi
expect_error "prompt cache --prompt-cache-ro alone refused" 1 "$MGI" --cpu-exact -m "$F32" -p "$P" --prompt-cache-ro

# Signals during run: the text so far is flushed, exit 128 + signal.
"$BUILD/scripts/mkmodel" --shape demo --quant q4_0 --ctx 4096 -o "$TMP/demo.gguf" >/dev/null 2>&1
for sig in INT TERM; do
    "$MGI" --cpu-exact -m "$TMP/demo.gguf" -p "hello" -n -1 --ignore-eos --temp 0 -t 1 >"$TMP/sig.out" 2>"$TMP/sig.err" &
    pid=$!
    for _ in $(seq 100); do [ -s "$TMP/sig.out" ] && break; sleep 0.02; done
    sleep 0.1
    kill -$sig $pid
    wait $pid
    rc=$?
    want=$([ $sig = INT ] && echo 130 || echo 143)
    if [ $rc -eq $want ] && [ -s "$TMP/sig.out" ] && grep -q "interrupted after" "$TMP/sig.err"; then
        pass "run SIG$sig: exit $rc, $(wc -c <"$TMP/sig.out") bytes flushed"
    else fail "run SIG$sig" "exit $rc (want $want), $(wc -c <"$TMP/sig.out") bytes: $(tail -1 "$TMP/sig.err")"; fi
done
e2e_done
