#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-info lists every method this build has as usable, with limits, listen addresses, the
RDMA section and each method's settings; every setting with the value in force and where it
came from; the planes it sees and where each came
from (interfaces, the node, BMI_INVENTORY's file); the settings table as Markdown, which doc/SETTINGS.md must hold verbatim; bad
arguments and invalid settings fail with exit 2 and a message."""
import os
import re
import subprocess
import sys
import tempfile

EXE = os.environ["BMI_INFO"]


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


SETTINGS_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "doc",
                            "SETTINGS.md")
# The environment without any BMI_ setting, so each row's source is known.
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("BMI_")}


def run(args, extra_env=None):
    env = dict(CLEAN_ENV, **(extra_env or {}))
    return subprocess.run([EXE] + args, capture_output=True, text=True, timeout=60, env=env)


def setting_row(out, env_name):
    """The settings line of one variable: (value, source)."""
    m = re.search(rf"^  {env_name} +(.+?) +\((default|environment|option)(: INVALID[^)]*)?\)",
                  out, re.M)
    if not m:
        fail(f"no settings row for {env_name}")
    return m.group(1), m.group(2) + (m.group(3) or "")


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
for words in ("RDMA devices:", "libfabric providers (fi_getinfo):",
              "settings (default < environment BMI_X < BMI_initialize option"):
    if words not in out:
        fail(f"output lacks {words!r}")
# With ofi built, the provider its tests run on is listed as fit for it.
if "ofi" in methods and not re.search(r"^  tcp;ofi_rxm \(rdm\) tagged[^(]*  as ofi\+tcp://HOST:PORT$",
                                      out, re.M):
    fail("ofi: tcp;ofi_rxm not listed as a tagged rdm provider addressed by host:port")
if "ofi" in methods and not re.search(r"^  shm \(rdm\) tagged.*  as ofi\+shm://NAME$", out, re.M):
    fail("ofi: shm not listed as a tagged rdm provider addressed by name")
for env_name, value in (("BMI_DEBUG", '""'), ("BMI_UNEXPECTED_QUOTA", "64M"),
                        ("BMI_TCP_STALL_TIMEOUT_MS", "10s"), ("BMI_SHM_SPLIT_COPY", "auto")):
    if setting_row(out, env_name) != (value, "default"):
        fail(f"{env_name}: {setting_row(out, env_name)}, expected ({value}, default)")

# The value in force and its source: the option string over the environment over the default.
res = run(["--method", methods[0] if methods else "tcp", "--options", "shm_spin_us=5,tcp_spin_us=9"],
          {"BMI_TCP_SPIN_US": "7", "BMI_SHM_SLOT_SIZE": "4096"})
if res.returncode != 0:
    fail(f"--options: exit {res.returncode}: {res.stderr}")
for env_name, expected in (("BMI_SHM_SPIN_US", ("5 us", "option")),
                           ("BMI_TCP_SPIN_US", ("9 us", "option")),
                           ("BMI_SHM_SLOT_SIZE", ("4K", "environment")),
                           ("BMI_SHM_RING_SLOTS", ("64 slots", "default"))):
    if setting_row(res.stdout, env_name) != expected:
        fail(f"{env_name}: {setting_row(res.stdout, env_name)}, expected {expected}")

# An invalid value is shown as such, named on stderr, and fails like BMI_initialize does.
res = run(["--method", methods[0] if methods else "tcp"], {"BMI_TCP_SPIN_US": "abc"})
if res.returncode != 2 or "INVALID" not in setting_row(res.stdout, "BMI_TCP_SPIN_US")[1] or \
        'BMI_TCP_SPIN_US (environment; option tcp_spin_us) = "abc" is not valid' not in res.stderr:
    fail(f"invalid setting: exit {res.returncode}, stdout {res.stdout!r}, stderr {res.stderr!r}")

# doc/SETTINGS.md holds the table exactly as the library has it.
res = run(["--markdown"])
if res.returncode != 0 or not res.stdout.startswith("| environment | option key |"):
    fail(f"--markdown: exit {res.returncode}: {res.stdout!r}")
with open(SETTINGS_DOC, encoding="utf-8") as doc:
    if res.stdout not in doc.read():
        fail("doc/SETTINGS.md does not hold the table of `bmi-info --markdown`; regenerate it")

# A renamed setting lists its former name in both outputs, and the former name still sets it.
md_row = next((line for line in res.stdout.splitlines()
               if line.startswith("| `BMI_SHM_EARLY_PEER_BYTES`")), "")
if "(formerly `BMI_SHM_EARLY_BYTES`) | `shm_early_peer_bytes` (formerly `shm_early_bytes`) |" \
        not in md_row:
    fail(f"--markdown does not list the former name: {md_row!r}")
res = run(["--method", methods[0] if methods else "tcp"], {"BMI_SHM_EARLY_BYTES": "1M"})
row = re.search(r"^  BMI_SHM_EARLY_PEER_BYTES .*$", res.stdout, re.M)
if res.returncode != 0 or setting_row(res.stdout, "BMI_SHM_EARLY_PEER_BYTES") != \
        ("1M", "environment") or not row or "formerly BMI_SHM_EARLY_BYTES" not in row.group(0) or \
        "BMI_SHM_EARLY_BYTES is the former name of BMI_SHM_EARLY_PEER_BYTES" not in res.stderr:
    fail(f"former name: exit {res.returncode}, {res.stdout!r}, {res.stderr!r}")
res = run(["--method", methods[0] if methods else "tcp"],
          {"BMI_SHM_EARLY_BYTES": "1M", "BMI_SHM_EARLY_PEER_BYTES": "2M"})
if res.returncode != 2 or "name the same setting" not in res.stderr:
    fail(f"former and current name disagree: exit {res.returncode}, {res.stderr!r}")

# Planes: discovered ones with their interface, and the inventory's names and pins.
if "  tcp 127.0.0.0/8  from interface lo\n" not in out or "from this node (shared memory)" not in out:
    fail(f"planes section: {out.split('Planes', 1)[-1][:400]!r}")
# With the ofi method built, libfabric's providers and domains are planes too (core provider
# names, shm without a domain), as an allocation names them.
planes = out.split("Planes (doc/planes.md)", 1)[-1].split("\n\n", 1)[0]
if "ofi" in os.environ.get("BMI_ENABLED_METHODS", "").split() and (
        "  ofi tcp/lo  from libfabric (fi_getinfo)\n" not in planes or
        "  ofi shm  from libfabric (fi_getinfo)\n" not in planes or "ofi_rxm" in planes):
    fail(f"ofi planes: {planes!r}")
with tempfile.TemporaryDirectory() as tmp:
    inventory = os.path.join(tmp, "planes")
    with open(inventory, "w", encoding="utf-8") as f:
        f.write("loop = tcp 127.0.0.0/8\nelsewhere = tcp 10.99.0.0/16 ports=32000-32010\n")
    res = run(["--method", methods[0] if methods else "tcp"], {"BMI_INVENTORY": inventory})
    if res.returncode != 0 or \
            f"tcp 127.0.0.0/8 (loop)  from interface lo, named in inventory {inventory}:1" not in res.stdout or \
            f"tcp 10.99.0.0/16 (elsewhere)  from inventory {inventory}:2, not seen on this node" \
            not in res.stdout:
        fail(f"inventory planes: exit {res.returncode}, {res.stdout!r}")
    with open(inventory, "w", encoding="utf-8") as f:
        f.write("loop = tcp 127.0.0.0/8\nbad = tcp 10.99.1.0/16\n")
    res = run(["--method", methods[0] if methods else "tcp"], {"BMI_INVENTORY": inventory})
    if res.returncode != 2 or f"{inventory}:2: identifier: '10.99.1.0/16' has host bits set" \
            not in res.stdout:
        fail(f"malformed inventory: exit {res.returncode}, {res.stdout!r}")

# The allocation in force: each plane as bound here, what is enforced and what is not.
if "Allocation in force (doc/planes.md): none" not in out:
    fail(f"no allocation line: {out!r}")
res = run(["--method", "tcp"], {"BMI_ALLOCATION": "id=bmi.x type=tcp plane=127.0.0.0/8 endpts=1 "
                                                  "ports=40000-40001 qos=gold bw=100"})
for words in ("Allocation in force (doc/planes.md): from BMI_ALLOCATION",
              "  tcp 127.0.0.0/8 (bmi.x) on 127.0.0.1 port 40000",
              "    NOT ENFORCED: qos gold: not a level libbmi can map",
              "    bw 100 Mbit/s: SO_MAX_PACING_RATE 12500000 bytes/s"):
    if res.returncode != 0 or words not in res.stdout:
        fail(f"allocation: {words!r} not in exit {res.returncode}, {res.stdout!r}")
res = run(["--method", "tcp"], {"BMI_ALLOCATION": "id=bmi.x type=tcp plane=127.0.0.0/8 endpts=3 "
                                                  "ports=40000-40001"})
if res.returncode != 2 or "Allocation in force (doc/planes.md): INVALID" not in res.stdout or \
        "ports: 2 port(s) for 3 endpoints" not in res.stderr:
    fail(f"malformed allocation: exit {res.returncode}, {res.stdout!r} {res.stderr!r}")

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
