"""Count what a workload does that -X perf pays for.

    python count_calls.py WORKLOAD [ARG...]

Runs the workload (as __main__, with ARG... as its arguments) under a
profile function and prints two numbers: Python frame entries (calls,
generator and coroutine resumptions: each runs the frame through its
trampoline once) and distinct code objects run (each gets a trampoline
when first run).  bench/run.py runs it with two sizes of a workload, on
the interpreter without -X perf, and divides the extra instructions of
-X perf by the differences.
"""
import itertools
import runpy
import sys
import threading

entries = itertools.count()
codes = {}                  # by identity: equal code objects count apart


def profile(frame, event, arg):
    if event == "call":
        next(entries)       # one C call: safe with several threads
        codes[id(frame.f_code)] = frame.f_code


path = sys.argv[1]
sys.argv = sys.argv[1:]
threading.setprofile(profile)
sys.setprofile(profile)
try:
    runpy.run_path(path, run_name="__main__")
finally:
    sys.setprofile(None)
    threading.setprofile(None)
print(next(entries), len(codes))
