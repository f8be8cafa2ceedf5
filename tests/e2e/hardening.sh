#!/usr/bin/env bash
# What a hostile or careless user hands mgi, on the tiny model: FIFOs without a writer or reader
# and pipes whose writer stays open (SIGTERM/SIGINT end every blocking open and read: 143/130),
# device nodes where a prompt cache goes (never replaced), endless inputs (/dev/zero: a bounded
# read and one line), a batch whose every prompt is too long (each gets its line), duplicate ids,
# a raw NUL and a byte order mark in JSONL, a model truncated while mapped (SIGBUS: one line, exit
# 3, whole lines), and two batch runs on one -o (the second is refused by the lock).
# Every wait is bounded; background processes are killed on exit.
set -u
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/aidreams260K-f32.gguf
if [ ! -f "$M" ]; then echo "SKIP e2e hardening: no $M (set SHARED)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP e2e hardening: python3 is needed to read JSON lines"; exit 0; fi
MGI=$(realpath "$MGI")
BG=()
cleanup() {
    local p
    for p in "${BG[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

# blocked PID: polls (up to 30 s) until PID's main thread sleeps in a FIFO open or a pipe read:
# its kernel wait channel, or where that is hidden (wchan "0"), a sleeping openat/read (x86-64
# system call numbers 257 and 0).
blocked() {
    local pid=$1 i w s
    for ((i = 0; i < 300; i++)); do
        [ -d /proc/$pid ] || return 1
        w=$(cat /proc/$pid/wchan 2>/dev/null)
        case "$w" in *partner* | *pipe_read* | *pipe_wait* | *fifo*) return 0 ;; esac
        if [ "$w" = 0 ] && [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = S ]; then
            s=$(cut -d' ' -f1 /proc/$pid/syscall 2>/dev/null)
            [ "$s" = 257 ] || [ "$s" = 0 ] && return 0
        fi
        sleep 0.1
    done
    return 1
}
# waitfor PID SECONDS: the exit status of PID, or 124 after killing it when it outlives SECONDS.
waitfor() {
    local pid=$1 i
    for ((i = 0; i < $2 * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 124; fi
    wait "$pid"
}

# signal_case NAME SIG CODE CMD...: CMD (in the background, stdin from $IN, default /dev/null)
# blocks; once it really sleeps in the open or read, SIG ends it with CODE within 20 s and at
# most one line on stderr.
signal_case() {
    local name=$1 sig=$2 code=$3; shift 3
    "$@" <"${IN:-/dev/null}" >"$TMP/s.out" 2>"$TMP/s.err" 7<&- &
    local pid=$!
    BG+=("$pid")
    if ! blocked "$pid"; then
        fail "blocked, then SIG$sig: $name" "it never blocked in an open or read: $(head -c 300 "$TMP/s.err")"
        kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return
    fi
    kill -"$sig" "$pid"
    waitfor "$pid" 20
    local rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "blocked, then SIG$sig: $name" "exit $rc, expected $code (stderr: $(head -c 300 "$TMP/s.err"))"
    elif [ "$(wc -l <"$TMP/s.err")" -gt 1 ]; then
        fail "blocked, then SIG$sig: $name" "more than one line on stderr: $(head -c 300 "$TMP/s.err")"
    else
        pass "blocked, then SIG$sig: $name (exit $rc)"
    fi
}

printf 'Once upon a time\nThe little dog\n' >"$TMP/two.txt"
mkfifo "$TMP/ff"
# 2. FIFOs nobody writes or reads: mgi waits in open(), and a signal ends the wait.
signal_case "-m FIFO" TERM 143 "$MGI" -m "$TMP/ff" -p hi -n 2
signal_case "run -f FIFO" TERM 143 "$MGI" -m "$M" -f "$TMP/ff" -n 2
signal_case "run -f FIFO, SIGINT" INT 130 "$MGI" -m "$M" -f "$TMP/ff" -n 2
signal_case "batch -f FIFO" TERM 143 "$MGI" batch -m "$M" -f "$TMP/ff" -n 2
signal_case "batch -o FIFO" TERM 143 "$MGI" batch -m "$M" -f "$TMP/two.txt" -n 2 -o "$TMP/ff"
signal_case "batch --system-prompt-file FIFO" TERM 143 "$MGI" batch -m "$M" -f "$TMP/two.txt" -n 2 -sysf "$TMP/ff"
# The same FIFO with a writer that stays open and never writes: mgi waits in read().
exec 7<>"$TMP/ff"
signal_case "run -f FIFO, writer held open" TERM 143 "$MGI" -m "$M" -f "$TMP/ff" -n 2
signal_case "batch -f FIFO, writer held open" TERM 143 "$MGI" batch -m "$M" -f "$TMP/ff" -n 2
IN=$TMP/ff signal_case "run, stdin a pipe whose writer stays open" TERM 143 "$MGI" -m "$M" -n 2
IN=$TMP/ff signal_case "batch -f -, writer held open, SIGINT" INT 130 "$MGI" batch -m "$M" -f - -n 2
exec 7>&-
# What mgi reads back must be a regular file: refused at once, never waited on.
expect_error "batch -o FIFO --resume: refused, not waited on" 2 timeout -k 5 20 "$MGI" batch -m "$M" \
    -f "$TMP/two.txt" -n 2 -o "$TMP/ff" --resume
timeout -k 5 30 "$MGI" -m "$M" -p "Once upon a time" -n 2 --prompt-cache "$TMP/ff" --prompt-cache-ro \
    >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
if [ "$rc" -eq 0 ] && [ -s "$TMP/out" ] && [ -p "$TMP/ff" ] && grep -q "not a regular file" "$TMP/err"; then
    pass "--prompt-cache FIFO --prompt-cache-ro: not waited on, ignored with one line"
else
    fail "--prompt-cache FIFO --prompt-cache-ro" "exit $rc: $(head -c 300 "$TMP/err")"
fi

# 1. A prompt cache path that is a device node (here a /dev/full twin) or a FIFO is never
# replaced: one line, the text still comes, exit 0.
if mknod -m 666 "$TMP/fake" c 1 7 2>/dev/null; then
    for pc in fake ff; do
        timeout -k 5 30 "$MGI" -m "$M" -p "Once upon a time" -n 4 --temp 0 --prompt-cache "$TMP/$pc" \
            >"$TMP/out" 2>"$TMP/err" </dev/null
        rc=$?
        kind=$([ "$pc" = fake ] && echo "-c" || echo "-p")
        if [ "$rc" -eq 0 ] && [ -s "$TMP/out" ] && test "$kind" "$TMP/$pc" && [ "$(grep -c '^mgi: ' "$TMP/err")" -eq 1 ] &&
            grep -q "not a regular file" "$TMP/err" && ! grep -q "saved" "$TMP/err" && [ -z "$(ls "$TMP" | grep "$pc.tmp")" ]; then
            pass "--prompt-cache on a $([ "$pc" = fake ] && echo "character device" || echo FIFO): left alone, one line"
        else
            fail "--prompt-cache on $pc" "exit $rc, $(ls -l "$TMP/$pc"): $(head -c 300 "$TMP/err")"
        fi
    done
else
    echo "SKIP --prompt-cache on a device node: mknod is refused here (not root, or no CAP_MKNOD)"
fi
# A symbolic link to a cache: the file it names is replaced, the link stays.
timeout -k 5 30 "$MGI" -m "$M" -p "Once upon a time" -n 2 --prompt-cache "$TMP/real.pc" >/dev/null 2>&1 </dev/null
ln -s real.pc "$TMP/link.pc"
timeout -k 5 30 "$MGI" -m "$M" -p "Once upon a time there" -n 2 --prompt-cache "$TMP/link.pc" >/dev/null 2>"$TMP/err" </dev/null
rc=$?
check "--prompt-cache through a symbolic link: the link stays, its file is rewritten (exit $rc)" \
    test "$rc" -eq 0 -a -L "$TMP/link.pc" -a -f "$TMP/real.pc"

# 3. Endless or unreadable inputs: a bounded read and one line, under a memory limit a whole
# read would break (AddressSanitizer reserves terabytes of address space: no limit there).
limit() {
    if [ -n "${MGI_ASAN:-}" ]; then "$@"; else (ulimit -v 2000000; exec "$@"); fi
}
[ -n "${MGI_ASAN:-}" ] && echo "SKIP ulimit -v on the endless inputs: AddressSanitizer needs a huge address space (checked without the limit)"
expect_error "run -f /dev/zero: bounded" 2 limit timeout -k 5 60 "$MGI" -m "$M" -f /dev/zero -n 2
expect_error "batch -f /dev/zero: bounded" 2 limit timeout -k 5 60 "$MGI" batch -m "$M" -f /dev/zero -n 2
expect_error "batch --system-prompt-file /dev/zero: bounded" 2 limit timeout -k 5 60 "$MGI" batch -m "$M" \
    -f "$TMP/two.txt" -n 2 -sysf /dev/zero
expect_error "batch -o /dev/zero --resume: a regular file is needed" 2 limit timeout -k 5 60 "$MGI" batch -m "$M" \
    -f "$TMP/two.txt" -n 2 -o /dev/zero --resume
expect_error "batch -o /dev/full --resume: a regular file is needed" 2 limit timeout -k 5 60 "$MGI" batch -m "$M" \
    -f "$TMP/two.txt" -n 2 -o /dev/full --resume
limit timeout -k 5 60 "$MGI" -m "$M" -n 2 </dev/zero >"$TMP/out" 2>"$TMP/err"
rc=$?
check "run with stdin /dev/zero: bounded, exit 2 (got $rc)" test "$rc" -eq 2 -a "$(wc -l <"$TMP/err")" -eq 1
expect_error "batch -f a directory" 2 timeout -k 5 20 "$MGI" batch -m "$M" -f "$TMP" -n 2

# 4. Every prompt too long: each still gets its error line.
python3 -c "print('x'*200); print('y'*300)" >"$TMP/long.txt"
timeout -k 5 60 "$MGI" batch -m "$M" -f "$TMP/long.txt" -n 4 >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
n=$(grep -c '"finish_reason":"error"' "$TMP/out")
check "batch, every prompt too long: 2 error lines, exit 0 (got $n, exit $rc)" test "$rc" -eq 0 -a "$n" -eq 2

# 5. Duplicate ids: the later one is an error line; with --resume the input is refused.
printf '{"id":"a","prompt":"Hi"}\n{"id":"a","prompt":"Yo"}\n{"id":"b","prompt":"Hey"}\n' >"$TMP/dup.jsonl"
timeout -k 5 60 "$MGI" batch -m "$M" -f "$TMP/dup.jsonl" -n 2 >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
if [ "$rc" -eq 0 ] && [ "$(wc -l <"$TMP/out")" -eq 3 ] && grep -q '"id":"a".*already the id of line 1' "$TMP/out"; then
    pass "batch, duplicate id: the later line gets an error line"
else
    fail "batch, duplicate id" "exit $rc: $(head -c 400 "$TMP/out")"
fi
expect_error "batch --resume, duplicate id: refused" 2 timeout -k 5 60 "$MGI" batch -m "$M" -f "$TMP/dup.jsonl" -n 2 \
    -o "$TMP/dup.out" --resume
check "batch --resume, duplicate id: nothing written" test ! -s "$TMP/dup.out"

# 7. A raw NUL in a JSON line is an error for that line; a UTF-8 BOM is skipped.
printf '\xef\xbb\xbf{"id":"bom","prompt":"Hi"}\n{"id":"nul\x00x","prompt":"Hi\x00there"}\n' >"$TMP/nul.jsonl"
timeout -k 5 60 "$MGI" batch -m "$M" -f "$TMP/nul.jsonl" -n 2 >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
check "batch, BOM skipped: the first line is JSON (id bom)" grep -q '"id":"bom","prompt":"Hi"' "$TMP/out"
check "batch, raw NUL: an error line naming it" grep -q '"id":2,.*"finish_reason":"error".*NUL' "$TMP/out"

# 8 and 6. A long batch on a copy of the model; a second run on its -o is refused by the lock;
# then the copy is truncated under the map: one line naming it, exit 3, every line whole.
cp "$M" "$TMP/mm.gguf"
python3 -c "
for i in range(400): print('{\"id\":\"q%d\",\"prompt\":\"Once upon a time %d\"}' % (i, i))" >"$TMP/many.jsonl"
"$MGI" batch -m "$TMP/mm.gguf" -f "$TMP/many.jsonl" -np 4 -n 100 --ignore-eos -o "$TMP/o.jsonl" \
    >/dev/null 2>"$TMP/a.err" </dev/null &
A=$!
BG+=("$A")
for ((i = 0; i < 300; i++)); do [ -s "$TMP/o.jsonl" ] && break; kill -0 $A 2>/dev/null || break; sleep 0.1; done
if [ ! -s "$TMP/o.jsonl" ]; then
    fail "long batch for the lock and SIGBUS checks" "no line within 30 s: $(head -c 300 "$TMP/a.err")"
else
    expect_error "a second batch on the same -o: refused by the lock" 3 timeout -k 5 60 "$MGI" batch -m "$M" \
        -f "$TMP/many.jsonl" -n 2 -o "$TMP/o.jsonl" --resume
    truncate -s 100000 "$TMP/mm.gguf"
    waitfor $A 60
    rc=$?
    bad=$(python3 -c "
import json, sys
for l in open(sys.argv[1]): json.loads(l)" "$TMP/o.jsonl" 2>&1 | tail -1)
    if [ "$rc" -eq 3 ] && grep -q "mm.gguf: the model file changed" "$TMP/a.err" && [ -z "$bad" ] &&
        [ "$(tail -c1 "$TMP/o.jsonl" | od -An -c | tr -d ' ')" = '\n' ]; then
        pass "model truncated while mapped: one line, exit 3, $(wc -l <"$TMP/o.jsonl") whole lines"
    else
        fail "model truncated while mapped" "exit $rc, lines: $bad; $(tail -c 300 "$TMP/a.err")"
    fi
fi
e2e_done
