"""Turn the perf trampoline on or off in running Python processes.

    python -m perf_trampoline activate [--backend perf|perf_jit]
                                       [--children] [--timeout S] PID...
    python -m perf_trampoline deactivate [--children] [--timeout S] PID...
    python -m perf_trampoline status [--children] PID...

Design
------
An interpreter built with live activation (configure's default
--with-remote-debug) exports a small control block, the data symbol
_PyPerf_Live, from the dynamic symbol table of the executable or of
libpython3.11.so.  Its layout (version 1, native byte order, every field
naturally aligned) is fixed:

    0   magic[8]       b"PyPerfL\\0"
    8   u32 version    1
    12  u32 size       size of the block (later versions may only grow it)
    16  u64 eval_breaker  address of the main interpreter's eval_breaker
    24  u32 state      0 starting, 1 ready, 2 disabled, 3 finalizing
    28  u32 pid        getpid() of the owner (a forked child rewrites it)
    32  u32 request    0 none, 1 perf, 2 perf_jit, 3 deactivate
    40  u64 request_id the requester's token, written before `request`
    48  u64 served_id  the request_id the interpreter served last
    56  i32 result     0 done, 1 done but no file, 2 refused, 3 unknown code
    60  i32 error      errno of result 1, or 0
    64  u32 active     0 none, 1 perf, 2 perf_jit
    72  file[256]      the active backend's file, NUL-terminated
    328 message[128]   the text of a refusal

This module is the requester.  It finds the block without any help from
the target: /proc/PID/maps lists the files the process mapped; for the
executable and any libpython, the ELF .dynsym is read (through
/proc/PID/map_files/, or /proc/PID/root/ when that is not allowed, so that
processes in containers are found too) and the symbol's address is
computed from the mapping of the PT_LOAD segment that holds it.  The block
is then read from /proc/PID/mem, which needs the permission of a ptrace
attach.  Nothing is written unless the magic, version, size and pid
(the pid as the process's own pid namespace sees it) all check out, so a
stock interpreter, a Python 3.12+ or any other program is left untouched.

A request writes request_id, then request, then 1 into eval_breaker: at
its next check between two bytecodes, the main interpreter clears
`request`, acts as sys.activate_stack_trampoline() or
sys.deactivate_stack_trampoline() would, fills result, error, active and
file, and last writes served_id.  The requester polls served_id every few
milliseconds and pokes eval_breaker again only while `request` is still
set (a recomputation of the breaker by the process may have cleared the
poke before it was seen).  If `request` is cleared but served_id is not
ours, another requester overwrote our request: it is sent once more, then
reported.  A process that does not run Python code before the timeout
keeps the request pending and serves it when it next runs.

`status` only reads.  The module is plain Python 3 (3.6 and later) and
runs under any interpreter, with no compiled helper.
"""

import argparse
import errno
import os
import struct
import sys
import time

__all__ = ["LiveError", "Target", "Outcome", "activate", "deactivate",
           "request_all", "status", "children_of", "main"]

MAGIC = b"PyPerfL\0"
VERSION = 1
BLOCK_SYMBOL = b"_PyPerf_Live"
# A symbol only this project's interpreter exports: found without the
# block, it means a build configured --without-remote-debug.
OUR_SYMBOL = b"_PyPerfTrampoline_EvalFrame"

OFF_VERSION, OFF_SIZE, OFF_BREAKER = 8, 12, 16
OFF_STATE, OFF_PID, OFF_REQUEST = 24, 28, 32
OFF_REQUEST_ID, OFF_SERVED_ID = 40, 48
OFF_RESULT, OFF_ERROR, OFF_ACTIVE = 56, 60, 64
OFF_FILE, FILE_LEN = 72, 256
OFF_MESSAGE, MESSAGE_LEN = 328, 128
BLOCK_MIN_SIZE = OFF_MESSAGE + MESSAGE_LEN

