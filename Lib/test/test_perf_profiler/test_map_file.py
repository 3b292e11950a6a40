"""/tmp/perf-PID.map as -X perf writes it: its lines, its mode, whose it
is, forks, and what happens when it cannot be written."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import unittest

from test.support import os_helper
from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, MAP_LINE, NO_TRAMPOLINE, env_with, forget_files,
    forget_path, jit_path, map_lines, map_path, read_jitdump, read_map_file,
    run_and_forget, script_pid, written_since)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    FORK_SOURCE, MANY_FUNCTIONS, PerfTestCase, check_planted_symlink,
    pid_namespace_command, rebind_interpreter, setUpModule, tearDownModule)


# A parent, its child and its grandchild, each calling functions made by
# itself and by its ancestors; the descendants leave through os._exit().
GRANDCHILD_SOURCE = """\
import os
print("PID", os.getpid(), flush=True)
def in_all():
    return 1
def only_in_parent():
    return 2
in_all()
only_in_parent()
child = os.fork()
if child == 0:
    def made_in_child():
        return 3
    made_in_child()
    in_all()
    grandchild = os.fork()
    if grandchild == 0:
        def made_in_grandchild():
            return 4
        made_in_grandchild()
        made_in_child()
        in_all()
        in_all()
        print("GRANDCHILD", os.getpid(), flush=True)
        os._exit(0)
    os.waitpid(grandchild, 0)
    print("CHILD", os.getpid(), flush=True)
    os._exit(0)
