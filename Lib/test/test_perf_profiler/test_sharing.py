"""The interpreter as one tenant of a process: other JITs on the debuggers'
interface, tracemalloc and C-API callers without the GIL, libraries that
fork."""

import os
import re
import subprocess
import sys
import time
import unittest

from test.support import os_helper, requires_subprocess
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, forget_files, run_python)

from ._common import setUpModule, tearDownModule  # noqa: F401


# The PyUnstable_ map functions called through ctypes.CDLL, which releases
# the GIL around each call, while tracemalloc traces the raw allocator (in
# 3.11 its hooks take the GIL) and other threads make functions, switch
# the backend and fork.  The source map has lines longer than the copy's
# first buffer, which then grows.
NO_GIL_CALLERS = """\
import ctypes, os, sys, threading, time, tracemalloc
print("PID", os.getpid(), flush=True)
tracemalloc.start()
api = ctypes.CDLL(None)
api.PyUnstable_CopyPerfMapFile.argtypes = [ctypes.c_char_p]
api.PyUnstable_WritePerfMapEntry.argtypes = [
    ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]
source = sys.argv[1].encode()
long_name = b"x" * 40_000
stop = time.monotonic() + float(sys.argv[2])

def c_api():
    while time.monotonic() < stop:
        api.PyUnstable_PerfMapState_Init()
        api.PyUnstable_CopyPerfMapFile(source)
        api.PyUnstable_WritePerfMapEntry(0x1000, 16, long_name)
        api.PyUnstable_PerfMapState_Fini()

def make_functions():
    n = 0
    while time.monotonic() < stop:
        ns = {}
        exec(f"def f{n}(): return {n}", ns)
        ns[f"f{n}"]()
        n += 1

def switch():
    while time.monotonic() < stop:
        sys.deactivate_stack_trampoline()
        sys.activate_stack_trampoline("perf")
        time.sleep(0.001)

def fork():
    while time.monotonic() < stop:
        pid = os.fork()
        if pid == 0:
            os.write(1, b"PID %d\\n" % os.getpid())
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)

threads = [threading.Thread(target=f) for f in
           (c_api, c_api, make_functions, make_functions, switch, fork)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", flush=True)
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, "no perf trampoline on this platform")
@requires_subprocess()
class NoDeadlockTests(unittest.TestCase):

    def setUp(self):
        self.since = time.time() - 1

    def test_c_api_without_the_gil_under_tracemalloc(self):
        # Before the fix a C-API caller grew its buffer with
        # PyMem_RawRealloc() while holding the files' lock: tracemalloc's
        # hook then waited for the GIL, whose holder waited for the lock.
        source = os_helper.TESTFN + ".map"
        self.addCleanup(os_helper.unlink, source)
        with open(source, "w") as f:
            for i in range(4):
                f.write(f"{0x2000 + i:x} 10 {'y' * 50_000}\n")
        script = os_helper.TESTFN + ".py"
        self.addCleanup(os_helper.unlink, script)
        with open(script, "w") as f:
            f.write(NO_GIL_CALLERS)
        try:
            proc = run_python("-X", "perf", script, source, "3",
                              timeout=60)
        except subprocess.TimeoutExpired as e:
            out = e.stdout or b""
            if isinstance(out, bytes):
                out = out.decode("ascii", "replace")
            for pid in re.findall(r"^PID (\d+)", out, re.M):
                forget_files(self, int(pid))
            self.fail("deadlock: the process did not end in 60 s")
        for pid in re.findall(r"^PID (\d+)", proc.stdout, re.M):
            forget_files(self, int(pid))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done", proc.stdout)


if __name__ == "__main__":
    unittest.main()
