"""Tests of live activation against hostile targets: processes that map a
file named like libpython and then put something else at its path (a
FIFO, another file, a symbolic link) or map an ELF file with section
headers that do not fit.  The requester (Lib/perf_trampoline.py with
Lib/_perf_remote.py) must answer each such pid with one line, at once,
with no traceback, and still serve the other pids of the same run.

The hostile targets are a stock python3 (one without the control block,
so that the file it maps is what the lookup reads) running MAPPER.  The
path of a deleted file is opened through /proc/PID/root: the requester
takes that way when it may not open /proc/PID/map_files/, as every user
but root may not; root is made to do without map_files by running the
requester with CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE dropped from its
bounding set (setpriv), as in a container with only CAP_SYS_PTRACE.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

from test.support import perf_helper as ph

if not sys.platform.startswith("linux"):
    raise unittest.SkipTest("live activation uses /proc: Linux only")

import _perf_remote
import _perf_live as pt
import perf_trampoline

HAVE_LIVE = "--without-remote-debug" not in (
    sysconfig.get_config_var("CONFIG_ARGS") or "")
NO_LIVE = "configured --without-remote-debug: no control block"
LIB_NAME = "libpython3.11.so.1.0"
STOCK_CANDIDATES = ("/usr/bin/python3", "/usr/bin/python3.11",
                    "/usr/local/bin/python3")
NO_MAP_FILES = ["setpriv", "--bounding-set=-sys_admin,-checkpoint_restore"]
# A requester run as `python -m perf_trampoline` is, with the very
# modules this test imported (put first on sys.path: argv[1:3]).
CLI = ("import sys; sys.path[:0] = sys.argv[1:3]; del sys.argv[1:3]; "
       "import perf_trampoline; sys.exit(perf_trampoline.main())")
# Seconds a requester may take before the test counts it as hung (each
# one here takes well under one).
HANG = 20

# Maps the file argv[1] (all of it, read-only), prints its pid and READY,
# and waits for its stdin to close (or its parent to die).
MAPPER = textwrap.dedent("""\
    import mmap, os, sys
    with open(sys.argv[1], "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    print("PID", os.getpid(), flush=True)
    print("READY", flush=True)
    sys.stdin.read()
    """)

# A process of this interpreter that takes requests (runs Python code all
# the time) and has a hostile child: a stock python3 running MAPPER on
# argv[2], which it stops when its own stdin closes.
PARENT = textwrap.dedent("""\
    import os, select, subprocess, sys
    child = subprocess.Popen([sys.argv[1], "-c", sys.argv[3], sys.argv[2]],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             universal_newlines=True)
    for line in child.stdout:
        if line.strip() == "READY":
            break
    print("CHILD", child.pid, flush=True)
    print("PID", os.getpid(), flush=True)

    def hot_function(n):
        return sum(i * i for i in range(n))

    print("READY", flush=True)
    while True:
        hot_function(2000)
        if select.select([sys.stdin], [], [], 0)[0]:
            if not sys.stdin.readline():
                break
    child.stdin.close()
    child.wait()
    """)


def stock_python():
    """A python3 without the control block (one whose standard library
    has no perf_trampoline module: not this project's), or None."""
    ours = os.path.realpath(sys.executable)
    for path in STOCK_CANDIDATES:
        if not os.path.exists(path) or os.path.realpath(path) == ours:
            continue
        probe = subprocess.run(
            [path, "-I", "-c", "import importlib.util; print(importlib."
             "util.find_spec('perf_trampoline') is not None)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)
        if probe.returncode == 0 and probe.stdout.strip() == "False":
            return path
    return None


def elf_source():
    """An ELF file with a .dynsym: this interpreter's executable."""
    return os.path.realpath(sys.executable)


def write_odd_elf(src, dst, field, value):
    """Copy the 64-bit ELF file `src` to `dst` with `field` ("offset",
    "size" or "entsize") of its .dynsym section header set to `value`,
    or, for field "shoff", the header's e_shoff."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise unittest.SkipTest("%s is not a 64-bit ELF file" % src)
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3a)
    if field == "shoff":
        struct.pack_into(end + "Q", data, 0x28, value)
    else:
        where = {"offset": 24, "size": 32, "entsize": 56}[field]
        for i in range(shnum):
            pos = shoff + i * shentsize
            if struct.unpack_from(end + "I", data, pos + 4)[0] == 11:
                struct.pack_into(end + "Q", data, pos + where, value)
                break
        else:
            raise unittest.SkipTest("%s has no .dynsym" % src)
    with open(dst, "wb") as f:
        f.write(data)


class HostileMixin:

    @classmethod
    def setUpClass(cls):
        cls.stock = stock_python()
        if cls.stock is None:
            raise unittest.SkipTest("no python3 without the control block "
                                    "(one of %s)" % ", ".join(
                                        STOCK_CANDIDATES))

    def setUp(self):
        self.since = time.time() - 1
        self.dir = tempfile.mkdtemp(prefix="test_perf_live_hostile_")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def no_map_files_prefix(self):
        """The command prefix that takes /proc/PID/map_files away from a
        requester (none for a user other than root, who has not it)."""
        if os.geteuid() != 0:
            return []
        if shutil.which("setpriv") is None:
            self.skipTest("setpriv is not installed")
        probe = subprocess.run(
            NO_MAP_FILES + [sys.executable, "-I", "-c", textwrap.dedent("""\
                import os
                area = open("/proc/self/maps").readline().split()[0]
                try:
                    os.close(os.open("/proc/self/map_files/" + area,
                                     os.O_RDONLY))
                except PermissionError:
                    print("EPERM")
                """)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True)
        if probe.stdout.strip() != "EPERM":
            self.skipTest("cannot run the requester without map_files: "
                          + probe.stderr)
        return NO_MAP_FILES

    def requester(self, *args, map_files=True):
        """Run the requester; returns (CompletedProcess, seconds taken).
        A requester still running after HANG seconds fails the test."""
        dirs = [os.path.dirname(_perf_remote.__file__),
                os.path.dirname(perf_trampoline.__file__)]
        cmd = [sys.executable, "-I", "-c", CLI] + dirs + [str(a)
                                                          for a in args]
        if not map_files:
            cmd = self.no_map_files_prefix() + cmd
        before = time.monotonic()
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  universal_newlines=True,
                                  env=ph.env_with(), timeout=HANG)
        except subprocess.TimeoutExpired:
            self.fail("the requester (%s) hung: still running after %d s"
                      % (" ".join(map(str, args)), HANG))
        return proc, time.monotonic() - before

    def start(self, cmd):
        """Start `cmd`, a target that prints "PID n" and READY; returns
        (Popen, pid, {word: int} of its other "WORD n" lines)."""
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                universal_newlines=True, env=ph.env_with())
        ph.forget_process(self, proc)
        self.addCleanup(ph.stop_process, proc)
        said = {}
        for line in proc.stdout:
            m = re.match(r"([A-Z]+) (\d+)$", line.strip())
            if m:
                said[m.group(1)] = int(m.group(2))
            if line.strip() == "READY":
                break
        else:
            proc.wait()
            self.fail("target did not start: " + proc.stderr.read())
        return proc, said.pop("PID"), said

    def start_mapper(self, path):
        return self.start([self.stock, "-I", "-c", MAPPER, path])[:2]

    def copy_elf(self, *parts):
        path = os.path.join(self.dir, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copyfile(elf_source(), path)
        return path

    def check_one_line(self, proc, elapsed, pid, *phrases):
        """The requester's answer for hostile `pid`: one line of its own,
        printable, with each of `phrases`, a failure, and at once."""
        text = proc.stdout + proc.stderr
        self.assertNotIn("Traceback", text)
        self.assertNotEqual(proc.returncode, 0, text)
        lines = text.splitlines()
        self.assertEqual(len(lines), 1, text)
        self.assertTrue(lines[0].startswith("%d: " % pid), text)
        self.assertTrue(lines[0].isprintable(), text)
        for phrase in phrases:
            self.assertIn(phrase, lines[0])
        self.assertLess(elapsed, 5, text)


class TestHostileFiles(HostileMixin, unittest.TestCase):

    def test_fifo_at_the_mapped_path(self):
        # The target maps its "libpython", deletes it and puts a FIFO at
        # its path: opened for reading without O_NONBLOCK, the FIFO would
        # hold the requester until a writer comes, whatever --timeout.
        path = self.copy_elf("lib", LIB_NAME)
        proc, pid = self.start_mapper(path)
        os.unlink(path)
        os.mkfifo(path)
        for args in (("activate", "--timeout", 1), ("status",)):
            with self.subTest(command=args[0]):
                out, elapsed = self.requester(*args + (pid,),
                                              map_files=False)
                self.check_one_line(out, elapsed, pid, path,
                                    "is now a FIFO, not a regular file")
        self.assertIsNone(proc.poll())

    def test_odd_section_headers(self):
        # .dynsym headers whose sizes and offsets do not fit (entries of 1
        # byte, offset 2**63 or 2**63 - 1, size 2**62), and a bad e_shoff:
        # each is one line that names the file, never a traceback (the
        # requester used to die with struct.error, OverflowError, OSError
        # or MemoryError).
        cases = (("entsize", 1, ".dynsym: entry size 1, less than 24"),
                 ("offset", 2 ** 63, "at offset %d, outside" % 2 ** 63),
                 ("offset", 2 ** 63 - 1, "outside the file"),
                 ("size", 2 ** 62, "bytes, more than the "),
                 ("shoff", 2 ** 64 - 64, "the section headers: "))
        for field, value, phrase in cases:
            path = os.path.join(self.dir, "%s-%d" % (field, value),
                                LIB_NAME)
            os.makedirs(os.path.dirname(path))
            write_odd_elf(elf_source(), path, field, value)
            proc, pid = self.start_mapper(path)
            for map_files in (True, False):
                for args in (("activate", "--timeout", 1), ("status",)):
                    with self.subTest(field=field, value=value,
                                      map_files=map_files,
                                      command=args[0]):
                        out, elapsed = self.requester(
                            *args + (pid,), map_files=map_files)
                        self.check_one_line(
                            out, elapsed, pid, path, phrase,
                            "is not an ELF file the requester can read")
            self.assertIsNone(proc.poll())

    def test_path_names_another_file(self):
        # The mapped file is deleted; at its path now: another regular
        # ELF file (another inode), a symbolic link to the very file (kept
        # by a hard link), or the same under a directory that became a
        # symbolic link.  None of them is read.
        def replaced(path):
            os.unlink(path)
            shutil.copyfile(elf_source(), path)

        def symlink(path):
            kept = path + ".kept"
            os.link(path, kept)
            os.unlink(path)
            os.symlink(kept, path)

        def dir_symlink(path):
            lib = os.path.dirname(path)
            kept = lib + ".kept"
            os.mkdir(kept)
            os.link(path, os.path.join(kept, LIB_NAME))
            os.unlink(path)
            os.rmdir(lib)
            os.symlink(kept, lib)

        cases = ((replaced, "is no longer the file the process mapped "
                            "(inode "),
                 (symlink, "is now a symbolic link, not a regular file"),
                 (dir_symlink, "a component of its path is no longer a "
                               "directory"))
        for change, phrase in cases:
            with self.subTest(change=change.__name__):
                path = self.copy_elf(change.__name__, "lib", LIB_NAME)
                proc, pid = self.start_mapper(path)
                change(path)
                out, elapsed = self.requester("status", pid,
                                              map_files=False)
                self.check_one_line(out, elapsed, pid, path, phrase)
                self.assertIsNone(proc.poll())

    def test_control_characters_in_the_path(self):
        # A path from the target is shown escaped: ESC and BEL would
        # otherwise reach the terminal of whoever runs the requester.
        name = "libpython\x1b]0;title\x07\x1b[2J.so"
        path = os.path.join(self.dir, name)
        write_odd_elf(elf_source(), path, "entsize", 1)
        proc, pid = self.start_mapper(path)
        out, elapsed = self.requester("status", pid)
        self.check_one_line(out, elapsed, pid,
                            "libpython\\x1b]0;title\\x07\\x1b[2J.so")
        self.assertNotIn("\x1b", out.stdout + out.stderr)
        self.assertNotIn("\x07", out.stdout + out.stderr)

    def test_lookup_given_up_at_the_deadline(self):
        # A file system that does not answer (FUSE, NFS) holds the thread
        # that reads the file, not the caller, which gives up at its
        # deadline.  Here the reading of each file waits for `release`.
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck(*args):
            release.wait(60)
            raise _perf_remote._Refused("released")

        with mock.patch.object(_perf_remote, "_symbols_of", stuck):
            before = time.monotonic()
            with self.assertRaises(_perf_remote.LiveError) as cm:
                _perf_remote.symbol_addresses(os.getpid(), {b"_PyPerf_Live"},
                                              deadline=before + 0.5)
            elapsed = time.monotonic() - before
        self.assertIn("did not finish in time", str(cm.exception))
        self.assertGreaterEqual(elapsed, 0.4)
        self.assertLess(elapsed, 5)


@unittest.skipUnless(ph.HAVE_TRAMPOLINE, ph.NO_TRAMPOLINE)
@unittest.skipUnless(HAVE_LIVE, NO_LIVE)
class TestHostileAmongOthers(HostileMixin, unittest.TestCase):

    def test_children_and_several_pids(self):
        # A process that takes requests, with a hostile child: the child
        # gets its line, the parent is still served (and its line is
        # printed), whatever the order of the pids.
        path = os.path.join(self.dir, LIB_NAME)
        write_odd_elf(elf_source(), path, "size", 2 ** 62)
        proc, parent, said = self.start([sys.executable, "-I", "-c", PARENT,
                                         self.stock, path, MAPPER])
        child = said["CHILD"]
        self.assertEqual(pt.children_of(parent), [child])

        out, _ = self.requester("activate", "--children", "--timeout", 10,
                                parent)
        self.assertNotIn("Traceback", out.stderr)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stdout.splitlines(),
                         ["%d: perf %s" % (parent, ph.map_path(parent))])
        err = out.stderr.splitlines()
        self.assertEqual(len(err), 1, out.stderr)
        self.assertTrue(err[0].startswith("%d: " % child), out.stderr)
        self.assertIn("is not an ELF file the requester can read", err[0])

        out, _ = self.requester("status", child, parent)
        self.assertNotIn("Traceback", out.stderr)
        self.assertEqual(out.returncode, 1, out.stderr)
        lines = out.stdout.splitlines() + out.stderr.splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(lines[0].startswith("%d: " % child), lines)
        self.assertEqual(lines[1], "%d: ready active perf %s"
                         % (parent, ph.map_path(parent)))

        out, _ = self.requester("deactivate", child, parent)
        self.assertNotIn("Traceback", out.stderr)
        self.assertEqual(out.stdout.splitlines(), ["%d: deactivated"
                                                   % parent])
        self.assertTrue(out.stderr.startswith("%d: " % child), out.stderr)
        self.assertIsNone(proc.poll())


if __name__ == "__main__":
    unittest.main()
