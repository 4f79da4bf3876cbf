# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shm study: the targets of the shm issue, judged on runs taken in turns where single
runs cannot settle them.

- 8 B latency, bmi shm (spinning) against Open MPI vader, each process on its own core;
- 8 B latency, bmi shm-blocking (BMI_SHM_SPIN_US=0) against the eventfd ping-pong, both
  processes pinned in each placement (a sleeping ping-pong on one CPU costs a context switch
  per message, on two an inter-processor wake-up: left to the scheduler a run gets either);
- bandwidth from 1 MiB, bmi shm (buffers from BMI_memalloc) and shm-malloc
  (BMI_SHM_SHARED_BUFFERS=0) against the better Open MPI setting and memcpy. Large-message
  bandwidth on these VMs swings with the host's memory traffic between runs a minute apart,
  so the targets compare runs that saw the same machine.

Where a duel was not run (its peer not asked for), the verdict falls back on the table runs.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, Step, one_way_us
from report import find, ratio
from study import Study, in_turns

DUEL_ROUNDS = 5  # turns of each 8-byte duel
BANDWIDTH_ROUNDS = 3  # turns of the bandwidth duel
LARGE = 1 << 20  # the bandwidth targets' smallest size


class Shm(Study):
    name, by_default = "shm", True
    targets = ("latency-vs-vader", "blocking-vs-eventfd", "bandwidth-vs-mpi",
               "bandwidth-vs-memcpy")

    def wanted(self, a):
        return any(m.startswith("shm") for m in a.methods)

    def plan(self, runner):
        a, steps = runner.args, []
        if "shm" in a.methods and "mpi-shm" in a.baselines and "latency" in a.modes:
            # mpirun binds its two ranks one per core: so is bmi's pair.
            plan = ["--min", "8", "--max", "8", "--iters", str(a.iters * 200)]
            cpus = runner.one_per_core()
            # Bound now: plan and cpus are rebound below, before these run.
            steps += duel_steps("latency", (
                lambda plan=plan, cpus=cpus: runner.bmi("shm", "duel", plan, cpus),
                lambda plan=plan: runner.mpi("mpi-shm", "duel", plan)))
        if "shm-blocking" in a.methods and "eventfd" in a.baselines and "latency" in a.modes:
            plan = ["--min", "8", "--max", "8", "--iters", str(a.iters * 10)]
            for name, cpus in runner.placements():
                steps += duel_steps(f"blocking, {name}", (
                    lambda cpus=cpus: runner.bmi("shm-blocking", "duel", plan, cpus),
                    lambda cpus=cpus: runner.eventfd("duel", plan, cpus)))
        return steps + bandwidth_steps(runner)

    def fold(self, got):
        """{"latency" or "blocking, PLACEMENT": [(bmi us, peer us)] per turn where both ran,
        "bandwidth": [{bytes: {name: MB/s}}] per turn}."""
        out, pending = {}, {}
        for key, s in got:
            if key[0] == "bandwidth":
                turns = out.setdefault("bandwidth", [])
                while len(turns) <= key[1]:
                    turns.append({})
                for row in s.rows if s.status == "ok" else []:
                    turns[key[1]].setdefault(row[0], {})[key[2]] = row[3]
                continue
            duel, turn, side = key
            pair = pending.setdefault((duel, turn), {})
            pair[side] = one_way_us(s.rows[0]) if s.status == "ok" else None
            pairs = out.setdefault(duel, [])
            if len(pair) == 2 and None not in pair.values():
                pairs.append((pair["bmi"], pair["peer"]))
        return out

    def print_summary(self, duels, out):
        for name, pairs in duels.items():
            if name != "bandwidth":
                out.write(f"8 B {name}, runs in turns (bmi / peer, us): " +
                          ", ".join(f"{b:g}/{e:g}" for b, e in pairs) + "\n")
                continue
            for i, turn in enumerate(pairs):
                out.write(f"bandwidth, turn {i + 1} (MB/s): " + "; ".join(
                    f"{size >> 20} MiB " + " ".join(f"{n}={v:g}" for n, v in row.items())
                    for size, row in sorted(turn.items())) + "\n")

    def markdown(self, duels, report):
        if not any(s.name.startswith("bmi shm") for s in report.series):
            return []
        return markdown(report.series, duels, report.fmt, self.target)


def duel_steps(duel, runs):
    """bmi against its peer, DUEL_ROUNDS turns; keys (duel, turn, "bmi" or "peer")."""
    sides = list(zip(("bmi", "peer"), runs))
    return [Step((duel, turn, side), run) for turn in range(DUEL_ROUNDS)
            for side, run in in_turns(turn, sides)]


def bandwidth_steps(runner):
    """bmi shm and shm-malloc against the Open MPI settings and memcpy asked for, each on
    two cores, from a quarter of LARGE up: as in the table runs, the first sizes of a run
    (whose first messages through fresh shm buffers are slower: doc/perf/shm-notes.md) are
    not the ones judged. Every peer gets the same plan."""
    a = runner.args
    peers = [b for b in ("mpi-shm", "mpi-shm-nocopy", "memcpy") if b in a.baselines]
    if "shm" not in a.methods or "latency" not in a.modes or a.max < LARGE or not peers:
        return []
    smallest = LARGE // 4
    plan = ["--min", str(smallest), "--max", str(a.max), "--iters", str(a.iters)]
    runs = [("bmi shm", lambda: runner.bmi("shm", "duel", plan, runner.one_per_core())),
            ("bmi shm-malloc", lambda: runner.bmi("shm-malloc", "duel", plan,
                                                  runner.one_per_core()))]
    runs += [(MPI_NAMES[b], lambda b=b: runner.mpi(b, "duel", plan))
             for b in peers if b != "memcpy"]
    if "memcpy" in peers:
        runs.append(("memcpy", lambda: runner.command(
            "memcpy", "duel", [runner.tool("memcpy_bw"), "--min", str(smallest),
                               "--max", str(a.max)])))
    return [Step(("bandwidth", turn, name), run) for turn in range(BANDWIDTH_ROUNDS)
            for name, run in in_turns(turn, runs)]


