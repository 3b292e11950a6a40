"""Tests of `python -m perf_trampoline record` (Lib/_perf_record.py).

record is run as a user runs it, as a separate process, with the real
perf: of a script (the seed example's chain, in the call-graph mode that
suits the interpreter: -g with frame pointers, DWARF without), of a
command that is no Python, of a running process started without -X perf
(turned on for the recording and off again after, whether Ctrl-C, the
duration or the process's exit ends it), of a pre-fork server with
--children; and each failure, which must be one line, with a non-zero
exit status and no traceback.  Each recording lasts a second or two.
"""

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from test.support import perf_helper as ph
from test.support.script_helper import make_script
from test.test_perf_live import (HAVE_LIVE, NO_LIVE, NOBODY, STOCK_311,
                                 TargetMixin, clean_env, nobody_problem)
from test.test_perf_profiler._common import assert_python_stacks

import _perf_record
import perf_trampoline as pt


# The seed example's calls (perf_helper.NESTED), kept busy for a second.
NESTED_SECOND = ph.NESTED + textwrap.dedent("""\
    import time
    end = time.monotonic() + 1
    while time.monotonic() < end:
        baz(100_000)
    """)

# A target of --pid: prints its pid and READY, then calls the seed
# example's baz() until its stdin closes, or for LIMIT seconds.
NESTED_TARGET = ph.NESTED + textwrap.dedent("""\
    import select, time
    LIMIT = None
    def main():
        print("READY", flush=True)
        end = None if LIMIT is None else time.monotonic() + LIMIT
        while end is None or time.monotonic() < end:
            baz(20_000)
            if select.select([sys.stdin], [], [], 0)[0]:
                if not sys.stdin.readline():
                    break
    main()
    """)


# A pre-fork server: the master forks two workers, each calling
# worker_task() until killed, then waits in select() (idle) until its
# stdin closes.
PREFORK = textwrap.dedent("""\
    import os, select, sys
    print("PID", os.getpid(), flush=True)
    def worker_task(n):
        total = 0
        for i in range(n):
            total += i
        return total
    def worker():
        while True:
            worker_task(10_000)
    workers = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            worker()
            os._exit(0)
        workers.append(pid)
    print("WORKERS", *workers, flush=True)
    print("READY", flush=True)
    select.select([sys.stdin], [], [])
    sys.stdin.read()
    for pid in workers:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    """)


def setUpModule():
    ph.perf_problem()


def tearDownModule():
    ph.teardown_module()


def record_command(*args, prefix=()):
    """The command line of `python -m perf_trampoline record ARGS`."""
    return [*prefix, sys.executable, pt.__file__, "record", *map(str, args)]


