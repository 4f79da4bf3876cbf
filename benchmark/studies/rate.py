# SPDX-License-Identifier: LGPL-2.1-or-later
"""The rate study (issue 18, "message rate"): windows of 64 small messages
(8 B-4 KiB), each window acknowledged, through bmi_tcp, against a raw TCP stream that makes
one write() per message (raw_tcp_pingpong --mode bandwidth) and against Open MPI's tcp BTL.
Target: bmi tcp's rate at least each peer's, at every size, in every placement.

Runs are taken in turns (bmi, raw, and MPI where it can be placed), and the tables show
medians: a single streaming run on a shared 2-vCPU VM scatters by far more than the margins
judged. Placements: pinned to two cores, both on one core, and left to the scheduler. mpirun
binds its ranks one per core itself, so MPI is measured on two cores only.
"""
import statistics

from bmi_perf_runs import MPI_NAMES, Step, one_way_us
from study import Study, in_turns, three_placements

ROUNDS = 3
WINDOW = 64
SIZES = (8, 64, 512, 4096)


def plan_args(runner):
    return ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters",
            str(runner.args.iters * 4), "--mode", "bandwidth", "--window", str(WINDOW)]


def rates(series):
    """{bytes: messages/s} of a finished run ({} if it failed). Streaming rows give the
    elapsed time per message, so the rate is its inverse."""
    if series.status != "ok":
        return {}
    return {r[0]: 1e6 / one_way_us(r) for r in series.rows if r[0] in SIZES}


class Rate(Study):
    name, by_default, targets = "rate", True, ("bmi-vs-peer",)

    def wanted(self, a):
        # Judged against a raw TCP stream; a --server run has no local peers.
        return "tcp" in a.methods and "raw-tcp" in a.baselines and "bandwidth" in a.modes

    def plan(self, runner):
        """Per placement (pinned ones, then the scheduler's), bmi, raw and, on two cores, MPI
        in turns."""
        p, with_mpi = plan_args(runner), "mpi-tcp" in runner.args.baselines
        steps = []
        for name, cpus in three_placements(runner):
            runs = [("bmi tcp", lambda cpus=cpus: runner.bmi("tcp", "rate duel", p, cpus)),
                    ("raw tcp", lambda cpus=cpus: runner.pair(
                        "raw tcp", "rate duel", "raw_tcp_pingpong", [], "tcp://127.0.0.1:0",
                        plan=p, cpus=cpus))]
            if with_mpi and name == "two cores":
                runs.append((MPI_NAMES["mpi-tcp"],
                             lambda: runner.mpi("mpi-tcp", "rate duel", p)))
            steps += [Step((name, turn, label), measure) for turn in range(ROUNDS)
                      for label, measure in in_turns(turn, runs)]
        return steps

    def fold(self, got):
        """{placement: [{name: {bytes: messages/s}}] one per turn}."""
        out = {}
        for (placement, turn, label), s in got:
            turns = out.setdefault(placement, [])
            if turn == len(turns):
                turns.append({})
            turns[turn][label] = rates(s)
        return out

    def print_summary(self, result, out):
        print_summary(result, out, self.target["bmi-vs-peer"])

    def markdown(self, result, report):
        return markdown(result, report.fmt, self.target["bmi-vs-peer"])


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


def print_summary(by_placement, out, target):
    for placement, turns in by_placement.items():
        rows = summary(turns)
        peers = peers_of(rows)
        out.write(f"\n== tcp message rate, window {WINDOW}, {placement}, median of "
                  f"{len(turns)} turns (messages/s; ratio bmi / peer, target {target})\n")
        out.write(f"{'bytes':>8} {'bmi tcp':>10}" +
                  "".join(f" {p:>10} {'ratio':>6}" for p in peers) + "\n")
        for size, medians, ratios in rows:
            out.write(f"{size:>8} {medians.get('bmi tcp', 0):>10,.0f}" + "".join(
                f" {medians.get(p, 0):>10,.0f} {ratios[p]:>6.2f}" if p in ratios
                else f" {'-':>10} {'-':>6}" for p in peers) + "\n")


def markdown(by_placement, fmt, target):
    """The report's section, as a list of lines."""
    out = ["## tcp message rate (rate duel)", "",
           f"Windows of {WINDOW} messages, each window acknowledged by the receiver, through "
           f"bmi_tcp (`pingpong --mode bandwidth --window {WINDOW}`), against a raw TCP stream "
           f"making one `write()` per message (`raw_tcp_pingpong --mode bandwidth`) and, on "
           f"two cores, Open MPI's tcp BTL (mpirun binds its ranks itself). Runs taken in "
           f"turns; messages/s are medians over the turns, ratios the medians of the per-turn "
           f"ratios bmi / peer. Target: {target} against every peer, at every size, "
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
                       f"{'met' if target.met(worst) else '**not met**'} |")
        out.append("")
    return out
