# SPDX-License-Identifier: LGPL-2.1-or-later
"""The report doc/PERFORMANCE.md is made of (bmi-perf-studies --markdown): the tables of the
modes and every study's section, from one run."""
import math
import os
import platform
import shutil
import subprocess
import time

from bmi_perf_output import MODE_TITLES, fmt, fmt_rate, message_rate


class Context:
    """What a study's section may read besides its own result: the table runs' series and
    the number format of the report."""

    def __init__(self, series):
        self.series, self.fmt = series, fmt


# Each libbmi series and the peers it is compared with.
PEERS = {"bmi tcp": ["raw tcp", "netpipe", "mpi tcp"],
         "bmi tcp-legacy": ["bmi tcp", "raw tcp", "netpipe", "mpi tcp"],
         "bmi tcp-encrypted": ["tls", "bmi tcp", "raw tcp"],
         "bmi shm": ["mpi vader", "mpi vader nocopy", "memcpy", "handoff"],
         "bmi shm-blocking": ["eventfd", "mpi vader", "mpi vader nocopy", "memcpy", "handoff"],
         "bmi ofi-tcp": ["fi pingpong", "bmi tcp", "raw tcp"],
         "bmi ofi-tcp-polled": ["fi pingpong", "bmi ofi-tcp"]}
# Copies, not messages: their times bound bandwidth only.
COPIES = ("memcpy", "handoff")
SMALL = 4096     # "small message" latency: sizes up to this
LARGE = 1 << 20  # "large message" bandwidth: sizes from this


def find(series, name, mode):
    return next((s for s in series if s.name == name and s.mode == mode and s.rows), None)


def ratio(a, b, col):
    return a[col] / b[col] if a and b and b[col] > 0 else None


def geo_mean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def table(out, title, mine, peers, col, note=""):
    """Rows per size: mine, each peer, then mine/peer for every peer."""
    cols = [s for s in [mine] + peers if s]
    if mine is None or len(cols) < 2:
        return
    unit = "us" if col == 2 else "MB/s"
    out.append(f"#### {title} ({unit})\n")
    if note:
        out.append(note + "\n")
    head = ["bytes"] + [s.name for s in cols] + [f"{mine.name} / {p.name}" for p in cols[1:]]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---:|" * len(head))
    sizes = sorted({r[0] for s in cols for r in s.rows})
    for size in sizes:
        a = mine.at(size)
        cells = [str(size)] + [fmt(r[col]) if (r := s.at(size)) else "n/a" for s in cols]
        cells += [fmt(ratio(a, p.at(size), col)) for p in cols[1:]]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")


def rate_table(out, title, mine, peers):
    """Messages per second per size in a streaming mode: mine, each peer, mine/peer."""
    cols = [s for s in [mine] + peers if s]
    if mine is None or len(cols) < 2:
        return
    out.append(f"#### {title} (messages/s)\n")
    head = ["bytes"] + [s.name for s in cols] + [f"{mine.name} / {p.name}" for p in cols[1:]]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---:|" * len(head))
    for size in sorted({r[0] for s in cols for r in s.rows}):
        rates = [message_rate(r) if (r := s.at(size)) else None for s in cols]
        cells = [str(size)] + [fmt_rate(v) for v in rates]
        cells += [fmt(rates[0] / v) if rates[0] and v else "n/a" for v in rates[1:]]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")


def verdict(mine, peer, col):
    """Geometric mean of mine/peer over the small sizes (latency) or large sizes (bw)."""
    if mine is None or peer is None:
        return None
    keep = (lambda n: n <= SMALL) if col == 2 else (lambda n: n >= LARGE)
    return geo_mean(ratio(mine.at(r[0]), r, col) for r in peer.rows if keep(r[0]))


