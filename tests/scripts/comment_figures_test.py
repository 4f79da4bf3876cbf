#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Code comments carry reasons, not measurements (issue 37): no comment in bmi/ (the tools
included), methods/, support/, examples/ or benchmark/ holds a timing (ns, us), a rate (GB/s,
MB/s), a percentage, an "Nx faster", a date or a profiler's count. Such figures describe one
machine on one day and go stale unseen; they belong in a doc/perf/ lab note
(doc/perf/code-figures.md), which the comment names. Sizes and the constants the code itself
sets (16 KiB, 64 ms) are not measurements and pass."""
import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
DIRS = ["bmi", "methods", "support", "examples", "benchmark"]

FIGURES = re.compile(
    r"\d(?:[.,]\d+)?\s?(?:ns|us|µs)\b"         # timings
    r"|\d\s?(?:GB|MB|GiB|MiB|KiB)/s\b"          # rates
    r"|\d\s?%"                                  # percentages
    r"|\d(?:\.\d+)?x (?:faster|slower)\b"       # speed-ups
    r"|\b20\d\d-\d\d-\d\d\b"                    # dates
    r"|\bcallgrind\b|\bperf stat\b")            # profilers' counts


def comments(path):
    """(line number, comment text) of each comment line: // in C and C++, # in Python, shell
    and meson. The code part of a line is skipped: a format string may hold '%'."""
    c_like = path.suffix in (".c", ".h", ".cpp", ".hpp")
    marker = "//" if c_like else "#"
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        at = line.find(marker)
        # A marker inside a string literal is not a comment: count the quotes before it.
        while at >= 0 and line[:at].count('"') % 2 == 1:
            at = line.find(marker, at + 1)
        if at >= 0:
            yield number, line[at + len(marker):]


def main():
    found = []
    for top in DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or not (
                    path.suffix in (".c", ".h", ".cpp", ".hpp", ".py", ".sh")
                    or path.name == "meson.build"):
                continue
            for number, text in comments(path):
                match = FIGURES.search(text)
                if match:
                    found.append(f"{path.relative_to(ROOT)}:{number}: '{match.group(0)}' in "
                                 f"//{text.strip()[:80]}")
    for line in found:
        print("FAIL:", line)
    if found:
        print(f"{len(found)} comments carry measurements: keep the reason, move the figures "
              "to doc/perf/code-figures.md and name it")
        return 1
    print(f"no comment in {', '.join(DIRS)} carries a measurement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
