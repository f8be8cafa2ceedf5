#!/usr/bin/env python3
"""Summarises an MGI_TRACE file (engine/cuda_step.c: decode steps' block timeline, one
line per block: kind tag block smid grid, %globaltimer at marks 0-5, clock64 at marks 0-5).

Usage: scripts/trace_report.py TRACE [--layers N]

Prints, per launch in the step's order, when its blocks reached each mark (microseconds from the
step's first mark): first/last entry, first/last return from the PDL wait, last X staged, first/
last end of the main loop, last end. Then the step's totals: the time between one launch's last
block leaving its main loop and the next launch's last block passing its wait (what the chain
costs at each boundary), each kind's share of the step, and a layer's anatomy: launch by launch
from its attention, the medians of boundary, staging, main loop and tail of the last blocks.

Times: %globaltimer where it ticks finely enough, else each SM's clock64 (converted with a clock
rate and an offset per SM fitted from the records' globaltimer marks)."""
import sys
from collections import defaultdict

KIND = {1: "matvec", 2: "attention", 3: "swiglu", 4: "embed", 5: "gate"}
MATVEC_MARKS = ("entry", "issued", "waited", "staged", "loop", "end")


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            v = line.split()
            if len(v) != 17:
                continue
            r = {"kind": int(v[0]), "tag": v[1], "block": int(v[2]), "sm": int(v[3]), "grid": int(v[4]),
                 "g": [int(x) for x in v[5:11]], "c": [int(x) for x in v[11:17]]}
            recs.append(r)
    return recs


