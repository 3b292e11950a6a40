"""The checks behind the stack assertions: the reader of the evaluator's
disassembly (on made-up listings) and the names of native function parts
and clones."""

import unittest

from test.support.perf_helper import (
    NESTED_NAMES, function_of, is_function, parse_perf_script)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    EVALUATOR, TRAMPOLINE_CALLERS, assert_python_stacks, evaluator_transfers,
    parse_disassembly, setUpModule, tearDownModule)


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

    def test_immediate_load_without_pie(self):
        # A build without PIE (Debian's python3.11) moves the evaluator's
        # address into %ecx as an immediate, which gdb does not annotate:
        # the load is known by the address.
        code = parse_disassembly(self.disassembly(
            "mov    $0x1000,%ecx", "xor    %edx,%edx", "call   *%r9",
            "mov    $0x1000,%ecx", "jmp    *%rax",
            "mov    $0x1040,%ecx", "jmp    *%r8"))
        calls, jumps = evaluator_transfers(code, 0x1000)
        self.assertEqual(([i for _, i in calls], [i for _, i in jumps]),
                         (["call   *%r9"], ["jmp    *%rax"]))
        # without the address, or with another one, nothing is a load
        for evaluator in (None, 0x2000):
            self.assertEqual(evaluator_transfers(code, evaluator), ([], []))

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


if __name__ == "__main__":
    unittest.main()
