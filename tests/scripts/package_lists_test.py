#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The package lists of scripts/lib.sh hold everything a minimal Debian 12 lacks for the README's
commands, checked here without a fresh machine:
  - every Build-Depends of debian/control, and build-essential, is in BMI_PACKAGES (what
    install_packages installs before the packages step);
  - every command the tests and scripts run is in COMMANDS, with the listed package it comes
    from, or REQUIRED when a minimal Debian (debootstrap's minbase: the packages of priority
    required) has it already;
  - on this machine, each of those commands comes from that package or one it depends on
    (dpkg -S), so the table cannot drift from the truth;
  - the README's sentence that names what demo.sh and test.sh install names BMI_PACKAGES, no
    more and no fewer.
The lists are read by sourcing lib.sh in bash. Skipped (77) where dpkg is not the package manager."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("BMI_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
REQUIRED = "priority required"
OPTIONAL = "optional: its caller copes without it"

# Command -> the listed package it comes from (through the package's own dependencies).
COMMANDS = {
    # The build and the test suite.
    "meson": "meson", "ninja": "ninja-build", "cc": "build-essential", "g++": "g++",
    "pkg-config": "pkg-config", "cmake": "cmake", "python3": "python3", "ldd": REQUIRED,
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "nsenter": REQUIRED,
    "unshare": REQUIRED, "mount": REQUIRED, "taskset": REQUIRED, "setarch": REQUIRED,
    "mpirun": "openmpi-bin", "NPtcp": "netpipe-tcp", "gnuplot": "gnuplot-nox",
    "fi_pingpong": "libfabric-bin",
    "clang-14": "clang-14", "clang++-14": "clang-14", "clang-format-14": "clang-format-14",
    "git": OPTIONAL,
    # scripts/round_trip_atomics.py (binutils, which the compiler brings).
    "objdump": "g++", "addr2line": "g++",
    "sh": REQUIRED, "bash": REQUIRED, "timeout": REQUIRED, "awk": REQUIRED, "tar": REQUIRED,
    # scripts/packages.sh and debian/rules.
    "dpkg-buildpackage": "dpkg-dev", "dpkg-parsechangelog": "dpkg-dev", "dh": "debhelper",
    "lintian": "lintian", "dpkg": REQUIRED, "dpkg-query": REQUIRED, "ldconfig": REQUIRED,
    # tests/verbs/rxe_vm.sh and its guest, which runs the host's programs.
    "qemu-system-x86_64": "qemu-system-x86", "cpio": "cpio", "xz": "xz-utils",
    "rdma": "iproute2", "ibv_devices": "ibverbs-utils", "apt-get": REQUIRED,
    "apt-cache": REQUIRED, "flock": REQUIRED, "setpriv": REQUIRED, "gzip": REQUIRED,
    "sha256sum": REQUIRED, "mkfifo": REQUIRED,
}

