# SPDX-License-Identifier: LGPL-2.1-or-later
"""The placement-bw study, large messages: issue 18's bandwidth targets in the three
placements (two cores, one core, unpinned), each judged on runs taken in turns against
the limits of targets.tsv.

- tcp ping-pong and streaming against raw TCP (the same ping-pong or stream over plain
  sockets) at every size from 64 KiB; ping-pong against NetPIPE from 1 MiB.
- shm with buffers from malloc (BMI_SHM_SHARED_BUFFERS=0, as a user's own buffers) against
  one copy between the placement's CPUs (handoff_copy_bw: the real ceiling of a one-copy
  transport), memcpy and the better Open MPI shared-memory setting, from 1 MiB.

The shm runs print which path each large receive took (BMI_SHM_STATS=1), and the report
shows those counts per size and placement beside the ratios.

One more row has no target: tcp ping-pong against raw TCP carrying bmi_tcp's 32-byte header
(`raw_tcp_pingpong --framed`), which shows how much of the gap to raw TCP is libbmi's own
path and how much any framing costs (doc/perf/placement.md).

Every peer runs in the placement it is judged in: raw TCP and the BMI pairs through the
runner's pinning, NetPIPE's two processes pinned the same way, mpirun's ranks bound one per
core, both to one CPU, or not at all, handoff's writer and copier as the pair. memcpy is one
process and has no placement; it runs once per turn. A turn runs every placement once, the order of the runs reversing every other turn.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, Step
from study import UNPINNED, Study, in_turns

ROUNDS = 3
TCP_SMALLEST = 64 << 10
LARGE = 1 << 20
LARGEST = 64 << 20
MPI_SHM = ("mpi-shm", "mpi-shm-nocopy")
# The placements in the order the report lists them.
REPORT_ORDER = ("two cores", "one core", UNPINNED)
# The key of a placement's turn under which the shm runs' large-receive paths are kept
# ({label: {bytes: {path: receives}}}), beside the runs' figures.
PATHS = "paths taken"
SHM_MALLOC = "bmi shm-malloc"
# (title, mine, peers, its row in targets.tsv, smallest): the ratio is mine / the best of
# peers per size; a row of None is shown for insight, with no verdict.
ROWS = (
    ("tcp ping-pong vs raw tcp", "bmi tcp", ("raw tcp",), "tcp-vs-raw-tcp", TCP_SMALLEST),
    ("tcp ping-pong vs raw tcp with bmi_tcp's framing (no target)", "bmi tcp",
     ("raw tcp framed",), None, TCP_SMALLEST),
    ("tcp ping-pong vs NetPIPE", "bmi tcp", ("netpipe",), "tcp-vs-netpipe", LARGE),
    ("tcp streaming vs raw tcp", "bmi tcp stream", ("raw tcp stream",), "tcp-stream-vs-raw-tcp",
     TCP_SMALLEST),
    ("shm, malloc'd buffers, vs one copy between the CPUs", "bmi shm-malloc", ("handoff",),
     "shm-malloc-vs-handoff", LARGE),
    ("shm, malloc'd buffers, vs memcpy", "bmi shm-malloc", ("memcpy",), "shm-malloc-vs-memcpy",
     LARGE),
    ("shm, malloc'd buffers, vs the better Open MPI setting", "bmi shm-malloc",
     tuple(MPI_NAMES[b] for b in MPI_SHM), "shm-malloc-vs-mpi", LARGE),
)


def placements(runner):
    """[(name, bmi cpus, mpirun cpu)] in the order of a turn."""
    cpus = dict(runner.placements())
    out = [("two cores", cpus["two cores"], "per rank")] if "two cores" in cpus else []
    one = cpus["one core"]
    return out + [("one core", one, one[0]), (UNPINNED, None, None)]


class PlacementBandwidth(Study):
    name = "placement-bw"
    targets = tuple(t for _, _, _, t, _ in ROWS if t)

    def wanted(self, a):
        return a.max >= TCP_SMALLEST and ("tcp" in a.methods or "shm" in a.methods)

    def plan(self, runner):
        """Per turn, every placement's runs, then memcpy (one process: no placement)."""
        a, steps = runner.args, []
        top = min(a.max, LARGEST)
        for turn in range(ROUNDS):
            for name, cpus, mpi_cpu in placements(runner):
                steps += [Step((turn, name, label), thunk) for label, thunk in
                          in_turns(turn, runs_for(runner, cpus, mpi_cpu))]
            if "shm" in a.methods and "memcpy" in a.baselines and top >= LARGE:
                steps.append(Step((turn, None, "memcpy"), lambda: runner.command(
                    "memcpy", "placement", [runner.tool("memcpy_bw"), "--min", str(LARGE),
                                            "--max", str(top)])))
        return steps

    def fold(self, got):
        """[{placement: {name: {bytes: MB/s}}}] one per turn; memcpy's figures are in every
        placement of its turn. A failed run is missing from its turn."""
        turns = []
        for (turn, placement, label), s in got:
            while len(turns) <= turn:
                turns.append({})
            rows = {r[0]: r[3] for r in s.rows} if s.status == "ok" else None
            for p in [placement] if placement else list(turns[turn]):
                per = turns[turn].setdefault(p, {})
                if rows is not None:
                    per[label] = rows
                    if s.paths:
                        per.setdefault(PATHS, {})[label] = s.paths
        return turns

    def print_summary(self, result, out):
        print_summary(result, out, self.target)

    def markdown(self, result, report):
        return markdown(result, report.fmt, self.target)


