#!/usr/bin/env bash
# mgi run end to end on the tiny real model: greedy text byte-identical to llama.cpp's golden runs
# (stdin, -p, -f), seeded sampling reproducible, thread count irrelevant, and every bad input
# refused with a non-zero status, exactly one line on stderr and nothing on stdout.
set -u
MGI=${MGI:-build/mgi}
# --cpu-exact throughout: these checks hold mgi's exact f32 CPU path to llama.cpp's goldens and
# to itself bit for bit (tests/e2e/cpu_fast.sh holds the fast path to it).
SHARED=${SHARED:-../shared}
F32=$SHARED/models/aidreams260K-f32.gguf
GOLD=$SHARED/golden/llama
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
check_same() {  # name, file_expected, file_got
    if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "output differs from the expected ($(wc -c <"$2") vs $(wc -c <"$3") bytes)"; fi
}

if [ ! -f "$F32" ]; then echo "SKIP e2e run: no $F32 (set SHARED)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP e2e run: python3 is needed to read the golden json"; exit 0; fi

# field FILE KEY OUT: a json field written raw (strings unescaped, lists as their length).
field() {
    python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; sys.stdout.write(str(len(v)) if isinstance(v,list) else str(v))' "$1" "$2" >"$3"
}

# Greedy text of every f32 golden case via -p; "Once upon a time" also via stdin and -f.
for js in "$GOLD"/f32-*.json; do
    [ -f "$js" ] || continue
    case_name=$(basename "$js" .json)
    field "$js" greedy_text "$tmp/want"
    field "$js" prompt "$tmp/prompt"
    field "$js" greedy_tokens "$tmp/n"
    "$MGI" --cpu-exact -m "$F32" -p "$(cat "$tmp/prompt")" -n "$(cat "$tmp/n")" --temp 0 --log-disable >"$tmp/got" 2>"$tmp/err"
    check_same "run $case_name greedy text (-p)" "$tmp/want" "$tmp/got"
done
field "$GOLD/f32-once.json" greedy_text "$tmp/want"
echo "Once upon a time" | "$MGI" --cpu-exact -m "$F32" -n 100 --temp 0 >"$tmp/got" 2>"$tmp/err"
check_same "run stdin 'Once upon a time' greedy text" "$tmp/want" "$tmp/got"
if grep -q "tokens per second" "$tmp/err"; then pass "run timings on stderr"; else fail "run timings on stderr" "no timing lines"; fi
printf 'Once upon a time\n' >"$tmp/prompt.txt"
"$MGI" --cpu-exact -m "$F32" -f "$tmp/prompt.txt" -n 100 --temp 0 --log-disable --no-mmap >"$tmp/got" 2>"$tmp/err"
check_same "run -f prompt file, --no-mmap, greedy text" "$tmp/want" "$tmp/got"
if [ ! -s "$tmp/err" ]; then pass "run --log-disable leaves stderr empty"; else fail "run --log-disable leaves stderr empty" "$(head -1 "$tmp/err")"; fi
{ printf 'Once upon a time'; cat "$tmp/want"; } >"$tmp/want_echo"
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 100 --temp 0 --echo --log-disable >"$tmp/got" 2>/dev/null
check_same "run --echo prints the prompt first" "$tmp/want_echo" "$tmp/got"

