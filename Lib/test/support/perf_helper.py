"""Helpers of the perf trampoline tests (cpython-perf): running the
interpreter and perf, finding the pids of the processes a test started,
strict readers of /tmp/perf-PID.map and /tmp/jit-PID.dump, cleanup of the
files those processes wrote, and probes of what perf can do here.

Used by test_perf_profiler, test_perf_unwind, test_perfmaps,
test_perf_storms, test_perf_live and test_perf_live_perf.
"""

import bisect
import functools
import glob
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
import unittest

from test.support import os_helper


HAVE_TRAMPOLINE = bool(sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"))
# Where configure's probe finds no trampoline template (Linux on x86_64,
# aarch64 and riscv64 have one), the tests of trampolines skip with this.
NO_TRAMPOLINE = (f"perf trampoline not supported on this platform "
                 f"({sysconfig.get_config_var('MULTIARCH') or sys.platform}"
                 f" has no PY_HAVE_PERF_TRAMPOLINE)")
# The jitdump header's ELF machine, per architecture.
JIT_ELF_MACHINE = {"x86_64": 62, "aarch64": 183,
                   "riscv64": 243}.get(os.uname().machine, 0)
# Frame-pointer unwinding (perf record -g) only works through an
# interpreter built with frame pointers; the distribution-style build is
# profiled with DWARF unwinding and the jitdump instead.
HAVE_FRAME_POINTERS = "-fno-omit-frame-pointer" in (
    sysconfig.get_config_var("PY_CFLAGS") or "")
MAP_LINE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::.*$")


def map_path(pid):
    return f"/tmp/perf-{pid}.map"


def script_pid(stdout):
    m = re.search(r"^PID (\d+)$", stdout, re.M)
    if m is None:
        raise AssertionError(f"script printed no pid: {stdout!r}")
    return int(m.group(1))


def run_python(*args, env=None, **kw):
    """Run this interpreter; clean environment unless `env` is given."""
    if env is None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
    return subprocess.run([sys.executable, *args], env=env,
                          capture_output=True, text=True, **kw)


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


# perf copies every binary a run involves into its build-id cache
# (~/.debug), the jitted-*.so files of `perf inject --jit` included: the
# tests' perf runs get a cache of their own, made on first use and removed
# by teardown_module().  It is the .debug of a home of its own: a perf that
# a test does not start itself (record's) is given that home, since perf
# takes its cache from --buildid-dir, the configuration or $HOME only.
_buildid_home = None


def buildid_home():
    """A HOME whose .debug is buildid_dir()."""
    global _buildid_home
    if _buildid_home is None:
        _buildid_home = tempfile.mkdtemp(prefix="test_perf_buildid_")
        os.mkdir(os.path.join(_buildid_home, ".debug"))
    return _buildid_home


def buildid_dir():
    return os.path.join(buildid_home(), ".debug")


def perf_command(*args):
    return ["perf", "--buildid-dir", buildid_dir(), *args]


def start_perf_record(args, **kw):
    """Start `perf record ARGS` (options and -p PIDS) with its
    events disabled, then enable them through perf's control descriptors
    and wait for its acknowledgement: samples are taken from the return
    on, which no wait for perf's output file can tell.  Returns the Popen
    (keyword arguments go to it); stop_perf_record() ends it."""
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    cmd = perf_command("record", "-D", "-1", "--control",
                       f"fd:{ctl_r},{ack_w}", *args)
    try:
        rec = subprocess.Popen(cmd, pass_fds=(ctl_r, ack_w), **kw)
    except BaseException:
        for fd in (ctl_r, ctl_w, ack_r, ack_w):
            os.close(fd)
        raise
    os.close(ctl_r)
    os.close(ack_w)
    # perf's own ends stay open while it runs: it stops listening to
    # a control descriptor that hangs up, and perf 6.1 then loses its
    # way among its poll entries ("pollfd index mismatch") and dies of
    # the SIGINT that should end it.
    rec.control_fds = (ctl_w, ack_r)
    try:
        os.write(ctl_w, b"enable\n")
        ready = select.select([ack_r], [], [], 120)[0]
        ack = os.read(ack_r, 100) if ready else b""
    except OSError as exc:        # perf has gone
        ack = repr(exc).encode()
    if not ack.startswith(b"ack"):
        _, err = stop_perf_record(rec, signal.SIGKILL)
        raise AssertionError(f"perf record did not enable its events "
                             f"({ack!r}): {(err or '')[-2000:]}")
    return rec


def stop_perf_record(rec, signum=signal.SIGINT, timeout=120):
    """End a start_perf_record() with `signum`: (stdout, stderr).  perf
    ends cleanly on SIGINT; AssertionError when it failed."""
    try:
        rec.send_signal(signum)
        try:
            out, err = rec.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            rec.kill()
            rec.communicate()
            raise
    finally:
        for fd in rec.control_fds:
            os.close(fd)
        rec.control_fds = ()
    if signum == signal.SIGINT and rec.returncode not in (0, -signum):
        raise AssertionError(f"perf record failed: {(err or '')[-2000:]}")
    return out, err


# A native program that keeps a CPU busy for a fraction of a second: the
# sampling probe records it, not our interpreter, so that no regression of
# ours can make the probe fail and the profiling tests skip.
NATIVE_BUSY_LOOP = ["sh", "-c",
                    'i=0; while [ "$i" -lt 300000 ]; do i=$((i+1)); done']


def _perf_can_sample():
    """Probe: perf exists and `perf record -g` samples a process here."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    if shutil.which("sh") is None:
        return "no sh to sample"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "probe.data")
        try:
            proc = subprocess.run(
                perf_command("record", "-F", "999", "-g", "-o", out, "--",
                             *NATIVE_BUSY_LOOP),
                capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"perf record failed: {exc}"
        if proc.returncode != 0 or not os.path.exists(out):
            return ("perf record cannot sample here: "
                    + proc.stderr.decode(errors="replace")[-300:])
        script = subprocess.run(perf_command("script", "-i", out),
                                capture_output=True, timeout=120)
        if script.returncode != 0 or not script.stdout.strip():
            return "perf script shows no samples"
    return None


# A program that does what a JIT does for perf, without any of the code
# under test: it writes a minimal /tmp/jit-PID.dump (header and one code
# load) and maps it executable, the marker perf inject looks for.
JIT_PROBE = """\
import mmap, os, struct, time
pid = os.getpid()
clock = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC)
code = bytes([0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3])
body = (struct.pack("<IIQQQQ", pid, pid, 0x10000, 0x10000, len(code), 0)
        + b"probe_function\\0" + code)
