"""exec() of 2,000 fresh functions, each called once: per-code-object work
(trampoline creation, map or dump records) dominates."""


def main():
    ns = {}
    for i in range(2000):
        exec(f"def f{i}(a, b):\n    return a * {i} + b\n", ns)
        ns[f"f{i}"](i, 1)


main()
