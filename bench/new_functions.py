"""What a new Python function costs the process in the kernel and on disk.

    python3 bench/new_functions.py build/python [--runs 5]

A script defines N functions (one exec()) and calls each once.  For the
feature off, -X perf and -X perf_jit:

  - system calls per new function: `strace -f -c`, N = 20,000, less the
    same count for N = 0 (start-up);
  - user and system time for N = 50,000, over --runs runs interleaved
    (off, perf, perf_jit, off, ...): min and median of user + system, and
    the median's excess over off;
  - bytes on disk per new function (the arena files' allocated blocks,
    the map or the dump), and the arena files' size.

Counts repeat from run to run; times are a second opinion (shared cores).
Every file the runs make in /tmp is removed, by pid.
"""

import argparse
import glob
import os
import re
import statistics
import subprocess
import tempfile

# (one exec() defines N functions, each called once)
from arena_files import NEW_FUNCTIONS as SCRIPT

MODES = (("off", []), ("perf", ["-X", "perf"]),
         ("perf_jit", ["-X", "perf_jit"]),
         ("perf_lines", ["-X", "perf_lines"]),
         ("perf_jit_lines", ["-X", "perf_jit", "-X", "perf_lines"]))


def env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PYTHON")}


def files_of(pid):
    return (glob.glob(f"/tmp/py-perf-{pid}-*.so")
            + [p for p in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump")
               if os.path.exists(p)])


def forget(stdout):
    for pid in re.findall(r"PID (\d+)", stdout):
        for path in files_of(pid):
            os.unlink(path)


def syscalls(python, options, script, n, work):
    out = os.path.join(work, "strace.out")
    proc = subprocess.run(["strace", "-f", "-c", "-o", out, python,
                           *options, script, str(n)],
                          capture_output=True, text=True, env=env())
    forget(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    calls = {}
    with open(out) as f:
        for line in f:
            fields = line.split()
            if (len(fields) >= 5 and fields[0][0].isdigit()
                    and fields[-1] != "total"):
                calls[fields[-1]] = int(fields[3])
    return calls


def print_syscalls_per_function(label, python, options, script, arg0, arg,
                                n, work):
    """One line: the system calls of `script` run with `arg` less those of
    the run with `arg0`, per one of the `n` functions `arg` makes more,
    and the four calls that grew most."""
    base = syscalls(python, options, script, arg0, work)
    full = syscalls(python, options, script, arg, work)
    extra = {k: full.get(k, 0) - base.get(k, 0) for k in full}
    total = sum(extra.values()) / n
    top = sorted(((v, k) for k, v in extra.items() if v > 0),
                 reverse=True)[:4]
    print(f"  {label:9s} {total:6.3f}   "
          + ", ".join(f"{k} {v}" for v, k in top))


def times(python, options, script, n):
    proc = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %e", python,
                           *options, script, str(n)],
                          capture_output=True, text=True, env=env())
    forget(proc.stdout)
    user, system, wall = map(float, proc.stderr.split("TIME ")[1].split())
    return user, system, wall


def disk(python, options, script, n):
    """(bytes allocated, bytes of file size) of the files the run left."""
    proc = subprocess.run([python, *options, script, str(n)],
                          capture_output=True, text=True, env=env())
    pid = re.search(r"PID (\d+)", proc.stdout).group(1)
    paths = files_of(pid)
    allocated = sum(os.stat(p).st_blocks * 512 for p in paths)
    size = sum(os.path.getsize(p) for p in paths)
    forget(proc.stdout)
    return allocated, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("python")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "new_functions.py")
        with open(script, "w") as f:
            f.write(SCRIPT)

        print("System calls per new function (strace -c, N = 20,000 less "
              "N = 0)")
        for label, options in MODES:
            print_syscalls_per_function(label, args.python, options, script,
                                        "0", "20000", 20_000, work)

        print(f"\nUser + system time, N = 50,000, {args.runs} runs each")
        runs = {label: [] for label, _ in MODES}
        for _ in range(args.runs):
            for label, options in MODES:
                runs[label].append(times(args.python, options, script,
                                         50_000))
        base = statistics.median(u + s for u, s, _ in runs["off"])
        for label, _ in MODES:
            cpu = [u + s for u, s, _ in runs[label]]
            system = [s for _, s, _ in runs[label]]
            med = statistics.median(cpu)
            print(f"  {label:9s} min {min(cpu):.3f} s  median {med:.3f} s "
                  f"({(med / base - 1) * 100:+.1f}%)  system median "
                  f"{statistics.median(system):.3f} s")

        print("\nBytes on disk per new function (N = 50,000)")
        for label, options in MODES[1:]:
            allocated, size = disk(args.python, options, script, 50_000)
            print(f"  {label:9s} {allocated / 50_000:6.1f} allocated, "
                  f"{size / 50_000:6.1f} of file size")


if __name__ == "__main__":
    main()
