"""Tests of live activation: `python -m perf_trampoline activate PID`.

The requester (Lib/perf_trampoline.py) is run as a separate process, as
a user runs it, against targets this module starts: processes of this
interpreter in the states that matter (busy, blocked in select(), started
with -X perf, opted out, of another user, non-dumpable, exiting), and
processes that must be left alone (sleep, Debian's stock python3.11).
The tests with real perf are in test_perf_live_perf, which takes the
targets and helpers from here.
"""

import contextlib
import os
import pwd
import re
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import unittest

from test.support import import_helper
from test.support import perf_helper as ph

if not sys.platform.startswith("linux"):
    raise unittest.SkipTest("live activation uses /proc: Linux only")

import _perf_live as pt
import perf_trampoline
from test.test_perf_profiler.test_arena_files import symbols

# configure --without-remote-debug leaves the control block out: the
# tests that need it check then that the requester says so instead.  The
# skip follows what configure was asked, so that a build that leaves the
# block out by mistake fails them.
CONFIGURED_WITHOUT = "--without-remote-debug" in (
    sysconfig.get_config_var("CONFIG_ARGS") or "")
HAVE_LIVE = not CONFIGURED_WITHOUT
NO_LIVE = "configured --without-remote-debug: no control block"
# Line trampolines (-X perf_lines): x86-64 builds with the second
# evaluator.
HAVE_LINES = bool(sysconfig.get_config_var("PY_HAVE_PERF_LINES"))
NO_LINES = "no line trampoline on this platform (PY_HAVE_PERF_LINES)"
STOCK_311 = "/usr/bin/python3.11"
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
try:
    NOBODY_UID = pwd.getpwnam("nobody").pw_uid
except KeyError:
    NOBODY_UID = None

# A target prints its pid and "READY" once it runs its main loop, then
# does what its `body` says.
PRELUDE = textwrap.dedent("""\
    import os, select, sys, time
    print("PID", os.getpid(), flush=True)
    """)

# Busy: calls hot_function() in a loop until stdin closes (checked with a
# zero-timeout select, so the loop is all Python code).
BUSY = PRELUDE + textwrap.dedent("""\
    def hot_function(n):
        total = 0
        for i in range(n):
            total += i * i
        return total

    def main():
        print("READY", flush=True)
        while True:
            hot_function(2000)
            r, _, _ = select.select([sys.stdin], [], [], 0)
            if r:
                line = sys.stdin.readline()
                if not line:
                    break
                print("ACTIVE", sys.is_stack_trampoline_active(), flush=True)
    main()
    """)

# Blocked: waits in select() for a line on stdin, then runs a little
# Python code and says whether the trampoline is active; again on every
# line, until stdin closes.
BLOCKED = PRELUDE + textwrap.dedent("""\
    print("READY", flush=True)
    while True:
        select.select([sys.stdin], [], [])
        line = sys.stdin.readline()
        if not line:
            break
        for _ in range(1000):
            pass
        print("ACTIVE", sys.is_stack_trampoline_active(), flush=True)
    """)


def clean_env(**extra):
    return ph.env_with(**extra)


def requester(*args, user=None, timeout=60, python=None):
    """Run `python -m perf_trampoline ARGS`; returns (CompletedProcess,
    monotonic time before, monotonic time after)."""
    # the module under test, run as `python -m perf_trampoline` runs it
    cmd = [python or sys.executable, perf_trampoline.__file__, *map(str, args)]
    if user == "nobody":
        cmd = NOBODY + cmd
    before = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env=clean_env(), timeout=timeout)
    return proc, before, time.monotonic()


