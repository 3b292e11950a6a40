"""Child interpreters (subprocess, multiprocessing) inherit the start-up
options and keep the backend."""

import re
import shutil
import tempfile
import textwrap
import time
import unittest

from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, JIT_CODE_LOAD, NO_TRAMPOLINE, env_with, jit_path,
    map_path, read_jitdump, read_map_file, run_and_forget, written_since)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    setUpModule, tearDownModule)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestChildProcesses(unittest.TestCase):
    """Children started with the interpreter's flags (multiprocessing's
    spawn and forkserver, subprocess with _args_from_interpreter_flags())
    get -X perf and -X perf_jit too; forked children keep the trampoline
    on.  Each child writes a file of its own."""

    # Starts children every way multiprocessing and subprocess offer.
    # Each child runs a function named after the way it was started and
    # hands back its pid and whether its trampoline is on.  Every process
    # started (helpers too: the resource tracker, the forkserver) is
    # printed, so that the test removes their files.
    SOURCE = textwrap.dedent("""\
        import multiprocessing, os, subprocess, sys
        from multiprocessing import forkserver, resource_tracker

        def state():
            return os.getpid(), sys.is_stack_trampoline_active()

        def work_in_spawn():
            return state()

        def work_in_forkserver():
            return state()

        def work_in_fork_pool(i):
            return state()

        def run_in_child(conn, name):
            conn.send(globals()[name]())
            conn.close()

        SUBPROCESS = '''
        import os, sys
        def work_in_subprocess():
            return os.getpid(), sys.is_stack_trampoline_active()
        print(*work_in_subprocess())
        '''

        def started(pid):
            if pid is not None:
                print("STARTED", pid, flush=True)

        if __name__ == "__main__":
            print("PID", os.getpid(), flush=True)
            for method in ("spawn", "forkserver"):
                ctx = multiprocessing.get_context(method)
                r, w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=run_in_child,
                                args=(w, "work_in_" + method))
                p.start()
                started(p.pid)
                started(resource_tracker._resource_tracker._pid)
                started(forkserver._forkserver._forkserver_pid)
                w.close()
                pid, active = r.recv()
                p.join()
                print("RAN", method, pid, active, flush=True)

            pool = multiprocessing.get_context("fork").Pool(2)
            for p in pool._pool:
                started(p.pid)
            ran = set(pool.map(work_in_fork_pool, range(8)))
            pool.close()
            pool.join()
            for pid, active in ran:
                print("RAN fork_pool", pid, active, flush=True)

            proc = subprocess.Popen(
                [sys.executable, *subprocess._args_from_interpreter_flags(),
                 "-c", SUBPROCESS], stdout=subprocess.PIPE, text=True)
            started(proc.pid)
            out, _ = proc.communicate()
            assert proc.returncode == 0, proc.returncode
            print("RAN subprocess", out, end="", flush=True)

            # The helpers go now: their files are complete when the test
            # reads them, and none is written after it removed them.
            forkserver._forkserver._stop()
            resource_tracker._resource_tracker._stop()
        """)

    def setUp(self):
        # Files last written before this are not the children's.
        self.since = time.time() - 1

    def run_children(self, *args, env=None):
        tmp = tempfile.mkdtemp(prefix="test_perf_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        script = make_script(tmp, "children", self.SOURCE)
        proc, _ = run_and_forget(self, *args, script, env=env, timeout=300,
                                 pids=r"^(?:PID|STARTED) (\d+)$")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        return proc.stdout, script

    def names(self, backend, pid, exited_normally):
        """The functions named in the file of `backend` of process `pid`
        (which has no file of the other backend)."""
        if backend == "perf":
            self.assertFalse(written_since(jit_path(pid), self.since))
            return {line.split(" ", 2)[2] for line in
                    read_map_file(map_path(pid), exited_normally)}
        self.assertFalse(written_since(map_path(pid), self.since))
        return {rec["name"] for rid, rec in
                read_jitdump(jit_path(pid), pid, exited_normally)
                if rid == JIT_CODE_LOAD}

    def check_children(self, backend, *args, env=None):
        out, script = self.run_children(*args, env=env)
        started = {int(pid) for pid in re.findall(r"^STARTED (\d+)$",
                                                  out, re.M)}
        ran = re.findall(r"^RAN (\w+) (\d+) (\w+)$", out, re.M)
        self.assertEqual({way for way, _, _ in ran},
                         {"spawn", "forkserver", "fork_pool", "subprocess"})
        for way, pid, active in ran:
            with self.subTest(way=way, pid=pid):
                pid = int(pid)
                self.assertIn(pid, started)
                self.assertEqual(active, "True")
                # Children of fork (forkserver's too) leave through
                # os._exit(): no CLOSE record ends their jitdumps.
                names = self.names(backend, pid, exited_normally=way in (
                    "spawn", "subprocess"))
                filename = "<string>" if way == "subprocess" else script
                self.assertIn(f"py::work_in_{way}:{filename}", names)

    def test_xoption_perf(self):
        self.check_children("perf", "-X", "perf")

    def test_xoption_perf_jit(self):
        self.check_children("perf_jit", "-X", "perf_jit")

    def test_environment_variable(self):
        self.check_children("perf", env=env_with(PYTHONPERFSUPPORT="1"))

    def test_jit_environment_variable(self):
        self.check_children("perf_jit",
                            env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))

    def test_flags_are_the_start_up_options(self):
        # What the interpreter was started with, like the other -X
        # options: not what sys.activate_stack_trampoline() and
        # sys.deactivate_stack_trampoline() have made of it since.  The
        # variables are not turned into options: children inherit the
        # environment (and -E, which makes both ignore it).
        code = textwrap.dedent("""\
            import os, subprocess, sys
            print("PID", os.getpid(), flush=True)
            flags = subprocess._args_from_interpreter_flags
            seen = [flags()]
            sys.deactivate_stack_trampoline()
            seen.append(flags())
            sys.activate_stack_trampoline("perf_jit")
            seen.append(flags())
            sys.activate_stack_trampoline("perf")
            seen.append(flags())
            sys.deactivate_stack_trampoline()
            print(seen[0] if seen.count(seen[0]) == 4 else seen)
            """)
        for args, env, expected in (
                (("-X", "perf"), {}, ["-X", "perf"]),
                (("-X", "perf_jit"), {}, ["-X", "perf_jit"]),
                (("-X", "perf_jit", "-X", "perf"), {},
                 ["-X", "perf", "-X", "perf_jit"]),
                (("-X", "perf=1"), {}, ["-X", "perf=1"]),
                (("-X", "perf", "-X", "perf_tmp_limit=8M"), {},
                 ["-X", "perf", "-X", "perf_tmp_limit=8M"]),
                ((), {"PYTHONPERFSUPPORT": "1"}, []),
                (("-E", "-X", "perf"), {"PYTHON_PERF_JIT_SUPPORT": "1"},
                 ["-E", "-X", "perf"]),
                ((), {}, [])):
            with self.subTest(args=args, env=env):
                proc, _ = run_and_forget(self, *args, "-c", code,
                                         env=env_with(**env))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.splitlines()[-1],
                                 str(expected))


if __name__ == "__main__":
    unittest.main()
