#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reading allocations from PMIx against a real PMIx server: fake_rm registers a job whose
information holds the allocations, then starts pmix_alloc_child once per rank, which reads them
with read_pmix_allocations and checks what it got. One case per run: pmix_test.py CASE.
Exit 77 (skip) when libbmi was built without PMIx, or for the mpirun case without mpirun
(unless BMI_REQUIRE_MPI=1)."""
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
KEY = "a5" * 32  # 32 bytes; never printed by the reader
TCP0 = ["ports=32000-32010", "type=tcp", "plane=127.0.0.0/8", "endpts=2", "qos=cs1", "bw=200",
        f"key={KEY}"]
TCP0_TEXT = "id=bmi.net.tcp0 type=tcp plane=127.0.0.0/8 endpts=2 ports=32000-32010 qos=cs1 bw=200"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def clean_env():
    """Our environment without any launcher's traces, so each case sets up its own."""
    drop = ("PMIX_", "OMPI_", "PRTE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    # libpmix is not instrumented; the suppression files name only its own frames.
    here = os.path.dirname(os.path.abspath(__file__))
    for var, supp in (("LSAN_OPTIONS", "lsan.supp"), ("TSAN_OPTIONS", "tsan.supp")):
        path = os.path.join(here, supp)
        if os.path.exists(path):
            env[var] = (env.get(var, "") + f" suppressions={path}").strip()
    return env


def run(argv, env, what, timeout=40):
    try:
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{what}: still running after {timeout} s")
    print(f"--- {what}: exit {res.returncode}\n{res.stdout}{res.stderr}", end="")
    return res


def child(*args, mode="check"):
    return [os.environ["BMI_PMIX_CHILD"], mode] + list(args)


def under_fake_rm(rm_args, child_args, what, ranks=1, mode="check"):
    """Runs the child under fake_rm, with a TMPDIR of its own that must be empty afterwards."""
    with tempfile.TemporaryDirectory(prefix="bmi-pmix-test-") as tmp:
        env = dict(clean_env(), TMPDIR=tmp)
        argv = [os.environ["BMI_FAKE_RM"], "--ranks", str(ranks), "--timeout", "20"] + rm_args
        res = run(argv + ["--"] + child(*child_args, mode=mode), env, what)
        if res.returncode != 0:
            fail(f"{what}: exit {res.returncode}")
        left = os.listdir(tmp)
        if left:
            fail(f"{what}: fake_rm left {left} in its TMPDIR")


def case_two_allocations():
    tcp1 = ["ports=40000-40010,40020", "type=tcp", "plane=::1/128", "endpts=1", "bwd=12.25",
            f"key={KEY}"]
    under_fake_rm(["--alloc", "bmi.net.tcp0"] + TCP0 + ["--alloc", "bmi.net.tcp1"] + tcp1,
                  ["--ids", "bmi.net.tcp0,bmi.net.tcp1", "--expect", "found",
                   "--want", TCP0_TEXT,
                   "--want", "id=bmi.net.tcp1 type=tcp plane=::1/128 endpts=1 "
                             "ports=40000-40010,40020 bw=12.25",
                   "--key-len", "32", "--local-rank", "0",
                   "--note-has", "read bmi.net.tcp0, bmi.net.tcp1"],
                  "two allocations with one key")


def case_prototype():
    under_fake_rm(["--proto", "bmi.proto", "40001,40002,40003", "tcp", "127.0.0.0/8"],
                  ["--ids", "bmi.proto", "--expect", "found", "--key-len", "0",
                   "--want", "id=bmi.proto type=tcp plane=127.0.0.0/8 endpts=3 ports=40001-40003"],
                  "pnet/tcp prototype form")


def case_bare():
    under_fake_rm(["--bare", "bmi.bare", "40000-40010"],
                  ["--ids", "bmi.bare", "--expect", "found",
                   "--want", "id=bmi.bare type=tcp plane=0.0.0.0/0 endpts=1 ports=40000-40010"],
                  "bare string form")


def case_malformed_ports():
    under_fake_rm(["--alloc", "bmi.bad", "ports=32010-32000", "type=tcp", "plane=127.0.0.0/8",
                   "endpts=1"],
                  ["--ids", "bmi.bad", "--expect", "malformed", "--note-has", "bmi.bad:1: ports: "],
                  "backwards port range")


def case_malformed_plane():
    under_fake_rm(["--alloc", "bmi.bad", "ports=32000", "type=tcp", "endpts=1"],
                  ["--ids", "bmi.bad", "--expect", "malformed", "--note-has", "bmi.bad: plane: "],
                  "missing plane")


def case_absent():
    # The miss must come back at once: the lookup stays local (PMIX_OPTIONAL).
    under_fake_rm(["--alloc", "bmi.net.tcp0"] + TCP0,
                  ["--ids", "bmi.net.tcp0,bmi.unknown", "--expect", "absent", "--within", "2",
                   "--note-has", "bmi.unknown"],
                  "an id the RM did not register")


def case_local_ranks():
    under_fake_rm(["--alloc", "bmi.net.tcp0"] + TCP0,
                  ["--ids", "bmi.net.tcp0", "--expect", "found", "--want", TCP0_TEXT,
                   "--local-rank", "rank"],
                  "two local ranks", ranks=2)


def case_no_launcher():
    res = run(child("--ids", "bmi.net.tcp0", "--expect", "unavailable", "--note-has",
                    "no PMIx launcher"), clean_env(), "no launcher")
    if res.returncode != 0:
        fail(f"no launcher: exit {res.returncode}")


def mpirun_or_skip():
    """Debian's mpirun and the environment it needs as root; skips (or fails, when MPI is
    required) without it."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        if os.environ.get("BMI_REQUIRE_MPI") == "1":
            fail("mpirun missing (Debian: openmpi-bin), and BMI_REQUIRE_MPI=1")
        print("SKIP: mpirun missing (Debian: openmpi-bin)")
        sys.exit(SKIP)
    return mpirun, dict(clean_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def case_mpirun():
    mpirun, env = mpirun_or_skip()
    res = run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "1"] +
              child("--ids", "bmi.net.tcp0", "--expect", "absent", "--within", "5"),
              env, "under mpirun")
    if res.returncode != 0:
        fail(f"under mpirun: exit {res.returncode}")


def case_instance():
    # A BMI server started from two PMIx allocations (two loopback planes, one key): it listens
    # on each plane's ports, admits a client of the same allocation, refuses a keyless one.
    tcp1 = ["ports=40000-40010,40020", "type=tcp", "plane=::1/128", "endpts=1", f"key={KEY}"]
    under_fake_rm(["--alloc", "bmi.net.tcp0"] + TCP0 + ["--alloc", "bmi.net.tcp1"] + tcp1,
                  ["--ids", "bmi.net.tcp0,bmi.net.tcp1", "--expect", "found"],
                  "a BMI instance from two PMIx allocations", mode="instance")


def case_instance_ranks():
    # Two processes of one node share the allocation: each listens on its own slice.
    under_fake_rm(["--alloc", "bmi.net.tcp0"] + TCP0,
                  ["--ids", "bmi.net.tcp0", "--expect", "found"],
                  "two local ranks, two BMI servers", ranks=2, mode="instance")


def fallback_says_so(argv, env, what):
    env = dict(env, BMI_DEBUG="control")
    res = run(argv, env, what)
    if res.returncode != 0:
        fail(f"{what}: exit {res.returncode}")
    if "starting with the normal configuration instead" not in res.stderr:
        fail(f"{what}: the debug log does not say it fell back")


def case_instance_no_launcher():
    fallback_says_so(child("--ids", "bmi.net.tcp0", "--expect", "fallback", mode="instance"),
                     clean_env(), "a BMI instance with allocation_id= and no launcher")


def case_instance_mpirun():
    mpirun, env = mpirun_or_skip()
    fallback_says_so([mpirun, "--allow-run-as-root", "--oversubscribe", "-x", "BMI_DEBUG",
                      "-np", "1"] +
                     child("--ids", "bmi.net.tcp0", "--expect", "fallback", mode="instance"),
                     env, "a BMI instance with allocation_id= under mpirun")


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        fail(f"usage: pmix_test.py {'|'.join(CASES)}")
    if os.environ.get("BMI_HAVE_PMIX") != "1":
        print("SKIP: libbmi built without PMIx (meson option pmix; Debian: libpmix-dev)")
        sys.exit(SKIP)
    CASES[sys.argv[1]]()
    print(f"ok: {sys.argv[1]}")
