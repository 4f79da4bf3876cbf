#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Two real planes on one machine: network namespaces joined by two veth pairs, each pair its
own subnet (198.51.100.0/24 is plane A, 203.0.113.0/24 plane B; documentation ranges, alive only
inside the namespaces this test makes and removes). The unchanged C example server runs in one
namespace with BMI_ALLOCATION and the OrangeFS-style listen address tcp://NULL:0, the example
client in the other:
  - a server allocated plane A listens there only: reached on A, refused on B;
  - a client allocated one plane cannot even look up an address on the other (BMI_ENETUNREACH);
  - a server allocated both planes serves both;
  - a listen address on a plane the allocation does not hold stops the server from starting.
Needs root (CI runs as root). Without it the test is skipped, except under CI or with
BMI_REQUIRE_NETNS=1, where it fails: a test that cannot build its planes must not pass quietly.
Commands enter a namespace with nsenter, not `ip -n` or `ip netns exec`: those also make / a
slave mount, which fails where / is not a mount point (a chroot, some containers)."""
import os
import shutil
import signal
import subprocess
import sys

SERVER = os.environ["BMI_PVFS_SERVER"]
CLIENT = os.environ["BMI_PVFS_CLIENT"]
TAG = f"bmi{os.getpid() % 10000000}"
NS_SERVER, NS_CLIENT = TAG + "s", TAG + "c"
PLANES = {"A": ("198.51.100", "a"), "B": ("203.0.113", "b")}
started = []


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def in_ns(ns, *argv):
    """ARGV run in network namespace NS (and in this process's other namespaces)."""
    return ["nsenter", f"--net=/var/run/netns/{ns}", *argv]


def ip(*args, ns=None, check=True):
    argv = ["ip", *args] if ns is None else in_ns(ns, "ip", *args)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if check and res.returncode != 0:
        fail(f"{' '.join(argv)}: {res.stderr.strip()}")
    return res


def build_planes():
    for ns in (NS_SERVER, NS_CLIENT):
        ip("netns", "add", ns)
        ip("link", "set", "lo", "up", ns=ns)
    for net, suffix in PLANES.values():
        here, there = f"{TAG}{suffix}0", f"{TAG}{suffix}1"
        ip("link", "add", here, "type", "veth", "peer", "name", there)
        ip("link", "set", here, "netns", NS_SERVER)
        ip("link", "set", there, "netns", NS_CLIENT)
        ip("addr", "add", f"{net}.1/24", "dev", here, ns=NS_SERVER)
        ip("addr", "add", f"{net}.2/24", "dev", there, ns=NS_CLIENT)
        ip("link", "set", here, "up", ns=NS_SERVER)
        ip("link", "set", there, "up", ns=NS_CLIENT)


def tear_down(*_):
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Removing a namespace removes the veth ends inside it, and so both pairs.
    for ns in (NS_SERVER, NS_CLIENT):
        ip("netns", "del", ns, check=False)


def env_with(allocation):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BMI_ALLOCATION")}
    if allocation:
        env["BMI_ALLOCATION"] = allocation
    return env


def start_server(allocation, listen="tcp://NULL:0"):
    proc = subprocess.Popen(in_ns(NS_SERVER, SERVER, listen),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_with(allocation))
    started.append(proc)
    return proc


def server_addresses(proc):
    line = proc.stdout.readline()  # the server prints ADDR at once, or exits
    if not line.startswith("ADDR "):
        proc.wait(timeout=20)
        fail(f"server did not start: {line!r} {proc.stderr.read()!r}")
    return line.split()[1].split(",")


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        fail("server did not stop within 20 s of SIGTERM")


def client(address, allocation=None):
    return subprocess.run(in_ns(NS_CLIENT, CLIENT, "--iterations", "20", "--size", "4096",
                                "--timeout-ms", "3000", address),
                          capture_output=True, text=True, timeout=60, env=env_with(allocation))


def expect_served(address, allocation=None):
    res = client(address, allocation)
    if res.returncode != 0:
        fail(f"client of {address} failed: {res.stderr.strip()}")


def expect_refused(address, allocation=None, saying=None):
    res = client(address, allocation)
    if res.returncode == 0:
        fail(f"client of {address} was served, and should not have been")
    if saying and saying not in res.stderr:
        fail(f"client of {address}: expected {saying!r} in {res.stderr.strip()!r}")


def allocation(ident, plane, ports, endpts=1):
    net = PLANES[plane][0]
    return f"id={ident} type=tcp plane={net}.0/24 endpts={endpts} ports={ports}"


def main():
    required = os.environ.get("CI") or os.environ.get("BMI_REQUIRE_NETNS") == "1"
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("nsenter") is None:
        if required:
            fail("needs root, iproute2 and nsenter to build network namespaces (CI has all)")
        print("SKIP: network namespaces need root, iproute2 and nsenter")
        sys.exit(77)
    signal.signal(signal.SIGTERM, lambda *_: (tear_down(), sys.exit(1)))
    try:
        build_planes()
        a1, b1 = PLANES["A"][0] + ".1", PLANES["B"][0] + ".1"

        # Allocated plane A only.
        server = start_server(allocation("srv", "A", "41000-41009", endpts=2))
        addresses = server_addresses(server)
        if addresses != [f"tcp://{a1}:41000", f"tcp://{a1}:41001"]:
            fail(f"plane A server listens on {addresses}")
        for address in addresses:
            expect_served(address)
        expect_served(addresses[0], allocation("cli", "A", "42000"))
        expect_refused(f"tcp://{b1}:41000")  # nothing listens on plane B
        expect_refused(f"tcp://{b1}:41000", allocation("cli", "A", "42000"),
                       saying="BMI_ENETUNREACH")
        expect_refused(addresses[0], allocation("cli", "B", "42000"), saying="BMI_ENETUNREACH")
        stop_server(server)

        # Allocated both planes: one server, one listener on each.
        server = start_server(allocation("srv.a", "A", "41000") + ";" +
                              allocation("srv.b", "B", "41000"))
        addresses = server_addresses(server)
        if addresses != [f"tcp://{a1}:41000", f"tcp://{b1}:41000"]:
            fail(f"two-plane server listens on {addresses}")
        expect_served(addresses[0], allocation("cli", "A", "42000"))
        expect_served(addresses[1], allocation("cli", "B", "42000"))
        stop_server(server)

        # A configured listen address on a plane the allocation does not hold.
        server = start_server(allocation("srv", "A", "41000"), listen=f"tcp://{b1}:41000")
        if server.wait(timeout=20) == 0 or "disagrees with the allocation" not in server.stderr.read():
            fail("a server whose listen address is off its allocated plane started")
        print("planes_netns ok")
    finally:
        tear_down()


main()
