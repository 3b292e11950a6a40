"""Count what a workload does that -X perf pays for.

    python count_calls.py [--stores] WORKLOAD [ARG...]

Runs the workload (as __main__, with ARG... as its arguments) under a
profile function and prints two numbers: Python frame entries (calls,
generator and coroutine resumptions: each runs the frame through its
trampoline once) and distinct code objects run (each gets a trampoline
when first run).  It imports only threading (and what threading
imports) before the workload: workloads that count on what is imported
(imports.py) import it first too.  bench/run.py runs it with two sizes of a workload, on
the interpreter without -X perf, and divides the extra instructions of
-X perf by the differences.

--stores: under a trace function that sees every bytecode instruction
instead, the frame entries, the instructions run per entry, and per entry
those that store a line under -X perf_lines (the opcodes of the table
perf_lines_store in Python/perf_lines_eval.h, read from there), in all
and by opcode.  Each costs about 3 instructions with lines
(Doc/cpython-perf/design-lines.md, section 6).
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


def run(code, hook, set_hook, set_threads_hook):
    """Run the workload as __main__ with `hook` set by set_hook (this
    thread) and set_threads_hook (threads it starts)."""
    set_threads_hook(hook)
    set_hook(hook)
    try:
        exec(code, {"__name__": "__main__", "__file__": path})
    finally:
        set_hook(None)
        set_threads_hook(None)


def line_stores():
    """The base opcodes whose instructions store a line (the table's
    entries, specialized forms included, mapped to their base opcode)."""
    import dis
    import opcode
    import os
    import re
    base = {name: name for name in dis.opmap}
    for name, forms in opcode._specializations.items():
        base.update((form, name) for form in forms)
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          os.pardir, "Python", "perf_lines_eval.h")
    with open(header) as f:
        table = re.search(r"perf_lines_store\[256\] = \{(.*?)\};", f.read(),
                          re.S).group(1)
    return {dis.opmap[base[name]]
            for name in re.findall(r"\[(\w+)\] =", table) if name in base}


def count_stores(code):
    import collections
    import dis
    stores = line_stores()
    ran = collections.Counter()

    def trace(frame, event, arg):
        if event == "call":
            next(entries)
            frame.f_trace_opcodes = True
        elif event == "opcode":
            op = frame.f_code.co_code[frame.f_lasti]
            ran[dis.opname[op] if op in stores else None] += 1
        return trace

    run(code, trace, sys.settrace, threading.settrace)
    n = next(entries)
    stored = sum(v for k, v in ran.items() if k is not None)
    print(f"{n} frame entries; per entry: {sum(ran.values()) / n:.2f} "
          f"instructions, {stored / n:.2f} that store a line")
    for name, count in ran.most_common():
        if name is not None:
            print(f"  {name:30} {count / n:.2f}")


stores = sys.argv[1:2] == ["--stores"]
if stores:
    del sys.argv[1]
path = sys.argv[1]
sys.argv = sys.argv[1:]
with open(path) as f:
    code = compile(f.read(), path, "exec")
if stores:
    count_stores(code)
    sys.exit()
run(code, profile, sys.setprofile, threading.setprofile)
print(next(entries), len(codes))
