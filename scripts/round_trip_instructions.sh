#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The user-space instructions one small-message round trip costs the client, counted by
# valgrind's callgrind (issue 41 asks for them before and after each change of the short path).
# The client runs twice, SHORT and LONG round trips, with the server outside valgrind; the
# difference over LONG - SHORT leaves out start-up and exit. The spin is off, so no poll loop
# pads the count. Prints one line: BUILD ADDRESS instructions-per-round-trip.
#   scripts/round_trip_instructions.sh BUILD [--address shm://NAME] [--bytes 8]
#                                     [--short 2000] [--long 12000] [--keep DIR] [--atomics]
# --atomics also lists the atomic instructions and fences a round trip runs in libbmi
# (scripts/round_trip_atomics.py). Compare two libraries by running it for each in turn
# (doc/perf/short-path.md).
set -euo pipefail

usage() {
    echo "usage: $0 BUILD [--address ADDR] [--bytes N] [--short N] [--long N] [--keep DIR]" \
        "[--atomics]" >&2
    exit 2
}
(($#)) || usage
build=$1
shift
address="shm://rti-$$"
bytes=8
short=2000
long=12000
keep=""
atomics=()
while (($#)); do
    case $1 in
        --address) address=$2; shift 2 ;;
        --bytes) bytes=$2; shift 2 ;;
        --short) short=$2; shift 2 ;;
        --long) long=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        --atomics) atomics=(--dump-instr=yes); shift ;;
        *) usage ;;
    esac
done
pingpong=$build/benchmark/pingpong
[[ -x $pingpong ]] || { echo "no $pingpong (build with -Dbenchmarks=true)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 77; }
((long > short)) || usage

work=$(mktemp -d)
server=""
cleanup() {
    if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
# Two CPUs where there are two: the server need not wait for valgrind's slow client.
cpus=$(nproc)
server_cpu=0
client_cpu=$((cpus > 1 ? 1 : 0))

count() {
    local rounds=$1 out=$2 listen=$address
    # A tcp server is told its port; the client needs it spelled out.
    [[ $address == tcp://* || $address == ofi+* ]] || listen="$address-$rounds"
    BMI_SHM_SPIN_US=0 BMI_TCP_SPIN_US=0 BMI_OFI_SPIN_US=0 taskset -c "$server_cpu" \
        "$pingpong" --server "$listen" >"$work/server-$rounds.log" 2>&1 &
    server=$!
    local target=$listen
    for _ in $(seq 100); do
        target=$(awk '/^ADDR /{print $2; exit}' "$work/server-$rounds.log")
        [[ -n $target ]] && break
        sleep 0.05
    done
    [[ -n $target ]] || target=$listen
    BMI_SHM_SPIN_US=0 BMI_TCP_SPIN_US=0 BMI_OFI_SPIN_US=0 taskset -c "$client_cpu" \
        timeout 600 valgrind --tool=callgrind "${atomics[@]}" --callgrind-out-file="$out" \
        "$pingpong" --client "$target" --min "$bytes" --max "$bytes" --iters "$rounds" \
        >"$work/client-$rounds.log" 2>&1
    wait "$server" 2>/dev/null || true
    server=""
    awk '/^totals:/{print $2}' "$out"
}

first=$(count "$short" "$work/callgrind.$short")
second=$(count "$long" "$work/callgrind.$long")
[[ -n $keep ]] && mkdir -p "$keep" && cp "$work"/callgrind.* "$keep"/
awk -v a="$first" -v b="$second" -v n=$((long - short)) -v build="$build" -v addr="$address" \
    'BEGIN { printf "%s %s %.0f\n", build, addr, (b - a) / n }'
if ((${#atomics[@]})); then
    scripts_dir=$(dirname "${BASH_SOURCE[0]}")
    library=$(find "$build" -maxdepth 1 -type f -name 'libbmi.so.*.*.*' | head -1)
    "$scripts_dir/round_trip_atomics.py" "$library" "$work/callgrind.$short" \
        "$work/callgrind.$long" $((long - short))
fi