with open(f"/tmp/jit-{pid}.dump", "wb") as f:
    f.write(struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, pid,
                        clock(), 0))
    f.write(struct.pack("<IIQ", 0, 16 + len(body), clock()) + body)
fd = os.open(f"/tmp/jit-{pid}.dump", os.O_RDONLY)
marker = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_EXEC)
print("PID", pid, flush=True)
sum(range(1_000_000))
"""


def _perf_inject_jit_works():
    """Probe: perf inject --jit turns a jitdump into jitted-*.so here.

    The dump comes from JIT_PROBE, not from the code under test: a broken
    dump of ours must fail TestPerfJit, not skip it.  JIT_PROBE runs on
    our interpreter (with -I, no backend): it is run once without perf
    first, and if it fails there the fault is ours, which raises instead
    of skipping."""
    problem = perf_problem()
    if problem:
        return problem
    if os.uname().machine != "x86_64":
        return "the jitdump probe is written for x86_64"
    since = time.time() - 1
    alone = run_python("-I", "-c", JIT_PROBE, timeout=120)
    pid = re.search(r"PID (\d+)", alone.stdout)
    if pid is not None:
        _remove_unchanged(_own_files(_files_of(int(pid.group(1))), since))
    if alone.returncode != 0 or pid is None:
        raise AssertionError("the jitdump probe program fails on this "
                             "interpreter, without perf: "
                             + alone.stderr[-2000:])
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "probe.data")
        jit = os.path.join(tmp, "probe.jit.data")
        since = time.time() - 1
        rec = subprocess.run(
            perf_command("record", "-F", "999", "-k", "1", "--call-graph",
                         "dwarf", "-o", data, "--", sys.executable, "-I",
                         "-c", JIT_PROBE),
            capture_output=True, text=True, env=env_with(), timeout=120)
        pid = re.search(r"PID (\d+)", rec.stdout)
        try:
            if rec.returncode != 0 or pid is None:
                return ("perf record --call-graph dwarf -k 1 fails here: "
                        + rec.stderr[-300:])
            inj = subprocess.run(perf_command("inject", "-i", data, "--jit",
                                              "-o", jit),
                                 capture_output=True, timeout=120)
            if inj.returncode != 0:
                return "perf inject --jit fails here"
            if not jitted_paths(int(pid.group(1)), since):
                return "perf inject --jit writes no jitted-*.so here"
        finally:
            if pid is not None:
                _remove_unchanged(_own_files(_files_of(int(pid.group(1))),
                                             since))
    return None


def flamegraph_template():
    """A d3-flame-graph template to fill, or None: the one the user points
    at ($PERF_FLAMEGRAPH_TEMPLATE), perf's place for it, or the one
    `make check-viewer` installs in build/viewer beside the builds."""
    build = os.path.dirname(os.path.realpath(sys.executable))
    for path in (os.environ.get("PERF_FLAMEGRAPH_TEMPLATE"),
                 "/usr/share/d3-flame-graph/d3-flamegraph-base.html",
                 os.path.join(os.path.dirname(build), "build", "viewer",
                              "node_modules", "d3-flame-graph", "dist",
                              "templates", "d3-flamegraph-base.html")):
        if path and os.path.isfile(path):
            return path
    return None


def jit_path(pid):
    return f"/tmp/jit-{pid}.dump"


def written_since(path, since):
    """Whether `path` exists and was written at `since` (time.time()) or
    later.  /tmp is shared: a file that another process left under a pid
    that has come round again to one of ours is not our child's."""
    try:
        return os.stat(path).st_mtime >= since
    except FileNotFoundError:
        return False


