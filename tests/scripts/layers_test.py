#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The direction of dependencies doc/architecture.md states: `support` <- `methods` <-
`bmi/core`, the public `bmi-types.h` and `bmi-error-codes.h` the one exception. Every quoted
#include of a source under support/ must name a file under support/ or one of those headers,
and every one under methods/ a file under methods/ or support/ or one of them. An include is
taken relative to the including file first, then to the top of the tree, then to
bmi/include (the build's include directories); one found in none of them is a header the
build generates, under the directory its name starts with. The check then plants a forbidden include in
a copy of one file of each layer and fails unless that copy is refused: it cannot pass
vacuously. It also checks the fixed layout of the tree's top level (README.md, "Layout"):
every tracked file outside the named directories is a top-level file."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
PUBLIC = ROOT / "bmi" / "include"
SHARED_HEADERS = {PUBLIC / "bmi-types.h", PUBLIC / "bmi-error-codes.h"}
# Each layer and the top-level directories its includes may reach.
LAYERS = {"support": ("support",), "methods": ("methods", "support")}
# The top-level directories the tree may hold.
LAYOUT = {"bmi", "methods", "support", "benchmark", "examples", "tests", "doc", "scripts",
          "debian", ".ci"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def resolve(source: Path, name: str) -> Path | None:
    for base in (source.parent, ROOT, PUBLIC):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def violations(source: Path, text: str, allowed: tuple[str, ...]) -> list[str]:
    found = []
    for name in INCLUDE.findall(text):
        target = resolve(source, name)
        if target in SHARED_HEADERS:
            continue
        if target is None:  # generated in the build tree (support/planes_config.hpp)
            top = Path(name).parts[0]
        else:
            top = target.relative_to(ROOT).parts[0] if target.is_relative_to(ROOT) else ""
        if top not in allowed:
            found.append(f'{source.relative_to(ROOT)}: "{name}" reaches {top or target}/')
    return found


def sources(layer: str) -> list[Path]:
    return sorted(p for p in (ROOT / layer).rglob("*") if p.suffix in (".cpp", ".hpp", ".h"))


def outside_layout(paths: list[str]) -> list[str]:
    tops = {Path(p).parts[0] for p in paths if len(Path(p).parts) > 1}
    return [f"{top}/ is not a directory of the fixed layout" for top in sorted(tops - LAYOUT)]


def tracked_files() -> list[str] | None:
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True,
                                text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return listed.stdout.splitlines() if listed.returncode == 0 else None


def main() -> int:
    failures = []
    tracked = tracked_files()
    if tracked is None:
        print("layout: not a git checkout, top level not checked")
    else:
        failures += outside_layout(tracked)
        if not outside_layout(["tools/planted.cpp"]):
            failures.append("a planted top-level tools/ was not refused")
    for layer, allowed in LAYERS.items():
        files = sources(layer)
        if not files:
            failures.append(f"{layer}/ holds no sources")
            continue
        for source in files:
            failures += violations(source, source.read_text(errors="replace"), allowed)
        # The planted include: the core's instance header, which no lower layer may reach.
        planted = files[0].read_text(errors="replace") + '\n#include "bmi/core/instance.hpp"\n'
        if not violations(files[0], planted, allowed):
            failures.append(f"a planted include of bmi/core in {files[0]} was not refused")
    for failure in failures:
        print(failure)
    print(f"layers: {len(failures)} violations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
