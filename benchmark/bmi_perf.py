#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf: runs libbmi's benchmark drivers and their peers, prints tables, writes CSV, plots.

This file is the command line; bmi_perf_runs.py starts and follows the processes,
bmi_perf_output.py prints, writes CSV and plots, bmi_perf_doc.py writes the Markdown report.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

LIBEXECDIR = "@LIBEXECDIR@"  # where meson install puts the drivers; replaced at configure time
MODES = ("latency", "bandwidth", "many", "peers", "neighbour", "posted", "placement",
         "encryption")
# peers (a ping-pong beside thousands of idle clients, bmi_perf_peers), neighbour (a CPU-bound
# loop on a waiting client's core, bmi_perf_neighbour) and posted (beside 100,000 receives
# posted, bmi_perf_posted) and placement (8 B and bandwidth in three placements, each against
# its reference, bmi_perf_placement and bmi_perf_placement_bw) and encryption (the ciphers' own
# speed and handshakes per second with encryption, bmi_perf_encryption) run only when asked.
DEFAULT_MODES = ("latency", "bandwidth", "many")
# Modes that their own module measures and reports, in turns: no table series, no plots.
STUDY_MODES = ("peers", "neighbour", "posted", "placement", "encryption")
# shm-blocking: bmi_shm with BMI_SHM_SPIN_US=0; tcp-legacy: bmi_tcp with BMI_TCP_LEGACY=1;
# tcp-encrypted: bmi_tcp with a key and BMI_ENCRYPTION=require
METHODS = ("tcp", "tcp-legacy", "tcp-encrypted", "shm", "shm-blocking")
# tls: TLS 1.3 (AES-256-GCM) over the same loopback, what encrypted libbmi is judged against
BASELINES = ("raw-tcp", "tls", "netpipe", "mpi-tcp", "mpi-shm", "mpi-shm-nocopy", "eventfd",
             "memcpy")


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


