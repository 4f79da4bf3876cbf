#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what libbmi needs, then builds and runs the whole test suite three times: plain,
# with AddressSanitizer + UBSan, and with ThreadSanitizer. The `verbs` suite of the plain and
# ASan builds runs a second time inside a soft-RoCE qemu guest (tests/verbs/rxe_vm.sh), on real
# verbs, and the `netem` suite of the plain build runs there too, on a kernel with tc netem.
# The last line is the grand total.
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
built=()
# meson test's JSON logs of every run, for the failed cases above the summary.
test_logs=()
# Each step's wall time goes into the summary, so the slowest steps are visible in every CI log,
# and so does the share of the machine's CPU time it left idle: what a build ahead could use.
step_started=$SECONDS

# cpu_ticks: "IDLE TOTAL", the machine's idle (idle + iowait) and total CPU ticks so far.
cpu_ticks() {
    awk '$1 == "cpu" { for (i = 2; i <= NF; i++) total += $i; print $5 + $6, total }' \
        /proc/stat 2>/dev/null || echo "0 0"
}
read -r step_idle step_total < <(cpu_ticks)

# record NAME PASSED FAILED SKIPPED [NOTE]
record() {
    total_passed=$((total_passed + $2))
    total_failed=$((total_failed + $3))
    total_skipped=$((total_skipped + $4))
    local idle total idle_share="?"
    read -r idle total < <(cpu_ticks)
    ((total > step_total)) && idle_share=$((100 * (idle - step_idle) / (total - step_total)))
    report+=("$(printf '%-10s %4d passed, %4d failed, %4d skipped %5ds, CPU %3s%% idle%s' \
        "$1" "$2" "$3" "$4" $((SECONDS - step_started)) "$idle_share" "${5:+  ($5)}")")
    step_started=$SECONDS
    step_idle=$idle
    step_total=$total
}

# The number on meson test's last summary line "LABEL  N" (0 if absent).
count() {
    awk -v label="$1" 'index($0, label) == 1 { n = $NF } END { print n + 0 }' "$2"
}

# tally LOG: "PASSED FAILED SKIPPED" from the meson test summary in LOG.
tally() {
    echo $(($(count "Ok:" "$1") + $(count "Expected Fail:" "$1"))) \
        $(($(count "Fail:" "$1") + $(count "Unexpected Pass:" "$1") + $(count "Timeout:" "$1"))) \
        "$(count "Skipped:" "$1")"
}

# failures LOG: the names of the tests meson test reported as failed or timed out in LOG, on one
# line, so the summary (the part of a CI log that is always shown) says which tests to look at.
failures() {
    awk '$1 ~ /^[0-9]+\/[0-9]+$/ && $0 ~ / (FAIL|TIMEOUT|UNEXPECTEDPASS|ERROR) / {
        for (i = 2; i <= NF; i++) if ($i == "/") { printf "%s%s", sep, $(i + 1); sep = " "; break }
    } END { if (sep) print "" }' "$1"
}

# The jobs started ahead of their step (start_ahead), by name: the background process.
declare -A ahead=()
# One left running when the script stops early goes with it (timeout, which each job runs
# under, passes the signal on to everything it started).
trap 'for pid in "${ahead[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT

# start_ahead NAME LOG COMMAND...: runs COMMAND in the background under SCHED_IDLE, which runs
# only when no other task wants the CPU: the steps before it, most of whose time the tests
# spend waiting out peers' deadlines, leave a core idle much of the time. Its output goes to
# LOG. The step of NAME waits for it (finish_ahead) and does what is left at full speed, so a
# job that failed or ran out of time here shows again in the step's own run.
start_ahead() {
    local name=$1 log=$2
    shift 2
    command -v chrt >/dev/null || return 0
    echo "=== ahead: $name in CPU time nothing else wants (log: $log)"
    chrt --idle 0 "$@" >"$log" 2>&1 &
    ahead[$name]=$!
}

# finish_ahead NAME: waits for the job started ahead as NAME; its exit status.
finish_ahead() {
    local status=0
    echo "=== $1: waiting for the job started ahead"
    wait "${ahead[$1]}" || status=$?
    unset "ahead[$1]"
    return "$status"
}

