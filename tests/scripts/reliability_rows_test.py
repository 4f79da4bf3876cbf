#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""doc/RELIABILITY.md against the methods and the settings table:
  - every method (a directory methods/NAME with NAME_method.hpp) has a section, and in it a row
    for each bound every method shares (issue 37: the rules of tests/conformance/
    peer_rules_test.cpp and the connection kit). A bound a method does not have yet is still a
    row, saying so, so that a new method cannot leave one out unnoticed;
  - every setting a table row names in its setting column (`BMI_...` or an option key) is a row
    of doc/SETTINGS.md, as bmi_info_test checks SETTINGS.md against the library."""
import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))

# The shared bounds: what a row's resource column (or, for the deadline, its setting column)
# must match. {M} is the method's name in upper case.
SHARED_BOUNDS = [
    ("keys: wrong, absent or replayed", "resource", r"(failing|keyed) handshake"),
    ("announced name without proof", "resource", r"announced listen"),
    ("early data per peer", "resource", r"early.*per peer"),
    ("setup deadline", "setting", r"BMI_{M}_(SETUP|CONNECT)_TIMEOUT_MS"),
    ("per-source admission", "resource", r"(one|per) source"),
    ("descriptor exhaustion", "resource", r"file descriptors"),
    ("a resolver that never answers", "resource", r"resolver"),
]


def methods():
    return sorted(d.name for d in (ROOT / "methods").iterdir()
                  if (d / f"{d.name}_method.hpp").is_file())


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(text, names):
    """(section, header, cells) of every table row below its header; a '### NAME ...' heading
    stays in NAME's section."""
    section = None
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
        if line.startswith("## "):
            section = line[3:].split()[0].lower() if line[3:].split() else None
        elif line.startswith("### "):
            first = line[4:].split()[0].lower() if line[4:].split() else ""
            if first in names:
                section = first
        elif line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line.strip()):
            if header is None:
                header = cells(line)
            else:
                yield section, header, cells(line)


def main():
    text = (ROOT / "doc" / "RELIABILITY.md").read_text()
    settings_text = (ROOT / "doc" / "SETTINGS.md").read_text()
    known = set()
    for line in settings_text.splitlines():
        if line.startswith("| `"):
            known.update(re.findall(r"`([^`]+)`", "|".join(cells(line)[:2])))
    names = methods()
    errors = []
    if not names:
        errors.append("no method found under methods/")
    rows = list(table_rows(text, names))
    for method in names:
        own = [r for s, _, r in rows if s == method]
        if not own:
            errors.append(f"doc/RELIABILITY.md has no '## {method}' section with a table")
            continue
        for bound, column, pattern in SHARED_BOUNDS:
            regex = re.compile(pattern.replace("{M}", method.upper()), re.IGNORECASE)
            index = 0 if column == "resource" else 2
            if not any(len(r) > index and regex.search(r[index]) for r in own):
                errors.append(f"{method}: no row for the shared bound '{bound}' "
                              f"({column} column matching /{regex.pattern}/)")
    for section, header, row in rows:
        if len(header) < 3 or header[2] != "setting" or len(row) < 3:
            continue
        for name in re.findall(r"`([^`]+)`", row[2]):
            if re.fullmatch(r"BMI_[A-Z0-9_]+|[a-z][a-z0-9_]+", name) and name not in known:
                errors.append(f"{section}: row '{row[0][:50]}' names the setting {name}, "
                              "which doc/SETTINGS.md does not have")
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"{len(names)} methods x {len(SHARED_BOUNDS)} shared bounds have their rows; "
          "every setting named is in doc/SETTINGS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