# Where the Python tests and meson.build files name the programs they run.
CALL_PATTERNS = [
    re.compile(r'shutil\.which\(\s*"([^"/]+)"\)'),
    re.compile(r'\b(?:run|Popen|check_output|check_call|run_all)\(\s*\[\s*\(?\[?\s*"([^"/-][^"]*)"'),
    re.compile(r"find_program\(\s*'([^'/]+)'"),
]
# Argument lists whose first element is a program the build makes, not a command.
BUILT = re.compile(r"^(bmi-|pingpong|pvfs_|raw_tcp|eventfd|memcpy|handoff|netem_|killed_peer)")

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def lib_lists():
    script = 'source scripts/lib.sh; printf "%s\\n" "${BMI_PACKAGES[@]}"; echo --; ' \
             'printf "%s\\n" "${BMI_GUEST_PACKAGES[@]}"'
    out = subprocess.run(["bash", "-euc", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=30, check=True).stdout
    main, guest = out.split("--\n")
    return main.split(), guest.split()


def relation_names(field):
    """The package names of a Depends-style FIELD: [[alternative, ...], ...]."""
    out = []
    for relation in field.split(","):
        names = [re.sub(r"\(.*?\)|\[.*?\]|<.*?>|:\w+", "", alt).strip()
                 for alt in relation.split("|")]
        if any(names):
            out.append([n for n in names if n])
    return out


def build_depends():
    source = (ROOT / "debian" / "control").read_text().split("\n\n")[0]
    fields, name = {}, None
    for line in source.splitlines():
        if line[:1].isspace() and name:
            fields[name] += " " + line.strip()
        elif ":" in line:
            name, value = line.split(":", 1)
            fields[name] = value.strip()
    depends = []
    for name in ("Build-Depends", "Build-Depends-Arch", "Build-Depends-Indep"):
        depends += relation_names(fields.get(name, ""))
    return depends


def readme_packages():
    """The package names in the README's backquoted lists between "Both install" and "with
    `apt-get`", or None if that sentence is gone."""
    found = re.search(r"Both install\s(.*?)with `apt-get`", (ROOT / "README.md").read_text(), re.S)
    if found is None:
        return None
    return {name for span in re.findall(r"`([^`]*)`", found.group(1)) for name in span.split()}


def dpkg_database():
    """{package: (priority, [[dependency alternative, ...]], [provided names])} of what is
    installed here."""
    out = subprocess.run(["dpkg-query", "-W", "-f",
                          "${Package}\t${Priority}\t${Pre-Depends}, ${Depends}\t${Provides}\n"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    db = {}
    for line in out.splitlines():
        package, priority, depends, provides = line.split("\t")
        db[package] = (priority, relation_names(depends),
                       [n for alts in relation_names(provides) for n in alts])
    return db


def closure(package, db):
    """PACKAGE and everything installed here that it depends on, directly or not."""
    providers = {}
    for name, (_, _, provides) in db.items():
        for virtual in provides:
            providers.setdefault(virtual, []).append(name)
    seen, todo = set(), [package]
    while todo:
        name = todo.pop()
        for real in [name] + providers.get(name, []):
            if real in db and real not in seen:
                seen.add(real)
                todo += [alt for alts in db[real][1] for alt in alts]
    return seen


def owners(commands):
    """{command: the package that holds it in the first directory of PATH where dpkg knows it
    (following alternatives' symlinks), or None}. One dpkg -S for all: each call reads every
    package's file list."""
    forms = {}
    for command in commands:
        forms[command] = []
        for directory in os.get_exec_path():
            path = os.path.join(directory, command)
            if os.access(path, os.X_OK):
                for candidate in (path, os.path.realpath(path)):
                    # Merged /usr: dpkg knows /bin/ip, not /usr/bin/ip.
                    forms[command] += [candidate, re.sub(r"^/usr(?=/s?bin/)", "", candidate)]
    paths = sorted({form for command_forms in forms.values() for form in command_forms})
    out = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True,
                         timeout=60).stdout if paths else ""
    holder = {}
    for line in out.splitlines():
        if not line.startswith("diversion by"):
            packages, path = line.split(": ", 1)
            holder[path] = packages.split(",")[0].strip().split(":")[0]
    return {command: next((holder[f] for f in command_forms if f in holder), None)
            for command, command_forms in forms.items()}


def called_commands():
    """{command: file} of the programs the Python tests, benchmarks and meson files run."""
    found = {}
    # Build directories (build, build-test, ...) hold copies and generated files.
    tops = [ROOT] + [d for d in ROOT.iterdir()
                     if d.is_dir() and not d.name.startswith(("build", "."))]
    files = [ROOT / "meson.build"]
    for top in tops[1:]:
        files += [*top.rglob("*.py"), *top.rglob("meson.build")]
    for path in files:
        for pattern in CALL_PATTERNS:
            for command in pattern.findall(path.read_text()):
                if not BUILT.match(command):
                    found.setdefault(command, str(path.relative_to(ROOT)))
    return found


def main():
    if shutil.which("dpkg-query") is None:
        print("SKIP: not a dpkg system")
        sys.exit(77)
    packages, guest = lib_lists()
    listed = set(packages) | set(guest)
    db = dpkg_database()

    check("build-essential" in packages, "build-essential is not in BMI_PACKAGES")
    readme = readme_packages()
    check(readme is not None, "README.md: no sentence \"Both install `...` with `apt-get`\"")
    if readme is not None:
        for name in sorted(set(packages) - readme):
            check(False, f"README.md does not say that the scripts install {name} (BMI_PACKAGES)")
        for name in sorted(readme - set(packages)):
            check(False, f"README.md says the scripts install {name}, which BMI_PACKAGES lacks")
    for alternatives in build_depends():
        ok = any(name in packages or any(name in db.get(p, ("", [], []))[2] for p in packages)
                 for name in alternatives)
        check(ok, f"Build-Depends {' | '.join(alternatives)}: in no list of scripts/lib.sh "
                  "(nor provided by a package there)")

    for command, source in sorted(called_commands().items()):
        check(command in COMMANDS, f"{source} runs {command}, which COMMANDS does not name: "
                                   "add it with the package it comes from")

    holders = owners(COMMANDS)
    for command, package in sorted(COMMANDS.items()):
        if package not in (REQUIRED, OPTIONAL):
            check(package in listed, f"{command}: its package {package} is in no list of "
                                     "scripts/lib.sh")
        holder = holders[command]
        if holder is None:
            print(f"note: no package here holds {command}; its package is not checked")
            continue
        if package == REQUIRED:
            check(db.get(holder, ("",))[0] == "required",
                  f"{command} comes from {holder}, which a minimal Debian does not have: "
                  "list it in scripts/lib.sh and in COMMANDS")
        elif package != OPTIONAL:
            check(holder in closure(package, db),
                  f"{command} comes from {holder}, which {package} does not bring")
        print(f"{command:20} {holder:24} {package}")

    for message in failures:
        print("FAIL:", message)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
