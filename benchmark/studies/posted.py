# SPDX-License-Identifier: LGPL-2.1-or-later
"""The posted study: a ping-pong while the server keeps N receives posted toward its
client on tags the client never sends (issue 18: "a server with 100,000 posted receives answers
a message in time independent of that number"). The pings are matched past all of them: the
server posts its idle receives first (pingpong --posted N). The target (targets.tsv): the
ping-pong with N posted receives costs at most a set ratio of the one without, for every N,
for tcp and shm.

As in the peers study, the counts are measured in turns, each run a fresh server, in the three
placements (two cores, one core, unpinned), and the table shows medians over the turns, each
placement against its own run with none posted.
"""
from peers import baselines, count_steps, fold_counts, judged_against, summary
from study import Study

METHODS = ("tcp", "shm")
SIZES = (8,)


def measure(runner, method, count, cpus):
    """One run: a fresh pingpong server with count idle receives, then the ping-pong client."""
    a = runner.args
    plan = ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters", str(a.iters * 10)]
    return runner.bmi(method, f"posted {count}", plan, cpus, ["--posted", str(count)])


class Posted(Study):
    name, targets = "posted", ("with-vs-without",)

    def wanted(self, a):
        return any(m in a.methods for m in METHODS)

    def plan(self, runner):
        """{method: {placement: [{count: {bytes: one-way us}}]}}, as the peers study."""
        return [step for m in METHODS if m in runner.args.methods
                for step in count_steps(runner, m, runner.args.posted,
                                        lambda count, cpus, name, m=m: measure(
                                            runner, m, count, cpus))]

    def fold(self, got):
        return fold_counts(got)

    def print_summary(self, result, out):
        print_summary(result, out, self.target["with-vs-without"])

    def markdown(self, result, report):
        return markdown(result, report.fmt, self.target["with-vs-without"])


def print_summary(turns, out, target):
    for m, placements in turns.items():
        refs = baselines(placements)
        for placement, per_placement in placements.items():
            out.write(f"\n== {m} ping-pong beside posted receives, {placement}, median of "
                      f"{len(per_placement)} turns (one-way us; ratio to "
                      f"{judged_against(placement, 'with none posted')}, target "
                      f"{target})\n")
            out.write(f"{'posted':>10} {'8 B':>10} {'ratio':>6}\n")
            for n, per in summary(per_placement, refs[placement]):
                if 8 in per:
                    out.write(f"{n:>10} {per[8][0]:>10.2f} {per[8][1]:>6.2f}\n")
                else:
                    out.write(f"{n:>10} {'-':>10} {'-':>6}\n")


def markdown(turns, fmt, target):
    rounds = max((len(t) for p in turns.values() for t in p.values()), default=0)
    out = ["## Posted receives (posted study)", "",
           f"A ping-pong between the server and one client while the server keeps N receives "
           f"posted toward that client on tags it never sends (`pingpong --posted N`, posted "
           f"before the ping-pong's own), {rounds} turns over all N, a fresh server each run, "
           f"in three placements: pinned one process per core, both pinned to one core, and "
           f"left to the scheduler. One-way us at 8 B: medians over the turns; the ratio is "
           f"the median of the per-turn ratios to the run with none posted in the same "
           f"placement, and for unpinned runs to the slower of the two placed runs with none "
           f"posted of the same turn (as in the peers study). Target: {target} in each "
           f"placement.", "",
           "| method | placement | posted | 8 B (us) | ratio | |",
           "|---|---|---:|---:|---:|---|"]
    for m, placements in turns.items():
        refs = baselines(placements)
        for placement, per_placement in placements.items():
            for n, per in summary(per_placement, refs[placement]):
                if 8 not in per:
                    out.append(f"| {m} | {placement} | {n} | - | - | |")
                    continue
                met = "met" if target.met(per[8][1]) else "**not met**"
                out.append(f"| {m} | {placement} | {n} | {fmt(per[8][0])} | {fmt(per[8][1])} "
                           f"| {met} |")
    return out + [""]
