"""A Python service in a container, profiled and debugged from the host.

The container is made as runc makes one: new pid, mount, uts and ipc
namespaces (unshare), a root file system switched with pivot_root (or,
for older tools' containers, with chroot), the interpreter's tree
bind-mounted read-only at a path the host does not have, and a tmpfs
/tmp of its own.  perf, gdb and `python -m perf_trampoline` run on the
host, with the service's host pid, as the person who profiles a
container does.  Root only (namespaces and perf); a probe that makes an
empty container decides whether they can be made here.
"""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import unittest

from test.support import perf_helper as ph
from test.support import requires_subprocess

import _perf_live as pt
import perf_trampoline


# Where the interpreter's tree is mounted in the container: no such path
# on the host.
INNER_TREE = "/opt/cpython-perf-test-tree"

# Run as root on the host, in new namespaces: $1 the mode (pivot or
# chroot), $2 the new root (an empty directory of the host), $3 the tree,
# $4 a host directory to be its /tmp (or "": a tmpfs), $5 more options of
# that /tmp (",noexec"), then the command.
# The root is a tmpfs with read-only binds of the host's system
# directories, the tree, the /tmp, its own /proc.
CONTAINER_SH = r"""
set -eu
mode=$1 root=$2 tree=$3 tmp=$4 tmpopts=$5
shift 5
mount --make-rprivate /
mount -t tmpfs -o size=16m,mode=0755 container "$root"
for d in usr lib lib32 lib64 libx32 bin sbin etc; do
    if [ -L "/$d" ]; then
        ln -s "$(readlink "/$d")" "$root/$d"
    elif [ -d "/$d" ]; then
        mkdir "$root/$d"
        mount --rbind "/$d" "$root/$d"
        mount -o remount,bind,ro "$root/$d"
    fi
done
mkdir -p "$root$INNER_TREE" "$root/tmp" "$root/proc" "$root/dev"
mount --rbind "$tree" "$root$INNER_TREE"
mount -o remount,bind,ro "$root$INNER_TREE"
if [ -n "$tmp" ]; then
    mount --bind "$tmp" "$root/tmp"
    if [ -n "$tmpopts" ]; then
        mount -o "remount,bind$tmpopts" "$root/tmp"
    fi
else
    mount -t tmpfs -o "size=256m,mode=1777$tmpopts" tmp "$root/tmp"
fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
hostname container
cd "$root"
if [ "$mode" = pivot ]; then
    mkdir old
    pivot_root . old
    umount -l /old
    rmdir /old
    cd /
    exec "$@"
fi
exec chroot . "$@"
"""


def _tree():
    """(the host directory to mount, the interpreter's path under it): an
    in-place build's directory with its sources, or the installation."""
    exe = os.path.realpath(sys.executable)
    if sysconfig.is_python_build():
        srcdir = os.path.realpath(sysconfig.get_config_var("srcdir"))
        tree = os.path.commonpath([os.path.dirname(exe), srcdir])
    else:
        tree = os.path.realpath(sys.base_prefix)
    return tree, os.path.join(INNER_TREE, os.path.relpath(exe, tree))


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[:-1]
    except OSError:
        return []


