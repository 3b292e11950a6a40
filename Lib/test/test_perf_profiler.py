"""Tests for the perf trampolines (cpython-perf): -X perf, PYTHONPERFSUPPORT,
sys.activate_stack_trampoline() and friends.

The profiling tests run the real `perf record` / `perf script` and are
skipped only when a probe shows that perf cannot sample on this machine
(the probes, the readers of the files and the cleanup helpers are in
test.support.perf_helper).  Every test removes the perf.data files and the
/tmp files of the processes it started, and only those.
"""

import glob
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support import os_helper
from test.support.script_helper import assert_python_ok, make_script
from test.support import perf_helper
from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, JIT_CODE_CLOSE, JIT_CODE_DEBUG_INFO,
    JIT_CODE_LOAD, JIT_CODE_UNWINDING_INFO, JIT_ELF_MACHINE, MAP_LINE,
    NO_TRAMPOLINE, cfa_table, env_with, expected_cfa_rules, forget_files,
    forget_path, function_of, is_function, jit_path, load_map_symbols,
    map_lines, map_path, parse_perf_script, perf_command, read_jitdump,
    read_map_file, requires_perf, requires_perf_inject_jit, run_and_forget,
    run_python, script_pid, written_since)

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")


# The nested calls of the perf howto.  The script prints its pid first so
# that the test knows which map file is its own.
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

# Runs 3,000 functions once each: files of several hundred KiB, appended
# to one record at a time.
MANY_FUNCTIONS = """\
import os
print("PID", os.getpid(), flush=True)
ns = {}
exec("\\n".join(f"def f{i}(): return {i}" for i in range(3000)), ns)
print(sum(ns[f"f{i}"]() for i in range(3000)))
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


# A parent, its child and its grandchild, each calling functions made by
# itself and by its ancestors; the descendants leave through os._exit().
GRANDCHILD_SOURCE = """\
import os
print("PID", os.getpid(), flush=True)
def in_all():
    return 1
def only_in_parent():
    return 2
in_all()
only_in_parent()
child = os.fork()
if child == 0:
    def made_in_child():
        return 3
    made_in_child()
    in_all()
    grandchild = os.fork()
    if grandchild == 0:
        def made_in_grandchild():
            return 4
        made_in_grandchild()
        made_in_child()
        in_all()
        in_all()
        print("GRANDCHILD", os.getpid(), flush=True)
        os._exit(0)
    os.waitpid(grandchild, 0)
    print("CHILD", os.getpid(), flush=True)
    os._exit(0)
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


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@requires_perf
@unittest.skipUnless(HAVE_FRAME_POINTERS,
                     "perf record -g cannot unwind a build without frame "
                     "pointers (see TestPerfJit)")
class TestPerfProfiling(PerfTestCase):

    def test_xoption(self):
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(code, "-X", "perf")
        assert_python_stacks(self, samples, script, NESTED_NAMES)

    def test_environment_variable(self):
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(
            code, env=env_with(PYTHONPERFSUPPORT="1"))
        assert_python_stacks(self, samples, script, NESTED_NAMES)

    def test_killed_process_is_named(self):
        # No exit handler runs: the map has all it needs as soon as a
        # trampoline is handed out, whatever the process dies of.
        code = NESTED + KILL_ITSELF
        _, samples, script, pid = self.record(code, "-X", "perf",
                                              returncode=-signal.SIGKILL)
        assert_python_stacks(self, samples, script, NESTED_NAMES)
        read_map_file(map_path(pid), exited_normally=False)

    def test_sys_api_and_deactivate(self):
        code = NESTED + textwrap.dedent("""
            def ham(n):
                x = 0
                for i in range(n):
                    x += i
                return x

            def eggs(n):
                return ham(n)

            def spam(n):
                return eggs(n)

            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active()
            baz(10_000_000)
            sys.deactivate_stack_trampoline()
            assert not sys.is_stack_trampoline_active()
            spam(10_000_000)
            """)
        _, samples, script, _ = self.record(code)
        assert_python_stacks(self, samples, script, NESTED_NAMES)
        named = {sym for s in samples for sym, _ in s}
        for name in ("ham", "eggs", "spam"):
            self.assertNotIn(f"py::{name}:{script}", named)
        # ham did run, after deactivation, as anonymous evaluator frames:
        # samples later than the last one in foo, in the evaluator, with
        # no py:: frame at all.  ham's loop is foo's, so they are about
        # as many as foo's.
        foo = f"py::foo:{script}"
        in_foo = [s for s in samples if any(sym == foo for sym, _ in s)]
        last_foo = max(s.time for s in in_foo)
        in_ham = [s for s in samples
                  if s.time > last_foo
                  and any(is_function(sym, EVALUATOR) for sym, _ in s)
                  and not any(sym.startswith("py::") for sym, _ in s)]
        self.assertGreater(len(in_ham), len(in_foo) // 3,
                           f"{len(in_ham)} samples after deactivation, "
                           f"{len(in_foo)} in foo before")

    def test_no_native_frame_skipped(self):
        # The trampoline keeps a frame record, so frame-pointer unwinding
        # goes from a trampoline straight to the function that called it.
        # In this build only TRAMPOLINE_CALLERS do (checked below with the
        # build's own disassembly where gdb exists).  A trampoline without
        # a frame record hides that caller: the next frame would be its
        # caller's caller (_PyEval_EvalFrameDefault, PyEval_EvalCode...).
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(code, "-X", "perf")
        # Python frames are named at all (else `checked` below is 0 for a
        # reason that has nothing to do with frame records).
        assert_python_stacks(self, samples, script, NESTED_NAMES)
        checked = 0
        for sample in samples:
            for i, (sym, _) in enumerate(sample):
                if i == 0 or not sym.startswith("py::"):
                    continue
                if i + 1 == len(sample):
                    continue
                checked += 1
                self.assertTrue(
                    is_function(sample[i + 1][0], *TRAMPOLINE_CALLERS),
                    f"frame below {sym} in {sample}")
        self.assertGreater(checked, 30)

    @unittest.skipIf(shutil.which("gdb") is None, "needs gdb")
    def test_only_evalframe_calls_trampolines(self):
        # The build's own knowledge behind test_no_native_frame_skipped:
        # each of TRAMPOLINE_CALLERS calls trampolines with a real call,
        # not a jump that would leave no frame.  A trampoline is entered
        # with the evaluator as fourth argument (%rcx): on every path from
        # an instruction that puts the evaluator's address into %rcx, the
        # indirect transfer reached while %rcx still holds it must be a
        # call (an indirect jump there would be a tail call), and there is
        # at least one.  The whole function is followed, through its
        # jumps, so that an optimised build's layout (PGO, LTO) that moves
        # the call away from the load changes nothing.
        for func in TRAMPOLINE_CALLERS:
            proc = subprocess.run(
                ["gdb", "-batch", "-nx", "-ex", f"disassemble {func}",
                 sys.executable], capture_output=True, text=True,
                timeout=120)
            if "No symbol" in proc.stdout + proc.stderr:
                self.skipTest("interpreter has no symbols")
            code = parse_disassembly(proc.stdout)
            self.assertTrue(code, proc.stdout + proc.stderr)
            calls, jumps = evaluator_transfers(code)
            listing = "\n".join(insn for _, insn in code)
            self.assertEqual(jumps, [],
                             f"{func} tail-calls a trampoline:\n{listing}")
            self.assertGreaterEqual(len(calls), 1,
                                    f"{func} calls no trampoline:\n"
                                    + listing)


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


def evaluator_transfers(code):
    """Follow every path of the function `code` (parse_disassembly()) from
    each instruction that loads _PyEval_EvalFrameDefault's address into
    %rcx, as long as %rcx keeps it: through direct jumps within the
    function, both ways at conditional ones, ending at a call (which may
    change %rcx), a return, an instruction that writes %rcx or a jump out
    of the function.  Returns the indirect calls and the indirect jumps
    those paths reach: [(address, instruction)] each."""
    index = {addr: n for n, (addr, _) in enumerate(code)}
    calls, jumps = {}, {}
    for start, (_, insn) in enumerate(code):
        if not (re.search(r",%rcx\b", insn)
                and "<_PyEval_EvalFrameDefault>" in insn):
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


class TestDisassemblyCheck(unittest.TestCase):
    """evaluator_transfers() finds a tail call however far from the load
    of %rcx the layout puts it, and only transfers while %rcx holds the
    evaluator."""

    LOAD = ("lea    -0x1000(%rip),%rcx        "
            "# 0x1000 <_PyEval_EvalFrameDefault>")

    def disassembly(self, *insns):
        return "\n".join(f"   0x{0x2000 + 4 * n:016x} <+{4 * n}>:\t{insn}"
                         for n, insn in enumerate(insns))

    def transfers(self, *insns):
        calls, jumps = evaluator_transfers(
            parse_disassembly(self.disassembly(*insns)))
        return [i for _, i in calls], [i for _, i in jumps]

    def test_call_far_away_through_jumps(self):
        filler = ["mov    %r12,%rsi"] * 30
        code = [self.LOAD, "test   %rax,%rax",
                f"je     0x{0x2000 + 4 * 40:x} <f+160>", *filler,
                f"jmp    0x{0x2000 + 4 * 42:x} <f+168>"]
        code += ["nop"] * (40 - len(code))
        code += ["call   *%rax", "ret", "mov    %r8,%rdi", "call   *%r10",
                 "ret"]
        self.assertEqual(self.transfers(*code),
                         (["call   *%rax", "call   *%r10"], []))

    def test_tail_call_found(self):
        filler = ["mov    %r12,%rsi"] * 30
        for tail in ("jmp    *%rax", "notrack jmp *%rax"):
            code = [self.LOAD, "test   %rax,%rax",
                    f"jne    0x{0x2000 + 4 * 34:x} <f+136>", *filler,
                    "call   *%rax", tail]
            self.assertEqual(self.transfers(*code),
                             (["call   *%rax"], [tail]))

    def test_cold_range_followed(self):
        # gdb lists a function split in two ranges, the cold one (at lower
        # addresses here) with negative offsets: the path goes on into it.
        hot = [f"   0x{0x2000 + 4 * n:016x} <+{4 * n}>:\t{insn}"
               for n, insn in enumerate([self.LOAD,
                                         "je     0x1000 <f.cold>", "ret"])]
        for transfer, expected in (("call   *%rax", (["call   *%rax"], [])),
                                   ("jmp    *%rax", ([], ["jmp    *%rax"]))):
            cold = [f"   0x{0x1000 + 4 * n:016x} <-{0x1000 - 4 * n}>:\t{insn}"
                    for n, insn in enumerate(["mov    %r12,%rsi", transfer,
                                              "ret"])]
            text = "\n".join(["Dump of assembler code for function f:",
                              "Address range 0x2000 to 0x200c:", *hot,
                              "Address range 0x1000 to 0x100c:", *cold,
                              "End of assembler dump."])
            code = parse_disassembly(text)
            self.assertEqual(len(code), 6)
            calls, jumps = evaluator_transfers(code)
            self.assertEqual(([i for _, i in calls], [i for _, i in jumps]),
                             expected)

    def test_rcx_overwritten(self):
        for clobber in ("mov    %rbx,%rcx", "xor    %ecx,%ecx",
                        "call   0x3000 <other>", "pop    %rcx", "ret"):
            self.assertEqual(
                self.transfers(self.LOAD, clobber, "jmp    *%rax"),
                ([], []))
        # reading %rcx keeps it
        for read in ("cmp    $0x1,%rcx", "test   %rcx,%rcx",
                     "push   %rcx", "mov    %rcx,%rdx"):
            self.assertEqual(
                self.transfers(self.LOAD, read, "jmp    *%rax"),
                ([], ["jmp    *%rax"]))


