# SPDX-License-Identifier: LGPL-2.1-or-later
"""The peers study: a ping-pong with one client while the server holds many other,
idle clients (issue 18: "flat as connections grow"). The idle clients are sessions held by
idle_peers processes: each connected, finished its handshake and left one byte the server
keeps as early data, as quiet clients of a real server do. The target (targets.tsv): the
ping-pong with N idle peers costs at most a set ratio of the one without, for every N.

Counts are measured in turns (1, 64, ... then again), each turn a fresh server, and the
table shows medians: single tcp runs on a shared VM scatter by more than the 10 % judged.
Every turn runs the counts in the three placements of issue 18 (two cores, one core,
unpinned), and each placement is judged against its own run without idle peers: on one core
every message is a wake-up, and a wake-up must not cost more for the idle ones either.
"""
import os
import resource
import statistics
import subprocess
import time

from bmi_perf_runs import Failure, Series, Step, one_way_us, parse_table
from study import UNPINNED, Study, in_turns, three_placements

METHODS = ("tcp", "shm")
ROUNDS = 3
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


def measure(runner, count, cpus, method="tcp", placement="two cores"):
    """One run: a fresh pingpong server, count idle clients, then the ping-pong client, the
    two pinned to cpus (server, client) or left to the scheduler (None); the idle clients'
    holders are never pinned. Returns the Series (not kept in runner.series)."""
    a = runner.args
    exe, holder = runner.tool("pingpong"), runner.tool("idle_peers")
    plan = ["--min", str(SIZES[0]), "--max", str(SIZES[-1]), "--iters", str(a.iters * 10)]
    s = Series(f"bmi {method}, {count} idle peers, {placement}", "peers",
               f"pingpong {' '.join(plan)}")

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
            runner.progress(f"[{runner.done + 1}/{runner.total}] peers: {count} idle held "
                            f"({placement})")
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
    return runner.record(s, time.monotonic(), run)


def counts_within_limit(runner, method, counts):
    """The counts this machine's descriptor limit allows the server; a count left out is
    said, not hidden."""
    def fds(n):
        return SERVER_FDS[method] * n + 64

    limit = take_descriptor_limit(fds(max(counts)))
    for n in counts:
        if fds(n) > limit:
            runner.progress(f"peers: {n} idle {method} peers need {fds(n)} descriptors, over "
                            f"the limit of {limit}: left out", final=True)
    return [n for n in counts if fds(n) <= limit]


def count_steps(runner, method, counts, measure):
    """Every count in each of the three placements per turn, the order of the counts
    reversing every other turn: Steps keyed (method, placement, turn, count)."""
    return [Step((method, name, turn, count),
                 lambda count=count, cpus=cpus, name=name: measure(count, cpus, name))
            for turn in range(ROUNDS) for name, cpus in three_placements(runner)
            for count in in_turns(turn, counts)]


def fold_counts(got):
    """{method: {placement: [{count: {bytes: one-way us}}]}} one dict per turn, holding the
    counts whose run succeeded."""
    out = {}
    for (method, placement, turn, count), s in got:
        turns = out.setdefault(method, {}).setdefault(placement, [])
        while len(turns) <= turn:
            turns.append({})
        if s.status == "ok":
            turns[turn][count] = {r[0]: one_way_us(r) for r in s.rows}
    return out


class Peers(Study):
    name, targets = "peers", ("with-vs-without",)

    def wanted(self, a):
        return any(m in a.methods for m in METHODS)

    def plan(self, runner):
        steps = []
        for m in (m for m in METHODS if m in runner.args.methods):
            counts = counts_within_limit(runner, m, runner.args.peers)
            steps += count_steps(runner, m, counts, lambda count, cpus, name, m=m: measure(
                runner, count, cpus, m, name))
        return steps

    def fold(self, got):
        return fold_counts(got)

    def print_summary(self, result, out):
        for method, placements in result.items():
            print_summary(placements, out, self.target["with-vs-without"], method)

    def markdown(self, result, report):
        return [line for method, placements in result.items()
                for line in markdown(placements, report.fmt, self.target["with-vs-without"],
                                     method)]


def judged_against(placement, absent):
    """What a placement's runs are divided by (baselines), for a table's heading; absent: how
    the baseline run differs ("without idle peers")."""
    return f"the slower placed run {absent}" if placement == UNPINNED else f"the run {absent}"


