# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by demo.sh, test.sh and tests/verbs/rxe_vm.sh: the Debian packages libbmi needs and how
# to configure a build. Sourced, not run. tests/scripts/package_lists_test.py checks that these
# lists hold every package the build, the packages step and the commands the tests run need.

# Parallel build and test jobs; 2 by default (the CI machines have two cores).
BMI_JOBS=${BMI_JOBS:-2}

# The library and its tests need these.
# cmake: the consumers test builds an outside CMake project against libbmi's CMake package.
# clang-14, libclang-rt-14-dev: the libFuzzer targets (scripts/fuzz.sh); the runtime package
# holds libFuzzer and the sanitizers clang links. clang-format-14: scripts/format.sh.
BMI_CORE_PACKAGES=(meson ninja-build g++ pkg-config cmake libboost-dev catch2 libibverbs-dev
                   libfabric-dev libfabric-bin
                   rdma-core libsodium-dev libssl-dev libpmix-dev iproute2 clang-14
                   libclang-rt-14-dev clang-format-14)
# The benchmarks' peers and bmi-perf's plots: the build finds them optionally (the core builds
# and its tests pass without), the MPI driver tests run when they are present. The TLS 1.3
# baseline (benchmark/tls_pingpong.c) uses libssl-dev, which the core needs anyway (libcrypto).
BMI_BENCH_PACKAGES=(netpipe-tcp openmpi-bin libopenmpi-dev gnuplot-nox python3)
BMI_PACKAGES=("${BMI_CORE_PACKAGES[@]}" "${BMI_BENCH_PACKAGES[@]}")
# Building and checking the Debian packages of debian/ (scripts/packages.sh); their other build
# dependencies are all in the lists above. dpkg-buildpackage refuses to start without
# build-essential, which a minimal Debian lacks.
BMI_DEB_PACKAGES=(build-essential debhelper dpkg-dev lintian)
BMI_PACKAGES+=("${BMI_DEB_PACKAGES[@]}")
# The qemu guest of tests/verbs/rxe_vm.sh, which installs these itself when it first runs, so
# that demo.sh does not pull in qemu.
BMI_GUEST_PACKAGES=(qemu-system-x86 cpio xz-utils iproute2 ibverbs-providers ibverbs-utils
                    rdma-core)

# Installs BMI_PACKAGES with apt-get unless every one is installed already (the common case
# on a second run, which then needs neither root nor the network).
install_packages() {
    local missing=() pkg
    for pkg in "${BMI_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        echo "packages: all ${#BMI_PACKAGES[@]} present"
        return 0
    fi
    if ((EUID != 0)); then
        echo "packages missing: ${missing[*]}; run as root (or install them) first" >&2
        return 1
    fi
    echo "packages: installing ${missing[*]}"
    timeout 1200 apt-get update
    DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y --no-install-recommends \
        "${BMI_PACKAGES[@]}"
}

# configure_build DIR [MESON OPTIONS...]: sets up DIR, or reconfigures it with the same
# options, so running a script twice reuses its build. Quiet unless it fails. Meson runs from
# inside DIR: its cmake module runs `cmake --system-information`, which works in a scratch
# directory of the current one, and two setups started from one directory at once (test.sh's
# jobs ahead) break each other there.
configure_build() {
    local dir=$1 log rc=0 source=$PWD
    shift
    log=$(mktemp)
    mkdir -p "$dir"
    if [[ -f $dir/meson-private/coredata.dat ]]; then
        (cd "$dir" && timeout 600 meson setup --reconfigure . "$source" "$@") >"$log" 2>&1 ||
            (cd "$dir" && timeout 600 meson setup --wipe . "$source" "$@") >"$log" 2>&1 ||
            rc=$?
    else
        (cd "$dir" && timeout 600 meson setup . "$source" "$@") >"$log" 2>&1 || rc=$?
    fi
    if ((rc != 0)); then
        echo "meson setup $dir failed:" >&2
        cat "$log" >&2
    fi
    rm -f "$log"
    return "$rc"
}

# build_logged DIR: builds DIR with ninja, showing its progress as it goes and keeping all of it
# in DIR/ninja.log. Returns ninja's status (124 on timeout); call it as a condition.
build_logged() {
    timeout 2400 ninja -C "$1" -j"$BMI_JOBS" 2>&1 | tee "$1/ninja.log"
    return "${PIPESTATUS[0]}"
}
