"""What -X perf_lines costs: instructions and memory.

    python bench/lines.py --python build/python [--only fib objects ...]

Per call: every workload of bench/workloads/ that makes Python calls runs
under callgrind at two sizes, off, with -X perf and with -X perf_lines;
from the differences of the two sizes (start-up cancels out) and the
number of Python frame entries between them (bench/count_calls.py), the
instructions per call that -X perf adds to off and -X perf_lines to -X
perf.  hotloop makes three calls whatever its size: its figure is per
loop iteration.  fresh makes a new function per call: its figure is per
new function, with everything that one costs (its trampoline, its name
and rows in the trampoline file).

Per function: the bytes of trampoline files that a run of fresh with
20,000 functions leaves in /tmp, per function, with -X perf and with -X
perf_lines (the files' sizes; their unwritten parts are holes that take
no disk); and the slot each function of the standard library would take
with lines (a slot holds the template, 56 bytes, and 2 bytes per code
unit; slots are powers of two from 64 bytes), from the code objects of
the functions of a few large modules.

Every file the runs leave in /tmp is removed, by pid.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as bench  # noqa: E402  (bench/run.py: callgrind, counts, files)

WORKLOADS = [
    ("fib", (21, 25), "recursive fib(n)"),
    ("objects", (10, 60), "methods, property, generator, sorted, __getitem__"),
    ("coroutines", (10, 40), "asyncio coroutines"),
    ("deep", (10, 120), "deep recursion"),
    ("hotloop", (100_000, 400_000), "per loop iteration"),
    ("fresh", (250, 1500), "per new function"),
]
CONFIGS = {"off": [], "perf": ["-X", "perf"], "lines": ["-X", "perf_lines"]}

# The sizes of the code objects of these modules' functions stand for the
# standard library's.
STDLIB_PROBE = r"""
import gc, importlib, json, types
for m in ("json asyncio email.parser http.client unittest argparse logging "
          "decimal xml.dom.minidom pickle typing dataclasses inspect").split():
    importlib.import_module(m)
seen, units = set(), []
def walk(c):
    if id(c) in seen:
        return
    seen.add(id(c))
    units.append(len(c._co_code_adaptive) // 2)
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            walk(k)
for o in gc.get_objects():
    if isinstance(o, types.FunctionType):
        walk(o.__code__)
print(json.dumps(units))
"""


def per_call(python, only):
    print("instructions (callgrind), from the difference of two sizes:")
    print(f"  {'workload':11} {'per':>9} {'off':>9} {'perf-off':>9} "
          f"{'lines-perf':>11} {'lines/off':>10} {'perf/off':>9}")
    for name, sizes, what in WORKLOADS:
        if only and name not in only:
            continue
        script = os.path.join(bench.WORKLOADS, name + ".py")
        bench.run([python, script, str(sizes[0])])
        d = {}
        for config, args in CONFIGS.items():
            small, large = (bench.instructions(python, args, script, str(n))
                            for n in sizes)
            d[config] = large - small
        (c1, n1), (c2, n2) = (bench.counts(python, script, str(n))
                              for n in sizes)
        if name == "hotloop":
            per = sizes[1] - sizes[0]
        elif name == "fresh":
            per = n2 - n1
        else:
            per = c2 - c1
        print(f"  {name:11} {per:9d} {d['off'] / per:9.1f} "
              f"{(d['perf'] - d['off']) / per:+9.1f} "
              f"{(d['lines'] - d['perf']) / per:+11.1f} "
              f"{d['lines'] / d['off']:10.4f} {d['perf'] / d['off']:9.4f}"
              f"   ({what})", flush=True)


def file_bytes(python, args, n):
    """Bytes (apparent, and allocated on disk) of the trampoline files a
    run of fresh with `n` functions leaves."""
    script = os.path.join(bench.WORKLOADS, "fresh.py")
    code = (f"import os, runpy, sys; sys.argv = ['fresh', '{n}']; "
            f"runpy.run_path({script!r}); print(os.getpid())")
    proc = subprocess.run([python, *args, "-c", code], capture_output=True,
                          text=True, env=bench.clean_env(), check=True)
    pid = int(proc.stdout.split()[-1])
    paths = glob.glob(f"/tmp/py-perf-{pid}-*.so")
    size = sum(os.stat(p).st_size for p in paths)
    disk = sum(os.stat(p).st_blocks * 512 for p in paths)
    for p in paths:
        os.unlink(p)
    bench.forget(pid)
    return size, disk


def per_function(python):
    n = 20_000
    print(f"\ntrampoline files per function (fresh, {n:,} functions, "
          "each a two-line function of 6 code units):")
    for config in ("perf", "lines"):
        size, disk = file_bytes(python, CONFIGS[config], n)
        print(f"  {config:6} {size / n:8.1f} bytes of file, "
              f"{disk / n:8.1f} on disk")
    out, _ = bench.run([python, "-c", STDLIB_PROBE])
    units = json.loads(out)
    template = 56
    sizes = []
    for u in units:
        need, size = template + 2 * (u + 1), 64
        while size < need:
            size *= 2
        sizes.append(size)
    print(f"\nline trampoline slots of {len(units):,} standard library "
          f"functions (template {template} bytes + 2 per code unit, "
          "powers of two from 64):")
    print(f"  code units: mean {statistics.mean(units):.0f}, median "
          f"{statistics.median(units):.0f}; slot bytes: mean "
          f"{statistics.mean(sizes):.0f}, median "
          f"{statistics.median(sizes):.0f} (16 without lines)")
    for size in sorted(set(sizes)):
        share = sizes.count(size) / len(sizes)
        print(f"  {size:6d} bytes: {share:6.1%}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", required=True)
    p.add_argument("--only", nargs="*")
    opts = p.parse_args()
    per_call(opts.python, opts.only)
    if not opts.only:
        per_function(opts.python)


if __name__ == "__main__":
    main()
