"""The live activation requester: the control block of another Python
process read and written, requests sent and their outcomes awaited.
Lib/perf_trampoline.py is its command line and its public face (it
re-exports __all__); Lib/_perf_record.py asks processes through it too.

Design
------
An interpreter built with live activation (configure's default
--with-remote-debug) exports a small control block, the data symbol
_PyPerf_Live, from the dynamic symbol table of the executable or of
libpython3.11.so.  Its layout, version 1, is _PyPerfLiveBlock of
Include/internal/pycore_perf_live.h (Python/perf_live.c describes
each field): BLOCK_FIELDS below copies it field by field, and BLOCK and
FIELDS, built from that table, are all that read or write it here.

This module is the requester.  It finds the block without any help from
the target: Lib/_perf_remote.py reads the other process through /proc
(the ELF .dynsym of its executable or libpython, the symbol's address
from the mapping of the PT_LOAD segment that holds it, processes in
containers too) and reads and writes /proc/PID/mem, which needs the
permission of a ptrace attach.  Nothing is written unless the magic,
version, size and pid (the pid as the process's own pid namespace sees
it) all check out, so a stock interpreter, a Python 3.12+ or any other
program is left untouched.

A request writes request_id (64 random bits), then request, then 1 into
eval_breaker: at its next check between two bytecodes, the main
interpreter takes `request` (clearing it in the same step), raises an
audit event, acts as sys.activate_stack_trampoline() or
sys.deactivate_stack_trampoline() would, fills result, error, active,
file and served_request, and last writes served_id.  The requester
checks the block again (magic, owner) before each poll, polls served_id
every few milliseconds and pokes eval_breaker again only while `request`
is still set (a recomputation of the breaker by the process may have
cleared the poke before it was seen).  Its request counts as served when
served_id is its id and served_request its code (read again after
served_id matched); if another requester overwrote it, it is sent up to
twice more, then reported.  An activation's code may carry
REQ_LINES_ON or REQ_LINES_OFF (line trampolines on or off, as the
`lines` argument of sys.activate_stack_trampoline(); without either the
process keeps its lines as they are, which is what older requesters ask
for); such a code goes only to blocks that have the `lines` field, which
says whether the active backend has lines on.  Writes go only into
writable, non-executable data
of the object that holds the block (/proc/PID/mem would write into code
too).  A process that does not run Python code before the timeout
keeps the request pending and serves it when it next runs.

For the command line, a pending request is delivered, not failed: an idle
server (every worker of a pre-fork server blocked in select(), say)
serves it with its next request, which is when there is something to
profile.  So `activate PID && perf record ...` goes on at once: exit
status 0 when every process acknowledged or has the request pending, 1
when any request failed; with --wait, 3 when none failed but some are
still pending at the timeout (CLI_TIMEOUT, or WAIT_TIMEOUT with --wait).

`status` only reads.

This module and Lib/_perf_remote.py run under any Python 3 from 3.6 on,
on purpose: a system python3 (a stock interpreter, perhaps the only one
on the host) is how one asks a process of this interpreter.  Keep them
so: %-formatting (no f-strings), only standard library modules and
features that 3.6 has (no dataclasses, no namedtuple defaults), no
compiled helper.
"""

import argparse
import collections
import os
import struct
import sys
import time

from _perf_remote import (CopiedBlock, LiveError, Memory, NoBlock,
                          ProcessGone, children_of, exists, maps_rows,
                          ns_pid, printable, symbol_addresses)

__all__ = ["LiveError", "ProcessGone", "NoBlock", "CopiedBlock", "Target",
           "Outcome", "activate", "activation_code", "deactivate", "seal",
           "request_all", "status", "children_of"]

MAGIC = b"PyPerfL\0"
VERSION = 1
BLOCK_SYMBOL = b"_PyPerf_Live"
# A symbol only this project's interpreter exports: found without the
# block, it means a build configured --without-remote-debug.
OUR_SYMBOL = b"_PyPerfTrampoline_EvalFrame"

