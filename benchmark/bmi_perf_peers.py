# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's peers mode: a ping-pong with one client while the server holds many other,
idle clients (issue 18: "flat as connections grow"). The idle clients are sessions held by
idle_peers processes: each connected, finished its handshake and left one byte the server
keeps as early data, as quiet clients of a real server do. The target: the ping-pong with
N idle peers costs at most 1.10x the one without, for every N.

Counts are measured in turns (1, 64, ... then again), each turn a fresh server, and the
table shows medians: single tcp runs on a shared VM scatter by more than the 10 % judged.
"""
import os
import resource
import statistics
import subprocess
import time

from bmi_perf_runs import Failure, Series, one_way_us, parse_table

COUNTS = (0, 64, 1024, 10000)
METHODS = ("tcp", "shm")
ROUNDS = 3
TARGET = 1.10  # one-way time with N idle peers / without, at most
# Sessions per idle_peers process: each holds a few descriptors (an shm one about eight:
# epoll set, eventfd, sweep timer, doorbell, socket, the control layer's own).
PER_HOLDER = {"tcp": 3000, "shm": 1000}
# Descriptors the server spends per idle peer: tcp its socket; shm the socket and the peer's
# eventfd.
SERVER_FDS = {"tcp": 1, "shm": 2}
SIZES = (8,)


def take_descriptor_limit(wanted):
    """A server of 10,000 clients needs their descriptors: the limit is raised to wanted, as
    a server's start script or unit does (ulimit -n, LimitNOFILE=); children inherit it. Past
    the hard limit only a privileged process may go (root, as CI runs); elsewhere the soft
    limit goes up to the hard one. Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < wanted:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                ceiling = int(f.read())
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, ceiling),) * 2)
            return min(wanted, ceiling)
        except (OSError, ValueError):
            pass  # not privileged: what the hard limit allows
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def measure(runner, count, cpus, method="tcp"):
    """One run: a fresh pingpong server, count idle clients, then the ping-pong client.
    Returns the Series (not kept in runner.series)."""
    a = runner.args
    exe, holder = runner.tool("pingpong"), runner.tool("idle_peers")
    plan = ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters", str(a.iters * 10)]
    s = Series(f"bmi {method}, {count} idle peers", "peers", f"pingpong {' '.join(plan)}")

    def run():
        if exe is None or holder is None:
            raise Failure("pingpong or idle_peers not found (see --bindir)")
        deadline = time.monotonic() + a.timeout
        common = ["--method-list", f"bmi_{method}", "--timeout-ms", str(a.connect_ms)]
        listen = "tcp://127.0.0.1:0" if method == "tcp" else f"shm://perf-peers-{os.getpid()}"
        procs, holders = [], []
        try:
            server, serr = runner.spawn([exe] + common + ["--server", listen],
                                        None, "srv", cpus[0] if cpus else None)
            procs.append(server)
            addr = runner.read_addr(server, serr)
            left = count
            while left > 0:
                n = min(left, PER_HOLDER[method])
                left -= n
                err = open(os.path.join(runner.tmp, f"idle.{len(holders)}.err"), "w+")
                h = subprocess.Popen([holder, "--connect", addr, "--count", str(n),
                                      "--timeout-ms", str(max(a.connect_ms, 120000))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     bufsize=0)
                holders.append((h, err))
                line = runner.read_line(h, deadline)
                if not line or not line.startswith("READY"):
                    raise Failure(f"idle_peers: {runner.stderr_tail(err)}")
            runner.progress(f"[{runner.done + 1}/{runner.total}] peers: {count} idle held")
            client, cerr = runner.spawn([exe] + common + ["--client", addr] + plan, None,
                                        "cli", cpus[1] if cpus else None)
            procs.append(client)
            text = runner.follow(client, f"peers {count}", deadline)
            codes = runner.finish(procs, deadline)
            if codes[1] != 0:
                raise Failure(f"client exit {codes[1]}: {runner.stderr_tail(cerr)}")
            if codes[0] != 0:
                raise Failure(f"server exit {codes[0]}: {runner.stderr_tail(serr)}")
            return parse_table(text)
        finally:
            for h, _ in holders:
                h.stdin.close()  # idle_peers leaves when its input closes
            runner.finish([h for h, _ in holders], time.monotonic() + 30)
            runner.finish([p for p in procs if p.poll() is None], 0)
    s = runner.record(s, time.monotonic(), run)
    runner.series.remove(s)
    return s


def run(runner, counts=COUNTS, rounds=ROUNDS, method="tcp"):
    """[{count: {bytes: one-way us}}] one per turn; the order of the counts alternates."""
    def fds(n):
        return SERVER_FDS[method] * n + 64

    limit = take_descriptor_limit(fds(max(counts)))
    # What this machine's limit allows the server; a count left out is said, not hidden.
    for n in counts:
        if fds(n) > limit:
            runner.progress(f"peers: {n} idle {method} peers need {fds(n)} descriptors, over "
                            f"the limit of {limit}: left out", final=True)
    counts = [n for n in counts if fds(n) <= limit]
    cpus = runner.one_per_core()
    turns = []
    for turn in range(rounds):
        got = {}
        for count in (counts if turn % 2 == 0 else list(reversed(counts))):
            s = measure(runner, count, cpus, method)
            if s.status == "ok":
                got[count] = {r[0]: one_way_us(r) for r in s.rows}
        turns.append(got)
    return turns


def summary(turns):
    """[(count, {bytes: (median us, median ratio to count 0)})] for every count measured."""
    counts = sorted({n for t in turns for n in t})
    rows = []
    for n in counts:
        per_size = {}
        for size in sorted({b for t in turns if n in t for b in t[n]}):
            usable = [t for t in turns if n in t and 0 in t and size in t[n] and size in t[0]]
            if not usable:
                continue
            per_size[size] = (statistics.median(t[n][size] for t in usable),
                              statistics.median(t[n][size] / t[0][size] for t in usable))
        rows.append((n, per_size))
    return rows


def print_summary(turns, out, method="tcp"):
    rows = summary(turns)
    out.write(f"\n== {method} ping-pong beside idle peers, median of {len(turns)} turns "
              f"(one-way us; ratio to no idle peer, target <= {TARGET:g})\n")
    sizes = sorted({b for _, per in rows for b in per})
    out.write(f"{'idle peers':>10}" + "".join(f" {f'{b} B':>10} {'ratio':>6}" for b in sizes)
              + "\n")
    for n, per in rows:
        out.write(f"{n:>10}" + "".join(
            f" {per[b][0]:>10.2f} {per[b][1]:>6.2f}" if b in per else f" {'-':>10} {'-':>6}"
            for b in sizes) + "\n")


def markdown(turns, fmt, method="tcp"):
    rows = summary(turns)
    out = [f"## {method} beside idle peers (peers mode)", "",
           f"A ping-pong between the server and one client while the server holds N other "
           f"clients, each connected with its handshake done and idle (`idle_peers`), "
           f"{len(turns)} turns over all N, a fresh server each run, pinned one process per "
           f"core. One-way us: medians over the turns; the ratio is the median of the "
           f"per-turn ratios to the run without idle peers. Target: at most {TARGET:g}.", ""]
    sizes = sorted({b for _, per in rows for b in per})
    out += ["| idle peers | " + " | ".join(f"{b} B (us) | ratio" for b in sizes) + " | |",
            "|---:|" + "---:|---:|" * len(sizes) + "---|"]
    for n, per in rows:
        worst = max((per[b][1] for b in per), default=0)
        cells = " | ".join(f"{fmt(per[b][0])} | {fmt(per[b][1])}" if b in per else "- | -"
                           for b in sizes)
        out.append(f"| {n} | {cells} | {'met' if worst <= TARGET else '**not met**'} |")
    return out + [""]
