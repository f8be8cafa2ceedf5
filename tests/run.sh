#!/usr/bin/env bash
# Runs the test suite: every unit binary in $BUILD/tests and every tests/e2e/*.sh script (or, with
# "gpu", the GPU tests). Each test prints lines "PASS name", "FAIL name: why" or "SKIP name: why";
# a program that exits non-zero without printing a FAIL line counts as one failure (a crash).
# Ends with the line "N passed, N failed, N skipped" and exits 1 if anything failed. After each
# program a line "# N.N s label" says how long it ran, so the slow ones in a CI log are plain.
set -u
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
export BUILD SHARED MGI="$BUILD/mgi"
mode=${1:-cpu}
pass=0 fail=0 skip=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_one() {  # label, command...
    local label=$1; shift
    local t0=$EPOCHREALTIME
    "$@" >"$log" 2>&1
    local rc=$?
    local t1=$EPOCHREALTIME
    cat "$log"
    awk -v a="$t0" -v b="$t1" -v l="$label" 'BEGIN { printf "# %.1f s %s\n", b - a, l }'
    local p f s
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $label: exited with status $rc"
        f=1
    fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}

# The golden files, models and vocabularies live in $SHARED; without them most checks would only
# say SKIP, so a missing folder is a failure, not a quiet pass.
if [ ! -d "$SHARED/golden" ] || [ ! -d "$SHARED/models" ]; then
    echo "FAIL shared data: $SHARED/golden and $SHARED/models not found (set SHARED=path/to/shared)"
    fail=$((fail + 1))
fi

if [ "$mode" = gpu ]; then
    for t in "$BUILD"/tests/gpu/test_*; do [ -x "$t" ] && run_one "$t" "$t"; done
    for t in tests/gpu/*.sh; do [ -f "$t" ] && run_one "$t" bash "$t"; done
    # With one GPU the split tests above say SKIP for their two- and four-device cases; they run
    # again on four virtual devices over that GPU (engine/devices.h's MGI_VIRTUAL_DEVICES), so the
    # split code's plans, transfers and all-reduces are checked here too (without NCCL).
    if [ -z "${MGI_VIRTUAL_DEVICES:-}" ] && [ "$("$MGI" devices 2>/dev/null | grep -cE '^[0-9]+ ')" = 1 ]; then
        echo "# again on 4 virtual devices over the one GPU (MGI_VIRTUAL_DEVICES=4)"
        for t in "$BUILD"/tests/gpu/test_split "$BUILD"/tests/gpu/test_p2p; do
            [ -x "$t" ] && run_one "$t (virtual)" env MGI_VIRTUAL_DEVICES=4 "$t"
        done
        run_one "tests/gpu/cli.sh (virtual)" env MGI_VIRTUAL_DEVICES=4 bash tests/gpu/cli.sh
    fi
else
    for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && run_one "$t" "$t"; done
    for t in tests/e2e/*.sh; do [ -f "$t" ] && run_one "$t" bash "$t"; done
fi
echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
