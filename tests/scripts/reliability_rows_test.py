#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""doc/RELIABILITY.md against the methods and the settings table, as bmi_info_test checks
doc/SETTINGS.md against the library:
  - every method (a directory methods/NAME with NAME_method.hpp, and every method this build
    compiled, BMI_ENABLED_METHODS) has a section, and in it a row for each bound every method
    shares (issue 37: the connection kit of methods/*.hpp and methods/kit/, and the rules of
    tests/conformance/peer_rules_test.cpp). A bound a method does not have yet is still a row,
    saying "known gap" (or "not applicable"), so that a new method cannot leave one out
    unnoticed;
  - a bound's row names the method's own setting where the bound has one, unless it is a gap;
  - every row of a method's section names its test, or says that there is none yet;
  - every setting a table row names in its setting column (`BMI_...` or an option key) is a row
    of doc/SETTINGS.md.
The check then removes each bound's rows from a copy of the page, one method and bound at a
time, and fails unless that copy is refused for that bound: the check cannot pass vacuously."""
import os
import re
import sys
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))

# The shared bounds: (name, column, pattern, setting). The row's cell in `column` ("resource",
# "setting" or "row" for the whole row) must match `pattern`; if `setting` is given, the row's
# setting column must match it too, unless the row is a known gap. {M} is the method's name
# in upper case.
SHARED_BOUNDS = [
    ("keys: wrong, absent or replayed", "resource", r"(failing|keyed) handshake", None),
    ("announced name without proof", "resource", r"announced listen", None),
    ("early data per peer", "resource", r"^early.*per peer", r"BMI_{M}_EARLY_PEER_BYTES"),
    ("early data over all peers", "resource", r"^early.*all peers", r"BMI_{M}_EARLY_TOTAL_BYTES"),
    ("setup deadline", "setting", r"BMI_{M}_SETUP_TIMEOUT_MS", None),
    ("setup deadline of an initiator whose listener never answers", "resource",
     r"listener that queued our", r"BMI_{M}_SETUP_TIMEOUT_MS"),
    ("stall deadline: a transfer started and not finished", "resource",
     r"started and (does )?not finish", r"BMI_{M}_STALL_TIMEOUT_MS"),
    ("send timeout: a peer that stopped reading", "resource", r"stopped reading",
     r"BMI_{M}_SEND_TIMEOUT_MS"),
    ("idle connections when descriptors run short", "row", r"idle (bootstrap )?connections",
     None),
    ("per-source admission", "resource", r"(one|per) source", None),
    ("descriptor shedding", "resource", r"^file descriptors", None),
    ("a resolver that never answers", "resource", r"resolver", None),
]

GAP = re.compile(r"known gap|not applicable", re.IGNORECASE)
KNOWN_GAP = re.compile(r"known gap", re.IGNORECASE)
# Bounds issue 37 gave every method it covered: their rows may no longer say "known gap" (a
# method where one cannot apply says "not applicable" and why). A method added since (ofi,
# issue 40) states its gaps until it has them.
CLOSED_GAPS = {"stall deadline: a transfer started and not finished",
               "send timeout: a peer that stopped reading"}
ISSUE_37_METHODS = {"tcp", "shm", "verbs"}
# A test cell that names no test must say why, or point at the row above ("same test").
NO_TEST = re.compile(r"none yet|by construction|by inspection|known gap|says so|^same\b",
                     re.IGNORECASE)
COLUMNS = {"resource": 0, "setting": 2, "test": 4}


def methods():
    on_disk = {d.name for d in (ROOT / "methods").iterdir()
               if (d / f"{d.name}_method.hpp").is_file()}
    compiled = set(os.environ.get("BMI_ENABLED_METHODS", "").split())
    return sorted(on_disk | compiled)


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


def bound_rows(own, method, column, pattern):
    regex = re.compile(pattern.replace("{M}", method.upper()), re.IGNORECASE)
    if column == "row":
        return [r for r in own if regex.search(" | ".join(r))]
    index = COLUMNS[column]
    return [r for r in own if len(r) > index and regex.search(r[index])]


def check(text, settings_text, names):
    """The errors of one page, each as (method or section, bound or None, message)."""
    known = set()
    for line in settings_text.splitlines():
        if line.startswith("| `"):
            known.update(re.findall(r"`([^`]+)`", "|".join(cells(line)[:2])))
    errors = []
    if not names:
        errors.append((None, None, "no method found under methods/"))
    rows = list(table_rows(text, names))
    for method in names:
        own = [r for s, _, r in rows if s == method]
        if not own:
            errors.append((method, None,
                           f"doc/RELIABILITY.md has no '## {method}' section with a table"))
            continue
        for bound, column, pattern, setting in SHARED_BOUNDS:
            found = bound_rows(own, method, column, pattern)
            if not found:
                errors.append((method, bound, f"no row for the shared bound '{bound}' "
                               f"({column} matching /{pattern.replace('{M}', method.upper())}/)"))
                continue
            if (bound in CLOSED_GAPS and method in ISSUE_37_METHODS and
                    any(KNOWN_GAP.search(" ".join(r)) for r in found)):
                errors.append((method, bound, f"the row for '{bound}' says it is a known gap; "
                               "every method has this bound (issue 37)"))
            if setting is None:
                continue
            wanted = re.compile(setting.replace("{M}", method.upper()))
            if not any(GAP.search(" ".join(r)) or (len(r) > 2 and wanted.search(r[2]))
                       for r in found):
                errors.append((method, bound, f"the row for '{bound}' neither names "
                               f"{wanted.pattern} nor says it is a known gap"))
        for r in own:
            test = r[COLUMNS["test"]] if len(r) > COLUMNS["test"] else ""
            if "`" not in test and '"' not in test and not NO_TEST.search(test):
                errors.append((method, None, f"row '{r[0][:50]}' names no test and does not "
                               "say why (none yet, by construction, a known gap, same as above)"))
    for section, header, row in rows:
        if len(header) < 3 or header[2] != "setting" or len(row) < 3:
            continue
        for name in re.findall(r"`([^`]+)`", row[2]):
            if re.fullmatch(r"BMI_[A-Z0-9_]+|[a-z][a-z0-9_]+", name) and name not in known:
                errors.append((section, None, f"row '{row[0][:50]}' names the setting {name}, "
                               "which doc/SETTINGS.md does not have"))
    return errors


def without_bound(text, names, method, column, pattern):
    """text with the rows that hold one bound for one method removed."""
    doomed = {"|".join(r) for r in bound_rows(
        [r for s, _, r in table_rows(text, names) if s == method], method, column, pattern)}
    section = None
    kept = []
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].split()[0].lower() if line[3:].split() else None
        elif line.startswith("### ") and line[4:].split() and line[4:].split()[0].lower() in names:
            section = line[4:].split()[0].lower()
        if section == method and line.startswith("|") and "|".join(cells(line)) in doomed:
            continue
        kept.append(line)
    return "\n".join(kept)


def main():
    text = (ROOT / "doc" / "RELIABILITY.md").read_text()
    settings_text = (ROOT / "doc" / "SETTINGS.md").read_text()
    names = methods()
    errors = check(text, settings_text, names)
    for where, _, message in errors:
        print(f"FAIL: {where}: {message}")
    if errors:
        return 1
    # Each row removed must be noticed, or the patterns above match more than they should.
    blind = []
    for method in names:
        for bound, column, pattern, _ in SHARED_BOUNDS:
            mutated = without_bound(text, names, method, column, pattern)
            if not any(m == method and b == bound for m, b, _ in
                       check(mutated, settings_text, names)):
                blind.append(f"{method}: removing the rows of '{bound}' goes unnoticed")
    for b in blind:
        print("FAIL:", b)
    if blind:
        return 1
    print(f"{len(names)} methods x {len(SHARED_BOUNDS)} shared bounds have their rows, and "
          "removing any of them is noticed; every row names its test or says why not; every "
          "setting named is in doc/SETTINGS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
