"""Recursive fib: nothing but Python-to-Python calls (CALL_PY_EXACT_ARGS)."""


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


fib(22)
