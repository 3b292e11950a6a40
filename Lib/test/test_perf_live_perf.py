"""Tests of live activation under real perf: `perf record` (and `perf
inject --jit`) on targets while they are activated and deactivated, one
by one and as a pre-fork server whose master is asked with --children.
The samples taken after the acknowledgement name the Python function,
those taken before and after deactivation do not.  With `activate
--lines`, the functions called after the acknowledgement also carry
their lines (perf script -F +srcline), and the one running already keeps
the trampoline it had.

The targets and the requester's wrapper come from test_perf_live (the
tests of the requester's refusals, requests and permissions): importing
it also skips this module off Linux.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

from test.support import perf_helper as ph
from test.support.script_helper import make_script
from test.test_perf_live import (BUSY, HAVE_LINES, HAVE_LIVE, NO_LINES,
                                 NO_LIVE, PRELUDE, TargetMixin, clean_env,
                                 requester)
from test.test_perf_profiler.test_lines import (marker_lines,
                                                parse_srclines,
                                                python_frames)


def perf_record(pids, data, *options):
    """Start `perf record` on running `pids`, with monotonic time stamps;
    returns the Popen once perf samples them."""
    return ph.start_perf_record(
        ["-F", "499", "-k", "monotonic", *options, "-o", data,
         "-p", ",".join(map(str, pids))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def perf_script(data):
    script = subprocess.run(ph.perf_command("script", "-i", data),
                            capture_output=True, text=True, timeout=300)
    if script.returncode != 0:
        raise AssertionError(f"perf script failed: {script.stderr[-2000:]}")
    return script.stdout


def names(sample):
    return [sym for sym, _ in sample]


def named(sample, function):
    return any(s.startswith(f"py::{function}:") for s in names(sample))


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestPerf(TargetMixin, unittest.TestCase):

    def setUp(self):
        super().setUp()
        tmp = tempfile.mkdtemp(prefix="test_perf_live_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        self.data = os.path.join(tmp, "perf.data")

    def phases(self, pid, backend, options, inject=False):
        """perf records `pid` (BUSY) while off, then activated, then
        deactivated.  Returns the samples and the monotonic times of the
        requests and acknowledgements."""
        rec = perf_record([pid], self.data, *options)
        try:
            # each phase sampled for half a second of the target's CPU
            # time (about 250 samples), however loaded the machine is
            ph.wait_cpu(pid, 0.5)
            out, t_act, t_ack = requester("activate", "--backend", backend,
                                          pid)
            self.assertEqual(out.returncode, 0, out.stderr)
            ph.wait_cpu(pid, 0.5)
            out, t_deact, t_deack = requester("deactivate", pid)
            self.assertEqual(out.returncode, 0, out.stderr)
            ph.wait_cpu(pid, 0.5)
        finally:
            ph.stop_perf_record(rec)
        data = self.data
        if inject:
            data = self.data + ".jit"
            inj = subprocess.run(ph.perf_command("inject", "-i", self.data,
                                                 "--jit", "-o", data),
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(inj.returncode, 0, inj.stderr[-2000:])
        samples = [s for s in ph.parse_perf_script(perf_script(data))
                   if getattr(s, "tid", None) == pid]
        return samples, (t_act, t_ack, t_deact, t_deack)

    def check_phases(self, samples, times):
        t_act, t_ack, t_deact, t_deack = times
        before = [s for s in samples if s.time < t_act]
        on = [s for s in samples if t_ack < s.time < t_deact]
        after = [s for s in samples if s.time > t_deack + 0.1]
        for part, what in ((before, "before"), (on, "on"), (after, "after")):
            self.assertGreater(len(part), 10, f"too few samples {what}")
        self.assertFalse([s for s in before if named(s, "hot_function")])
        hot = [s for s in on if named(s, "hot_function")]
        self.assertGreater(len(hot), len(on) // 2,
                           f"{len(hot)} of {len(on)} samples name "
                           f"hot_function while active")
        # after deactivation, calls run without trampoline
        self.assertFalse([s for s in after if named(s, "hot_function")])

    @unittest.skipUnless(ph.HAVE_FRAME_POINTERS,
                         "frame-pointer unwinding needs frame pointers")
    @ph.requires_perf
    def test_perf_backend(self):
        proc, pid = self.start(BUSY)
        samples, times = self.phases(pid, "perf", ["-g"])
        self.check_phases(samples, times)
        # the map keeps its records after deactivation
        lines = ph.read_map_file(ph.map_path(pid))
        self.assertTrue(any("py::hot_function:" in l for l in lines))
        self.finish(proc)

    @ph.requires_perf_inject_jit
    def test_perf_jit_backend(self):
        proc, pid = self.start(BUSY)
        samples, times = self.phases(pid, "perf_jit",
                                     ["--call-graph", "dwarf"], inject=True)
        self.finish(proc)
        ph.forget_files(self, pid)
        self.check_phases(samples, times)

    @unittest.skipUnless(ph.HAVE_FRAME_POINTERS,
                         "frame-pointer unwinding needs frame pointers")
    @ph.requires_perf
    def test_prefork_server_children(self):
        code = PRELUDE + textwrap.dedent("""\
            import socket
            def handle_request(data):
                total = 0
                for i in range(20000):
                    total += i * len(data)
                return str(total).encode()
            def serve(sock):
                while True:
                    conn, _ = sock.accept()
                    with conn:
                        while True:
                            data = conn.recv(100)
                            if not data:
                                break
                            conn.sendall(handle_request(data) + b"\\n")
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(8)
            print("PORT", sock.getsockname()[1], flush=True)
            workers = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    serve(sock)
                    os._exit(0)
                workers.append(pid)
            print("WORKERS", *workers, flush=True)
            print("READY", flush=True)
            # a master that wakes up now and then, as a supervisor does
            while not select.select([sys.stdin], [], [], 0.05)[0]:
                pass
            sys.stdin.read()
            for pid in workers:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            """)
        proc = subprocess.Popen([sys.executable, "-c", code],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        forked = self.forget(proc)
        port = workers = None
        for line in proc.stdout:
            words = line.split()
            if words[0] == "PORT":
                port = int(words[1])
            elif words[0] == "WORKERS":
                workers = [int(w) for w in words[1:]]
            elif words[0] == "READY":
                break
        forked += workers
        master = proc.pid
        stop = threading.Event()

        def client():
            import socket
            with socket.create_connection(("127.0.0.1", port)) as c:
                f = c.makefile("rb")
                while not stop.is_set():
                    c.sendall(b"x" * 10)
                    f.readline()
        clients = [threading.Thread(target=client) for _ in range(2)]
        for c in clients:
            c.start()
        try:
            rec = perf_record([master, *workers], self.data, "-g")
            try:
                out, _, t_ack = requester("activate", "--children", master)
                self.assertEqual(out.returncode, 0, out.stderr)
                ph.wait_cpu(workers, 0.5)
            finally:
                ph.stop_perf_record(rec)
        finally:
            stop.set()
            for c in clients:
                c.join()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(sorted(out.stdout.splitlines()),
                         sorted(f"{p}: perf {ph.map_path(p)}"
                                for p in [master, *workers]))
        samples = ph.parse_perf_script(perf_script(self.data))
        for w in workers:
            names = ph.named_functions(w, self.since)
            self.assertTrue(any(n.startswith("py::handle_request:")
                                for n in names), f"names of worker {w}")
            mine = [s for s in samples
                    if getattr(s, "tid", None) == w and s.time > t_ack]
            self.assertTrue([s for s in mine if named(s, "handle_request")],
                            f"no sample of worker {w} names handle_request")


# Runs outer() for ever: the function that is running when the request
# comes.  The functions it calls are called anew all the time.
LINES_TARGET = PRELUDE + textwrap.dedent("""\
    def spin(n):
        t = 0
        for i in range(n): t += i & 7                  # SPIN_LOOP
        return t

    def work():
        return spin(3000)                              # CALL_SPIN

    def outer():
        print("READY", flush=True)
        while True:
            work()                                     # CALL_WORK
            r, _, _ = select.select([sys.stdin], [], [], 0)
            if r:
                if not sys.stdin.readline():
                    break
                print("ACTIVE", sys.is_stack_trampoline_active(),
                      flush=True)

    outer()
    """)


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
@ph.requires_perf
class TestLines(TargetMixin, unittest.TestCase):
    """activate --lines on a process that is running, then perf record on
    it: the samples' Python frames carry the lines they are on, as with
    -X perf_lines, in the unwinding mode the build has (-g with frame
    pointers, --call-graph dwarf without)."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="test_perf_live_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.script = make_script(self.tmp, "lines_target", LINES_TARGET)

    def record_after(self, pid, *options):
        """Ask `pid` (`activate OPTIONS`), then record it: its samples as
        python_frames() lists."""
        out, _, _ = requester("activate", *options, pid)
        self.assertEqual(out.returncode, 0, out.stderr)
        data = os.path.join(self.tmp, "perf.data")
        callgraph = (["-g"] if ph.HAVE_FRAME_POINTERS
                     else ["--call-graph", "dwarf"])
        rec = perf_record([pid], data, *callgraph)
        try:
            ph.wait_cpu(pid, 0.7)
        finally:
            ph.stop_perf_record(rec)
        script = subprocess.run(
            ph.perf_command("script", "-i", data, "--tid", str(pid),
                            "-F", "ip,sym,srcline"),
            capture_output=True, text=True, timeout=300)
        self.assertEqual(script.returncode, 0, script.stderr[-2000:])
        return out.stdout.strip(), [python_frames(s, self.script)
                                    for s in parse_srclines(script.stdout)]

    @unittest.skipUnless(HAVE_LINES, NO_LINES)
    def test_lines_asked_while_running(self):
        # outer() runs in the plain trampoline of -X perf when the request
        # comes, and keeps it; work() and spin(), called afterwards, get
        # line trampolines.
        proc, pid = self.start(None, "-X", "perf", script=self.script)
        text, samples = self.record_after(pid, "--lines")
        self.assertEqual(text, f"{pid}: perf {ph.map_path(pid)} (lines on)")
        self.assertEqual(self.finish(proc), "")
        at = marker_lines(LINES_TARGET)
        inner = [f[0][1] for f in samples if f and f[0][0] == "spin"]
        callers = [line for f in samples
                   for (callee, _), (caller, line) in zip(f, f[1:])
                   if (caller, callee) == ("work", "spin")]
        outer = [line for f in samples for name, line in f
                 if name == "outer"]
        self.assertGreater(len(inner), 50)
        right = inner.count(at["SPIN_LOOP"])
        self.assertGreaterEqual(right / len(inner), 0.80, (right, inner))
        self.assertGreater(len(callers), 50)
        right = callers.count(at["CALL_SPIN"])
        self.assertGreaterEqual(right / len(callers), 0.95,
                                (right, callers))
        # (still one frame, without a line record: the trampoline it had)
        self.assertGreater(len(outer), 50)
        self.assertEqual(set(outer), {None})

    def test_without_lines_as_before(self):
        # A request without --lines: the functions are named, one frame
        # each, with no line record.
        proc, pid = self.start(None, script=self.script)
        text, samples = self.record_after(pid)
        self.assertEqual(text, f"{pid}: perf {ph.map_path(pid)}")
        self.assertEqual(self.finish(proc), "")
        spin = [line for f in samples for name, line in f if name == "spin"]
        self.assertGreater(len(spin), 50)
        self.assertEqual(set(spin), {None})


def setUpModule():
    ph.setup_module()


def tearDownModule():
    ph.teardown_module()


if __name__ == "__main__":
    unittest.main()
