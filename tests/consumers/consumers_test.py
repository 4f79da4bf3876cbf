#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""libbmi as outside projects see it. Installs this build into a scratch directory (meson
install --destdir: a non-system prefix), builds tests/consumers with CMake (find_package(bmi
CONFIG)) and with the README's pkg-config lines (cc, and g++ at its default standard), checks
that every program finds the staged libbmi without LD_LIBRARY_PATH, and lets each C server
answer its C++ clients over 127.0.0.1.

With --system it tests an install in the system's own prefix instead (the Debian packages,
scripts/packages.sh): nothing is staged, and CMake and pkg-config must find libbmi, and every
program load it, with no path given at all.

Needs cmake, pkg-config, cc and g++: without them the test is skipped, except under CI (env CI),
where it fails."""
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 120  # per command


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def skip(msg):
    print(f"SKIP: {msg}")
    sys.exit(77)


def run(argv, env, cwd=None, shell=False):
    shown = argv if shell else shlex.join(argv)
    print(f"$ {shown}", flush=True)
    res = subprocess.run(argv, env=env, cwd=cwd, shell=shell, capture_output=True, text=True,
                         timeout=TIMEOUT)
    if res.returncode != 0:
        fail(f"{shown}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.stdout


def check_tools():
    missing = [t for t in ("cmake", "pkg-config", "cc", "g++", "ldd") if not shutil.which(t)]
    if missing:
        why = f"{', '.join(missing)} not installed (Debian: cmake pkg-config gcc g++)"
        fail(why) if os.environ.get("CI") else skip(why)


def check_uses_stage(exe, libdir, env):
    """The program resolves libbmi in libdir on its own (RPATH/RUNPATH, or the system's)."""
    for line in run(["ldd", exe], env).splitlines():
        if "libbmi.so" in line:
            resolved = line.split("=>")[-1].split("(")[0].strip()
            if not os.path.realpath(resolved).startswith(os.path.realpath(libdir) + os.sep):
                fail(f"{exe} loads {resolved}, not the libbmi in {libdir}")
            return
    fail(f"{exe} does not link libbmi")


def serve(server, clients, env):
    """Starts the C server, runs each C++ client against it; returns the clients' replies."""
    proc = subprocess.Popen([server, str(len(clients))], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("ADDR "):
            fail(f"{server} did not print its address within 20 s: {line!r}")
        addr = line.split()[1]
        replies = [run([client, addr], env).strip() for client in clients]
        if proc.wait(timeout=20) != 0:
            fail(f"{server} exited with {proc.returncode}")
        return replies
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def standalone_pair(peer, env):
    """Two standalone-dialect programs of the staged install: a portless tcp server and a
    client sending requests and class-7 notes."""
    proc = subprocess.Popen([peer, "serve", "tcp://127.0.0.1"], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline()
        if not line.startswith("ADDR "):
            fail(f"standalone server printed {line!r}")
        out = run([peer, "call", line.split()[1], "--iterations", "3", "--notes", "2",
                   "--shutdown"], env)
        if "OK iterations=3 notes=2" not in out:
            fail(f"standalone client said {out!r}")
        done = proc.communicate(timeout=20)[0]
        if proc.returncode != 0 or "DONE requests=4 notes=2" not in done:
            fail(f"standalone server: exit {proc.returncode}, {done!r}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stage_install(tmp, env):
    """Installs the build under tmp; returns its prefix and libdir."""
    stage = os.path.join(tmp, "stage")
    run([os.environ["MESON"], "install", "-C", os.environ["BMI_BUILD_ROOT"], "--destdir",
         stage, "--no-rebuild", "--quiet"], env)
    prefix = stage + os.environ["BMI_PREFIX"]
    libdir = os.environ["BMI_LIBDIR"]  # relative to the prefix unless it lies outside it
    libdir = stage + libdir if os.path.isabs(libdir) else os.path.join(prefix, libdir)
    with open(os.path.join(libdir, "pkgconfig", "bmi.pc")) as pc:
        if not pc.readline().startswith("prefix=${pcfiledir}"):
            fail("bmi.pc names an absolute prefix: this build directory predates "
                 "pkgconfig.relocatable=true; run meson configure -Dpkgconfig.relocatable=true")
    return prefix, libdir


def main():
    system = sys.argv[1:] == ["--system"]
    if len(sys.argv) > 1 and not system:
        fail("usage: consumers_test.py [--system]")
    if not system and os.environ.get("BMI_SANITIZE", "none") != "none":
        # An ASan/TSan libbmi needs its sanitizer runtime loaded first in every program that
        # links it; outside projects built plainly cannot load it, so there is nothing to test.
        skip(f"libbmi is built with -Db_sanitize={os.environ['BMI_SANITIZE']}")
    check_tools()
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH")}
    with tempfile.TemporaryDirectory(prefix="bmi-consumers-") as tmp:
        if system:
            # The system's search paths alone: no prefix, no rpath.
            libdir = os.path.realpath(run(["pkg-config", "--variable=libdir", "bmi"],
                                          env).strip())
            cmake_args, pc_env, rpath = [], env, ""
        else:
            prefix, libdir = stage_install(tmp, env)
            # CMake, as the README says: the prefix on CMAKE_PREFIX_PATH, nothing else.
            cmake_args = [f"-DCMAKE_PREFIX_PATH={prefix}"]
            # pkg-config, the README's lines verbatim, in the staged tree.
            pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
            rpath = "-Wl,-rpath,$(pkg-config --variable=libdir {})"

        cmake_build = os.path.join(tmp, "cmake")
        run(["cmake", "-S", SOURCE, "-B", cmake_build] + cmake_args, env)
        run(["cmake", "--build", cmake_build, "--parallel", "2"], env)
        cmake_bins = {n: os.path.join(cmake_build, n)
                      for n in ("hello_server", "hello_client", "hello_client20")}

        pc_build = os.path.join(tmp, "pkg-config")
        os.mkdir(pc_build)
        for compiler, src, out in (("cc", "hello_server.c", "hello_server"),
                                   ("g++", "hello_client.cpp", "hello_client")):
            run(f"{compiler} {os.path.join(SOURCE, src)} -o {out} "
                f"$(pkg-config --cflags --libs bmi) {rpath.format('bmi')}", pc_env,
                cwd=pc_build, shell=True)
        pc_bins = {n: os.path.join(pc_build, n) for n in ("hello_server", "hello_client")}
        # The standalone dialect (doc/dialects.md) as Mercury-style code builds it: its own
        # header directory from bmi-standalone.pc, C99, the same libbmi.
        peer_src = os.path.join(SOURCE, "..", "dialects", "standalone_api_peer.c")
        examples = os.path.join(SOURCE, "..", "..", "examples")
        run(f"cc -std=c99 -pedantic-errors {peer_src} -I{examples} -o standalone_api_peer "
            f"$(pkg-config --cflags --libs bmi-standalone) {rpath.format('bmi-standalone')}",
            pc_env, cwd=pc_build, shell=True)
        pc_bins["standalone_api_peer"] = os.path.join(pc_build, "standalone_api_peer")

        for exe in list(cmake_bins.values()) + list(pc_bins.values()):
            check_uses_stage(exe, libdir, env)

        want = ["REPLY echo: hello from C++17", "REPLY echo: hello from C++20"]
        got = serve(cmake_bins["hello_server"],
                    [cmake_bins["hello_client"], cmake_bins["hello_client20"]], env)
        if got != want:
            fail(f"CMake programs: want {want}, got {got}")
        got = serve(pc_bins["hello_server"], [pc_bins["hello_client"]], env)
        if got != want[:1]:
            fail(f"pkg-config programs (g++ at its default standard): want {want[:1]}, got {got}")
        standalone_pair(pc_bins["standalone_api_peer"], env)
    where = "the system's libbmi" if system else "a staged install"
    print(f"CMake and pkg-config consumers of {where} built and talked over 127.0.0.1")


if __name__ == "__main__":
    main()
