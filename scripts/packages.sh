#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The Debian packages of debian/, end to end: builds them with dpkg-buildpackage from a copy of
# this tree in a scratch directory (it writes the packages into the tree's parent directory),
# checks them with lintian (an error fails), installs them with dpkg -i, builds and runs outside
# programs against what they installed (tests/consumers/consumers_test.py --system: CMake and
# pkg-config, C and C++, both dialects, live over 127.0.0.1), runs the tools, and purges the
# packages again. Prints one row per step; logs stay in DIR (default build-deb).
#   scripts/packages.sh                     all of it; needs root (dpkg -i, dpkg --purge)
#   scripts/packages.sh --build-only        build and lintian only, no root needed
#   --out DEBDIR                            keep the .deb files there (the scratch copy goes)
#   scripts/packages.sh --from DEBDIR       install, use and purge the packages an earlier
#                                           `--build-only --out DEBDIR` built and checked
#                                           (test.sh builds them ahead)
#   --dir DIR                               where the logs go
# Exit status: 0 all steps passed, 1 a step failed, 77 not root or no dpkg-buildpackage/lintian.
# shellcheck disable=SC2317  # the steps' functions are called through step()
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BMI_JOBS=${BMI_JOBS:-2}
PACKAGES=(libbmi0.1 libbmi-dev bmi-tools)
build_only=0
out=""
from=""
dir=build-deb
while (($#)); do
    case $1 in
        --build-only) build_only=1; shift ;;
        --out) out=$(realpath -m "$2"); shift 2 ;;
        --from) from=$(realpath -m "$2"); shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        *) echo "usage: $0 [--build-only] [--out DEBDIR] [--from DEBDIR] [--dir DIR]" >&2
           exit 2 ;;
    esac
done

for tool in dpkg-buildpackage dh lintian; do
    if ! command -v "$tool" >/dev/null; then
        echo "packages: $tool is not installed (Debian: dpkg-dev debhelper lintian)"
        exit 77
    fi
done
if ((!build_only && EUID != 0)); then
    echo "packages: installing needs root (--build-only builds and checks without)"
    exit 77
fi

