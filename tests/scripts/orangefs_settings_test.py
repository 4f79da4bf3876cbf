#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""scripts/orangefs.sh checks its opt-in settings (ORANGEFS_BASIC, ORANGEFS_TRUSTED,
ORANGEFS_RESTART, ORANGEFS_RESTART_MIB, ORANGEFS_IB, ORANGEFS_IB_HOST) before it builds or starts
anything: a bad value exits 2 with a message naming the variable. ORANGEFS_IB=1 without the RDMA
device it needs says at once, naming the device, that the InfiniBand cases will be skipped. Run against a stand-in source tree (the two files the script
looks for), with pkg-config finding no libbmi, so that a value the script did not check would
end elsewhere (exit 1) instead. OrangeFS itself is not needed."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
SCRIPT = ROOT / "scripts" / "orangefs.sh"

BAD = [
    ("ORANGEFS_TRUSTED", "2"),
    ("ORANGEFS_TRUSTED", "yes"),
    ("ORANGEFS_RESTART", "on"),
    ("ORANGEFS_BASIC", "-1"),
    ("ORANGEFS_RESTART_MIB", "0"),
    ("ORANGEFS_RESTART_MIB", "12M"),
    ("ORANGEFS_IB", "yes"),
    ("ORANGEFS_IB_HOST", "ib://10.0.0.1"),
    ("ORANGEFS_IB_HOST", "-h"),
]
# A device no machine has: the check must find it missing, whatever this machine holds.
NO_DEVICE = "libbmi-no-such-rdma-device"


def run(tree, pkgconfig, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORANGEFS_", "LIBBMI_"))}
    env.update(PKG_CONFIG_PATH=pkgconfig, PKG_CONFIG_LIBDIR=pkgconfig, **extra)
    return subprocess.run(["bash", str(SCRIPT), str(tree)], env=env, capture_output=True,
                          text=True, timeout=60)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        tree, empty = Path(tmp) / "orangefs", Path(tmp) / "pkgconfig"
        (tree / "src" / "io" / "bmi").mkdir(parents=True)
        empty.mkdir()
        (tree / "src" / "io" / "bmi" / "module.mk.in").write_text("")
        prepare = tree / "prepare"
        prepare.write_text("#!/bin/sh\nexit 1\n")
        prepare.chmod(0o755)
        for name, value in BAD:
            result = run(tree, str(empty), {name: value})
            if result.returncode != 2 or name not in result.stderr:
                failures.append(f"{name}={value}: exit {result.returncode}, "
                                f"stderr {result.stderr.strip()!r} (want exit 2 naming {name})")
        # Good values pass the checks and stop later, at the missing libbmi (or a missing tool).
        result = run(tree, str(empty), {"ORANGEFS_TRUSTED": "1", "ORANGEFS_RESTART": "1",
                                        "ORANGEFS_BASIC": "0", "ORANGEFS_RESTART_MIB": "16",
                                        "ORANGEFS_IB": "1", "ORANGEFS_IB_HOST": "10.99.0.1",
                                        "BMI_VERBS_DEVICE": NO_DEVICE})
        if result.returncode != 1:
            failures.append(f"good values: exit {result.returncode}, stderr "
                            f"{result.stderr.strip()!r} (want exit 1: no libbmi)")
        # The skip is announced before anything else happens, with its reason.
        if f"BMI_VERBS_DEVICE={NO_DEVICE}, but no such RDMA device" not in result.stderr or \
                "skipped" not in result.stderr:
            failures.append(f"ORANGEFS_IB=1 without the device: stderr {result.stderr.strip()!r} "
                            f"(want the skip and its reason)")
    for failure in failures:
        print("FAILED:", failure)
    if not failures:
        print(f"orangefs.sh settings: {len(BAD)} bad values refused, good values accepted, "
              f"a missing RDMA device named")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
