#!/usr/bin/env bash
# mgi devices: lists devices, or says there is none with exit 0 (no GPU is not an error).
source "$(dirname "$0")/lib.sh"
"$MGI" devices >"$TMP/out" 2>"$TMP/err"
rc=$?
check "devices exit 0" [ "$rc" -eq 0 ]
if [ -s "$TMP/out" ]; then
    check "devices table header" grep -q '^index ' "$TMP/out"
    check "devices one row per device" [ "$(grep -cE '^[0-9]+ ' "$TMP/out")" -ge 1 ]
else
    check "devices says no CUDA device" grep -q '^mgi: no CUDA device' "$TMP/err"
fi
"$MGI" info --list-devices >"$TMP/out2" 2>"$TMP/err2"
check "--list-devices on a subcommand" [ "$?" -eq 0 ]
check "--list-devices same as devices" cmp -s "$TMP/out" "$TMP/out2"
expect_error "devices unknown flag" 1 "$MGI" devices --bogus
e2e_done
