"""One hot loop inside three nested calls: the trampoline is entered three
times, the loop runs a million iterations."""


def inner(n):
    total = 0
    for i in range(n):
        total += i & 7
    return total


def middle(n):
    return inner(n)


def outer(n):
    return middle(n)


outer(300_000)
