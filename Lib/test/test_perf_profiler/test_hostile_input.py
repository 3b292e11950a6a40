"""Bad input: environment values, -X options, sys API arguments, the sys
functions from threads, signal handlers, atexit and finalization, names
that are hard to write (the rows of the table "Bad input and hostile
environments" of the project's Doc/cpython-perf/using.md up to file names;
the rest is in test_hostile_system)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from test.support.perf_helper import (
    HAVE_TRAMPOLINE, NO_TRAMPOLINE, env_with, forget_files, script_pid)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    HostileInputCase, setUpModule, tearDownModule)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestHostileInput(HostileInputCase):
    """Bad input, one test per row of the table "Bad input and hostile
    environments" (Doc/cpython-perf/using.md) up to the file names: a clear
    error or warning, the program and its output untouched, files that
    stay readable."""

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

    def test_tmp_limit_values(self):
        # PYTHON_PERF_TMP_LIMIT and -X perf_tmp_limit: bytes, with K, M or
        # G, or "unlimited"; anything else is ignored with a warning that
        # names it, and neither turns a backend on.
        for value, warns in (("0", False), ("64M", False), ("1g", False),
                             ("unlimited", False), ("12345", False),
                             ("", False), ("abc", True), ("5Q", True),
                             ("-1", True), ("1.5M", True), ("9" * 30, True),
                             ("16E", True), ("64MB", True),
                             ("0" * 40 + "1K", False)):
            for how in ("env", "option"):
                with self.subTest(value=value, how=how):
                    if how == "env":
                        proc, pid = self.run_code(
                            self.ACTIVE,
                            env=env_with(PYTHON_PERF_TMP_LIMIT=value))
                        name = "PYTHON_PERF_TMP_LIMIT"
                    else:
                        proc, pid = self.run_code(
                            self.ACTIVE, "-X", f"perf_tmp_limit={value}")
                        name = "-X perf_tmp_limit"
                    self.assertEqual(proc.stdout.split()[-1], "False")
                    # (an empty -X value is not a size; an empty variable
                    # is as if unset)
                    if warns or (how == "option" and value == ""):
                        self.assertIn(f"RuntimeWarning: {name}='{value}' is "
                                      f"not a size", proc.stderr)
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


if __name__ == "__main__":
    unittest.main()
