# The example of the perf howto: three nested calls, the innermost busy.
# `make demo` profiles it with `perf record -g` under `-X perf`.

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
    print(baz(10_000_000))
