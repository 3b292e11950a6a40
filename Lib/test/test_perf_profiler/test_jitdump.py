"""/tmp/jit-PID.dump as -X perf_jit writes it, read strictly without perf,
and TestPerfJit: sampling with `perf record -k 1 --call-graph dwarf` and
`perf inject --jit`."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, JIT_CODE_CLOSE, JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD,
    JIT_CODE_UNWINDING_INFO, NESTED, NESTED_NAMES, NO_TRAMPOLINE, cfa_table,
    env_with, expected_cfa_rules, forget_files, jit_path,
    map_path, parse_perf_script, perf_command, read_jitdump, read_map_file,
    requires_perf_inject_jit, run_and_forget, script_pid, written_since)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    FORK_SOURCE, KILL_ITSELF, MANY_FUNCTIONS, PerfTestCase,
    assert_python_stacks, check_planted_symlink, setUpModule, tearDownModule)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestJitDumpFile(unittest.TestCase):
    """The dump itself, without perf."""

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def run_jit(self, code, *args, env=None):
        proc, pids = run_and_forget(self, *args, "-c", textwrap.dedent(code),
                                    env=env)
        self.assertEqual(len(pids), 1, proc.stdout + proc.stderr)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc, pids[0]

    SOURCE = """
        import os, sys
        print("PID", os.getpid(), flush=True)
        class K:
            def m(self):
                return [x for x in range(2)]
        def f(n):
            return n
        for i in range(3):
            f(i); K().m()
        """

    def check_dump(self, pid, must_name=()):
        records = read_jitdump(jit_path(pid), pid)
        self.assertEqual(records[-1][0], JIT_CODE_CLOSE)
        loads = []
        indexes = []
        for i, (rid, rec) in enumerate(records):
            if rid != JIT_CODE_LOAD:
                continue
            # debug info, then unwinding info, then the load
            self.assertGreaterEqual(i, 2)
            (did, dbg), (uid, unw) = records[i - 2], records[i - 1]
            self.assertEqual((did, uid),
                             (JIT_CODE_DEBUG_INFO, JIT_CODE_UNWINDING_INFO))
            self.assertEqual(dbg["addr"], rec["addr"])
            self.assertTrue(rec["name"].startswith("py::"), rec["name"])
            filename = rec["name"].rsplit(":", 1)[-1]
            for eaddr, line, discrim, fname in dbg["entries"]:
                self.assertTrue(rec["addr"] <= eaddr
                                <= rec["addr"] + rec["size"])
                self.assertGreaterEqual(line, 1)
                self.assertEqual(fname, filename)
            self.assertEqual(unw["mapped"], len(unw["unwind"]))
            # cfa_table() reads x86_64 rules; the aarch64 and riscv64
            # ones are checked the same way, at every instruction, by
            # make check-cross (tools/cross/unwind.py).
            if os.uname().machine == "x86_64":
                rows, eh_size = cfa_table(unw["unwind"], rec["size"])
                self.assertEqual(unw["hdr_size"],
                                 len(unw["unwind"]) - eh_size)
                expected = expected_cfa_rules(rec["code"])
                # exact at every instruction boundary
                for at, rule in expected.items():
                    self.assertEqual(rows[at], rule,
                                     f"CFA rule at +{at} of {rec['name']}")
            indexes.append(rec["index"])
            loads.append(rec)
        self.assertEqual(indexes, sorted(set(indexes)))
        # perf maps code + unwind data: no other trampoline inside that
        addrs = sorted(r["addr"] for r in loads)
        span = ((loads[0]["size"] + 7) & ~7) + len(
            records[[r[0] for r in records].index(JIT_CODE_UNWINDING_INFO)]
            [1]["unwind"])
        for a, b in zip(addrs, addrs[1:]):
            self.assertGreaterEqual(b - a, span)
        names = {r["name"] for r in loads}
        for name in must_name:
            self.assertIn(name, names)
        return records

    def test_dump_is_strictly_valid(self):
        proc, pid = self.run_jit(self.SOURCE, "-X", "perf_jit")
        self.assertEqual(proc.stderr, "")
        self.check_dump(pid, ["py::f:<string>", "py::K.m:<string>",
                              "py::K.m.<locals>.<listcomp>:<string>"])
        st = os.stat(jit_path(pid))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_many_functions(self):
        proc, pid = self.run_jit(MANY_FUNCTIONS, "-X", "perf_jit")
        self.assertGreater(os.path.getsize(jit_path(pid)),
                           4 * 64 * 1024)
        self.check_dump(pid, [f"py::f{i}:<string>" for i in range(3000)])

    def test_env_and_sys(self):
        _, pid = self.run_jit(self.SOURCE,
                              env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))
        self.check_dump(pid, ["py::f:<string>"])
        _, pid = self.run_jit(
            "import sys\n"
            "sys.activate_stack_trampoline('perf_jit')\n"
            "assert sys.is_stack_trampoline_active()\n"
            + textwrap.dedent(self.SOURCE))
        self.check_dump(pid, ["py::f:<string>"])
        # -X perf_jit wins over -X perf, the JIT variable over the other
        for args, env in ((("-X", "perf", "-X", "perf_jit"), {}),
                          ((), {"PYTHONPERFSUPPORT": "1",
                                "PYTHON_PERF_JIT_SUPPORT": "1"})):
            _, pid = self.run_jit(self.SOURCE, *args, env=env_with(**env))
            self.check_dump(pid, ["py::f:<string>"])
            self.assertFalse(written_since(map_path(pid), self.since))

    def test_switching_backends(self):
        proc, pid = self.run_jit("""
            import os, sys
            print("PID", os.getpid(), flush=True)
            def under_perf():
                return 1
            def under_jit():
                return 2
            def again_perf():
                return 3
            sys.activate_stack_trampoline("perf")
            under_perf()
            # more trampolines made 16 bytes apart, too close for the
            # jitdump: switching gives them new ones, properly spaced
            helpers = [eval(f"lambda: {i}") for i in range(5)]
            for h in helpers:
                h()
            sys.activate_stack_trampoline("perf_jit")
            for h in helpers:
                h()
            under_jit(); under_perf()
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            again_perf(); under_jit(); under_perf()
            print(under_perf() + under_jit() + again_perf())
            """)
        self.assertEqual(proc.stdout.split()[-1], "6")
        mapped = {line.split(" ", 2)[2]
                  for line in read_map_file(map_path(pid))}
        for name in ("under_perf", "under_jit", "again_perf"):
            self.assertIn(f"py::{name}:<string>", mapped)
        self.check_dump(pid, ["py::under_perf:<string>",
                              "py::under_jit:<string>"])

    def test_fork_child_records_its_own_ids(self):
        proc, pid = self.run_jit(FORK_SOURCE, "-X", "perf_jit")
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        forget_files(self, child)
        # The child's dump is strictly valid too (no CLOSE: os._exit) and
        # its code loads carry the child's pid and thread id, not the
        # parent's (the forking thread's id changes in the child).
        records = read_jitdump(jit_path(child), child,
                               exited_normally=False)
        loads = {r["name"]: r for rid, r in records if rid == JIT_CODE_LOAD}
        self.assertIn("py::in_child:<string>", loads)
        self.assertIn("py::in_both:<string>", loads)
        self.assertIn("py::<module>:<string>", loads)
        self.assertNotIn("py::in_parent:<string>", loads)
        for rec in loads.values():
            self.assertEqual((rec["pid"], rec["tid"]), (child, child))
        self.check_dump(pid, ["py::in_parent:<string>"])

    def test_planted_symlink_is_not_followed(self):
        check_planted_symlink(self, "/tmp/jit-1.dump", "perf_jit")


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@requires_perf_inject_jit
class TestPerfJit(PerfTestCase):
    """perf record --call-graph dwarf + perf inject --jit, on this build
    (make test runs it on the no-frame-pointer build too)."""

    def record_jit(self, source, *python_args, env=None, returncode=0):
        script = make_script(self.tmp, "perf_script", source)
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(
            perf_command("record", "-F", "999", "-k", "1", "--call-graph",
                         "dwarf", "-o", data, "--", sys.executable,
                         *python_args, script),
            capture_output=True, text=True,
            env=env if env is not None else env_with(), timeout=300)
        self.assertEqual(proc.returncode, returncode, proc.stderr)
        pid = script_pid(proc.stdout)
        forget_files(self, pid)
        jit = self.inject_jit(data, pid)
        return script, jit, parse_perf_script(self.perf_script(jit))

    def test_xoption(self):
        script, _, samples = self.record_jit(NESTED + "baz(10_000_000)\n",
                                             "-X", "perf_jit")
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_killed_process_is_named(self):
        script, _, samples = self.record_jit(NESTED + KILL_ITSELF,
                                             "-X", "perf_jit",
                                             returncode=-signal.SIGKILL)
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_environment_variable(self):
        script, _, samples = self.record_jit(
            NESTED + "baz(10_000_000)\n",
            env=env_with(PYTHON_PERF_JIT_SUPPORT="1"))
        assert_python_stacks(self, samples, script,
                             NESTED_NAMES + ("<module>",))

    def test_sys_activate(self):
        code = NESTED + ('sys.activate_stack_trampoline("perf_jit")\n'
                         "baz(10_000_000)\n")
        script, _, samples = self.record_jit(code)
        # <module> was already running when the backend was activated.
        assert_python_stacks(self, samples, script, NESTED_NAMES)

    def test_source_lines(self):
        script, jit, _ = self.record_jit(NESTED + "baz(10_000_000)\n",
                                         "-X", "perf_jit")
        out = self.perf_script(jit, "-F", "ip,sym,srcline")
        base = os.path.basename(script)
        lines = {name: NESTED.splitlines().index(f"def {name}(n):") + 1
                 for name in ("foo", "bar", "baz")}
        for name, line in lines.items():
            self.assertRegex(
                out, rf"py::{name}:{re.escape(script)}\s*\n\s*"
                     rf"\S*{re.escape(base)}:{line}\b")


if __name__ == "__main__":
    unittest.main()
