"""Debuggers see every Python frame with a backend on: gdb and lldb,
attached, started with the program, and on core files; CPython's own
py-bt; eu-stack.  The trampolines reach them through GDB's JIT interface
(Python/perf_debugger.c); each test checks the frames of f3 <- f2 <- f1
<- <module> in order and the native frames below them down to the C
start-up (`main` itself is a tail call there)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, NO_TRAMPOLINE, arena_paths, env_with, forget_files,
    forget_process)
from ._common import (  # noqa: F401
    noexec_tmp_command, setUpModule, tearDownModule)


BACKENDS = ("perf", "perf_jit")
NAMES = ("f3", "f2", "f1", "<module>")
# The native frames a full backtrace ends with, one of them at least.
START = ("Py_BytesMain", "__libc_start_main", "__libc_start_call_main")

# Sleeps in f3, called through f2, f1 and the module; says when it is
# there.  With "poll", it sleeps there a little at a time (running Python
# code in between: it serves live requests).  With another argument, it
# stops itself there with that signal instead (a debugger that started
# it sees the stop; SIGABRT from os.abort() writes a core).
NEST = """\
import os, signal, sys, time
print("PID", os.getpid(), flush=True)
def f3():
    if len(sys.argv) > 1 and sys.argv[1] == "abort":
        os.abort()
    if len(sys.argv) > 1 and sys.argv[1] == "poll":
        print("READY", flush=True)
        for _ in range(2400):
            time.sleep(0.05)
        return
    if len(sys.argv) > 1:
        os.kill(os.getpid(), signal.SIGINT)
        return
    print("READY", flush=True)
    time.sleep(120)
def f2():
    f3()
def f1():
    f2()