# Threads change nothing; the same seed gives the same sample.
"$MGI" --cpu-exact -m "$F32" -p "The garden" -n 60 --temp 0 -t 1 --log-disable >"$tmp/t1" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "The garden" -n 60 --temp 0 -t 3 --log-disable >"$tmp/t3" 2>/dev/null
check_same "run greedy output independent of -t (1 vs 3)" "$tmp/t1" "$tmp/t3"
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0.8 -s 42 --log-disable >"$tmp/s1" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0.8 -s 42 -t 1 --log-disable >"$tmp/s2" 2>/dev/null
if [ -s "$tmp/s1" ]; then check_same "run same seed, same sampled text" "$tmp/s1" "$tmp/s2"; else fail "run same seed, same sampled text" "no output"; fi
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0.8 -s 43 --log-disable >"$tmp/s3" 2>/dev/null
if ! cmp -s "$tmp/s1" "$tmp/s3"; then pass "run other seed, other text"; else fail "run other seed, other text" "identical"; fi
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 200 --temp 0 --ignore-eos >"$tmp/got" 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "context full" "$tmp/err"; then pass "run stops at the context limit with a note"
else fail "run stops at the context limit with a note" "$(tail -1 "$tmp/err")"; fi
"$MGI" --cpu-exact -m "$F32" -p "Once" -n 5 --temp 0 -ngl 99 >/dev/null 2>"$tmp/err"
if [ $? -eq 0 ] && grep -q "CPU" "$tmp/err"; then pass "run -ngl without a GPU backend runs on the CPU"
else fail "run -ngl without a GPU backend runs on the CPU" "$(head -1 "$tmp/err")"; fi

# llama.cpp's escapes (on by default, for -p, -f and stdin; --no-escape keeps them): a prompt
# with \n and \x41 gives the text of the one with a real newline and "A".
nl='Once upon a time
A'
"$MGI" --cpu-exact -m "$F32" -p "$nl" -n 12 --temp 0 --log-disable -ngl 0 >"$tmp/esc-real" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p 'Once upon a time\n\x41' -n 12 --temp 0 --log-disable -ngl 0 >"$tmp/esc-p" 2>/dev/null
printf '%s\n' 'Once upon a time\n\x41' >"$tmp/esc.txt"
"$MGI" --cpu-exact -m "$F32" -f "$tmp/esc.txt" -n 12 --temp 0 --log-disable -ngl 0 >"$tmp/esc-f" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -n 12 --temp 0 --log-disable -ngl 0 <"$tmp/esc.txt" >"$tmp/esc-stdin" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p 'Once upon a time\n\x41' -n 12 --temp 0 -ngl 0 --no-escape --verbose-prompt >"$tmp/esc-no" 2>"$tmp/esc-no.err"
if [ -s "$tmp/esc-real" ] && cmp -s "$tmp/esc-real" "$tmp/esc-p" && cmp -s "$tmp/esc-real" "$tmp/esc-f" &&
    cmp -s "$tmp/esc-real" "$tmp/esc-stdin"; then
    pass "run turns \\n and \\x41 into a newline and A (-p, -f, stdin), as llama.cpp"
else fail "run escapes" "$(od -c "$tmp/esc-p" | head -2)"; fi
if grep -qxF "    95 -> '\\'" "$tmp/esc-no.err" && ! cmp -s "$tmp/esc-real" "$tmp/esc-no"; then
    pass "run --no-escape keeps the backslashes (--verbose-prompt lists the '\\' token)"
else fail "run --no-escape" "$(head -3 "$tmp/esc-no.err")"; fi
# --verbose-prompt lists the prompt's tokens as mgi tokenize --pieces does, on stderr.
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 2 --temp 0 --verbose-prompt >/dev/null 2>"$tmp/vp.err"
"$MGI" tokenize -m "$F32" -p "Once upon a time" --pieces >"$tmp/vp.want" 2>/dev/null
grep -E "^ +[0-9]+ -> '" "$tmp/vp.err" >"$tmp/vp.got"
if [ -s "$tmp/vp.want" ] && cmp -s "$tmp/vp.want" "$tmp/vp.got" && grep -q "^prompt tokens: $(wc -l <"$tmp/vp.want")$" "$tmp/vp.err"
then pass "run --verbose-prompt lists the prompt's tokens on stderr"
else fail "run --verbose-prompt" "$(head -3 "$tmp/vp.err")"; fi
# -sp prints control tokens: seed 3 at temp 1 ends with the end-of-text token on the CPU.
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 300 --temp 1 -s 3 -ngl 0 --log-disable >"$tmp/sp0" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 300 --temp 1 -s 3 -ngl 0 --log-disable -sp >"$tmp/sp1" 2>/dev/null
printf '</s>' | cat "$tmp/sp0" - >"$tmp/sp-want"
if [ -s "$tmp/sp0" ] && ! grep -q '</s>' "$tmp/sp0" && cmp -s "$tmp/sp-want" "$tmp/sp1"; then
    pass "run -sp prints the end-of-text token's </s> where the text ends"
