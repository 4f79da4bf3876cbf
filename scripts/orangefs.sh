#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# OrangeFS itself on libbmi (doc/orangefs.md): builds OrangeFS from ORANGEFS_SOURCE_DIR with its
# own BMI left out and libbmi linked in its place, changing only its src/io/bmi/module.mk.in and
# its configure flags, brings up a one-node file system on 127.0.0.1 in a temporary directory,
# runs OrangeFS's own tools against it, prints a table and removes everything it started.
#
# Usage: scripts/orangefs.sh ORANGEFS_SOURCE_DIR
# Environment:
#   LIBBMI_BUILD        a meson build directory of libbmi to build against (its
#                       meson-uninstalled/bmi-uninstalled.pc); unset: the installed libbmi that
#                       `pkg-config bmi` finds (set PKG_CONFIG_PATH for a prefix of its own)
#   ORANGEFS_BUILD_DIR  where OrangeFS is built, kept and reused on the next run if it holds a
#                       finished build; unset: inside the temporary directory, removed at the end
#   ORANGEFS_COPY_MIB   size of the file pvfs2-cp copies in and out (default 64)
#   BMI_JOBS            make -j (default 2)
# Needs (Debian): gcc make autoconf automake bison flex perl pkg-config liblmdb-dev python3.
set -euo pipefail

readonly ORANGEFS_NEEDS="gcc make autoconf automake bison flex perl pkg-config liblmdb-dev python3"

usage() {
    echo "usage: $0 ORANGEFS_SOURCE_DIR (doc/orangefs.md)" >&2
    exit 2
}

