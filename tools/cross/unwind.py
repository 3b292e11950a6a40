"""Check a native stack recorded by the cross-built interpreter
(tools/cross/stackwalk.c, tools/cross/three_deep.py), on the build machine.

    unwind.py --mode perf|perf_jit --arch aarch64|riscv64 --dir DIR
              --python TARGET_PYTHON --helper HELPER_SO [--expect-pac]
              [--binutils TRIPLET-]

Runs on the build machine's Debian python3 with pyelftools
(python3-pyelftools), which reads the ELF files and their .eh_frame and
.debug_frame, and decodes the CFA programs into tables of rules.  What is
ours here is the model of our trampoline's code, the unwinder that applies
the rules to the copied stack, and the checks.

--mode perf: the helper's walk of the frame records, each return address
named through the process's perf-PID.map or the ELF symbols.
--mode perf_jit: a DWARF unwind of the copied stack from the registers the
helper took, with the rules of the jitdump's FDEs for the trampolines and of
the ELF files' .eh_frame or .debug_frame for the interpreter and the
helper.  Each trampoline's rules are first checked at every instruction
against a model of its code; with --binutils, also as the target's readelf
decodes them in an ELF file laid out the way perf inject writes one,
against what the target's objdump disassembles there.

Either way the stack must show py::f3, py::f2, py::f1 and py::<module> of
three_deep.py, innermost first, each running _PyEval_EvalFrameDefault and
entered from one of TRAMPOLINE_CALLERS: the evaluator for the frames its
call instructions push, the PEP 523 hook for frames entered from C.  Exits 1
with the reasons otherwise.
"""

import argparse
import bisect
import io
import os
import re
import struct
import sys

try:
    from elftools.common.exceptions import ELFError, DWARFError
    from elftools.dwarf.callframe import (
        CIE, FDE, CallFrameInfo, CallFrameInstruction, RegisterRule,
        instruction_name)
    from elftools.dwarf.constants import DW_CFA_nop
    from elftools.dwarf.structs import DWARFStructs
    from elftools.elf.elffile import ELFFile
except ImportError:
    sys.exit("unwind: needs pyelftools (Debian: python3-pyelftools; "
             "tools/install-deps.sh cross-ARCH installs it)")

TRAMPOLINE_CALLERS = ("_PyEval_EvalFrameDefault",
                      "_PyPerfTrampoline_EvalFrame", "eval_frame_new_code")
EXPECTED = ("f3", "f2", "f1", "<module>")
ARCH = {
    # e_machine (the jitdump's number, pyelftools' name), DWARF numbers of
    # the stack pointer and return address column
    "aarch64": dict(machine=183, elf_machine="EM_AARCH64", sp=31, ra=30),
    "riscv64": dict(machine=243, elf_machine="EM_RISCV", sp=2, ra=1),
}
PAC_MASK = (1 << 48) - 1
# Little-endian, 32-bit DWARF entries, 8-byte addresses (both targets).
STRUCTS = DWARFStructs(little_endian=True, dwarf_format=32, address_size=8)


class CheckFailed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


# ---- .eh_frame, .debug_frame (pyelftools) ------------------------------------

DW_CFA_AARCH64_negate_ra_state = 0x2d


class FrameInfo(CallFrameInfo):
    """pyelftools' CFI reader, taught DW_CFA_AARCH64_negate_ra_state
    (0x2d, no operands), which pyelftools 0.29 refuses as an unknown
    opcode.  It is returned as a DW_CFA_nop marked `negate_ra_state`:
    pyelftools' table then has the rules the other instructions give, and
    ra_signed() follows the marks."""

    def _parse_instructions(self, structs, offset, end_offset):
        instructions = []
        while offset < end_offset:
            self.stream.seek(offset)
            if self.stream.read(1)[0] == DW_CFA_AARCH64_negate_ra_state:
                insn = CallFrameInstruction(DW_CFA_nop, [])
                insn.negate_ra_state = True
                instructions.append(insn)
                offset += 1
                continue
            # one instruction: pyelftools' loop stops after it
            instructions += super()._parse_instructions(structs, offset,
                                                        offset + 1)
            offset = self.stream.tell()
        self.stream.seek(end_offset)
        return instructions


def fde_range(fde):
    start = fde["initial_location"]
    return start, start + fde["address_range"]


