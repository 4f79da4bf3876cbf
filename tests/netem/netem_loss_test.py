#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Loss, reordering and delay: several clients, each on its own link with tc netem in both
directions (50 ms delay, 5 % loss, a quarter of the packets sent ahead of the rest), send checked
requests to one server: small (eager) and large (rendezvous) messages both ways, every one
carrying a checksum (netem_wire.h). Nothing may be lost, corrupted or duplicated: every client
gets every reply intact, the server takes every request exactly once, no operation fails. The
faults must really have happened: netem dropped packets and TCP retransmitted and queued
segments out of order on every link, or the test fails.

Every process runs with the silent-peer and stall bounds raised to 60 s: on such a link a segment
and its retransmissions can all be lost, or their ACKs, for longer than the 8 s a peer may stay
silent by default, and the connection then ends as that bound says it must (netem_silent checks
those bounds). A site with lossy links raises them the same way (doc/SETTINGS.md).

BMI_NETEM_SCHEME=ofi+tcp runs the same over the ofi method (libfabric's tcp;ofi_rxm)."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from netns import fail, fields  # noqa: E402

SERVER = os.environ["BMI_NETEM_SERVER"]
CLIENT = os.environ["BMI_NETEM_CLIENT"]
CLIENTS = int(os.environ.get("BMI_NETEM_CLIENTS", "6"))
REQUESTS = int(os.environ.get("BMI_NETEM_REQUESTS", "12"))
MAX_LARGE = 256 * 1024
FAULTS = ("delay", "50ms", "reorder", "25%", "50%", "loss", "5%")
SCHEME = os.environ.get("BMI_NETEM_SCHEME", "tcp")
PATIENT = {**os.environ, **({"BMI_OFI_STALL_TIMEOUT_MS": "60000"} if SCHEME.startswith("ofi") else
                            {"BMI_TCP_SILENT_PEER_TIMEOUT_MS": "60000",
                             "BMI_TCP_STALL_TIMEOUT_MS": "60000"})}


def main():
    netns.skip_unless_netem()
    names = [f"c{i}" for i in range(CLIENTS)]
    t_setup = time.monotonic()
    net = netns.Network.star(CLIENTS)
    try:
        net.netem(names, *FAULTS)
        server, address = net.serve(SERVER, env=PATIENT, scheme=SCHEME)
        started = time.monotonic()
        netns.say(f"network and server up in {started - t_setup:.1f} s")
        clients = [net.start(name, [CLIENT, "--id", str(i + 1), "--count", str(REQUESTS),
                                    "--max-large", str(MAX_LARGE), "--op-timeout-ms", "60000",
                                    address], env=PATIENT)
                   for i, name in enumerate(names)]
        statuses = [c.stop(sig=None, timeout=600) for c in clients]
        elapsed = time.monotonic() - started
        total_bytes = 0
        for name, c, status in zip(names, clients, statuses):
            summary = c.matching("CLIENT")
            if status != 0 or not summary:
                fail(f"client {name} exited with {status}: "
                     f"{[line for line in c.lines if not line.startswith('OK')]} "
                     f"{c.stderr.strip()[-2000:]}")
            if int(fields(summary[0])["ok"]) != REQUESTS:
                fail(f"client {name}: {summary[0]}")
            total_bytes += int(fields(summary[0])["bytes"])
        counters = netns.tcp_counters(server)
        drops = net.netem_drops()
        if server.stop() != 0:
            fail(f"server: {server.lines[-20:]} {server.stderr.strip()[-2000:]}")
        got = fields(server.matching("SERVER")[0])
        if int(got["requests"]) != CLIENTS * REQUESTS or got["bad"] != "0" or \
                got["opfail"] != "0":
            fail(f"server: {server.matching('SERVER')[0]} {server.matching('BAD')} "
                 f"{server.matching('OPFAIL')}")
        max_latency = max(float(fields(c.matching("CLIENT")[0])["max_latency"])
                          for c in clients)
        netns.say(f"{SCHEME}: {CLIENTS} clients x {REQUESTS} requests through {' '.join(FAULTS)} on "
                  f"every link (both ways): {got['requests']} requests, {got['bulks']} bulk "
                  f"messages and {got['replies']} replies checked, {total_bytes} bytes, in "
                  f"{elapsed:.1f} s; slowest request {max_latency:.2f} s")
        print(f"  netem dropped toward each client: {drops}; the server's TCP retransmitted "
              f"{counters['RetransSegs']} segments and queued {counters['TCPOFOQueue']} "
              f"out of order")
        # The faults must really have been there, or this test proves nothing.
        if sorted(drops) != sorted(names) or min(drops.values()) == 0 or \
                counters["RetransSegs"] == 0 or counters["TCPOFOQueue"] == 0:
            fail("the links saw no loss or no reordering: the faults were not injected")
    finally:
        net.close()


if __name__ == "__main__":
    main()
