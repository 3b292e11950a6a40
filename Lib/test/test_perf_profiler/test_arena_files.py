"""Arenas of trampolines as ELF files (/tmp/py-perf-PID-N.so) that perf,
binutils and elfutils read by themselves: their layout as readelf and
eu-readelf see it, the mapping, the unwind tables, DWARF unwinding under
`perf record --call-graph dwarf` without perf inject, forks, a file
planted or left at the name, a killed process, and /tmp mounted noexec."""

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support import os_helper
from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, NESTED, NESTED_NAMES,
    NO_TRAMPOLINE, arena_number, arena_paths, env_with, forget_files,
    forget_path, forget_process, map_path, perf_command, read_map_file,
    requires_bpftrace, requires_perf, run_and_forget, written_since)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    FORK_SOURCE, PerfTestCase, assert_python_stacks, noexec_tmp_command,
    pid_namespace_command, setUpModule, tearDownModule)

READELF = shutil.which("readelf")
EU_READELF = shutil.which("eu-readelf")
ADDR2LINE = shutil.which("addr2line")
EU_ADDR2LINE = shutil.which("eu-addr2line")
DWARFDUMP = shutil.which("llvm-dwarfdump") or shutil.which("llvm-dwarfdump-14")

# Runs a few functions, prints its pid and the lines of /proc/self/maps of
# its arena files, then waits for a line on stdin (or exits).
SHOW_MAPS = """\
import os, sys
print("PID", os.getpid(), flush=True)
def f(n):
    return n + 1
def g(n):
    return f(n) * 2
for i in range(3):
    g(i)
for line in open("/proc/self/maps"):
    if "/py-perf-" in line:
        print("MAP", line.strip())
sys.stdout.flush()
"""


def readelf(*args):
    # (in English: one of its warnings is expected)
    proc = subprocess.run([READELF, "-W", *args], capture_output=True,
                          text=True, env={**os.environ, "LC_ALL": "C"})
    return proc


def symbols(path):
    """{name: (value, size)} of the FUNC symbols of `path`, by readelf."""
    proc = readelf("-s", path)
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    found = {}
    for line in proc.stdout.splitlines():
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[3] == "FUNC":
            found[fields[7]] = (int(fields[1], 16), int(fields[2]))
    return found