def runs_for(runner, cpus, mpi_cpu):
    """[(name, thunk)] for one placement."""
    a = runner.args
    top = min(a.max, LARGEST)
    tcp = ["--min", str(TCP_SMALLEST), "--max", str(top), "--iters", str(a.iters)]
    stream = tcp + ["--mode", "bandwidth", "--window", str(a.window)]
    shm = ["--min", str(LARGE), "--max", str(top), "--iters", str(a.iters)]
    runs = []
    if "tcp" in a.methods:
        runs += [("bmi tcp", lambda: runner.bmi("tcp", "placement", tcp, cpus)),
                 ("bmi tcp stream", lambda: runner.bmi("tcp", "placement", stream, cpus))]
        if "raw-tcp" in a.baselines:
            runs += [(name, lambda plan=plan, common=common: runner.pair(
                "raw tcp", "placement", "raw_tcp_pingpong", common, "tcp://127.0.0.1:0", None,
                plan, cpus)) for name, plan, common in (
                    ("raw tcp", tcp, []), ("raw tcp stream", stream, []),
                    ("raw tcp framed", tcp, ["--framed"]))]
        if "netpipe" in a.baselines:
            runs.append(("netpipe", lambda: runner.netpipe("placement", cpus, TCP_SMALLEST,
                                                           top)))
    if "shm" in a.methods and top >= LARGE:
        runs.append(("bmi shm-malloc", lambda: runner.bmi("shm-malloc", "placement", shm,
                                                          cpus)))
        runs += [(MPI_NAMES[b], lambda b=b: runner.mpi(b, "placement", shm, mpi_cpu))
                 for b in MPI_SHM if b in a.baselines]
        if "handoff" in a.baselines:
            runs.append(("handoff", lambda: runner.handoff("placement", cpus, LARGE, top)))
    return runs


def ratios(turns, placement, mine, peers, smallest):
    """{bytes: median over the turns of mine / the best of peers}."""
    per_size = {}
    for turn in turns:
        got = turn.get(placement, {})
        for size, bw in got.get(mine, {}).items():
            best = max((got[p][size] for p in peers if size in got.get(p, {})), default=0)
            if size >= smallest and best > 0:
                per_size.setdefault(size, []).append(bw / best)
    return {size: statistics.median(v) for size, v in sorted(per_size.items())}


