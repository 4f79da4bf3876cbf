# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small switched network for the netem tests: a hub namespace holding a bridge, and one
namespace per node joined to it by a veth pair, all in 198.51.100.0/24 (a documentation range,
alive only inside the namespaces made here). Faults go on a node's link with tc netem, in both
directions. Every namespace, link and process made here is removed by Network.close(), which
the tests call on every path (also on SIGTERM and SIGINT).

Needs root, iproute2 and a kernel with veth, bridge and sch_netem. Where netem is missing (the
build machines' kernel has none) the tests are skipped (exit 77), except with BMI_REQUIRE_NETEM=1
(set for the run in the guest), where that is a failure. Commands enter a namespace with
nsenter, not `ip -n`, `tc -n` or `ip netns exec`: those also make / a slave mount, which fails
where / is not a mount point (a chroot, some containers)."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

SUBNET = "198.51.100"
_STARTED = time.monotonic()


def say(message):
    """Prints message with the seconds since the test started."""
    print(f"[{time.monotonic() - _STARTED:6.1f} s] {message}", flush=True)


def fail(message):
    print("FAIL:", message, flush=True)
    sys.exit(1)


def in_ns(ns, *argv):
    """ARGV run in network namespace NS (and in this process's other namespaces)."""
    return ["nsenter", f"--net=/var/run/netns/{ns}", *argv]


def run(*args, check=True, stdin=None):
    res = subprocess.run(list(args), capture_output=True, text=True, timeout=30, input=stdin)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {res.stderr.strip()}")
    return res


def run_all(commands):
    """Runs COMMANDS [(argv, stdin)] side by side (each process costs about half a second in
    the TCG guest); raises if any failed, else returns the monotonic time each one ended."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for argv, _ in commands]
    ended = [0.0] * len(procs)
    results = [None] * len(procs)

    def finish(i):
        try:
            results[i] = procs[i].communicate(commands[i][1], timeout=30)
        except subprocess.TimeoutExpired:
            procs[i].kill()
            procs[i].wait()
        ended[i] = time.monotonic()
    threads = [threading.Thread(target=finish, args=(i,)) for i in range(len(procs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [f"{' '.join(argv)}: {(res or ('', 'timed out'))[1].strip()}"
              for (argv, _), proc, res in zip(commands, procs, results) if proc.returncode != 0]
    if errors:
        raise RuntimeError("; ".join(errors))
    return ended


def skip_unless_netem():
    """Exits 77 (or 1 when BMI_REQUIRE_NETEM=1) unless this is root and tc netem works in a
    network namespace."""
    required = os.environ.get("BMI_REQUIRE_NETEM") == "1"
    why = None
    if os.geteuid() != 0:
        why = "needs root"
    else:
        probe = f"bmiprobe{os.getpid()}"
        try:
            run("ip", "netns", "add", probe)
            run(*in_ns(probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                         "1ms"))
        except (RuntimeError, OSError) as e:
            why = f"no network namespaces with tc netem here ({e})"
        finally:
            run("ip", "netns", "del", probe, check=False)
    if why is None:
        return
    if required:
        fail(why + " (BMI_REQUIRE_NETEM=1)")
    print("SKIP:", why)
    sys.exit(77)


class Process:
    """A program run in a namespace; a thread collects its stdout lines as they come."""

    def __init__(self, ns, argv, env=None):
        self.argv = argv
        self.proc = subprocess.Popen(in_ns(ns, *argv), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        self.err_lines = []
        self._out = threading.Thread(target=self._collect, daemon=True)
        self._err = threading.Thread(target=self._collect_err, daemon=True)
        self._out.start()
        self._err.start()

    def _collect(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _collect_err(self):
        for line in self.proc.stderr:
            self.err_lines.append(line.rstrip("\n"))

    @property
    def stderr(self):
        return "\n".join(self.err_lines)

    def matching(self, prefix):
        return [line for line in list(self.lines) if line.startswith(prefix)]

    def wait_for(self, what, predicate, timeout):
        """Waits until predicate() holds; fails the test after timeout seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None and not predicate():
                self._out.join(5)
                if predicate():
                    return
                fail(f"{what}: {self.argv[0]} exited with {self.proc.returncode} first; "
                     f"stderr: {self.stderr.strip()[-2000:]}")
            if time.monotonic() > deadline:
                fail(f"{what}: not within {timeout} s")
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signals the process (sig None: waits for it to end by itself) and returns its exit
        status once it and its output are done."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail(f"{self.argv[0]} did not stop within {timeout} s of signal {sig}")
        self._out.join(10)
        self._err.join(10)
        return self.proc.returncode


def fields(line):
    """{"key": "value"} of a "WORD key=value ..." line."""
    return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)


