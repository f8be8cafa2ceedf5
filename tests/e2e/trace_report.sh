#!/usr/bin/env bash
# scripts/trace_report.py on a synthetic MGI_TRACE file (the engine writes real ones only on a
# GPU): two decode steps of three fused layers with random block times drawn fresh each run,
# whose launch count, per-role times and gap between the steps are known by construction.
source "$(dirname "$0")/lib.sh"
if ! command -v python3 >/dev/null; then echo "SKIP e2e trace report: python3 is needed"; exit 0; fi

# Each launch: blocks enter at t, wait at t + 1 us, (matvec: staged at + 2 us, loop end at + 4
# us), end at + D; the next launch starts where this one's last block ended. Step 2's embedding
# enters GAP us after step 1's last end. Expected: 40 launches (2 x (embedding + 3 x (QKV,
# attention, wo, gate/up, SwiGLU, down) + head)), the gap, wo's time from its first entry to its
# last end (D plus the largest block jitter) and attention's summed share.
python3 - "$TMP/trace.txt" "$TMP/want.txt" <<'PY'
import random, sys
r = random.Random()
gap = r.randint(20, 90) * 1000  # ns
dur = {"mv": 9000, "att": 3000, "sw": 1500, "emb": 4000}
lines, t, ends = [], 5_000_000_000, []
jit = 96  # ns of extra end time for the last block (the largest jitter below)
def launch(kind, tag, grid, d):
    global t
    for b in range(grid):
        j = r.randint(0, jit - 1) if b else jit  # block 0 ends last, exactly jit after d
        g = [t + 32 * (b % 4), t + 500, t + 1000, 0, 0, t + d + j]
        if kind == 1:
            g[3], g[4] = t + 2000, t + 4000
        if kind == 2:
            g[4] = t + 2000
        if kind in (3, 4):
            g[1] = 0
        lines.append(" ".join(map(str, [kind, tag, b, b % 132, grid] + g + [x * 2 if x else 0 for x in g])))
    t += d + jit
for step in range(2):
    if step:
        t += gap
    launch(4, "e0", 1, dur["emb"])
    for layer in range(3):
        launch(1, "q%d" % layer, 132, dur["mv"])
        launch(2, "a0", 8, dur["att"])
        launch(1, "o%d" % layer, 132, dur["mv"])
        launch(1, "g%d" % layer, 132, dur["mv"])
        launch(3, "s0", 56, dur["sw"])
        launch(1, "d%d" % layer, 132, dur["mv"])
    launch(1, "h0", 132, dur["mv"])
r.shuffle(lines)  # the engine's file is in slot order, not time order
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
# attention's share: per launch its last wait (t + 1 us) to its last end, 6 launches
open(sys.argv[2], "w").write("%d %.2f %.2f %.1f\n" % (40, gap / 1000, (dur["mv"] + jit) / 1000,
                                                      6 * (dur["att"] + jit - 1000) / 1000))
PY
read -r n_want gap_want mv_want att_want <"$TMP/want.txt"
python3 scripts/trace_report.py "$TMP/trace.txt" >"$TMP/rep.txt" 2>"$TMP/rep.err"
check "trace report exits 0" [ $? -eq 0 ]
check "trace report counts every launch" grep -q "^# [0-9]* records, $n_want launches" "$TMP/rep.txt"
check "trace report one line per launch" [ "$(grep -c '^  [0-9]' "$TMP/rep.txt")" -eq "$n_want" ]
check "trace report the gap before step 2's embedding ($gap_want us)" \
    grep -q "^# embedding launch 20: $gap_want us after" "$TMP/rep.txt"
check "trace report wo's role time ($mv_want us)" \
    grep -Eq "^# matvec \+0 after attention .*launch: first entry->last end $mv_want" "$TMP/rep.txt"
# the anatomy by construction: every launch waits 1 us after the last one's last end; a matvec
# stages 1 us later, ends its loop 2 us after that and its last block 9.096 us after its start
check "trace report a layer's wo: boundary, staging, loop and tail" \
    grep -Eq "^# layer anatomy \+1 matvec +\(6, medians, us\): boundary 1.00, staged 1.00, loop 2.00, tail 5.10" "$TMP/rep.txt"
check "trace report a layer's attention (no staged mark) and SwiGLU (no marks)" sh -c \
    "grep -Eq '^# layer anatomy attention +\(6, .*staged 0.00, loop 1.00, tail 1.10' '$TMP/rep.txt' &&
     grep -Eq '^# layer anatomy \+3 swiglu +\(6, .*boundary 1.00, staged 0.00, loop 0.00, tail 0.60' '$TMP/rep.txt'"
check "trace report attention's summed share ($att_want us)" \
    grep -Eq "^# attention  last wait -> last end, summed: +$att_want us" "$TMP/rep.txt"
python3 scripts/trace_report.py /dev/null >"$TMP/none.txt" 2>&1
check "trace report refuses an empty file" [ $? -ne 0 ]
e2e_done
