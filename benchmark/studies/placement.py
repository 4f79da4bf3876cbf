# SPDX-License-Identifier: LGPL-2.1-or-later
"""The placement study: the small-message targets of issue 18 in the three placements
users meet, each judged against its own reference in runs taken in turns.

- two cores (server and client pinned one per core): tcp against a raw TCP ping-pong that
  polls (`raw_tcp_pingpong --poll`); shm against Open MPI vader (mpirun binds its ranks one
  per core).
- one core (both pinned to the same core): tcp against a raw TCP ping-pong that sleeps in
  read(), shm against the eventfd ping-pong. With no spare core, waiting must not spin, so
  the reference is the best a sleeping process does.
- unpinned (left to the scheduler): at most the slower of the same turn's two placed figures
  of libbmi itself.

Why turns: on a shared VM one run of an 8-byte ping-pong scatters by 5-10 % and a sleeping
one is bimodal; runs seconds apart see the same machine, and the median over the turns of the
per-turn ratios is what a table can state. The order of the runs reverses every other turn,
so a machine that drifts during a turn favours nobody.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, Step, one_way_us
from study import UNPINNED, Study, in_turns, three_placements

ROUNDS = 5
SIZE = 8
METHODS = ("tcp", "shm")
PLACED = ("two cores", "one core")
# (method, placement) -> (reference name, its row in targets.tsv)
REFERENCES = {
    ("tcp", "two cores"): ("raw tcp, polling", "tcp-two-cores"),
    ("tcp", "one core"): ("raw tcp, blocking", "tcp-one-core"),
    ("shm", "two cores"): (MPI_NAMES["mpi-shm"], "shm-two-cores"),
    ("shm", "one core"): ("eventfd", "shm-one-core"),
}
UNPINNED_REFERENCE = "the slower placed figure"
# Measured beside a reference, not judged: the same ping-pong sleeping as libbmi sleeps
# (epoll_wait on a set), which says how much of a gap is the wait itself.
CONTEXT = {("shm", "one core"): "eventfd, epoll_wait"}


class Placement(Study):
    name = "placement"
    targets = tuple(t for _, t in REFERENCES.values()) + ("unpinned",)

    def wanted(self, a):
        return any(m in a.methods for m in METHODS)

    def plan(self, runner):
        """Per turn and method: libbmi in the three placements and its references."""
        plan = ["--min", str(SIZE), "--max", str(SIZE), "--iters", str(runner.args.iters * 10)]
        return [Step((m, turn, name, placement), thunk) for turn in range(ROUNDS)
                for m in METHODS if m in runner.args.methods
                for name, placement, thunk in in_turns(turn, runs_for(runner, m, plan))]

    def fold(self, got):
        """{method: [{(name, placement): one-way us}]} one dict per turn; a run that failed is
        missing from its turn."""
        turns = {}
        for (m, turn, name, placement), s in got:
            per = turns.setdefault(m, [])
            while len(per) <= turn:
                per.append({})
            if s.status == "ok" and s.at(SIZE):
                per[turn][(name, placement)] = one_way_us(s.at(SIZE))
        return turns

    def print_summary(self, result, out):
        print_summary(summary(result, self.target), out)
        for m, p, name, mine, theirs, ratio, _ in context(result):
            out.write(f"{m:<6} {p:<10} {mine:>9.3f} {name:<26} {theirs:>9.3f} {ratio:>6.2f} "
                      f"{'(context)':>6}\n")

    def markdown(self, result, report):
        return markdown(result, summary(result, self.target), report.fmt)


def runs_for(runner, method, plan):
    """[(name, placement, thunk)]: libbmi in the three placements and the two references."""
    cpus, baselines = dict(runner.placements()), runner.args.baselines
    two, one = cpus.get("two cores"), cpus["one core"]
    runs = [(f"bmi {method}", p, (lambda c=c: runner.bmi(method, "placement", plan, c)))
            for p, c in three_placements(runner)]
    if method == "tcp" and "raw-tcp" in baselines:
        if two:
            runs.append(("raw tcp, polling", "two cores", lambda: runner.pair(
                "raw tcp poll", "placement", "raw_tcp_pingpong", ["--poll"],
                "tcp://127.0.0.1:0", None, plan, two)))
        runs.append(("raw tcp, blocking", "one core", lambda: runner.pair(
            "raw tcp", "placement", "raw_tcp_pingpong", [], "tcp://127.0.0.1:0", None, plan,
            one)))
    if method == "shm" and two and "mpi-shm" in baselines:
        runs.append((MPI_NAMES["mpi-shm"], "two cores",
                     lambda: runner.mpi("mpi-shm", "placement", plan)))
    if method == "shm" and "eventfd" in baselines:
        runs.append(("eventfd", "one core", lambda: runner.eventfd("placement", plan, one)))
        runs.append((CONTEXT[("shm", "one core")], "one core",
                     lambda: runner.eventfd("placement", plan, one, epoll=True)))
    return runs


def reference_us(turn, method, placement):
    """The reference's one-way us in one turn (unpinned: libbmi's slower placed figure), or
    None where a run is missing."""
    if placement != UNPINNED:
        return turn.get((REFERENCES[(method, placement)][0], placement))
    placed = [turn.get((f"bmi {method}", p)) for p in PLACED]
    return max(placed) if all(placed) else None


def summary(turns, targets):
    """[(method, placement, reference, Target, median bmi us, median ref us, median ratio,
    turns)] for every (method, placement) measured; targets: the study's."""
    rows = []
    for m, per in turns.items():
        for placement in PLACED + (UNPINNED,):
            ref_name, target = (REFERENCES[(m, placement)] if placement != UNPINNED
                                else (UNPINNED_REFERENCE, "unpinned"))
            target = targets[target]
            mine = [t.get((f"bmi {m}", placement)) for t in per]
            refs = [reference_us(t, m, placement) for t in per]
            both = [(a, b) for a, b in zip(mine, refs) if a and b]
            if both:
                rows.append((m, placement, ref_name, target,
                             statistics.median(a for a in mine if a),
                             statistics.median(b for b in refs if b),
                             statistics.median(a / b for a, b in both), len(both)))
    return rows


