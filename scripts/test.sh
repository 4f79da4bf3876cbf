#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what libbmi needs, then builds and runs the whole test suite three times: plain,
# with AddressSanitizer + UBSan, and with ThreadSanitizer. The last line is the grand total.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

total_passed=0
total_failed=0
total_skipped=0
report=()

# record NAME PASSED FAILED SKIPPED [NOTE]
record() {
    total_passed=$((total_passed + $2))
    total_failed=$((total_failed + $3))
    total_skipped=$((total_skipped + $4))
    report+=("$(printf '%-6s %4d passed, %4d failed, %4d skipped%s' "$1" "$2" "$3" "$4" \
        "${5:+  ($5)}")")
}

# The number on meson test's last summary line "LABEL  N" (0 if absent).
count() {
    awk -v label="$1" 'index($0, label) == 1 { n = $NF } END { print n + 0 }' "$2"
}

# run_suite NAME DIR [MESON OPTIONS...]
run_suite() {
    local name=$1 dir=$2 status=0
    shift 2
    local wrapper=()
    echo "=== $name: configure $dir $*"
    if ! configure_build "$dir" "$@"; then
        record "$name" 0 1 0 "meson setup failed"
        return
    fi
    echo "=== $name: build (log: $dir/ninja.log)"
    if ! timeout 2400 ninja -C "$dir" -j"$BMI_JOBS" >"$dir/ninja.log" 2>&1; then
        tail -50 "$dir/ninja.log"
        record "$name" 0 1 0 "build failed"
        return
    fi
    # gcc 12's ThreadSanitizer cannot map its shadow memory when the kernel randomises more
    # than 28 bits of the address space; running without randomisation sidesteps that.
    if [[ $name == tsan && $(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28) -gt 28 ]] &&
        setarch "$(uname -m)" -R true 2>/dev/null; then
        wrapper=(--wrapper "setarch $(uname -m) -R")
    fi
    echo "=== $name: test"
    timeout 3000 meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$BMI_JOBS" \
        "${wrapper[@]}" >"$dir/test-run.log" 2>&1 || status=$?
    cat "$dir/test-run.log"
    local log=$dir/test-run.log
    local ok xfail fail upass timedout skip
    ok=$(count "Ok:" "$log")
    xfail=$(count "Expected Fail:" "$log")
    fail=$(count "Fail:" "$log")
    upass=$(count "Unexpected Pass:" "$log")
    timedout=$(count "Timeout:" "$log")
    skip=$(count "Skipped:" "$log")
    local failed=$((fail + upass + timedout)) note=""
    # A non-zero exit without a failure in the summary (meson itself failed or timed out) still
    # counts once.
    if ((status != 0 && failed == 0)); then
        failed=1
        note="meson test exited with $status"
    fi
    record "$name" $((ok + xfail)) "$failed" "$skip" "$note"
}

install_packages
run_suite plain build-test -Dwerror=true
run_suite asan build-asan -Db_sanitize=address,undefined -Db_lundef=false
run_suite tsan build-tsan -Db_sanitize=thread -Db_lundef=false

echo
echo "=== summary"
printf '%s\n' "${report[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
((total_failed == 0))
