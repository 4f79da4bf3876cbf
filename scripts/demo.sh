#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what libbmi needs, builds it in release mode and prints the loopback ping-pong tables
# next to the raw TCP baseline.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

install_packages
echo "configure: build/ (release)"
configure_build build -Dbuildtype=release
echo "build: ninja -C build (log: build/ninja.log)"
if ! build_logged build; then
    echo "build failed (log: build/ninja.log)" >&2
    exit 1
fi
echo
build/bmi/tools/bmi-info
echo
timeout 1800 benchmark/run_loopback.sh --build build --compare "$@"
echo
echo "All methods against Open MPI, NetPIPE, eventfd and memcpy, with plots:"
echo "  build/benchmark/bmi-perf --quick      # writes into a new bmi-perf-YYYYmmdd-HHMMSS/"
