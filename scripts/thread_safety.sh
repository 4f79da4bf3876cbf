#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The library and its tools compiled by clang-14 with -Wthread-safety -Werror, so what each
# lock guards (BMI_GUARDED_BY, support/sync/thread_safety.hpp) is checked, not only commented.
# Tests add nothing the analysis would see. Each source is compiled alone (no unity groups), so
# one that misses an include fails here too.
#   scripts/thread_safety.sh [--dir DIR]     (default build-tsa)
# Exit 0: clean; 1: clang found what the output shows; 2: meson setup failed; 77: no clang-14.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

dir=build-tsa
while (($#)); do
    case $1 in
        --dir) dir=$2; shift 2 ;;
        *) echo "usage: $0 [--dir DIR]" >&2; exit 2 ;;
    esac
done
if ! command -v clang++-14 >/dev/null; then
    echo "threads: clang-14 is not installed"
    exit 77
fi
CC=clang-14 CXX=clang++-14 configure_build "$dir" -Dwerror=true -Dtests=false \
    -Dexamples=false -Dbenchmarks=false || exit 2
# Clang runs the analysis as it parses each function: the build's compile commands with
# -fsyntax-only see every warning without generating code.
scripts/syntax_check.py "$dir/compile_commands.json" "$BMI_JOBS" || exit 1
