# SPDX-License-Identifier: LGPL-2.1-or-later
"""The encryption study (issue 39): what encrypted libbmi tcp costs besides its ping-pong
tables (method tcp-encrypted, baseline tls). Two runs:
- cipher_speed: bytes per second one core seals and opens with each record cipher, through
  libbmi's own RecordCipher (64 KiB records), so the cipher's ceiling sits beside the link's;
- handshake_rate --method tcp: handshakes per second and 8-byte latency keyless, keyed and keyed
  with BMI_ENCRYPTION=require, rounds taken in turns within the run.
"""
import time

from bmi_perf_runs import Failure, Step
from study import Study

HANDSHAKES = 500
RUNS = (("cipher", ["cipher_speed", "--seconds", "1"]),
        ("handshakes", ["handshake_rate", "--method", "tcp", "--handshakes", str(HANDSHAKES)]))


def rows_of(text):
    """The rows of a table whose header and footer lines start with '#'."""
    return [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]


def one_run(runner, argv):
    """Runs argv to its end within --timeout: its rows; Failure says why not."""
    exe = runner.tool(argv[0])
    if exe is None:
        raise Failure(f"{argv[0]} not found (see --bindir)")
    started = time.monotonic()
    proc, err = runner.spawn([exe] + argv[1:], None, argv[0])
    try:
        text = runner.follow(proc, argv[0], started + runner.args.timeout)
        code = runner.finish([proc], started + runner.args.timeout)[0]
        if code != 0:
            raise Failure(f"exit {code}: {runner.stderr_tail(err)}")
        return rows_of(text)
    finally:
        runner.finish([proc] if proc.poll() is None else [], 0)


def measure(runner, argv):
    """(rows or None, why it failed or None) as one counted run."""
    why = []

    def run():
        try:
            return one_run(runner, argv)
        except Failure as e:
            why.append(str(e))
            raise
    rows = runner.attempt(argv[0], run)
    return rows, (why or [None])[0]


class Encryption(Study):
    name = "encryption"

    def wanted(self, a):
        return "tcp" in a.methods

    def plan(self, runner):
        return [Step((name, " ".join(argv)), lambda argv=argv: measure(runner, argv))
                for name, argv in RUNS]

    def fold(self, got):
        """{"cipher": [(cipher, seal MB/s or None, open MB/s or None)],
            "handshakes": [(setting, handshakes/s, 8 B one-way us)], "commands": [...],
            "failed": [why, ...]}"""
        out = {"cipher": [], "handshakes": [], "commands": [], "failed": []}
        for (name, command), (rows, why) in got:
            out["commands"].append(command)
            if why:
                out["failed"].append(f"{command.split()[0]}: {why}")
            for r in rows or []:
                if name == "cipher":
                    out["cipher"].append((r[0], None if r[1] == "n/a" else float(r[1]),
                                          None if r[2] == "n/a" else float(r[2])))
                else:
                    out["handshakes"].append((r[0], float(r[1]), float(r[2])))
        return out

    def print_summary(self, result, out):
        print_summary(result, out)

    def markdown(self, result, report):
        return markdown(result, report.fmt)


def print_summary(result, out):
    out.write("\n== encryption: record ciphers, one core (MB/s of plaintext)\n")
    for name, seal, opened in result["cipher"]:
        shown = "not available on this CPU" if seal is None else \
            f"seal {seal:.0f}, open {opened:.0f}"
        out.write(f"{name}: {shown}\n")
    out.write("== encryption: tcp handshakes per second and 8 B one-way latency\n")
    for setting, rate, latency in result["handshakes"]:
        out.write(f"{setting}: {rate:.0f} handshakes/s, {latency:.2f} us\n")
    for why in result["failed"]:
        out.write(f"encryption study: {why}\n")


def markdown(result, fmt):
    """The report's section, as a list of lines."""
    lines = ["## Encryption: the ciphers' own speed and handshakes", "",
             "The record ciphers through libbmi's own RecordCipher (64 KiB records sealed and "
             "opened in place, one thread): the ceiling encryption puts on one connection's "
             "bandwidth per core. Handshakes: new tcp client instances against one server, "
             f"{HANDSHAKES} per round, rounds taken in turns; the 8-byte one-way latency is on "
             "an established connection. Commands: " +
             ", ".join(f"`{c}`" for c in result["commands"]) + ".", "",
             "| cipher | seal MB/s | open MB/s |", "|---|---|---|"]
    for name, seal, opened in result["cipher"]:
        lines.append(f"| {name} | " + (" n/a | n/a |" if seal is None else
                                        f"{fmt(seal)} | {fmt(opened)} |"))
    lines += ["", "| tcp | handshakes/s | 8 B one-way us |", "|---|---|---|"]
    lines += [f"| {setting} | {rate:.0f} | {fmt(latency)} |"
              for setting, rate, latency in result["handshakes"]]
    lines += [""] + [f"Failed: {why}" for why in result["failed"]]
    return lines + [""]
