"""sys.activate_stack_trampoline() and its companions: arguments,
precedence, other PEP 523 hooks and co_extra users, and unchanged
semantics."""

import sys
import textwrap
import time
import unittest

from test.support import import_helper
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, NO_TRAMPOLINE, env_with, run_and_forget, run_python)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    setUpModule, tearDownModule)


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
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
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
        ctypes = import_helper.import_module("ctypes")
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


if __name__ == "__main__":
    unittest.main()
