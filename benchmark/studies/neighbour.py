# SPDX-License-Identifier: LGPL-2.1-or-later
"""The neighbour study (issue 18, a neighbour's fair share): how much of its core a
CPU-bound loop (cpu_neighbour) keeps beside a libbmi client that waits for its replies.

The server runs on one core; the client and the loop share the other. The loop's rate is
taken (a) alone, (b) beside a client in pure blocking mode (BMI_<METHOD>_SPIN_US=0 on both
ends) and (c) beside a client with libbmi's default settings, for tcp and shm, at 8 B (eager)
and 128 KiB (rendezvous on both methods: their eager limits are 64 and 16 KiB). The loop
counts from the client's first line (its hello is done, its rounds start) to its row (its last
round is done), so it runs only while the client does; the client's rounds are sized by two
pilot runs, and resized after every run, to last about --neighbour-seconds. Alone, it counts
for that long.

loss = 1 - rate / rate alone, per turn; the turns run a, b, c, a, b, c, ... so each loss sees
the machine its alone rate saw, and the table shows medians. The target, "loses no more than
10 % more throughput than beside a client in pure blocking mode", is read as
loss(default) <= loss(blocking) + 0.10: ten points of the loop's throughput alone, not a tenth
of the blocking loss. It is judged on the median over the turns of loss(default) -
loss(blocking), each difference from one turn's runs (the medians of the two losses may come
from different turns). What the neighbour's owner sees is the share of the core taken from it;
and beside a blocking client the loss may be a few percent, a tenth of which no turns on a
shared machine can tell apart.
"""
import os
import signal
import statistics
import time

from bmi_perf_runs import Failure, Step, one_way_us, parse_table
from study import Study, cpu_seconds

SIZES = (8, 128 << 10)
ROUNDS = 3
SECONDS = 1.0  # default window of one run (--neighbour-seconds)
STATES = ("alone", "blocking", "default")
SPIN = {"tcp": "BMI_TCP_SPIN_US", "shm": "BMI_SHM_SPIN_US"}
PILOT_ITERS = 100  # --iters of a state's first pilot
# Two pilots per client state size the turns' runs: the first 100 rounds beside the loop are no
# guide to the steady latency (doc/perf/code-figures.md, "bmi-perf"), so a second pilot, sized
# by the first to a quarter of the window, comes closer; every run then resizes the next.
PILOTS = 2
GROWTH = 100  # at most this factor between the --iters of two runs: a pilot's window is short


def state_env(method, state):
    """Both ends of the ping-pong get it. None unsets: "default" means libbmi's default even
    when the caller's environment sets a spin."""
    return {SPIN[method]: "0" if state == "blocking" else None}


def resized(iters, window, seconds):
    """--iters for a window of about seconds, after iters took window seconds."""
    factor = min(max(seconds / max(window, 1e-6), 1 / GROWTH), GROWTH)
    return int(min(max(iters * factor, 20), 100_000_000))


def start_loop(runner, cpu, deadline, seconds=None):
    """cpu_neighbour pinned to cpu: counting for seconds, or (None) waiting for SIGUSR1."""
    loop = runner.tool("cpu_neighbour")
    if loop is None:
        raise Failure("cpu_neighbour not found (see --bindir)")
    bound = seconds if seconds is not None else min(3600, runner.args.timeout)
    argv = [loop, "--seconds", f"{bound:g}"] + ([] if seconds is not None else ["--on-signal"])
    proc, err = runner.spawn(argv, None, "loop", cpu)
    if seconds is None and runner.read_line(proc, deadline) != "READY\n":
        runner.finish([proc], 0)
        raise Failure(f"cpu_neighbour: {runner.stderr_tail(err)}")
    return proc, err


def loop_result(runner, loop, deadline):
    """{"rate": iterations/s, "share": the loop's CPU time / its window} from its line."""
    proc, err = loop
    line = runner.read_line(proc, deadline) or ""
    words = line.split()
    if runner.finish([proc], deadline)[0] != 0 or len(words) != 8 or words[4] != "per_second":
        raise Failure(f"cpu_neighbour printed {line.strip()!r}: {runner.stderr_tail(err)}")
    return {"rate": float(words[5]), "share": float(words[7]) / max(float(words[3]), 1e-9)}


def alone(runner, cpus, seconds):
    """The loop's rate with its core to itself (the server's core stays idle too)."""
    deadline = time.monotonic() + runner.args.timeout
    loop = start_loop(runner, cpus[0], deadline, seconds)
    try:
        return loop_result(runner, loop, deadline)
    finally:
        runner.finish([loop[0]] if loop[0].poll() is None else [], 0)