mkdir -p "$dir"
dir=$(realpath "$dir")
version=$(meson introspect --projectinfo meson.build 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
scratch=$(mktemp -d "${TMPDIR:-/tmp}/libbmi-packages.XXXXXX")
installed=0
failed=0

cleanup() {
    if ((installed)); then
        dpkg --purge "${PACKAGES[@]}" >>"$dir/purge.log" 2>&1 || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# step NAME COMMAND...: runs COMMAND with its output in DIR/NAME.log and prints its row.
step() {
    local name=$1 start=$SECONDS rc=0
    shift
    "$@" >"$dir/$name.log" 2>&1 || rc=$?
    if ((rc == 0)); then
        printf '%-10s ok      %4ds  (log: %s)\n' "$name" $((SECONDS - start)) "$dir/$name.log"
    else
        printf '%-10s FAILED  %4ds  (exit %d; log: %s)\n' "$name" $((SECONDS - start)) "$rc" \
            "$dir/$name.log"
        tail -30 "$dir/$name.log" | sed 's/^/    /'
        failed=1
    fi
    return "$rc"
}

# The package's version is the project's: a release that bumps meson.build needs a changelog
# entry too.
check_version() {
    local deb_version
    deb_version=$(dpkg-parsechangelog -S Version)
    echo "meson.build: $version, debian/changelog: $deb_version"
    [[ $deb_version == "$version" ]]
}

# Tracked and untracked files of the work tree as they are now (build directories are ignored),
# or everything but build directories outside a git checkout. safe.directory: a user other than
# the checkout's owner (--build-only) reads it too.
copy_tree() {
    local dest=$scratch/libbmi-$version
    local git=(git -c safe.directory='*')
    mkdir -p "$dest"
    if "${git[@]}" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        "${git[@]}" ls-files -z --cached --others --exclude-standard |
            tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$dest"
    else
        tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$dest"
    fi
}

# The steps run with their output in a log, where set -e does not reach (a function called
# as a condition): each command that can fail returns by hand. Fd 3 is the terminal.
exec 3>&1

# noddebs: no -dbgsym packages; nothing here installs them. Options in DEB_BUILD_OPTIONS
# (scripts/test.sh: noopt) are added to these. Each ninja step shows on the terminal as
# "[N/M] output", the rest of dpkg-buildpackage's output only in the log.
build() {
    (cd "$scratch/libbmi-$version" &&
        DEB_BUILD_OPTIONS="parallel=$BMI_JOBS noddebs${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
            timeout 2400 \
            dpkg-buildpackage -us -uc -b) 2>&1 |
        while IFS= read -r line; do
            printf '%s\n' "$line"
            if [[ $line =~ ^(\[[0-9]+/[0-9]+\]).*\ -o\ ([^ ]+) ]]; then
                printf '  %s %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" >&3
            fi
        done || return
    ls -l "$scratch"/*.deb
}

# Errors fail the step; every error and warning shows on the terminal too.
run_lintian() {
    local rc=0 summary
    lintian --fail-on error --display-info "$scratch"/libbmi_"$version"_*.changes || rc=$?
    grep -E '^[EW]: ' "$dir/lintian.log" | sed 's/^/    /' >&3
    summary="lintian: $(grep -c '^E: ' "$dir/lintian.log") errors,"
    summary+=" $(grep -c '^W: ' "$dir/lintian.log") warnings"
    echo "$summary"
    echo "$summary" >&3
    return "$rc"
}

install_debs() {
    local debs=() pkg
    for pkg in "${PACKAGES[@]}"; do debs+=("${from:-$scratch}/${pkg}_${version}_"*.deb); done
    installed=1
    dpkg -i "${debs[@]}" || return
    dpkg-query -W "${PACKAGES[@]}" || return
    for pkg in bmi bmi-standalone; do
        [[ $(pkg-config --modversion "$pkg") == "$version" ]] ||
            { echo "pkg-config --modversion $pkg is not $version"; return 1; }
    done
}

use_tools() {
    local rc=0
    bmi-info --method tcp || return
    bmi-alloc >/dev/null 2>&1 || rc=$?
    ((rc == 2)) || { echo "bmi-alloc without arguments exited $rc, not 2 (usage)"; return 1; }
    bmi-perf --methods tcp --baselines raw-tcp --modes latency --min 8 --max 64 --iters 100 \
        --plot none --out-dir "$scratch/perf" || return
    grep '^latency,bmi tcp,64,' "$scratch/perf/bmi-perf.csv"
}

# known PACKAGE: dpkg knows it in any state but "not-installed".
known() {
    dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'
}

# Nothing of the packages is left: not in dpkg's database, not on disk, not in ld.so's cache.
purge() {
    local pkg
    installed=0
    dpkg --purge "${PACKAGES[@]}" || return
    for pkg in "${PACKAGES[@]}"; do
        if known "$pkg"; then echo "$pkg is still known to dpkg"; return 1; fi
    done
    if ls -d /usr/include/bmi.h /usr/bin/bmi-info /usr/libexec/bmi 2>/dev/null; then
        echo "left on disk"
        return 1
    fi
    if ldconfig -p | grep libbmi; then echo "left in ld.so's cache"; return 1; fi
}

if ((!build_only)); then
    for pkg in "${PACKAGES[@]}"; do
        if known "$pkg"; then
            echo "packages: $pkg is installed already; this step would replace and then purge" \
                "it: remove it first (dpkg --purge ${PACKAGES[*]})" >&2
            exit 1
        fi
    done
fi

echo "=== packages: libbmi $version in $scratch (logs: $dir)"
if [[ -z $from ]]; then
    step version check_version || exit 1
    step copy copy_tree || exit 1
    echo "build: dpkg-buildpackage -us -uc -b (log: $dir/build.log)"
    step build build || exit 1
    step lintian run_lintian || true
fi
if [[ -n $out ]]; then
    mkdir -p "$out"
    cp "$scratch"/*.deb "$out"/
    echo "packages: the .deb files are in $out"
fi
if ((!build_only)); then
    if step install install_debs; then
        step consumers timeout 600 python3 tests/consumers/consumers_test.py --system || true
        step tools use_tools || true
    fi
    step purge purge || true
fi
exit "$failed"
