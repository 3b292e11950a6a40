"""-X perf_lines: the line each Python frame is on, in perf's own samples
(perf record -g on the frame-pointer build, --call-graph dwarf on both),
in eu-stack's walk of a live process, and in gdb's and lldb's
backtraces."""

import collections
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
import types
import unittest

from test import support
from test.support import os_helper
from test.support.script_helper import make_script
from test.support.perf_helper import (
    JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD, HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE,
    NO_TRAMPOLINE, arena_paths, buildid_home, env_with, forget_files,
    forget_process, jit_path, map_path, perf_command,
    read_jitdump, read_map_file, requires_perf, requires_perf_inject_jit,
    run_and_forget, script_pid, stop_process)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    PerfTestCase, noexec_tmp_command, setUpModule, tearDownModule)
from .test_arena_files import ADDR2LINE, EU_ADDR2LINE, symbols
from .test_debuggers import ptrace_problem


HAVE_LINES = bool(sysconfig.get_config_var("PY_HAVE_PERF_LINES"))
NO_LINES = "no line trampoline on this platform (PY_HAVE_PERF_LINES)"

# Bytes of the x86-64 line trampoline's template, with or without
# endbr64 (Python/asm_trampoline.S): pad 0 is at this offset of a slot.
LINE_TEMPLATE = 56

# The program of known lines: each marker names the line it ends.
PROGRAM = textwrap.dedent("""\
    import os, sys, time
    print("PID", os.getpid(), flush=True)

    def helper(n):
        s = 0
        for i in range(n): s += i                      # HELPER_LOOP
        return s

    def gen(n):
        for i in range(n):
            yield sum(range(3000))                     # GEN_A
            yield sorted(range(1500), key=abs)[0]      # GEN_B

    def fails():
        raise ValueError("caught")                     # FAILS_RAISE

    def spin(n):
        t = 0
        for i in range(n): t += i & 7                  # SPIN_LOOP
        return t

    def work():
        spin(20000)                                    # CALL_SPIN
        data = sorted(range(3000), key=lambda v: -v)   # CALL_SORTED
        helper(20000)                                  # CALL_HELPER
        for x in gen(10): pass                         # CALL_GEN
        try:
            fails()                                    # CALL_FAILS
        except ValueError:
            pass

    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        work()                                         # CALL_WORK
    """)


# Threads with small stacks (their recursion goes past the stack budget,
# where calls run in the first evaluator), a fork child doing the same,
# a generator that is thrown into, deep recursion.
BUSY_PROGRAM = textwrap.dedent("""\
    import os, sys, threading, time
    print("PID", os.getpid(), flush=True)

    def leaf(n):
        t = 0
        for i in range(n): t += i                      # LEAF_LOOP
        return t

    def deep(k):
        if k == 0:
            return leaf(3000)                          # DEEP_LEAF
        return deep(k - 1)                             # DEEP_CALL

    def thrown():
        while True:
            try:
                yield leaf(2000)                       # THROWN_YIELD
            except KeyError:
                leaf(2000)                             # THROWN_CAUGHT

    def worker(end):
        g = thrown()
        next(g)
        n = 0
        while time.monotonic() < end:
            n += deep(700) > 0                         # WORKER_DEEP
            g.throw(KeyError)                          # WORKER_THROW
        return n

    end = time.monotonic() + float(sys.argv[1])
    sys.setrecursionlimit(5000)
    threading.stack_size(256 * 1024)
    threads = [threading.Thread(target=worker, args=(end,))
               for _ in range(2)]
    for t in threads:
        t.start()
    child = os.fork()
    if child == 0:
        print("CHILD", os.getpid(), flush=True)
        os._exit(0 if worker(end) > 0 else 1)
    ok = worker(end) > 0
    for t in threads:
        t.join()
    ok = ok and os.waitpid(child, 0)[1] == 0
    print("done", ok, deep(4000), flush=True)
    """)


# A while loop whose test calls Python (__len__) and whose body ends with
# an expression statement: the caller's line while __len__ runs is the
# test's, which only the store of the test at the loop's bottom gives
# (the body's last store is another line's).
WHILE_PROGRAM = textwrap.dedent("""\
    import os, sys, time
    print("PID", os.getpid(), flush=True)

    class Bag:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            t = 0
            for i in range(300): t += i                # LEN_LOOP
            return self.n

    def drain(n):
        bag = Bag(n)
        while bag:                                     # WHILE_TEST
            bag.n -= 1
            abs(-1)                                    # BODY_CALL

    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        drain(100)
    """)


# A generator resumed at a line where it then computes without storing a
# line (a power, in C): its line is the resumption point's, which only
# the trampoline's first store gives (no store runs before the power).
RESUMED_PROGRAM = textwrap.dedent("""\
    import os, sys, time
    print("PID", os.getpid(), flush=True)

    def powers(base):
        total = 0
        while True:
            total += (yield total) + base ** 20000 % 7     # RESUMED

    def drive(end):
        it = powers(3)
        next(it)
        while time.monotonic() < end:
            it.send(1)                                     # DRIVE_SEND

    drive(time.monotonic() + float(sys.argv[1]))
    """)


def function_spans(source, filename):
    """{qualname: (first line, last line)} of the functions of `source`."""
    spans = {}
    def walk(code):
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                lines = [l for _, _, l in const.co_lines() if l is not None]
                spans[const.co_qualname] = (const.co_firstlineno, max(lines))
                walk(const)
    walk(compile(source, filename, "exec"))
    return spans


