"""What a code object's death costs once the process has made many arenas.

    python3 bench/code_deaths.py build/python [--made 10000,200000]
                                              [--kept 2000]

A script makes --kept functions that stay alive, then MADE more that each
die soon after their one call (at most 100 alive: a service that compiles
templates or namedtuples as it runs), then drops the kept ones, which were
made before all those arenas.  callgrind counts the instructions of the
co_extra free function that forgets a trampoline's code object
(_PyPerfArena_ForgetCode) under -X perf_jit (the smaller arenas: the most
of them).  For each MADE: the arenas made, the instructions per death of
the churn (the run without kept functions), and per death of a kept one
(the difference between the runs with and without them, divided by
--kept).

Counts repeat from run to run.  Every file the runs make in /tmp is
removed, by pid.
"""

import argparse
import glob
import os
import re
import subprocess
import tempfile

SCRIPT = r"""
import os, sys
print("PID", os.getpid(), flush=True)
made, kept_n = int(sys.argv[1]), int(sys.argv[2])
def template():
    return 1
def new_function(i):
    code = template.__code__.replace(co_name="f%d" % i)
    return type(template)(code, {})
kept = [new_function(i) for i in range(kept_n)]
for f in kept:
    f()
alive = []
for i in range(made):
    f = new_function(kept_n + i)
    f()
    alive.append(f)
    if len(alive) > 100:
        del alive[:50]
del alive
# (neighbouring anonymous arenas may share one mapping)
arenas = sum(1 for line in open("/proc/self/maps") if " r-xp " in line
             and ("py-perf-" in line or len(line.split()) == 5))
kept.clear()
print("ARENAS", arenas, flush=True)
"""


def env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTHON")}


def remove_files(pid):
    for pattern in (f"/tmp/py-perf-{pid}-*.so", f"/tmp/jit-{pid}.dump",
                    f"/tmp/perf-{pid}.map"):
        for path in glob.glob(pattern):
            os.unlink(path)


def measure(python, made, kept):
    """(instructions in the free function, arenas)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no",
             "--toggle-collect=_PyPerfArena_ForgetCode",
             f"--callgrind-out-file={out}", python, "-X", "perf_jit",
             "-c", SCRIPT, str(made), str(kept)],
            capture_output=True, text=True, env=env())
        m = re.search(r"^PID (\d+)", proc.stdout, re.M)
        if m is not None:
            remove_files(int(m.group(1)))
        if m is None or proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        arenas = int(re.search(r"^ARENAS (\d+)", proc.stdout,
                               re.M).group(1))
        with open(out) as f:
            total = int(re.search(r"^summary: (\d+)", f.read(),
                                  re.M).group(1))
        return total, arenas


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("python")
    p.add_argument("--made", default="10000,200000",
                   help="comma-separated counts of short-lived functions")
    p.add_argument("--kept", type=int, default=2000)
    args = p.parse_args()
    print(f"{'made':>8} {'arenas':>7} {'Ir/churn death':>15} "
          f"{'Ir/old death':>13}")
    for made in map(int, args.made.split(",")):
        churn, arenas = measure(args.python, made, 0)
        both, _ = measure(args.python, made, args.kept)
        print(f"{made:>8} {arenas:>7} {churn / made:>15.1f} "
              f"{(both - churn) / args.kept:>13.1f}")


if __name__ == "__main__":
    main()
