"""Readers of the arena files while the process runs and names more
functions: a reader that mapped a file early reads whole names within the
sizes it read then; naming costs no system call per function.  (perf top
reads the files the same way; here it samples too rarely to be tested:
nothing for minutes at a time, even in a shell loop.)"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test.support import import_helper
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, NO_TRAMPOLINE, arena_paths, env_with, forget_files,
    forget_process)
from ._common import MANY_FUNCTIONS, setUpModule, tearDownModule  # noqa


# Names functions when told to, a line on stdin each time.
NAMER = textwrap.dedent("""\
    import os, sys
    print("PID", os.getpid(), flush=True)
    ns = {}
    batch = 0
    # (a long file name: names of 120 bytes and more)
    where = "/" + "long-directory-name/" * 4 + "module.py"
    for line in sys.stdin:
        names = [f"g{batch}_{i}" for i in range(int(line))]
        exec(compile("\\n".join(f"def {n}(): return 1" for n in names),
                     where, "exec"), ns)
        for n in names:
            ns[n]()
        batch += 1
        print("NAMED", flush=True)
    """)


def sections(data):
    """{name: (offset, size)} of the ELF file in `data` (a mapping)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
               for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(h):
        end = data.find(b"\0", names_at + h[0])
        return data[names_at + h[0]:end].decode()
    return {name(h): (h[4], h[5]) for h in headers}


@unittest.skipIf(not HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class LiveReaderTests(unittest.TestCase):

    def setUp(self):
        # (forget_files() removes the files written since)
        self.since = time.time() - 1

    def start_namer(self, *options):
        proc = subprocess.Popen([sys.executable, *options, "-c", NAMER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=env_with())
        forget_process(self, proc)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.stdin.close)
        pid = int(proc.stdout.readline().split()[1])
        return proc, pid

    def name_more(self, proc, n):
        proc.stdin.write(f"{n}\n")
        proc.stdin.flush()
        self.assertEqual(proc.stdout.readline().strip(), "NAMED")

    def test_reader_mapped_early_reads_whole_names(self):
        # A reader maps the file and reads its section headers once, as
        # libelf does for perf; the process then names 120 more
        # functions.  Every symbol it finds has its whole name within the
        # .strtab it read first (the sizes are fixed when the file is
        # made; names are written before the symbols that point to them).
        mmap = import_helper.import_module("mmap")
        proc, pid = self.start_namer("-X", "perf")
        self.name_more(proc, 10)
        path = arena_paths(pid, self.since)[-1]
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.addCleanup(data.close)
        secs = sections(data)
        symtab, strtab = secs[".symtab"], secs[".strtab"]
        self.name_more(proc, 120)
        names = []
        for off in range(symtab[0], symtab[0] + symtab[1], 24):
            st_name, st_info = struct.unpack_from("<IB", data, off)
            if st_info & 0xf != 2:          # not STT_FUNC: no symbol yet
                continue
            self.assertLess(st_name, strtab[1])
            end = data.find(b"\0", strtab[0] + st_name,
                            strtab[0] + strtab[1])
            self.assertNotEqual(end, -1, "a name without its end")
            names.append(data[strtab[0] + st_name:end].decode())
        batch = [n for n in names if n.startswith("py::g1_")]
        # (all of them, unless the arena filled up and the rest went to
        # a file that did not exist yet)
        self.assertGreater(len(batch), 0, names)
        for n in batch:
            self.assertRegex(n, r"^py::g1_\d+:/(long-directory-name/){4}"
                                r"module\.py$")

    def test_system_calls_per_function(self):
        # Names go through memory and records out in blocks: far less than
        # one system call per new function (counted, not timed), where it
        # was seven.
        strace = shutil.which("strace")
        if strace is None:
            self.skipTest("needs strace")
        counts = {}
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        for mode in ("off", "perf", "perf_jit"):
            out = os.path.join(tmp, mode)
            options = [] if mode == "off" else ["-X", mode]
            proc = subprocess.run(
                [strace, "-f", "-c", "-o", out, sys.executable, *options,
                 "-c", MANY_FUNCTIONS],
                capture_output=True, text=True, env=env_with())
            if proc.returncode != 0 and "ptrace" in proc.stderr:
                self.skipTest("strace cannot trace here")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            forget_files(self, int(proc.stdout.split()[1]))
            with open(out) as f:
                total = [line.split() for line in f if line.endswith(
                    "total\n")][0]
            counts[mode] = int(total[3 if len(total) == 6 else 2])
        for mode in ("perf", "perf_jit"):
            per_function = (counts[mode] - counts["off"]) / 3000
            self.assertLess(per_function, 0.25, counts)


if __name__ == "__main__":
    unittest.main()
