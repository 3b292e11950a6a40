"""The interpreter as one tenant of a process: other JITs on the debuggers'
interface, tracemalloc and C-API callers without the GIL, libraries that
fork."""

import importlib.machinery
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import unittest

from test.support import os_helper, requires_subprocess
from test.support.script_helper import make_script
from test.support.perf_helper import (
    HAVE_TRAMPOLINE, env_with, forget_files, forget_process, load_map_symbols,
    map_path, run_python)

from ._common import setUpModule, tearDownModule  # noqa: F401
from .test_debuggers import build_id_of, frame_names, ptrace_problem


# The PyUnstable_ map functions called through ctypes.CDLL, which releases
# the GIL around each call, while tracemalloc traces the raw allocator (in
# 3.11 its hooks take the GIL) and other threads make functions, switch
# the backend and fork.  The source map has lines longer than the copy's
# first buffer, which then grows.
NO_GIL_CALLERS = """\
import ctypes, os, sys, threading, time, tracemalloc
print("PID", os.getpid(), flush=True)
tracemalloc.start()
api = ctypes.CDLL(None)
api.PyUnstable_CopyPerfMapFile.argtypes = [ctypes.c_char_p]
api.PyUnstable_WritePerfMapEntry.argtypes = [
    ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]
source = sys.argv[1].encode()
stop = time.monotonic() + float(sys.argv[2])

def c_api():
    for _ in range(200):
        if time.monotonic() > stop:
            break
        api.PyUnstable_PerfMapState_Init()
        api.PyUnstable_CopyPerfMapFile(source)
        api.PyUnstable_WritePerfMapEntry(0x1000, 16, b"entry")
        api.PyUnstable_PerfMapState_Fini()

def make_functions():
    n = 0
    while time.monotonic() < stop:
        ns = {}
        exec(f"def f{n}(): return {n}", ns)
        ns[f"f{n}"]()
        n += 1

def switch():
    while time.monotonic() < stop:
        sys.deactivate_stack_trampoline()
        sys.activate_stack_trampoline("perf")
        time.sleep(0.001)

def fork():
    while time.monotonic() < stop:
        pid = os.fork()
        if pid == 0:
            os.write(1, b"PID %d\\n" % os.getpid())
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.01)

threads = [threading.Thread(target=f) for f in
           (c_api, c_api, make_functions, make_functions, switch, fork)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", flush=True)
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, "no perf trampoline on this platform")
@requires_subprocess()
class NoDeadlockTests(unittest.TestCase):

    def setUp(self):
        self.since = time.time() - 1

    def test_c_api_without_the_gil_under_tracemalloc(self):
        # Before the fix a C-API caller grew its buffer with
        # PyMem_RawRealloc() while holding the files' lock: tracemalloc's
        # hook then waited for the GIL, whose holder waited for the lock.
        source = os_helper.TESTFN + ".map"
        self.addCleanup(os_helper.unlink, source)
        with open(source, "w") as f:
            # (longer than PERF_RECORD_MAX, 16 KiB)
            f.write(f"2000 10 {'y' * 20_000}\n")
        script = os_helper.TESTFN + ".py"
        self.addCleanup(os_helper.unlink, script)
        with open(script, "w") as f:
            f.write(NO_GIL_CALLERS)
        proc = subprocess.Popen([sys.executable, "-X", "perf", script,
                                 source, "3"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=env_with())
        forget_process(self, proc)
        hung = False
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            hung = True
            proc.kill()
            out, err = proc.communicate()
        # (its children print their pids too)
        for pid in re.findall(r"^PID (\d+)", out, re.M)[1:]:
            forget_files(self, int(pid))
        if hung:
            self.fail("deadlock: the process did not end in 60 s")
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("done", out)


# A JIT of its own in a C library, defining the debuggers' interface
# strongly, as LLVM does, and guarding its list with its own mutex.  Its
# threads link and unlink entries in a loop (jl_churn); one entry, made by
# jl_make(), describes a function it wrote (x86-64: a frame record around
# a call of its argument) in a relocatable ELF object of its own making,
# named "clib_jitted_call"; jl_check() walks the list it sees and returns
# how many entries it holds, or a negative number when the list is not
# its own or not whole.
CLIB = r"""
#include <elf.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct jit_code_entry {
    struct jit_code_entry *next_entry, *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};
