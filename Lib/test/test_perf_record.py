"""Tests of `python -m perf_trampoline record` (Lib/_perf_record.py).

record is run as a user runs it, as a separate process, with the real
perf: of a script (the seed example's chain, in the call-graph mode that
suits the interpreter: -g with frame pointers, DWARF without), of a
command that is no Python, of a running process started without -X perf
(turned on for the recording and off again after, whether Ctrl-C, the
duration or the process's exit ends it, and whatever signal reaches
record meanwhile), of a pre-fork server with --children (a worker it
forks during the recording is off again after too); the files written
(never through a symlink, 0600); the interpreter of another user's
process asked as that user; and each failure, which must be one line,
with a non-zero exit status and no traceback.  Each recording lasts a
second or two.
"""

import contextlib
import glob
import io
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from test.support import perf_helper as ph
from test.support.script_helper import make_script
from test.test_perf_live import (BLOCKED, HAVE_LINES, HAVE_LIVE, NO_LINES,
                                 NO_LIVE, NOBODY, NOBODY_UID, STOCK_311,
                                 TargetMixin, clean_env, nobody_problem)
from test.test_perf_profiler._common import assert_python_stacks
from test.test_perf_profiler.test_lines import parse_srclines, python_frames

import _perf_record
import _perf_remote
import _perf_live as pt
import perf_trampoline


# The seed example's calls (perf_helper.NESTED), kept busy for a second.
NESTED_SECOND = ph.NESTED + textwrap.dedent("""\
    import time
    end = time.monotonic() + 1
    while time.monotonic() < end:
        baz(100_000)
    """)

# A target of --pid: prints its pid and READY, then calls the seed
# example's baz() until its stdin closes.
NESTED_TARGET = ph.NESTED + textwrap.dedent("""\
    import select
    def main():
        print("READY", flush=True)
        while True:
            baz(20_000)
            if select.select([sys.stdin], [], [], 0)[0]:
                if not sys.stdin.readline():
                    break
    main()
    """)


# A pre-fork server: the master forks two workers, each calling
# worker_task() until killed, then waits in select() (idle) until its
# stdin closes, and says then whether its trampoline is on.
PREFORK_WORKERS = textwrap.dedent("""\
    import os, select, sys
    print("PID", os.getpid(), flush=True)
    """) + ph.WORKER + textwrap.dedent("""\
    def spawn():
        pid = os.fork()
        if pid == 0:
            try:
                worker()
            finally:
                os._exit(0)
        print("WORKER", pid, flush=True)
        return pid
    workers = [spawn(), spawn()]
    print("READY", flush=True)
    """)
PREFORK_END = textwrap.dedent("""\
    for pid in workers:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    print("ACTIVE", sys.is_stack_trampoline_active(), flush=True)
    """)
PREFORK = PREFORK_WORKERS + textwrap.dedent("""\
    select.select([sys.stdin], [], [])
    sys.stdin.read()
    """) + PREFORK_END

# A pre-fork server that replaces its first worker (kills it and forks
# another) on each line "recycle", as gunicorn replaces its workers, and
# runs Python code every 50 ms meanwhile (so it serves a request soon).
PREFORK_RECYCLING = PREFORK_WORKERS + textwrap.dedent("""\
    while True:
        if not select.select([sys.stdin], [], [], 0.05)[0]:
            continue
        line = sys.stdin.readline()
        if not line:
            break
        os.kill(workers[0], 9)
        os.waitpid(workers[0], 0)
        workers[0] = spawn()
    """) + PREFORK_END

# record, its acknowledgements awaited 60 s instead of 1 (an idle target
# keeps record in _activate() or _restore() until the test wakes it).
SLOW_ACK = textwrap.dedent("""\
    import sys
    import _perf_record
    import perf_trampoline
    _perf_record.REQUEST_TIMEOUT = 60
    sys.exit(perf_trampoline.main(sys.argv[1:]))
    """)

# A program named python3 that is no Python: run with options (asked as
# a Python), it appends its effective uid to $RECORD_TEST_TRACE; else it
# prints READY and waits until its stdin closes.
ASKED_AS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char c;
    if (argc > 1 && argv[1][0] == '-') {
        FILE *f = fopen(getenv("RECORD_TEST_TRACE"), "a");
        if (f != NULL) {
            fprintf(f, "%d\n", (int)geteuid());
            fclose(f);
        }
        return 1;
    }
    puts("READY");
    fflush(stdout);
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}
"""


def setUpModule():
    ph.perf_problem()


def tearDownModule():
    ph.teardown_module()


def record_command(*args, prefix=(), slow_ack=False):
    """The command line of `python -m perf_trampoline record ARGS` (with
    `slow_ack`, of record waiting 60 s for acknowledgements)."""
    program = ["-c", SLOW_ACK] if slow_ack else [perf_trampoline.__file__]
    return [*prefix, sys.executable, *program, "record", *map(str, args)]


def record_env(**extra):
    """The environment of record: PYTHON* cleared, and perf's build-id
    cache in the tests' own directory (a HOME whose .debug it is)."""
    return clean_env(HOME=ph.buildid_home(), **extra)


class Lines:
    """The lines of a pipe of a process as they come (read unbuffered,
    so that none is lost to a buffer)."""

    def __init__(self, pipe):
        self.fd = pipe.fileno()
        self.data = b""
        self.eof = False

    @property
    def text(self):
        return self.data.decode(errors="replace")

    def _read(self, timeout):
        if select.select([self.fd], [], [], timeout)[0]:
            chunk = os.read(self.fd, 65536)
            self.data += chunk
            self.eof = not chunk

    def until(self, text, timeout=120):
        """Read until a whole line has `text`; AssertionError at the end or
        after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            whole = self.text[:self.text.rfind("\n") + 1]
            if any(text in line for line in whole.splitlines()):
                return
            left = deadline - time.monotonic()
            if self.eof or left <= 0:
                raise AssertionError(f"no line with {text!r}: {self.text}")
            self._read(left)

    def rest(self, timeout=300):
        """Read to the end: all the text (AssertionError after `timeout`
        seconds)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no end: {self.text}")
            self._read(left)
        return self.text


