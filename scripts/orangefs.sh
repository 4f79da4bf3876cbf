#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# OrangeFS itself on libbmi (doc/orangefs.md): builds OrangeFS from ORANGEFS_SOURCE_DIR with its
# own BMI left out and libbmi linked in its place, changing only its src/io/bmi/module.mk.in and
# its configure flags, brings up one-node file systems on this machine in a temporary directory
# (tcp, shm, and one server on both), runs OrangeFS's own tools against them, prints a table and
# removes everything it started. With a stock build beside it, it also runs stock servers with
# libbmi tools and the reverse, and times both libraries in turns.
#
# Usage: scripts/orangefs.sh ORANGEFS_SOURCE_DIR
# Environment:
#   LIBBMI_BUILD        a meson build directory of libbmi to build against (its
#                       meson-uninstalled/bmi-uninstalled.pc); unset: the installed libbmi that
#                       `pkg-config bmi` finds (set PKG_CONFIG_PATH for a prefix of its own)
#   ORANGEFS_BUILD_DIR  where OrangeFS is built on libbmi, kept and reused on the next run if it
#                       holds a finished build; unset: inside the temporary directory
#   ORANGEFS_STOCK_BUILD_DIR
#                       where OrangeFS is built unchanged, with its own BMI (same reuse rule);
#                       set: the mixed cases and the speed table run too
#   ORANGEFS_COPY_MIB   size of the file pvfs2-cp copies in and out in the checks (default 64)
#   ORANGEFS_SPEED_MIB  size of the copy the speed table times (default 256)
#   ORANGEFS_SPEED_FILES files created and stat'ed by one tool process per turn (default 1000)
#   ORANGEFS_SPEED_TURNS turns of the speed table (default 3; 0 leaves it out)
#   BMI_JOBS            make -j (default 2)
# Needs (Debian): gcc make autoconf automake bison flex perl pkg-config liblmdb-dev python3.
set -euo pipefail

readonly ORANGEFS_NEEDS="gcc make autoconf automake bison flex perl pkg-config liblmdb-dev python3"

usage() {
    echo "usage: $0 ORANGEFS_SOURCE_DIR (doc/orangefs.md)" >&2
    exit 2
}

# positive_number NAME DEFAULT [ALLOW_ZERO]: the environment variable NAME, checked.
positive_number() {
    local value=${!1:-$2} pattern='^[1-9][0-9]*$'
    [[ ${3:-} == zero ]] && pattern='^[0-9]+$'
    [[ $value =~ $pattern ]] || { echo "$1 must be a ${3:+non-negative}${3:-positive} number, not '$value'" >&2; exit 2; }
    echo "$value"
}

