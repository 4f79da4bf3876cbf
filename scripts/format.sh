#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The tree against its clang-format styles (clang-format-14, the version Debian 12 ships, so every
# machine formats alike): .clang-format for C++ (*.cpp, *.hpp), .clang-format-c for C (*.c, *.h),
# none for the files .clang-format-ignore names.
#   scripts/format.sh           check: list the files clang-format would change and how many
#                               lines; exit 1 if any, 0 if none
#   scripts/format.sh --fix     rewrite those files in place
#   scripts/format.sh FILE...   only these files (with or without --fix)
# Exit 77 (a skip) without clang-format-14, or outside a git checkout when no FILE is given: the
# files are the C and C++ sources git tracks. The meson test scripts/format runs the check.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

fix=0
files=()
for arg in "$@"; do
    case $arg in
        --fix) fix=1 ;;
        -h | --help)
            sed -n '3,11p' "$0"
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
for style in .clang-format .clang-format-c .clang-format-ignore; do
    if [[ ! -f $style ]]; then
        echo "format.sh: no $style at the top of the tree" >&2
        exit 2
    fi
done
if ((${#files[@]} == 0)); then
    # safe.directory: the checkout may belong to another user than the one running the tests.
    if ! git -c safe.directory='*' rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "format.sh: not a git checkout, so no list of the tree's files; name the files" >&2
        exit 77
    fi
    # Files not yet added count too: a new file must not pass here and fail once committed.
    mapfile -t files < <(git -c safe.directory='*' ls-files --cached --others --exclude-standard \
        '*.c' '*.h' '*.cpp' '*.hpp')
fi

mapfile -t ignored < <(grep -v -e '^#' -e '^[[:space:]]*$' .clang-format-ignore)
cxx=()
c=()
for file in "${files[@]}"; do
    for pattern in "${ignored[@]}"; do
        # shellcheck disable=SC2053  # the pattern is a glob on purpose
        [[ $file == $pattern ]] && continue 2
    done
    case $file in
        *.c | *.h) c+=("$file") ;;
        *) cxx+=("$file") ;;
    esac
done

# run STYLE_FILE CLANG_FORMAT_OPTIONS... -- FILE...: clang-format-14 over the files with that
# style, none if there are no files.
run() {
    local style=$1 options=()
    shift
    while [[ $1 != -- ]]; do
        options+=("$1")
        shift
    done
    shift
    (($# == 0)) || clang-format-14 --style=file:"$style" "${options[@]}" "$@"
}

if ((fix)); then
    run .clang-format -i -- "${cxx[@]}"
    run .clang-format-c -i -- "${c[@]}"
    exit 0
fi

# One --dry-run per style names every file that would change ("FILE:LINE:COL: error: code should
# be clang-formatted"); a file named there is counted in lines, the rest are not read again.
# clang-format's own failures (a file it cannot read) end the check with its status.
report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
run .clang-format --dry-run --Werror --ferror-limit=1 -- "${cxx[@]}" 2>>"$report" || status=$?
run .clang-format-c --dry-run --Werror --ferror-limit=1 -- "${c[@]}" 2>>"$report" || status=$?
mapfile -t unformatted < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
    "$report" | sort -u)
if ((status != 0 && ${#unformatted[@]} == 0)); then
    cat "$report" >&2
    echo "format.sh: clang-format-14 failed (exit $status)" >&2
    exit 2
fi

changed_lines=0
for file in "${unformatted[@]}"; do
    style=.clang-format
    [[ $file == *.c || $file == *.h ]] && style=.clang-format-c
    # Lines of the file that the formatted text does not keep as they are.
    n=$(clang-format-14 --style=file:"$style" "$file" | diff "$file" - | grep -c '^<' || true)
    echo "$file: $n lines"
    changed_lines=$((changed_lines + n))
done
total=$((${#cxx[@]} + ${#c[@]}))
echo "format: $changed_lines lines in ${#unformatted[@]} of $total files differ from their style"
if ((${#unformatted[@]} > 0)); then
    echo "format: scripts/format.sh --fix rewrites them"
    exit 1
fi