def parse_eh_frame(data, addr, strict=False, debug_frame=False):
    """The FDEs of an .eh_frame section loaded at `addr`, sorted by start;
    or of a .debug_frame section.  strict: every entry padded to 8 bytes,
    and the section ends with its zero terminator."""
    try:
        entries = FrameInfo(io.BytesIO(data), len(data), addr, STRUCTS,
                            for_eh_frame=not debug_frame).get_entries()
    except (DWARFError, ELFError, AssertionError, KeyError,
            struct.error) as e:
        raise CheckFailed(f"pyelftools cannot read the "
                          f"{'.debug_frame' if debug_frame else '.eh_frame'}"
                          f" at {addr:#x}: {e!r}")
    fdes = []
    for entry in entries:
        if isinstance(entry, (CIE, FDE)):
            if strict:
                check(entry["length"] % 8 == 4,
                      f"entry at {entry.offset} not padded to 8 bytes")
            if isinstance(entry, FDE):
                fdes.append(entry)
        elif strict:
            check(entry.offset + 4 == len(data),
                  "data after the zero terminator")
    if strict:
        check(entries and not isinstance(entries[-1], (CIE, FDE)),
              "no zero terminator")
    fdes.sort(key=lambda f: f["initial_location"])
    return fdes


class Row:
    """The unwind rules in force at one address."""

    def __init__(self):
        self.cfa = None           # (register, offset)
        self.regs = {}            # register -> ("offset", n) | ("same",)
                                  # | ("undefined",) | ("register", r)
                                  # | ("val_offset", n)
        self.ra_signed = False    # aarch64 pointer authentication


RULES = {RegisterRule.OFFSET: "offset", RegisterRule.VAL_OFFSET: "val_offset",
         RegisterRule.REGISTER: "register", RegisterRule.SAME_VALUE: "same",
         RegisterRule.UNDEFINED: "undefined"}


def ra_signed(fde, target, arch):
    """Whether the return address is signed at `target`: the parity of the
    DW_CFA_AARCH64_negate_ra_state in force there (remember_state and
    restore_state save and restore it with the rest of the row)."""
    code_align = fde.cie["code_alignment_factor"]
    signed, saved = False, []
    for program, is_cie in ((fde.cie.instructions, True),
                            (fde.instructions, False)):
        loc = fde["initial_location"]
        for insn in program:
            name = instruction_name(insn.opcode)
            if getattr(insn, "negate_ra_state", False):
                check(arch == "aarch64",
                      f"CFA instruction {DW_CFA_AARCH64_negate_ra_state:#x}"
                      f" on {arch}")
                signed = not signed
            elif name == "DW_CFA_remember_state":
                saved.append(signed)
            elif name == "DW_CFA_restore_state":
                signed = saved.pop()
            elif name.startswith("DW_CFA_advance_loc") or \
                    name == "DW_CFA_set_loc":
                check(not is_cie, "advance_loc in a CIE")
                new = (insn.args[0] if name == "DW_CFA_set_loc"
                       else loc + insn.args[0] * code_align)
                if new > target:
                    break
                loc = new
    return signed


def run_cfa(fde, target, arch):
    """The rules in force at `target`: the row of pyelftools' table of the
    FDE that starts last at or before it."""
    start, end = fde_range(fde)
    check(start <= target < end, f"{target:#x} is not in the FDE's range "
                                 f"{start:#x}-{end:#x}")
    try:
        table = fde.get_decoded().table
    except (DWARFError, AssertionError, KeyError, IndexError) as e:
        raise CheckFailed(f"pyelftools cannot decode the FDE at "
                          f"{start:#x}: {e!r}")
    lines = [line for line in table if line["pc"] <= target]
    check(lines, f"the FDE at {start:#x} has no row at {target:#x}")
    line = lines[-1]
    row = Row()
    cfa = line["cfa"]
    check(cfa.expr is None and cfa.reg is not None,
          f"CFA rule {cfa} at {target:#x}")
    row.cfa = (cfa.reg, cfa.offset)
    for reg, rule in line.items():
        if reg in ("pc", "cfa"):
            continue
        check(rule.type in RULES, f"rule {rule} for r{reg} at {target:#x}")
        row.regs[reg] = ((RULES[rule.type],) if rule.arg is None
                         else (RULES[rule.type], rule.arg))
    row.ra_signed = ra_signed(fde, target, arch)
    return row


# ---- ELF files (pyelftools) ---------------------------------------------------