class TestCloneNames(unittest.TestCase):
    """The stack checks take the symbols of parts and copies of a native
    function that an optimised build's perf script shows (GCC's PGO and
    LTO: _PyEval_EvalFrameDefault.cold) for that function, and only for
    it."""

    SAME = ["_PyEval_EvalFrameDefault.cold",
            "_PyEval_EvalFrameDefault.cold.7",
            "_PyEval_EvalFrameDefault.part.0",
            "_PyEval_EvalFrameDefault.constprop.12",
            "_PyEval_EvalFrameDefault.isra.0",
            "_PyEval_EvalFrameDefault.lto_priv.0",
            "_PyEval_EvalFrameDefault.constprop.0.isra.0",
            "_PyEval_EvalFrameDefault.part.0.cold"]
    OTHERS = ["_PyEval_EvalFrame", "_PyEval_EvalFrame.cold",
              "PyEval_EvalFrameDefault", "x_PyEval_EvalFrameDefault",
              "_PyEval_EvalFrameDefault_slow",
              "_PyEval_EvalFrameDefault_slow.cold",
              "_PyEval_EvalFrameDefault.cold_path",
              "_PyEval_EvalFrameDefault.constprop",
              "_PyEval_EvalFrameDefault.isra.x",
              "_PyEval_EvalFrameDefault.lto_priv",
              "_PyEval_EvalFrameDefault.localalias",
              "_PyEval_EvalFrameDefault+0x10", "[unknown]", ""]

    def test_function_of(self):
        self.assertEqual(function_of(EVALUATOR), EVALUATOR)
        for sym in self.SAME:
            self.assertEqual(function_of(sym), EVALUATOR, sym)
            self.assertTrue(is_function(sym, *TRAMPOLINE_CALLERS), sym)
        for sym in self.OTHERS:
            self.assertFalse(is_function(sym, *TRAMPOLINE_CALLERS), sym)
        self.assertTrue(is_function("eval_frame_new_code.lto_priv.0",
                                    *TRAMPOLINE_CALLERS))
        self.assertFalse(is_function("eval_frame_new_code.lto_priv.0",
                                     EVALUATOR))
        # a Python function's name is never cut
        self.assertEqual(function_of("py::f.cold:a.py"), "py::f.cold:a.py")

    def perf_script(self, evaluator, caller=None):
        """Text of `perf script` with 20 samples in foo, called by bar,
        called by baz, through trampolines called by `caller` (or the
        evaluator) in evaluators whose frames perf names `evaluator`."""
        samples = []
        for n in range(20):
            frames = [evaluator]
            for name in NESTED_NAMES:
                frames.append(f"py::{name}:s.py")
                if caller is not None:
                    frames.append(caller)
                frames.append(evaluator)
            frames += ["PyEval_EvalCode", "main"]
            lines = [f"python 4242 [001] {100 + n / 1000:.6f}: "
                     "1001001 cpu-clock:pppH:"]
            for i, sym in enumerate(frames):
                dso = ("/tmp/perf-4242.map" if sym.startswith("py::")
                       else "/usr/bin/python3.11")
                lines.append(f"\t    {0x7f0000001000 + 16 * i:x} "
                             f"{sym}+0x1c ({dso})")
            samples.append("\n".join(lines) + "\n")
        return "\n".join(samples)

    def check(self, evaluator, caller=None):
        samples = parse_perf_script(self.perf_script(evaluator, caller))
        assert_python_stacks(self, samples, "s.py", NESTED_NAMES)

    def test_stacks_through_clones_accepted(self):
        self.check(EVALUATOR)
        self.check(EVALUATOR, "_PyPerfTrampoline_EvalFrame")
        for sym in self.SAME:
            with self.subTest(sym=sym):
                self.check(sym)
                self.check(sym, "_PyPerfTrampoline_EvalFrame.lto_priv.0")
                self.check(sym, "eval_frame_new_code.isra.0")

    def test_stacks_through_other_functions_refused(self):
        for sym in self.OTHERS:
            with self.subTest(sym=sym):
                with self.assertRaises(AssertionError):
                    self.check(sym)
                # the right caller, but no evaluator between two frames
                with self.assertRaises(AssertionError):
                    self.check(sym, "_PyPerfTrampoline_EvalFrame")
                # an evaluator, but another caller of the trampolines
                with self.assertRaises(AssertionError):
                    self.check(EVALUATOR + ".cold", sym)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestPerfMapFile(PerfTestCase):

    SOURCE = textwrap.dedent("""\
        import os, sys
        print("PID", os.getpid(), flush=True)

        class Spam:
            def method(self):
                def nested():
                    return [x for x in range(3)]
                return nested()

            @property
            def prop(self):
                return (lambda: 42)()

        def gen():
            yield 1

        Spam().method()
        Spam().prop
        list(gen())
        """)

    def run_map_script(self, *args, source=None, env=None):
        script = make_script(self.tmp, "mapped", source or self.SOURCE)
        proc, _ = run_and_forget(self, *args, script, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc, script_pid(proc.stdout), script

    def read_map(self, pid, exited_normally=True):
        return read_map_file(map_path(pid), exited_normally)

    def test_map_lines_and_names(self):
        proc, pid, script = self.run_map_script("-X", "perf")
        self.assertEqual(proc.stderr, "")
        lines = self.read_map(pid)
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, MAP_LINE)
        names = {line.split(" ", 2)[2] for line in lines}
        for qualname in ("<module>", "Spam", "Spam.method",
                         "Spam.method.<locals>.nested",
                         "Spam.method.<locals>.nested.<locals>.<listcomp>",
                         "Spam.prop", "Spam.prop.<locals>.<lambda>", "gen"):
            self.assertIn(f"py::{qualname}:{script}", names)
        # Each trampoline has its own address range.
        starts = [int(line.split()[0], 16) for line in lines]
        self.assertEqual(len(starts), len(set(starts)))

    def test_many_functions(self):
        proc, pid, _ = self.run_map_script("-X", "perf",
                                           source=MANY_FUNCTIONS)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(3000))))
        lines = self.read_map(pid)
        starts = [line.split(" ", 1)[0] for line in lines]
        self.assertEqual(len(starts), len(set(starts)))
        names = {line.split(" ", 2)[2] for line in lines}
        for i in range(3000):
            self.assertIn(f"py::f{i}:<string>", names)

    def test_map_file_mode_and_own_entries_only(self):
        _, pid, script = self.run_map_script("-X", "perf")
        st = os.stat(map_path(pid))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        # The process's own map only: no other pid's file was created by
        # the run, and the file lists no function twice.
        lines = self.read_map(pid)
        self.assertEqual(len(lines), len(set(lines)))

    def test_no_map_without_option(self):
        _, pid, _ = self.run_map_script()
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_env_zero_and_garbage_are_ignored(self):
        for value in ("0", "", "yes", "1x"):
            with self.subTest(value=value):
                _, pid, _ = self.run_map_script(
                    env=env_with(PYTHONPERFSUPPORT=value))
                self.assertFalse(written_since(map_path(pid), self.since))

    def test_env_ignored_with_E(self):
        _, pid, _ = self.run_map_script("-E",
                                        env=env_with(PYTHONPERFSUPPORT="1"))
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_fork_child_gets_its_own_map(self):
        proc, pid, script = self.run_map_script("-X", "perf",
                                                source=FORK_SOURCE)
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        self.forget_pid(child)
        parent_names = {l.split(" ", 2)[2] for l in self.read_map(pid)}
        child_names = {l.split(" ", 2)[2]
                       for l in self.read_map(child, exited_normally=False)}
        self.assertIn(f"py::in_parent:{script}", parent_names)
        self.assertNotIn(f"py::in_child:{script}", parent_names)
        self.assertIn(f"py::in_child:{script}", child_names)
        # Inherited trampolines the child runs are described in its file
        # too: the one running at the fork, and one called again after.
        self.assertIn(f"py::<module>:{script}", child_names)
        self.assertIn(f"py::in_both:{script}", child_names)
        # Those it never runs cost it nothing.
        self.assertNotIn(f"py::in_parent:{script}", child_names)

    def test_grandchild_describes_what_it_runs(self):
        # Each generation describes the inherited trampolines it runs,
        # whichever ancestor made them, and its own, each once.
        proc, pid, script = self.run_map_script(
            "-X", "perf", source=GRANDCHILD_SOURCE)
        pids = dict(re.findall(r"^(CHILD|GRANDCHILD) (\d+)$", proc.stdout,
                               re.M))
        for p in pids.values():
            self.forget_pid(int(p))
        expected = {"CHILD": ["<module>", "made_in_child", "in_all"],
                    "GRANDCHILD": ["<module>", "made_in_child", "in_all",
                                   "made_in_grandchild"]}
        for who, names in expected.items():
            lines = self.read_map(int(pids[who]), exited_normally=False)
            self.assertCountEqual([l.split(" ", 2)[2] for l in lines],
                                  [f"py::{n}:{script}" for n in names])
            starts = [int(l.split()[0], 16) for l in lines]
            self.assertEqual(len(starts), len(set(starts)))

    def test_planted_symlink_is_not_followed(self):
        check_planted_symlink(self, map_path(1), "perf")

    def test_foreign_file_is_refused(self):
        # A regular file with a second link (a planted hard link) is not
        # truncated or written.
        pid1 = pid_namespace_command(self)
        victim = os.path.join("/tmp", f"test_perf_victim_{os.getpid()}")
        with open(victim, "w") as f:
            f.write("precious\n")
        self.addCleanup(os_helper.unlink, victim)
        link = map_path(1)
        os_helper.unlink(link)
        os.link(victim, link)
        proc = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c", "print('ok')"],
            capture_output=True, text=True, env=env_with())
        forget_path(self, link)
        self.assertEqual(proc.stdout, "ok\n")
        self.assertIn("RuntimeWarning", proc.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_same_pid_in_another_namespace(self):
        # Two pid namespaces that share /tmp: both interpreters are pid 1
        # and want /tmp/perf-1.map.  The second gets a warning and leaves
        # the file alone; the first writes on, undisturbed (truncated
        # under it, its file would lose the lines written before, and perf
        # the names of its functions).
        pid1 = pid_namespace_command(self)
        path = map_path(1)
        os_helper.unlink(path)
        first = subprocess.Popen(
            [*pid1, sys.executable, "-X", "perf", "-c", textwrap.dedent("""\
                import sys
                def before():
                    return 1
                before()
                print("ready", flush=True)
                sys.stdin.readline()
                """) + MANY_FUNCTIONS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env_with())
        self.addCleanup(first.kill)
        self.assertEqual(first.stdout.readline(), "ready\n")
        second = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c",
             "def g():\n    return 2\nprint(g())"],
            capture_output=True, text=True, env=env_with())
        out, err = first.communicate("go\n", timeout=300)
        forget_path(self, path)
        self.assertEqual((second.returncode, second.stdout), (0, "2\n"))
        self.assertIn(f"RuntimeWarning: perf trampoline: cannot create "
                      f"{path}", second.stderr)
        self.assertEqual(first.returncode, 0, err)
        self.assertEqual(out.split()[-1], str(sum(range(3000))))
        names = {line.split(" ", 2)[2] for line in read_map_file(path)}
        self.assertIn("py::before:<string>", names)
        self.assertIn("py::f2999:<string>", names)
        self.assertNotIn("py::g:<string>", names)

    def check_cut_short(self, stderr, lines):
        """The map of a run whose file stopped growing part-way: a warning
        says so, and the lines written before are there, whole."""
        self.assertIn("RuntimeWarning: perf trampoline: cannot write",
                      stderr)
        self.assertGreater(len(lines), 100)
        for line in lines:
            self.assertRegex(line, MAP_LINE)

    def test_full_disk(self):
        # /tmp on a small tmpfs of its own (a private mount namespace):
        # the file cannot grow past it.  The program runs on, a warning
        # says why, and the map holds the whole lines written before.
        # The tmpfs is mounted on a directory of ours first, with the real
        # /tmp bound inside it as orig/, then moved onto /tmp; the
        # interpreter's own directories under /tmp, if any, are bound
        # back in place from orig/ (rebind_interpreter()).
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        shell = ('S=$2; mount -t tmpfs -o size=96k none "$S" && '
                 'mkdir "$S/orig" && mount --bind /tmp "$S/orig" && '
                 'mount --move "$S" /tmp && '
                 + rebind_interpreter("/tmp/orig") + ' || exit 99; '
                 '"$0" -X perf -c "$1"; echo "exit $?"; echo "== map"; '
                 'cat /tmp/perf-*.map')
        proc = subprocess.run(
            [unshare, "-m", "sh", "-c", shell, sys.executable,
             MANY_FUNCTIONS, small], capture_output=True, text=True,
            env=env_with())
        if proc.returncode == 99:
            self.skipTest("cannot mount a tmpfs here")
        out, _, text = proc.stdout.partition("== map\n")
        self.assertEqual(out.split()[-3:], [str(sum(range(3000))), "exit",
                                            "0"])
        self.assertIn("No space left on device", proc.stderr)
        self.check_cut_short(proc.stderr, map_lines(text.encode()))

    def test_one_write_per_function(self):
        # Each record is appended whole with one write(), and the file is
        # never cut, grown ahead or mapped for writing: it is the
        # process's, and other writers may append to it too.
        strace = shutil.which("strace")
        if strace is None:
            self.skipTest("needs strace")
        out = os.path.join(self.tmp, "strace.out")
        for option, path in (("perf", map_path), ("perf_jit", jit_path)):
            with self.subTest(option=option):
                proc = subprocess.run(
                    [strace, "-f", "-o", out, "-e",
                     "trace=write,pwrite64,writev,pwritev,fallocate,"
                     "ftruncate", sys.executable, "-X", option, "-c",
                     MANY_FUNCTIONS],
                    capture_output=True, text=True, env=env_with())
                if proc.returncode != 0 and "ptrace" in proc.stderr:
                    self.skipTest("strace cannot trace here")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                pid = script_pid(proc.stdout)
                forget_files(self, pid)
                if option == "perf":
                    records = len(read_map_file(path(pid)))
                else:
                    records = len(read_jitdump(path(pid), pid))
                with open(out) as f:
                    traced = [line.split(None, 1)[1]
                              for line in f if "(" in line]
                # A stale file of an earlier process with our pid (pids
                # come round again; /tmp is shared) is emptied when it is
                # opened, before anything is written: that ftruncate(fd, 0)
                # is the only one allowed.
                while traced and re.match(r"ftruncate\(\d+, 0\)", traced[0]):
                    del traced[0]
                calls = [line.split("(", 1)[0] for line in traced]
                self.assertGreaterEqual(records, 3000)
                self.assertNotIn("fallocate", calls)
                self.assertNotIn("ftruncate", calls)
                # the jitdump's three records of a function are one write;
                # stdout's two lines, and whatever start-up writes
                per_function = 1 if option == "perf" else 3
                self.assertLessEqual(len(calls),
                                     records // per_function + 10)

    def test_write_failure_keeps_whole_lines(self):
        # A file-size limit (RLIMIT_FSIZE, whose SIGXFSZ Python ignores)
        # makes the file's growth fail part-way, as a full disk does: the
        # program runs on, a warning says why, and the map holds the whole
        # lines written before, nothing after them.
        import resource
        script = make_script(self.tmp, "many", MANY_FUNCTIONS)
        limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                           (100_000, 100_000))
        proc = subprocess.run([sys.executable, "-X", "perf", script],
                              capture_output=True, text=True,
                              env=env_with(), preexec_fn=limit)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(3000))))
        self.assertLessEqual(os.path.getsize(map_path(pid)), 100_000)
        self.check_cut_short(proc.stderr, self.read_map(pid))