class Container:
    """One container; start() runs a command as its pid 1."""

    def __init__(self, test, mode="pivot", tmp=None, tmp_options=""):
        self.test = test
        self.mode = mode
        self.tmp = tmp                # a host directory as its /tmp
        self.tmp_options = tmp_options  # more options of its /tmp
        self.tree, self.python = _tree()
        self.root = tempfile.mkdtemp(prefix="test_perf_containers_")
        test.addCleanup(self._remove_root)
        self.proc = None
        self.pid = None
        self.stderr = ""

    def _remove_root(self):
        # (the root's mounts were the container's alone: an empty
        # directory here)
        try:
            os.rmdir(self.root)
        except OSError:
            pass

    def command(self, argv):
        script = CONTAINER_SH.replace("$INNER_TREE", INNER_TREE)
        # (--kill-child: the container goes with unshare, whatever
        # happens to the test)
        return ["unshare", "--pid", "--fork", "--kill-child", "--mount",
                "--uts", "--ipc", "sh", "-c", script, "sh", self.mode,
                self.root, self.tree, self.tmp or "", self.tmp_options,
                *argv]

    def start(self, *argv, env=None, stdin=subprocess.DEVNULL,
              stdout=subprocess.PIPE, timeout=30, program=None):
        """Run `argv` (a word may be "python": the interpreter under
        test, at its path inside) as the container's pid 1; returns its
        pid on the host, once it runs `program` (argv[0] unless the
        command execs another one, such as setpriv)."""
        argv = [self.python if a == "python" else a for a in argv]
        self.proc = subprocess.Popen(
            self.command(argv), stdin=stdin, stdout=stdout,
            stderr=subprocess.PIPE,
            env=env if env is not None else ph.env_with())
        self.test.addCleanup(self.stop)
        if program == "python":
            program = self.python
        want = (program or argv[0]).encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for child in _children(self.proc.pid):
                if _cmdline(child)[:1] == [want]:
                    self.pid = child
                    return child
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        ended = self.proc.poll()
        self.stop()
        self.test.fail(f"the container did not start {argv}"
                       + (f" (it had ended, status {ended}, before it was "
                          f"seen)" if ended is not None else "")
                       + f": {self.stderr}")

    def stop(self):
        """SIGKILL its pid 1 (the only signal the init of a pid namespace
        takes from outside without a handler; its death ends the rest)
        and unshare, and wait for them; keep what it wrote to its stderr.
        The pid 1 is unshare's child whether start() found it or not: a
        program that changed its user (setpriv) no longer gets the
        signal that unshare --kill-child asked for."""
        if self.proc is None or self.proc.stderr.closed:
            return
        # (unshare's pid, and its children's, only while it has not been
        # waited for: a pid that was reaped may be another process's now)
        running = self.proc.poll() is None
        inits = set(_children(self.proc.pid)) if running else set()
        if self.pid:
            inits.add(self.pid)
        for pid in sorted(inits):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.kill()
        try:
            _, err = self.proc.communicate(timeout=60)
            self.stderr = err.decode(errors="replace")
        except subprocess.TimeoutExpired:
            self.stderr = "(its stderr was not closed within 60 s)"
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def readline(self, timeout=60):
        """A line of its stdout (bytes), or AssertionError after
        `timeout` seconds."""
        fd = self.proc.stdout.fileno()
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no line from the container within "
                                     f"{timeout} s: {line!r}")
            byte = os.read(fd, 1)
            if not byte:
                break
            line += byte
        return line


# podman's global options that run a container here, tried in turn: its
# defaults, then runc with plain cgroup directories (crun refuses a host
# that mounts cgroup v1 and v2 side by side, as this one's may).
PODMAN_SETUPS = ([], ["--runtime", "runc", "--cgroup-manager", "cgroupfs"])
# Limits that a container may set without CAP_SYS_RESOURCE: podman's own
# are above some hosts' hard limits.
PODMAN_LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit",
                 "nproc=4096:4096"]