struct jit_descriptor {
    uint32_t version, action_flag;
    struct jit_code_entry *relevant_entry, *first_entry;
};
struct jit_descriptor __jit_debug_descriptor = {1, 0, 0, 0};
void __attribute__((noinline)) __jit_debug_register_code(void)
{
    __asm__ volatile("" ::: "memory");
}

#define NTHREADS 4
#define PER_THREAD 8
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct jit_code_entry entries[NTHREADS * PER_THREAD + 1];
static struct jit_code_entry *made = &entries[NTHREADS * PER_THREAD];
static unsigned char *code;
static union { Elf64_Ehdr h; char bytes[1024]; } obj;

static void
link_entry(struct jit_code_entry *e)
{
    pthread_mutex_lock(&lock);
    e->prev_entry = NULL;
    e->next_entry = __jit_debug_descriptor.first_entry;
    if (e->next_entry != NULL) {
        e->next_entry->prev_entry = e;
    }
    __jit_debug_descriptor.first_entry = e;
    __jit_debug_descriptor.relevant_entry = e;
    __jit_debug_descriptor.action_flag = 1;
    __jit_debug_register_code();
    pthread_mutex_unlock(&lock);
}

static void
unlink_entry(struct jit_code_entry *e)
{
    pthread_mutex_lock(&lock);
    if (e->prev_entry != NULL) {
        e->prev_entry->next_entry = e->next_entry;
    }
    else {
        __jit_debug_descriptor.first_entry = e->next_entry;
    }
    if (e->next_entry != NULL) {
        e->next_entry->prev_entry = e->prev_entry;
    }
    __jit_debug_descriptor.relevant_entry = e;
    __jit_debug_descriptor.action_flag = 2;
    __jit_debug_register_code();
    pthread_mutex_unlock(&lock);
}

static int iterations;

static void *
churn(void *arg)
{
    struct jit_code_entry *mine = &entries[(intptr_t)arg * PER_THREAD];
    for (int i = 0; i < iterations; i++) {
        for (int k = 0; k < PER_THREAD; k++) {
            link_entry(&mine[k]);
        }
        for (int k = PER_THREAD - 1; k >= 0; k--) {
            unlink_entry(&mine[k]);
        }
    }
    return NULL;
}

int
jl_churn(int n)
{
    pthread_t t[NTHREADS];
    iterations = n;
    for (intptr_t i = 0; i < NTHREADS; i++) {
        if (pthread_create(&t[i], NULL, churn, (void *)i) != 0) {
            return -1;
        }
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
    }
    return 0;
}

