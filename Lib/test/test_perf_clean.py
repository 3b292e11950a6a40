"""Tests of `python -m perf_trampoline clean` (Lib/_perf_clean.py).

/tmp is shared with other tests and programs, so most tests run the
command on a private directory (its hidden --dir option) with files they
make there, named after pids chosen for what the test needs: pids that
no process has (those of children just reaped, each checked), a process
the test keeps sleeping, this very process.  One class works on the real
/tmp, with the files of an interpreter the test ran (and of one it keeps
running), and removes only those: the command's --dry-run over all of
/tmp, then the module's clean() limited to the test's files.
"""

import contextlib
import errno
import fcntl
import io
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from test.support import perf_helper as ph

if not sys.platform.startswith("linux"):
    raise unittest.SkipTest("clean reads /proc and perf's files: Linux only")

import _perf_clean

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
SUMMARY = re.compile(r"^removed (\d+) files?, (\d+) bytes freed")


def pid_runs(pid):
    """The test's own view of a pid (not the code under test's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return os.path.exists(f"/proc/{pid}")
    except PermissionError:
        return True
    return True


def dead_pids(count):
    """`count` distinct pids that no process has: those of children that
    have just been reaped, each checked to run no more.  The kernel hands
    pids out in turn, from the last one up to pid_max and round again, so
    a freed pid stays free for far longer than a test takes, whatever
    pid_max is.  (The pid after one of these is no free pid: it is likely
    to be the next process the test starts, the command under test.)"""
    pids = []
    for _ in range(10 * count):
        child = subprocess.Popen(["true"])
        child.wait()
        if child.pid not in pids and not pid_runs(child.pid):
            pids.append(child.pid)
            if len(pids) == count:
                break
    if len(pids) < count or any(pid_runs(pid) for pid in pids):
        raise unittest.SkipTest("no pid stays free long enough here")
    return pids


def nobody_problem():
    if os.geteuid() != 0:
        return "not root: cannot make files of another user"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    probe = subprocess.run(NOBODY + [sys.executable, "-c",
                                     "import os; print(os.geteuid())"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        return "cannot run this interpreter as nobody here: " + probe.stderr
    return None


def run_clean(*args, user=None):
    """Run the command as a user runs it; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "perf_trampoline", "clean", *args]
    if user == "nobody":
        cmd = NOBODY + cmd
    return subprocess.run(cmd, capture_output=True, text=True,
                          env=ph.env_with(), timeout=120)


def kinds(pid):
    """The four names of pid's files, two trampoline files."""
    return [f"perf-{pid}.map", f"jit-{pid}.dump", f"py-perf-{pid}-0.so",
            f"py-perf-{pid}-1.so", f"jitted-{pid}-17.so"]


class PrivateDirTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test_perf_clean_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        # Two pids of ended processes.
        self.dead, self.dead2 = dead_pids(2)

    def path(self, name):
        return os.path.join(self.dir, name)

    def make(self, *names, size=100, uid=None):
        for name in names:
            with open(self.path(name), "wb") as f:
                f.write(b"x" * size)
            if uid is not None:
                os.chown(self.path(name), uid, -1)

    def clean(self, *args, user=None):
        return run_clean("--dir", self.dir, *args, user=user)

    def present(self):
        return sorted(os.listdir(self.dir))

    def check_summary(self, proc, count, freed=None):
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        last = proc.stdout.splitlines()[-1]
        m = SUMMARY.match(last)
        self.assertIsNotNone(m, proc.stdout)
        self.assertEqual(int(m.group(1)), count, proc.stdout)
        if freed is not None:
            self.assertEqual(int(m.group(2)), freed, proc.stdout)
        return proc.stdout.splitlines()[:-1]

    def live_process(self):
        """A process that sleeps until the test ends; its pid."""
        proc = subprocess.Popen(["sleep", "600"])

        def stop():
            proc.kill()
            proc.wait()
        self.addCleanup(stop)
        return proc


