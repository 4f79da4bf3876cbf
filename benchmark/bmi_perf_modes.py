# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's command line and its four modes (latency, bandwidth, rate, many): each libbmi
method and each baseline found on this machine, run once per mode, as a table on stdout, a
CSV file and plots.

bmi_perf_runs.py starts and follows the processes, bmi_perf_output.py prints, writes CSV and
plots. The studies in the source tree (benchmark/studies/) build on these modules; nothing
here knows them.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

import bmi_perf_output as output
from bmi_perf_runs import Failure, Runner, Step, provider_word

MODES = ("latency", "bandwidth", "rate", "many")
DEFAULT_MODES = ("latency", "bandwidth", "many")
# shm-blocking: bmi_shm with BMI_SHM_SPIN_US=0; tcp-legacy: bmi_tcp with BMI_TCP_LEGACY=1;
# tcp-encrypted: bmi_tcp with a key and BMI_ENCRYPTION=require; ofi-tcp: bmi_ofi over
# libfabric's tcp;ofi_rxm (built when libfabric is); ofi-tcp-polled: the same with
# BMI_OFI_WAIT_DESCRIPTOR=0 (polls its queue instead of sleeping on its wait descriptor)
METHODS = ("tcp", "tcp-legacy", "tcp-encrypted", "shm", "shm-blocking", "ofi-tcp",
           "ofi-tcp-polled")
# tls: TLS 1.3 (AES-256-GCM) over the same loopback, what encrypted libbmi is judged against;
# handoff: one copy by one CPU of a buffer another CPU has just written, the real ceiling of a
# one-copy transport between two processes (memcpy's warm copy on one CPU is above it)
BASELINES = ("raw-tcp", "tls", "netpipe", "mpi-tcp", "mpi-shm", "mpi-shm-nocopy", "eventfd",
             "memcpy", "handoff", "fi-pingpong")
EPILOG = ("Modes: latency = ping-pong; bandwidth = windows of --window messages, each "
          "acknowledged; rate = the same windows from --min to 4 KiB, as messages per second; "
          "many = --clients clients stream to one server at once.")


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KkMmGg]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 1, 4K, 64M)")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def parse_list(allowed):
    def parse(text):
        items = [] if text in ("", "none") else list(allowed) if text == "all" else text.split(",")
        bad = [i for i in items if i not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad)}; choose from {', '.join(allowed)}, all or none")
        return items
    return parse


def add_options(p, server=True):
    """The options of the modes; server: offer --server (the studies start their own)."""
    p.add_argument("--methods", type=parse_list(METHODS), default=["tcp", "shm"],
                   help="libbmi methods: tcp, tcp-legacy (BMI_TCP_LEGACY=1: OrangeFS framing), "
                        "tcp-encrypted (a fresh key and BMI_ENCRYPTION=require), "
                        "shm, shm-blocking (BMI_SHM_SPIN_US=0), ofi-tcp (bmi_ofi over "
                        "libfabric's tcp;ofi_rxm), all "
                        "(default tcp,shm)")
    p.add_argument("--baselines", type=parse_list(BASELINES), default=None,
                   help=f"peers to measure: {', '.join(BASELINES)}, all or none (default: "
                        "those whose programs are on this machine)")
    p.add_argument("--modes", type=parse_list(MODES), default=list(DEFAULT_MODES),
                   help=f"{', '.join(MODES)}, all or none (default {','.join(DEFAULT_MODES)})")
    p.add_argument("--min", type=parse_size, default=1, help="smallest message (default 1)")
    p.add_argument("--max", type=parse_size, default=None,
                   help="largest message, K/M/G suffixes (default 64M, --quick 1M)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed rounds per size up to 64 KiB, fewer above (default 1000, "
                        "--quick 100)")
    p.add_argument("--window", type=int, default=16, help="messages per window (default 16)")
    p.add_argument("--clients", type=int, default=2, help="clients in many mode (default 2)")
    p.add_argument("--check", action="store_true", help="fill and verify every message")
    p.add_argument("--quick", action="store_true", help="smaller plan: up to 1 MiB, 100 rounds")
    if server:
        p.add_argument("--server", metavar="ADDR",
                       help="connect to a running 'pingpong --method-list bmi_M --server ADDR "
                            "--forever' instead of starting one (its method only; no "
                            "baselines, no many mode)")
    p.add_argument("--out-dir", help="where CSV and plots go (default: a new directory "
                                      "bmi-perf-YYYYmmdd-HHMMSS in the current one)")
    p.add_argument("--csv", default="bmi-perf.csv", help="CSV file name in --out-dir")
    p.add_argument("--plot", choices=("png", "svg", "none"), default="png",
                   help="plot format (default png)")
    p.add_argument("--timeout", type=float, default=600, help="bound per run, s (default 600)")
    p.add_argument("--connect-timeout-ms", dest="connect_ms", type=int, default=10000,
                   help="bound on every single wait of a BMI driver (default 10000)")
    p.add_argument("--bindir", help="directory of the drivers (default: next to bmi-perf, "
                                    "then the installed libexec directory)")