# A parent that warms up, forks a child that spins in child_work(), then
# calls a function of its own (the names perf gave the child's samples
# before new trampolines left inherited arenas).  With "wait", the child
# spins until the test, attached with perf record -p, says stop.
FORK_SOURCE_TEMPLATE = """\
import os, sys
print("PID", os.getpid(), flush=True)
def warm():
    return 1
warm()
{before_fork}
r, w = os.pipe()
pid = os.fork()
if pid == 0:
{after_fork}
    os.close(r)
    os.write(w, b"go")
    if sys.argv[1:] == ["wait"]:
        while not os.path.exists(sys.argv[0] + ".stop"):
            child_work(200_000)
    else:
        child_work(5_000_000)
    os._exit(0)
os.close(w)
os.read(r, 2)
print("CHILD", pid, flush=True)
def parent_only_function():
    return 2
parent_only_function()
os.waitpid(pid, 0)
"""
CHILD_WORK = """\
def child_work(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""
# child_work() first called in the child, after the fork ...
FORK_HOT_SOURCE = FORK_SOURCE_TEMPLATE.format(
    before_fork="", after_fork=textwrap.indent(CHILD_WORK, "    "))
# ... or in the parent, before it: the child runs it through an
# inherited trampoline.
FORK_INHERITED_SOURCE = FORK_SOURCE_TEMPLATE.format(
    before_fork=CHILD_WORK + "child_work(10)", after_fork="")


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestProcessShapes(PerfTestCase):
    """Forked children, embedding, other writers of the map, other frame
    evaluators, sub-interpreters."""

    def child_samples(self, text, pid, child):
        samples = parse_perf_script(
            text, {child: load_map_symbols(map_path(child))})
        return [s for s in samples if s.tid == child]

    def check_child_named(self, samples, script):
        work = f"py::child_work:{script}"
        named = [s for s in samples if any(sym == work for sym, _ in s)]
        self.assertGreater(len(named), 10, f"{len(samples)} child samples")
        wrong = [s for s in samples
                 if any(sym.startswith(("py::parent_only_function",
                                        "py::warm")) for sym, _ in s)]
        self.assertEqual(wrong, [])
        module = f"py::<module>:{script}"
        below = [s for s in named
                 if [sym for sym, _ in s if sym.startswith("py::")]
                 == [work, module]]
        self.assertGreaterEqual(len(below), 0.9 * len(named))

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_forked_child_named_by_perf(self):
        # perf follows the fork: it names the child's inherited arenas
        # from the parent's map, its new ones from the child's.
        script = make_script(self.tmp, "forked", FORK_HOT_SOURCE)
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-g", "-o", data, "--",
                         sys.executable, "-X", "perf", script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        self.forget_pid(pid)
        self.forget_pid(child)
        text = self.perf_script(data)
        self.check_child_named(self.child_samples(text, pid, child), script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def record_child_later(self, source, backend, *options):
        """Run `source` with the argument "wait" under -X `backend`, and
        perf record -p its child for a second with `options`; returns the
        perf.data path, the script, the parent's and the child's pids."""
        script = make_script(self.tmp, "forked", source)
        stop = script + ".stop"
        self.addCleanup(os_helper.unlink, stop)
        proc = subprocess.Popen([sys.executable, "-X", backend, script,
                                 "wait"], stdout=subprocess.PIPE,
                                text=True, env=env_with())
        self.addCleanup(proc.kill)
        pid = script_pid(proc.stdout.readline())
        child = int(re.search(r"CHILD (\d+)",
                              proc.stdout.readline()).group(1))
        data = os.path.join(self.tmp, "perf.data")
        try:
            rec = subprocess.run(
                perf_command("record", "-F", "999", *options, "-o", data,
                             "-p", str(child), "--", "sleep", "1"),
                capture_output=True, text=True, timeout=300)
        finally:
            with open(stop, "w"):
                pass
        returncode = proc.wait(timeout=300)
        # Both have exited now (the parent waits for the child).
        self.forget_pid(pid)
        self.forget_pid(child)
        self.assertEqual(returncode, 0)
        self.assertEqual(rec.returncode, 0, rec.stderr)
        return data, script, pid, child

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_forked_child_named_by_perf_attached_later(self):
        # perf record -p CHILD: perf learns the child's mappings from
        # /proc and names them all from the child's own map, which must
        # describe the trampolines it runs, inherited ones too (here the
        # one of <module>, running at the fork).
        self.check_map_child_attached_later(FORK_HOT_SOURCE)

    def check_map_child_attached_later(self, source):
        data, script, pid, child = self.record_child_later(
            source, "perf", "-g")
        text = self.perf_script(data)
        self.check_child_named(self.child_samples(text, pid, child), script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_inherited_function_named_by_perf_attached_later(self):
        # The child's hot function got its trampoline in the parent: the
        # child's map describes it from the child's first call on.
        self.check_map_child_attached_later(FORK_INHERITED_SOURCE)

    @requires_perf
    @requires_perf_inject_jit
    def test_inherited_function_named_by_perf_jit_attached_later(self):
        # The same with the jitdump: perf inject finds the child's dump
        # through the child's own mapping of it, whose code loads carry
        # the child's pid.
        data, script, pid, child = self.record_child_later(
            FORK_INHERITED_SOURCE, "perf_jit", "-k", "1", "--call-graph",
            "dwarf")
        jit = os.path.join(self.tmp, "perf.jit.data")
        inj = subprocess.run(perf_command("inject", "-i", data, "--jit",
                                          "-o", jit),
                             capture_output=True, text=True, timeout=300)
        forget_files(self, child)       # its jitted-CHILD-*.so
        self.assertEqual(inj.returncode, 0, inj.stderr)
        text = self.perf_script(jit)
        samples = [s for s in parse_perf_script(text) if s.tid == child]
        self.check_child_named(samples, script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_pre_fork_server_compiled_handlers(self):
        # A master gives its request handler a trampoline before it forks
        # (PyUnstable_PerfTrampoline_CompileCode, with persist-after-fork
        # on, through _testinternalcapi's hooks), then never calls it;
        # its workers do, and perf names the handler in each of them.
        try:
            import _testinternalcapi
        except ImportError:
            self.skipTest("needs _testinternalcapi")
        script = make_script(self.tmp, "prefork", textwrap.dedent("""\
            import os, _testinternalcapi as t
            print("PID", os.getpid(), flush=True)
            def handle_request(n):
                s = 0
                for i in range(n):
                    s += i
                return s
            assert t.compile_perf_trampoline_entry(
                handle_request.__code__) == 0
            assert t.perf_trampoline_set_persist_after_fork(1) == 1
            workers = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    handle_request(3_000_000)
                    os._exit(0)
                workers.append(pid)
            for pid in workers:
                os.waitpid(pid, 0)
            print("WORKERS", *workers, flush=True)
            """))
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-g", "-o", data, "--",
                         sys.executable, "-X", "perf", script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.forget_pid(script_pid(proc.stdout))
        workers = [int(w) for w in
                   re.search(r"WORKERS (.*)", proc.stdout).group(1).split()]
        for worker in workers:
            self.forget_pid(worker)
        text = self.perf_script(data)
        handler = f"py::handle_request:{script}"
        for worker in workers:
            names = load_map_symbols(map_path(worker))
            self.assertIn(handler, [name for _, _, name in names])
            samples = [s for s in parse_perf_script(text, {worker: names})
                       if s.tid == worker]
            named = [s for s in samples
                     if any(sym == handler for sym, _ in s)]
            self.assertGreater(len(named), 10,
                               f"{len(samples)} samples of worker {worker}")

    def embed(self, code, env):
        testembed = os.path.join(os.path.dirname(sys.executable),
                                 "Programs", "_testembed")
        if not os.path.exists(testembed):
            self.skipTest("needs Programs/_testembed of a build tree")
        proc = subprocess.run(
            [testembed, "test_repeated_init_exec", textwrap.dedent(code)],
            capture_output=True, text=True, env=env_with(**env),
            cwd=os.path.dirname(sys.executable), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Warning", proc.stderr)
        pids = set(re.findall(r"PID (\d+)", proc.stdout))
        self.assertEqual(len(pids), 1, proc.stdout)
        pid = int(pids.pop())
        forget_files(self, pid)
        return proc, pid

    EMBEDDED = """
        import os, sys
        def work(n):
            return n + 1
        work(1)
        print("PID", os.getpid(), sys.is_stack_trampoline_active())
        """

    def test_embedded_reinitialized_map(self):
        # Py_Initialize() after Py_FinalizeEx(), several times in a row:
        # each round names its functions.
        proc, pid = self.embed(self.EMBEDDED, {"PYTHONPERFSUPPORT": "1"})
        self.assertNotIn("False", proc.stdout)
        names = [line.split(" ", 2)[2]
                 for line in read_map_file(map_path(pid))]
        self.assertGreaterEqual(names.count("py::work:<string>"), 3, names)

    def test_embedded_reinitialized_jitdump(self):
        proc, pid = self.embed(self.EMBEDDED,
                               {"PYTHON_PERF_JIT_SUPPORT": "1"})
        self.assertNotIn("False", proc.stdout)
        records = read_jitdump(jit_path(pid), pid)
        # one dump, one header, and no CLOSE but the last (perf inject
        # stops reading at a CLOSE record)
        ids = [rid for rid, _ in records]
        self.assertEqual(ids.count(JIT_CODE_CLOSE), 1)
        self.assertEqual(ids[-1], JIT_CODE_CLOSE)
        names = [rec["name"] for rid, rec in records
                 if rid == JIT_CODE_LOAD]
        self.assertGreaterEqual(names.count("py::work:<string>"), 3, names)

    AGENT = """
        import os, sys
        print("PID", os.getpid(), flush=True)
        path = f"/tmp/perf-{os.getpid()}.map"
        def before():
            return 1
        before()
        with open(path, "a") as f:
            f.write("10000 10 agent_one\\n")
        ns = {}
        exec("\\n".join(f"def f{i}(): return {i}" for i in range(500)), ns)
        for i in range(250):
            ns[f"f{i}"]()
        with open(path, MODE) as f:
            f.write("20000 10 agent_two\\n")
        for i in range(250, 500):
            ns[f"f{i}"]()
        print(sum(ns[f"f{i}"]() for i in range(500)))
        """

    def run_agent(self, mode):
        code = self.AGENT.replace("MODE", repr(mode))
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(500))))
        lines = read_map_file(map_path(pid))
        for line in lines:
            self.assertRegex(line, r"^[0-9a-f]+ [0-9a-f]+ \S")
        return [line.split(" ", 2)[2] for line in lines]

    def test_other_writer_appending(self):
        # Another writer of the process's map (a JIT, an agent) keeps its
        # lines, and ours stay whole lines around them.
        names = self.run_agent("a")
        for name in ("agent_one", "agent_two", "py::before:<string>",
                     "py::f0:<string>", "py::f499:<string>"):
            self.assertIn(name, names)
        self.assertLess(names.index("agent_one"),
                        names.index("py::f0:<string>"))

    def test_other_writer_truncating(self):
        # One that empties the file ("w") costs the lines written before,
        # never the process: it runs on and appends after the newcomer.
        names = self.run_agent("w")
        self.assertEqual(names[0], "agent_two")
        self.assertIn("py::f499:<string>", names)

    def test_stale_file_of_same_pid_is_emptied(self):
        # A map left by an earlier process that had our pid would make
        # perf give our addresses its names.
        pid1 = pid_namespace_command(self)
        path = map_path(1)
        with open(path, "w") as f:
            f.write("0 ffffffffffff stale_function\n")
        past = os.stat(path).st_mtime - 2
        os.utime(path, (past, past))
        proc = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c",
             "def g():\n    return 2\nprint(g())"],
            capture_output=True, text=True, env=env_with())
        forget_path(self, path)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, "2\n", ""))
        names = [line.split(" ", 2)[2] for line in read_map_file(path)]
        self.assertNotIn("stale_function", names)
        self.assertIn("py::g:<string>", names)

    def test_activate_after_another_evaluator_came_and_went(self):
        try:
            import _testinternalcapi
        except ImportError:
            self.skipTest("needs _testinternalcapi")
        code = """
            import os, sys, _testinternalcapi
            print("PID", os.getpid())
            _testinternalcapi.set_eval_frame_record([])
            _testinternalcapi.set_eval_frame_default()
            assert not sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active()
            def later():
                return 1
            later()
            """
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        names = [line.split(" ", 2)[2]
                 for line in read_map_file(map_path(pid))]
        self.assertIn("py::later:<string>", names)

    def test_retry_after_failed_activation(self):
        # A file size limit stops an activation part-way through
        # describing the live functions; once it is lifted, a second one
        # describes every function, in the same file, in both modes.
        code = """
            import os, resource, sys, warnings
            print("PID", os.getpid(), flush=True)
            ns = {}
            exec("\\n".join(f"def f{i}(): return {i}" for i in range(3000)),
                 ns)
            for i in range(3000):
                ns[f"f{i}"]()
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (60_000, resource.RLIM_INFINITY))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sys.activate_stack_trampoline(BACKEND)
            assert w and "cannot write" in str(w[0].message), w
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (resource.RLIM_INFINITY,) * 2)
            sys.activate_stack_trampoline(BACKEND)
            assert sys.is_stack_trampoline_active()
            """
        for backend, start in (("perf", "perf_jit"), ("perf_jit", "perf")):
            with self.subTest(backend=backend):
                proc, _ = run_and_forget(self, "-X", start, "-c",
                                         textwrap.dedent(code).replace(
                                             "BACKEND", repr(backend)))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                pid = script_pid(proc.stdout)
                if backend == "perf":
                    names = {line.split(" ", 2)[2]
                             for line in read_map_file(map_path(pid))}
                else:
                    names = {rec["name"] for rid, rec in
                             read_jitdump(jit_path(pid), pid)
                             if rid == JIT_CODE_LOAD}
                missing = [i for i in range(3000)
                           if f"py::f{i}:<string>" not in names]
                self.assertEqual(missing, [])

    def test_sub_interpreter_cannot_turn_main_off(self):
        # Trampolines are the main interpreter's: a sub-interpreter is
        # told it has none, cannot activate them, and its deactivate does
        # nothing.
        try:
            import _xxsubinterpreters
        except ImportError:
            self.skipTest("needs _xxsubinterpreters")
        code = '''
            import os, sys, _xxsubinterpreters as interpreters
            print("PID", os.getpid())
            sub = interpreters.create()
            interpreters.run_string(sub, """if 1:
                import sys
                assert not sys.is_stack_trampoline_active()
                try:
                    sys.activate_stack_trampoline("perf")
                except RuntimeError:
                    pass
                else:
                    raise AssertionError("activated in a sub-interpreter")
                sys.deactivate_stack_trampoline()
                """)
            interpreters.destroy(sub)
            print(sys.is_stack_trampoline_active())
            '''
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split()[-1], "True")


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


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestJitDumpFile(unittest.TestCase):
    """The dump itself, without perf."""

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def run_jit(self, code, *args, env=None):
        proc, pids = run_and_forget(self, *args, "-c", textwrap.dedent(code),
                                    env=env)
        self.assertEqual(len(pids), 1, proc.stdout + proc.stderr)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc, pids[0]

    SOURCE = """
        import os, sys
        print("PID", os.getpid(), flush=True)
        class K:
            def m(self):
                return [x for x in range(2)]
        def f(n):
            return n
        for i in range(3):
            f(i); K().m()
        """

    def check_dump(self, pid, must_name=()):
        records = read_jitdump(jit_path(pid), pid)
        self.assertEqual(records[-1][0], JIT_CODE_CLOSE)
        loads = []
        indexes = []
        for i, (rid, rec) in enumerate(records):
            if rid != JIT_CODE_LOAD:
                continue
            # debug info, then unwinding info, then the load
            self.assertGreaterEqual(i, 2)
            (did, dbg), (uid, unw) = records[i - 2], records[i - 1]
            self.assertEqual((did, uid),
                             (JIT_CODE_DEBUG_INFO, JIT_CODE_UNWINDING_INFO))
            self.assertEqual(dbg["addr"], rec["addr"])
            self.assertTrue(rec["name"].startswith("py::"), rec["name"])
            filename = rec["name"].rsplit(":", 1)[-1]
            for eaddr, line, discrim, fname in dbg["entries"]:
                self.assertTrue(rec["addr"] <= eaddr
                                <= rec["addr"] + rec["size"])
                self.assertGreaterEqual(line, 1)
                self.assertEqual(fname, filename)
            self.assertEqual(unw["mapped"], len(unw["unwind"]))
            # cfa_table() reads x86_64 rules; the aarch64 and riscv64
            # ones are checked the same way, at every instruction, by
            # make check-cross (tools/cross/unwind.py).
            if os.uname().machine == "x86_64":
                rows, eh_size = cfa_table(unw["unwind"], rec["size"])
                self.assertEqual(unw["hdr_size"],
                                 len(unw["unwind"]) - eh_size)
                expected = expected_cfa_rules(rec["code"])
                # exact at every instruction boundary
                for at, rule in expected.items():
                    self.assertEqual(rows[at], rule,
                                     f"CFA rule at +{at} of {rec['name']}")
            indexes.append(rec["index"])
            loads.append(rec)
        self.assertEqual(indexes, sorted(set(indexes)))
        # perf maps code + unwind data: no other trampoline inside that
        addrs = sorted(r["addr"] for r in loads)
        span = ((loads[0]["size"] + 7) & ~7) + len(
            records[[r[0] for r in records].index(JIT_CODE_UNWINDING_INFO)]
            [1]["unwind"])
        for a, b in zip(addrs, addrs[1:]):
            self.assertGreaterEqual(b - a, span)
        names = {r["name"] for r in loads}
        for name in must_name:
            self.assertIn(name, names)
        return records

    def test_dump_is_strictly_valid(self):
        proc, pid = self.run_jit(self.SOURCE, "-X", "perf_jit")
        self.assertEqual(proc.stderr, "")
        self.check_dump(pid, ["py::f:<string>", "py::K.m:<string>",
                              "py::K.m.<locals>.<listcomp>:<string>"])
        st = os.stat(jit_path(pid))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_many_functions(self):
        proc, pid = self.run_jit(MANY_FUNCTIONS, "-X", "perf_jit")
        self.assertGreater(os.path.getsize(jit_path(pid)),
                           4 * 64 * 1024)
        self.check_dump(pid, [f"py::f{i}:<string>" for i in range(3000)])

    def test_env_and_sys(self):
        _, pid = self.run_jit(self.SOURCE,
                              env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))
        self.check_dump(pid, ["py::f:<string>"])
        _, pid = self.run_jit(
            "import sys\n"
            "sys.activate_stack_trampoline('perf_jit')\n"
            "assert sys.is_stack_trampoline_active()\n"
            + textwrap.dedent(self.SOURCE))
        self.check_dump(pid, ["py::f:<string>"])
        # -X perf_jit wins over -X perf, the JIT variable over the other
        for args, env in ((("-X", "perf", "-X", "perf_jit"), {}),
                          ((), {"PYTHONPERFSUPPORT": "1",
                                "PYTHON_PERF_JIT_SUPPORT": "1"})):
            _, pid = self.run_jit(self.SOURCE, *args, env=env_with(**env))
            self.check_dump(pid, ["py::f:<string>"])
            self.assertFalse(written_since(map_path(pid), self.since))

    def test_switching_backends(self):
        proc, pid = self.run_jit("""
            import os, sys
            print("PID", os.getpid(), flush=True)
            def under_perf():
                return 1
            def under_jit():
                return 2
            def again_perf():
                return 3
            sys.activate_stack_trampoline("perf")
            under_perf()
            # more trampolines made 16 bytes apart, too close for the
            # jitdump: switching gives them new ones, properly spaced
            helpers = [eval(f"lambda: {i}") for i in range(5)]
            for h in helpers:
                h()
            sys.activate_stack_trampoline("perf_jit")
            for h in helpers:
                h()
            under_jit(); under_perf()
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            again_perf(); under_jit(); under_perf()
            print(under_perf() + under_jit() + again_perf())
            """)
        self.assertEqual(proc.stdout.split()[-1], "6")
        mapped = {line.split(" ", 2)[2]
                  for line in read_map_file(map_path(pid))}
        for name in ("under_perf", "under_jit", "again_perf"):
            self.assertIn(f"py::{name}:<string>", mapped)
        self.check_dump(pid, ["py::under_perf:<string>",
                              "py::under_jit:<string>"])

    def test_fork_child_records_its_own_ids(self):
        proc, pid = self.run_jit(FORK_SOURCE, "-X", "perf_jit")
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        forget_files(self, child)
        # The child's dump is strictly valid too (no CLOSE: os._exit) and
        # its code loads carry the child's pid and thread id, not the
        # parent's (the forking thread's id changes in the child).
        records = read_jitdump(jit_path(child), child,
                               exited_normally=False)
        loads = {r["name"]: r for rid, r in records if rid == JIT_CODE_LOAD}
        self.assertIn("py::in_child:<string>", loads)
        self.assertIn("py::in_both:<string>", loads)
        self.assertIn("py::<module>:<string>", loads)
        self.assertNotIn("py::in_parent:<string>", loads)
        for rec in loads.values():
            self.assertEqual((rec["pid"], rec["tid"]), (child, child))
        self.check_dump(pid, ["py::in_parent:<string>"])

    def test_planted_symlink_is_not_followed(self):
        check_planted_symlink(self, "/tmp/jit-1.dump", "perf_jit")


def pid_namespace_command(test):
    """The command prefix that runs a program as pid 1 of a new pid
    namespace (so that its file names are known), or skip the test."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        test.skipTest("needs unshare and root for a pid namespace")
    if subprocess.run([unshare, "-pf", "--mount-proc", "true"],
                      capture_output=True).returncode != 0:
        test.skipTest("cannot create a pid namespace here")
    return [unshare, "-pf", "--mount-proc"]


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


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@requires_perf_inject_jit
class TestPerfJit(PerfTestCase):
    """perf record --call-graph dwarf + perf inject --jit, on this build
    (make test runs it on the no-frame-pointer build too)."""

    def record_jit(self, source, *python_args, env=None, returncode=0):
        script = make_script(self.tmp, "perf_script", source)
        data = os.path.join(self.tmp, "perf.data")
        jit = os.path.join(self.tmp, "perf.jit.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-k", "1", "--call-graph",
                         "dwarf", "-o", data, "--", sys.executable,
                         *python_args, script),
            capture_output=True, text=True,
            env=env if env is not None else env_with(), timeout=300)
        self.assertEqual(proc.returncode, returncode, proc.stderr)
        pid = script_pid(proc.stdout)
        forget_files(self, pid)
        inj = subprocess.run(perf_command("inject", "-i", data, "--jit",
                                          "-o", jit),
                             capture_output=True, text=True, timeout=300)
        forget_files(self, pid)         # its jitted-PID-*.so
        self.assertEqual(inj.returncode, 0, inj.stderr)
        self.assertTrue(glob.glob(f"/tmp/jitted-{pid}-*.so"))
        return script, jit, parse_perf_script(self.perf_script(jit))

    def test_xoption(self):
        script, _, samples = self.record_jit(NESTED + "baz(10_000_000)\n",
                                             "-X", "perf_jit")
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_killed_process_is_named(self):
        script, _, samples = self.record_jit(NESTED + KILL_ITSELF,
                                             "-X", "perf_jit",
                                             returncode=-signal.SIGKILL)
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_environment_variable(self):
        script, _, samples = self.record_jit(
            NESTED + "baz(10_000_000)\n",
            env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_sys_activate(self):
        code = NESTED + ('sys.activate_stack_trampoline("perf_jit")\n'
                         "baz(10_000_000)\n")
        script, _, samples = self.record_jit(code)
        # <module> was already running when the backend was activated.
        assert_python_stacks(self, samples, script, NESTED_NAMES)

    def test_source_lines(self):
        script, jit, _ = self.record_jit(NESTED + "baz(10_000_000)\n",
                                         "-X", "perf_jit")
        out = self.perf_script(jit, "-F", "ip,sym,srcline")
        base = os.path.basename(script)
        lines = {name: NESTED.splitlines().index(f"def {name}(n):") + 1
                 for name in ("foo", "bar", "baz")}
        for name, line in lines.items():
            self.assertRegex(
                out, rf"py::{name}:{re.escape(script)}\s*\n\s*"
                     rf"\S*{re.escape(base)}:{line}\b")


class TestSysApi(unittest.TestCase):

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def check(self, code, *args, env=None):
        proc, _ = run_and_forget(self, *args, "-c", textwrap.dedent(code),
                                 env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc

    def test_functions_exist(self):
        for name in ("activate_stack_trampoline",
                     "deactivate_stack_trampoline",
                     "is_stack_trampoline_active"):
            self.assertTrue(callable(getattr(sys, name)))

    def test_bad_arguments(self):
        # None of them changes the state (which is on when the suite runs
        # with PYTHONPERFSUPPORT=1, as make regrtest-perf does).
        active = sys.is_stack_trampoline_active()
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline()
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline(1)
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline(b"perf")
        with self.assertRaises(ValueError):
            sys.activate_stack_trampoline("perf\0")
        with self.assertRaises(ValueError):
            sys.activate_stack_trampoline("invalid_backend")
        with self.assertRaises(TypeError):
            sys.deactivate_stack_trampoline(1)
        with self.assertRaises(TypeError):
            sys.is_stack_trampoline_active(1)
        self.assertEqual(sys.is_stack_trampoline_active(), active)

    @unittest.skipIf(HAVE_TRAMPOLINE, "build supports trampolines")
    def test_unsupported_build(self):
        for backend in ("perf", "perf_jit"):
            with self.assertRaisesRegex(ValueError, "not available"):
                sys.activate_stack_trampoline(backend)
        self.assertIsNone(sys.deactivate_stack_trampoline())
        self.assertFalse(sys.is_stack_trampoline_active())

    @unittest.skipIf(HAVE_TRAMPOLINE, "build supports trampolines")
    def test_unsupported_build_options(self):
        # Accepted, and nothing happens but one warning, however many ways
        # ask for it.
        code = "import sys; print(sys.is_stack_trampoline_active())"
        for args, extra in ((["-X", "perf"], {}),
                            (["-X", "perf_jit"], {}),
                            (["-X", "perf", "-X", "perf_jit"],
                             {"PYTHONPERFSUPPORT": "1"}),
                            ([], {"PYTHONPERFSUPPORT": "1"}),
                            ([], {"PYTHON_PERF_JIT_SUPPORT": "1"}),
                            ([], {"PYTHONPERFSUPPORT": "1",
                                  "PYTHON_PERF_JIT_SUPPORT": "1"})):
            with self.subTest(args=args, env=extra):
                proc = run_python(*args, "-c", code, env=env_with(**extra))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout, "False\n")
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                                 proc.stderr)
                self.assertIn("perf trampoline not available on this "
                              "platform", proc.stderr)

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_activate_deactivate_repeatedly(self):
        self.check("""
            import os, sys
            print("PID", os.getpid())
            def f():
                return 1
            for i in range(300):
                assert sys.activate_stack_trampoline("perf") is None
                assert sys.activate_stack_trampoline("perf") is None
                assert sys.is_stack_trampoline_active()
                f()
                assert sys.deactivate_stack_trampoline() is None
                assert sys.deactivate_stack_trampoline() is None
                assert not sys.is_stack_trampoline_active()
                f()
            """)

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_precedence(self):
        active = "import sys, os; print('PID', os.getpid()); " \
                 "print(sys.is_stack_trampoline_active())"
        cases = [
            ((), {}, "False"),
            (("-X", "perf"), {}, "True"),
            ((), {"PYTHONPERFSUPPORT": "1"}, "True"),
            ((), {"PYTHONPERFSUPPORT": "0"}, "False"),
            (("-X", "perf"), {"PYTHONPERFSUPPORT": "0"}, "True"),
            (("-E",), {"PYTHONPERFSUPPORT": "1"}, "False"),
            (("-I",), {"PYTHONPERFSUPPORT": "1"}, "False"),
        ]
        for args, env, expected in cases:
            with self.subTest(args=args, env=env):
                proc = self.check(active, *args, env=env_with(**env))
                self.assertEqual(proc.stdout.split()[-1], expected)
        # sys beats -X
        proc = self.check("""
            import sys, os
            print("PID", os.getpid())
            sys.deactivate_stack_trampoline()
            print(sys.is_stack_trampoline_active())
            """, "-X", "perf")
        self.assertEqual(proc.stdout.split()[-1], "False")

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_other_eval_frame_hook_refused(self):
        try:
            import _testinternalcapi
        except ImportError:
            self.skipTest("needs _testinternalcapi")
        self.check("""
            import sys, _testinternalcapi
            _testinternalcapi.set_eval_frame_record([])
            try:
                sys.activate_stack_trampoline("perf")
            except RuntimeError:
                pass
            else:
                raise AssertionError("no RuntimeError")
            finally:
                _testinternalcapi.set_eval_frame_default()
            assert not sys.is_stack_trampoline_active()
            """)

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_other_co_extra_users_unaffected(self):
        # Trampolines live in co_extra, which sizes each code object's
        # array for every registered user: another user's free function
        # must still run for its own values only, never for the empty
        # slots that our values bring along (a Python free function called
        # so at exit crashed test_code under PYTHONPERFSUPPORT=1).
        try:
            import ctypes
        except ImportError:
            self.skipTest("needs ctypes")
        code = """
            import ctypes, gc, sys
            freefunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
            freed = []
            free = freefunc(freed.append)
            index = ctypes.pythonapi._PyEval_RequestCodeExtraIndex(free)
            set_extra = ctypes.pythonapi._PyCode_SetExtra
            set_extra.argtypes = (ctypes.py_object, ctypes.c_ssize_t,
                                  ctypes.c_void_p)
            ns = {}
            exec("def mine(): return 1", ns)
            mine = ns.pop("mine")
            set_extra(mine.__code__, index, 1234)
            mine()
            for i in range(200):
                exec(f"def f{i}(): return {i}\\nf{i}()")
                exec(f"del f{i}")
            del mine
            gc.collect()
            print("PID", os.getpid())
            print(freed)
            """
        for args in ((), ("-X", "perf"), ("-X", "perf_jit")):
            with self.subTest(args=args):
                proc, _ = run_and_forget(self, *args, "-c", "import os\n"
                                         + textwrap.dedent(code))
                self.assertEqual((proc.returncode,
                                  proc.stdout.splitlines()[-1]),
                                 (0, "[1234]"), proc.stderr)

    @unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
    def test_semantics_unchanged_under_trampoline(self):
        # Calls of every kind, exceptions through trampolined frames,
        # generators, recursion limits and tracing behave as without.
        code = """
            import os, sys
            print("PID", os.getpid())
            class C:
                def __getitem__(self, i):
                    if i < 0:
                        raise IndexError(i)
                    return i * 2
                @property
                def p(self):
                    return self[3]
            def kw(a, b=2, *, c=3):
                return a + b + c
            def fails(n):
                if n == 0:
                    raise KeyError("deep")
                return fails(n - 1)
            def gen(n):
                for i in range(n):
                    yield C()[i]
            def rec(n):
                return rec(n + 1)
            def work():
                out = [C()[5], C().p, kw(1), kw(1, 2, c=4), sum(gen(5))]
                try:
                    fails(20)
                except KeyError as e:
                    tb = e.__traceback__
                    depth = 0
                    while tb:
                        depth += 1
                        tb = tb.tb_next
                    out.append(depth)
                try:
                    C()[-1]
                except IndexError:
                    out.append("index")
                try:
                    rec(0)
                except RecursionError:
                    out.append("recursion")
                calls = []
                sys.settrace(lambda f, e, a: calls.append(e) or None)
                kw(1)
                sys.settrace(None)
                out.append(calls.count("call"))
                return out
            for i in range(3):
                print(work())
            """
        plain = self.check(code).stdout.splitlines()[1:]
        traced = self.check(code, "-X", "perf").stdout.splitlines()[1:]
        self.assertEqual(traced, plain)
        self.assertEqual(plain[0],
                         "[10, 6, 6, 7, 20, 22, 'index', 'recursion', 1]")


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
@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestHostileInput(unittest.TestCase):
    """Bad input and hostile environments, one test per row of the README
    table "Bad input and hostile environments": a clear error or warning,
    the program and its output untouched, files that stay readable."""

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

    # -- environment variables and -X options -----------------------------

    def test_environment_values(self):
        # As CPython 3.12+ reads them: an integer in the range of a C int
        # (strtol, leading blanks allowed), non-zero enables; unset and
        # empty are nothing; anything else is ignored, with a warning here.
        cases = [("", False, False), ("0", False, False),
                 ("abc", False, True), ("-1", True, False),
                 (" 1", True, False), ("1 ", False, True),
                 ("1" * 30, False, True), ("3000000000", False, True),
                 ("+1", True, False)]
        for var, backend in (("PYTHONPERFSUPPORT", "perf"),
                             ("PYTHON_PERF_JIT_SUPPORT", "perf_jit")):
            for value, enables, warns in cases:
                with self.subTest(var=var, value=value):
                    proc, pid = self.run_code(self.ACTIVE,
                                              env=env_with(**{var: value}))
                    self.assertEqual(proc.stdout.split()[-1], str(enables))
                    self.assertEqual(self.backend_of(pid),
                                     backend if enables else None)
                    if warns:
                        self.assertIn(f"RuntimeWarning: {var}='{value}' is "
                                      f"not an integer", proc.stderr)
                    else:
                        self.assertEqual(proc.stderr, "")

    def test_xoption_values(self):
        # -X perf and -X perf_jit ignore any value, as in 3.12+.
        for option, backend in (("perf=1", "perf"), ("perf_jit=0", "perf_jit"),
                                ("perf=", "perf"), ("perf=0", "perf")):
            with self.subTest(option=option):
                proc, pid = self.run_code(self.ACTIVE, "-X", option)
                self.assertEqual(proc.stdout.split()[-1], "True")
                self.assertEqual(proc.stderr, "")
                self.assertEqual(self.backend_of(pid), backend)

    def test_option_beats_jit_variable(self):
        # sys > -X > environment: -X perf wins over PYTHON_PERF_JIT_SUPPORT
        # (3.12+ reads that variable after -X perf and picks perf_jit).
        proc, pid = self.run_code(self.ACTIVE, "-X", "perf",
                                  env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))
        self.assertEqual(proc.stdout.split()[-1], "True")
        self.assertEqual(self.backend_of(pid), "perf")

    # -- sys.activate_stack_trampoline() arguments -------------------------

    def test_activate_bad_arguments(self):
        cases = [
            (None, TypeError, "argument must be str, not None"),
            (b"perf", TypeError, "argument must be str, not bytes"),
            (1, TypeError, "argument must be str, not int"),
            ("perf\0x", ValueError, "embedded null character"),
            ("PERF", ValueError, "invalid backend: PERF"),
            ("perf\udc80", UnicodeEncodeError, "surrogates not allowed"),
            ("x" * 1_000_000, ValueError, "invalid backend: xxx"),
        ]
        # None of them changes the state, which is on when the suite runs
        # with PYTHONPERFSUPPORT=1 or PYTHON_PERF_JIT_SUPPORT=1.
        active = sys.is_stack_trampoline_active()
        for arg, exc, message in cases:
            with self.subTest(arg=repr(arg)[:20]):
                with self.assertRaises(exc) as cm:
                    sys.activate_stack_trampoline(arg)
                self.assertIn(message, str(cm.exception))
                self.assertLess(len(str(cm.exception)), 300)
                self.assertEqual(sys.is_stack_trampoline_active(), active)

    # -- the sys functions from unusual places ------------------------------

    def test_sys_functions_from_threads(self):
        proc, pid = self.run_code("""
            import os, sys, threading
            print("PID", os.getpid(), flush=True)
            def toggle(k):
                for i in range(200):
                    sys.activate_stack_trampoline(("perf", "perf_jit")[i % 2])
                    f = eval(f"lambda: {k * 1000 + i}")
                    f()
                    sys.is_stack_trampoline_active()
                    if i % 3 == 0:
                        sys.deactivate_stack_trampoline()
            threads = [threading.Thread(target=toggle, args=(k,))
                       for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print("done")
            """)
        self.assertEqual(proc.stdout.split()[-1], "done")
        self.assertEqual(proc.stderr, "")
        self.assertIn("py::<lambda>:<string>", self.check_files(pid))

    def test_sys_functions_from_signal_handler(self):
        proc, pid = self.run_code("""
            import os, signal, sys
            print("PID", os.getpid(), flush=True)
            calls = 0
            def handler(signum, frame):
                global calls
                calls += 1
                if calls % 3 == 2:
                    sys.deactivate_stack_trampoline()
                else:
                    sys.activate_stack_trampoline(
                        ("perf", "perf_jit")[calls % 2])
                sys.is_stack_trampoline_active()
            signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
            total = 0
            while calls < 50:
                ns = {}
                exec("\\n".join(f"def f{i}(): return {i}"
                                for i in range(300)), ns)
                total += sum(ns[f"f{i}"]() for i in range(300))
            signal.setitimer(signal.ITIMER_REAL, 0)
            print(total % 44850)
            """)
        self.assertEqual(proc.stdout.split()[-1], "0")
        self.assertEqual(proc.stderr, "")
        # Which of a batch's functions run while a backend is on depends
        # on where the timer falls (it can lock in step with the loop, so
        # that the same ones always run while off): the files must name
        # the handler and functions of the batches, whole.
        names = self.check_files(pid)
        self.assertIn("py::handler:<string>", names)
        self.assertTrue(any(re.fullmatch(r"py::f\d+:<string>", n)
                            for n in names), names)

    def test_sys_functions_from_atexit(self):
        # atexit handlers run before the files are closed: what they do is
        # described, and the files end as at any normal exit.
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                proc, pid = self.run_code(f"""
                    import atexit, os, sys
                    print("PID", os.getpid(), flush=True)
                    def at_exit():
                        sys.activate_stack_trampoline({backend!r})
                        def in_atexit():
                            return 1
                        in_atexit()
                        print(sys.is_stack_trampoline_active())
                    atexit.register(at_exit)
                    """)
                self.assertEqual(proc.stdout.split()[-1], "True")
                self.assertEqual(proc.stderr, "")
                self.assertEqual(self.backend_of(pid), backend)
                self.assertIn("py::at_exit.<locals>.in_atexit:<string>",
                              self.check_files(pid))

    def test_activate_during_finalization(self):
        # A finalizer that runs after the files were completed cannot
        # reopen them (that would truncate them): RuntimeError, and the
        # files keep the run's records.
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code("""
                    import os, sys
                    print("PID", os.getpid(), flush=True)
                    def before():
                        return 1
                    before()
                    class Late:
                        def __del__(self):
                            try:
                                sys.activate_stack_trampoline("perf")
                            except RuntimeError as exc:
                                print("late:", exc, flush=True)
                            sys.deactivate_stack_trampoline()
                            print(sys.is_stack_trampoline_active(),
                                  flush=True)
                    late = Late()
                    """, "-X", option)
                self.assertIn("late: cannot activate a stack trampoline "
                              "during interpreter finalization", proc.stdout)
                self.assertEqual(proc.stdout.split()[-1], "False")
                self.assertEqual(self.backend_of(pid), option)
                self.assertIn("py::before:<string>", self.check_files(pid))

    # -- names that are hard to write ---------------------------------------

    HARD_NAMES = [
        ("lone\udc80surrogate", "lone\\udc80surrogate"),
        ("new\nline\rreturn", "new?line?return"),
        ("ctl\x01\x1b\x7f\x85\u2028\u2029x", "ctl??????x"),
        ("tab\there", "tab?here"),
        ("caf\u00e9 \U0001f600", "caf\u00e9 \U0001f600"),
    ]

    def test_hard_names(self):
        # Qualnames and file names with lone surrogates, line breaks,
        # control characters (C0, DEL, C1, U+2028/9), 10,000 characters
        # (ASCII, two-, three- and four-byte UTF-8): one record per line
        # of valid UTF-8 in the map, a strictly valid jitdump.
        long_names = ["a" * 10_000, "\u00e9" * 10_000, "b\u00e9" * 5_000,
                      "\u20ac" * 10_000, "\U0001f600" * 10_000,
                      "\udcff" * 10_000]
        code = """
            import os, sys
            print("PID", os.getpid(), flush=True)
            names = %r + [c * (10_000 // len(c)) for c in %r]
            for qualname in names:
                for filename in (qualname, "plain.py"):
                    ns = {}
                    exec(compile("def f(): return 7", filename, "exec"), ns)
                    f = ns["f"]
                    f.__code__ = f.__code__.replace(co_qualname=qualname)
                    assert f() == 7
            print("done")
            """ % ([n for n, _ in self.HARD_NAMES],
                   [name[:2] for name in long_names])
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(code, "-X", option)
                self.assertEqual(proc.stdout.split()[-1], "done")
                self.assertEqual(proc.stderr, "")
                names = self.check_files(pid)
                for _, shown in self.HARD_NAMES:
                    self.assertIn(f"py::{shown}:{shown}", names)
                    self.assertIn(f"py::{shown}:plain.py", names)
                for long_name in long_names:
                    head = "".join(f"\\u{ord(c):04x}"
                                   if 0xd800 <= ord(c) < 0xe000 else c
                                   for c in long_name[:20])
                    self.assertTrue([n for n in names
                                     if n.startswith(f"py::{head}")], head)
                for name in names:
                    self.assertLessEqual(len(name.encode()), 3072)
                    self.assertNotIn("\n", name)

    def test_non_utf8_file_name(self):
        # A script whose file name is not UTF-8: Python decodes it with
        # surrogateescape, the files spell those bytes \udcXX.
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        path = os.path.join(os.fsencode(tmp), b"caf\xe9\xff.py")
        with open(path, "w") as f:
            f.write("import os\nprint('PID', os.getpid())\n"
                    "def g():\n    return 3\nprint(g())\n")
        shown = os.path.join(tmp, "caf\\udce9\\udcff.py")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc = subprocess.run([sys.executable, "-X", option, path],
                                      capture_output=True, text=True,
                                      env=env_with())
                pid = script_pid(proc.stdout)
                forget_files(self, pid)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.split()[-1], "3")
                names = self.check_files(pid)
                self.assertIn(f"py::g:{shown}", names)
                self.assertIn(f"py::<module>:{shown}", names)

    # -- a hostile /tmp ------------------------------------------------------

    def run_with_tmp(self, setup, option, code=None, after="true"):
        """Run `code` under -X `option` in a private mount namespace whose
        /tmp `setup` (shell commands) has changed, then `after` (shell
        commands, in the namespace).  `$PY` is the interpreter.  Returns
        the CompletedProcess; its return code is the interpreter's."""
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        code = code or ("import os; print('PID', os.getpid(), flush=True)\n"
                        "def f():\n    return 45\nprint('output intact', f())")
        shell = (f'PY=$0; {setup} || exit 99; "$PY" -X {option} -c "$1"; '
                 f'rc=$?; {after}; exit $rc')
        proc = subprocess.run([unshare, "-m", "sh", "-c", shell,
                               sys.executable, code],
                              capture_output=True, text=True, env=env_with())
        if proc.returncode == 99:
            self.skipTest(f"cannot set up /tmp here: {proc.stderr}")
        return proc

    def tmpfs_on_tmp(self, options):
        """Shell commands for run_with_tmp(): a new tmpfs mounted with
        `options` becomes /tmp, the real one stays visible at /tmp/orig,
        and the interpreter's directories under /tmp are bound back."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        return (f'mount -t tmpfs -o {options} none {tmp} && '
                f'mkdir {tmp}/orig && mount --bind /tmp {tmp}/orig && '
                f'mount --move {tmp} /tmp && '
                + rebind_interpreter("/tmp/orig"))

    def check_warned_and_ran(self, proc, message):
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[-1], "output intact 45")
        self.assertIn("RuntimeWarning: perf trampoline: cannot create",
                      proc.stderr)
        self.assertIn(message, proc.stderr)
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)

    def test_tmp_read_only(self):
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc = self.run_with_tmp(
                    "mount --bind /tmp /tmp && "
                    "mount -o remount,bind,ro /tmp", option)
                self.check_warned_and_ran(proc, "Read-only file system")

    def test_tmp_not_a_directory(self):
        # A new root in which /tmp is a regular file, the rest of the
        # system bound in.
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        shell = ('R=$(mktemp -d) && mount -t tmpfs none "$R" || exit 99; '
                 'for d in /*; do [ "$d" = /tmp ] && continue; '
                 '[ -d "$d" ] || continue; mkdir "$R$d" && '
                 'mount --rbind "$d" "$R$d" || exit 99; done; '
                 'echo "not a directory" > "$R/tmp" || exit 99; '
                 'mkdir "$R/tmp-orig" && mount --rbind /tmp "$R/tmp-orig" '
                 '|| exit 99; '
                 'exec chroot "$R" "$0" -X "$2" -c "$1"')
        # Nothing can live under /tmp in that root.  An interpreter whose
        # tree does is run from the real /tmp, bound in as /tmp-orig: its
        # real binary (a venv's python is a symlink to its base's, and its
        # pyvenv.cfg names it by absolute path), which finds its prefix
        # from where it is.
        python = sys.executable
        if interpreter_dirs_under_tmp():
            python = "/tmp-orig" + os.path.realpath(python)[len("/tmp"):]
        code = ("import os; print('PID', os.getpid(), flush=True)\n"
                "def f():\n    return 45\nprint('output intact', f())")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc = subprocess.run(
                    [unshare, "-m", "sh", "-c", shell, python, code,
                     option], capture_output=True, text=True, env=env_with())
                if proc.returncode == 99:
                    self.skipTest("cannot make a new root here")
                self.check_warned_and_ran(proc, "Not a directory")

    def test_tmp_noexec_jitdump(self):
        # A /tmp mounted noexec: the dump is made, but perf inject finds a
        # dump only through its executable mapping, which fails.  The
        # warning says that this is what failed, and why it may have.
        proc = self.run_with_tmp(self.tmpfs_on_tmp("noexec"), "perf_jit")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[-1], "output intact 45")
        self.assertRegex(
            proc.stderr,
            r"RuntimeWarning: perf trampoline: cannot map /tmp/jit-\d+\.dump "
            r"executable \(the marker perf inject looks for; is its file "
            r"system mounted noexec\?\): Operation not permitted; the "
            r"perf_jit backend is off")
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)

    def test_tmp_full_jitdump(self):
        # (The map's counterpart is TestPerfMapFile.test_full_disk.)  A
        # small tmpfs on /tmp: the program runs on, a warning says why, and
        # the dump keeps its whole records, strictly valid.
        proc = self.run_with_tmp(
            self.tmpfs_on_tmp("size=256k"), "perf_jit", code=MANY_FUNCTIONS,
            after="echo '== dump'; od -An -v -tx1 /tmp/jit-*.dump")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out, _, dump = proc.stdout.partition("== dump\n")
        self.assertEqual(out.split()[-1], str(sum(range(3000))))
        self.assertIn("RuntimeWarning: perf trampoline: cannot write",
                      proc.stderr)
        self.assertIn("No space left on device", proc.stderr)
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
        path = os.path.join(self.enterContext(os_helper.temp_dir()),
                            "jit.dump")
        with open(path, "wb") as f:
            f.write(bytes.fromhex(dump))
        records = read_jitdump(path, script_pid(out))
        loads = [rec for rid, rec in records if rid == JIT_CODE_LOAD]
        self.assertGreater(len(loads), 100)

    def test_descriptor_limit_exhausted(self):
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(f"""
                    import os, resource, sys
                    print("PID", os.getpid(), flush=True)
                    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
                    held = []
                    try:
                        while True:
                            held.append(os.open(os.devnull, os.O_RDONLY))
                    except OSError:
                        pass
                    sys.activate_stack_trampoline({option!r})
                    print(sys.is_stack_trampoline_active())
                    for fd in held:
                        os.close(fd)
                    sys.activate_stack_trampoline({option!r})
                    def later():
                        return 1
                    later()
                    print(sys.is_stack_trampoline_active())
                    """)
                self.assertEqual(proc.stdout.split()[-2:], ["False", "True"])
                self.assertIn("RuntimeWarning: perf trampoline: cannot "
                              "create", proc.stderr)
                self.assertIn("Too many open files", proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
                self.assertIn("py::later:<string>", self.check_files(pid))

    def test_stale_file_of_same_pid(self):
        # A file left by an earlier process with our pid (as pid 1 of a
        # pid namespace, this one's pid is known): perf must not show its
        # names for ours.  It is truncated before our first record.
        pid1 = pid_namespace_command(self)
        stale = {"perf": ("7f0000000000 1000 py::stale_function:old.py\n"
                          * 1000).encode(),
                 "perf_jit": b"\x01" * 40 + b"py::stale_function" * 500}
        for option, path in (("perf", map_path(1)),
                             ("perf_jit", jit_path(1))):
            with self.subTest(option=option):
                os_helper.unlink(path)
                with open(path, "wb") as f:
                    f.write(stale[option])
                os.chmod(path, 0o600)
                # last written by that earlier process, a while ago
                old = os.stat(path).st_mtime - 3600
                os.utime(path, (old, old))
                proc = subprocess.run(
                    [*pid1, sys.executable, "-X", option, "-c",
                     "def ours():\n    return 2\nprint(ours())"],
                    capture_output=True, text=True, env=env_with())
                forget_path(self, path)
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                                 (0, "2\n", ""))
                names = set()
                if option == "perf":
                    for line in read_map_file(path):
                        self.assertRegex(line, MAP_LINE)
                        names.add(line.split(" ", 2)[2])
                else:
                    for rid, rec in read_jitdump(path, 1):
                        if rid == JIT_CODE_LOAD:
                            names.add(rec["name"])
                self.assertIn("py::ours:<string>", names)
                self.assertFalse([n for n in names if "stale" in n])
                with open(path, "rb") as f:
                    self.assertNotIn(b"stale", f.read())

    # -- executable memory refused -------------------------------------------

    def test_address_space_limit(self):
        # RLIMIT_AS (ulimit -v) reached: no new arena of trampolines.  The
        # limit is set 4 MiB below the process's size, so that no new
        # mapping can succeed, even after the allocator gave some back;
        # the interpreter's own allocations meanwhile come from room left
        # in malloc's heap (64 KiB blocks freed between kept ones, which
        # malloc reuses, and which no mmap() can), not from the slack the
        # allocators happened to have.  The main thread's stack is grown
        # first, as the limit would stop that too.
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(f"""
                    import os, resource, sys
                    print("PID", os.getpid(), flush=True)
                    sys.activate_stack_trampoline({option!r})
                    def vm_size():
                        with open("/proc/self/status") as f:
                            for line in f:
                                if line.startswith("VmSize:"):
                                    return int(line.split()[1]) * 1024
                    code = compile("\\n".join(f"def f{{i}}(): return {{i}}"
                                              for i in range(3000)),
                                   "<many>", "exec")
                    ns = {{}}
                    exec(code, ns)
                    nested = []
                    for _ in range(900):
                        nested = [nested]
                    repr(nested)
                    kept, room = [], []
                    for _ in range(64):
                        room.append(bytearray(64 * 1024))
                        kept.append(bytearray(1024))
                    del room
                    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
                    resource.setrlimit(resource.RLIMIT_AS,
                                       (vm_size() - 4 * 1024 * 1024, hard))
                    total = sum(ns[f"f{{i}}"]() for i in range(3000))
                    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
                    print("output intact", total,
                          sys.is_stack_trampoline_active())
                    """)
                self.assertEqual(proc.stdout.split()[-4:],
                                 ["output", "intact", str(sum(range(3000))),
                                  "False"])
                self.assertIn("RuntimeWarning: perf trampoline: cannot map "
                              "executable memory for trampolines: Cannot "
                              "allocate memory", proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
                self.check_files(pid)

    # A seccomp filter that refuses to make memory executable, as a W^X
    # policy (SELinux's execmem) does: mprotect(..., PROT_EXEC) fails with
    # EACCES.  Linux x86_64 numbers.
    WX_POLICY = """
        import ctypes, errno, struct
        def _bpf(code, k, jt=0, jf=0):
            return struct.pack("HBBI", code, jt, jf, k)
        _filter = b"".join([
            _bpf(0x20, 4),                         # ld arch
            _bpf(0x15, 0xC000003E, 1, 0),          # x86_64?
            _bpf(0x06, 0x7FFF0000),                # allow
            _bpf(0x20, 0),                         # ld syscall number
            _bpf(0x15, 10, 0, 3),                  # mprotect?
            _bpf(0x20, 32),                        # ld args[2] (prot)
            _bpf(0x45, 4, 0, 1),                   # PROT_EXEC set?
            _bpf(0x06, 0x00050000 | errno.EACCES), # fail with EACCES
            _bpf(0x06, 0x7FFF0000),                # allow
        ])
        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
        _libc = ctypes.CDLL(None, use_errno=True)
        _prog = _Prog(len(_filter) // 8, _filter)
        if (_libc.prctl(38, 1, 0, 0, 0) != 0          # PR_SET_NO_NEW_PRIVS
                or _libc.prctl(22, 2, ctypes.byref(_prog), 0, 0) != 0):
            print("SECCOMP FAILED", flush=True)
        """

    def test_executable_memory_refused(self):
        try:
            import ctypes
        except ImportError:
            self.skipTest("needs ctypes")
        if os.uname().machine != "x86_64":
            self.skipTest("the filter is written for x86_64")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(textwrap.dedent(self.WX_POLICY)
                                          + textwrap.dedent(f"""
                    import os, sys
                    print("PID", os.getpid(), flush=True)
                    sys.activate_stack_trampoline({option!r})
                    def f(n):
                        return n + 1
                    print("output intact", f(1), f(2))
                    print(sys.is_stack_trampoline_active())
                    """))
                if "SECCOMP FAILED" in proc.stdout:
                    self.skipTest("cannot install a seccomp filter here")
                self.assertEqual(proc.stdout.splitlines()[-2:],
                                 ["output intact 2 3", "False"])
                self.assertIn("RuntimeWarning: perf trampoline: cannot map "
                              "executable memory for trampolines: Permission "
                              "denied", proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
                self.check_files(pid)

    # -- signals -------------------------------------------------------------

    def test_signal_storm_while_creating_trampolines(self):
        # SIGALRM every 100 us while thousands of trampolines are made and
        # written; every 7th signal that arrives in the try block raises
        # KeyboardInterrupt, which the program handles by doing the
        # interrupted function again.
        code = """
            import os, signal, sys
            print("PID", os.getpid(), flush=True)
            alarms = interrupts = 0
            inside = False
            def on_alarm(signum, frame):
                global alarms
                alarms += 1
                if inside and alarms % 7 == 0:
                    raise KeyboardInterrupt
            signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
            done = set()
            for i in range(6000):
                while i not in done:
                    try:
                        inside = True
                        ns = {}
                        exec(f"def g{i}(): return {i}", ns)
                        if ns[f"g{i}"]() == i:
                            done.add(i)
                        inside = False
                    except KeyboardInterrupt:
                        inside = False
                        interrupts += 1
            signal.setitimer(signal.ITIMER_REAL, 0)
            print(len(done), interrupts > 0)
            """
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(code, "-X", option)
                self.assertEqual(proc.stdout.split()[-2:], ["6000", "True"])
                self.assertEqual(proc.stderr, "")
                names = self.check_files(pid)
                for i in range(6000):
                    self.assertIn(f"py::g{i}:<string>", names)

    def test_unhandled_interrupt_while_creating_trampolines(self):
        # SIGINT, with Python's default handler, in the middle of making
        # trampolines: KeyboardInterrupt at a normal place, the usual exit,
        # files closed and whole.
        # Python's own SIGINT handler is installed whatever the child
        # inherits (a shell's background job ignores SIGINT, and Python
        # then leaves it ignored); the loop ends anyway, so that a lost
        # interrupt fails the test instead of filling /tmp.
        code = """
            import os, signal
            print("PID", os.getpid(), flush=True)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGALRM,
                          lambda *a: os.kill(os.getpid(), signal.SIGINT))
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            for i in range(1_000_000):
                ns = {}
                exec(f"def h{i}(): return {i}", ns)
                ns[f"h{i}"]()
            print("not interrupted")
            """
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(code, "-X", option,
                                          returncode=-signal.SIGINT)
                self.assertIn("KeyboardInterrupt", proc.stderr)
                self.assertNotIn("Fatal", proc.stderr)
                self.assertIn("py::h0:<string>", self.check_files(pid))
# Deep recursion: the calls of the recursions below, each 200,000 deep,
# take every path of the evaluator that hands a frame to the trampoline.
# Stock 3.11 runs them without native stack; under a backend they must
# complete too, with the same results.
DEEP_RECURSION = """\
import os, sys
print("PID", os.getpid(), flush=True)
sys.setrecursionlimit(10**6)
DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000

