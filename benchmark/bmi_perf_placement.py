# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's placement mode: the small-message targets of issue 18 in the three placements
users meet, each judged against its own reference in runs taken in turns.

- two cores (server and client pinned one per core): tcp against a raw TCP ping-pong that
  polls (`raw_tcp_pingpong --poll`), at most 1.15x; shm against Open MPI vader (mpirun binds
  its ranks one per core), at most 1.0x.
- one core (both pinned to the same core): tcp against a raw TCP ping-pong that sleeps in
  read(), shm against the eventfd ping-pong, at most 1.1x each. With no spare core, waiting
  must not spin, so the reference is the best a sleeping process does.
- unpinned (left to the scheduler): at most the slower of the same turn's two placed figures
  of libbmi itself.

Why turns: on a shared VM one run of an 8-byte ping-pong scatters by 5-10 % and a sleeping
one is bimodal; runs seconds apart see the same machine, and the median over the turns of the
per-turn ratios is what a table can state. The order of the runs reverses every other turn,
so a machine that drifts during a turn favours nobody.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, UNPINNED, one_way_us

ROUNDS = 5
SIZE = 8
METHODS = ("tcp", "shm")
PLACED = ("two cores", "one core")
# (method, placement) -> (reference name, target ratio)
REFERENCES = {
    ("tcp", "two cores"): ("raw tcp, polling", 1.15),
    ("tcp", "one core"): ("raw tcp, blocking", 1.1),
    ("shm", "two cores"): (MPI_NAMES["mpi-shm"], 1.0),
    ("shm", "one core"): ("eventfd", 1.1),
}
UNPINNED_REFERENCE = "the slower placed figure"


def methods_of(a):
    return [m for m in METHODS if m in a.methods]


def planned_runs(a):
    """Three libbmi runs per method and turn, and its references that --baselines names."""
    refs = {"tcp": 2 * ("raw-tcp" in a.baselines),
            "shm": ("mpi-shm" in a.baselines) + ("eventfd" in a.baselines)}
    return ROUNDS * sum(3 + refs[m] for m in methods_of(a))


def runs_for(runner, method, plan):
    """[(name, placement, thunk)]: libbmi in the three placements and the two references."""
    cpus, baselines = dict(runner.placements()), runner.args.baselines
    two, one = cpus.get("two cores"), cpus["one core"]
    runs = [(f"bmi {method}", p, (lambda c=c: runner.bmi(method, "placement", plan, c)))
            for p, c in runner.three_placements()]
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
    return runs


def run(runner, methods, rounds=ROUNDS):
    """{method: [{(name, placement): one-way us}]} one dict per turn; a run that failed is
    missing from its turn."""
    plan = ["--min", str(SIZE), "--max", str(SIZE), "--iters", str(runner.args.iters * 10)]
    turns = {m: [] for m in methods}
    for turn in range(rounds):
        for m in methods:
            runs = runs_for(runner, m, plan)
            got = {}
            for name, placement, thunk in (runs if turn % 2 == 0 else reversed(runs)):
                s = thunk()
                runner.series.remove(s)  # a study's runs are no table series
                if s.status == "ok" and s.at(SIZE):
                    got[(name, placement)] = one_way_us(s.at(SIZE))
            turns[m].append(got)
    return turns


def reference_us(turn, method, placement):
    """The reference's one-way us in one turn (unpinned: libbmi's slower placed figure), or
    None where a run is missing."""
    if placement != UNPINNED:
        return turn.get((REFERENCES[(method, placement)][0], placement))
    placed = [turn.get((f"bmi {method}", p)) for p in PLACED]
    return max(placed) if all(placed) else None


def summary(turns):
    """[(method, placement, reference, target, median bmi us, median ref us, median ratio,
    turns)] for every (method, placement) measured."""
    rows = []
    for m, per in turns.items():
        for placement in PLACED + (UNPINNED,):
            ref_name, target = (REFERENCES[(m, placement)] if placement != UNPINNED
                                else (UNPINNED_REFERENCE, 1.0))
            mine = [t.get((f"bmi {m}", placement)) for t in per]
            refs = [reference_us(t, m, placement) for t in per]
            both = [(a, b) for a, b in zip(mine, refs) if a and b]
            if both:
                rows.append((m, placement, ref_name, target,
                             statistics.median(a for a in mine if a),
                             statistics.median(b for b in refs if b),
                             statistics.median(a / b for a, b in both), len(both)))
    return rows


def verdict(ratio, target):
    return "met" if ratio <= target else "**not met**"


def print_summary(turns, out):
    rows = summary(turns)
    out.write(f"\n== {SIZE} B ping-pong in three placements, runs in turns (one-way us; "
              "ratio bmi / reference, median of the per-turn ratios)\n")
    if not rows:
        out.write("no placement measured by both sides\n")
        return
    out.write(f"{'method':<6} {'placement':<10} {'bmi':>9} {'reference':<26} {'ref':>9} "
              f"{'ratio':>6} {'target':>6}\n")
    for m, p, ref, target, mine, theirs, ratio, _ in rows:
        out.write(f"{m:<6} {p:<10} {mine:>9.3f} {ref:<26} {theirs:>9.3f} {ratio:>6.2f} "
                  f"{target:>6.2f}\n")


def markdown(turns, fmt):
    rows = summary(turns)
    rounds = max((len(t) for t in turns.values()), default=0)
    out = ["## Small messages in three placements (placement mode)", "",
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
                   f"<= {target:g} | {n} | {verdict(ratio, target)} |")
    return out + [""]
