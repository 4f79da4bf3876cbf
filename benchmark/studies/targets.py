# SPDX-License-Identifier: LGPL-2.1-or-later
"""The studies' targets as data: targets.tsv, one row per target, read once per run."""
import operator
import os

COMPARISONS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets.tsv")


class Target:
    def __init__(self, comparison, limit):
        self.comparison, self.limit = comparison, limit

    def met(self, value):
        return COMPARISONS[self.comparison](value, self.limit)

    def __str__(self):
        return f"{self.comparison} {self.limit:g}"


class Table:
    """{(study, target): Target} from the file; of() hands a study its own rows."""

    def __init__(self, path=FILE):
        self.path, self.rows, self.used = path, {}, set()
        with open(path) as f:
            lines = [line.rstrip("\n") for line in f if line.strip() and line[0] != "#"]
        for number, line in enumerate(lines[1:], 2):
            cells = line.split("\t")
            if len(cells) != 4 or cells[2] not in COMPARISONS:
                raise ValueError(f"{path}: row {number} {line!r}: want study, target, one of "
                                 f"{' '.join(COMPARISONS)}, limit, separated by tabs")
            self.rows[(cells[0], cells[1])] = Target(cells[2], float(cells[3]))

    def of(self, study, names):
        """{name: Target} for every name a study judges by; a missing row stops the run."""
        missing = [n for n in names if (study, n) not in self.rows]
        if missing:
            raise ValueError(f"{self.path}: no target {', '.join(missing)} for study {study}")
        self.used |= {(study, n) for n in names}
        return {n: self.rows[(study, n)] for n in names}

    def unused(self):
        """Rows no study asked for: a study renamed, or a target left behind."""
        return sorted(set(self.rows) - self.used)