# ---- Cleanup: only the files our own processes wrote ------------------------
#
# /tmp is shared, and pids come round again (pid_max is 32,768 here; CI
# forks thousands of processes): once a child of ours has exited, its pid
# can be an unrelated process's, whose /tmp/perf-PID.map must stay.  So the
# files of a child are identified when it has just exited (those written
# since the test started: older ones were another process's), by device,
# inode, size and modification time, and removed after the test only if
# they are still the same file, unchanged (a later process of that pid
# reuses the file in place, truncating it).

def _identity(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def arena_paths(pid, since):
    """The ELF files of trampolines (arenas) process `pid` made, in the
    order it made them: those written at `since` (a time.time()) or later,
    or all if `since` is None.  An older file of that pid was another
    process's, and the writer numbers its own files past it."""
    paths = [path for path in glob.glob(f"/tmp/py-perf-{pid}-*.so")
             if re.fullmatch(rf"/tmp/py-perf-{pid}-\d+\.so", path)
             and (since is None or written_since(path, since))]
    return sorted(paths, key=arena_number)


def arena_number(path):
    """N of /tmp/py-perf-PID-N.so."""
    return int(re.search(r"-(\d+)\.so$", path)[1])


def jitted_paths(pid, since):
    """The jitted-PID-*.so files perf inject --jit wrote for process
    `pid`: those written at `since` or later, or all if `since` is None
    (an older one was written for another process of that pid)."""
    return [path for path in glob.glob(f"/tmp/jitted-{pid}-*.so")
            if since is None or written_since(path, since)]


def named_functions(pid, since):
    """The names process `pid` gave its trampolines: the symbols of its
    arena files (named at once) and the lines of its map (which may wait
    in a block while the process runs), of the files written at `since`
    or later."""
    names = set()
    readelf = shutil.which("readelf")
    for path in arena_paths(pid, since) if readelf else ():
        out = subprocess.run([readelf, "-sW", path], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            fields = line.split(None, 7)
            if len(fields) == 8 and fields[3] == "FUNC":
                names.add(fields[7])
    if (os.path.exists(map_path(pid)) if since is None
            else written_since(map_path(pid), since)):
        names.update(line.split(" ", 2)[2]
                     for line in read_map_file(map_path(pid), False))
    return names


def _files_of(pid):
    return [map_path(pid), jit_path(pid),
            *jitted_paths(pid, None), *arena_paths(pid, None)]


def _own_files(paths, since):
    """{path: identity} of those of `paths` written at `since` or later."""
    seen = {}
    for path in paths:
        if (os.path.lexists(path) if since is None
                else written_since(path, since)):
            identity = _identity(path)
            if identity is not None:
                seen[path] = identity
    return seen


def _remove_unchanged(seen):
    for path, identity in seen.items():
        if _identity(path) == identity:
            os_helper.unlink(path)


def stop_process(proc):
    """End a test's target process (a Popen with pipes): close its stdin,
    which asks it to end, give it 10 seconds, then kill it; close its
    pipes."""
    if proc.poll() is None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        try:
            f.close()
        except OSError:
            pass  # stdin: the pipe's reader has gone


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command's name (the first
    is the state, field 3 of proc(5)), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def _stat(pid):
    """(state, parent's pid, start time in clock ticks after boot) of
    process `pid`, from /proc/PID/stat, or None."""
    fields = _stat_fields(pid)
    try:
        return fields[0], int(fields[1]), int(fields[19])
    except (TypeError, IndexError, ValueError):
        return None


def cpu_time(pid):
    """The CPU time process `pid` has used, user and system, all its
    threads, in seconds; None once it has ended (a zombie too)."""
    fields = _stat_fields(pid)
    try:
        if fields[0] in "ZX":
            return None
        ticks = int(fields[11]) + int(fields[12])
    except (TypeError, IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_cpu(pids, seconds, timeout=120):
    """Wait until each of `pids` (a pid or a list) has run on a CPU for
    `seconds` more: what a cpu-clock sampler sees of a process, whatever
    the machine's load, where a sleep of the same length may give it no
    CPU at all.  AssertionError when one ends first or after `timeout`."""
    if isinstance(pids, int):
        pids = [pids]
    start = {pid: cpu_time(pid) for pid in pids}
    deadline = time.monotonic() + timeout
    for pid in pids:
        while True:
            now = cpu_time(pid)
            if now is None or start[pid] is None:
                raise AssertionError(f"process {pid} has ended")
            if now - start[pid] >= seconds:
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"process {pid} ran {now - start[pid]:.2f} s of "
                    f"{seconds} s on a CPU in {timeout} s")
            time.sleep(0.01)


def _running_descendant(pid):
    """Whether process `pid` runs (is neither a zombie nor dead) and
    descends from this one."""
    st = _stat(pid)
    if st is None or st[0] in "ZX":
        return False
    for _ in range(64):
        if st is None:
            return False
        if st[1] == os.getpid():
            return True
        if st[1] <= 1:
            return False
        st = _stat(st[1])
    return False


def forget_files(test, pid):
    """Remove, after `test`, the files of its process `pid`, which has
    exited (call again after perf inject, for its jitted-PID-*.so):
    /tmp/perf-PID.map, /tmp/jit-PID.dump, /tmp/jitted-PID-*.so,
    /tmp/py-perf-PID-*.so (its arenas), those
    written since the test started (`test.since`, a time.time()) and
    still unchanged then.  (A process that still runs would change them:
    see forget_process.)"""
    if _running_descendant(pid):
        raise AssertionError(f"process {pid} still runs: its files are "
                             f"not final (forget_process)")
    test.addCleanup(_remove_unchanged, _own_files(_files_of(pid), test.since))


class _Forked(list):
    """The pids of processes a test's process forked, each known by its
    start time too, so that a pid that has come round again to another
    process is never killed."""

    def __init__(self):
        super().__init__()
        self.started = {}

    def append(self, pid):
        st = _stat(pid)
        self.started[pid] = None if st is None else st[2]
        super().append(pid)

    def extend(self, pids):
        for pid in pids:
            self.append(pid)

    def __iadd__(self, pids):
        self.extend(pids)
        return self


def forget_process(test, proc):
    """Remove, after `test`, the files of `proc`, a Popen of a process
    that runs the interpreter itself (its pid is the Python's), once it
    has ended.  Returns a list: the pids of processes it forked, appended
    to it while they run, are ended after it and their files removed
    too.  Call it right after starting the process: cleanups run in
    reverse order, so this one runs after those the test adds later,
    which may end the process; it ends the process if they did not."""
    forked = _Forked()

    def forget():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in forked:
            _end(pid, forked.started[pid])
        # (ended just now: a new process with one of these pids is
        # unlikely to have written files in between)
        for pid in [proc.pid, *forked]:
            _remove_unchanged(_own_files(_files_of(pid), test.since))
    test.addCleanup(forget)
    return forked


def _end(pid, started):
    """Kill process `pid` if it is still the one that was started at
    `started` (clock ticks after boot) and runs, and wait up to 10
    seconds for it to end."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = _stat(pid)
        if st is None or st[0] in "ZX" or st[2] != started:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return
        time.sleep(0.01)


def forget_path(test, path):
    """Remove `path`, which a process of `test` has just made or written,
    after the test if it is unchanged then."""
    test.addCleanup(_remove_unchanged, _own_files([path], None))


# The nested calls of the perf howto, the program that the profiling tests
# run (with a call of baz() appended).  The script prints its pid first so
# that the test knows which files are its own.
NESTED = """\
import os, sys
print("PID", os.getpid(), flush=True)

def foo(n):
    x = 0
    for i in range(n):
        x += i
    return x

def bar(n):
    return foo(n)

def baz(n):
    return bar(n)
"""
NESTED_NAMES = ("foo", "bar", "baz")

# A pre-fork server's worker, for the servers of the record tests:
# worker() calls worker_task() forever.
WORKER = """\
def worker_task(n):
    total = 0
    for i in range(n):
        total += i
    return total
def worker():
    while True:
        worker_task(10_000)
"""


PID_LINE = r"^PID (\d+)$"


def run_and_forget(test, *args, env=None, pids=PID_LINE, **kw):
    """Run this interpreter with `args` (`env`, or the caller's
    environment without PYTHON* variables), find the pids its processes
    print (lines matching `pids`, with one group: "PID n" by default) and
    have their files removed after `test` (forget_files).  Returns the
    CompletedProcess and the list of pids."""
    proc = run_python(*args, env=env, **kw)
    found = [int(p) for p in re.findall(pids, proc.stdout, re.M)]
    for pid in found:
        forget_files(test, pid)
    return proc, found


# ---- Probes, computed once, from the setUpModule() of a test module ---------

_probes = {}


def _probe(name, func):
    if name not in _probes:
        _probes[name] = func() if HAVE_TRAMPOLINE else "no trampoline"
    return _probes[name]


def perf_problem():
    """Why perf cannot sample here (a string), or None."""
    return _probe("perf", _perf_can_sample)


def jit_problem():
    """Why perf record --call-graph dwarf + perf inject --jit cannot name
    jitted code here (a string), or None."""
    return _probe("jit", _perf_inject_jit_works)


# A program with symbols that is not ours, for bpftrace's probe: Debian's
# python3 (the tests' packages bring it).
SYSTEM_PYTHON = "/usr/bin/python3"


def _bpftrace_can_sample():
    """Probe: bpftrace loads a profile program and names the functions of
    another interpreter's user stack (Debian's, not ours)."""
    bpftrace = shutil.which("bpftrace")
    if bpftrace is None:
        return "bpftrace is not installed"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"no {SYSTEM_PYTHON} for bpftrace's probe to sample"
    busy = subprocess.Popen([SYSTEM_PYTHON, "-c", "while True: pass"])
    program = (f"profile:hz:999 /pid == {busy.pid}/ "
               "{ @[ustack(perf)] = count(); } interval:ms:500 { exit(); }")
    try:
        proc = subprocess.run([bpftrace, "-e", program],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bpftrace failed: {exc}"
    finally:
        busy.kill()
        busy.wait()
    if proc.returncode != 0:
        return "bpftrace cannot run here: " + proc.stderr[-300:]
    if "_PyEval_EvalFrameDefault" not in proc.stdout:
        return "bpftrace names no frame of another program here"
    return None


def bpftrace_problem():
    """Why bpftrace cannot sample user stacks here (a string), or
    None."""
    return _probe("bpftrace", _bpftrace_can_sample)


def setup_module():
    """Run the probes (for a test module's setUpModule())."""
    perf_problem()
    jit_problem()


def teardown_module():
    """Remove the build-id cache of the module's perf runs."""
    global _buildid_home
    if _buildid_home is not None:
        shutil.rmtree(_buildid_home, ignore_errors=True)
        _buildid_home = None


def _skip_if(problem):
    """A decorator of a test method or class that skips it when
    `problem()` gives a reason.  Evaluated when the test runs, not when
    the module is imported."""
    def decorate(obj):
        if isinstance(obj, type):
            set_up = obj.setUp

            @functools.wraps(set_up)
            def setUp(self):
                reason = problem()
                if reason:
                    raise unittest.SkipTest(reason)
                set_up(self)
            obj.setUp = setUp
            return obj

        @functools.wraps(obj)
        def wrapper(*args, **kwargs):
            reason = problem()
            if reason:
                raise unittest.SkipTest(reason)
            return obj(*args, **kwargs)
        return wrapper
    return decorate


requires_perf = _skip_if(perf_problem)
requires_perf_inject_jit = _skip_if(jit_problem)
requires_bpftrace = _skip_if(bpftrace_problem)


class Sample(list):
    """One sample's stack, a list of (symbol, dso), leaf first; `time` is
    its timestamp in seconds, `tid` its thread id."""
    time = None
    tid = None


def load_map_symbols(path):
    """(start, end, name) of each record of a perf map, sorted."""
    with open(path, "rb") as f:
        lines = map_lines(f.read(), exited_normally=False)
    syms = []
    for line in lines:
        start, size, name = line.split(" ", 2)
        start = int(start, 16)
        syms.append((start, start + int(size, 16), name))
    return sorted(syms)


# The names GCC gives to parts and copies of one function, which perf
# shows as the symbols of its frames in optimised builds (PGO, LTO): the
# part moved out as cold code (.cold, numbered in older releases), the
# out-of-line rest of a partly inlined function (.part.N), copies for
# constant arguments (.constprop.N) or with arguments rewritten
# (.isra.N), and static functions renamed by LTO (.lto_priv.N).  They can
# follow one another: f.constprop.0.isra.0.cold.  Clang's ThinLTO gives
# the static functions it makes visible to other modules a hash of their
# module (.llvm.N, decimal digits).
CLONE_SUFFIXES = re.compile(
    r"(?:\.(?:cold(?:\.\d+)?|(?:part|constprop|isra|lto_priv|llvm)\.\d+))+$")


def function_of(symbol):
    """The native function whose code perf names `symbol`: the symbol
    without the compiler's clone and split suffixes.  py:: names (which
    end in a file name) are kept as they are."""
    if symbol.startswith("py::"):
        return symbol
    return CLONE_SUFFIXES.sub("", symbol)


def is_function(symbol, *names):
    """Whether `symbol` (a frame's symbol in perf script) is the code of
    one of the native functions `names`, or a part or copy of it."""
    return function_of(symbol) in names


def parse_perf_script(text, map_symbols=None):
    """Samples of `perf script` output: lists of (symbol, dso), leaf first,
    one entry per native frame (inlined functions are left out).

    Frames perf left unnamed are named from `map_symbols` (the test's own
    copy of the process's perf map, or a dict of them by thread id), so
    that the result does not depend on perf finding /tmp/perf-PID.map when
    `perf script` runs: perf looks it up by the Tgid it reads from
    /proc/PID/status *then*, and the file can be gone or the pid be
    someone else's by that time."""
    by_tid = map_symbols if isinstance(map_symbols, dict) else None
    samples = []
    current = None
    for line in text.splitlines():
        if not line.strip():
            if current:
                samples.append(current)
            current = None
            continue
        if line[0] not in " \t":
            current = Sample()
            stamp = re.search(r"\s(\d+)\s+(?:\[\d+\]\s+)?(\d+\.\d+):\s",
                              line)
            if stamp:
                current.tid = int(stamp.group(1))
                current.time = float(stamp.group(2))
            continue
        if current is None:
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        m = re.match(r"(.*) \((.*)\)$", rest)
        sym, dso = (m.group(1), m.group(2)) if m else (rest, "")
        if dso == "inlined":
            # a function inlined at the next (real) frame's address
            continue
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        syms = by_tid.get(current.tid) if by_tid is not None else map_symbols
        if sym == "[unknown]" and syms:
            ip = int(parts[0], 16)
            k = bisect.bisect_right(syms, (ip, float("inf"))) - 1
            if k >= 0 and ip < syms[k][1]:
                sym = syms[k][2]
        current.append((sym, dso))
    if current:
        samples.append(current)
    return samples


def check(condition, what=None):
    """Raise AssertionError(what) unless `condition`.  The readers check
    with this, not with `assert`, which python -O removes."""
    if not condition:
        raise AssertionError(what)


def read_map_file(path, exited_normally=True):
    with open(path, "rb") as f:
        return map_lines(f.read(), exited_normally)


def map_lines(data, exited_normally=True):
    """The lines of a perf map, checked to be whole.  Records are appended
    one whole line per write() to a file that is never grown ahead, so the
    file ends right after its last line however its process ended (killed,
    os._exit): blank lines, zero bytes or a partial last line are faults.
    (`exited_normally` changes nothing for a map; it is the jitdump
    reader's argument too.)"""
    text = data.decode()
    check(not text or text.endswith("\n"), "the last line is not whole")
    check("\0" not in text, "zero bytes in the map")
    lines = text.splitlines()
    check(all(lines), "a blank line in the map")
    return lines


# ---- A strict reader of /tmp/jit-PID.dump ----------------------------------

JIT_CODE_LOAD, JIT_CODE_DEBUG_INFO, JIT_CODE_CLOSE = 0, 2, 3
JIT_CODE_UNWINDING_INFO = 4


def leb128(data, pos, signed=False):
    """Decode a (u|s)leb128 at data[pos]; returns (value, next pos)."""
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7f) << shift
        shift += 7
        if not byte & 0x80:
            if signed and byte & 0x40:
                result -= 1 << shift
            return result, pos


