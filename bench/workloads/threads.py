"""Four threads running a recursive fib at once (GIL switching)."""
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


threads = [threading.Thread(target=fib, args=(18,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