class Podman:
    """A container that podman runs from a root file system made here
    (--rootfs, as from an unpacked image): the host's /usr read-only (its
    /bin, /lib... as the host has them), the tree read-only at
    INNER_TREE, its /tmp a directory of that root."""

    def __init__(self, test, setup):
        self.test = test
        self.setup = setup
        self.tree, self.python = _tree()
        self.root = tempfile.mkdtemp(prefix="test_perf_containers_podman_")
        test.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        self.volumes = ["-v", f"{self.tree}:{INNER_TREE}:ro"]
        for d in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = "/" + d
            if os.path.islink(host):
                os.symlink(os.readlink(host), os.path.join(self.root, d))
            elif os.path.isdir(host):
                self.volumes += ["-v", f"{host}:{host}:ro"]
        for d in ("tmp", "proc", "dev", "sys", "etc"):
            os.mkdir(os.path.join(self.root, d))
        os.chmod(os.path.join(self.root, "tmp"), 0o1777)
        self.name = os.path.basename(self.root)

    def podman(self, *args, timeout=120):
        return subprocess.run(["podman", *self.setup, *args],
                              capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def run(self, *argv, detach=True):
        """podman run (-d, or --rm) of `argv` (whose first word may be
        "python": the interpreter under test, at its path inside)."""
        argv = [self.python if a == "python" else a for a in argv]
        if detach:
            self.test.addCleanup(self.remove)
        return self.podman("run", "-d" if detach else "--rm",
                           "--name", self.name, "--network", "none",
                           *PODMAN_LIMITS, *self.volumes,
                           "--rootfs", self.root, *argv)

    def remove(self):
        self.podman("rm", "-f", "-t", "0", self.name)

    def wait_for_line(self, line, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            logs = self.podman("logs", self.name).stdout
            if line in logs.splitlines():
                return
            time.sleep(0.2)
        self.test.fail(f"no {line!r} from the container within {timeout} "
                       f"s: {logs!r}")


_podman = []


def podman_setup():
    """(the first of PODMAN_SETUPS that runs an empty container here,
    None), or (None, why none does)."""
    if _podman:
        return _podman[0]
    if os.geteuid() != 0:
        found = None, "podman's containers here need root"
    elif shutil.which("podman") is None:
        found = None, "no podman"
    else:
        found = None, "podman runs no container here"

        class Probe(unittest.TestCase):
            def runTest(self):
                pass
        for setup in PODMAN_SETUPS:
            probe = Probe()
            p = Podman(probe, setup)
            try:
                proc = p.run("/bin/true", detach=False)
            except subprocess.TimeoutExpired:
                p.remove()
                continue
            finally:
                probe.doCleanups()
            if proc.returncode == 0:
                found = setup, None
                break
            found = None, f"podman runs no container here: {proc.stderr}"
    _podman.append(found)
    return found


def container_problem():
    """Why containers cannot be made here, or None: root, unshare, and an
    empty container that runs /bin/true."""
    if os.geteuid() != 0:
        return "containers need root"
    if shutil.which("unshare") is None:
        return "no unshare (util-linux)"

    class Probe(unittest.TestCase):
        def runTest(self):
            pass
    probe = Probe()
    c = Container(probe)
    try:
        proc = subprocess.run(c.command(["/bin/true"]), capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "an empty container did not end within 60 s"
    finally:
        probe.doCleanups()
    if proc.returncode != 0:
        return f"no container can be made here: {proc.stderr.strip()}"
    return None


def tearDownModule():
    ph.teardown_module()


def setUpModule():
    if not ph.HAVE_TRAMPOLINE:
        raise unittest.SkipTest("no perf trampoline on this platform")
    if not sysconfig.get_config_var("Py_REMOTE_DEBUG"):
        raise unittest.SkipTest("built --without-remote-debug: no live "
                                "activation for record --pid")
    problem = container_problem()
    if problem is not None:
        raise unittest.SkipTest(problem)


# A service: the seed example's calls, forever.
SERVICE = ph.NESTED + textwrap.dedent("""\
    import sys
    print("READY", flush=True)
    while True:
        baz(100_000)
    """)

# A pre-fork server: two workers that call worker_task() forever, the
# master idle.
PREFORK = "import os, time\n" + ph.WORKER + textwrap.dedent("""\
    for _ in range(2):
        if os.fork() == 0:
            worker()
    print("READY", flush=True)
    while True:
        time.sleep(1)
    """)

# Makes 3000 functions when a line comes on stdin (new arena files are
# mapped then), and calls the last 50 of them forever.
LATE_FUNCTIONS = textwrap.dedent("""\
    import sys
    print("READY", flush=True)
    sys.stdin.readline()
    fs = []
    for n in range(3000):
        ns = {}
        exec(f"def late_{n}(k):\\n    return sum(range(k))\\n", ns)
        fs.append(ns[f"late_{n}"])
    print("MADE", flush=True)
    while True:
        for f in fs[-50:]:
            f(2000)
    """)


@requires_subprocess()
class HostSideTests(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_perf_containers_out_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.name = os.path.join(self.tmp, "out")

    def record(self, *args):
        """`python -m perf_trampoline record -o NAME ARGS`, run as the
        user runs it, with perf's build-id cache in the tests' own
        directory; it must succeed.  Its CompletedProcess (text)."""
        proc = subprocess.run(
            [sys.executable, perf_trampoline.__file__, "record",
             "-o", self.name, *map(str, args)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=ph.env_with(HOME=ph.buildid_home()), timeout=300)
        for kept in re.findall(r"kept a copy of the map of process \d+ as "
                               r"(/tmp/perf-\d+\.map)", proc.stderr):
            ph.forget_path(self, kept)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc

    def folded(self):
        """What record --python wrote: the folded stacks."""
        with open(self.name + ".folded") as f:
            return f.read()

    def require_perf(self):
        problem = ph.perf_problem()
        if problem is not None:
            self.skipTest(problem)

    def start_service(self, *options, mode="pivot", tmp=None,
                      tmp_options=""):
        c = Container(self, mode, tmp, tmp_options)
        pid = c.start("python", *options, "-c", SERVICE)
        # ("PID 1": its pid inside)
        self.assertEqual(c.readline(), b"PID 1\n")
        self.assertEqual(c.readline(), b"READY\n")
        return c, pid

    def test_record_pid(self):
        # record --pid from the host: what it needs to know of the
        # interpreter (frame pointers) it reads from the process, which
        # it turns on for the recording and off again.
        self.require_perf()
        c, pid = self.start_service()
        proc = self.record("--pid", pid, "--duration", 2, "--python")
        self.assertNotIn("is not a Python", proc.stderr)
        fp = sysconfig.get_config_var("PY_HAVE_FRAME_POINTERS")
        self.assertRegex(proc.stderr, "has frame pointers: call graph fp"
                         if fp else "has no frame pointers: call graph dwarf")
        self.assertIn("trampoline off again", proc.stderr)
        folded = self.folded()
        self.assertIn("py::foo:<string>", folded)
        self.assertIn("py::bar:<string>", folded)
        with pt.Target(pid, write=False) as target:
            self.assertEqual(target.snapshot().active, 0)

    def report_after_the_container_ended(self, mode="pivot",
                                         tmp_options=""):
        # What record wrote reports the container's functions by name
        # when the container and its /tmp are gone, with the command
        # record says to open it with.  The trampolines are in files
        # (which perf caches) or, on a noexec /tmp, in anonymous memory
        # that only the map names: record keeps a copy of it where perf
        # looks once the container is gone, /tmp/perf-HOSTPID.map here.
        self.require_perf()
        c, pid = self.start_service(mode=mode, tmp_options=tmp_options)
        proc = self.record("--pid", pid, "--duration", 2)
        files = os.listdir(f"/proc/{pid}/root/tmp")
        c.stop()
        if "noexec" in tmp_options:
            self.assertIn("perf-1.map", files)
            self.assertFalse([f for f in files if f.startswith("py-perf-")],
                             files)
        self.assertNamedAfterTheEnd(proc)
        if "noexec" in tmp_options:
            self.assertIn(f"kept a copy of the map of process {pid} as "
                          f"/tmp/perf-{pid}.map", proc.stderr)

    def assertNamedAfterTheEnd(self, proc):
        """The report of what record (`proc`, its CompletedProcess) wrote,
        opened as record says, names the functions of the process, which
        has ended."""
        opener = re.search(r"(?m)^wrote \S+\.data\s+open: (perf report .*?)"
                           r" \(or", proc.stdout).group(1)
        report = subprocess.run(
            opener.split() + ["--stdio"],
            capture_output=True, text=True,
            env=ph.env_with(HOME=ph.buildid_home()), timeout=300)
        self.assertEqual(report.returncode, 0, report.stderr[-2000:])
        self.assertIn("py::foo:<string>", report.stdout)

    def test_report_after_the_container_ended(self):
        self.report_after_the_container_ended()

    def test_report_after_the_container_ended_noexec_tmp(self):
        self.report_after_the_container_ended(tmp_options=",noexec")

    def test_report_after_the_container_ended_noexec_tmp_chroot(self):
        self.report_after_the_container_ended("chroot", ",noexec")

    def test_plain_perf_noexec_tmp_map_copied_out(self):
        # The howto's plain perf for a noexec /tmp: the map copied out,
        # named after the host pid, before the container goes.
        self.require_perf()
        c, pid = self.start_service("-X", "perf", tmp_options=",noexec")
        data = os.path.join(self.tmp, "noexec.data")
        rec = ph.start_perf_record(["-F", "999", *self.call_graph(),
                                    "-o", data, "-p", str(pid)],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(2)
        ph.stop_perf_record(rec)
        kept = f"/tmp/perf-{pid}.map"
        self.assertFalse(os.path.lexists(kept))
        subprocess.run(["cp", "--remove-destination",
                        f"/proc/{pid}/root/tmp/perf-1.map", kept], check=True)
        ph.forget_path(self, kept)
        c.stop()
        self.assertIn("an ELF file of trampolines in /tmp: "
                      "cannot map it executable", c.stderr)
        report = self.perf_report(data, "--no-inline", "--children",
                                  "--sort", "sym", "-g", "none")
        self.assertIn("py::foo:<string>", report)

    def test_two_containers_sharing_tmp(self):
        # Both services are pid 1 in their containers and share one
        # /tmp, so one map name.  The first writes /tmp/perf-1.map; the
        # second finds it held by the first, says so and stays on without
        # a map: its arena files (whose names are chosen free) name its
        # functions, and perf reads each process's own files.
        self.require_perf()
        shared = self.shared_tmp()
        first, first_pid = self.start_service("-X", "perf", tmp=shared)
        second, second_pid = self.start_service("-X", "perf", tmp=shared)
        with pt.Target(first_pid, write=False) as target:
            snap = target.snapshot()
            self.assertEqual((snap.active, snap.file), (1, "/tmp/perf-1.map"))
        with pt.Target(second_pid, write=False) as target:
            snap = target.snapshot()
            self.assertEqual((snap.active, snap.file), (1, ""))
        self.assertIn("active perf (no map: named by its trampoline files "
                      "alone)", pt.status(second_pid).text)
        data = os.path.join(self.tmp, "shared.data")
        rec = ph.start_perf_record(["-F", "999", *self.call_graph(),
                                    "-o", data,
                                    "-p", f"{first_pid},{second_pid}"],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(2)
        ph.stop_perf_record(rec)
        report = self.perf_report(data, "--no-inline", "--children",
                                  "--sort", "pid,sym", "-g", "none")
        named = {int(p) for p in re.findall(
            r"(?m)^.*?(\d+):\S+\s+\[\.\] py::foo:<string>", report)}
        self.assertEqual(named, {first_pid, second_pid}, report[-3000:])
        # record: the map by the second's name is the first's (written
        # out by an activation while on), not to be kept as the second's
        self.perf_trampoline("activate", first_pid)
        self.assertGreater(os.path.getsize(os.path.join(shared,
                                                        "perf-1.map")), 0)
        proc = self.record("--pid", second_pid, "--duration", 1, "--python")
        self.assertIn("py::foo:<string>", self.folded())
        self.assertNotIn("kept a copy", proc.stderr)
        second.stop()
        self.assertIn("RuntimeWarning: perf trampoline: cannot use "
                      "/tmp/perf-1.map (another live process with this pid "
                      "holds it: one in another pid namespace that shares "
                      "/tmp): Device or resource busy; this process writes "
                      "no map, and perf names its functions by its "
                      "trampoline files alone (/tmp/py-perf-*.so); the perf "
                      "backend stays on", second.stderr)

    def second_left_off(self, backend, active, tmp_options=""):
        """Two services with -X `backend` that share a /tmp (with
        `tmp_options`): the first is on (`active`, the block's code), the
        second off.  The second's stderr, once it has been stopped."""
        shared = self.shared_tmp()
        first, first_pid = self.start_service("-X", backend, tmp=shared,
                                              tmp_options=tmp_options)
        second, second_pid = self.start_service("-X", backend, tmp=shared,
                                                tmp_options=tmp_options)
        for pid, want in ((first_pid, active), (second_pid, 0)):
            with pt.Target(pid, write=False) as target:
                self.assertEqual(target.snapshot().active, want)
        second.stop()
        return second.stderr

    def shared_tmp(self):
        shared = tempfile.mkdtemp(prefix="test_perf_containers_tmp_")
        os.chmod(shared, 0o1777)
        self.addCleanup(shutil.rmtree, shared, ignore_errors=True)
        return shared

    def test_two_containers_sharing_tmp_as_two_users(self):
        # The second service runs as another user: the map there is
        # another user's file, which it may not even open.  It goes on
        # without a map too.
        if shutil.which("setpriv") is None:
            self.skipTest("no setpriv (util-linux)")
        shared = self.shared_tmp()
        first, first_pid = self.start_service("-X", "perf", tmp=shared)
        c = Container(self, tmp=shared)
        pid = c.start("setpriv", "--reuid=65534", "--regid=65534",
                      "--clear-groups", "python", "-X", "perf", "-c",
                      SERVICE, program="python")
        line = c.readline()
        if line != b"PID 1\n":
            c.stop()
            self.skipTest(f"the interpreter does not run as user 65534 "
                          f"here: {line!r} {c.stderr[-500:]}")
        self.assertEqual(c.readline(), b"READY\n")
        with pt.Target(pid, write=False) as target:
            snap = target.snapshot()
            self.assertEqual((snap.active, snap.file), (1, ""))
        c.stop()
        self.assertIn("RuntimeWarning: perf trampoline: cannot use "
                      "/tmp/perf-1.map (another user's file): Permission "
                      "denied; this process writes no map", c.stderr)
        self.assertTrue(any(n.startswith("py-perf-1-")
                            and os.stat(os.path.join(shared, n)).st_uid
                            == 65534 for n in os.listdir(shared)))

    def test_two_containers_sharing_a_noexec_tmp(self):
        # No trampoline file can be made there: the first names its
        # anonymous trampolines in the map; the second has neither, and
        # turns its backend off rather than have perf look its anonymous
        # trampolines up in the first one's map.
        stderr = self.second_left_off("perf", 1, tmp_options=",noexec")
        self.assertIn("RuntimeWarning: perf trampoline: an ELF file of "
                      "trampolines in /tmp: cannot map it executable: "
                      "Operation not permitted; without one, and without a "
                      "map of its own, this process cannot name its "
                      "functions: the perf backend is off", stderr)
        self.assertEqual(stderr.count("RuntimeWarning"), 2, stderr)

    def test_two_containers_sharing_tmp_c_api(self):
        # The C API does not write to the map while the trampolines go
        # on without it: it is another process's.
        shared = self.shared_tmp()
        first, first_pid = self.start_service("-X", "perf", tmp=shared)
        c = Container(self, tmp=shared)
        # (it waits for its stdin to close: start() must see it run, and
        # a program that has already ended is not seen)
        c.start("python", "-X", "perf", "-c", textwrap.dedent('''\
            import sys, _testinternalcapi
            print(_testinternalcapi.write_perf_map_entry(0x1234, 1,
                                                         "from_second"),
                  flush=True)
            sys.stdin.read()
            '''), stdin=subprocess.PIPE)
        self.assertEqual(c.readline(), b"-1\n")
        c.stop()
        with open(os.path.join(shared, "perf-1.map")) as f:
            self.assertNotIn("from_second", f.read())

    def test_two_containers_sharing_tmp_jitdump(self):
        # perf inject takes a dump by its name: the second process's
        # perf_jit backend stays off, with a warning that says why.
        stderr = self.second_left_off("perf_jit", 2)
        self.assertIn("RuntimeWarning: perf trampoline: cannot use "
                      "/tmp/jit-1.dump (another live process with this pid "
                      "holds it: one in another pid namespace that shares "
                      "/tmp): Device or resource busy; the perf_jit backend "
                      "is off", stderr)

    def test_record_pid_chroot(self):
        # A container whose root was changed with chroot: record turns
        # the feature on before perf starts, so the files exist when perf
        # reads the process's mappings.
        self.require_perf()
        c, pid = self.start_service(mode="chroot")
        self.record("--pid", pid, "--duration", 2, "--python")
        self.assertIn("py::foo:<string>", self.folded())

    def test_plain_perf_chroot_files_mapped_during_the_recording(self):
        # A container whose root was changed with chroot: perf names the
        # functions of files that the process mapped after the recording
        # started (perf 6.1 reads them in the process's root).
        self.require_perf()
        c = Container(self, "chroot")
        pid = c.start("python", "-X", "perf", "-c", LATE_FUNCTIONS,
                      stdin=subprocess.PIPE)
        self.assertEqual(c.readline(), b"READY\n")
        before = set(os.listdir(f"/proc/{pid}/root/tmp"))
        data = os.path.join(self.tmp, "late.data")
        rec = ph.start_perf_record(["-F", "999", *self.call_graph(),
                                    "-o", data, "-p", str(pid)],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        c.proc.stdin.write(b"go\n")
        c.proc.stdin.flush()
        self.assertEqual(c.readline(), b"MADE\n")
        time.sleep(1)
        ph.stop_perf_record(rec)
        new = set(os.listdir(f"/proc/{pid}/root/tmp")) - before
        self.assertTrue(any(n.startswith("py-perf-1-") for n in new), new)
        report = self.perf_report(data, "--no-inline", "--children",
                                  "--sort", "dso,sym", "-g", "none")
        late = re.findall(r"(py-perf-1-\d+\.so)\s+\[\.\] py::late_", report)
        self.assertTrue(set(late) & new, report[-3000:])

    def test_record_children_of_a_prefork_server(self):
        # --children follows the workers that the container's pid 1
        # forked, by their host pids.
        self.require_perf()
        c = Container(self)
        pid = c.start("python", "-c", PREFORK)
        self.assertEqual(c.readline(), b"READY\n")
        workers = _children(pid)
        self.assertEqual(len(workers), 2)
        proc = self.record("--pid", pid, "--children", "--duration", 2,
                           "--python")
        recorded = re.search(r" -p ([\d,]+)$", proc.stderr, re.M)
        self.assertEqual(set(recorded.group(1).split(",")),
                         set(map(str, [pid, *workers])), proc.stderr)
        self.assertIn("py::worker_task:<string>", self.folded())
        for p in [pid, *workers]:
            with pt.Target(p, write=False) as target:
                self.assertEqual(target.snapshot().active, 0)

    def call_graph(self):
        """perf record's call-graph option for this interpreter."""
        if sysconfig.get_config_var("PY_HAVE_FRAME_POINTERS"):
            return ["-g"]
        return ["--call-graph", "dwarf"]

    def perf_report(self, data, *options, env=None):
        """perf report's text of `data`: every symbol with its callers'
        share (a trampoline takes no sample of its own)."""
        proc = subprocess.run(
            ph.perf_command("report", "-i", data, "--stdio", *options),
            capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return proc.stdout

    def test_plain_perf_sealed_before_the_end(self):
        # The howto's plain perf: perf record --buildid-all -p HOSTPID,
        # and `python -m perf_trampoline seal HOSTPID` before it ends, so
        # that perf caches the files with their build-ids (all of them:
        # by default only those where samples were taken, and few are
        # taken in a trampoline): the report names the functions while
        # the container runs and after it ended, with perf report's
        # defaults (in DWARF mode, inline lookups run addr2line on each
        # file, which must be readable here: the cached copy is).
        self.require_perf()
        c, pid = self.start_service("-X", "perf")
        env = ph.env_with(HOME=ph.buildid_home())
        data = os.path.join(self.tmp, "plain.data")
        rec = ph.start_perf_record(["-F", "999", *self.call_graph(),
                                    "--buildid-all", "-o", data,
                                    "-p", str(pid)],
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(1)
        self.perf_trampoline("seal", pid)
        ph.stop_perf_record(rec)
        self.assertIn("py::foo:<string>", self.perf_report(data, env=env))
        c.stop()
        self.assertIn("py::foo:<string>", self.perf_report(data, env=env))

    def test_plain_perf_report_no_inline(self):
        # Without the seal, perf report --no-inline while the container
        # runs: no addr2line on files that only the container's mount
        # namespace has.
        self.require_perf()
        c, pid = self.start_service("-X", "perf")
        data = os.path.join(self.tmp, "plain.data")
        rec = ph.start_perf_record(["-F", "999", *self.call_graph(),
                                    "-o", data, "-p", str(pid)],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        time.sleep(1)
        ph.stop_perf_record(rec)
        self.assertIn("py::foo:<string>",
                      self.perf_report(data, "--no-inline"))

    @unittest.skipIf(shutil.which("eu-stack") is None or
                     shutil.which("nsenter") is None,
                     "no eu-stack (elfutils) or nsenter (util-linux)")
    def test_eu_stack_in_the_container_namespaces(self):
        # elfutils opens the paths of /proc/PID/maps in its own mount
        # namespace: the howto's line runs it in the container's.
        c, pid = self.start_service("-X", "perf")
        proc = subprocess.run(["nsenter", "-t", str(pid), "-a",
                               "eu-stack", "-p", "1"],
                              capture_output=True, text=True, timeout=120)
        names = re.findall(r"py::(\w+):", proc.stdout)
        self.assertEqual(names[:3], ["foo", "bar", "baz"],
                         proc.stdout + proc.stderr)

    def perf_trampoline(self, *args):
        proc = subprocess.run(
            [sys.executable, perf_trampoline.__file__, *map(str, args)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=ph.env_with(), timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout

    def test_activate_status_deactivate(self):
        c, pid = self.start_service()
        self.assertIn("perf", self.perf_trampoline("activate", pid))
        status = self.perf_trampoline("status", pid)
        # (the file as the process names it, in its own /tmp)
        self.assertIn("/tmp/perf-1.map", status)
        self.perf_trampoline("deactivate", pid)
        with pt.Target(pid, write=False) as target:
            self.assertEqual(target.snapshot().active, 0)
        # (written by the deactivation at the latest)
        with open(f"/proc/{pid}/root/tmp/perf-1.map") as f:
            self.assertIn(" py::foo:<string>\n", f.read())

    def test_podman(self):
        # The howto's podman line finds the host pid of a service in a
        # podman container; record --pid names its functions, while it
        # runs and after the container was removed.
        self.require_perf()
        setup, problem = podman_setup()
        if problem is not None:
            self.skipTest(problem)
        p = Podman(self, setup)
        started = p.run("python", "-c", SERVICE)
        self.assertEqual(started.returncode, 0, started.stderr)
        p.wait_for_line("READY")
        self.assertIn("PID 1", p.podman("logs", p.name).stdout.splitlines())
        inspect = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Pid}}", p.name],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(inspect.returncode, 0, inspect.stderr)
        pid = int(inspect.stdout)
        self.assertEqual(_cmdline(pid)[:1], [p.python.encode()])
        proc = self.record("--pid", pid, "--duration", 2, "--python")
        self.assertIn("py::foo:<string>", self.folded())
        p.remove()
        self.assertNotEqual(_cmdline(pid)[:1], [p.python.encode()])
        self.assertNamedAfterTheEnd(proc)

    @unittest.skipIf(shutil.which("gdb") is None, "no gdb")
    def test_gdb(self):
        c, pid = self.start_service("-X", "perf")
        proc = subprocess.run(["gdb", "-nx", "-batch", "-p", str(pid),
                               "-ex", "bt"], capture_output=True, text=True,
                              timeout=300)
        names = re.findall(r"py::(\w+) ", proc.stdout)
        self.assertEqual(names[:3], ["foo", "bar", "baz"], proc.stdout)


if __name__ == "__main__":
    unittest.main()