def read_jitdump(path, pid, exited_normally=True):
    """Parse a jitdump strictly; returns the list of (id, fields) records.

    Fails on anything the format (Doc/howto/perf_profiling.rst) does not allow,
    even where perf would be lenient.  Records are appended, one write()
    each, to a file that is never grown ahead: the dump ends right after its
    last record however its process ended (killed, os._exit), and zeros or
    a partial record after it are faults.  (`exited_normally` changes
    nothing now: the callers check for the CLOSE record of a normal
    exit themselves.)"""
    with open(path, "rb") as f:
        data = f.read()
    check(len(data) >= 40, "no header")
    (magic, version, total_size, elf_mach, pad1, hpid, ts,
     flags) = struct.unpack_from("<IIIIIIQQ", data, 0)
    check(magic == 0x4A695444, hex(magic))
    check(version == 1, version)
    check(total_size == 40, total_size)
    check(elf_mach == JIT_ELF_MACHINE, elf_mach)
    check(pad1 == 0 and flags == 0, (pad1, flags))
    check(hpid == pid, (hpid, pid))
    pos, last_ts, records = 40, ts, []
    while pos < len(data):
        check(pos + 16 <= len(data), "truncated record header")
        rid, size, rts = struct.unpack_from("<IIQ", data, pos)
        check(size >= 16 and pos + size <= len(data), (rid, size, pos))
        check(rts >= last_ts, "timestamps go backwards")
        last_ts = rts
        body = data[pos + 16:pos + size]
        if rid == JIT_CODE_LOAD:
            rpid, tid, vma, addr, csize, index = struct.unpack_from(
                "<IIQQQQ", body, 0)
            end = body.index(b"\0", 40)
            name = body[40:end].decode()
            code = body[end + 1:]
            check(len(code) == csize, "code size and record size disagree")
            check(rpid == pid and vma == addr, (rpid, vma, addr))
            rec = dict(addr=addr, size=csize, index=index, name=name,
                       code=code, pid=rpid, tid=tid)
        elif rid == JIT_CODE_DEBUG_INFO:
            addr, nr = struct.unpack_from("<QQ", body, 0)
            entries, p = [], 16
            for _ in range(nr):
                eaddr, line, discrim = struct.unpack_from("<QII", body, p)
                end = body.index(b"\0", p + 16)
                entries.append((eaddr, line, discrim,
                                body[p + 16:end].decode()))
                p = end + 1
            check(p == len(body), "debug info record size is not exact")
            rec = dict(addr=addr, entries=entries)
        elif rid == JIT_CODE_UNWINDING_INFO:
            usize, hsize, msize = struct.unpack_from("<QQQ", body, 0)
            check(len(body) == 24 + usize, "unwinding record size")
            rec = dict(unwind=body[24:], hdr_size=hsize, mapped=msize)
        elif rid == JIT_CODE_CLOSE:
            check(size == 16, size)
            rec = {}
        else:
            raise AssertionError(f"unexpected record id {rid}")
        records.append((rid, rec))
        pos += size
    return records


