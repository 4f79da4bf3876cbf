# SPDX-License-Identifier: LGPL-2.1-or-later
"""The ofi study (issue 40): bmi_ofi over tcp;ofi_rxm against libfabric's own ping-pong
(fi_pingpong: an RDM endpoint, tagged messages, the same provider) at 8 B and at 1 and 4 MiB,
in the three placements, in turns. Targets (targets.tsv): at 8 B the one-way time at most a
set ratio of fi_pingpong's; at 1 and 4 MiB the bandwidth at least a set share of its.

fi_pingpong polls its completion queue without pause: on one shared core its two processes
take turns a scheduler slice at a time, so there it runs a tenth of the rounds (each costs
milliseconds). libbmi runs with its defaults (an idle instance sleeps on the queue's wait
descriptor), as users meet it.
"""
from bmi_perf_modes import fi_provider
from bmi_perf_runs import one_way_us
from study import Study, duel_plan, duel_rows, duel_turns

ROUNDS = 5
METHOD = "ofi-tcp"
OURS, THEIRS = "bmi ofi-tcp", "fi pingpong"
SIZES = (8, 1 << 20, 4 << 20)
LABELS = {8: "8 B", 1 << 20: "1 MiB", 4 << 20: "4 MiB"}
LATENCY, BANDWIDTH = "latency-vs-fi-pingpong", "bandwidth-vs-fi-pingpong"


def judged_by(size):
    """The target a size is judged by: the small size by time, the large ones by bandwidth."""
    return LATENCY if size <= 4096 else BANDWIDTH


def ratio(size, ours_us, theirs_us):
    """ours / theirs in the target's terms: one-way time for latency, bandwidth otherwise."""
    return ours_us / theirs_us if judged_by(size) == LATENCY else theirs_us / ours_us


class Ofi(Study):
    name = "ofi"
    targets = (LATENCY, BANDWIDTH)

    def wanted(self, a):
        return METHOD in a.methods and "fi-pingpong" in a.baselines

    def plan(self, runner):
        """Per turn, placement and size up to --max: libbmi and fi_pingpong, in turns."""
        sizes = [s for s in SIZES if s <= runner.args.max]
        return duel_plan(runner, ROUNDS, sizes, (OURS, THEIRS),
                         lambda who, size, cpus, p: measure(runner, who, size, cpus, p))

    def fold(self, got):
        """{(placement, size): [{who: one-way us}]}, one dict per turn."""
        return duel_turns(got, lambda who, s, size: one_way_us(s.at(size)))

    def rows(self, turns):
        """[(placement, size, median ours us, median theirs us, median ratio, turns, target
        name, Target)]."""
        return [row + (judged_by(row[1]), self.target[judged_by(row[1])])
                for row in duel_rows(turns, OURS, THEIRS, ratio)]

    def print_summary(self, result, out):
        out.write("\n== ofi: bmi_ofi over tcp;ofi_rxm against fi_pingpong, runs in turns "
                  "(one-way us; ratio: time at 8 B, bandwidth above, median of per-turn "
                  "ratios)\n")
        out.write(f"{'placement':<10} {'size':>6} {'bmi':>9} {'fi':>9} {'ratio':>6} "
                  f"{'target':>8}\n")
        for placement, size, ours, theirs, r, _, _, target in self.rows(result):
            out.write(f"{placement:<10} {LABELS[size]:>6} {ours:>9.3f} {theirs:>9.3f} "
                      f"{r:>6.2f} {str(target):>8}\n")

    def markdown(self, result, report):
        fmt = report.fmt
        out = ["## ofi against libfabric's own ping-pong (ofi study)", "",
               f"`pingpong` over `ofi+tcp` (bmi_ofi on `tcp;ofi_rxm`, default settings) "
               f"against `fi_pingpong -p \"tcp;ofi_rxm\" -e rdm -m tagged -S SIZE` on the "
               f"same provider, {ROUNDS} turns, the order reversed every other turn, a fresh "
               f"server each run, in three placements. fi_pingpong polls without pause, so on "
               f"one core it runs a tenth of the rounds. One-way us: medians over the turns. "
               f"The ratio is the median of the per-turn ratios: bmi / fi_pingpong time at "
               f"8 B, bmi / fi_pingpong bandwidth at 1 and 4 MiB.", "",
               "| placement | size | bmi (us) | fi_pingpong (us) | ratio | target | turns | |",
               "|---|---|---:|---:|---:|---:|---:|---|"]
        rows = self.rows(result)
        for placement, size, ours, theirs, r, n, name, target in rows:
            met = "met" if target.met(r) else "**not met**"
            out.append(f"| {placement} | {LABELS[size]} | {fmt(ours)} | {fmt(theirs)} | "
                       f"{fmt(r)} | {target} | {n} | {met} |")
        if not rows:
            out.append("| - | - | - | - | - | - | 0 | no turn measured both |")
        return out + [""]


def measure(runner, who, size, cpus, placement):
    """One run of who at size; fi_pingpong pinned to one core runs a tenth of the rounds."""
    iters = runner.args.iters * (10 if size <= 4096 else 1)
    if who == OURS:
        plan = ["--min", str(size), "--max", str(size), "--iters", str(iters)]
        return runner.bmi(METHOD, "ofi", plan, cpus)
    if placement == "one core":
        iters = max(iters // 10, 10)
    return runner.fi_pingpong(fi_provider(METHOD), cpus, size=size, iters=iters, mode="ofi")