STATE_STARTING, STATE_READY, STATE_DISABLED, STATE_FINALIZING = 0, 1, 2, 3
STATE_NAMES = {0: "starting", 1: "ready", 2: "disabled", 3: "finalizing"}
REQ_NONE, REQ_PERF, REQ_PERF_JIT, REQ_DEACTIVATE = 0, 1, 2, 3
BACKEND_CODES = {"perf": REQ_PERF, "perf_jit": REQ_PERF_JIT}
BACKEND_NAMES = {0: "none", 1: "perf", 2: "perf_jit"}
RESULT_DONE, RESULT_NO_FILE, RESULT_REFUSED, RESULT_UNKNOWN = 0, 1, 2, 3

POLL_INTERVAL = 0.002
DEFAULT_TIMEOUT = 5.0
PENDING_TEXT = "requested: takes effect when the process next runs Python code"

_counter = 0


class LiveError(Exception):
    """A request cannot be made to a process: the text says why."""


# ---- ELF: the dynamic symbols and the loadable segments of a file ----------

SHT_DYNSYM = 11
PT_LOAD = 1


class _Elf:
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


# ---- /proc: mappings, the block, descendants --------------------------------

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


def _exists(pid):
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
    if not text and not _exists(pid):
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


def _ns_pid(pid):
    """The pid of `pid` in its own pid namespace (NSpid's last field)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def find_block(pid):
    """(address of the control block, or None, whether the process has
    one of this project's other symbols)."""
    maps = _mappings(pid)
    page = os.sysconf("SC_PAGE_SIZE")
    ours = False
    for inode, path, ms in _candidates(pid, maps):
        with _open_mapped(pid, path, ms[0]) as f:
            try:
                elf = _Elf(f)
                syms = elf.dynamic_symbols({BLOCK_SYMBOL, OUR_SYMBOL})
            except ValueError:
                continue
        if OUR_SYMBOL in syms:
            ours = True
        if BLOCK_SYMBOL in syms:
            addr = _address(elf, syms[BLOCK_SYMBOL], ms, page)
            if addr is not None:
                return addr, True
    return None, ours


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


def _cstr(data):
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


class Target:
    """A process with a live-activation block, checked and opened.
    Raises LiveError for any process that cannot take requests."""

    def __init__(self, pid, write=True):
        self.pid = pid
        if not os.path.exists("/proc/%d" % pid):
            raise LiveError("process %d does not exist" % pid)
        if not _exists(pid):
            raise LiveError("process %d has exited" % pid)
        addr, ours = find_block(pid)
        if addr is None:
            if ours:
                raise LiveError("live activation is disabled in process %d "
                                "(built --without-remote-debug)" % pid)
            raise LiveError("process %d is not a Python with live perf "
                            "activation" % pid)
        self.addr = addr
        try:
            self.fd = os.open("/proc/%d/mem" % pid,
                              os.O_RDWR if write else os.O_RDONLY)
        except OSError as exc:
            raise _os_error(pid, exc, "open the memory")
        try:
            self._check()
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, off, n):
        try:
            data = os.pread(self.fd, n, self.addr + off)
        except OSError as exc:
            if exc.errno == errno.EIO and not _exists(self.pid):
                raise LiveError("process %d has exited" % self.pid)
            raise _os_error(self.pid, exc, "read the memory")
        if len(data) != n:
            raise LiveError("process %d has exited" % self.pid)
        return data

    def write(self, off, data):
        try:
            n = os.pwrite(self.fd, data, self.addr + off)
        except OSError as exc:
            if exc.errno == errno.EIO and not _exists(self.pid):
                raise LiveError("process %d has exited" % self.pid)
            raise _os_error(self.pid, exc, "write the memory")
        if n != len(data):
            raise LiveError("process %d has exited" % self.pid)

    def u32(self, off):
        return struct.unpack("=I", self.read(off, 4))[0]

    def u64(self, off):
        return struct.unpack("=Q", self.read(off, 8))[0]

    def _check(self):
        head = self.read(0, 32)
        magic = head[:8]
        version, size, breaker, state, owner = struct.unpack_from(
            "=IIQII", head, 8)
        if magic != MAGIC or version != VERSION or size < BLOCK_MIN_SIZE:
            raise LiveError("process %d is not a Python with live perf "
                            "activation (unknown block: magic %r, version "
                            "%d)" % (self.pid, magic, version))
        if owner not in (self.pid, _ns_pid(self.pid)):
            raise LiveError("process %d is not a Python with live perf "
                            "activation (its block names pid %d)"
                            % (self.pid, owner))
        self.breaker = breaker

    def snapshot(self):
        """The block's fields as a dict (a fresh read)."""
        data = self.read(0, BLOCK_MIN_SIZE)
        (_, _, _, breaker, state, owner, request, _, request_id, served_id,
         result, error, active, _) = struct.unpack_from(
            "=8sIIQIIIIQQiiII", data, 0)
        return {"pid": self.pid, "state": state, "owner": owner,
                "eval_breaker": breaker, "request": request,
                "request_id": request_id, "served_id": served_id,
                "result": result, "error": error, "active": active,
                "file": _cstr(data[OFF_FILE:OFF_FILE + FILE_LEN]),
                "message": _cstr(data[OFF_MESSAGE:OFF_MESSAGE + MESSAGE_LEN])}

    def poke(self):
        self.breaker = self.u64(OFF_BREAKER)
        if self.breaker:
            try:
                os.pwrite(self.fd, struct.pack("=i", 1), self.breaker)
            except OSError as exc:
                if not _exists(self.pid):
                    raise LiveError("process %d has exited" % self.pid)
                raise _os_error(self.pid, exc, "write the memory")

    def send(self, code, request_id):
        self.write(OFF_REQUEST_ID, struct.pack("=Q", request_id))
        self.write(OFF_REQUEST, struct.pack("=I", code))
        self.poke()


