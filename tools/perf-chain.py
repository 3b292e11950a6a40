"""Do the samples in foo of a profile of examples/demo.py show its stack?

    perf-chain.py PERF_SCRIPT_OUTPUT SCRIPT

PERF_SCRIPT_OUTPUT is the text `perf script` printed for a `perf record -g`
of `python -X perf SCRIPT` (SCRIPT as the interpreter was given it, which
is what the py:: names carry).  Among the samples whose stack holds
py::foo:SCRIPT, at least 90% must also hold py::bar and py::baz, callers
below callees (py::baz <- py::bar <- py::foo), and there must be at least
10 of them.  Prints one line saying how many did; exits with 1 when the
profile fails that, 2 on a usage error.

Shared by tools/check-install.sh and tools/abi/dlopen_host.sh; runs under
any Python 3 (stdlib only).
"""

import sys

CHAIN = ("foo", "bar", "baz")
MIN_SAMPLES = 10
MIN_SHARE = 0.9


def frames(block):
    """The symbol of each frame line of one `perf script` sample."""
    # "\t    7f12a4c3b123 py::foo:/path/demo.py+0x13 (/tmp/perf-42.map)"
    for line in block.splitlines()[1:]:
        fields = line.split(None, 1)
        if len(fields) == 2:
            yield fields[1].rsplit(" (", 1)[0].split("+0x")[0]


def main(argv):
    if len(argv) != 3:
        print("usage:", __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], errors="replace") as f:
        text = f.read()
    chain = [f"py::{name}:{argv[2]}" for name in CHAIN]
    in_foo = good = 0
    for block in text.split("\n\n"):
        syms = list(frames(block))
        if chain[0] not in syms:
            continue
        in_foo += 1
        pos = [syms.index(n) if n in syms else -1 for n in chain]
        good += -1 not in pos and pos == sorted(pos)
    print(f"{good} of {in_foo} samples in foo show "
          "py::baz <- py::bar <- py::foo")
    return 0 if in_foo >= MIN_SAMPLES and good >= MIN_SHARE * in_foo else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
