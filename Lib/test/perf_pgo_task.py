"""Profile-guided optimization: the training run of -X perf's call path.

The PGO build (`./configure --enable-optimizations`) runs CPython's own
profile task, which never turns the perf trampoline on.  GCC then treats
every block that task did not run as never executed: it moves the blocks
of _PyEval_EvalFrameDefault() that run Python calls through their
trampolines to the function's cold section and optimizes them for size,
and -X perf costs 123 extra instructions per call on fib, where a build
without profile feedback costs 77.  Attributes cannot help (profile
counts override them), so the build runs this module too, under -X perf,
after the profile task:

    ./python -X perf -m test.perf_pgo_task

It makes Python-to-Python calls of each kind the evaluator runs through
a trampoline (CALL_PY_EXACT_ARGS, CALL_PY_WITH_DEFAULTS, the
generic CALL with keywords, BINARY_SUBSCR_GETITEM: 2.7 million calls in
all, under a second), enough for GCC to count those blocks as hot, while
the profile of the rest (the calls without -X perf included) stays that
of the task: fib costs no more off than on stock 3.11.2's PGO build.  It
removes the perf map and the trampolines' files it wrote.
"""

import os
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def with_defaults(n, step=1):
    return n if n < 2 else with_defaults(n - step) + with_defaults(n - 2)


def with_keywords(n, *, step):
    if n < 2:
        return n
    return with_keywords(n - step, step=step) + with_keywords(n - 2, step=1)


class Items:
    def __getitem__(self, i):
        return i + 1


def subscripts(n):
    items = Items()
    total = 0
    for i in range(n):
        total += items[i]
    return total


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y


def mixed(rounds):
    """The other instructions, for the second evaluator (-X perf_lines),
    which runs nothing else during the training: attributes, globals,
    containers, strings, comprehensions, generators, exceptions, with,
    closures and coroutines."""
    import asyncio
    import contextlib
    total = 0
    for r in range(rounds):
        points = [Point(i, -i) for i in range(200)]
        total += sum(p.x - p.y for p in points if p.x % 3)
        table = {str(i): i for i in range(200)}
        for key, value in sorted(table.items()):
            if key.startswith("1") and value not in (3, 5):
                total += len(f"{key}:{value:04d}")
        words = " ".join(table).split()
        total += len({w[:1] for w in words})
        try:
            table["missing"]
        except KeyError as e:
            total += len(str(e))
        with contextlib.suppress(ZeroDivisionError):
            total += 1 // (r & 0)
        scale = r + 1
        total += sum(map(lambda v: v * scale, range(100)))

    async def leaf(i):
        await asyncio.sleep(0)
        return i

    async def gather(n):
        return sum(await asyncio.gather(*(leaf(i) for i in range(n))))

    total += asyncio.run(gather(2000))
    return total


def main():
    fib(28)
    with_defaults(26)
    with_keywords(25, step=1)
    subscripts(1_000_000)
    if "perf_lines" in sys._xoptions:
        mixed(300)
    if sys.is_stack_trampoline_active():
        sys.deactivate_stack_trampoline()
        try:
            os.unlink(f"/tmp/perf-{os.getpid()}.map")
        except OSError:
            pass
        remove_trampoline_files()


def remove_trampoline_files():
    """Remove the files of trampolines (/tmp/py-perf-PID-N.so) that this
    process maps, and only those: a file of an earlier process with the
    same pid may have the name N = 0."""
    prefix = f"/tmp/py-perf-{os.getpid()}-"
    mapped = {}
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith(prefix):
                    mapped[fields[5].rstrip("\n")] = int(fields[4])
    except OSError:
        return
    for path, inode in mapped.items():
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