def expected_cfa_rules(code):
    """Decode the trampoline and say, at each instruction boundary, where
    the CFA is (register, offset) and where rbp is saved (or None)."""
    rsp_delta, rbp_is_frame, rbp_saved = 8, False, None
    rules, pos = {}, 0
    while pos < len(code):
        rules[pos] = (("rbp", rsp_delta_at_mov) if rbp_is_frame
                      else ("rsp", rsp_delta), rbp_saved)
        if code[pos:pos + 4] == b"\xf3\x0f\x1e\xfa":     # endbr64
            pos += 4
        elif code[pos] == 0x55:                           # push %rbp
            rsp_delta += 8
            rbp_saved = rsp_delta
            pos += 1
        elif code[pos:pos + 3] == b"\x48\x89\xe5":        # mov %rsp,%rbp
            rbp_is_frame, rsp_delta_at_mov = True, rsp_delta
            pos += 3
        elif code[pos:pos + 2] == b"\xff\xd1":            # call *%rcx
            pos += 2
        elif code[pos] == 0x5d:                           # pop %rbp
            rsp_delta -= 8
            rbp_is_frame, rbp_saved = False, None
            pos += 1
        elif code[pos] == 0xc3:                           # ret
            pos += 1
        else:
            raise AssertionError(f"unknown instruction at {pos}: {code!r}")
    return rules