def check_options(p, a):
    """Defaults that depend on other options, and the checks argparse cannot make."""
    a.max = a.max if a.max is not None else (1 << 20 if a.quick else 64 << 20)
    a.iters = a.iters if a.iters is not None else (100 if a.quick else 1000)
    if not 1 <= a.min <= a.max <= 1 << 30:
        p.error("need 1 <= --min <= --max <= 1G")
    if a.iters < 1 or not 1 <= a.window <= 1024 or not 1 <= a.clients <= 64:
        p.error("--iters >= 1, --window 1..1024, --clients 1..64")
    if a.timeout <= 0 or a.connect_ms <= 0:
        p.error("timeouts must be positive")
    a.server = getattr(a, "server", None)
    if a.server is not None:
        m = re.fullmatch(r"(tcp|shm)://.+", a.server)
        if not m:
            p.error(f"--server {a.server!r}: expected tcp://HOST:PORT or shm://NAME")
        a.methods, a.baselines = [m.group(1)], []
        a.modes = [m for m in a.modes if m != "many"] or p.error("--server: no many mode")
    if not a.methods and a.baselines == []:
        p.error("nothing to measure: --methods and --baselines are both empty")
    if a.out_dir is None:
        a.out_dir = new_out_dir(time.strftime("bmi-perf-%Y%m%d-%H%M%S"))


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bmi-perf",
        description="Measure libbmi methods against raw TCP, TLS, NetPIPE, Open MPI, eventfd "
                    "and memcpy on one node (or against a running server with --server): "
                    "a table on stdout, CSV, and latency/bandwidth plots via gnuplot.",
        epilog="Example: bmi-perf --quick --methods tcp,shm --out-dir perf. " + EPILOG)
    add_options(p)
    a = p.parse_args(argv)
    check_options(p, a)
    return a


# The programs a baseline needs, besides the drivers' directory (tool) or on PATH (which).
BASELINE_NEEDS = {"raw-tcp": ("raw_tcp_pingpong",), "tls": ("tls_pingpong",),
                  "netpipe": ("which:NPtcp",), "eventfd": ("eventfd_pingpong",),
                  "memcpy": ("memcpy_bw",), "handoff": ("handoff_copy_bw",),
                  "fi-pingpong": ("which:fi_pingpong",)}
BASELINE_NEEDS.update((b, ("mpi_pingpong", "which:mpirun"))
                      for b in BASELINES if b.startswith("mpi-"))


def find_baselines(r, a):
    """Without --baselines: those whose programs this machine has, and say which are not."""
    if a.baselines is not None:
        return

    def found(need):
        return shutil.which(need[6:]) if need.startswith("which:") else r.tool(need)

    a.baselines = [b for b in BASELINES if all(found(n) for n in BASELINE_NEEDS[b])]
    missing = [b for b in BASELINES if b not in a.baselines]
    if missing:
        r.progress(f"baselines not on this machine, not measured: {', '.join(missing)}",
                   final=True)


def new_out_dir(stem):
    """A name for the default output directory that no earlier run holds (two runs in one
    second get stem, stem-2, ...). Only the name: it is made when there is output to put in it,
    so a run that fails early leaves nothing behind."""
    name, n = stem, 1
    while os.path.lexists(name):
        n += 1
        name = f"{stem}-{n}"
    return name


