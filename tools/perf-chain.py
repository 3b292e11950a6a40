"""Do the samples in foo of a profile of examples/demo.py show its stack?

    perf-chain.py PERF_SCRIPT_OUTPUT SCRIPT
    perf-chain.py --record [--buildid-dir DIR] [--keep DIR] PYTHON SCRIPT

PERF_SCRIPT_OUTPUT is the text `perf script` printed for a `perf record -g`
of `python -X perf SCRIPT` (SCRIPT as the interpreter was given it, which
is what the py:: names carry).  Among the samples whose stack holds
py::foo:SCRIPT, at least 90% must also hold py::bar and py::baz, callers
below callees (py::baz <- py::bar <- py::foo), and there must be at least
10 of them.  Prints one line saying how many did; exits with 1 when the
profile fails that, 2 on a usage error.

With --record, it makes that profile first: `perf record -q -F 999 -g` of
`PYTHON -X perf SCRIPT` (PYTHONPERFSUPPORT and PYTHON_PERF_JIT_SUPPORT
removed from its environment, PYTHONHASHSEED=0; SCRIPT made absolute),
then `perf script`, in a
private directory (kept in DIR with --keep; perf's build-id cache in DIR
with --buildid-dir).  The perf map and the trampoline files of that
interpreter, and only those, are removed from /tmp afterwards.  A failed run prints its stderr and exits
with 1.

Shared by tools/check-install.sh, check-pgo.sh, check-clang.sh, deb.sh and
tools/abi/dlopen_host.sh; runs under any Python 3 (stdlib only).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

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


def judge(text, script):
    chain = [f"py::{name}:{script}" for name in CHAIN]
    in_foo = good = 0
    for block in text.split("\n\n"):
        syms = list(frames(block))
        if chain[0] not in syms:
            continue
        in_foo += 1
        pos = [syms.index(n) if n in syms else -1 for n in chain]
        good += -1 not in pos and pos == sorted(pos)
    print(f"{good} of {in_foo} samples in foo show "
          "py::baz <- py::bar <- py::foo", flush=True)
    return 0 if in_foo >= MIN_SAMPLES and good >= MIN_SHARE * in_foo else 1


def record(python, script, buildid_dir, workdir):
    """perf record + perf script of PYTHON -X perf SCRIPT: the text."""
    perf = ["perf"]
    if buildid_dir:
        perf += ["--buildid-dir", buildid_dir]
    data = os.path.join(workdir, "perf.data")
    pidfile = os.path.join(workdir, "pid")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT")}
    env["PYTHONHASHSEED"] = "0"
    # The interpreter writes its pid first, so that its map can be removed.
    cmd = perf + ["record", "-q", "-F", "999", "-g", "-o", data, "--",
                  "sh", "-c", 'echo $$ > "$1"; shift; exec "$@"', "sh",
                  pidfile, python, "-X", "perf", script]
    with open(os.path.join(workdir, "out"), "wb") as out, \
            open(os.path.join(workdir, "err"), "wb+") as err:
        status = subprocess.call(cmd, env=env, stdout=out, stderr=err)
        text = None
        if status == 0:
            proc = subprocess.run(perf + ["script", "-i", data],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
            status = proc.returncode
            text = proc.stdout.decode("utf-8", "replace")
            with open(os.path.join(workdir, "script"), "w") as f:
                f.write(text)
        try:
            with open(pidfile) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            pid = None
        if pid is not None:
            for path in ["/tmp/perf-%d.map" % pid,
                         *glob.glob("/tmp/py-perf-%d-*.so" % pid)]:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        if status != 0:
            err.seek(0)
            sys.stderr.write(err.read().decode("utf-8", "replace"))
            print("error: perf record or perf script of %s -X perf %s "
                  "failed (status %d)" % (python, script, status),
                  file=sys.stderr)
            return None
    return text


def main(argv):
    args = argv[1:]
    if args[:1] != ["--record"]:
        if len(args) != 2:
            print("usage:", __doc__.strip().splitlines()[2].strip(),
                  file=sys.stderr)
            return 2
        with open(args[0], errors="replace") as f:
            return judge(f.read(), args[1])
    args = args[1:]
    opts = {"--buildid-dir": None, "--keep": None}
    while args and args[0] in opts:
        if len(args) < 2:
            break
        opts[args[0]] = args[1]
        args = args[2:]
    if len(args) != 2:
        print("usage:", __doc__.strip().splitlines()[3].strip(),
              file=sys.stderr)
        return 2
    # Given absolute, as the names show it.
    python, script = args[0], os.path.abspath(args[1])
    workdir = opts["--keep"] or tempfile.mkdtemp(prefix="perf-chain-")
    os.makedirs(workdir, exist_ok=True)
    try:
        text = record(python, script, opts["--buildid-dir"], workdir)
        return 1 if text is None else judge(text, script)
    finally:
        if not opts["--keep"]:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
