"""Deep recursion under the backends: every path of the evaluator that
hands a frame to the trampoline, 200,000 deep, with the same results as
without, and perf still names the outer frames."""

import textwrap
import unittest

from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, NO_TRAMPOLINE, is_function,
    requires_perf, run_and_forget)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    EVALUATOR, PerfTestCase, TRAMPOLINE_CALLERS, setUpModule, tearDownModule)


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
        bad = []
        for sample in deep:
            syms = [sym for sym, _ in sample]
            top = syms.index(name)
            # (A sample taken while a leaf function has no frame record,
            # on its first or last instruction, loses the leaf's caller;
            # so does one in a leaf that entered the kernel, whose frames
            # are then over it: a libc system call wrapper, such as the
            # munmap() that the evaluator itself calls with LTO as it
            # frees the stack chunks of the recursion.)
            user = [sym for sym, dso in sample[:top]
                    if not dso.startswith("[kernel")]
            if is_function(syms[top + 1], *TRAMPOLINE_CALLERS) and (
                    len(user) == 1 or is_function(syms[top - 1], EVALUATOR)):
                good += 1
            else:
                bad.append(syms[:top + 2])
        self.assertGreaterEqual(good, 0.9 * len(deep),
                                f"only {good} of {len(deep)} samples show "
                                f"the evaluator over {name}; others: "
                                f"{bad[:5]}")


if __name__ == "__main__":
    unittest.main()
