#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A silent peer: peers that vanish without a FIN fail what waits on them within the documented
bound (doc/RELIABILITY.md, "Network faults"), and the other peers are unaffected. Five clients
talk to one server with checked requests, four of them without pause, c4 only three times
before it holds its connection idle. Then
  1. at once, the links of c0 and c4 start dropping every packet (tc netem loss 100%), and c1 is
     unplugged (its link deleted, its process killed, its namespace removed):
     - c0's request in flight fails;
     - the server drops its connections to c0, c1 and the idle c4 (its log says so, and no
       established socket to any of them is left), and what it had in flight for them fails;
     - c2 and c3 are served all along, with no failed operation and no request slower than SLOW;
  2. the server's own link drops every packet: the requests of c2 and c3 fail, and so does c0's
     next request (a connect nobody answers); then the link heals and c2 and c3 are served.
Each failure must come within BOUND seconds of its fault (of its request's start, for the
connect). c0 runs with its silent-peer bound set to SET_TIMEOUT (tcp_silent_peer_timeout_ms):
its own two failures must come within SET_BOUND, less than the default's 8 s."""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from netns import fail, fields  # noqa: E402

SERVER = os.environ["BMI_NETEM_SERVER"]
CLIENT = os.environ["BMI_NETEM_CLIENT"]
# The documented bound for a silent peer is 10 s (doc/RELIABILITY.md): the kernel gives up 8 s
# after the last byte heard. 2 s more for the emulated guest on a busy machine.
BOUND = float(os.environ.get("BMI_NETEM_SILENT_BOUND", "12"))
SLOW = 3.0
SET_TIMEOUT = 4.0
SET_BOUND = float(os.environ.get("BMI_NETEM_SILENT_SET_BOUND", "6.5"))
SILENT = ("loss", "100%")


def errors_after(p, t):
    """ERR lines of p at or after monotonic time t, as field dicts."""
    return [f for f in map(fields, p.matching("ERR")) if float(f["t"]) >= t]


def oks_after(p, t):
    return [f for f in map(fields, p.matching("OK")) if float(f["t"]) >= t]


def lost_at(server, address):
    """When the server's log (BMI_DEBUG=tcp) said a connection to address was lost, and why."""
    pattern = re.compile(rf"\[bmi (\d+\.\d+) .*connection \d+ to tcp://{re.escape(address)}:"
                         rf"\d+ lost: (\S+)")
    for line in list(server.err_lines):
        m = pattern.search(line)
        if m:
            return float(m.group(1)), m.group(2)
    return None


def within(what, since, events, bound=BOUND):
    """Waits for every event of EVENTS {name: () -> (time, detail) or None}; fails unless each
    came within BOUND of since. Prints each."""
    limit = bound + 20
    deadline = time.monotonic() + limit
    left = dict(events)
    while left:
        for name, probe in list(left.items()):
            got = probe()
            if got is None:
                continue
            took = got[0] - since
            print(f"  {name}: after {took:.2f} s ({got[1]})", flush=True)
            if took > bound:
                fail(f"{what}: {name} after {took:.1f} s, over the bound of {bound} s")
            del left[name]
        if left and time.monotonic() > deadline:
            fail(f"{what}: {sorted(left)} not at all within {limit} s (the bound is {bound} s)")
        time.sleep(0.05)


def first_error(p, since):
    def probe():
        errs = errors_after(p, since)
        return (float(errs[0]["t"]), f"{errs[0]['op']} {errs[0]['error']}") if errs else None
    return probe