int
jl_check(void)
{
    int n = 0;
    struct jit_code_entry *prev = NULL;
    pthread_mutex_lock(&lock);
    for (struct jit_code_entry *e = __jit_debug_descriptor.first_entry;
         e != NULL; e = e->next_entry)
    {
        if (e < entries || e > made) {
            n = -1;             /* an entry that is not ours */
            break;
        }
        if (e->prev_entry != prev || ++n > NTHREADS * PER_THREAD + 1) {
            n = -2;             /* links that do not agree */
            break;
        }
        prev = e;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static void
add_section(Elf64_Shdr *sh, uint32_t name, uint32_t type, uint64_t flags,
            uint64_t addr, uint64_t off, uint64_t size)
{
    sh->sh_name = name;
    sh->sh_type = type;
    sh->sh_flags = flags;
    sh->sh_addr = addr;
    sh->sh_offset = off;
    sh->sh_size = size;
    sh->sh_addralign = 1;
}

int
jl_make(void)
{
    static const unsigned char insns[] = {
        0x55,                   /* push %rbp */
        0x48, 0x89, 0xe5,       /* mov %rsp,%rbp */
        0xff, 0xd7,             /* call *%rdi */
        0x5d,                   /* pop %rbp */
        0xc3,                   /* ret */
    };
    static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
    static const char str[] = "\0clib_jitted_call";
    code = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        return -1;
    }
    memcpy(code, insns, sizeof(insns));
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0) {
        return -1;
    }
    Elf64_Ehdr *h = &obj.h;
    memcpy(h->e_ident, ELFMAG, SELFMAG);
    h->e_ident[EI_CLASS] = ELFCLASS64;
    h->e_ident[EI_DATA] = ELFDATA2LSB;
    h->e_ident[EI_VERSION] = EV_CURRENT;
    h->e_type = ET_REL;
    h->e_machine = EM_X86_64;
    h->e_version = EV_CURRENT;
    h->e_ehsize = sizeof(Elf64_Ehdr);
    h->e_shentsize = sizeof(Elf64_Shdr);
    h->e_shnum = 5;
    h->e_shstrndx = 4;
    size_t off = sizeof(Elf64_Ehdr);
    Elf64_Sym *sym = (Elf64_Sym *)(obj.bytes + off);
    sym[1].st_name = 1;
    sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym[1].st_shndx = 1;
    sym[1].st_size = sizeof(insns);
    size_t symtab = off;
    off += 2 * sizeof(Elf64_Sym);
    memcpy(obj.bytes + off, str, sizeof(str));
    size_t strtab = off;
    off += sizeof(str);
    memcpy(obj.bytes + off, shstr, sizeof(shstr));
    size_t shstrtab = off;
    off += sizeof(shstr);
    off = (off + 7) & ~(size_t)7;
    h->e_shoff = off;
    Elf64_Shdr *sh = (Elf64_Shdr *)(obj.bytes + off);
    add_section(&sh[1], 1, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR,
                (uint64_t)(uintptr_t)code, 0, sizeof(insns));
    add_section(&sh[2], 7, SHT_SYMTAB, 0, 0, symtab, 2 * sizeof(Elf64_Sym));
    sh[2].sh_link = 3;
    sh[2].sh_info = 1;
    sh[2].sh_entsize = sizeof(Elf64_Sym);
    sh[2].sh_addralign = 8;
    add_section(&sh[3], 15, SHT_STRTAB, 0, 0, strtab, sizeof(str));
    add_section(&sh[4], 23, SHT_STRTAB, 0, 0, shstrtab, sizeof(shstr));
    made->symfile_addr = obj.bytes;
    made->symfile_size = off + 5 * sizeof(Elf64_Shdr);
    link_entry(made);
    return 0;
}

void
jl_call(void (*callback)(void))
{
    ((void (*)(void (*)(void)))code)(callback);
}
"""

# The part of a test program that makes and calls new functions in the
# threads that run make_functions(), until `done` is set.
MAKE_FUNCTIONS = """\
done = threading.Event()
def make_functions():
    n = 0
    while not done.is_set():
        ns = {}
        exec(f"def g{n}(): return {n}", ns)
        ns[f"g{n}"]()
        n += 1
"""

# Loads the library (its calls through ctypes.CDLL release the GIL), has
# its threads churn while two Python threads make and name functions,
# prints what jl_check() says, then sleeps in inner(), called back
# through the library's function from outer().
CLIB_USER = """\
import ctypes, os, sys, threading, time
print("PID", os.getpid(), flush=True)
lib = ctypes.CDLL(sys.argv[1])
assert lib.jl_make() == 0
""" + MAKE_FUNCTIONS + """\
makers = [threading.Thread(target=make_functions) for _ in range(2)]
for t in makers:
    t.start()
lib.jl_churn(int(sys.argv[2]))
done.set()
for t in makers:
    t.join()
print("CHECK", lib.jl_check(), flush=True)
def inner():
    print("READY", flush=True)
    time.sleep(120)
def outer():
    lib.jl_call(ctypes.CFUNCTYPE(None)(inner))