else fail "run -sp" "$(tail -c 40 "$tmp/sp1")"; fi
# -r stops as llama-cli does without -i: once the text ends in a reverse prompt (printed), here
# "petals" and one across a token boundary ("s. Cl"); the first of several that appears wins.
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0 -ngl 0 --log-disable >"$tmp/r-full" 2>/dev/null
ok=1
for r in "petals" "s. Cl"; do
    "$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0 -ngl 0 --log-disable -r "$r" >"$tmp/r-got" 2>/dev/null || ok=0
    case "$(cat "$tmp/r-got")" in *"$r") ;; *) ok=0 ;; esac
    [ "$(wc -c <"$tmp/r-got")" -lt "$(wc -c <"$tmp/r-full")" ] && cmp -s "$tmp/r-got" <(head -c "$(wc -c <"$tmp/r-got")" "$tmp/r-full") || ok=0
done
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n 60 --temp 0 -ngl 0 --log-disable -r "never said" -r "unfolding" >"$tmp/r-two" 2>/dev/null
case "$(cat "$tmp/r-two")" in *unfolding) ;; *) ok=0 ;; esac
if [ $ok = 1 ] && grep -q petals "$tmp/r-full"; then pass "run -r stops once the text ends in a reverse prompt (printed; across tokens; the first of two)"
else fail "run -r" "$(head -c 100 "$tmp/r-got")"; fi

# --mlock: the same text; a lock the limits refuse (64 KiB here; root loses CAP_IPC_LOCK first) is
# one warning line, and the run goes on.
"$MGI" --cpu-exact -m "$F32" -p "$nl" -n 12 --temp 0 --log-disable -ngl 0 --mlock >"$tmp/ml" 2>"$tmp/ml.err"
lim=()
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && lim=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock)
"${lim[@]}" bash -c 'ulimit -l 64 && exec "$0" "$@"' "$MGI" --cpu-exact -m "$F32" -p "$nl" -n 12 --temp 0 -ngl 0 --mlock \
    >"$tmp/ml2" 2>"$tmp/ml2.err"
rc=$?
if cmp -s "$tmp/esc-real" "$tmp/ml" && [ ! -s "$tmp/ml.err" ] && [ $rc -eq 0 ] && cmp -s "$tmp/esc-real" "$tmp/ml2"; then
    pass "run --mlock: the same text, also where the limits refuse the lock"
else fail "run --mlock" "exit $rc: $(head -2 "$tmp/ml2.err")"; fi
if [ -n "${MGI_ASAN:-}" ]; then
    echo "SKIP run --mlock refused: AddressSanitizer ignores mlock (it returns success), so nothing is refused"
elif [ "$(grep -c '^mgi: warning: .*cannot lock .*ulimit -l' "$tmp/ml2.err")" = 1 ]; then
    pass "run --mlock refused by the limits: one warning line, and the run goes on"
else fail "run --mlock refused by the limits" "$(head -2 "$tmp/ml2.err")"; fi

# -tb: the prompt's threads apart from the decode steps' (-t); the text does not depend on either.
ok=1
for tt in "-t 1 -tb 4" "-t 3 -tb 1" "-t 2 -tb -1"; do
    # shellcheck disable=SC2086
    "$MGI" --cpu-exact -m "$F32" -p "$nl" -n 12 --temp 0 --log-disable -ngl 0 $tt >"$tmp/tb" 2>/dev/null && cmp -s "$tmp/esc-real" "$tmp/tb" || ok=0
