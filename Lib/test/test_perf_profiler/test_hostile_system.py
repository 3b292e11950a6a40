"""Hostile environments: a /tmp that is read-only, not a directory,
noexec or full; no descriptors left; executable memory refused; signal
storms (the rows of the table "Bad input and hostile environments" of
the project's Doc/cpython-perf/using.md after the file names; the rest is
in test_hostile_input)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

from test import support
from test.support import import_helper
from test.support import os_helper
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, JIT_CODE_LOAD, MAP_LINE, NO_TRAMPOLINE, env_with,
    forget_path, jit_path, map_path, read_jitdump, read_map_file, script_pid)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    CHURN, HostileInputCase, MANY_FUNCTIONS, interpreter_dirs_under_tmp,
    pid_namespace_command, rebind_interpreter, setUpModule, tearDownModule)


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class TestHostileInput(HostileInputCase):
    """Hostile environments, one test per row of the table "Bad input
    and hostile environments" (Doc/cpython-perf/using.md) from the hostile
    /tmp on: a clear error or warning, the program and its output
    untouched, files that stay readable."""

    # -- a hostile /tmp ------------------------------------------------------

    def run_with_tmp(self, setup, option, code=None, after="true"):
        """Run `code` under -X `option` in a private mount namespace whose
        /tmp `setup` (shell commands) has changed, then `after` (shell
        commands, in the namespace).  `$PY` is the interpreter.  Returns
        the CompletedProcess; its return code is the interpreter's."""
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        code = code or ("import os; print('PID', os.getpid(), flush=True)\n"
                        "def f():\n    return 45\nprint('output intact', f())")
        shell = (f'PY=$0; {setup} || exit 99; "$PY" -X {option} -c "$1"; '
                 f'rc=$?; {after}; exit $rc')
        proc = subprocess.run([unshare, "-m", "sh", "-c", shell,
                               sys.executable, code],
                              capture_output=True, text=True, env=env_with())
        if proc.returncode == 99:
            self.skipTest(f"cannot set up /tmp here: {proc.stderr}")
        return proc

    def tmpfs_on_tmp(self, options):
        """Shell commands for run_with_tmp(): a new tmpfs mounted with
        `options` becomes /tmp, the real one stays visible at /tmp/orig,
        and the interpreter's directories under /tmp are bound back."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        return (f'mount -t tmpfs -o {options} none {tmp} && '
                f'mkdir {tmp}/orig && mount --bind /tmp {tmp}/orig && '
                f'mount --move {tmp} /tmp && '
                + rebind_interpreter("/tmp/orig"))

    def check_warned_and_ran(self, proc, message):
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[-1], "output intact 45")
        self.assertIn("RuntimeWarning: perf trampoline: cannot create",
                      proc.stderr)
        self.assertIn(message, proc.stderr)
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)

    def test_tmp_read_only(self):
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc = self.run_with_tmp(
                    "mount --bind /tmp /tmp && "
                    "mount -o remount,bind,ro /tmp", option)
                self.check_warned_and_ran(proc, "Read-only file system")

    def test_tmp_not_a_directory(self):
        # A new root in which /tmp is a regular file, the rest of the
        # system bound in.
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        shell = ('R=$(mktemp -d) && mount -t tmpfs none "$R" || exit 99; '
                 'for d in /*; do [ "$d" = /tmp ] && continue; '
                 '[ -d "$d" ] || continue; mkdir "$R$d" && '
                 'mount --rbind "$d" "$R$d" || exit 99; done; '
                 'echo "not a directory" > "$R/tmp" || exit 99; '
                 'mkdir "$R/tmp-orig" && mount --rbind /tmp "$R/tmp-orig" '
                 '|| exit 99; '
                 'exec chroot "$R" "$@"')

        def in_new_root(*command):
            proc = subprocess.run([unshare, "-m", "sh", "-c", shell, "sh",
                                   *command], capture_output=True,
                                  text=True, env=env_with())
            if proc.returncode == 99:
                self.skipTest("cannot make a new root here")
            return proc

        # Nothing can live under /tmp in that root, so nothing can be bound
        # back at its path there.  An interpreter whose tree does is run
        # as its real binary (a venv's python is a symlink to its base's,
        # and its pyvenv.cfg names it by absolute path), which finds its
        # prefix from where it is: from the real /tmp, bound in as
        # /tmp-orig, if it lives there, else (a venv under /tmp made from
        # an interpreter elsewhere) from its own place.
        python = sys.executable
        if interpreter_dirs_under_tmp():
            python = os.path.realpath(python)
            if python.startswith("/tmp/"):
                python = "/tmp-orig" + python[len("/tmp"):]
            # That is enough only for a tree that names its own files by
            # relative paths.  One that reaches them through an absolute
            # path under /tmp (an out-of-tree build whose configure was
            # run as /tmp/.../configure: its VPATH, where it finds Lib/,
            # is absolute; a source tree or libpython reached through a
            # symlink or an rpath into /tmp) cannot start in that root,
            # with or without -X perf: not what this test is about.
            probe = in_new_root(python, "-c", "pass")
            if probe.returncode or probe.stderr:
                first = (probe.stderr.strip().splitlines() or [""])[0]
                self.skipTest(f"this interpreter needs its files at their "
                              f"paths under /tmp, which a root where /tmp "
                              f"is a file cannot have (exit status "
                              f"{probe.returncode}: {first})")
        code = ("import os; print('PID', os.getpid(), flush=True)\n"
                "def f():\n    return 45\nprint('output intact', f())")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc = in_new_root(python, "-X", option, "-c", code)
                self.check_warned_and_ran(proc, "Not a directory")

    def test_tmp_noexec_jitdump(self):
        # A /tmp mounted noexec: the dump is made, but perf inject finds a
        # dump only through its executable mapping, which fails.  The
        # warning says that this is what failed, and why it may have.
        proc = self.run_with_tmp(self.tmpfs_on_tmp("noexec"), "perf_jit")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines()[-1], "output intact 45")
        self.assertRegex(
            proc.stderr,
            r"RuntimeWarning: perf trampoline: cannot map /tmp/jit-\d+\.dump "
            r"executable \(the marker perf inject looks for; is its file "
            r"system mounted noexec\?\): Operation not permitted; the "
            r"perf_jit backend is off")
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)

    def test_tmp_full_after_first_arena(self):
        # The disk fills up after the first arena file was mapped: that
        # file gets no room for more names, no new file can be made.  One
        # warning, and every later function is named where perf looks for
        # it: in the file that holds its trampoline (perf never reads the
        # map for a file's addresses), or, in anonymous memory, in the
        # map.  None is lost without a word; no SIGBUS.
        code = textwrap.dedent("""
            import os, sys
            print("PID", os.getpid(), flush=True)
            # (activating again writes the map's lines that wait)
            sys.activate_stack_trampoline("perf")
            st = os.statvfs("/tmp")
            fd = os.open("/tmp/filler", os.O_WRONLY | os.O_CREAT, 0o600)
            os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize - 40 * 1024)
            os.close(fd)
            ns = {}
            exec("\\n".join(f"def h{i}(): return {i}" for i in range(300)),
                 ns)
            print(sum(ns[f"h{i}"]() for i in range(300)))
            for line in open("/proc/self/maps"):
                fields = line.split()
                if fields[1] == "r-xp" and "/py-perf-" in fields[-1]:
                    print("MAP", *fields[0].split("-"), fields[-1])
            """)
        proc = self.run_with_tmp(
            self.tmpfs_on_tmp("size=4m"), "perf", code=code,
            after="for f in /tmp/py-perf-*.so; do echo FILE $f; "
                  "readelf -sW $f; done; echo '== map'; cat /tmp/perf-*.map")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out, _, rest = proc.stdout.partition("FILE ")
        files, _, map_text = ("FILE " + rest).partition("== map\n")
        self.assertEqual(out.split("MAP")[0].split()[-1],
                         str(sum(range(300))))
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                         proc.stderr)
        self.assertIn("No space left on device", proc.stderr)
        mapped = [(int(a, 16), int(b, 16), path) for a, b, path in
                  re.findall(r"^MAP (\w+) (\w+) (\S+)$", out, re.M)]
        symbols = {}
        for block in files.split("FILE ")[1:]:
            path, _, text = block.partition("\n")
            symbols[path] = {int(f[1], 16): f[7] for f in (
                line.split(None, 7) for line in text.splitlines())
                if len(f) == 8 and f[3] == "FUNC"}
        named = set()
        for line in map_text.splitlines():
            start, _, name = line.split(" ", 2)
            addr = int(start, 16)
            where = [(a, path) for a, b, path in mapped if a <= addr < b]
            if where:
                # (the file's addresses are its offsets; it is mapped
                # from offset 0)
                a, path = where[0]
                self.assertEqual(symbols[path].get(addr - a), name,
                                 f"{name} not in {path}")
            if name.startswith("py::h"):
                named.add(name)
        self.assertEqual(named, {f"py::h{i}:<string>" for i in range(300)})

    def test_tmp_full_jitdump(self):
        # (The map's counterpart is TestPerfMapFile.test_full_disk, in
        # test_map_file.)  A small tmpfs on /tmp, 320 KiB over the reserve
        # the files leave free (1 MiB here): the program runs on, one
        # warning says why, the reserve stays free, and the dump keeps its
        # whole records, strictly valid.
        proc = self.run_with_tmp(
            self.tmpfs_on_tmp("size=1344k"), "perf_jit", code=MANY_FUNCTIONS,
            after="echo '== free'; stat -f -c '%a %S' /tmp; "
                  "echo '== dump'; od -An -v -tx1 /tmp/jit-*.dump")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out, _, rest = proc.stdout.partition("== free\n")
        free, _, dump = rest.partition("== dump\n")
        self.assertEqual(out.split()[-1], str(sum(range(3000))))
        blocks, size = map(int, free.split())
        self.assertGreaterEqual(blocks * size, 1024 * 1024)
        self.assertIn("RuntimeWarning: perf trampoline: no room left in "
                      "/tmp (No space left on device; it leaves 1 MiB or 2% "
                      "of it free for other programs)", proc.stderr)
        self.assertIn("the perf_jit backend stays on", proc.stderr)
        self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                         proc.stderr)
        path = os.path.join(self.enterContext(os_helper.temp_dir()),
                            "jit.dump")
        with open(path, "wb") as f:
            f.write(bytes.fromhex(dump))
        records = read_jitdump(path, script_pid(out))
        loads = [rec for rid, rec in records if rid == JIT_CODE_LOAD]
        self.assertGreater(len(loads), 100)

    def test_tmp_reserve_kept_under_churn(self):
        # A 20 MiB /tmp and 300,000 new functions, more than its files can
        # hold: the files stop at the reserve (1 MiB here, polled by the
        # program itself every 100 functions), with one warning, the
        # backend stays on, functions named before stay named; once room
        # is made (the program removes a file of its own), a function
        # first called a second later is named again.
        code = CHURN + textwrap.dedent("""
            import time
            with open("/tmp/filler", "wb") as f:
                f.write(bytes(2 << 20))
            def first():
                return 1
            first()
            least = None
            for i in churn(300_000):
                st = os.statvfs("/tmp")
                free = st.f_bavail * st.f_frsize
                least = free if least is None else min(least, free)
            os.unlink("/tmp/filler")
            time.sleep(1.2)
            def after_room():
                return 1
            after_room()
            print("least free", least, sys.is_stack_trampoline_active())
            """)
        for option, file in (("perf", "perf-*.map"),
                             ("perf_jit", "jit-*.dump")):
            with self.subTest(option=option):
                proc = self.run_with_tmp(
                    self.tmpfs_on_tmp("size=20m"), option, code=code,
                    after=f"echo '== names'; "
                          f"grep -aoE 'py::(first|after_room)' /tmp/{file}"
                          f" /tmp/py-perf-*.so | sed 's/.*py::/py::/'")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                out, _, names = proc.stdout.partition("== names\n")
                least, active = out.split()[-2:]
                self.assertGreaterEqual(int(least), 1 << 20)
                self.assertEqual(active, "True")
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                                 proc.stderr)
                self.assertIn("no room left in /tmp", proc.stderr)
                self.assertIn(f"the {option} backend stays on", proc.stderr)
                self.assertIn("py::first", names.split())
                self.assertIn("py::after_room", names.split())

    @support.skip_if_sanitizer("the sanitizer runtimes map memory of "
                               "their own for each thread", address=True,
                               memory=True, ub=True)
    def test_mappings_left_for_the_program(self):
        # The process fills its own address space with mappings (one page
        # each, alternately writable) until 250 of vm.max_map_count are
        # left, then makes new functions (a million with perf, 300,000
        # with perf_jit: without the headroom their arenas would take
        # about 100 and 170 mappings) and counts what is left: the
        # trampolines keep 1% of the limit (655 of 65,530) free for the
        # program, so they took none.  Then the program starts 50 threads
        # (two mappings each, stack and guard; glibc's malloc heaps held
        # to two by MALLOC_ARENA_MAX, whatever the number of CPUs): all
        # start; one warning; the backend stays on.  (100 threads took
        # 203 to 232 mappings here, from the 250: too close to call.)
        code = CHURN + textwrap.dedent("""
            import ctypes, mmap, threading
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_int]
            def mappings():
                with open("/proc/self/maps") as f:
                    return sum(1 for _ in f)
            limit = int(open("/proc/sys/vm/max_map_count").read())
            page = mmap.PAGESIZE
            n = limit - 250 - mappings()
            base = libc.mmap(None, n * page, mmap.PROT_READ,
                             mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
            assert base not in (None, ctypes.c_void_p(-1).value)
            for i in range(0, n, 2):
                libc.mprotect(base + i * page, page,
                              mmap.PROT_READ | mmap.PROT_WRITE)
            print("left", limit - mappings(), flush=True)
            for _ in churn(COUNT):
                pass
            print("after", limit - mappings(), flush=True)
            event = threading.Event()
            threads = []
            try:
                for _ in range(50):
                    t = threading.Thread(target=event.wait)
                    t.start()
                    threads.append(t)
            finally:
                event.set()
                for t in threads:
                    t.join()
            print("threads", len(threads), sys.is_stack_trampoline_active())
            """)
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        if limit > 300_000:
            # (each mapping costs the kernel some 200 bytes)
            self.skipTest(f"vm.max_map_count is {limit}: too many "
                          f"mappings for a test to fill")
        for option, count in (("perf", "1_000_000"),
                              ("perf_jit", "300_000")):
            with self.subTest(option=option):
                proc, pid = self.run_code(code.replace("COUNT", count),
                                          "-X", option,
                                          env=env_with(MALLOC_ARENA_MAX="2"))
                left = int(proc.stdout.split("left ")[1].split()[0])
                after = int(proc.stdout.split("after ")[1].split()[0])
                self.assertLessEqual(left, 260)
                # (the churn's own objects may move a few mappings)
                self.assertGreaterEqual(after, left - 20, proc.stdout)
                self.assertEqual(proc.stdout.split()[-3:],
                                 ["threads", "50", "True"])
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                                 proc.stderr)
                self.assertIn("no room for more trampolines: the process "
                              "has", proc.stderr)
                self.assertIn("vm.max_map_count", proc.stderr)

    def test_descriptor_limit_exhausted(self):
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(f"""
                    import os, resource, sys
                    print("PID", os.getpid(), flush=True)
                    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
                    held = []
                    try:
                        while True:
                            held.append(os.open(os.devnull, os.O_RDONLY))
                    except OSError:
                        pass
                    sys.activate_stack_trampoline({option!r})
                    print(sys.is_stack_trampoline_active())
                    for fd in held:
                        os.close(fd)
                    sys.activate_stack_trampoline({option!r})
                    def later():
                        return 1
                    later()
                    print(sys.is_stack_trampoline_active())
                    """)
                self.assertEqual(proc.stdout.split()[-2:], ["False", "True"])
                self.assertIn("RuntimeWarning: perf trampoline: cannot "
                              "create", proc.stderr)
                self.assertIn("Too many open files", proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
                self.assertIn("py::later:<string>", self.check_files(pid))

    def test_stale_file_of_same_pid(self):
        # A file left by an earlier process with our pid (as pid 1 of a
        # pid namespace, this one's pid is known): perf must not show its
        # names for ours.  It is truncated before our first record.
        pid1 = pid_namespace_command(self)
        stale = {"perf": ("7f0000000000 1000 py::stale_function:old.py\n"
                          * 1000).encode(),
                 "perf_jit": b"\x01" * 40 + b"py::stale_function" * 500}
        for option, path in (("perf", map_path(1)),
                             ("perf_jit", jit_path(1))):
            with self.subTest(option=option):
                os_helper.unlink(path)
                with open(path, "wb") as f:
                    f.write(stale[option])
                os.chmod(path, 0o600)
                # last written by that earlier process, a while ago
                old = os.stat(path).st_mtime - 3600
                os.utime(path, (old, old))
                proc = subprocess.run(
                    [*pid1, sys.executable, "-X", option, "-c",
                     "def ours():\n    return 2\nprint(ours())"],
                    capture_output=True, text=True, env=env_with())
                forget_path(self, path)
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                                 (0, "2\n", ""))
                names = set()
                if option == "perf":
                    for line in read_map_file(path):
                        self.assertRegex(line, MAP_LINE)
                        names.add(line.split(" ", 2)[2])
                else:
                    for rid, rec in read_jitdump(path, 1):
                        if rid == JIT_CODE_LOAD:
                            names.add(rec["name"])
                self.assertIn("py::ours:<string>", names)
                self.assertFalse([n for n in names if "stale" in n])
                with open(path, "rb") as f:
                    self.assertNotIn(b"stale", f.read())

    # -- executable memory refused -------------------------------------------

    # Under RLIMIT_AS the sanitizers' runtimes cannot map memory of their
    # own either (ASan's stack depot, which records the stack of each new
    # allocation site, grows 64 KiB at a time; its fake stacks; the
    # symbolizer a UBSan report uses): the runtime, not the interpreter,
    # gives up (exit status 99 in tools/sanitize.sh).  `make sanitize`
    # configures --with-address-sanitizer and
    # --with-undefined-behavior-sanitizer, which put -fsanitize=address
    # and -fsanitize=undefined into CFLAGS, where check_sanitizer() looks.
    @support.skip_if_sanitizer("RLIMIT_AS also refuses the sanitizer "
                               "runtime's own mappings", address=True,
                               memory=True, ub=True)
    def test_address_space_limit(self):
        # RLIMIT_AS (ulimit -v) reached: no new arena of trampolines.  The
        # backend stays on; new functions run without a trampoline, and
        # get one again once there is room (looked for after a second).
        # The
        # limit is set 4 MiB below the process's size, so that no new
        # mapping can succeed, even after the allocator gave some back;
        # the interpreter's own allocations meanwhile come from room left
        # in malloc's heap (64 KiB blocks freed between kept ones, which
        # malloc reuses, and which no mmap() can), not from the slack the
        # allocators happened to have.  The main thread's stack is grown
        # first, as the limit would stop that too.
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(f"""
                    import os, resource, sys
                    print("PID", os.getpid(), flush=True)
                    sys.activate_stack_trampoline({option!r})
                    def vm_size():
                        with open("/proc/self/status") as f:
                            for line in f:
                                if line.startswith("VmSize:"):
                                    return int(line.split()[1]) * 1024
                    code = compile("\\n".join(f"def f{{i}}(): return {{i}}"
                                              for i in range(3000)),
                                   "<many>", "exec")
                    ns = {{}}
                    exec(code, ns)
                    nested = []
                    for _ in range(900):
                        nested = [nested]
                    repr(nested)
                    kept, room = [], []
                    for _ in range(64):
                        room.append(bytearray(64 * 1024))
                        kept.append(bytearray(1024))
                    del room
                    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
                    resource.setrlimit(resource.RLIMIT_AS,
                                       (vm_size() - 4 * 1024 * 1024, hard))
                    def executable():
                        with open("/proc/self/maps") as f:
                            return sum(" r-xp " in line for line in f)
                    total = sum(ns[f"f{{i}}"]() for i in range(3000))
                    before = executable()
                    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
                    # Called until it has a trampoline: a new arena, once
                    # the arenas look for room again (after 1 s, or 2 s...)
                    import time
                    def after_the_limit():
                        return 0
                    deadline = time.monotonic() + 120
                    while (executable() == before
                           and time.monotonic() < deadline):
                        after_the_limit()
                        time.sleep(0.1)
                    after_the_limit()     # (the arena may be another's)
                    print("output intact", total,
                          sys.is_stack_trampoline_active())
                    """)
                self.assertEqual(proc.stdout.split()[-4:],
                                 ["output", "intact", str(sum(range(3000))),
                                  "True"])
                self.assertIn("RuntimeWarning: perf trampoline: no room for "
                              "more trampolines: no memory for another "
                              "arena: Cannot allocate memory", proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1)
                names = self.check_files(pid)
                self.assertIn("py::after_the_limit:<string>", names)

    # A seccomp filter that refuses to make memory executable, as a W^X
    # policy (SELinux's execmem) does: mprotect(..., PROT_EXEC) fails with
    # EACCES.  Linux x86_64 numbers.
    WX_POLICY = """
        import ctypes, errno, struct
        def _bpf(code, k, jt=0, jf=0):
            return struct.pack("HBBI", code, jt, jf, k)
        _filter = b"".join([
            _bpf(0x20, 4),                         # ld arch
            _bpf(0x15, 0xC000003E, 1, 0),          # x86_64?
            _bpf(0x06, 0x7FFF0000),                # allow
            _bpf(0x20, 0),                         # ld syscall number
            _bpf(0x15, 10, 0, 3),                  # mprotect?
            _bpf(0x20, 32),                        # ld args[2] (prot)
            _bpf(0x45, 4, 0, 1),                   # PROT_EXEC set?
            _bpf(0x06, 0x00050000 | errno.EACCES), # fail with EACCES
            _bpf(0x06, 0x7FFF0000),                # allow
        ])
        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
        _libc = ctypes.CDLL(None, use_errno=True)
        _prog = _Prog(len(_filter) // 8, _filter)
        if (_libc.prctl(38, 1, 0, 0, 0) != 0          # PR_SET_NO_NEW_PRIVS
                or _libc.prctl(22, 2, ctypes.byref(_prog), 0, 0) != 0):
            print("SECCOMP FAILED", flush=True)
        """

    def test_executable_memory_refused(self):
        # A W^X policy forbids making memory executable, not mapping a
        # file for execution (what every shared library needs): the
        # arena files work, and perf names the functions.
        import_helper.import_module("ctypes")
        if os.uname().machine != "x86_64":
            self.skipTest("the filter is written for x86_64")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(textwrap.dedent(self.WX_POLICY)
                                          + textwrap.dedent(f"""
                    import os, sys
                    print("PID", os.getpid(), flush=True)
                    sys.activate_stack_trampoline({option!r})
                    def f(n):
                        return n + 1
                    print("output intact", f(1), f(2))
                    print(sys.is_stack_trampoline_active())
                    """))
                if "SECCOMP FAILED" in proc.stdout:
                    self.skipTest("cannot install a seccomp filter here")
                self.assertEqual(proc.stdout.splitlines()[-2:],
                                 ["output intact 2 3", "True"])
                self.assertNotIn("RuntimeWarning", proc.stderr)
                self.assertIn("py::f:<string>", self.check_files(pid))

    def test_executable_memory_and_files_refused(self):
        # The same policy with /tmp mounted noexec: no arena file can be
        # mapped, no anonymous memory made executable.  One warning, the
        # backend off, the program untouched.
        import_helper.import_module("ctypes")
        if os.uname().machine != "x86_64":
            self.skipTest("the filter is written for x86_64")
        unshare = shutil.which("unshare")
        if unshare is None or os.geteuid() != 0:
            self.skipTest("needs unshare and root for a mount namespace")
        if os.path.realpath(sys.executable).startswith("/tmp/"):
            self.skipTest("the interpreter lives under /tmp")
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                code = textwrap.dedent(self.WX_POLICY) + textwrap.dedent(f"""
                    import os, sys
                    sys.activate_stack_trampoline({option!r})
                    def f(n):
                        return n + 1
                    print("output intact", f(1), f(2))
                    print(sys.is_stack_trampoline_active())
                    """)
                proc = subprocess.run(
                    [unshare, "-m", "--propagation", "private", "sh", "-c",
                     'mount -t tmpfs -o noexec none /tmp || exit 99; '
                     'exec "$@"', "sh", sys.executable, "-c", code],
                    capture_output=True, text=True, env=env_with())
                if proc.returncode == 99:
                    self.skipTest("cannot mount a tmpfs here")
                if "SECCOMP FAILED" in proc.stdout:
                    self.skipTest("cannot install a seccomp filter here")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.splitlines()[-2:],
                                 ["output intact 2 3", "False"])
                # (perf_jit's marker, a mapping of its dump, fails first)
                self.assertIn(
                    "RuntimeWarning: perf trampoline: cannot map executable "
                    "memory for trampolines: Permission denied"
                    if option == "perf" else
                    "RuntimeWarning: perf trampoline: cannot map /tmp/jit-",
                    proc.stderr)
                self.assertEqual(proc.stderr.count("RuntimeWarning"), 1,
                                 proc.stderr)

    # -- signals -------------------------------------------------------------

    def test_signal_storm_while_creating_trampolines(self):
        # SIGALRM every 100 us while thousands of trampolines are made and
        # written; every 7th signal that arrives in the try block raises
        # KeyboardInterrupt, which the program handles by doing the
        # interrupted function again.
        code = """
            import os, signal, sys
            print("PID", os.getpid(), flush=True)
            alarms = interrupts = 0
            inside = False
            def on_alarm(signum, frame):
                global alarms
                alarms += 1
                if inside and alarms % 7 == 0:
                    raise KeyboardInterrupt
            signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
            done = set()
            for i in range(6000):
                while i not in done:
                    try:
                        inside = True
                        ns = {}
                        exec(f"def g{i}(): return {i}", ns)
                        if ns[f"g{i}"]() == i:
                            done.add(i)
                        inside = False
                    except KeyboardInterrupt:
                        inside = False
                        interrupts += 1
            signal.setitimer(signal.ITIMER_REAL, 0)
            print(len(done), interrupts > 0)
            """
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(code, "-X", option)
                self.assertEqual(proc.stdout.split()[-2:], ["6000", "True"])
                self.assertEqual(proc.stderr, "")
                names = self.check_files(pid)
                for i in range(6000):
                    self.assertIn(f"py::g{i}:<string>", names)

    def test_unhandled_interrupt_while_creating_trampolines(self):
        # SIGINT, with Python's default handler, in the middle of making
        # trampolines: KeyboardInterrupt at a normal place, the usual exit,
        # files closed and whole.
        # Python's own SIGINT handler is installed whatever the child
        # inherits (a shell's background job ignores SIGINT, and Python
        # then leaves it ignored); the loop ends anyway, so that a lost
        # interrupt fails the test instead of filling /tmp.
        code = """
            import os, signal
            print("PID", os.getpid(), flush=True)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGALRM,
                          lambda *a: os.kill(os.getpid(), signal.SIGINT))
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            for i in range(1_000_000):
                ns = {}
                exec(f"def h{i}(): return {i}", ns)
                ns[f"h{i}"]()
            print("not interrupted")
            """
        for option in ("perf", "perf_jit"):
            with self.subTest(option=option):
                proc, pid = self.run_code(code, "-X", option,
                                          returncode=-signal.SIGINT)
                self.assertIn("KeyboardInterrupt", proc.stderr)
                self.assertNotIn("Fatal", proc.stderr)
                self.assertIn("py::h0:<string>", self.check_files(pid))


if __name__ == "__main__":
    unittest.main()