# build_ahead DIR [MESON OPTIONS...]: configures DIR and builds it ahead (start_ahead); the
# ninja run may wait for idle time long, so its limit is the whole script's.
build_ahead() {
    local dir=$1
    shift
    configure_build "$dir" "$@" 2>/dev/null || return 0
    start_ahead "$dir" "$dir/ninja-ahead.log" timeout 3600 ninja -C "$dir" -j"$BMI_JOBS"
}

# What is started ahead once a build is done (run_suite --then). After the plain build, the
# ASan build; after that, the TSan build and the clang steps at the end: the thread-safety
# check and the fuzz targets' build.
ahead_of_asan() { build_ahead build-asan "${asan_options[@]}"; }
ahead_of_tsan() {
    build_ahead build-tsan "${tsan_options[@]}"
    mkdir -p build-tsa build-fuzz
    start_ahead threads build-tsa/tsa-build.log timeout 3600 scripts/thread_safety.sh \
        --dir build-tsa
    start_ahead fuzz build-fuzz/fuzz-ahead.log timeout 3600 scripts/fuzz.sh --dir build-fuzz \
        --build-only
}

# After the TSan build, the Debian packages: built and checked with lintian (no root needed
# for that part), so that the packages step only installs, uses and purges them.
ahead_of_packages() {
    ((EUID == 0)) || return 0
    mkdir -p build-deb/ahead
    rm -rf build-deb/debs
    start_ahead packages build-deb/ahead.log env DEB_BUILD_OPTIONS="$deb_build_options" \
        timeout 3600 scripts/packages.sh --build-only --out build-deb/debs --dir build-deb/ahead
}

# run_suite NAME DIR [--then FUNCTION] [MESON OPTIONS...]: with --then, FUNCTION is called once
# DIR is built, while this suite's tests run (it starts the next steps' jobs ahead).
run_suite() {
    local name=$1 dir=$2 status=0 then=""
    shift 2
    if [[ ${1:-} == --then ]]; then
        then=$2
        shift 2
    fi
    local wrapper=()
    if [[ -n ${ahead[$dir]:-} ]]; then
        finish_ahead "$dir" || true
    else
        echo "=== $name: configure $dir $*"
        if ! configure_build "$dir" "$@"; then
            record "$name" 0 1 0 "meson setup failed"
            return
        fi
    fi
    echo "=== $name: build (log: $dir/ninja.log)"
    if ! build_logged "$dir"; then
        record "$name" 0 1 0 "build failed"
        return
    fi
    [[ -z $then ]] || "$then"
    # gcc 12's ThreadSanitizer cannot map its shadow memory when the kernel randomises more
    # than 28 bits of the address space; running without randomisation sidesteps that.
    if [[ $name == tsan && $(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28) -gt 28 ]] &&
        setarch "$(uname -m)" -R true 2>/dev/null; then
        wrapper=(--wrapper "setarch $(uname -m) -R")
    fi
    echo "=== $name: test (log: $dir/test-run.log)"
    # Each result shows as it finishes; the log keeps everything for tally. With pipefail the
    # status is meson's (or timeout's 124), not tee's.
    PYTHONUNBUFFERED=1 timeout 3000 meson test -C "$dir" --no-rebuild --print-errorlogs \
        --num-processes "$BMI_JOBS" "${wrapper[@]}" 2>&1 | tee "$dir/test-run.log" || status=$?
    built+=("$dir")
    test_logs+=("$dir/meson-logs/testlog.json")
    local passed failed skipped note
    read -r passed failed skipped < <(tally "$dir/test-run.log")
    note=$(failures "$dir/test-run.log")
    # A non-zero exit without a failure in the summary (meson itself failed or timed out) still
    # counts once.
    if ((status != 0 && failed == 0)); then
        failed=1
        note="${note:+$note; }meson test exited with $status"
    fi
    record "$name" "$passed" "$failed" "$skipped" "$note"
}