def call_graph_of(data):
    """How `data` was recorded: "dwarf" when its samples carry user stacks
    (perf record --call-graph dwarf), "fp" when they carry only perf's
    call chains (-g), None without a call graph."""
    proc = subprocess.run(ph.perf_command("evlist", "-v", "-i", data),
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"perf evlist failed: {proc.stderr}")
    sample_type = re.search(r"sample_type: (\S+)", proc.stdout).group(1)
    if "STACK_USER" in sample_type:
        return "dwarf"
    return "fp" if "CALLCHAIN" in sample_type else None


def nested_line(text):
    """The number of the line of perf_helper.NESTED that reads `text`."""
    return ph.NESTED.splitlines().index(text) + 1


class RecordTestCase(unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.since = time.time() - 1
        self.tmp = tempfile.mkdtemp(prefix="test_perf_record_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.name = os.path.join(self.tmp, "out")

    def record(self, *args, env=None, prefix=(), timeout=300):
        return subprocess.run(record_command(*args, prefix=prefix),
                              capture_output=True, text=True,
                              env=env if env is not None else record_env(),
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def start_record(self, *args, slow_ack=False, env=None):
        """Start record ARGS; returns (its Popen, a Lines of its stderr)."""
        rec = subprocess.Popen(record_command(*args, slow_ack=slow_ack),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL,
                               env=env if env is not None else record_env())
        self.addCleanup(self._stop_record, rec)
        return rec, Lines(rec.stderr)

    def _stop_record(self, rec):
        if rec.poll() is None:
            rec.kill()
        rec.wait()
        rec.stdout.close()
        rec.stderr.close()

    def end_record(self, rec, err, timeout=120):
        """Wait for record's end: a CompletedProcess (text).  Killed by a
        signal, it fails the test (without waiting for its perf, which
        shares its pipes)."""
        try:
            rec.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"record does not end: {err.text}")
        if rec.returncode < 0:
            self.fail(f"record was killed by signal {-rec.returncode}: "
                      f"{err.text}")
        text = err.rest(timeout)
        out = Lines(rec.stdout).rest(timeout)
        return subprocess.CompletedProcess(rec.args, rec.returncode, out,
                                           text)

    def assert_recorded(self, proc, python_level=False):
        """record succeeded and says what it wrote: NAME.data and NAME.txt
        (with --python, NAME.folded too), each with a way to open it."""
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        for suffix, opener in ((".data", "perf report -i"),
                               (".txt", "speedscope"),
                               (".folded", "flamegraph.pl")):
            path = self.name + suffix
            if suffix == ".folded" and not python_level:
                self.assertFalse(os.path.exists(path))
                continue
            self.assertTrue(os.path.exists(path), path)
            self.assertRegex(proc.stdout,
                             rf"(?m)^wrote {re.escape(path)}\s+open: "
                             rf"{re.escape(opener)}")

    def report_in_empty_tmp(self, cache):
        """perf report of NAME.data by symbol, with the build-id cache
        `cache`, in a mount namespace whose /tmp is a new, empty tmpfs
        (the real one seen at /tmp/orig, where the test's files are): the
        CompletedProcess, which succeeded."""
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)

        def orig(path):
            path = os.path.abspath(path)
            if not path.startswith("/tmp/"):
                return path     # (TMPDIR elsewhere)
            return os.path.join("/tmp/orig", os.path.relpath(path, "/tmp"))
        report = subprocess.run(
            [unshare, "-m", "sh", "-c",
             'mount -t tmpfs none "$0" && mkdir "$0/orig" && '
             'mount --bind /tmp "$0/orig" && mount --move "$0" /tmp '
             '|| exit 99; exec "$@"', empty,
             "perf", "--buildid-dir", orig(cache), "report", "-i",
             orig(self.name + ".data"), "--stdio", "--children", "-g",
             "none", "--sort", "sym"],
            capture_output=True, text=True, timeout=300)
        if report.returncode == 99:
            self.skipTest("cannot mount a tmpfs here: " + report.stderr)
        self.assertEqual(report.returncode, 0, report.stderr[-2000:])
        return report

    def samples(self, *pids):
        """The samples of NAME.txt, frames that perf left unnamed named
        from the maps of `pids` (read now: see parse_perf_script)."""
        maps = {pid: ph.load_map_symbols(ph.map_path(pid)) for pid in pids
                if ph.written_since(ph.map_path(pid), self.since)}
        with open(self.name + ".txt") as f:
            return ph.parse_perf_script(f.read(), maps)

    def assert_nested_lines(self, pid, script):
        """NAME.data has the lines of the NESTED functions of `pid` (run
        from `script`, or "<string>"): foo() at its loop, bar() at its
        call of foo()."""
        proc = subprocess.run(
            ph.perf_command("script", "-i", self.name + ".data", "--tid",
                            str(pid), "-F", "ip,sym,srcline"),
            capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        frames = [python_frames(s, script)
                  for s in parse_srclines(proc.stdout)]
        foo = [f[0][1] for f in frames if f and f[0][0] == "foo"]
        bar = [line for f in frames
               for (callee, _), (caller, line) in zip(f, f[1:])
               if (caller, callee) == ("bar", "foo")]
        loop = {nested_line("    for i in range(n):"),
                nested_line("        x += i")}
        # (record --duration is wall time: a loaded machine gives the
        # target a part of it)
        self.assertGreater(len(foo), 20)
        self.assertGreater(len([l for l in foo if l in loop]) / len(foo),
                           0.8, foo)
        self.assertGreater(len(bar), 20)
        self.assertGreater(bar.count(nested_line("    return foo(n)"))
                           / len(bar), 0.95, bar)

    def assert_fails(self, proc, message):
        """record failed with `message` in one line, its last."""
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertTrue(lines, "no message")
        self.assertTrue(lines[-1].startswith("record: "), lines[-1])
        self.assertIn(message, lines[-1])
        # nothing was recorded
        self.assertFalse(os.path.exists(self.name + ".data"))


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@ph.requires_perf
class TestRecordCommand(RecordTestCase):

    def test_script(self):
        # The interpreter decides the mode: -g with frame pointers, dwarf
        # without; the seed example's chain is whole in either.
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--", sys.executable, script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        mode = "fp" if ph.HAVE_FRAME_POINTERS else "dwarf"
        self.assertEqual(call_graph_of(self.name + ".data"), mode)
        self.assertIn(f"{sys.executable} has "
                      f"{'' if mode == 'fp' else 'no '}frame pointers: "
                      f"call graph {mode}", proc.stderr)
        assert_python_stacks(self, self.samples(pid), script,
                             ph.NESTED_NAMES)

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines(self):
        # --lines: the command runs with PYTHON_PERF_LINES=1.
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("--lines", "-o", self.name, "--", sys.executable,
                           script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        self.assert_nested_lines(pid, script)

    def test_names_outlive_the_files(self):
        # The recording names the Python functions after the process's
        # files have left /tmp: perf's build-id cache (the tests' own
        # directory here) keeps the arena files, although no sample's own
        # address is in one.
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--", sys.executable, script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        files = ph.arena_paths(pid, self.since)
        self.assertTrue(files, "no arena file")
        if ph.written_since(ph.map_path(pid), self.since):
            files.append(ph.map_path(pid))
        for path in files:      # (the process has ended)
            os.unlink(path)
        report = subprocess.run(
            ph.perf_command("report", "-i", self.name + ".data", "--stdio",
                            "--children", "-g", "none", "--sort", "sym"),
            capture_output=True, text=True, timeout=300)
        self.assertEqual(report.returncode, 0, report.stderr[-2000:])
        for name in ph.NESTED_NAMES:
            self.assertIn(f"py::{name}:{script}", report.stdout,
                          report.stdout[:3000])

    def test_archive_reported_elsewhere(self):
        # `archive` packs the recording's files, the trampoline files too
        # (perf archive leaves them out: no sample's own address is in
        # one); unpacked in a fresh build-id cache, in a mount namespace
        # whose /tmp is empty, perf report names the Python functions.
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--", sys.executable, script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        arch = subprocess.run(
            [sys.executable, "-m", "perf_trampoline", "archive",
             "--buildid-dir", ph.buildid_dir(), self.name + ".data"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(arch.returncode, 0, arch.stderr)
        self.assertIn("wrote %s.data.tar.bz2" % self.name, arch.stdout)
        tarball = self.name + ".data.tar.bz2"
        self.assertEqual(stat.S_IMODE(os.stat(tarball).st_mode), 0o600)
        for path in ph.arena_paths(pid, self.since):
            os.unlink(path)     # (the process has ended)
        cache = os.path.join(self.tmp, "elsewhere", ".debug")
        os.makedirs(cache)
        subprocess.run(["tar", "xjf", tarball, "-C", cache], check=True)
        report = self.report_in_empty_tmp(cache)
        for name in ph.NESTED_NAMES:
            self.assertIn(f"py::{name}:{script}", report.stdout,
                          report.stdout[:3000])

    def test_command_not_python(self):
        # A shell that runs a Python: not asked, recorded with dwarf; the
        # Python it starts has PYTHONPERFSUPPORT=1 from record.
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--", "sh", "-c",
                           f'exec "{sys.executable}" "{script}"')
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        self.assertIn("is not a Python this command can ask: call graph "
                      "dwarf", proc.stderr)
        self.assertEqual(call_graph_of(self.name + ".data"), "dwarf")
        assert_python_stacks(self, self.samples(pid), script,
                             ph.NESTED_NAMES)

    def test_python_level(self):
        # --python: NAME.txt and NAME.folded are Python-level: the chain
        # baz -> bar -> foo, without the evaluator's frames between.
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--python", "--",
                           sys.executable, script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc, python_level=True)
        chain = [f"py::{name}:{script}" for name in reversed(ph.NESTED_NAMES)]
        with open(self.name + ".folded") as f:
            stacks = [line.rsplit(" ", 1) for line in f.read().splitlines()]
        in_foo = [(s.split(";"), int(n)) for s, n in stacks
                  if chain[-1] in s.split(";")]
        self.assertTrue(in_foo, stacks[:10])
        total = sum(n for _, n in in_foo)
        whole = sum(n for frames, n in in_foo
                    if frames[frames.index(chain[0]):
                              frames.index(chain[-1]) + 1] == chain)
        self.assertGreaterEqual(whole, 0.9 * total)
        for sample in self.samples(pid):
            names = [sym for sym, _ in sample]
            py = [i for i, sym in enumerate(names) if sym.startswith("py::")]
            if py:
                between = names[py[0]:py[-1]]
                self.assertFalse([n for n in between if ph.is_function(
                    n, "_PyEval_EvalFrameDefault")], names)

    def test_flamegraph(self):
        template = ph.flamegraph_template()
        if template is None:
            self.skipTest("no d3-flame-graph template (make check-viewer "
                          "installs one in build/viewer)")
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--flamegraph", "--template",
                           template, "--", sys.executable, script)
        pid = ph.script_pid(proc.stdout)
        ph.forget_files(self, pid)
        self.assert_recorded(proc)
        self.assertRegex(proc.stdout, rf"(?m)^wrote "
                         rf"{re.escape(self.name)}\.html\s+open: xdg-open")
        with open(self.name + ".html") as f:
            self.assertIn(f"py::foo:{script}", f.read())

    def test_command_fails(self):
        # The recording is written; the command's status is reported.
        proc = self.record("-o", self.name, "--", "sh", "-c", "exit 3")
        self.assert_recorded(proc)
        self.assertIn("record: the command ended with status 3",
                      proc.stderr)

    def test_output_name(self):
        # -o NAME.data is NAME; a recording without samples is written,
        # with a warning.  -F 1: at 999 Hz, `true` on a loaded machine was
        # sampled once in about ten runs; the cpu-clock event (what record
        # uses where hardware cycles cannot be counted, as here) takes its
        # first sample after a second of CPU time at 1 Hz.
        proc = self.record("-o", self.name + ".data", "-F", "1",
                           "--", "true")
        self.assert_recorded(proc)
        self.assertFalse(os.path.exists(self.name + ".data.data"))
        self.assertIn("0 samples", proc.stdout)
        self.assertIn("record: no samples were recorded: the command ended "
                      "before perf took one", proc.stderr)

    def test_output_not_followed(self):
        # Symlinks planted with the names of the outputs (a shared /tmp)
        # are replaced, never written through: not the victim of NAME.txt
        # and NAME.folded, not the missing file NAME.data leads to (an
        # existing NAME.data, whatever it is, becomes NAME.data.old).
        # Each file is 0600, as perf.data.
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        missing = os.path.join(self.tmp, "made-by-record")
        os.symlink(victim, self.name + ".txt")
        os.symlink(victim, self.name + ".folded")
        os.symlink(missing, self.name + ".data")
        script = make_script(self.tmp, "nested", NESTED_SECOND)
        proc = self.record("-o", self.name, "--python", "--",
                           sys.executable, script)
        ph.forget_files(self, ph.script_pid(proc.stdout))
        self.assert_recorded(proc, python_level=True)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertFalse(os.path.lexists(missing))
        self.assertEqual(os.readlink(self.name + ".data.old"), missing)
        for suffix in (".data", ".txt", ".folded"):
            st = os.lstat(self.name + suffix)
            self.assertTrue(stat.S_ISREG(st.st_mode), suffix)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, suffix)
        # nothing else is left in the directory
        self.assertEqual(sorted(os.listdir(self.tmp)),
                         sorted(["nested.py", "victim", "out.data",
                                 "out.data.old", "out.txt", "out.folded"]))

    def test_old_data(self):
        # An existing NAME.data, empty too, becomes NAME.data.old.
        open(self.name + ".data", "w").close()
        proc = self.record("-o", self.name, "--", "true")
        self.assert_recorded(proc)
        self.assertEqual(os.path.getsize(self.name + ".data.old"), 0)
        with open(self.name + ".data", "rb") as f:
            first = f.read()
        self.assertTrue(_perf_record.data_written(self.name + ".data"))
        proc = self.record("-o", self.name, "--", "true")
        self.assert_recorded(proc)
        with open(self.name + ".data.old", "rb") as f:
            self.assertEqual(f.read(), first)

    def test_output_directory(self):
        # -o DIR is refused: not DIR.data beside it, nor DIR/perf.data
        proc = self.record("-o", self.tmp, "--", "true")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stderr.splitlines()[-1],
                         f"record: -o {self.tmp}: give a file name, not a "
                         f"directory (-o {self.tmp}/perf writes "
                         f"{self.tmp}/perf.data, ...)")
        self.assertFalse(os.path.exists(self.tmp + ".data"))
        self.assertEqual(os.listdir(self.tmp), [])


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
@ph.requires_perf
class TestRecordPid(RecordTestCase, TargetMixin):

    def active(self, pid):
        """The trampoline of `pid`: 0 off, 1 perf, None when its block
        cannot be read (a child of fork() that has not run since shows
        its parent's)."""
        snap = pt.status(pid).snapshot
        return None if snap is None else snap.active

    def wait_active(self, pid, expected, timeout=10):
        """The trampoline of `pid` is `expected` (0 off, 1 perf) within
        `timeout` seconds (a busy process acknowledges a request within
        a few milliseconds; a loaded machine can take longer)."""
        deadline = time.monotonic() + timeout
        while (active := self.active(pid)) != expected:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(active, expected, f"process {pid}")

    def wait_request(self, pid, code, timeout=60):
        """Request `code` is pending in the block of `pid` (which is idle)
        within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (snap := pt.status(pid).snapshot).request != code:
            if time.monotonic() > deadline:
                self.fail(f"process {pid}: no request {code} pending, "
                          f"{snap.request} instead")
            time.sleep(0.01)

    def wait_recording(self, rec, timeout=60):
        """Wait until the perf that record `rec` runs records: it has
        written the header of its output (its events are open, its
        handlers in place), read its targets' mappings, turned its events
        on, and waits in poll() for samples.  (A target gone before the
        mappings are read fails perf.)"""
        staged = os.path.join(self.tmp, ".perf-record-*", "out.data")
        deadline = time.monotonic() + timeout
        while True:
            perf = pt.children_of(rec.pid)
            wchan = ""
            if perf and [p for p in glob.glob(staged)
                         if os.path.getsize(p) > 0]:
                try:
                    with open(f"/proc/{perf[0]}/wchan") as f:
                        wchan = f.read()
                except OSError:
                    pass
            if "poll" in wchan:
                return
            if time.monotonic() > deadline:
                self.fail(f"perf does not record: {perf} {wchan!r} "
                          f"{os.listdir(self.tmp)}")
            time.sleep(0.01)

    def perf_wrapper_env(self, on_record):
        """record's environment with a `perf` first on PATH that runs the
        shell commands `on_record` for `perf record`, then the real perf."""
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        wrapper = os.path.join(bindir, "perf")
        with open(wrapper, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!/bin/sh
                if [ "$1" = record ]; then
                    {on_record}
                fi
                exec {shutil.which("perf")} "$@"
                """))
        os.chmod(wrapper, 0o755)
        return record_env(PATH=bindir + os.pathsep + os.environ["PATH"])

    def test_pid_until_ctrl_c(self):
        # Started without -X perf: record turns the trampoline on, records
        # until Ctrl-C (SIGINT), and turns it off again.
        proc, pid = self.start(NESTED_TARGET)
        self.assertEqual(self.active(pid), 0)
        rec, err = self.start_record("-o", self.name, "--pid", pid)
        err.until("recording until Ctrl-C")
        self.wait_active(pid, 1)       # perf
        self.wait_recording(rec)
        ph.wait_cpu(pid, 1)            # sampled (record's -F 999)
        rec.send_signal(signal.SIGINT)
        done = self.end_record(rec, err)
        self.wait_active(pid, 0)
        self.assertIn("(turned on; off again after the recording)",
                      done.stderr)
        self.assertIn(f"{pid}: trampoline off again", done.stderr)
        self.assert_recorded(done)
        # <string>: the target runs as -c
        assert_python_stacks(self, self.samples(pid), "<string>",
                             ph.NESTED_NAMES)
        mode = "fp" if ph.HAVE_FRAME_POINTERS else "dwarf"
        self.assertEqual(call_graph_of(self.name + ".data"), mode)
        self.finish(proc)

    def test_ctrl_c_at_once(self):
        # Ctrl-C as soon as record says that it stops the recording (perf
        # may still be starting): the recording ends, and is written.
        proc, pid = self.start(NESTED_TARGET)
        rec, err = self.start_record("-o", self.name, "--pid", pid)
        err.until("recording until Ctrl-C")
        rec.send_signal(signal.SIGINT)
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        self.wait_active(pid, 0)
        self.finish(proc)

    def test_ctrl_c_while_perf_starts(self):
        # Ctrl-C while perf has not made its output yet (here a perf that
        # takes a second to start): perf gets the SIGINT once it has, and
        # ends the recording cleanly (it would die of a SIGINT before).
        env = self.perf_wrapper_env("sleep 1")
        proc, pid = self.start(NESTED_TARGET)
        rec, err = self.start_record("-o", self.name, "--pid", pid, env=env)
        err.until("recording until Ctrl-C")
        rec.send_signal(signal.SIGINT)
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        self.wait_active(pid, 0)
        self.finish(proc)

    def test_sighup_while_recording(self):
        # SIGHUP (the terminal closed) ends the recording like Ctrl-C:
        # the trampoline is off again, the files written.
        proc, pid = self.start(NESTED_TARGET)
        rec, err = self.start_record("-o", self.name, "--pid", pid)
        err.until("recording until Ctrl-C")
        self.wait_recording(rec)
        rec.send_signal(signal.SIGHUP)
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        self.wait_active(pid, 0)
        self.finish(proc)

    def test_sigterm_while_activating(self):
        # SIGTERM while record waits for an idle process to serve the
        # activation: record stops (128 + 15), and the request left
        # pending is replaced by a deactivation, so that the process does
        # not turn the trampoline on when it wakes.
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        rec, err = self.start_record("-o", self.name, "--pid", pid,
                                     slow_ack=True)
        self.wait_request(pid, pt.REQ_PERF)
        rec.send_signal(signal.SIGTERM)
        self.wait_request(pid, pt.REQ_DEACTIVATE)
        self.assertFalse(self.ask_active(proc))    # wakes it
        done = self.end_record(rec, err)
        self.assertEqual(done.returncode, 128 + signal.SIGTERM, done.stderr)
        self.assertEqual(done.stderr.splitlines()[-1],
                         "record: stopped by SIGTERM")
        self.assertIn(f"{pid}: trampoline off again", done.stderr)
        self.assertEqual(os.listdir(self.tmp), [])
        self.finish(proc)

    def test_ctrl_c_while_restoring(self):
        # Ctrl-C while record waits for an idle process to serve the
        # deactivation is ignored: the recording is written, after the
        # deactivation (and without samples, said).
        proc, pid = self.start(BLOCKED)
        self.wait_in_select(pid)
        rec, err = self.start_record("-o", self.name, "--pid", pid,
                                     "--duration", "0.5", slow_ack=True)
        self.wait_request(pid, pt.REQ_PERF)
        self.assertTrue(self.ask_active(proc))     # serves it
        self.wait_in_select(pid)
        self.wait_request(pid, pt.REQ_DEACTIVATE)
        rec.send_signal(signal.SIGINT)
        err.until("record: SIGINT: the trampoline is being turned off "
                  "again first")
        self.assertFalse(self.ask_active(proc))
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        self.assertIn(f"{pid}: trampoline off again", done.stderr)
        self.assertIn("record: no samples were recorded: the process ran no "
                      "code on a CPU while recorded", done.stderr)
        self.finish(proc)

    def test_already_on(self):
        # A process whose trampoline was on before is left on.
        proc, pid = self.start(NESTED_TARGET, "-X", "perf")
        self.assertEqual(self.active(pid), 1)
        asked = self.block(pid).request_id
        done = self.record("-o", self.name, "--pid", pid, "--duration", "1")
        self.assert_recorded(done)
        self.assertNotIn("turned on", done.stderr)
        self.assertNotIn("off again", done.stderr)
        # no activation was asked: the one request (if any) was the seal
        # of its trampoline file before the recording ended, and none is
        # pending, to be served later
        block = self.block(pid)
        self.assertEqual(block.request, 0)
        if block.request_id != asked:
            self.assertEqual(block.served_request, pt.REQ_SEAL)
        self.assertEqual(block.active, 1)
        assert_python_stacks(self, self.samples(pid), "<string>",
                             ph.NESTED_NAMES)
        self.finish(proc)

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines_for_the_recording(self):
        # A process that runs perf without lines gets them for the
        # recording, and runs perf without them again after.
        proc, pid = self.start(NESTED_TARGET, "-X", "perf")
        done = self.record("-o", self.name, "--pid", pid, "--duration", "2",
                           "--lines")
        self.assert_recorded(done)
        self.assertIn(f"{pid}: perf {ph.map_path(pid)} (lines on) (lines "
                      "turned on; off again after the recording)",
                      done.stderr)
        self.assertIn(f"{pid}: lines off again", done.stderr)
        block = self.block(pid)
        self.assertEqual((block.active, block.lines), (1, 0))
        self.assert_nested_lines(pid, "<string>")
        self.finish(proc)

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines_turned_on_from_off(self):
        proc, pid = self.start(NESTED_TARGET)
        done = self.record("-o", self.name, "--pid", pid, "--duration", "2",
                           "--lines")
        self.assert_recorded(done)
        self.assertIn(f"{pid}: perf {ph.map_path(pid)} (lines on) (turned "
                      "on; off again after the recording)", done.stderr)
        self.assertIn(f"{pid}: trampoline off again", done.stderr)
        block = self.block(pid)
        self.assertEqual((block.active, block.lines), (0, 0))
        self.assert_nested_lines(pid, "<string>")
        self.finish(proc)

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines_for_perf_jit(self):
        # The backend a process runs keeps running, with lines for the
        # recording.
        proc, pid = self.start(NESTED_TARGET, "-X", "perf_jit")
        done = self.record("-o", self.name, "--pid", pid, "--duration", "2",
                           "--lines")
        self.assert_recorded(done)
        self.assertIn(f"{pid}: perf_jit {ph.jit_path(pid)} (lines on) "
                      "(lines turned on; off again after the recording)",
                      done.stderr)
        self.assertIn(f"{pid}: lines off again", done.stderr)
        block = self.block(pid)
        self.assertEqual((block.active, block.lines), (2, 0))
        self.assert_nested_lines(pid, "<string>")
        self.finish(proc)

    def test_pid_names_outlive_the_files(self):
        # A process that goes on running after the recording: record has
        # it seal its trampoline file before perf ends, so that perf's
        # build-id cache keeps a copy; reported in a mount namespace
        # whose /tmp is empty, the recording names the Python functions.
        # (A file that still takes names has no build-id: nothing
        # would be cached.)
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        proc, pid = self.start(NESTED_TARGET, "-X", "perf")
        done = self.record("-o", self.name, "--pid", pid, "--duration", "1")
        self.assert_recorded(done)
        self.assertNotIn("could not seal", done.stderr)
        report = self.report_in_empty_tmp(ph.buildid_dir())
        for name in ph.NESTED_NAMES:
            self.assertIn(f"py::{name}:<string>", report.stdout,
                          report.stdout[:3000])
        self.finish(proc)

    def test_pid_until_it_exits(self):
        # Without --duration, record ends when the process does.
        proc, pid = self.start(NESTED_TARGET)
        rec, err = self.start_record("-o", self.name, "--pid", pid)
        err.until("recording until Ctrl-C")
        self.wait_recording(rec)
        ph.wait_cpu(pid, 1)     # sampled (record's -F 999)
        proc.stdin.close()      # the target ends
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        self.assertEqual(proc.wait(timeout=60), 0)
        named = [s for s in self.samples(pid)
                 if any(sym.startswith("py::foo:") for sym, _ in s)]
        self.assertGreater(len(named), 10)

    def start_server(self, code):
        """Start a pre-fork server: (its Popen, its workers' pids); the
        pids of workers it forks later go into self.forked."""
        proc = subprocess.Popen([sys.executable, "-c", code],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        self.forked = self.forget(proc)
        workers = []
        for line in proc.stdout:
            words = line.split()
            if words[0] == "WORKER":
                workers.append(int(words[1]))
                self.forked.append(workers[-1])
            elif words[0] == "READY":
                break
        self.assertEqual(len(workers), 2)
        for w in workers:
            self.wait_active(w, 0)      # (through fork(): its own block)
        return proc, workers

    def end_server(self, proc):
        """Stop the server: whether its master's trampoline was on."""
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn("Traceback", err)
        return out.split()[-1] == "True"

    def test_children_of_prefork_server(self):
        proc, workers = self.start_server(PREFORK)
        self.assertEqual(self.active(proc.pid), 0)
        done = self.record("-o", self.name, "--pid", proc.pid, "--children",
                           "--duration", "1.5")
        self.assert_recorded(done)
        recorded = re.search(r" -p ([\d,]+)$", done.stderr, re.M)
        self.assertEqual(set(recorded.group(1).split(",")),
                         set(map(str, [proc.pid, *workers])), done.stderr)
        samples = self.samples(*workers)
        for w in workers:
            mine = [s for s in samples if s.tid == w]
            named = [s for s in mine
                     if any(sym == "py::worker_task:<string>"
                            for sym, _ in s)]
            self.assertGreater(len(named), len(mine) // 2,
                               f"worker {w}: {len(named)} of {len(mine)} "
                               f"samples name worker_task")
        # all off again; the idle master, which kept its requests
        # pending, too when it wakes
        for p in workers:
            self.wait_active(p, 0)
        self.assertFalse(self.end_server(proc))

    def test_worker_forked_while_recording(self):
        # A worker that the master, turned on by record, forks during the
        # recording inherits the trampoline: it is off again after too.
        proc, workers = self.start_server(PREFORK_RECYCLING)
        rec, err = self.start_record("-o", self.name, "--pid", proc.pid,
                                     "--children", "--duration", "4")
        err.until("recording for 4 s")
        self.wait_recording(rec)
        self.wait_active(proc.pid, 1)
        proc.stdin.write("recycle\n")
        proc.stdin.flush()
        words = proc.stdout.readline().split()
        self.assertEqual(words[0], "WORKER", words)
        new = int(words[1])
        self.forked.append(new)
        self.wait_active(new, 1)        # inherited (after its fork)
        done = self.end_record(rec, err)
        self.assert_recorded(done)
        for p in [proc.pid, workers[1], new]:
            self.wait_active(p, 0)
        self.assertIn(f"{new}: trampoline off (started during the "
                      f"recording)", done.stderr)
        self.assertFalse(self.end_server(proc))

    def test_child_not_yet_past_fork(self):
        # A child of fork() shows a copy of its parent's block (naming the
        # parent's pid) until its fork handler has run: microseconds, which
        # no test can hit, so the block is made to name another pid by
        # hand here, and put right once record has read it so.  record
        # waits for it (up to REQUEST_TIMEOUT), as for a worker forked
        # during a recording; a block that stays so is a CopiedBlock,
        # given up after that.
        proc, pid = self.start(BLOCKED)
        with pt.Target(pid, write=False) as t:
            where = t.addr + pt.FIELDS["pid"][0]
        owner = pt.FIELDS["pid"][1]
        mem = _perf_remote.Memory(pid)
        self.addCleanup(mem.close)
        self.addCleanup(mem.write, where, owner.pack(pid))
        mem.write(where, owner.pack(os.getpid()))
        seen = []
        status = pt.status

        def status_then_put_right(p):
            out = status(p)
            seen.append(out)
            if len(seen) == 1:
                mem.write(where, owner.pack(pid))
            return out
        # (the timeout only bounds the wait: 60 s for a loaded machine)
        with mock.patch.object(pt, "status", status_then_put_right), \
                mock.patch.object(_perf_record, "REQUEST_TIMEOUT", 60.0):
            out = _perf_record._status(pid)
        self.assertTrue(out.ok, out.text)
        self.assertEqual(out.snapshot.pid, pid)
        self.assertIsInstance(seen[0].error, pt.CopiedBlock)
        self.assertEqual(len(seen), 2)

        mem.write(where, owner.pack(os.getpid()))
        before = time.monotonic()
        out = _perf_record._status(pid)
        self.assertGreaterEqual(time.monotonic() - before,
                                _perf_record.REQUEST_TIMEOUT)
        self.assertFalse(out.ok)
        self.assertIsInstance(out.error, pt.CopiedBlock)
        self.assertIn(f"its block names pid {os.getpid()}", out.text)

    def test_pid_not_python(self):
        # A process that is no Python: its native frames, with dwarf.
        busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
        self.addCleanup(busy.wait)
        self.addCleanup(busy.kill)
        done = self.record("-o", self.name, "--pid", busy.pid,
                           "--duration", "1",
                           env=record_env(PYTHONPROFILEIMPORTTIME="1"))
        self.assert_recorded(done)
        # record asked with the requester that runs it, not with a second
        # copy imported by name.
        self.assertNotRegex(done.stderr, r"(?m)\|\s+perf_trampoline$")
        self.assertIn(f"process {busy.pid} (", done.stderr)
        self.assertIn("is not a Python this command can ask: call graph "
                      "dwarf", done.stderr)
        self.assertEqual(call_graph_of(self.name + ".data"), "dwarf")
        self.assertGreater(len(self.samples()), 100)

    def test_perf_failure_restores(self):
        # perf record fails: the trampoline is off again, and the failure
        # is one line.
        env = self.perf_wrapper_env(
            'echo "fake perf: no recording today" >&2; exit 3')
        proc, pid = self.start(NESTED_TARGET)
        done = self.record("-o", self.name, "--pid", pid, "--duration", "1",
                           env=env)
        self.assert_fails(done, "perf record failed (exit status 3): fake "
                          "perf: no recording today")
        self.assertIn("(turned on; off again after the recording)",
                      done.stderr)
        self.assertEqual(self.active(pid), 0)
        self.finish(proc)


@ph.requires_perf
class TestAsking(RecordTestCase):
    """The interpreter of a process is asked as the process's user."""

    def test_other_users_program(self):
        # Root records a process of nobody that runs nobody's program
        # named python3: record runs it (to ask it as a Python) as nobody,
        # never as root, and then records it with dwarf.
        problem = nobody_problem()
        if problem:
            self.skipTest(problem)
        cc = shutil.which("cc")
        if cc is None:
            self.skipTest("no C compiler (cc) to make the program")
        os.chmod(self.tmp, 0o777)
        source = os.path.join(self.tmp, "asked.c")
        with open(source, "w") as f:
            f.write(ASKED_AS)
        program = os.path.join(self.tmp, "python3")
        build = subprocess.run([cc, "-o", program, source],
                               capture_output=True, text=True)
        if build.returncode != 0:
            self.skipTest(f"cc cannot make a program here: {build.stderr}")
        os.chown(program, NOBODY_UID, -1)
        trace = os.path.join(self.tmp, "trace")
        target = subprocess.Popen([*NOBODY, program], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.addCleanup(target.wait)
        self.addCleanup(target.stdout.close)
        self.addCleanup(target.stdin.close)
        self.assertEqual(target.stdout.readline(), b"READY\n")
        done = subprocess.run(
            record_command("-o", self.name, "--pid", target.pid,
                           "--duration", "0.5"),
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=record_env(RECORD_TEST_TRACE=trace), timeout=300)
        self.assert_recorded(done)
        self.assertIn(f"process {target.pid} ({program}) is not a Python "
                      "this command can ask: call graph dwarf", done.stderr)
        with open(trace) as f:
            self.assertEqual(f.read(), f"{NOBODY_UID}\n")


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
class TestFailures(RecordTestCase, TargetMixin):
    """Each failure: one line that says what to do, exit status 1, no
    traceback, nothing recorded."""

    def test_perf_not_installed(self):
        empty = os.path.join(self.tmp, "bin")
        os.mkdir(empty)
        proc = self.record("-o", self.name, "--", sys.executable, "-c",
                           "pass", env=record_env(PATH=empty))
        self.assert_fails(proc, "perf is not installed")
        self.assertIn("apt install linux-perf", proc.stderr)

    def test_not_allowed_to_sample(self):
        # Against a paranoid file of the test's own, for a caller without
        # CAP_PERFMON (the machine's own setting may allow anything).
        paranoid = os.path.join(self.tmp, "perf_event_paranoid")
        for level, allowed in (("3\n", False), ("4\n", False),
                               ("2\n", True), ("-1\n", True)):
            with open(paranoid, "w") as f:
                f.write(level)
            problem = _perf_record.sampling_problem(paranoid, False)
            self.assertEqual(problem is None, allowed, (level, problem))
            # CAP_PERFMON (root) lifts it
            self.assertIsNone(_perf_record.sampling_problem(paranoid, True))
        self.assertIn("kernel offers no perf events",
                      _perf_record.sampling_problem(
                          os.path.join(self.tmp, "missing"), True))
        # and the command line says it, in one line
        with open(paranoid, "w") as f:
            f.write("3\n")
        err = io.StringIO()
        with mock.patch.object(_perf_record, "PARANOID_FILE", paranoid), \
                mock.patch.object(_perf_record, "privileged",
                                  return_value=False), \
                mock.patch.object(_perf_record, "find_perf",
                                  return_value="/nonexistent/perf"), \
                contextlib.redirect_stderr(err):
            status = perf_trampoline.main(["record", "-o", self.name,
                                           "--", sys.executable, "-c",
                                           "pass"])
        self.assertEqual(status, 1)
        self.assertEqual(err.getvalue(),
                         "record: not allowed to sample: kernel."
                         "perf_event_paranoid is 3, and a user without "
                         "CAP_PERFMON needs 2 or less to record his own "
                         "processes: run `sudo sysctl kernel."
                         "perf_event_paranoid=2`, or record as root\n")

    def stock_python(self):
        """Debian's python3.11, which has no perf trampoline."""
        if not os.path.exists(STOCK_311):
            self.skipTest(f"needs {STOCK_311} (Debian's python3.11)")
        probe = subprocess.run(
            [STOCK_311, "-I", "-c", "import sysconfig; print(sysconfig."
             "get_config_var('PY_HAVE_PERF_TRAMPOLINE'))"],
            capture_output=True, text=True)
        if probe.stdout.strip() != "None":
            self.skipTest(f"{STOCK_311} has the perf trampoline")
        return STOCK_311

    @ph.requires_perf
    def test_command_python_without_trampoline(self):
        python = self.stock_python()
        proc = self.record("-o", self.name, "--", python, "-c", "pass")
        self.assert_fails(proc, f"{python} is a Python without the perf "
                          "trampoline")

    @ph.requires_perf
    def test_pid_python_without_trampoline(self):
        python = self.stock_python()
        proc, pid = self.start(NESTED_TARGET, python=python)
        done = self.record("-o", self.name, "--pid", pid)
        self.assert_fails(done, f"process {pid} runs {python}, a Python "
                          "without the perf trampoline")
        self.finish(proc)

    @unittest.skipUnless(HAVE_LIVE, NO_LIVE)
    @ph.requires_perf
    def test_no_permission(self):
        problem = nobody_problem()
        if problem:
            self.skipTest(problem)
        proc, pid = self.start(NESTED_TARGET)
        os.chmod(self.tmp, 0o777)
        done = self.record("-o", self.name, "--pid", pid, prefix=NOBODY)
        self.assert_fails(done, "no permission to read or write the memory "
                          f"of process {pid}")
        self.finish(proc)

    @unittest.skipUnless(HAVE_LIVE, NO_LIVE)
    @ph.requires_perf
    def test_live_activation_disabled(self):
        proc, pid = self.start(NESTED_TARGET, "-X", "disable_remote_debug")
        done = self.record("-o", self.name, "--pid", pid)
        self.assert_fails(done, f"live activation is disabled in process "
                          f"{pid}")
        self.assertIn("restart it with -X perf", done.stderr)
        self.finish(proc)

    @ph.requires_perf
    def test_no_such_process(self):
        gone = subprocess.Popen(["true"])
        gone.wait()
        done = self.record("-o", self.name, "--pid", gone.pid)
        self.assert_fails(done, f"process {gone.pid} does not exist")

    @ph.requires_perf
    def test_no_template(self):
        # --flamegraph without a template fails before recording
        missing = os.path.join(self.tmp, "missing.html")
        proc = self.record("-o", self.name, "--flamegraph", "--template",
                           missing, "--", sys.executable, "-c", "pass")
        self.assert_fails(proc, f"the flame graph template {missing} is "
                          "not a file")
        proc = self.record("-o", self.name, "--flamegraph", "--", "true",
                           env=record_env(PERF_FLAMEGRAPH_TEMPLATE=missing))
        self.assert_fails(proc, f"the flame graph template {missing} is "
                          "not a file")

    def test_usage(self):
        for args in (["--pid", "1", "--", "true"], [],
                     ["--children", "--", "true"], ["--pid", "0"],
                     ["--pid", "1", "--duration", "-1"],
                     ["--pid", "1", "--duration", "0"],
                     ["--pid", "1", "--duration", "inf"],
                     ["--pid", "1", "--duration", "nan"],
                     ["--template", self.name, "--", "true"]):
            proc = self.record("-o", self.name, *args)
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))
            self.assertNotIn("Traceback", proc.stderr)
        proc = self.record("--template", self.name, "--", "true")
        self.assertIn("--template goes with --flamegraph", proc.stderr)

    def test_help(self):
        # the exit statuses, a signal's among them
        proc = self.record("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        text = " ".join(proc.stdout.split())
        self.assertIn("2 for a usage error, 128 + the signal's number when "
                      "a signal stopped record before the recording (130 "
                      "for Ctrl-C)", text)


class TestHelpers(unittest.TestCase):
    """The pieces of record that need no perf."""

    def test_shebang(self):
        with tempfile.TemporaryDirectory() as tmp:
            for line in (f"#!{sys.executable}",
                         f"#!/usr/bin/env {sys.executable}",
                         f"#!/usr/bin/env -S {sys.executable} -u"):
                script = os.path.join(tmp, "app")
                with open(script, "w") as f:
                    f.write(line + "\nprint(1)\n")
                os.chmod(script, 0o755)
                self.assertEqual(
                    _perf_record._command_program([script]),
                    (script, sys.executable), line)

    def test_ignores_environment(self):
        ignores = _perf_record._ignores_environment
        self.assertTrue(ignores(["python", "-I", "app.py"]))
        self.assertTrue(ignores(["python", "-sE", "-c", "pass"]))
        self.assertTrue(ignores(["python", "-W", "error", "-I", "app.py"]))
        self.assertFalse(ignores(["python", "-I", "-X", "perf", "app.py"]))
        self.assertFalse(ignores(["python", "-IXperf", "app.py"]))
        self.assertFalse(ignores(["python", "app.py", "-I"]))
        self.assertFalse(ignores(["python", "-c", "pass", "-I"]))
        self.assertFalse(ignores(["python", "-u", "-m", "mod"]))

    def test_looks_like_python(self):
        for name in ("python", "python3", "python3.11", "python3.11d",
                     "python3.13t"):
            self.assertTrue(_perf_record.PYTHON_NAME.match(name), name)
        for name in ("sh", "pythonista.sh", "ipython", "uwsgi"):
            self.assertFalse(_perf_record.PYTHON_NAME.match(name), name)

    def test_ask_this_python(self):
        interp = _perf_record.ask_python(sys.executable)
        self.assertIsNotNone(interp)
        self.assertEqual(interp.trampoline, ph.HAVE_TRAMPOLINE)
        self.assertEqual(interp.frame_pointers, ph.HAVE_FRAME_POINTERS)
        self.assertIsNone(_perf_record.ask_python("/bin/false"))

    def test_data_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.data")
            self.assertFalse(_perf_record.data_written(path))
            open(path, "wb").close()
            self.assertFalse(_perf_record.data_written(path))
            with open(path, "wb") as f:
                f.write(b"PERFILE2" + bytes(48))    # data size 0
            self.assertFalse(_perf_record.data_written(path))
            with open(path, "wb") as f:
                f.write(b"PERFILE2" + bytes(40) + (1).to_bytes(8, "little"))
            self.assertTrue(_perf_record.data_written(path))

    def test_credentials(self):
        me = _perf_record.credentials_of(os.getpid())
        self.assertEqual((me.uid, me.gid, sorted(me.groups)),
                         (os.geteuid(), os.getegid(),
                          sorted(os.getgroups())))
        gone = subprocess.Popen(["true"])
        gone.wait()
        self.assertIsNone(_perf_record.credentials_of(gone.pid))


if __name__ == "__main__":
    unittest.main()
