#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Soak: many soak_client processes, started together, each making many checked request/
response pairs with examples/pvfs_server. Passes when every request of every client was
answered with every byte right (none lost, none corrupted), the server answered exactly what
was asked and failed nothing, and the last tenth of the run is not slower than the first by
more than the given factors at p50 and p99 (plus a small absolute slack for timer noise).

  soak_run.py --server EXE --client EXE --method tcp|shm|ofi|ofi-shm --processes N --requests R
              [--size BYTES] [--p50-factor F] [--p99-factor F] [--deadline S]
"""
import collections
import subprocess
import sys
import time

from load_common import (Failed, arguments, die_with_parent, machine, read_line,
                         serve_and_judge)

SLACK_NS = 50_000  # below this, a tenth-to-tenth difference is scheduler noise, not a trend
# A quantile is judged only with this many requests in each tenth above it: p99 of 400
# requests is their 4th worst, one scheduler hiccup on a shared machine.
TAIL_SAMPLES = 100


def percentile(hist, q):
    """The bucket (its lower bound, ns) holding quantile q of a {lower_ns: count} histogram."""
    total = sum(hist.values())
    if total == 0:
        return 0
    rank = q * total
    seen = 0
    for lower in sorted(hist):
        seen += hist[lower]
        if seen >= rank:
            return lower
    return max(hist)


def run_clients(args, server):
    """Starts every client, lets them go at once, and returns their parsed reports."""
    deadline = time.monotonic() + args.deadline
    clients = []
    try:
        for i in range(args.processes):
            clients.append(subprocess.Popen(
                [args.client, "--requests", str(args.requests), "--size", str(args.size),
                 "--id", str(i + 1), server.address],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                preexec_fn=die_with_parent))
        for i, c in enumerate(clients):
            line = read_line(c.stdout, deadline, f"soak_client {i + 1}")
            if line != "READY":
                raise Failed(f"soak_client {i + 1} printed {line!r}")
        start = time.monotonic()
        for c in clients:
            c.stdin.write("go\n")
            c.stdin.flush()  # communicate() closes it
        reports = []
        for i, c in enumerate(clients):
            out, _ = c.communicate(timeout=max(1, deadline - time.monotonic()))
            reports.append((c.returncode, out))
        return reports, time.monotonic() - start
    except subprocess.TimeoutExpired:
        raise Failed(f"the clients did not finish within {args.deadline} s")
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
                c.wait()


def merge(reports):
    """Totals of the RESULT lines, the histograms of every tenth, and the failed exits."""
    totals = collections.Counter()
    tenths = [collections.Counter() for _ in range(10)]
    bad_exits = 0
    for code, out in reports:
        bad_exits += code != 0
        for line in out.splitlines():
            words = line.split()
            if words and words[0] == "RESULT":
                totals.update({k: int(v) for k, v in (w.split("=") for w in words[1:])})
            elif words and words[0] == "TENTH":
                for pair in words[2:]:
                    lower, count = pair.split(":")
                    tenths[int(words[1])][int(lower)] += int(count)
    return totals, tenths, bad_exits


def us(ns):
    return f"{ns / 1000:.1f}"


def report(args, totals, tenths, seconds, counts):
    everything = sum(tenths, collections.Counter())
    print(f"soak {args.method}: {args.processes} processes x {args.requests} requests of "
          f"{args.size} B answers, {seconds:.1f} s, "
          f"{totals['ok'] / seconds if seconds else 0:.0f} requests/s; {machine()}")
    print("| part of the run | requests | p50 (us) | p99 (us) | p99.9 (us) |")
    print("|---|---:|---:|---:|---:|")
    for name, hist in (("all", everything), ("first tenth", tenths[0]),
                       ("last tenth", tenths[9])):
        print(f"| {name} | {sum(hist.values())} | {us(percentile(hist, 0.5))} | "
              f"{us(percentile(hist, 0.99))} | {us(percentile(hist, 0.999))} |")
    print(f"clients: {' '.join(f'{k}={v}' for k, v in sorted(totals.items()))}")
    print(f"server: {' '.join(f'{k}={v}' for k, v in counts.items())}")


def checks(args, totals, tenths, bad_exits, counts):
    want = args.processes * args.requests
    # Each client also makes one unmeasured request to connect, and says goodbye.
    served = args.processes * (args.requests + 2)
    result = [
        (totals["ok"] == want, f"every request answered and checked ({totals['ok']} of {want})"),
        (totals["lost"] == 0 and totals["unsent"] == 0,
         f"none lost (lost={totals['lost']}, not sent after a failure={totals['unsent']})"),
        (totals["corrupt"] == 0, f"none corrupted (corrupt={totals['corrupt']})"),
        (bad_exits == 0, f"every client exited 0 ({bad_exits} did not)"),
        (counts.get("requests") == str(served) and counts.get("failed") == "0",
         f"server answered exactly {served} requests and failed none "
         f"(requests={counts.get('requests')}, failed={counts.get('failed')})"),
    ]
    for q, factor in ((0.5, args.p50_factor), (0.99, args.p99_factor)):
        first, last = percentile(tenths[0], q), percentile(tenths[9], q)
        limit = first * factor + SLACK_NS
        text = (f"p{q * 100:g} of the last tenth {us(last)} us at most {factor} x the first "
                f"tenth's {us(first)} us + {us(SLACK_NS)} us")
        fewest = min(sum(tenths[0].values()), sum(tenths[9].values()))
        if fewest * (1 - q) < TAIL_SAMPLES:
            print(f"(not judged: {fewest} requests in a tenth, too few for p{q * 100:g}) {text}")
        else:
            result.append((last <= limit, text))
    return result


def main():
    p = arguments(__doc__, "client", processes=8, requests=1000, size=4096, p50_factor=1.5,
                  p99_factor=2.0)
    args = p.parse_args()

    def judge(run, counts):
        reports, seconds = run
        totals, tenths, bad_exits = merge(reports)
        report(args, totals, tenths, seconds, counts)
        return checks(args, totals, tenths, bad_exits, counts)

    return serve_and_judge(args, "soak", lambda server: run_clients(args, server), judge)


if __name__ == "__main__":
    sys.exit(main())
