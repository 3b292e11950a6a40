"""The perf map C API of CPython 3.13, PyUnstable_WritePerfMapEntry() and
its companions, through the test hooks of _testinternalcapi (cpython-perf).

The lines go into /tmp/perf-PID.map of this very process, the file the
perf trampolines write too."""

import os
import subprocess
import sys
import textwrap
import threading
import time
import unittest

from test.support import import_helper, os_helper
from test.support.perf_helper import forget_files, run_and_forget

if sys.platform != "linux":
    raise unittest.SkipTest("perf maps are a Linux feature")
_testinternalcapi = import_helper.import_module("_testinternalcapi")
if not hasattr(_testinternalcapi, "write_perf_map_entry"):
    raise unittest.SkipTest("no perf map test hooks")
write_perf_map_entry = _testinternalcapi.write_perf_map_entry
perf_map_state_teardown = _testinternalcapi.perf_map_state_teardown
HAVE_TRAMPOLINE = hasattr(sys, "activate_stack_trampoline") and bool(
    __import__("sysconfig").get_config_var("PY_HAVE_PERF_TRAMPOLINE"))


@unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
class TestPerfMapEntries(unittest.TestCase):

    def setUp(self):
        # This process's own map: removed after the test if the test made
        # it (not when the suite runs with PYTHONPERFSUPPORT=1 and the
        # trampolines write it too).
        self.path = f"/tmp/perf-{os.getpid()}.map"
        self.made_map = not os.path.lexists(self.path)
        self.addCleanup(self.forget_map)

    def forget_map(self):
        perf_map_state_teardown()
        if self.made_map:
            os_helper.unlink(self.path)

    def lines(self):
        with open(self.path) as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"))
        return text.splitlines()

    def test_entries_are_lines(self):
        self.assertEqual(write_perf_map_entry(0x1234, 5678, "entry1"), 0)
        self.assertEqual(write_perf_map_entry(0x2345, 6789, "entry2"), 0)
        lines = self.lines()
        self.assertIn("1234 162e entry1", lines)
        self.assertIn("2345 1a85 entry2", lines)
        self.assertLess(lines.index("1234 162e entry1"),
                        lines.index("2345 1a85 entry2"))

    def test_name_stays_on_its_line(self):
        self.assertEqual(write_perf_map_entry(0x10, 1, "two\nlines\t!"), 0)
        self.assertIn("10 1 two?lines?!", self.lines())

    def test_long_name(self):
        name = "x" * 100_000
        self.assertEqual(write_perf_map_entry(0xabc, 2, name), 0)
        self.assertIn(f"abc 2 {name}", self.lines())

    def test_teardown_then_write_again(self):
        self.assertEqual(write_perf_map_entry(0x1, 1, "before"), 0)
        perf_map_state_teardown()
        perf_map_state_teardown()
        self.assertEqual(write_perf_map_entry(0x2, 1, "after"), 0)
        lines = self.lines()
        self.assertIn("1 1 before", lines)
        self.assertIn("2 1 after", lines)

    def test_threads(self):
        # Lines written from many threads at once come out whole.
        def writer(t):
            for i in range(300):
                write_perf_map_entry(0x100000 * (t + 1) + i, 16,
                                     f"thread{t}_entry{i}")
        threads = [threading.Thread(target=writer, args=(t,))
                   for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lines = set(self.lines())
        for t in range(8):
            for i in range(300):
                self.assertIn(f"{0x100000 * (t + 1) + i:x} 10 "
                              f"thread{t}_entry{i}", lines)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            write_perf_map_entry("0x10", 1, "x")
        with self.assertRaises(TypeError):
            write_perf_map_entry(0x10, 1, None)
        with self.assertRaises(ValueError):
            write_perf_map_entry(0x10, 1, "nul\0inside")
        with self.assertRaises(TypeError):
            _testinternalcapi.compile_perf_trampoline_entry(None)


@unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
class TestTrampolineApi(unittest.TestCase):

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def run_python(self, *args, code):
        # (the program prints its pid first)
        proc, pids = run_and_forget(self, *args, "-c", textwrap.dedent(code),
                                    pids=r"\A(\d+)$")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(pids), 1, proc.stdout)
        return proc.stdout.split()[1:], pids[0]

    def test_compile_ahead_of_first_call(self):
        # A function compiled before it ever runs is in the map already.
        out, pid = self.run_python("-X", "perf", code="""
            import os, _testinternalcapi as t
            print(os.getpid(), flush=True)
            def handler():
                return 1
            print(t.compile_perf_trampoline_entry(handler.__code__))
            print(t.compile_perf_trampoline_entry(handler.__code__))
            print(open(f"/tmp/perf-{os.getpid()}.map").read().count(
                "py::handler:<string>"))
            """)
        self.assertEqual(out, ["0", "0", "1"])

    def test_compile_without_backend(self):
        out, _ = self.run_python(code="""
            import os, _testinternalcapi as t
            print(os.getpid(), flush=True)
            print(t.compile_perf_trampoline_entry((lambda: 0).__code__))
            """)
        self.assertEqual(out, ["-1"])

    def test_persist_after_fork_returns_the_value(self):
        out, _ = self.run_python("-X", "perf", code="""
            import os, _testinternalcapi as t
            print(os.getpid(), flush=True)
            print(t.perf_trampoline_set_persist_after_fork(1),
                  t.perf_trampoline_set_persist_after_fork(0))
            """)
        self.assertEqual(out, ["1", "0"])

    def test_copy_parent_map(self):
        # What a forked child of a pre-fork server does with upstream's
        # API: its parent's lines in its own map.
        out, pid = self.run_python(code="""
            import ctypes, os, _testinternalcapi as t
            print(os.getpid(), flush=True)
            t.write_perf_map_entry(0x1000, 16, "from_parent")
            child = os.fork()
            if child == 0:
                copy = ctypes.pythonapi.PyUnstable_CopyPerfMapFile
                copy.argtypes = (ctypes.c_char_p,)
                rc = copy(f"/tmp/perf-{os.getppid()}.map".encode())
                bad = copy(b"/nonexistent/perf.map")
                os.write(1, f"{os.getpid()} {rc} {bad}\\n".encode())
                os._exit(0)
            os.waitpid(child, 0)
            """)
        child, rc, bad = out
        forget_files(self, int(child))
        self.assertEqual((rc, bad), ("0", "-1"))
        with open(f"/tmp/perf-{child}.map") as f:
            self.assertIn("1000 10 from_parent\n", f.read())


@unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
class TestWindows(unittest.TestCase):
    """What another writer does inside a window between two steps of the
    trampolines' file handling, forced with the test points of
    _testinternalcapi (perf_trampoline_test_point())."""

    def setUp(self):
        self.since = time.time() - 1

    def run_python(self, *args, code, shell=None):
        """Run `code` (which prints its pid first) in a new interpreter, or
        through `shell` (sh -c) that execs one; the stderr must be empty.
        Returns the other output lines and the pid."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
        cmd = [sys.executable, *args, "-c", textwrap.dedent(code)]
        if shell is not None:
            cmd = ["/bin/sh", "-c", shell + ' exec "$@"', "sh", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        pid = int(proc.stdout.split()[0])
        forget_files(self, pid)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        return proc.stdout.splitlines()[1:], pid

    def map_lines(self, pid):
        with open(f"/tmp/perf-{pid}.map") as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"), text[-200:])
        return text.splitlines()

    def test_fini_while_activating(self):
        # PyUnstable_PerfMapState_Fini() from a thread without the GIL,
        # just after activate() let go of files_lock: the map stays open
        # for the trampolines.
        out, pid = self.run_python(code="""
            import os, sys, _testinternalcapi as t
            print(os.getpid(), flush=True)
            t.perf_trampoline_test_point("activated",
                                         t.perf_map_state_teardown)
            sys.activate_stack_trampoline("perf")
            def fresh_function():
                return 1
            fresh_function()
            print(sys.is_stack_trampoline_active())
            """)
        self.assertEqual(out, ["True"])
        self.assertTrue(any(line.endswith(" py::fresh_function:<string>")
                            for line in self.map_lines(pid)))

    def test_lines_written_before_the_interpreter_started_stay(self):
        # A host (here a shell that then execs the interpreter: the same
        # process) wrote to the map before the interpreter was loaded.
        # Those lines are the process's, not a stale file's.
        out, pid = self.run_python("-X", "perf", code="""
            import os
            print(os.getpid(), flush=True)
            """, shell='echo "1000 10 written_by_the_host" >> /tmp/perf-$$.map;')
        lines = self.map_lines(pid)
        self.assertIn("1000 10 written_by_the_host", lines)
        self.assertTrue(any(" py::" in line for line in lines))

    def test_copy_keeps_lines_whole(self):
        # A trampoline record written (without files_lock) while
        # PyUnstable_CopyPerfMapFile() is between two of its writes lands
        # between two lines of the copy, not inside one.
        with os_helper.temp_dir() as tmp:
            source = os.path.join(tmp, "parent.map")
            copied = [f"{0x10000 + i:x} 10 copied_{i}_" + "x" * 60
                      for i in range(1000)]
            with open(source, "w") as f:
                f.write("".join(line + "\n" for line in copied))
            out, pid = self.run_python("-X", "perf", code=f"""
                import ctypes, os, threading, _testinternalcapi as t
                print(os.getpid(), flush=True)
                # CDLL: called without the GIL, as a JIT's thread would
                copy = ctypes.CDLL(None).PyUnstable_CopyPerfMapFile
                copy.argtypes = (ctypes.c_char_p,)
                stopped, stopped_w = os.pipe()
                resume_r, resume = os.pipe()
                t.perf_trampoline_test_point("copied", (stopped_w, resume_r))
                rc = []
                thread = threading.Thread(
                    target=lambda: rc.append(copy({source!r}.encode())))
                thread.start()
                os.read(stopped, 1)
                def made_meanwhile():
                    return 1
                made_meanwhile()
                os.write(resume, b"x")
                thread.join()
                print(rc[0])
                """)
        self.assertEqual(out, ["0"])
        lines = self.map_lines(pid)
        for line in lines:
            self.assertTrue(line in copied or " py::" in line, line[:200])
        self.assertTrue(set(copied) <= set(lines))
        self.assertTrue(any(line.endswith(" py::made_meanwhile:<string>")
                            for line in lines))

    def test_partial_record_taken_back_keeps_other_records(self):
        # A block of records written only in part (a file size limit
        # here, a full disk in life), while another writer appends before
        # it is taken back: the other writer's line stays whole.
        out, pid = self.run_python("-X", "perf", code="""
            import os, resource, signal, sys, warnings
            import _testinternalcapi as t
            print(os.getpid(), flush=True)
            path = f"/tmp/perf-{os.getpid()}.map"
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            def other_writer(write=True):
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
                if write:
                    # (no Python code: it would make trampolines)
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                    os.write(fd, b"1000 10 other_writer\\n")
                    os.close(fd)
            other_writer(False)     # its own trampoline, before the limit
            def cut_short():
                return 1
            t.perf_trampoline_test_point("partial", other_writer)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                size = os.stat(path).st_size
                resource.setrlimit(resource.RLIMIT_FSIZE, (size + 5, hard))
                cut_short()
                # (its line waits with others: deactivating writes them)
                sys.deactivate_stack_trampoline()
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            print(len(w), sys.is_stack_trampoline_active())
            """)
        self.assertEqual(out, ["1 False"])
        lines = self.map_lines(pid)
        self.assertEqual(lines[-1], "1000 10 other_writer")
        # the five bytes of the cut record: a line that perf skips
        self.assertEqual(lines[-2], " " * 4)
        self.assertFalse(any("cut_short" in line for line in lines))


if __name__ == "__main__":
    unittest.main()
