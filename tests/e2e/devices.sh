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
# MGI_VIRTUAL_DEVICES shows one GPU as several (engine/devices.h); with none it makes none
MGI_VIRTUAL_DEVICES=3 "$MGI" devices >"$TMP/out3" 2>"$TMP/err3"
if [ -s "$TMP/out" ]; then
    check "MGI_VIRTUAL_DEVICES=3: three virtual rows" \
        [ "$(grep -cE '^[0-9]+ .*\(virtual, on device [0-9]+\)' "$TMP/out3")" -eq 3 ]
else
    check "MGI_VIRTUAL_DEVICES=3 without a GPU: still no CUDA device" grep -q '^mgi: no CUDA device' "$TMP/err3"
fi
e2e_done
