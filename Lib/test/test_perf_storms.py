"""Storms for the perf trampolines (cpython-perf): many threads, forks and
functions at once.

Each storm runs in a child interpreter, so that a crash is a failed test
rather than a dead test runner, and so that the files it writes have pids
the test knows (every process prints "PID n", every forked child
"CHILD n") and removes.  A storm passes when every process exits with 0,
prints nothing on stderr (under `make sanitize` a sanitizer report would
land there or in its log directory) and leaves files that the strict
readers of test.support.perf_helper accept, naming what the storm ran.

`make sanitize` runs this module on an ASan + UBSan build; it is an
ordinary test module too.
"""

import os
import re
import sys
import sysconfig
import textwrap
import time
import unittest

from test import support
from test.support.perf_helper import (
    JIT_CODE_LOAD, check, jit_path, map_lines, map_path, read_jitdump,
    run_and_forget)

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")
if not sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"):
    raise unittest.SkipTest("perf trampoline not supported")


# 8 threads call Python functions (plain calls, a generator, each time a
# function of their own that never ran before) while the main thread
# switches between the two backends and off, 400 times.  A tiny switch
# interval makes the threads change hands inside the calls, and after each
# switch the main thread waits (without holding the GIL) until the workers
# have done more calls, so every state meets running workers.
THREADS = """\
import os, sys, threading, time, types
print("PID", os.getpid(), flush=True)
sys.setswitchinterval(1e-6)
NTHREADS, NTOGGLES = 8, 400

def leaf(x):
    return x + 1

def middle(x):
    return leaf(x) * 2

def numbers(n):
    for i in range(n):
        yield middle(i)

def template():
    return 5

EXPECTED = sum(2 * (i + 1) for i in range(20))
started = threading.Barrier(NTHREADS + 1)
stop = threading.Event()
failures = []
progress = [0] * NTHREADS

def worker(k):
    try:
        started.wait()
        n = 0
        while True:
            if sum(numbers(20)) != EXPECTED:
                raise AssertionError("wrong sum")
            name = f"fresh_{k}_{n}"
            code = template.__code__.replace(co_name=name, co_qualname=name)
            if types.FunctionType(code, globals())() != 5:
                raise AssertionError("wrong result")
            n += 1
            progress[k] = n
            if stop.is_set():
                break
    except BaseException as exc:
        failures.append(repr(exc))
        raise

threads = [threading.Thread(target=worker, args=(k,))
           for k in range(NTHREADS)]
for t in threads:
    t.start()
started.wait()
for i in range(NTOGGLES):
    backend = ("perf", "perf_jit", None)[i % 3]
    if backend is None:
        sys.deactivate_stack_trampoline()
        assert not sys.is_stack_trampoline_active()
    else:
        sys.activate_stack_trampoline(backend)
        assert sys.is_stack_trampoline_active()
    middle(i)
    # Each window lasts until the workers end 2 * NTHREADS + 1 rounds in
    # it: then one of them ran a whole round (numbers() included) under
    # this backend.  A count since the start would let the toggles run
    # back to back after a window in which the workers ran far ahead.
    goal = sum(progress) + 2 * NTHREADS + 1
    while sum(progress) < goal and not failures:
        time.sleep(0)
stop.set()
for t in threads:
    t.join()
sys.deactivate_stack_trampoline()
assert not failures, failures
assert sum(progress) >= 4 * NTOGGLES, progress
print("RUNS", sum(progress), flush=True)
"""

# 50,000 live functions, each with its trampoline; then 6 children are
# forked from 20 Python frames deep, all at once (each prints "CHILD k
# pid").  Each child inherits the trampolines and describes those it runs
# in files of its own, then does one of: turn the backend off and call
# some of them; make new functions; switch to the other backend (whose
# file then describes every live function); and leaves
# through os._exit() or through a normal exit (SystemExit raised 20 frames
# down): the 6 children make every pair of the two.
FORKS = """\
import os, sys, types
MODE, OTHER = sys.argv[1], sys.argv[2]
NLIVE, NCHILDREN, DEPTH = 50_000, 6, 20
print("PID", os.getpid(), flush=True)
sys.activate_stack_trampoline(MODE)

def live():
    return 1

def make(prefix, n):
    funcs = []
    for i in range(n):
        name = f"{prefix}_{i}"
        code = live.__code__.replace(co_name=name, co_qualname=name)
        funcs.append(types.FunctionType(code, globals()))
    return funcs

funcs = make("live", NLIVE)
assert sum(f() for f in funcs) == NLIVE

def in_child(k):
    print("CHILD", k, os.getpid(), flush=True)
    if k % 3 == 0:
        sys.deactivate_stack_trampoline()
        assert not sys.is_stack_trampoline_active()
        assert sum(f() for f in funcs[::7]) == len(funcs[::7])
    elif k % 3 == 1:
        assert sys.is_stack_trampoline_active()
        new = make(f"child{k}", 2_000)
        assert sum(f() for f in new) == 2_000
    else:
        sys.activate_stack_trampoline(OTHER)
        assert sum(f() for f in funcs[::5]) == len(funcs[::5])
    if k % 2:
        sys.stdout.flush()
        os._exit(0)
    sys.exit(0)

def deep(depth, k):
    if depth:
        return deep(depth - 1, k)
    pid = os.fork()
    if pid == 0:
        in_child(k)
    return pid

children = [deep(DEPTH, k) for k in range(NCHILDREN)]
for pid in children:
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (pid, status)
assert sum(f() for f in funcs) == NLIVE
print("DONE", flush=True)
"""

