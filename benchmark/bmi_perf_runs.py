# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf's runs: starts the drivers (a BMI or raw TCP server and its clients, mpirun, NetPIPE,
single-process baselines), follows their output, and turns each into a Series.

Every process gets a deadline and is reaped before the next run starts; only these processes
are ever signalled. The drivers print one table format (see benchmark/pingpong_common.c), so
every series is a list of rows (bytes, iters, latency_us, bw_MBps).
"""
import os
import select
import shutil
import socket
import subprocess
import sys
import time

# Open MPI point-to-point through ob1, so the --mca btl choice is what gets measured (Debian's
# Open MPI would otherwise take the UCX pml and ignore it).
# The environment of a bmi-perf method name: bmi_shm variants. shm-malloc keeps BMI_memalloc
# from handing out buffers the peer maps (methods/shm/shm_region.hpp), so its large messages
# go the ways a user's own malloc'd buffer would, and prints which ways they went
# (BMI_SHM_STATS, read back by shm_paths).
# tcp-legacy forces OrangeFS framing on both ends (no HELLO), as against an OrangeFS peer.
# tcp-same-node: a tcp lookup that libbmi carries over shm (same_node_shm, which Runner turns
# off for everything else); its clients print shm's statistics, which says that it did.
# ofi-tcp-polled: bmi_ofi's queue opened without a wait descriptor (ofi_wait_descriptor=0).
METHOD_ENV = {"shm-blocking": {"BMI_SHM_SPIN_US": "0"},
              "shm-malloc": {"BMI_SHM_SHARED_BUFFERS": "0", "BMI_SHM_STATS": "1"},
              "tcp-legacy": {"BMI_TCP_LEGACY": "1"},
              "tcp-same-node": {"BMI_SAME_NODE_SHM": "1", "BMI_SHM_STATS": "1"},
              "ofi-tcp-polled": {"BMI_OFI_WAIT_DESCRIPTOR": "0"}}
# tcp-encrypted: bmi_tcp with a key and BMI_ENCRYPTION=require (doc/security.md); its key file
# is made per run (Runner.method_env).
ENCRYPTED = "tcp-encrypted"
# OrangeFS's framing cannot carry a message over 16 MiB (a legacy receive that large is refused
# when posted), so tcp-legacy runs stop there whatever the plan's --max.
LEGACY_MAX = 16 << 20
# Rate mode's largest message: above it a stream is judged by its bytes (bandwidth mode), not
# by its messages.
RATE_MAX = 4 << 10


def scheme_of(method):
    """The address scheme of a bmi series: its variants (tcp-legacy, shm-blocking, ...) are
    settings of the same method; ofi-PROVIDER[-VARIANT] is bmi_ofi over that provider."""
    return method.split("-")[0] if method.startswith(("shm", "ofi")) else "tcp"


def provider_word(method):
    """The provider word of an ofi-WORD[-VARIANT] series (tcp in ofi-tcp-polled)."""
    return method.split("-")[1]


def listen_address(method, name):
    """Where a bmi series' server listens; name makes a named (shm) address unique."""
    scheme = scheme_of(method)
    if scheme == "shm":
        return f"shm://{name}"
    if scheme == "ofi":
        return f"ofi+{provider_word(method)}://127.0.0.1:0"
    return "tcp://127.0.0.1:0"


MPI_NAMES = {"mpi-tcp": "mpi tcp", "mpi-shm": "mpi vader", "mpi-shm-nocopy": "mpi vader nocopy"}
MPI_MCA = {
    "mpi-tcp": ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"],
    "mpi-shm": ["--mca", "btl", "vader,self"],
    "mpi-shm-nocopy": ["--mca", "btl", "vader,self",
                       "--mca", "btl_vader_single_copy_mechanism", "none"],
}


def one_way_us(row):
    """A row's one-way time from its bandwidth column, which keeps more digits than the
    latency column's hundredths of a microsecond (0.25 us against 0.2534)."""
    size, _, latency, bw = row
    return round(size / bw, 4) if bw > 0 and size > 0 else latency