def parse_counts(text):
    try:
        counts = sorted({int(n) for n in text.split(",")})
    except ValueError:
        counts = []
    if not counts or counts[0] < 0 or counts[-1] > 100000:
        raise argparse.ArgumentTypeError(f"bad counts {text!r} (e.g. 0,64,1024,10000)")
    return counts


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bmi-perf",
        description="Measure libbmi methods against raw TCP, NetPIPE, Open MPI, eventfd and "
                    "memcpy on one node (or against a running server with --server): "
                    "a table on stdout, CSV, and latency/bandwidth plots via gnuplot.",
        epilog="Example: bmi-perf --quick --methods tcp,shm --out-dir perf. "
               "Modes: latency = ping-pong; bandwidth = windows of --window messages, each "
               "acknowledged; many = --clients clients stream to one server at once; "
               "peers = tcp and shm ping-pong while the server holds --peers idle clients, "
               "in three placements (two cores, one core, unpinned), as posted; "
               "neighbour = a CPU-bound loop on the core of a waiting client, its loss beside "
               "a blocking client and a default one; "
               "posted = tcp and shm ping-pong while the server keeps --posted receives "
               "posted toward its client; "
               "placement = tcp and shm on two cores, one core and unpinned, each against "
               "its reference: 8 B ping-pong (raw TCP polling or blocking, Open MPI vader, "
               "eventfd) and bandwidth from 64 KiB (raw TCP, NetPIPE, memcpy, Open MPI); "
               "encryption = the record ciphers' bytes per second on one core and tcp "
               "handshakes per second keyless, keyed and encrypted.")
    p.add_argument("--methods", type=parse_list(METHODS), default=["tcp", "shm"],
                   help="libbmi methods: tcp, tcp-legacy (BMI_TCP_LEGACY=1: OrangeFS framing; "
                        "in latency mode also against tcp in runs taken in turns), "
                        "tcp-encrypted (a fresh key and BMI_ENCRYPTION=require), "
                        "shm, shm-blocking (BMI_SHM_SPIN_US=0), all "
                        "(default tcp,shm)")
    p.add_argument("--baselines", type=parse_list(BASELINES), default=list(BASELINES),
                   help=f"peers to measure: {', '.join(BASELINES)}, all or none (default all)")
    p.add_argument("--modes", type=parse_list(MODES), default=list(DEFAULT_MODES),
                   help="latency, bandwidth, many, peers, neighbour, posted, placement, "
                        "encryption, or all (default latency,bandwidth,many)")
    p.add_argument("--min", type=parse_size, default=1, help="smallest message (default 1)")
    p.add_argument("--max", type=parse_size, default=None,
                   help="largest message, K/M/G suffixes (default 64M, --quick 1M)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed rounds per size up to 64 KiB, fewer above (default 1000, "
                        "--quick 100)")
    p.add_argument("--window", type=int, default=16, help="messages per window (default 16)")
    p.add_argument("--clients", type=int, default=2, help="clients in many mode (default 2)")
    p.add_argument("--peers", type=parse_counts, default=[0, 64, 1024, 10000],
                   help="idle clients in peers mode, a list (default 0,64,1024,10000; counts "
                        "over the descriptor limit are left out)")
    p.add_argument("--neighbour-seconds", dest="neighbour_seconds", type=float, default=1.0,
                   help="neighbour mode: how long each run of the loop lasts, s (default 1; "
                        "the mode makes 44 runs with tcp and shm)")
    p.add_argument("--posted", type=parse_counts, default=[0, 1000, 100000],
                   help="receives the server keeps posted in posted mode, a list (default "
                        "0,1000,100000)")
    p.add_argument("--check", action="store_true", help="fill and verify every message")
    p.add_argument("--quick", action="store_true", help="smaller plan: up to 1 MiB, 100 rounds")
    p.add_argument("--server", metavar="ADDR",
                   help="connect to a running 'pingpong --method-list bmi_M --server ADDR "
                        "--forever' instead of starting one (its method only; no baselines, "
                        "no many mode)")
    p.add_argument("--out-dir", help="where CSV and plots go (default: a new directory "
                                      "bmi-perf-YYYYmmdd-HHMMSS in the current one)")
    p.add_argument("--csv", default="bmi-perf.csv", help="CSV file name in --out-dir")
    p.add_argument("--plot", choices=("png", "svg", "none"), default="png",
                   help="plot format (default png)")
    p.add_argument("--markdown", metavar="FILE", help="also write a Markdown report "
                   "(how doc/PERFORMANCE.md is made); plots are linked relative to it")
    p.add_argument("--include", metavar="FILE", action="append", default=[],
                   help="with --markdown: append this hand-written Markdown file (measurements "
                        "bmi-perf cannot make, e.g. verbs in an emulated guest); repeatable")
    p.add_argument("--no-idle", dest="idle", action="store_false",
                   help="skip the idle-server CPU measurement")
    p.add_argument("--timeout", type=float, default=600, help="bound per run, s (default 600)")
    p.add_argument("--connect-timeout-ms", dest="connect_ms", type=int, default=10000,
                   help="bound on every single wait of a BMI driver (default 10000)")
    p.add_argument("--bindir", help="directory of the drivers (default: next to bmi-perf, "
                                    "then the installed libexec directory)")
    a = p.parse_args(argv)
    a.max = a.max if a.max is not None else (1 << 20 if a.quick else 64 << 20)
    a.iters = a.iters if a.iters is not None else (100 if a.quick else 1000)
    if not 1 <= a.min <= a.max <= 1 << 30:
        p.error("need 1 <= --min <= --max <= 1G")
    if a.iters < 1 or not 1 <= a.window <= 1024 or not 1 <= a.clients <= 64:
        p.error("--iters >= 1, --window 1..1024, --clients 1..64")
    for f in a.include:
        if not os.path.isfile(f):
            p.error(f"--include {f}: no such file")
    if a.timeout <= 0 or a.connect_ms <= 0:
        p.error("timeouts must be positive")
    if not 0 < a.neighbour_seconds <= 60:
        p.error(f"--neighbour-seconds {a.neighbour_seconds:g}: want more than 0, at most 60")
    if a.server is not None:
        m = re.fullmatch(r"(tcp|shm)://.+", a.server)
        if not m:
            p.error(f"--server {a.server!r}: expected tcp://HOST:PORT or shm://NAME")
        a.methods, a.baselines, a.idle = [m.group(1)], [], False
        a.modes = [m for m in a.modes if m not in ("many",) + STUDY_MODES] or \
            p.error("--server: no many, peers, neighbour, posted, placement or encryption mode")
    if not a.methods and not a.baselines:
        p.error("nothing to measure: --methods and --baselines are both empty")
    if a.out_dir is None:
        a.out_dir = new_out_dir(time.strftime("bmi-perf-%Y%m%d-%H%M%S"))
    return a