def sections(path):
    """{name: (type, addr, offset, size, flags)} by readelf -S."""
    proc = readelf("-S", path)
    if proc.returncode != 0:
        raise AssertionError(proc.stderr)
    found = {}
    for m in re.finditer(r"\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)"
                         r"\s+([0-9a-f]+)\s+[0-9a-f]+\s+([A-Z]*)",
                         proc.stdout):
        name, typ, addr, off, size, flags = m.groups()
        found[name] = (typ, int(addr, 16), int(off, 16), int(size, 16),
                       flags)
    return found


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
@unittest.skipIf(READELF is None, "needs readelf (binutils)")
class TestArenaFile(unittest.TestCase):
    """The file and its mapping, read by binutils and elfutils."""

    def setUp(self):
        # Files last written before this are not the test's children's.
        self.since = time.time() - 1

    def run_code(self, code, *args):
        proc, pids = run_and_forget(self, *args, "-c", textwrap.dedent(code))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(pids), 1, proc.stdout)
        self.assertNotIn("Warning", proc.stderr)
        return proc, pids[0]

    def check_file(self, path, pid, names, sealed=True):
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_uid, os.geteuid())
        # binutils reads it without a word of complaint ...
        for args in (["-h"], ["-l"], ["-S"], ["-s"], ["-n"],
                     ["--debug-dump=frames"],
                     ["--debug-dump=info,line,aranges"]):
            proc = readelf(*args, path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stderr, "", args)
        self.assertNotIn(".gnu_debuglink", sections(path))
        # ... and so does elfutils ...
        if EU_READELF is not None:
            for args in (["-a"], ["--debug-dump=info", "--debug-dump=line",
                                   "--debug-dump=aranges"]):
                proc = subprocess.run([EU_READELF, *args, path],
                                      capture_output=True, text=True)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertNotIn("invalid", proc.stderr.lower())
        # ... and LLVM's DWARF verifier.
        if DWARFDUMP is not None:
            proc = subprocess.run([DWARFDUMP, "--verify", path],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn("No errors.", proc.stdout)
        secs = sections(path)
        text = secs[".text"]
        self.assertEqual(text[0], "PROGBITS")
        self.assertEqual(text[1], text[2], "vaddr == file offset")
        self.assertEqual(text[4], "AX")
        for name in (".eh_frame", ".eh_frame_hdr", ".note.gnu.build-id"):
            self.assertIn(name, secs)
            self.assertEqual(secs[name][1], secs[name][2])
        # The tables start at a page of their own, after the mapped part.
        self.assertEqual(secs[".symtab"][2] % 4096, 0)
        self.assertGreater(secs[".symtab"][2], secs[".eh_frame_hdr"][2])
        syms = symbols(path)
        for name in names:
            self.assertIn(name, syms)
        code = open(path, "rb").read()
        template = None
        for name, (value, size) in syms.items():
            self.assertTrue(name.startswith("py::"), name)
            self.assertTrue(text[1] <= value < value + size
                            <= text[1] + text[3], name)
            # every slot a copy of the same template
            body = code[value:value + size]
            template = template or body
            self.assertEqual(body, template, name)
        # one FDE per slot, each covering its slot exactly
        proc = readelf("--debug-dump=frames", path)
        fdes = re.findall(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                          proc.stdout)
        starts = sorted(int(a, 16) for a, _ in fdes)
        self.assertGreaterEqual(len(fdes), len(syms))
        self.assertEqual(len(set(starts)), len(starts))
        for value, size in syms.values():
            self.assertIn(value, starts)
        for a, b in fdes:
            self.assertEqual(int(b, 16) - int(a, 16), len(template))
        # the build-id: once the file is sealed (its names final), and
        # until then none
        proc = readelf("-n", path)
        if sealed:
            self.assertRegex(proc.stdout, r"Build ID: [0-9a-f]{40}")
        else:
            self.assertNotIn("Build ID", proc.stdout)
            self.assertNotIn("GNU", proc.stdout)
        return syms

    def test_file_and_mapping(self):
        proc, pid = self.run_code(SHOW_MAPS, "-X", "perf")
        paths = arena_paths(pid, self.since)
        self.assertTrue(paths, "no arena file")
        self.check_file(paths[0], pid, [
            f"py::g:<string>", f"py::f:<string>"])
        maps = [line.split() for line in proc.stdout.splitlines()
                if line.startswith("MAP ")]
        self.assertTrue(maps)
        by_path = {}
        for fields in maps:
            start, end = (int(x, 16) for x in fields[1].split("-"))
            perms, offset, path = fields[2], int(fields[3], 16), fields[6]
            self.assertIn(path, paths)
            by_path.setdefault(path, []).append((start, end, perms, offset))
        for path, mappings in by_path.items():
            # The code read+execute from the file's first byte, never
            # writable; the tables (symbols, names, line table) shared
            # and writable, not executable, from the page after the code,
            # at the address their offset says (one module for readers),
            # while the arena has slots to name.
            self.assertEqual(len(mappings), 2, mappings)
            (start, end, perms, offset), tables = sorted(mappings)
            self.assertEqual((perms, offset), ("r-xp", 0))
            self.assertEqual(tables[2], "rw-s")
            self.assertEqual(tables[0], end)
            self.assertEqual(tables[3], end - start)

    @unittest.skipIf(ADDR2LINE is None, "needs addr2line (binutils)")
    def test_source_lines(self):
        # Every trampoline's address has its function's file and first
        # line in the file's line table, for binutils (which perf runs)
        # and elfutils (which hotspot uses).
        tmp = tempfile.mkdtemp(prefix="test_perf_")
        self.addCleanup(shutil.rmtree, tmp)
        script = make_script(tmp, "lines", textwrap.dedent("""\
            import os
            print("PID", os.getpid(), flush=True)

            def first():
                return 1


            class Second:
                def method(self):
                    return first()
            def third():
                return Second().method()
            third()
            g = {}
            exec(compile("def rel():\\n    return 1\\n", "rel/x.py", "exec"), g)
            g["rel"]()
            """))
        expected = {"first": 4, "Second.method": 9, "third": 11,
                    "<module>": 1}
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                proc, pids = run_and_forget(self, "-X", backend, script)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                paths = arena_paths(pids[0], self.since)
                self.assertTrue(paths, "no arena file")
                syms = self.check_file(paths[0], pids[0], [
                    f"py::{name}:{script}" for name in expected])
                tools = [[ADDR2LINE, "-e", paths[0]]]
                if EU_ADDR2LINE is not None:
                    tools.append([EU_ADDR2LINE, "-e", paths[0]])
                for name, line in expected.items():
                    value, size = syms[f"py::{name}:{script}"]
                    for tool in tools:
                        # the first and the last byte of the trampoline
                        out = subprocess.run(
                            [*tool, hex(value), hex(value + size - 1)],
                            capture_output=True, text=True, check=True)
                        self.assertEqual(out.stdout.split(),
                                         [f"{script}:{line}"] * 2,
                                         (tool, name))
                # A relative file name: relative to the unit's directory,
                # ".", with no directory made up ("/rel/x.py" once).
                value, size = symbols(paths[0])["py::rel:rel/x.py"]
                for tool in tools:
                    out = subprocess.run([*tool, hex(value)],
                                         capture_output=True, text=True,
                                         check=True)
                    self.assertEqual(out.stdout.strip(), "././rel/x.py:1",
                                     tool)
                # A slot not handed out yet (the last one of the last
                # file) has no line.
                last = sections(paths[-1])[".text"]
                values = sorted(v for v, _ in symbols(paths[-1]).values())
                free = last[1] + last[3] - 1
                self.assertLess(values[-1] + size, free)
                out = subprocess.run([ADDR2LINE, "-e", paths[-1], hex(free)],
                                     capture_output=True, text=True,
                                     check=True)
                self.assertRegex(out.stdout.strip(), r":(\?|0)$")

    def test_perf_jit_also_uses_files(self):
        proc, pid = self.run_code(SHOW_MAPS, "-X", "perf_jit")
        paths = arena_paths(pid, self.since)
        self.assertTrue(paths, "no arena file")
        syms = self.check_file(paths[0], pid, ["py::f:<string>"])
        # spaced as the jitdump needs, and each slot still its own FDE
        values = sorted(v for v, _ in syms.values())
        self.assertTrue(all(b - a >= 64 for a, b in zip(values, values[1:])))

    def test_many_functions_few_files(self):
        code = """
            import os
            print("PID", os.getpid(), flush=True)
            ns = {}
            exec("\\n".join(f"def f{i}(): return {i}" for i in range(5000)),
                 ns)
            for i in range(5000):
                ns[f"f{i}"]()
            """
        proc, pid = self.run_code(code, "-X", "perf")
        paths = arena_paths(pid, self.since)
        names = {}
        for path in paths:
            names.update(symbols(path))
        for i in (0, 1234, 4999):
            self.assertIn(f"py::f{i}:<string>", names)
        self.assertLessEqual(len(paths), 10, paths)
        # the perf map is written as before, line for line
        lines = read_map_file(map_path(pid))
        mapped = {line.split(" ", 2)[2] for line in lines}
        self.assertIn("py::f4999:<string>", mapped)
        self.assertGreaterEqual(len(mapped), 5000)

    def test_deaths_after_many_arenas(self):
        # Code objects made before a dozen arenas die after them: each
        # death finds its slot among the arenas (a slot that kept a dead
        # code object would be described again, from freed memory, when
        # another backend is activated), and that backend describes the
        # live ones.
        code = """
            import os, sys
            print("PID", os.getpid(), flush=True)
            def template():
                return 1
            def new(name):
                code = template.__code__.replace(co_name=name,
                                                 co_qualname=name)
                return type(template)(code, {})
            old = [new(f"old{i}") for i in range(300)]
            for f in old:
                f()
            alive = []
            for i in range(30000):
                f = new(f"churn{i}")
                f()
                alive.append(f)
                if len(alive) > 100:
                    del alive[:50]
            keep = old[::2]
            del old, alive, f
            sys.activate_stack_trampoline("perf")
            for f in keep:
                f()
            """
        proc, pid = self.run_code(code, "-X", "perf_jit")
        self.assertGreaterEqual(len(arena_paths(pid, self.since)), 10)
        named = {line.split(" ", 2)[2]
                 for line in read_map_file(map_path(pid))}
        old = {n for n in named if n.startswith("py::old")}
        self.assertEqual(old, {f"py::old{i}:<string>"
                               for i in range(0, 300, 2)})
        self.assertFalse([n for n in named if n.startswith("py::churn")])

    def test_killed_process_leaves_readable_file(self):
        code = """
            import os, signal
            print("PID", os.getpid(), flush=True)
            def f(): return 1
            def g(): return f()
            g()
            os.kill(os.getpid(), signal.SIGKILL)
            """
        proc, pids = run_and_forget(self, "-X", "perf", "-c",
                                    textwrap.dedent(code))
        self.assertEqual(proc.returncode, -signal.SIGKILL)
        paths = arena_paths(pids[0], self.since)
        self.assertTrue(paths)
        # (killed with names still to come: never sealed, so that no
        # cache keeps it under a build-id; readable by its name.  SIGKILL
        # runs no handler: a crash does, see test_sealed_at_a_crash)
        newest = max(paths, key=arena_number)
        self.check_file(newest, pids[0],
                        ["py::f:<string>", "py::g:<string>"], sealed=False)

    def test_fork_child_has_files_of_its_own(self):
        proc, pids = run_and_forget(self, "-X", "perf", "-c", FORK_SOURCE,
                                    pids=r"^(?:PID|CHILD) (\d+)$")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(pids), 2, proc.stdout)
        parent, child = pids
        parent_names, child_names = {}, {}
        for path in arena_paths(parent, self.since):
            parent_names.update(symbols(path))
        child_paths = arena_paths(child, self.since)
        for path in child_paths:
            child_names.update(symbols(path))
        # numbered from 0 under the child's own pid: a name below its first
        # is taken by a file another process left before the test
        self.assertTrue(child_paths)
        for n in range(arena_number(child_paths[0])):
            taken = f"/tmp/py-perf-{child}-{n}.so"
            self.assertTrue(os.path.exists(taken), taken)
            self.assertFalse(written_since(taken, self.since), taken)
        self.assertIn("py::in_both:<string>", parent_names)
        self.assertIn("py::in_parent:<string>", parent_names)
        self.assertNotIn("py::in_child:<string>", parent_names)
        self.assertIn("py::in_child:<string>", child_names)
        # the child's files name only what the child made: in_both() runs
        # on the trampoline it inherited, in the parent's file
        self.assertNotIn("py::in_both:<string>", child_names)

    def test_sealed_at_exit_not_by_a_child(self):
        # A file gets its build-id when its names are final: a child that
        # ends with os._exit() (no finalization) seals its own files and
        # never the parent's, which the parent seals when it exits.
        code = textwrap.dedent("""\
            import os, sys
            print("PID", os.getpid(), flush=True)
            def in_parent():
                return 1
            def in_child():
                return 2
            in_parent()
            child = os.fork()
            if child == 0:
                in_child()
                os._exit(0)
            os.waitpid(child, 0)
            print("CHILD", child, flush=True)
            sys.stdin.readline()
            """)
        proc = subprocess.Popen(
            [sys.executable, "-X", "perf", "-c", code], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env_with())
        forget_process(self, proc)
        try:
            parent = int(proc.stdout.readline().split()[1])
            child = int(proc.stdout.readline().split()[1])
            forget_files(self, child)

            def sealed(pid):
                return {path: "Build ID" in readelf("-n", path).stdout
                        for path in arena_paths(pid, self.since)}
            running = sealed(parent)
            ended = sealed(child)
        finally:
            proc.stdin.close()
            proc.wait()
        self.assertEqual(proc.returncode, 0)
        self.assertTrue(ended)
        self.assertTrue(all(ended.values()), ended)
        newest = max(running, key=arena_number)
        self.assertFalse(running[newest], running)
        self.assertTrue(all(sealed(parent).values()), sealed(parent))

    @support.skip_if_sanitizer("AddressSanitizer turns a fault into its "
                               "own report and exit status", address=True)
    def test_sealed_at_a_crash(self):
        # A crash seals the file that takes names before the process dies
        # of the same signal (so that a core holds its build-id); with
        # faulthandler on (from the start, or enabled later), its report
        # is there too.  The signals' actions
        # still look like the default from Python.
        code = textwrap.dedent("""\
            import os, signal, sys
            print("PID", os.getpid(), flush=True)
            print(signal.getsignal(signal.SIGSEGV) == signal.SIG_DFL,
                  signal.getsignal(signal.SIGABRT) == signal.SIG_DFL,
                  flush=True)
            def crash():
                if sys.argv[1] == "abort":
                    os.abort()
                if sys.argv[1] == "late":
                    import faulthandler
                    faulthandler.enable()
                import ctypes
                ctypes.string_at(0)
            crash()
            """)
        import resource

        def no_core():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for how, args, sig in (("segv", (), signal.SIGSEGV),
                               ("abort", (), signal.SIGABRT),
                               ("segv", ("-X", "faulthandler"),
                                signal.SIGSEGV),
                               ("late", (), signal.SIGSEGV)):
            with self.subTest(how=how, args=args):
                proc, pids = run_and_forget(
                    self, "-X", "perf", *args, "-c", code, how,
                    preexec_fn=no_core, timeout=60)
                self.assertEqual(proc.returncode, -sig, proc.stderr)
                # (faulthandler's own handlers look like none, as with the
                # feature off)
                self.assertEqual(proc.stdout.splitlines()[1],
                                 "False False" if args else "True True")
                if args or how == "late":
                    self.assertIn("Fatal Python error", proc.stderr)
                paths = arena_paths(pids[0], self.since)
                self.assertTrue(paths)
                for path in paths:
                    self.assertIn("Build ID", readelf("-n", path).stdout,
                                  path)

    def test_descriptor_closed_behind_our_back(self):
        # A daemon closes every descriptor after fork() and opens its log,
        # which may get the number of the arena file's descriptor: new
        # functions must not write a byte into the log.
        code = """
            import os, sys
            print("PID", os.getpid(), flush=True)
            def first(): return 1
            first()
            os.closerange(3, 4096)
            log = os.path.join(sys.argv[1], "log")
            fds = [os.open(log + str(i), os.O_RDWR | os.O_CREAT, 0o600)
                   for i in range(8)]
            for fd in fds:
                os.write(fd, b"log line\\n")
            ns = {}
            exec("\\n".join(f"def g{i}(): return {i}" for i in range(600)),
                 ns)
            print(sum(ns[f"g{i}"]() for i in range(600)))
            for fd in fds:
                os.close(fd)
            """
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        proc, pids = run_and_forget(self, "-X", "perf", "-c",
                                    textwrap.dedent(code), tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(600))))
        for i in range(8):
            with open(os.path.join(tmp, f"log{i}"), "rb") as f:
                self.assertEqual(f.read(), b"log line\n")

    def test_planted_symlink_and_stale_file(self):
        pid1 = pid_namespace_command(self)
        # In a fresh pid namespace the interpreter is pid 1: its first
        # names are known.
        first, second, third = (f"/tmp/py-perf-1-{n}.so" for n in range(3))
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        for path in (first, second, third):
            os_helper.unlink(path)
        os.symlink(victim, first)
        self.addCleanup(os_helper.unlink, first)
        # a stale file of an earlier pid 1 (ours, as a dead process leaves
        # it) at the next name
        with open(second, "w") as f:
            f.write("stale\n")
        self.addCleanup(os_helper.unlink, second)
        proc = subprocess.run(
            [*pid1, sys.executable, "-X", "perf",
             "-c", "def f(): return 45\nprint('output intact'); print(f())"],
            capture_output=True, text=True, env=env_with())
        forget_path(self, "/tmp/perf-1.map")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, "output intact\n45\n")
        self.assertNotIn("Warning", proc.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertTrue(os.path.islink(first))
        # Both left alone (a file of our pid may be a live process's, in
        # another pid namespace: cutting it would kill that process); the
        # arenas start at the first free name.
        with open(second) as f:
            self.assertEqual(f.read(), "stale\n")
        self.assertIn("py::f:<string>", symbols(third))

    @requires_bpftrace
    @unittest.skipUnless(HAVE_FRAME_POINTERS, "bpftrace's user stacks "
                         "follow frame pointers, which this build omits")
    def test_bpftrace_names_functions_the_map_does_not(self):
        # With -X perf_tmp_limit=0 the map names no trampoline file (as
        # for the arenas of a long run past the limit's quarter): bpftrace
        # (bcc's symbolizer) names the Python frames of a running process
        # from the files themselves.
        code = textwrap.dedent("""\
            import os, sys
            print("PID", os.getpid(), flush=True)
            def hot_inner():
                while sys.stdin.readline() == "":
                    pass
                while True:
                    pass
            def hot_outer():
                hot_inner()
            hot_outer()
            """)
        proc = subprocess.Popen(
            [sys.executable, "-X", "perf", "-X", "perf_tmp_limit=0", "-c",
             code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env_with())
        forget_process(self, proc)
        try:
            pid = int(proc.stdout.readline().split()[1])
            proc.stdin.write("go\n")
            proc.stdin.flush()
            program = (f"profile:hz:999 /pid == {pid}/ "
                       "{ @[ustack(perf)] = count(); } "
                       "interval:ms:700 { exit(); }")
            out = subprocess.run([shutil.which("bpftrace"), "-e", program],
                                 capture_output=True, text=True,
                                 timeout=120)
            with open(map_path(pid)) as f:
                map_text = f.read()
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("hot_", map_text)
        for name in ("hot_inner", "hot_outer", "<module>"):
            self.assertRegex(
                out.stdout,
                rf"py::{re.escape(name)}:<string>\+\d+ "
                rf"\(/tmp/py-perf-{pid}-\d+\.so\)")

    def test_noexec_tmp_falls_back(self):
        noexec_tmp = noexec_tmp_command(self)
        code = textwrap.dedent("""
            import os, sys
            def f(n): return n + 1
            print("output intact", f(44), flush=True)
            print(sys.is_stack_trampoline_active())
            print(open(f"/tmp/perf-{os.getpid()}.map").read().count("py::f:"))
            print(sorted(os.listdir("/tmp")))
            """)
        # (the interpreter's own tree may be under /tmp: mounted over)
        interp = os.path.realpath(sys.executable)
        if interp.startswith("/tmp/"):
            self.skipTest("the interpreter lives under /tmp")
        proc = subprocess.run(
            [*noexec_tmp, sys.executable, "-X", "perf", "-c", code],
            capture_output=True, text=True, env=env_with())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertEqual(lines[:3], ["output intact 45", "True", "1"])
        self.assertNotIn("py-perf-", lines[3])
        # one warning, that says what is lost and how to get it back
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                         proc.stderr)
        self.assertIn("an ELF file of trampolines in /tmp: cannot map it "
                      "executable", proc.stderr)
        self.assertIn("perf inject --jit", proc.stderr)


@requires_perf
class TestArenaFilesUnderPerf(PerfTestCase):
    """perf itself reads the files: names, and DWARF unwinding with no
    -k 1, no jitdump and no perf inject (on interpreters with or without
    frame pointers)."""

    def test_dwarf_unwinding_without_inject(self):
        source = NESTED + "baz(3_000_000)\n"
        out, samples, script, pid = self.record(
            source, "-X", "perf", callgraph=("--call-graph", "dwarf"))
        assert_python_stacks(self, samples, script, NESTED_NAMES)
        dsos = {dso for sample in samples for sym, dso in sample
                if sym.startswith("py::foo:")}
        self.assertTrue(dsos)
        for dso in dsos:
            self.assertRegex(dso, rf"^/tmp/py-perf-{pid}-\d+\.so$")

    def test_hotspot_reads_a_dwarf_recording(self):
        # hotspot's parser (what its GUI runs) reads the trampolines' names
        # from their files (elfutils), as perf does, and unwinds the
        # recording itself.
        parser = "/usr/lib/x86_64-linux-gnu/libexec/hotspot-perfparser"
        if not os.access(parser, os.X_OK):
            self.skipTest("needs hotspot (Debian's hotspot package)")
        source = NESTED + "baz(3_000_000)\n"
        out, samples, script, pid = self.record(
            source, "-X", "perf", callgraph=("--call-graph", "dwarf"))
        data = os.path.join(self.tmp, "perf.data")
        stream = os.path.join(self.tmp, "hotspot.stream")
        proc = subprocess.run(
            [parser, "--input", data, "--output", stream],
            capture_output=True, text=True, timeout=300,
            env={**env_with(), "XDG_RUNTIME_DIR": self.tmp})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(stream, "rb") as f:
            text = f.read()
        for name in NESTED_NAMES:
            self.assertIn(f"py::{name}:{script}".encode(), text)
        # the module it found them in is the arena file, not the map
        self.assertRegex(text, rb"/tmp/py-perf-%d-\d+\.so" % pid)

    def test_perf_archive_carries_the_names(self):
        # perf archive packs the files a recording used, by build-id; on
        # "another machine" (a fresh build-id directory, the /tmp files
        # gone) perf report names the Python functions from the archive.
        # perf 6.1 caches (--buildid-all) and archives (only the files
        # that a sample hit itself, not a caller in one) what a
        # call-heavy program gives it: the five instructions of a
        # trampoline run on every call.
        for tool in ("tar", "bzip2"):
            if shutil.which(tool) is None:
                self.skipTest(f"perf archive needs {tool}")
        source = textwrap.dedent("""\
            import os
            print("PID", os.getpid(), flush=True)
            def fib(n):
                return n if n < 2 else fib(n - 1) + fib(n - 2)
            fib(32)
            """)
        callgraph = (("-g",) if HAVE_FRAME_POINTERS
                     else ("--call-graph", "dwarf"))
        out, samples, script, pid = self.record(
            source, "-X", "perf", callgraph=(*callgraph, "--buildid-all"))
        # perf archives a file only if a sample's own address is in it
        # (a trampoline's five instructions per call make that likely, not
        # certain: on a busy machine it missed once in CI).
        if not any(s and s[0][1].startswith(f"/tmp/py-perf-{pid}-")
                   for s in samples):
            self.skipTest("no sample landed in a trampoline itself, so "
                          "perf 6.1 archives no trampoline file")
        data = os.path.join(self.tmp, "perf.data")
        proc = subprocess.run(perf_command("archive", data),
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        archive = data + ".tar.bz2"
        self.addCleanup(os_helper.unlink, archive)
        listing = subprocess.run(["tar", "tjf", archive], check=True,
                                 capture_output=True, text=True).stdout
        self.assertIn(f"tmp/py-perf-{pid}-", listing)
        # The files of our process are gone ...
        files = arena_paths(pid, self.since)
        self.assertTrue(files)
        for path in files + [map_path(pid)]:
            os_helper.unlink(path)
        # ... and another build-id directory has only the archive.
        other = tempfile.mkdtemp(prefix="test_perf_buildid_")
        self.addCleanup(shutil.rmtree, other, ignore_errors=True)
        subprocess.run(["tar", "xjf", archive, "-C", other], check=True)
        report = ["report", "-i", data, "--stdio", "--sort", "sym",
                  "--no-children", "-g", "none"]
        proc = subprocess.run(["perf", "--buildid-dir", other, *report],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"py::fib:{script}", proc.stdout)
        # (without the archive, nothing names it any more)
        empty = tempfile.mkdtemp(prefix="test_perf_buildid_")
        self.addCleanup(shutil.rmtree, empty, ignore_errors=True)
        proc = subprocess.run(["perf", "--buildid-dir", empty, *report],
                              capture_output=True, text=True, timeout=300)
        self.assertNotIn(f"py::fib:{script}", proc.stdout)

    def test_build_id_only_once_the_names_are_final(self):
        # A build-id must stand for one symbol table: perf's build-id
        # cache (here on another file system than /tmp, so it holds
        # copies), perf archive and symbol servers keep the first copy
        # they see for good.  A file that still takes names has none:
        # perf reads it by its name (a recording names the functions
        # named so far) and copies nothing.  `python -m perf_trampoline
        # seal` (or the process's exit) gives it its build-id: the next
        # recording copies it whole, and later functions go to a new
        # file.
        cache = tempfile.mkdtemp(prefix="test_perf_buildid_")
        self.addCleanup(shutil.rmtree, cache, ignore_errors=True)
        if shutil.which("mount") is None or subprocess.run(
                ["mount", "-t", "tmpfs", "none", cache],
                capture_output=True).returncode != 0:
            self.skipTest("needs root to mount a tmpfs for perf's cache")
        self.addCleanup(subprocess.run, ["umount", "-l", cache])
        source = textwrap.dedent("""\
            import os, select, sys
            def first(n):
                return sum(range(n))
            def spin(f):
                # until a line comes on stdin
                while not select.select([sys.stdin], [], [], 0)[0]:
                    f(2000)
                sys.stdin.readline()
            print("PID", os.getpid(), flush=True)
            spin(first)
            exec("def second(n):\\n    return sum(range(n))\\n")
            print("SECOND", flush=True)
            spin(second)
            """)
        script = make_script(self.tmp, "two_recordings", source)
        proc = subprocess.Popen(
            [sys.executable, "-X", "perf", script], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=env_with())
        forget_process(self, proc)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait, timeout=60)
        self.addCleanup(proc.kill)
        pid = int(proc.stdout.readline().split()[1])

        callgraph = (("-g",) if HAVE_FRAME_POINTERS
                     else ("--call-graph", "dwarf"))

        def recording(n):
            data = os.path.join(self.tmp, f"perf{n}.data")
            subprocess.run(
                ["perf", "--buildid-dir", cache, "record", "--buildid-all",
                 "-F", "999", *callgraph, "-p", str(pid), "-o", data,
                 "--", "sleep", "1"],
                check=True, capture_output=True, timeout=300)
            text = subprocess.run(
                ["perf", "--buildid-dir", cache, "script", "-i", data],
                check=True, capture_output=True, text=True,
                timeout=300).stdout
            return set(re.findall(r" (py::\S+?|\[unknown\])(?:\+0x\w+)? "
                                  r"\((/tmp/[^)]+)\)", text))

        def copies():
            # {file name: its copy}, from CACHE/tmp/NAME/BUILD-ID/elf
            found = {}
            for d, _, files in os.walk(cache):
                m = re.search(rf"/tmp/(py-perf-{pid}-\d+\.so)/", d + "/")
                if m and "elf" in files:
                    found[m[1]] = os.path.join(d, "elf")
            return found

        def build_id(path):
            return re.findall(r"Build ID: ([0-9a-f]+)",
                              readelf("-n", path).stdout)

        arenas = arena_paths(pid, self.since)
        newest = max(arenas, key=arena_number)
        self.assertEqual(build_id(newest), [])
        self.assertTrue({(f"py::first:{script}", path) for path in arenas}
                        & recording(1))
        self.assertNotIn(os.path.basename(newest), copies())
        seal = subprocess.run(
            [sys.executable, "-m", "perf_trampoline", "seal", str(pid)],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(seal.returncode, 0, seal.stderr)
        self.assertEqual(seal.stdout, f"{pid}: trampoline files sealed\n")
        self.assertEqual(len(build_id(newest)), 1)
        proc.stdin.write("\n")
        proc.stdin.flush()
        self.assertEqual(proc.stdout.readline(), "SECOND\n")
        arenas = arena_paths(pid, self.since)
        self.assertGreater(max(map(arena_number, arenas)),
                           arena_number(newest))
        self.assertTrue({("py::second:<string>", path) for path in arenas}
                        & recording(2))
        # the sealed file copied whole, the bytes it keeps for good
        copy = copies().get(os.path.basename(newest))
        self.assertIsNotNone(copy, copies())
        with open(copy, "rb") as a, open(newest, "rb") as b:
            self.assertEqual(a.read(), b.read())
        proc.stdin.write("\n")
        proc.stdin.close()
        self.assertEqual(proc.wait(timeout=60), 0)
        # at exit every file has its build-id
        for path in arena_paths(pid, self.since):
            self.assertEqual(len(build_id(path)), 1, path)

    def test_source_lines_in_perf_script(self):
        # perf script -F +srcline shows each Python frame's file and first
        # line, from the arena file's line table: no jitdump, no inject.
        source = NESTED + "baz(3_000_000)\n"
        callgraph = (("-g",) if HAVE_FRAME_POINTERS
                     else ("--call-graph", "dwarf"))
        out, samples, script, pid = self.record(
            source, "-X", "perf", callgraph=callgraph)
        lines = {name: n for n, text in enumerate(source.splitlines(), 1)
                 for name in NESTED_NAMES
                 if text.startswith(f"def {name}(")}
        self.assertEqual(len(lines), len(NESTED_NAMES))
        text = self.perf_script(os.path.join(self.tmp, "perf.data"),
                                "-F", "ip,sym,srcline")
        rows = text.splitlines()
        seen = {name: 0 for name in NESTED_NAMES}
        for n, row in enumerate(rows[:-1]):
            for name in NESTED_NAMES:
                if row.endswith(f" py::{name}:{script}"):
                    self.assertEqual(
                        rows[n + 1].strip(),
                        f"{os.path.basename(script)}:{lines[name]}",
                        rows[n - 2:n + 2])
                    seen[name] += 1
        for name in NESTED_NAMES:
            self.assertGreater(seen[name], 10, name)

    @unittest.skipUnless(HAVE_FRAME_POINTERS,
                         "frame-pointer unwinding needs frame pointers")
    def test_frame_pointers_and_the_file(self):
        source = NESTED + "baz(3_000_000)\n"
        out, samples, script, pid = self.record(source, "-X", "perf")
        assert_python_stacks(self, samples, script, NESTED_NAMES)
        for sample in samples:
            for sym, dso in sample:
                if sym.startswith("py::foo:"):
                    self.assertRegex(dso, rf"^/tmp/py-perf-{pid}-\d+\.so$")

if __name__ == "__main__":
    unittest.main()