# _PyPerfLiveBlock, field by field: (name, struct format).  Native byte
# order with standard sizes and no padding ("="): the reserved fields are
# the C struct's own, so that every field is naturally aligned at the
# offset its prefix sums to.  Python/perf_live.c's table and static
# assertions give each field's offset and meaning; fields may be added at
# the end only.
BLOCK_FIELDS = (
    ("magic", "8s"),            # MAGIC
    ("version", "I"),           # VERSION
    ("size", "I"),              # the block's size: later versions grow it
    ("eval_breaker", "Q"),      # address of the main interpreter's int32
    ("state", "I"),             # STATE_*
    ("pid", "I"),               # the owner's pid, in its pid namespace
    ("request", "I"),           # REQ_*: written by a requester
    ("reserved1", "I"),
    ("request_id", "Q"),        # the requester's token, before `request`
    ("served_id", "Q"),         # the request_id served last, written last
    ("result", "i"),            # RESULT_*
    ("error", "i"),             # errno of RESULT_NO_FILE, or 0
    ("active", "I"),            # BACKEND_NAMES: 0 none, 1 perf, ...
    ("reserved2", "I"),
    ("file", "256s"),           # the active backend's file, NUL-ended
    ("message", "128s"),        # why a request was refused, NUL-ended
    # Blocks of 464 bytes and more (456 before):
    ("served_request", "I"),    # the REQ_* served with served_id
    ("reserved3", "I"),
    # Blocks of 472 bytes and more:
    ("flags", "I"),             # FLAG_*: how the interpreter was built
    ("reserved4", "I"),
    # Blocks of 480 bytes and more:
    ("lines", "I"),             # 1: the active backend has lines on
    ("reserved5", "I"),
)
_BLOCK_NAMES = [name for name, _ in BLOCK_FIELDS]


def _layout(fields):
    """The struct.Struct of `fields`, some (name, format) pairs."""
    return struct.Struct("=" + "".join(fmt for _, fmt in fields))


# The whole block, and its fields as a named tuple (Target.snapshot()).
BLOCK = _layout(BLOCK_FIELDS)
Block = collections.namedtuple("Block", _BLOCK_NAMES)
# The first blocks of version 1 ended with `message`.
BLOCK_MIN_SIZE = _layout(BLOCK_FIELDS[:_BLOCK_NAMES.index("message") + 1]).size
# {name: (offset, Struct of the field alone)}, to read or write one field:
# its offset is the size of the fields before it.
FIELDS = {
    name: (_layout(BLOCK_FIELDS[:i]).size, _layout(BLOCK_FIELDS[i:i + 1]))
    for i, name in enumerate(_BLOCK_NAMES)}
# What Target checks before it trusts the rest: magic to pid.
HEAD = _layout(BLOCK_FIELDS[:_BLOCK_NAMES.index("pid") + 1])
# The interpreter's eval_breaker, an int32 (not part of the block).
_BREAKER = struct.Struct("=i")

STATE_STARTING, STATE_READY, STATE_DISABLED, STATE_FINALIZING = 0, 1, 2, 3
STATE_NAMES = {0: "starting", 1: "ready", 2: "disabled", 3: "finalizing"}
REQ_NONE, REQ_PERF, REQ_PERF_JIT, REQ_DEACTIVATE, REQ_SEAL = 0, 1, 2, 3, 4
# ORed into REQ_PERF or REQ_PERF_JIT: line trampolines on, or off (without
# either, the process keeps lines as they are).  Only blocks that have the
# `lines` field take them; an older interpreter would answer
# RESULT_UNKNOWN, so they are not sent there.
REQ_LINES_ON, REQ_LINES_OFF, REQ_CODE_MASK = 0x100, 0x200, 0xff
BACKEND_CODES = {"perf": REQ_PERF, "perf_jit": REQ_PERF_JIT}
BACKEND_NAMES = {0: "none", 1: "perf", 2: "perf_jit"}
RESULT_DONE, RESULT_NO_FILE, RESULT_REFUSED, RESULT_UNKNOWN = 0, 1, 2, 3
FLAG_FRAME_POINTERS, FLAG_TRAMPOLINE = 1, 2

