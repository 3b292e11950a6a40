# A stand-in for a process that is already running (a server, a long job):
# the three nested calls of demo.py, over and over, for as many seconds as
# the first argument says (default 30).  The README's "A running process"
# commands start it in the background and profile it by its pid.
import sys
import time


def foo(n):
    total = 0
    for i in range(n):
        total += i
    return total


def bar(n):
    return foo(n)


def baz(n):
    return bar(n)


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        baz(100_000)
