"""Recursive fib: nothing but Python-to-Python calls (CALL_PY_EXACT_ARGS).
Argument: n (default 25: 242,785 calls)."""
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


fib(int(sys.argv[1]) if len(sys.argv) > 1 else 25)
