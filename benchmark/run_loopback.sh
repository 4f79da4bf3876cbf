#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs benchmark/pingpong over loopback for every built method and prints the tables; with
# --compare also the raw TCP baseline and the libbmi/raw ratios.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: benchmark/run_loopback.sh [--build DIR] [--compare] [--timeout SECONDS] [PINGPONG ARGS...]
  --build DIR     meson build directory (default: $BUILD_DIR or <repo>/build)
  --compare       also run raw_tcp_pingpong and print latency and bandwidth ratios libbmi/raw
  --timeout S     bound on each server and client run (default 600)
  PINGPONG ARGS   passed to every client, e.g. --min 1 --max 1M --iters 200 --check
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
compare=0
limit=600
client_args=()
while (($#)); do
    case $1 in
        --build) build=${2:?--build needs a directory}; shift 2 ;;
        --compare) compare=1; shift ;;
        --timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) client_args+=("$1"); shift ;;
    esac
done
bin=$build/benchmark
for tool in pingpong raw_tcp_pingpong; do
    [[ -x $bin/$tool ]] || { echo "run_loopback: $bin/$tool not built" >&2; exit 1; }
done

tmp=$(mktemp -d)
server_pid=""

# Only the server this script started is signalled: it runs under timeout(1), which passes
# TERM on to it and follows up with KILL.
stop_server() {
    if [[ -n $server_pid ]]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
    exec 3<&- 2>/dev/null || true
}
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# run_pair NAME SERVER_CMD... -- CLIENT_CMD_PREFIX...: starts the server, reads its ADDR line,
# runs the client against that address into $tmp/NAME.out. Returns 77 if the server says the
# method is not built.
run_pair() {
    local name=$1 line addr status=0
    shift
    local server_cmd=() client_cmd=()
    while [[ $1 != -- ]]; do server_cmd+=("$1"); shift; done
    shift
    client_cmd=("$@")

    rm -f "$tmp/addr.fifo"
    mkfifo "$tmp/addr.fifo"
    timeout -k 5 "$limit" "${server_cmd[@]}" >"$tmp/addr.fifo" 2>"$tmp/$name.server.err" &
    server_pid=$!
    exec 3<"$tmp/addr.fifo"
    # The fifo stays open on fd 3 until the server is gone, so a late write cannot SIGPIPE it.
    if ! IFS= read -r -t 30 line <&3 || [[ $line != "ADDR "* ]]; then
        wait "$server_pid" || status=$?
        server_pid=""
        exec 3<&-
        [[ $status == 77 ]] && return 77
        echo "run_loopback: $name server gave no address (exit $status):" >&2
        cat "$tmp/$name.server.err" >&2
        return 1
    fi
    addr=${line#ADDR }
    if ! timeout -k 5 "$limit" "${client_cmd[@]}" --client "$addr" "${client_args[@]}" \
            >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        echo "run_loopback: $name client failed:" >&2
        cat "$tmp/$name.out" "$tmp/$name.err" "$tmp/$name.server.err" >&2
        stop_server
        return 1
    fi
    # A finished client lets the server exit by itself; its status says whether it saw errors.
    wait "$server_pid" || status=$?
    server_pid=""
    exec 3<&-
    if [[ $status != 0 ]]; then
        echo "run_loopback: $name server exited with $status:" >&2
        cat "$tmp/$name.server.err" >&2
        return 1
    fi
}

# Joins two tables on the size column: libbmi first, baseline second.
print_ratios() {
    awk '
        FNR == 1 { file++ }
        /^#/ || NF < 4 { next }
        file == 1 { lat[$1] = $3; bw[$1] = $4; order[n++] = $1; next }
        { rlat[$1] = $3; rbw[$1] = $4 }
        END {
            printf "# %12s %12s %12s %9s %12s %12s %9s\n", "bytes", "lat_us", "raw_lat_us",
                   "lat_ratio", "bw_MB/s", "raw_bw_MB/s", "bw_ratio"
            for (i = 0; i < n; i++) {
                s = order[i]
                if (!(s in rlat)) continue
                # Parenthesised: a bare ">" in a printf argument list is a redirection.
                printf "  %12s %12.2f %12.2f %9.2f %12.4f %12.4f %9.2f\n", s, lat[s], rlat[s],
                       (rlat[s] > 0 ? lat[s] / rlat[s] : 0), bw[s], rbw[s],
                       (rbw[s] > 0 ? bw[s] / rbw[s] : 0)
            }
        }' "$1" "$2"
}

failures=0
ran=0
if ((compare)); then
    echo "== raw TCP baseline (blocking sockets, TCP_NODELAY) =="
    if run_pair raw "$bin/raw_tcp_pingpong" --server tcp://127.0.0.1:0 -- "$bin/raw_tcp_pingpong"
    then
        cat "$tmp/raw.out"
    else
        failures=$((failures + 1))
    fi
    echo
fi

# Every method libbmi may have been built with, and a loopback listen address for it. Both ends
# are on this node, where a tcp lookup would go over shm (same_node_shm): bmi_tcp is measured
# with that off, and "same-node" is the same tcp address with it on.
for entry in "tcp tcp://127.0.0.1:0 0" "shm shm://bmi-pingpong-$$ 0" "same-node tcp://127.0.0.1:0 1"; do
    read -r name listen same_node <<<"$entry"
    method=${listen%%://*}
    status=0
    BMI_SAME_NODE_SHM=$same_node run_pair "$name" "$bin/pingpong" --method-list "bmi_$method" \
        --server "$listen" -- "$bin/pingpong" --method-list "bmi_$method" || status=$?
    if [[ $status == 77 ]]; then
        echo "== bmi_$method: not built, skipped =="
        echo
        continue
    fi
    if [[ $name == same-node ]]; then
        echo "== libbmi bmi_tcp address, same node (carried over shm) =="
    else
        echo "== libbmi bmi_$method =="
    fi
    if [[ $status != 0 ]]; then
        failures=$((failures + 1))
        echo
        continue
    fi
    ran=$((ran + 1))
    cat "$tmp/$name.out"
    if ((compare)) && [[ -s $tmp/raw.out ]]; then
        echo "-- $name / raw TCP (latency ratio < 1 and bandwidth ratio > 1 favour libbmi)"
        print_ratios "$tmp/$name.out" "$tmp/raw.out"
    fi
    echo
done

if ((failures > 0 || ran == 0)); then
    echo "run_loopback: $failures run(s) failed, $ran method(s) measured" >&2
    exit 1
fi
