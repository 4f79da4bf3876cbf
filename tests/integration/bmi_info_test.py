#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-info lists every method this build has as usable, with limits, listen addresses, the
RDMA section and each method's settings; bad arguments fail with exit 2 and a message."""
import os
import re
import subprocess
import sys

EXE = os.environ["BMI_INFO"]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(args):
    return subprocess.run([EXE] + args, capture_output=True, text=True, timeout=60)


def has_rdma_device():
    devices = "/sys/class/infiniband"
    return os.path.isdir(devices) and bool(os.listdir(devices))


res = run([])
if res.returncode != 0:
    fail(f"exit {res.returncode}: {res.stderr}")
out = res.stdout
methods = os.environ.get("BMI_ENABLED_METHODS", "").split()
first = out.splitlines()[0]
for m in methods:
    if f"bmi_{m}" not in first:
        fail(f"bmi_{m} missing from {first!r}")
    section = out.split(f"\nbmi_{m} ({m}://)\n", 1)
    if len(section) != 2:
        fail(f"no section for bmi_{m}")
    body = section[1].split("\n\n", 1)[0]
    usable = "usable:   yes"
    if m == "verbs" and not has_rdma_device():
        # No RDMA device on this host: verbs must say why it cannot listen.
        usable = "cannot listen on verbs://127.0.0.1:0: BMI_ENODEV"
    for words in (usable, "eager:", "settings:"):
        if words not in body:
            fail(f"bmi_{m} section lacks {words!r}:\n{body}")
    if m in ("tcp", "shm"):
        if not re.search(r"limits:   max message \d+", body) or \
                not re.search(r"unexpected messages up to \d+ (B|KiB|MiB)", body):
            fail(f"bmi_{m}: no limits:\n{body}")
        if not re.search(r"quota:    unexpected messages 64 MiB \(BMI_UNEXPECTED_QUOTA\), "
                         r"0 B in use, 0 peer\(s\) held back", body):
            fail(f"bmi_{m}: no unexpected quota use:\n{body}")
        if not re.search(rf"gave {m}://\S+", body):
            fail(f"bmi_{m}: no listen address from the server probe:\n{body}")
if "tcp" in methods and "127.0.0.1" not in out:
    fail("tcp: loopback not among the listen addresses")
if "shm" in methods and "BMI_SHM_SPIN_US" not in out:
    fail("shm: settings do not name BMI_SHM_SPIN_US")
for words in ("RDMA devices:", "settings of every method: BMI_DEBUG"):
    if words not in out:
        fail(f"output lacks {words!r}")

res = run(["--help"])
if res.returncode != 0 or "usage: bmi-info" not in res.stdout:
    fail("--help")
for bad, words in ((["--bogus"], "bad argument --bogus"),
                   (["--method", "nosuch"], "not compiled into this libbmi")):
    res = run(bad)
    if res.returncode != 2 or words not in res.stderr:
        fail(f"{bad}: exit {res.returncode}, stderr {res.stderr!r}")
if methods:
    res = run(["--method", methods[0]])
    if res.returncode != 0 or out.count("\nbmi_") < res.stdout.count("\nbmi_"):
        fail("--method")
print("bmi-info ok")