def new_out_dir(stem):
    """A name for the default output directory that no earlier run holds (two runs in one
    second get stem, stem-2, ...). Only the name: it is made when there is output to put in it,
    so a run that fails early leaves nothing behind."""
    name, n = stem, 1
    while os.path.lexists(name):
        n += 1
        name = f"{stem}-{n}"
    return name


DUEL_ROUNDS = 5  # runs taken in turns per duel (Runner.duel)
BANDWIDTH_ROUNDS = 3  # turns of the bandwidth duel (Runner.bandwidth_duel): up to 5 runs each
LEGACY_ROUNDS = 5  # turns of the legacy duel (bmi_perf_legacy.run): 2 runs each
PEERS_ROUNDS = 3  # turns of peers mode (bmi_perf_peers.run): one run per count each
RATE_ROUNDS = 3  # turns of the message-rate duel (bmi_perf_rate.run), every placement
POSTED_ROUNDS = 3  # turns of posted mode (bmi_perf_posted.run): one run per method and count
LARGE = 1 << 20  # the bandwidth targets' smallest size (bmi_perf_doc.LARGE)


def peer_methods(a):
    """The methods peers mode measures: tcp and shm, those of --methods."""
    return [m for m in ("tcp", "shm") if m in a.methods]


def wants_blocking_duel(a):
    return "shm-blocking" in a.methods and "eventfd" in a.baselines and "latency" in a.modes


def wants_latency_duel(a):
    return "shm" in a.methods and "mpi-shm" in a.baselines and "latency" in a.modes


def wants_legacy_duel(a):
    """tcp-legacy measured in latency mode: it is also judged against v2 in runs taken in
    turns (bmi_perf_legacy)."""
    return "tcp-legacy" in a.methods and "latency" in a.modes


def wants_rate_duel(a):
    # The message-rate target (bmi_perf_rate) compares tcp against a raw TCP stream.
    return ("tcp" in a.methods and "raw-tcp" in a.baselines and "bandwidth" in a.modes
            and a.server is None)


def bandwidth_duel_runs(a):
    """Runs per turn of the bandwidth duel; 0: no duel (no shm, no peer or no large size)."""
    peers = sum(1 for b in ("mpi-shm", "mpi-shm-nocopy", "memcpy") if b in a.baselines)
    wanted = "shm" in a.methods and "latency" in a.modes and a.max >= LARGE and peers
    return 2 + peers if wanted else 0