def timebase(recs):
    """Per-record times in ns (None where a mark is absent): globaltimer if its tick is below
    200 ns, else clock64 per SM fitted to globaltimer."""
    gs = sorted({x for r in recs for x in r["g"] if x})
    steps = [b - a for a, b in zip(gs, gs[1:]) if b > a]
    tick = min(steps) if steps else 0
    if tick and tick < 200:
        for r in recs:
            r["t"] = [x if x else None for x in r["g"]]
        return "globaltimer (tick %d ns)" % tick
    # clock rate: the median over records of (g5 - g0) / (c5 - c0) over long spans
    rates = []
    for r in recs:
        i = [j for j in range(6) if r["g"][j]]
        if len(i) >= 2 and r["g"][i[-1]] - r["g"][i[0]] > 20 * tick:
            rates.append((r["c"][i[-1]] - r["c"][i[0]]) / (r["g"][i[-1]] - r["g"][i[0]]))
    rates.sort()
    ghz = rates[len(rates) // 2] if rates else 1.98
    off = defaultdict(list)
    for r in recs:
        for j in range(6):
            if r["g"][j]:
                off[r["sm"]].append(r["g"][j] - r["c"][j] / ghz)
    base = {sm: sorted(v)[len(v) // 2] for sm, v in off.items()}
    for r in recs:
        r["t"] = [r["c"][j] / ghz + base[r["sm"]] if r["g"][j] else None for j in range(6)]
    return "clock64 at %.3f GHz aligned per SM (globaltimer tick %d ns)" % (ghz, tick)


def launches(recs):
    """Records grouped into launches: by kind and tag, in entry order, a new launch whenever a
    block index repeats."""
    by = defaultdict(list)
    for r in recs:
        by[(r["kind"], r["tag"])].append(r)
    out = []
    for key, rs in by.items():
        rs.sort(key=lambda r: r["t"][0])
        cur, seen = [], set()
        for r in rs:
            if r["block"] in seen:
                out.append(cur)
                cur, seen = [], set()
            cur.append(r)
            seen.add(r["block"])
        if cur:
            out.append(cur)
    out.sort(key=lambda l: min(r["t"][0] for r in l))
    return out


def stat(l, j, f):
    v = [r["t"][j] for r in l if r["t"][j] is not None]
    return f(v) if v else None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    recs = load(sys.argv[1])
    if not recs:
        sys.exit("trace_report: no records in %s" % sys.argv[1])
    how = timebase(recs)
    ls = launches(recs)
    t0 = min(r["t"][0] for r in recs)
    us = lambda x: "%8.2f" % ((x - t0) / 1e3) if x is not None else "       -"
    print("# %d records, %d launches; times in us from the step's first entry; %s" % (len(recs), len(ls), how))
    print("# %-4s %-10s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s" % (
        "n", "kind", "blocks", "entry0", "entryN", "issuedN", "wait0", "waitN", "stagedN", "loop0", "loopN", "endN"))
    tags = {}
    for i, l in enumerate(ls):
        k = l[0]["kind"]
        name = KIND.get(k, str(k))
        if k == 1:
            tags.setdefault(l[0]["tag"], len(tags))
            name += "#%d" % tags[l[0]["tag"]]
        print("  %-4d %-10s %6d %s %s %s %s %s %s %s %s %s" % (
            i, name[:10], len(l), us(stat(l, 0, min)), us(stat(l, 0, max)), us(stat(l, 1, max)), us(stat(l, 2, min)),
            us(stat(l, 2, max)), us(stat(l, 3, max)), us(stat(l, 4, min)), us(stat(l, 4, max)), us(stat(l, 5, max))))
    # between steps: the last end before each embedding launch (the previous step's head) -> its
    # first entry: the host's turn (the step's end seen, the next step launched)
    for i, l in enumerate(ls):
        if l[0]["kind"] == 5 and i > 0:
            prev = max(stat(x, 5, max) or 0 for x in ls[:i])
            print("# gate %d: entered %.2f us after the last end before it, opened %.2f us after, ended %.2f us after" % (
                i, (stat(l, 0, min) - prev) / 1e3, (stat(l, 2, min) - prev) / 1e3, (stat(l, 5, max) - prev) / 1e3))
        if l[0]["kind"] == 4 and i > 0:
            prev = max(stat(x, 5, max) or 0 for x in ls[:i])
            print("# embedding launch %d: %.2f us after the last end before it (the previous step's last kernel)" % (
                i, (stat(l, 0, min) - prev) / 1e3))
    # boundaries: launch i's last loop end (or end) to launch i+1's last wait
    share = defaultdict(float)
    gaps = defaultdict(list)
    for a, b in zip(ls, ls[1:]):
        ea = stat(a, 4, max) or stat(a, 5, max)
        wb = stat(b, 2, max)
        if ea is not None and wb is not None:
            gaps[(KIND.get(a[0]["kind"]), KIND.get(b[0]["kind"]))].append(wb - ea)
    for l in ls:
        w, e = stat(l, 2, max), stat(l, 5, max)
        if w is not None and e is not None:
            share[KIND.get(l[0]["kind"])] += e - w
    step = max(stat(l, 5, max) or 0 for l in ls) - t0
    print("# step %.1f us" % (step / 1e3))
    for k, v in sorted(share.items()):
        print("# %-10s last wait -> last end, summed: %8.1f us (%.0f%%)" % (k, v / 1e3, 100 * v / step))
    for (a, b), v in sorted(gaps.items()):
        v.sort()
        print("# %s -> %s: %d boundaries, last loop end -> next's last wait: median %.2f us, sum %.1f us" % (
            a, b, len(v), v[len(v) // 2] / 1e3, sum(v) / 1e3))
    # matvec phases by role: the k-th matvec launch after an attention launch (k = 0 wo, 1 gate/up,
    # 2 down, 3.. the next layer's QKV in a fused llama layer); medians over the step's blocks
    ph = defaultdict(lambda: defaultdict(list))
    k = None
    for l in ls:
        if l[0]["kind"] == 2:
            k = 0
            continue
        if l[0]["kind"] != 1 or k is None:
            continue
        for r in l:
            t = r["t"]
            if None in (t[0], t[2], t[3], t[4], t[5]):
                continue
            d = ph[k]
            d["entry->waited"].append(t[2] - t[0])
            d["waited->staged"].append(t[3] - t[2])
            d["staged->loop"].append(t[4] - t[3])
            d["loop->end"].append(t[5] - t[4])
        d = ph[k]
        d["launch: first entry->last end"].append(stat(l, 5, max) - stat(l, 0, min))
        d["launch: last wait->last loop"].append(stat(l, 4, max) - stat(l, 2, max))
        d["launch: loop ends spread"].append(stat(l, 4, max) - stat(l, 4, min))
        k += 1
    for k in sorted(ph):
        print("# matvec +%d after attention (medians, us): %s" % (k, ", ".join(
            "%s %.2f" % (n, sorted(v)[len(v) // 2] / 1e3) for n, v in ph[k].items())))
    # a layer's anatomy, launch by launch from its attention (the k-th matvec or SwiGLU launch after
    # it), medians over the step's layers of the last blocks' times: boundary (the launch before's
    # last end -> this one's last wait), staged (-> its last X staged, or Q ready), loop (-> its
    # last main-loop end), tail (-> its last end); a mark a kind lacks adds 0
    an, order, k = defaultdict(lambda: defaultdict(list)), [], None
    for p, l in zip(ls, ls[1:]):
        kind = l[0]["kind"]
        if kind == 2:
            k = 0
        elif kind in (1, 3) and k is not None:
            k += 1
        else:
            k = None  # embedding, gate: between steps
            continue
        role = "attention" if k == 0 else "+%d %s" % (k, KIND[kind])
        pe, w, e = stat(p, 5, max), stat(l, 2, max), stat(l, 5, max)
        if None in (pe, w, e):
            continue
        s = stat(l, 3, max) or w
        lp = stat(l, 4, max) or s
        if role not in an:
            order.append(role)
        for n, v in (("boundary", w - pe), ("staged", s - w), ("loop", lp - s), ("tail", e - lp)):
            an[role][n].append(v)
    for role in order:
        d = an[role]
        print("# layer anatomy %-11s (%d, medians, us): %s" % (role, len(d["tail"]), ", ".join(
            "%s %.2f" % (n, sorted(v)[len(v) // 2] / 1e3) for n, v in d.items())))


if __name__ == "__main__":
    main()
