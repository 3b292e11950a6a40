"""The jitdump's unwind tables (cpython-perf, -X perf_jit), judged by tools
that share none of our code: binutils and elfutils read what `perf inject
--jit` made of them, and gdb unwinds through a live trampoline with them.

The perf tests' strict jitdump reader (test.support.perf_helper) checks
the records against the format as we understand it; if that
understanding is wrong (where perf places the .eh_frame in its ELF file,
say), the writer and that reader are wrong together.  Here nothing of ours decides what is right:

- TestInjectedElf: perf record --call-graph dwarf -k 1 of a script under
  -X perf_jit, then perf inject --jit.  In every jitted-PID-N.so, the FDE
  readelf decodes covers exactly the .text readelf lists, .eh_frame_hdr's
  search table (as eu-readelf decodes it) points at that FDE, and the CFA
  rule readelf prints for every instruction boundary is the one the
  instructions objdump disassembles imply.
- TestGdbUnwind: gdb stops a live interpreter at the first instruction of
  a trampoline, with perf's ELF file of a trampoline added at that
  trampoline's address (and at its callers'), and steps through it: `bt`
  at every instruction must reach main through the Python callers'
  evaluator frames.

x86_64 only (objdump's x86 syntax is interpreted below); make check-cross
checks aarch64 and riscv64 the same way (tools/cross/unwind.py).  The
probes run from setUpModule(); perf's command line, its probes, the
jitdump reader and the removal of our processes' files in /tmp are
test.support.perf_helper's, shared with the other perf test modules.
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import unittest

from test import support

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")

from test.support import perf_helper
from test.support.perf_helper import env_with, perf_command

# Set by setUpModule(): why a test class cannot run here, or None.
PROBLEM = {"elf": "not probed", "gdb": "not probed"}
WORKDIR = None


class ModuleRuns:
    """The `test` of perf_helper.forget_files() for the runs made once for
    the whole module (injected_files()): their files are removed when the
    module is done."""
    since = time.time() - 1
    addCleanup = staticmethod(unittest.addModuleCleanup)


def probe_elf_tools():
    if os.uname().machine != "x86_64":
        return "x86_64 only here (make check-cross covers aarch64, riscv64)"
    if not perf_helper.HAVE_TRAMPOLINE:
        return perf_helper.NO_TRAMPOLINE
    for tool, package in (("perf", "linux-perf"), ("readelf", "binutils"),
                          ("objdump", "binutils"), ("eu-readelf", "elfutils"),
                          ("objcopy", "binutils")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({package})"
    # perf record --call-graph dwarf -k 1 and perf inject --jit, on a
    # jitdump that none of the code under test wrote
    return perf_helper.jit_problem()


def probe_gdb():
    if PROBLEM["elf"]:
        return PROBLEM["elf"]
    if shutil.which("gdb") is None:
        return "gdb is not installed"
    proc = subprocess.run(
        ["gdb", "-nx", "-batch", "-ex", "break main", "-ex", "run",
         "-ex", "bt", "-ex", "python print('gdb python works')",
         "--args", sys.executable, "-I", "-c", "pass"],
        capture_output=True, text=True, timeout=120, env=env_with())
    if not re.search(r"^#0 .*\bmain \(", proc.stdout, re.M):
        return "gdb cannot run and stop a program here: " + \
               (proc.stdout + proc.stderr)[-300:]
    if "gdb python works" not in proc.stdout:
        return "this gdb has no Python"
    return None


def setUpModule():
    global WORKDIR
    WORKDIR = tempfile.mkdtemp(prefix="test_perf_unwind_")
    unittest.addModuleCleanup(shutil.rmtree, WORKDIR, ignore_errors=True)
    PROBLEM["elf"] = probe_elf_tools()
    PROBLEM["gdb"] = probe_gdb()


def tearDownModule():
    perf_helper.teardown_module()


# ---- perf inject's ELF files -----------------------------------------------

# The nested calls of the other perf tests: foo() is the innermost.
WORKLOAD = perf_helper.NESTED + "baz(2_000_000)\n"

_injected = None


def injected_files():
    """{name: path} of the jitted-*.so files perf inject --jit wrote for a
    run of WORKLOAD under -X perf_jit, moved to WORKDIR.  Made once."""
    global _injected
    if _injected is not None:
        return _injected
    out = os.path.join(WORKDIR, "injected")
    os.mkdir(out)
    script = os.path.join(WORKDIR, "workload.py")
    with open(script, "w") as f:
        f.write(WORKLOAD)
    data = os.path.join(WORKDIR, "perf.data")
    rec = subprocess.run(
        perf_command("record", "-q", "-F", "999", "-k", "1", "--call-graph",
                     "dwarf", "-o", data, "--", sys.executable, "-X",
                     "perf_jit", script),
        capture_output=True, text=True, timeout=300, env=env_with())
    if rec.returncode != 0:
        raise AssertionError(f"perf record failed: {rec.stderr[-1000:]}")
    pid = perf_helper.script_pid(rec.stdout)
    try:
        inj = subprocess.run(perf_command("inject", "-i", data, "--jit",
                                          "-o", data + ".jit"),
                             capture_output=True, text=True, timeout=300)
        if inj.returncode != 0:
            raise AssertionError(f"perf inject failed: {inj.stderr[-1000:]}")
        files = {}
        for path in perf_helper.jitted_paths(pid, ModuleRuns.since):
            dest = os.path.join(out, os.path.basename(path))
            shutil.copyfile(path, dest)
            files[symbol_of(dest)] = dest
    finally:
        perf_helper.forget_files(ModuleRuns, pid)
    if not any(name.startswith("py::foo:") for name in files):
        raise AssertionError(f"no jitted-*.so for foo(): {sorted(files)}")
    _injected = files
    return files


def run_tool(*cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: {proc.stderr}")
    return proc.stdout


def symbol_of(path):
    """The one function symbol of a jitted-*.so (readelf -s)."""
    names = re.findall(r"\bFUNC\s+\S+\s+\S+\s+\S+\s+(\S.*)$",
                       run_tool("readelf", "-s", "-W", path), re.M)
    if len(names) != 1:
        raise AssertionError(f"{path}: function symbols {names}")
    return names[0]


def sections(path):
    """{name: (address, size)} from readelf -S -W."""
    found = {}
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+"
                         r"[0-9a-f]+\s+([0-9a-f]+)\s",
                         run_tool("readelf", "-S", "-W", path), re.M):
        found[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return found


def fde_rows(path):
    """The one FDE readelf --debug-dump=frames-interp decodes: its range
    and its table, [(location, {column: rule})] ("CFA", "rbp", "ra")."""
    text = run_tool("readelf", "--debug-dump=frames-interp", path)
    fdes = re.findall(r"^\S+ \S+ \S+ FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)"
                      r"\n\s+(LOC.*)\n((?:[0-9a-f]+ .*\n)*)", text, re.M)
    if len(fdes) != 1:
        raise AssertionError(f"{path}: {len(fdes)} FDEs:\n{text}")
    start, end, header, body = fdes[0]
    columns = header.split()[1:]
    rows = []
    for line in body.splitlines():
        loc, *rules = line.split()
        if len(rules) != len(columns):
            raise AssertionError(f"{path}: row {line!r} for {columns}")
        rows.append((int(loc, 16), dict(zip(columns, rules))))
    return (int(start, 16), int(end, 16)), rows


def search_table(path):
    """.eh_frame_hdr as eu-readelf decodes it: the address eh_frame_ptr
    names, and the table's (location, FDE offset in .eh_frame) pairs; and
    the offsets and initial locations of the FDEs in .eh_frame."""
    text = run_tool("eu-readelf", "--debug-dump=frames", path)
    ptr = re.search(r"^ eh_frame_ptr:\s+\S+ \(offset: (0x[0-9a-f]+)\)",
                    text, re.M)
    table = re.findall(r"^\s+0x[0-9a-f]+ \(offset:\s+(0x[0-9a-f]+)\) -> "
                       r"0x[0-9a-f]+ fde=\[\s*([0-9a-f]+)\]", text, re.M)
    fdes = re.findall(r"^ \[\s*([0-9a-f]+)\] FDE .*\n.*\n"
                      r"\s+initial_location:.*\(offset: (0x[0-9a-f]+)\)",
                      text, re.M)
    if ptr is None:
        raise AssertionError(f"{path}: eu-readelf finds no .eh_frame_hdr:\n"
                             f"{text}")
    return (int(ptr.group(1), 16),
            [(int(loc, 16), int(fde, 16)) for loc, fde in table],
            {int(off, 16): int(loc, 16) for off, loc in fdes})


def disassembly(path):
    """[(address, instruction text)] of .text, from objdump -d."""
    insns = []
    for m in re.finditer(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*\t(.+)$",
                         run_tool("objdump", "-d", "-w", path), re.M):
        insns.append((int(m.group(1), 16), " ".join(m.group(2).split())))
    return insns


def frame_states(insns):
    """What the instructions do to the frame, from objdump's text alone:
    at each instruction's address, (d, rbp, saved) where the stack pointer
    is CFA - d, rbp is "caller" (the caller's value) or CFA - k as ("cfa",
    k), and saved maps k to what is stored at CFA - k ("ra", "rbp")."""
    d, rbp, saved = 8, "caller", {8: "ra"}
    states = {}
    for i, (addr, text) in enumerate(insns):
        states[addr] = (d, rbp, dict(saved))
        op = text.split(" ", 1)
        mnemonic, args = op[0], op[1] if len(op) > 1 else ""
        if mnemonic in ("endbr64", "nop", "nopw", "nopl", "xchg") and \
                (mnemonic != "xchg" or args == "%ax,%ax"):
            pass
        elif (mnemonic, args) == ("push", "%rbp"):
            d += 8
            saved[d] = "rbp" if rbp == "caller" else None
        elif mnemonic == "push":
            d += 8
            saved[d] = None
        elif (mnemonic, args) == ("mov", "%rsp,%rbp"):
            rbp = ("cfa", d)
        elif mnemonic in ("sub", "add") and args.endswith(",%rsp") and \
                args.startswith("$0x"):
            n = int(args[1:-5], 16)
            d += n if mnemonic == "sub" else -n
        elif mnemonic == "leave":
            if rbp == "caller":
                raise AssertionError(f"{addr:#x}: leave without a frame")
            d = rbp[1]
            rbp = "caller" if saved.get(d) == "rbp" else "unknown"
            saved.pop(d, None)
            d -= 8
        elif (mnemonic, args) == ("pop", "%rbp"):
            rbp = "caller" if saved.get(d) == "rbp" else "unknown"
            saved.pop(d, None)
            d -= 8
        elif mnemonic == "call":
            pass                  # the callee keeps rsp and rbp
        elif mnemonic == "ret":
            if i != len(insns) - 1:
                raise AssertionError(f"{addr:#x}: ret before the end")
        else:
            raise AssertionError(f"{addr:#x}: no frame semantics for "
                                 f"{text!r}")
    if insns and insns[-1][1] != "ret":
        raise AssertionError("the code does not end in ret")
    return states


def rule_problem(addr, state, rule):
    """Why readelf's `rule` at `addr` does not describe `state`, or None."""
    d, rbp, saved = state
    cfa = rule.get("CFA", "")
    m = re.fullmatch(r"(rsp|rbp)\+(\d+)", cfa)
    if m is None:
        return f"CFA rule {cfa!r}"
    reg, off = m.group(1), int(m.group(2))
    if reg == "rsp" and off != d:
        return f"CFA = rsp+{off}, but rsp is CFA-{d}"
    if reg == "rbp" and rbp != ("cfa", off):
        return f"CFA = rbp+{off}, but rbp is {rbp}"
    if rule.get("ra") != "c-8":
        return f"return address rule {rule.get('ra')!r}, not c-8"
    rbp_rule = rule.get("rbp", "u")
    m = re.fullmatch(r"c-(\d+)", rbp_rule)
    if m is not None:
        if saved.get(int(m.group(1))) != "rbp":
            return f"rbp rule {rbp_rule}, but CFA-{m.group(1)} holds " \
                   f"{saved.get(int(m.group(1)))}"
    elif rbp_rule in ("u", "s"):
        # (readelf's "u": no rule, the ABI's default for rbp: same value)
        if rbp != "caller":
            return f"rbp rule {rbp_rule!r}, but rbp is {rbp}"
    else:
        return f"rbp rule {rbp_rule!r}"
    return None