def context(turns):
    """[(method, placement, name, median bmi us, median its us, median ratio, turns)] for each
    CONTEXT run measured in the same turns as libbmi."""
    rows = []
    for (m, placement), name in CONTEXT.items():
        both = [(t[(f"bmi {m}", placement)], t[(name, placement)]) for t in turns.get(m, [])
                if t.get((f"bmi {m}", placement)) and t.get((name, placement))]
        if both:
            rows.append((m, placement, name, statistics.median(a for a, _ in both),
                         statistics.median(b for _, b in both),
                         statistics.median(a / b for a, b in both), len(both)))
    return rows


def verdict(ratio, target):
    return "met" if target.met(ratio) else "**not met**"


def print_summary(rows, out):
    out.write(f"\n== {SIZE} B ping-pong in three placements, runs in turns (one-way us; "
              "ratio bmi / reference, median of the per-turn ratios)\n")
    if not rows:
        out.write("no placement measured by both sides\n")
        return
    out.write(f"{'method':<6} {'placement':<10} {'bmi':>9} {'reference':<26} {'ref':>9} "
              f"{'ratio':>6} {'target':>6}\n")
    for m, p, ref, target, mine, theirs, ratio, _ in rows:
        out.write(f"{m:<6} {p:<10} {mine:>9.3f} {ref:<26} {theirs:>9.3f} {ratio:>6.2f} "
                  f"{target.limit:>6.2f}\n")


def markdown(turns, rows, fmt):
    rounds = max((len(t) for t in turns.values()), default=0)
    out = ["## Small messages in three placements (placement study)", "",
           f"An {SIZE}-byte ping-pong (default settings) in each placement, against the "
           f"reference of that placement, {rounds} turns (the order of the runs reversed every "
           f"other turn). Two cores: server and client pinned one per core; tcp against a raw "
           f"TCP ping-pong that polls with `MSG_DONTWAIT` (`raw_tcp_pingpong --poll`), shm "
           f"against Open MPI vader (mpirun binds its ranks one per core). One core: both "
           f"processes pinned to one core; tcp against a raw TCP ping-pong that sleeps in "
           f"`read()`, shm against the eventfd ping-pong. Unpinned: left to the scheduler, "
           f"against the slower of libbmi's two placed figures of the same turn. One-way us: "
           f"medians over the turns; the ratio is the median of the per-turn ratios.", ""]
    if not rows:
        return out + ["No placement was measured by both sides.", ""]
    out += ["| method | placement | bmi (us) | reference | reference (us) | ratio | target "
            "| turns | |", "|---|---|---:|---|---:|---:|---:|---:|---|"]
    for m, p, ref, target, mine, theirs, ratio, n in rows:
        out.append(f"| {m} | {p} | {fmt(mine)} | {ref} | {fmt(theirs)} | {fmt(ratio)} | "
                   f"{target} | {n} | {verdict(ratio, target)} |")
    for m, p, name, mine, theirs, ratio, n in context(turns):
        out.append(f"| {m} | {p} | {fmt(mine)} | {name} (context, not judged) | {fmt(theirs)} | "
                   f"{fmt(ratio)} | - | {n} | |")
    out += ["", "The context row is the eventfd ping-pong sleeping in `epoll_wait` on an "
            "edge-triggered set (`eventfd_pingpong --epoll`), as libbmi's wait point sleeps: "
            "between it and the `read()` reference lies what waiting on a set of descriptors "
            "costs, which any transport that waits on more than one descriptor pays."]
    return out + [""]