# 100,000 functions that run once each and go away.
FRESH = """\
import os, sys, types
print("PID", os.getpid(), flush=True)
N = 100_000

def template():
    return 7

total = 0
for i in range(N):
    name = f"fresh_{i}"
    code = template.__code__.replace(co_name=name, co_qualname=name)
    total += types.FunctionType(code, globals())()
assert total == 7 * N, total
print("DONE", flush=True)
"""

def fork_one(child, parent):
    """Source that forks one child, which runs `child` (it prints "CHILD 0
    pid") and leaves through os._exit(0), while the parent runs `parent`,
    then waits for it: a child that did not exit with 0 fails the
    parent."""
    return ("pid = os.fork()\n"
            "if pid == 0:\n"
            + textwrap.indent(child, "    ")
            + "    os._exit(0)\n"
            + parent
            + "_, status = os.waitpid(pid, 0)\n"
            "if os.waitstatus_to_exitcode(status) != 0:\n"
            "    raise SystemExit(f'child {pid}: status {status}')\n")


# A thread without the GIL (ctypes.CDLL) opens the map through the C API
# and is stopped between open() and storing the descriptor (a test point
# of _testinternalcapi); the main thread forks meanwhile.  The child must
# hold no descriptor of its parent's map (it would close it later, as its
# own, when the number may be someone else's).
FORK_WHILE_OPENING = """\
import ctypes, os, threading, _testinternalcapi as t
print("PID", os.getpid(), flush=True)
write = ctypes.CDLL(None).PyUnstable_WritePerfMapEntry
write.argtypes = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p)
stopped, stopped_w = os.pipe()
resume_r, resume = os.pipe()
t.perf_trampoline_test_point("opened", (stopped_w, resume_r))
thread = threading.Thread(target=write, args=(0x1000, 16, b"entry"))
thread.start()
os.read(stopped, 1)
""" + fork_one(child="""\
mine = f"/tmp/perf-{os.getppid()}.map"
held = []
for fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{fd}") == mine:
            held.append(fd)
    except OSError:
        pass
os.write(1, f"CHILD 0 {os.getpid()}\\nHELD {held}\\n".encode())
""", parent="""\
os.write(resume, b"x")
thread.join()
""")

# The child's files move after the interpreter's at-fork hooks: a warning
# about them (the child cannot create its file: no descriptor is left)
# goes through a warnings.showwarning() whose lock, held at the fork, an
# after_in_child hook re-initialises, as logging does with its locks.
WARNING_AFTER_FORK_HOOKS = """\
import os, resource, sys, threading, warnings
print("PID", os.getpid(), flush=True)
sys.activate_stack_trampoline("perf")
lock = threading.Lock()
def showwarning(message, *args, **kwargs):
    if lock.acquire(blocking=False):
        lock.release()
        print("WARNED", message, flush=True)
    else:
        print("LOCK HELD", flush=True)
warnings.showwarning = showwarning
def reinit():
    global lock
    lock = threading.Lock()
os.register_at_fork(after_in_child=reinit)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
lock.acquire()
resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))
""" + fork_one(child="""\
print("CHILD 0", os.getpid(), flush=True)
""", parent="""\
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
lock.release()
""")

# perf to perf_jit while frames run: the frames running in trampolines
# spaced for the map (too close for the jitdump) finish there, so the dump
# must describe those trampolines too.
SWITCH_WHILE_RUNNING = """\
import os, sys
print("PID", os.getpid(), flush=True)
sys.activate_stack_trampoline("perf")
def switch():
    sys.activate_stack_trampoline("perf_jit")
    return 1
def spacer(n):
    return n
def outer():
    for i in range(8):
        spacer(i)
    return switch()
outer()
outer()
sys.deactivate_stack_trampoline()
"""


def map_names(pid, exited_normally=True):
    """The names in /tmp/perf-PID.map, checked: whole lines, each
    trampoline described once."""
    with open(map_path(pid), "rb") as f:
        lines = map_lines(f.read(), exited_normally)
    addrs = set()
    names = []
    for line in lines:
        m = re.fullmatch(r"([0-9a-f]+) ([0-9a-f]+) py::(.*)", line)
        check(m, f"not a map line: {line!r}")
        check(m.group(1) not in addrs, f"described twice: {line!r}")
        addrs.add(m.group(1))
        names.append(m.group(3).split(":", 1)[0])
    return names