f1()
"""


def _ptrace_problem():
    """Why no debugger can attach to a process here, or None: the probe
    attaches gdb to a `sleep`, not to Python."""
    if shutil.which("gdb") is None:
        return "gdb is not installed"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        proc = subprocess.run(
            ["gdb", "-nx", "-batch", "-p", str(sleeper.pid),
             "-ex", "info inferiors"],
            capture_output=True, text=True, timeout=60)
    finally:
        sleeper.kill()
        sleeper.wait()
    if re.search(r"process %d\b" % sleeper.pid, proc.stdout) is None:
        return ("gdb cannot attach here: "
                + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return None


_problem = []


def ptrace_problem():
    if not _problem:
        _problem.append(_ptrace_problem())
    return _problem[0]


# A frame's function: a trampoline's name, which has a space in it
# ("py::f3 (/x/nest.py:3)"), or a native one, which ends where its
# arguments start (gdb puts a space before them, lldb does not when the
# frame is not inlined: "python`Py_BytesMain(argc=<unavailable>, ...)").
_FUNCTION = r"(py::\S+ \([^()]*\)|[^\s(]+)"


def frame_names(text):
    """The function of each frame of a gdb or lldb backtrace, in order."""
    names = []
    for line in text.splitlines():
        m = (re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?" + _FUNCTION + " ",
                      line)
             or re.match(r"\s*\*?\s*frame #\d+: 0x[0-9a-f]+ [^\s`]+`"
                         + _FUNCTION, line))
        if m:
            names.append(m.group(1))
    return names


def build_id_of(path):
    """The GNU build-id of the ELF file `path`, in hex (its notes read
    with eu-readelf, a reader we did not write)."""
    out = subprocess.run(["eu-readelf", "-n", path], capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def eu_stack_frames(out):
    """eu-stack's first thread ("#N 0xADDR NAME") in gdb's form."""
    first = out.split("\nTID")[1] if "\nTID" in out else out
    return "\n".join(
        re.sub(r"^#(\d+)\s+0x[0-9a-f]+\s+(\S+).*", r"#\1 0x0 in \2 ", line)
        for line in first.splitlines())


class FrameNamesTests(unittest.TestCase):
    """frame_names() reads every form of frame line the debuggers print
    (the lines below are theirs, addresses and arguments shortened): a
    misread line turns into a failure on one build shape only, where
    frames are inlined or not (a PGO+LTO build printed the arguments of
    Py_BytesMain right after its name in lldb)."""

    def test_gdb(self):
        text = textwrap.dedent("""\
            #0  __GI___clock_nanosleep (clock_id=clock_id@entry=1, rem=0x0) at clock_nanosleep.c:71
            #1  0x0000563ab397299a in pysleep (timeout=<optimized out>) at timemodule.c:2162
            #2  time_sleep (self=<optimized out>) at timemodule.c:383
            #7  0x00007f1fed2261e6 in py::f3 (/tmp/nest.py:2) ()
            #8  0x0000563ab38de8d3 in call_trampoline (tramp=0x7f1fed2261e0 <py::f3 (/tmp/nest.py:2)>) at perf_trampoline.c:686
            #22 0x00007f1fed2261b6 in py::<module> (/tmp/nest.py:1) ()
            #30 0x0000563ab38f3b75 in Py_BytesMain (argc=<optimized out>, argv=<optimized out>) at main.c:734
            #31 0x00007f1fed4f624a in __libc_start_call_main (main=main@entry=0x5555 <main>, argc=argc@entry=2) at libc_start_call_main.h:58
            #32 0x00007f1fed4f6305 in __libc_start_main_impl (main=0x5555 <main>) at libc-start.c:360
            #33 0x0000555555555095 in _start ()
            #34 0x00007f1fed2261b6 in ?? ()
            """)
        self.assertEqual(frame_names(text), [
            "__GI___clock_nanosleep", "pysleep", "time_sleep",
            "py::f3 (/tmp/nest.py:2)", "call_trampoline",
            "py::<module> (/tmp/nest.py:1)", "Py_BytesMain",
            "__libc_start_call_main", "__libc_start_main_impl", "_start",
            "??"])

    def test_lldb(self):
        text = textwrap.dedent("""\
            * thread #1, name = 'python', stop reason = signal SIGSTOP
              * frame #0: 0x00007f1fed5ca503 libc.so.6`__GI___clock_nanosleep(clock_id=1, flags=1) at clock_nanosleep.c:71:10
                frame #1: 0x0000563ab397299a python`time_sleep at timemodule.c:2162:15
                frame #6: 0x00007f1fed2261e6 JIT(0x7f1fed21b000)`py::f3 (/tmp/nest.py:2) + 6
                frame #7: 0x0000563ab38de8d3 python`eval_frame_new_code [inlined] call_trampoline(throwflag=<unavailable>) at perf_trampoline.c:686:21
                frame #18: 0x00007f1fed2261b6 JIT(0x7f1fed21b000)`py::<module> (/tmp/nest.py:1) + 6
                frame #24: 0x0000563ab38f1e11 python`Py_BytesMain(argc=<unavailable>, argv=<unavailable>) at main.c:734:12
                frame #25: 0x00007f1fed4f624a libc.so.6`__libc_start_call_main(main=(python`main at python.c:15), argc=2) at libc_start_call_main.h:58:16
                frame #26: 0x00007f1fed4f6305 libc.so.6`__libc_start_main_impl at libc-start.c:360:3
                frame #27: 0x0000555555555095 python`_start + 37
            """)
        self.assertEqual(frame_names(text), [
            "__GI___clock_nanosleep", "time_sleep",
            "py::f3 (/tmp/nest.py:2)", "eval_frame_new_code",
            "py::<module> (/tmp/nest.py:1)", "Py_BytesMain",
            "__libc_start_call_main", "__libc_start_main_impl", "_start"])


@unittest.skipIf(not HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class DebuggerTests(unittest.TestCase):

    def setUp(self):
        problem = ptrace_problem()
        if problem:
            self.skipTest(problem)
        self.tmp = tempfile.mkdtemp(prefix="test_perf_dbg_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.script = make_script(self.tmp, "nest", NEST)
        self.since = time.time() - 1

    def assert_python_frames(self, text, names=NAMES, form="debugger"):
        """The py:: frames of `names` in order (callee first), each right
        above the native function that called its trampoline, and the
        start-up below them all.  Debuggers show "py::f3 (PATH:LINE)"
        (from the JIT interface), the readers of the arena files
        "py::f3:PATH" (the name perf shows)."""
        frames = frame_names(text)
        lines = {name: i + 1 for i, line in enumerate(NEST.splitlines())
                 for name in names if line.startswith(f"def {name}(")}
        lines["<module>"] = 1
        pos = []
        for name in names:
            if form == "debugger":
                want = f"py::{name} ({self.script}:{lines[name]})"
            else:
                want = f"py::{name}:{self.script}"
            hits = [i for i, f in enumerate(frames) if f == want]
            self.assertTrue(hits, f"no frame {want!r} in:\n{text}")
            pos.append(hits[0])
        self.assertEqual(pos, sorted(pos), text)
        self.assertNotIn("Backtrace stopped", text)
        below = frames[pos[-1] + 1:]
        self.assertTrue(any(f in START for f in below),
                        f"the backtrace does not reach {START}:\n{text}")

    def start(self, backend, script=None, *args):
        """The script (NEST unless `script`, with `args`), sleeping in f3
        under `backend` ("off": none): the Popen."""
        options = [] if backend == "off" else ["-X", backend]
        proc = subprocess.Popen(
            [sys.executable, *options, script or self.script, *args],
            stdout=subprocess.PIPE, text=True, env=env_with())
        forget_process(self, proc)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertEqual(proc.stdout.readline().split()[1], str(proc.pid))
        self.assertEqual(proc.stdout.readline().strip(), "READY")
        return proc

    def gdb(self, *args, python_gdb=False):
        cmd = ["gdb", "-nx", "-batch"]
        if python_gdb:
            where = os.path.dirname(os.path.realpath(sys.executable))
            cmd += ["-iex", f"add-auto-load-safe-path {where}"]
        proc = subprocess.run(cmd + list(args), capture_output=True,
                              text=True, timeout=300)
        self.assertNotIn("Fatal signal", proc.stderr)
        return proc.stdout + proc.stderr

    def test_gdb_attached(self):
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend)
                out = self.gdb("-p", str(proc.pid), "-ex", "bt")
                self.assert_python_frames(out)

    def test_gdb_with_dead_arenas(self):
        # f1 makes and drops 100,000 functions (arenas whose functions all
        # died are retired: their objects for debuggers unregistered and
        # freed), then calls f2 and f3: gdb names every frame, f1's in an
        # arena made before them, f2's and f3's in the newest; the JIT
        # interface's list holds a few objects (43 with perf_jit before
        # dead arenas were retired).
        churned = NEST.replace("import os,", "import types, os,").replace(
            "def f1():\n    f2()\n",
            "def f1():\n"
            "    code = (lambda: None).__code__\n"
            "    for i in range(100_000):\n"
            "        types.FunctionType(code.replace(co_name=f'c{i}'), {})()\n"
            "    f2()\n")
        self.assertNotEqual(churned, NEST)
        # (in NEST's place: the frames' file and lines are the same)
        script = make_script(self.tmp, "nest", churned)
        count = os.path.join(self.tmp, "count.gdb")
        with open(count, "w") as f:
            f.write("set $n = 0\n"
                    "set $e = __jit_debug_descriptor.first_entry\n"
                    "while $e\n"
                    "  set $n = $n + 1\n"
                    "  set $e = $e->next_entry\n"
                    "end\n"
                    'printf "JIT ENTRIES %d\\n", $n\n')
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend, script)
                out = self.gdb("-p", str(proc.pid), "-ex", "bt", "-x", count)
                self.assert_python_frames(out)
                entries = int(re.search(r"JIT ENTRIES (\d+)", out).group(1))
                self.assertLessEqual(entries, 10, out[-2000:])
        # Started by gdb, which then sees the objects go: 6,000 functions
        # under perf_jit (2,730 to an arena) retire two arenas while it
        # watches (every name stops the program in gdb: a few seconds).
        script = make_script(self.tmp, "nest",
                             churned.replace("100_000", "6_000"))
        out = self.gdb("-ex", "run", "-ex", "bt", "-ex", "kill",
                       "--args", sys.executable, "-X", "perf_jit", script,
                       "interrupt")
        for pid in re.findall(r"^PID (\d+)$", out, re.M):
            forget_files(self, int(pid))
        self.assertIn("SIGINT", out)
        self.assert_python_frames(out)

    @support.skip_if_sanitizer("gcore writes no core that gdb can read of "
                               "an AddressSanitizer process (its shadow "
                               "memory)", address=True)
    def test_gdb_core_file(self):
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend)
                core = os.path.join(self.tmp, f"core.{proc.pid}")
                self.gdb("-p", str(proc.pid), "-ex", f"gcore {core}")
                proc.kill()
                self.assertTrue(os.path.exists(core))
                out = self.gdb(sys.executable, core, "-ex", "bt")
                self.assert_python_frames(out)
                # lldb reads the same objects from the core; eu-stack
                # reads the arena files its file mappings name.
                if shutil.which("lldb") is not None:
                    out = subprocess.run(
                        ["lldb", "-b", "-c", core, sys.executable,
                         "-o", "bt"],
                        capture_output=True, text=True, timeout=300).stdout
                    self.assert_python_frames(out)
                if shutil.which("eu-stack") is not None:
                    out = subprocess.run(
                        ["eu-stack", "--core", core, "-e", sys.executable],
                        capture_output=True, text=True, timeout=300).stdout
                    self.assert_python_frames(eu_stack_frames(out),
                                              form="file")

    @support.skip_if_sanitizer("gcore writes no core that gdb can read of "
                               "an AddressSanitizer process (its shadow "
                               "memory)", address=True)
    def test_core_read_with_debuginfod(self):
        # How distributions symbolize crashes for a fleet: the arena files
        # of a process that has ended (killed after gcore, or crashed),
        # served by elfutils' debuginfod
        # (keyed by their build-ids), and its core read elsewhere: here in
        # a mount namespace whose /tmp is empty (the real one seen at
        # /tmp/orig), with a cache of debuginfod's own.  eu-stack names
        # the Python frames through the server, and not without it; gdb
        # names them from the core alone (the debuggers' JIT objects are
        # in the process's memory).
        debuginfod = shutil.which("debuginfod")
        unshare = shutil.which("unshare")
        if debuginfod is None or shutil.which("eu-stack") is None:
            self.skipTest("needs elfutils' debuginfod and eu-stack")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        for backend in BACKENDS:
            for how in ("gcore", "crash"):
                with self.subTest(backend=backend, how=how):
                    self.check_core_with_debuginfod(debuginfod, backend, how)

    def check_core_with_debuginfod(self, debuginfod, backend, how):
        if how == "gcore":
            # (the newest file sealed first: a file that still takes
            # names has no build-id, in the core either)
            proc = self.start(backend, None, "poll")
            seal = subprocess.run(
                [sys.executable, "-m", "perf_trampoline", "seal",
                 str(proc.pid)], capture_output=True, text=True, timeout=60)
            self.assertEqual(seal.returncode, 0, seal.stderr)
            core = os.path.join(self.tmp, f"core.{proc.pid}")
            self.gdb("-p", str(proc.pid), "-ex", f"gcore {core}")
            proc.kill()
            proc.wait()
            pid = proc.pid
        else:
            # a crash (os.abort() in f3): the process seals the file that
            # takes names before the kernel writes its core
            pid, core = self.kernel_core(backend)
        self.assertTrue(os.path.exists(core))
        served = os.path.join(self.tmp, f"served.{backend}.{how}")
        os.mkdir(served)
        ids = []
        for path in arena_paths(pid, self.since):
            shutil.copy(path, served)
            ids.append(build_id_of(path))
        self.assertTrue(ids, "no arena file")
        url = self.serve(debuginfod, served, ids)
        frames = {}
        for with_server in (False, True):
            env = ("DEBUGINFOD_URLS=%s" % url if with_server
                   else "DEBUGINFOD_URLS=")
            cache = os.path.join(self.tmp, f"cache.{backend}.{how}")
            out = self.in_empty_tmp(
                ["env", env, f"DEBUGINFOD_CACHE_PATH={cache}",
                 "eu-stack", "--core", core, "-e", sys.executable])
            frames[with_server] = eu_stack_frames(out)
        self.assert_python_frames(frames[True], form="file")
        self.assertNotIn("py::", frames[False])
        out = self.in_empty_tmp(
            ["gdb", "-nx", "-batch", sys.executable, core, "-ex", "bt"])
        self.assert_python_frames(out)

    def serve(self, debuginfod, directory, ids):
        """Start debuginfod on the ELF files of `directory`; its URL, once
        it serves every build-id of `ids`."""
        import socket
        import urllib.request
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen(
            [debuginfod, "-F", "-p", str(port), "-t", "0", "-g", "0",
             "-d", os.path.join(directory + ".sqlite"), directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(server.wait)
        self.addCleanup(server.terminate)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        waiting = list(ids)
        while waiting:
            self.assertIsNone(server.poll(), "debuginfod ended")
            try:
                with urllib.request.urlopen(
                        f"{url}/buildid/{waiting[0]}/executable",
                        timeout=10) as r:
                    r.read()
                waiting.pop(0)
                continue
            except OSError:
                pass
            self.assertLess(time.monotonic(), deadline,
                            f"debuginfod does not serve {waiting[0]}")
            time.sleep(0.2)
        return url

    def in_empty_tmp(self, cmd):
        """The output of `cmd` (paths under /tmp given as they are) run in
        a mount namespace whose /tmp is a new, empty tmpfs."""
        empty = tempfile.mkdtemp(dir=self.tmp)

        def seen(arg):
            if not arg.startswith("/tmp/"):
                return arg      # (TMPDIR elsewhere)
            return os.path.join("/tmp/orig", os.path.relpath(arg, "/tmp"))
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             'mount -t tmpfs none "$0" && mkdir "$0/orig" && '
             'mount --bind /tmp "$0/orig" && mount --move "$0" /tmp '
             '|| exit 99; exec "$@"', empty]
            + [re.sub(r"(?<![\w/])/tmp/\S*", lambda m: seen(m.group(0)), a)
               for a in cmd],
            capture_output=True, text=True, timeout=300)
        if proc.returncode == 99:
            self.skipTest("cannot mount a tmpfs here: " + proc.stderr)
        return proc.stdout + proc.stderr

    def test_gdb_started_the_program(self):
        # The trampolines are named while gdb watches: the names reach it
        # through registrations made after it attached.
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                out = self.gdb("-ex", "run", "-ex", "bt", "-ex", "kill",
                               "--args", sys.executable, "-X", backend,
                               self.script, "interrupt")
                for pid in re.findall(r"^PID (\d+)$", out, re.M):
                    forget_files(self, int(pid))
                self.assertIn("SIGINT", out)
                self.assert_python_frames(out)

    def test_gdb_started_many_names(self):
        # A chain of 300 functions, each named while gdb watches: names
        # reach it from the arena's object (merged every 128 names) and
        # from the recent names' object; every frame is named, in order.
        chain = ["import os, signal",
                 "def g299(): os.kill(os.getpid(), signal.SIGINT)"]
        chain += [f"def g{i}(): g{i + 1}()" for i in range(298, -1, -1)]
        chain.append("g0()")
        script = make_script(self.tmp, "chain", "\n".join(chain) + "\n")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                out = self.gdb("-ex", "run", "-ex", "bt", "-ex", "kill",
                               "--args", sys.executable, "-X", backend,
                               script)
                for pid in re.findall(r"process (\d+)", out):
                    forget_files(self, int(pid))
                frames = [f for f in frame_names(out)
                          if f.startswith("py::g")]
                want = [f"py::g{i} ({script}:{301 - i})"
                        for i in range(299, -1, -1)]
                self.assertEqual(frames, want, out[-3000:])

    def test_gdb_anonymous_arenas(self):
        # /tmp mounted noexec: no arena file, the trampolines are in
        # anonymous memory and reach gdb from memory alone.  (perf_jit is
        # off there: its dump's marker cannot be mapped executable.)
        noexec_tmp = noexec_tmp_command(self)
        for path in (os.path.realpath(sys.executable), os.getcwd()):
            if path.startswith("/tmp/"):
                self.skipTest(f"{path} is under /tmp, which is mounted over")
        where = tempfile.mkdtemp(dir=os.getcwd())
        self.addCleanup(shutil.rmtree, where, ignore_errors=True)
        self.script = make_script(where, "nest", NEST)
        for backend in ("perf",):
            with self.subTest(backend=backend):
                out = subprocess.run(
                    [*noexec_tmp, "gdb", "-nx", "-batch", "-ex", "run",
                     "-ex", "bt", "-ex", "kill", "--args", sys.executable,
                     "-X", backend, self.script, "interrupt"],
                    capture_output=True, text=True, timeout=300)
                text = out.stdout + out.stderr
                self.assertIn("cannot map it executable", text)
                self.assert_python_frames(text)

    def kernel_core(self, backend):
        """NEST under `backend`, aborted in f3 with cores on: (its pid,
        the core the kernel wrote)."""
        try:
            with open("/proc/sys/kernel/core_pattern") as f:
                pattern = f.read().strip()
        except OSError as exc:
            self.skipTest(f"cannot read the core pattern: {exc}")
        if pattern.startswith("|") or "/" in pattern:
            self.skipTest(f"cores go elsewhere here ({pattern!r})")
        import resource

        def unlimited_core():
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,
                                                      resource.RLIM_INFINITY))
        cwd = tempfile.mkdtemp(dir=self.tmp)
        proc = subprocess.run(
            [sys.executable, "-X", backend, self.script, "abort"],
            cwd=cwd, capture_output=True, text=True, env=env_with(),
            preexec_fn=unlimited_core, timeout=300)
        pid = int(proc.stdout.split()[1])
        forget_files(self, pid)
        self.assertEqual(proc.returncode, -signal.SIGABRT)
        cores = os.listdir(cwd)
        if not cores:
            self.skipTest("the kernel wrote no core here")
        return pid, os.path.join(cwd, cores[0])

    def test_gdb_kernel_core(self):
        # A core the kernel writes (os.abort() in f3): anonymous memory,
        # where the arenas' images are, without the arena files' pages.
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                _, core = self.kernel_core(backend)
                out = self.gdb(sys.executable, core, "-ex", "bt")
                self.assert_python_frames(out)

    def test_py_bt(self):
        where = os.path.dirname(os.path.realpath(sys.executable))
        if not os.path.exists(os.path.join(where, "python-gdb.py")):
            self.skipTest("no python-gdb.py beside the interpreter")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend)
                out = self.gdb("-p", str(proc.pid), "-ex", "py-bt",
                               python_gdb=True)
                found = re.findall(
                    r'File "%s", line \d+, in (\S+)' % re.escape(self.script),
                    out)
                self.assertEqual(found, list(NAMES), out)

    def test_python_gdb_commands(self):
        # py-bt-full lists the same Python frames as with the feature off.
        # 3.11 runs nested Python calls in one evaluator frame, which
        # py-up, py-list and py-locals take as one step; with a backend
        # each Python function has an evaluator frame of its own, so py-up
        # steps through them one by one (as on 3.10) and py-locals shows
        # the selected one's locals.
        where = os.path.dirname(os.path.realpath(sys.executable))
        if not os.path.exists(os.path.join(where, "python-gdb.py")):
            self.skipTest("no python-gdb.py beside the interpreter")
        frame = re.compile(r"^#\d+ Frame 0x[0-9a-f]+, for file (\S+), "
                           r"line \d+, in (\S+) \(\)", re.M)
        commands = ["-ex", "py-bt-full"]
        for _ in NAMES:
            commands += ["-ex", "echo UP\\n", "-ex", "py-up",
                         "-ex", "py-locals"]
        for mode in ("off",) + BACKENDS:
            with self.subTest(mode=mode):
                proc = self.start(mode)
                out = self.gdb("-p", str(proc.pid), *commands,
                               python_gdb=True)
                full, *ups = out.split("UP\n")
                self.assertEqual(frame.findall(full),
                                 [(self.script, name) for name in NAMES],
                                 out)
                if mode == "off":
                    continue
                self.assertEqual(
                    [frame.findall(up) for up in ups],
                    [[(self.script, name)] for name in NAMES], out)
                self.assertEqual(
                    [re.findall(r"^Locals for (\S+)", up, re.M)
                     for up in ups],
                    [[name] for name in NAMES], out)

    def test_lldb_attached(self):
        if shutil.which("lldb") is None:
            self.skipTest("lldb is not installed")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend)
                out = subprocess.run(
                    ["lldb", "-b", "-p", str(proc.pid), "-o", "bt"],
                    capture_output=True, text=True, timeout=300).stdout
                self.assert_python_frames(out)

    def test_eu_stack(self):
        if shutil.which("eu-stack") is None:
            self.skipTest("eu-stack is not installed")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = self.start(backend)
                out = subprocess.run(
                    ["eu-stack", "-p", str(proc.pid)],
                    capture_output=True, text=True, timeout=300).stdout
                self.assert_python_frames(eu_stack_frames(out), form="file")


if __name__ == "__main__":
    unittest.main()