class Deep:
    def __getitem__(self, n):                 # BINARY_SUBSCR_GETITEM
        return 0 if n == 0 else 1 + self[n - 1]

def exact(n):                                 # CALL_PY_EXACT_ARGS
    return 0 if n == 0 else 1 + exact(n - 1)

def defaults(n, step=1):                      # CALL_PY_WITH_DEFAULTS
    return 0 if n == 0 else 1 + defaults(n - step)

def keywords(n, *, step):                     # CALL with keywords
    return 0 if n == 0 else 1 + keywords(n - step, step=step)

def from_c(n):                                # Python called from C there
    if n == 0:
        return (sum(x for x in range(4))
                + sorted([3, 1, 2], key=lambda v: -v)[0])
    return from_c(n - 1)

def raises(n):
    if n == 0:
        raise ValueError("bottom")
    return raises(n - 1)

def run():
    out = [Deep()[DEPTH], exact(DEPTH), defaults(DEPTH),
           keywords(DEPTH, step=1), from_c(DEPTH)]
    try:
        raises(DEPTH)
    except ValueError as exc:
        tb, frames = exc.__traceback__, 0
        while tb is not None:
            frames += 1
            tb = tb.tb_next
        out.append(frames)
    return out
"""

# The depth at which RecursionError comes, for each limit.
RECURSION_LIMITS = """\
import os, sys
print("PID", os.getpid(), flush=True)
depth = 0
def down(n):
    global depth
    depth = n
    down(n + 1)
