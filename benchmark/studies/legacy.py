# SPDX-License-Identifier: LGPL-2.1-or-later
"""The legacy study: bmi_tcp on the legacy framing OrangeFS speaks (BMI_TCP_LEGACY=1 on
both ends) against libbmi's own v2 framing, ping-pong at every size of the plan, in runs taken
in turns, as ratios legacy / v2 (issue 14 item 3: legacy at least as fast as v2 at every size).

Why turns and medians: single tcp runs on a shared 2-vCPU VM scatter by up to 1.7x (1 MiB:
1.07-1.83 ms in pinned runs minutes apart); a ratio taken from two runs a second apart sees
one machine, and the median of several such ratios is what a table can state.
"""
import statistics

from bmi_perf_runs import LEGACY_MAX, Step, one_way_us
from study import Study, in_turns

ROUNDS = 5  # turns; each runs both framings once
# Medians of pinned runs in turns still move by a few percent between whole duels (seen:
# 0.98-1.02 at sizes where both framings write the same bytes): closer to 1 than this is no
# finding either way.
NOISE = 0.05


class Legacy(Study):
    name, by_default, targets = "legacy", True, ("legacy-vs-v2",)

    def wanted(self, a):
        return "tcp-legacy" in a.methods and "latency" in a.modes

    def plan(self, runner):
        """Both framings once per turn, pinned one process per core as every table run."""
        plan = runner.plan("latency", largest=LEGACY_MAX)
        cpus = runner.one_per_core()
        return [Step((turn, method), lambda m=method: runner.bmi(m, "legacy duel", plan, cpus))
                for turn in range(ROUNDS) for method in in_turns(turn, ("tcp", "tcp-legacy"))]

    def fold(self, got):
        """[{bytes: (v2 us, legacy us)}] one per turn."""
        turns = {}
        for (turn, method), s in got:
            turns.setdefault(turn, {})[method] = \
                {r[0]: one_way_us(r) for r in s.rows} if s.status == "ok" else {}
        return [{size: (us, t["tcp-legacy"][size]) for size, us in t["tcp"].items()
                 if size in t["tcp-legacy"]} for t in turns.values()]

    def print_summary(self, turns, out):
        print_summary(turns, out)

    def markdown(self, turns, report):
        return markdown(turns, report.fmt, self.target["legacy-vs-v2"])


def summary(turns):
    """[(bytes, median v2 us, median legacy us, median of the per-turn ratios, turns)]."""
    rows = []
    for size in sorted({size for t in turns for size in t}):
        pairs = [t[size] for t in turns if size in t and t[size][0] > 0]
        if pairs:
            rows.append((size, statistics.median(p[0] for p in pairs),
                         statistics.median(p[1] for p in pairs),
                         statistics.median(p[1] / p[0] for p in pairs), len(pairs)))
    return rows


def print_summary(turns, out):
    rows = summary(turns)
    if not rows:
        out.write("\ntcp legacy duel: no size measured by both framings\n")
        return
    out.write(f"\n== tcp legacy framing vs v2, ping-pong, median of {len(turns)} turns "
              "(one-way us)\n")
    out.write(f"{'bytes':>12} {'v2':>12} {'legacy':>12} {'legacy/v2':>10}\n")
    for size, v2, legacy, ratio, _ in rows:
        out.write(f"{size:>12} {v2:>12.2f} {legacy:>12.2f} {ratio:>10.3f}\n")


def verdict(ratio, target):
    if target.met(ratio):
        return "met"
    return "within noise" if ratio <= target.limit + NOISE else "**not met**"


def markdown(turns, fmt, target):
    """The report's section, as a list of lines."""
    rows = summary(turns)
    out = ["## tcp legacy framing against libbmi's own (legacy duel)", "",
           f"bmi_tcp with `BMI_TCP_LEGACY=1` on both ends (OrangeFS's 24-byte framing: EAGER up "
           f"to 16 KiB, REND with the payload behind the header) against the same pair on v2 "
           f"framing (EAGER up to 64 KiB, RTS/CTS and 1 MiB DATA chunks above), ping-pong, "
           f"{len(turns)} turns, each running both (the first one alternating), pinned one "
           f"process per core. One-way us: medians over the turns; the ratio is the median of "
           f"the per-turn ratios legacy / v2 (below 1: legacy is faster). Target: "
           f"{target} at every size; up to {target.limit + NOISE:g} is within the scatter of "
           f"whole duels.", ""]
    if not rows:
        return out + ["No size was measured by both framings.", ""]
    out += ["| bytes | v2 (us) | legacy (us) | legacy / v2 | turns | |",
            "|---:|---:|---:|---:|---:|---|"]
    for size, v2, legacy, ratio, n in rows:
        out.append(f"| {size} | {fmt(v2)} | {fmt(legacy)} | {fmt(ratio)} | {n} | "
                   f"{verdict(ratio, target)} |")
    worst = max(rows, key=lambda r: r[3])
    out += ["", f"Worst size: {worst[0]} B at {fmt(worst[3])}.", ""]
    return out