# run_in_guest NAME SUITE DIR [--except SUITE2] [RXE_VM OPTIONS...]: runs the meson suite SUITE
# of the build in DIR again (less the tests also in SUITE2), inside the qemu guest of
# tests/verbs/rxe_vm.sh (soft-RoCE for `verbs`; veth, bridge and sch_netem for `netem`, with
# BMI_REQUIRE_NETEM=1). There everything must run: a skip, a guest that did not start, a
# timeout and an empty suite each count as failures.
run_in_guest() {
    local name=$1 suite=$2 dir=$3 status=0 passed failed skipped note="" limit=1200
    local except=()
    shift 3
    if [[ ${1:-} == --except ]]; then
        except=(--no-suite "$2")
        shift 2
    fi
    if [[ " ${built[*]} " != *" $dir "* ]]; then
        record "$name" 0 1 0 "$dir was not built"
        return
    fi
    # The netem suite is short (doc/RELIABILITY.md, "Network faults"): a guest still running
    # after 7 minutes is stuck.
    [[ $suite == netem ]] && limit=420
    local log=$dir/$suite-guest.log
    rm -f "$dir/meson-logs/$suite-guest.json"  # a guest that never ran leaves no older one
    echo "=== $name: the $suite suite of $dir in a qemu guest (log: $log)"
    # --foreground: a signal to this script's process group reaches the harness, which stops qemu.
    # BMI_REQUIRE_NETEM=1: a netem test that cannot build its network fails (verbs ignores it).
    BMI_REQUIRE_NETEM=1 PYTHONUNBUFFERED=1 timeout --foreground -k 30 $((limit + 300)) \
        tests/verbs/rxe_vm.sh --dir "$dir" --timeout "$limit" --no-tty "$@" -- \
        meson test -C "$(realpath "$dir")" --suite "$suite" "${except[@]}" --no-rebuild \
        --print-errorlogs --num-processes "$BMI_JOBS" --logbase "$suite-guest" 2>&1 |
        tee "$log" || status=$?
    test_logs+=("$dir/meson-logs/$suite-guest.json")
    read -r passed failed skipped < <(tally "$log")
    note=$(failures "$log")
    case $status in
        124) note="${note:+$note; }the guest run timed out" ;;
        125) note="${note:+$note; }the guest failed to start" ;;
    esac
    if ((skipped > 0)); then
        failed=$((failed + skipped))
        note="${note:+$note; }$skipped skipped in the guest, counted as failed"
    fi
    if ((status != 0 && failed == 0)); then
        failed=1
        note=${note:-"exited with $status"}
    fi
    if ((passed + failed == 0)); then
        failed=1
        note="no $suite test ran"
    fi
    record "$name" "$passed" "$failed" 0 "$note"
}

# run_fuzz: every libFuzzer target of tests/fuzz for BMI_FUZZ_SECONDS from its seed corpus
# (scripts/fuzz.sh, clang-14), with libFuzzer's seed BMI_FUZZ_SEED (default 1, so a rerun
# repeats it). A target that crashes, hangs or breaks its property is a failure, and so is a
# failed build; without clang-14's libFuzzer the step is a skip.
run_fuzz() {
    local seconds=${BMI_FUZZ_SECONDS:-10} log=build-fuzz/fuzz-run.log status=0
    mkdir -p build-fuzz
    # Its build, started ahead, may have failed or run out of time: fuzz.sh builds what is left.
    [[ -z ${ahead[fuzz]:-} ]] || finish_ahead fuzz || true
    echo "=== fuzz: each target for ${seconds}s (log: $log)"
    timeout --kill-after=30 900 scripts/fuzz.sh --seconds "$seconds" --dir build-fuzz \
        --seed "${BMI_FUZZ_SEED:-1}" 2>&1 |
        tee "$log" || status=$?
    if ((status == 77)); then
        record fuzz 0 0 1 "clang-14/libFuzzer not installed"
        return
    fi
    local passed failed
    passed=$(grep -cE '^[a-z_]+ +0 ' "$log" || true)
    failed=$(grep -cE '^[a-z_]+ +1 ' "$log" || true)
    if ((status != 0 && failed == 0)); then
        record fuzz "$passed" 1 0 "fuzz.sh exited with $status (build failed or timed out)"
        return
    fi
    record fuzz "$passed" "$failed" 0
}

# run_thread_safety: the clang-14 -Wthread-safety check (scripts/thread_safety.sh), started
# ahead or run here. Without clang-14 the step is a skip.
run_thread_safety() {
    local log=build-tsa/tsa-build.log status=0
    echo "=== threads: libbmi with clang-14 -Wthread-safety -Werror (log: $log)"
    if [[ -n ${ahead[threads]:-} ]]; then
        finish_ahead threads || status=$?
    else
        status=124
    fi
    # Not started ahead, or timed out there while it waited for idle time: run it now.
    if ((status == 124 || status == 137)); then
        status=0
        mkdir -p build-tsa
        timeout 1800 scripts/thread_safety.sh --dir build-tsa >"$log" 2>&1 || status=$?
    fi
    case $status in
        0) record threads 1 0 0 ;;
        77) record threads 0 0 1 "clang-14 not installed" ;;
        2)
            tail -20 "$log"
            record threads 0 1 0 "meson setup failed"
            ;;
        *)
            grep -E 'error|warning|files checked' "$log" | head -40
            record threads 0 1 0 "clang-14 found what the log shows (exit $status)"
            ;;
    esac
}