POLL_INTERVAL = 0.002
# At least this long (or the timeout, if shorter) to wait for a request
# sent near the deadline.
SENT_GRACE = 0.5
DEFAULT_TIMEOUT = 5.0
# The command line's --timeout, without and with --wait.
CLI_TIMEOUT = 1.0
WAIT_TIMEOUT = 30.0
PENDING_TEXT = "requested: takes effect when the process next runs Python code"
# The exit status of activate/deactivate --wait when no request failed but
# some are still pending (1 is a failure, 2 a usage error).
EXIT_PENDING = 3


def _cstr(data):
    """A text field of the block, up to its NUL, fit to be printed: the
    process wrote it, and may put ESC or BEL there."""
    return printable(data.split(b"\0", 1)[0])


class Target:
    """A process with a live-activation block, checked and opened.
    Raises LiveError for any process that cannot take requests."""

    def __init__(self, pid, write=True, deadline=None):
        self.pid = pid
        self.mem = None
        if not os.path.exists("/proc/%d" % pid):
            raise ProcessGone("process %d does not exist" % pid)
        if not exists(pid):
            raise ProcessGone("process %d has exited" % pid)
        found = symbol_addresses(pid, {BLOCK_SYMBOL, OUR_SYMBOL}, deadline)
        if BLOCK_SYMBOL not in found:
            if not exists(pid):
                # Its mappings went with it while they were being read.
                raise ProcessGone("process %d has exited" % pid)
            if OUR_SYMBOL in found:
                raise NoBlock("live activation is disabled in process %d "
                              "(built --without-remote-debug)" % pid)
            raise NoBlock("process %d is not a Python with live perf "
                          "activation" % pid)
        self.addr = found[BLOCK_SYMBOL]
        self.size = BLOCK_MIN_SIZE
        self._writable = set()      # (address, size) checked writable
        self.mem = Memory(pid, write)
        try:
            self._check()
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.mem is not None:
            self.mem.close()
            self.mem = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, off, n):
        return self.mem.read(self.addr + off, n)

    def write(self, off, data):
        self.mem.write(self.addr + off, data)

    def get(self, name):
        """The value of field `name` of the block (a fresh read)."""
        off, st = FIELDS[name]
        return st.unpack(self.read(off, st.size))[0]

    def put(self, name, value):
        """Write `value` into field `name` of the block."""
        off, st = FIELDS[name]
        self.write(off, st.pack(value))

    def _check(self):
        magic, version, size, breaker, state, owner = HEAD.unpack(
            self.read(0, HEAD.size))
        if magic != MAGIC or version != VERSION or size < BLOCK_MIN_SIZE:
            raise NoBlock("process %d is not a Python with live perf "
                          "activation (unknown block: magic %r, version "
                          "%d)" % (self.pid, magic, version))
        if owner not in (self.pid, ns_pid(self.pid)):
            raise CopiedBlock("process %d is not a Python with live "
                              "perf activation (its block names pid %d)"
                              % (self.pid, owner))
        self.breaker = breaker
        self.size = min(size, BLOCK.size)

    def recheck(self):
        """The checks of the constructor again (before each poll): the
        process may have exec()ed, or its pid been taken by another."""
        self._check()

    def _in_writable_data(self, addr, size):
        """_writable_data_of() for this process and block, read from
        /proc/PID/maps once per range (a request pokes every poll)."""
        if (addr, size) not in self._writable:
            if not _writable_data_of(self.pid, self.addr, addr, size):
                return False
            self._writable.add((addr, size))
        return True

    def snapshot(self):
        """The block as a Block named tuple (a fresh read); its `file`
        and `message` are str, up to their first NUL."""
        data = self.read(0, self.size)
        block = Block._make(BLOCK.unpack(data.ljust(BLOCK.size, b"\0")))
        # (None: an older block, which does not say what it served, or
        # how the interpreter was built)
        served = (block.served_request
                  if self.size >= FIELDS["reserved3"][0] else None)
        flags = block.flags if self.size >= FIELDS["reserved4"][0] else None
        lines = block.lines if self.takes_lines() else None
        return block._replace(file=_cstr(block.file),
                              message=_cstr(block.message),
                              served_request=served, flags=flags,
                              lines=lines)

    def takes_lines(self):
        """Whether the block has the `lines` field, and its interpreter
        the requests that turn lines on or off."""
        return self.size >= FIELDS["reserved5"][0]

    def _checked_breaker(self):
        """The eval breaker's address, read anew, once it is known to lie
        in writable data: /proc/PID/mem writes even where the process
        may not (read-only and code pages), so only into the writable
        data of the object that holds the block."""
        breaker = self.get("eval_breaker")
        if breaker and not self._in_writable_data(breaker, 4):
            raise LiveError("process %d: its block points the eval breaker "
                            "outside the interpreter's writable data; "
                            "nothing written" % self.pid)
        return breaker

    def poke(self):
        self.breaker = self._checked_breaker()
        if self.breaker:
            self.mem.write(self.breaker, _BREAKER.pack(1))

    def send(self, code, request_id):
        if not self._in_writable_data(self.addr, self.size):
            raise LiveError("process %d: its block is not in writable "
                            "data; nothing written" % self.pid)
        self._checked_breaker()     # before any write
        self.put("request_id", request_id)
        self.put("request", code)
        self.poke()


