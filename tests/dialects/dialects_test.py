#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Both BMI dialects through one libbmi, over every built method that two processes on one
node can share (tcp, shm): a C99 program written only against the standalone header
(standalone_api_peer) serves the OrangeFS-dialect pvfs_client and calls the OrangeFS-dialect
pvfs_server, and two standalone peers exchange requests and class-7 notes, which must arrive
only under their own class. A standalone server listens without a port and reports the port it
got through BMI_TCP_GET_PORT, on shm as on tcp, and Mercury's na_bmi finds each protocol in
BMI_TRANSPORT_METHODS_STRING. Where ofi is built, na_bmi's way (`ofi://HOST`, no provider, no
port) serves requests over it too."""
import os
import subprocess
import sys

TIMEOUT = 60
PEER = os.environ["BMI_STANDALONE_PEER"]
SERVER = os.environ["BMI_PVFS_SERVER"]
CLIENT = os.environ["BMI_PVFS_CLIENT"]
METHODS = [m for m in os.environ.get("BMI_ENABLED_METHODS", "").split() if m in ("tcp", "shm")]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def listen_for(method, name):
    # Portless on purpose: the standalone dialect lets the kernel pick (Mercury's way).
    return "tcp://127.0.0.1" if method == "tcp" else f"shm://dialects-{os.getpid()}-{name}"


def start(argv, what):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ADDR "):
        proc.kill()
        out, err = proc.communicate()
        fail(f"{what}: first line {line!r}\n{out}\n{err}")
    return proc, line.split()[1]


def finish(proc, what):
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        fail(f"{what}: did not exit\n{out}\n{err}")
    if proc.returncode != 0:
        fail(f"{what}: exit {proc.returncode}\n{out}\n{err}")
    return out


def run(argv, what):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    if res.returncode != 0:
        fail(f"{what}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.stdout


def standalone_serves_orangefs(method):
    server, addr = start([PEER, "serve", listen_for(method, "a")], "standalone server")
    if addr.rsplit(":", 1)[-1] in ("", "0") or ":" not in addr.split("://")[1]:
        fail(f"BMI_TCP_GET_PORT gave no port: {addr}")
    for size in ("64", "20000", "1048576"):
        run([CLIENT, "--methods", f"bmi_{method}", "--iterations", "5", "--size", size, addr],
            f"{method}: OrangeFS client of {size} B -> standalone server")
    run([CLIENT, "--methods", f"bmi_{method}", "--iterations", "1", "--shutdown", addr],
        f"{method}: OrangeFS client shutdown")
    out = finish(server, f"{method}: standalone server")
    # 3 x 5 requests and 3 goodbyes, then 1 request and the shutdown.
    if "DONE requests=20 notes=0" not in out:
        fail(f"{method}: standalone server counted {out!r}")


def standalone_calls_orangefs(method):
    listen = "tcp://127.0.0.1:0" if method == "tcp" else listen_for(method, "b")
    server, addr = start([SERVER, "--methods", f"bmi_{method}", listen], "OrangeFS server")
    for size in ("64", "1048576"):
        run([PEER, "call", addr, "--iterations", "5", "--size", size],
            f"{method}: standalone client of {size} B -> OrangeFS server")
    run([PEER, "call", addr, "--iterations", "1", "--shutdown"],
        f"{method}: standalone client shutdown")
    out = finish(server, f"{method}: OrangeFS server")
    if "failed=0" not in out:
        fail(f"{method}: OrangeFS server reported {out!r}")


def standalone_pair_with_classes(method):
    server, addr = start([PEER, "serve", listen_for(method, "c")], "standalone server")
    out = run([PEER, "call", addr, "--iterations", "20", "--size", "300000", "--notes", "5",
               "--shutdown"], f"{method}: standalone pair")
    if "OK iterations=20 notes=5" not in out:
        fail(f"{method}: client said {out!r}")
    out = finish(server, f"{method}: standalone server")
    if "DONE requests=21 notes=5" not in out:
        fail(f"{method}: standalone server counted {out!r}")


def mercury_style_servers(method):
    # Mercury's na_bmi: the protocol must be in the methods string, a server listens on
    # "PROTO://HOST" without a port and hands out "PROTO://HOST:PORT"; two on one host differ.
    listed = subprocess.run([PEER, "protocol", method], capture_output=True, text=True,
                            timeout=TIMEOUT)
    if listed.returncode != 0:
        fail(f"{method}: not in BMI_TRANSPORT_METHODS_STRING: {listed.stdout!r}")
    names = listed.stdout.split()[1:]
    if "verbs" in names and "ib" not in names:
        fail(f"verbs without its OrangeFS name ib in {names}")
    if subprocess.run([PEER, "protocol", "nosuch"], capture_output=True,
                      timeout=TIMEOUT).returncode != 1:
        fail("an unknown protocol was accepted")
    servers = [start([PEER, "serve", f"{method}://127.0.0.1"], f"{method}: na_bmi-style server")
               for _ in range(2)]
    addrs = [addr for _, addr in servers]
    if len(set(addrs)) != 2 or not all(a.rsplit(":", 1)[-1].isdigit() for a in addrs):
        fail(f"{method}: two portless servers got {addrs}")
    for proc, addr in servers:
        run([PEER, "call", addr, "--iterations", "3", "--size", "70000", "--shutdown"],
            f"{method}: client of {addr}")
        out = finish(proc, f"{method}: server at {addr}")
        if "DONE requests=4 notes=0" not in out:
            fail(f"{method}: server at {addr} counted {out!r}")


def main():
    if not METHODS:
        print("no tcp or shm method built")
        sys.exit(77)
    for method in METHODS:
        for case in (standalone_serves_orangefs, standalone_calls_orangefs,
                     standalone_pair_with_classes, mercury_style_servers):
            case(method)
            print(f"ok {method}: {case.__name__}")
    if "ofi" in os.environ.get("BMI_ENABLED_METHODS", "").split():
        mercury_style_servers("ofi")
        print("ok ofi: mercury_style_servers")


if __name__ == "__main__":
    main()
