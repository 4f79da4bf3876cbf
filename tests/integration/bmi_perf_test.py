#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf and bmi-perf-studies end to end at tiny sizes: tables, CSV, PNG and SVG plots, the
Markdown report, each study, and their failures (bad arguments, an unreachable server) with
clear messages in bounded time. Every run makes exactly the runs its plan counted. bmi-perf
runs as installed, from its installed files alone, without the studies. Every run starts in an
empty directory: without --out-dir the output goes to one new time-stamped directory there,
and nothing else is ever written into the current directory."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

EXE = os.environ["BMI_PERF"]
STUDIES = os.environ["BMI_PERF_STUDIES"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def bmi_perf(args, timeout=240, cwd=None, exe=EXE):
    """One run; unless it stopped at its arguments, its runs must be the ones its plan
    counted: every progress line counts against that total and the last says so."""
    res = subprocess.run([exe] + args, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    made = re.search(r"^(\S+): (\d+) runs made of (\d+) planned$", res.stderr, re.M)
    if res.returncode == 2 or "--help" in args or (made is None and res.returncode != 0):
        return res
    if made is None or made.group(2) != made.group(3):
        fail(f"{args}: the runs made are not the runs planned:\n{res.stderr}")
    planned = int(made.group(3))
    totals = {int(t) for t in re.findall(r"^\[\d+/(\d+)\]", res.stderr, re.M)}
    done = [int(n) for n in re.findall(r"^\[(\d+)/\d+\] .*: (?:ok|failed)", res.stderr, re.M)]
    if totals - {planned} or done != list(range(1, planned + 1)):
        fail(f"{args}: progress {sorted(totals)} and runs {done} against {planned} planned:\n"
             f"{res.stderr}")
    return res


def studies(args, timeout=240, cwd=None):
    return bmi_perf(args, timeout, cwd, STUDIES)


def empty_dir(tmp, name):
    path = os.path.join(tmp, name)
    os.mkdir(path)
    return path


def check_help_and_bad_args():
    res = bmi_perf(["--help"])
    if res.returncode != 0 or "--methods" not in res.stdout or "--server" not in res.stdout:
        fail(f"--help: {res.returncode} {res.stdout}")
    res = studies(["--help"])
    if res.returncode != 0 or "--studies" not in res.stdout or "--markdown" not in res.stdout:
        fail(f"bmi-perf-studies --help: {res.returncode} {res.stdout}")
    for exe, bad, words in ((bmi_perf, ["--methods", "nosuch"], "unknown nosuch"),
                            (bmi_perf, ["--max", "12Q"], "bad size"),
                            (bmi_perf, ["--min", "8", "--max", "4"], "--min <= --max"),
                            (bmi_perf, ["--server", "nowhere"], "expected tcp://"),
                            (bmi_perf, ["--modes", "peers"], "unknown peers"),
                            (studies, ["--include", "/nonexistent.md"], "no such file"),
                            (studies, ["--peers", "0,many"], "bad counts"),
                            (studies, ["--idle-seconds", "0"], "want more than 0"),
                            (studies, ["--studies", "nosuch"], "unknown nosuch")):
        res = exe(bad)
        if res.returncode != 2 or words not in res.stderr:
            fail(f"{bad}: want exit 2 and {words!r}, got {res.returncode}: {res.stderr}")


def check_targets(tmp):
    """The targets are data: a row missing from the table, or one no study judges by, stops
    bmi-perf-studies before any run, naming the row."""
    with open(os.path.join(os.path.dirname(STUDIES), "targets.tsv")) as f:
        rows = f.read().splitlines()
    last = rows[-1].split("\t")
    for name, lines, words in (("missing", rows[:-1], f"no target {last[1]} for study {last[0]}"),
                               ("extra", rows + ["shm\tnosuch\t<=\t1"],
                                "rows no study judges by: shm nosuch")):
        path = os.path.join(tmp, f"targets-{name}.tsv")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        res = studies(["--targets", path, "--methods", "tcp", "--out-dir",
                       os.path.join(tmp, f"targets-{name}")])
        if res.returncode != 2 or words not in res.stderr or "ok (" in res.stderr:
            fail(f"targets table with a row {name}: want exit 2 and {words!r} before any run, "
                 f"got {res.returncode}: {res.stderr}")


def check_unreachable(tmp):
    # Without --out-dir, and failing before it has anything to write: it leaves nothing behind.
    cwd = empty_dir(tmp, "unreachable")
    started = time.monotonic()
    res = bmi_perf(["--server", "tcp://127.0.0.1:1", "--quick", "--connect-timeout-ms", "3000"],
                   timeout=60, cwd=cwd)
    if res.returncode != 1 or "cannot reach server tcp://127.0.0.1:1" not in res.stderr:
        fail(f"unreachable server: {res.returncode} {res.stderr}")
    if time.monotonic() - started > 30:
        fail("unreachable server took more than 30 s to report")
    if os.listdir(cwd):
        fail(f"a failed run left {os.listdir(cwd)} in its current directory")


def check_run(tmp, methods, plots):
    baselines = ["raw-tcp", "eventfd", "memcpy", "handoff"]
    # NetPIPE and MPI are not ours: a sanitized build runs them as they are, so the plain
    # build's run checks how they are read (and see drivers_test.py for MPI).
    plain = os.environ.get("BMI_SANITIZE", "none") == "none"
    if shutil.which("NPtcp") and plain:
        baselines.append("netpipe")
    if shutil.which("mpirun") and os.environ.get("BMI_HAVE_MPI") == "1" and plain:
        baselines += ["mpi-tcp", "mpi-shm"]
    md = os.path.join(tmp, "PERF.md")
    extra = os.path.join(tmp, "written-by-hand.md")
    with open(extra, "w") as f:
        f.write("## A hand-written section\n\nkept verbatim\n")
    args = ["--include", extra, "--methods", ",".join(methods), "--baselines", ",".join(baselines),
            "--min", "1", "--max", "16K", "--iters", "10", "--window", "4", "--clients", "2",
            "--idle-seconds", "0.5", "--check", "--out-dir", tmp, "--markdown", md,
            "--plot", "png" if plots else "none"]
    cwd = empty_dir(tmp, "run")
    res = studies(args, cwd=cwd)
    if res.returncode != 0:
        fail(f"bmi-perf: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    if os.listdir(cwd):
        fail(f"a run with --out-dir wrote {os.listdir(cwd)} into its current directory")
    for words in ("== latency: latency", "== bandwidth: bandwidth (MB/s)", "== many",
                  "bmi tcp", "raw tcp"):
        if words not in res.stdout:
            fail(f"table lacks {words!r}:\n{res.stdout}")
    if "B done" not in res.stderr and "ok (" not in res.stderr:
        fail(f"no progress on stderr: {res.stderr}")
    if not re.search(r"^bmi-perf-studies: \d+ runs planned: \d+ for the tables, .*\d+ shm",
                     res.stderr, re.M):
        fail(f"no plan on stderr: {res.stderr}")
    with open(os.path.join(tmp, "bmi-perf.csv")) as f:
        rows = list(csv.DictReader(f))
    series = {(r["series"], r["mode"]) for r in rows}
    want = {(f"bmi {m}", mode) for m in methods for mode in ("latency", "bandwidth", "many")}
    want |= {("raw tcp", "latency"), ("eventfd", "latency"), ("memcpy", "latency"),
             ("handoff", "latency"), ("handoff", "bandwidth")}
    if "mpi-tcp" in baselines:
        want |= {("mpi tcp", mode) for mode in ("latency", "bandwidth", "many")}
    if not want <= series:
        fail(f"CSV lacks {sorted(want - series)}")
    for r in rows:
        if float(r["bandwidth_MBps"]) <= 0 or float(r["latency_us"]) <= 0:
            fail(f"CSV row without a positive measurement: {r}")
    for mode in ("latency", "bandwidth", "many") if plots else ():
        for kind in ("latency", "bandwidth"):
            path = os.path.join(tmp, f"bmi-perf-{mode}-{kind}.png")
            with open(path, "rb") as f:
                if f.read(8) != PNG_MAGIC or os.path.getsize(path) < 2000:
                    fail(f"{path} is not a PNG plot")
    text = open(md).read()
    for words in ("# libbmi performance", "Load average", "| bytes |",
                  "Where libbmi beats its peers", "## A hand-written section\n\nkept verbatim") + (("![latency latency]",) if plots else ()):
        if words not in text:
            fail(f"Markdown report lacks {words!r}")
    if "shm" in methods and "## shm targets" not in text:
        fail("Markdown report lacks the shm targets")
    # The blocking target is judged on pinned runs taken in turns, in both placements.
    for placement in ("two cores", "one core") if "shm-blocking" in methods else ():
        if len(os.sched_getaffinity(0)) < 2 and placement == "two cores":
            continue
        if f"eventfd ping-pong, both processes on {placement} (median of 5 runs" not in text:
            fail(f"Markdown report lacks the blocking duel on {placement}:\n{text}")
    # Every method's idle server was measured: n/a would mean its server never started.
    for m in methods:
        got = re.search(rf"^idle server CPU, bmi {re.escape(m)}: (\S+)", res.stdout, re.M)
        if got is None or got.group(1) == "n/a":
            fail(f"idle server CPU of bmi {m}: {got.group(0) if got else 'missing'}")
    if "tcp-legacy" in methods:
        check_legacy_duel(res.stdout, text)
    if "mpi-shm" in baselines and "shm" in methods and \
            "vs Open MPI vader, one core each (median of 5 runs" not in text:
        fail(f"Markdown report lacks the latency duel:\n{text}")


def check_legacy_duel(stdout, text):
    """tcp-legacy is judged against v2 framing in runs taken in turns, at every size of the
    plan (1 B-16 KiB here: 15 sizes, each from all 5 turns)."""
    if "== tcp legacy framing vs v2, ping-pong, median of 5 turns" not in stdout:
        fail(f"no legacy duel on stdout:\n{stdout}")
    head = "## tcp legacy framing against libbmi's own (legacy duel)"
    if head not in text:
        fail(f"Markdown report lacks the legacy duel:\n{text}")
    section = text.split(head, 1)[1].split("\n## ", 1)[0]
    row = r"^\| (\d+) \| [\d.]+ \| [\d.]+ \| ([\d.]+) \| 5 \| (met|within noise|\*\*not met\*\*) \|$"
    rows = re.findall(row, section, re.M)
    sizes = [int(r[0]) for r in rows]
    if sizes != [1 << i for i in range(15)]:
        fail(f"legacy duel: want a row of 5 turns for each size 1..16384, got {sizes}:\n{section}")
    for size, ratio, verdict in rows:
        # The verdict is on the unrounded ratio: a printed 1.00 may be met or within noise.
        if float(ratio) != 1 and (float(ratio) < 1) != (verdict == "met"):
            fail(f"legacy duel: {size} B ratio {ratio} judged {verdict}")


def check_default_dir(tmp, plots):
    """Without --out-dir: one new bmi-perf-YYYYmmdd-HHMMSS directory, named on stderr, holds
    the CSV (and the SVG plots when gnuplot is there), and nothing else appears."""
    cwd = empty_dir(tmp, "default")
    res = bmi_perf(["--methods", "tcp", "--baselines", "none", "--modes", "latency", "--max",
                    "1K", "--iters", "5", "--plot", "svg" if plots else "none"], cwd=cwd)
    if res.returncode != 0:
        fail(f"default directory run: {res.returncode} {res.stderr}")
    entries = os.listdir(cwd)
    if len(entries) != 1 or not re.fullmatch(r"bmi-perf-\d{8}-\d{6}", entries[0]):
        fail(f"want one bmi-perf-YYYYmmdd-HHMMSS directory in the current one, got {entries}")
    out = os.path.join(cwd, entries[0])
    if f"output directory {entries[0]}" not in res.stderr:
        fail(f"the output directory is not announced on stderr: {res.stderr}")
    if not os.path.isfile(os.path.join(out, "bmi-perf.csv")):
        fail(f"no bmi-perf.csv in {out}: {os.listdir(out)}")
    path = os.path.join(out, "bmi-perf-latency-bandwidth.svg")
    if plots and (not os.path.exists(path) or "<svg" not in open(path).read(4096)):
        fail(f"svg run: no SVG plot in {out}: {os.listdir(out)}")


def check_installed_runner(tmp):
    """bmi-perf from its installed files alone (meson introspect --installed), none of the
    studies among them: latency and rate mode against raw TCP, tables, CSV."""
    build = os.environ["BMI_BUILD_ROOT"]
    meson = shutil.which("meson")
    if meson is None:
        print("meson not on PATH: the installed runner is not checked")
        return
    res = subprocess.run([meson, "introspect", "--installed", build], capture_output=True,
                         text=True, timeout=60)
    if res.returncode != 0:
        fail(f"meson introspect --installed: {res.stderr}")
    installed = json.loads(res.stdout)
    studies_files = [d for s, d in installed.items() if "studies" in s or "targets" in d]
    if studies_files:
        fail(f"the studies are installed: {studies_files}")
    root = empty_dir(tmp, "installed")
    for source, dest in installed.items():
        if dest.endswith("/bin/bmi-perf") or ("/libexec/bmi/" in dest and dest.endswith(".py")):
            shutil.copy(source, os.path.join(root, os.path.basename(dest)))
    out_dir = os.path.join(root, "out")
    res = bmi_perf(["--methods", "tcp", "--baselines", "raw-tcp", "--modes", "latency,rate",
                    "--max", "64", "--iters", "10", "--plot", "none", "--out-dir", out_dir,
                    "--bindir", os.path.join(build, "benchmark")],
                   exe=os.path.join(root, "bmi-perf"))
    if res.returncode != 0:
        fail(f"installed bmi-perf: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    if "== rate: message rate (messages/s)" not in res.stdout:
        fail(f"installed bmi-perf: no rate table:\n{res.stdout}")
    with open(os.path.join(out_dir, "bmi-perf.csv")) as f:
        series = {(r["series"], r["mode"]) for r in csv.DictReader(f)}
    want = {(n, m) for n in ("bmi tcp", "raw tcp") for m in ("latency", "rate")}
    if not want <= series:
        fail(f"installed bmi-perf: CSV lacks {sorted(want - series)}")


def expected_placements():
    """The placements peers and posted studies measure here (studies/study.py
    three_placements): two cores only where this process may use two."""
    two = ["two cores"] if len(os.sched_getaffinity(0)) >= 2 else []
    return two + ["one core", "unpinned"]


def check_placed_table(stdout, title, placement, count, what):
    """A table of the peers or posted study on stdout: rows for 0 and count, each with a positive
    time, the first with ratio 1 except unpinned (judged against the slower placed run)."""
    table = stdout.split(f"== {title}, {placement}, median of 3 turns", 1)
    if len(table) != 2:
        fail(f"{what}: no table on stdout:\n{stdout}")
    rows = re.findall(r"^ +(\d+) +([\d.]+) +([\d.]+)$", table[1], re.M)[:2]
    if [int(r[0]) for r in rows] != [0, count] or not float(rows[1][1]) > 0 or \
            not float(rows[0][2]) > 0 or \
            (placement != "unpinned" and float(rows[0][2]) != 1.0):
        fail(f"{what}: want rows for 0 (ratio 1) and {count}, got {rows}")


def check_peers(tmp, method):
    """The peers study: a ping-pong of method (tcp or shm) beside 0 and 16 idle clients that
    idle_peers holds, in 3 turns each and in every placement, judged against the target in
    the tables and the report."""
    md = os.path.join(tmp, f"PEERS-{method}.md")
    res = studies(["--studies", "peers", "--modes", "none", "--peers", "16,0", "--methods",
                   method, "--baselines", "none", "--iters", "20", "--plot", "none",
                   "--out-dir", empty_dir(tmp, f"peers-{method}"), "--markdown", md])
    if res.returncode != 0:
        fail(f"peers study ({method}): exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    text = open(md).read()
    if f"## {method} beside idle peers (peers study)" not in text:
        fail(f"peers study ({method}): the report lacks its section:\n{text}")
    for placement in expected_placements():
        check_placed_table(res.stdout, f"{method} ping-pong beside idle peers", placement, 16,
                           f"peers study ({method}, {placement})")
        if not re.search(rf"^\| {placement} \| 16 \| [\d.]+ \| [\d.]+ \| "
                         rf"(met|\*\*not met\*\*) \|$", text, re.M):
            fail(f"peers study ({method}): the report lacks the {placement} row of 16 idle "
                 f"peers:\n{text}")


def check_neighbour(tmp, methods):
    """The neighbour study runs end to end in a short window: a row per method and size with the
    loop's rate alone, its losses beside both clients and their latencies, in the table and
    the report. No verdict is checked: a loaded machine decides those, not the code."""
    md = os.path.join(tmp, "NEIGHBOUR.md")
    res = studies(["--studies", "neighbour", "--modes", "none", "--neighbour-seconds", "0.05",
                   "--methods", ",".join(methods), "--baselines", "none", "--plot", "none",
                   "--out-dir", empty_dir(tmp, "neighbour"), "--markdown", md])
    if res.returncode != 0:
        fail(f"neighbour study: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    table = res.stdout.split("== a neighbour's fair share", 1)
    if len(table) != 2:
        fail(f"neighbour study: no table on stdout:\n{res.stdout}")
    if "failed" in res.stderr:
        fail(f"neighbour study: a run failed:\n{res.stderr}")
    # method, bytes, alone rate, 2 losses, their difference, 2 latencies, 2 client CPU
    # shares, turns, verdict
    cell = r" +([-+]?[\d.]+)( %)?"
    rows = re.findall(rf"^ +(tcp|shm) +(\d+)((?:{cell}){{8}}) +3  (met|not met)$", table[1],
                      re.M)
    got = [(r[0], int(r[1])) for r in rows]
    want = [(m, size) for m in methods for size in (8, 131072)]
    if got != want:
        fail(f"neighbour study: want rows {want}, got {got}:\n{table[1]}")
    for r in rows:
        values = [float(v) for v in re.findall(r"[-+]?[\d.]+", r[2])]
        if not (values[0] > 0 and values[4] > 0 and values[5] > 0):
            fail(f"neighbour study: a rate or latency is not positive: {r}")
    text = open(md).read()
    if "## A neighbour's fair share (neighbour study)" not in text or \
            len(re.findall(r"^\| (tcp|shm) \| (8|131072) \| .* \| 3 \| (met|\*\*not met\*\*) \|$",
                           text, re.M)) != len(want):
        fail(f"neighbour study: the report lacks its section or a row:\n{text}")


def check_posted(tmp, methods):
    """The posted study: tcp and shm ping-pongs beside 0 and 300 receives the server keeps posted,
    in 3 turns each and in every placement, judged against the target in the tables and the
    report."""
    md = os.path.join(tmp, "POSTED.md")
    res = studies(["--studies", "posted", "--modes", "none", "--posted", "300,0", "--methods",
                   ",".join(methods), "--baselines", "none", "--iters", "20", "--plot", "none",
                   "--out-dir", empty_dir(tmp, "posted"), "--markdown", md])
    if res.returncode != 0:
        fail(f"posted study: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    text = open(md).read()
    for m in methods:
        for placement in expected_placements():
            check_placed_table(res.stdout, f"{m} ping-pong beside posted receives", placement,
                               300, f"posted study ({m}, {placement})")
            if not re.search(rf"^\| {m} \| {placement} \| 300 \| [\d.]+ \| [\d.]+ \| "
                             rf"(met|\*\*not met\*\*) \|$", text, re.M):
                fail(f"posted study: the report lacks the {m} {placement} row of 300 posted:"
                     f"\n{text}")


def expect_duel_row(study, stdout, text, keys, target):
    """A duel study's judged row, on stdout and in the report: its key columns, three figures
    (ours, theirs, the ratio), the target and, in the report, five turns and a verdict."""
    printed = " +".join(re.escape(k) for k in keys)
    if not re.search(rf"^{printed} +[\d.]+ +[\d.]+ +[\d.]+ +{re.escape(target)}$", stdout, re.M):
        fail(f"{study}: no {' '.join(keys)} row:\n{stdout}")
    cells = "".join(rf"\| {re.escape(k)} " for k in keys)
    if not re.search(rf"^{cells}\| [\d.]+ \| [\d.]+ \| [\d.]+ \| {re.escape(target)} \| 5 \| "
                     rf"(met|\*\*not met\*\*) \|$", text, re.M):
        fail(f"{study}: the report lacks the {' '.join(keys)} row:\n{text}")


def check_same_node(tmp):
    """The same-node study: the tcp-addressed ping-pong went over shm in every run (its client's
    shm method ran), and each placement and size has its judged row in the table and the
    report."""
    md = os.path.join(tmp, "SAME-NODE.md")
    res = studies(["--studies", "same-node", "--modes", "none", "--methods", "tcp,shm",
                   "--baselines", "none", "--iters", "20", "--plot", "none",
                   "--out-dir", empty_dir(tmp, "same-node"), "--markdown", md])
    if res.returncode != 0:
        fail(f"same-node study: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    if "stayed on tcp" in res.stdout:
        fail(f"same-node study: a tcp-addressed run was not carried over shm:\n{res.stdout}")
    text = open(md).read()
    for placement in expected_placements():
        for size in ("8 B", "1 MiB"):
            expect_duel_row("same-node study", res.stdout, text, [placement, size], "<= 1.2")


def check_ofi_study(tmp):
    """The ofi study: bmi_ofi (its default queue and the polled one) and fi_pingpong at 8 B
    (--max 8 leaves the large sizes out) in each placement, in turns: a judged row per queue
    and placement on stdout and in the report."""
    md = os.path.join(tmp, "OFI.md")
    res = studies(["--studies", "ofi", "--modes", "none", "--methods", "ofi-tcp,ofi-tcp-polled",
                   "--baselines", "fi-pingpong", "--iters", "20", "--max", "8", "--plot", "none",
                   "--out-dir", empty_dir(tmp, "ofi"), "--markdown", md])
    if res.returncode != 0 or "failed" in res.stderr:
        fail(f"ofi study: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    text = open(md).read()
    for placement in expected_placements():
        for queue in ("wait descriptor", "polled"):
            expect_duel_row("ofi study", res.stdout, text, [placement, "8 B", queue], "<= 1.1")
    if "MiB" in res.stdout:
        fail(f"ofi study: a size above --max ran:\n{res.stdout}")


def check_placement(tmp, methods):
    """The placement studies: an 8-byte ping-pong per method on two cores, one core and unpinned,
    each against its reference, in turns: a row per method and placement with both times, the
    ratio and the target, on stdout and in the report. mpirun is left out (shm's two-core row,
    against vader, is then missing); no verdict is checked, the machine's load decides those."""
    md = os.path.join(tmp, "PLACEMENT.md")
    res = studies(["--studies", "placement,placement-bw", "--modes", "none", "--methods",
                   ",".join(methods), "--baselines", "raw-tcp,eventfd,memcpy", "--iters", "20",
                   "--max", "1M", "--plot", "none",
                   "--out-dir", empty_dir(tmp, "placement"), "--markdown", md])
    if res.returncode != 0 or "failed" in res.stderr:
        fail(f"placement study: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    table = res.stdout.split("== 8 B ping-pong in three placements", 1)
    if len(table) != 2:
        fail(f"placement study: no table on stdout:\n{res.stdout}")
    rows = re.findall(r"^(tcp|shm) +(two cores|one core|unpinned) +([\d.]+) +(.+?) +([\d.]+) +"
                      r"([\d.]+) +([\d.]+)$", table[1], re.M)
    want = {"tcp": ["two cores", "one core", "unpinned"], "shm": ["one core", "unpinned"]}
    if len(os.sched_getaffinity(0)) < 2:
        want = {m: [p for p in ps if p != "two cores"] for m, ps in want.items()}
    got = [(r[0], r[1]) for r in rows]
    if got != [(m, p) for m in methods for p in want[m]]:
        fail(f"placement study: want rows {want} for {methods}, got {got}:\n{table[1]}")
    for r in rows:
        if not (float(r[2]) > 0 and float(r[4]) > 0 and float(r[5]) > 0):
            fail(f"placement study: a time or ratio is not positive: {r}")
    text = open(md).read()
    if "## Small messages in three placements (placement study)" not in text or \
            len(re.findall(r"^\| (tcp|shm) \| (two cores|one core|unpinned) \| .* \| "
                           r"(met|\*\*not met\*\*) \|$", text, re.M)) != len(rows):
        fail(f"placement study: the report lacks its section or a row:\n{text}")
    # The bandwidth half: tcp from 64 KiB against raw tcp, both ways; shm at 1 MiB against
    # memcpy; every placement, a ratio per size.
    places = want["tcp"]
    titles = {"tcp": ["tcp ping-pong vs raw tcp", "tcp streaming vs raw tcp"],
              "shm": ["shm, malloc'd buffers, vs memcpy"]}
    for m in methods:
        for title in titles[m]:
            for p in places:
                sizes = "64 KiB .*1 MiB [\d.]+" if m == "tcp" else "1 MiB [\d.]+"
                if not re.search(rf"^{re.escape(title)}, {p} \(>= [\d.]+\): {sizes}$",
                                 res.stdout, re.M):
                    fail(f"placement study: no {title!r} line for {p}:\n{res.stdout}")
                if not re.search(rf"^\| {re.escape(title)} \| {p} \| .* \| "
                                 r"(met|\*\*not met\*\*) \|$", text, re.M):
                    fail(f"placement study: the report lacks {title!r} for {p}:\n{text}")
    # The framed twin: a ratio per size, and no verdict.
    framed = "tcp ping-pong vs raw tcp with bmi_tcp's framing (no target)"
    for p in places if "tcp" in methods else ():
        line = rf"^{re.escape(framed)}, {p} \(no target\): 64 KiB [\d.]+.*1 MiB [\d.]+$"
        if not re.search(line, res.stdout, re.M):
            fail(f"placement study: no framed-twin line for {p}:\n{res.stdout}")
        if not re.search(rf"^\| {re.escape(framed)} \| {p} \| n/a \| .* \| no target \|$",
                         text, re.M):
            fail(f"placement study: the report lacks the framed-twin row for {p}:\n{text}")


def check_encryption(tmp):
    """Encrypted libbmi tcp beside unencrypted tcp and TLS 1.3 at the same sizes in one run, and
    the encryption study's ciphers and handshakes, in the tables and the report."""
    md = os.path.join(tmp, "ENC.md")
    out_dir = empty_dir(tmp, "encryption")
    args = ["--methods", "tcp,tcp-encrypted", "--baselines", "tls,raw-tcp",
            "--modes", "latency,bandwidth", "--studies", "encryption", "--max", "64K", "--iters",
            "10", "--window", "4", "--check", "--plot", "none", "--out-dir", out_dir,
            "--markdown", md]
    res = studies(args)
    if res.returncode != 0:
        fail(f"encryption run: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    with open(os.path.join(out_dir, "bmi-perf.csv")) as f:
        rows = list(csv.DictReader(f))
    sizes = {}
    for r in rows:
        sizes.setdefault((r["series"], r["mode"]), set()).add(int(r["bytes"]))
    for mode in ("latency", "bandwidth"):
        got = [sizes.get((name, mode)) for name in ("bmi tcp", "bmi tcp-encrypted", "tls")]
        if None in got or not got[0] == got[1] == got[2]:
            fail(f"{mode}: bmi tcp, bmi tcp-encrypted and tls not at the same sizes: {got}")
    for words in ("== encryption: record ciphers", "chacha20poly1305: seal ",
                  "encrypted: ", "key: ", "none: "):
        if words not in res.stdout:
            fail(f"encryption summary lacks {words!r}:\n{res.stdout}")
    text = open(md).read()
    for words in ("## Encryption: the ciphers' own speed and handshakes", "| encrypted |",
                  "`cipher_speed --seconds 1`", "bmi tcp-encrypted / tls"):
        if words not in text:
            fail(f"Markdown report lacks {words!r}")


def check_fi_pingpong(tmp):
    """libfabric's own ping-pong runs beside an ofi series, on that series' provider, and its
    table lands in the CSV in our units (fi_pingpong prints 1k, 1m and one-way usec/xfer). The
    polled variant of the series is the same provider: one fi_pingpong run serves both."""
    out = empty_dir(tmp, "fi")
    res = bmi_perf(["--methods", "ofi-tcp,ofi-tcp-polled", "--baselines", "fi-pingpong",
                    "--modes", "latency", "--max", "4K", "--iters", "20", "--plot", "none",
                    "--out-dir", out], timeout=120)
    if res.returncode != 0:
        fail(f"bmi-perf with fi-pingpong: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    if "3 runs made of 3 planned" not in res.stderr + res.stdout:
        fail(f"want two ofi series and one fi_pingpong run:\n{res.stdout}\n{res.stderr}")
    with open(os.path.join(out, "bmi-perf.csv")) as f:
        every = list(csv.DictReader(f))
    for series in ("bmi ofi-tcp", "bmi ofi-tcp-polled"):
        got = [int(r["bytes"]) for r in every if r["series"] == series]
        if got != [1 << i for i in range(13)]:
            fail(f"{series}: want every power of two 1..4096, got {got}:\n{res.stderr}")
    rows = [r for r in every if r["series"] == "fi pingpong"]
    sizes = [int(r["bytes"]) for r in rows]
    if sizes != [1 << i for i in range(13)]:
        fail(f"fi pingpong: want every power of two 1..4096, got {sizes}:\n{res.stderr}")
    for r in rows:
        us, mbps = float(r["latency_us"]), float(r["bandwidth_MBps"])
        # Both columns are rounded as printed: a slow 1-byte row's bandwidth may be 0.0001.
        us_room, mbps_room = half_last_digit(r["latency_us"]), half_last_digit(r["bandwidth_MBps"])
        if us <= us_room:
            fail(f"fi pingpong row without a one-way time: {r}")
        nbytes = int(r["bytes"])
        low, high = nbytes / (us + us_room), nbytes / (us - us_room)
        if not low * 0.99 - mbps_room <= mbps <= high * 1.01 + mbps_room:
            fail(f"fi pingpong row not one-way time and its bandwidth: {r}")


def half_last_digit(text):
    """Half a unit of the last digit `text` was printed with: what its rounding may hide."""
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10 ** -decimals


def main():
    plots = shutil.which("gnuplot") is not None
    if not plots:
        print("gnuplot not installed (Debian: gnuplot-nox): plots are not checked")
    methods = [m for m in os.environ.get("BMI_ENABLED_METHODS", "").split() if m in ("tcp", "shm")]
    # The duels are comparisons in runs taken in turns: the plain build checks how they are
    # judged and reported; under a sanitizer they would only double this test's time.
    duels = os.environ.get("BMI_SANITIZE", "none") == "none"
    if "shm" in methods and duels:
        methods.append("shm-blocking")  # with eventfd: the pinned blocking duels
    if "tcp" in methods and duels:
        methods.append("tcp-legacy")  # against tcp: the legacy duel
    with tempfile.TemporaryDirectory(prefix="bmi-perf-test-") as tmp:
        check_help_and_bad_args()
        check_targets(tmp)
        check_unreachable(tmp)
        check_run(tmp, methods, plots)
        # The encryption and peers studies check how their runs are reported, which a
        # sanitizer does not change; encryption and many peers have sanitized tests of their
        # own (integration/keys_encrypted_tcp, methods/shm/many_peers, the peer rules).
        if "tcp" in methods and duels:
            check_encryption(tmp)
        if "ofi" in os.environ.get("BMI_ENABLED_METHODS", "").split() and duels and \
                shutil.which("fi_pingpong"):
            check_fi_pingpong(tmp)
            check_ofi_study(tmp)
        check_default_dir(tmp, plots)
        if "tcp" in methods:
            check_installed_runner(tmp)
        for method in ("tcp", "shm"):
            if method in methods and duels:
                check_peers(tmp, method)
        # neighbour and posted are studies in turns too: under ThreadSanitizer the neighbour
        # study alone outran the 240 s bound, so like the duels they run in the plain build.
        fair = [m for m in ("tcp", "shm") if m in methods] if duels else []
        if fair and len(os.sched_getaffinity(0)) >= 2:  # its server needs a core of its own
            check_neighbour(tmp, fair)
        if fair:
            check_posted(tmp, fair)
            check_placement(tmp, fair)
        if "tcp" in fair and "shm" in fair:
            check_same_node(tmp)
    print("bmi-perf end to end ok")


if __name__ == "__main__":
    main()
