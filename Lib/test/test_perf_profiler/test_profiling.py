"""Sampling with the real `perf record` / `perf script` through the
trampolines of -X perf, PYTHONPERFSUPPORT and the sys API."""

import re
import shutil
import signal
import subprocess
import sys
import textwrap
import unittest

from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, NESTED, NESTED_NAMES, NO_TRAMPOLINE,
    env_with, is_function, map_path, read_map_file, requires_perf)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    EVALUATOR, KILL_ITSELF, PerfTestCase, TRAMPOLINE_CALLERS,
    assert_python_stacks, evaluator_transfers, parse_disassembly, setUpModule,
    tearDownModule)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@requires_perf
@unittest.skipUnless(HAVE_FRAME_POINTERS,
                     "perf record -g cannot unwind a build without frame "
                     "pointers (see TestPerfJit in test_jitdump)")
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
            # (the user-space leaf: a trampoline sampled there, before its
            # frame record is built, hides its caller as any function in
            # its first instruction does; kernel frames come first when
            # the sample was taken in the kernel, in a page fault on the
            # trampoline's first instruction, say)
            leaf = next((i for i, (_, dso) in enumerate(sample)
                         if not dso.startswith("[kernel")), 0)
            for i, (sym, _) in enumerate(sample):
                if sym == "[unknown]":
                    # The walk went astray before it reached a trampoline
                    # (a leaf in a library built without frame pointers,
                    # such as libasan's unwinder): what follows is not a
                    # chain of frame records, ours or anyone's.
                    break
                if i <= leaf or not sym.startswith("py::"):
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
                ["gdb", "-batch", "-nx",
                 "-ex", f"info address {EVALUATOR}",
                 "-ex", f"disassemble {func}",
                 sys.executable], capture_output=True, text=True,
                timeout=120)
            if "No symbol" in proc.stdout + proc.stderr:
                self.skipTest("interpreter has no symbols")
            m = re.search(r"is a function at address 0x([0-9a-f]+)",
                          proc.stdout)
            self.assertIsNotNone(m, proc.stdout + proc.stderr)
            code = parse_disassembly(proc.stdout)
            self.assertTrue(code, proc.stdout + proc.stderr)
            calls, jumps = evaluator_transfers(code, int(m.group(1), 16))
            listing = "\n".join(insn for _, insn in code)
            self.assertEqual(jumps, [],
                             f"{func} tail-calls a trampoline:\n{listing}")
            self.assertGreaterEqual(len(calls), 1,
                                    f"{func} calls no trampoline:\n"
                                    + listing)


if __name__ == "__main__":
    unittest.main()
