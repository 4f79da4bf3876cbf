#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The guides' programs, taken from the Markdown itself so the pages cannot drift from what
compiles. Every fenced block whose info string carries program=NAME (```c program=guide_server)
is one complete program. This test extracts them from the pages in BMI_GUIDES, compiles each
with warnings as errors against the build tree's public headers and libbmi.so (and the build's
sanitizer, so a sanitized libbmi finds its runtime), then:

- runs guide_cpp, which answers itself in one process;
- over tcp (and shm when built): starts guide_server, runs a guide_client against a stopped
  server (its deadline must cancel, and the cancelled operations must report BMI_ECANCEL), a
  client that says bye, and one that shuts the server down; the server must exit 0 having
  given back every request's reference and every unexpected buffer, with the addresses of
  the clients that left freed."""
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile

EXPECTED = {"guide_server": "c", "guide_client": "c", "guide_cpp": "cpp"}
TIMEOUT = 60  # per compile or client run; a server gets the same to finish


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def extract(paths):
    """NAME -> (language, source, where) for every block marked program=NAME."""
    found = {}
    fence = re.compile(r"^```(\S+)[^\n]*?\bprogram=(\S+)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
    for path in paths:
        with open(path) as f:
            text = f.read()
        for m in fence.finditer(text):
            lang, name, body = m.group(1), m.group(2), m.group(3)
            where = f"{os.path.basename(path)}:{text.count(chr(10), 0, m.start()) + 1}"
            if name in found:
                fail(f"program {name} appears twice ({found[name][2]} and {where})")
            found[name] = (lang, body, where)
    missing = sorted(set(EXPECTED) - set(found))
    if missing:
        fail(f"no block marked program={', program='.join(missing)} in {', '.join(paths)}")
    for name, lang in EXPECTED.items():
        if found[name][0] != lang:
            fail(f"{name} ({found[name][2]}) is marked {found[name][0]}, expected {lang}")
    return found


def compile_all(programs, out_dir):
    sanitize = os.environ.get("BMI_SANITIZE", "none")
    common = ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-g", f"-I{os.environ['BMI_INCLUDE']}"]
    if sanitize != "none":
        common += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer"]
    lib = os.environ["BMI_LIB"]
    link = [lib, f"-Wl,-rpath,{os.path.dirname(lib)}"]
    compilers = {"c": (shlex.split(os.environ["BMI_CC"]), ["-std=c99"], ".c"),
                 "cpp": (shlex.split(os.environ["BMI_CXX"]), ["-std=c++20", "-pthread"], ".cpp")}
    exes = {}
    for name, (lang, body, where) in sorted(programs.items()):
        compiler, std, suffix = compilers[lang]
        src = os.path.join(out_dir, name + suffix)
        with open(src, "w") as f:
            f.write(body)
        exe = os.path.join(out_dir, name)
        argv = compiler + std + common + [src, "-o", exe] + link
        print(f"$ {shlex.join(argv)}", flush=True)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
        if res.returncode != 0:
            fail(f"{name} from {where} does not compile:\n{res.stdout}{res.stderr}")
        exes[name] = exe
    return exes


def run(argv, want_rc=0):
    print(f"$ {shlex.join(argv)}", flush=True)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    print(res.stdout + res.stderr, end="", flush=True)
    if res.returncode != want_rc:
        fail(f"{shlex.join(argv)}: exit {res.returncode}, expected {want_rc}")
    return res


def exchange(exes, listen, stop_test):
    server = subprocess.Popen([exes["guide_server"], listen], stdout=subprocess.PIPE,
                              text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 20)
        line = server.stdout.readline() if ready else ""
        if not line.startswith("ADDR "):
            fail(f"guide_server {listen} printed {line!r}, not its address, within 20 s")
        addr = line.split()[1]
        if stop_test:
            # A server that never answers: the client's deadline must cancel, and the cancelled
            # operations must still be reported, with BMI_ECANCEL.
            server.send_signal(signal.SIGSTOP)
            try:
                res = run([exes["guide_client"], addr, "1", "300"], want_rc=1)
            finally:
                server.send_signal(signal.SIGCONT)
            if "BMI_ECANCEL" not in res.stderr:
                fail("a client past its deadline did not report BMI_ECANCEL")
        for argv in ([addr, "5"], [addr, "2", "--shutdown"]):
            out = run([exes["guide_client"]] + argv).stdout
            if not out.startswith("OK "):
                fail(f"guide_client {shlex.join(argv)} printed {out!r}")
        out, _ = server.communicate(timeout=TIMEOUT)
        print(out, end="")
        if server.returncode != 0:
            fail(f"guide_server {listen} exited {server.returncode}")
        if "\nDONE " not in "\n" + out:
            fail(f"guide_server printed no DONE line: {out!r}")
        done = dict(kv.split("=", 1) for kv in out.split("DONE ", 1)[1].split())
        if done.get("released") != done.get("requests"):
            fail(f"guide_server did not give back every request's reference: {out!r}")
        # The shutting-down client may still be connected when the server counts.
        if done.get("addresses") not in ("0", "1"):
            fail(f"guide_server kept the addresses of clients that left: {out!r}")
        if done.get("quota_used") != "0" or done.get("pending") != "0":
            fail(f"guide_server left unexpected buffers or sends behind: {out!r}")
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)
            server.kill()
            server.wait()


def main():
    guides = os.environ["BMI_GUIDES"].split(os.pathsep)
    programs = extract(guides)
    with tempfile.TemporaryDirectory(prefix="bmi-guides-") as tmp:
        exes = compile_all(programs, tmp)
        out = run([exes["guide_cpp"]]).stdout
        if out.strip() != "REPLY HELLO FROM C++":
            fail(f"guide_cpp printed {out!r}")
        exchange(exes, "tcp://127.0.0.1:0", stop_test=True)
        if "shm" in os.environ.get("BMI_ENABLED_METHODS", "").split():
            exchange(exes, f"shm://bmi-guide-{os.getpid()}", stop_test=False)
    print("the guides' programs compiled and talked over " +
          ("tcp and shm" if "shm" in os.environ.get("BMI_ENABLED_METHODS", "") else "tcp"))


if __name__ == "__main__":
    main()