def summary(out, series, modes):
    out.append("## Where libbmi beats its peers in these tables\n")
    out.append(f"Geometric mean of the per-size ratios: latency over 1 B-{SMALL} B (below 1 "
               f"beats the peer), bandwidth over sizes from {LARGE >> 20} MiB up (above 1 "
               "beats the peer). Each row compares the single runs of the tables below; where "
               "a target exists (shm targets), its verdict, from runs taken in turns, is the "
               "one of record.\n")
    out.append("| libbmi | mode | peer | latency ratio | bandwidth ratio | verdict |")
    out.append("|---|---|---|---:|---:|---|")
    for mode in modes:
        for mine in (s for s in series if s.mode == mode and s.rows and s.name.startswith("bmi")):
            for peer in (s for s in series if s.mode == mode and s.rows
                         and s.name in PEERS.get(mine.name, [])):
                # A copy's time is no message latency: copies only bound bandwidth.
                lat = verdict(mine, peer, 2) if mode == "latency" and peer.name not in COPIES \
                    else None
                bw = verdict(mine, peer, 3)
                if lat is None and bw is None:
                    continue
                beats = [what for what, v, good in (("latency", lat, lat is not None and lat <= 1),
                                                    ("bandwidth", bw, bw is not None and bw >= 1))
                         if good]
                text = (("beats it in " + " and ".join(beats)) if beats
                        else "slower in this run (see the targets for the verdict)")
                out.append(f"| {mine.name} | {mode} | {peer.name} | {fmt(lat)} | {fmt(bw)} | "
                           f"{text} |")
    out.append("")


def source_version():
    try:
        res = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return f"libbmi git {res.stdout.strip()}" if res.returncode == 0 else "libbmi"
    except OSError:
        return "libbmi"


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mpi = "not found"
    if shutil.which("mpirun"):
        res = subprocess.run(["mpirun", "--version"], capture_output=True, text=True)
        mpi = (res.stdout.splitlines() or ["?"])[0]
    return cpu, mpi