class Elf:
    def __init__(self, path):
        with open(path, "rb") as f:
            try:
                elf = ELFFile(io.BytesIO(f.read()))
            except ELFError as e:
                raise CheckFailed(f"{path}: {e}")
        check(elf.elfclass == 64 and elf.little_endian,
              f"{path}: not a little-endian ELF64 file")
        self.path = path
        self.machine = elf["e_machine"]
        loads = [(seg["p_offset"], seg["p_vaddr"])
                 for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
        self.first_load = min(loads, key=lambda l: l[1])
        self.progbits = [(s["sh_addr"], s["sh_size"])
                         for s in elf.iter_sections()
                         if s["sh_type"] == "SHT_PROGBITS" and s["sh_addr"]]
        self.symbols = []
        symtab = elf.get_section_by_name(".symtab")
        if symtab is not None:
            self.symbols = sorted(
                (sym["st_value"], sym["st_size"], sym.name)
                for sym in symtab.iter_symbols()
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"])
        self.starts = [s[0] for s in self.symbols]
        # .eh_frame, then .debug_frame (GCC 12 for riscv64 makes no
        # unwind tables unless asked; -g gives .debug_frame, which perf's
        # unwinder reads too).
        self.frames = []
        for name, debug in ((".eh_frame", False), (".debug_frame", True)):
            section = elf.get_section_by_name(name)
            if section is not None:
                self.frames.append((section.data(), section["sh_addr"],
                                    debug))
        self.fdes = None
        self.bias = None

    def locate(self, maps):
        """Find the load bias in the process's maps lines."""
        real = os.path.realpath(self.path)
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and int(fields[2], 16) == 0 and (
                    os.path.realpath(fields[5]) == real
                    or os.path.basename(fields[5])
                    == os.path.basename(self.path)):
                start = int(fields[0].split("-")[0], 16)
                offset, vaddr = self.first_load
                self.bias = start - (vaddr - offset)
                return
        raise CheckFailed(f"{self.path} is not in the process's maps")

    def symbol(self, addr):
        a = addr - self.bias
        i = bisect.bisect_right(self.starts, a) - 1
        if i >= 0:
            value, size, name = self.symbols[i]
            if value <= a < value + max(size, 1):
                return name
        return None

    def contains(self, addr):
        a = addr - self.bias
        return any(vaddr <= a < vaddr + size for vaddr, size in self.progbits)

    def fde(self, addr):
        if self.fdes is None:
            self.fdes = []
            for data, addr0, debug in self.frames:
                fdes = parse_eh_frame(data, addr0, debug_frame=debug)
                self.fdes.append((fdes, [f["initial_location"]
                                         for f in fdes]))
        a = addr - self.bias
        for fdes, starts in self.fdes:
            i = bisect.bisect_right(starts, a) - 1
            if i >= 0:
                start, end = fde_range(fdes[i])
                if start <= a < end:
                    return fdes[i], self.bias
        return None, None


# ---- the jitdump ------------------------------------------------------------

def read_jitdump(path, pid, machine):
    """{code_addr: (size, name, code, fde, unwind)} from the dump's
    records."""
    with open(path, "rb") as f:
        data = f.read()
    (magic, version, total, elf_mach, _, hpid, _, _) = struct.unpack_from(
        "<IIIIIIQQ", data, 0)
    check(magic == 0x4A695444 and version == 1 and total == 40,
          "bad jitdump header")
    check(elf_mach == machine,
          f"jitdump e_machine is {elf_mach}, expected {machine}")
    check(hpid == pid, "jitdump pid")
    pos, unwind, loads = 40, None, {}
    while pos + 16 <= len(data):
        rid, size, _ = struct.unpack_from("<IIQ", data, pos)
        if rid == 0 and size == 0:
            break
        body = data[pos + 16:pos + size]
        if rid == 4:                                   # UNWINDING_INFO
            usize, hsize, _ = struct.unpack_from("<QQQ", body, 0)
            unwind = (body[24:24 + usize], hsize)
        elif rid == 0:                                 # CODE_LOAD
            _, _, vma, addr, csize, _ = struct.unpack_from("<IIQQQQ",
                                                           body, 0)
            end = body.index(b"\0", 40)
            name = body[40:end].decode()
            code = body[end + 1:end + 1 + csize]
            check(unwind is not None, f"{name}: no unwinding record before")
            loads[addr] = (csize, name, code, unwind_fdes(unwind, addr,
                                                          csize), unwind)
            unwind = None
        pos += size
    return loads


def unwind_fdes(unwind, addr, size):
    """The FDE of one trampoline: perf lays its .eh_frame at the end of
    the code rounded up to 8 bytes (tools/perf/util/genelf.c), and its
    .eh_frame_hdr right after that."""
    blob, hdr_size = unwind
    eh_frame = blob[:len(blob) - hdr_size]
    eh_addr = addr + ((size + 7) & ~7)
    fdes = parse_eh_frame(eh_frame, eh_addr, strict=True)
    check(len(fdes) == 1, "one FDE per trampoline")
    fde = fdes[0]
    start, end = fde_range(fde)
    check((start, end) == (addr, addr + size),
          f"FDE covers {start:#x}-{end:#x}, the code is "
          f"{addr:#x}-{addr + size:#x}")
    # .eh_frame_hdr: version 1; eh_frame_ptr pcrel|sdata4, fde_count
    # udata4, table entries datarel|sdata4 (relative to the header)
    hdr = blob[len(blob) - hdr_size:]
    hdr_addr = eh_addr + len(eh_frame)
    check(hdr[:4] == bytes([1, 0x1b, 0x03, 0x3b]),
          f".eh_frame_hdr version and encodings {hdr[:4].hex()}")
    check(len(hdr) == 20, f".eh_frame_hdr of {len(hdr)} bytes, not 20")
    ptr, count, loc, fde_at = struct.unpack_from("<iIii", hdr, 4)
    check(hdr_addr + 4 + ptr == eh_addr,
          ".eh_frame_hdr does not point to the .eh_frame")
    check(count == 1, ".eh_frame_hdr FDE count")
    check(hdr_addr + loc == addr,
          ".eh_frame_hdr table does not start at the code")
    check(hdr_addr + fde_at == eh_addr + fde.offset,
          ".eh_frame_hdr table does not name the FDE")
    return fde


# ---- the trampoline's code, run on a model machine ----------------------------

class Signed:
    """A return address carrying a pointer authentication code."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Signed) and other.value == self.value


def model_step(arch, word, regs, mem):
    """Run one instruction of the template on the model; False at ret."""
    if arch == "aarch64":
        if word == 0xd503245f:                          # bti c
            pass
        elif word in (0xd503233f, 0xd503237f):          # paci[ab]sp
            regs[30] = Signed(regs[30])
        elif word in (0xd50323bf, 0xd50323ff):          # auti[ab]sp
            check(isinstance(regs[30], Signed), "aut of an unsigned x30")
            regs[30] = regs[30].value
        elif word == 0xa9bf7bfd:                        # stp x29, x30, [sp, #-16]!
            regs[31] -= 16
            mem[regs[31]], mem[regs[31] + 8] = regs[29], regs[30]
        elif word == 0x910003fd:                        # mov x29, sp
            regs[29] = regs[31]
        elif word == 0xd63f0060:                        # blr x3
            regs[30] = "clobbered by the call"
        elif word == 0xa8c17bfd:                        # ldp x29, x30, [sp], #16
            regs[29], regs[30] = mem[regs[31]], mem[regs[31] + 8]
            regs[31] += 16
        elif word == 0xd65f03c0:                        # ret
            return False
        else:
            raise CheckFailed(f"unknown aarch64 instruction {word:#010x}")
    else:
        if word == 0xff010113:                          # addi sp, sp, -16
            regs[2] -= 16
        elif word == 0x00113423:                        # sd ra, 8(sp)
            mem[regs[2] + 8] = regs[1]
        elif word == 0x00813023:                        # sd s0, 0(sp)
            mem[regs[2]] = regs[8]
        elif word == 0x01010413:                        # addi s0, sp, 16
            regs[8] = regs[2] + 16
        elif word == 0x000680e7:                        # jalr a3
            regs[1] = "clobbered by the call"
        elif word == 0x00813083:                        # ld ra, 8(sp)
            regs[1] = mem[regs[2] + 8]
        elif word == 0x00013403:                        # ld s0, 0(sp)
            regs[8] = mem[regs[2]]
        elif word == 0x01010113:                        # addi sp, sp, 16
            regs[2] += 16
        elif word == 0x00008067:                        # ret
            return False
        else:
            raise CheckFailed(f"unknown riscv64 instruction {word:#010x}")
    return True


def check_trampoline_rules(arch, code, fde, name):
    """At the start of every instruction of the trampoline, the FDE's row
    must give back the caller's CFA, frame pointer and return address from
    the model machine's state."""
    info = ARCH[arch]
    sp, ra = info["sp"], info["ra"]
    fp = 29 if arch == "aarch64" else 8
    entry_sp, caller_fp, return_to = 0x7000, 0xf00d0, 0x4000123
    regs = {sp: entry_sp, fp: caller_fp, ra: return_to}
    mem = {}
    check(len(code) % 4 == 0, f"{name}: code size {len(code)}")
    if arch == "aarch64":
        # Key B needs the CIE's "B" augmentation, key A must not have it.
        words = {int.from_bytes(code[i:i + 4], "little")
                 for i in range(0, len(code), 4)}
        augmentation = fde.cie["augmentation"].decode()
        check(("B" in augmentation) == (0xd503237f in words),
              f"{name}: CIE augmentation {augmentation!r} for "
              f"{'pacibsp' if 0xd503237f in words else 'no key B'}")
    for offset in range(0, len(code), 4):
        row = run_cfa(fde, fde["initial_location"] + offset, arch)
        where = f"{name}+{offset}"
        check(row.cfa is not None and row.cfa[0] in regs,
              f"{where}: CFA rule {row.cfa}")
        check(isinstance(regs[row.cfa[0]], int), f"{where}: CFA register")
        cfa = regs[row.cfa[0]] + row.cfa[1]
        check(cfa == entry_sp, f"{where}: CFA {cfa:#x}, not {entry_sp:#x}")
        for reg, want in ((fp, caller_fp), (ra, return_to)):
            rule = row.regs.get(reg, ("same",))
            if rule[0] == "offset":
                got = mem.get(cfa + rule[1])
            elif rule[0] == "same":
                got = regs[reg]
            else:
                raise CheckFailed(f"{where}: rule {rule} for r{reg}")
            if reg == ra and arch == "aarch64":
                check(row.ra_signed == isinstance(got, Signed),
                      f"{where}: the return address is "
                      f"{'' if isinstance(got, Signed) else 'not '}signed, "
                      f"the rules say the opposite")
                if isinstance(got, Signed):
                    got = got.value
            check(got == want, f"{where}: r{reg} unwinds to {got!r}, "
                               f"not {want:#x}")
        word = int.from_bytes(code[offset:offset + 4], "little")
        if not model_step(arch, word, regs, mem):
            check(offset + 4 == len(code), f"{where}: ret before the end")


def planted_errors(arch, name, code, fde):
    """The rule check must catch a table without its first or without its
    last rule change (the rules after the first advance_loc, or after the
    last, removed)."""
    program = fde.instructions
    groups = [i for i, insn in enumerate(program)
              if instruction_name(insn.opcode) == "DW_CFA_advance_loc"]
    check(len(groups) >= 2, f"{name}: fewer than two rule changes")
    ends = groups[1:] + [len(program)]
    for which, (start, end) in (("first", (groups[0], ends[0])),
                                ("last", (groups[-1], ends[-1]))):
        planted = FDE(fde.header, fde.structs,
                      program[:start + 1] + program[end:], fde.offset,
                      cie=fde.cie)
        try:
            check_trampoline_rules(arch, code, planted, name)
        except CheckFailed as e:
            print(f"unwind: planted error ({which} rule change removed) "
                  f"caught: {e}")
        else:
            raise CheckFailed(f"the rule check misses a table without its "
                              f"{which} rule change")


# ---- the same, judged by binutils -----------------------------------------------
#
# perf inject cannot read a recording of qemu-user (perf sees qemu, not the
# target's code), so its ELF file is made here the way its writer
# (tools/perf/util/genelf.c) lays it out: the code at 0x80, the record's
# .eh_frame at the code's end rounded up to 8 bytes, its .eh_frame_hdr
# right after.  The target's readelf and objdump then say what the FDE
# covers, its rules, and what the code does; none of the code above is
# used to decide what is right.

ELF_TEXT = 0x80


def genelf_layout(machine, code, unwind):
    """An ELF file with .text, .eh_frame and .eh_frame_hdr where perf puts
    them (addresses equal to file offsets)."""
    blob, hdr_size = unwind
    eh = ELF_TEXT + ((len(code) + 7) & ~7)
    hdr = eh + len(blob) - hdr_size
    names = b"\0.text\0.eh_frame\0.eh_frame_hdr\0.shstrtab\0"
    body = bytearray(ELF_TEXT)
    body += code
    body += bytes(eh - len(body))
    body += blob
    names_off = len(body)
    body += names
    while len(body) % 8:
        body.append(0)
    shoff = len(body)
    # name, type, flags, addr, offset, size, link, info, align, entsize
    shdrs = [(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
             (1, 1, 6, ELF_TEXT, ELF_TEXT, len(code), 0, 0, 16, 0),
             (7, 1, 2, eh, eh, len(blob) - hdr_size, 0, 0, 8, 0),
             (17, 1, 2, hdr, hdr, hdr_size, 0, 0, 4, 0),
             (31, 3, 0, 0, names_off, len(names), 0, 0, 1, 0)]
    for sh in shdrs:
        body += struct.pack("<IIQQQQIIQQ", *sh)
    struct.pack_into("<4sBBBB8xHHIQQQIHHHHHH", body, 0, b"\x7fELF", 2, 1,
                     1, 0, 3, machine, 1, ELF_TEXT, 0, shoff, 0, 64, 0, 0,
                     64, len(shdrs), 4)
    return bytes(body)


def tool(*cmd):
    import subprocess
    proc = subprocess.run(cmd, capture_output=True, text=True)
    check(proc.returncode == 0, f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc.stdout


def objdump_frame_states(arch, insns):
    """From objdump's text: at each instruction, (d, fp, ra, saved, signed):
    the stack pointer is CFA - d; fp (x29, s0) and the return address
    register are "caller" (the caller's values) or else ("cfa", k) /
    "clobbered"; saved maps k to the register whose caller's value is at
    CFA - k; signed says if the return address is signed (PAC)."""
    d, fp, ra, saved, signed = 0, "caller", "caller", {}, False
    fpn, ran = ("x29", "x30") if arch == "aarch64" else ("s0", "ra")
    states = {}

    def store(reg, k):
        value = fp if reg == fpn else ra
        saved[k] = reg if value == "caller" else None

    def load(reg, k):
        return "caller" if saved.get(k) == reg else "unknown"
    for i, (addr, text) in enumerate(insns):
        states[addr] = (d, fp, ra, dict(saved), signed)
        mnemonic, _, args = text.partition(" ")
        args = args.replace(" ", "")
        # (binutils 2.40 prints addi with its immediate as "add")
        m = re.fullmatch(r"addi? sp,sp,(-?\d+)", f"{mnemonic} {args}")
        if mnemonic == "bti" and args == "c":
            pass
        elif mnemonic in ("paciasp", "pacibsp"):
            signed = True
        elif mnemonic in ("autiasp", "autibsp"):
            signed = False
        elif (mnemonic, args) == ("stp", "x29,x30,[sp,#-16]!"):
            d += 16
            store("x29", d)
            store("x30", d - 8)
        elif (mnemonic, args) == ("mov", "x29,sp"):
            fp = ("cfa", d)
        elif (mnemonic, args) == ("ldp", "x29,x30,[sp],#16"):
            fp, ra = load("x29", d), load("x30", d - 8)
            d -= 16
        elif mnemonic in ("blr", "jalr"):
            ra = "clobbered"
        elif m is not None:
            d -= int(m.group(1))
        elif mnemonic in ("sd", "ld") and re.fullmatch(
                r"(ra|s0|fp),(\d+)\(sp\)", args):
            reg, off = re.fullmatch(r"(ra|s0|fp),(\d+)\(sp\)", args).groups()
            reg = "s0" if reg == "fp" else reg
            if mnemonic == "sd":
                store(reg, d - int(off))
            elif reg == "ra":
                ra = load("ra", d - int(off))
            else:
                fp = load("s0", d - int(off))
        elif re.fullmatch(r"addi? (s0|fp),sp,(\d+)", f"{mnemonic} {args}"):
            fp = ("cfa", d - int(args.split(",")[2]))
        elif mnemonic == "ret":
            check(i == len(insns) - 1, f"{addr:#x}: ret before the end")
        else:
            raise CheckFailed(f"{addr:#x}: no frame semantics for {text!r}")
    check(insns and insns[-1][1].startswith("ret"), "the code does not "
                                                    "end in ret")
    return states, fpn, ran


def binutils_check(arch, prefix, code, unwind, name, workdir):
    path = os.path.join(workdir, "genelf-layout.so")
    with open(path, "wb") as f:
        f.write(genelf_layout(ARCH[arch]["machine"], code, unwind))
    secs = {m.group(1): (int(m.group(2), 16), int(m.group(3), 16))
            for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+"
                                 r"[0-9a-f]+\s+([0-9a-f]+)\s",
                                 tool(prefix + "readelf", "-S", "-W", path))}
    text = secs[".text"]
    interp = tool(prefix + "readelf", "--debug-dump=frames-interp", path)
    fdes = re.findall(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)\n"
                      r"\s+(LOC.*)\n((?:[0-9a-f]+ .*\n)*)", interp)
    check(len(fdes) == 1, f"{name}: readelf finds {len(fdes)} FDEs")
    start, end, header, body = fdes[0]
    check((int(start, 16), int(end, 16)) == (text[0], text[0] + text[1]),
          f"{name}: readelf: the FDE covers {start}..{end}, .text is "
          f"{text[0]:#x}..{text[0] + text[1]:#x}")
    columns = header.split()[1:]
    rows = []
    for line in body.splitlines():
        loc, *rules = line.split()
        rows.append((int(loc, 16), dict(zip(columns, rules))))
    insns = [(int(m.group(1), 16), " ".join(m.group(2).split()))
             for m in re.finditer(r"^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+(.+)$",
                                  tool(prefix + "objdump", "-d", "-w", path),
                                  re.M)]
    check(insns and insns[0][0] == text[0], f"{name}: objdump: {insns}")
    states, fpn, ran = objdump_frame_states(arch, insns)
    # DW_CFA_AARCH64_negate_ra_state: where readelf sees it
    raw = tool(prefix + "readelf", "--debug-dump=frames", path)
    raw = raw[raw.index(" FDE "):]
    loc, toggles = text[0], []
    for line in raw.splitlines():
        m = re.search(r"DW_CFA_advance_loc\d?: \d+ to ([0-9a-f]+)", line)
        if m:
            loc = int(m.group(1), 16)
        elif "negate_ra_state" in line:
            toggles.append(loc)
    signed = False
    for addr, (d, fp, ra, saved, want_signed) in states.items():
        while toggles and toggles[0] <= addr:
            signed = not signed
            toggles.pop(0)
        rule = [r for at, r in rows if at <= addr][-1]
        where = f"{name}+{addr - text[0]} (readelf, objdump)"
        m = re.fullmatch(r"(sp|x29|s0)\+(\d+)", rule.get("CFA", ""))
        check(m is not None, f"{where}: CFA rule {rule.get('CFA')}")
        reg, off = m.group(1), int(m.group(2))
        if reg == "sp":
            check(off == d, f"{where}: CFA = sp+{off}, but sp is CFA-{d}")
        else:
            check(fp == ("cfa", off), f"{where}: CFA = {reg}+{off}, but "
                                      f"{reg} is {fp}")
        for col, value in ((fpn, fp), (ran, ra)):
            r = rule.get(col, rule.get("ra" if col == ran else col, "u"))
            m = re.fullmatch(r"c-(\d+)", r)
            if m:
                check(saved.get(int(m.group(1))) == col,
                      f"{where}: {col} rule {r}, but CFA-{m.group(1)} holds "
                      f"{saved.get(int(m.group(1)))}")
            else:
                check(r in ("u", "s") and value == "caller",
                      f"{where}: {col} rule {r!r}, but {col} is {value}")
        if arch == "aarch64":
            check(signed == want_signed,
                  f"{where}: the rules say the return address is "
                  f"{'' if signed else 'not '}signed")
    return len(states)


# ---- the stack ------------------------------------------------------------------

def read_capture(directory):
    fp, regs, maps, pid, stack = [], {}, [], None, None
    with open(os.path.join(directory, "stack.txt")) as f:
        for line in f:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "pid":
                pid = int(rest)
            elif kind == "fp":
                fp.append(tuple(int(x, 16) for x in rest.split()))
            elif kind == "reg":
                num, value = rest.split()
                regs[int(num)] = int(value, 16)
            elif kind == "stack":
                base, size = (int(x, 16) for x in rest.split())
                stack = (base, size)
            elif kind == "map":
                maps.append(rest)
    with open(os.path.join(directory, "stack.txt.stack"), "rb") as f:
        memory = f.read()
    check(len(memory) == stack[1], "the stack copy is incomplete")
    return pid, fp, regs, maps, stack[0], memory


def read_perf_map(path):
    entries = []
    with open(path) as f:
        for line in f:
            start, size, name = line.rstrip("\n").split(" ", 2)
            entries.append((int(start, 16), int(size, 16), name))
    entries.sort()
    return entries


def check_names(names, mode):
    """The three functions and the module, in stack order, each with the
    evaluator above it and a trampoline caller below it, and nothing else
    between them."""
    py = [i for i, n in enumerate(names) if n.startswith("py::")]
    got = [names[i] for i in py[:4]]
    want = [f"py::{f}:" for f in EXPECTED]
    check(len(got) == 4 and all(
        g.startswith(w) and g.endswith("three_deep.py")
        for g, w in zip(got, want)),
        f"{mode}: the Python frames are {got}, expected "
        f"{[w + '.../three_deep.py' for w in want]}")
    for i in py[:4]:
        check(i > 0 and names[i - 1] == "_PyEval_EvalFrameDefault",
              f"{mode}: {names[i]} does not run _PyEval_EvalFrameDefault "
              f"(above it: {names[i - 1] if i else None})")
        check(names[i + 1] in TRAMPOLINE_CALLERS,
              f"{mode}: {names[i]} called from {names[i + 1]}, not from "
              f"{' or '.join(TRAMPOLINE_CALLERS)}")
    # Between a function and its caller: the caller's evaluator, which
    # called the trampoline itself, or the hook and then the evaluator.
    for a, b in zip(py[:3], py[1:4]):
        between = names[a + 1:b]
        check(between == ["_PyEval_EvalFrameDefault"]
              or (len(between) == 2 and between[0] in TRAMPOLINE_CALLERS
                  and between[1] == "_PyEval_EvalFrameDefault"),
              f"{mode}: between {names[a]} and {names[b]}: {between}, "
              f"expected the evaluator, or a trampoline caller and the "
              f"evaluator")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("perf", "perf_jit"), required=True)
    ap.add_argument("--arch", choices=tuple(ARCH), required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--helper", required=True)
    ap.add_argument("--binutils", metavar="PREFIX",
                    help="check the jitdump's unwind data with PREFIX"
                         "readelf and PREFIXobjdump too (perf_jit mode)")
    ap.add_argument("--expect-pac", action="store_true",
                    help="the build signs return addresses (aarch64 "
                         "-mbranch-protection=pac-ret or standard)")
    args = ap.parse_args()
    info = ARCH[args.arch]

    pid, fp_chain, regs, maps, stack_base, memory = read_capture(args.dir)
    elves = [Elf(args.python), Elf(args.helper)]
    for elf in elves:
        check(elf.machine == info["elf_machine"],
              f"{elf.path}: e_machine {elf.machine}")
        elf.locate(maps)

    def elf_symbol(addr):
        for elf in elves:
            name = elf.symbol(addr)
            if name is not None:
                return name
        return None

    if args.mode == "perf":
        entries = read_perf_map(os.path.join(args.dir, f"perf-{pid}.map"))
        starts = [e[0] for e in entries]

        def name_of(addr):
            i = bisect.bisect_right(starts, addr) - 1
            if i >= 0 and addr < entries[i][0] + entries[i][1]:
                return entries[i][2]
            return elf_symbol(addr) or f"?{addr:#x}"
        # Return addresses: the call is the instruction before.
        names = [name_of(ret - 1) for ret, _ in fp_chain]
        signed = sum(ret != raw for ret, raw in fp_chain)
        print(f"unwind: {signed} of the {len(fp_chain)} return addresses in "
              f"frame records carry a pointer authentication code")
        if args.expect_pac:
            check(signed > 0, "built with pac-ret, but no return address "
                              "in a frame record is signed")
    else:
        loads = read_jitdump(os.path.join(args.dir, f"jit-{pid}.dump"), pid,
                             info["machine"])
        checked = 0
        for addr, (size, name, code, fde, _) in sorted(loads.items()):
            check_trampoline_rules(args.arch, code, fde, name)
            checked += 1
        print(f"unwind: the rules of {checked} trampolines checked at "
              f"every instruction")
        planted_errors(args.arch, *next(iter(loads.values()))[1:4])
        if args.binutils:
            # every code load's record is the same: the first one's
            size, name, code, _, unwind = next(iter(loads.values()))
            check(all(l[2] == code and l[4] == unwind
                      for l in loads.values()),
                  "code loads of different code or unwind data")
            n = binutils_check(args.arch, args.binutils, code, unwind, name,
                               args.dir)
            print(f"unwind: {args.binutils}readelf and {args.binutils}"
                  f"objdump agree at the {n} instructions of the "
                  f"trampoline, in perf's ELF layout")
        jit_starts = sorted(loads)

        def jit_at(addr):
            i = bisect.bisect_right(jit_starts, addr) - 1
            if i >= 0 and addr < jit_starts[i] + loads[jit_starts[i]][0]:
                return loads[jit_starts[i]]
            return None

        def read_u64(addr):
            off = addr - stack_base
            check(0 <= off <= len(memory) - 8,
                  f"unwinding reads {addr:#x}, outside the stack copy")
            return struct.unpack_from("<Q", memory, off)[0]

        names = []
        pc = regs[info["ra"]]
        for depth in range(200):
            lookup = pc - 1              # pc is a return address
            jit = jit_at(lookup)
            if jit is not None:
                names.append(jit[1])
                fde, bias = jit[3], 0
            else:
                fde = None
                for elf in elves:
                    if elf.contains(lookup):
                        fde, bias = elf.fde(lookup)
                        names.append(elf.symbol(lookup) or f"?{lookup:#x}")
                        break
                if fde is None:
                    break                # libc or the end: done
            row = run_cfa(fde, lookup - bias, args.arch)
            cfa = regs[row.cfa[0]] + row.cfa[1]
            new = {}
            for reg, value in regs.items():
                rule = row.regs.get(reg, ("same",))
                if rule[0] == "offset":
                    new[reg] = read_u64(cfa + rule[1])
                elif rule[0] == "val_offset":
                    new[reg] = cfa + rule[1]
                elif rule[0] == "register":
                    new[reg] = regs[rule[1]]
                elif rule[0] == "same":
                    new[reg] = value
            for reg, rule in row.regs.items():
                if rule[0] == "offset" and reg not in new:
                    new[reg] = read_u64(cfa + rule[1])
            new[info["sp"]] = cfa
            ra = new.get(info["ra"])
            if ra is None or ra == 0:
                break
            if row.ra_signed:
                ra &= PAC_MASK
            new[info["ra"]] = ra
            regs, pc = new, ra
    print(f"unwind ({args.mode}): " + " <- ".join(names[:16]))
    check_names(names, args.mode)


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as e:
        print(f"unwind: FAILED: {e}")
        sys.exit(1)