def baselines(placements):
    """{placement: [{bytes: us}] per turn}: what each turn's runs of that placement are
    divided by. A placed run: the same placement's run without idle peers. Unpinned: the
    slower of the same turn's two placed runs without idle peers, as the placement study judges an
    unpinned run. Left to the scheduler, a ping-pong settles either on two cores (spinning,
    0.3 us over shm) or on one (taking turns, 3-5 us) and stays there, whatever else runs:
    the ratio to another unpinned run measures that draw, not the idle peers."""
    out = {}
    for placement, turns in placements.items():
        if placement != UNPINNED:
            out[placement] = [t.get(0, {}) for t in turns]
            continue
        placed = [p for p in placements if p != UNPINNED]
        refs = []
        for i in range(len(turns)):
            zero = [placements[p][i].get(0, {}) for p in placed if i < len(placements[p])]
            sizes = set.intersection(*(set(z) for z in zero)) if zero else set()
            refs.append({b: max(z[b] for z in zero) for b in sizes})
        out[placement] = refs
    return out


def summary(turns, refs=None):
    """[(count, {bytes: (median us, median ratio)})] for every count measured; the ratio of
    each turn is to refs[turn] (default: the turn's run without idle peers)."""
    if refs is None:
        refs = [t.get(0, {}) for t in turns]
    counts = sorted({n for t in turns for n in t})
    rows = []
    for n in counts:
        per_size = {}
        for size in sorted({b for t in turns if n in t for b in t[n]}):
            usable = [(t, r) for t, r in zip(turns, refs) if n in t and size in t[n] and
                      size in r]
            if not usable:
                continue
            per_size[size] = (statistics.median(t[n][size] for t, _ in usable),
                              statistics.median(t[n][size] / r[size] for t, r in usable))
        rows.append((n, per_size))
    return rows


def print_summary(placements, out, target, method):
    """placements: run()'s result; a table per placement."""
    refs = baselines(placements)
    for placement, turns in placements.items():
        rows = summary(turns, refs[placement])
        out.write(f"\n== {method} ping-pong beside idle peers, {placement}, median of "
                  f"{len(turns)} turns (one-way us; ratio to "
                  f"{judged_against(placement, 'without idle peers')}, target {target})\n")
        sizes = sorted({b for _, per in rows for b in per})
        out.write(f"{'idle peers':>10}" +
                  "".join(f" {f'{b} B':>10} {'ratio':>6}" for b in sizes) + "\n")
        for n, per in rows:
            out.write(f"{n:>10}" + "".join(
                f" {per[b][0]:>10.2f} {per[b][1]:>6.2f}" if b in per else f" {'-':>10} {'-':>6}"
                for b in sizes) + "\n")


def markdown(placements, fmt, target, method):
    """A section per method: a row per placement and count."""
    rounds = max((len(t) for t in placements.values()), default=0)
    out = [f"## {method} beside idle peers (peers study)", "",
           f"A ping-pong between the server and one client while the server holds N other "
           f"clients, each connected with its handshake done and idle (`idle_peers`), "
           f"{rounds} turns over all N, a fresh server each run, in three placements: server "
           f"and client pinned one per core, both pinned to one core, and left to the "
           f"scheduler (the holders of the idle clients are never pinned). One-way us: "
           f"medians over the turns; the ratio is the median of the per-turn ratios to the "
           f"run without idle peers in the same placement, and for unpinned runs to the "
           f"slower of the two placed runs without idle peers of the same turn (left to the "
           f"scheduler, a ping-pong settles on two cores or on one and stays there: a ratio "
           f"to another unpinned run would measure that draw). Target: {target} in "
           f"each placement.", ""]
    refs = baselines(placements)
    sizes = sorted({b for p, turns in placements.items() for _, per in summary(turns, refs[p])
                    for b in per})
    out += ["| placement | idle peers | " + " | ".join(f"{b} B (us) | ratio" for b in sizes)
            + " | |", "|---|---:|" + "---:|---:|" * len(sizes) + "---|"]
    for placement, turns in placements.items():
        for n, per in summary(turns, refs[placement]):
            worst = max((per[b][1] for b in per), default=0)
            cells = " | ".join(f"{fmt(per[b][0])} | {fmt(per[b][1])}" if b in per else "- | -"
                               for b in sizes)
            verdict = "met" if per and target.met(worst) else "**not met**"
            out.append(f"| {placement} | {n} | {cells} | {verdict} |")
    return out + [""]
