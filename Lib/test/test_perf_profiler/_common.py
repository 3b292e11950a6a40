"""What the modules of test_perf_profiler share: the programs they run,
the check of Python stacks in perf samples, PerfTestCase (a script under
`perf record`), the disassembly reader, and the pid and mount namespace
helpers.  What other test modules share too is in test.support.perf_helper.
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test.support import os_helper
from test.support.script_helper import make_script
from test.support import perf_helper
from test.support.perf_helper import (
    JIT_CODE_LOAD, MAP_LINE, env_with, forget_files, forget_path, is_function,
    jit_path, jitted_paths, load_map_symbols, map_path, parse_perf_script,
    perf_command, read_jitdump, read_map_file, run_and_forget, script_pid,
    written_since)


# Runs 3,000 functions once each: files of several hundred KiB, appended
# to one record at a time.
MANY_FUNCTIONS = """\
import os
print("PID", os.getpid(), flush=True)
ns = {}
exec("\\n".join(f"def f{i}(): return {i}" for i in range(3000)), ns)
print(sum(ns[f"f{i}"]() for i in range(3000)))
"""

# A long-running service's churn: distinct functions made, called once
# and dropped, at most 100 alive (code.replace(): cheap).  churn(n) yields
# every 100 functions.
CHURN = """\
import os, sys, types
print("PID", os.getpid(), flush=True)
def template():
    return 1
code = template.__code__
alive = []
def churn(n):
    for i in range(n):
        f = types.FunctionType(
            code.replace(co_name=f"c{i}", co_firstlineno=i + 1), {})
        f()
        alive.append(f)
        if len(alive) > 100:
            del alive[0]
        if i % 100 == 0:
            yield i
"""

# Ends NESTED after the work, the hard way.
KILL_ITSELF = """\
baz(10_000_000)
import signal
os.kill(os.getpid(), signal.SIGKILL)
"""

# A parent that calls in_parent() and in_both(), forks, and a child that
# calls in_child() and in_both() and leaves through os._exit(); prints the
# child's pid.
FORK_SOURCE = """\
import os
print("PID", os.getpid(), flush=True)
def in_parent():
    return 1
def in_child():
    return 2
def in_both():
    return 3
in_parent()
in_both()
r, w = os.pipe()
child = os.fork()
if child == 0:
    in_child()
    in_both()
    os.write(w, str(os.getpid()).encode())
    os._exit(0)