(($# == 1)) || usage
SOURCE=$(cd "$1" 2>/dev/null && pwd) || { echo "$1: no such directory" >&2; exit 2; }
[[ -f $SOURCE/src/io/bmi/module.mk.in && -x $SOURCE/prepare ]] ||
    { echo "$SOURCE does not look like an OrangeFS source tree" >&2; exit 2; }
COPY_MIB=$(positive_number ORANGEFS_COPY_MIB 64)
SPEED_MIB=$(positive_number ORANGEFS_SPEED_MIB 256)
SPEED_FILES=$(positive_number ORANGEFS_SPEED_FILES 1000)
SPEED_TURNS=$(positive_number ORANGEFS_SPEED_TURNS 3 zero)
JOBS=$(positive_number BMI_JOBS 2)

missing=()
for tool in gcc make autoconf aclocal bison flex perl pkg-config python3; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
[[ -f /usr/include/lmdb.h ]] || missing+=(lmdb.h)
if ((${#missing[@]} > 0)); then
    echo "missing: ${missing[*]}; on Debian: apt-get install $ORANGEFS_NEEDS" >&2
    exit 1
fi

# Which libbmi: a build directory's uninstalled .pc, or the installed one.
if [[ -n ${LIBBMI_BUILD:-} ]]; then
    LIBBMI_BUILD=$(cd "$LIBBMI_BUILD" && pwd)
    export PKG_CONFIG_PATH=$LIBBMI_BUILD/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    LIBBMI_PKG=bmi-uninstalled
else
    LIBBMI_PKG=bmi
fi
pkg-config --exists "$LIBBMI_PKG" ||
    { echo "pkg-config finds no $LIBBMI_PKG: set LIBBMI_BUILD or PKG_CONFIG_PATH" >&2; exit 1; }

WORK=$(mktemp -d /tmp/orangefs-libbmi.XXXXXX)
SERVER_PID=
stop_server() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=
}
cleanup() {
    stop_server
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LIBBMI_TREE=${ORANGEFS_BUILD_DIR:-$WORK/orangefs}
STOCK_TREE=${ORANGEFS_STOCK_BUILD_DIR:-}
CASE=""
ROWS=()
failures=0
row() { ROWS+=("$(printf '| %-18s | %-44s | %-6s | %8s | %s |' "$CASE" "$1" "$2" "$3" "$4")"); }
seconds_since() { python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.3f}')" "$1"; }
now() { python3 -c 'import time; print(time.time())'; }

# OrangeFS's BMI directory, rewritten: nothing of it is compiled, libbmi is linked instead.
write_module_mk() {
    cat >"$1" <<'EOF'
# BMI comes from libbmi (pkg-config $(LIBBMI_PKG)): none of this directory's sources are
# built. -idirafter keeps bmi-byteswap.h reachable from here, behind libbmi's bmi.h.
LIBBMI_PKG ?= bmi
LIBBMI_CFLAGS := $(shell pkg-config --cflags $(LIBBMI_PKG))
LIBBMI_LIBS := $(shell pkg-config --libs $(LIBBMI_PKG))
LIBBMI_COMMA := ,
LIBBMI_LIBS += $(patsubst -L%,-Wl$(LIBBMI_COMMA)-rpath$(LIBBMI_COMMA)%,$(filter -L%,$(LIBBMI_LIBS)))
INCLUDES := $(filter-out src/io/bmi,$(INCLUDES))
CFLAGS += $(LIBBMI_CFLAGS) -idirafter $(srcdir)/src/io/bmi
LIBS += $(LIBBMI_LIBS)
LIBS_THREADED += $(LIBBMI_LIBS)
DEPLIBS += $(LIBBMI_LIBS)
SERVERLIBS += $(LIBBMI_LIBS)
EOF
}

# build_orangefs DIR libbmi|stock: builds OrangeFS in DIR (reused when finished before).
build_orangefs() {
    local dir=$1 kind=$2 started flags=(--with-db-backend=lmdb)
    CASE="build ($kind)"
    if [[ -x $dir/src/server/pvfs2-server && -x $dir/src/apps/admin/pvfs2-cp ]]; then
        echo "orangefs: reusing the $kind build in $dir"
        row "build (reused)" ok - "$dir"
        return 0
    fi
    echo "orangefs: building ($kind) in $dir (logs: $dir/libbmi-*.log)"
    mkdir -p "$dir"
    # A git checkout gives its committed tree, without whatever was built in it.
    if git -C "$SOURCE" rev-parse --verify -q HEAD >/dev/null 2>&1; then
        git -C "$SOURCE" archive HEAD | tar -x -C "$dir"
    else
        cp -a "$SOURCE/." "$dir/"
    fi
    if [[ $kind == libbmi ]]; then
        write_module_mk "$dir/src/io/bmi/module.mk.in"
        flags=(--without-bmi-tcp "${flags[@]}")
    fi
    started=$(now)
    (cd "$dir" && ./prepare >libbmi-prepare.log 2>&1 &&
        ./configure "${flags[@]}" >libbmi-configure.log 2>&1) ||
        { echo "prepare/configure failed: $dir/libbmi-*.log" >&2; exit 1; }
    if ! (cd "$dir" && timeout 7200 make -j"$JOBS" LIBBMI_PKG="$LIBBMI_PKG" >libbmi-make.log 2>&1); then
        tail -20 "$dir/libbmi-make.log" >&2
        echo "OrangeFS build ($kind) failed: $dir/libbmi-make.log" >&2
        exit 1
    fi
    row "build" ok "$(seconds_since "$started")" "${flags[*]}, make -j$JOBS"
}

build_orangefs "$LIBBMI_TREE" libbmi
[[ -n $STOCK_TREE ]] && build_orangefs "$STOCK_TREE" stock

CASE="link"
# Linked to libbmi, and none of OrangeFS's own BMI inside.
linked=$(ldd "$LIBBMI_TREE/src/server/pvfs2-server" | awk '/libbmi/ {print $3}')
if [[ -n $linked ]] && ! nm "$LIBBMI_TREE/src/server/pvfs2-server" | grep -q 'BMI_tcp_\|bmi_method_addr_'; then
    row "pvfs2-server links libbmi, no OrangeFS BMI" ok - "$linked"
else
    row "pvfs2-server links libbmi, no OrangeFS BMI" FAILED - "${linked:-no libbmi in ldd}"
    failures=$((failures + 1))
fi

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_fs SERVER_TREE METHODS: a fresh file system served by SERVER_TREE's pvfs2-server in
# $FS (a new directory), over METHODS: tcp, shm, or tcp,shm (one server on both; a client of
# this node takes shm). Sets FS, PORT, SERVER_ADDRESS (the tools' address of it), SERVER_PID
# and PVFS2TAB_FILE; returns 1 if the server
# did not come up.
fs_count=0
start_fs() {
    local tree=$1 methods=$2 alias conf shm_name modules address
    fs_count=$((fs_count + 1))
    FS=$WORK/fs$fs_count
    mkdir -p "$FS"
    PORT=$(free_port)
    shm_name=ofs-$$-$fs_count
    conf=$FS/orangefs.conf
    "$tree/src/apps/admin/pvfs2-genconfig" --quiet --protocol tcp --fsname orangefs \
        --metaspec "tcp://127.0.0.1:$PORT:$FS/storage:$FS/server.log" \
        --iospec "tcp://127.0.0.1:$PORT:$FS/storage:$FS/server.log" "$conf" >"$FS/genconfig.log" 2>&1 ||
        { cat "$FS/genconfig.log" >&2; echo "pvfs2-genconfig failed" >&2; exit 1; }
    alias=$(awk '$1 == "Alias" {print $2; exit}' "$conf")
    case $methods in
        tcp) modules=bmi_tcp; address=tcp://127.0.0.1:$PORT ;;
        shm) modules=bmi_shm; address=shm://$shm_name ;;
        tcp,shm) modules=bmi_tcp,bmi_shm; address=tcp://127.0.0.1:$PORT,shm://$shm_name ;;
        *) echo "start_fs: unknown methods $methods" >&2; exit 2 ;;
    esac
    # The server's methods and its address list; the tools reach it by the first part.
    sed -i -e "s|^\([[:space:]]*BMIModules\).*|\1 $modules|" \
        -e "s|^\([[:space:]]*Alias[[:space:]]\+$alias\)[[:space:]].*|\1 $address|" "$conf"
    SERVER_ADDRESS=${address%%,*}
    export PVFS2TAB_FILE=$FS/pvfs2tab
    echo "$SERVER_ADDRESS/orangefs /pvfs pvfs2 defaults,noauto 0 0" >"$PVFS2TAB_FILE"
    if ! timeout 120 "$tree/src/server/pvfs2-server" -f -a "$alias" "$conf" >"$FS/mkfs.out" 2>&1; then
        row "pvfs2-server -f (create the storage)" FAILED - "$(tail -c 80 "$FS/mkfs.out" | tr '\n' ' ')"
        failures=$((failures + 1))
        return 1
    fi
    "$tree/src/server/pvfs2-server" -d -a "$alias" "$conf" >"$FS/server.out" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 150); do
        timeout 10 "$tree/src/apps/admin/pvfs2-ping" -m /pvfs >/dev/null 2>&1 && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.2
    done
    row "server up ($methods)" FAILED - "$(tail -c 80 "$FS/server.log" 2>/dev/null | tr '\n' ' ')"
    failures=$((failures + 1))
    return 1
}