(($# == 1)) || usage
SOURCE=$(cd "$1" 2>/dev/null && pwd) || { echo "$1: no such directory" >&2; exit 2; }
[[ -f $SOURCE/src/io/bmi/module.mk.in && -x $SOURCE/prepare ]] ||
    { echo "$SOURCE does not look like an OrangeFS source tree" >&2; exit 2; }
COPY_MIB=${ORANGEFS_COPY_MIB:-64}
[[ $COPY_MIB =~ ^[1-9][0-9]*$ ]] || { echo "ORANGEFS_COPY_MIB must be a positive number" >&2; exit 2; }
JOBS=${BMI_JOBS:-2}

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
cleanup() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BUILD=${ORANGEFS_BUILD_DIR:-$WORK/orangefs}
ROWS=()
row() { ROWS+=("$(printf '| %-44s | %-6s | %8s | %s |' "$1" "$2" "$3" "$4")"); }
seconds_since() { python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.2f}')" "$1"; }
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

if [[ -x $BUILD/src/server/pvfs2-server && -x $BUILD/src/apps/admin/pvfs2-cp ]]; then
    echo "orangefs: reusing the build in $BUILD"
    row "build (reused)" ok - "$BUILD"
else
    echo "orangefs: building in $BUILD (logs: $BUILD/libbmi-*.log)"
    mkdir -p "$BUILD"
    # A git checkout gives its committed tree, without whatever was built in it.
    if git -C "$SOURCE" rev-parse --verify -q HEAD >/dev/null 2>&1; then
        git -C "$SOURCE" archive HEAD | tar -x -C "$BUILD"
    else
        cp -a "$SOURCE/." "$BUILD/"
    fi
    write_module_mk "$BUILD/src/io/bmi/module.mk.in"
    started=$(now)
    (cd "$BUILD" && ./prepare >libbmi-prepare.log 2>&1 &&
        ./configure --without-bmi-tcp --with-db-backend=lmdb >libbmi-configure.log 2>&1) ||
        { echo "prepare/configure failed: $BUILD/libbmi-*.log" >&2; exit 1; }
    if ! (cd "$BUILD" && timeout 7200 make -j"$JOBS" LIBBMI_PKG="$LIBBMI_PKG" >libbmi-make.log 2>&1); then
        tail -20 "$BUILD/libbmi-make.log" >&2
        echo "OrangeFS build failed: $BUILD/libbmi-make.log" >&2
        exit 1
    fi
    row "build" ok "$(seconds_since "$started")" "--without-bmi-tcp --with-db-backend=lmdb, make -j$JOBS"
fi

BIN=$BUILD/src/apps/admin
SERVER=$BUILD/src/server/pvfs2-server
# Linked to libbmi, and none of OrangeFS's own BMI inside.
linked=$(ldd "$SERVER" | awk '/libbmi/ {print $3}')
if [[ -n $linked ]] && ! nm "$SERVER" | grep -q 'BMI_tcp_\|bmi_method_addr_'; then
    row "pvfs2-server links libbmi, no OrangeFS BMI" ok - "$linked"
else
    row "pvfs2-server links libbmi, no OrangeFS BMI" FAILED - "${linked:-no libbmi in ldd}"
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CONF=$WORK/orangefs.conf
"$BIN/pvfs2-genconfig" --quiet --protocol tcp --fsname orangefs \
    --metaspec "tcp://127.0.0.1:$PORT:$WORK/storage:$WORK/server.log" \
    --iospec "tcp://127.0.0.1:$PORT:$WORK/storage:$WORK/server.log" "$CONF" >"$WORK/genconfig.log" 2>&1 ||
    { cat "$WORK/genconfig.log" >&2; echo "pvfs2-genconfig failed" >&2; exit 1; }
ALIAS=$(awk '$1 == "Alias" {print $2; exit}' "$CONF")
export PVFS2TAB_FILE=$WORK/pvfs2tab
echo "tcp://127.0.0.1:$PORT/orangefs /pvfs pvfs2 defaults,noauto 0 0" >"$PVFS2TAB_FILE"

# check NAME COMMAND...: runs it with a deadline, one table row.
failures=0
check() {
    local name=$1 started rc=0
    shift
    started=$(now)
    timeout 300 "$@" >"$WORK/last.out" 2>&1 || rc=$?
    LAST_SECONDS=$(seconds_since "$started")
    LAST_NAME=$name
    if ((rc == 0)); then
        row "$name" ok "$LAST_SECONDS" ""
    else
        row "$name" FAILED "$LAST_SECONDS" "exit $rc: $(tail -c 80 "$WORK/last.out" | tr '\n' ' ')"
        failures=$((failures + 1))
    fi
    return $rc
}
# The last check's row again, with the MiB/s of its copy (the tool's start included).
with_rate() {
    unset 'ROWS[${#ROWS[@]}-1]'
    row "$LAST_NAME" ok "$LAST_SECONDS" \
        "$(python3 -c "import sys; print(f'{$COPY_MIB / float(sys.argv[1]):.0f} MiB/s')" "$LAST_SECONDS")"
}

if check "pvfs2-server -f (create the storage)" "$SERVER" -f -a "$ALIAS" "$CONF"; then
    "$SERVER" -d -a "$ALIAS" "$CONF" >"$WORK/server.out" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        bash -c "timeout 10 '$BIN/pvfs2-ping' -m /pvfs" >/dev/null 2>&1 && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.2
    done
    check "pvfs2-ping -m /pvfs" "$BIN/pvfs2-ping" -m /pvfs || true
    check "pvfs2-touch /pvfs/touched" "$BIN/pvfs2-touch" /pvfs/touched || true
    check "pvfs2-mkdir /pvfs/dir" "$BIN/pvfs2-mkdir" /pvfs/dir || true
    check "pvfs2-ls /pvfs (touched and dir listed)" \
        bash -c "'$BIN/pvfs2-ls' /pvfs | tee /dev/stderr | grep -q touched && '$BIN/pvfs2-ls' /pvfs | grep -q dir" || true
    head -c $((COPY_MIB << 20)) /dev/urandom >"$WORK/in"
    if check "pvfs2-cp $COPY_MIB MiB in" "$BIN/pvfs2-cp" "$WORK/in" /pvfs/big; then
        with_rate
        check "pvfs2-cp $COPY_MIB MiB out" "$BIN/pvfs2-cp" /pvfs/big "$WORK/out" && with_rate || true
        check "cmp in out" cmp "$WORK/in" "$WORK/out" || true
        check "pvfs2-stat /pvfs/big (size)" \
            bash -c "'$BIN/pvfs2-stat' /pvfs/big | grep -q 'Size *: *$((COPY_MIB << 20))'" || true
    fi
fi

echo
echo "OrangeFS $(cd "$SOURCE" && git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)")" \
     "on libbmi ($(pkg-config --modversion "$LIBBMI_PKG"), $LIBBMI_PKG), tcp://127.0.0.1:$PORT"
printf '| %-44s | %-6s | %8s | %s |\n' check result seconds detail
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "--------" "----------" "--------"
printf '%s\n' "${ROWS[@]}"
if ((failures > 0)); then
    echo "server log ($WORK/server.log):" >&2
    tail -20 "$WORK/server.log" "$WORK/server.out" >&2 2>/dev/null || true
    exit 1
fi
