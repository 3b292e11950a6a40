"""Run by tools/check-cross.sh in the emulated interpreter, with -X perf or
-X perf_jit: three Python functions deep, the helper records the native
stack (tools/cross/stackwalk.c).  The functions run twice: the first
calls give them their trampolines (through the PEP 523 hook), the second
is what is recorded, with each trampoline called by the evaluator itself,
as every later call is.

    python -X perf three_deep.py HELPER_DIR OUT_DIR
"""
import os
import sys

print("PID", os.getpid(), flush=True)
sys.path.insert(0, sys.argv[1])
import _stackwalk

OUT = sys.argv[2] + "/stack.txt"


def f3(record):
    return _stackwalk.capture(OUT) if record else None


def f1(record):
    return f2(record)


def f2(record):
    return f3(record)


f1(False)
f1(True)
print("active", sys.is_stack_trampoline_active())
