"""fork() + os._exit() in the child + waitpid() in the parent, with
50,000 live functions, each called once before the first fork.

Prints the wall-clock median of the whole round trip in milliseconds,
the median CPU time of the child (user + system, from wait4(): what the
child itself spends, a steadier figure on a busy machine) and the size
of the files the last child left (/tmp/perf-CHILD.map and
/tmp/jit-CHILD.dump; 0 when there is none).  Every child's files are
removed.  Argument: how many forks to time (default 200)."""
import glob
import os
import statistics
import sys
import time

NFUNCS = 50_000


def remove_files(pid):
    size = 0
    for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump",
                 *glob.glob(f"/tmp/py-perf-{pid}-*.so")):
        try:
            size += os.stat(path).st_size
            os.unlink(path)
        except FileNotFoundError:
            pass
    return size


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    ns = {}
    exec("\n".join(f"def f{i}():\n    return {i}" for i in range(NFUNCS)),
         ns)
    funcs = [ns[f"f{i}"] for i in range(NFUNCS)]
    for f in funcs:
        f()
    times = []
    child_cpu = []
    size = 0
    for _ in range(rounds):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        _, _, usage = os.wait4(pid, 0)
        times.append(time.perf_counter() - start)
        child_cpu.append(usage.ru_utime + usage.ru_stime)
        size = remove_files(pid)
    print("fork_ms", f"{statistics.median(times) * 1000:.3f}")
    print("child_cpu_ms", f"{statistics.median(child_cpu) * 1000:.3f}")
    print("child_file_bytes", size)


main()
