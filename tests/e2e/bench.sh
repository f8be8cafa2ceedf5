#!/usr/bin/env bash
# mgi bench end to end on the tiny real model: every output format parses and holds one record per
# test, sweeps give the cartesian product, and bad input is one line on stderr with the right exit
# status. Timings are never checked. --bw skips the bandwidth measurement except in one run.
source "$(dirname "$0")/lib.sh"
F32=$SHARED/models/aidreams260K-f32.gguf
MIXQ=$SHARED/models/aidreams260K-mixq.gguf
if [ ! -f "$F32" ] || [ ! -f "$MIXQ" ]; then echo "SKIP e2e bench: no $F32 (set SHARED)"; exit 0; fi
if ! command -v python3 >/dev/null; then echo "SKIP e2e bench: python3 is needed to parse the output"; exit 0; fi
B=("$MGI" bench -m "$MIXQ" -p 16 -n 8 -r 2)

# md: header, separator, one row per test, the build line; load time on stderr.
"${B[@]}" --bw 10 >"$TMP/md" 2>"$TMP/md.err"
check "bench md exits 0" [ $? -eq 0 ]
check "bench md header" grep -Eq '^\| model +\| +size \| +params \| backend +\| ngl \| threads \| +test \| +t/s \| +median t/s \| +GB/s \| % roofline \|$' "$TMP/md"
check "bench md separator" grep -q '^| -* | -*: |' "$TMP/md"
check "bench md one row per test (pp16, tg8)" [ "$(grep -c '^| llama ' "$TMP/md")" -eq 2 ]
check "bench md rows pp16 and tg8" grep -q ' pp16 | .* tg8 |' <(tr '\n' ' ' <"$TMP/md")
check "bench md tg row has GB/s and % roofline" grep -Eq ' tg8 \| .*\| +[0-9.]+ \| +[0-9.]+% \|$' "$TMP/md"
check "bench md build line" grep -q '^build: ' "$TMP/md"
check "bench load time on stderr" grep -q 'load time = ' "$TMP/md.err"
check "bench stdout holds only the table" [ "$(grep -cv -e '^|' -e '^$' -e '^build: ' "$TMP/md")" -eq 0 ]

# json (the one run that measures the ceiling): an array of records with llama-bench's fields
# and ours.
"${B[@]}" -o json >"$TMP/json" 2>"$TMP/json.err"
check "bench json exits 0" [ $? -eq 0 ]
check "bench json parses" python3 -m json.tool "$TMP/json" >/dev/null
check "bench json fields" python3 - "$TMP/json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
need = ("model_filename model_type model_size model_n_params n_batch n_ubatch n_threads n_gpu_layers "
        "split_mode main_gpu tensor_split n_prompt n_gen n_depth test_time avg_ns stddev_ns avg_ts "
        "stddev_ts samples_ns samples_ts median_ts gbps roofline_pct bw_ceiling_gbps backend build_commit").split()
assert len(r) == 2 and all(k in x for x in r for k in need)
pp, tg = r
assert (pp["n_prompt"], pp["n_gen"], tg["n_prompt"], tg["n_gen"]) == (16, 0, 0, 8)
assert len(tg["samples_ns"]) == 2 and len(tg["samples_ts"]) == 2
assert pp["gbps"] is None and tg["gbps"] > 0 and tg["roofline_pct"] > 0 and tg["bw_ceiling_gbps"] > 0
PY
check "bench measured ceiling on stderr" grep -q 'bandwidth ceiling = ' "$TMP/json.err"

# jsonl: every line a record.
"${B[@]}" --bw 10 -o jsonl >"$TMP/jsonl" 2>/dev/null
check "bench jsonl lines parse" python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2 and all(isinstance(json.loads(l), dict) for l in lines)' "$TMP/jsonl"

# csv: a header and rows with the same column count; the -ts and -sm values recorded.
"${B[@]}" --bw 10 -o csv -ts 3/1 -sm row >"$TMP/csv" 2>/dev/null
check "bench csv columns constant" python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert len(rows) == 3 and len({len(r) for r in rows}) == 1 and rows[0][0] == "build_commit"
h = rows[0]
assert rows[1][h.index("tensor_split")] == "3.00/1.00" and rows[1][h.index("split_mode")] == "row"' "$TMP/csv"

# Sweeps: 2 models x 2 thread counts x 2 depths x (2 pp + 1 tg + 1 pg) = 32 records.
"$MGI" bench -m "$MIXQ,$F32" -p 8,16 -n 4 -pg 8,4 -t 1,2 -d 0,8 -r 2 --bw 10 -o jsonl >"$TMP/sweep" 2>/dev/null
check "bench sweep gives the cartesian product (32 records)" [ "$(wc -l <"$TMP/sweep")" -eq 32 ]
check "bench sweep names depth and pg tests" python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert {x["n_depth"] for x in r} == {0, 8} and {x["n_threads"] for x in r} == {1, 2}
assert sum(1 for x in r if x["n_prompt"] == 8 and x["n_gen"] == 4) == 8' "$TMP/sweep"
"$MGI" bench -m "$MIXQ" -m "$F32" -p 16 -n 0 -d 0,8 -r 2 --bw 10 --no-warmup --progress >"$TMP/md2" 2>"$TMP/md2.err"
check "bench repeated -m, -n 0, depth rows" [ "$(grep -c '^| llama ' "$TMP/md2")" -eq 4 ]
check "bench depth test name" grep -q ' pp16 @ d8 |' "$TMP/md2"
check "bench --progress on stderr" grep -q '^bench 4/4: ' "$TMP/md2.err"

# Bad input.
expect_error "bench unknown flag" 1 "${B[@]}" --bogus
expect_error "bench -r 0" 1 "${B[@]}" -r 0
expect_error "bench -p x" 1 "$MGI" bench -m "$MIXQ" -p x
expect_error "bench -o xml" 1 "${B[@]}" -o xml
expect_error "bench bad -ts" 1 "${B[@]}" -ts 1/x
expect_error "bench -pg not a pair" 1 "${B[@]}" -pg 16
expect_error "bench missing -m" 1 "$MGI" bench -p 16
expect_error "bench test longer than the context" 1 "${B[@]}" -d 120
expect_error "bench missing model file" 2 "$MGI" bench -m "$TMP/nope.gguf" -p 16 -n 8 -r 2
printf 'not a gguf file' >"$TMP/bad.gguf"
expect_error "bench second model bad" 2 "$MGI" bench -m "$MIXQ,$TMP/bad.gguf" -p 16 -n 8 -r 2
"$MGI" bench --help >"$TMP/help" 2>&1
check "bench --help exits 0 and lists -pg" grep -q '^  -pg ' "$TMP/help"
e2e_done
