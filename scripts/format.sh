#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The tree against .clang-format (clang-format-14, the version Debian 12 ships, so every machine
# formats alike).
#   scripts/format.sh           check: list the files clang-format would change and how many
#                               lines; exit 1 if any, 0 if none
#   scripts/format.sh --fix     rewrite those files in place
#   scripts/format.sh FILE...   only these files (with or without --fix)
# Exit 77 (a skip) without clang-format-14. The files are the C and C++ sources git tracks; run
# from a git checkout.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

fix=0
files=()
for arg in "$@"; do
    case $arg in
        --fix) fix=1 ;;
        -h | --help)
            sed -n '3,10p' "$0"
            exit 0
            ;;
        -*)
            echo "format.sh: unknown option $arg (--fix, --help)" >&2
            exit 2
            ;;
        *) files+=("$arg") ;;
    esac
done

if ! command -v clang-format-14 >/dev/null; then
    echo "format.sh: clang-format-14 is not installed" >&2
    exit 77
fi
if [[ ! -f .clang-format ]]; then
    echo "format.sh: no .clang-format at the top of the tree" >&2
    exit 2
fi
if ((${#files[@]} == 0)); then
    mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
fi

if ((fix)); then
    clang-format-14 -i --style=file "${files[@]}"
    exit 0
fi

changed_files=0
changed_lines=0
for file in "${files[@]}"; do
    # Lines of the file that the formatted text does not keep as they are.
    n=$(clang-format-14 --style=file "$file" | diff "$file" - | grep -c '^<' || true)
    if ((n > 0)); then
        echo "$file: $n lines"
        changed_files=$((changed_files + 1))
        changed_lines=$((changed_lines + n))
    fi
done
echo "format: $changed_lines lines in $changed_files of ${#files[@]} files differ from .clang-format"
((changed_files == 0))