# check NAME COMMAND...: runs it with a deadline, one table row.
check() {
    local name=$1 started rc=0
    shift
    started=$(now)
    timeout 300 "$@" >"$FS/last.out" 2>&1 || rc=$?
    LAST_SECONDS=$(seconds_since "$started")
    if ((rc == 0)); then
        row "$name" ok "$LAST_SECONDS" ""
    else
        row "$name" FAILED "$LAST_SECONDS" "exit $rc: $(tail -c 80 "$FS/last.out" | tr '\n' ' ')"
        failures=$((failures + 1))
    fi
    return $rc
}
# The last check's row again, with the MiB/s of a copy of $1 MiB (the tool's start included).
with_rate() {
    local last=${ROWS[-1]}
    unset 'ROWS[${#ROWS[@]}-1]'
    ROWS+=("${last% |} $(python3 -c "import sys; print(f'{$1 / float(sys.argv[1]):.0f} MiB/s')" "$LAST_SECONDS") |")
}
# output_has NAME PATTERN COMMAND...: a check that also wants PATTERN in the output.
output_has() {
    local name=$1 pattern=$2
    shift 2
    check "$name" bash -c '"$@" 2>&1 | tee /dev/stderr | grep -q -- "$0"' "$pattern" "$@"
}

# The file system checks, with the tools of TOOLS_TREE against the server start_fs began.
run_checks() {
    local bin=$1/src/apps/admin fsid
    check "pvfs2-ping -m /pvfs" "$bin/pvfs2-ping" -m /pvfs || true
    check "pvfs2-touch /pvfs/touched" "$bin/pvfs2-touch" /pvfs/touched || true
    check "pvfs2-mkdir /pvfs/dir" "$bin/pvfs2-mkdir" /pvfs/dir || true
    check "pvfs2-ls /pvfs (touched and dir listed)" \
        bash -c '"$0" /pvfs | grep -q touched && "$0" /pvfs | grep -q dir' "$bin/pvfs2-ls" || true
    [[ -f $WORK/in ]] || head -c $((COPY_MIB << 20)) /dev/urandom >"$WORK/in"
    if check "pvfs2-cp $COPY_MIB MiB in" "$bin/pvfs2-cp" "$WORK/in" /pvfs/big; then
        with_rate "$COPY_MIB"
        check "pvfs2-cp $COPY_MIB MiB out" "$bin/pvfs2-cp" /pvfs/big "$FS/out" && with_rate "$COPY_MIB" || true
        check "cmp in out" cmp "$WORK/in" "$FS/out" || true
        rm -f "$FS/out"
        output_has "pvfs2-stat /pvfs/big (size)" "Size *: *$((COPY_MIB << 20))" "$bin/pvfs2-stat" /pvfs/big || true
    fi
    # The administration tools: each goes through the server's BMI like any client.
    output_has "pvfs2-statfs -m /pvfs" "fs_id" "$bin/pvfs2-statfs" -m /pvfs || true
    fsid=$("$bin/pvfs2-statfs" -m /pvfs 2>/dev/null | awk '$1 == "fs_id:" {print $2; exit}') || true
    # It names the server by host and port: tcp only.
    [[ $SERVER_ADDRESS == tcp://* ]] &&
        { check "pvfs2-check-server" "$bin/pvfs2-check-server" -h 127.0.0.1 -f orangefs -n tcp -p "$PORT" || true; }
    output_has "pvfs2-viewdist -f /pvfs/touched" "Datafile 0" "$bin/pvfs2-viewdist" -f /pvfs/touched || true
    output_has "pvfs2-fs-dump -m /pvfs" "File: touched" "$bin/pvfs2-fs-dump" -m /pvfs || true
    check "pvfs2-chmod 600 /pvfs/touched" "$bin/pvfs2-chmod" 600 /pvfs/touched || true
    check "pvfs2-chown root root /pvfs/touched" "$bin/pvfs2-chown" root root /pvfs/touched || true
    check "pvfs2-ln -s /pvfs/touched /pvfs/link" "$bin/pvfs2-ln" -s /pvfs/touched /pvfs/link || true
    check "pvfs2-xattr -s (set user.libbmi)" "$bin/pvfs2-xattr" -s -k user.libbmi -v yes /pvfs/touched || true
    output_has "pvfs2-xattr -t (get user.libbmi)" "yes" "$bin/pvfs2-xattr" -t -k user.libbmi /pvfs/touched || true
    output_has "pvfs2-ls -l /pvfs (mode, link)" "link -> /pvfs/touched" "$bin/pvfs2-ls" -l /pvfs || true
    output_has "pvfs2-write /pvfs/written 1 MiB" "File size: 1048576" "$bin/pvfs2-write" /pvfs/written 1048576 || true
    check "pvfs2-set-debugmask -m /pvfs none" "$bin/pvfs2-set-debugmask" -m /pvfs none || true
    check "pvfs2-set-eventmask -m /pvfs -e none" "$bin/pvfs2-set-eventmask" -m /pvfs -e none || true
    check "pvfs2-set-mode -m /pvfs admin" "$bin/pvfs2-set-mode" -m /pvfs admin || true
    check "pvfs2-set-mode -m /pvfs normal" "$bin/pvfs2-set-mode" -m /pvfs normal || true
    check "pvfs2-set-sync -m /pvfs -D 0 -M 0" "$bin/pvfs2-set-sync" -m /pvfs -D 0 -M 0 || true
    check "pvfs2-set-perf-interval -m /pvfs 1000" "$bin/pvfs2-set-perf-interval" -m /pvfs 1000 || true
    check "pvfs2-set-perf-history -m /pvfs 5" "$bin/pvfs2-set-perf-history" -m /pvfs 5 || true
    check "pvfs2-set-turn-off-timeouts -t no" "$bin/pvfs2-set-turn-off-timeouts" -m /pvfs -t no || true
    check "pvfs2-drop-caches -m /pvfs" "$bin/pvfs2-drop-caches" -m /pvfs || true
    # It samples the servers' counters until stopped: two seconds of it, counters seen.
    check "pvfs2-perf-mon-example (2 s)" bash -c \
        'timeout 2 "$0" -m /pvfs > "$1"; grep -q "meta read:" "$1"' "$bin/pvfs2-perf-mon-example" "$FS/perf.out" || true
    output_has "pvfs2-get-uid -s SERVER -f FSID" "Server: " \
        "$bin/pvfs2-get-uid" -s "$SERVER_ADDRESS" -f "${fsid:-0}" || true
    check "pvfs2-validate -d /pvfs" "$bin/pvfs2-validate" -d /pvfs || true
    check "pvfs2-fsck -n -m /pvfs" "$bin/pvfs2-fsck" -n -m /pvfs || true
}

# stock_log_clean: the stock server's log has no line about a libbmi client's frames.
stock_log_clean() {
    local count
    # In the foreground (-d) the server logs to its standard error, else to its LogFile.
    count=$(cat "$FS/server.out" "$FS/server.log" 2>/dev/null | grep -c 'bad magic' || true)
    if [[ ${count:-0} == 0 ]]; then
        row "stock server log: no \"bad magic\"" ok - ""
    else
        row "stock server log: no \"bad magic\"" FAILED - "$count lines"
        failures=$((failures + 1))
    fi
}

# run_case NAME SERVER_TREE TOOLS_TREE METHODS [EXTRA]: one file system, the checks, stopped.
run_case() {
    CASE=$1
    echo "orangefs: case $1"
    if start_fs "$2" "$4"; then
        if [[ $4 == tcp,shm ]]; then
            # The tools look the server's address list up and take its shm part.
            output_has "tools look the list up as shm" "using shm://" \
                env BMI_DEBUG=address "$3/src/apps/admin/pvfs2-ls" /pvfs || true
        fi
        run_checks "$3"
        [[ ${5:-} == stock-server ]] && stock_log_clean
    fi
    stop_server
}

run_case "libbmi tcp" "$LIBBMI_TREE" "$LIBBMI_TREE" tcp
run_case "libbmi shm" "$LIBBMI_TREE" "$LIBBMI_TREE" shm
run_case "libbmi tcp+shm" "$LIBBMI_TREE" "$LIBBMI_TREE" tcp,shm
if [[ -n $STOCK_TREE ]]; then
    run_case "stock srv, libbmi" "$STOCK_TREE" "$LIBBMI_TREE" tcp stock-server
    run_case "libbmi srv, stock" "$LIBBMI_TREE" "$STOCK_TREE" tcp
fi

print_table() {
    printf '| %-18s | %-44s | %-6s | %8s | %s |\n' case check result seconds detail
    printf '|%s|%s|%s|%s|%s|\n' "--------------------" "$(printf -- '-%.0s' {1..46})" "--------" \
        "----------" "--------"
    printf '%s\n' "$@"
}

echo
echo "OrangeFS $(cd "$SOURCE" && git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)")" \
     "on libbmi ($(pkg-config --modversion "$LIBBMI_PKG"), $LIBBMI_PKG)"
print_table "${ROWS[@]}"

# The speed table: in each turn every configuration once, in an order that alternates; each
# row is the median over the turns. A tool is one process (as at a site), so the per-operation
# rows take the difference between N operations and one in the same kind of process.
if [[ -n $STOCK_TREE ]] && ((SPEED_TURNS > 0)); then
    SPEED=$WORK/speed.tsv
    STAT_FILES=$((SPEED_FILES < 100 ? SPEED_FILES : 100))
    : >"$SPEED"
    head -c $((SPEED_MIB << 20)) /dev/urandom >"$WORK/speed.in"
    # timed NAME COMMAND...: seconds of one run, into the CSV under the current configuration.
    timed() {
        local name=$1 started
        shift
        started=$(now)
        if ! timeout 600 "$@" >/dev/null 2>&1; then
            echo "speed: $name failed ($CASE)" >&2
            failures=$((failures + 1))
            return 0
        fi
        printf '%s\t%s\t%s\n' "$CASE" "$name" "$(seconds_since "$started")" >>"$SPEED"
    }
    # CPU time of every thread of a process, in ns (schedstat: finer than stat's clock ticks).
    cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
    measure() {
        local bin=$1/src/apps/admin files=() i ns
        for ((i = 0; i < SPEED_FILES; i++)); do files+=("/pvfs/m/f$i"); done
        "$bin/pvfs2-mkdir" /pvfs/m >/dev/null 2>&1 || true
        timed "pvfs2-ping (process, round trips)" "$bin/pvfs2-ping" -m /pvfs
        timed "create 1" "$bin/pvfs2-touch" /pvfs/one
        timed "create N" "$bin/pvfs2-touch" "${files[@]}"
        timed "getattr 1" "$bin/pvfs2-stat" /pvfs/one
        # pvfs2-stat takes at most 100 names (and prints its usage, exit 0, for more).
        timed "getattr N" "$bin/pvfs2-stat" "${files[@]:0:STAT_FILES}"
        timed "copy in" "$bin/pvfs2-cp" "$WORK/speed.in" /pvfs/speed
        timed "copy out" "$bin/pvfs2-cp" /pvfs/speed "$FS/speed.out"
        rm -f "$FS/speed.out"
        ns=$(cpu_ns "$SERVER_PID")
        sleep 10
        printf '%s\tidle server CPU\t%s\n' "$CASE" \
            "$(awk -v a="$ns" -v b="$(cpu_ns "$SERVER_PID")" 'BEGIN {printf "%.2f", (b - a) / 1e6 / 10}')" >>"$SPEED"
    }
    configs=("stock tcp|$STOCK_TREE|tcp" "libbmi tcp|$LIBBMI_TREE|tcp" "libbmi shm (tcp,shm)|$LIBBMI_TREE|tcp,shm")
    for ((turn = 1; turn <= SPEED_TURNS; turn++)); do
        order=("${configs[@]}")
        ((turn % 2 == 0)) && order=("${configs[2]}" "${configs[1]}" "${configs[0]}")
        for config in "${order[@]}"; do
            IFS='|' read -r CASE tree methods <<<"$config"
            echo "orangefs: speed turn $turn, $CASE"
            start_fs "$tree" "$methods" && measure "$tree"
            stop_server
        done
    done
    echo
    echo "Speed: median of $SPEED_TURNS turns; per operation = (N - 1 operations) / (N - 1), N = $SPEED_FILES" \
         "creates, $STAT_FILES getattrs;" \
         "copies of $SPEED_MIB MiB, tool start included; idle CPU in ms per second"
    python3 - "$SPEED" "$SPEED_FILES" "$SPEED_MIB" "$STAT_FILES" <<'EOF'
import csv, statistics, sys
path, n, mib, n_stat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
runs = {}
for case, name, value in csv.reader(open(path), delimiter="\t"):
    runs.setdefault(case, {}).setdefault(name, []).append(float(value))
def figure(case, what):
    r = runs.get(case, {})
    med = lambda k: statistics.median(r[k]) if r.get(k) else None
    if what in ("create", "getattr"):
        one, many = med(what + " 1"), med(what + " N")
        count = n if what == "create" else n_stat
        return None if one is None or many is None else max(many - one, 0) / (count - 1) * 1e6
    if what in ("copy in", "copy out"):
        t = med(what)
        return None if t is None else mib / t
    if what == "ping":
        t = med("pvfs2-ping (process, round trips)")
        return None if t is None else t * 1e3
    return med("idle server CPU")
rows = [("create, us per file", "create", False), ("getattr, us per file", "getattr", False),
        (f"copy {mib} MiB in, MiB/s", "copy in", True), (f"copy {mib} MiB out, MiB/s", "copy out", True),
        ("pvfs2-ping process, ms", "ping", False), ("idle server CPU, ms/s", "idle", False)]
cases = list(runs)
print("| measure | " + " | ".join(cases) + " | " + " | ".join(f"{c} / stock tcp" for c in cases[1:]) + " |")
print("|---" * (1 + 2 * len(cases) - 1) + "|")
for label, what, higher_better in rows:
    values = [figure(c, what) for c in cases]
    cells = ["-" if v is None else f"{v:.1f}" for v in values]
    ratios = []
    for v in values[1:]:
        base = values[0]
        if v is None or base is None or v == 0 or base == 0:
            ratios.append("-")
        else:
            # Above 1 is better than stock, whichever way the measure runs.
            ratios.append(f"{(v / base if higher_better else base / v):.2f}x")
    print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
EOF
fi

if ((failures > 0)); then
    echo "$failures check(s) failed; server logs are in $WORK (removed on exit)" >&2
    exit 1
fi