def dump_names(pid, exited_normally=True):
    """The names of the code loads in /tmp/jit-PID.dump, checked: a
    strictly valid dump, each trampoline loaded once.  (An address is
    loaded again once a new arena file has taken a dead arena's
    addresses, which takes a whole arena of new functions in between:
    2,730 on x86-64.)"""
    last_load = {}
    names = []
    for rid, rec in read_jitdump(jit_path(pid), pid, exited_normally):
        if rid == JIT_CODE_LOAD:
            n = len(names)
            check(n - last_load.get(rec["addr"], -1000) >= 1000,
                  f"loaded twice: {rec['name']}")
            last_load[rec["addr"]] = n
            name = rec["name"]
            check(name.startswith("py::"), name)
            names.append(name[len("py::"):].split(":", 1)[0])
    return names


class PerfStormTest(unittest.TestCase):

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def run_storm(self, *args):
        """Run the interpreter with `args`; returns its stdout and the pids
        of all its processes, whose files are removed after the test."""
        proc, pids = run_and_forget(self, *args,
                                    timeout=support.LONG_TIMEOUT * 2,
                                    pids=r"^(?:PID|CHILD \d+) (\d+)$")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(proc.stderr, "")
        self.assertTrue(pids, proc.stdout)
        return proc.stdout, pids

    def test_threads_toggling_backends(self):
        out, (pid,) = self.run_storm("-c", THREADS)
        self.assertRegex(out, r"RUNS \d+")
        map_all = map_names(pid)
        dump_all = dump_names(pid)
        for names in (map_all, dump_all):
            self.assertIn("leaf", names)
            self.assertIn("middle", names)
            self.assertIn("numbers", names)

    def check_forks(self, mode, other):
        out, pids = self.run_storm("-c", FORKS, mode, other)
        self.assertIn("DONE", out)
        parent = pids[0]
        children = dict((int(k), int(pid)) for k, pid in
                        re.findall(r"^CHILD (\d+) (\d+)$", out, re.M))
        self.assertEqual(sorted(children), list(range(6)))
        names = {"perf": map_names, "perf_jit": dump_names}
        live = {f"live_{i}" for i in range(50_000)}
        self.assertLessEqual(live, set(names[mode](parent)))
        for k, child in children.items():
            with self.subTest(child=k):
                own = set(names[mode](child, exited_normally=k % 2 == 0))
                # What ran in the child under `mode`: the frames the fork
                # was made from (<module> started before the activation,
                # without a trampoline), and in_child(); not the 50,000
                # it inherited and did not run there.
                self.assertLessEqual({"<listcomp>", "deep", "in_child"}, own)
                self.assertTrue(live.isdisjoint(own))
                if k % 3 == 1:
                    self.assertIn(f"child{k}_1999", own)
                if k % 3 == 2:
                    switched = names[other](child,
                                            exited_normally=k % 2 == 0)
                    self.assertIn("live_0", switched)
                    self.assertIn("live_49995", switched)

    def test_forks_with_many_live_functions_perf(self):
        self.check_forks("perf", "perf_jit")

    def test_forks_with_many_live_functions_perf_jit(self):
        self.check_forks("perf_jit", "perf")

    def check_fresh(self, mode, names):
        out, (pid,) = self.run_storm("-X", mode, "-c", FRESH)
        self.assertIn("DONE", out)
        seen = set(names(pid))
        self.assertLessEqual({f"fresh_{i}" for i in range(100_000)}, seen)

    def test_fresh_functions_perf(self):
        self.check_fresh("perf", map_names)

    def test_fresh_functions_perf_jit(self):
        self.check_fresh("perf_jit", dump_names)

    def test_switch_to_perf_jit_while_running(self):
        out, (pid,) = self.run_storm("-c", SWITCH_WHILE_RUNNING)
        with open(map_path(pid), "rb") as f:
            in_map = {}
            for line in map_lines(f.read(), True):
                addr, _, name = line.split(" ", 2)
                in_map[name.rsplit(":", 1)[0]] = int(addr, 16)
        loads = {}
        for rid, rec in read_jitdump(jit_path(pid), pid, True):
            if rid == JIT_CODE_LOAD:
                loads.setdefault(rec["name"].rsplit(":", 1)[0], set()).add(
                    rec["addr"])
        # the trampolines the two frames ran in, and the new ones
        for name in ("py::outer", "py::switch"):
            self.assertIn(in_map[name], loads[name])
            self.assertEqual(len(loads[name]), 2)
        self.assertNotIn(in_map["py::spacer"], loads["py::spacer"])

    def test_fork_while_opening_the_map(self):
        out, pids = self.run_storm("-c", FORK_WHILE_OPENING)
        self.assertIn("HELD []", out.splitlines())

    def test_warning_after_the_at_fork_hooks(self):
        out, pids = self.run_storm("-c", WARNING_AFTER_FORK_HOOKS)
        self.assertNotIn("LOCK HELD", out)
        self.assertRegex(out, r"WARNED perf trampoline: cannot create "
                              r"/tmp/perf-\d+\.map: Too many open files")


if __name__ == "__main__":
    unittest.main()
