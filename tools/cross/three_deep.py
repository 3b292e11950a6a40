"""Run by tools/check-cross.sh in the emulated interpreter, with -X perf or
-X perf_jit: three Python functions deep, the helper records the native
stack (tools/cross/stackwalk.c).

    python -X perf three_deep.py HELPER_DIR OUT_DIR
"""
import os
import sys

print("PID", os.getpid(), flush=True)
sys.path.insert(0, sys.argv[1])
import _stackwalk

OUT = sys.argv[2] + "/stack.txt"


def f1():
    return f2()


def f2():
    return f3()


def f3():
    return _stackwalk.capture(OUT)


f1()
print("active", sys.is_stack_trampoline_active())
