"""Run the commands of the README's quick start as written.

    check-readme.py [--readme README.md] [--out DIR] [--timeout S]
                    [--list] PYTHON [PYTHON...]

The README promises that every command of its "Quick start" section runs
as written; `make test` keeps that promise checked (tools/run-tests.sh
runs this with the interpreters it tests), so that the README cannot go
stale again.

Design
------
The blocks.  Every fenced code block between the README's "## Quick
start" heading and the next "## " heading is run, and each must be a
```sh block: a block of another kind there would be a command that looks
checked and is not, and fails the check, as does a section without
blocks.  A block preceded by the line `<!-- check-readme: nofp -->` is
meant for an interpreter built without frame pointers: it runs with the
first PYTHON whose sysconfig PY_HAVE_FRAME_POINTERS is not "1", or with
the first PYTHON when none is.  Every other block runs with the first
PYTHON.

How a block runs.  In a fresh directory under DIR that holds the example
programs the README tells the reader to copy (examples/demo.py as app.py,
examples/loop.py as loop.py), by `bash -e -o pipefail` (a command that
fails ends the block, and the block fails), with:
  - PATH: first a directory whose `python` is a symbolic link to the
    interpreter under test, then the caller's PATH (the real `perf`);
  - HOME: the block's directory, so that perf's build-id cache
    (~/.debug), which copies every trampoline file a recording saw,
    goes away with it;
  - no PYTHON* variable of the caller; PERF_FLAMEGRAPH_TEMPLATE set to
    the template `make check-viewer` installs, when record would find
    none of its own (_perf_collapse.find_template()) and that one exists;
  - a session of its own, killed as a whole when the block ends or its
    timeout passes, so that a program it started in the background (the
    "running process" blocks start one) never outlives it.
Output goes to DIR/block-N.log; a failure prints its tail.  A block
passes when it exits 0 and, if it records (`perf record` or
`perf_trampoline record`), when its output or a file it wrote (not the
perf.data files) names a Python function: a README whose commands run
but show only the evaluator fails.

/tmp.  The blocks leave perf maps and trampoline files in /tmp, and one
of them runs `python -m perf_trampoline clean`, which removes the files
of every ended process of the user: in the shared /tmp, the files that
other tests (running at the same time) still need.  So all the blocks of
a run share a private /tmp, DIR/tmp bound over /tmp in a mount namespace
of each block (as tools/suite-modes.py does), and DIR/tmp is removed at
the end.  Where no mount namespace can be made (not root; or the
interpreter or DIR under /tmp, which the private /tmp would hide), a
block that runs `clean` is skipped, and the blocks' perf files stay in
/tmp: which of the files that appear there during a block are the
block's cannot be told (another test running meanwhile writes the same
names, and may still need them once its process has ended), so none is
removed; the run ends with how many appeared and the command that
removes them.  (Files are told by name as `clean` tells them:
_perf_clean.pid_of().)

Skips, each with its reason, decided by probes that never run the code
under test: every block when perf cannot record here (`perf record --
true` fails); a block that asks for a flame graph (--flamegraph) when
there is no d3-flame-graph template, neither where record looks
($PERF_FLAMEGRAPH_TEMPLATE, perf's /usr/share/d3-flame-graph/) nor the
one `make check-viewer` installs.

It runs under the interpreter under test (make test), or any Python 3:
_perf_clean and _perf_collapse are that interpreter's, else this
checkout's Lib/.

Ends with one line "check-readme: N passed, N failed, N skipped"; the
exit status is non-zero when a block failed (or none could be found).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Last on the path: the running interpreter's own modules come first.
sys.path.append(os.path.join(ROOT, "Lib"))
import _perf_clean      # noqa: E402
import _perf_collapse   # noqa: E402
from private_tmp import possible as private_tmp_possible  # noqa: E402

SECTION = "quick start"
NOFP_MARK = re.compile(r"^<!--\s*check-readme:\s*nofp\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
# What the README tells the reader to copy, by the name it uses.
EXAMPLES = {"app.py": "examples/demo.py", "loop.py": "examples/loop.py"}
# Where `make check-viewer` installs a d3-flame-graph template (record
# itself looks where _perf_collapse.find_template() says).
VIEWER_TEMPLATE = os.path.join(
    ROOT, "build", "viewer", "node_modules", "d3-flame-graph", "dist",
    "templates", "d3-flamegraph-base.html")
TAIL = 40


class Block:
    def __init__(self, number, line, text, nofp):
        self.number = number
        self.line = line
        self.text = text
        self.nofp = nofp


def parse_args():
    p = argparse.ArgumentParser(
        description="Run the README's quick-start blocks as written.")
    p.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    p.add_argument("--out", default=os.path.join(ROOT, "build",
                                                 "check-readme"),
                   help="where the blocks run and their logs stay "
                        "(default build/check-readme)")
    p.add_argument("--timeout", type=float, default=180.0,
                   help="seconds per block (default 180)")
    p.add_argument("--list", action="store_true",
                   help="print the blocks and run nothing")
    p.add_argument("pythons", nargs="+", metavar="PYTHON",
                   help="the interpreter under test first; one without "
                        "frame pointers for the blocks marked nofp")
    return p.parse_args()


def read_blocks(path):
    """The quick start's blocks; exits with a message when the section is
    missing, has no block, or has a block that is not `sh`."""
    blocks = []
    in_section = False
    found = False
    fence = None
    nofp = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        if fence is not None:
            if line.startswith("```"):
                if in_section:
                    lang, start, body = fence
                    if lang != "sh":
                        sys.exit(f"{path}:{start}: a block of the quick "
                                 f"start that is not ```sh (```{lang}): "
                                 f"every block there is run")
                    blocks.append(Block(len(blocks) + 1, start,
                                        "\n".join(body) + "\n", nofp))
                    nofp = False
                fence = None
            else:
                fence[2].append(line)
            continue
        m = FENCE.match(line)
        if m:
            fence = (m.group(1), number, [])
        elif line.startswith("## "):
            in_section = line[3:].strip().lower() == SECTION
            found = found or in_section
        elif in_section and NOFP_MARK.match(line):
            nofp = True
        elif in_section and line.strip() and nofp:
            sys.exit(f"{path}:{number}: the nofp mark must stand right "
                     f"before a block")
    if not found:
        sys.exit(f"{path}: no '## Quick start' section")
    if not blocks:
        sys.exit(f"{path}: the quick start has no ```sh block")
    return blocks


def config_var(python, name):
    r = subprocess.run(
        [python, "-I", "-c",
         f"import sysconfig; print(sysconfig.get_config_var({name!r}))"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip()


def nofp_python(pythons):
    for python in pythons:
        if config_var(python, "PY_HAVE_FRAME_POINTERS") != "1":
            return python
    return pythons[0]


def perf_cannot_record(out):
    """Why perf cannot record here, or None."""
    data = os.path.join(out, "probe.data")
    try:
        r = subprocess.run(["perf", "record", "-o", data, "--", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    except OSError as e:
        return f"perf cannot be run: {e}"
    except subprocess.TimeoutExpired:
        return "perf record -- true did not finish in 60 s"
    finally:
        for path in (data, data + ".old"):
            if os.path.exists(path):
                os.unlink(path)
    if r.returncode != 0:
        last = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
        return f"perf record -- true failed: {last}"
    return None


def viewer_template():
    """The template `make check-viewer` installed, when record finds none
    of its own (the blocks are then given it), else None."""
    if _perf_collapse.find_template() is None and \
            os.path.isfile(VIEWER_TEMPLATE):
        return VIEWER_TEMPLATE
    return None


def flamegraph_template():
    """The template record will use in a block, or None."""
    return _perf_collapse.find_template() or viewer_template()


def perf_files():
    """The names in /tmp that `clean` counts as perf files."""
    return {name for name in os.listdir("/tmp")
            if _perf_clean.pid_of(name) is not None}


def block_env(bindir, home):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON")}
    env["PATH"] = bindir + os.pathsep + env.get("PATH", os.defpath)
    env["HOME"] = home
    template = viewer_template()
    if template is not None:
        env[_perf_collapse.TEMPLATE_ENV] = template
    return env


def kill_session(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_block(block, readme, python, out, private_tmp, timeout):
    """(ok, seconds, log path, the names of perf files of ended processes
    that appeared in the shared /tmp during the block: empty with a
    private /tmp)."""
    work = tempfile.mkdtemp(prefix=f"block-{block.number}-", dir=out)
    bindir = os.path.join(work, ".bin")
    os.mkdir(bindir)
    os.symlink(python, os.path.join(bindir, "python"))
    for name, source in EXAMPLES.items():
        shutil.copy(os.path.join(ROOT, source), os.path.join(work, name))
    script = os.path.join(bindir, "block.sh")
    with open(script, "w") as f:
        f.write(block.text)
    cmd = ["bash", "-e", "-o", "pipefail", script]
    if private_tmp:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /tmp && exec "$@"',
               os.path.join(out, "tmp")] + cmd
    log_path = os.path.join(out, f"block-{block.number}.log")
    before = set() if private_tmp else perf_files()
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(f"# {readme} line {block.line}, python = {python}\n"
                  f"# in {work}\n{block.text}# output:\n")
        log.flush()
        proc = subprocess.Popen(cmd, cwd=work, env=block_env(bindir, work),
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            kill_session(proc)
            proc.wait()
        if rc is None:
            log.write(f"\ncheck-readme: timed out after {timeout:g} s\n")
        elif rc:
            log.write(f"\ncheck-readme: exit status {rc}\n")
    elapsed = time.monotonic() - start
    if rc == 0 and RECORDS.search(block.text) and \
            not names_python_function(log_path, work):
        rc = "no name"
        with open(log_path, "a") as log:
            log.write(f"\ncheck-readme: the block records, but neither its "
                      f"output nor a file it wrote names a Python function "
                      f"({PY_NAME.decode()}...)\n")
    left = set()
    if not private_tmp:
        # Left where they are: see "/tmp." in the docstring.
        left = {name for name in perf_files() - before
                if not _perf_clean.is_running(_perf_clean.pid_of(name))}
    shutil.rmtree(work, ignore_errors=True)
    return rc == 0, elapsed, log_path, left


# A block that records must show what the README promises: a Python
# function's name in what it printed (perf report) or in a file it wrote
# (the perf script text, the folded stacks, the flame graph).
RECORDS = re.compile(r"\b(perf|perf_trampoline) record\b")
PY_NAME = b"py::"


def names_python_function(log_path, work):
    paths = [log_path]
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if os.path.isfile(path) and not os.path.islink(path) and \
                not name.endswith((".data", ".old", ".py")):
            paths.append(path)
    for path in paths:
        with open(path, "rb") as f:
            if PY_NAME in f.read():
                return True
    return False


def tail(path, n=TAIL):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    return "\n".join("    " + line for line in lines[-n:])


def main():
    args = parse_args()
    blocks = read_blocks(args.readme)
    pythons = [os.path.abspath(p) for p in args.pythons]
    nofp = nofp_python(pythons)
    if args.list:
        for b in blocks:
            who = nofp if b.nofp else pythons[0]
            print(f"--- block {b.number} (README line {b.line}, {who})")
            print(b.text, end="")
        return 0
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    private_tmp = private_tmp_possible(pythons + [out])
    if private_tmp:
        os.mkdir(os.path.join(out, "tmp"))
        os.chmod(os.path.join(out, "tmp"), 0o1777)
    else:
        print("check-readme: no private /tmp here (a mount namespace); the "
              "blocks run in the shared /tmp")
    passed = failed = skipped = 0
    left = set()
    why_not = perf_cannot_record(out)
    template = flamegraph_template()
    for b in blocks:
        python = nofp if b.nofp else pythons[0]
        head = (f"--- block {b.number} ({os.path.basename(args.readme)} "
                f"line {b.line})")
        skip = why_not
        if skip is None and "--flamegraph" in b.text and template is None:
            skip = ("no d3-flame-graph template here ($%s, %s; make "
                    "check-viewer installs one)"
                    % (_perf_collapse.TEMPLATE_ENV,
                       _perf_collapse.DEFAULT_TEMPLATE))
        if skip is None and "perf_trampoline clean" in b.text and \
                not private_tmp:
            skip = "it would clean the shared /tmp"
        print(head, "with", python)
        print("".join("    $ " + line + "\n"
                      for line in b.text.splitlines()), end="")
        if skip:
            print(f"    skipped: {skip}")
            skipped += 1
            continue
        ok, seconds, log_path, block_left = run_block(
            b, os.path.basename(args.readme), python, out, private_tmp,
            args.timeout)
        left |= block_left
        if ok:
            print(f"    ok ({seconds:.1f} s)")
            passed += 1
        else:
            print(f"    FAILED ({seconds:.1f} s; {log_path}):")
            print(tail(log_path))
            failed += 1
        sys.stdout.flush()
    if private_tmp:
        shutil.rmtree(os.path.join(out, "tmp"), ignore_errors=True)
    elif left:
        print(f"check-readme: {len(left)} perf files of ended processes "
              f"appeared in /tmp during the blocks (some may be another "
              f"program's): they stay; `python -m perf_trampoline clean` "
              f"removes such files once no recording needs them")
    print(f"check-readme: {passed} passed, {failed} failed, "
          f"{skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