def bandwidth_ratios(series, turns, mine_name="bmi shm"):
    """{bytes: ratio} of mine_name (bmi shm) against the better Open MPI setting and against
    memcpy, and how they were taken: the median per size over the bandwidth duel's turns
    (each ratio from one turn, runs that saw the same machine), or else from the single
    table run, taken as the only turn."""
    if not turns:
        tables = {}
        for name in ("bmi shm", "mpi vader", "mpi vader nocopy", "memcpy"):
            s = find(series, name, "latency")
            tables[name] = {r[0]: r[3] for r in s.rows} if s else {}
        turns = [{size: {n: t[size] for n, t in tables.items() if size in t}
                  for size in tables["bmi shm"]}]
        how = "this table run"
    else:
        how = f"median of {len(turns)} runs taken in turns"
    vs_mpi, vs_mem = {}, {}
    for size in sorted({size for turn in turns for size in turn if size >= LARGE}):
        to_mpi, to_mem = [], []
        for turn in turns:
            row = turn.get(size, {})
            mine = row.get(mine_name)
            best = max([row[n] for n in ("mpi vader", "mpi vader nocopy") if n in row] or [0])
            if mine and best > 0:
                to_mpi.append(mine / best)
            if mine and row.get("memcpy"):
                to_mem.append(mine / row["memcpy"])
        if to_mpi:
            vs_mpi[size] = statistics.median(to_mpi)
        if to_mem:
            vs_mem[size] = statistics.median(to_mem)
    return vs_mpi, vs_mem, how


def markdown(series, duel, fmt, targets):
    """The shm targets section, judged from this run."""
    shm, block = find(series, "bmi shm", "latency"), find(series, "bmi shm-blocking", "latency")
    vader = find(series, "mpi vader", "latency")
    evfd = find(series, "eventfd", "latency")
    rows = []

    def judge(name, value, ok, target):
        rows.append(f"| {name} | {target} | {value} | "
                    f"{'n/a' if ok is None else 'met' if ok else '**not met**'} |")

    def judge_duel(name, pairs, target):
        # Runs taken in turns: the median of their ratios.
        r = statistics.median(b / e for b, e in pairs)
        runs = ", ".join(f"{b:g}/{e:g}" for b, e in pairs)
        judge(f"{name} (median of {len(pairs)} runs taken in turns; us: {runs})", fmt(r),
              target.met(r), f"ratio {target}")

    latency, blocking_target = targets["latency-vs-vader"], targets["blocking-vs-eventfd"]
    if duel.get("latency"):
        judge_duel("8 B latency, shm default vs Open MPI vader, one core each",
                   duel["latency"], latency)
    else:
        r = ratio(shm.at(8) if shm else None, vader.at(8) if vader else None, 2)
        judge("8 B latency, shm default vs Open MPI vader", fmt(r),
              None if r is None else latency.met(r), f"ratio {latency}")
    blocking = [(k, v) for k, v in duel.items() if k.startswith("blocking") and v]
    for name, pairs in blocking:
        judge_duel(f"8 B latency, shm BMI_SHM_SPIN_US=0 vs eventfd ping-pong, both processes "
                   f"on {name.removeprefix('blocking, ')}", pairs, blocking_target)
    if not blocking:
        r = ratio(block.at(8) if block else None, evfd.at(8) if evfd else None, 2)
        judge("8 B latency, shm BMI_SHM_SPIN_US=0 vs eventfd ping-pong", fmt(r),
              None if r is None else blocking_target.met(r), f"ratio {blocking_target}")
    # bmi shm's ping-pong buffers come from BMI_memalloc, which shm shares with the peer;
    # shm-malloc (only in the duel) shows what a buffer from malloc gets.
    variants = [("bmi shm", "shm ping-pong bandwidth"),
                ("bmi shm-malloc", "shm ping-pong bandwidth, buffers not from BMI_memalloc "
                                   "(BMI_SHM_SHARED_BUFFERS=0; Open MPI's are not either)")]
    for mine_name, title in variants:
        if mine_name != "bmi shm" and not duel.get("bandwidth"):
            continue
        vs_mpi, vs_mem, how = bandwidth_ratios(series, duel.get("bandwidth"), mine_name)
        for what, got, want in (("the better Open MPI setting per size", vs_mpi,
                                 targets["bandwidth-vs-mpi"]),
                                ("memcpy", vs_mem, targets["bandwidth-vs-memcpy"])):
            values = list(got.values())
            sizes = ", ".join(f"{size >> 20} MiB {fmt(v)}" for size, v in sorted(got.items()))
            judge(f"{title} from {LARGE >> 20} MiB up vs {what} ({how}; range of ratios; "
                  f"per size: {sizes or 'n/a'})",
                  f"{fmt(min(values))}-{fmt(max(values))}" if values else "n/a",
                  want.met(min(values)) if values else None, f"{want} at every size")
    return ["## shm targets\n", "| target | wanted | this run | |", "|---|---|---:|---|"] + \
        rows + [""]