class Network:
    """NODES {name: host number} on one bridge; every command is batched, since each process
    costs a second or so in a TCG guest."""

    def __init__(self, nodes):
        self.tag = f"bn{os.getpid() % 100000}"
        self.hub = self.tag + "hub"
        self.nodes = {name: (self.tag + name, self.tag + name, f"{SUBNET}.{host}")
                      for name, host in nodes.items()}
        self.processes = []
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            run("ip", "-batch", "-", stdin="".join(f"netns add {ns}\n" for ns in self._spaces()))
            hub = ["link add br0 type bridge", "link set br0 up"]
            for ns, link, _ in self.nodes.values():
                hub += [f"link add {link} type veth peer name eth0 netns {ns}",
                        f"link set {link} master br0 up"]
            run(*in_ns(self.hub, "ip", "-batch", "-"), stdin="\n".join(hub) + "\n")
            run_all([(in_ns(ns, "ip", "-batch", "-"),
                      f"link set lo up\naddr add {address}/24 dev eth0\nlink set eth0 up\n")
                     for ns, _, address in self.nodes.values()])
        except BaseException:
            self.close()
            raise

    @classmethod
    def star(cls, clients):
        """A server node "s" and client nodes c0, c1, ... on the one bridge."""
        return cls({"s": 1, **{f"c{i}": 11 + i for i in range(clients)}})

    def serve(self, program, env=None, scheme="tcp"):
        """Starts PROGRAM LISTEN_ADDRESS (SCHEME://ADDRESS:PORT) on node "s" and waits until it
        says ADDR; returns the process and the address."""
        address = f"{scheme}://{self.address('s')}:3334"
        server = self.start("s", [program, address], env)
        server.wait_for("server listening", lambda: server.matching("ADDR"), 30)
        return server, address

    def _spaces(self):
        return [self.hub] + [ns for ns, _, _ in self.nodes.values()]

    def _on_signal(self, *_):
        self.close()
        sys.exit(1)

    def address(self, name):
        return self.nodes[name][2]

    def netem(self, names, *spec):
        """Puts `netem SPEC` on both directions of each link in NAMES, replacing what was there.
        Returns {name: (toward, away)}: when the fault was in place toward the node (on the
        hub's side) and away from it (on the node's side)."""
        names = [names] if isinstance(names, str) else names
        hub = "".join(f"qdisc replace dev {self.nodes[n][1]} root netem {' '.join(spec)}\n"
                      for n in names)
        ended = run_all([(in_ns(self.hub, "tc", "-batch", "-"), hub)] +
                        [(in_ns(self.nodes[n][0], "tc", "qdisc", "replace", "dev", "eth0",
                                "root", "netem", *spec), None) for n in names])
        return {n: (ended[0], ended[1 + i]) for i, n in enumerate(names)}

    def clear(self, name):
        ns, link, _ = self.nodes[name]
        run_all([(in_ns(ns, "tc", "qdisc", "del", "dev", "eth0", "root"), None),
                 (in_ns(self.hub, "tc", "qdisc", "del", "dev", link, "root"), None)])

    def netem_drops(self):
        """{name: packets netem dropped on the hub's side of NAME's link (toward NAME)}."""
        out = run(*in_ns(self.hub, "tc", "-s", "qdisc", "show")).stdout
        drops = {}
        for block in re.split(r"^(?=qdisc )", out, flags=re.M):
            m = re.match(r"qdisc netem \S+ dev (\S+) root.*?dropped (\d+)", block, re.S)
            for name, (_, link, _) in self.nodes.items():
                if m and m.group(1) == link:
                    drops[name] = int(m.group(2))
        return drops

    def connections(self, name, peer_name):
        """Established TCP connections in NAME's namespace to PEER_NAME's address."""
        ns, peer = self.nodes[name][0], self.nodes[peer_name][2]
        out = run(*in_ns(ns, "ss", "-tnH", "state", "established", "dst", peer)).stdout
        return [line for line in out.splitlines() if line.strip()]

    def start(self, name, argv, env=None):
        p = Process(self.nodes[name][0], argv, env)
        self.processes.append(p)
        return p

    def unplug(self, name, processes=()):
        """NAME vanishes without a word: its link goes first (the pair with it), then its
        processes are killed (what their kernel sends reaches nobody), then its namespace.
        Returns when the link was gone."""
        ns, link, _ = self.nodes[name]
        run(*in_ns(self.hub, "ip", "link", "del", link))
        gone = time.monotonic()
        for p in processes:
            p.stop(signal.SIGKILL)
        run("ip", "netns", "del", ns)
        return gone

    def close(self):
        for p in self.processes:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        # Removing a namespace removes the links in it, and so the pairs they belong to.
        run("ip", "-force", "-batch", "-", check=False,
            stdin="".join(f"netns del {ns}\n" for ns in self._spaces()))
        self.nodes = {}
        left = [n for n in run("ip", "netns", "list").stdout.split() if n.startswith(self.tag)]
        if left:
            fail(f"namespaces left behind: {left}")


def tcp_counters(process):
    """TCP counters of the namespace PROCESS runs in (it must still run): RetransSegs,
    TCPOFOQueue, ..."""
    out = {}
    for path in ("snmp", "netstat"):
        with open(f"/proc/{process.proc.pid}/net/{path}") as f:
            rows = [line.split() for line in f]
        for head, values in zip(rows[::2], rows[1::2]):
            if head[0] in ("Tcp:", "TcpExt:"):
                out.update(zip(head[1:], (int(v) for v in values[1:])))
    return out
