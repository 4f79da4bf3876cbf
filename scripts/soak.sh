#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The long load campaign of doc/RELIABILITY.md ("Load held"); the meson suite `soak` runs the
# same programs bounded. Churn: 100,000 distinct short-lived clients against
# examples/pvfs_server over tcp and over shm, its RSS and descriptors sampled 50 times. Soak: 64
# client processes x 100,000 checked request/response pairs, over tcp and over shm, with
# latency percentiles of the first and last tenth. Each run's table and checks go to stdout and
# to OUT/<run>.txt, the churn curve to the plot. Exit 1 if any check failed. --methods may also
# name ofi (ofi+tcp, libfabric's tcp;ofi_rxm) and ofi-shm.
#
#   scripts/soak.sh [--build DIR] [--out DIR] [--plot FILE.png] [--clients N]
#                   [--processes N] [--requests N] [--methods "tcp shm"]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

build=build-soak
out=
plot=
clients=100000
processes=64
requests=100000
methods="tcp shm"
while (($#)); do
    case $1 in
        --build) build=$2 ;;
        --out) out=$2 ;;
        --plot) plot=$2 ;;
        --clients) clients=$2 ;;
        --processes) processes=$2 ;;
        --requests) requests=$2 ;;
        --methods) methods=$2 ;;
        *)
            sed -n '3,12p' "$0" >&2
            exit 2
            ;;
    esac
    shift 2
done
out=${out:-$build/soak}
plot=${plot:-$out/churn.png}

configure_build "$build"
timeout 2400 ninja -C "$build" -j"$BMI_JOBS" examples/pvfs_server tests/soak/churn_driver \
    tests/soak/soak_client
mkdir -p "$out"

status=0
# run NAME SCRIPT ARGS...: one run; its output is kept in OUT/NAME.txt.
run() {
    local name=$1 script=$2
    shift 2
    echo "=== $name"
    # The scripts bound their own waits; this only turns a hang of Python itself into a failure.
    timeout --kill-after=30 5400 python3 "tests/soak/$script" --server \
        "$build/examples/pvfs_server" --deadline 5000 "$@" | tee "$out/$name.txt" ||
        status=1
}

echo "soak.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for m in $methods; do
    run "churn-$m" churn_run.py --driver "$build/tests/soak/churn_driver" --method "$m" \
        --clients "$clients" --samples 50 --csv "$out/churn-$m.csv"
done
for m in $methods; do
    run "soak-$m" soak_run.py --client "$build/tests/soak/soak_client" --method "$m" \
        --processes "$processes" --requests "$requests"
done

# RSS (left axis) and descriptors (right axis) against clients served, one curve per method;
# the right axis has room above the highest count so its line does not hide in the border.
curves=() fds=()
top=$(cat "$out"/churn-*.csv | awk '!/^#/ && $4 > m { m = $4 } END { print int(m * 1.5) + 1 }')
for m in $methods; do
    curves+=("'$out/churn-$m.csv' using 1:(\$3/1024) with lines lw 2 title '$m RSS'")
    fds+=("'$out/churn-$m.csv' using 1:4 axes x1y2 with steps lw 2 dt 2 title '$m descriptors'")
done
if command -v gnuplot >/dev/null; then
    (IFS=,; gnuplot <<EOF) || status=1
set terminal png size 900,420 noenhanced
set output '$plot'
set title 'examples/pvfs_server under churn: $clients distinct clients'
set xlabel 'clients served'
set ylabel 'RSS (MiB)'
set y2label 'open descriptors'
set yrange [0:*]
set y2range [0:$top]
set ytics nomirror
set y2tics
set key bottom right
set grid
plot ${curves[*]},${fds[*]}
EOF
    echo "plot: $plot"
fi
exit "$status"
