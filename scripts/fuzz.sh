#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the libFuzzer targets of tests/fuzz with clang-14 (-Dfuzz=true: only the targets and
# the library sources they need) and runs each, BMI_JOBS at a time, starting from its seed
# corpus in the tree. Prints one row per target and fails on any crash, hang, leak or failed
# property; the input that did it is kept under DIR/artifacts/<target>/ and belongs in
# tests/fuzz/regressions/<target>/ once fixed.
#   scripts/fuzz.sh --seconds 10        CI's bounded run: each target for 10 s
#   scripts/fuzz.sh [--runs 10000000]   the campaign: each target for that many executions
#   (both given: whichever comes first, for a campaign that must fit a time)
#   scripts/fuzz.sh --build-only        only configure and build the targets (test.sh does this
#                                       ahead, in CPU time its other steps leave idle)
# Other options: --dir DIR (build directory, default build-fuzz), --only "t1 t2", --seed N
# (libFuzzer's random seed; without it each run draws its own). CI passes a fixed seed, so a
# red fuzz row there is the commit's doing and comes back on a rerun, not the luck of a draw;
# finding new inputs is the campaign's job.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BMI_JOBS=${BMI_JOBS:-2}
dir=build-fuzz
runs=10000000
seconds=0
only=""
seed=0
build_only=0
while (($#)); do
    case $1 in
        --seconds) seconds=$2; [[ ${runs_given:-} ]] || runs=-1; shift 2 ;;
        --runs) runs=$2; runs_given=1; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --build-only) build_only=1; shift ;;
        *) echo "usage: $0 [--seconds N | --runs N] [--dir DIR] [--only 'TARGETS'] [--seed N]" \
                "[--build-only]" >&2
           exit 2 ;;
    esac
done

if ! command -v clang++-14 >/dev/null ||
    ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "fuzz: clang-14 with libFuzzer (packages clang-14, libclang-rt-14-dev) is not installed"
    exit 77
fi

# werror: clang's warnings on the project's code fail the build, as gcc's do in test.sh. Meson
# runs from inside the directory (scripts/lib.sh's configure_build says why).
if [[ ! -f $dir/meson-private/coredata.dat ]]; then
    source=$PWD
    mkdir -p "$dir"
    (cd "$dir" && CC=clang-14 CXX=clang++-14 meson setup . "$source" -Dfuzz=true \
        -Dexamples=false -Dbenchmarks=false -Dwerror=true) >"$dir.setup.log" 2>&1 ||
        { cat "$dir.setup.log" >&2; exit 1; }
fi
mapfile -t targets < <(ninja -C "$dir" -t targets all | grep -o '^tests/fuzz/fuzz_[a-z_]*' |
    sed 's|tests/fuzz/fuzz_||' | sort -u)
if [[ -n $only ]]; then read -ra targets <<<"$only"; fi
((${#targets[@]} > 0)) || { echo "fuzz: no targets configured in $dir" >&2; exit 1; }
echo "=== fuzz: building ${#targets[@]} targets in $dir (log: $dir/fuzz-build.log)"
timeout 1200 ninja -C "$dir" -j"$BMI_JOBS" "${targets[@]/#/tests/fuzz/fuzz_}" \
    >"$dir/fuzz-build.log" 2>&1 || { tail -40 "$dir/fuzz-build.log" >&2; exit 1; }
((build_only == 0)) || exit 0

# fuzz_one TARGET: runs it on a scratch copy of its corpus (the tree's stays as committed).
fuzz_one() {
    local t=$1
    local work=$dir/fuzz-work/$t
    rm -rf "$work" "$dir/artifacts/$t"
    mkdir -p "$work/corpus" "$dir/artifacts/$t"
    cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
    # close_fd_mask=3: the targets' own logging (settings warnings) stays out of the log;
    # libFuzzer and the sanitizers report on a descriptor of their own. A ring segment of 16
    # 512-byte slots written four times needs inputs of up to ~33 KB.
    local start=$SECONDS rc=0
    timeout --kill-after=10 7200 "$dir/tests/fuzz/fuzz_$t" -runs="$runs" \
        -max_total_time="$seconds" -timeout=10 -seed="$seed" \
        -rss_limit_mb=2048 -max_len=34000 -close_fd_mask=3 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/$t/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
    local elapsed=$((SECONDS - start)) runs cov corp
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/log")
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$work/log" | tail -1)
    corp=$(ls "$work/corpus" | wc -l)
    printf '%-16s %6s %12s %9s/s %-20s %6s %s\n' "$t" "$((rc == 0 ? 0 : 1))" "${runs:-0}" \
        "$(( ${runs:-0} / (elapsed > 0 ? elapsed : 1) ))" "${cov:-cov: ?}" "$corp" \
        "$( ((rc == 0)) || echo "FAILED: see $work/log, $dir/artifacts/$t/")" >"$work/row"
    echo "$rc" >"$work/rc"
}

printf '%-16s %6s %12s %11s %-20s %6s\n' target failed executions rate coverage corpus
for t in "${targets[@]}"; do
    while (($(jobs -rp | wc -l) >= BMI_JOBS)); do wait -n || true; done
    rm -f "$dir/fuzz-work/$t/rc"
    fuzz_one "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
    # No rc file: the run itself died (it counts as failed, never as passed).
    [[ $(cat "$dir/fuzz-work/$t/rc" 2>/dev/null) == 0 ]] || failed=$((failed + 1))
    cat "$dir/fuzz-work/$t/row" 2>/dev/null || echo "$t: no result"
done
echo "fuzz: ${#targets[@]} targets, $failed failed"
((failed == 0))