def planned_runs(a, placements, neighbour, placement, placement_bw, encryption):
    """How many runs run_all makes, for the progress counter (placements: how many ways a
    blocking duel is pinned, Runner.placements)."""
    n = 2 * DUEL_ROUNDS * ((placements if wants_blocking_duel(a) else 0) +
                           (1 if wants_latency_duel(a) else 0))
    n += BANDWIDTH_ROUNDS * bandwidth_duel_runs(a)
    n += 2 * LEGACY_ROUNDS if wants_legacy_duel(a) else 0
    n += RATE_ROUNDS * (2 * (placements + 1) + ("mpi-tcp" in a.baselines)) \
        if wants_rate_duel(a) else 0
    # peers and posted: every count in the placed ways and unpinned (Runner.three_placements)
    n += PEERS_ROUNDS * len(a.peers) * len(peer_methods(a)) * (placements + 1) \
        if "peers" in a.modes else 0
    n += neighbour.planned_runs(a) if "neighbour" in a.modes else 0
    if "posted" in a.modes:
        n += POSTED_ROUNDS * len(a.posted) * (placements + 1) * \
            sum(1 for m in ("tcp", "shm") if m in a.methods)
    n += placement.planned_runs(a) + placement_bw.planned_runs(a) \
        if "placement" in a.modes else 0
    n += encryption.planned_runs(a) if "encryption" in a.modes else 0
    for mode in (m for m in a.modes if m not in STUDY_MODES):
        n += len(a.methods) + sum(1 for b in a.baselines if b.startswith("mpi-"))
        if mode == "latency":
            n += sum(1 for b in ("netpipe", "eventfd") if b in a.baselines)
        if mode != "many":
            n += "raw-tcp" in a.baselines
            n += "tls" in a.baselines
            n += "memcpy" in a.baselines
    return n