def beside_client(runner, method, size, state, iters, cpus):
    """One ping-pong of iters rounds with the loop on the client's core: loop_result with
    the client's one-way time ("us") and CPU share ("cpu"). The loop counts from the client's first line to its row.
    The client's CPU share over that window is what it took from the core, whatever else
    runs on the machine: on a loaded one, other tasks move between the cores as ours come
    and go, and the loop's rate alone moves with them."""
    a, exe = runner.args, runner.tool("pingpong")
    if exe is None:
        raise Failure("pingpong not found (see --bindir)")
    deadline = time.monotonic() + a.timeout
    env = state_env(method, state)
    listen = (f"shm://bmi-perf-nb-{os.getpid()}-{runner.done}" if method == "shm"
              else "tcp://127.0.0.1:0")
    common = ["--method-list", f"bmi_{method}", "--timeout-ms", str(a.connect_ms)]
    plan = ["--min", str(size), "--max", str(size), "--iters", str(iters)]
    loop = start_loop(runner, cpus[0], deadline)
    procs = [loop[0]]
    try:
        server, serr = runner.spawn([exe] + common + ["--server", listen], env, "srv", cpus[1])
        procs.append(server)
        addr = runner.read_addr(server, serr)
        client, cerr = runner.spawn([exe] + common + ["--client", addr] + plan, env, "cli",
                                    cpus[0])
        procs.append(client)
        lines, row_seen, window = [], False, []
        while (line := runner.read_line(client, deadline)) != "":
            if line is None:
                raise Failure(f"no result within {a.timeout:g} s")
            if not lines:
                loop[0].send_signal(signal.SIGUSR1)  # the hello is done: the rounds start
                window.append((time.monotonic(), cpu_seconds(client.pid)))
            elif line[:1] == " " and not row_seen:
                loop[0].send_signal(signal.SIGUSR2)  # the last round is done
                window.append((time.monotonic(), cpu_seconds(client.pid)))
                row_seen = True
            lines.append(line)
        if not row_seen:
            runner.finish(procs[1:], deadline)
            raise Failure(f"client printed no row: {runner.stderr_tail(cerr)}")
        got = loop_result(runner, loop, deadline)
        codes = runner.finish(procs[1:], deadline)
        if codes != [0, 0]:
            raise Failure(f"server exit {codes[0]} ({runner.stderr_tail(serr)}), "
                          f"client exit {codes[1]} ({runner.stderr_tail(cerr)})")
        (t0, c0), (t1, c1) = window
        return dict(got, us=one_way_us(parse_table("".join(lines))[0]),
                    cpu=(c1 - c0) / max(t1 - t0, 1e-6), window=t1 - t0)
    finally:
        runner.finish([p for p in procs if p.poll() is None], 0)


