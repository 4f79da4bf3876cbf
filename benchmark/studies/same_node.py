# SPDX-License-Identifier: LGPL-2.1-or-later
"""The same-node study (issue 41, item 3): a tcp lookup of a libbmi server on this node, which
libbmi carries over shm (doc/architecture.md, "Same-node peers"), against the same ping-pong
looked up by the server's shm name, at 8 B and 1 MiB, in the three placements, in turns.
Target (targets.tsv): the tcp-addressed one-way time at most a set ratio of the shm-addressed
one at each size, in each placement.

The tcp-addressed runs turn same_node_shm back on (bmi-perf turns it off for everything else)
and make the client print shm's statistics: a run whose client printed none stayed on tcp, and
counts as failed.
"""
import statistics

from bmi_perf_runs import Step, one_way_us
from study import Study, in_turns, three_placements

ROUNDS = 5
SIZES = (8, 1 << 20)
SHM, CARRIED = "shm", "tcp-same-node"
TARGETS = {8: "vs-shm-8B", 1 << 20: "vs-shm-1MiB"}
LABELS = {8: "8 B", 1 << 20: "1 MiB"}


class SameNode(Study):
    name = "same-node"
    targets = tuple(TARGETS.values())

    def wanted(self, a):
        return "tcp" in a.methods and "shm" in a.methods

    def plan(self, runner):
        """Per turn, placement and size: the shm address, then the tcp one (order alternating
        by turn)."""
        steps = []
        for turn in range(ROUNDS):
            for placement, cpus in three_placements(runner):
                for size in SIZES:
                    runs = [(m, lambda m=m, size=size, cpus=cpus: measure(runner, m, size, cpus))
                            for m in (SHM, CARRIED)]
                    steps += [Step((turn, placement, size, m), thunk)
                              for m, thunk in in_turns(turn, runs)]
        return steps

    def fold(self, got):
        """{(placement, size): [{method: one-way us}]} one dict per turn, and the number of
        tcp-addressed runs that stayed on tcp."""
        turns, on_tcp = {}, 0
        for (turn, placement, size, m), s in got:
            per = turns.setdefault((placement, size), [])
            while len(per) <= turn:
                per.append({})
            if s.status != "ok" or not s.at(size):
                continue
            if m == CARRIED and s.shm_clients == 0:
                on_tcp += 1
                continue
            per[turn][m] = one_way_us(s.at(size))
        return turns, on_tcp

    def rows(self, result):
        """[(placement, size, median shm us, median carried us, median ratio, turns, Target)]."""
        turns, _ = result
        rows = []
        for (placement, size), per in turns.items():
            both = [(t[SHM], t[CARRIED]) for t in per if SHM in t and CARRIED in t]
            if both:
                rows.append((placement, size, statistics.median(a for a, _ in both),
                             statistics.median(b for _, b in both),
                             statistics.median(b / a for a, b in both), len(both),
                             self.target[TARGETS[size]]))
        return rows

    def print_summary(self, result, out):
        out.write("\n== same node: tcp address carried over shm against the shm address, "
                  "runs in turns (one-way us; ratio tcp / shm, median of per-turn ratios)\n")
        out.write(f"{'placement':<10} {'size':>6} {'shm':>9} {'tcp':>9} {'ratio':>6} "
                  f"{'target':>8}\n")
        for placement, size, shm, carried, ratio, _, target in self.rows(result):
            out.write(f"{placement:<10} {LABELS[size]:>6} {shm:>9.3f} {carried:>9.3f} "
                      f"{ratio:>6.2f} {str(target):>8}\n")
        if result[1]:
            out.write(f"{result[1]} tcp-addressed runs stayed on tcp (left out)\n")

    def markdown(self, result, report):
        fmt = report.fmt
        out = ["## Same-node peers (same-node study)", "",
               f"A ping-pong whose client looks the server up by its tcp address, which libbmi "
               f"carries over shm because both are on this node (`same_node_shm`, "
               f"doc/architecture.md), against the same ping-pong looked up by the server's shm "
               f"name: {ROUNDS} turns, the order reversed every other turn, a fresh server each "
               f"run, in three placements, `BMI_memalloc` buffers. One-way us: medians over the "
               f"turns; the ratio is the median of the per-turn ratios tcp / shm. A tcp run "
               f"counts only if its client's shm method ran.", "",
               "| placement | size | shm address (us) | tcp address (us) | ratio | target | "
               "turns | |", "|---|---|---:|---:|---:|---:|---:|---|"]
        rows = self.rows(result)
        for placement, size, shm, carried, ratio, n, target in rows:
            met = "met" if target.met(ratio) else "**not met**"
            out.append(f"| {placement} | {LABELS[size]} | {fmt(shm)} | {fmt(carried)} | "
                       f"{fmt(ratio)} | {target} | {n} | {met} |")
        if not rows:
            out.append("| - | - | - | - | - | - | 0 | no turn measured both |")
        if result[1]:
            out += ["", f"{result[1]} tcp-addressed runs stayed on tcp and are left out."]
        return out + [""]


def measure(runner, method, size, cpus):
    iters = runner.args.iters * (10 if size <= 4096 else 1)
    plan = ["--min", str(size), "--max", str(size), "--iters", str(iters)]
    return runner.bmi(method, "same-node", plan, cpus)
