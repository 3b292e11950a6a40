"""Deep recursion: 900 frames deep, repeatedly (one native evaluator frame
per Python frame while the trampoline is on).  Argument: repetitions
(default 80)."""
import sys


def down(n):
    return 0 if n == 0 else 1 + down(n - 1)


for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 80):
    down(900)