def nobody_problem():
    if os.geteuid() != 0:
        return "not root: cannot run a process as nobody"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    probe = subprocess.run(NOBODY + [sys.executable, "-c", "import os; "
                                     "print(os.geteuid())"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        return "cannot run this interpreter as nobody here: " + probe.stderr
    return None


class TargetMixin:
    def setUp(self):
        self.since = time.time() - 1

    def start(self, code, *xargs, env=None, prefix=(), python=None,
              script=None):
        """Start a target (`code`, or the file `script` if given); returns
        (Popen, pid) once it printed READY."""
        cmd = [*prefix, python or sys.executable, *xargs,
               *((script,) if script else ("-c", code))]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=env if env is not None else clean_env())
        self.forget(proc)
        pid = None
        for line in proc.stdout:
            m = re.match(r"PID (\d+)$", line.strip())
            if m:
                pid = int(m.group(1))
            if line.strip() == "READY":
                break
        else:
            proc.wait()
            self.fail("target did not start: " + proc.stderr.read())
        return proc, pid

    def forget(self, proc):
        """Stop the target `proc` after the test and remove its files;
        returns the list of perf_helper.forget_process for the pids of
        the processes it forks."""
        forked = ph.forget_process(self, proc)
        self.addCleanup(ph.stop_process, proc)
        return forked

    def wait_in_select(self, pid):
        """Wait until the main thread of `pid` (BLOCKED, after READY)
        sleeps in select(): between READY and the call it still runs
        bytecodes, and would serve a request at once."""
        for _ in range(1000):
            try:
                with open(f"/proc/{pid}/wchan") as f:
                    wchan = f.read()
            except OSError:
                wchan = ""
            if "poll" in wchan or "select" in wchan:
                return
            time.sleep(0.01)
        self.fail(f"process {pid} does not wait in select(): {wchan!r}")

    @contextlib.contextmanager
    def woken_when_asked(self, proc, pid, code=pt.REQ_PERF):
        """Within the block, a thread wakes the target `proc` (BLOCKED)
        once request `code` is visible in its block: the target serves it
        then, however long the requester takes to start (a fixed delay
        may wake it before the request arrives).  The target prints its
        ACTIVE line after."""
        asked = threading.Event()
        done = threading.Event()

        def wake():
            while not done.is_set():
                if self.block(pid).request == code:
                    asked.set()
                    proc.stdin.write("?\n")
                    proc.stdin.flush()
                    return
                time.sleep(0.01)
        waker = threading.Thread(target=wake)
        waker.start()
        try:
            yield
        finally:
            done.set()
            waker.join()
        self.assertTrue(asked.is_set(), f"no request {code} in the block")

    def ask_active(self, proc):
        """Whether the target (BUSY or BLOCKED) says it is active."""
        proc.stdin.write("?\n")
        proc.stdin.flush()
        line = proc.stdout.readline().split()
        self.assertEqual(line[:1], ["ACTIVE"], line)
        return line[1] == "True"

    def finish(self, proc):
        """Close the target's stdin; it must exit 0 with no traceback."""
        out, err = proc.communicate(timeout=60)  # closes stdin
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn("Traceback", err)
        return err

    def block(self, pid):
        with pt.Target(pid, write=False) as t:
            return t.snapshot()


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
class TestNotTaking(TargetMixin, unittest.TestCase):
    """Processes that take no request: each gets one clear message, a
    non-zero exit, and no write."""

    def test_help(self):
        proc = subprocess.run([sys.executable, "-m", "perf_trampoline",
                               "--help"], capture_output=True, text=True,
                              env=clean_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for command in ("activate", "deactivate", "status"):
            self.assertIn(command, proc.stdout)

    def test_bad_timeout(self):
        # refused by argparse (usage, exit 2) before any process is read
        for value in ("-1", "-0.5", "nan", "soon"):
            for command in ("activate", "deactivate"):
                with self.subTest(command=command, timeout=value):
                    proc, _, _ = requester(command, "--timeout", value, 1)
                    self.assertEqual(proc.returncode, 2, proc.stderr)
                    self.assertEqual(proc.stdout, "")
                    self.assertIn("usage:", proc.stderr)
                    self.assertIn("argument --timeout: ", proc.stderr)
                    self.assertIn(repr(value), proc.stderr)

    def test_configured_as_asked(self):
        self.assertEqual(bool(sysconfig.get_config_var("Py_REMOTE_DEBUG")),
                         not CONFIGURED_WITHOUT)

    def test_no_such_pid(self):
        # a pid above pid_max cannot exist
        with open("/proc/sys/kernel/pid_max") as f:
            pid = int(f.read()) + 1
        proc, _, _ = requester("activate", pid)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(f"process {pid} does not exist", proc.stderr)
        proc, _, _ = requester("status", pid)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("does not exist", proc.stdout + proc.stderr)
        # the reason, for callers (record), by its class
        self.assertIsInstance(pt.status(pid).error, pt.ProcessGone)
        self.assertIsInstance(pt.activate(pid).error, pt.ProcessGone)

    def check_left_alone(self, proc, pid):
        for command in ("activate", "deactivate", "status"):
            out, _, _ = requester(command, pid)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn(f"process {pid} is not a Python with live perf "
                          f"activation", out.stdout + out.stderr)
            self.assertIsNone(proc.poll())
        error = pt.status(pid).error
        self.assertIsInstance(error, pt.NoBlock)
        self.assertNotIsInstance(error, pt.CopiedBlock)

    def test_not_a_python(self):
        # (Popen returns once the child has run exec(): no copy of this
        # interpreter is left to find)
        proc = subprocess.Popen(["sleep", "60"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.check_left_alone(proc, proc.pid)
        self.assertIsNone(proc.poll())

    @unittest.skipUnless(os.path.exists(STOCK_311), f"no {STOCK_311}")
    def test_stock_python(self):
        # The stock interpreter computes a sum before and after the
        # requests: the same result, and it exits normally.
        code = PRELUDE + textwrap.dedent("""\
            def work():
                return sum(i * i for i in range(100000))
            first = work()
            print("READY", flush=True)
            sys.stdin.readline()
            print("SAME", work() == first, flush=True)
            """)
        proc, pid = self.start(code, "-I", python=STOCK_311)
        self.check_left_alone(proc, pid)
        out, err = proc.communicate("\n", timeout=60)
        self.assertEqual(out.split(), ["SAME", "True"], err)
        self.assertEqual(proc.returncode, 0)
        self.assertFalse(os.path.exists(ph.map_path(pid))
                         and ph.written_since(ph.map_path(pid), self.since))

    @unittest.skipIf(HAVE_LIVE, "this build has the control block")
    def test_built_without(self):
        proc, pid = self.start(BUSY)
        out, _, _ = requester("activate", pid)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(f"live activation is disabled in process {pid}",
                      out.stderr)
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def test_exits_while_asked(self):
        # Blocked in pause() until SIGALRM kills it: it never runs Python
        # code again, and exits while the requester waits.
        code = PRELUDE + textwrap.dedent("""\
            import signal
            print("READY", flush=True)
            signal.alarm(1)
            signal.pause()
            """)
        proc, pid = self.start(code)
        out, before, after = requester("activate", "--timeout", 30, pid)
        self.assertNotEqual(out.returncode, 0)
        # (an exit during the lookup, too, is "has exited", never "not a
        # Python")
        self.assertRegex(out.stderr, rf"^{pid}: .*(has exited|does not "
                         rf"exist)")
        self.assertEqual(proc.wait(timeout=30), -signal.SIGALRM)
        # it did not wait for the timeout
        self.assertLess(after - before, 30)

    @unittest.skipUnless(HAVE_LIVE, NO_LIVE)
    def test_finalizing(self):
        # libc's pause() as a C exit handler (glibc exports atexit() as
        # __cxa_atexit()): it runs after Py_FinalizeEx(), so the process
        # stays "finalizing" until killed.
        code = PRELUDE + textwrap.dedent("""\
            import ctypes
            libc = ctypes.CDLL("libc.so.6")
            pause = ctypes.cast(libc.pause, ctypes.c_void_p)
            if libc.__cxa_atexit(pause, None, None) != 0:
                raise SystemExit("__cxa_atexit() failed")
            print("READY", flush=True)
            """)
        proc, pid = self.start(code)
        for _ in range(1000):
            if self.block(pid).state == pt.STATE_FINALIZING:
                break
            time.sleep(0.01)
        out, _, _ = requester("status", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split()[:2], [f"{pid}:", "finalizing"])
        for wait in ((), ("--wait",)):
            out, _, _ = requester("activate", *wait, pid)
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertEqual(out.stderr.strip(),
                             f"{pid}: process {pid} is finalizing (exiting)")
        block = self.block(pid)
        self.assertEqual(block.request, 0)      # nothing was written
        self.assertEqual(block.eval_breaker, 0)
        proc.kill()
        proc.wait()


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestRequests(TargetMixin, unittest.TestCase):

    def activate_ok(self, pid, *options, backend="perf"):
        out, before, after = requester("activate", "--backend", backend,
                                       *options, pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        path = ph.map_path(pid) if backend == "perf" else ph.jit_path(pid)
        self.assertEqual(out.stdout.strip(), f"{pid}: {backend} {path}")
        return before, after

    def test_busy(self):
        proc, pid = self.start(BUSY)
        self.assertFalse(self.ask_active(proc))
        self.activate_ok(pid)
        self.assertTrue(self.ask_active(proc))
        block = self.block(pid)
        self.assertEqual(block.active, 1)
        self.assertEqual(block.file, ph.map_path(pid))
        self.assertEqual(block.request, 0)
        self.assertTrue(any(n.startswith("py::hot_function:")
                            for n in ph.named_functions(pid, self.since)))
        out, _, _ = requester("status", pid)
        self.assertEqual(out.returncode, 0)
        self.assertIn(f"{pid}: ready active perf {ph.map_path(pid)}",
                      out.stdout)
        out, _, _ = requester("deactivate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), f"{pid}: deactivated")
        self.assertFalse(self.ask_active(proc))
        self.assertEqual(self.block(pid).active, 0)
        self.finish(proc)

    def test_never_releases_the_gil(self):
        # A loop of pure Python code that never releases the GIL (which
        # would recompute the eval breaker, and find the request that
        # way): only the requester's write of the eval breaker reaches it.
        code = PRELUDE + textwrap.dedent("""\
            def hot_function(n):
                return sum(i * i for i in range(n))
            def main():
                print("READY", flush=True)
                end = time.monotonic() + 60
                while time.monotonic() < end:
                    hot_function(200)
                    if sys.is_stack_trampoline_active():
                        break
                print("ACTIVE", sys.is_stack_trampoline_active(), flush=True)
                sys.stdin.read()
            main()
            """)
        proc, pid = self.start(code)
        self.activate_ok(pid, "--timeout", 30)
        self.assertEqual(proc.stdout.readline().split(), ["ACTIVE", "True"])
        self.finish(proc)

    def test_sub_interpreter_does_not_serve(self):
        # While the main interpreter's thread waits in select(), another
        # thread runs Python code in a sub-interpreter: the request waits
        # for the main interpreter.  (In 3.11 the sub-interpreter's loop
        # keeps the GIL from the main thread until it ends, so it is kept
        # short, and starts once the main thread waits in select().)
        code = BLOCKED.replace('print("READY", flush=True)', textwrap.dedent(
            """\
            import _xxsubinterpreters as interpreters, threading
            sub = interpreters.create()
            LOOP = ("import os, time\\n"
                    "time.sleep(0.5)\\n"
                    "os.write(1, b'SUB\\\\n')\\n"
                    "end = time.monotonic() + 4\\n"
                    "while time.monotonic() < end:\\n"
                    "    sum(range(100))\\n"
                    # the GIL released and taken again: take_gil()
                    # recomputes this interpreter's eval_breaker
                    "    time.sleep(0)\\n")
            print("READY", flush=True)
            threading.Thread(target=interpreters.run_string,
                             args=(sub, LOOP), daemon=True).start()"""))
        proc, pid = self.start(code)
        self.assertEqual(proc.stdout.readline(), "SUB\n")
        self.wait_in_select(pid)
        out, _, _ = requester("activate", "--wait", "--timeout", 1, pid)
        self.assertEqual(out.returncode, pt.EXIT_PENDING, out.stderr)
        self.assertEqual(out.stderr.strip(), f"{pid}: {pt.PENDING_TEXT}")
        self.assertEqual(self.block(pid).request, pt.REQ_PERF)
        self.assertTrue(self.ask_active(proc))
        # (not finish(): 3.11 aborts at exit on a sub-interpreter that a
        # daemon thread still holds)
        proc.kill()

    def test_file_cannot_be_made(self):
        # A symbolic link where the map goes: the process does not follow
        # it, warns on its own stderr, stays off; the requester reports it.
        proc, pid = self.start(BUSY)
        path = ph.map_path(pid)
        if os.path.lexists(path):
            self.skipTest(f"{path} exists already (another process's)")
        os.symlink("/nonexistent/perf-live-test", path)
        self.addCleanup(os.unlink, path)
        out, _, _ = requester("activate", pid)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr, rf"^{pid}: perf not activated: its "
                                     rf"file could not be made \(")
        block = self.block(pid)
        self.assertEqual(block.result, pt.RESULT_NO_FILE)
        self.assertNotEqual(block.error, 0)
        self.assertFalse(self.ask_active(proc))
        self.assertEqual(block.active, 0)
        err = self.finish(proc)
        self.assertIn("RuntimeWarning", err)
        self.assertTrue(os.path.islink(path))

    def test_container(self):
        # A process in pid and mount namespaces of its own, with a /tmp of
        # its own: its block names it pid 1, and its file is /tmp/perf-1.map
        # in its /tmp.
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            self.skipTest("needs root and unshare")
        if os.path.realpath(sys.executable).startswith("/tmp/"):
            # (the container's own /tmp would hide it)
            self.skipTest("the interpreter lives under /tmp")
        unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--mount",
                   "--propagation", "private"]
        probe = subprocess.run(unshare + ["sh", "-c",
                                          "mount -t tmpfs none /tmp"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest("cannot make namespaces here: " + probe.stderr)
        inner = ["sh", "-c", 'mount -t tmpfs none /tmp && exec "$@"', "sh"]
        proc, inner_pid = self.start(BUSY, prefix=unshare + inner)
        self.assertEqual(inner_pid, 1)
        kids = pt.children_of(proc.pid)
        self.assertEqual(len(kids), 1, kids)
        pid = kids[0]
        out, _, _ = requester("activate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), f"{pid}: perf /tmp/perf-1.map")
        self.assertTrue(self.ask_active(proc))
        self.assertEqual(self.block(pid).pid, 1)
        self.finish(proc)

    def test_activate_twice(self):
        proc, pid = self.start(BUSY)
        self.activate_ok(pid)
        before = ph.read_map_file(ph.map_path(pid))
        self.activate_ok(pid)
        self.assertTrue(self.ask_active(proc))
        after = ph.read_map_file(ph.map_path(pid))
        # the file goes on, it is not started again
        self.assertEqual(after[:len(before)], before)
        self.finish(proc)

    def test_deactivate_when_off(self):
        proc, pid = self.start(BUSY)
        out, _, _ = requester("deactivate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), f"{pid}: deactivated")
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def test_switch_backend(self):
        proc, pid = self.start(BUSY)
        self.activate_ok(pid)
        self.activate_ok(pid, backend="perf_jit")
        self.assertEqual(self.block(pid).active, 2)
        self.finish(proc)
        ph.read_jitdump(ph.jit_path(pid), pid)

    def test_blocked_for_the_whole_timeout(self):
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        # Pending is delivered: success, unless the caller waits.
        out, before, after = requester("activate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), f"{pid}: {pt.PENDING_TEXT}")
        self.assertEqual(out.stderr, "")
        self.assertLess(after - before, pt.CLI_TIMEOUT + 10)
        out, _, _ = requester("activate", "--wait", "--timeout", 1, pid)
        self.assertEqual(out.returncode, pt.EXIT_PENDING, out.stderr)
        self.assertEqual(out.stderr.strip(), f"{pid}: {pt.PENDING_TEXT}")
        self.assertEqual(out.stdout, "")
        block = self.block(pid)
        self.assertEqual(block.request, pt.REQ_PERF)
        out, _, _ = requester("status", pid)
        self.assertIn("(request perf pending)", out.stdout)
        # it runs: the pending request is served
        self.assertTrue(self.ask_active(proc))
        block = self.block(pid)
        self.assertEqual(block.request, 0)
        self.assertEqual(block.served_id, block.request_id)
        self.assertEqual(block.active, 1)
        self.finish(proc)

    def test_blocked_then_woken(self):
        # The requester waits; the target wakes up meanwhile.
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        with self.woken_when_asked(proc, pid):
            self.activate_ok(pid, "--timeout", 60)
        self.assertEqual(proc.stdout.readline().split(), ["ACTIVE", "True"])
        self.finish(proc)

    def test_idle_pre_fork_server(self):
        # A master and two workers, all waiting in select(): `activate
        # --children MASTER && perf record ...` must go on at once, and
        # each process serves the request when it next runs.
        code = PRELUDE + textwrap.dedent("""\
            workers = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    workers = None
                    break
                workers.append(pid)
            if workers is not None:
                print("WORKERS", *workers, flush=True)
                print("READY", flush=True)
            select.select([sys.stdin], [], [])
            for _ in range(1000):
                pass
            print("ACTIVE", os.getpid(), sys.is_stack_trampoline_active(),
                  flush=True)
            if workers:
                for pid in workers:
                    os.waitpid(pid, 0)
            """)
        proc = subprocess.Popen([sys.executable, "-c", code],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        forked = self.forget(proc)
        master = int(proc.stdout.readline().split()[1])
        workers = [int(w) for w in proc.stdout.readline().split()[1:]]
        forked += workers
        self.assertEqual(proc.stdout.readline(), "READY\n")
        for pid in [master] + workers:
            self.wait_in_select(pid)
        out, before, after = requester("activate", "--children", master)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stderr, "")
        self.assertEqual(sorted(out.stdout.splitlines()),
                         sorted(f"{pid}: {pt.PENDING_TEXT}"
                                for pid in [master] + workers))
        self.assertLess(after - before, pt.CLI_TIMEOUT + 10)
        stdout, err = proc.communicate(timeout=60)  # wakes all three
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(sorted(stdout.splitlines()),
                         sorted(f"ACTIVE {pid} True"
                                for pid in [master] + workers))

    def test_garbage_request(self):
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        with pt.Target(pid) as t:
            t.send(77, 12345)
        out, _, _ = requester("status", pid)
        self.assertEqual(out.returncode, 0)
        self.assertIn("(unknown request code 77 in the block)", out.stdout)
        self.assertFalse(self.ask_active(proc))
        block = self.block(pid)
        self.assertEqual(block.request, 0)
        self.assertEqual(block.served_id, 12345)
        self.assertEqual(block.result, pt.RESULT_UNKNOWN)
        out, _, _ = requester("status", pid)
        self.assertIn("(last request had an unknown code)", out.stdout)
        # and it still takes requests
        self.wait_in_select(pid)
        with self.woken_when_asked(proc, pid):
            self.activate_ok(pid, "--timeout", 60)
        self.assertEqual(proc.stdout.readline().split(), ["ACTIVE", "True"])
        self.finish(proc)

    def test_two_requesters(self):
        proc, pid = self.start(BUSY)
        cmd = [sys.executable, perf_trampoline.__file__, "activate", str(pid)]
        for _ in range(5):
            both = [subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=clean_env()) for _ in range(2)]
            for p in both:
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 0, err)
                self.assertEqual(out.strip(),
                                 f"{pid}: perf {ph.map_path(pid)}")
        self.assertTrue(self.ask_active(proc))
        self.finish(proc)

    def test_served_request_is_echoed(self):
        # The block says which code it served with the id: a requester
        # whose id went with another requester's code does not count it
        # as its own.
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        with pt.Target(pid) as t:
            self.assertEqual(t.size, pt.BLOCK.size)
            t.send(pt.REQ_PERF_JIT, 4242)
        self.assertTrue(self.ask_active(proc))
        block = self.block(pid)
        self.assertEqual((block.served_id, block.served_request),
                         (4242, pt.REQ_PERF_JIT))
        self.finish(proc)

    def test_mixed_up_ids_are_not_success(self):
        # Two requesters wrote at once: the process served perf_jit under
        # the id of the one that asked for perf.  That one must not report
        # success; it sends its request again, and gets perf.
        proc, pid = self.start(BUSY)
        req = pt._Request.__new__(pt._Request)
        req.pid, req.code, req.resends = pid, pt.REQ_PERF, 0
        req.replaced_at = req.outcome = req.sent_at = None
        req.target = pt.Target(pid)
        req.rid = 777
        req.target.send(pt.REQ_PERF_JIT, 777)
        deadline = time.monotonic() + 60
        while self.block(pid).served_id != 777:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        while req.outcome is None and time.monotonic() < deadline:
            req.step()
            time.sleep(0.01)
        self.assertTrue(req.outcome.ok, req.outcome.text)
        self.assertEqual(req.outcome.text, f"{pid}: perf {ph.map_path(pid)}")
        self.assertEqual(req.resends, 1)
        self.assertEqual(self.block(pid).active, pt.REQ_PERF)
        self.finish(proc)

    def test_random_request_ids(self):
        ids = {pt._new_request_id() for _ in range(100)}
        self.assertEqual(len(ids), 100)
        self.assertNotIn(0, ids)
        # not derived from our pid (a reused pid would match a stale id)
        self.assertGreater(len({i >> 32 for i in ids}), 90)

    def test_audit_hook_refuses(self):
        code = BUSY.replace("def main():", textwrap.dedent("""\
            seen = []
            def hook(event, args):
                if event == "cpython.perf_trampoline.live_request":
                    seen.append(args)
                    if args[0] == "perf_jit":
                        raise RuntimeError("not here, please")
            sys.addaudithook(hook)
            def main():"""))
        proc, pid = self.start(code)
        out, _, _ = requester("activate", "--backend", "perf_jit", pid)
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(out.stderr.strip(),
                         f"{pid}: refused: not here, please")
        self.assertEqual(self.block(pid).active, 0)
        self.assertFalse(self.ask_active(proc))
        self.activate_ok(pid)
        self.finish(proc)

    def test_poke_only_into_writable_data(self):
        # A block whose eval breaker points at read-only memory (here the
        # ELF header of the mapping that holds the block): nothing is
        # written there, and the requester says why.
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        with pt.Target(pid) as t:
            rows = pt.maps_rows(pid)
            path = [r.path for r in rows if r.start <= t.addr < r.end][0]
            header = min(r.start for r in rows if r.path == path)
            before = t.mem.read(header, 4)
            t.put("eval_breaker", header)
        out, _, _ = requester("activate", "--timeout", 1, pid)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("outside the interpreter's writable data",
                      out.stderr)
        with pt.Target(pid, write=False) as t:
            self.assertEqual(t.mem.read(header, 4), before)
        self.assertEqual(before, b"\x7fELF")
        # and no request was left in the block, to be served later
        self.assertEqual(self.block(pid).request, 0)
        proc.kill()

    def test_started_with_X_perf(self):
        proc, pid = self.start(BUSY, "-X", "perf")
        out, _, _ = requester("status", pid)
        self.assertIn(f"{pid}: ready active perf {ph.map_path(pid)}",
                      out.stdout)
        self.activate_ok(pid)
        self.assertTrue(self.ask_active(proc))
        self.finish(proc)

    def test_turned_off_by_its_code(self):
        code = BUSY.replace('print("READY"',
                            'sys.deactivate_stack_trampoline(); '
                            'print("READY"')
        proc, pid = self.start(code, "-X", "perf")
        out, _, _ = requester("status", pid)
        self.assertIn(f"{pid}: ready active none", out.stdout)
        self.assertEqual(self.block(pid).file, "")
        self.activate_ok(pid)
        self.assertTrue(self.ask_active(proc))
        self.finish(proc)

    def test_refused_under_pep523_evaluator(self):
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        if not hasattr(_testinternalcapi, "set_eval_frame_record"):
            self.skipTest("_testinternalcapi has no set_eval_frame_record")
        code = BUSY.replace("def main():", textwrap.dedent("""\
            import _testinternalcapi
            _testinternalcapi.set_eval_frame_record([])
            def main():"""))
        proc, pid = self.start(code)
        out, _, _ = requester("activate", pid)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr, rf"^{pid}: refused: .*PEP 523")
        block = self.block(pid)
        self.assertEqual(block.result, pt.RESULT_REFUSED)
        self.assertEqual(block.active, 0)
        out, _, _ = requester("status", pid)
        self.assertIn("(last request refused: ", out.stdout)
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def check_disabled(self, proc, pid):
        for command in ("activate", "deactivate"):
            out, _, _ = requester(command, pid)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn(f"live activation is disabled in process {pid}",
                          out.stderr)
        block = self.block(pid)
        self.assertEqual(block.state, pt.STATE_DISABLED)
        self.assertEqual((block.request, block.request_id), (0, 0))
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def test_disabled_by_option(self):
        self.check_disabled(*self.start(BUSY, "-X", "disable_remote_debug"))

    def test_disabled_decided_by_the_process(self):
        # A requester that rewrites the block's state to "ready" does not
        # undo the process's opt-out: the decision is in its own memory.
        # (The request is served when the breaker is next recomputed, here
        # by a second thread's requests for the GIL.)
        code = BUSY.replace("def main():", textwrap.dedent("""\
            import threading
            def spin():
                while True:
                    sum(range(1000))
            threading.Thread(target=spin, daemon=True).start()
            def main():"""))
        proc, pid = self.start(code, "-X", "disable_remote_debug")
        with pt.Target(pid) as t:
            t.put("state", pt.STATE_READY)
            t.put("request_id", 99)
            t.put("request", pt.REQ_PERF)
        deadline = time.monotonic() + 60
        while self.block(pid).served_id != 99:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        block = self.block(pid)
        self.assertEqual(block.result, pt.RESULT_REFUSED)
        self.assertEqual(block.message,
                         "live activation is disabled in this process")
        self.assertEqual(block.active, 0)
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def test_disabled_by_variable(self):
        self.check_disabled(*self.start(
            BUSY, env=clean_env(PYTHON_DISABLE_REMOTE_DEBUG="1")))

    def test_variable_ignored_under_E(self):
        proc, pid = self.start(BUSY, "-E",
                               env=clean_env(PYTHON_DISABLE_REMOTE_DEBUG="1"))
        self.activate_ok(pid)
        self.finish(proc)

    def test_forked_child(self):
        # The child has a block of its own (its pid) and no pending
        # request; it takes requests like its parent.
        code = BUSY.replace("def main():", textwrap.dedent("""\
            if os.fork() == 0:
                print("PID", os.getpid(), flush=True)
            def main():"""))
        proc = subprocess.Popen([sys.executable, "-c", code],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        forked = self.forget(proc)
        pids = []
        while len(pids) < 2:
            pids += [int(x) for x in re.findall(r"PID (\d+)",
                                                proc.stdout.readline())]
        parent, child = pids
        forked.append(child)
        block = self.block(child)
        self.assertEqual(block.pid, child)
        self.assertEqual(block.request, 0)
        self.activate_ok(child)
        self.assertEqual(self.block(parent).active, 0)

    def test_forked_with_a_request_pending(self):
        # A request is in the parent's block when it forks: the child must
        # not serve it (it was sent to the parent), the parent still must.
        # The parent spins on a flag in its own memory, holding the GIL:
        # nothing recomputes its eval_breaker, so the request, written
        # here without the poke, waits there until the fork.
        code = PRELUDE + textwrap.dedent("""\
            import ctypes
            flag = ctypes.c_int(0)
            print("FLAG", ctypes.addressof(flag), flush=True)
            print("READY", flush=True)
            while not flag.value:
                pass
            pid = os.fork()
            if pid == 0:
                os.write(1, b"CHILD %d\\n" % os.getpid())
                select.select([sys.stdin], [], [])
                for _ in range(1000):
                    pass
                print("CHILD-ACTIVE", sys.is_stack_trampoline_active(),
                      flush=True)
                os._exit(0)
            os.waitpid(pid, 0)
            for _ in range(1000):
                pass
            print("PARENT-ACTIVE", sys.is_stack_trampoline_active(),
                  flush=True)
            """)
        # Once in a while (seen on a loaded machine), the parent's breaker
        # is recomputed while it spins all the same, and it serves the
        # request before the flag lets it fork: tried again then, up to 3
        # times.
        for attempt in range(3):
            proc = subprocess.Popen([sys.executable, "-c", code],
                                    stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env=clean_env())
            forked = self.forget(proc)
            parent = int(proc.stdout.readline().split()[1])
            flag = int(proc.stdout.readline().split()[1])
            self.assertEqual(proc.stdout.readline(), "READY\n")
            rid = 0x5eed0000f00d
            with pt.Target(parent) as t:
                t.put("request_id", rid)
                t.put("request", pt.REQ_PERF)
                served_early = t.snapshot().served_id == rid
                t.mem.write(flag, struct.pack("=i", 1))
            child = int(proc.stdout.readline().split()[1])
            forked.append(child)
            block = self.block(child)
            if not served_early:
                break
            proc.communicate(timeout=60)
        self.assertEqual(block.pid, child)
        self.assertEqual(block.request, 0)
        self.assertNotEqual(block.served_id, rid)
        stdout, err = proc.communicate(timeout=60)  # wakes the child
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(stdout.splitlines(), ["CHILD-ACTIVE False",
                                               "PARENT-ACTIVE True"])


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestLines(TargetMixin, unittest.TestCase):
    """activate --lines / --no-lines: line trampolines asked for from
    outside, as sys.activate_stack_trampoline(backend, lines=...) asks for
    them inside (the samples are test_perf_live_perf's)."""

    def activate(self, pid, *options):
        out, _, _ = requester("activate", *options, pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def trampoline_sizes(self, pid, function):
        """The sizes of the symbols of `function` in the trampoline files
        of `pid` (ended): 64 bytes or more for a line trampoline (it
        covers its pads), 16 or less for a plain one."""
        return {size for path in ph.arena_paths(pid, self.since)
                for name, (_, size) in symbols(path).items()
                if name.startswith(f"py::{function}:")}

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_on_kept_and_off(self):
        proc, pid = self.start(BUSY)
        lines_on = f"{pid}: perf {ph.map_path(pid)} (lines on)"
        self.assertEqual(self.activate(pid, "--lines"), lines_on)
        self.assertTrue(self.ask_active(proc))
        block = self.block(pid)
        self.assertEqual((block.active, block.lines), (1, 1))
        self.assertEqual(block.served_request, pt.REQ_PERF | pt.REQ_LINES_ON)
        out, _, _ = requester("status", pid)
        self.assertIn(f"{pid}: ready active perf {ph.map_path(pid)} "
                      "(lines on)", out.stdout)
        # A request without a lines bit (what older requesters send)
        # keeps them.
        self.assertEqual(self.activate(pid), lines_on)
        self.assertEqual(self.block(pid).lines, 1)
        self.assertEqual(self.activate(pid, "--no-lines"),
                         f"{pid}: perf {ph.map_path(pid)}")
        self.assertEqual(self.block(pid).lines, 0)
        out, _, _ = requester("status", pid)
        self.assertNotIn("lines", out.stdout)
        self.assertTrue(self.ask_active(proc))
        self.assertEqual(self.activate(pid, "--lines"), lines_on)
        out, _, _ = requester("deactivate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        block = self.block(pid)
        self.assertEqual((block.active, block.lines), (0, 0))
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)
        # hot_function was called under each: a line trampoline, then a
        # plain one after --no-lines.
        sizes = self.trampoline_sizes(pid, "hot_function")
        self.assertTrue([s for s in sizes if s >= 64], sizes)
        self.assertTrue([s for s in sizes if s < 64], sizes)

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines_of_a_process_started_with_them(self):
        proc, pid = self.start(BUSY, "-X", "perf_lines")
        out, _, _ = requester("status", pid)
        self.assertIn("(lines on)", out.stdout)
        # as sys.activate_stack_trampoline("perf_jit") would: without them
        out, _, _ = requester("activate", "--backend", "perf_jit", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(),
                         f"{pid}: perf_jit {ph.jit_path(pid)}")
        self.assertEqual(self.block(pid).lines, 0)
        self.finish(proc)

    def test_perf_jit_with_lines(self):
        # As sys.activate_stack_trampoline("perf_jit", lines=True): the
        # jitdump backend with line trampolines where the build has them,
        # refused with the ValueError's text where it has not.
        proc, pid = self.start(BUSY)
        out, _, _ = requester("activate", "--backend", "perf_jit", "--lines",
                              pid)
        block = self.block(pid)
        if HAVE_LINES:
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.strip(),
                             f"{pid}: perf_jit {ph.jit_path(pid)} (lines on)")
            self.assertEqual((block.active, block.lines), (2, 1))
            self.assertTrue(self.ask_active(proc))
        else:
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertEqual(out.stderr.strip(), f"{pid}: refused: perf "
                             "lines not available on this platform")
            self.assertEqual((block.result, block.active, block.lines),
                             (pt.RESULT_REFUSED, 0, 0))
            self.assertFalse(self.ask_active(proc))
        self.finish(proc)
        if HAVE_LINES:
            ph.read_jitdump(ph.jit_path(pid), pid)

    @unittest.skipIf(HAVE_LINES, "this build has lines")
    def test_refused_without_lines(self):
        # A build without line trampolines refuses them, and keeps taking
        # the requests without.
        proc, pid = self.start(BUSY)
        out, _, _ = requester("activate", "--lines", pid)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stderr.strip(), f"{pid}: refused: perf lines "
                         "not available on this platform")
        self.assertFalse(self.ask_active(proc))
        self.assertEqual(self.activate(pid), f"{pid}: perf {ph.map_path(pid)}")
        self.finish(proc)

    def test_bad_lines_bits_are_unknown(self):
        # A lines bit goes with an activation only, and one at a time;
        # anything else is a code the process does not know.
        proc, pid = self.start(BLOCKED)
        for rid, code in enumerate((pt.REQ_DEACTIVATE | pt.REQ_LINES_ON,
                                    pt.REQ_SEAL | pt.REQ_LINES_OFF,
                                    pt.REQ_PERF | pt.REQ_LINES_ON
                                    | pt.REQ_LINES_OFF,
                                    pt.REQ_PERF | 0x400), 1000):
            with self.subTest(code=hex(code)):
                self.wait_in_select(pid)
                with pt.Target(pid) as t:
                    t.send(code, rid)
                self.assertFalse(self.ask_active(proc))
                block = self.block(pid)
                self.assertEqual((block.served_id, block.served_request,
                                  block.result),
                                 (rid, code, pt.RESULT_UNKNOWN))
        self.finish(proc)

    def test_older_interpreter_is_not_sent_lines(self):
        # A block of 472 bytes (before `lines`): its interpreter would
        # answer "unknown request"; the requester says why and writes
        # nothing.  (The size is rewritten here: the process never reads
        # it.)
        proc, pid = self.start(BLOCKED)
        with pt.Target(pid) as t:
            t.put("size", pt.FIELDS["lines"][0])
        out, _, _ = requester("activate", "--lines", pid)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stderr.strip(),
                         f"{pid}: the process does not take requests for "
                         "lines (an interpreter older than them); nothing "
                         "was sent")
        block = self.block(pid)
        self.assertEqual((block.request, block.request_id), (0, 0))
        self.assertIsNone(block.lines)
        # its other requests go on as before
        self.wait_in_select(pid)
        with self.woken_when_asked(proc, pid):
            self.activate(pid, "--timeout", 60)
        self.assertEqual(proc.stdout.readline().split(), ["ACTIVE", "True"])
        self.finish(proc)

    def test_lines_option_needs_activate(self):
        out, _, _ = requester("activate", "--lines", "--no-lines", 1)
        self.assertEqual(out.returncode, 2)
        self.assertIn("not allowed with argument", out.stderr)
        out, _, _ = requester("activate", "--help")
        self.assertIn("--lines", out.stdout)
        self.assertIn("--no-lines", out.stdout)


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestPermissions(TargetMixin, unittest.TestCase):

    def setUp(self):
        super().setUp()
        problem = nobody_problem()
        if problem:
            self.skipTest(problem)

    def check_refused(self, out, pid):
        self.assertNotEqual(out.returncode, 0)
        text = out.stdout + out.stderr
        self.assertIn(f"no permission to read or write the memory of "
                      f"process {pid}", text)
        self.assertIn("ptrace", text)
        self.assertIn("CAP_SYS_PTRACE", text)
        if not os.path.exists("/proc/sys/kernel/yama/ptrace_scope"):
            self.assertIn("kernel.yama.ptrace_scope: not present", text)

    def test_other_user(self):
        # root reaches a process of nobody, and so does nobody (who may
        # not open /proc/PID/map_files: the requester reads the executable
        # through /proc/PID/root then) ...
        proc, pid = self.start(BUSY, prefix=NOBODY)
        try:
            stale = os.stat(ph.map_path(pid)).st_uid != NOBODY_UID
        except FileNotFoundError:
            stale = False
        if stale:
            # The process of nobody cannot replace it (as it should not).
            self.skipTest(f"{ph.map_path(pid)} is left by an earlier "
                          f"process of another user with pid {pid}")
        out, _, _ = requester("activate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(self.ask_active(proc))
        out, _, _ = requester("deactivate", pid, user="nobody")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)
        # ... nobody does not reach one of root
        proc, pid = self.start(BUSY)
        for command in ("activate", "status"):
            out, _, _ = requester(command, pid, user="nobody")
            self.check_refused(out, pid)
        self.assertFalse(self.ask_active(proc))
        self.finish(proc)

    def test_non_dumpable(self):
        # A process that changed its user ids is non-dumpable (the kernel
        # sets it so at the change, fs.suid_dumpable being 0): out of reach
        # of its own new user, not of root (CAP_SYS_PTRACE).
        code = BUSY.replace("def main():", textwrap.dedent("""\
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.setgroups([])
            os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
            os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
            def main():"""))
        proc, pid = self.start(code)
        with open("/proc/sys/fs/suid_dumpable") as f:
            if f.read().strip() != "0":
                self.skipTest("fs.suid_dumpable is not 0: a change of user "
                              "ids leaves the process dumpable")
        # the kernel shows a non-dumpable process's /proc files as root's
        self.assertEqual(os.stat(f"/proc/{pid}/mem").st_uid, 0)
        out, _, _ = requester("activate", pid, user="nobody")
        self.check_refused(out, pid)
        self.assertIn("non-dumpable", out.stderr)
        self.assertFalse(self.ask_active(proc))
        out, _, _ = requester("activate", pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(self.ask_active(proc))
        self.finish(proc)


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestLayout(unittest.TestCase):

    def test_block_fields_are_the_c_struct(self):
        # The requester's copy of _PyPerfLiveBlock (BLOCK_FIELDS) against
        # the struct as the compiler laid it out, read by gdb from the
        # interpreter's debug information: each field's name, offset and
        # size, and the whole block's size.
        if shutil.which("gdb") is None:
            self.skipTest("gdb is not installed")
        out = subprocess.run(
            ["gdb", "-nx", "-batch", "-ex", "ptype /o _PyPerfLiveBlock",
             sys.executable], capture_output=True, text=True,
            timeout=300).stdout
        fields = re.findall(r"^/\*\s+(\d+)\s+\|\s+(\d+) \*/.*?(\w+)"
                            r"(?:\[\d+\])?;$", out, re.M)
        if not fields:
            self.skipTest("the interpreter has no debug information")
        offset, ours = 0, []
        for name, fmt in pt.BLOCK_FIELDS:
            size = struct.calcsize("=" + fmt)
            ours.append((str(offset), str(size), name))
            offset += size
        self.assertEqual(fields, ours, out)
        total = re.search(r"total size \(bytes\):\s+(\d+)", out)
        self.assertEqual(int(total.group(1)), pt.BLOCK.size, out)


def setUpModule():
    ph.setup_module()


def tearDownModule():
    ph.teardown_module()


if __name__ == "__main__":
    unittest.main()
