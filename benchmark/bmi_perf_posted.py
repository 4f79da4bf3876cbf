# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's posted mode: a ping-pong while the server keeps N receives posted toward its
client on tags the client never sends (issue 18: "a server with 100,000 posted receives answers
a message in time independent of that number"). The pings are matched past all of them: the
server posts its idle receives first (pingpong --posted N). The target: the ping-pong with N
posted receives costs at most 1.10x the one without, for every N, for tcp and shm.

As in peers mode, the counts are measured in turns, each run a fresh server, in the three
placements (two cores, one core, unpinned), and the table shows medians over the turns, each
placement against its own run with none posted.
"""
from bmi_perf_peers import TARGET, baselines, judged_against, one_turn, summary

COUNTS = (0, 1000, 100000)
ROUNDS = 3
METHODS = ("tcp", "shm")
SIZES = (8,)


def methods_of(a):
    """The methods of --methods that posted mode measures (plain tcp and shm)."""
    return [m for m in METHODS if m in a.methods]


def measure(runner, method, count, cpus):
    """One run: a fresh pingpong server with count idle receives, then the ping-pong client.
    Returns the Series (not kept in runner.series)."""
    a = runner.args
    plan = ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters", str(a.iters * 10)]
    s = runner.bmi(method, f"posted {count}", plan, cpus, ["--posted", str(count)])
    runner.series.remove(s)
    return s


def run(runner, methods, counts=COUNTS, rounds=ROUNDS):
    """{method: {placement: [{count: {bytes: one-way us}}]}} one dict per turn; the order of
    the counts alternates from turn to turn."""
    places = runner.three_placements()
    turns = {m: {name: [] for name, _ in places} for m in methods}
    for turn in range(rounds):
        for m in methods:
            for name, cpus in places:
                turns[m][name].append(one_turn(
                    counts, turn, lambda count: measure(runner, m, count, cpus)))
    return turns


def print_summary(turns, out):
    for m, placements in turns.items():
        refs = baselines(placements)
        for placement, per_placement in placements.items():
            out.write(f"\n== {m} ping-pong beside posted receives, {placement}, median of "
                      f"{len(per_placement)} turns (one-way us; ratio to "
                      f"{judged_against(placement, 'with none posted')}, target "
                      f"<= {TARGET:g})\n")
            out.write(f"{'posted':>10} {'8 B':>10} {'ratio':>6}\n")
            for n, per in summary(per_placement, refs[placement]):
                if 8 in per:
                    out.write(f"{n:>10} {per[8][0]:>10.2f} {per[8][1]:>6.2f}\n")
                else:
                    out.write(f"{n:>10} {'-':>10} {'-':>6}\n")


def markdown(turns, fmt):
    rounds = max((len(t) for p in turns.values() for t in p.values()), default=0)
    out = ["## Posted receives (posted mode)", "",
           f"A ping-pong between the server and one client while the server keeps N receives "
           f"posted toward that client on tags it never sends (`pingpong --posted N`, posted "
           f"before the ping-pong's own), {rounds} turns over all N, a fresh server each run, "
           f"in three placements: pinned one process per core, both pinned to one core, and "
           f"left to the scheduler. One-way us at 8 B: medians over the turns; the ratio is "
           f"the median of the per-turn ratios to the run with none posted in the same "
           f"placement, and for unpinned runs to the slower of the two placed runs with none "
           f"posted of the same turn (as in peers mode). Target: at most {TARGET:g} in each "
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
                met = "met" if per[8][1] <= TARGET else "**not met**"
                out.append(f"| {m} | {placement} | {n} | {fmt(per[8][0])} | {fmt(per[8][1])} "
                           f"| {met} |")
    return out + [""]
