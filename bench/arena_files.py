"""What the trampoline files (/tmp/py-perf-PID-N.so) cost and save.

    python bench/arena_files.py --nofp build-nofp/python --fp build/python
                                [--functions 5000 50000]

For each count of fresh functions (each made and called once, then one
of them called in a loop long enough to be sampled), on the interpreter
built without frame pointers, two ways to get DWARF-unwound profiles:

  ours:     perf record --call-graph dwarf, python -X perf, perf report
  jitdump:  perf record -k 1 --call-graph dwarf, python -X perf_jit,
            perf inject --jit, perf report of the injected file

and for each: the files and bytes left in /tmp, the bytes in a private
build-id directory (what ~/.debug would grow by because of the Python
functions: the files perf caches for them), and the wall-clock
time of record, inject and report (a second opinion: shared cores).

Then the instruction counts (callgrind, PYTHONHASHSEED=0) on the
frame-pointer interpreter: extra instructions per new function under
-X perf with trampoline files, and with anonymous arenas (the same run in
a mount namespace whose /tmp is mounted noexec, where the files cannot be
mapped), from the difference of two sizes; and the share of samples in
foo() of examples/demo.py whose DWARF-unwound stack shows
py::baz <- py::bar <- py::foo under -X perf alone (no inject).

Every file the runs make in /tmp is removed, by pid.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

FRESH = """\
import os, sys
print("PID", os.getpid(), flush=True)
n = int(sys.argv[1])
ns = {}
exec("\\n".join(f"def f{i}(): return {i}" for i in range(n)), ns)
total = sum(ns[f"f{i}"]() for i in range(n))
def spin(k):
    x = 0
    for i in range(k):
        x += i
    return x
spin(3_000_000)
"""


def env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    e["PYTHONHASHSEED"] = "0"
    return e


def files_of(pid):
    return (glob.glob(f"/tmp/py-perf-{pid}-*.so"),
            glob.glob(f"/tmp/jitted-{pid}-*.so"),
            [p for p in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump")
             if os.path.exists(p)])


def size(paths):
    return sum(os.path.getsize(p) for p in paths)


def tree_size(path, only=("py-perf-", "jitted-")):
    """Bytes of the files under `path` that come from Python functions:
    the cache also holds the interpreter, libc and the kernel's symbols,
    the same for both ways."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            p = os.path.join(root, name)
            if not os.path.islink(p) and any(o in p for o in only):
                total += os.path.getsize(p)
    return total


def forget(pid):
    for group in files_of(pid):
        for path in group:
            os.unlink(path)


def timed(cmd, **kw):
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(),
                          **kw)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return proc, time.monotonic() - start


def profile(python, n, jit, work):
    script = os.path.join(work, "fresh.py")
    with open(script, "w") as f:
        f.write(FRESH)
    bid = os.path.join(work, "buildid-" + ("jit" if jit else "ours"))
    data = os.path.join(work, "perf.data")
    perf = ["perf", "--buildid-dir", bid]
    record = perf + ["record", "-q", "-F", "999", "--call-graph", "dwarf",
                     "-o", data]
    if jit:
        record += ["-k", "1"]
    option = "perf_jit" if jit else "perf"
    proc, t_record = timed(record + ["--", python, "-X", option, script,
                                     str(n)])
    pid = int(re.search(r"PID (\d+)", proc.stdout).group(1))
    t_inject = 0.0
    report_input = data
    try:
        if jit:
            injected = os.path.join(work, "perf.jit.data")
            _, t_inject = timed(perf + ["inject", "--jit", "-i", data, "-o",
                                        injected])
            report_input = injected
        _, t_report = timed(perf + ["report", "-i", report_input, "--stdio",
                                    "--no-children", "-g", "none"])
        arenas, jitted, others = files_of(pid)
        row = {
            "files": len(arenas) + len(jitted) + len(others),
            "bytes": size(arenas) + size(jitted) + size(others),
            "arenas": len(arenas), "jitted": len(jitted),
            "buildid": tree_size(bid),
            "record": t_record, "inject": t_inject, "report": t_report,
        }
    finally:
        forget(pid)
        shutil.rmtree(bid, ignore_errors=True)
        for p in glob.glob(os.path.join(work, "perf*.data*")):
            os.unlink(p)
    return row


def callgrind(python, args, script, n, noexec, work):
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--vgdb=no",
               f"--callgrind-out-file={out}", python, *args, script, str(n)]
        if noexec:
            # (the files it makes go with the namespace's /tmp)
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   'mount -t tmpfs -o noexec none /tmp && exec "$@"', "sh",
                   *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env())
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
        m = re.search(r"PID (\d+)", proc.stdout)
        if m and not noexec:
            forget(int(m.group(1)))
        m = re.search(r"Collected : (\d+)", proc.stderr)
        return int(m.group(1))


