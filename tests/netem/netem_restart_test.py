#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A server restart: three clients load a server with checked requests over links with delay
and some loss (tc netem); the server is killed (SIGKILL) under that load and started again on
the same address. Every client must see its request in flight fail (an error, never a hang or a
wrong message) within BOUND seconds of the kill, and its requests after the restart must
succeed. Done twice."""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from netns import fail, fields  # noqa: E402

SERVER = os.environ["BMI_NETEM_SERVER"]
CLIENT = os.environ["BMI_NETEM_CLIENT"]
BOUND = 5.0  # a killed server's kernel answers with FIN or RST at once
LINK = ("delay", "20ms", "loss", "1%")
# What a client may see when its server dies or is not back yet.
EXPECTED = {"BMI_ECONNRESET", "BMI_ECONNREFUSED", "BMI_EPIPE", "BMI_ECONNABORTED"}


def main():
    netns.skip_unless_netem()
    names = [f"c{i}" for i in range(3)]
    net = netns.Network.star(len(names))
    try:
        net.netem(names, *LINK)
        server, address = net.serve(SERVER)
        # BMI_DEBUG=tcp: the log tells whether a client took the restart for a legacy server.
        clients = [net.start(name, [CLIENT, "--id", str(i + 1), "--tolerate-errors",
                                    "--max-large", str(256 * 1024), "--op-timeout-ms", "30000",
                                    address], env={**os.environ, "BMI_DEBUG": "tcp"})
                   for i, name in enumerate(names)]
        for c in clients:
            c.wait_for("client served", lambda c=c: len(c.matching("OK")) >= 4, 90)
        for round_ in (1, 2):
            t_kill = time.monotonic()
            server.stop(signal.SIGKILL)
            netns.say(f"round {round_}: server killed under load")
            for i, c in enumerate(clients):
                c.wait_for(f"client {i} saw the failure",
                           lambda c=c: any(float(fields(line)["t"]) >= t_kill
                                           for line in c.matching("ERR")), 30)
                err = next(fields(line) for line in c.matching("ERR")
                           if float(fields(line)["t"]) >= t_kill)
                took = float(err["t"]) - t_kill
                print(f"  client {i}: its {err['op']} failed with {err['error']} after "
                      f"{took:.2f} s", flush=True)
                if took > BOUND or err["error"] not in EXPECTED:
                    fail(f"client {i}: {err} (bound {BOUND} s, expected one of {EXPECTED})")
            time.sleep(0.5)  # the clients meet a closed port too
            server, _ = net.serve(SERVER)
            t_up = time.monotonic()
            for i, c in enumerate(clients):
                c.wait_for(f"client {i} served by the new server",
                           lambda c=c: sum(float(fields(line)["t"]) >= t_up
                                           for line in c.matching("OK")) >= 2, 60)
                first = next(float(fields(line)["t"]) for line in c.matching("OK")
                             if float(fields(line)["t"]) >= t_up)
                print(f"  client {i}: served again {first - t_up:.2f} s after the restart")
        statuses = [c.stop() for c in clients]
        for i, (c, status) in enumerate(zip(clients, statuses)):
            summary = fields(c.matching("CLIENT")[0])
            bad_errors = {fields(line)["error"] for line in c.matching("ERR")} - EXPECTED
            if status != 0 or summary["bad"] != "0" or summary["hung"] != "0" or bad_errors:
                fail(f"client {i}: {c.matching('CLIENT')} {c.matching('BAD')} "
                     f"{c.matching('HUNG')} unexpected errors {bad_errors}")
            seen = sorted({fields(line)["error"] for line in c.matching("ERR")})
            legacy = sum("speaking legacy" in line for line in c.err_lines)
            print(f"  {c.matching('CLIENT')[0]} errors seen: {seen}; fell back to legacy "
                  f"framing {legacy} times")
        if server.stop() != 0:
            fail(f"server: {server.matching('BAD')} {server.stderr.strip()[-2000:]}")
        print("  " + server.matching("SERVER")[0])
    finally:
        net.close()


if __name__ == "__main__":
    main()