outer()
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, "no perf trampoline on this platform")
@requires_subprocess()
class OtherJitTests(unittest.TestCase):
    """Other JITs of the process keep debuggers' lists of their own: the
    interpreter's __jit_debug_descriptor is its own (hidden), so that a
    library that defines the interface binds to its own definition, and
    each list changes under its owner's lock only."""

    def setUp(self):
        problem = ptrace_problem()
        if problem:
            self.skipTest(problem)
        self.tmp = tempfile.mkdtemp(prefix="test_perf_jits_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.since = time.time() - 1

    def build_clib(self):
        if platform.machine() != "x86_64":
            self.skipTest("the library writes x86-64 code")
        cc = shutil.which("cc")
        if cc is None:
            self.skipTest("no C compiler")
        src = os.path.join(self.tmp, "clib.c")
        lib = os.path.join(self.tmp, "libclib.so")
        with open(src, "w") as f:
            f.write(CLIB)
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-pthread",
                        "-o", lib, src], check=True)
        return lib

    def start(self, args, backend):
        proc = subprocess.Popen([sys.executable, "-X", backend, *args],
                                stdout=subprocess.PIPE, text=True,
                                env=env_with())
        forget_process(self, proc)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertEqual(proc.stdout.readline().split()[1:2], [str(proc.pid)])
        return proc

    def gdb_bt(self, pid, *options):
        proc = subprocess.run(["gdb", "-nx", "-batch", *options,
                               "-p", str(pid), "-ex", "thread apply all bt"],
                              capture_output=True, text=True, timeout=300)
        self.assertNotIn("Fatal signal", proc.stderr)
        return proc.stdout + proc.stderr

    def test_c_library_with_an_interface_of_its_own(self):
        lib = self.build_clib()
        script = make_script(self.tmp, "clib_user", CLIB_USER)
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                proc = self.start([script, lib, "20000"], backend)
                # Only the library's entry, and links that agree.
                self.assertEqual(proc.stdout.readline().split(),
                                 ["CHECK", "1"])
                self.assertEqual(proc.stdout.readline().strip(), "READY")
                out = self.gdb_bt(proc.pid)
                frames = frame_names(out)
                order = []
                for want in ("py::inner (", "clib_jitted_call",
                             "py::outer ("):
                    hits = [i for i, f in enumerate(frames)
                            if f.startswith(want)]
                    self.assertTrue(hits, f"no frame {want!r} in:\n{out}")
                    order.append(hits[0])
                self.assertEqual(order, sorted(order), out)
                proc.kill()

    def test_numba(self):
        # numba (LLVM 14's JIT, which defines the interface itself)
        # compiles in two threads while two others make Python functions,
        # all under gdb from the start, on a copy of the interpreter with
        # its symbols split off as distributions ship it.
        where = numba_problem()
        if where.startswith("!"):
            self.skipTest(where[1:])
        python = self.stripped_interpreter()
        script = make_script(self.tmp, "nb", NUMBA_USER)
        env = env_with(NUMBA_DEBUGINFO="1")
        # (one backend: both describe their trampolines to debuggers the
        # same way, and a run under gdb takes half a minute)
        proc = subprocess.run(
            ["gdb", "-nx", "-batch",
             "-iex", f"set debug-file-directory {self.debug_dir}",
             "-ex", "run", "-ex", "thread apply all bt", "-ex", "kill",
             "--args", python, "-X", "perf", script, where],
            capture_output=True, text=True, timeout=600, env=env)
        out = proc.stdout + proc.stderr
        for pid in re.findall(r"^PID (\d+)", out, re.M):
            forget_files(self, int(pid))
        m = re.search(r"^LLVM (-?\d+) (\d+)", out, re.M)
        self.assertIsNotNone(m, out)
        # LLVM's list whole, and holding what numba compiled.
        self.assertGreaterEqual(int(m.group(1)), int(m.group(2)), out)
        thread = [t for t in out.split("\nThread ") if "__main__::hot" in t]
        self.assertTrue(thread, out)
        # (numba's names hold parentheses: "hot[abi:...](long long)")
        frames = [line for line in thread[0].splitlines()
                  if line.startswith("#")]
        order = []
        for want in ("__main__::hot[", "py::f2 (", "py::f1 ("):
            # (gdb prints no address for frame #0 when the thread stopped
            # at the start of a line: "#0  __main__::hot[...")
            start = re.compile(r"#\d+\s+(?:0x[0-9a-f]+ in )?"
                               + re.escape(want))
            hits = [i for i, f in enumerate(frames) if start.match(f)]
            self.assertTrue(hits, f"no frame {want!r} in:\n{out}")
            order.append(hits[0])
        self.assertEqual(order, sorted(order), out)

    def stripped_interpreter(self):
        """A copy of this interpreter without .symtab, beside it (where
        it finds its standard library), and its symbols split off into
        a build-id directory of its own (self.debug_dir)."""
        exe = os.path.realpath(sys.executable)
        if sysconfig.get_config_var("Py_ENABLE_SHARED"):
            self.skipTest("the interpreter's symbols are libpython's")
        if not os.access(os.path.dirname(exe), os.W_OK):
            self.skipTest(f"cannot write beside {exe}")
        for tool in ("objcopy", "strip", "eu-readelf"):
            if shutil.which(tool) is None:
                self.skipTest(f"{tool} is not installed")
        copy = f"{exe}-stripped-{os.getpid()}"
        self.addCleanup(os_helper.unlink, copy)
        shutil.copy2(exe, copy)
        build_id = build_id_of(exe)
        self.debug_dir = os.path.join(self.tmp, "debug")
        debug = os.path.join(self.debug_dir, ".build-id", build_id[:2],
                             build_id[2:] + ".debug")
        os.makedirs(os.path.dirname(debug))
        subprocess.run(["objcopy", "--only-keep-debug", exe, debug],
                       check=True)
        subprocess.run(["strip", "--strip-all", copy], check=True)
        out = subprocess.run(["eu-readelf", "-S", copy], check=True,
                             capture_output=True, text=True).stdout
        self.assertNotIn(".symtab", out)
        return copy


