# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's message-rate duel (issue 18, "message rate"): windows of 64 small messages
(8 B-4 KiB), each window acknowledged, through bmi_tcp, against a raw TCP stream that makes
one write() per message (raw_tcp_pingpong --mode bandwidth) and against Open MPI's tcp BTL.
Target: bmi tcp's rate at least each peer's, at every size, in every placement.

Runs are taken in turns (bmi, raw, and MPI where it can be placed), and the tables show
medians: a single streaming run on a shared 2-vCPU VM scatters by far more than the margins
judged. Placements: pinned to two cores, both on one core, and left to the scheduler. mpirun
binds its ranks one per core itself, so MPI is measured on two cores only.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, one_way_us

ROUNDS = 3
WINDOW = 64
SIZES = (8, 64, 512, 4096)
TARGET = 1.0  # bmi rate / peer rate, at least


def placements(runner):
    """[(name, cpus)]: the runner's pinned placements, then the scheduler's (None)."""
    return runner.placements() + [("unpinned", None)]


def plan(runner):
    return ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters",
            str(runner.args.iters * 4), "--mode", "bandwidth", "--window", str(WINDOW)]


def rates(series):
    """{bytes: messages/s} of a finished run ({} if it failed). Streaming rows give the
    elapsed time per message, so the rate is its inverse."""
    if series.status != "ok":
        return {}
    return {r[0]: 1e6 / one_way_us(r) for r in series.rows if r[0] in SIZES}


def run(runner, rounds=ROUNDS, with_mpi=True):
    """{placement: [{name: {bytes: messages/s}}] one per turn}."""
    p = plan(runner)
    out = {}
    for name, cpus in placements(runner):
        runs = [("bmi tcp", lambda cpus=cpus: runner.bmi("tcp", "rate", p, cpus)),
                ("raw tcp", lambda cpus=cpus: runner.pair(
                    "raw tcp", "rate", "raw_tcp_pingpong", [], "tcp://127.0.0.1:0",
                    plan=p, cpus=cpus))]
        if with_mpi and name == "two cores":
            runs.append((MPI_NAMES["mpi-tcp"], lambda: runner.mpi("mpi-tcp", "rate", p)))
        turns = []
        for turn in range(rounds):
            got = {}
            # The order alternates, so a machine that slows down during a turn favours nobody.
            for label, measure in (runs if turn % 2 == 0 else list(reversed(runs))):
                s = measure()
                runner.series.remove(s)  # a duel's runs are no table series
                got[label] = rates(s)
            turns.append(got)
        out[name] = turns
    return out


def summary(turns):
    """[(bytes, {name: median rate}, {peer: median of the per-turn ratios bmi / peer})]."""
    rows = []
    names = sorted({n for t in turns for n in t})
    for size in SIZES:
        medians, ratios = {}, {}
        for n in names:
            got = [t[n][size] for t in turns if size in t.get(n, {})]
            if got:
                medians[n] = statistics.median(got)
            if n == "bmi tcp":
                continue
            pairs = [t["bmi tcp"][size] / t[n][size] for t in turns
                     if size in t.get(n, {}) and size in t.get("bmi tcp", {})]
            if pairs:
                ratios[n] = statistics.median(pairs)
        if medians:
            rows.append((size, medians, ratios))
    return rows


def peers_of(rows):
    return sorted({n for _, _, ratios in rows for n in ratios})


def print_summary(by_placement, out):
    for placement, turns in by_placement.items():
        rows = summary(turns)
        peers = peers_of(rows)
        out.write(f"\n== tcp message rate, window {WINDOW}, {placement}, median of "
                  f"{len(turns)} turns (messages/s; ratio bmi / peer, target >= {TARGET:g})\n")
        out.write(f"{'bytes':>8} {'bmi tcp':>10}" +
                  "".join(f" {p:>10} {'ratio':>6}" for p in peers) + "\n")
        for size, medians, ratios in rows:
            out.write(f"{size:>8} {medians.get('bmi tcp', 0):>10,.0f}" + "".join(
                f" {medians.get(p, 0):>10,.0f} {ratios[p]:>6.2f}" if p in ratios
                else f" {'-':>10} {'-':>6}" for p in peers) + "\n")


def markdown(by_placement, fmt):
    """The report's section, as a list of lines."""
    out = ["## tcp message rate (rate duel)", "",
           f"Windows of {WINDOW} messages, each window acknowledged by the receiver, through "
           f"bmi_tcp (`pingpong --mode bandwidth --window {WINDOW}`), against a raw TCP stream "
           f"making one `write()` per message (`raw_tcp_pingpong --mode bandwidth`) and, on "
           f"two cores, Open MPI's tcp BTL (mpirun binds its ranks itself). Runs taken in "
           f"turns; messages/s are medians over the turns, ratios the medians of the per-turn "
           f"ratios bmi / peer. Target: at least {TARGET:g} against every peer, at every size, "
           f"in every placement.", ""]
    for placement, turns in by_placement.items():
        rows = summary(turns)
        peers = peers_of(rows)
        out += [f"**{placement}** ({len(turns)} turns)", "",
                "| bytes | bmi tcp (msg/s) | " +
                " | ".join(f"{p} (msg/s) | ratio" for p in peers) + " | |",
                "|---:|---:|" + "---:|---:|" * len(peers) + "---|"]
        for size, medians, ratios in rows:
            worst = min(ratios.values(), default=0)
            cells = " | ".join(f"{medians[p]:,.0f} | {fmt(ratios[p])}" if p in ratios
                               else "- | -" for p in peers)
            out.append(f"| {size} | {medians.get('bmi tcp', 0):,.0f} | {cells} | "
                       f"{'met' if worst >= TARGET else '**not met**'} |")
        out.append("")
    return out