class TestInjectedElf(unittest.TestCase):
    """perf inject --jit's jitted-*.so, read with binutils and elfutils."""

    @classmethod
    def setUpClass(cls):
        if PROBLEM["elf"]:
            raise unittest.SkipTest(PROBLEM["elf"])
        cls.files = injected_files()

    def check_file(self, name, path):
        secs = sections(path)
        self.assertIn(".text", secs, name)
        self.assertIn(".eh_frame", secs, name)
        self.assertIn(".eh_frame_hdr", secs, name)
        text_start, text_size = secs[".text"]
        text_end = text_start + text_size
        (start, end), rows = fde_rows(path)
        self.assertEqual((start, end), (text_start, text_end),
                         f"{name}: the FDE covers {start:#x}..{end:#x}, "
                         f".text is {text_start:#x}..{text_end:#x}")
        # .eh_frame_hdr's search table: one entry, the .text's start, for
        # the FDE that starts there.
        ptr, table, fdes = search_table(path)
        self.assertEqual(ptr, secs[".eh_frame"][0],
                         f"{name}: eh_frame_ptr")
        self.assertEqual(len(table), 1, f"{name}: search table {table}")
        loc, fde = table[0]
        self.assertEqual(loc, text_start,
                         f"{name}: the search table's entry is at {loc:#x}")
        self.assertEqual(fdes.get(fde), text_start,
                         f"{name}: the search table names the FDE at "
                         f"[{fde:x}], FDEs {fdes}")
        insns = disassembly(path)
        self.assertEqual(insns[0][0], text_start, name)
        states = frame_states(insns)
        for addr, state in states.items():
            in_force = [r for loc, r in rows if loc <= addr]
            self.assertTrue(in_force, f"{name}: no row at {addr:#x}")
            problem = rule_problem(addr, state, in_force[-1])
            self.assertIsNone(problem,
                              f"{name}+{addr - text_start:#x}: {problem}")
        return insns

    def test_fde_matches_text_and_instructions(self):
        checked = {}
        for name, path in sorted(self.files.items()):
            insns = self.check_file(name, path)
            checked[" ; ".join(t for _, t in insns)] = name
        self.assertGreater(len(self.files), 3)
        # every trampoline is a copy of the same template
        self.assertEqual(len(checked), 1, checked)
        # which template this build has (endbr64 with -fcf-protection)
        cet = "-fcf-protection" in (sysconfig.get_config_var("PY_CFLAGS")
                                    or "")
        self.assertEqual(next(iter(checked)).startswith("endbr64"), cet)

    def test_checks_catch_a_shifted_table(self):
        # The row check itself: rules that come one instruction late are
        # refused (the defect it exists for: every rule change 4 bytes
        # late).
        insns = [(0x80, "endbr64"), (0x84, "push %rbp"),
                 (0x85, "mov %rsp,%rbp"), (0x88, "call *%rcx"),
                 (0x8a, "pop %rbp"), (0x8b, "ret")]
        states = frame_states(insns)
        late = {"CFA": "rsp+8", "ra": "c-8", "rbp": "u"}
        self.assertIsNone(rule_problem(0x84, states[0x84], late))
        self.assertIsNotNone(rule_problem(0x85, states[0x85], late))
        self.assertIsNotNone(rule_problem(
            0x8a, states[0x8a], {"CFA": "rsp+8", "ra": "c-8",
                                 "rbp": "c-16"}))
        self.assertIsNotNone(rule_problem(
            0x8b, states[0x8b], {"CFA": "rbp+16", "ra": "c-8",
                                 "rbp": "c-16"}))
        with self.assertRaises(AssertionError):
            frame_states([(0x80, "xor %eax,%eax"), (0x82, "ret")])