def write(path, series, sections, plots, a, load_before, load_after, seconds, argv):
    """sections: the studies' sections, lines in registry order."""
    cpu, mpi = machine()
    out = ["# libbmi performance", "",
           "Generated by one `bmi-perf-studies` run; every number and ratio below comes from that run. "
           "Regenerate on an idle machine from the top of the repository after "
           "`./scripts/demo.sh` (release build in `build/`):", "", "```sh",
           "build/benchmark/studies/bmi-perf-studies " + " ".join(argv), "```", "",
           f"- Machine: {cpu}, {os.cpu_count()} CPUs, {platform.platform()}",
           f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, run time "
           f"{seconds:.0f} s",
           f"- Load average (1/5/15 min) before: {' '.join(load_before)}, after (with this "
           f"run's own load): {' '.join(load_after)}",
           f"- Source: {source_version()}",
           f"- Peers: {mpi} (`--mca pml ob1`, so the chosen BTL is the one measured); NetPIPE "
           "`NPtcp` from Debian's netpipe-tcp; `fi_pingpong` from Debian's libfabric-bin (an "
           "RDM endpoint, tagged messages, the ofi series' provider); `raw_tcp_pingpong`, `tls_pingpong` (TLS 1.3 "
           "over OpenSSL), `eventfd_pingpong`, "
           "`memcpy_bw` and `handoff_copy_bw` from benchmark/",
           f"- Plan: sizes {a.min}..{a.max} B, {a.iters} timed rounds per size up to 64 KiB "
           f"(fewer above, at least 16), a tenth of that (at least 10) as warm-up, "
           f"window {a.window}, {a.clients} clients in many mode, "
           f"check {'on' if a.check else 'off'}", "",
           ]
    # The load after includes this run's own processes; only the load before says whether
    # others were busy.
    if float(load_before[0]) > 0.5:
        out += [f"**The machine was not idle** (load average {load_before[0]} before, "
                f"{load_after[0]} after): other work shared the CPUs, so single numbers are "
                "noisy. Ratios from one run are fairer than numbers across runs, but repeat "
                "on an idle machine before drawing conclusions.", ""]
    if "many" in a.modes and (os.cpu_count() or 1) < a.clients + 1:
        out += [f"Many mode runs {a.clients + 1} processes on {os.cpu_count()} CPUs: they "
                "take turns, so it measures a loaded server, as intended, but spinning "
                "transports lose time to the scheduler there.", ""]
    out += ["## How to read it", "",
           "- latency: one-way time per message (ping-pong: half a round trip; streaming: "
           "elapsed time / messages). bandwidth: bytes of one direction per second (MB/s = "
           "10^6 B/s). Ratios are libbmi / peer: below 1 is better for latency, above 1 for "
           "bandwidth. n/a: that run or size is missing.",
           "- Two-process runs of the latency and bandwidth modes (bmi, raw tcp, eventfd) are "
           "pinned one process per core, as mpirun binds the two ranks of the MPI runs; many "
           "mode and NetPIPE are left to the scheduler.",
           "- `bmi shm-blocking` is bmi_shm with `BMI_SHM_SPIN_US=0` (sleep on the eventfd at "
           "once). `mpi vader nocopy` is Open MPI's shared memory with "
           "`--mca btl_vader_single_copy_mechanism none`; `mpi vader` uses its default (CMA).",
           "- The bmi ping-pongs take their buffers from `BMI_memalloc`, as PVFS does; on an "
           "shm address that is memory both processes map, so large messages move by memcpy "
           "(doc/methods/shm.md, shared buffers). The MPI ping-pongs use malloc. The bandwidth "
           "targets below also show bmi shm with `BMI_SHM_SHARED_BUFFERS=0` (shm-malloc), "
           "whose buffers take the paths a malloc'd buffer takes.",
           "- memcpy: one copy between two warm buffers, best of 10 batches: a ceiling no "
           "transport between two processes reaches. handoff: one CPU copies a buffer another "
           "CPU has just written into a buffer it then reads, pinned as the pairs are: the "
           "real ceiling of a transport that copies once. eventfd: two processes waking each other through "
           "eventfds with blocking reads: the floor for a sleeping shared-memory transport.",
           "- NetPIPE (`NPtcp`) times each size in several trials of its repetitions and "
           "reports the fastest trial; every other driver here reports the mean over all its "
           "timed rounds. Where the time per round scatters (one core, the scheduler's "
           "placement), that alone favours NetPIPE.",
           "- Sleeping ping-pongs (bmi shm-blocking, eventfd) are bimodal: when the scheduler "
           "puts both processes on one CPU a message costs a context switch (about 1 us here), "
           "on two CPUs an inter-processor wake-up of a halted vCPU (about 35 us here). Their "
           "tables below are single runs on two cores; the shm targets compare runs taken in "
           "turns, in both placements.",
           ""]
    summary(out, series, a.modes)
    out += sections
    base = os.path.dirname(os.path.abspath(path))
    for mode in a.modes:
        out.append(f"## {MODE_TITLES[mode]} ({mode} mode)\n")
        for m, kind, f in plots:
            if m == mode:
                out.append(f"![{mode} {kind}]({os.path.relpath(f, base)})")
        out.append("")
        for mine_name, peer_names in PEERS.items():
            mine = find(series, mine_name, mode)
            # Copies have no many mode: their single-copy tables are the ceilings there too.
            peers = [find(series, n, mode) or (find(series, n, "latency") if n in COPIES
                                               else None) for n in peer_names]
            if n_ok := [p for p in peers if p]:
                table(out, f"{mine_name}, {mode}: latency", mine, n_ok, 2)
                table(out, f"{mine_name}, {mode}: bandwidth", mine, n_ok, 3)
                if mode != "latency":
                    rate_table(out, f"{mine_name}, {mode}: message rate", mine, n_ok)
    # Sections a person wrote (what bmi-perf cannot measure), kept verbatim at each regeneration.
    for f in a.include:
        with open(f) as text:
            out.append(text.read().rstrip("\n") + "\n")
    out.append("## Runs\n")
    out.append("| series | mode | status | wall s |")
    out.append("|---|---|---|---:|")
    for s in series:
        out.append(f"| {s.name} | {s.mode} | {s.status} | {s.wall:.1f} |")
    out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