def _new_request_id():
    global _counter
    _counter += 1
    return (os.getpid() << 32) | (_counter & 0xffffffff)


def _state_problem(pid, state):
    if state == STATE_DISABLED:
        return "live activation is disabled in process %d" % pid
    if state == STATE_FINALIZING:
        return "process %d is finalizing (exiting)" % pid
    if state != STATE_READY and state != STATE_STARTING:
        return "process %d: unknown state %d in its block" % (pid, state)
    return None


class Outcome:
    """What became of a request to one process.  `ok` is True once the
    process acknowledged it; `pending` when it is left waiting."""

    def __init__(self, pid, ok, text, pending=False, snapshot=None):
        self.pid, self.ok, self.text = pid, ok, text
        self.pending, self.snapshot = pending, snapshot

    def __repr__(self):
        return "Outcome(%d, %r, %r)" % (self.pid, self.ok, self.text)


def _describe(pid, code, snap):
    result = snap["result"]
    backend = BACKEND_NAMES.get(code, "none")
    if result == RESULT_DONE:
        if code == REQ_DEACTIVATE:
            return True, "%d: deactivated" % pid
        path = snap["file"]
        if snap["active"] != code or not path:
            # The process changed its state again before the block was
            # read (its own code, or its exit): the file it opened is
            # still the one its pid names.
            path = (("/tmp/perf-%d.map" if code == REQ_PERF
                     else "/tmp/jit-%d.dump") % snap["owner"])
        return True, "%d: %s %s" % (pid, backend, path)
    if result == RESULT_NO_FILE:
        why = os.strerror(snap["error"]) if snap["error"] else "no errno"
        state = ("%s active, but" % backend if snap["active"] == code
                 else "%s not activated:" % backend)
        return False, ("%d: %s its file could not be made (%s; the "
                       "process's stderr says more)" % (pid, state, why))
    if result == RESULT_REFUSED:
        return False, "%d: refused: %s" % (pid, snap["message"] or "no reason")
    if result == RESULT_UNKNOWN:
        return False, "%d: the process did not know request %d" % (pid, code)
    return False, "%d: unknown result %d" % (pid, result)