# ---- gdb, through a live trampoline -----------------------------------------

GDB_SCRIPT_PY = """\
import json, os, signal, sys
print("PID", os.getpid(), flush=True)

def f3():
    return 3

def f2():
    return f3()

def f1():
    return f2()

f1()                                 # the trampolines exist after this
# The code loads of the dump so far, read with the tests' strict reader,
# for gdb: {name: (address, size)}.
from test.support import perf_helper
pid = os.getpid()
loads = {rec["name"]: (rec["addr"], rec["size"]) for rid, rec in
         perf_helper.read_jitdump(perf_helper.jit_path(pid), pid)
         if rid == perf_helper.JIT_CODE_LOAD}
with open(sys.argv[1], "w") as f:
    json.dump(loads, f)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
os.kill(os.getpid(), signal.SIGUSR1)  # gdb adds their ELF files here
print("result", f1(), flush=True)
"""

# Run by gdb's Python.  At the SIGUSR1 stop: take the trampolines'
# addresses from the file the script wrote and add, at each trampoline of the chain, a copy
# of perf's ELF file of a trampoline (its symbol renamed) with its .text
# there and the rest of its sections where perf's layout puts them
# relative to it; then break at f2's trampoline and go through it
# instruction by instruction, printing the frames gdb unwinds at each.
GDB_COMMANDS = """\
import gdb, json
COPIES, SECTIONS, SCRIPT = {copies!r}, {sections!r}, {script!r}
LOADS = {loads!r}
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set width unlimited")
# The walk ends at _start in every build, also where LTO gives main() a
# frame of its own (by inlining Py_BytesMain()) and gdb would stop there.
gdb.execute("set backtrace past-main on")
gdb.execute("handle SIGUSR1 stop print nopass")
gdb.execute("run")
with open(LOADS) as f:
    loads = json.load(f)
text = SECTIONS[".text"]
for name, copy in COPIES.items():
    addr, csize = loads[name]
    print("load %#x %d %s" % (addr, csize, name))
    where = " ".join("-s %s %#x" % (s, addr + a - text)
                     for s, a in SECTIONS.items() if s != ".text")
    gdb.execute("add-symbol-file %s %#x %s" % (copy, addr, where))
start, size = loads["py::f2:" + SCRIPT]
gdb.execute("handle SIGUSR1 nostop noprint nopass")
gdb.execute("break *%#x" % start)
gdb.execute("continue")
for step in range(20):
    pc = int(gdb.parse_and_eval("$pc"))
    if not start <= pc < start + size:
        break
    print("=== +%d" % (pc - start))
    frame = gdb.newest_frame()
    while frame is not None:
        print("frame %#x %s" % (frame.pc(), frame.name()))
        last = frame
        frame = frame.older()
    print("stop", gdb.frame_stop_reason_string(last.unwind_stop_reason()))
    print(gdb.execute("bt", to_string=True), end="")
    print("=== end")
    insn = gdb.execute("x/2i $pc", to_string=True).splitlines()
    if "call" in insn[0]:
        # over the call with a breakpoint after it (nexti would unwind
        # the callee's frame to find where to stop)
        after = insn[1].split()[0].rstrip(":")
        gdb.execute("tbreak *%s" % after, to_string=True)
        gdb.execute("continue", to_string=True)
    else:
        gdb.execute("stepi", to_string=True)
print("=== stepped out at %#x" % int(gdb.parse_and_eval("$pc")))
gdb.execute("kill")
"""


