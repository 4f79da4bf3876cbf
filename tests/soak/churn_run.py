#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Churn: many distinct short-lived clients (churn_driver) against examples/pvfs_server, whose
resident memory and descriptors are sampled after every block of clients, at a moment when
none of them is alive. Passes when every client was served, the server gave back the reference
of every request (BMI_AUTO_REF_COUNT, as pvfs2-server does), the library holds no client's
address once all have gone (BMI_ADDRESS_COUNT), and after the warm-up neither RSS (plain
builds) nor descriptors rose more than the tolerance above their level at the end of the
warm-up. With --no-bye the clients leave without a word: the server cannot tell, so this
checks that the library frees what a departed client leaves behind on its own.

  churn_run.py --server EXE --driver EXE --method tcp|shm|ofi|ofi-shm --clients N [--samples K]
               [--parallel P] [--warmup FRACTION] [--tolerance FRACTION] [--csv FILE]
               [--no-bye]
"""
import subprocess
import sys
import time

from load_common import (Failed, arguments, descriptors, die_with_parent, machine, read_line,
                         rss_kb, sanitized, serve_and_judge)


def settled_descriptors(pid, wait_s=2.0):
    """Descriptors of pid once the server has seen the last clients go (it closes their
    connections as it processes their goodbyes): two counts 50 ms apart that agree, or the
    last count after wait_s."""
    deadline = time.monotonic() + wait_s
    n = descriptors(pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)  # polling another process's /proc, not synchronising with it
        again = descriptors(pid)
        if again == n:
            break
        n = again
    return n


def drive(args, server):
    """Runs the driver; returns [(clients done, seconds, rss kB, descriptors)], first at 0."""
    every = max(1, args.clients // args.samples)
    start = time.monotonic()
    samples = [(0, 0.0, rss_kb(server.pid), descriptors(server.pid))]
    driver = subprocess.Popen(
        [args.driver, "--clients", str(args.clients), "--parallel", str(args.parallel),
         "--report-every", str(every), "--requests", str(args.requests), server.address] +
        (["--no-bye"] if args.no_bye else []),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        deadline = start + args.deadline
        while True:
            line = read_line(driver.stdout, deadline, "churn_driver")
            if line.startswith("DONE "):
                break
            if not line.startswith("AT "):
                raise Failed(f"churn_driver printed {line!r}")
            done = int(line.split()[1])
            fds = settled_descriptors(server.pid)
            samples.append((done, time.monotonic() - start, rss_kb(server.pid), fds))
            if done < args.clients:
                driver.stdin.write("go\n")
                driver.stdin.flush()
        if driver.wait(timeout=max(1, deadline - time.monotonic())) != 0:
            raise Failed(f"churn_driver: {line} (exit {driver.returncode})")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return samples


def report(args, samples, counts):
    print(f"churn {args.method}: {args.clients} clients, {args.parallel} at a time, "
          f"{args.requests} requests{'' if args.no_bye else ' + goodbye'} each; {machine()}")
    print("| clients served | seconds | RSS (kB) | descriptors |")
    print("|---:|---:|---:|---:|")
    for done, t, rss, fds in samples:
        print(f"| {done} | {t:.1f} | {rss} | {fds} |")
    print(f"server: {' '.join(f'{k}={v}' for k, v in counts.items())}")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("# clients seconds rss_kb descriptors\n")
            for s in samples:
                f.write(" ".join(str(round(v, 2)) for v in s) + "\n")


def checks(args, samples, counts):
    # The reference is the first sample at or past the warm-up; later ones are judged by it.
    warm = next(s for s in samples if s[0] >= args.warmup * args.clients)
    after = [s for s in samples if s[0] > warm[0]] or [warm]
    rss_limit = warm[2] * (1 + args.tolerance)
    fds_limit = int(warm[3] * (1 + args.tolerance))
    peak_rss = max(s[2] for s in after)
    peak_fds = max(s[3] for s in after)
    result = [
        (counts.get("failed") == "0", f"server failed no answer (failed={counts.get('failed')})"),
        (counts.get("released") == counts.get("requests"),
         f"server gave back every request's reference (released={counts.get('released')}, "
         f"requests={counts.get('requests')})"),
        (counts.get("addresses") == "0",
         f"no client's address held once all have gone (addresses={counts.get('addresses')})"),
        (peak_fds <= fds_limit,
         f"descriptors after warm-up at most {fds_limit} ({warm[3]} at {warm[0]} clients "
         f"+{args.tolerance:.0%}): peak {peak_fds}"),
    ]
    rss_text = (f"RSS after warm-up at most {rss_limit:.0f} kB ({warm[2]} kB at {warm[0]} "
                f"clients +{args.tolerance:.0%}): peak {peak_rss} kB, last {samples[-1][2]} kB")
    if sanitized():
        print(f"(not judged in a sanitizer build) {rss_text}")
    else:
        result.append((peak_rss <= rss_limit, rss_text))
    return result


def main():
    p = arguments(__doc__, "driver", clients=2000, samples=20, parallel=2, requests=2,
                  warmup=0.1, tolerance=0.10)
    p.add_argument("--csv", help="the samples, for gnuplot")
    p.add_argument("--no-bye", action="store_true",
                   help="clients leave without goodbye (the library must free them alone)")
    args = p.parse_args()

    def judge(samples, counts):
        report(args, samples, counts)
        return checks(args, samples, counts)

    return serve_and_judge(args, "churn", lambda server: drive(args, server), judge)


if __name__ == "__main__":
    sys.exit(main())