def _writable_data_of(pid, anchor, addr, size):
    """Whether [addr, addr + size) lies in one writable, non-executable
    mapping of the object whose mapping holds `anchor` (the block), or in
    the anonymous mapping right after one (its .bss)."""
    try:
        rows = maps_rows(pid)
    except LiveError:
        return False
    owner = [r.path for r in rows if r.start <= anchor < r.end]
    if not owner or not owner[0]:
        return False
    prev = None
    for row in rows:
        if row.start <= addr and addr + size <= row.end:
            if row.perms[:2] != "rw" or "x" in row.perms:
                return False
            if row.path == owner[0]:
                return True
            return (row.path == b"" and prev is not None
                    and prev.end == row.start and prev.path == owner[0])
        prev = row
    return False


def _new_request_id():
    """A token no other requester (nor an earlier one with our pid) is
    likely to send: 64 random bits, never 0."""
    return int.from_bytes(os.urandom(8), "little") or 1


def _state_problem(pid, state):
    if state == STATE_DISABLED:
        return "live activation is disabled in process %d" % pid
    if state == STATE_FINALIZING:
        return "process %d is finalizing (exiting)" % pid
    if state != STATE_READY and state != STATE_STARTING:
        return "process %d: unknown state %d in its block" % (pid, state)
    return None


class Outcome:
    """What became of a request to one process, or what status() found
    there.  `ok` is True once the process acknowledged the request (for
    status(): when the process has a block); `pending` when the request
    is left waiting; `text` is the line the command prints; `snapshot`
    is the Block read last, or None; `error` the LiveError that made it
    fail, when one did (ProcessGone, NoBlock, CopiedBlock... say why)."""

    def __init__(self, pid, ok, text, pending=False, snapshot=None,
                 error=None):
        self.pid, self.ok, self.text = pid, ok, text
        self.pending, self.snapshot = pending, snapshot
        self.error = error

    def __repr__(self):
        return "Outcome(%d, %r, %r)" % (self.pid, self.ok, self.text)


def _lines_text(snap):
    """What the lines of `snap`'s active backend add to its line."""
    return " (lines on)" if snap.active and snap.lines else ""


def _describe(pid, code, snap):
    result = snap.result
    lines_bits = code & ~REQ_CODE_MASK
    code &= REQ_CODE_MASK
    backend = BACKEND_NAMES.get(code, "none")
    if result == RESULT_DONE:
        if code == REQ_DEACTIVATE:
            return True, "%d: deactivated" % pid
        if code == REQ_SEAL:
            return True, "%d: trampoline files sealed" % pid
        path = snap.file
        if snap.active == code == REQ_PERF and not path:
            return True, ("%d: %s on without a map (/tmp/perf-%d.map is "
                          "not its own): named by its trampoline files "
                          "alone%s" % (pid, backend, snap.pid,
                                       _lines_text(snap)))
        if snap.active != code or not path:
            # The process changed its state again before the block was
            # read (its own code, or its exit): the file it opened is
            # still the one its pid names.
            path = (("/tmp/perf-%d.map" if code == REQ_PERF
                     else "/tmp/jit-%d.dump") % snap.pid)
        return True, "%d: %s %s%s" % (pid, backend, path, _lines_text(snap))
    if result == RESULT_NO_FILE:
        why = os.strerror(snap.error) if snap.error else "no errno"
        state = ("%s active, but" % backend if snap.active == code
                 else "%s not activated:" % backend)
        return False, ("%d: %s its file could not be made (%s; the "
                       "process's stderr says more)" % (pid, state, why))
    if result == RESULT_REFUSED:
        return False, "%d: refused: %s" % (pid, snap.message or "no reason")
    if result == RESULT_UNKNOWN and lines_bits:
        return False, ("%d: the process does not take requests for lines "
                       "(an interpreter older than them)" % pid)
    if result == RESULT_UNKNOWN:
        return False, "%d: the process did not know request %d" % (pid, code)
    return False, "%d: unknown result %d" % (pid, result)