def marker_lines(source):
    """{marker: line number} of the `# MARKER` comments of `source`."""
    lines = {}
    for number, text in enumerate(source.splitlines(), 1):
        m = re.search(r"# ([A-Z_]+)$", text)
        if m:
            lines[m.group(1)] = number
    return lines


def parse_srclines(text):
    """Samples of `perf script -F ip,sym,srcline`: lists of (symbol, line),
    leaf first; line is None where perf gave no source line."""
    samples, frames = [], None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            if frames:
                samples.append(frames)
            frames = None
            continue
        if line[0] not in " \t":
            # (a header line, with fields other than these)
            frames = []
            continue
        if frames is None:
            frames = []
        parts = line.split(None, 1)
        symbol = parts[1].strip() if len(parts) > 1 else "[unknown]"
        number = None
        # The frame's source line follows it, more indented, as
        # FILE:LINE (perf prints a frame without one as ??:0 or the
        # mapping's name).
        if i < len(lines) and re.match(r"\s+\S+:\d+$", lines[i]) \
                and not lines[i].lstrip().startswith(("0x",)):
            number = int(lines[i].rsplit(":", 1)[1])
            i += 1
        frames.append((symbol, number))
    if frames:
        samples.append(frames)
    return samples


def python_frames(sample, script):
    """The Python functions of `sample` in `script`, leaf first, as
    (qualname, line): with lines on, two native frames next to each other
    per function (its trampoline's, then its line record's), and the
    second one's line; None where a function has one frame only (a
    recursive call has the evaluator between two frames of one function)."""
    suffix = ":" + script
    result = []
    k = 0
    while k < len(sample):
        sym, _ = sample[k]
        if not (sym.startswith("py::") and sym.endswith(suffix)):
            k += 1
            continue
        name = sym[len("py::"):-len(suffix)]
        if k + 1 < len(sample) and sample[k + 1][0] == sym:
            result.append((name, sample[k + 1][1]))
            k += 2
        else:
            result.append((name, None))
            k += 1
    return result


class AccuracyChecks:
    """The issue's thresholds on samples of PROGRAM: lists of (qualname,
    line) of its functions, leaf first."""

    def check_accuracy(self, samples):
        at = marker_lines(PROGRAM)
        callers = {"spin": "CALL_SPIN", "helper": "CALL_HELPER",
                   "gen": "CALL_GEN", "fails": "CALL_FAILS",
                   "work.<locals>.<lambda>": "CALL_SORTED"}
        caller_right = caller_all = 0
        innermost = {"spin": {"SPIN_LOOP"}, "helper": {"HELPER_LOOP"},
                     "gen": {"GEN_A", "GEN_B"}}
        inner_right = inner_all = 0
        gen_lines = set()
        for frames in samples:
            # Callers: every frame below another of the program's.
            for (callee, _), (caller, line) in zip(frames, frames[1:]):
                if caller == "work" and callee in callers:
                    caller_all += 1
                    caller_right += line == at[callers[callee]]
                elif caller == "<module>" and callee == "work":
                    caller_all += 1
                    caller_right += line == at["CALL_WORK"]
            if frames and frames[0][0] in innermost:
                name, line = frames[0]
                inner_all += 1
                inner_right += line in {at[m] for m in innermost[name]}
                if name == "gen":
                    gen_lines.add(line)
        self.assertGreater(caller_all, 100)
        self.assertGreaterEqual(caller_right / caller_all, 0.95,
                                (caller_right, caller_all))
        self.assertGreater(inner_all, 50)
        self.assertGreaterEqual(inner_right / inner_all, 0.80,
                                (inner_right, inner_all))
        # The generator was seen at both the lines it is resumed at.
        self.assertLessEqual({at["GEN_A"], at["GEN_B"]}, gen_lines)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LINES, NO_LINES)