class TestRemoves(PrivateDirTest):

    def test_dead_pids_files(self):
        names = kinds(self.dead) + kinds(self.dead2)
        self.make(*names, size=5000)
        blocks = sum(os.stat(self.path(n)).st_blocks * 512 for n in names)
        proc = self.clean()
        listed = self.check_summary(proc, len(names), blocks)
        # Sorted by pid, then name; full paths.
        expected = [name for pid in sorted([self.dead, self.dead2])
                    for name in sorted(kinds(pid))]
        self.assertEqual(listed, [self.path(n) for n in expected])
        self.assertEqual(self.present(), [])

    def test_nothing_to_clean(self):
        proc = self.clean()
        self.assertEqual(self.check_summary(proc, 0, 0), [])
        proc = self.clean("--dry-run")
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, "", ""))

    def test_dry_run_removes_nothing(self):
        names = kinds(self.dead)
        self.make(*names)
        before = {n: os.stat(self.path(n)) for n in names}
        proc = self.clean("--dry-run")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        # One path per line and nothing else.
        self.assertEqual(proc.stdout.splitlines(),
                         [self.path(n) for n in sorted(names)])
        for name, st in before.items():
            now = os.stat(self.path(name))
            self.assertEqual((now.st_ino, now.st_size, now.st_mtime_ns),
                             (st.st_ino, st.st_size, st.st_mtime_ns))
        # ... and a run removes exactly what it listed.
        self.assertEqual(self.check_summary(self.clean(), len(names)),
                         proc.stdout.splitlines())

    def test_hard_link_is_not_counted_as_freed(self):
        # perf's build-id cache hard-links a trampoline file when ~/.debug
        # is on /tmp's file system: the name goes, the blocks stay.
        name = f"py-perf-{self.dead}-0.so"
        self.make(name, size=8192)
        os.link(self.path(name), self.path("cached-copy"))
        proc = self.clean()
        self.check_summary(proc, 1, 0)
        self.assertIn("1 had another link", proc.stdout)
        self.assertEqual(self.present(), ["cached-copy"])