# numba from Debian's package: "!why" when this interpreter cannot load
# it (another ABI), else the directory that holds it.
NUMBA_DIR = "/usr/lib/python3/dist-packages"


def numba_problem():
    package = os.path.join(NUMBA_DIR, "numba")
    if not os.path.isdir(package):
        # Installed by tools/install-deps.sh: missing is a failure.
        return NUMBA_DIR
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    if not any(name.endswith(tuple(suffixes))
               for name in os.listdir(package)
               if name.startswith("_dispatcher")):
        return f"!numba in {package} is built for another ABI"
    return NUMBA_DIR


# numba compiles in two threads while two others make Python functions;
# then LLVM's own list is walked (its links must agree) and "LLVM N M"
# printed: N entries, M functions compiled.  Then f1() calls f2(), which
# runs a numba loop (without the GIL) in a thread, and the main thread
# stops the process with SIGINT (gdb, which started it, shows every thread).
NUMBA_USER = """\
import ctypes, os, signal, sys, threading, time
sys.path.append(sys.argv[1])
import numba
print("PID", os.getpid(), flush=True)
compiled = []
def compile_some(k):
    for i in range(4):
        ns = {}
        exec(f"def j{k}_{i}(n):\\n"
             f"    s = 0\\n"
             f"    for x in range(n):\\n"
             f"        s += x * {i + 1} % 7\\n"
             f"    return s\\n", ns)
        numba.njit(ns[f"j{k}_{i}"])(10)
        compiled.append(i)
""" + MAKE_FUNCTIONS + """\
compilers = [threading.Thread(target=compile_some, args=(k,))
             for k in range(2)]
makers = [threading.Thread(target=make_functions) for _ in range(2)]
for t in compilers + makers:
    t.start()
for t in compilers:
    t.join()
done.set()
for t in makers:
    t.join()

class Entry(ctypes.Structure):
    pass
Entry._fields_ = [("next", ctypes.POINTER(Entry)),
                  ("prev", ctypes.POINTER(Entry)),
                  ("addr", ctypes.c_void_p), ("size", ctypes.c_uint64)]
class Descriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("action", ctypes.c_uint32),
                ("relevant", ctypes.POINTER(Entry)),
                ("first", ctypes.POINTER(Entry))]
with open("/proc/self/maps") as f:
    llvm = next(line.split()[-1] for line in f if "libLLVM" in line)
d = Descriptor.in_dll(ctypes.CDLL(llvm), "__jit_debug_descriptor")
n, prev, e = 0, None, d.first
while e:
    here = ctypes.addressof(e.contents)
    back = e.contents.prev
    if (ctypes.addressof(back.contents) if back else None) != prev:
        n = -1
        break
    n, prev, e = n + 1, here, e.contents.next
print("LLVM", n, len(compiled), flush=True)

@numba.njit(nogil=True)
def hot(n):
    s = 0
    for x in range(n):
        s += x * x % 7
    return s
hot(1)
def f2():
    hot(10 ** 13)
def f1():
    f2()
threading.Thread(target=f1, daemon=True).start()
time.sleep(1)
os.kill(os.getpid(), signal.SIGINT)
"""


