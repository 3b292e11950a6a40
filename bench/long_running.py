"""What a long-running service keeps: a churn of new functions, at most
100 alive at once, to 1, 3 and 10 million.

    python3 bench/long_running.py build/python [--counts 1,3,10]
                                               [--strace 200000]

For the feature off, -X perf and -X perf_jit, one process per mode makes
distinct functions (code.replace() of a template, each called once and
dropped after 100 more: what templates compiled per request, namedtuple
or eval() do), and at each count (in millions) prints the growth since
the first 100,000 of its resident memory (VmRSS), of its anonymous memory
(RssAnon) and of its memory mappings (/proc/self/maps lines); all its
files in /tmp (bytes allocated, and how many); and the CPU time (user +
system) per function made since the first 100,000.  Then, for each mode,
the system calls per new function: `strace -f -c` of a churn of --strace
functions, less the same run with none.

Counts repeat from run to run; times are a second opinion (shared cores).
Every file the runs make in /tmp is removed, by pid.
"""

import argparse
import os
import subprocess
import tempfile

from new_functions import MODES, env, forget, print_syscalls_per_function

SCRIPT = r"""
import glob, os, sys, types
print("PID", os.getpid(), flush=True)
counts = [int(float(c) * 1_000_000) for c in sys.argv[1].split(",")]
if counts == [0]:
    counts = []
def status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                fields[key] = int(value.split()[0]) * 1024
    with open("/proc/self/maps") as f:
        fields["maps"] = sum(1 for _ in f)
    pid = os.getpid()
    paths = (glob.glob(f"/tmp/py-perf-{pid}-*.so")
             + [p for p in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump")
                if os.path.exists(p)])
    fields["tmp"] = sum(os.stat(p).st_blocks * 512 for p in paths)
    fields["files"] = len(paths)
    t = os.times()
    fields["cpu"] = t.user + t.system
    return fields
def template():
    return 1
code = template.__code__
alive = []
base = status()
i = 0
for count in counts:
    while i < count:
        f = types.FunctionType(
            code.replace(co_name=f"c{i}", co_firstlineno=i + 1),
            {})
        f()
        alive.append(f)
        if len(alive) > 100:
            del alive[0]
        i += 1
        if i == 100_000:
            base = status()
    now = status()
    print("AT", count, *(f"{k}={now[k] - base[k]}" for k in now),
          f"tmp_total={now['tmp']}", f"files_total={now['files']}",
          flush=True)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("python")
    ap.add_argument("--counts", default="1,3,10",
                    help="millions of functions, at each of which to "
                         "measure (default 1,3,10)")
    ap.add_argument("--strace", type=int, default=200_000,
                    help="functions made under strace (default 200,000)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "long_running.py")
        with open(script, "w") as f:
            f.write(SCRIPT)

        print("Growth since the first 100,000 functions (at most 100 "
              "alive), CPU time per function made since then; /tmp and "
              "files: all")
        print(f"  {'mode':9s} {'made':>6s} {'VmRSS':>10s} {'RssAnon':>10s} "
              f"{'mappings':>8s} {'/tmp bytes':>12s} {'files':>6s} "
              f"{'CPU/fn':>8s}")
        for label, options in MODES:
            proc = subprocess.Popen([args.python, *options, script,
                                     args.counts],
                                    stdout=subprocess.PIPE, text=True,
                                    env=env())
            out = []
            for line in proc.stdout:
                out.append(line)
                if not line.startswith("AT "):
                    continue
                words = line.split()
                made = int(words[1])
                v = dict(w.split("=") for w in words[2:])
                cpu_per_fn = (float(v["cpu"]) / (made - 100_000)
                              if made > 100_000 else 0.0)
                print(f"  {label:9s} {made / 1e6:5.1f}M "
                      f"{int(v['VmRSS']) / 2**20:8.1f}Mi "
                      f"{int(v['RssAnon']) / 2**20:8.1f}Mi "
                      f"{int(v['maps']):8d} "
                      f"{int(v['tmp_total']) / 2**20:10.1f}Mi "
                      f"{int(v['files_total']):6d} "
                      f"{cpu_per_fn * 1e6:6.2f}us", flush=True)
            proc.wait()
            forget("".join(out))
            if proc.returncode != 0:
                raise SystemExit(f"{label}: exit status {proc.returncode}")

        n = args.strace
        print(f"\nSystem calls per new function (strace -c, a churn of "
              f"{n:,} less none)")
        for label, options in MODES:
            print_syscalls_per_function(label, args.python, options,
                                        script, "0", str(n / 1e6), n, work)


if __name__ == "__main__":
    main()