@requires_perf
class LinesInSamplesTests(AccuracyChecks, PerfTestCase):

    def record_lines(self, callgraph, seconds="1.5", jit=False):
        """Samples of PROGRAM with lines; `jit`: the jitdump backend,
        recorded with -k 1 and read after perf inject --jit."""
        script = make_script(self.tmp, "lines_program", PROGRAM)
        data = os.path.join(self.tmp, "perf.data")
        self.addCleanup(os_helper.unlink, data)
        args = ("-X", "perf_jit", "-k", "1") if jit else ("-X", "perf",)
        cmd = perf_command("record", "-F", "999", *callgraph, *args[2:],
                           "-o", data, "--", sys.executable, *args[:2],
                           "-X", "perf_lines", script, seconds)
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        self.assertNotIn("RuntimeWarning", proc.stderr)
        self.assertNotIn("runs without them", proc.stderr)
        if jit:
            data = self.inject_jit(data, pid)
        text = self.perf_script(data, "-F", "ip,sym,srcline")
        return [python_frames(s, script) for s in parse_srclines(text)]

    @unittest.skipUnless(HAVE_FRAME_POINTERS,
                         "perf record -g needs the frame-pointer build")
    def test_frame_pointers(self):
        self.check_accuracy(self.record_lines(("-g",)))

    def test_dwarf(self):
        self.check_accuracy(self.record_lines(("--call-graph", "dwarf")))

    def record_program(self, name, source, frequency, seconds):
        """perf record of `source` (which prints "PID N" and runs for its
        first argument, `seconds`) with -X perf_lines: -g on the
        frame-pointer build, --call-graph dwarf on the other.  Its stdout,
        its script's path and the perf.data file."""
        callgraph = ("-g",) if HAVE_FRAME_POINTERS else ("--call-graph",
                                                         "dwarf")
        script = make_script(self.tmp, name, source)
        data = os.path.join(self.tmp, "perf.data")
        self.addCleanup(os_helper.unlink, data)
        cmd = perf_command("record", "-F", frequency, *callgraph, "-o", data,
                           "--", sys.executable, "-X", "perf_lines", script,
                           seconds)
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.forget_pid(script_pid(proc.stdout))
        self.assertNotIn("Warning", proc.stderr)
        return proc.stdout, script, data

    def test_threads_fork_throw_recursion(self):
        # Every line a sample gives a frame of the program is one of its
        # function's lines, and the callers' lines are right, in threads
        # whose recursion goes past the stack budget (the deeper calls run
        # in the first evaluator, without lines), in a fork child, across
        # generator.throw().
        stdout, script, data = self.record_program(
            "busy_program", BUSY_PROGRAM, "499", "2")
        self.assertIn("done True", stdout)
        self.forget_pid(int(re.search(r"^CHILD (\d+)$", stdout,
                                      re.M).group(1)))
        text = self.perf_script(data, "-F", "pid,ip,sym,srcline")
        samples = [python_frames(s, script) for s in parse_srclines(text)]
        spans = function_spans(BUSY_PROGRAM, script)
        at = marker_lines(BUSY_PROGRAM)
        callers = {("deep", "deep"): {at["DEEP_CALL"]},
                   ("leaf", "deep"): {at["DEEP_LEAF"]},
                   ("deep", "worker"): {at["WORKER_DEEP"]},
                   ("thrown", "worker"): {at["WORKER_THROW"]},
                   ("leaf", "thrown"): {at["THROWN_YIELD"],
                                        at["THROWN_CAUGHT"]}}
        right = seen = 0
        outside, wrong = [], []         # (the samples, for the message)
        for frames in samples:
            for name, line in frames:
                if line is not None and name in spans:
                    first, last = spans[name]
                    if not first <= line <= last:
                        outside.append(frames)
                        break
            for (callee, _), (caller, line) in zip(frames, frames[1:]):
                want = callers.get((callee, caller))
                if want is not None and line is not None:
                    seen += 1
                    if line in want:
                        right += 1
                    else:
                        wrong.append(frames)
        self.assertEqual(outside, [],
                         f"{len(outside)} samples of {len(samples)}")
        self.assertGreater(seen, 100)
        self.assertGreaterEqual(right / seen, 0.95,
                                f"{right} of {seen}; wrong: {wrong[:5]}")

    def test_while_test_caller(self):
        # A while loop's test calls __len__: its caller is at the test's
        # line, not at the body's last call.
        _, script, data = self.record_program(
            "while_program", WHILE_PROGRAM, "999", "1.5")
        text = self.perf_script(data, "-F", "ip,sym,srcline")
        at = marker_lines(WHILE_PROGRAM)
        lines = collections.Counter()
        for sample in parse_srclines(text):
            frames = python_frames(sample, script)
            for (callee, _), (caller, line) in zip(frames, frames[1:]):
                if (callee, caller) == ("Bag.__len__", "drain"):
                    lines[line] += 1
        seen = sum(lines.values())
        self.assertGreater(seen, 100)
        self.assertGreaterEqual(lines[at["WHILE_TEST"]] / seen, 0.95,
                                f"the lines of drain() below __len__: "
                                f"{dict(lines)}; WHILE_TEST is line "
                                f"{at['WHILE_TEST']}")

    def test_resumed_generator(self):
        # A generator resumed by send() is at its yield's line from the
        # first instruction it runs, and its caller at the send's.
        _, script, data = self.record_program(
            "resumed_program", RESUMED_PROGRAM, "999", "1.5")
        text = self.perf_script(data, "-F", "ip,sym,srcline")
        at = marker_lines(RESUMED_PROGRAM)
        own, callers = collections.Counter(), collections.Counter()
        for sample in parse_srclines(text):
            frames = python_frames(sample, script)
            if frames and frames[0][0] == "powers":
                own[frames[0][1]] += 1
                if len(frames) > 1 and frames[1][0] == "drive":
                    callers[frames[1][1]] += 1
        seen = sum(own.values())
        self.assertGreater(seen, 100)
        self.assertGreaterEqual(own[at["RESUMED"]] / seen, 0.95,
                                f"the lines of powers(): {dict(own)}; "
                                f"RESUMED is line {at['RESUMED']}")
        self.assertGreaterEqual(
            callers[at["DRIVE_SEND"]] / max(sum(callers.values()), 1), 0.95,
            f"the lines of drive() above powers(): {dict(callers)}; "
            f"DRIVE_SEND is line {at['DRIVE_SEND']}")

    # The jitdump backend: each line trampoline's code load carries its
    # pads, a debug entry per row and the unwind table of its slot.

    @unittest.skipUnless(HAVE_FRAME_POINTERS,
                         "perf record -g needs the frame-pointer build")
    @requires_perf_inject_jit
    def test_jitdump_frame_pointers(self):
        self.check_accuracy(self.record_lines(("-g",), jit=True))

    @requires_perf_inject_jit
    def test_jitdump_dwarf(self):
        self.check_accuracy(self.record_lines(("--call-graph", "dwarf"),
                                              jit=True))