class _Request:
    """One request to one process, sent and then polled by step()."""

    def __init__(self, pid, code, deadline=None):
        self.pid, self.code = pid, code
        self.target = None
        self.rid = None
        self.resends = 0
        self.replaced_at = None
        self.sent_at = None
        self.outcome = None
        try:
            self.target = Target(pid, deadline=deadline)
        except LiveError as exc:
            self._end(False, "%d: %s" % (pid, exc), error=exc)
            return
        if code & ~REQ_CODE_MASK and not self.target.takes_lines():
            # It would answer "unknown request": say why, write nothing.
            self._end(False, "%d: the process does not take requests for "
                      "lines (an interpreter older than them); nothing "
                      "was sent" % pid)
            return
        self.step()

    def _end(self, ok, text, pending=False, snapshot=None, error=None):
        self.outcome = Outcome(self.pid, ok, text, pending, snapshot, error)
        if self.target is not None:
            self.target.close()
            self.target = None

    def _send(self):
        self.rid = _new_request_id()
        self.target.send(self.code, self.rid)
        if self.sent_at is None:
            self.sent_at = time.monotonic()

    def step(self):
        """Look at the block once (send the request when the process is
        ready); sets self.outcome when the request is over."""
        try:
            self.target.recheck()
            self._step()
        except LiveError as exc:
            self._end(False, "%d: %s" % (self.pid, exc), error=exc)

    def _step(self):
        snap = self.target.snapshot()
        if self.rid is not None and snap.served_id == self.rid:
            # served_id is written last: read the block again, so that
            # every field is at least as new as it.
            snap = self.target.snapshot()
            if snap.served_request not in (None, self.code):
                # Our id went with another requester's code (both wrote
                # at once): ours was not what was served.
                self._resend_or_give_up()
                return
            ok, text = _describe(self.pid, self.code, snap)
            self._end(ok, text, snapshot=snap)
            return
        problem = _state_problem(self.pid, snap.state)
        if problem:
            self._end(False, "%d: %s" % (self.pid, problem))
            return
        if snap.state == STATE_STARTING:
            return  # no eval_breaker yet: wait for "ready"
        if self.rid is None:
            self._send()
        elif snap.request_id != self.rid:
            self._replaced(snap)
        elif snap.request != REQ_NONE:
            # Still not seen: the process may have recomputed its
            # eval_breaker after our poke.
            self.target.poke()
        # else: cleared by the process, which is serving it now.

    def _wanted(self, snap):
        """Whether the block shows the state our request asks for."""
        if snap.result != RESULT_DONE:
            return False
        if self.code == REQ_DEACTIVATE:
            return snap.active == 0
        if self.code == REQ_SEAL:
            # (a seal leaves nothing in the block to see)
            return False
        lines = self.code & ~REQ_CODE_MASK
        if lines and snap.lines != (lines == REQ_LINES_ON):
            return False
        return snap.active == self.code & REQ_CODE_MASK

    def _replaced(self, snap):
        """Another requester's request took the place of ours."""
        if snap.request != REQ_NONE:
            # It waits in our place: the process serves it first.
            return
        if snap.served_id != snap.request_id:
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
        self._resend_or_give_up()

    def _resend_or_give_up(self):
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
    # One deadline over the lookups and the requests.  A request sent late
    # (the lookups before it took the time: a file system that does not
    # answer) still gets a moment, up to the timeout itself, to be served.
    deadline = time.monotonic() + timeout
    grace = min(SENT_GRACE, timeout)
    reqs = [_Request(pid, code, deadline) for pid in pids]
    while True:
        waiting = [r for r in reqs if r.outcome is None]
        if not waiting:
            break
        now = time.monotonic()
        if now >= deadline:
            late = [r for r in waiting if r.sent_at is not None
                    and now - r.sent_at < grace]
            for r in waiting:
                if r not in late:
                    r.expire()
            if not late:
                break
        time.sleep(POLL_INTERVAL)
        for r in waiting:
            if r.outcome is None:
                r.step()
    return [r.outcome for r in reqs]


