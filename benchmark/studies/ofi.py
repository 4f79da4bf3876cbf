# SPDX-License-Identifier: LGPL-2.1-or-later
"""The ofi study (issue 40): bmi_ofi over tcp;ofi_rxm against libfabric's own ping-pong
(fi_pingpong: an RDM endpoint, tagged messages, the same provider) at 8 B and at 1 and 4 MiB,
in the three placements, in turns. Targets (targets.tsv): at 8 B the one-way time at most a
set ratio of fi_pingpong's; at 1 and 4 MiB the bandwidth at least a set share of its.

fi_pingpong polls its completion queue without pause: on one shared core its two processes
take turns a scheduler slice at a time, so there it runs a tenth of the rounds (each costs
milliseconds). libbmi runs with its defaults (an idle instance sleeps on the queue's wait
descriptor), as users meet it. With ofi-tcp-polled among the methods, the queue opened without
a wait descriptor (ofi_wait_descriptor=0) runs at 8 B in the same turns and is judged by the
same target: the two rows side by side show what the descriptor costs a small message, and the
idle study what polling costs an idle server.
"""
from bmi_perf_modes import fi_provider
from bmi_perf_runs import one_way_us
from study import Study, duel_plan, duel_rows, duel_turns

ROUNDS = 5
METHOD, POLLED_METHOD = "ofi-tcp", "ofi-tcp-polled"
OURS, POLLED, THEIRS = "bmi ofi-tcp", "bmi ofi-tcp-polled", "fi pingpong"
# How each libbmi series waits, as the tables name it.
QUEUES = {OURS: "wait descriptor", POLLED: "polled"}
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
        """Per turn, placement and size up to --max: libbmi and fi_pingpong, in turns, and
        the polled series at 8 B where it is asked for."""
        polled = POLLED_METHOD in runner.args.methods

        def parties(size):
            if polled and judged_by(size) == LATENCY:
                return (OURS, POLLED, THEIRS)
            return (OURS, THEIRS)
        return duel_plan(runner, ROUNDS, SIZES, parties,
                         lambda who, size, cpus, p: measure(runner, who, size, cpus, p))

    def fold(self, got):
        """{(placement, size): [{who: one-way us}]}, one dict per turn."""
        return duel_turns(got, lambda who, s, size: one_way_us(s.at(size)))

    def rows(self, turns):
        """[(placement, size, queue, median ours us, median theirs us, median ratio, turns,
        target name, Target)]: the default series, then the polled one where it ran."""
        rows = []
        for series in (OURS, POLLED):
            rows += [(placement, size, QUEUES[series], ours, theirs, r, n, judged_by(size),
                      self.target[judged_by(size)])
                     for placement, size, ours, theirs, r, n in
                     duel_rows(turns, series, THEIRS, ratio)]
        return rows

    def print_summary(self, result, out):
        out.write("\n== ofi: bmi_ofi over tcp;ofi_rxm against fi_pingpong, runs in turns "
                  "(one-way us; ratio: time at 8 B, bandwidth above, median of per-turn "
                  "ratios)\n")
        out.write(f"{'placement':<10} {'size':>6} {'queue':<15} {'bmi':>9} {'fi':>9} "
                  f"{'ratio':>6} {'target':>8}\n")
        for placement, size, queue, ours, theirs, r, _, _, target in self.rows(result):
            out.write(f"{placement:<10} {LABELS[size]:>6} {queue:<15} {ours:>9.3f} "
                      f"{theirs:>9.3f} {r:>6.2f} {str(target):>8}\n")

    def markdown(self, result, report):
        fmt = report.fmt
        out = ["## ofi against libfabric's own ping-pong (ofi study)", "",
               f"`pingpong` over `ofi+tcp` (bmi_ofi on `tcp;ofi_rxm`, default settings: an "
               f"idle instance sleeps on the completion queue's wait descriptor) against "
               f"`fi_pingpong -p \"tcp;ofi_rxm\" -e rdm -m tagged -S SIZE` on the same "
               f"provider, {ROUNDS} turns, the order reversed every other turn, a fresh server "
               f"each run, in three placements. fi_pingpong polls without pause, so on one core "
               f"it runs a tenth of the rounds. Rows whose queue is \"polled\" are bmi_ofi with "
               f"`ofi_wait_descriptor=0` in the same turns, at 8 B: a queue without a "
               f"descriptor, as fi_pingpong's, which an idle server must poll (its CPU is in "
               f"the idle study's table). One-way us: medians over the turns. The ratio is the "
               f"median of the per-turn ratios: bmi / fi_pingpong time at 8 B, bmi / "
               f"fi_pingpong bandwidth at 1 and 4 MiB.", "",
               "| placement | size | queue | bmi (us) | fi_pingpong (us) | ratio | target | "
               "turns | |",
               "|---|---|---|---:|---:|---:|---:|---:|---|"]
        rows = self.rows(result)
        for placement, size, queue, ours, theirs, r, n, name, target in rows:
            met = "met" if target.met(r) else "**not met**"
            out.append(f"| {placement} | {LABELS[size]} | {queue} | {fmt(ours)} | "
                       f"{fmt(theirs)} | {fmt(r)} | {target} | {n} | {met} |")
        if not rows:
            out.append("| - | - | - | - | - | - | - | 0 | no turn measured both |")
        return out + [""]


def measure(runner, who, size, cpus, placement):
    """One run of who at size; fi_pingpong pinned to one core runs a tenth of the rounds."""
    iters = runner.args.iters * (10 if size <= 4096 else 1)
    if who in QUEUES:
        plan = ["--min", str(size), "--max", str(size), "--iters", str(iters)]
        return runner.bmi(METHOD if who == OURS else POLLED_METHOD, "ofi", plan, cpus)
    if placement == "one core":
        iters = max(iters // 10, 10)
    return runner.fi_pingpong(fi_provider(METHOD), cpus, size=size, iters=iters, mode="ofi")