# Other tools hold every co_extra index but `left` (argv[1]) of the 254 a
# 3.11 interpreter hands out (ours took one at start-up); then a child and a
# grandchild of os.fork() each run an inherited function and new ones
# (not in_parent()), and the grandchild takes every index still free
# ("FREE n").
EXTRA_INDEXES = """\
import ctypes, os, sys
print("PID", os.getpid(), flush=True)
request = ctypes.pythonapi._PyEval_RequestCodeExtraIndex
request.restype = ctypes.c_ssize_t
request.argtypes = [ctypes.c_void_p]
for _ in range(253 - int(sys.argv[1])):
    assert request(None) >= 0
def in_all():
    return 1
def in_child():
    return 2
def in_grandchild():
    return 3
def in_parent():
    return 4
in_all()
in_parent()
if os.fork() == 0:
    print("PID", os.getpid(), flush=True)
    in_all()
    in_child()
    if os.fork() == 0:
        print("PID", os.getpid(), flush=True)
        in_all()
        in_child()
        in_grandchild()
        free = 0
        while request(None) >= 0:
            free += 1
        print("FREE", free, flush=True)
        os._exit(0)
    os.wait()
    os._exit(0)
os.wait()
"""

# A process whose stderr marks where it forks through the C library (no
# PyOS_BeforeFork() or PyOS_AfterFork_Child()), with a child that leaves
# at once.
C_FORK = """\
import ctypes, os
libc = ctypes.CDLL(None)
def f():
    return 1
f()
os.write(2, b"FORK\\n")
pid = libc.fork()
if pid == 0:
    libc._exit(0)
os.write(2, b"FORKED\\n")
os.waitpid(pid, 0)
"""


