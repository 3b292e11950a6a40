"""Small objects: methods, a property, a generator, sorted(key=lambda),
and a __getitem__ that 3.11 inlines (BINARY_SUBSCR_GETITEM).
Argument: rounds (default 60)."""
import sys


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    @property
    def norm1(self):
        return abs(self.x) + abs(self.y)

    def shifted(self, dx):
        return Point(self.x + dx, self.y)


class Row:
    def __init__(self, values):
        self.values = values

    def __getitem__(self, i):
        return self.values[i]


def points(n):
    for i in range(n):
        yield Point(i, -i)


ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60


def main():
    total = 0
    for _ in range(ROUNDS):
        pts = [p.shifted(1) for p in points(300)]
        pts = sorted(pts, key=lambda p: p.norm1)
        row = Row(pts)
        total += sum(row[i].x for i in range(len(pts)))
    return total


main()
