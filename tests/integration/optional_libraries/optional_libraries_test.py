#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs optional_libraries: once as it is (tcp only: no optional library may be mapped), then
in a private mount namespace where libibverbs, libpmix and libcrypto are empty files, asking for
verbs, for a PMIx allocation and for encryption first. Each must fail with -BMI_ENOSYS and one log line naming its
library; tcp must still work. Exit 77 (skip) for the second part where no mount namespace can be
made (no root, no user namespaces)."""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
program = sys.argv[1]


def run(argv, what):
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: {what}: still running after 60 s")
    print(f"--- {what}: exit {res.returncode}\n{res.stdout}{res.stderr}", end="")
    return res


res = run([program], "tcp only")
if res.returncode != 0:
    sys.exit("FAIL: tcp only")

asks = []
hidden = []
for name, soname, needed in (("verbs", "libibverbs.so.1", "BMI_HAVE_VERBS"),
                             ("pmix", "libpmix.so.2", "BMI_HAVE_PMIX"),
                             ("encryption", "libcrypto.so.3", None)):
    if needed is not None and os.environ.get(needed) != "1":
        continue
    # Every file the loader could reach: the one ld.so.cache names, and PMIx's own directory.
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
              "/usr/lib/x86_64-linux-gnu/pmix2/lib", "/usr/lib64", "/usr/lib"):
        path = os.path.join(d, soname)
        if os.path.exists(path):
            hidden.append(os.path.realpath(path))
    asks.append((name, soname))
if not asks:
    print("built without verbs and PMIx: nothing to hide")
    sys.exit(0)

unshare = shutil.which("unshare")
if unshare is None or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode:
    print("SKIP: cannot make a private mount namespace (unshare -rm)")
    sys.exit(SKIP)

with tempfile.TemporaryDirectory(prefix="bmi-optional-") as tmp:
    empty = os.path.join(tmp, "empty.so")
    open(empty, "w").close()
    script = "".join(f'mount --bind "{empty}" "{p}" && ' for p in sorted(set(hidden)))
    script += 'exec "$0" "$@"'
    res = run([unshare, "-rm", "sh", "-c", script, program] + [n for n, _ in asks],
              "optional libraries hidden")
if res.returncode != 0:
    sys.exit("FAIL: with the optional libraries hidden")
# The program itself checked that each request failed with -BMI_ENOSYS and tcp still worked.
for name, soname in asks:
    lines = [l for l in res.stderr.splitlines() if soname in l]
    if len(lines) != 1:
        sys.exit(f"FAIL: expected one log line naming {soname}, got {len(lines)}")
print("ok")
