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
the target: Lib/_perf_remote.py reads the other process through /proc
(the ELF .dynsym of its executable or libpython, the symbol's address
from the mapping of the PT_LOAD segment that holds it, processes in
containers too) and reads and writes /proc/PID/mem, which needs the
permission of a ptrace attach.  Nothing is written unless the magic, version, size and pid
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
import os
import struct
import sys
import time

from _perf_remote import (LiveError, Memory, children_of, exists, ns_pid,
                          symbol_addresses)

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


def _cstr(data):
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


class Target:
    """A process with a live-activation block, checked and opened.
    Raises LiveError for any process that cannot take requests."""

    def __init__(self, pid, write=True):
        self.pid = pid
        self.mem = None
        if not os.path.exists("/proc/%d" % pid):
            raise LiveError("process %d does not exist" % pid)
        if not exists(pid):
            raise LiveError("process %d has exited" % pid)
        found = symbol_addresses(pid, {BLOCK_SYMBOL, OUR_SYMBOL})
        if BLOCK_SYMBOL not in found:
            if OUR_SYMBOL in found:
                raise LiveError("live activation is disabled in process %d "
                                "(built --without-remote-debug)" % pid)
            raise LiveError("process %d is not a Python with live perf "
                            "activation" % pid)
        self.addr = found[BLOCK_SYMBOL]
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
        if owner not in (self.pid, ns_pid(self.pid)):
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
            self.mem.write(self.breaker, struct.pack("=i", 1))

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