def cfa_table(unwind, code_size):
    """Check the .eh_frame/.eh_frame_hdr blob of one trampoline and return
    {offset: ((reg, off), rbp_saved)} for every code offset."""
    hdr_size = None
    regs = {7: "rsp", 6: "rbp"}
    # .eh_frame: CIE
    length, cie_id = struct.unpack_from("<II", unwind, 0)
    check(cie_id == 0 and (length + 4) % 8 == 0, (cie_id, length))
    cie_end = 4 + length
    check(unwind[8] == 1 and unwind[9:12] == b"zR\0", unwind[8:12])
    caf, p = leb128(unwind, 12)
    daf, p = leb128(unwind, p, signed=True)
    ra, p = leb128(unwind, p)
    alen, p = leb128(unwind, p)
    check((caf, daf, ra, alen) == (1, -8, 16, 1), (caf, daf, ra, alen))
    check(unwind[p] == 0x1b, "FDE pointers must be pcrel|sdata4")
    initial = unwind[p + 1:cie_end]
    # FDE
    fde = cie_end
    flen, cie_ptr = struct.unpack_from("<II", unwind, fde)
    check((flen + 4) % 8 == 0, flen)
    check(cie_ptr == fde + 4, "CIE pointer")
    pc_begin, pc_range = struct.unpack_from("<iI", unwind, fde + 8)
    # perf's ELF file has the .eh_frame at the code's end rounded up to 8
    # (tools/perf/util/genelf.c), the .eh_frame_hdr right after it
    eh_frame_at = (code_size + 7) & ~7
    check(fde + 8 + pc_begin == -eh_frame_at, "FDE does not start at code")
    check(pc_range == code_size, "FDE does not cover exactly the code")
    aug, p = leb128(unwind, fde + 16)
    check(aug == 0)
    instructions = unwind[p:fde + 4 + flen]
    term = fde + 4 + flen
    check(unwind[term:term + 4] == b"\0\0\0\0", "no terminator")
    eh_frame_size = term + 4
    # .eh_frame_hdr
    hdr = unwind[eh_frame_size:]
    check(hdr[:4] == bytes([1, 0x1b, 0x03, 0x3b]), hdr[:4])
    ptr, count = struct.unpack_from("<iI", hdr, 4)
    check(eh_frame_size + 4 + ptr == 0, "eh_frame_ptr")
    check(count == 1 and len(hdr) == 12 + 8 * count, (count, len(hdr)))
    table = [struct.unpack_from("<ii", hdr, 12 + 8 * i)
             for i in range(count)]
    check(table == sorted(table), "table not sorted")
    check(eh_frame_size + table[0][0] == -eh_frame_at, "table location")
    check(eh_frame_size + table[0][1] == fde, "table FDE address")

    # Run the CFA program.
    state = {"cfa": ("rsp", 8), "rbp": None}
    rows, loc = {}, 0

    def run(prog, state, until=None):
        nonlocal loc
        i = 0
        while i < len(prog):
            op = prog[i]
            i += 1
            if op >> 6 == 1:                       # advance_loc
                new = loc + (op & 0x3f)
                for at in range(loc, min(new, code_size)):
                    rows[at] = (state["cfa"], state["rbp"])
                loc = new
            elif op >> 6 == 2:                     # offset
                off, i = leb128(prog, i)
                if op & 0x3f == 6:
                    state["rbp"] = off * 8
                else:
                    check(op & 0x3f == 16 and off == 1, "RA rule")
            elif op >> 6 == 3:                     # restore
                check(op & 0x3f == 6)
                state["rbp"] = None
            elif op == 0x0c:                       # def_cfa
                reg, i = leb128(prog, i)
                off, i = leb128(prog, i)
                state["cfa"] = (regs[reg], off)
            elif op == 0x0d:                       # def_cfa_register
                reg, i = leb128(prog, i)
                state["cfa"] = (regs[reg], state["cfa"][1])
            elif op == 0x0e:                       # def_cfa_offset
                off, i = leb128(prog, i)
                state["cfa"] = (state["cfa"][0], off)
            elif op == 0:                          # nop
                pass
            else:
                raise AssertionError(f"unexpected CFA op {op:#x}")

    run(initial, state)
    check(loc == 0, "CIE advances")
    run(instructions, state)
    for at in range(loc, code_size):
        rows[at] = (state["cfa"], state["rbp"])
    return rows, eh_frame_size
