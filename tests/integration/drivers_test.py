#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The benchmark drivers at tiny sizes: every mode over BMI (`bmi`), the MPI twin under mpirun
(`mpi`, exit 77 without mpirun), and the baselines (`baselines`: eventfd, memcpy, TLS, the
ciphers' speed, handshakes with encryption). Tables
must be sane (sizes doubling from --min to --max, positive rounds, latency and bandwidth),
every message verified (--check), and BMI and MPI must print the same plan line by line."""
import os
import shutil
import subprocess
import sys

SKIP = 77
TIMEOUT = 60
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def table(text, lo, hi, what):
    rows = [tuple(l.split()) for l in text.splitlines()
            if l.strip() and not l.startswith("#")]
    if not any(l.startswith("# done:") for l in text.splitlines()):
        fail(f"{what}: no '# done' line in\n{text}")
    if not rows:
        fail(f"{what}: no rows")
    sizes = [int(r[0]) for r in rows]
    if sizes[0] != lo or sizes[-1] != hi or any(b != 2 * a for a, b in zip(sizes, sizes[1:])):
        fail(f"{what}: sizes {sizes} do not double from {lo} to {hi}")
    for r in rows:
        if len(r) != 4 or int(r[1]) <= 0 or float(r[2]) <= 0 or float(r[3]) <= 0:
            fail(f"{what}: bad row {r}")
    return [(int(r[0]), int(r[1])) for r in rows]


def run(argv, env=None, what=""):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                         env=dict(os.environ, **(env or {})))
    if res.returncode != 0:
        fail(f"{what or argv}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.stdout


def bmi_pair(exe, method, plan, clients=1):
    """A server and its clients; returns the reporting side's stdout."""
    listen = (f"shm://drivers-test-{os.getpid()}" if method == "shm" else "tcp://127.0.0.1:0")
    common = ["--method-list", f"bmi_{method}", "--timeout-ms", "20000"]
    server = subprocess.Popen([exe] + common + ["--server", listen], stdout=subprocess.PIPE,
                              text=True)
    procs = [server]
    try:
        line = server.stdout.readline()
        if not line.startswith("ADDR "):
            fail(f"{method}: server printed {line!r}")
        addr = line.split()[1]
        procs += [subprocess.Popen([exe] + common + ["--client", addr] + plan,
                                   stdout=subprocess.PIPE, text=True) for _ in range(clients)]
        outs = [p.communicate(timeout=TIMEOUT)[0] for p in procs[1:]]
        sout = server.communicate(timeout=TIMEOUT)[0]
        for p in procs:
            if p.returncode != 0:
                fail(f"{method} {plan}: exit {p.returncode}")
        return sout if clients > 1 else outs[0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def methods():
    return [m for m in os.environ.get("BMI_ENABLED_METHODS", "").split() if m in ("tcp", "shm")]


def test_bmi():
    exe = os.environ["BMI_PINGPONG"]
    for m in methods():
        lat = table(bmi_pair(exe, m, ["--max", "4K", "--iters", "10", "--check"]), 1, 4096,
                    f"{m} latency")
        bw = table(bmi_pair(exe, m, ["--mode", "bandwidth", "--window", "4", "--min", "64",
                                     "--max", "256K", "--iters", "8", "--check"]),
                   64, 262144, f"{m} bandwidth")
        many_out = bmi_pair(exe, m, ["--mode", "many", "--clients", "3", "--window", "4",
                                     "--min", "8", "--max", "64K", "--iters", "8", "--check"], 3)
        if "mode many" not in many_out or "clients 3" not in many_out:
            fail(f"{m} many: header does not name the mode: {many_out}")
        table(many_out, 8, 65536, f"{m} many")
        print(f"bmi_{m}: latency {len(lat)}, bandwidth {len(bw)} sizes ok, many ok")
    if "shm" in methods():
        test_beside_stream()


def test_beside_stream():
    """Round trips beside a streamer on one server: a sane line of percentiles and the server's
    receive rate, pinned to one CPU and unpinned; bad options are refused with exit 2."""
    exe = os.environ["BMI_BESIDE_STREAM"]
    cpu = min(os.sched_getaffinity(0))
    for pin in (["--cpus", f"{cpu},{cpu},{cpu}"], []):
        out = run([exe] + pin + ["--rounds", "300", "--size", str(1 << 20),
                                 "--name", f"beside-test-{os.getpid()}"], what="beside_stream")
        lines = out.splitlines()
        if len(lines) != 4 or lines[1].split() != ["mean_us", "p50_us", "p99_us", "p99.9_us",
                                                    "max_us"]:
            fail(f"beside_stream {pin}: want a header, a row and the server's line: {out!r}")
        mean, *ranks = (float(v) for v in lines[2].split())
        if mean <= 0 or ranks != sorted(ranks) or ranks[0] <= 0 or not ranks[-1] >= mean:
            fail(f"beside_stream {pin}: bad round trips {lines[2]!r}")
        if not lines[3].startswith("# the server received ") or " 0 messages" in lines[3]:
            fail(f"beside_stream {pin}: bad server line {lines[3]!r}")
    for bad in (["--cpus", f"0,0,{os.cpu_count() + 64}"], ["--rounds", "0"], ["--size", "-1"],
                ["--what"]):
        res = subprocess.run([exe] + bad, capture_output=True, text=True, timeout=TIMEOUT)
        if res.returncode != 2:
            fail(f"beside_stream {bad}: exit {res.returncode}, {res.stderr!r}")
    print("beside_stream ok")


def mpi_usable():
    """Whether the MPI runs can be checked here; prints why not. .ci/run sets
    BMI_REQUIRE_MPI=1, so a CI machine without MPI fails instead of skipping."""
    sanitize = os.environ.get("BMI_SANITIZE", "none")
    if shutil.which("mpirun") is None or not os.environ.get("BMI_MPI_PINGPONG"):
        why = "mpirun or mpi_pingpong missing (Debian: openmpi-bin libopenmpi-dev)"
        if os.environ.get("BMI_REQUIRE_MPI") == "1":
            fail(why + ", and BMI_REQUIRE_MPI=1")
        print("SKIP: " + why)
        return False
    if "thread" in sanitize:
        # libmpi is not instrumented; its own threads would only produce noise.
        print("SKIP: Open MPI under ThreadSanitizer")
        return False
    if "address" in sanitize:
        # Open MPI keeps allocations until exit by design; leaks inside it are not ours.
        os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return True


def test_mpi():
    mpirun, exe = shutil.which("mpirun"), os.environ.get("BMI_MPI_PINGPONG", "")
    if not mpi_usable():
        sys.exit(SKIP)
    bmi = os.environ["BMI_PINGPONG"]
    base = [mpirun, "--oversubscribe", "--mca", "pml", "ob1"]
    plans = {"latency": ["--max", "4K", "--iters", "10", "--check"],
             "bandwidth": ["--mode", "bandwidth", "--window", "4", "--min", "64", "--max",
                           "256K", "--iters", "8", "--check"]}
    for btl in ("tcp,self", "vader,self"):
        for mode, plan in plans.items():
            out = run(base + ["-np", "2", "--mca", "btl", btl, exe] + plan, ROOT_ENV,
                      f"mpi {btl} {mode}")
            lo, hi = (1, 4096) if mode == "latency" else (64, 262144)
            rows = table(out, lo, hi, f"mpi {btl} {mode}")
            twin = table(bmi_pair(bmi, "tcp", plan), lo, hi, f"bmi {mode}")
            if rows != twin:
                fail(f"{mode}: mpi and bmi plans differ: {rows} vs {twin}")
        out = run(base + ["-np", "3", "--mca", "btl", btl, exe, "--mode", "many", "--clients",
                          "2", "--window", "4", "--max", "64K", "--iters", "8", "--check"],
                  ROOT_ENV, f"mpi {btl} many")
        table(out, 1, 65536, f"mpi {btl} many")
        print(f"mpi {btl}: latency, bandwidth, many ok; same plan as bmi")
    # The BMI driver under mpirun: the ranks find the BMI server through MPI.
    bmi_mpi = os.environ["BMI_PINGPONG_MPI"]
    for m in methods():
        listen = ["--server", f"shm://drivers-mpi-{os.getpid()}"] if m == "shm" else []
        out = run(base + ["-np", "2", bmi_mpi, "--method-list", f"bmi_{m}"] + listen +
                  plans["latency"], ROOT_ENV, f"pingpong_mpi {m}")
        if table(out, 1, 4096, f"pingpong_mpi {m}") != table(bmi_pair(bmi, m, plans["latency"]),
                                                            1, 4096, f"bmi {m}"):
            fail(f"pingpong_mpi {m}: plan differs from standalone pingpong")
        out = run(base + ["-np", "3", bmi_mpi, "--method-list", f"bmi_{m}"] + listen +
                  ["--mode", "many", "--clients", "2", "--max", "64K", "--iters", "8", "--check"],
                  ROOT_ENV, f"pingpong_mpi {m} many")
        table(out, 1, 65536, f"pingpong_mpi {m} many")
        print(f"pingpong_mpi bmi_{m}: latency and many ok")
    res = subprocess.run(base + ["-np", "3", exe], capture_output=True, text=True,
                         timeout=TIMEOUT, env=dict(os.environ, **ROOT_ENV))
    if res.returncode == 0 or "needs exactly 2 ranks" not in res.stderr:
        fail(f"3 ranks in latency mode must be refused: {res.returncode} {res.stderr}")


def test_help():
    for var in ("BMI_PINGPONG", "BMI_EVENTFD_PINGPONG", "BMI_MEMCPY_BW", "BMI_HANDOFF_COPY_BW",
                "BMI_RAW_TCP_PINGPONG", "BMI_TLS_PINGPONG", "BMI_KTLS_PINGPONG"):
        if not os.environ.get(var):  # the TLS drivers are not built without OpenSSL
            continue
        res = subprocess.run([os.environ[var], "--help"], capture_output=True, text=True,
                             timeout=TIMEOUT)
        if res.returncode != 0 or "usage:" not in res.stdout:
            fail(f"{var} --help: exit {res.returncode}")
        res = subprocess.run([os.environ[var], "--client", "x", "--iters", "0"],
                             capture_output=True, text=True, timeout=TIMEOUT)
        if res.returncode != 2 or "out of range" not in res.stderr:
            fail(f"{var} with --iters 0: exit {res.returncode}, {res.stderr!r}")


def test_eventfd_pinning():
    """--cpus A,B pins both processes; a CPU this process may not use, or a malformed list,
    is refused at once with exit 2 (no child left waiting)."""
    exe = os.environ["BMI_EVENTFD_PINGPONG"]
    cpu = min(os.sched_getaffinity(0))
    table(run([exe, "--cpus", f"{cpu},{cpu}", "--iters", "200"]), 8, 8, "eventfd --cpus")
    for bad in ("1", "x,y", "-1,0", f"{cpu},{os.cpu_count() + 64}"):
        res = subprocess.run([exe, "--cpus", bad, "--iters", "200"], capture_output=True,
                             text=True, timeout=TIMEOUT)
        if res.returncode != 2 or "--cpus wants two CPUs" not in res.stderr:
            fail(f"eventfd_pingpong --cpus {bad}: exit {res.returncode}, {res.stderr!r}")


def test_wait_primitives():
    """Every way of waiting gives a one-way time; CPUs it may not use are refused with exit 2."""
    exe = os.environ["BMI_WAIT_PRIMITIVES"]
    cpu = min(os.sched_getaffinity(0))
    out = run([exe, "--cpus", f"{cpu},{cpu}", "--iters", "200"])
    times = [line for line in out.splitlines() if line.endswith(" us one way")]
    if len(times) != 7 or any(float(line.split()[-4]) <= 0 for line in times):
        fail(f"wait_primitives: expected 7 one-way times, got {out!r}")
    for bad in (["--cpus", "x"], ["--cpus", f"0,{os.cpu_count() + 64}"], ["--iters", "0"]):
        res = subprocess.run([exe] + bad, capture_output=True, text=True, timeout=TIMEOUT)
        if res.returncode != 2:
            fail(f"wait_primitives {bad}: exit {res.returncode}, {res.stderr!r}")


def test_handoff():
    """One copy between two CPUs: a positive table pinned on one CPU, on two where this process
    may use two, and unpinned; CPUs it may not use are refused with exit 2."""
    exe = os.environ["BMI_HANDOFF_COPY_BW"]
    cpus = sorted(os.sched_getaffinity(0))
    for pin in ([f"{cpus[0]},{cpus[0]}"], [f"{cpus[0]},{cpus[-1]}"], None):
        args = [exe] + (["--cpus"] + pin if pin else []) + ["--min", "4K", "--max", "1M"]
        table(run(args), 4096, 1 << 20, f"handoff_copy_bw {pin}")
    for bad in ("1", "x,y", f"{cpus[0]},{os.cpu_count() + 64}"):
        res = subprocess.run([exe, "--cpus", bad, "--max", "64K"], capture_output=True,
                             text=True, timeout=TIMEOUT)
        if res.returncode != 2 or "--cpus wants two CPUs" not in res.stderr:
            fail(f"handoff_copy_bw --cpus {bad}: exit {res.returncode}, {res.stderr!r}")


def kernel_has_tls():
    with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
        return "tls" in f.read().split()


def test_ktls():
    """The kernel-TLS twin of tls_pingpong: without the kernel's tls module it says so and
    exits 77 at once (the CI machines); with it, tables with every message verified."""
    exe = os.environ.get("BMI_KTLS_PINGPONG", "")
    if not exe:
        print("ktls_pingpong not built (no OpenSSL headers): not checked")
        return
    if not kernel_has_tls():
        res = subprocess.run([exe, "--server", "tcp://127.0.0.1:0"], capture_output=True,
                             text=True, timeout=TIMEOUT)
        if res.returncode != 77 or "no tls module" not in res.stderr:
            fail(f"ktls_pingpong without kernel TLS: exit {res.returncode}, {res.stderr!r}")
        print("ktls_pingpong: no kernel TLS here, refused with 77")
        return
    check_tls_tables(exe, "ktls")
    print("ktls latency and bandwidth tables ok")


def check_tls_tables(exe, name):
    """Both modes of a TLS driver, every message verified, its header naming it."""
    for plan, lo, hi in ((["--max", "64K", "--iters", "10", "--check"], 1, 65536),
                         (["--mode", "bandwidth", "--window", "4", "--min", "64", "--max", "1M",
                           "--iters", "8", "--check"], 64, 1 << 20)):
        client, server_rc = tls_pair(exe, plan)
        if client.returncode != 0 or server_rc != 0:
            fail(f"{name} {plan}: client {client.returncode}, server {server_rc}: "
                 f"{client.stderr}")
        if f"# {name}" not in client.stdout:
            fail(f"{name} {plan}: header does not name the tool: {client.stdout}")
        table(client.stdout, lo, hi, f"{name} {plan}")


def tls_pair(exe, plan, client_exe=None):
    """A tls_pingpong server and one client (client_exe instead, when given); returns the
    client's CompletedProcess-like (returncode, stdout, stderr), the server reaped."""
    common = ["--timeout-ms", "5000"]
    server = subprocess.Popen([exe] + common + ["--server", "tcp://127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("ADDR tcp://127.0.0.1:"):
            fail(f"tls_pingpong server printed {line!r}")
        client = subprocess.run([client_exe or exe] + common + ["--client", line.split()[1]] +
                                plan, capture_output=True, text=True, timeout=TIMEOUT)
        server.communicate(timeout=TIMEOUT)
        return client, server.returncode
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()


def test_tls():
    """The TLS 1.3 baseline: both modes with every message verified, a refused many mode, and
    a peer that does not speak TLS failing both ends in bounded time."""
    exe = os.environ.get("BMI_TLS_PINGPONG", "")
    if not exe:
        print("tls_pingpong not built (no OpenSSL headers): not checked")
        return
    check_tls_tables(exe, "tls")
    res = subprocess.run([exe, "--client", "tcp://127.0.0.1:1", "--mode", "many"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    if res.returncode != 2 or "no TLS twin" not in res.stderr:
        fail(f"tls_pingpong --mode many: exit {res.returncode}, {res.stderr!r}")
    # A plain TCP client against the TLS server: the server's handshake fails, not hangs.
    client, server_rc = tls_pair(exe, ["--max", "8", "--iters", "1"],
                                 os.environ["BMI_RAW_TCP_PINGPONG"])
    if client.returncode == 0 or server_rc != 1:
        fail(f"raw client against tls server: client {client.returncode}, server {server_rc}")
    print("tls latency and bandwidth tables ok, a non-TLS peer refused")


def test_cipher_speed():
    """Every cipher this CPU runs gets positive seal and open rates; bad values exit 2."""
    exe = os.environ["BMI_CIPHER_SPEED"]
    out = run([exe, "--seconds", "0.05", "--record", "4096"])
    rows = {r[0]: r[1:] for r in (l.split() for l in out.splitlines())
            if r and not r[0].startswith("#")}
    if set(rows) != {"aes256gcm", "chacha20poly1305"} or "# done" not in out:
        fail(f"cipher_speed: want a row per cipher and '# done', got {out!r}")
    if any(float(v) <= 0 for v in rows["chacha20poly1305"][:2]) or \
            (rows["aes256gcm"][0] != "n/a" and any(float(v) <= 0 for v in rows["aes256gcm"][:2])):
        fail(f"cipher_speed: a rate is not positive: {out!r}")
    for bad in (["--record", "0"], ["--record", "65537"], ["--seconds", "x"], ["--nosuch", "1"]):
        res = subprocess.run([exe] + bad, capture_output=True, text=True, timeout=TIMEOUT)
        if res.returncode != 2:
            fail(f"cipher_speed {bad}: exit {res.returncode}, {res.stderr!r}")


def test_handshake_rate():
    """Over tcp, a row with encryption required beside the keyless and keyed ones."""
    out = run([os.environ["BMI_HANDSHAKE_RATE"], "--handshakes", "10", "--messages", "20",
               "--rounds", "1"])
    rows = {r[0]: r[1:] for r in (l.split() for l in out.splitlines())
            if r and not r[0].startswith("#")}
    if set(rows) != {"none", "key", "encrypted"} or \
            any(float(v) <= 0 for vals in rows.values() for v in vals):
        fail(f"handshake_rate: want none, key and encrypted rows, got {out!r}")


def test_baselines():
    test_help()
    test_tls()
    test_cipher_speed()
    test_handshake_rate()
    test_eventfd_pinning()
    test_handoff()
    test_ktls()
    test_wait_primitives()
    evfd = run([os.environ["BMI_EVENTFD_PINGPONG"], "--iters", "200"])
    table(evfd, 8, 8, "eventfd")
    table(run([os.environ["BMI_MEMCPY_BW"], "--max", "64K"]), 1, 65536, "memcpy")
    print("eventfd and memcpy tables ok")


if __name__ == "__main__":
    {"bmi": test_bmi, "mpi": test_mpi, "baselines": test_baselines}[sys.argv[1]]()