os.close(w)
print("CHILD", int(os.read(r, 100)), flush=True)
os.waitpid(child, 0)
"""


# The functions that call trampolines: the evaluator (for the frames its
# call instructions push), the PEP 523 hook (frames entered from C) and the
# hook's path for a code object's first call.  Frames are matched with
# is_function(): an optimised build's perf script names parts and copies
# of them (_PyEval_EvalFrameDefault.cold under GCC's PGO and LTO).
EVALUATOR = "_PyEval_EvalFrameDefault"
TRAMPOLINE_CALLERS = (EVALUATOR, "_PyPerfTrampoline_EvalFrame",
                      "eval_frame_new_code")


def setUpModule():
    # The probes of what perf can do here: a minute or two on a slow
    # machine, so not at import.
    perf_helper.setup_module()


def tearDownModule():
    perf_helper.teardown_module()


def assert_python_stacks(test, samples, script, names):
    """At least 90% of the samples taken in the first of `names` show the
    py:: frames of all `names` in stack order (callee first), each with
    the native function that called its trampoline right below it and an
    evaluator frame between it and the next one."""
    chain = [f"py::{name}:{script}" for name in names]
    in_first = [s for s in samples if any(sym == chain[0] for sym, _ in s)]
    test.assertGreater(len(in_first), 10, f"too few samples in {chain[0]}")
    good = 0
    for sample in in_first:
        syms = [sym for sym, _ in sample]
        try:
            pos = [syms.index(name) for name in chain]
        except ValueError:
            continue
        if pos == sorted(pos) and all(
                is_function(syms[p + 1], *TRAMPOLINE_CALLERS)
                and any(is_function(sym, EVALUATOR) for sym in syms[p + 1:q])
                for p, q in zip(pos, pos[1:])):
            good += 1
    test.assertGreaterEqual(good, 0.9 * len(in_first),
                            f"only {good} of {len(in_first)} samples in "
                            f"{names[0]} show {' <- '.join(names)}")


class PerfTestCase(unittest.TestCase):
    """Helpers that run a script under perf record and clean up after it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_perf_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def forget_pid(self, pid):
        forget_files(self, pid)

    def inject_jit(self, data, pid):
        """perf inject --jit of `data`, a recording of process `pid` made
        with -k 1; returns the injected recording's path (removed after
        the test), with the jitted-PID-*.so files perf wrote for `pid`."""
        injected = os.path.join(self.tmp, "perf.jit.data")
        self.addCleanup(os_helper.unlink, injected)
        proc = subprocess.run(perf_command("inject", "-i", data, "--jit",
                                           "-o", injected),
                              capture_output=True, text=True, timeout=300)
        forget_files(self, pid)         # its jitted-PID-*.so
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(jitted_paths(pid, self.since))
        return injected

    def perf_script(self, data, *args):
        """The text of `perf script -i data ARGS`, which must succeed."""
        proc = subprocess.run(perf_command("script", "-i", data, *args),
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def record(self, source, *python_args, env=None, callgraph=("-g",),
               returncode=0):
        """perf record a script; returns (script stdout, parsed samples)."""
        script = make_script(self.tmp, "perf_script", source)
        data = os.path.join(self.tmp, "perf.data")
        self.addCleanup(os_helper.unlink, data)
        cmd = perf_command("record", "-F", "999", *callgraph, "-o", data,
                           "--", sys.executable, *python_args, script)
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=env if env is not None else env_with(),
                              timeout=300)
        # (perf record ends the way the program did)
        self.assertEqual(proc.returncode, returncode, proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        # The program's stderr is in perf's: a map that could not be
        # created or written says so there.
        self.assertNotIn("RuntimeWarning", proc.stderr)
        # Read the map now, while it is certainly ours (see
        # parse_perf_script).
        map_symbols = load_map_symbols(map_path(pid))
        return (proc.stdout,
                parse_perf_script(self.perf_script(data), map_symbols),
                script, pid)


def parse_disassembly(text):
    """[(address, instruction)] of gdb's `disassemble` output; the
    instruction keeps gdb's comment (`# 0x... <symbol>`).  A function in
    several address ranges (its .cold part split off by GCC's PGO or
    LTO) is listed range by range; gdb gives the offsets of a range
    before the entry point as negative numbers (`<-320>`)."""
    code = []
    for line in text.splitlines():
        m = re.match(r"\s*(?:=>\s*)?0x([0-9a-f]+) <[+-]\d+>:\t(.*)$", line)
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    return code


# An x86_64 instruction (AT&T syntax, gdb's comment removed) that writes
# %rcx: its last operand is %rcx or a part of it (compares, tests and
# pushes only read theirs), or it is one of those that change %rcx
# implicitly.
WRITES_RCX = re.compile(
    r"^(?!cmp|test|bt|push)\S+\s.*(?:^|[\s,])%(?:rcx|ecx|cx|cl|ch)$"
    r"|^(?:xchg|cmpxchg|rep|cpuid|syscall|rdtsc|loop)")


def loads_evaluator(insn, evaluator):
    """Whether the instruction puts the address `evaluator` (of
    _PyEval_EvalFrameDefault; None when unknown) into %rcx: a
    position-independent build computes it from %rip (gdb's comment names
    the symbol), a build without PIE (Debian's python3.11) moves it as an
    immediate into %ecx, which clears the upper half of %rcx."""
    if re.search(r",%rcx\b", insn) and "<_PyEval_EvalFrameDefault>" in insn:
        return True
    m = re.match(r"movl?\s+\$0x([0-9a-f]+),%[er]cx\b", insn)
    return bool(m and evaluator is not None
                and int(m.group(1), 16) == evaluator)


def evaluator_transfers(code, evaluator=None):
    """Follow every path of the function `code` (parse_disassembly()) from
    each instruction that loads _PyEval_EvalFrameDefault's address
    (`evaluator`, see loads_evaluator()) into %rcx, as long as %rcx keeps
    it: through direct jumps within the function, both ways at conditional
    ones, ending at a call (which may change %rcx), a return, an
    instruction that writes %rcx or a jump out of the function.  Returns
    the indirect calls and the indirect jumps those paths reach:
    [(address, instruction)] each."""
    index = {addr: n for n, (addr, _) in enumerate(code)}
    calls, jumps = {}, {}
    for start, (_, insn) in enumerate(code):
        if not loads_evaluator(insn, evaluator):
            continue
        todo, seen = [start + 1], set()
        while todo:
            n = todo.pop()
            if n in seen or n >= len(code):
                continue
            seen.add(n)
            addr, insn = code[n]
            insn = re.sub(r"\s*#.*$", "", insn)
            insn = re.sub(r"^(?:notrack|bnd)\s+", "", insn)
            op = insn.split(None, 1)[0] if insn else ""
            if re.match(r"callq?\s+\*", insn):
                calls[addr] = code[n]
            elif re.match(r"jmpq?\s+\*", insn):
                jumps[addr] = code[n]
            elif op.startswith(("call", "ret", "ud2", "hlt")):
                pass
            elif op.startswith("j"):
                m = re.match(r"j[a-z]+\s+0x([0-9a-f]+)", insn)
                if m and int(m.group(1), 16) in index:
                    todo.append(index[int(m.group(1), 16)])
                if op not in ("jmp", "jmpq"):
                    todo.append(n + 1)
            elif not WRITES_RCX.search(insn):
                todo.append(n + 1)
    return sorted(calls.values()), sorted(jumps.values())


def noexec_tmp_command(test):
    """The command prefix that runs a program with /tmp a fresh tmpfs
    mounted noexec, in a mount namespace of its own, or skip the test."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        test.skipTest("needs unshare and root for a mount namespace")
    mount = "mount -t tmpfs -o noexec none /tmp"
    prefix = [unshare, "-m", "--propagation", "private", "sh", "-c"]
    if subprocess.run(prefix + [mount], capture_output=True).returncode:
        test.skipTest("cannot mount a tmpfs in a mount namespace here")
    return prefix + [mount + ' && exec "$@"', "sh"]


def pid_namespace_command(test):
    """The command prefix that runs a program as pid 1 of a new pid
    namespace (so that its file names are known), or skip the test."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        test.skipTest("needs unshare and root for a pid namespace")
    if subprocess.run([unshare, "-pf", "--mount-proc", "true"],
                      capture_output=True).returncode != 0:
        test.skipTest("cannot create a pid namespace here")
    # Its arena files, /tmp/py-perf-1-N.so, are named after no pid the
    # test can see: those written since the test started go after it.
    test.addCleanup(_forget_pid1_arenas, getattr(test, "since", None))
    return [unshare, "-pf", "--mount-proc"]


def _forget_pid1_arenas(since):
    for path in glob.glob("/tmp/py-perf-1-*.so"):
        if since is not None and written_since(path, since):
            os_helper.unlink(path)


def interpreter_dirs_under_tmp():
    """The directories under /tmp that this interpreter starts from, the
    outermost ones: its executable's and its real binary's (a venv's
    python is a symlink), its prefixes (a venv's pyvenv.cfg, the stdlib,
    lib-dynload) and the directories on sys.path."""
    paths = {os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)),
             sys.prefix, sys.exec_prefix, sys.base_prefix,
             sys.base_exec_prefix, *filter(None, sys.path)}
    dirs = {p for path in paths
            for p in (os.path.abspath(path), os.path.realpath(path))
            if p.startswith("/tmp/") and os.path.isdir(p)}
    return sorted(d for d in dirs
                  if not any(d.startswith(other + "/") for other in dirs))


