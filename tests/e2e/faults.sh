#!/usr/bin/env bash
# Faults outside the model file: a full disk under stdout (/dev/full) is one "mgi: " line and
# exit 3, never a hang; a reader that closes the pipe (| head -c1) ends mgi by SIGPIPE with
# nothing on stderr; the GGUF writer on a full file system (a 64 KiB tmpfs, root only) fails
# with a message and leaves no temporary file behind.
source "$(dirname "$0")/lib.sh"
F32=$SHARED/models/aidreams260K-f32.gguf
if [ ! -f "$F32" ]; then echo "SKIP e2e faults: no $F32 (set SHARED)"; exit 0; fi

# full_disk NAME CMD...: CMD with stdout on /dev/full exits 3 within 60 s, and its stderr holds
# exactly one "mgi: " line, about the output (other log lines are the command's own).
full_disk() {
    local name=$1; shift
    timeout 60 "$@" >/dev/full 2>"$TMP/err" </dev/null
    local rc=$?
    local n
    n=$(grep -c '^mgi: ' "$TMP/err")
    if [ "$rc" -ne 3 ]; then
        fail "full disk: $name" "exit $rc, expected 3 (stderr: $(head -c 300 "$TMP/err"))"
    elif [ "$n" -ne 1 ] || ! grep -qiE '^mgi: .*(stdout|standard output|output)' "$TMP/err"; then
        fail "full disk: $name" "expected one 'mgi: ' line about the output, got: $(head -c 300 "$TMP/err")"
    else
        pass "full disk: $name ($(grep '^mgi: ' "$TMP/err"))"
    fi
}
full_disk "info" "$MGI" info "$F32"
full_disk "info --values all" "$MGI" info "$F32" --tensor output_norm.weight --values all
full_disk "bench -o json" "$MGI" bench -m "$F32" -p 8 -n 4 -r 1 --bw 10 -o json
full_disk "run" "$MGI" run -m "$F32" -p hi -n 8 -s 1 --log-disable
full_disk "tokenize" "$MGI" tokenize -m "$F32" -p "hello world"
full_disk "perplexity" "$MGI" perplexity -m "$F32" -f "$SHARED/golden/perplexity/text.txt" -c 64 -b 64 --log-disable
full_disk "batch" "$MGI" batch -m "$F32" -ns 2 -n 4
check "full disk: run with --log-disable prints only the one line" [ "$(
    timeout 60 "$MGI" run -m "$F32" -p hi -n 8 -s 1 --log-disable 2>&1 >/dev/full | wc -l)" -eq 1 ]

# closed_pipe NAME CMD...: CMD | head -c1 ends by SIGPIPE (or exits 0), stderr empty.
closed_pipe() {
    local name=$1; shift
    timeout 60 "$@" 2>"$TMP/err" </dev/null | head -c1 >/dev/null
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 141 ] && [ "$rc" -ne 0 ]; then
        fail "closed stdout: $name" "exit $rc (stderr: $(head -c 300 "$TMP/err"))"
    elif [ -s "$TMP/err" ]; then
        fail "closed stdout: $name" "stderr not empty: $(head -c 300 "$TMP/err")"
    else
        pass "closed stdout: $name (exit $rc)"
    fi
}
closed_pipe "info --values all" "$MGI" info "$F32" --tensor token_embd.weight --values all
closed_pipe "run" "$MGI" run -m "$F32" -p hi -n 120 -s 1 --ignore-eos --log-disable
# Even when the parent ignores SIGPIPE (as some shells and services do).
(trap '' PIPE; closed_pipe "info --values all, SIGPIPE ignored by the parent" \
    "$MGI" info "$F32" --tensor token_embd.weight --values all)

# The writer on a full file system: mkmodel writes through gguf_writer_write.
mkmodel=$BUILD/scripts/mkmodel
mnt=$TMP/tiny
mkdir -p "$mnt"
if [ ! -x "$mkmodel" ]; then
    echo "SKIP full file system: $mkmodel not built"
elif [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$mnt" 2>/dev/null; then
    echo "SKIP full file system: cannot mount a 64 KiB tmpfs (needs root)"
else
    trap 'umount "$mnt" 2>/dev/null; rm -rf "$TMP"' EXIT
    timeout 60 "$mkmodel" --shape demo --quant q4_0 -o "$mnt/model.gguf" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "full file system: the writer fails (exit $rc)" [ "$rc" -ne 0 -a "$rc" -lt 128 ]
    check "full file system: the message says so" grep -q 'No space left on device' "$TMP/err"
    check "full file system: nothing left behind" [ -z "$(ls -A "$mnt")" ]
    # A prompt cache that cannot be written: the text still comes, one line says why, exit 3,
    # and no partial cache file is left.
    dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null
    timeout 60 "$MGI" run -m "$F32" -p "Once upon a time" -n 4 --temp 0 --log-disable \
        --prompt-cache "$mnt/pc.bin" >"$TMP/out" 2>"$TMP/err" </dev/null
    rc=$?
    check "full file system: prompt cache exit 3 (got $rc)" [ "$rc" -eq 3 ]
    check "full file system: prompt cache, the text still written" [ -s "$TMP/out" ]
    check "full file system: prompt cache, one line" [ "$(wc -l <"$TMP/err")" -eq 1 ]
    check "full file system: prompt cache, nothing half-written" [ -z "$(ls "$mnt" | grep -v '^fill$')" ]
    umount "$mnt"
fi
e2e_done
