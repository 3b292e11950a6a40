"""python -m perf_trampoline collapse: (being written).

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py.
"""

import sys


def add_parser(sub):
    """Add the 'collapse' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser("collapse", help="(being written)")
    p.set_defaults(run=run)
    return p


def run(args):
    print("python -m perf_trampoline collapse: not written yet", file=sys.stderr)
    return 1
