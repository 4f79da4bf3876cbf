# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the churn and soak runs share: the example server started on a fresh address and
stopped with its report, a look at its memory and descriptors, and the checks' bookkeeping.
Only our own children are ever signalled, by their Popen handle."""
import argparse
import ctypes
import os
import select
import signal
import subprocess
import sys
import time


def die_with_parent():
    """Popen's preexec_fn for every child: SIGKILL when we die, whatever kills us
    (PR_SET_PDEATHSIG), as tests/integration/process_harness does."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class Failed(Exception):
    """A check did not hold; the message says which and by how much."""


def listen_address(method, tag):
    """A listen address of method on this host only: tcp and ofi (over libfabric's tcp;ofi_rxm)
    on 127.0.0.1, shm and ofi-shm (libfabric's shm) under a name no other run uses (shm names
    are abstract sockets and memfds: nothing to clean up)."""
    if method == "tcp":
        return "tcp://127.0.0.1:0"
    if method == "shm":
        return f"shm://soak-{tag}-{os.getpid()}"
    if method == "ofi":
        return "ofi+tcp://127.0.0.1:0"
    if method == "ofi-shm":
        return f"ofi+shm://soak-{tag}-{os.getpid()}"
    raise Failed(f"unknown method {method}")


def read_line(stream, deadline, what):
    """The next line of a child's stdout, failing at the deadline instead of hanging."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([stream], [], [], left)[0]:
        raise Failed(f"{what}: nothing within the deadline")
    line = stream.readline()
    if not line:
        raise Failed(f"{what}: output ended")
    return line.rstrip("\n")


class Server:
    """examples/pvfs_server on a fresh listen address; stop() returns its DONE line's counts."""

    def __init__(self, exe, listen, timeout=20):
        self.proc = subprocess.Popen([exe, listen], stdout=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent)
        line = read_line(self.proc.stdout, time.monotonic() + timeout, "server start")
        if not line.startswith("ADDR "):
            raise Failed(f"server printed {line!r} instead of its address")
        self.address = line.split()[1]
        self.pid = self.proc.pid

    def stop(self, timeout=30):
        """SIGTERM: the server drains, finalizes and prints DONE key=value ... ."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failed("server did not stop after SIGTERM")
        if self.proc.returncode != 0:
            raise Failed(f"server exited with {self.proc.returncode}")
        done = [l for l in out.splitlines() if l.startswith("DONE ")]
        if not done:
            raise Failed(f"server printed no DONE line: {out!r}")
        return dict(kv.split("=") for kv in done[-1].split()[1:])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Failed(f"no VmRSS for pid {pid}")


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def sanitized():
    """True in ASan/TSan builds (meson passes b_sanitize): there RSS measures the sanitizer's
    quarantine and shadow memory, not ours, and timings are several times slower."""
    return os.environ.get("BMI_SANITIZE", "none") not in ("", "none")


def machine():
    """One line naming the machine a figure came from."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Linux {os.uname().release}"


def run_checks(checks):
    """Prints every check with its verdict; exits 1 if any failed. checks: (ok, text)."""
    failed = 0
    for ok, text in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
        failed += not ok
    sys.stdout.flush()
    return 1 if failed else 0


def arguments(doc, program, **numbers):
    """A parser with what every run takes (the server, its method, a deadline in seconds for
    the whole load), the load program's path (--program), and --name for each number given,
    of its default's type (p50_factor=1.5 makes --p50-factor, a float)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--server", required=True, help="examples/pvfs_server")
    p.add_argument(f"--{program}", required=True)
    p.add_argument("--method", default="tcp", choices=("tcp", "shm", "ofi", "ofi-shm"))
    for name, default in dict(numbers, deadline=100.0).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return p


def serve_and_judge(args, tag, drive, judge):
    """Starts the server, drive(server) puts the load on it, the server is stopped for its
    counts, and judge(result of drive, counts) returns the checks. Returns the exit status."""
    # A SIGTERM (timeout(1), a harness giving up) unwinds through the finally clauses, which
    # stop the children; they would outlive us otherwise.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = Server(args.server, listen_address(args.method, tag))
    try:
        result = drive(server)
        counts = server.stop()
    except Failed as e:
        print(f"FAIL {e}")
        return 1
    finally:
        server.kill()
    return run_checks(judge(result, counts))
