#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Prints, for each test that failed in the given meson test logs (meson-logs/*.json), what a
reader of a CI log needs first: the test, and its failed Catch2 cases or its last lines.

CI shows only the end of a run's output, so test.sh prints this just above its summary, where
the names alone would say which test failed but not which case or why.

Usage: failed_cases.py [--lines N] LOG.json...
"""
import argparse
import json
import re
import sys

PASSED = {"OK", "SKIP", "EXPECTEDFAIL"}
RULE = re.compile(r"^-{20,}$")
END = re.compile(r"^={20,}$")  # Catch2's line above its totals
SANITIZER = re.compile(r"^(==\d+==ERROR|SUMMARY: \w+Sanitizer|.*runtime error:)")


def excerpt(output, budget):
    """The Catch2 failure blocks of output (case header to the end of the failed assertion),
    and sanitizer reports' first lines, within budget lines; else its last lines."""
    lines = output.splitlines()
    picked = []
    i = 0
    while i < len(lines) and len(picked) < budget:
        line = lines[i]
        if RULE.match(line) and i + 1 < len(lines) and not RULE.match(lines[i + 1]):
            # A case header: rule, name (and sections), rule. Kept with its body when that
            # holds a FAILED line.
            j = i + 1
            block = []
            while j < len(lines) and not RULE.match(lines[j]):
                block.append(lines[j])
                j += 1
            k = j + 1
            body = []
            seen_failure = False
            # The body runs to the next case's header or the totals.
            while k < len(lines) and not END.match(lines[k]) and not RULE.match(lines[k]):
                if "FAILED" in lines[k]:  # a WARN's block is printed too, and is no failure
                    seen_failure = True
                body.append(lines[k])
                k += 1
            if seen_failure:
                picked += ["  " + b for b in block if b.strip()]
                picked += ["    " + b for b in body if b.strip() and not set(b) <= set(".")]
            i = k
            continue
        if SANITIZER.match(line):
            picked.append("  " + line)
        i += 1
    if not picked:
        picked = ["  " + l for l in lines[-budget:]]
    return picked[:budget]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=40, help="most lines per failed test")
    parser.add_argument("logs", nargs="*")
    args = parser.parse_args()
    failed = 0
    for path in args.logs:
        try:
            records = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
        except (OSError, ValueError) as e:
            print(f"{path}: unreadable ({e})")
            continue
        for record in records:
            if record.get("result") in PASSED:
                continue
            failed += 1
            print(f"{record['name']}: {record.get('result')} after "
                  f"{record.get('duration', 0):.1f} s ({path})")
            output = (record.get("stdout") or "") + "\n" + (record.get("stderr") or "")
            print("\n".join(excerpt(output, args.lines)))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
