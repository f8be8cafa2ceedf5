# Helpers for the end-to-end shell tests (sourced). $MGI is the binary, $SHARED the shared data.
# Each check prints "PASS name" or "FAIL name: why", the protocol tests/run.sh counts.
MGI=${MGI:-build/mgi}
SHARED=${SHARED:-../shared}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
e2e_failed=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; e2e_failed=1; }
check() {  # name, condition-command... : passes when the command succeeds
    local name=$1; shift
    if "$@"; then pass "$name"; else fail "$name" "'$*' did not hold"; fi
}

# expect_error NAME CODE CMD...: CMD exits with CODE (or any non-zero code when CODE is "nz"),
# prints exactly one line on stderr starting "mgi: ", and nothing on stdout.
expect_error() {
    local name=$1 code=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    local rc=$? lines
    lines=$(wc -l <"$TMP/err")
    if [ "$code" = nz ] && [ "$rc" -eq 0 ]; then fail "$name" "exit 0, expected an error"; return; fi
    if [ "$code" != nz ] && [ "$rc" -ne "$code" ]; then
        fail "$name" "exit $rc, expected $code (stderr: $(head -c 300 "$TMP/err"))"; return
    fi
    if [ "$rc" -ge 128 ]; then fail "$name" "killed by a signal (exit $rc)"; return; fi
    if [ "$lines" -ne 1 ] || ! grep -q '^mgi: ' "$TMP/err"; then
        fail "$name" "stderr should be one 'mgi: ' line, got $lines: $(head -c 300 "$TMP/err")"; return
    fi
    if [ -s "$TMP/out" ]; then fail "$name" "stdout not empty: $(head -c 200 "$TMP/out")"; return; fi
    pass "$name ($(cat "$TMP/err"))"
}

e2e_done() { exit $e2e_failed; }

# real_models: makes sure the two real trained models of ../shared/tools/fetch_real_models.sh are
# in $REAL_DIR (default models-real/ at the top of the tree, git-ignored; fetched once, ~20 s,
# sha256-checked) and sets SMOLLM and GEMMA3 to their paths. A failed fetch is a FAIL, not a SKIP:
# the checks on real files are part of the suite.
real_models() {
    REAL_DIR=${REAL_DIR:-models-real}
    if ! "$SHARED/tools/fetch_real_models.sh" "$REAL_DIR" >"$TMP/fetch.out" 2>"$TMP/fetch.err"; then
        fail "real models" "fetch_real_models.sh $REAL_DIR failed: $(tail -c 300 "$TMP/fetch.err")"
        return 1
    fi
    SMOLLM=$REAL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
    GEMMA3=$REAL_DIR/gemma-3-270m-q4_k_m.gguf
}

# real_models for the GPU tests: a GPU machine may have no network (and the models are too large
# to travel with the tree), so there a failed fetch is a SKIP; the CPU suite, which CI runs, keeps
# real_models' failure.
real_models_or_skip() {
    REAL_DIR=${REAL_DIR:-models-real}
    if ! "$SHARED/tools/fetch_real_models.sh" "$REAL_DIR" >"$TMP/fetch.out" 2>"$TMP/fetch.err"; then
        echo "SKIP $1: the real models are not here and could not be fetched ($(tail -c 120 "$TMP/fetch.err" | tr '\n' ' '))"
        return 1
    fi
    SMOLLM=$REAL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
    GEMMA3=$REAL_DIR/gemma-3-270m-q4_k_m.gguf
}