def rebind_interpreter(orig):
    """Shell commands for a mount namespace in which another /tmp has been
    put in place, with the real one visible at `orig`: they bind the
    interpreter's directories under /tmp back at their own paths, so that
    it starts there as anywhere else (a venv names its base interpreter by
    absolute path: it cannot be run from another place)."""
    commands = ["true"]
    for d in interpreter_dirs_under_tmp():
        source = orig + d[len("/tmp"):]
        commands.append(f"mkdir -p {shlex.quote(d)} && "
                        f"mount --bind {shlex.quote(source)} "
                        f"{shlex.quote(d)}")
    return " && ".join(commands)


def check_planted_symlink(test, path, option):
    pid1 = pid_namespace_command(test)
    tmp = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    # In a fresh pid namespace the interpreter is pid 1.
    os_helper.unlink(path)
    os.symlink(victim, path)
    proc = subprocess.run(
        [*pid1, sys.executable, "-X", option,
         "-c", "def f(): return 45\nprint('output intact'); print(f())"],
        capture_output=True, text=True, env=env_with())
    forget_path(test, path)
    test.assertEqual(proc.returncode, 0, proc.stderr)
    test.assertEqual(proc.stdout, "output intact\n45\n")
    test.assertIn("RuntimeWarning", proc.stderr)
    test.assertIn(path, proc.stderr)
    with open(victim) as f:
        test.assertEqual(f.read(), "precious\n")
    test.assertTrue(os.path.islink(path))


class HostileInputCase(unittest.TestCase):
    """The helpers of the TestHostileInput classes: a child's run, the
    backend it chose and the names its files give."""

    ACTIVE = ("import os, sys; print('PID', os.getpid()); "
              "print(sys.is_stack_trampoline_active())")

    def setUp(self):
        # Files last written before this are not the children's.
        self.since = time.time() - 1

    def run_code(self, code, *args, env=None, returncode=0, **kw):
        """Run `code` (which prints "PID n" first) in a child; its files
        are removed afterwards.  Returns (proc, pid)."""
        proc, _ = run_and_forget(self, *args, "-c", textwrap.dedent(code),
                                 env=env, **kw)
        pid = script_pid(proc.stdout)
        self.assertEqual(proc.returncode, returncode, proc.stderr)
        return proc, pid

    def backend_of(self, pid):
        """Which file the run `pid` wrote: "perf", "perf_jit" or None."""
        has_map = written_since(map_path(pid), self.since)
        has_dump = written_since(jit_path(pid), self.since)
        self.assertFalse(has_map and has_dump)
        return "perf" if has_map else "perf_jit" if has_dump else None

    def check_files(self, pid, exited_normally=True):
        """Both files of `pid`, where they exist, read strictly; returns
        the names they give."""
        names = set()
        if written_since(map_path(pid), self.since):
            for line in read_map_file(map_path(pid), exited_normally):
                self.assertRegex(line, MAP_LINE)
                names.add(line.split(" ", 2)[2])
        if written_since(jit_path(pid), self.since):
            for rid, rec in read_jitdump(jit_path(pid), pid,
                                         exited_normally):
                if rid == JIT_CODE_LOAD:
                    names.add(rec["name"])
        return names
