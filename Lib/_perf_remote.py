"""Another process's memory, through /proc: for perf_trampoline.

perf_trampoline (the live activation requester) needs four things of a
process it did not start and that does nothing to help: whether it still
runs, the address of a data symbol of its executable or libpython, its
memory at that address, and its descendants.  This module answers them
from /proc alone, with no compiled helper and nothing but the standard
library, so that it runs under any Python 3 (3.6 and later), on purpose:
perf_trampoline's docstring says why, and what to keep to.

- /proc/PID/maps lists the mapped files; the executable's (/proc/PID/exe)
  and any libpython's .dynsym is read from the very file mapped (through
  /proc/PID/map_files/, or /proc/PID/root/ when that is not allowed, so
  that processes in other mount namespaces are found too);
- a symbol's address is its value plus the object's load bias, found from
  the mapping of its first PT_LOAD segment, and checked against the
  mapping that holds it;
- /proc/PID/mem is read and written at that address (the permission of a
  ptrace attach);
- /proc/PID/task/*/children, recursively, gives the descendants.

Every failure is a LiveError whose text says what to do: no such process,
exited, and for permission the rules that apply (same user or
CAP_SYS_PTRACE, Yama's ptrace_scope, non-dumpable processes).
"""

import errno
import os
import struct
import sys

__all__ = ["LiveError", "Elf", "Memory", "exists", "symbol_addresses",
           "ns_pid", "children_of"]


class LiveError(Exception):
    """A request cannot be made to a process: the text says why."""


# ---- ELF: the dynamic symbols and the loadable segments of a file ----------

SHT_DYNSYM = 11
PT_LOAD = 1