def run_all(r, a, failure, legacy, peers, rate, neighbour, posted, placement, placement_bw,
            encryption):
    for mode in (m for m in a.modes if m not in STUDY_MODES):
        for m in a.methods:
            s = r.bmi(m, mode)
            if a.server is not None and s.status != "ok":
                raise failure(s.status.removeprefix("failed: "))
        if mode in ("latency", "bandwidth") and "raw-tcp" in a.baselines:
            r.pair("raw tcp", mode, "raw_tcp_pingpong", [], "tcp://127.0.0.1:0")
        if mode in ("latency", "bandwidth") and "tls" in a.baselines:
            r.pair("tls", mode, "tls_pingpong", [], "tcp://127.0.0.1:0")
        if mode == "latency":
            if "netpipe" in a.baselines:
                r.netpipe()
            if "eventfd" in a.baselines:
                # Pinned one process per core, as every pair here.
                r.eventfd(mode, ["--iters", str(a.iters * 10)], r.one_per_core())
        for b in a.baselines:
            if b.startswith("mpi-"):
                r.mpi(b, mode)
        if "memcpy" in a.baselines and mode != "many":
            r.command("memcpy", mode, [r.tool("memcpy_bw"), "--min", str(a.min),
                                       "--max", str(a.max)])
    # The targets that single runs cannot settle, judged on runs taken in turns:
    # {"latency": pairs, "blocking, two cores": pairs, ...} (Runner.duel).
    duels = {}
    if wants_latency_duel(a):
        duels["latency"] = r.latency_duel(DUEL_ROUNDS)
    if wants_blocking_duel(a):
        for name, cpus in r.placements():
            duels[f"blocking, {name}"] = r.blocking_duel(DUEL_ROUNDS, cpus)
    if bandwidth_duel_runs(a):
        # From a quarter of LARGE, so that, as in the table runs, the first sizes of a run
        # (whose first ~100 messages through fresh shm buffers are slower: doc/perf/
        # shm-notes.md) are not the ones judged. Every peer gets the same plan.
        duels["bandwidth"] = r.bandwidth_duel(BANDWIDTH_ROUNDS, LARGE // 4)
    if wants_legacy_duel(a):
        duels["legacy"] = legacy.run(r, LEGACY_ROUNDS)
    if wants_rate_duel(a):
        duels["rate"] = rate.run(r, RATE_ROUNDS, "mpi-tcp" in a.baselines)
    if "peers" in a.modes:
        duels["peers"] = {m: peers.run(r, a.peers, PEERS_ROUNDS, m) for m in peer_methods(a)}
    if "neighbour" in a.modes:
        duels["neighbour"] = neighbour.run(r, a.neighbour_seconds)
    if "posted" in a.modes:
        duels["posted"] = posted.run(r, posted.methods_of(a), a.posted, POSTED_ROUNDS)
    if "placement" in a.modes:
        duels["placement"] = placement.run(r, placement.methods_of(a))
        if placement_bw.wanted(a):
            duels["placement bandwidth"] = placement_bw.run(r)
    if "encryption" in a.modes:
        duels["encryption"] = encryption.run(r)
    return duels


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    # The drivers and the other modules live together: with --bindir, next to this script (a
    # build tree), or where meson install put them.
    here = os.path.dirname(os.path.abspath(__file__))
    tool_dirs = [d for d in (a.bindir, here, LIBEXECDIR) if d]
    sys.path[:0] = tool_dirs
    import bmi_perf_encryption as encryption
    import bmi_perf_legacy as legacy
    import bmi_perf_neighbour as neighbour
    import bmi_perf_output as output
    import bmi_perf_peers as peers
    import bmi_perf_placement as placement
    import bmi_perf_placement_bw as placement_bw
    import bmi_perf_posted as posted
    import bmi_perf_rate as rate
    from bmi_perf_runs import Failure, Runner
    print(f"bmi-perf: output directory {a.out_dir}", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="bmi-perf-")
    try:
        r = Runner(a, tmp, tool_dirs)
        r.total = planned_runs(a, len(Runner.placements()), neighbour, placement, placement_bw,
                               encryption)
        load = open("/proc/loadavg").read().split()[:3]
        started = time.time()
        try:
            duel = run_all(r, a, Failure, legacy, peers, rate, neighbour, posted, placement,
                           placement_bw, encryption)
        except Failure as e:
            print(f"bmi-perf: {e}", file=sys.stderr)
            return 1
        idle = {}
        if a.idle:
            for m in (m for m in a.methods if m != "tcp"):
                idle[m] = r.idle_cpu(m)
            if "tcp" in a.methods:
                idle["tcp"] = r.idle_cpu("tcp")
        output.print_tables(r.series, [m for m in a.modes if m not in STUDY_MODES], sys.stdout)
        for m, v in idle.items():
            print(f"idle server CPU, bmi {m}: " + (f"{v:.3f} %" if v is not None else "n/a"))
        # The studies that print their own summary, by their key in duel.
        studies = {"legacy": legacy, "rate": rate, "neighbour": neighbour, "posted": posted,
                   "placement": placement, "placement bandwidth": placement_bw,
                   "encryption": encryption}
        for name, pairs in duel.items():
            if name in studies:
                studies[name].print_summary(pairs, sys.stdout)
                continue
            if name == "peers":
                for method, turns in pairs.items():
                    peers.print_summary(turns, sys.stdout, method)
                continue
            if name == "bandwidth":
                for i, turn in enumerate(pairs):
                    print(f"bandwidth, turn {i + 1} (MB/s): " + "; ".join(
                        f"{size >> 20} MiB " + " ".join(f"{n}={v:g}" for n, v in row.items())
                        for size, row in sorted(turn.items())))
                continue
            print(f"8 B {name}, runs in turns (bmi / peer, us): " +
                  ", ".join(f"{b:g}/{e:g}" for b, e in pairs))
        os.makedirs(a.out_dir, exist_ok=True)
        path = os.path.join(a.out_dir, a.csv)
        output.write_csv(r.series, path)
        print(f"\nCSV: {path}")
        plots = []
        if a.plot != "none":
            for mode in (m for m in a.modes if m not in STUDY_MODES):
                for kind in ("latency", "bandwidth"):
                    f = os.path.join(a.out_dir, f"bmi-perf-{mode}-{kind}.{a.plot}")
                    if output.plot(r.series, mode, kind, f, tmp):
                        plots.append((mode, kind, f))
            print("plots: " + (" ".join(f for _, _, f in plots) or "none (no data, or gnuplot missing)"))
        if a.markdown:
            import bmi_perf_doc
            bmi_perf_doc.write(a.markdown, r.series, idle, duel, plots, a, load,
                               open("/proc/loadavg").read().split()[:3],
                               time.time() - started, argv if argv is not None else sys.argv[1:])
            print(f"Markdown: {a.markdown}")
        bad = [s for s in r.series if s.name.startswith("bmi ") and s.status != "ok"]
        for s in bad:
            print(f"bmi-perf: {s.name} {s.mode}: {s.status}", file=sys.stderr)
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
