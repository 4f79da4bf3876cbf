#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs every compile command of a build's compile_commands.json with -fsyntax-only, JOBS at a
time, and prints each file's diagnostics. Exits 1 if any command failed.

Usage: syntax_check.py COMPILE_COMMANDS_JSON JOBS

scripts/thread_safety.sh uses it for clang's -Wthread-safety: clang runs that analysis as it parses each
function, so the check needs no code generation, most of a build's time."""
import concurrent.futures
import json
import subprocess
import sys


def check(entry):
    run = subprocess.run(entry["command"] + " -fsyntax-only", shell=True,
                         cwd=entry["directory"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, check=False)
    return entry["file"], run.returncode, run.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as source:
        commands = json.load(source)
    with concurrent.futures.ThreadPoolExecutor(int(sys.argv[2])) as pool:
        results = list(pool.map(check, commands))
    for name, code, output in results:
        print(f"{'ok' if code == 0 else 'FAILED'} {name}")
        print(output, end="")
    failed = sum(code != 0 for _, code, _ in results)
    print(f"{len(results)} files checked, {failed} failed")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