def main():
    netns.skip_unless_netem()
    names = [f"c{i}" for i in range(5)]
    net = netns.Network.star(len(names))
    try:
        server, address = net.serve(SERVER, env={**os.environ, "BMI_DEBUG": "tcp"})
        # c4 sends a few requests, then holds its connection with nothing in flight.
        prompt = {**os.environ, "BMI_TCP_SILENT_PEER_TIMEOUT_MS": str(int(SET_TIMEOUT * 1000))}
        clients = {name: net.start(name, [CLIENT, "--id", str(i + 1), "--tolerate-errors",
                                          "--max-large", str(256 * 1024), "--op-timeout-ms",
                                          "60000", *(["--count", "3", "--then-idle"]
                                                     if name == "c4" else []), address],
                                   env=prompt if name == "c0" else None)
                   for i, name in enumerate(names)}
        for name, c in clients.items():
            c.wait_for(f"{name} served", lambda c=c: len(c.matching("OK")) >= 3, 60)
        c0, c2, c3 = clients["c0"], clients["c2"], clients["c3"]
        clients["c4"].wait_for("c4 idle", lambda: clients["c4"].matching("IDLE"), 60)

        netns.say("1. the links of c0 and of the idle c4 drop every packet; c1 is unplugged")
        # Each side is timed from when it stopped hearing the other: the two directions' faults
        # are set by two processes, which can be seconds apart in the guest.
        silent = net.netem(["c0", "c4"], *SILENT)
        t0 = silent["c0"][0]
        t1 = net.unplug("c1", [clients["c1"]])
        within("a silent client (its bound set)", t0,
               {"c0's request in flight failed": first_error(c0, t0)}, SET_BOUND)
        within("a silent client, at the server", silent["c0"][1], {
            "the server dropped its connection to c0": lambda: lost_at(server, net.address("c0")),
        })
        within("an idle silent client, at the server", silent["c4"][1], {
            "the server dropped its connection to the idle c4":
                lambda: lost_at(server, net.address("c4")),
        })
        within("an unplugged client", t1, {
            "the server dropped its connection to c1": lambda: lost_at(server, net.address("c1")),
        })
        for peer in ("c0", "c1", "c4"):
            if net.connections("s", peer):
                fail(f"the server still has a connection to {peer}: {net.connections('s', peer)}")
        for f in map(fields, server.matching("OPFAIL")):
            if f.get("client") in ("1", "2", "5"):
                print(f"  the server's {f['op']} for client {f['client']} failed: {f['error']}")
        t_mid = time.monotonic()
        for name, c in (("c2", c2), ("c3", c3)):
            if c.matching("ERR"):
                fail(f"{name} was hurt by the silent peers: {c.matching('ERR')}")
            served = oks_after(c, t0)
            slowest = max((float(f["latency"]) for f in served), default=0.0)
            print(f"  {name} meanwhile: {len(served)} requests served in {t_mid - t0:.1f} s, "
                  f"the slowest in {slowest:.2f} s")
            if len(served) < 5 or slowest > SLOW:
                fail(f"{name} was slowed by the silent peers")

        netns.say("2. the server's link drops every packet, then heals; c0 tries again")
        t_retry = float(errors_after(c0, t0)[0]["t"])

        def next_failure():
            """c0's next request after its first failure, a connect nobody answers: its time is
            counted from the request's start."""
            errs = errors_after(c0, t_retry + 0.001)
            if not errs:
                return None
            return t_retry + float(errs[0]["waited"]), f"{errs[0]['op']} {errs[0]['error']}"
        t2 = net.netem("s", *SILENT)["s"][1]  # the clients stop hearing the server
        within("a silent server", t2, {"c2's request in flight failed": first_error(c2, t2),
                                       "c3's request in flight failed": first_error(c3, t2)})
        within("a connect to a silent server (its bound set)", t_retry,
               {"c0's next request failed": next_failure}, SET_BOUND)
        net.clear("s")
        t3 = time.monotonic()
        for name, c in (("c2", c2), ("c3", c3)):
            c.wait_for(f"{name} served again after the link healed",
                       lambda c=c: len(oks_after(c, t3)) >= 3, BOUND + 30)
            first = float(oks_after(c, t3)[0]["t"])
            print(f"  {name} served again {first - t3:.2f} s after the link healed")
        c0.stop(signal.SIGKILL)  # still silent: no need to wait out its next connect
        clients["c4"].stop(signal.SIGKILL)
        for name, c in clients.items():
            if name in ("c2", "c3") and c.stop() != 0:
                fail(f"{name}: {[line for line in c.lines if not line.startswith('OK')]}")
        if server.stop() != 0:
            fail(f"server: {server.matching('BAD')}")
        for name, c in clients.items():
            if name in ("c2", "c3"):
                print("  " + c.matching("CLIENT")[0])
        print("  " + server.matching("SERVER")[0])
    finally:
        net.close()


if __name__ == "__main__":
    main()
