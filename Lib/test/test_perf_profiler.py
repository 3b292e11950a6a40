"""Tests for the perf trampolines (cpython-perf): -X perf, PYTHONPERFSUPPORT,
sys.activate_stack_trampoline() and friends.

The profiling tests run the real `perf record` / `perf script` and are
skipped only when a probe shows that perf cannot sample on this machine.
Every test removes the perf.data files and the /tmp/perf-PID.map files of
the processes it started.
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

from test import support
from test.support import os_helper
from test.support.script_helper import assert_python_ok, make_script

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")

HAVE_TRAMPOLINE = bool(sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"))
MAP_LINE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::.*$")

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


def map_path(pid):
    return f"/tmp/perf-{pid}.map"


def script_pid(stdout):
    m = re.search(r"^PID (\d+)$", stdout, re.M)
    if m is None:
        raise AssertionError(f"script printed no pid: {stdout!r}")
    return int(m.group(1))


def run_python(*args, env=None, **kw):
    """Run this interpreter; clean environment unless `env` is given."""
    if env is None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
    return subprocess.run([sys.executable, *args], env=env,
                          capture_output=True, text=True, **kw)


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


def _perf_can_sample():
    """Probe: perf exists and `perf record` samples a process here."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "probe.data")
        try:
            proc = subprocess.run(
                [perf, "record", "-F", "999", "-g", "-o", out, "--",
                 sys.executable, "-c", "sum(range(3_000_000))"],
                capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"perf record failed: {exc}"
        if proc.returncode != 0 or not os.path.exists(out):
            return ("perf record cannot sample here: "
                    + proc.stderr.decode(errors="replace")[-300:])
        script = subprocess.run([perf, "script", "-i", out],
                                capture_output=True, timeout=120)
        if script.returncode != 0 or not script.stdout.strip():
            return "perf script shows no samples"
    return None


PERF_PROBLEM = _perf_can_sample() if HAVE_TRAMPOLINE else "no trampoline"


def parse_perf_script(text):
    """Samples of `perf script` output: lists of (symbol, dso), leaf first."""
    samples = []
    current = None
    for line in text.splitlines():
        if not line.strip():
            if current:
                samples.append(current)
            current = None
            continue
        if line[0] not in " \t":
            current = []
            continue
        if current is None:
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        m = re.match(r"(.*) \((.*)\)$", rest)
        sym, dso = (m.group(1), m.group(2)) if m else (rest, "")
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        current.append((sym, dso))
    if current:
        samples.append(current)
    return samples


class PerfTestCase(unittest.TestCase):
    """Helpers that run a script under perf record and clean up after it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_perf_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def forget_pid(self, pid):
        self.addCleanup(os_helper.unlink, map_path(pid))

    def record(self, source, *python_args, env=None, callgraph=("-g",)):
        """perf record a script; returns (script stdout, parsed samples)."""
        script = make_script(self.tmp, "perf_script", source)
        data = os.path.join(self.tmp, "perf.data")
        self.addCleanup(os_helper.unlink, data)
        cmd = ["perf", "record", "-F", "999", *callgraph, "-o", data, "--",
               sys.executable, *python_args, script]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=env if env is not None else env_with(),
                              timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        report = subprocess.run(["perf", "script", "-i", data],
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(report.returncode, 0, report.stderr)
        return proc.stdout, parse_perf_script(report.stdout), script, pid


@unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
@unittest.skipIf(PERF_PROBLEM, PERF_PROBLEM)
class TestPerfProfiling(PerfTestCase):

    def assert_nested_frames(self, samples, script, names=("foo", "bar",
                                                           "baz")):
        """Samples in foo show py::foo, py::bar, py::baz in stack order."""
        wanted = [f"py::{name}:{script}" for name in names]
        in_foo = [s for s in samples
                  if any(sym == wanted[0] for sym, _ in s)]
        self.assertGreater(len(in_foo), 10,
                           f"too few samples name {wanted[0]}")
        good = 0
        for sample in in_foo:
            syms = [sym for sym, _ in sample]
            try:
                positions = [syms.index(w) for w in wanted]
            except ValueError:
                continue
            if positions == sorted(positions):
                good += 1
        self.assertGreaterEqual(good, 0.9 * len(in_foo),
                                "py:: frames missing or out of order")
        return in_foo

    def test_xoption(self):
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(code, "-X", "perf")
        self.assert_nested_frames(samples, script)

    def test_environment_variable(self):
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(
            code, env=env_with(PYTHONPERFSUPPORT="1"))
        self.assert_nested_frames(samples, script)

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
        self.assert_nested_frames(samples, script)
        named = {sym for s in samples for sym, _ in s}
        for name in ("ham", "eggs", "spam"):
            self.assertNotIn(f"py::{name}:{script}", named)
        # ham did run, after deactivation, as anonymous evaluator frames
        self.assertTrue(any(s and s[0][0].startswith("_PyEval") or
                            "ceval" in s[0][1] or "python" in s[0][1]
                            for s in samples))

    def test_no_native_frame_skipped(self):
        # The trampoline keeps a frame record, so frame-pointer unwinding
        # goes from a trampoline straight to the function that called it.
        # In this build the only such function is
        # _PyPerfTrampoline_EvalFrame (checked below with the build's own
        # disassembly where gdb exists).  A trampoline without a frame
        # record hides that caller: the next frame would be its caller's
        # caller (_PyEval_EvalFrameDefault).
        code = NESTED + "baz(10_000_000)\n"
        _, samples, script, _ = self.record(code, "-X", "perf")
        checked = 0
        for sample in samples:
            for i, (sym, _) in enumerate(sample):
                if i == 0 or not sym.startswith("py::"):
                    continue
                if i + 1 == len(sample):
                    continue
                checked += 1
                self.assertEqual(sample[i + 1][0],
                                 "_PyPerfTrampoline_EvalFrame",
                                 f"frame below {sym} in {sample}")
        self.assertGreater(checked, 30)

    @unittest.skipIf(shutil.which("gdb") is None, "needs gdb")
    def test_only_evalframe_calls_trampolines(self):
        # The build's own knowledge behind test_no_native_frame_skipped:
        # _PyPerfTrampoline_EvalFrame calls the trampoline with a real
        # (indirect) call, not a jump that would leave no frame.
        proc = subprocess.run(
            ["gdb", "-batch", "-nx", "-ex",
             "disassemble _PyPerfTrampoline_EvalFrame", sys.executable],
            capture_output=True, text=True, timeout=120)
        if "No symbol" in proc.stdout + proc.stderr:
            self.skipTest("interpreter has no symbols")
        self.assertRegex(proc.stdout, r"call\s+\*")


@unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
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
        proc = run_python(*args, script, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        return proc, pid, script

    def read_map(self, pid):
        with open(map_path(pid)) as f:
            return f.read().splitlines()

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
        self.assertFalse(os.path.exists(map_path(pid)))

    def test_env_zero_and_garbage_are_ignored(self):
        for value in ("0", "", "yes", "1x"):
            with self.subTest(value=value):
                _, pid, _ = self.run_map_script(
                    env=env_with(PYTHONPERFSUPPORT=value))
                self.assertFalse(os.path.exists(map_path(pid)))

    def test_env_ignored_with_E(self):
        _, pid, _ = self.run_map_script("-E",
                                        env=env_with(PYTHONPERFSUPPORT="1"))
        self.assertFalse(os.path.exists(map_path(pid)))

    def test_fork_child_gets_its_own_map(self):
        source = textwrap.dedent("""\
            import os, sys
            print("PID", os.getpid(), flush=True)
            def in_parent():
                return 1
            def in_child():
                return 2
            in_parent()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                in_child()
                os.write(w, str(os.getpid()).encode())
                os._exit(0)
            os.close(w)
            child = int(os.read(r, 100))
            os.waitpid(pid, 0)
            print("CHILD", child, flush=True)
            """)
        proc, pid, script = self.run_map_script("-X", "perf", source=source)
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        self.forget_pid(child)
        parent_names = {l.split(" ", 2)[2] for l in self.read_map(pid)}
        child_names = {l.split(" ", 2)[2] for l in self.read_map(child)}
        self.assertIn(f"py::in_parent:{script}", parent_names)
        self.assertNotIn(f"py::in_child:{script}", parent_names)
        self.assertIn(f"py::in_child:{script}", child_names)
        # Inherited trampolines are described in the child's file too.
        self.assertIn(f"py::<module>:{script}", child_names)
        self.assertIn(f"py::in_parent:{script}", child_names)

    def test_planted_symlink_is_not_followed(self):
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a pid namespace")
        probe = subprocess.run([unshare, "-pf", "--mount-proc", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot create a pid namespace here")
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        # In a fresh pid namespace the interpreter is pid 1.
        link = map_path(1)
        os_helper.unlink(link)
        os.symlink(victim, link)
        self.addCleanup(os_helper.unlink, link)
        proc = subprocess.run(
            [unshare, "-pf", "--mount-proc", sys.executable, "-X", "perf",
             "-c", "print('output intact'); print(sum(range(10)))"],
            capture_output=True, text=True, env=env_with())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "output intact\n45\n")
        self.assertIn("RuntimeWarning", proc.stderr)
        self.assertIn("/tmp/perf-1.map", proc.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertTrue(os.path.islink(link))

    def test_foreign_file_is_refused(self):
        # A regular file with a second link (a planted hard link) is not
        # truncated or written.
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a pid namespace")
        if subprocess.run([unshare, "-pf", "--mount-proc", "true"],
                          capture_output=True).returncode != 0:
            self.skipTest("cannot create a pid namespace here")
        victim = os.path.join("/tmp", f"test_perf_victim_{os.getpid()}")
        with open(victim, "w") as f:
            f.write("precious\n")
        self.addCleanup(os_helper.unlink, victim)
        link = map_path(1)
        os_helper.unlink(link)
        os.link(victim, link)
        self.addCleanup(os_helper.unlink, link)
        proc = subprocess.run(
            [unshare, "-pf", "--mount-proc", sys.executable, "-X", "perf",
             "-c", "print('ok')"],
            capture_output=True, text=True, env=env_with())
        self.assertEqual(proc.stdout, "ok\n")
        self.assertIn("RuntimeWarning", proc.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")


class TestSysApi(unittest.TestCase):

    def check(self, code, *args, env=None):
        proc = run_python(*args, "-c", textwrap.dedent(code), env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = re.search(r"PID (\d+)", proc.stdout)
        if pid:
            self.addCleanup(os_helper.unlink, map_path(pid.group(1)))
        return proc

    def test_functions_exist(self):
        for name in ("activate_stack_trampoline",
                     "deactivate_stack_trampoline",
                     "is_stack_trampoline_active"):
            self.assertTrue(callable(getattr(sys, name)))

    def test_bad_arguments(self):
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
        self.assertFalse(sys.is_stack_trampoline_active())

    @unittest.skipIf(HAVE_TRAMPOLINE, "build supports trampolines")
    def test_unsupported_build(self):
        with self.assertRaises(ValueError):
            sys.activate_stack_trampoline("perf")
        self.assertIsNone(sys.deactivate_stack_trampoline())
        self.assertFalse(sys.is_stack_trampoline_active())

    @unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
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

    @unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
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

    @unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
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

    @unittest.skipUnless(HAVE_TRAMPOLINE, "perf trampoline not supported")
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


class TestBuild(unittest.TestCase):

    @unittest.skipUnless(sys.platform == "linux"
                         and os.uname().machine == "x86_64",
                         "the trampoline is built on Linux x86_64")
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
