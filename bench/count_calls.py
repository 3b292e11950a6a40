"""Count what a workload does that -X perf pays for.

    python count_calls.py WORKLOAD [ARG...]

Runs the workload (as __main__, with ARG... as its arguments) under a
profile function and prints two numbers: Python frame entries (calls,
generator and coroutine resumptions: each runs the frame through its
trampoline once) and distinct code objects run (each gets a trampoline
when first run).  It imports only threading (and what threading
imports) before the workload: workloads that count on what is imported
(imports.py) import it first too.  bench/run.py runs it with two sizes of a workload, on
the interpreter without -X perf, and divides the extra instructions of
-X perf by the differences.
"""
import itertools
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
with open(path) as f:
    code = compile(f.read(), path, "exec")
threading.setprofile(profile)
sys.setprofile(profile)
try:
    exec(code, {"__name__": "__main__", "__file__": path})
finally:
    sys.setprofile(None)
    threading.setprofile(None)
print(next(entries), len(codes))