# run_packages: the Debian packages of debian/ built, checked with lintian, installed, used by
# outside programs and purged again (scripts/packages.sh). dpkg -i needs root: without it the
# step is a skip.
run_packages() {
    local log=build-deb/packages.log status=0 passed failed note from=()
    if ((EUID != 0)); then
        record packages 0 0 1 "not root: dpkg -i needs it"
        return
    fi
    mkdir -p build-deb
    echo "=== packages: build, lintian, install, use, purge (log: $log)"
    : >"$log"
    # Built and checked ahead: install, use and purge what that made. If it failed or ran out
    # of time, everything again here, where a real failure shows once more.
    if [[ -n ${ahead[packages]:-} ]] && finish_ahead packages; then
        tee "$log" <build-deb/ahead.log
        from=(--from build-deb/debs)
    fi
    DEB_BUILD_OPTIONS=$deb_build_options timeout --kill-after=30 1800 scripts/packages.sh \
        --dir build-deb "${from[@]}" 2>&1 | tee -a "$log" || status=$?
    if ((status == 77)); then
        record packages 0 0 1 "$(tail -1 "$log")"
        return
    fi
    passed=$(grep -cE '^[a-z]+ +ok ' "$log" || true)
    failed=$(grep -cE '^[a-z]+ +FAILED ' "$log" || true)
    note=$(grep -m1 '^lintian: ' "$log" || true)
    if ((status != 0 && failed == 0)); then
        failed=1
        note="packages.sh exited with $status"
    fi
    record packages "$passed" "$failed" 0 "$note"
}

install_packages
step_started=$SECONDS
read -r step_idle step_total < <(cpu_ticks)
# -O3, as demo.sh's release build: some of gcc's warnings (-Wrestrict) appear only at that level,
# and werror makes each one fail the build. Unity mode (meson's unity: several sources of a
# target in one compile) parses the shared headers once per group rather than once per file,
# which halves the library's build; the threads step below still compiles each source of the
# library and its tools alone, so one that misses an include fails there.
# The sanitizer builds take -O1, as the sanitizers' own documentation advises: their reports
# keep their stacks, and the builds, the longest steps of this script, take a third less time.
# They compile in unity mode too. Each is built ahead, beside the tests of the step before.
asan_options=(-Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 -Dunity=on)
tsan_options=(-Db_sanitize=thread -Db_lundef=false -Doptimization=1 -Dunity=on)
# noopt: the packages step checks what the packages hold and that they work once installed; the
# optimiser's warnings are the plain build's to find, and without it the build is shorter.
deb_build_options=noopt
run_suite plain build-test --then ahead_of_asan -Dwerror=true -Doptimization=3 -Dunity=on
# The conformance suites over rdma (suite verbs_conformance) are most of the guest's time, which
# is emulated: they run on the ASan build below, and here the verbs method's own tests.
run_in_guest verbs verbs build-test --except verbs_conformance
run_in_guest netem netem build-test
run_suite asan build-asan --then ahead_of_tsan "${asan_options[@]}"
# ASan's shadow and quarantine want more than the guest's default 2 GiB.
run_in_guest verbs-asan verbs build-asan --mem 4096
run_suite tsan build-tsan --then ahead_of_packages "${tsan_options[@]}"
run_fuzz
run_thread_safety
run_packages

# CI shows the end of this output: which case of a failed test failed, and why, goes last but
# for the summary.
if ((total_failed > 0)); then
    existing=()
    for log in "${test_logs[@]}"; do [[ -f $log ]] && existing+=("$log"); done
    if ((${#existing[@]} > 0)); then
        echo
        echo "=== failed cases"
        scripts/failed_cases.py --lines 30 "${existing[@]}" | head -n 150 || true
    fi
fi
echo
echo "=== summary"
printf '%s\n' "${report[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
((total_failed == 0))
