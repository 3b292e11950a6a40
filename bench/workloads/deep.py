"""Deep recursion: 900 frames deep, repeatedly (one native evaluator frame
per Python frame while the trampoline is on)."""
import sys


def down(n):
    return 0 if n == 0 else 1 + down(n - 1)


for _ in range(40):
    down(900)