os.waitpid(child, 0)
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestPerfMapFile(PerfTestCase):

    SOURCE = textwrap.dedent("""\
        import os, sys
        print("PID", os.getpid(), flush=True)

        class Spam:
            def method(self):
                def nested():
                    return [x for x in range(3)]
                return nested()

            @property
            def prop(self):
                return (lambda: 42)()

        def gen():
            yield 1

        Spam().method()
        Spam().prop
        list(gen())
        """)

    def run_map_script(self, *args, source=None, env=None):
        script = make_script(self.tmp, "mapped", source or self.SOURCE)
        proc, _ = run_and_forget(self, *args, script, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc, script_pid(proc.stdout), script

    def read_map(self, pid, exited_normally=True):
        return read_map_file(map_path(pid), exited_normally)

    def test_map_lines_and_names(self):
        proc, pid, script = self.run_map_script("-X", "perf")
        self.assertEqual(proc.stderr, "")
        lines = self.read_map(pid)
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, MAP_LINE)
        names = {line.split(" ", 2)[2] for line in lines}
        for qualname in ("<module>", "Spam", "Spam.method",
                         "Spam.method.<locals>.nested",
                         "Spam.method.<locals>.nested.<locals>.<listcomp>",
                         "Spam.prop", "Spam.prop.<locals>.<lambda>", "gen"):
            self.assertIn(f"py::{qualname}:{script}", names)
        # Each trampoline has its own address range.
        starts = [int(line.split()[0], 16) for line in lines]
        self.assertEqual(len(starts), len(set(starts)))

    def test_many_functions(self):
        proc, pid, _ = self.run_map_script("-X", "perf",
                                           source=MANY_FUNCTIONS)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(3000))))
        lines = self.read_map(pid)
        starts = [line.split(" ", 1)[0] for line in lines]
        self.assertEqual(len(starts), len(set(starts)))
        names = {line.split(" ", 2)[2] for line in lines}
        for i in range(3000):
            self.assertIn(f"py::f{i}:<string>", names)

    def test_map_file_mode_and_own_entries_only(self):
        _, pid, script = self.run_map_script("-X", "perf")
        st = os.stat(map_path(pid))
        self.assertEqual(st.st_mode & 0o777, 0o600)
        # The process's own map only: no other pid's file was created by
        # the run, and the file lists no function twice.
        lines = self.read_map(pid)
        self.assertEqual(len(lines), len(set(lines)))

    def test_no_map_without_option(self):
        _, pid, _ = self.run_map_script()
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_env_zero_and_garbage_are_ignored(self):
        for value in ("0", "", "yes", "1x"):
            with self.subTest(value=value):
                _, pid, _ = self.run_map_script(
                    env=env_with(PYTHONPERFSUPPORT=value))
                self.assertFalse(written_since(map_path(pid), self.since))

    def test_env_ignored_with_E(self):
        _, pid, _ = self.run_map_script("-E",
                                        env=env_with(PYTHONPERFSUPPORT="1"))
        self.assertFalse(written_since(map_path(pid), self.since))

    def test_fork_child_gets_its_own_map(self):
        proc, pid, script = self.run_map_script("-X", "perf",
                                                source=FORK_SOURCE)
        child = int(re.search(r"CHILD (\d+)", proc.stdout).group(1))
        self.forget_pid(child)
        parent_names = {l.split(" ", 2)[2] for l in self.read_map(pid)}
        child_names = {l.split(" ", 2)[2]
                       for l in self.read_map(child, exited_normally=False)}
        self.assertIn(f"py::in_parent:{script}", parent_names)
        self.assertNotIn(f"py::in_child:{script}", parent_names)
        self.assertIn(f"py::in_child:{script}", child_names)
        # Inherited trampolines the child runs are described in its file
        # too: the one running at the fork, and one called again after.
        self.assertIn(f"py::<module>:{script}", child_names)
        self.assertIn(f"py::in_both:{script}", child_names)
        # Those it never runs cost it nothing.
        self.assertNotIn(f"py::in_parent:{script}", child_names)

    def test_grandchild_describes_what_it_runs(self):
        # Each generation describes the inherited trampolines it runs,
        # whichever ancestor made them, and its own, each once.
        proc, pid, script = self.run_map_script(
            "-X", "perf", source=GRANDCHILD_SOURCE)
        pids = dict(re.findall(r"^(CHILD|GRANDCHILD) (\d+)$", proc.stdout,
                               re.M))
        for p in pids.values():
            self.forget_pid(int(p))
        expected = {"CHILD": ["<module>", "made_in_child", "in_all"],
                    "GRANDCHILD": ["<module>", "made_in_child", "in_all",
                                   "made_in_grandchild"]}
        for who, names in expected.items():
            lines = self.read_map(int(pids[who]), exited_normally=False)
            self.assertCountEqual([l.split(" ", 2)[2] for l in lines],
                                  [f"py::{n}:{script}" for n in names])
            starts = [int(l.split()[0], 16) for l in lines]
            self.assertEqual(len(starts), len(set(starts)))

    def test_planted_symlink_is_not_followed(self):
        check_planted_symlink(self, map_path(1), "perf")

    def test_foreign_file_is_refused(self):
        # A regular file with a second link (a planted hard link) is not
        # truncated or written.
        pid1 = pid_namespace_command(self)
        victim = os.path.join("/tmp", f"test_perf_victim_{os.getpid()}")
        with open(victim, "w") as f:
            f.write("precious\n")
        self.addCleanup(os_helper.unlink, victim)
        link = map_path(1)
        os_helper.unlink(link)
        os.link(victim, link)
        proc = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c", "print('ok')"],
            capture_output=True, text=True, env=env_with())
        forget_path(self, link)
        self.assertEqual(proc.stdout, "ok\n")
        self.assertIn("RuntimeWarning", proc.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_same_pid_in_another_namespace(self):
        # Two pid namespaces that share /tmp: both interpreters are pid 1
        # and want /tmp/perf-1.map.  The second gets a warning, leaves the
        # file alone and goes on without a map (its trampoline files name
        # its functions: test_perf_containers); the first writes on,
        # undisturbed (truncated under it, its file would lose the lines
        # written before, and perf the names of its functions).
        pid1 = pid_namespace_command(self)
        path = map_path(1)
        os_helper.unlink(path)
        first = subprocess.Popen(
            [*pid1, sys.executable, "-X", "perf", "-c", textwrap.dedent("""\
                import sys
                def before():
                    return 1
                before()
                print("ready", flush=True)
                sys.stdin.readline()
                """) + MANY_FUNCTIONS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env_with())
        self.addCleanup(first.kill)
        self.assertEqual(first.stdout.readline(), "ready\n")
        second = subprocess.run(
            [*pid1, sys.executable, "-X", "perf", "-c",
             "def g():\n    return 2\nprint(g())"],
            capture_output=True, text=True, env=env_with())
        out, err = first.communicate("go\n", timeout=300)
        forget_path(self, path)
        self.assertEqual((second.returncode, second.stdout), (0, "2\n"))
        self.assertIn(f"RuntimeWarning: perf trampoline: cannot use {path} "
                      f"(another live process with this pid holds it",
                      second.stderr)
        self.assertIn("the perf backend stays on", second.stderr)
        self.assertEqual(first.returncode, 0, err)
        self.assertEqual(out.split()[-1], str(sum(range(3000))))
        names = {line.split(" ", 2)[2] for line in read_map_file(path)}
        self.assertIn("py::before:<string>", names)
        self.assertIn("py::f2999:<string>", names)
        self.assertNotIn("py::g:<string>", names)

    def check_cut_short(self, stderr, lines):
        """The map of a run whose file stopped growing part-way: a warning
        says so, and the lines written before are there, whole."""
        # (the backend stays on: functions are named again once there
        # is room)
        self.assertIn("RuntimeWarning: perf trampoline: no room left in "
                      "/tmp", stderr)
        self.assertEqual(stderr.count("RuntimeWarning"), 1, stderr)
        self.assertGreater(len(lines), 100)
        for line in lines:
            self.assertRegex(line, MAP_LINE)

    def test_full_disk(self):
        # /tmp on a small tmpfs of its own (a private mount namespace),
        # 64 KiB over the reserve the files leave free for other programs
        # (1 MiB here): the file stops growing before the reserve.  The
        # program runs on, one warning says why, the reserve stays free,
        # and the map holds the whole lines written before.
        # The tmpfs is mounted on a directory of ours first, with the real
        # /tmp bound inside it as orig/, then moved onto /tmp; the
        # interpreter's own directories under /tmp, if any, are bound
        # back in place from orig/ (rebind_interpreter()).
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        shell = ('S=$2; mount -t tmpfs -o size=1088k none "$S" && '
                 'mkdir "$S/orig" && mount --bind /tmp "$S/orig" && '
                 'mount --move "$S" /tmp && '
                 + rebind_interpreter("/tmp/orig") + ' || exit 99; '
                 '"$0" -X perf -c "$1"; echo "exit $?"; '
                 'stat -f -c "free %a %S" /tmp; echo "== map"; '
                 'cat /tmp/perf-*.map')
        proc = subprocess.run(
            [unshare, "-m", "sh", "-c", shell, sys.executable,
             MANY_FUNCTIONS, small], capture_output=True, text=True,
            env=env_with())
        if proc.returncode == 99:
            self.skipTest("cannot mount a tmpfs here")
        out, _, text = proc.stdout.partition("== map\n")
        self.assertEqual(out.split()[-6:-3], [str(sum(range(3000))), "exit",
                                              "0"])
        # The reserve (1 MiB here) stays free for other programs.
        blocks, size = map(int, out.split()[-2:])
        self.assertGreaterEqual(blocks * size, 1024 * 1024)
        self.assertIn("RuntimeWarning: perf trampoline: no room left in "
                      "/tmp (No space left on device; it leaves 1 MiB or "
                      "2% of it free for other programs)", proc.stderr)
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                         proc.stderr)
        lines = map_lines(text.encode())
        self.assertGreater(len(lines), 100)
        for line in lines:
            self.assertRegex(line, MAP_LINE)

    def test_records_written_in_blocks(self):
        # Records are appended whole, many with one write(), and the file
        # is never cut, grown ahead or mapped for writing: it is the
        # process's, and other writers may append to it too.  The arena
        # files (ours alone) are written through memory.
        strace = shutil.which("strace")
        if strace is None:
            self.skipTest("needs strace")
        out = os.path.join(self.tmp, "strace.out")
        for option, path in (("perf", map_path), ("perf_jit", jit_path)):
            with self.subTest(option=option):
                proc = subprocess.run(
                    [strace, "-f", "-y", "-o", out, "-e",
                     "trace=write,pwrite64,writev,pwritev,fallocate,"
                     "ftruncate", sys.executable, "-X", option, "-c",
                     MANY_FUNCTIONS],
                    capture_output=True, text=True, env=env_with())
                if proc.returncode != 0 and "ptrace" in proc.stderr:
                    self.skipTest("strace cannot trace here")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                pid = script_pid(proc.stdout)
                forget_files(self, pid)
                if option == "perf":
                    records = len(read_map_file(path(pid)))
                else:
                    records = len(read_jitdump(path(pid), pid))
                with open(out) as f:
                    traced = [line.split(None, 1)[1]
                              for line in f if "(" in line]
                # "write(3</tmp/perf-42.map>, ..." (-y names the file)
                ours = [line for line in traced
                        if f"<{path(pid)}>" in line.split(",", 1)[0]]
                arenas = [line for line in traced
                          if "</tmp/py-perf-" in line.split(",", 1)[0]]
                # A stale file of an earlier process with our pid (pids
                # come round again; /tmp is shared) is emptied when it is
                # opened, before anything is written: that ftruncate(fd, 0)
                # is the only one allowed.
                while ours and re.match(r"ftruncate\(\d+<[^>]*>, 0\)",
                                        ours[0]):
                    del ours[0]
                calls = [line.split("(", 1)[0] for line in ours]
                self.assertGreaterEqual(records, 3000)
                self.assertNotIn("fallocate", calls)
                self.assertNotIn("ftruncate", calls)
                # The records of trampolines in arena files go out in
                # blocks of up to 16 KiB, one write() each (whole records:
                # read_map_file() and read_jitdump() check); the jitdump's
                # header and closing record one each.
                per_function = 1 if option == "perf" else 3
                functions = records // per_function
                self.assertEqual(set(calls), {"write"})
                self.assertLessEqual(len(calls), functions / 20 + 4)
                # None per function (names go through memory): each arena
                # file's first writes, and room for its names allocated
                # 16 KiB at a time.
                functions = records // per_function
                self.assertLessEqual(len(arenas), functions / 50 + 40)

    def test_write_failure_keeps_whole_lines(self):
        # A file-size limit (RLIMIT_FSIZE, whose SIGXFSZ Python ignores)
        # makes the file's growth fail part-way, as a full disk does: the
        # program runs on, a warning says why, and the map holds the whole
        # lines written before, nothing after them.
        import resource
        script = make_script(self.tmp, "many", MANY_FUNCTIONS)
        limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                           (100_000, 100_000))
        proc = subprocess.run([sys.executable, "-X", "perf", script],
                              capture_output=True, text=True,
                              env=env_with(), preexec_fn=limit)
        pid = script_pid(proc.stdout)
        self.forget_pid(pid)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split()[-1], str(sum(range(3000))))
        self.assertLessEqual(os.path.getsize(map_path(pid)), 100_000)
        self.check_cut_short(proc.stderr, self.read_map(pid))


if __name__ == "__main__":
    unittest.main()