def summary(turns, targets):
    """[(title, placement, Target or None, {bytes: ratio})] for every row measured."""
    names = [p for p in REPORT_ORDER if any(p in t for t in turns)]
    rows = []
    for title, mine, peers, target, smallest in ROWS:
        for p in names:
            got = ratios(turns, p, mine, peers, smallest)
            if got:
                rows.append((title, p, targets[target] if target else None, got))
    return rows


def taken_paths(turns, placement, label=SHM_MALLOC):
    """{bytes: {path: receives}} of label's runs in placement, summed over the turns."""
    total = {}
    for turn in turns:
        for size, paths in turn.get(placement, {}).get(PATHS, {}).get(label, {}).items():
            per = total.setdefault(size, {})
            for name, count in paths.items():
                per[name] = per.get(name, 0) + count
    return dict(sorted(total.items()))


def paths_text(per_size):
    return "; ".join(f"{size_name(size)} " + ", ".join(
        f"{name} {count}" for name, count in sorted(paths.items(), key=lambda p: -p[1]))
        for size, paths in per_size.items())


def size_name(size):
    return f"{size >> 20} MiB" if size >= LARGE else f"{size >> 10} KiB"


def print_summary(turns, out, targets):
    out.write(f"\n== bandwidth in three placements, median of {len(turns)} turns "
              "(ratio per size; target)\n")
    for title, p, target, got in summary(turns, targets):
        wanted = "no target" if target is None else str(target)
        out.write(f"{title}, {p} ({wanted}): " +
                  ", ".join(f"{size_name(s)} {r:.2f}" for s, r in got.items()) + "\n")
    for p in REPORT_ORDER:
        taken = taken_paths(turns, p)
        if taken:
            out.write(f"shm large receives by path, {p}: {paths_text(taken)}\n")


def markdown(turns, fmt, targets):
    rows = summary(turns, targets)
    out = ["## Bandwidth in three placements (placement-bw study)", "",
           f"Ping-pong and streaming from 64 KiB (tcp) or 1 MiB (shm) to 64 MiB, each peer in "
           f"the placement it is judged in, {len(turns)} turns (the order of the runs reversed "
           f"every other turn). Ratios are libbmi's MB/s over the peer's (the better of the two "
           f"Open MPI settings per size), medians over the turns per size; the verdict needs "
           f"every size at or above the target. shm runs with `BMI_SHM_SHARED_BUFFERS=0`, so "
           f"its buffers take the paths a malloc'd buffer takes.", ""]
    if not rows:
        return out + ["Nothing was measured by both sides.", ""] + paths_markdown(turns)
    out += ["| target | placement | wanted | worst size | worst ratio | per size | |",
            "|---|---|---:|---:|---:|---|---|"]
    for title, p, target, got in rows:
        worst = min(got, key=got.get)
        sizes = ", ".join(f"{size_name(s)} {fmt(r)}" for s, r in got.items())
        if target is None:
            verdict, wanted = "no target", "n/a"
        else:
            verdict = "met" if target.met(got[worst]) else "**not met**"
            wanted = str(target)
        out.append(f"| {title} | {p} | {wanted} | {size_name(worst)} | "
                   f"{fmt(got[worst])} | {sizes} | {verdict} |")
    return out + [""] + paths_markdown(turns)


def paths_markdown(turns):
    """The table of the paths shm's large receives took, per placement; [] if none ran."""
    taken = [(p, taken_paths(turns, p)) for p in REPORT_ORDER]
    if not any(per_size for _, per_size in taken):
        return []
    out = ["The paths shm's large receives took in these runs (`BMI_SHM_STATS=1`; both "
           "processes, every turn, warm-up rounds included; `split`: both processes copy "
           "across, `single`: the receiver alone, `stream`: two copies through the ring; "
           "doc/methods/shm.md):", "",
           "| placement | receives per size and path |", "|---|---|"]
    out += [f"| {p} | {paths_text(per_size)} |" for p, per_size in taken if per_size]
    return out + [""]
