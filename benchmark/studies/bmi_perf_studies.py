#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf-studies: bmi-perf's modes and the studies of registry.py in one run, judged
against targets.tsv; with --markdown, the report doc/PERFORMANCE.md is.

Not installed. In a build tree it sits in benchmark/studies/, beside which benchmark/ holds
the drivers and bmi-perf's modules; from the source tree, give --bindir BUILD/benchmark.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = "bmi-perf-studies"


def parse_counts(text):
    try:
        counts = sorted({int(n) for n in text.split(",")})
    except ValueError:
        counts = []
    if not counts or counts[0] < 0 or counts[-1] > 100000:
        raise argparse.ArgumentTypeError(f"bad counts {text!r} (e.g. 0,64,1024,10000)")
    return counts


def parse_args(argv, modes, registry, neighbour, idle):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="bmi-perf's modes and the studies, each judged against its targets "
                    "(targets.tsv) in runs taken in turns; --markdown writes the report "
                    "doc/PERFORMANCE.md is made of.",
        epilog=modes.EPILOG + " Studies: " + ", ".join(registry.NAMES) + " (each module's "
               "description says what it measures).")
    modes.add_options(p, server=False)
    p.add_argument("--studies", type=modes.parse_list(registry.NAMES),
                   default=list(registry.DEFAULT),
                   help=f"{', '.join(registry.NAMES)}, all or none (default "
                        f"{','.join(registry.DEFAULT)})")
    p.add_argument("--targets", default=os.path.join(HERE, "targets.tsv"),
                   help="the targets table (default targets.tsv beside this program)")
    p.add_argument("--peers", type=parse_counts, default=[0, 64, 1024, 10000],
                   help="idle clients of the peers study, a list (default 0,64,1024,10000; "
                        "counts over the descriptor limit are left out)")
    p.add_argument("--posted", type=parse_counts, default=[0, 1000, 100000],
                   help="receives the server keeps posted in the posted study, a list "
                        "(default 0,1000,100000)")
    p.add_argument("--neighbour-seconds", dest="neighbour_seconds", type=float,
                   default=neighbour.SECONDS,
                   help="neighbour study: how long each run of the loop lasts, s (default "
                        f"{neighbour.SECONDS:g})")
    p.add_argument("--idle-seconds", dest="idle_seconds", type=float, default=idle.SECONDS,
                   help="idle study: how long each server's CPU is watched, s (default "
                        f"{idle.SECONDS:g})")
    p.add_argument("--markdown", metavar="FILE", help="also write a Markdown report "
                   "(how doc/PERFORMANCE.md is made); plots are linked relative to it")
    p.add_argument("--include", metavar="FILE", action="append", default=[],
                   help="with --markdown: append this hand-written Markdown file (measurements "
                        "the studies cannot make, e.g. verbs in an emulated guest); repeatable")
    a = p.parse_args(argv)
    for f in a.include:
        if not os.path.isfile(f):
            p.error(f"--include {f}: no such file")
    if not 0 < a.neighbour_seconds <= 60:
        p.error(f"--neighbour-seconds {a.neighbour_seconds:g}: want more than 0, at most 60")
    if not 0 < a.idle_seconds <= 60:
        p.error(f"--idle-seconds {a.idle_seconds:g}: want more than 0, at most 60")
    modes.check_options(p, a)
    return a


def bindir_of(argv):
    """--bindir before the modules that it may hold are imported."""
    for i, arg in enumerate(argv):
        if arg == "--bindir" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--bindir="):
            return arg.split("=", 1)[1]
    return None


def main(argv):
    # bmi-perf's modules beside this program win over any in --bindir: both come from one
    # tree. The drivers are looked for in --bindir first.
    beside = os.path.dirname(HERE)
    sys.path[:0] = [HERE, beside]
    tool_dirs = [d for d in (bindir_of(argv), beside) if d]
    import bmi_perf_modes as modes
    import idle
    import neighbour
    import registry
    import report
    from bmi_perf_runs import Runner
    from targets import Table

    a = parse_args(argv, modes, registry, neighbour, idle)
    try:
        studies = registry.studies(Table(a.targets), a.studies)
    except (OSError, ValueError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(f"{PROG}: output directory {a.out_dir}", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="bmi-perf-")
    try:
        r = Runner(a, tmp, tool_dirs)
        modes.find_baselines(r, a)
        tables = modes.plan(r, a)
        plans = [(s, s.plan(r)) for s in studies if s.wanted(a)]
        r.total = len(tables) + sum(len(steps) for _, steps in plans)
        print(f"{PROG}: {r.total} runs planned: {len(tables)} for the tables, " +
              ", ".join(f"{len(steps)} {s.name}" for s, steps in plans), file=sys.stderr)
        load = open("/proc/loadavg").read().split()[:3]
        started = time.time()
        r.execute(tables)
        results = []
        for s, steps in plans:
            kept = len(r.series)
            got = r.execute(steps)
            del r.series[kept:]  # a study's runs are no table series
            results.append((s, s.fold(got)))
        plots = modes.write_outputs(r, a, tmp)
        for s, result in results:
            s.print_summary(result, sys.stdout)
        if a.markdown:
            context = report.Context(r.series)
            sections = [line for s, result in results for line in s.markdown(result, context)]
            report.write(a.markdown, r.series, sections, plots, a, load,
                         open("/proc/loadavg").read().split()[:3], time.time() - started, argv)
            print(f"Markdown: {a.markdown}")
        counted = modes.report_count(r, r.total, PROG)
        return 1 if modes.failed_bmi_runs(r, PROG) or not counted else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