class TestLeavesAlone(PrivateDirTest):

    def test_live_process(self):
        live = self.live_process()
        self.make(*kinds(live.pid), *kinds(self.dead))
        proc = self.clean("--dry-run")
        self.assertEqual(proc.stdout.splitlines(),
                         [self.path(n) for n in sorted(kinds(self.dead))])
        self.check_summary(self.clean(), len(kinds(self.dead)))
        self.assertEqual(self.present(), sorted(kinds(live.pid)))
        # They were left because the process ran: once it has ended (and
        # while nothing else got its pid) they go.
        live.kill()
        live.wait()
        if pid_runs(live.pid):
            self.skipTest("the pid was taken again at once")
        self.check_summary(self.clean(), len(kinds(live.pid)))
        self.assertEqual(self.present(), [])

    def test_reused_pid(self):
        # A pid that runs now is another process than the one that wrote
        # an old file: the new one may have written it, or may write it
        # in place.  Its age does not matter.
        live = self.live_process()
        names = kinds(live.pid) + kinds(os.getpid())
        self.make(*names)
        day_ago = time.time() - 86400
        for name in names:
            os.utime(self.path(name), (day_ago, day_ago))
        self.check_summary(self.clean(), 0)
        self.assertEqual(self.present(), sorted(names))

    def test_zombie_counts_as_running(self):
        zombie = subprocess.Popen(["true"])
        self.addCleanup(zombie.wait)
        # Not reaped: its pid stays taken (a zombie) until wait().
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(f"/proc/{zombie.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        else:
            self.fail("the child did not exit")
        self.make(f"perf-{zombie.pid}.map")
        self.check_summary(self.clean(), 0)
        self.assertEqual(self.present(), [f"perf-{zombie.pid}.map"])

    def test_other_users_files(self):
        # As root: files of other users stay, though root could remove
        # them; root's own files of the same pids go (the pids count as
        # ended: only the owner keeps the others).
        if os.geteuid() != 0:
            self.skipTest("not root: cannot make files of another user")
        nobody = pwd.getpwnam("nobody").pw_uid
        mine = [f"perf-{self.dead}.map", f"jit-{self.dead2}.dump"]
        theirs = [n for n in kinds(self.dead) if n not in mine]
        unnamed = [f"perf-{self.dead2}.map"]
        self.make(*mine)
        self.make(*theirs, uid=nobody)
        self.make(*unnamed, uid=54321)      # a uid without a user
        proc = self.clean()
        self.assertEqual(sorted(self.check_summary(proc, len(mine))),
                         sorted(self.path(n) for n in mine))
        self.assertEqual(self.present(), sorted(theirs + unnamed))

    def test_user_leaves_roots_files(self):
        # A user in a directory of their own (no sticky bit) could unlink
        # root's file there: the command does not.  Root's files have the
        # pids of the user's, which go.
        problem = nobody_problem()
        if problem:
            self.skipTest(problem)
        nobody = pwd.getpwnam("nobody")
        os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        mine = [f"perf-{self.dead}.map", f"py-perf-{self.dead}-0.so",
                f"jit-{self.dead2}.dump"]
        roots = [n for n in kinds(self.dead) + kinds(self.dead2)
                 if n not in mine]
        self.make(*mine, uid=nobody.pw_uid)
        self.make(*roots)
        proc = self.clean(user="nobody")
        self.assertEqual(sorted(self.check_summary(proc, len(mine))),
                         sorted(self.path(n) for n in mine))
        self.assertEqual(self.present(), sorted(roots))

    def test_symlinks(self):
        # Never followed, never removed: neither the link nor its target.
        target = self.path("target")
        with open(target, "w") as f:
            f.write("keep me")
        other = tempfile.mkdtemp(prefix="test_perf_clean_target_")
        self.addCleanup(shutil.rmtree, other, ignore_errors=True)
        links = {
            f"perf-{self.dead}.map": target,
            f"jit-{self.dead}.dump": self.path("missing"),   # dangling
            f"py-perf-{self.dead}-0.so": other,              # a directory
            # a link named like ours to a file named like ours
            f"jitted-{self.dead}-1.so": self.path(f"perf-{self.dead}.map"),
        }
        for name, to in links.items():
            os.symlink(to, self.path(name))
        proc = self.clean()
        self.check_summary(proc, 0)
        for name, to in links.items():
            self.assertEqual(os.readlink(self.path(name)), to)
        with open(target) as f:
            self.assertEqual(f.read(), "keep me")
        self.assertTrue(os.path.isdir(other))

    def test_not_regular_files(self):
        # A directory and a FIFO (which must not block the command)
        # named like ours.
        os.mkdir(self.path(f"perf-{self.dead}.map"))
        os.mkfifo(self.path(f"jit-{self.dead}.dump"))
        proc = self.clean()
        self.check_summary(proc, 0)
        self.assertEqual(self.present(),
                         sorted([f"perf-{self.dead}.map",
                                 f"jit-{self.dead}.dump"]))

    def test_near_miss_names(self):
        d = self.dead
        names = [
            f"perf-{d}a.map", f"perf-{d}.map.bak", f"perf-{d}.map~",
            f"perf-0{d}.map", "perf-0.map", "perf-.map", f"xperf-{d}.map",
            f"PERF-{d}.map", f"perf-{d}.MAP", f"perf_{d}.map",
            f"perf-{d}.map\n", f" perf-{d}.map", f"perf--{d}.map",
            "perf-\u0661\u0662.map",            # Arabic-Indic digits
            f"perf-{_perf_clean.MAX_PID + 1}.map", "perf-99999999.map",
            f"jit-{d}.dump.1", f"jit-{d}.map", f"jit-{d}-0.dump",
            f"py-perf-{d}.so", f"py-perf-{d}-.so", f"py-perf-{d}-01.so",
            f"py-perf-{d}-x.so", f"py-perf-{d}-0.so.1", f"py-perf-{d}-0",
            f"py_perf-{d}-0.so", f"jitted-{d}.so", f"jitted-{d}-1-2.so",
            f"jitted-{d}-0x1.so", f"jitted-{d}-1.dump",
        ]
        self.make(*names)
        proc = self.clean()
        self.check_summary(proc, 0)
        self.assertEqual(self.present(), sorted(names))

    def test_file_held_by_a_live_writer(self):
        # The writer (Python/perf_file.c) holds an exclusive flock() on
        # its map and dump while it writes them: the lock is how a file
        # of a live process with this pid in another pid namespace
        # sharing /tmp shows.  Held here by this process.
        name = f"perf-{self.dead}.map"
        self.make(name)
        with open(self.path(name), "rb") as holder:
            fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.assertEqual(self.clean("--dry-run").stdout, "")
            self.check_summary(self.clean(), 0)
            self.assertEqual(self.present(), [name])
        self.check_summary(self.clean(), 1)
        self.assertEqual(self.present(), [])


class TestRaces(PrivateDirTest):
    """The checks made again, with the lock held, just before unlink():
    driven through clean()'s `running`, which is called once before the
    lock and once after."""

    def removed(self, running):
        return [r.path for r in _perf_clean.clean(self.dir,
                                                  running=running)]

    def test_pid_starts_running_meanwhile(self):
        name = f"perf-{self.dead}.map"
        self.make(name)
        calls = []

        def running(pid):
            calls.append(pid)
            return len(calls) > 1
        self.assertEqual(self.removed(running), [])
        self.assertEqual(calls, [self.dead, self.dead])
        self.assertEqual(self.present(), [name])

    def test_file_replaced_meanwhile(self):
        # A new process with the pid made a new file under the name after
        # the first checks: that inode is not the one checked.
        name = f"py-perf-{self.dead}-0.so"
        self.make(name)
        calls = []

        def running(pid):
            calls.append(pid)
            if len(calls) == 2:
                new = self.path("new")
                with open(new, "w") as f:
                    f.write("the new process's")
                os.replace(new, self.path(name))
            return False
        self.assertEqual(self.removed(running), [])
        with open(self.path(name)) as f:
            self.assertEqual(f.read(), "the new process's")

    def test_file_replaced_before_the_lock(self):
        # ... or between lstat() and open(): the descriptor's inode is
        # not the one lstat() saw.
        name = f"perf-{self.dead}.map"
        self.make(name)

        def running(pid):
            if not os.path.exists(self.path("new")):
                with open(self.path("new"), "w") as f:
                    f.write("new")
                os.link(self.path("new"), self.path("new2"))
                os.replace(self.path("new2"), self.path(name))
            return False
        self.assertEqual(self.removed(running), [])
        self.assertEqual(os.stat(self.path(name)).st_ino,
                         os.stat(self.path("new")).st_ino)


class TestErrors(PrivateDirTest):

    def test_unlink_fails_for_one_file(self):
        # One line for the file that cannot be removed, exit status 1,
        # and the others are removed all the same.
        names = kinds(self.dead)
        self.make(*names)
        failing = f"jit-{self.dead}.dump"
        real_unlink = os.unlink

        def unlink(path, *, dir_fd=None):
            if path == failing:
                raise OSError(errno.EPERM, os.strerror(errno.EPERM), path)
            return real_unlink(path, dir_fd=dir_fd)

        out, err = io.StringIO(), io.StringIO()
        args = mock.Mock(dir=self.dir, dry_run=False)
        with mock.patch("os.unlink", unlink), \
                contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            status = _perf_clean.run(args)
        self.assertEqual(status, 1)
        self.assertEqual(err.getvalue().splitlines(),
                         [f"cannot remove {self.path(failing)}: Operation "
                          f"not permitted (check the permissions of "
                          f"{self.dir} and the file's attributes with "
                          f"lsattr)"])
        self.assertEqual(self.present(), [failing])
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[:-1], [self.path(n) for n in sorted(names)
                                      if n != failing])
        self.assertRegex(lines[-1], r"^removed 4 files, \d+ bytes freed$")

    def test_no_permission_to_remove(self):
        # nobody's files in a directory nobody may not write to: a line
        # each, status 1, no traceback.
        problem = nobody_problem()
        if problem:
            self.skipTest(problem)
        os.chmod(self.dir, 0o755)
        nobody = pwd.getpwnam("nobody").pw_uid
        names = [f"perf-{self.dead}.map", f"py-perf-{self.dead}-0.so"]
        self.make(*names, uid=nobody)
        proc = self.clean(user="nobody")
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(
            proc.stderr.splitlines(),
            [f"cannot remove {self.path(n)}: Permission denied (check the "
             f"permissions of {self.dir} and the file's attributes with "
             f"lsattr)" for n in sorted(names)])
        self.assertRegex(proc.stdout, r"^removed 0 files, 0 bytes freed\n$")
        self.assertEqual(self.present(), sorted(names))

    def test_reader_goes_away(self):
        # `clean --dry-run | head -1`: no traceback when the pipe closes.
        self.make(*kinds(self.dead))
        r, w = os.pipe()
        os.close(r)
        with open(w, "w") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "perf_trampoline", "clean", "--dir",
                 self.dir, "--dry-run"], stdout=out, stderr=subprocess.PIPE,
                text=True, env=ph.env_with(), timeout=120)
        self.assertEqual((proc.returncode, proc.stderr), (1, ""))
        self.assertEqual(self.present(), sorted(kinds(self.dead)))

    def test_missing_directory(self):
        proc = run_clean("--dir", self.path("nowhere"))
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "")
        self.assertEqual(proc.stderr,
                         f"cannot read the directory {self.path('nowhere')}"
                         f": No such file or directory\n")

    def test_usage(self):
        proc = run_clean("--no-such-option")
        self.assertEqual(proc.returncode, 2)
        self.assertNotIn("Traceback", proc.stderr)
        proc = run_clean("-h")
        self.assertEqual(proc.returncode, 0)
        self.assertIn("--dry-run", proc.stdout)
        self.assertNotIn("--dir", proc.stdout)


