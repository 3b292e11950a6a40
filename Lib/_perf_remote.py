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

The process may be hostile: it runs as another user perhaps, and chooses
the files it maps, their names, and what lies at those names now.  So a
mapped file is read only once it is known to be the file mapped: it is
reached without following any symbolic link, first opened with O_PATH
(which opens nothing: no FIFO, device or FUSE open is made), and read only
when it is a regular file with the inode that /proc/PID/maps shows (and
the device, where the two can be compared: see _same_device()).  Every
size and offset the ELF file gives is checked against the file's size
and sane limits before anything is read.  The lookup runs in a thread of
its own and is given up at a deadline (symbol_addresses()), so that a
file system that does not answer (FUSE, NFS) cannot hold the requester.

Every failure is a LiveError whose text, one line, says what to do: no
such process, exited, a file refused and why, and for permission the
rules that apply (same user or CAP_SYS_PTRACE, Yama's ptrace_scope,
non-dumpable processes).  Text that comes from the process (its paths,
the block's strings) goes through printable() before it is shown.
"""

import collections
import errno
import os
import stat
import struct
import sys
import threading
import time

__all__ = ["LiveError", "ProcessGone", "NoBlock", "CopiedBlock", "Elf",
           "Memory", "exists", "symbol_addresses", "ns_pid", "children_of",
           "printable", "LOOKUP_TIMEOUT"]

# How long symbol_addresses() waits for the lookup when given no deadline,
# and the least it waits even past a deadline (a lookup that nothing
# blocks takes a few milliseconds: an expired deadline alone must not
# fail it).
LOOKUP_TIMEOUT = 5.0
LOOKUP_GRACE = 0.1

# The most files of a process that are examined (its executable and the
# files named libpython*), and the most bytes read of one ELF table (a
# libpython's .dynsym and .dynstr take some 100 kB each).
MAX_CANDIDATES = 16
MAX_TABLE = 8 << 20


class LiveError(Exception):
    """A request cannot be made to a process: the text says why."""


class ProcessGone(LiveError):
    """The process does not exist, or has exited."""


class NoBlock(LiveError):
    """The process has no block that takes requests: it is no Python with
    live activation (or one built without it)."""


class CopiedBlock(NoBlock):
    """The process's block names another pid: a child of fork() that has
    not run since still shows its parent's (or the pid was taken by a
    process that holds another's block)."""


class _Refused(Exception):
    """One mapped file is not read: the text says why."""


def printable(text):
    """`text` (str, or bytes read as UTF-8) fit to be shown on a terminal:
    each character that is not printable (control characters such as ESC
    and BEL, line and format characters) is shown escaped, as \\xNN,
    \\uNNNN or \\UNNNNNNNN, and so is each byte that is not UTF-8."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
            continue
        code = ord(ch)
        if 0xdc80 <= code <= 0xdcff:
            code -= 0xdc00  # surrogateescape's way of keeping a byte
        if code < 0x100:
            out.append("\\x%02x" % code)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            out.append("\\U%08x" % code)
    return "".join(out)


# ---- ELF: the dynamic symbols and the loadable segments of a file ----------

SHT_STRTAB = 3
SHT_DYNSYM = 11
PT_LOAD = 1


class Elf:
    """The parts of an ELF file the requester needs: its PT_LOAD segments
    and the values of some .dynsym symbols.  `fd` is open for reading,
    `size` the file's size: nothing outside it is read, nor more than
    MAX_TABLE bytes at once.  Raises ValueError for a file that is not
    ELF, is cut short or gives sizes and offsets that do not fit."""

    def __init__(self, fd, size):
        self.fd = fd
        self.size = size
        ident = self._read(0, 16, "the ELF identification")
        if ident[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        if ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ValueError("unknown ELF class or data encoding")
        self.is64 = ident[4] == 2
        self.end = "<" if ident[5] == 1 else ">"
        if self.is64:
            ehdr, phdr, shdr = "HHIQQQIHHHHHH", "IIQQQQQQ", "IIQQQQIIQQ"
            self.sym = struct.Struct(self.end + "IBBHQQ")
        else:
            ehdr, phdr, shdr = "HHIIIIIHHHHHH", "IIIIIIII", "IIIIIIIIII"
            self.sym = struct.Struct(self.end + "IIIBBH")
        (_, _, _, _, phoff, shoff, _, _, phentsize, phnum,
         shentsize, shnum, _) = self._unpack(ehdr, 16, "the ELF header")
        self.segments = []
        for p in self._table(phdr, phoff, phentsize, phnum,
                             "the program headers"):
            if self.is64:
                p_type, _, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = p
            else:
                p_type, p_offset, p_vaddr, _, p_filesz, p_memsz, _, _ = p
            if p_type == PT_LOAD:
                self.segments.append((p_offset, p_vaddr, p_filesz, p_memsz))
        # (type, offset, size, link, entsize) of each section; shnum 0
        # with shoff set (more than 0xff00 sections) gives none
        self.sections = [
            (s[1], s[4], s[5], s[6], s[9])
            for s in self._table(shdr, shoff, shentsize, shnum,
                                 "the section headers")]

    def _read(self, pos, n, what):
        if n > MAX_TABLE:
            raise ValueError("%s: %d bytes, more than the %d read at most"
                             % (what, n, MAX_TABLE))
        if pos > self.size or n > self.size - pos:
            raise ValueError("%s: %d bytes at offset %d, outside the "
                             "file (%d bytes)" % (what, n, pos, self.size))
        data = b""
        while len(data) < n:
            chunk = os.pread(self.fd, n - len(data), pos + len(data))
            if not chunk:
                raise ValueError("ELF file cut short while it was read")
            data += chunk
        return data

    def _unpack(self, fmt, pos, what):
        st = struct.Struct(self.end + fmt)
        return st.unpack(self._read(pos, st.size, what))

    def _table(self, fmt, offset, entsize, count, what):
        """The entries of a table of `count` entries of `entsize` bytes,
        each read as `fmt` (which may be shorter)."""
        if count == 0:
            return []
        st = struct.Struct(self.end + fmt)
        if entsize < st.size:
            raise ValueError("%s: entry size %d, less than %d"
                             % (what, entsize, st.size))
        data = self._read(offset, entsize * count, what)
        return [st.unpack_from(data, i * entsize) for i in range(count)]

    def dynamic_symbols(self, names):
        """{name: st_value} of those `names` (bytes) defined in .dynsym."""
        found = {}
        st = self.sym
        for s_type, s_off, s_size, s_link, s_entsize in self.sections:
            if s_type != SHT_DYNSYM:
                continue
            if s_entsize < st.size:
                raise ValueError(".dynsym: entry size %d, less than %d"
                                 % (s_entsize, st.size))
            if not 0 < s_link < len(self.sections):
                raise ValueError("bad .dynsym string table index %d"
                                 % s_link)
            str_type, str_off, str_size, _, _ = self.sections[s_link]
            if str_type != SHT_STRTAB:
                raise ValueError(".dynsym's string table is a section of "
                                 "type %d" % str_type)
            strtab = self._read(str_off, str_size, ".dynstr")
            count = s_size // s_entsize
            symtab = self._read(s_off, count * s_entsize, ".dynsym")
            for k in range(count):
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


# ---- /proc: mappings, symbols, memory, descendants --------------------------

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


def _gone(pid):
    return not os.path.exists("/proc/%d" % pid)


def _os_error(pid, exc, what):
    if exc.errno in (errno.EPERM, errno.EACCES):
        return LiveError(_permission_text(pid))
    if exc.errno == errno.ESRCH or (exc.errno == errno.ENOENT
                                    and _gone(pid)):
        return ProcessGone("process %d does not exist (or has exited)" % pid)
    return LiveError("cannot %s of process %d: %s"
                     % (what, pid, os.strerror(exc.errno)))


def exists(pid):
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat_line = f.read()
    except OSError:
        return False
    # the state follows the command name, which is in parentheses
    state = stat_line[stat_line.rfind(b")") + 2:][:1]
    return state not in (b"Z", b"X", b"x")


# A file mapping of /proc/PID/maps; `dev` is os.makedev(major, minor) of
# the line, `path` has its " (deleted)" taken off (then `deleted` is true).
Mapping = collections.namedtuple(
    "Mapping", "start end offset dev inode path deleted")


# A line of /proc/PID/maps: perms is str ("rw-p"), path bytes (b"" for
# anonymous memory; a path need not be text in any encoding).
MapsRow = collections.namedtuple(
    "MapsRow", "start end perms offset dev inode path")


def maps_rows(pid):
    """Every mapping of `pid`, in address order: [MapsRow]."""
    try:
        with open("/proc/%d/maps" % pid, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise _os_error(pid, exc, "read the mappings")
    if not text and not exists(pid):
        raise ProcessGone("process %d has exited" % pid)
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        try:
            start, end = (int(x, 16) for x in parts[0].split(b"-"))
            major, minor = (int(x, 16) for x in parts[3].split(b":"))
            offset = int(parts[2], 16)
            inode = int(parts[4])
            perms = parts[1].decode("ascii")
        except ValueError:
            continue
        rows.append(MapsRow(start, end, perms, offset,
                            os.makedev(major, minor), inode,
                            parts[5] if len(parts) > 5 else b""))
    return rows


def _mappings(pid):
    """The file mappings of `pid`: [Mapping]."""
    maps = []
    for row in maps_rows(pid):
        if not row.path.startswith(b"/") or row.inode == 0:
            continue
        path = row.path
        deleted = path.endswith(b" (deleted)")
        if deleted:
            path = path[:-len(b" (deleted)")]
        maps.append(Mapping(row.start, row.end, row.offset, row.dev,
                            row.inode, path, deleted))
    return maps


def _candidates(pid, maps):
    """The mapped files that may hold the block: the executable, and any
    libpython (MAX_CANDIDATES at most).  Yields [Mapping] per file."""
    by_file = collections.OrderedDict()
    for m in maps:
        by_file.setdefault((m.dev, m.inode, m.path), []).append(m)
    try:
        exe = os.readlink("/proc/%d/exe" % pid).encode(
            sys.getfilesystemencoding(), "surrogateescape")
    except OSError:
        exe = None
    if exe is not None and exe.endswith(b" (deleted)"):
        exe = exe[:-len(b" (deleted)")]
    try:
        # (in the lookup's thread: stat() reaches the file's file system)
        exe_inode = os.stat("/proc/%d/exe" % pid).st_ino
    except OSError:
        exe_inode = None
    count = 0
    for (_, inode, path), ms in by_file.items():
        base = os.path.basename(path)
        if (path == exe or inode == exe_inode
                or base.startswith(b"libpython")):
            count += 1
            if count > MAX_CANDIDATES:
                return
            yield ms


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind(mode):
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _named(pid, m):
    """How a message names the file of mapping `m`."""
    return "%s%s (mapped by process %d)" % (
        printable(m.path), " (deleted)" if m.deleted else "", pid)


def _walk(pid, m):
    """An O_PATH descriptor of m.path in the root of `pid`, reached one
    component at a time without following any symbolic link (the path in
    /proc/PID/maps has none: one there now was put there since)."""
    parts = [p for p in m.path.split(b"/") if p]
    if not parts or b".." in parts or b"." in parts:
        raise _Refused("%s: not a plain absolute path" % _named(pid, m))
    try:
        cur = os.open("/proc/%d/root" % pid,
                      os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(pid, exc, "open the root directory")
    try:
        for i, part in enumerate(parts):
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
            if i < len(parts) - 1:
                flags |= os.O_DIRECTORY
            nxt = os.open(part, flags, dir_fd=cur)
            os.close(cur)
            cur = nxt
    except OSError as exc:
        os.close(cur)
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            why = "a component of its path is no longer a directory " \
                  "(a symbolic link now?)"
        elif exc.errno == errno.ENOENT:
            if _gone(pid):
                raise ProcessGone("process %d has exited" % pid)
            why = "no longer exists (deleted or moved since)"
        else:
            why = os.strerror(exc.errno)
        raise _Refused("cannot open %s through /proc/%d/root: %s"
                       % (_named(pid, m), pid, why))
    return cur


def _mount_of(pid, fd):
    """(device, file system type) of the mount that holds descriptor
    `fd`, from the mountinfo of `pid` or our own; None if not found."""
    try:
        with open("/proc/self/fdinfo/%d" % fd, "rb") as f:
            info = f.read()
        mnt_id = None
        for line in info.splitlines():
            if line.startswith(b"mnt_id:"):
                mnt_id = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    for source in ("/proc/%d/mountinfo" % pid, "/proc/self/mountinfo"):
        try:
            with open(source, "rb") as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            fields = line.split()
            try:
                if int(fields[0]) != mnt_id:
                    continue
                major, minor = (int(x) for x in fields[2].split(b":"))
                fstype = fields[fields.index(b"-", 6) + 1]
            except (ValueError, IndexError):
                continue
            return os.makedev(major, minor), fstype
    return None


def _same_device(pid, fd, st, dev):
    """Whether the file open as `fd` (fstat `st`) may be on device `dev`,
    the one /proc/PID/maps shows.  The maps line shows the device of the
    file system's superblock (s_dev) and the inode's i_ino; fstat shows
    st_dev and st_ino, which are the same for most file systems but not
    all: btrfs gives each subvolume a device of its own in st_dev, and
    overlayfs shows in maps, on kernels before 6.8, the device of the
    layer that holds the file, in st_dev its own.  So the device counts
    as matching when it is st_dev, or the device of the superblock of the
    mount that holds the file (as mountinfo shows it), and is not
    compared on an overlay mount or when that mount cannot be found (an
    overlay's internal mount of a layer, through map_files); the inode
    always is."""
    if st.st_dev == dev:
        return True
    mount = _mount_of(pid, fd)
    if mount is None:
        return True
    mount_dev, fstype = mount
    return mount_dev == dev or fstype == b"overlay"


def _open_mapped(pid, m):
    """A descriptor open for reading, and the size, of the file of
    mapping `m`: by /proc/PID/map_files (the very file, even deleted or
    in another mount namespace) if allowed, else by /proc/PID/root/PATH.
    Raises _Refused unless it is a regular file with the mapping's inode
    (and device, see _same_device())."""
    try:
        pfd = os.open("/proc/%d/map_files/%x-%x" % (pid, m.start, m.end),
                      os.O_PATH | os.O_CLOEXEC)
    except OSError:
        # Not allowed (map_files takes CAP_SYS_ADMIN or
        # CAP_CHECKPOINT_RESTORE), or the mapping has gone.
        pfd = _walk(pid, m)
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("%s is now %s, not a regular file: not read"
                           % (_named(pid, m), _kind(st.st_mode)))
        if st.st_ino != m.inode:
            raise _Refused("%s is no longer the file the process mapped "
                           "(inode %d; that path now names inode %d): "
                           "not read" % (_named(pid, m), m.inode, st.st_ino))
        if not _same_device(pid, pfd, st, m.dev):
            raise _Refused("%s is no longer the file the process mapped "
                           "(device %d:%d; that path now names a file of "
                           "device %d:%d): not read"
                           % (_named(pid, m), os.major(m.dev),
                              os.minor(m.dev), os.major(st.st_dev),
                              os.minor(st.st_dev)))
        # Opened for reading only now, through the O_PATH descriptor: the
        # very file checked, and not a FIFO or device put there since.
        fd = os.open("/proc/self/fd/%d" % pfd,
                     os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _Refused("cannot open %s: %s"
                       % (_named(pid, m), os.strerror(exc.errno)))
    finally:
        os.close(pfd)
    try:
        st2 = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise _Refused("cannot open %s: %s"
                       % (_named(pid, m), os.strerror(exc.errno)))
    if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise _Refused("%s changed while it was opened: not read"
                       % _named(pid, m))
    return fd, st2.st_size


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
    starts = sorted(m.start for m in mappings if m.offset == first_off)
    if not starts:
        return None
    bias = starts[0] - (first[1] - first[1] % page)
    addr = bias + value
    p_offset, p_vaddr, p_filesz = seg[0], seg[1], seg[2]
    if value < p_vaddr + p_filesz:
        file_off = p_offset + (value - p_vaddr)
        if not any(m.start <= addr < m.end
                   and addr - m.start + m.offset == file_off
                   for m in mappings):
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


def _symbols_of(pid, ms, names):
    """(Elf, {name: st_value}) of the file of mappings `ms`."""
    fd, size = _open_mapped(pid, ms[0])
    try:
        elf = Elf(fd, size)
        return elf, elf.dynamic_symbols(names)
    except (ValueError, struct.error, OverflowError, MemoryError,
            OSError) as exc:
        if isinstance(exc, OSError):
            exc = os.strerror(exc.errno) if exc.errno else exc
        raise _Refused("%s is not an ELF file the requester can read (%s)"
                       % (_named(pid, ms[0]), printable(str(exc))))
    finally:
        os.close(fd)


def _lookup(pid, names, progress):
    """symbol_addresses()'s work, in the lookup's thread; `progress[0]`
    names the file being read."""
    maps = _mappings(pid)
    page = os.sysconf("SC_PAGE_SIZE")
    wanted = set(names)
    found = {}
    refused = []
    for ms in _candidates(pid, maps):
        rest = wanted - set(found)
        if not rest:
            break
        progress[0] = _named(pid, ms[0])
        try:
            elf, syms = _symbols_of(pid, ms, rest)
        except _Refused as exc:
            refused.append(str(exc))
            continue
        for name, value in syms.items():
            addr = _address(elf, value, ms, page)
            if addr is not None and 0 <= addr < 1 << 63:
                found[name] = addr
    if refused and wanted - set(found):
        more = ""
        if len(refused) > 1:
            more = " (and %d more files refused)" % (len(refused) - 1)
        raise LiveError(refused[0] + more)
    return found


def symbol_addresses(pid, names, deadline=None):
    """{name: address in `pid`} of those dynamic symbols `names` (bytes)
    that the executable or a libpython it mapped defines.

    The lookup runs in a thread of its own, given up at `deadline` (a
    time.monotonic() value; LOOKUP_TIMEOUT seconds from now when None,
    LOOKUP_GRACE at least): only a file system that does not answer
    makes it wait (the requester opens no FIFO or device and reads
    nothing from a pipe), and the thread left in such a call ends with
    the program.  Every failure is a LiveError of one line."""
    now = time.monotonic()
    if deadline is None:
        deadline = now + LOOKUP_TIMEOUT
    progress = [None]
    box = {}

    def run():
        try:
            box["found"] = _lookup(pid, names, progress)
        except LiveError as exc:
            box["error"] = exc
        except Exception as exc:
            box["error"] = LiveError(
                "process %d: the lookup of its symbols failed: %s: %s"
                % (pid, type(exc).__name__, printable(str(exc))))

    worker = threading.Thread(target=run, daemon=True,
                              name="_perf_remote lookup %d" % pid)
    worker.start()
    worker.join(max(deadline - now, LOOKUP_GRACE))
    if worker.is_alive():
        what = progress[0] or "the files of process %d" % pid
        raise LiveError("reading %s did not finish in time: its file "
                        "system does not answer (FUSE? NFS?); given up"
                        % what)
    if "error" in box:
        raise box["error"]
    return box["found"]


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
            return ProcessGone("process %d has exited" % self.pid)
        return _os_error(self.pid, exc, what)

    def _where(self, addr):
        # (os.pread() and os.pwrite() take an off_t)
        if not 0 <= addr < 1 << 63:
            raise LiveError("process %d: address %#x is out of range"
                            % (self.pid, addr))

    def read(self, addr, n):
        self._where(addr)
        try:
            data = os.pread(self.fd, n, addr)
        except OSError as exc:
            raise self._failed(exc, "read the memory")
        if len(data) != n:
            raise ProcessGone("process %d has exited" % self.pid)
        return data

    def write(self, addr, data):
        self._where(addr)
        try:
            n = os.pwrite(self.fd, data, addr)
        except OSError as exc:
            raise self._failed(exc, "write the memory")
        if n != len(data):
            raise ProcessGone("process %d has exited" % self.pid)


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