def plan(r, a):
    """The runs of the modes, in order: each method, then each baseline a mode has."""
    steps = []

    def add(measure):
        steps.append(Step(None, measure))

    for mode in a.modes:
        for m in a.methods:
            add(lambda m=m, mode=mode: checked(r, a, r.bmi(m, mode)))
        if mode != "many" and "raw-tcp" in a.baselines:
            add(lambda mode=mode: r.pair("raw tcp", mode, "raw_tcp_pingpong", [],
                                         "tcp://127.0.0.1:0"))
        if mode != "many" and "tls" in a.baselines:
            add(lambda mode=mode: r.pair("tls", mode, "tls_pingpong", [], "tcp://127.0.0.1:0"))
        if mode == "latency" and "netpipe" in a.baselines:
            add(r.netpipe)
        if mode == "latency" and "fi-pingpong" in a.baselines:
            # The floor of each provider an ofi series runs on, pinned as the pairs are.
            for provider in sorted({fi_provider(m) for m in a.methods if m.startswith("ofi")}):
                add(lambda p=provider: r.fi_pingpong(p, r.one_per_core()))
        if mode == "latency" and "eventfd" in a.baselines:
            # Pinned one process per core, as every pair here.
            add(lambda: r.eventfd("latency", ["--iters", str(a.iters * 10)], r.one_per_core()))
        for b in (b for b in a.baselines if b.startswith("mpi-")):
            add(lambda b=b, mode=mode: r.mpi(b, mode))
        if mode in ("latency", "bandwidth") and "memcpy" in a.baselines:
            # One copy, the ceiling of shared memory: no messages, so no rate and no clients.
            add(lambda mode=mode: r.command("memcpy", mode, [
                r.tool("memcpy_bw"), "--min", str(a.min), "--max", str(a.max)]))
        if mode in ("latency", "bandwidth") and "handoff" in a.baselines:
            # One copy between two cores, as the pairs are pinned.
            add(lambda mode=mode: r.handoff(mode, r.one_per_core()))
    return steps


def fi_provider(method):
    """libfabric's provider string for an ofi-WORD[-VARIANT] series, as bmi_ofi asks fi_getinfo
    for it (doc/methods/ofi.md): tcp and verbs through ofi_rxm, any other word as it is."""
    word = provider_word(method)
    return f"{word};ofi_rxm" if word in ("tcp", "verbs") else word


def checked(r, a, s):
    """A libbmi run; against --server, the first one that fails ends bmi-perf."""
    if a.server is not None and s.status != "ok":
        raise Failure(s.status.removeprefix("failed: "))
    return s


def write_outputs(r, a, tmp):
    """Tables on stdout, the CSV file and the plots into --out-dir: [(mode, kind, file)]."""
    output.print_tables(r.series, a.modes, sys.stdout)
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, a.csv)
    output.write_csv(r.series, path)
    print(f"\nCSV: {path}")
    plots = []
    if a.plot != "none":
        for mode in a.modes:
            for kind in output.kinds(mode):
                f = os.path.join(a.out_dir, f"bmi-perf-{mode}-{kind}.{a.plot}")
                if output.plot(r.series, mode, kind, f, tmp):
                    plots.append((mode, kind, f))
        print("plots: " + (" ".join(f for _, _, f in plots) or
                           "none (no data, or gnuplot missing)"))
    return plots


def report_count(r, planned, prog="bmi-perf"):
    """The runs made against the plan's count: a difference is a fault of the plan."""
    print(f"{prog}: {r.done} runs made of {planned} planned", file=sys.stderr)
    return r.done == planned


def failed_bmi_runs(r, prog="bmi-perf"):
    bad = [s for s in r.series if s.name.startswith("bmi ") and s.status != "ok"]
    for s in bad:
        print(f"{prog}: {s.name} {s.mode}: {s.status}", file=sys.stderr)
    return bad


def main(argv, tool_dirs):
    a = parse_args(argv)
    tool_dirs = [a.bindir] + tool_dirs if a.bindir else tool_dirs
    print(f"bmi-perf: output directory {a.out_dir}", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="bmi-perf-")
    try:
        r = Runner(a, tmp, tool_dirs)
        find_baselines(r, a)
        steps = plan(r, a)
        r.total = len(steps)
        try:
            r.execute(steps)
        except Failure as e:
            print(f"bmi-perf: {e}", file=sys.stderr)
            return 1
        write_outputs(r, a, tmp)
        counted = report_count(r, len(steps))
        return 1 if failed_bmi_runs(r) or not counted else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