# A process that writes all three files of its own (the map, the dump,
# a trampoline file) and prints its pid; it then ends, or, with an
# argument, waits for its stdin to close.
WRITER = textwrap.dedent("""\
    import os, sys
    sys.activate_stack_trampoline("perf")
    def work(n):
        return sum(range(n))
    work(10)
    sys.activate_stack_trampoline("perf_jit")
    def more(n):
        return work(n)
    more(10)
    print("PID", os.getpid(), flush=True)
    if len(sys.argv) > 1:
        sys.stdin.read()
    """)


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
class TestRealTmp(unittest.TestCase):
    """On /tmp itself, where perf looks: only this test's files go."""

    def setUp(self):
        self.since = time.time() - 1

    def stop_and_forget(self, proc, pid):
        ph.stop_process(proc)
        # Its files, as they are once it has ended (removed after the
        # other cleanups).
        ph.forget_files(self, pid)

    def files(self, pid):
        """The paths in /tmp of pid's files, sorted."""
        names = [n for n in os.listdir("/tmp")
                 if _perf_clean.pid_of(n) == pid]
        return sorted(os.path.join("/tmp", n) for n in names)

    def test_real_files(self):
        # A live writer, whose files are locked (the map and dump) and
        # mapped (the trampoline file).
        live = subprocess.Popen([sys.executable, "-c", WRITER, "wait"],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=ph.env_with())
        self.addCleanup(ph.stop_process, live)    # (if the next line fails)
        live_pid = ph.script_pid(live.stdout.readline())
        self.addCleanup(self.stop_and_forget, live, live_pid)
        # An ended one, and a file perf inject would add.
        proc, pids = ph.run_and_forget(self, "-c", WRITER)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        (dead,) = pids
        for n in range(100):
            jitted = f"/tmp/jitted-{dead}-{n}.so"
            try:
                os.close(os.open(jitted, os.O_WRONLY | os.O_CREAT
                                 | os.O_EXCL, 0o600))
                break
            except FileExistsError:
                continue    # an earlier process's: not this test's
        ph.forget_path(self, jitted)
        if pid_runs(dead):
            self.skipTest("the pid was taken again at once")

        # Only the files the test's processes made: /tmp may hold older
        # ones of the same pids, which are not the test's to remove.
        ours = [p for p in self.files(dead)
                if ph.written_since(p, self.since)]
        self.assertIn(ph.map_path(dead), ours)
        self.assertIn(ph.jit_path(dead), ours)
        self.assertIn(jitted, ours)
        self.assertTrue(any("/py-perf-" in p for p in ours), ours)
        live_files = [p for p in self.files(live_pid)
                      if ph.written_since(p, self.since)]
        self.assertIn(ph.map_path(live_pid), live_files)
        self.assertIn(ph.jit_path(live_pid), live_files)
        self.assertTrue(any("/py-perf-" in p for p in live_files),
                        live_files)

        # The command, without --dir, lists the ended process's files
        # (among any others of ended processes) and none of the live one.
        out = run_clean("--dry-run")
        self.assertEqual(out.returncode, 0, out.stderr)
        listed = out.stdout.splitlines()
        for path in ours:
            self.assertIn(path, listed)
        for path in live_files:
            self.assertNotIn(path, listed)
        for path in ours:
            self.assertTrue(os.path.exists(path), path)   # still there

        # Removal, limited to the test's files.
        names = {os.path.basename(p) for p in ours + live_files}
        removed = [r.path for r in _perf_clean.clean(names=names)]
        self.assertEqual(removed, ours)
        for path in ours:
            self.assertFalse(os.path.lexists(path), path)
        for path in live_files:
            self.assertTrue(os.path.exists(path), path)


if __name__ == "__main__":
    unittest.main()
