"""The readers and the cleanup of test.support.perf_helper: they must
reject what is wrong and remove only our own files, or the other tests
prove nothing."""

import os
import signal
import struct
import subprocess
import tempfile
import time
import unittest

from test.support import os_helper
from test.support import perf_helper
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, JIT_ELF_MACHINE, NO_TRAMPOLINE, map_lines, map_path,
    read_jitdump, run_python, script_pid)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    setUpModule, tearDownModule)


class TestJitDumpReader(unittest.TestCase):
    """The reader must reject what is wrong (so that it can catch us)."""

    def test_rejects_bad_magic_and_sizes(self):
        good = struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40,
                           JIT_ELF_MACHINE, 0, 7, 1, 0)
        close = struct.pack("<IIQ", 3, 16, 2)
        with tempfile.NamedTemporaryFile() as f:
            f.write(good + close)
            f.flush()
            self.assertEqual(read_jitdump(f.name, 7), [(3, {})])
            for bad in (good[:-1], b"x" + good[1:],
                        good + struct.pack("<IIQ", 3, 17, 2),
                        good + struct.pack("<IIQ", 9, 16, 2),
                        good + struct.pack("<IIQ", 3, 16, 0)):
                f.seek(0)
                f.truncate()
                f.write(bad)
                f.flush()
                with self.assertRaises((AssertionError, struct.error)):
                    read_jitdump(f.name, 7)

    def test_rejects_anything_after_the_last_record(self):
        # Records are appended, one write() each, to a file never grown
        # ahead: it ends right after its last record, however its process
        # ended.  Zeros or a partial record after it are a fault.
        good = struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40,
                           JIT_ELF_MACHINE, 0, 7, 1, 0)
        close = struct.pack("<IIQ", 3, 16, 2)
        with tempfile.NamedTemporaryFile() as f:
            for bad in (good + b"\0" * 16, good + b"\0" * 4096,
                        good + close + b"\0" * 16, good + close + b"\0",
                        good + close[:8]):
                for exited_normally in (True, False):
                    f.seek(0)
                    f.truncate()
                    f.write(bad)
                    f.flush()
                    with self.subTest(size=len(bad),
                                      exited_normally=exited_normally):
                        with self.assertRaises(
                                (AssertionError, struct.error)):
                            read_jitdump(f.name, 7, exited_normally)


class TestCleanup(unittest.TestCase):
    """Cleanup removes only the files our own processes wrote: not a
    later, unrelated process's that got the same pid."""

    def setUp(self):
        self.since = time.time() - 1

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_file_of_a_later_process_with_the_pid_stays(self):
        for later in (None, "reuses the file", "makes a new file"):
            with self.subTest(later=later):
                proc = run_python("-X", "perf", "-c",
                                  "import os; print('PID', os.getpid())")
                pid = script_pid(proc.stdout)
                path = map_path(pid)
                self.addCleanup(os_helper.unlink, path)
                seen = perf_helper._own_files(perf_helper._files_of(pid),
                                              self.since)
                self.assertIn(path, seen)
                # What a later process with that pid would do to the
                # file, between our child's exit and the cleanup.
                if later == "reuses the file":
                    with open(path, "w") as f:
                        f.write("1000 10 py::later:other.py\n")
                elif later == "makes a new file":
                    os.unlink(path)
                    with open(path, "w") as f:
                        f.write("1000 10 py::later:other.py\n")
                perf_helper._remove_unchanged(seen)
                self.assertEqual(os.path.exists(path), later is not None)

    def test_files_older_than_the_test_are_not_ours(self):
        fd, path = tempfile.mkstemp(prefix="test_perf_old_")
        os.close(fd)
        self.addCleanup(os_helper.unlink, path)
        old = time.time() - 3600
        os.utime(path, (old, old))
        seen = perf_helper._own_files([path], self.since)
        self.assertEqual(seen, {})


    def test_arena_paths_are_ours_in_order(self):
        # A pid above pid_max, which no process has: files of our own
        # numbered 1, 2 and 10, an older one numbered 0 (another
        # process's), and names that are no arena file's.
        with open("/proc/sys/kernel/pid_max") as f:
            pid = int(f.read()) + 17
        old = time.time() - 3600
        made = {}
        for name in ("0", "10", "1", "2", "x", "1-2", "01x"):
            path = f"/tmp/py-perf-{pid}-{name}.so"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            self.addCleanup(os_helper.unlink, path)
            made[name] = path
        os.utime(made["0"], (old, old))
        self.assertEqual(perf_helper.arena_paths(pid, self.since),
                         [made["1"], made["2"], made["10"]])
        self.assertEqual(perf_helper.arena_paths(pid, None),
                         [made["0"], made["1"], made["2"], made["10"]])

    def test_forget_files_refuses_a_running_process(self):
        # Its files would still change: forget_process() is for those.
        proc = subprocess.Popen(["sleep", "60"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        with self.assertRaises(AssertionError):
            perf_helper.forget_files(self, proc.pid)
        proc.kill()
        proc.wait()
        perf_helper.forget_files(self, proc.pid)

    def test_forked_pid_taken_again_is_not_killed(self):
        # forget_process() ends the processes listed as forked only if
        # each is still the process it was when listed.
        for same in (True, False):
            with self.subTest(same=same):
                proc = subprocess.Popen(["sleep", "60"])
                self.addCleanup(proc.wait)
                self.addCleanup(proc.kill)
                forked = perf_helper._Forked()
                forked.append(proc.pid)
                if not same:
                    forked.started[proc.pid] += 1   # another process's
                perf_helper._end(proc.pid, forked.started[proc.pid])
                # a SIGKILL that _end() sent comes before this SIGTERM
                proc.terminate()
                self.assertEqual(proc.wait(timeout=60),
                                 -signal.SIGKILL if same else -signal.SIGTERM)


class TestMapReader(unittest.TestCase):
    """The strict reader of perf maps must reject what is wrong."""

    GOOD = b"7f0000001000 10 py::f:a.py\n7f0000001010 10 py::g:a.py\n"

    def test_accepts_whole_lines(self):
        for exited_normally in (True, False):
            self.assertEqual(map_lines(self.GOOD, exited_normally),
                             ["7f0000001000 10 py::f:a.py",
                              "7f0000001010 10 py::g:a.py"])
            self.assertEqual(map_lines(b"", exited_normally), [])

    def test_rejects_anything_but_whole_lines(self):
        # The file is appended to one whole line per write() and never
        # grown ahead: blank lines or zeros (after the last line or
        # between lines) and a partial last line are faults, however the
        # process ended.
        for bad in (self.GOOD + b"\n", self.GOOD + b"\n\n\n",
                    self.GOOD + b"\0" * 64, self.GOOD + b"\0\n",
                    b"\n" + self.GOOD, self.GOOD.replace(b"\n", b"\n\n", 1),
                    self.GOOD[:-1], self.GOOD + b"7f00", b"\n", b"\0",
                    b"7f0000001000 10 py::f\0:a.py\n", b"\xff\n"):
            for exited_normally in (True, False):
                with self.subTest(bad=bad[-12:],
                                  exited_normally=exited_normally):
                    with self.assertRaises((AssertionError, ValueError)):
                        map_lines(bad, exited_normally)


if __name__ == "__main__":
    unittest.main()