def request(pid, code, timeout=DEFAULT_TIMEOUT):
    """request_all() for one pid: its Outcome."""
    return request_all([pid], code, timeout)[0]


def activation_code(backend="perf", lines=None):
    """The request code that turns `backend` on: with line trampolines
    when `lines` is true, without them when it is false, and with lines as
    the process has them when it is None."""
    if backend not in BACKEND_CODES:
        raise ValueError("unknown backend %r" % (backend,))
    code = BACKEND_CODES[backend]
    if lines is not None:
        code |= REQ_LINES_ON if lines else REQ_LINES_OFF
    return code


def activate(pid, backend="perf", timeout=DEFAULT_TIMEOUT, lines=None):
    return request(pid, activation_code(backend, lines), timeout)


def deactivate(pid, timeout=DEFAULT_TIMEOUT):
    return request(pid, REQ_DEACTIVATE, timeout)


def seal(pid, timeout=DEFAULT_TIMEOUT):
    """Have `pid` seal the trampoline file that still takes names: it gets
    its build-id, so that a recording that ends now keeps a copy."""
    return request(pid, REQ_SEAL, timeout)


def status(pid):
    """What the block of `pid` shows, as an Outcome (only reads): ok for
    a process with a block, else its text says why."""
    try:
        with Target(pid, write=False) as t:
            snap = t.snapshot()
    except LiveError as exc:
        return Outcome(pid, False, "%d: %s" % (pid, exc), error=exc)
    words = ["%d:" % pid, STATE_NAMES.get(snap.state,
                                          "state %d" % snap.state)]
    words.append("active " + BACKEND_NAMES.get(snap.active, str(snap.active)))
    if snap.file:
        words.append(snap.file)
    elif snap.active == REQ_PERF:
        words.append("(no map: named by its trampoline files alone)")
    if snap.active and snap.lines:
        words.append("(lines on)")
    req = snap.request
    base, lines = req & REQ_CODE_MASK, req & ~REQ_CODE_MASK
    if base in (REQ_PERF, REQ_PERF_JIT) and lines in (0, REQ_LINES_ON,
                                                      REQ_LINES_OFF) \
            or req in (REQ_DEACTIVATE, REQ_SEAL):
        words.append("(request %s%s pending)" % (
            {1: "perf", 2: "perf_jit", 3: "deactivate", 4: "seal"}[base],
            {0: "", REQ_LINES_ON: " with lines",
             REQ_LINES_OFF: " without lines"}[lines]))
    elif req != REQ_NONE:
        words.append("(unknown request code %d in the block)" % req)
    if snap.state == STATE_DISABLED:
        words.append("(live activation is disabled)")
    if snap.served_id:
        if snap.result == RESULT_REFUSED:
            words.append("(last request refused: %s)" % snap.message)
        elif snap.result == RESULT_UNKNOWN:
            words.append("(last request had an unknown code)")
        elif snap.result == RESULT_NO_FILE:
            words.append("(last request: the file could not be made: %s)"
                         % os.strerror(snap.error))
    return Outcome(pid, True, " ".join(words), snapshot=snap)


def _seconds(text):
    """--timeout's type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid float value: %r" % text)
    if not value >= 0:  # NaN too: it would never expire
        raise argparse.ArgumentTypeError(
            "must be 0 seconds or more, not %r" % text)
    return value
