"""Processes of unusual shapes: forked children, perf attached later,
pre-fork servers, embedded interpreters, other writers of the files and
sub-interpreters."""

import os
import re
import subprocess
import sys
import textwrap
import unittest

from test import support
from test.support import import_helper
from test.support import os_helper
from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, JIT_CODE_CLOSE, JIT_CODE_LOAD,
    NO_TRAMPOLINE, env_with, forget_files, forget_path, jit_path,
    load_map_symbols, map_path, parse_perf_script, perf_command, read_jitdump,
    read_map_file, requires_perf, requires_perf_inject_jit, run_and_forget,
    script_pid)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    CHURN, PerfTestCase, pid_namespace_command, setUpModule, tearDownModule)


# A parent that warms up, forks a child that spins in child_work(), then
# calls a function of its own (the names perf gave the child's samples
# before new trampolines left inherited arenas).  With "wait", the child
# spins until the test, attached with perf record -p, says stop.
FORK_SOURCE_TEMPLATE = """\
import os, sys
print("PID", os.getpid(), flush=True)
def warm():
    return 1
warm()
{before_fork}
r, w = os.pipe()
pid = os.fork()
if pid == 0:
{after_fork}
    os.close(r)
    os.write(w, b"go")
    if sys.argv[1:] == ["wait"]:
        while not os.path.exists(sys.argv[0] + ".stop"):
            child_work(200_000)
    else:
        child_work(5_000_000)
    os._exit(0)
os.close(w)
os.read(r, 2)
print("CHILD", pid, flush=True)
def parent_only_function():
    return 2
parent_only_function()
os.waitpid(pid, 0)
"""
CHILD_WORK = """\
def child_work(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""
# child_work() first called in the child, after the fork ...
FORK_HOT_SOURCE = FORK_SOURCE_TEMPLATE.format(
    before_fork="", after_fork=textwrap.indent(CHILD_WORK, "    "))
# ... or in the parent, before it: the child runs it through an
# inherited trampoline.
FORK_INHERITED_SOURCE = FORK_SOURCE_TEMPLATE.format(
    before_fork=CHILD_WORK + "child_work(10)", after_fork="")


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestProcessShapes(PerfTestCase):
    """Forked children, embedding, other writers of the map, other frame
    evaluators, sub-interpreters."""

    def child_samples(self, text, pid, child):
        samples = parse_perf_script(
            text, {child: load_map_symbols(map_path(child))})
        return [s for s in samples if s.tid == child]

    def check_child_named(self, samples, script):
        work = f"py::child_work:{script}"
        named = [s for s in samples if any(sym == work for sym, _ in s)]
        self.assertGreater(len(named), 10, f"{len(samples)} child samples")
        wrong = [s for s in samples
                 if any(sym.startswith(("py::parent_only_function",
                                        "py::warm")) for sym, _ in s)]
        self.assertEqual(wrong, [])
        module = f"py::<module>:{script}"
        below = [s for s in named
                 if [sym for sym, _ in s if sym.startswith("py::")]
                 == [work, module]]
        self.assertGreaterEqual(len(below), 0.9 * len(named))

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_forked_child_named_by_perf(self):
        # perf follows the fork: it names the child's inherited arenas
        # from the parent's map, its new ones from the child's.
        script = make_script(self.tmp, "forked", FORK_HOT_SOURCE)
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-g", "-o", data, "--",
                         sys.executable, "-X", "perf", script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        self.forget_pid(pid)
        self.forget_pid(child)
        text = self.perf_script(data)
        self.check_child_named(self.child_samples(text, pid, child), script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def record_child_later(self, source, backend, *options):
        """Run `source` with the argument "wait" under -X `backend`, and
        perf record -p its child for a second with `options`; returns the
        perf.data path, the script, the parent's and the child's pids."""
        script = make_script(self.tmp, "forked", source)
        stop = script + ".stop"
        self.addCleanup(os_helper.unlink, stop)
        proc = subprocess.Popen([sys.executable, "-X", backend, script,
                                 "wait"], stdout=subprocess.PIPE,
                                text=True, env=env_with())
        self.addCleanup(proc.kill)
        pid = script_pid(proc.stdout.readline())
        child = int(re.search(r"CHILD (\d+)",
                              proc.stdout.readline()).group(1))
        data = os.path.join(self.tmp, "perf.data")
        try:
            rec = subprocess.run(
                perf_command("record", "-F", "999", *options, "-o", data,
                             "-p", str(child), "--", "sleep", "1"),
                capture_output=True, text=True, timeout=300)
        finally:
            with open(stop, "w"):
                pass
        returncode = proc.wait(timeout=300)
        # Both have exited now (the parent waits for the child).
        self.forget_pid(pid)
        self.forget_pid(child)
        self.assertEqual(returncode, 0)
        self.assertEqual(rec.returncode, 0, rec.stderr)
        return data, script, pid, child

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_forked_child_named_by_perf_attached_later(self):
        # perf record -p CHILD: perf learns the child's mappings from
        # /proc and names them all from the child's own map, which must
        # describe the trampolines it runs, inherited ones too (here the
        # one of <module>, running at the fork).
        self.check_map_child_attached_later(FORK_HOT_SOURCE)

    def check_map_child_attached_later(self, source):
        data, script, pid, child = self.record_child_later(
            source, "perf", "-g")
        text = self.perf_script(data)
        self.check_child_named(self.child_samples(text, pid, child), script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_inherited_function_named_by_perf_attached_later(self):
        # The child's hot function got its trampoline in the parent: the
        # child's map describes it from the child's first call on.
        self.check_map_child_attached_later(FORK_INHERITED_SOURCE)

    @requires_perf
    @requires_perf_inject_jit
    def test_inherited_function_named_by_perf_jit_attached_later(self):
        # The same with the jitdump: perf inject finds the child's dump
        # through the child's own mapping of it, whose code loads carry
        # the child's pid.
        data, script, pid, child = self.record_child_later(
            FORK_INHERITED_SOURCE, "perf_jit", "-k", "1", "--call-graph",
            "dwarf")
        jit = self.inject_jit(data, child)
        text = self.perf_script(jit)
        samples = [s for s in parse_perf_script(text) if s.tid == child]
        self.check_child_named(samples, script)

    @requires_perf
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "needs frame pointers")
    def test_pre_fork_server_compiled_handlers(self):
        # A master gives its request handler a trampoline before it forks
        # (PyUnstable_PerfTrampoline_CompileCode, with persist-after-fork
        # on, through _testinternalcapi's hooks), then never calls it;
        # its workers do, and perf names the handler in each of them.
        import_helper.import_module("_testinternalcapi")
        script = make_script(self.tmp, "prefork", textwrap.dedent("""\
            import os, _testinternalcapi as t
            print("PID", os.getpid(), flush=True)
            def handle_request(n):
                s = 0
                for i in range(n):
                    s += i
                return s
            assert t.compile_perf_trampoline_entry(
                handle_request.__code__) == 0
            assert t.perf_trampoline_set_persist_after_fork(1) == 1
            workers = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    handle_request(3_000_000)
                    os._exit(0)
                workers.append(pid)
            for pid in workers:
                os.waitpid(pid, 0)
            print("WORKERS", *workers, flush=True)
            """))
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-g", "-o", data, "--",
                         sys.executable, "-X", "perf", script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.forget_pid(script_pid(proc.stdout))
        workers = [int(w) for w in
                   re.search(r"WORKERS (.*)", proc.stdout).group(1).split()]
        for worker in workers:
            self.forget_pid(worker)
        text = self.perf_script(data)
        handler = f"py::handle_request:{script}"
        for worker in workers:
            names = load_map_symbols(map_path(worker))
            self.assertIn(handler, [name for _, _, name in names])
            samples = [s for s in parse_perf_script(text, {worker: names})
                       if s.tid == worker]
            named = [s for s in samples
                     if any(sym == handler for sym, _ in s)]
            self.assertGreater(len(named), 10,
                               f"{len(samples)} samples of worker {worker}")

    def embed(self, code, env):
        testembed = os.path.join(os.path.dirname(sys.executable),
                                 "Programs", "_testembed")
        if not os.path.exists(testembed):
            self.skipTest("needs Programs/_testembed of a build tree")
        proc = subprocess.run(
            [testembed, "test_repeated_init_exec", textwrap.dedent(code)],
            capture_output=True, text=True, env=env_with(**env),
            cwd=os.path.dirname(sys.executable), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Warning", proc.stderr)
        pids = set(re.findall(r"PID (\d+)", proc.stdout))
        self.assertEqual(len(pids), 1, proc.stdout)
        pid = int(pids.pop())
        forget_files(self, pid)
        return proc, pid

    EMBEDDED = """
        import os, sys
        def work(n):
            return n + 1
        work(1)
        print("PID", os.getpid(), sys.is_stack_trampoline_active())
        """

    def test_embedded_reinitialized_map(self):
        # Py_Initialize() after Py_FinalizeEx(), several times in a row:
        # each round names its functions.
        proc, pid = self.embed(self.EMBEDDED, {"PYTHONPERFSUPPORT": "1"})
        self.assertNotIn("False", proc.stdout)
        names = [line.split(" ", 2)[2]
                 for line in read_map_file(map_path(pid))]
        self.assertGreaterEqual(names.count("py::work:<string>"), 3, names)

    def test_embedded_reinitialized_jitdump(self):
        proc, pid = self.embed(self.EMBEDDED,
                               {"PYTHON_PERF_JIT_SUPPORT": "1"})
        self.assertNotIn("False", proc.stdout)
        records = read_jitdump(jit_path(pid), pid)
        # one dump, one header, and no CLOSE but the last (perf inject
        # stops reading at a CLOSE record)
        ids = [rid for rid, _ in records]
        self.assertEqual(ids.count(JIT_CODE_CLOSE), 1)
        self.assertEqual(ids[-1], JIT_CODE_CLOSE)
        names = [rec["name"] for rid, rec in records
                 if rid == JIT_CODE_LOAD]
        self.assertGreaterEqual(names.count("py::work:<string>"), 3, names)

    AGENT = """
        import os, sys
        print("PID", os.getpid(), flush=True)
        path = f"/tmp/perf-{os.getpid()}.map"
        def before():
            return 1
        before()
        with open(path, "a") as f:
            f.write("10000 10 agent_one\\n")
        ns = {}
        exec("\\n".join(f"def f{i}(): return {i}" for i in range(500)), ns)
        for i in range(250):
            ns[f"f{i}"]()
        with open(path, MODE) as f:
            f.write("20000 10 agent_two\\n")
        for i in range(250, 500):
            ns[f"f{i}"]()
        print(sum(ns[f"f{i}"]() for i in range(500)))
        """

    def run_agent(self, mode):
        code = self.AGENT.replace("MODE", repr(mode))
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(500))))
        lines = read_map_file(map_path(pid))
        for line in lines:
            self.assertRegex(line, r"^[0-9a-f]+ [0-9a-f]+ \S")
        return [line.split(" ", 2)[2] for line in lines]

    def test_other_writer_appending(self):
        # Another writer of the process's map (a JIT, an agent) keeps its
        # lines, and ours stay whole lines around them.
        names = self.run_agent("a")
        for name in ("agent_one", "agent_two", "py::before:<string>",
                     "py::f0:<string>", "py::f499:<string>"):
            self.assertIn(name, names)
        self.assertLess(names.index("agent_one"),
                        names.index("py::f0:<string>"))

    def test_other_writer_truncating(self):
        # One that empties the file ("w") costs the lines written before,
        # never the process: it runs on and appends after the newcomer.
        names = self.run_agent("w")
        self.assertEqual(names[0], "agent_two")
        self.assertIn("py::f499:<string>", names)

    def test_stale_file_of_same_pid_is_emptied(self):
        # A map left by an earlier process that had our pid would make
        # perf give our addresses its names.
        pid1 = pid_namespace_command(self)
        path = map_path(1)
        with open(path, "w") as f:
            f.write("0 ffffffffffff stale_function\n")
        past = os.stat(path).st_mtime - 2
        os.utime(path, (past, past))
        proc = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c",
             "def g():\n    return 2\nprint(g())"],
            capture_output=True, text=True, env=env_with())
        forget_path(self, path)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, "2\n", ""))
        names = [line.split(" ", 2)[2] for line in read_map_file(path)]
        self.assertNotIn("stale_function", names)
        self.assertIn("py::g:<string>", names)

    def test_activate_after_another_evaluator_came_and_went(self):
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        code = """
            import os, sys, _testinternalcapi
            print("PID", os.getpid())
            _testinternalcapi.set_eval_frame_record([])
            _testinternalcapi.set_eval_frame_default()
            assert not sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active()
            def later():
                return 1
            later()
            """
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        pid = script_pid(proc.stdout)
        names = [line.split(" ", 2)[2]
                 for line in read_map_file(map_path(pid))]
        self.assertIn("py::later:<string>", names)

    def test_retry_after_failed_activation(self):
        # A file size limit stops an activation part-way through
        # describing the live functions: a lack of room, which is waited
        # out (the backend is on, one warning); once it is lifted, a
        # second activation describes every function, in the same file,
        # in both modes.
        code = """
            import os, resource, sys, warnings
            print("PID", os.getpid(), flush=True)
            ns = {}
            exec("\\n".join(f"def f{i}(): return {i}" for i in range(3000)),
                 ns)
            for i in range(3000):
                ns[f"f{i}"]()
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (60_000, resource.RLIM_INFINITY))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sys.activate_stack_trampoline(BACKEND)
            assert [str(m.message)[:39] for m in w] == [
                "perf trampoline: no room left in /tmp ("], [
                str(m.message) for m in w]
            assert sys.is_stack_trampoline_active()
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (resource.RLIM_INFINITY,) * 2)
            sys.activate_stack_trampoline(BACKEND)
            assert sys.is_stack_trampoline_active()
            """
        for backend, start in (("perf", "perf_jit"), ("perf_jit", "perf")):
            with self.subTest(backend=backend):
                proc, _ = run_and_forget(self, "-X", start, "-c",
                                         textwrap.dedent(code).replace(
                                             "BACKEND", repr(backend)))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                pid = script_pid(proc.stdout)
                if backend == "perf":
                    names = {line.split(" ", 2)[2]
                             for line in read_map_file(map_path(pid))}
                else:
                    names = {rec["name"] for rid, rec in
                             read_jitdump(jit_path(pid), pid)
                             if rid == JIT_CODE_LOAD}
                missing = [i for i in range(3000)
                           if f"py::f{i}:<string>" not in names]
                self.assertEqual(missing, [])

    @support.skip_if_sanitizer("the sanitizers keep freed memory in "
                               "quarantine", address=True)
    def test_memory_bounded_by_live_functions(self):
        # A long-running service: a million new functions, at most 100
        # alive at once.  From the 100,000th to the millionth the process's
        # resident memory grows by at most 8 MiB (it grew by about 120 MiB
        # with perf and 210 MiB with perf_jit before arenas whose
        # functions all died gave their pages back), and with perf_jit
        # its mappings by at most 16 (it was about 380; with perf, whose
        # map names the first arenas for good, under a limit that those
        # reach before the 100,000th).  A function made before the churn
        # and alive throughout is called after it.  With a switch of
        # backends half-way, the churn's own frames move to wider slots
        # while they run (their arena is then kept whole).
        code = CHURN + textwrap.dedent("""
            def rss():
                with open("/proc/self/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1]) * 1024
            def mappings():
                with open("/proc/self/maps") as f:
                    return sum(1 for _ in f)
            def keeper():
                return 7
            keeper()
            def run():
                before = None
                for i in churn(1_000_000):
                    if i == 100_000:
                        before = rss(), mappings()
                    if i == 500_000 and SWITCH:
                        sys.activate_stack_trampoline(SWITCH)
                return rss() - before[0], mappings() - before[1]
            growth, maps = run()
            print("growth", growth, maps, keeper(),
                  sys.is_stack_trampoline_active())
            """)
        for option, switch, limit in (
                ("perf", None, ()),
                ("perf", None, ("-X", "perf_tmp_limit=4M")),
                ("perf_jit", None, ()),
                ("perf", "perf_jit", ())):
            with self.subTest(option=option, switch=switch, limit=limit):
                proc, _ = run_and_forget(
                    self, "-X", option, *limit, "-c",
                    code.replace("SWITCH", repr(switch)))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stderr, "")
                words = proc.stdout.split()
                self.assertEqual(words[-2:], ["7", "True"])
                growth, maps = int(words[-4]), int(words[-3])
                self.assertLess(growth, 8 << 20, proc.stdout)
                if option == "perf_jit" or limit:
                    # (new files go into dead arenas' addresses; with perf
                    # once the arenas the map names take a quarter of the
                    # limit)
                    self.assertLessEqual(maps, 16, proc.stdout)

    def test_tmp_limit_for_replaced_files(self):
        # 300,000 new functions (100 alive): the files whose arenas'
        # addresses went to new files stay in /tmp up to the limit
        # (PYTHON_PERF_TMP_LIMIT, -X perf_tmp_limit over it), oldest
        # removed first; every file still mapped stays.  Without a limit
        # they take about 60 MiB with perf_jit.  With perf the files the
        # map names count first.
        code = CHURN + textwrap.dedent("""
            import glob
            def measure():
                # (called once first: no function of its gets a new
                # trampoline, which could replace a file, while it looks)
                pid = os.getpid()
                files = glob.glob(f"/tmp/py-perf-{pid}-*.so")
                with open("/proc/self/maps") as f:
                    mapped = {line.split()[-1] for line in f
                              if "py-perf" in line}
                unmapped = sum(os.stat(p).st_blocks * 512 for p in files
                               if p not in mapped)
                missing = [p for p in mapped if not os.path.exists(p)]
                return unmapped, len(files), missing
            measure()
            for _ in churn(300_000):
                pass
            unmapped, nfiles, missing = measure()
            print("unmapped", unmapped, "files", nfiles, missing,
                  "missing", len(missing), sys.is_stack_trampoline_active())
            """)
        for mode, env, args, limit in (
                ("perf_jit", "4M", (), 4 << 20),
                ("perf_jit", "64M", ("-X", "perf_tmp_limit=0"), 0),
                ("perf_jit", "unlimited", (), None),
                ("perf", "4M", (), 4 << 20)):
            with self.subTest(mode=mode, env=env, args=args):
                proc, _ = run_and_forget(
                    self, "-X", mode, *args, "-c", code,
                    env=env_with(PYTHON_PERF_TMP_LIMIT=env))
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stderr, "")
                words = proc.stdout.split()
                unmapped = int(words[words.index("unmapped") + 1])
                self.assertEqual(words[-3:], ["missing", "0", "True"],
                                 proc.stdout)
                if limit is None:
                    self.assertGreater(unmapped, 32 << 20, proc.stdout)
                else:
                    self.assertLessEqual(unmapped, limit, proc.stdout)

    def record_innermost(self, script, *options):
        """`script` run with `options` under perf record (-g, or
        --call-graph dwarf without frame pointers): its stdout, its pid,
        and how many samples each Python function was the innermost of."""
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999",
                         *(("-g",) if HAVE_FRAME_POINTERS
                           else ("--call-graph", "dwarf")),
                         "-o", data, "--", sys.executable, *options, script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("RuntimeWarning", proc.stderr)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        innermost = {}
        for sample in parse_perf_script(self.perf_script(data)):
            names = [sym.rsplit(":", 1)[0] for sym, _ in sample
                     if sym.startswith("py::")]
            if names:
                innermost[names[0]] = innermost.get(names[0], 0) + 1
        return proc.stdout, pid, innermost

    def assert_no_churn_samples(self, innermost):
        """An earlier owner of a spinner's address is a churn function
        ("[abc]N") or a spinner: no churn function may take samples (a
        sample may fall in one that returns at once; other code of the
        process, slow under a sanitizer, takes samples of its own)."""
        wrong = {name: n for name, n in innermost.items()
                 if re.fullmatch(r"py::[abc]\d+", name) and n > 3}
        self.assertEqual(wrong, {}, innermost)

    @requires_perf
    def test_reused_addresses_named_right(self):
        # perf_jit: a dead arena's addresses go to a new file.  The
        # process makes and drops functions in three phases, each a few
        # arenas' worth (2,730 functions to an arena), with a function
        # that spins for 40 ms of CPU every 1,000: the spinners of the later
        # phases run at addresses that earlier functions had (the dump's
        # loads say which), and perf, reading each file's mapping at its
        # time, names every spinner's samples after it, never after an
        # earlier owner of its address (and unwinds them with the new
        # file's tables, without frame pointers).  A function alive
        # throughout keeps its address.
        source = textwrap.dedent("""
            import os, sys, time, types
            print("PID", os.getpid(), flush=True)
            def template():
                return 1
            def spinner():
                # (40 ms of the process's own CPU time, however busy the
                # machine)
                end = time.process_time() + 0.04
                while time.process_time() < end:
                    pass
            def keeper():
                return 1
            keeper()
            for phase in "abc":
                for i in range(9000):
                    if i % 1000 == 500:
                        name = f"hot_{phase}{i // 1000}"
                        code = spinner.__code__
                    else:
                        name = f"{phase}{i}"
                        code = template.__code__
                    code = code.replace(co_name=name, co_qualname=name)
                    types.FunctionType(code, globals())()
            """)
        script = make_script(self.tmp, "reuse", source)
        _, pid, innermost = self.record_innermost(script, "-X", "perf_jit")
        loads = [(rec["addr"], rec["name"].rsplit(":", 1)[0])
                 for rid, rec in read_jitdump(jit_path(pid), pid)
                 if rid == JIT_CODE_LOAD]
        owners = {}
        reused = []
        for addr, name in loads:
            if name.startswith("py::hot_") and addr in owners:
                reused.append(name)
            owners.setdefault(addr, name)
        self.assertGreaterEqual(len(reused), 5, reused)
        # A function alive throughout keeps its addresses to itself.
        keeper = [addr for addr, name in loads if name == "py::keeper"]
        self.assertEqual(len(keeper), 1, keeper)
        self.assertEqual([name for addr, name in loads
                          if addr == keeper[0]], ["py::keeper"])
        for name in reused:
            self.assertGreaterEqual(innermost.get(name, 0), 10,
                                    (name, innermost))
        self.assert_no_churn_samples(innermost)

    @requires_perf
    def test_reused_addresses_named_by_files(self):
        # perf: once the arenas the map names take a quarter of the limit,
        # later arena files are named by themselves alone and their
        # addresses go to new files (the replaced ones stay: the limit
        # keeps them).  The process knows which: after each spinner
        # (40 ms of CPU, its trampoline in the newest file) it reads its
        # own mappings and says whether that file took an earlier file's
        # addresses.  perf, reading each file at its mapping's time, must
        # name every spinner after itself, never after an earlier owner.
        source = textwrap.dedent("""
            import os, sys, time, types
            print("PID", os.getpid(), flush=True)
            def template():
                return 1
            def spinner():
                end = time.process_time() + 0.04
                while time.process_time() < end:
                    pass
            owners = {}
            def newest_reused():
                files = {}
                with open("/proc/self/maps") as f:
                    for line in f:
                        path = line.split()[-1]
                        if "/py-perf-" in path:
                            start = int(line.split("-")[0], 16)
                            files[path] = min(start, files.get(path, start))
                # (/tmp/py-perf-PID-N.so: the largest N)
                newest = max(files, key=lambda p: int(p[:-3].split("-")[-1]))
                for path, start in files.items():
                    owners.setdefault(start, set()).add(path)
                return len(owners[files[newest]]) > 1
            newest_reused()
            for phase in "abc":
                for i in range(40000):
                    if i % 4000 == 2000:
                        name = f"hot_{phase}{i // 4000}"
                        code = spinner.__code__
                    else:
                        name = f"{phase}{i}"
                        code = template.__code__
                    code = code.replace(co_name=name, co_qualname=name)
                    types.FunctionType(code, globals())()
                    if name.startswith("hot_"):
                        print("HOT", name, newest_reused())
            """)
        script = make_script(self.tmp, "reuse", source)
        out, _, innermost = self.record_innermost(
            script, "-X", "perf", "-X", "perf_tmp_limit=16M")
        hot = [line.split()[1:] for line in out.splitlines()
               if line.startswith("HOT ")]
        self.assertEqual(len(hot), 30, out)
        reused = [name for name, was in hot if was == "True"]
        self.assertGreaterEqual(len(reused), 5, hot)
        for name, _ in hot:
            self.assertGreaterEqual(innermost.get("py::" + name, 0), 10,
                                    (name, innermost))
        self.assert_no_churn_samples(innermost)

    def test_sub_interpreter_cannot_turn_main_off(self):
        # Trampolines are the main interpreter's: a sub-interpreter is
        # told it has none, cannot activate them, and its deactivate does
        # nothing.
        import_helper.import_module("_xxsubinterpreters")
        code = '''
            import os, sys, _xxsubinterpreters as interpreters
            print("PID", os.getpid())
            sub = interpreters.create()
            interpreters.run_string(sub, """if 1:
                import sys
                assert not sys.is_stack_trampoline_active()
                try:
                    sys.activate_stack_trampoline("perf")
                except RuntimeError:
                    pass
                else:
                    raise AssertionError("activated in a sub-interpreter")
                sys.deactivate_stack_trampoline()
                """)
            interpreters.destroy(sub)
            print(sys.is_stack_trampoline_active())
            '''
        proc, _ = run_and_forget(self, "-X", "perf", "-c",
                                 textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split()[-1], "True")


if __name__ == "__main__":
    unittest.main()