FI_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
FI_COUNT_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def fi_number(word, units):
    """fi_pingpong's "4k", "=1m", "512" as a number, with its suffix read in `units`."""
    word = word.lstrip("=").lower()
    unit = word[-1] if word[-1:] in ("k", "m", "g") else ""
    return int(float(word[:len(word) - len(unit)]) * units[unit])


def parse_fi_pingpong(text):
    """[(bytes, iterations, one-way us)] from fi_pingpong's table: sizes in powers of 1024,
    counts in powers of 1000, and usec/xfer (the seventh column) one way."""
    rows = []
    for line in text.splitlines():
        w = line.split()
        if len(w) < 8 or not w[0][0].isdigit():
            continue
        try:
            rows.append((fi_number(w[0], FI_SIZE_UNITS), fi_number(w[1], FI_COUNT_UNITS),
                         float(w[6])))
        except ValueError:
            continue
    return rows


def free_loopback_port():
    """A TCP port of 127.0.0.1 the kernel has free now (a program we start binds it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

class Failure(Exception):
    """A run that could not produce its table; the message says why, for the user."""


class Series:
    def __init__(self, name, mode, command):
        self.name, self.mode, self.command = name, mode, command
        self.rows = []  # (bytes, iters, latency_us, bw_MBps)
        self.paths = {}  # shm's large receives: {size class's smallest bytes: {path: count}}
        self.shm_clients = 0  # clients that printed shm's statistics (BMI_SHM_STATS=1)
        self.status, self.wall = "not run", 0.0

    def at(self, size):
        return next((r for r in self.rows if r[0] == size), None)


def parse_table(text):
    rows = []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 4 and not line.startswith("#") and words[0].isdigit():
            rows.append((int(words[0]), int(words[1]), float(words[2]), float(words[3])))
    return rows


SHM_STATS = "shm stats:"


def printed_shm_stats(err):
    """Whether the process whose stderr file is err printed shm's statistics: its shm method
    ran (BMI_SHM_STATS=1)."""
    err.seek(0)
    return any(line.startswith(SHM_STATS) for line in err.read().splitlines())


def shm_paths(errs):
    """{smallest bytes of a size class: {path: receives}} summed over the "shm stats:" lines
    the processes printed to the stderr files errs (BMI_SHM_STATS=1, doc/methods/shm.md)."""
    out = {}
    for err in errs:
        err.seek(0)
        for line in err.read().splitlines():
            if not line.startswith(SHM_STATS) or "by size:" not in line:
                continue
            for item in line.split("by size:", 1)[1].split(","):
                words = item.split()
                if len(words) < 3 or not words[0].isdigit():
                    continue
                per = out.setdefault(int(words[0]), {})
                for name, count in zip(words[1::2], words[2::2]):
                    per[name] = per.get(name, 0) + int(count)
    return out


class Step:
    """One run of a plan: measure() makes exactly one counted run (Runner.record or
    Runner.attempt) and returns what it measured; key says where that goes. A plan is a list
    of steps, so the run count shown in the progress is the plan's length, not a count kept
    beside it."""

    def __init__(self, key, measure):
        self.key, self.measure = key, measure


class Runner:
    """Starts the drivers; every process gets a deadline and is reaped before we move on."""

    def __init__(self, args, tmp, tool_dirs):
        self.args, self.tmp, self.tool_dirs = args, tmp, tool_dirs
        # Every peer here is on this node, where libbmi would carry a tcp lookup over shm
        # (same_node_shm): off for every process this run starts, studies and idle peers
        # included, so that what is called tcp is tcp.
        os.environ["BMI_SAME_NODE_SHM"] = "0"
        self.series, self.done, self.total = [], 0, 0
        self.unread = {}  # pid: stdout bytes read but not yet returned as lines
        self.tty = sys.stderr.isatty()

    def method_env(self, method):
        """The environment of a bmi series. tcp-encrypted's key is a fresh random file in the
        run's temporary directory, mode 0600 as libbmi demands, shared by server and client."""
        if method != ENCRYPTED:
            return METHOD_ENV.get(method, {})
        key = os.path.join(self.tmp, "encryption.key")
        if not os.path.exists(key):
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(32).hex() + "\n")
        return {"BMI_KEY_FILE": key, "BMI_ENCRYPTION": "require"}

    def tool(self, name):
        for d in self.tool_dirs:
            if os.access(os.path.join(d, name), os.X_OK):
                return os.path.join(d, name)
        return None

    def progress(self, text, final=False):
        if self.tty and not final:
            sys.stderr.write("\r\033[K" + text)
        elif final or not self.tty:
            sys.stderr.write(("\r\033[K" if self.tty else "") + text + "\n")
        sys.stderr.flush()

    def plan(self, mode, many_ok=True, largest=None):
        """The drivers' arguments for mode; largest caps --max (never below --min). Rate mode
        is the drivers' bandwidth mode at small sizes, read as messages per second."""
        a = self.args
        if mode == "rate":
            largest = RATE_MAX if largest is None else min(largest, RATE_MAX)
        top = a.max if largest is None else max(a.min, min(a.max, largest))
        plan = ["--min", str(a.min), "--max", str(top), "--iters", str(a.iters)]
        if mode != "latency":
            plan += ["--mode", "bandwidth" if mode == "rate" else mode, "--window", str(a.window)]
        if mode == "many" and many_ok:
            plan += ["--clients", str(a.clients)]
        return plan + (["--check"] if a.check else [])

    def spawn(self, argv, env=None, name="run", cpu=None):
        err = open(os.path.join(self.tmp, f"{name}.{len(self.series)}.err"), "w+")
        # A value of None unsets the variable: a run that wants libbmi's default ignores the
        # caller's setting.
        full_env = {k: v for k, v in dict(os.environ, **(env or {})).items() if v is not None}
        pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
        # Unbuffered: lines are taken from the pipe as they come (see read_line).
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=full_env,
                                bufsize=0, preexec_fn=pin), err

    def read_line(self, proc, deadline):
        """The next stdout line of proc; "" at end of file; None at the deadline. select and
        os.read on the raw pipe, so no line waits in a Python buffer select cannot see."""
        pending = self.unread.pop(proc.pid, b"")
        while b"\n" not in pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.unread[proc.pid] = pending
                return None
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return pending.decode(errors="replace")
            pending += chunk
        line, _, rest = pending.partition(b"\n")
        self.unread[proc.pid] = rest
        return line.decode(errors="replace") + "\n"

    def follow(self, proc, label, deadline):
        """Collects proc's stdout until it exits, showing each finished size as progress."""
        out = []
        while True:
            line = self.read_line(proc, deadline)
            if line is None:
                raise Failure(f"no result within {self.args.timeout:g} s")
            if line == "":
                return "".join(out)
            out.append(line)
            if line[:1] == " ":
                self.progress(f"[{self.done + 1}/{self.total}] {label}: {line.split()[0]} B done")

    def finish(self, procs, deadline):
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(p.wait())
        return codes

    def execute(self, steps):
        """Runs a plan in order: [(step.key, what step.measure() returned)]. A step that makes
        no counted run or more than one is a fault of the plan, not of the machine."""
        got = []
        for step in steps:
            before = self.done
            got.append((step.key, step.measure()))
            if self.done != before + 1:
                raise RuntimeError(f"step {step.key!r} made {self.done - before} runs, not 1")
        return got

    def attempt(self, label, measure):
        """measure() as one counted run with its progress line, for runs that give no table
        (a Series goes through record); None if it failed."""
        started = time.monotonic()
        try:
            got, status = measure(), "ok"
        except Failure as e:
            got, status = None, f"failed: {e}"
        self.done += 1
        self.progress(f"[{self.done}/{self.total}] {label}: {status} "
                      f"({time.monotonic() - started:.1f} s)", final=True)
        return got

    def record(self, s, started, runner):
        try:
            s.rows = runner()
            if not s.rows:
                raise Failure("printed no table")
            s.status = "ok"
        except Failure as e:
            s.status = f"failed: {e}"
        s.wall = time.monotonic() - started
        self.done += 1
        self.progress(f"[{self.done}/{self.total}] {s.name} {s.mode}: {s.status} "
                      f"({s.wall:.1f} s)", final=True)
        self.series.append(s)
        return s

    def stderr_tail(self, err):
        err.seek(0)
        lines = [l.strip() for l in err.read().splitlines()
                 if l.strip() and not l.startswith(SHM_STATS)]
        return lines[-1] if lines else "no diagnostics"

    def bmi(self, method, mode, plan=None, cpus=None, extra=()):
        """extra: arguments for both pingpong processes (e.g. the server's --posted N)."""
        scheme = scheme_of(method)
        env = self.method_env(method)
        if plan is None and method == "tcp-legacy":
            plan = self.plan(mode, largest=LEGACY_MAX)
        listen = listen_address(method, f"bmi-perf-{os.getpid()}-{len(self.series)}")
        return self.pair(f"bmi {method}", mode, "pingpong",
                         ["--method-list", f"bmi_{scheme}"] + list(extra), listen, env, plan,
                         cpus)

    @staticmethod
    def placements():
        """Where the two processes of a duel run: [(name, (server CPU, client CPU))]. A
        sleeping ping-pong on one CPU costs a context switch per message, on two CPUs an
        inter-processor wake-up (about 1 us against about 35 us on a VM); left to the
        scheduler, a run gets either, so each duel pins both ways."""
        cpus = sorted(os.sched_getaffinity(0))
        two = [("two cores", (cpus[0], cpus[1]))] if len(cpus) >= 2 else []
        return two + [("one core", (cpus[0], cpus[0]))]

    @classmethod
    def one_per_core(cls):
        """(server CPU, client CPU) on two different cores, as mpirun binds the two ranks of
        the MPI runs; None where this process may use only one CPU."""
        name, cpus = cls.placements()[0]
        return cpus if name == "two cores" else None

    def eventfd(self, mode, plan, cpus, epoll=False):
        """The eventfd ping-pong with plan, its two processes pinned to cpus (a pair, or None:
        left to the scheduler); epoll: each sleeps in epoll_wait, as libbmi's wait point does,
        not in read()."""
        pin = ["--cpus", f"{cpus[0]},{cpus[1]}"] if cpus else []
        return self.command("eventfd epoll" if epoll else "eventfd", mode,
                            [self.tool("eventfd_pingpong")] + pin +
                            (["--epoll"] if epoll else []) + plan)

    def handoff(self, mode, cpus, smallest=None, largest=None):
        """handoff_copy_bw from --min (or smallest) to --max (or largest), its writer and copier
        pinned to cpus (a pair, or None: left to the scheduler)."""
        a = self.args
        pin = ["--cpus", f"{cpus[0]},{cpus[1]}"] if cpus else []
        return self.command("handoff", mode, [self.tool("handoff_copy_bw")] + pin + [
            "--min", str(smallest or a.min), "--max", str(largest or a.max)])

    def pair(self, name, mode, tool, common, listen, env=None, plan=None, cpus=None):
        """One server and its client(s), or only clients when --server names a server; cpus:
        (server CPU, client CPU) to pin them to, or None."""
        a, exe = self.args, self.tool(tool)
        plan = self.plan(mode) if plan is None else plan
        if cpus is None and mode in ("latency", "bandwidth", "rate") and a.server is None:
            # Left to the scheduler, the pair sometimes shares a CPU for a while, and a large
            # shm message then moves far slower (doc/perf/code-figures.md, "bmi-perf").
            cpus = self.one_per_core()
        s = Series(name, mode, f"{tool} {' '.join(common + plan)}")

        def run():
            if exe is None:
                raise Failure(f"{tool} not found (see --bindir)")
            deadline = time.monotonic() + a.timeout
            args = common + ["--timeout-ms", str(a.connect_ms)]
            procs, server, serr = [], None, None
            try:
                addr = a.server
                if addr is None:
                    server, serr = self.spawn([exe] + args + ["--server", listen], env, "srv",
                                              cpus[0] if cpus else None)
                    procs.append(server)
                    addr = self.read_addr(server, serr)
                n = a.clients if mode == "many" else 1
                clients = [self.spawn([exe] + args + ["--client", addr] + plan, env, "cli",
                                      cpus[1] if cpus else None)
                           for _ in range(n)]
                procs += [c for c, _ in clients]
                # In many mode the server prints the table; with --server we only see clients.
                reporter = server if mode == "many" and server else clients[0][0]
                text = self.follow(reporter, f"{name} {mode}", deadline)
                codes = self.finish(procs, deadline)
                for (c, cerr), code in zip(clients, codes[-n:]):
                    if code != 0:
                        why = self.stderr_tail(cerr)
                        raise Failure(f"client exit {code}: {why}" if server else
                                      f"cannot reach server {addr}: {why}")
                if server is not None and codes[0] != 0:
                    raise Failure(f"server exit {codes[0]}: {self.stderr_tail(serr)}")
                s.paths = shm_paths(([serr] if serr else []) + [e for _, e in clients])
                s.shm_clients = sum(printed_shm_stats(e) for _, e in clients)
                return parse_table(text)
            finally:
                self.finish([p for p in procs if p.poll() is None], 0)
        return self.record(s, time.monotonic(), run)

    def read_addr(self, server, err):
        deadline = time.monotonic() + 10
        while True:
            line = self.read_line(server, deadline)
            if not line:
                break
            if line.startswith("ADDR "):
                return line.split()[1]
        self.finish([server], time.monotonic() + 2)
        raise Failure("method not built" if server.returncode == 77 else
                      f"server gave no address: {self.stderr_tail(err)}")

    def command(self, name, mode, argv, env=None):
        """A run whose rank 0 or single process prints the table (MPI, eventfd, memcpy)."""
        s = Series(name, mode, " ".join(argv))

        def run():
            if argv[0] is None:
                raise Failure("tool not found")
            deadline = time.monotonic() + self.args.timeout
            proc, err = self.spawn(argv, env, "cmd")
            try:
                text = self.follow(proc, f"{name} {mode}", deadline)
                code = self.finish([proc], deadline)[0]
            finally:
                self.finish([proc] if proc.poll() is None else [], 0)
            if code != 0:
                raise Failure(f"exit {code}: {self.stderr_tail(err)}")
            return parse_table(text)
        return self.record(s, time.monotonic(), run)

    def mpi(self, baseline, mode, plan=None, cpu="per rank"):
        """cpu: "per rank" (mpirun binds its ranks one per core), None (left to the
        scheduler) or one CPU for every rank."""
        a = self.args
        mpirun = shutil.which("mpirun")
        exe = self.tool("mpi_pingpong")
        ranks = a.clients + 1 if mode == "many" else 2
        if mpirun is None or exe is None:
            def missing():
                raise Failure("mpirun or mpi_pingpong missing")
            return self.record(Series(MPI_NAMES[baseline], mode, "mpirun"), time.monotonic(),
                               missing)
        env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "OMPI_MCA_rmaps_base_oversubscribe": "1"}
        argv = ([mpirun, "--oversubscribe", "-np", str(ranks), "--mca", "pml", "ob1"]
                + ([] if cpu == "per rank" else ["--bind-to", "none"])
                + MPI_MCA[baseline] + [exe] + (self.plan(mode) if plan is None else plan))
        if cpu not in ("per rank", None):
            # Every rank on one CPU: mpirun cannot see that it oversubscribes, and its ranks
            # would spin through whole time slices (doc/perf/code-figures.md, "bmi-perf").
            # Yielding when idle is Open MPI's own setting for
            # oversubscription, what a user sharing a core would run with.
            argv = (["taskset", "-c", str(cpu)] + argv[:1] +
                    ["--mca", "mpi_yield_when_idle", "1"] + argv[1:])
        return self.command(MPI_NAMES[baseline], mode, argv, env)

    def server_then_client(self, pair_for_port, cpus, env=None, capture=False):
        """A third-party pair that listens on a TCP port we name: pair_for_port(port) gives the
        (server, client) command lines. The server is pinned to cpus[0], the client (cpus[1])
        retried until the server listens. A server that exits before any client succeeds lost
        its port to someone else between our probe and its bind: the pair starts again on
        another, at most three times. The client's CompletedProcess; the server is ended either
        way. cpus: a pair, or None: left to the scheduler."""
        def pin(which):
            return None if cpus is None else (lambda: os.sched_setaffinity(0, {cpus[which]}))

        deadline = time.monotonic() + self.args.timeout
        cli = None
        for _attempt in range(3):
            server, client = pair_for_port(str(free_loopback_port()))
            srv = subprocess.Popen(server, cwd=self.tmp, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, preexec_fn=pin(0))
            try:
                for _ in range(50):
                    time.sleep(0.1)
                    cli = subprocess.run(client, cwd=self.tmp, env=env, preexec_fn=pin(1),
                                         capture_output=True, text=capture,
                                         timeout=max(1, deadline - time.monotonic()))
                    if cli.returncode == 0 or srv.poll() is not None:
                        break
            except subprocess.TimeoutExpired:
                raise Failure(f"no result within {self.args.timeout} s")
            finally:
                self.finish([srv], time.monotonic() + 5)
            if cli.returncode == 0 or srv.returncode == 0:
                break
        return cli

    def fi_pingpong(self, provider, cpus=None, smallest=None, largest=None, size=None,
                    iters=None, mode="latency"):
        """libfabric's own ping-pong (fi_pingpong, libfabric-bin) on an RDM endpoint with
        tagged messages over provider (as bmi_ofi uses it): the floor that provider allows.
        Its own size list, whose power-of-two sizes in range are kept, or one size. cpus:
        (server CPU, client CPU), or None: left to the scheduler."""
        a, fpp = self.args, shutil.which("fi_pingpong")
        lo, hi = (size, size) if size else (smallest or a.min, largest or a.max)
        opts = ["-p", provider, "-e", "rdm", "-m", "tagged", "-I", str(iters or a.iters),
                "-S", str(size) if size else "all"]
        s = Series("fi pingpong", mode, f"fi_pingpong {' '.join(opts)}")
        # The data endpoint on loopback too, not the first interface the provider finds.
        env = dict(os.environ, FI_TCP_IFACE="lo")

        def run():
            if fpp is None:
                raise Failure("fi_pingpong not installed (Debian: libfabric-bin)")
            cli = self.server_then_client(
                lambda port: ([fpp] + opts + ["-B", port],
                              [fpp] + opts + ["-P", port, "127.0.0.1"]), cpus, env, capture=True)
            if cli is None or cli.returncode != 0:
                tail = (cli.stderr or cli.stdout).strip().splitlines()[-1:] if cli else []
                raise Failure(f"fi_pingpong failed: {tail[0] if tail else 'no output'}")
            rows = []
            for size, iters, us in parse_fi_pingpong(cli.stdout):
                if lo <= size <= hi and size & (size - 1) == 0 and us > 0:
                    rows.append((size, iters, us, size / us))
            return rows
        return self.record(s, time.monotonic(), run)

    def netpipe(self, mode="latency", cpus=None, smallest=None, largest=None):
        """NPtcp's own plan; the power-of-two sizes are kept, recomputed into our units.
        cpus: (receiver CPU, sender CPU), or None: left to the scheduler."""
        a, npt = self.args, shutil.which("NPtcp")
        lo, hi = smallest or a.min, largest or a.max
        s = Series("netpipe", mode, f"NPtcp -p 0 -l {lo} -u {hi}")

        def run():
            if npt is None:
                raise Failure("NPtcp not installed (Debian: netpipe-tcp)")
            out = os.path.join(self.tmp, "np.out")

            def pair(port):
                # The receiver listens; the sender connects and writes the table.
                opts = ["-P", port, "-p", "0", "-l", str(lo), "-u", str(hi)]
                return [npt] + opts, [npt, "-h", "127.0.0.1", "-o", out] + opts
            self.server_then_client(pair, cpus)
            rows = []
            for line in open(out) if os.path.exists(out) else []:
                w = line.split()
                if len(w) >= 3 and float(w[2]) > 0:
                    size, us = int(float(w[0])), float(w[2]) * 1e6
                    if size & (size - 1) == 0:
                        rows.append((size, 0, us, size / us))
            return rows
        return self.record(s, time.monotonic(), run)
