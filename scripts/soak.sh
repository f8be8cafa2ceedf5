#!/usr/bin/env bash
# Soak test of mgi batch -o --resume (not part of make test): for MINUTES (default 30) it runs
# rounds of the same requests against a copy of the tiny model, and at a random moment of each
# run does one of: SIGKILL, SIGTERM, SIGINT, truncating the model under its map, a second writer
# on the same -o, a partial line appended to -o (a write cut short), or nothing. Between runs it
# feeds corrupt inputs (mutated request lines, garbage prompt caches). A round ends when a resume
# finishes; then every id must be in -o exactly once and every line must be JSON. Any exit that
# the action does not explain (a crash: 134, 135, 139...) is a failure.
#   usage: scripts/soak.sh [MINUTES]    (MGI=build/mgi SHARED=../shared by default)
set -u
MINUTES=${1:-30}
MGI=$(realpath "${MGI:-build/mgi}")
SHARED=${SHARED:-../shared}
M=$SHARED/models/aidreams260K-f32.gguf
[ -x "$MGI" ] || { echo "soak: no $MGI (make first)"; exit 1; }
[ -f "$M" ] || { echo "soak: no $M (set SHARED)"; exit 1; }
command -v python3 >/dev/null || { echo "soak: python3 is needed"; exit 1; }
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -KILL $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
N_IDS=60
python3 - "$T/req.jsonl" "$N_IDS" <<'PY'
import json, sys
words = ["Once upon a time", "The little dog", "Lily went to", "Tom had a red ball", "One day a bird"]
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        r = {"id": "s%d" % i, "prompt": words[i % 5] + " " * (i % 3), "n_predict": 8 + i % 56}
        if i % 5 == 2: r["ignore_eos"] = True
        if i % 7 == 3: r["temperature"] = 0.8; r["seed"] = i
        if i % 11 == 5: r["prompt"] = "x" * 300        # too long for a sequence: an error line
        if i % 13 == 6: r["top_p"] = 7                  # a bad field: an error line
        f.write(json.dumps(r) + "\n")
PY
end=$(($(date +%s) + MINUTES * 60))
runs=0 rounds=0 failures=0 corrupt=0
declare -A seen_action
fail() { echo "soak: FAIL: $*"; failures=$((failures + 1)); }

# check_round OUT: every id exactly once, every line JSON.
check_round() {
    python3 - "$1" "$N_IDS" <<'PY' || return 1
import json, sys, collections
ids = collections.Counter()
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    ids[json.loads(line)["id"]] += 1
want = {"s%d" % i for i in range(int(sys.argv[2]))}
bad = {k: v for k, v in ids.items() if v != 1}
if set(ids) != want or bad:
    print("missing", sorted(want - set(ids))[:5], "extra", sorted(set(ids) - want)[:5], "repeated", bad)
    sys.exit(1)
PY
}

out=$T/out0.jsonl
cp "$M" "$T/mm.gguf"
while [ "$(date +%s)" -lt "$end" ]; do
    runs=$((runs + 1))
    actions=(kill term int truncate second partial none)
    act=${actions[RANDOM % ${#actions[@]}]}
    seen_action[$act]=$((${seen_action[$act]:-0} + 1))
    np=$((1 + RANDOM % 4))
    "$MGI" batch -m "$T/mm.gguf" -f "$T/req.jsonl" -np $np -o "$out" --resume --log-disable \
        >/dev/null 2>"$T/err" </dev/null &
    PID=$!
    sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
    case $act in
    kill) kill -KILL $PID 2>/dev/null ;;
    term) kill -TERM $PID 2>/dev/null ;;
    int) kill -INT $PID 2>/dev/null ;;
    truncate) truncate -s $((RANDOM * 30)) "$T/mm.gguf" ;;
    second)
        timeout -k 5 60 "$MGI" batch -m "$M" -f "$T/req.jsonl" -o "$out" --resume --log-disable >/dev/null 2>"$T/err2" </dev/null
        rc2=$?
        # refused (3) while the first runs; 0 when the first had finished before it started
        [ $rc2 -eq 3 ] || [ $rc2 -eq 0 ] || fail "run $runs: a second writer exited $rc2: $(head -c 200 "$T/err2")" ;;
    esac
    # bounded wait: a hang is a failure too
    for ((i = 0; i < 1200; i++)); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
    if kill -0 $PID 2>/dev/null; then fail "run $runs ($act): still running after 120 s"; kill -KILL $PID; fi
    wait $PID 2>/dev/null
    rc=$?
    PID=
    case $act:$rc in
    *:0 | kill:137 | term:143 | int:130 | truncate:3 | truncate:2) ;;
    *) fail "run $runs ($act, -np $np): exit $rc: $(head -c 300 "$T/err")" ;;
    esac
    [ "$act" = partial ] && printf '{"id":"s1","text":"cut sho' >>"$out"
    [ "$act" = truncate ] && cp "$M" "$T/mm.gguf"
    if [ "$rc" -eq 0 ] && [ "$act" != partial ]; then
        if ! why=$(check_round "$out"); then fail "round $rounds ($out): $why"; fi
        rounds=$((rounds + 1))
        out=$T/out$rounds.jsonl
    fi
    # A corrupt input between runs: a mutated request file, or garbage as a prompt cache.
    if [ $((RANDOM % 3)) -eq 0 ]; then
        corrupt=$((corrupt + 1))
        python3 - "$T/req.jsonl" "$T/bad.jsonl" "$RANDOM" <<'PY'
import random, sys
random.seed(int(sys.argv[3]))
b = bytearray(open(sys.argv[1], "rb").read())
for _ in range(random.randint(1, 40)):
    b[random.randrange(len(b))] = random.choice(b'\x00\xff{}[]":,\\\n\xef\xbb\xbfa0')
open(sys.argv[2], "wb").write(bytes(b))
PY
        timeout -k 5 120 "$MGI" batch -m "$M" -f "$T/bad.jsonl" -n 4 -np 2 --log-disable >/dev/null 2>"$T/err3" </dev/null
        rc3=$?
        [ $rc3 -eq 0 ] || [ $rc3 -eq 2 ] || fail "corrupt requests: exit $rc3: $(head -c 200 "$T/err3")"
        head -c $((RANDOM % 5000)) /dev/urandom >"$T/pc.bin"
        timeout -k 5 60 "$MGI" -m "$M" -p "Once upon a time" -n 4 --prompt-cache "$T/pc.bin" --log-disable \
            >/dev/null 2>"$T/err4" </dev/null
        rc4=$?
        [ $rc4 -eq 0 ] || fail "garbage prompt cache: exit $rc4: $(head -c 200 "$T/err4")"
    fi
done
# The last round finished by a resume on the intact model.
timeout -k 5 300 "$MGI" batch -m "$M" -f "$T/req.jsonl" -o "$out" --resume --log-disable >/dev/null 2>"$T/err" </dev/null ||
    fail "final resume: exit $?: $(head -c 200 "$T/err")"
why=$(check_round "$out") || fail "final round: $why"
acts=$(for k in "${!seen_action[@]}"; do printf '%s=%s ' "$k" "${seen_action[$k]}"; done)
echo "soak: $MINUTES min, $runs runs ($acts), $((rounds + 1)) rounds of $N_IDS ids each exactly once, $corrupt corrupt inputs, $failures failures"
[ "$failures" -eq 0 ]
