#!/usr/bin/env bash
# Batch throughput of `mgi batch` on one model (the batch issue's table): for -np 1, 8, 32, 64
# (or the list given), 2 x np requests (at least 8) of ~128-token prompts generating 128 tokens
# each (greedy, --ignore-eos), with no system prompt and with a shared ~512-token one. Prints one
# markdown row per run: np, system prompt, requests, generated tokens, wall seconds, aggregate
# generated t/s (the model load included), the same after the load, prompt tokens evaluated /
# reused, and the speeds of the steps that only decode and of those that only evaluate prompts
# (llama.cpp's batched-bench reports these two apart). REQ_MULT (default 2) requests per slot;
# 1 is batched-bench's workload (every sequence starts at once). Extra mgi flags come from
# $BATCH_FLAGS.
# Usage: MGI=build/mgi scripts/gpu_batch.sh MODEL [np...]
set -u
MGI=${MGI:-build/mgi}
model=$1; shift
nps=${*:-1 8 32 64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Deterministic pseudo-random English words: prompts of 100 words (~128 tokens with a Llama
# vocabulary), a system prompt of 400 words (~512 tokens); checked with mgi tokenize below.
python3 - "$tmp" <<'PY'
import json, random, sys
words = ("the a little big dog cat bird ran jumped over under hill tree house garden sun moon was were "
         "bright happy sad girl boy mother father friend played found lost red blue green small old new "
         "river boat road town village morning night day because then when after before with without "
         "and but so very quite slowly quickly together alone water fire stone book letter song story").split()
r = random.Random(7)
with open(sys.argv[1] + "/prompts.jsonl", "w") as f:
    for i in range(256):
        f.write(json.dumps({"id": i, "prompt": " ".join(r.choice(words) for _ in range(100))}) + "\n")
with open(sys.argv[1] + "/system.txt", "w") as f:
    f.write(" ".join(r.choice(words) for _ in range(400)) + "\n")
PY
ptok=$(head -1 "$tmp/prompts.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt"])' |
       "$MGI" tokenize -m "$model" --ids --stdin 2>/dev/null | tr -cd ',' | wc -c)
stok=$("$MGI" tokenize -m "$model" --ids -f "$tmp/system.txt" 2>/dev/null | tr -cd ',' | wc -c)
echo "prompt ~$((ptok + 1)) tokens, system prompt ~$((stok + 1)) tokens"
echo "| np | system prompt | requests | generated | wall s | aggregate t/s | after load t/s | prompt evaluated / reused | decode-only t/s (ms/step) | prompt-only t/s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for sys in none 512; do
    for np in $nps; do
        n=$((${REQ_MULT:-2} * np)); [ $n -lt 8 ] && [ "${REQ_MULT:-2}" != 1 ] && n=8
        head -$n "$tmp/prompts.jsonl" >"$tmp/req.jsonl"
        extra=()
        [ $sys = 512 ] && extra=(--system-prompt-file "$tmp/system.txt")
        # shellcheck disable=SC2086
        timeout 300 "$MGI" batch -m "$model" -f "$tmp/req.jsonl" -np "$np" -n 128 --temp 0 --ignore-eos \
            -c $((np * 1024)) "${extra[@]}" ${BATCH_FLAGS:-} -o "$tmp/out.jsonl" 2>"$tmp/err.txt"
        rc=$?
        line=$(grep "tokens generated in" "$tmp/err.txt")
        if [ $rc -ne 0 ] || [ -z "$line" ]; then
            echo "| $np | $sys | $n | exit $rc: $(grep -m1 'mgi:' "$tmp/err.txt") | | | |"
        else
            dec=$(grep "decode-only steps" "$tmp/err.txt" | sed -E 's/.*\(([0-9.]+) t\/s, ([0-9.]+) ms per step\).*/\1 (\2)/')
            pp=$(grep "prompt-only steps" "$tmp/err.txt" | sed -E 's/.*\(([0-9.]+) t\/s\).*/\1/')
            echo "$line" | sed -E "s/.*prompt tokens: ([0-9]+) evaluated, ([0-9]+) reused; ([0-9]+) tokens generated in ([0-9.]+) s \(([0-9.]+) t\/s aggregate.*; ([0-9.]+) t\/s in the .*/| $np | $sys | $n | \3 | \4 | \5 | \6 | \1 \/ \2 | ${dec:-} | ${pp:-} |/"
        fi
        rm -f "$tmp/out.jsonl"
    done
done