def record_env(**extra):
    """The environment of record: PYTHON* cleared, and perf's build-id
    cache in the tests' own directory."""
    return clean_env(PERF_BUILDID_DIR=ph.buildid_dir(), **extra)


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

    def samples(self, *pids):
        """The samples of NAME.txt, frames that perf left unnamed named
        from the maps of `pids` (read now: see parse_perf_script)."""
        maps = {pid: ph.load_map_symbols(ph.map_path(pid)) for pid in pids
                if os.path.exists(ph.map_path(pid))}
        with open(self.name + ".txt") as f:
            return ph.parse_perf_script(f.read(), maps)

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
        # (where a template is: what the user points at, perf's place for
        # it, or the one `make check-viewer` installs beside the builds)
        build = os.path.dirname(os.path.realpath(sys.executable))
        candidates = [
            os.environ.get("PERF_FLAMEGRAPH_TEMPLATE"),
            "/usr/share/d3-flame-graph/d3-flamegraph-base.html",
            os.path.join(os.path.dirname(build), "build", "viewer",
                         "node_modules", "d3-flame-graph", "dist",
                         "templates", "d3-flamegraph-base.html")]
        found = [c for c in candidates if c and os.path.isfile(c)]
        if not found:
            self.skipTest("no d3-flame-graph template (make check-viewer "
                          "installs one in build/viewer)")
        template = found[0]
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
        # -o NAME.data is NAME
        proc = self.record("-o", self.name + ".data", "--", "true")
        self.assert_recorded(proc)
        self.assertFalse(os.path.exists(self.name + ".data.data"))


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
@ph.requires_perf
class TestRecordPid(RecordTestCase, TargetMixin):

    def active(self, pid):
        return pt.status(pid).snapshot.active

    def test_pid_until_ctrl_c(self):
        # Started without -X perf: record turns the trampoline on, records
        # until Ctrl-C (SIGINT), and turns it off again.
        proc, pid = self.start(NESTED_TARGET)
        self.assertEqual(self.active(pid), 0)
        rec = subprocess.Popen(record_command("-o", self.name, "--pid", pid),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True,
                               env=record_env())
        self.addCleanup(rec.kill)
        err = []
        for line in rec.stderr:
            err.append(line)
            if "recording until Ctrl-C" in line:
                break
        self.assertTrue(err and "recording until Ctrl-C" in err[-1],
                        "".join(err))
        self.assertEqual(self.active(pid), 1)       # perf
        time.sleep(1.5)
        rec.send_signal(signal.SIGINT)
        out, rest = rec.communicate(timeout=300)
        err = "".join(err) + rest
        self.assertEqual(self.active(pid), 0)
        self.assertIn("(turned on; off again after the recording)", err)
        self.assertIn(f"{pid}: trampoline off again", err)
        self.assert_recorded(subprocess.CompletedProcess(
            rec.args, rec.returncode, out, err))
        # <string>: the target runs as -c
        assert_python_stacks(self, self.samples(pid), "<string>",
                             ph.NESTED_NAMES)
        mode = "fp" if ph.HAVE_FRAME_POINTERS else "dwarf"
        self.assertEqual(call_graph_of(self.name + ".data"), mode)
        self.finish(proc)

    def test_pid_until_it_exits(self):
        # Without --duration, record ends when the process does.
        proc, pid = self.start(NESTED_TARGET.replace("LIMIT = None",
                                                     "LIMIT = 1.5"))
        start = time.monotonic()
        done = self.record("-o", self.name, "--pid", pid, timeout=120)
        self.assert_recorded(done)
        self.assertLess(time.monotonic() - start, 60)
        self.assertEqual(proc.wait(timeout=60), 0)
        named = [s for s in self.samples(pid)
                 if any(sym.startswith("py::foo:") for sym, _ in s)]
        self.assertGreater(len(named), 10)

    def test_children_of_prefork_server(self):
        proc = subprocess.Popen([sys.executable, "-c", PREFORK],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        self.addCleanup(self._stop, proc)
        workers = []
        for line in proc.stdout:
            words = line.split()
            if words[0] == "WORKERS":
                workers = [int(w) for w in words[1:]]
                for w in workers:
                    self.addCleanup(ph.forget_files, self, w)
            elif words[0] == "READY":
                break
        self.assertEqual(len(workers), 2)
        for p in [proc.pid, *workers]:
            self.assertEqual(self.active(p), 0)
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
        # all off again (the idle master keeps its request pending)
        for p in [proc.pid, *workers]:
            self.assertEqual(self.active(p), 0)
        self.assertEqual(self.finish(proc), "")

    def test_pid_not_python(self):
        # A process that is no Python: its native frames, with dwarf.
        busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
        self.addCleanup(busy.wait)
        self.addCleanup(busy.kill)
        done = self.record("-o", self.name, "--pid", busy.pid,
                           "--duration", "1")
        self.assert_recorded(done)
        self.assertIn(f"process {busy.pid} (", done.stderr)
        self.assertIn("is not a Python this command can ask: call graph "
                      "dwarf", done.stderr)
        self.assertEqual(call_graph_of(self.name + ".data"), "dwarf")
        self.assertGreater(len(self.samples()), 100)

    def test_perf_failure_restores(self):
        # perf record fails: the trampoline is off again, and the failure
        # is one line.
        fake = os.path.join(self.tmp, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "perf"), "w") as f:
            f.write(textwrap.dedent(f"""\
                #!/bin/sh
                if [ "$1" = record ]; then
                    echo "fake perf: no recording today" >&2
                    exit 3
                fi
                exec {shutil.which("perf")} "$@"
                """))
        os.chmod(os.path.join(fake, "perf"), 0o755)
        proc, pid = self.start(NESTED_TARGET)
        done = self.record("-o", self.name, "--pid", pid, "--duration", "1",
                           env=record_env(PATH=fake + os.pathsep
                                          + os.environ["PATH"]))
        self.assert_fails(done, "perf record failed (exit status 3): fake "
                          "perf: no recording today")
        self.assertIn("(turned on; off again after the recording)",
                      done.stderr)
        self.assertEqual(self.active(pid), 0)
        self.finish(proc)


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
            status = pt.main(["record", "-o", self.name, "--",
                              sys.executable, "-c", "pass"])
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
                     ["--pid", "1", "--duration", "-1"]):
            proc = self.record("-o", self.name, *args)
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))
            self.assertNotIn("Traceback", proc.stderr)


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
            before = _perf_record._identity(path)
            self.assertFalse(_perf_record.data_written(path, before))


if __name__ == "__main__":
    unittest.main()