class _Request:
    """One request to one process, sent and then polled by step()."""

    def __init__(self, pid, code):
        self.pid, self.code = pid, code
        self.target = None
        self.rid = None
        self.resends = 0
        self.replaced_at = None
        self.outcome = None
        try:
            self.target = Target(pid)
        except LiveError as exc:
            self._end(False, "%d: %s" % (pid, exc))
            return
        self.step()

    def _end(self, ok, text, pending=False, snapshot=None):
        self.outcome = Outcome(self.pid, ok, text, pending, snapshot)
        if self.target is not None:
            self.target.close()
            self.target = None

    def _send(self):
        self.rid = _new_request_id()
        self.target.send(self.code, self.rid)

    def step(self):
        """Look at the block once (send the request when the process is
        ready); sets self.outcome when the request is over."""
        try:
            self._step()
        except LiveError as exc:
            self._end(False, "%d: %s" % (self.pid, exc))

    def _step(self):
        snap = self.target.snapshot()
        if self.rid is not None and snap["served_id"] == self.rid:
            ok, text = _describe(self.pid, self.code, snap)
            self._end(ok, text, snapshot=snap)
            return
        problem = _state_problem(self.pid, snap["state"])
        if problem:
            self._end(False, "%d: %s" % (self.pid, problem))
            return
        if snap["state"] == STATE_STARTING:
            return  # no eval_breaker yet: wait for "ready"
        if self.rid is None:
            self._send()
        elif snap["request_id"] != self.rid:
            self._replaced(snap)
        elif snap["request"] != REQ_NONE:
            # Still not seen: the process may have recomputed its
            # eval_breaker after our poke.
            self.target.poke()
        # else: cleared by the process, which is serving it now.

    def _wanted(self, snap):
        """Whether the block shows the state our request asks for."""
        if snap["result"] != RESULT_DONE:
            return False
        if self.code == REQ_DEACTIVATE:
            return snap["active"] == 0
        return snap["active"] == self.code

    def _replaced(self, snap):
        """Another requester's request took the place of ours."""
        if snap["request"] != REQ_NONE:
            # It waits in our place: the process serves it first.
            return
        if snap["served_id"] != snap["request_id"]:
            # Being served now (served_id comes last), or its requester is
            # between its two writes: wait, but not for ever (a requester
            # may have died there).
            now = time.monotonic()
            if self.replaced_at is None:
                self.replaced_at = now
            if now - self.replaced_at < 0.1:
                return
        elif self._wanted(snap):
            # Served after ours was sent, and it did what ours asks: the
            # process is in the state we want.
            ok, text = _describe(self.pid, self.code, snap)
            self._end(ok, text, snapshot=snap)
            return
        if self.resends >= 2:
            self._end(False, "%d: another requester overwrote this request "
                      "each time it was sent; try again" % self.pid)
            return
        self.resends += 1
        self.replaced_at = None
        self._send()

    def expire(self):
        if self.outcome is None and self.rid is None:
            self._end(False, "%d: the process is still starting up (not "
                      "ready for requests); nothing was sent" % self.pid)
        elif self.outcome is None:
            self._end(False, "%d: %s" % (self.pid, PENDING_TEXT),
                      pending=True)


def request_all(pids, code, timeout=DEFAULT_TIMEOUT):
    """Send request `code` to each of `pids` at once and wait up to
    `timeout` seconds for their acknowledgements.  Returns the Outcomes
    in the order of `pids`; never raises LiveError."""
    deadline = time.monotonic() + timeout
    reqs = [_Request(pid, code) for pid in pids]
    while True:
        waiting = [r for r in reqs if r.outcome is None]
        if not waiting:
            break
        if time.monotonic() >= deadline:
            for r in waiting:
                r.expire()
            break
        time.sleep(POLL_INTERVAL)
        for r in waiting:
            r.step()
    return [r.outcome for r in reqs]


def request(pid, code, timeout=DEFAULT_TIMEOUT):
    """request_all() for one pid: its Outcome."""
    return request_all([pid], code, timeout)[0]


def activate(pid, backend="perf", timeout=DEFAULT_TIMEOUT):
    if backend not in BACKEND_CODES:
        raise ValueError("unknown backend %r" % (backend,))
    return request(pid, BACKEND_CODES[backend], timeout)


