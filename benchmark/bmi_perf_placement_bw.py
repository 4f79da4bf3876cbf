# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's placement mode, large messages: issue 18's bandwidth targets in the three
placements (two cores, one core, unpinned), each judged on runs taken in turns.

- tcp ping-pong and streaming: at least 1.0x raw TCP (the same ping-pong or stream over plain
  sockets) at every size from 64 KiB; ping-pong at least 1.0x NetPIPE from 1 MiB.
- shm with buffers from malloc (BMI_SHM_SHARED_BUFFERS=0, as a user's own buffers): at least
  0.6x memcpy and 1.2x the better Open MPI shared-memory setting, from 1 MiB.

One more row has no target: tcp ping-pong against raw TCP carrying bmi_tcp's 32-byte header
(`raw_tcp_pingpong --framed`), which shows how much of the gap to raw TCP is libbmi's own
path and how much any framing costs (doc/perf/placement.md).

Every peer runs in the placement it is judged in: raw TCP and the BMI pairs through the
runner's pinning, NetPIPE's two processes pinned the same way, mpirun's ranks bound one per
core, both to one CPU, or not at all. memcpy is one process and has no placement; it runs once
per turn. A turn runs every placement once, the order of the runs reversing every other turn.
"""
import statistics

from bmi_perf_placement import UNPINNED
from bmi_perf_runs import MPI_NAMES

ROUNDS = 3
TCP_SMALLEST = 64 << 10
LARGE = 1 << 20
LARGEST = 64 << 20
MPI_SHM = ("mpi-shm", "mpi-shm-nocopy")
# (title, mine, peers, target, smallest): the ratio is mine / the best of peers per size; a
# target of None marks a row shown for insight, with no verdict.
TARGETS = (
    ("tcp ping-pong vs raw tcp", "bmi tcp", ("raw tcp",), 1.0, TCP_SMALLEST),
    ("tcp ping-pong vs raw tcp with bmi_tcp's framing (no target)", "bmi tcp",
     ("raw tcp framed",), None, TCP_SMALLEST),
    ("tcp ping-pong vs NetPIPE", "bmi tcp", ("netpipe",), 1.0, LARGE),
    ("tcp streaming vs raw tcp", "bmi tcp stream", ("raw tcp stream",), 1.0, TCP_SMALLEST),
    ("shm, malloc'd buffers, vs memcpy", "bmi shm-malloc", ("memcpy",), 0.6, LARGE),
    ("shm, malloc'd buffers, vs the better Open MPI setting", "bmi shm-malloc",
     tuple(MPI_NAMES[b] for b in MPI_SHM), 1.2, LARGE),
)


def wanted(a):
    return a.max >= TCP_SMALLEST and ("tcp" in a.methods or "shm" in a.methods)


def placements(runner):
    """[(name, bmi cpus, mpirun cpu)] in the order of a turn."""
    cpus = dict(runner.placements())
    out = [("two cores", cpus["two cores"], "per rank")] if "two cores" in cpus else []
    one = cpus["one core"]
    return out + [("one core", one, one[0]), (UNPINNED, None, None)]


def planned_runs(a):
    if not wanted(a):
        return 0
    tcp = ("tcp" in a.methods) * (2 + 3 * ("raw-tcp" in a.baselines) + ("netpipe" in a.baselines))
    shm = ("shm" in a.methods) * (1 + sum(b in a.baselines for b in MPI_SHM))
    return ROUNDS * (3 * (tcp + shm) + (shm > 0 and "memcpy" in a.baselines))


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
    return runs


def run(runner, rounds=ROUNDS):
    """[{placement: {name: {bytes: MB/s}}}] one per turn; memcpy's figures are in every
    placement of its turn. A failed run is missing from its turn."""
    a = runner.args
    turns = []
    for turn in range(rounds):
        got = {}
        for name, cpus, mpi_cpu in placements(runner):
            runs = runs_for(runner, cpus, mpi_cpu)
            got[name] = {}
            for label, thunk in (runs if turn % 2 == 0 else list(reversed(runs))):
                s = thunk()
                runner.series.remove(s)
                if s.status == "ok":
                    got[name][label] = {r[0]: r[3] for r in s.rows}
        if "shm" in a.methods and "memcpy" in a.baselines and min(a.max, LARGEST) >= LARGE:
            s = runner.command("memcpy", "placement", [
                runner.tool("memcpy_bw"), "--min", str(LARGE), "--max",
                str(min(a.max, LARGEST))])
            runner.series.remove(s)
            if s.status == "ok":
                for per in got.values():
                    per["memcpy"] = {r[0]: r[3] for r in s.rows}
        turns.append(got)
    return turns


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


def summary(turns):
    """[(title, placement, target, {bytes: ratio})] for every target measured."""
    names = [p for p in ("two cores", "one core", UNPINNED) if any(p in t for t in turns)]
    rows = []
    for title, mine, peers, target, smallest in TARGETS:
        for p in names:
            got = ratios(turns, p, mine, peers, smallest)
            if got:
                rows.append((title, p, target, got))
    return rows


def size_name(size):
    return f"{size >> 20} MiB" if size >= LARGE else f"{size >> 10} KiB"


def print_summary(turns, out):
    out.write(f"\n== bandwidth in three placements, median of {len(turns)} turns "
              "(ratio per size; target)\n")
    for title, p, target, got in summary(turns):
        wanted = "no target" if target is None else f">= {target:g}"
        out.write(f"{title}, {p} ({wanted}): " +
                  ", ".join(f"{size_name(s)} {r:.2f}" for s, r in got.items()) + "\n")


def markdown(turns, fmt):
    rows = summary(turns)
    out = ["## Bandwidth in three placements (placement mode)", "",
           f"Ping-pong and streaming from 64 KiB (tcp) or 1 MiB (shm) to 64 MiB, each peer in "
           f"the placement it is judged in, {len(turns)} turns (the order of the runs reversed "
           f"every other turn). Ratios are libbmi's MB/s over the peer's (the better of the two "
           f"Open MPI settings per size), medians over the turns per size; the verdict needs "
           f"every size at or above the target. shm runs with `BMI_SHM_SHARED_BUFFERS=0`, so "
           f"its buffers take the paths a malloc'd buffer takes.", ""]
    if not rows:
        return out + ["Nothing was measured by both sides.", ""]
    out += ["| target | placement | wanted | worst size | worst ratio | per size | |",
            "|---|---|---:|---:|---:|---|---|"]
    for title, p, target, got in rows:
        worst = min(got, key=got.get)
        sizes = ", ".join(f"{size_name(s)} {fmt(r)}" for s, r in got.items())
        if target is None:
            verdict, wanted = "no target", "n/a"
        else:
            verdict = "met" if got[worst] >= target else "**not met**"
            wanted = f">= {target:g}"
        out.append(f"| {title} | {p} | {wanted} | {size_name(worst)} | "
                   f"{fmt(got[worst])} | {sizes} | {verdict} |")
    return out + [""]
