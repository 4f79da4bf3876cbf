# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's outputs: the terminal tables, the CSV file and the gnuplot plots."""
import csv
import os
import subprocess

MODE_TITLES = {"latency": "ping-pong", "bandwidth": "windowed streaming",
               "rate": "message rate, windowed streaming", "many": "many clients to one server"}
# One colour per series (gnuplot's default cycle repeats after eight); libbmi's curves are
# drawn thicker so they stand out from their peers.
COLOURS = ("#9400d3", "#009e73", "#56b4e9", "#e69f00", "#f0e442", "#0072b2", "#d55e00",
           "#000000", "#cc79a7", "#999999", "#8b4513", "#2f4f4f")
KINDS = (("latency", 2, "latency (us, one way per message)"),
         ("bandwidth", 3, "bandwidth (MB/s)"))
RATE_TITLE = "message rate (messages/s)"


def kinds(mode):
    """The plots of a mode: rate mode's figure is its message rate."""
    return ("rate",) if mode == "rate" else tuple(k for k, _, _ in KINDS)


def message_rate(row):
    """Messages per second of a streaming row: its bandwidth over its size (MB/s = 10^6 B/s)."""
    size, _, _, bw = row
    return bw * 1e6 / size if size > 0 else None


def fmt_rate(v):
    return "n/a" if v is None else f"{v:,.0f}"


def fmt(v):
    if v is None:
        return "n/a"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.4f}"


def sizes_of(series):
    return sorted({r[0] for s in series for r in s.rows})


def print_tables(series, modes, out):
    for mode in modes:
        done = [s for s in series if s.mode == mode and s.rows]
        if not done:
            continue
        width = max(12, *(len(s.name) for s in done))
        for kind, col, title in KINDS if mode != "rate" else ():
            out.write(f"\n== {mode}: {title}\n")
            out.write(f"{'bytes':>12}" + "".join(f" {s.name:>{width}}" for s in done) + "\n")
            for size in sizes_of(done):
                cells = [fmt(r[col]) if (r := s.at(size)) else "-" for s in done]
                out.write(f"{size:>12}" + "".join(f" {c:>{width}}" for c in cells) + "\n")
        if mode == "latency":
            continue
        # Streaming modes: how many messages a second, the figure small messages are judged by.
        out.write(f"\n== {mode}: {RATE_TITLE}\n")
        out.write(f"{'bytes':>12}" + "".join(f" {s.name:>{width}}" for s in done) + "\n")
        for size in sizes_of(done):
            cells = [fmt_rate(message_rate(r)) if (r := s.at(size)) else "-" for s in done]
            out.write(f"{size:>12}" + "".join(f" {c:>{width}}" for c in cells) + "\n")
    failed = [s for s in series if s.status != "ok"]
    if failed:
        out.write("\nnot measured:\n")
        for s in failed:
            out.write(f"  {s.name} {s.mode}: {s.status}\n")


def write_csv(series, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "series", "bytes", "iters", "latency_us", "bandwidth_MBps"])
        for s in series:
            for r in s.rows:
                w.writerow([s.mode, s.name, r[0], r[1], f"{r[2]:.4f}", f"{r[3]:.4f}"])


def plot(series, mode, kind, path, tmp):
    """One gnuplot chart: a curve per series of this mode; False if gnuplot is missing."""
    col = {"latency": 3, "bandwidth": 4, "rate": 5}[kind]
    done = [s for s in series if s.mode == mode and s.rows]
    if not done:
        return False
    terminal = ("svg size 1000,560 dynamic" if path.endswith(".svg")
                else "png size 1000,560")
    lines = [f"set terminal {terminal}", f"set output '{path}'",
             f"set title '{MODE_TITLES[mode]} ({mode} mode): {kind}'", "set logscale x 2", "set logscale y",
             "set format x '%.0b%B'", "set xlabel 'message size (bytes)'",
             f"set ylabel '{dict(((k, t) for k, _, t in KINDS), rate=RATE_TITLE)[kind]}'",
             "set key outside right top",
             "set grid"]
    curves = []
    for i, s in enumerate(done):
        data = os.path.join(tmp, f"plot-{mode}-{i}.dat")
        with open(data, "w") as f:
            for r in s.rows:
                if r[3] > 0:
                    f.write(f"{r[0]} {r[1]} {r[2]} {r[3]} {message_rate(r)}\n")
        width = 2.5 if s.name.startswith("bmi") else 1
        curves.append(f"'{data}' using 1:{col} with linespoints lw {width} "
                      f"lc rgb '{COLOURS[i % len(COLOURS)]}' title '{s.name}'")
    lines.append("plot " + ", ".join(curves))
    try:
        res = subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True,
                             capture_output=True, timeout=60)
    except FileNotFoundError:
        return False
    if res.returncode != 0:
        raise RuntimeError(f"gnuplot failed: {res.stderr.strip()}")
    return True
