"""Four threads running a recursive fib at once (GIL switching).
Argument: n of each thread's fib(n) (default 20)."""
import sys
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
threads = [threading.Thread(target=fib, args=(N,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