done
if [ $ok = 1 ]; then pass "run -tb N: the same text for any split of threads between prompt and decode"
else fail "run -tb" "$tt gave other text"; fi

# -n -2 (llama.cpp: until the context is full) is -n -1 here, which also stops there.
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n -2 --temp 0 -ngl 0 --log-disable >"$tmp/n2" 2>/dev/null
"$MGI" --cpu-exact -m "$F32" -p "Once upon a time" -n -1 --temp 0 -ngl 0 --log-disable >"$tmp/n1" 2>/dev/null
check_same "run -n -2 generates what -n -1 does" "$tmp/n1" "$tmp/n2"

# llama-cli flags that change nothing here are accepted: -fa in its forms (off with a note),
# -no-cnv, --no-warmup; the text is unchanged.
ok=1
for fl in "-fa" "-fa on" "-fa auto" "-fa off" "--flash-attn 1" "-no-cnv" "--no-conversation" "--no-warmup"; do
    # shellcheck disable=SC2086
    "$MGI" --cpu-exact -m "$F32" $fl -p "$nl" -n 12 --temp 0 --log-disable -ngl 0 >"$tmp/fl" 2>"$tmp/fl.err" || ok=0
    cmp -s "$tmp/esc-real" "$tmp/fl" || ok=0
    case "$fl" in *off) grep -q "^mgi: -fa off: .*changes nothing" "$tmp/fl.err" || ok=0 ;;
                  *) [ -s "$tmp/fl.err" ] && ok=0 ;; esac
done
if [ $ok = 1 ]; then pass "run accepts -fa [on|off|auto], -no-cnv, --no-warmup (same text; a note for -fa off)"
else fail "run llama-cli compatibility flags" "$fl: $(head -1 "$tmp/fl.err")"; fi

# Bad input: non-zero status, one line on stderr, nothing on stdout.
bad() {  # name, args...
    local name=$1; shift
    "$MGI" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q '^mgi: ' "$tmp/err"; then
        pass "run refuses $name (exit $rc: $(cat "$tmp/err"))"
    else
        fail "run refuses $name" "exit $rc, $lines stderr lines, $(wc -c <"$tmp/out") stdout bytes: $(head -c 300 "$tmp/err")"
    fi
}
long="Once upon a time there was a lighthouse keeper who counted the ships every night"
bad "a prompt longer than -c" -m "$F32" -c 8 -p "$long"
bad "-n 0" -m "$F32" -p "Once" -n 0
bad "--temp -1" -m "$F32" -p "Once" --temp -1
bad "--top-p 2" -m "$F32" -p "Once" --top-p 2
bad "--min-p -0.5" -m "$F32" -p "Once" --min-p -0.5
bad "an unknown flag" -m "$F32" -p "Once" --frobnicate
bad "-i (no interactive mode)" -m "$F32" -p "Once" -i
bad "an empty -r" -m "$F32" -p "Once" -r ""
bad "-l without a sign" -m "$F32" -p "Once" -l 446
bad "-l past the vocabulary" -m "$F32" -p "Once" -l 512+1
bad "-cnv with --prompt-cache (a conversation keeps its own cache)" -m "$F32" -cnv --prompt-cache "$tmp/chat.pc"
bad "--presence-penalty abc" -m "$F32" -p "Once" --presence-penalty abc
bad "a missing value" -m "$F32" -p
bad "-c past the training context" -m "$F32" -p "Once" -c 4096
bad "a vocabulary-only file" -m "$SHARED/vocab/ggml-vocab-llama-spm.gguf" -p "Once"
bad "a missing model file" -m "$tmp/no-such-model.gguf" -p "Once"
bad "a missing -m" -p "Once"
bad "a missing prompt file" -m "$F32" -f "$tmp/no-such-prompt.txt"