def steps_of(runner, method, size, cpus, seconds):
    """Two pilots per client state, then the turns (alone, blocking, default); keys
    ("pilot", ...) or (method, size, turn, state)."""
    iters = {state: PILOT_ITERS for state in STATES[1:]}

    def beside(state, label, after=lambda: None):
        def measure():
            got = runner.attempt(f"neighbour {method} {size} B {state}{label}",
                                 lambda: beside_client(runner, method, size, state,
                                                       iters[state], cpus))
            if got:
                iters[state] = resized(iters[state], got["window"], seconds)
            after()
            return got
        return measure

    def quarter(state):
        iters[state] = max(20, iters[state] // 4)

    steps = []
    for state in STATES[1:]:
        steps += [Step(("pilot", state, 1), beside(state, ", pilot", lambda s=state: quarter(s))),
                  Step(("pilot", state, 2), beside(state, ", pilot"))]
    for turn in range(ROUNDS):
        steps.append(Step((method, size, turn, "alone"), lambda: runner.attempt(
            f"neighbour {method} {size} B alone", lambda: alone(runner, cpus, seconds))))
        steps += [Step((method, size, turn, state), beside(state, "")) for state in STATES[1:]]
    return steps


class Neighbour(Study):
    name, targets = "neighbour", ("default-minus-blocking",)

    def wanted(self, a):
        return "tcp" in a.methods or "shm" in a.methods

    def plan(self, runner):
        """Nothing where this process may use only one CPU: the server needs a core of its
        own (the loop and the client share the first CPU, the server the second)."""
        cpus = runner.one_per_core()
        if cpus is None:
            runner.progress("neighbour: not measured, it needs two CPUs", final=True)
            return []
        return [step for method in ("tcp", "shm") if method in runner.args.methods
                for size in SIZES
                for step in steps_of(runner, method, size, cpus, runner.args.neighbour_seconds)]

    def fold(self, got):
        """{(method, bytes): [{state: loop_result, beside a client with "us" and "cpu"}] one
        per turn}, each turn holding the states whose run succeeded."""
        results = {}
        for key, value in got:
            if key[0] == "pilot":
                continue
            method, size, turn, state = key
            turns = results.setdefault((method, size), [])
            while len(turns) <= turn:
                turns.append({})
            if value:
                turns[turn][state] = value
        return results

    def print_summary(self, result, out):
        print_summary(result, out, self.target["default-minus-blocking"].limit)

    def markdown(self, result, report):
        return markdown(result, report.fmt, self.target["default-minus-blocking"].limit)


def summary(results, margin):
    """[(method, bytes, None or {"alone": rate, "loss": {state: median}, "gap": median of
    loss(default) - loss(blocking),
    "us": {state: median}, "cpu": {state: median}, "turns": n, "met": bool})] from the turns
    where all states ran."""
    rows = []
    for (method, size), turns in results.items():
        full = [t for t in turns if all(s in t for s in STATES) and t["alone"]["rate"] > 0]
        if not full:
            rows.append((method, size, None))
            continue
        clients = STATES[1:]
        loss = {s: statistics.median(1 - t[s]["rate"] / t["alone"]["rate"] for t in full)
                for s in clients}
        gap = statistics.median((t["blocking"]["rate"] - t["default"]["rate"]) /
                                t["alone"]["rate"] for t in full)
        rows.append((method, size, {
            "alone": statistics.median(t["alone"]["rate"] for t in full),
            "loss": loss,
            "gap": gap,
            "us": {s: statistics.median(t[s]["us"] for t in full) for s in clients},
            "cpu": {s: statistics.median(t[s]["cpu"] for t in full) for s in clients},
            "turns": len(full),
            "met": gap <= margin}))
    return rows


def cells(row):
    """The measured columns of a row, as text: alone rate, losses, latencies, client CPU."""
    loss, us, cpu = row["loss"], row["us"], row["cpu"]
    return ([f"{row['alone'] / 1e6:.1f}"] +
            [f"{loss[s] * 100:.1f} %" for s in STATES[1:]] + [f"{row['gap'] * 100:+.1f}"] +
            [f"{us[s]:.2f}" for s in STATES[1:]] +
            [f"{cpu[s] * 100:.1f} %" for s in STATES[1:]])


HEAD = ["alone (M it/s)", "loss, spin 0", "loss, default", "default - spin 0 (points)",
        "one-way us, spin 0", "one-way us, default", "client CPU, spin 0", "client CPU, default"]


def print_summary(results, out, margin):
    out.write("\n== a neighbour's fair share: a CPU-bound loop on the client's core "
              "(server on the other), medians of turns\n"
              "   loss = 1 - loop rate / rate alone; target: loss beside the default client "
              f"<= loss beside a blocking one (spin 0) + {margin * 100:g} points (median of "
              "the turns' differences)\n")
    if not results:
        out.write("   not measured: needs two CPUs (or --methods without tcp and shm)\n")
        return
    widths = [max(len(h), 8) for h in HEAD]
    out.write(f"{'method':>6} {'bytes':>7} " + " ".join(f"{h:>{w}}" for h, w in zip(HEAD, widths))
              + f" {'turns':>5}  verdict\n")
    for method, size, row in summary(results, margin):
        if row is None:
            out.write(f"{method:>6} {size:>7} (no turn with all three runs)\n")
            continue
        out.write(f"{method:>6} {size:>7} " + " ".join(
            f"{c:>{w}}" for c, w in zip(cells(row), widths)) +
            f" {row['turns']:>5}  {'met' if row['met'] else 'not met'}\n")
    # The turns themselves: how far apart single runs are, and the loop's share of its core
    # in each (on a loaded machine other tasks leave or join the core as ours come and go).
    for (method, size), turns in results.items():
        out.write(f"neighbour {method} {size} B, turns (alone/spin 0/default: M it/s at the "
                  "loop's share of the core): " + ", ".join(
                      "/".join(f"{t[s]['rate'] / 1e6:.0f} at {t[s]['share'] * 100:.0f} %"
                               if s in t else "-" for s in STATES) for t in turns) + "\n")


def markdown(results, fmt, margin):
    out = ["## A neighbour's fair share (neighbour study)", "",
           "A CPU-bound loop (`cpu_neighbour`) pinned to the core of a ping-pong client, the "
           "server pinned to the other core. The loop's rate is taken alone, beside a client "
           "that sleeps at once (`BMI_TCP_SPIN_US=0` / `BMI_SHM_SPIN_US=0` on both ends) and "
           "beside a client with the default settings, in turns (alone, blocking, default, "
           "...). Beside a client it counts only while the client's rounds run. Loss = 1 - "
           "rate / the same turn's rate alone; the table shows medians over the turns, the "
           "client's one-way time (the price of each choice) and the client's CPU time over "
           "the window (what it took from the core, which other load on the machine does not "
           "move). Target: the loss beside the default client at most "
           f"{margin * 100:g} points above the loss beside the blocking one (points of the "
           "loop's throughput alone), judged on the median of the turns' differences.", ""]
    if not results:
        return out + ["Not measured: it needs two CPUs, and tcp or shm in `--methods`.", ""]
    out += ["| method | bytes | " + " | ".join(HEAD) + " | turns | |",
            "|---|" + "---:|" * (len(HEAD) + 2) + "---|"]
    for method, size, row in summary(results, margin):
        if row is None:
            out.append(f"| {method} | {size} | " + " | ".join(["n/a"] * len(HEAD)) +
                       " | 0 | not measured |")
            continue
        out.append(f"| {method} | {size} | " + " | ".join(cells(row)) +
                   f" | {row['turns']} | {'met' if row['met'] else '**not met**'} |")
    return out + [""]