class TestGdbUnwind(unittest.TestCase):
    """gdb's own unwinder, with perf's ELF file of the trampolines."""

    @classmethod
    def setUpClass(cls):
        if PROBLEM["gdb"]:
            raise unittest.SkipTest(PROBLEM["gdb"])

    def setUp(self):
        self.since = time.time() - 1         # for perf_helper.forget_files

    def test_bt_at_every_instruction(self):
        files = injected_files()
        elf = next(iter(files.values()))
        secs = {name: addr for name, (addr, size) in sections(elf).items()
                if name in (".text", ".eh_frame", ".eh_frame_hdr")}
        code_size = sections(elf)[".text"][1]
        out = tempfile.mkdtemp(dir=WORKDIR)
        script = os.path.join(out, "chain.py")
        with open(script, "w") as f:
            f.write(GDB_SCRIPT_PY)
        chain = [f"py::{name}:{script}" for name in ("f2", "f1", "<module>")]
        copies = {}
        for i, name in enumerate(chain):
            copies[name] = os.path.join(out, f"trampoline{i}.so")
            run_tool("objcopy", "--redefine-sym",
                     f"{symbol_of(elf)}={name}", elf, copies[name])
        commands = os.path.join(out, "commands.py")
        loads_path = os.path.join(out, "loads.json")
        with open(commands, "w") as f:
            f.write(GDB_COMMANDS.format(copies=copies, sections=secs,
                                        script=script, loads=loads_path))
        proc = subprocess.run(
            ["gdb", "-nx", "-batch", "-x", commands, "--args",
             sys.executable, "-X", "perf_jit", script, loads_path],
            capture_output=True, text=True, timeout=300, env=env_with())
        pid = re.search(perf_helper.PID_LINE, proc.stdout, re.M)
        if pid is not None:
            perf_helper.forget_files(self, int(pid.group(1)))
        report = (proc.stdout + proc.stderr)[-4000:]
        self.assertIn("=== stepped out", proc.stdout, report)
        loads = {name: (int(addr, 16), int(size)) for addr, size, name in
                 re.findall(r"^load (\S+) (\d+) (.*)$", proc.stdout, re.M)}
        self.assertEqual(sorted(loads), sorted(chain), report)
        steps = re.findall(r"^=== \+(\d+)\n(.*?)^=== end$", proc.stdout,
                           re.M | re.S)
        # every instruction of the template (5 or 6), once
        offsets = [int(off) for off, _ in steps]
        self.assertEqual(offsets, sorted(set(offsets)), report)
        self.assertEqual(offsets[0], 0, report)
        self.assertGreaterEqual(len(offsets), 5, report)
        self.assertEqual(offsets[-1] + 1, code_size, report)   # ret

        # The innermost frames: the trampolines (by address: gdb shows
        # the file name's ".py" as "[py]"), the evaluator between them.
        evaluator = "_PyEval_EvalFrameDefault"
        want = [chain[0], evaluator, chain[1], evaluator, chain[2]]
        for off, text in steps:
            frames = [(int(pc, 16), name) for pc, name in
                      re.findall(r"^frame (\S+) (.*)$", text, re.M)]
            names = [name for _, name in frames]
            where = f"at trampoline+{off}:\n{text}"
            self.assertGreater(len(frames), len(want), where)
            for i, ((pc, name), w) in enumerate(zip(frames, want)):
                if w == evaluator:
                    self.assertEqual(name, w, where)
                else:
                    # a return address, but for the innermost frame
                    at = pc - loads[w][0] - (i > 0)
                    self.assertTrue(0 <= at < loads[w][1],
                                    f"frame #{i} is not in {w} {where}")
            self.assertNotIn("None", names, where)
            self.assertIn("Py_BytesMain", names, where)
            self.assertEqual(names[-1], "_start", where)
            self.assertIn("\nstop outermost", "\n" + text, where)


if __name__ == "__main__":
    unittest.main()
