#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Runs libbmi's ping-pong and its baselines (raw TCP, NetPIPE, Open MPI, memcpy) on this machine
# and prints a Markdown report comparing them, meant for doc/PERFORMANCE.md.
# No -e: one failed or missing baseline must cost its columns ("n/a"), not the report.
set -uo pipefail

usage() {
    cat <<'EOF'
usage: benchmark/perf_report.sh --build DIR [--quick] [--timeout SECONDS]
  --build DIR   meson build directory holding benchmark/pingpong and friends
  --quick       smoke test: sizes 1 B .. 1 MiB, 100 iterations (full: 1 B .. 64 MiB, 1000)
  --timeout S   bound on every single process (default 300 quick, 3600 full)
The report goes to stdout, progress and errors to stderr.
EOF
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
invocation=$(printf '%q ' "$0" "$@")
build=""
quick=0
limit=""
while (($#)); do
    case $1 in
        --build) build=${2:?--build needs a directory}; shift 2 ;;
        --quick) quick=1; shift ;;
        --timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "perf_report: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
[[ -n $build ]] || { usage >&2; exit 2; }
bin=$build/benchmark
[[ -x $bin/pingpong ]] || { echo "perf_report: $bin/pingpong not built" >&2; exit 1; }

if ((quick)); then
    max_bytes=$((1 << 20))
    plan_args=(--max 1M --iters 100)
    limit=${limit:-300}
else
    max_bytes=$((64 << 20))
    plan_args=() # pingpong's defaults: 1 B .. 64 MiB, 1000 iterations
    limit=${limit:-3600}
fi

tmp=$(mktemp -d)
children=()

# Only processes this script started are signalled. Each runs under timeout(1), which passes
# TERM on to its command (mpirun passes it on to the ranks) and follows up with KILL.
cleanup() {
    local pid
    for pid in "${children[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${children[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    children=()
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Per run: state (ok, failed, n/a), wall seconds, the commands, in the order they ran.
declare -A state wall cmdline
runs=()

note() { echo "perf_report: $*" >&2; }

begin_run() {
    runs+=("$1")
    state[$1]="n/a"
    wall[$1]="-"
    cmdline[$1]=""
    SECONDS_START=$(date +%s.%N)
    note "running $1"
}

end_run() {
    wall[$1]=$(awk -v a="$SECONDS_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    state[$1]=$2
    [[ $2 == ok ]] || note "$1: $2"
}

# Keeps only "bytes latency_us bw_MB/s" from a pingpong-format table.
table_of() {
    awk '!/^#/ && NF >= 4 && $1 ~ /^[0-9]+$/ { print $1, $3, $4 }' "$1" >"$2"
}

# run_pair NAME LISTEN_ADDR [VAR=VALUE...] -- TOOL [TOOL ARGS...]: starts TOOL --server, reads
# its "ADDR" line, runs TOOL --client against it with the plan, and keeps the table.
run_pair() {
    local name=$1 listen=$2 addr="" pid status=0 i
    shift 2
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    begin_run "$name"
    local prefix="${envs[*]}${envs[*]:+ }$*"
    cmdline[$name]="$prefix --server $listen  &&  $prefix --client ADDR ${plan_args[*]}"
    : >"$tmp/$name.addr" # exists before the first poll, however late the server starts
    env "${envs[@]}" timeout -k 5 "$limit" "$@" --server "$listen" \
        >"$tmp/$name.addr" 2>"$tmp/$name.server.err" &
    pid=$!
    children+=("$pid")
    # A regular file, polled: the server's later writes can never block on a reader.
    for ((i = 0; i < 300; i++)); do
        addr=$(awk '/^ADDR / { print $2; exit }' "$tmp/$name.addr")
        [[ -n $addr ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $addr ]]; then
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null || status=$?
        cp "$tmp/$name.server.err" "$tmp/$name.err"
        if [[ $status == 77 ]]; then
            end_run "$name" "n/a (method not built)"
        else
            end_run "$name" "failed: server gave no address (exit $status)"
        fi
        return
    fi
    if env "${envs[@]}" timeout -k 5 "$limit" "$@" --client "$addr" "${plan_args[@]}" \
            >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        # A finished client lets the server exit by itself; its status tells if it saw errors.
        wait "$pid" || status=$?
        [[ $status == 0 ]] && end_run "$name" ok || end_run "$name" "failed: server exit $status"
    else
        status=$?
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        end_run "$name" "failed: client exit $status"
    fi
    cat "$tmp/$name.server.err" >>"$tmp/$name.err"
    table_of "$tmp/$name.out" "$tmp/$name.tab"
}

# NetPIPE's file has bytes, Mbps (2^20 bits/s) and one-way seconds; latency and MB/s are
# recomputed from bytes and seconds, and only our power-of-two sizes are kept.
run_netpipe() {
    local name=netpipe port pid status=0 i
    begin_run "$name"
    if ! command -v NPtcp >/dev/null; then
        end_run "$name" "n/a (NPtcp not installed: apt-get install netpipe-tcp)"
        return
    fi
    # A port of our own, so a concurrent report on a shared machine does not collide.
    port=$((20000 + $$ % 20000))
    local np_args="-P $port -p 0 -l 1 -u $max_bytes"
    cmdline[$name]="NPtcp $np_args  &&  NPtcp -h 127.0.0.1 $np_args -o FILE"
    (cd "$tmp" && exec timeout -k 5 "$limit" NPtcp -P "$port" -p 0 -l 1 -u "$max_bytes") \
        >"$tmp/$name.server.out" 2>"$tmp/$name.server.err" &
    pid=$!
    children+=("$pid")
    for ((i = 0; i < 100; i++)); do
        ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if (cd "$tmp" && timeout -k 5 "$limit" NPtcp -h 127.0.0.1 -P "$port" -p 0 -l 1 \
            -u "$max_bytes" -o "$tmp/np.out") >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        wait "$pid" || status=$?
        end_run "$name" ok
    else
        status=$?
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        end_run "$name" "failed: sender exit $status"
    fi
    cat "$tmp/$name.server.err" >>"$tmp/$name.err"
    [[ -s $tmp/np.out ]] && awk '
        function pow2(n) { while (n > 1 && n % 2 == 0) n /= 2; return n == 1 }
        NF >= 3 && $3 > 0 && pow2($1) { printf "%d %.4f %.4f\n", $1, $3 * 1e6, $1 / ($3 * 1e6) }
    ' "$tmp/np.out" >"$tmp/$name.tab"
}

# run_mpi NAME MCA-ARGS...: rank 0 prints pingpong's table.
run_mpi() {
    local name=$1 status=0
    shift
    begin_run "$name"
    if ! command -v mpirun >/dev/null || [[ ! -x $bin/mpi_pingpong ]]; then
        end_run "$name" "n/a (mpirun or benchmark/mpi_pingpong missing)"
        return
    fi
    # pml ob1 because Debian's Open MPI also has the UCX pml, which outranks ob1 and ignores
    # every --mca btl choice: without it all three runs would measure UCX.
    local cmd=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 "$@"
               "$bin/mpi_pingpong" "${plan_args[@]}")
    cmdline[$name]="${cmd[*]}"
    timeout -k 5 "$limit" "${cmd[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" || status=$?
    [[ $status == 0 ]] && end_run "$name" ok || end_run "$name" "failed: exit $status"
    table_of "$tmp/$name.out" "$tmp/$name.tab"
}

run_memcpy() {
    local name=memcpy status=0
    begin_run "$name"
    if [[ ! -x $bin/memcpy_bw ]]; then
        end_run "$name" "n/a (benchmark/memcpy_bw not built)"
        return
    fi
    cmdline[$name]="$bin/memcpy_bw ${plan_args[*]}"
    timeout -k 5 "$limit" "$bin/memcpy_bw" "${plan_args[@]}" >"$tmp/$name.out" \
        2>"$tmp/$name.err" || status=$?
    [[ $status == 0 ]] && end_run "$name" ok || end_run "$name" "failed: exit $status"
    table_of "$tmp/$name.out" "$tmp/$name.tab"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t_all=$(date +%s)

run_pair tcp tcp://127.0.0.1:0 -- "$bin/pingpong" --method-list bmi_tcp
run_pair raw tcp://127.0.0.1:0 -- "$bin/raw_tcp_pingpong"
run_netpipe
run_mpi mpi_tcp --mca btl tcp,self --mca btl_tcp_if_include lo
run_pair shm "shm://perf-$$" -- "$bin/pingpong" --method-list bmi_shm
run_pair shm_block "shm://perf-$$-block" BMI_SHM_SPIN_US=0 -- "$bin/pingpong" --method-list bmi_shm
run_mpi mpi_vader --mca btl vader,self
run_mpi mpi_vader_nocopy --mca btl vader,self --mca btl_vader_single_copy_mechanism none
run_memcpy

t_total=$(($(date +%s) - t_all))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# table TITLE COLUMN MAX RATIOS SPEC...: one Markdown table over the sizes 1 .. MAX.
# COLUMN 2 is latency (us), 3 bandwidth (MB/s); each SPEC is "label|file"; RATIOS lists
# "i/j" pairs of 1-based spec indices. A missing file or size prints n/a.
table() {
    local title=$1 col=$2 max=$3 ratios=$4
    shift 4
    local labels=() files=() spec
    for spec in "$@"; do
        labels+=("${spec%%|*}")
        files+=("${spec#*|}")
    done
    echo "### $title"
    echo
    awk -v col="$col" -v max="$max" -v ratios="$ratios" \
        -v labels="$(IFS='|'; echo "${labels[*]}")" -v files="$(IFS='|'; echo "${files[*]}")" '
        function num(v) {
            if (v == "") return "n/a"
            if (v >= 100) return sprintf("%.1f", v)
            if (v >= 1) return sprintf("%.2f", v)
            return sprintf("%.4f", v)
        }
        BEGIN {
            n = split(labels, label, "|")
            split(files, file, "|")
            for (i = 1; i <= n; i++)
                while ((getline line < file[i]) > 0) {
                    split(line, f, " ")
                    val[i, f[1]] = f[col] + 0
                    have[i, f[1]] = 1
                }
            nr = split(ratios, ratio, ",")
            head = "| bytes"; rule = "|---:"
            for (i = 1; i <= n; i++) { head = head " | " label[i]; rule = rule "|---:" }
            for (r = 1; r <= nr; r++) {
                split(ratio[r], p, "/")
                head = head " | " label[p[1]] " / " label[p[2]]; rule = rule "|---:"
            }
            print head " |"; print rule "|"
            for (s = 1; s <= max; s *= 2) {
                row = "| " s
                for (i = 1; i <= n; i++) row = row " | " ((i, s) in have ? num(val[i, s]) : "n/a")
                for (r = 1; r <= nr; r++) {
                    split(ratio[r], p, "/")
                    a = p[1] + 0; b = p[2] + 0
                    ok = ((a, s) in have) && ((b, s) in have) && val[b, s] > 0
                    q = ok ? val[a, s] / val[b, s] : 0
                    row = row " | " (ok ? sprintf(q >= 0.1 ? "%.2f" : "%.4f", q) : "n/a")
                }
                print row " |"
            }
        }'
    echo
}

tab() { echo "$tmp/$1.tab"; }

cpu=$(lscpu 2>/dev/null | awk -F: '/^Model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }')
mpi_version=$(mpirun --version 2>/dev/null | head -1)
np_version=$(dpkg-query -W -f '${Version}' netpipe-tcp 2>/dev/null)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null)
[[ -n $(git -C "$repo" status --porcelain 2>/dev/null) ]] &&
    commit="$commit (with uncommitted changes)"
if ((quick)); then
    mode="quick (sizes 1 B .. 1 MiB, 100 iterations)"
else
    mode="full (sizes 1 B .. 64 MiB, 1000 iterations)"
fi

cat <<EOF
# libbmi performance on one machine

Generated by \`benchmark/perf_report.sh\`; every number below comes from one run of it.

- Machine: ${cpu:-unknown CPU}, $(nproc) CPUs online, kernel $(uname -r)
- Date: $started, total run time ${t_total} s
- Load average (1/5/15 min) before: $load_before, after: $load_after
- Source: libbmi ${commit:-unknown commit}, build directory \`$build\`
- Baselines: ${mpi_version:-Open MPI not found}; NetPIPE ${np_version:-not found}
- Command: \`${invocation% }\`
- Mode: $mode

## How to read it

- Latency is one way: half the mean round trip over the timed rounds after the warm-up
  rounds, in microseconds. Bandwidth is bytes of one direction divided by that latency, in
  MB/s (10^6 bytes/s). Every ping-pong tool (libbmi, raw TCP, MPI) runs pingpong's plan:
  the same sizes, rounds per size (fewer above 64 KiB) and warm-up, on preallocated buffers.
- NetPIPE runs its own plan (\`-p 0\`, its own repeat counts); its rows are the sizes that
  are powers of two, with latency and MB/s recomputed from its one-way seconds.
- memcpy is one copy of N bytes between two distinct warm buffers: the best of 10 batches,
  each batch's mean time per copy. It is the ceiling for any shared-memory transport, which
  copies at least once.
- Ratios are libbmi / baseline: a latency ratio below 1 and a bandwidth ratio above 1 favour
  libbmi. "n/a" means the run was missing, failed, or did not reach that size.
- Open MPI runs use \`--mca pml ob1\` so the chosen BTL is the one measured (Debian's Open MPI
  would otherwise pick the UCX PML and ignore \`--mca btl\`). "vader no single-copy" sets
  \`btl_vader_single_copy_mechanism none\`, so large messages go through copy-in/copy-out
  fragments like libbmi's shm instead of CMA (process_vm_readv).
- The machine may be shared with other jobs: compare columns of one report, not reports.

## Runs

| run | status | wall s |
|---|---|---:|
EOF
for r in "${runs[@]}"; do
    echo "| $r | ${state[$r]} | ${wall[$r]} |"
done
echo
echo '```'
for r in "${runs[@]}"; do
    [[ -n ${cmdline[$r]} ]] && echo "$r: ${cmdline[$r]}"
done
echo '```'
echo

echo "## TCP over loopback"
echo
tcp_specs=("libbmi tcp|$(tab tcp)" "raw TCP|$(tab raw)" "NetPIPE|$(tab netpipe)"
           "Open MPI tcp|$(tab mpi_tcp)")
table "Latency (us, one way)" 2 "$max_bytes" "1/2,1/3,1/4" "${tcp_specs[@]}"
table "Bandwidth (MB/s)" 3 "$max_bytes" "1/2,1/3,1/4" "${tcp_specs[@]}"

echo "## Shared memory"
echo
echo "\"libbmi shm blocking\" is bmi_shm with \`BMI_SHM_SPIN_US=0\`: waits block at once instead of"
echo "spinning first."
echo
shm_specs=("libbmi shm|$(tab shm)" "libbmi shm blocking|$(tab shm_block)"
           "Open MPI vader|$(tab mpi_vader)" "Open MPI vader no single-copy|$(tab mpi_vader_nocopy)"
           "memcpy|$(tab memcpy)")
shm_ratios="1/3,1/4,1/5,2/3,2/4"
table "Latency (us, one way; memcpy: one copy)" 2 "$max_bytes" "$shm_ratios" "${shm_specs[@]}"
table "Bandwidth (MB/s)" 3 "$max_bytes" "$shm_ratios" "${shm_specs[@]}"

# What the tools said on stderr, minus their routine closing lines: warnings (e.g. Open MPI
# falling back from CMA) matter to whoever reads the numbers.
diag=0
routine='echoed [0-9]+ messages|-->|^Now starting|^Send and receive buffers|^\(A bug in Linux|^\s*$'
for r in "${runs[@]}"; do
    [[ -s $tmp/$r.err ]] || continue
    lines=$(grep -v -E "$routine" "$tmp/$r.err" | head -20)
    [[ -n $lines ]] || continue
    if ((diag == 0)); then
        echo "## Diagnostics"
        echo
        diag=1
    fi
    echo "$r (${state[$r]}):"
    echo
    echo '```'
    echo "$lines"
    echo '```'
    echo
done
exit 0
