# SPDX-License-Identifier: LGPL-2.1-or-later
"""The idle study: the CPU share of a libbmi server whose one connected client stays silent,
per method, from /proc/PID/task/*/schedstat over a few seconds. A server that waits must
sleep: only wake-ups may cost anything. A -polled series has chosen to poll instead
(ofi_wait_descriptor=0): its figure is shown, not judged.
"""
import os
import time

from bmi_perf_runs import Failure, Step, listen_address, scheme_of
from study import Study, cpu_seconds

SECONDS = 3.0  # default watch of one server (--idle-seconds)


def idle_cpu(runner, method, seconds=SECONDS):
    """Percent of one CPU the server took while its connected client was silent."""
    exe, scheme = runner.tool("pingpong"), scheme_of(method)
    if exe is None:
        raise Failure("pingpong not found (see --bindir)")
    listen = listen_address(method, f"bmi-perf-idle-{os.getpid()}")
    env = runner.method_env(method)
    common = ["--method-list", f"bmi_{scheme}"]
    procs = []
    try:
        server, serr = runner.spawn([exe] + common + ["--server", listen], env, "idle")
        procs.append(server)
        addr = runner.read_addr(server, serr)
        pause = int((seconds + 1.5) * 1000)
        client, _ = runner.spawn([exe] + common + ["--client", addr, "--pause-ms", str(pause),
                                                   "--max", "8", "--iters", "1"], env, "idle")
        procs.append(client)
        time.sleep(1.0)  # connected and past the spin long before this
        t0, c0 = time.monotonic(), cpu_seconds(server.pid)
        time.sleep(seconds)
        c1, t1 = cpu_seconds(server.pid), time.monotonic()
        runner.finish(procs, time.monotonic() + 10 + pause / 1000)
        return 100.0 * (c1 - c0) / (t1 - t0)
    except OSError as e:
        raise Failure(str(e))
    finally:
        runner.finish([p for p in procs if p.poll() is None], 0)


class Idle(Study):
    name, by_default, targets = "idle", True, ("cpu-percent",)

    def plan(self, runner):
        self.seconds = runner.args.idle_seconds
        # tcp last, as it always was: its server's sleep is the reference users know.
        methods = [m for m in runner.args.methods if m != "tcp"] + \
            [m for m in runner.args.methods if m == "tcp"]
        return [Step(m, lambda m=m: runner.attempt(f"idle bmi {m} server",
                                                   lambda: idle_cpu(runner, m, self.seconds)))
                for m in methods]

    def fold(self, got):
        """{method: CPU percent or None}."""
        return dict(got)

    def print_summary(self, idle, out):
        for m, v in idle.items():
            out.write(f"idle server CPU, bmi {m}: " + (f"{v:.3f} %" if v is not None else "n/a")
                      + "\n")

    def markdown(self, idle, report):
        seconds = getattr(self, "seconds", SECONDS)
        target = self.target["cpu-percent"]
        out = ["## Idle servers\n",
               f"The CPU of a bmi server whose client is connected and silent, over "
               f"{seconds:g} s from /proc/PID/task/*/schedstat, in percent of one CPU. Target: "
               f"{target} (wake-ups only).\n",
               "| method | CPU % | |", "|---|---:|---|"]
        for m, v in idle.items():
            verdict = ("n/a" if v is None else
                       "not judged: polls by its setting" if m.endswith("-polled") else
                       "met" if target.met(v) else "**not met**")
            out.append(f"| bmi {m} | {'n/a' if v is None else f'{v:.3f}'} | {verdict} |")
        return out + [""]