def folded_python_frames(path, script):
    """The folded stacks at `path`, as [(frames, count)]: frames the
    Python functions of `script`, leaf first, as (qualname, line), line
    None for a frame named without one ("py::QUALNAME:SCRIPT")."""
    pattern = re.compile(r"py::(.+?):%s(?::(\d+))?" % re.escape(script))
    stacks = []
    with open(path) as f:
        for text in f.read().splitlines():
            stack, count = text.rsplit(" ", 1)
            frames = []
            for frame in reversed(stack.split(";")):
                m = pattern.fullmatch(frame)
                if m:
                    line = m.group(2)
                    frames.append((m.group(1),
                                   int(line) if line else None))
            stacks.append((frames, int(count)))
    return stacks


def adjacent_twins(path):
    """The stacks of the folded stacks at `path` in which a Python frame is
    next to another of the same function (the two frames of one call left
    unfolded: PROGRAM has no recursion)."""
    twins = []
    with open(path) as f:
        for text in f.read().splitlines():
            frames = [re.sub(r":\d+$", "", frame) for frame in
                      text.rsplit(" ", 1)[0].split(";")]
            if any(a == b and a.startswith("py::")
                   for a, b in zip(frames, frames[1:])):
                twins.append(text)
    return twins


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LINES, NO_LINES)
@requires_perf
class RecordLinesTests(AccuracyChecks, PerfTestCase):
    """python -m perf_trampoline record --python of PROGRAM: with lines,
    one frame per Python call, named with its line, the lines right by
    PROGRAM's markers and the same as perf's own srcline; without lines,
    the frames as before."""

    def record_python(self, *args, xoption="perf_lines", seconds="1.5"):
        """record --python ARGS of PROGRAM run with -X `xoption`: (the
        script's path, NAME)."""
        script = make_script(self.tmp, "lines_program", PROGRAM)
        name = os.path.join(self.tmp, "out")
        cmd = [sys.executable, "-m", "perf_trampoline", "record", "--python",
               "-o", name, *args, "--", sys.executable, "-X", xoption,
               script, seconds]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=300,
                              env=env_with(HOME=buildid_home()))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.forget_pid(script_pid(proc.stdout))
        self.assertNotIn("Traceback", proc.stderr)
        self.assertNotIn("warning", proc.stderr)
        return script, name

    def check_record(self, *args):
        # (the flame graph's tree in a template of the least record takes)
        template = os.path.join(self.tmp, "template.html")
        with open(template, "w") as f:
            f.write("<script>/** @flamegraph_json **/\n"
                    "/** @options_json **/</script>\n")
        args += ("--flamegraph", "--template", template)
        script, name = self.record_python(*args)
        folded = folded_python_frames(name + ".folded", script)
        self.assertEqual(adjacent_twins(name + ".folded"), [])
        self.check_accuracy([frames for frames, count in folded
                             for _ in range(count)])
        # The same lines as perf's own srcline (perf script -F srcline
        # looks up each frame's address with addr2line): each sample in
        # which perf shows every function of the program as its two
        # frames is a stack of the folded stacks.
        ours = collections.Counter()
        for frames, count in folded:
            ours[tuple(frames)] += count
        theirs = collections.Counter()
        text = self.perf_script(name + ".data", "-F", "ip,sym,srcline")
        for sample in parse_srclines(text):
            frames = tuple(python_frames(sample, script))
            if frames and all(line is not None for _, line in frames):
                theirs[frames] += 1
        self.assertGreater(sum(theirs.values()),
                           0.9 * sum(n for frames, n in folded if frames))
        for frames, count in theirs.items():
            self.assertGreaterEqual(ours[frames], count, frames)
        # The flame graph is of the folded stacks.
        at = marker_lines(PROGRAM)
        with open(name + ".html") as f:
            html = f.read()
        self.assertIn(f'"py::work:{script}:{at["CALL_SPIN"]}"', html)
        return script, name

    @unittest.skipUnless(HAVE_FRAME_POINTERS,
                         "perf record -g needs the frame-pointer build")
    def test_frame_pointers(self):
        script, name = self.check_record("--call-graph", "fp")
        # collapse of the recording's perf script text folds the same, and
        # with --no-lines the same stacks without their lines.
        text = self.perf_script(name + ".data")
        with open(name + ".folded") as f:
            recorded = f.read()
        collapse = [sys.executable, "-m", "perf_trampoline", "collapse"]
        proc = subprocess.run(collapse, input=text, capture_output=True,
                              text=True, check=True)
        self.assertEqual(proc.stdout, recorded)
        proc = subprocess.run(collapse + ["--no-lines"], input=text,
                              capture_output=True, text=True, check=True)
        without = collections.Counter()
        for line in recorded.splitlines():
            stack, count = line.rsplit(" ", 1)
            stack = re.sub(r"(py::[^;]*):\d+(?=;|$)", r"\1", stack)
            without[stack] += int(count)
        self.assertEqual(proc.stdout, "".join(
            f"{stack} {without[stack]}\n" for stack in sorted(without)))

    def test_dwarf(self):
        self.check_record("--call-graph", "dwarf")

    @requires_perf_inject_jit
    def test_collapse_jitdump(self):
        # collapse of a jitdump recording read after perf inject --jit
        # (each function its own jitted-PID-N.so, its pads' lines in it)
        # folds the same way, with the same thresholds.
        script = make_script(self.tmp, "lines_program", PROGRAM)
        data = os.path.join(self.tmp, "perf.data")
        self.addCleanup(os_helper.unlink, data)
        callgraph = ("-g",) if HAVE_FRAME_POINTERS else ("--call-graph",
                                                         "dwarf")
        proc = subprocess.run(
            perf_command("record", "-F", "999", *callgraph, "-k", "1",
                         "-o", data, "--", sys.executable, "-X", "perf_jit",
                         "-X", "perf_lines", script, "1.5"),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        text = self.perf_script(self.inject_jit(data, pid))
        proc = subprocess.run(
            [sys.executable, "-m", "perf_trampoline", "collapse"],
            input=text, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        folded = os.path.join(self.tmp, "jit.folded")
        with open(folded, "w") as f:
            f.write(proc.stdout)
        self.assertEqual(adjacent_twins(folded), [])
        self.check_accuracy([frames for frames, count
                             in folded_python_frames(folded, script)
                             for _ in range(count)])

    def test_no_lines(self):
        # Without lines, and with --no-lines: one frame per call, named
        # as before, "py::QUALNAME:FILE".
        for args, xoption in (((), "perf"), (("--no-lines",), "perf_lines")):
            with self.subTest(args=args, xoption=xoption):
                script, name = self.record_python(*args, xoption=xoption)
                folded = folded_python_frames(name + ".folded", script)
                named = {frame for frames, _ in folded for frame in frames}
                self.assertIn(("spin", None), named)
                self.assertEqual({line for _, line in named}, {None})
                self.assertEqual(adjacent_twins(name + ".folded"), [])
                chain = f"py::work:{script};py::spin:{script}"
                with open(name + ".folded") as f:
                    self.assertIn(chain, f.read())


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LINES, NO_LINES)
class LinesElsewhereTests(PerfTestCase):

    def test_eu_stack(self):
        # elfutils walks the live process with the arena files' unwind
        # tables and reads their line tables.
        if subprocess.run(["sh", "-c", "command -v eu-stack"],
                          capture_output=True).returncode != 0:
            self.skipTest("eu-stack (elfutils) not installed")
        source = textwrap.dedent("""\
            import os
            def spin():
                t = 0
                while True: t += 1        # SPIN_LOOP
            def work():
                spin()                    # CALL_SPIN
            print("PID", os.getpid(), flush=True)
            work()
            """)
        with os_helper.temp_dir() as tmp:
            script = make_script(tmp, "spin", source)
            proc = subprocess.Popen(
                [sys.executable, "-X", "perf_lines", script],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=env_with())
            self.addCleanup(stop_process, proc)
            forget_process(self, proc)
            pid = script_pid(proc.stdout.readline())
            time.sleep(0.3)
            res = subprocess.run(["eu-stack", "-s", "-p", str(pid)],
                                 capture_output=True, text=True, timeout=60)
            out = res.stdout
            if res.returncode != 0 and "py::" not in out:
                self.skipTest(f"eu-stack cannot attach: {res.stderr}")
        at = marker_lines(source)
        frames = re.findall(r"py::(\w+):\S+\n\s+\S+:(\d+)", out)
        self.assertIn(("spin", str(at["SPIN_LOOP"])), frames, out)
        self.assertIn(("work", str(at["CALL_SPIN"])), frames, out)

    def test_addr2line(self):
        # Every pad of a function has the line of its code unit in the
        # trampoline file's line table, at its address (perf -g) and the
        # address before it (DWARF readers), for binutils and elfutils.
        source = textwrap.dedent("""\
            import os
            print("PID", os.getpid(), flush=True)
            def f(n):
                a = n + 1
                b = [a,
                     a * 2]
                return sum(b)
            f(3)
            """)
        script = make_script(self.tmp, "pads", source)
        proc, pids = run_and_forget(self, "-X", "perf_lines", script)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        paths = arena_paths(pids[0], self.since)
        name = f"py::f:{script}"
        found = [(p, symbols(p)) for p in paths]
        found = [(p, syms[name]) for p, syms in found if name in syms]
        self.assertEqual(len(found), 1, paths)
        path, (value, size) = found[0]
        code, = [c for c in compile(source, script, "exec").co_consts
                 if isinstance(c, types.CodeType) and c.co_name == "f"]
        # (the symbol's value is its file offset: vaddr == offset)
        template = LINE_TEMPLATE
        addrs, want = [value, value + template - 1], [3, 3]
        for start, end, line in code.co_lines():
            if line is None:
                continue
            for unit in range(start // 2, end // 2):
                pad = value + template + 2 * (unit + 1)
                addrs += [pad, pad - 1]
                want += [line, line]
        self.assertLessEqual(addrs[-1], value + size)
        self.assertGreater(len(set(want)), 3)
        tools = [t for t in (ADDR2LINE, EU_ADDR2LINE) if t is not None]
        if not tools:
            self.skipTest("needs addr2line or eu-addr2line")
        for tool in tools:
            out = subprocess.run([tool, "-e", path, *map(hex, addrs)],
                                 capture_output=True, text=True, check=True)
            got = [int(l.rsplit(":", 1)[1]) for l in out.stdout.split()]
            self.assertEqual(got, want, tool)

    def run_ok(self, *args, **env):
        proc, pids = run_and_forget(self, *args, env=env_with(**env))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc

    def has_lines(self, pid):
        """Did process `pid` (ended) name its functions with line
        trampolines?  Their symbols cover their pads: 64 bytes or more,
        where a plain trampoline's cover 16 or less."""
        sizes = [size for path in arena_paths(pid, self.since)
                 for name, (value, size) in symbols(path).items()
                 if name.startswith("py::")]
        self.assertTrue(sizes)
        return min(sizes) >= 64

    def test_options(self):
        code = ("import os, sys; print('PID', os.getpid()); "
                "print(sys.is_stack_trampoline_active())")
        for args, env in ((["-X", "perf_lines"], {}),
                          (["-X", "perf_lines=1"], {}),
                          ([], {"PYTHON_PERF_LINES": "1"}),
                          (["-X", "perf", "-X", "perf_lines"], {})):
            with self.subTest(args=args, env=env):
                proc = self.run_ok(*args, "-c", code, **env)
                self.assertEqual(proc.stdout.split()[-1], "True")
                self.assertEqual(proc.stderr, "")
                self.assertTrue(self.has_lines(int(proc.stdout.split()[1])))
        proc = self.run_ok("-X", "perf", "-c", code)
        self.assertFalse(self.has_lines(int(proc.stdout.split()[1])))
        proc = self.run_ok("-X", "perf_lines=0", "-c", code,
                        PYTHON_PERF_LINES="1")
        self.assertEqual(proc.stdout.split()[-1], "False")
        proc = self.run_ok("-X", "perf_lines=yes", "-c", code)
        self.assertIn("-X perf_lines='yes' is not 0 or 1; ignored",
                      proc.stderr)
        proc = self.run_ok("-X", "perf_jit", "-X", "perf_lines", "-c", code)
        self.assertEqual(proc.stdout.split()[-1], "True")
        self.assertEqual(proc.stderr, "")
        self.assertTrue(self.has_lines(int(proc.stdout.split()[1])))

    def test_jitdump_long_function(self):
        # A function whose line entries would not fit in one record of the
        # jitdump gets a plain trampoline (its def line), and the backend
        # stays on; the others have their pads and an entry per row.
        body = "".join(f"    x += {i}\n" for i in range(700))
        code = ("import os\nprint('PID', os.getpid())\n"
                "def short(n):\n    n += 1\n    return n * 2\n"
                "def long(x):\n" + body + "    return x\n"
                "long(short(1))\n")
        script = make_script(self.tmp, "long_function", code)
        proc = self.run_ok("-X", "perf_jit", "-X", "perf_lines", script)
        self.assertEqual(proc.stderr, "")
        pid = int(proc.stdout.split()[1])
        records = read_jitdump(jit_path(pid), pid)
        loads = {}
        for (rid, debug), (rid2, _), (rid3, load) in zip(
                records, records[1:], records[2:]):
            if rid == JIT_CODE_DEBUG_INFO and rid3 == JIT_CODE_LOAD:
                loads[load["name"]] = (load["size"], debug["entries"])
        short_size, short_entries = loads[f"py::short:{script}"]
        long_size, long_entries = loads[f"py::long:{script}"]
        # short: the template and its pads; its def line, then lines 4
        # and 5 from the pads of their code units, then the end
        self.assertGreaterEqual(short_size, LINE_TEMPLATE)
        self.assertEqual([line for _, line, _, _ in short_entries],
                         [3, 4, 5, 3])
        self.assertLess(long_size, LINE_TEMPLATE)
        self.assertEqual(len(long_entries), 2)

    def test_other_frame_evaluator(self):
        # A PEP 523 evaluator installed from a function that runs in a line
        # trampoline sees the calls that follow, as without lines.
        try:
            import _testinternalcapi
            _testinternalcapi.set_eval_frame_record
        except (ImportError, AttributeError):
            self.skipTest("needs _testinternalcapi.set_eval_frame_record")
        code = textwrap.dedent("""\
            import os, _testinternalcapi
            print("PID", os.getpid())
            def a():
                return b()
            def b():
                return 1
            def main():
                seen = []
                _testinternalcapi.set_eval_frame_record(seen)
                a()
                _testinternalcapi.set_eval_frame_default()
                print(seen)
            main()
            """)
        outputs = set()
        for args in ((), ("-X", "perf"), ("-X", "perf_lines")):
            proc = self.run_ok(*args, "-c", code)
            outputs.add(proc.stdout.splitlines()[-1])
        self.assertEqual(len(outputs), 1, outputs)
        self.assertIn("a", outputs.pop())

    def test_sys_api(self):
        code = textwrap.dedent("""\
            import os, sys
            print("PID", os.getpid())
            sys.activate_stack_trampoline("perf", lines=True)
            assert sys.is_stack_trampoline_active()
            def f():
                return 1
            f()
            # on again without lines, then with them: the same backend
            sys.activate_stack_trampoline("perf")
            f()
            sys.activate_stack_trampoline("perf", lines=True)
            f()
            assert sys.is_stack_trampoline_active()
            # the jitdump backend has them too
            sys.activate_stack_trampoline("perf_jit", lines=True)
            f()
            print("jit", sys.is_stack_trampoline_active())
            try:
                sys.activate_stack_trampoline("perf", True)
            except TypeError:
                print("keyword only")
            sys.deactivate_stack_trampoline()
            """)
        proc = self.run_ok("-c", code)
        self.assertIn("jit True", proc.stdout)
        self.assertIn("keyword only", proc.stdout)
        self.assertEqual(proc.stderr, "")

    def test_toggle_moves_functions(self):
        # Lines turned on while the backend is on: a function that has a
        # plain trampoline already gets a line trampoline for its next
        # calls, and a plain one again when they are turned off.
        code = textwrap.dedent("""\
            import os, sys
            print("PID", os.getpid())
            def f():
                return 1
            sys.activate_stack_trampoline("perf")
            f()
            sys.activate_stack_trampoline("perf", lines=True)
            f()
            sys.activate_stack_trampoline("perf")
            f()
            """)
        proc = self.run_ok("-c", code)
        pid = int(proc.stdout.split()[1])
        # The map's records, in the order the trampolines were made: a
        # line trampoline's covers more than the plain template.
        sizes = [int(line.split()[1], 16)
                 for line in read_map_file(map_path(pid))
                 if line.split()[2].startswith("py::f:")]
        self.assertEqual(len(sizes), 3, sizes)
        plain, lines, again = sizes
        self.assertGreater(lines, plain)
        self.assertEqual(again, plain)


def debugger_frames(text):
    """The trampolines' frames of a gdb or lldb backtrace, innermost
    first, as (qualname, line): the line the debugger gives the frame's
    address ("at FILE:LINE"; None where it gives none).  gdb prints
    "#7  0x00007f1f in py::f (/x/p.py:3) () at /x/p.py:12", lldb
    "frame #6: 0x00007f1f JIT(0x7f1e)`py::f (/x/p.py:3) + 70 at
    p.py:12"."""
    frames = []
    for line in text.splitlines():
        m = re.match(r"\s*(?:\*\s*)?(?:#\d+|frame #\d+:)\s+.*?"
                     r"py::(\S+) \([^()]*:\d+\)(.*)$", line)
        if m:
            at = re.search(r" at \S+:(\d+)(?::\d+)?\s*$", m.group(2))
            frames.append((m.group(1), int(at.group(1)) if at else None))
    return frames


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LINES, NO_LINES)
class LinesInDebuggersTests(unittest.TestCase):
    """gdb's and lldb's backtraces give a line trampoline's two frames
    their lines: the trampoline's the def line, the line record's the
    line the function is on (the objects that Python/perf_debugger.c
    registers carry the pads' rows)."""

    def setUp(self):
        problem = ptrace_problem()
        if problem:
            self.skipTest(problem)
        self.tmp = self.enterContext(os_helper.temp_dir())
        self.since = time.time() - 1

    def assert_lines(self, text, want, source):
        """Each function of `want` ({qualname: marker or line}) has its
        two frames next to each other in the backtrace `text`: its
        trampoline's at its def line, its line record's at the marker's
        line."""
        at = marker_lines(source)
        defs = {m.group(1): n for n, l in enumerate(source.splitlines(), 1)
                for m in [re.match(r"def (\w+)\(", l)] if m}
        defs["<module>"] = 1
        frames = debugger_frames(text)
        for name, line in want.items():
            line = at.get(line, line)
            pairs = [(first[1], second[1])
                     for first, second in zip(frames, frames[1:])
                     if first[0] == second[0] == name]
            self.assertIn((defs[name], line), pairs,
                          f"{name} at line {line}:\n{text}")

    def gdb(self, *args):
        proc = subprocess.run(["gdb", "-nx", "-batch", *args],
                              capture_output=True, text=True, timeout=600)
        self.assertNotIn("Fatal signal", proc.stderr)
        return proc.stdout + proc.stderr

    def test_gdb_breakpoints(self):
        # gdb runs the program of known lines and stops in C functions
        # that a known line calls: sorted() from work(), sum() and sorted()
        # from the generator, resumed at one line, then the other.
        # ($_any_caller_matches looks at the frames from the caller on:
        # the evaluator, then the trampoline.)
        probe = self.gdb("-ex", "python print('PYTHON', 6 * 7)")
        if "PYTHON 42" not in probe:
            self.skipTest("gdb has no Python ($_any_caller_matches)")
        script = make_script(self.tmp, "lines_program", PROGRAM)
        stops = (("builtin_sorted", "work"), ("builtin_sum", "gen"),
                 ("builtin_sorted", "gen"))
        commands = ["-ex", "set breakpoint pending on"]
        for n, (function, caller) in enumerate(stops):
            commands += [
                "-ex", "delete",
                "-ex", f"break {function} if "
                       f'$_any_caller_matches("^py::{caller} ", 3)',
                "-ex", "run" if n == 0 else "continue",
                "-ex", "echo STOP\\n", "-ex", "bt"]
        out = self.gdb(*commands, "-ex", "kill", "--args", sys.executable,
                       "-X", "perf_lines", script, "60")
        for pid in re.findall(r"^PID (\d+)$", out, re.M):
            forget_files(self, int(pid))
        stopped = out.split("STOP\n")[1:]
        self.assertEqual(len(stopped), 3, out[-3000:])
        self.assert_lines(stopped[0], {"work": "CALL_SORTED",
                                       "<module>": "CALL_WORK"}, PROGRAM)
        self.assert_lines(stopped[1], {"gen": "GEN_A", "work": "CALL_GEN",
                                       "<module>": "CALL_WORK"}, PROGRAM)
        self.assert_lines(stopped[2], {"gen": "GEN_B", "work": "CALL_GEN",
                                       "<module>": "CALL_WORK"}, PROGRAM)

    def test_gdb_many_names(self):
        # 300 functions named while gdb watches, each calling the next
        # from the line after its def: their lines reach gdb from the
        # arena's object (merged every 128 names) and from the recent
        # names' object; the rows are the arena file's, or with /tmp
        # mounted noexec (no file) written for the objects alone.
        chain = ["import os, signal",
                 "def g299():",
                 "    os.kill(os.getpid(), signal.SIGINT)"]
        for i in range(298, -1, -1):
            chain += [f"def g{i}():", f"    g{i + 1}()"]
        chain.append("g0()")
        source = "\n".join(chain) + "\n"
        want = {f"g{i}": 2 * (300 - i) + 1 for i in range(300)}
        with self.subTest(arenas="files"):
            script = make_script(self.tmp, "chain", source)
            out = self.gdb("-ex", "run", "-ex", "bt", "-ex", "kill",
                           "--args", sys.executable, "-X", "perf_lines",
                           script)
            for pid in re.findall(r"process (\d+)", out):
                forget_files(self, int(pid))
            self.assertIn("SIGINT", out)
            self.assert_lines(out, want, source)
        with self.subTest(arenas="anonymous"):
            noexec_tmp = noexec_tmp_command(self)
            for path in (os.path.realpath(sys.executable), os.getcwd()):
                if path.startswith("/tmp/"):
                    self.skipTest(f"{path} is under /tmp, which is mounted "
                                  f"over")
            where = self.enterContext(os_helper.temp_dir(
                os.path.join(os.getcwd(), f"lines_{os.getpid()}")))
            script = make_script(where, "chain", source)
            proc = subprocess.run(
                [*noexec_tmp, "gdb", "-nx", "-batch", "-ex", "run",
                 "-ex", "bt", "-ex", "kill", "--args", sys.executable,
                 "-X", "perf_lines", script],
                capture_output=True, text=True, timeout=600)
            out = proc.stdout + proc.stderr
            self.assertIn("cannot map it executable", out)
            self.assertIn("SIGINT", out)
            self.assert_lines(out, want, source)

    def test_attached(self):
        # A program asleep at a known line, through a generator resumed at
        # its second line: gdb and lldb attached, and gdb on its core.
        # Before it sleeps, hundreds of functions of a few sizes are named
        # after those of its frames: their arenas' objects have merged
        # since (every 128 names), and are read as they are in memory.
        source = textwrap.dedent("""\
            import os, time
            def gen():
                yield 1
                sleeper()                     # GEN_CALL
                yield 2
            def churn():
                for size in (1, 8, 30, 60):
                    body = "".join(f"    x{k} = {k}\\n" for k in range(size))
                    src = "".join(f"def f{i}():\\n{body}    return 0\\n"
                                  for i in range(300))
                    ns = {}
                    exec(compile(src, "churn", "exec"), ns)
                    for i in range(300):
                        ns[f"f{i}"]()
            def sleeper():
                churn()
                print("READY", flush=True)
                time.sleep(120)               # SLEEP
            def loop():
                for x in gen():               # LOOP_GEN
                    pass
            def main():
                n = 1
                loop()                        # CALL_LOOP
            print("PID", os.getpid(), flush=True)
            main()                            # CALL_MAIN
            """)
        script = make_script(self.tmp, "sleeper", source)
        want = {"sleeper": "SLEEP", "gen": "GEN_CALL", "loop": "LOOP_GEN",
                "main": "CALL_LOOP", "<module>": "CALL_MAIN"}
        proc = subprocess.Popen(
            [sys.executable, "-X", "perf_lines", script],
            stdout=subprocess.PIPE, text=True, env=env_with())
        forget_process(self, proc)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertEqual(script_pid(proc.stdout.readline()), proc.pid)
        self.assertEqual(proc.stdout.readline().strip(), "READY")
        # No gcore of an AddressSanitizer process: its shadow memory makes
        # a core of tens of GiB on disk (a full disk for what runs
        # beside), which gdb cannot read back anyway.
        asan = support.check_sanitizer(address=True)
        core = os.path.join(self.tmp, "core")
        gcore = () if asan else ("-ex", f"gcore {core}")
        out = self.gdb("-p", str(proc.pid), "-ex", "bt", *gcore)
        self.assert_lines(out, want, source)
        if shutil.which("lldb") is not None:
            with self.subTest(debugger="lldb"):
                out = subprocess.run(
                    ["lldb", "-b", "-p", str(proc.pid), "-o", "bt"],
                    capture_output=True, text=True, timeout=300).stdout
                self.assert_lines(out, want, source)
        proc.kill()
        with self.subTest(debugger="gdb, core file"):
            if asan:
                self.skipTest("no core of an AddressSanitizer process")
            self.assertTrue(os.path.exists(core))
            out = self.gdb(sys.executable, core, "-ex", "bt")
            self.assert_lines(out, want, source)


if __name__ == "__main__":
    unittest.main()
