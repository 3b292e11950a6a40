"""One hot loop inside three nested calls: the trampoline is entered three
times, the loop runs the argument's number of iterations (default
1,000,000)."""
import sys


def inner(n):
    total = 0
    for i in range(n):
        total += i & 7
    return total


def middle(n):
    return inner(n)


def outer(n):
    return middle(n)


outer(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
