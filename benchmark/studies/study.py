# SPDX-License-Identifier: LGPL-2.1-or-later
"""What every study of benchmark/studies/ is, and the helpers they share.

A study plans all its runs before the first one starts: plan() returns a list of Steps
(bmi_perf_runs.Step), each one counted run whose key says where its figure goes, so the run
count is the plan's length. The engine (bmi_perf_studies.py) runs the plans, hands each study
the [(key, figure)] its steps returned, and asks it for its summary on stdout and its section
of the report. Runs are taken in turns, the order reversing every other turn (in_turns), so a
machine that drifts during a turn favours nobody. A study's targets are rows of targets.tsv.
"""
import os
import statistics

from bmi_perf_runs import Step

# The placement left to the scheduler (three_placements).
UNPINNED = "unpinned"


class Study:
    name = ""  # its name in --studies and in targets.tsv
    by_default = False  # run when --studies is not given
    targets = ()  # the names of its rows in targets.tsv

    def __init__(self, table):
        """table: targets.Table; self.target maps each name of targets to its Target."""
        self.target = table.of(self.name, self.targets)

    def wanted(self, a):
        """Whether the options ask for anything this study measures."""
        return True

    def plan(self, runner):
        """[Step]: every run of the study, in order."""
        raise NotImplementedError

    def fold(self, got):
        """The study's result from [(step key, what its measure returned)], in plan order."""
        raise NotImplementedError

    def print_summary(self, result, out):
        raise NotImplementedError

    def markdown(self, result, report):
        """Its section of the report, as a list of lines; report: report.Context."""
        raise NotImplementedError


def in_turns(turn, runs):
    """runs in the order of this turn: as given in even turns, reversed in odd ones."""
    return list(runs) if turn % 2 == 0 else list(reversed(runs))


def three_placements(runner):
    """The runner's pinned placements and UNPINNED (None: left to the scheduler), the three
    ways users meet; issue 18's targets hold in each."""
    return runner.placements() + [(UNPINNED, None)]


def series_of(got):
    """{key: Series} of the steps that succeeded."""
    return {key: s for key, s in got if s.status == "ok"}


def cpu_seconds(pid):
    """CPU time of every thread of pid: nanoseconds from /proc/PID/task/*/schedstat where the
    kernel has it, else clock ticks (utime + stime) from /proc/PID/stat."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def duel_plan(runner, rounds, sizes, parties, measure):
    """The steps of a duel of parties at each size in the three placements: per turn,
    placement and size one run of each party, their order reversed every other turn. Keys are
    (turn, placement, size, party); measure(party, size, cpus, placement) makes the run.
    Sizes above --max are left out. parties is a tuple, or a function of the size giving one
    (a party may run at some sizes only)."""
    sizes = [s for s in sizes if s <= runner.args.max]
    steps = []
    for turn in range(rounds):
        for placement, cpus in three_placements(runner):
            for size in sizes:
                at = parties(size) if callable(parties) else parties
                runs = [(party, lambda party=party, size=size, cpus=cpus, placement=placement:
                         measure(party, size, cpus, placement)) for party in at]
                steps += [Step((turn, placement, size, party), thunk)
                          for party, thunk in in_turns(turn, runs)]
    return steps


def duel_turns(got, figure):
    """{(placement, size): [{party: figure}]}, one dict per turn, from a duel_plan's results;
    figure(party, series, size) is the run's figure, or None to leave the run out."""
    turns = {}
    for (turn, placement, size, party), s in got:
        per = turns.setdefault((placement, size), [])
        while len(per) <= turn:
            per.append({})
        value = figure(party, s, size) if s.status == "ok" and s.at(size) else None
        if value is not None:
            per[turn][party] = value
    return turns


def duel_rows(turns, first, second, ratio):
    """[(placement, size, median of first, median of second, median of the per-turn
    ratio(size, first's, second's), turns)] over the turns that measured both."""
    rows = []
    for (placement, size), per in turns.items():
        both = [(t[first], t[second]) for t in per if first in t and second in t]
        if both:
            rows.append((placement, size, statistics.median(a for a, _ in both),
                         statistics.median(b for _, b in both),
                         statistics.median(ratio(size, a, b) for a, b in both), len(both)))
    return rows