def deactivate(pid, timeout=DEFAULT_TIMEOUT):
    return request(pid, REQ_DEACTIVATE, timeout)


def status(pid):
    """(True, text) for a process with a block, else (False, why)."""
    try:
        with Target(pid, write=False) as t:
            snap = t.snapshot()
    except LiveError as exc:
        return False, "%d: %s" % (pid, exc)
    words = ["%d:" % pid, STATE_NAMES.get(snap["state"],
                                          "state %d" % snap["state"])]
    words.append("active " + BACKEND_NAMES.get(snap["active"],
                                              str(snap["active"])))
    if snap["file"]:
        words.append(snap["file"])
    req = snap["request"]
    if req in (REQ_PERF, REQ_PERF_JIT, REQ_DEACTIVATE):
        words.append("(request %s pending)" % (
            {1: "perf", 2: "perf_jit", 3: "deactivate"}[req]))
    elif req != REQ_NONE:
        words.append("(unknown request code %d in the block)" % req)
    if snap["state"] == STATE_DISABLED:
        words.append("(live activation is disabled)")
    if snap["served_id"]:
        if snap["result"] == RESULT_REFUSED:
            words.append("(last request refused: %s)" % snap["message"])
        elif snap["result"] == RESULT_UNKNOWN:
            words.append("(last request had an unknown code)")
        elif snap["result"] == RESULT_NO_FILE:
            words.append("(last request: the file could not be made: %s)"
                         % os.strerror(snap["error"]))
    return True, " ".join(words)


def _with_children(pids, children):
    if not children:
        return pids
    out = []
    for p in pids:
        for q in [p] + children_of(p):
            if q not in out:
                out.append(q)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m perf_trampoline",
        description="Turn the perf trampoline on or off in running Python "
                    "processes, as if each ran "
                    "sys.activate_stack_trampoline() or "
                    "sys.deactivate_stack_trampoline() itself.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(p, timeout=True):
        p.add_argument("--children", action="store_true",
                       help="also reach every descendant of each PID "
                            "(for example a pre-fork server's workers)")
        if timeout:
            p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                           metavar="S",
                           help="seconds to wait for each process to "
                                "acknowledge (default %(default)s); a "
                                "process that does not run Python code "
                                "meanwhile serves the request later")
        p.add_argument("pids", type=int, nargs="+", metavar="PID")

    p = sub.add_parser("activate", help="turn the trampoline on: each "
                       "process writes its perf map or jitdump",
                       description="Turn the perf trampoline on in each "
                       "process; prints one line per pid: the backend and "
                       "the file that perf reads.")
    p.add_argument("--backend", choices=sorted(BACKEND_CODES),
                   default="perf",
                   help="perf: /tmp/perf-PID.map, for frame-pointer "
                        "unwinding (default); perf_jit: /tmp/jit-PID.dump, "
                        "for --call-graph dwarf and perf inject --jit")
    common(p)
    p = sub.add_parser("deactivate", help="turn the trampoline off",
                       description="Turn the perf trampoline off in each "
                       "process: functions entered afterwards run without "
                       "trampoline; the perf map keeps its records.")
    common(p)
    p = sub.add_parser("status", help="show what is active (only reads)",
                       description="Show, for each process, whether it "
                       "takes requests, the active backend and its file, "
                       "and any pending request.  Writes nothing.")
    common(p, timeout=False)
    args = parser.parse_args(argv)

    pids = _with_children(args.pids, args.children)
    failed = 0
    if args.command == "status":
        for pid in pids:
            ok, text = status(pid)
            print(text, flush=True)
            failed += not ok
        return 1 if failed else 0

    if args.command == "activate":
        code = BACKEND_CODES[args.backend]
    else:
        code = REQ_DEACTIVATE
    for out in request_all(pids, code, max(args.timeout, 0.0)):
        stream = sys.stdout if out.ok else sys.stderr
        print(out.text, file=stream, flush=True)
        failed += not out.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