class Elf:
    """The parts of an ELF file the requester needs: its PT_LOAD segments
    and the values of some .dynsym symbols.  Raises ValueError for a file
    that is not ELF or is cut short."""

    def __init__(self, f):
        self.f = f
        ident = self._read(0, 16)
        if ident[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ValueError("unknown ELF class or data encoding")
        self.is64 = ident[4] == 2
        self.end = "<" if ident[5] == 1 else ">"
        if self.is64:
            hdr = self._unpack("HHIQQQIHHHHHH", 16)
            (_, _, _, _, phoff, shoff, _, _, phentsize, phnum,
             shentsize, shnum, _) = hdr
        else:
            hdr = self._unpack("HHIIIIIHHHHHH", 16)
            (_, _, _, _, phoff, shoff, _, _, phentsize, phnum,
             shentsize, shnum, _) = hdr
        self.segments = []
        for i in range(phnum):
            pos = phoff + i * phentsize
            if self.is64:
                p_type, _, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = (
                    self._unpack("IIQQQQQQ", pos))
            else:
                p_type, p_offset, p_vaddr, _, p_filesz, p_memsz, _, _ = (
                    self._unpack("IIIIIIII", pos))
            if p_type == PT_LOAD:
                self.segments.append((p_offset, p_vaddr, p_filesz, p_memsz))
        self.sections = []
        for i in range(shnum):
            pos = shoff + i * shentsize
            if self.is64:
                s = self._unpack("IIQQQQIIQQ", pos)
            else:
                s = self._unpack("IIIIIIIIII", pos)
            # (type, offset, size, link, entsize)
            self.sections.append((s[1], s[4], s[5], s[6], s[9]))

    def _read(self, pos, n):
        self.f.seek(pos)
        data = self.f.read(n)
        if len(data) != n:
            raise ValueError("ELF file cut short")
        return data

    def _unpack(self, fmt, pos):
        st = struct.Struct(self.end + fmt)
        return st.unpack(self._read(pos, st.size))

    def dynamic_symbols(self, names):
        """{name: st_value} of those `names` (bytes) defined in .dynsym."""
        found = {}
        for s_type, s_off, s_size, s_link, s_entsize in self.sections:
            if s_type != SHT_DYNSYM or not s_entsize:
                continue
            if s_link >= len(self.sections):
                raise ValueError("bad .dynsym string table index")
            _, str_off, str_size, _, _ = self.sections[s_link]
            strtab = self._read(str_off, str_size)
            symtab = self._read(s_off, s_size)
            fmt = self.end + ("IBBHQQ" if self.is64 else "IIIBBH")
            st = struct.Struct(fmt)
            for k in range(s_size // s_entsize):
                fields = st.unpack_from(symtab, k * s_entsize)
                if self.is64:
                    name_off, _, _, shndx, value, _ = fields
                else:
                    name_off, value, _, _, _, shndx = fields
                if shndx == 0 or name_off >= len(strtab):
                    continue  # undefined here
                end = strtab.find(b"\0", name_off)
                name = strtab[name_off:end if end >= 0 else None]
                if name in names:
                    found[name] = value
        return found

    def segment_of(self, vaddr):
        for seg in self.segments:
            if seg[1] <= vaddr < seg[1] + seg[3]:
                return seg
        return None


# ---- /proc: mappings, symbols, memory, descendants ---------------------------

def _permission_text(pid):
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            yama = "kernel.yama.ptrace_scope is " + f.read().strip()
    except OSError:
        yama = "kernel.yama.ptrace_scope: not present (no Yama)"
    return ("no permission to read or write the memory of process %d: "
            "that takes the permission of a ptrace attach (the same user "
            "as the process, or CAP_SYS_PTRACE; %s; a non-dumpable "
            "process, one that changed its user ids or called "
            "prctl(PR_SET_DUMPABLE, 0), takes CAP_SYS_PTRACE even for its "
            "own user)"
            % (pid, yama))


def _os_error(pid, exc, what):
    if exc.errno in (errno.EPERM, errno.EACCES):
        return LiveError(_permission_text(pid))
    if exc.errno == errno.ESRCH or (exc.errno == errno.ENOENT
                                    and not os.path.exists("/proc/%d" % pid)):
        return LiveError("process %d does not exist (or has exited)" % pid)
    return LiveError("cannot %s of process %d: %s"
                     % (what, pid, os.strerror(exc.errno)))


def exists(pid):
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # the state follows the command name, which is in parentheses
    state = stat[stat.rfind(b")") + 2:][:1]
    return state not in (b"Z", b"X", b"x")


def _mappings(pid):
    """The file mappings of `pid`: [(start, end, offset, inode, path)]."""
    try:
        with open("/proc/%d/maps" % pid, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise _os_error(pid, exc, "read the mappings")
    if not text and not exists(pid):
        raise LiveError("process %d has exited" % pid)
    maps = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith(b"/"):
            continue
        inode = int(parts[4])
        if inode == 0:
            continue
        start, end = (int(x, 16) for x in parts[0].split(b"-"))
        path = parts[5]
        if path.endswith(b" (deleted)"):
            path = path[:-len(b" (deleted)")]
        maps.append((start, end, int(parts[2], 16), inode, path))
    return maps


def _candidates(pid, maps):
    """The mapped files that may hold the block: the executable, and any
    libpython.  Yields (inode, path, [mappings])."""
    by_file = {}
    for m in maps:
        by_file.setdefault((m[3], m[4]), []).append(m)
    try:
        exe = os.readlink("/proc/%d/exe" % pid).encode(
            sys.getfilesystemencoding(), "surrogateescape")
    except OSError:
        exe = None
    if exe is not None and exe.endswith(b" (deleted)"):
        exe = exe[:-len(b" (deleted)")]
    try:
        exe_inode = os.stat("/proc/%d/exe" % pid).st_ino
    except OSError:
        exe_inode = None
    for (inode, path), ms in by_file.items():
        base = os.path.basename(path)
        if (path == exe or inode == exe_inode
                or base.startswith(b"libpython")):
            yield inode, path, ms


def _open_mapped(pid, path, mapping):
    """Open a file that `pid` mapped: by /proc/PID/map_files (the very
    file, even deleted or in another mount namespace) if allowed, else by
    /proc/PID/root/PATH."""
    first = "/proc/%d/map_files/%x-%x" % (pid, mapping[0], mapping[1])
    try:
        return open(first, "rb")
    except OSError:
        pass
    try:
        return open(b"/proc/%d/root" % pid + path, "rb")
    except OSError as exc:
        raise _os_error(pid, exc, "open %s" % os.fsdecode(path))


def _address(elf, value, mappings, page):
    """The address in the process of the symbol of value `value`, or None.

    All the segments of an ELF object are loaded with one bias, found from
    the mapping of its first PT_LOAD segment (the lowest mapping of the
    file at that segment's page offset: a later segment can share the
    page offset of an earlier one, as a RELRO part does).  When the symbol
    lies in the part of its segment read from the file, the mapping that
    holds its address must show that very file offset."""
    seg = elf.segment_of(value)
    if seg is None or not elf.segments:
        return None
    first = min(elf.segments, key=lambda s: s[1])
    first_off = first[0] - first[0] % page
    starts = sorted(m[0] for m in mappings if m[2] == first_off)
    if not starts:
        return None
    bias = starts[0] - (first[1] - first[1] % page)
    addr = bias + value
    p_offset, p_vaddr, p_filesz = seg[0], seg[1], seg[2]
    if value < p_vaddr + p_filesz:
        file_off = p_offset + (value - p_vaddr)
        if not any(start <= addr < end and addr - start + offset == file_off
                   for start, end, offset, _, _ in mappings):
            return None
    return addr


def ns_pid(pid):
    """The pid of `pid` in its own pid namespace (NSpid's last field)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def symbol_addresses(pid, names):
    """{name: address in `pid`} of those dynamic symbols `names` (bytes)
    that the executable or a libpython it mapped defines."""
    maps = _mappings(pid)
    page = os.sysconf("SC_PAGE_SIZE")
    found = {}
    for inode, path, ms in _candidates(pid, maps):
        with _open_mapped(pid, path, ms[0]) as f:
            try:
                elf = Elf(f)
                syms = elf.dynamic_symbols(set(names) - set(found))
            except ValueError:
                continue
        for name, value in syms.items():
            addr = _address(elf, value, ms, page)
            if addr is not None:
                found[name] = addr
    return found


class Memory:
    """/proc/PID/mem, open for reading (and writing with write=True)."""

    def __init__(self, pid, write=True):
        self.pid = pid
        try:
            self.fd = os.open("/proc/%d/mem" % pid,
                              os.O_RDWR if write else os.O_RDONLY)
        except OSError as exc:
            raise _os_error(pid, exc, "open the memory")

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _failed(self, exc, what):
        if not exists(self.pid):
            return LiveError("process %d has exited" % self.pid)
        return _os_error(self.pid, exc, what)

    def read(self, addr, n):
        try:
            data = os.pread(self.fd, n, addr)
        except OSError as exc:
            raise self._failed(exc, "read the memory")
        if len(data) != n:
            raise LiveError("process %d has exited" % self.pid)
        return data

    def write(self, addr, data):
        try:
            n = os.pwrite(self.fd, data, addr)
        except OSError as exc:
            raise self._failed(exc, "write the memory")
        if n != len(data):
            raise LiveError("process %d has exited" % self.pid)


def children_of(pid):
    """The descendants of `pid`, recursively (children of every thread)."""
    found = []
    todo = [pid]
    seen = {pid}
    while todo:
        p = todo.pop(0)
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            for k in kids:
                if k not in seen:
                    seen.add(k)
                    found.append(k)
                    todo.append(k)
    return found