for limit in (50, 1000, 150_000, 1000):
    sys.setrecursionlimit(limit)
    try:
        down(1)
    except RecursionError:
        print(limit, depth)
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestDeepRecursion(PerfTestCase):
    """A trampolined call spends native stack where stock 3.11 spends
    none: past a per-thread budget calls must run inline, never crash."""

    def run_modes(self, source, *script_args):
        script = make_script(self.tmp, "deep", source)
        outputs = {}
        for args in ((), ("-X", "perf"), ("-X", "perf_jit")):
            proc, _ = run_and_forget(self, *args, script, *script_args,
                                     timeout=300)
            self.assertEqual(proc.returncode, 0,
                             f"{args}: {proc.stderr[-2000:]}")
            outputs[args] = proc.stdout.split("\n", 1)[1]
        for args, out in outputs.items():
            self.assertEqual(out, outputs[()], args)
        return outputs[()]

    def test_deep_recursion_completes(self):
        out = self.run_modes(DEEP_RECURSION + "print(run())\n")
        self.assertEqual(out, f"{[200_000] * 4 + [9, 200_002]}\n")

    def test_thread_with_small_stack(self):
        # A thread's budget comes from its own stack.  Calling into C at
        # the bottom needs the stack that the budget left over.
        code = DEEP_RECURSION + textwrap.dedent("""
            import threading
            results = []
            for size in (256 * 1024, 0):
                threading.stack_size(size)
                t = threading.Thread(target=lambda: results.append(run()))
                t.start()
                t.join()
            print(results)
            print(run())
            """)
        out = self.run_modes(code, "50000")
        expected = [50_000] * 4 + [9, 50_002]
        self.assertEqual(out, f"{[expected, expected]}\n{expected}\n")

    def test_recursion_error_at_same_depth(self):
        out = self.run_modes(RECURSION_LIMITS)
        self.assertEqual(len(out.splitlines()), 4, out)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS,
                         "perf record -g needs frame pointers")
    def test_profile_names_outer_frames(self):
        # perf samples the bottom of a recursion 200,000 deep.  Calls past
        # the budget run inline, in the evaluator of the last trampolined
        # call: the samples show that evaluator, then py::exact frames
        # (the outer calls) as far as perf's call chains reach.  spin()
        # is called far below the budget, so it is never named.
        code = DEEP_RECURSION + textwrap.dedent("""
            def spin():
                x = 0
                for i in range(20_000_000):
                    x += i
                return x
            def exact(n):
                return spin() if n == 0 else exact(n - 1)
            print(exact(DEPTH))
            """)
        out, samples, script, _ = self.record(code, "-X", "perf")
        self.assertEqual(out.split("\n", 1)[1], f"{sum(range(20_000_000))}\n")
        name = f"py::exact:{script}"
        deep = [s for s in samples
                if len([sym for sym, _ in s if sym == name]) >= 10]
        self.assertGreater(len(deep), 100)
        named = {sym for s in samples for sym, _ in s}
        self.assertNotIn(f"py::spin:{script}", named)
        good = 0
        for sample in deep:
            syms = [sym for sym, _ in sample]
            top = syms.index(name)
            # (A sample taken while a leaf function has no frame record,
            # on its first or last instruction, loses the leaf's caller.)
            if is_function(syms[top + 1], *TRAMPOLINE_CALLERS) and (
                    top == 1 or is_function(syms[top - 1], EVALUATOR)):
                good += 1
        self.assertGreaterEqual(good, 0.9 * len(deep),
                                f"only {good} of {len(deep)} samples show "
                                f"the evaluator over {name}")


class TestBuild(unittest.TestCase):

    @unittest.skipUnless(sys.platform == "linux" and os.uname().machine
                         in ("x86_64", "aarch64", "riscv64"),
                         "the trampoline is built on Linux x86_64, aarch64 "
                         "and riscv64")
    def test_sysconfig_reports_trampoline(self):
        proc = run_python("-m", "sysconfig")
        self.assertIn('PY_HAVE_PERF_TRAMPOLINE = "1"', proc.stdout)

    def test_help_mentions_option_and_variable(self):
        proc = run_python("--help-all")
        text = proc.stdout
        self.assertIn("-X perf", text)
        self.assertIn("PYTHONPERFSUPPORT", text)


if __name__ == "__main__":
    unittest.main()
