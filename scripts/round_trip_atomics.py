#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The atomic read-modify-write instructions and full fences (lock-prefixed, xchg, mfence) one
round trip executes in libbmi, from two callgrind runs made with --dump-instr=yes (as
scripts/round_trip_instructions.sh --atomics makes them): per instruction, the difference of
the long and the short run over their difference in round trips, with the function and the
source line that holds it. Each such instruction drains the store buffer, so on two cores they
weigh more than their count of instructions says.

    scripts/round_trip_atomics.py LIBRARY SHORT.callgrind LONG.callgrind ROUNDS
"""
import collections
import os
import re
import subprocess
import sys

NAMED = re.compile(r"^(c?(?:ob|fl|fi|fe|fn))=\((\d+)\)(?: (.*))?$")
COST = re.compile(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s")
ATOMIC = re.compile(r"^(lock\b|xchg\b|mfence\b)")


def executed(path, library):
    """(address in library) -> instructions executed, from one callgrind file."""
    names, counts = {}, collections.Counter()
    obj, last, after_call = None, 0, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = NAMED.match(line)
            if m:
                kind, index, name = m.groups()
                base_kind = kind[1:] if kind.startswith("c") else kind
                if name:
                    names[(base_kind, index)] = name
                if kind == "ob":
                    obj = os.path.realpath(names.get(("ob", index), ""))
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            m = COST.match(line)
            if not m:
                continue
            token = m.group(1)
            if token.startswith("0x"):
                last = int(token, 16)
            elif token != "*":
                last += int(token)
            fields = line.split()
            if after_call:  # the inclusive cost of a call, not an instruction's own
                after_call = False
                continue
            if obj == library and len(fields) >= 3:
                counts[last] += int(fields[-1])
    return counts


def atomic_instructions(library):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", library], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m and ATOMIC.match(m.group(2).strip()):
            found[int(m.group(1), 16)] = m.group(2).split()[0]
    return found


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    library, short_file, long_file, rounds = sys.argv[1:]
    library = os.path.realpath(library)
    rounds = int(rounds)
    short, long = executed(short_file, library), executed(long_file, library)
    atomics = atomic_instructions(library)
    per_round = {a: (long[a] - short.get(a, 0)) / rounds for a in atomics if a in long}
    shown = sorted(((n, a) for a, n in per_round.items() if n >= 0.05), reverse=True)
    where = subprocess.run(["addr2line", "-a", "-f", "-C", "-i", "-e", library] +
                           [hex(a) for _, a in shown], check=True, capture_output=True,
                           text=True).stdout if shown else ""
    # -a heads each address's inline chain (function, then file:line, innermost first): the
    # chain's first pair is the atomic's own line, its last the function that holds it.
    chains = []
    for line in where.splitlines():
        if line.startswith("0x"):
            chains.append([])
        else:
            chains[-1].append(line)
    print(f"{sum(per_round.values()):.1f} atomic instructions per round trip in {library}")
    for (n, address), chain in zip(shown, chains):
        inner, outer = chain[0].split("(")[0], chain[-2].split("(")[0]
        print(f"{n:6.2f}  {atomics[address]:5}  {outer} ({chain[-1].split('/')[-1]}; {inner})")


if __name__ == "__main__":
    main()