NEW_FUNCTIONS = """\
import os, sys
print("PID", os.getpid(), flush=True)
n = int(sys.argv[1])
ns = {}
exec("\\n".join(f"def f{i}(): return {i}" for i in range(n)), ns)
for i in range(n):
    ns[f"f{i}"]()
"""


def per_new_function(python, work):
    script = os.path.join(work, "new_functions.py")
    with open(script, "w") as f:
        f.write(NEW_FUNCTIONS)
    small, large = 2000, 12000
    rows = {}
    for label, args, noexec in (("off", [], False),
                                ("files", ["-X", "perf"], False),
                                ("anonymous", ["-X", "perf"], True)):
        a = callgrind(python, args, script, small, noexec, work)
        b = callgrind(python, args, script, large, noexec, work)
        rows[label] = (b - a) / (large - small)
    return rows


def dwarf_chain(python, work):
    demo = os.path.join(HERE, "..", "examples", "demo.py")
    demo = os.path.abspath(demo)
    data = os.path.join(work, "chain.data")
    proc = subprocess.run(
        ["perf", "record", "-q", "-F", "999", "--call-graph", "dwarf", "-o",
         data, "--", "sh", "-c", 'echo $$ > "$0"; exec "$@"',
         os.path.join(work, "pid"), python, "-X", "perf", demo],
        capture_output=True, text=True, env=env())
    pid = int(open(os.path.join(work, "pid")).read())
    try:
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        text = subprocess.run(["perf", "script", "-i", data],
                              capture_output=True, text=True).stdout
    finally:
        forget(pid)
        os.unlink(data)
    chain = [f"py::{n}:{demo}" for n in ("foo", "bar", "baz")]
    in_foo = good = 0
    for block in text.split("\n\n"):
        syms = [line.split(None, 1)[1].rsplit(" (", 1)[0].split("+0x")[0]
                for line in block.splitlines()[1:]
                if len(line.split(None, 1)) == 2]
        if chain[0] not in syms:
            continue
        in_foo += 1
        pos = [syms.index(c) if c in syms else -1 for c in chain]
        good += -1 not in pos and pos == sorted(pos)
    return good, in_foo


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nofp", required=True)
    parser.add_argument("--fp", required=True)
    parser.add_argument("--functions", type=int, nargs="+",
                        default=[5000, 50000])
    args = parser.parse_args()
    # Not under /tmp: the anonymous-arena runs mount a /tmp of their own.
    with tempfile.TemporaryDirectory(prefix="bench_arena_",
                                     dir=os.getcwd()) as work:
        print("DWARF-unwound profiles on", args.nofp, flush=True)
        print("| functions | way | files in /tmp | MB in /tmp | MB in "
              "build-id dir | record s | inject s | report s |")
        print("|---|---|---|---|---|---|---|---|")
        for n in args.functions:
            for jit in (False, True):
                r = profile(args.nofp, n, jit, work)
                way = ("jitdump + inject" if jit else "-X perf, no inject")
                detail = (f" ({r['jitted']} jitted, {r['arenas']} arena)"
                          if jit else f" ({r['arenas']} arena)")
                print(f"| {n:,} | {way} | {r['files']:,}{detail} | "
                      f"{r['bytes'] / 1e6:.2f} | {r['buildid'] / 1e6:.2f} | "
                      f"{r['record']:.1f} | {r['inject']:.1f} | "
                      f"{r['report']:.1f} |", flush=True)
        good, total = dwarf_chain(args.nofp, work)
        print(f"\nexamples/demo.py, --call-graph dwarf, -X perf alone: "
              f"{good} of {total} samples in foo show "
              f"py::baz <- py::bar <- py::foo "
              f"({100 * good / max(total, 1):.1f}%)", flush=True)
        rows = per_new_function(args.fp, work)
        print(f"\ninstructions per new function on {args.fp} (callgrind, "
              f"12,000 - 2,000 functions): off {rows['off']:.0f}; "
              f"-X perf with trampoline files {rows['files']:.0f} "
              f"(+{rows['files'] - rows['off']:.0f}); with anonymous arenas "
              f"(/tmp noexec) {rows['anonymous']:.0f} "
              f"(+{rows['anonymous'] - rows['off']:.0f}); the files cost "
              f"{rows['files'] - rows['anonymous']:+.0f} per new function",
              flush=True)


if __name__ == "__main__":
    main()
