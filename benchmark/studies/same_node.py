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
from bmi_perf_runs import one_way_us
from study import Study, duel_plan, duel_rows, duel_turns

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
        """Per turn, placement and size up to --max: the shm address and the tcp one, in
        turns."""
        return duel_plan(runner, ROUNDS, SIZES, (SHM, CARRIED),
                         lambda m, size, cpus, _: measure(runner, m, size, cpus))

    def fold(self, got):
        """{(placement, size): [{method: one-way us}]} one dict per turn, and the number of
        tcp-addressed runs that stayed on tcp."""
        on_tcp = 0

        def figure(m, s, size):
            nonlocal on_tcp
            if m == CARRIED and s.shm_clients == 0:
                on_tcp += 1
                return None
            return one_way_us(s.at(size))
        turns = duel_turns(got, figure)
        return turns, on_tcp

    def rows(self, result):
        """[(placement, size, median shm us, median carried us, median ratio, turns, Target)]."""
        return [row + (self.target[TARGETS[row[1]]],)
                for row in duel_rows(result[0], SHM, CARRIED, lambda _, a, b: b / a)]

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
