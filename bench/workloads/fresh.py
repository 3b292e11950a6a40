"""exec() of fresh functions, each called once: per-code-object work
(trampoline creation, map or dump records) dominates.  Argument: how many
(default 4,000)."""
import sys


def main():
    ns = {}
    for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4000):
        exec(f"def f{i}(a, b):\n    return a * {i} + b\n", ns)
        ns[f"f{i}"](i, 1)


main()