@unittest.skipUnless(HAVE_TRAMPOLINE, "no perf trampoline on this platform")
@requires_subprocess()
class ForkTests(unittest.TestCase):

    def setUp(self):
        self.since = time.time() - 1
        self.tmp = tempfile.mkdtemp(prefix="test_perf_fork_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_children_when_co_extra_indexes_are_nearly_used_up(self):
        script = make_script(self.tmp, "extra", EXTRA_INDEXES)
        # Each child takes an index of its own while more than 16 are
        # free, and then describes an inherited function when it first
        # calls it; with fewer it leaves them to the process's other tools
        # and describes everything it inherited at once, in_parent() too.
        parent = {"in_all", "in_parent"}
        child = {"in_all", "in_child"}
        grandchild = child | {"in_grandchild"}
        everything = grandchild | {"in_parent"}
        for left, free, want in (
                (0, 0, (parent, everything - {"in_grandchild"},
                        everything)),
                (1, 1, (parent, everything - {"in_grandchild"},
                        everything)),
                (16, 16, (parent, everything - {"in_grandchild"},
                          everything)),
                (17, 16, (parent, child, everything)),
                (100, 98, (parent, child, grandchild))):
            with self.subTest(left=left):
                proc = run_python("-X", "perf", script, str(left))
                pids = [int(p) for p in
                        re.findall(r"^PID (\d+)", proc.stdout, re.M)]
                for pid in pids:
                    forget_files(self, pid)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(len(pids), 3, proc.stdout)
                self.assertIn(f"FREE {free}\n", proc.stdout)
                for pid, expected in zip(pids, want):
                    named = {name.split("::")[1].split(":")[0]
                             for _, _, name in load_map_symbols(map_path(pid))
                             if name.endswith(":" + script)}
                    self.assertEqual(named & everything, expected, pid)

    def test_a_fork_in_a_process_that_never_turned_a_backend_on(self):
        # Nothing of ours runs at a fork() the interpreter did not ask for:
        # the child's system calls are the C library's own.  (Before, a
        # handler of live activation's called getpid() in every child.)
        if shutil.which("strace") is None:
            self.skipTest("strace is not installed")
        problem = ptrace_problem()
        if problem:
            self.skipTest(problem)
        script = make_script(self.tmp, "cfork", C_FORK)
        trace = os.path.join(self.tmp, "trace")
        proc = subprocess.run(["strace", "-f", "-o", trace, sys.executable,
                               script],
                              capture_output=True, text=True, env=env_with())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(trace) as f:
            lines = f.read().splitlines()
        parent = int(lines[0].split()[0])
        start = next(i for i, line in enumerate(lines)
                     if 'write(2, "FORK\\n"' in line)
        calls = set()
        for line in lines[start + 1:]:
            m = re.match(r"(\d+)\s+(?:<\.\.\. )?(\w+)", line)
            if m and int(m.group(1)) != parent:
                calls.add(m.group(2))
        self.assertTrue(calls, lines[start:])
        # glibc's robust list (and restartable sequences), then _exit().
        self.assertLessEqual(calls, {"set_robust_list", "rseq",
                                     "exit_group"}, lines[start:])


# What the subsystem adds to the dynamic symbol table of the interpreter
# (or of libpython): the C API, the evaluator that stacks of stripped
# binaries name, and the live block that other processes find by name.
# Nothing for tests alone (they reach the test hook through a capsule).
EXPORTED = {
    "PyUnstable_CopyPerfMapFile", "PyUnstable_PerfMapState_Fini",
    "PyUnstable_PerfMapState_Init", "PyUnstable_PerfTrampoline_CompileCode",
    "PyUnstable_PerfTrampoline_SetPersistAfterFork",
    "PyUnstable_WritePerfMapEntry", "_PyPerfTrampoline_EvalFrame",
    "_PyPerf_Live",
}


@unittest.skipUnless(HAVE_TRAMPOLINE, "no perf trampoline on this platform")
@requires_subprocess()
class ExportedSymbolsTests(unittest.TestCase):

    def test_dynamic_symbols(self):
        if shutil.which("eu-readelf") is None:
            self.skipTest("eu-readelf (elfutils) is not installed")
        # The interpreter's file: libpython as loaded, or the executable.
        path = sys.executable
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.split(None, 5)[5:]
                if name and "/libpython3" in name[0]:
                    path = name[0].strip()
                    break
        out = subprocess.run(["eu-readelf", "--dyn-syms", "-W", path],
                             capture_output=True, text=True, check=True)
        names = set()
        for line in out.stdout.splitlines():
            fields = line.split()
            # Num: Value Size Type Bind Vis Ndx Name
            if len(fields) >= 8 and fields[6] != "UNDEF":
                names.add(fields[7].split("@")[0])
        ours = {n for n in names
                if re.match(r"_?Py(Unstable_\w*)?Perf|__jit_debug", n)}
        expected = set(EXPORTED)
        if not sysconfig.get_config_var("Py_REMOTE_DEBUG"):
            expected.discard("_PyPerf_Live")    # (--without-remote-debug)
        self.assertEqual(ours, expected)
        self.assertIn("PyObject_Call", names)    # (the table was read)


if __name__ == "__main__":
    unittest.main()
