"""python -m perf_trampoline collapse: `perf script` text to folded stacks,
to a Python-level `perf script` text and to an HTML flame graph.

    python -m perf_trampoline collapse [--all-frames] [--no-lines] [-o OUT]
                                       [SCRIPT_TEXT]

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py (a
system python3 may run it): standard library only.

Reading `perf script`
---------------------
perf 6.1 prints one block per sample: a header line (the command name,
which may hold spaces and may be padded on the left, the pid or
"pid/tid", an optional "[cpu]", the time stamp and a colon, the period
and the event), then one line per frame, innermost first, each indented
with a tab ("\\taddr symbol+0xoff (dso)"), then a blank line.  A symbol
may lack its offset, be "[unknown]", hold spaces and parentheses (C++),
or be a Python function "py::name:/path/file.py" from a trampoline file
or /tmp/perf-PID.map; a DSO may hold spaces and parentheses too, so the
DSO is the last balanced parenthesised group of the line.  DWARF
unwinding adds the functions inlined at an address as frames of their
own with the DSO "inlined", just before the frame of the function they
were inlined into: such a frame belongs to the object of the next real
frame.  Without a call graph perf prints no frame lines and no blank
lines: the leaf is on the header line itself, and the next header (which
starts without a tab and has a time stamp) ends the sample.  Lines that
are none of these (comments, --header) pass through unchanged.

Folded stacks
-------------
One line per distinct stack, "root;outer;...;inner COUNT", COUNT the
number of samples: the format of Brendan Gregg's stackcollapse scripts,
which flamegraph.pl, inferno and speedscope read.  A frame is named by
its symbol without the offset; an unnamed frame by its DSO's file name
in brackets ("[libfoo.so]"), or "[unknown]".  ";" in a name (a path can
hold one) becomes ":", since it separates frames.  The root frame is the
command name (comm), as stackcollapse-perf.pl and perf's own flame
graph do: a recording of several programs (a pipeline, `perf record
-a`) then keeps them apart, while the workers of a pre-fork server,
which share a name, add up in one tree, which is the picture wanted of a
server; pids would split it into one tree per worker.  Lines are sorted,
so the output of one text is always the same.

The Python-level view
---------------------
Between two Python frames perf shows how the interpreter got from one
to the other: the evaluator running the caller
(_PyEval_EvalFrameDefault), the call path (PyObject_Vectorcall,
_PyFunction_Vectorcall, _PyEval_Vector) and ours (_PyPerfTrampoline_*,
eval_frame_new_code, call_trampoline).  The trampoline itself is the
py:: frame.  On both builds (frame pointers with -g, and DWARF without
them) the evaluator sits in every gap between two py:: frames and
eval_frame_new_code or _PyPerfTrampoline_EvalFrame in all but a few:
they make the tree three times as deep as the Python calls.  The view
drops a frame only if all of this holds:

* it lies strictly between the outermost and the innermost py:: frame
  of its sample: what is above the outermost (main(), the interpreter's
  start, a thread's start) and below the innermost (what the innermost
  Python function is busy in: its evaluator, the C functions it called,
  the kernel) is always kept;
* its object is the interpreter: an executable or library named like
  python3.11 or libpython3.11.so, or any object in which the recording
  shows _PyEval_EvalFrameDefault (an application that embeds CPython).
  A frame of any other object (a C extension module such as _bisect,
  numpy, libc) is never dropped, whatever its name, not even a static
  inline function of CPython's headers inlined into an extension;
* its function (without the compiler's .cold, .part.N, .constprop.N,
  .isra.N, .lto_priv.N and .llvm.N suffixes) is machinery: it only
  carries a call from one Python function to the next.  The list,
  MACHINERY below, has four groups:

  - the evaluator and its entries: _PyEval_EvalFrameDefault,
    _PyEval_Vector, PyEval_EvalCode, and the resumption of generators
    and coroutines (gen_send_ex2, gen_iternext, PyIter_Next...);
  - our call path: eval_frame_new_code, call_trampoline,
    _PyPerfTrampoline_* and _PyPerf_*;
  - the call protocol: every function with "vectorcall" in its name,
    PyObject_Call* and _PyObject_Call*, _PyObject_MakeTpCall,
    object_vacall, call_method and call_unbound, and the tp_call
    functions of callable types, whose names end in "_call" (type_call,
    cfunction_call, wrapper_call...);
  - the dispatch from an operator to a class's special method:
    typeobject.c's slot_* functions (slot_tp_richcompare, slot_nb_add,
    slot_tp_init...), and the abstract functions that only pick the slot
    (PyObject_RichCompare[Bool], do_richcompare, PyNumber_*,
    binary_op1, PyObject_GetItem/SetItem, PyObject_GetAttr/SetAttr and
    the generic attribute lookup, property_descr_get, PyObject_Hash,
    PyObject_Repr, PyObject_Str, PyObject_GetIter).

  A function of the interpreter that does work the user asked for is
  kept: sorted()'s builtin_sorted and list_sort_impl between a function
  and its key function (the user called sorted(), which called the
  key), map_next, builtin_exec, the import system under an import, a
  dict's lookdict calling __eq__.  So bisect.bisect(xs, x, key=f) shows
  as py::caller;_bisect_bisect_right;py::f, and a heap of objects with
  a Python __lt__ as py::caller;_heapq_heappush;siftdown;py::Item.__lt__.

A short list rather than a count of what sits between py:: frames in
most samples of the recording: a count would drop sorted() in a
recording that sorts all the time and keep it in one that rarely does,
and would keep PyObject_CallOneArg, which is between py:: frames only
when C code calls Python; the list gives one answer for every recording
and can be read and tested.  What the recording decides is which object
is the interpreter.  A frame whose object or function is unknown is
kept.  --all-frames keeps every frame.

Lines
-----
With lines on (-X perf_lines), a Python call is two frames of one
symbol, next to each other: its trampoline's (the return address of the
evaluator's call, at the def line) and, just outside it, its pad (the
address the evaluator keeps at the current instruction: the line the
function is on).  A pad is told by its offset in the symbol, past the
code of any trampoline (PAD_OFFSET).  The view leaves the trampoline's
frame out and names the pad "py::QUALNAME:FILE:LINE" (a pad alone too:
a -g sample taken as the evaluator starts misses the trampoline's frame).
A recording without lines has no pads and is folded as before.

The line is the pad's row in the .debug_line of the trampoline file
perf names as its object, read by binutils' addr2line: the program perf
6.1 (built without libbfd) runs for `perf script -F +srcline`, so the
lines are perf's.  perf asks it once per frame of every sample (some 20
s for a 3 s recording); the pads are found in a quick pass over the text
and asked once per file.  A pad whose file is not there, or whose
address addr2line names with another function (the file of a reused pid),
keeps its name without a line.  --no-lines asks nothing and names no
line; --all-frames keeps both frames.

The Python-level `perf script` text is the input with the dropped frame
lines left out and every other line byte for byte as it was (the text is
read as bytes), so that every viewer that reads `perf script` (speedscope,
the Firefox Profiler, hotspot) shows the same view.

The text is read twice: first for the objects that hold the evaluator,
then for the samples (standard input is first copied to a temporary
file).  The folded stacks and the HTML are written once the whole text
is read, and a file that an output replaces only then.  With
require_samples (the collapse command) a text without any sample is an
error raised before that: collapse leaves its OUT as it was.

Writing an output path
----------------------
A path that does not exist or is a regular file is written to a
temporary file beside it, which replaces it when complete (os.replace,
which replaces a name and follows no link): a failure leaves no
half-written file, and an output may be the input itself.  Anything
else is written where it is, never replaced: a device (/dev/null), a
FIFO, a terminal is opened for writing without O_CREAT and O_TRUNC, and
with O_NOFOLLOW, so that a name swapped for a link in the meantime is
not followed.

A symbolic link is followed, link by link, unless it is in a
world-writable sticky directory (/tmp) and belongs neither to the caller
(the effective uid) nor to the directory's owner: there another user
may have planted it to redirect what root writes (a link
/tmp/perf.folded -> /etc/shadow), so it is refused with a one-line
error.  That is the kernel's fs.protected_symlinks rule, applied here
whatever the sysctl says (it is off on some systems).  Where the links
end in a name that does not exist or in a regular file, that name is
replaced as above, so a link stays a link.  A link of /proc (/dev/stdout
-> /proc/self/fd/1) names an open file, not a path.  When it is one of
the caller's own file descriptors (/proc/self/fd/N, /dev/fd/N, and so
the usual -o /dev/stdout and /dev/stderr), the output is written to a
duplicate of that descriptor, which shares its offset and flags: a file
that the shell opened for the whole command (`> log`, `>> log`) is
written at its offset, not over its start, and a socket, which cannot
be opened through /proc, works too.  Any other /proc link is followed by
the kernel and what it names written in place (truncated first if it is
a regular file).

The flame graph
---------------
The HTML is perf's own d3-flame-graph template (d3-flamegraph-base.html,
which holds d3 and d3-flame-graph, so the page needs no network) with
its two placeholders, /** @flamegraph_json **/ and /** @options_json
**/, replaced by the tree and the options, as `perf script report
flamegraph` does.  The tree is {"name", "value", "libtype", "children"}
(the template also reads the short keys n, v, l, c): a root "all", one
child per command, then the frames outermost first; the template sums
the values itself (selfValue), so a node's value is the number of
samples whose innermost frame it is.  libtype is "root", "kernel" (a
frame of [kernel.kallsyms] or a vmlinux) or "", the template's colours.
The JSON is written without recursion (a deep recursion makes a deep
tree) and with "<" escaped, so that no name can end the <script>.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile


class CollapseError(Exception):
    """A failure to report as one line (the message says what to do)."""


DEFAULT_TEMPLATE = "/usr/share/d3-flame-graph/d3-flamegraph-base.html"
TEMPLATE_ENV = "PERF_FLAMEGRAPH_TEMPLATE"
FLAMEGRAPH_PLACEHOLDER = "/** @flamegraph_json **/"
OPTIONS_PLACEHOLDER = "/** @options_json **/"
PERF_DATA_MAGIC = b"PERFILE2"
EVALUATOR = "_PyEval_EvalFrameDefault"


# ---- Which frames are the interpreter's machinery ---------------------------

# The interpreter's object by its file name: python, python3, python3.11,
# python3.11d, libpython3.11.so, libpython3.11.so.1.0.
INTERPRETER_FILE = re.compile(
    r"^(?:lib)?python(?:\d+(?:\.\d+)*)?[dmu]*(?:\.so(?:\.\d+)*)?$")

# The compiler's names for parts and copies of a function.
CLONE_SUFFIX = re.compile(
    r"(?:\.(?:cold(?:\.\d+)?|(?:part|constprop|isra|lto_priv|llvm)\.\d+))+$")

MACHINERY = frozenset([
    # the evaluator and its entries, the resumption of generators
    EVALUATOR, "_PyEval_EvalFrame", "_PyEval_Vector",
    "_PyEvalFramePushAndInit", "PyEval_EvalCode", "PyEval_EvalCodeEx",
    "PyEval_EvalFrame", "PyEval_EvalFrameEx", "gen_send_ex", "gen_send_ex2",
    "gen_iternext", "gen_send", "gen_throw", "_gen_throw", "PyIter_Next",
    "PyIter_Send", "coro_wrapper_iternext", "coro_wrapper_send",
    "async_gen_asend_send", "async_gen_asend_iternext",
    "async_gen_athrow_send", "async_gen_athrow_iternext",
    # our call path (the trampoline itself is the py:: frame)
    "eval_frame_new_code", "call_trampoline", "py_trampoline_evaluator",
    # the call protocol
    "_PyObject_MakeTpCall", "object_vacall", "call_method", "call_unbound",
    "call_unbound_noarg", "PyEval_CallObjectWithKeywords",
    # from an operator to a special method
    "PyObject_RichCompare", "PyObject_RichCompareBool", "do_richcompare",
    "binary_op", "binary_op1", "ternary_op", "PyObject_GetItem",
    "PyObject_SetItem", "PyObject_DelItem", "PyObject_GetAttr",
    "PyObject_SetAttr", "PyObject_GenericGetAttr",
    "_PyObject_GenericGetAttrWithDict", "PyObject_GenericSetAttr",
    "_PyObject_GenericSetAttrWithDict", "property_descr_get",
    "property_descr_set", "PyObject_Hash", "PyObject_Repr", "PyObject_Str",
    "PyObject_GetIter",
])
MACHINERY_PATTERN = re.compile(
    r"vectorcall"                                  # the call protocol
    r"|^_?PyObject_(?:Call|FastCall)"
    r"|^[A-Za-z]\w*_call$"                         # tp_call functions
    r"|^_PyPerf(?:Trampoline)?_"                   # our call path
    r"|^slot_"                                     # typeobject.c's slots
    r"|^PyNumber_", re.I)


def function_of(symbol):
    """The function a frame's symbol names: without the compiler's clone
    suffixes."""
    return CLONE_SUFFIX.sub("", symbol)


def is_machinery(symbol):
    """Whether `symbol` (without its +0x offset) is one of the
    interpreter's functions that only carry a call from one Python
    function to the next (see the module's docstring)."""
    name = function_of(symbol)
    return name in MACHINERY or MACHINERY_PATTERN.search(name) is not None


def is_interpreter_file(dso):
    return INTERPRETER_FILE.match(os.path.basename(dso)) is not None


def is_python(name):
    return name.startswith("py::")


# ---- Reading perf script ----------------------------------------------------

# A header: command (lazy, so that a name with spaces stays whole: the
# first "pid[/tid] [cpu] time:" that follows ends it).
HEADER = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+"
    r"(?:\[\d+\]\s+)?\d+\.\d+:\s*(?P<rest>.*)$")
# A header without a time stamp (perf script -F comm,tid,...).
LOOSE_HEADER = re.compile(r"^\s*(?P<comm>.*?)\s+-?\d+(?:/-?\d+)?(?:\s|$)")
# What follows "time:": the period, the event ("cpu-clock:", "cycles:u:")
# and, without a call graph, the sampled address, symbol and DSO.
EVENT = re.compile(r"^(?:\d+\s+)?\S*?:\s+(?P<tail>\S.*)$")
OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
HEX = re.compile(r"^(?:0x)?[0-9a-fA-F]+$")


class Frame(object):
    """One frame: its symbol (offset stripped), its DSO as perf printed it
    ("inlined" for an inlined function), `obj`, the object it belongs to
    (for an inlined frame, the next real frame's DSO), and, where perf
    printed them, its address and its offset in the symbol (ints)."""

    __slots__ = ("symbol", "dso", "obj", "name", "address", "offset")

    def __init__(self, symbol, dso, address=None):
        symbol = symbol.strip()
        m = OFFSET.search(symbol)
        self.offset = int(m.group()[3:], 16) if m else None
        self.symbol = symbol[:m.start()] if m else symbol
        self.dso = dso
        self.obj = dso
        self.name = None
        self.address = address

    @property
    def inlined(self):
        return self.dso == "inlined"


def _split_dso(text):
    """(rest, dso) of a line ending in "(dso)", the last balanced group;
    (text, None) when there is none."""
    text = text.rstrip()
    if not text.endswith(")"):
        return text, None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                # a DSO group follows white space (a C++ symbol's argument
                # list "f(int)" does not)
                if i == 0 or not text[i - 1].isspace():
                    return text, None
                return text[:i].rstrip(), text[i + 1:-1]
    return text, None


def parse_frame(text, need_address=False):
    """A Frame of a frame line ("addr symbol+off (dso)"), or None when the
    line has neither an address nor a DSO (a source line of -F srcline)
    or, with `need_address`, no address."""
    rest, dso = _split_dso(text)
    parts = rest.split(None, 1)
    address = None
    if parts and HEX.match(parts[0]) and (len(parts) == 2 or dso is not None):
        symbol = parts[1] if len(parts) == 2 else ""
        address = int(parts[0], 16)
    elif need_address or dso is None:
        return None
    else:
        symbol = rest
    return Frame(symbol, dso if dso is not None else "", address)


def parse_header(text):
    """(comm, leaf Frame or None) of a sample's header line."""
    m = HEADER.match(text)
    leaf = None
    if m is not None:
        comm = m.group("comm")
        e = EVENT.match(m.group("rest"))
        if e is not None and e.group("tail").rstrip().endswith(")"):
            leaf = parse_frame(e.group("tail"), need_address=True)
    else:
        m = LOOSE_HEADER.match(text)
        comm = m.group("comm") if m is not None else ""
        if not comm:
            comm = text.split()[0] if text.split() else ""
    return comm.strip() or "[unknown]", leaf


class Sample(object):
    """A sample: `header` (its raw line), `comm`, `lines` (the raw lines
    after the header, each with its Frame or None), `end` (the raw blank
    line that ended it, or None) and `leaf` (the frame on the header line,
    when perf printed no call graph)."""

    __slots__ = ("header", "comm", "lines", "end", "leaf")

    def __init__(self, header, comm, leaf):
        self.header = header
        self.comm = comm
        self.lines = []
        self.end = None
        self.leaf = leaf

    def frames(self):
        """The frames, innermost first, each with its object resolved."""
        frames = [f for _, f in self.lines if f is not None]
        if not frames and self.leaf is not None:
            frames = [self.leaf]
        outer = ""
        for frame in reversed(frames):
            if frame.inlined:
                frame.obj = outer
            else:
                outer = frame.dso
        return frames


def _decode(raw):
    return raw.decode("utf-8", "surrogateescape").rstrip("\r\n")


def read_script(stream):
    """The items of a `perf script` text read from the binary `stream`:
    Sample objects, and raw lines (bytes) that belong to no sample."""
    sample = None
    for raw in stream:
        text = _decode(raw)
        if not text.strip():
            if sample is not None:
                sample.end = raw
                yield sample
                sample = None
            else:
                yield raw
            continue
        if sample is not None:
            if text[0] == "\t" or (text[0].isspace()
                                   and HEADER.match(text) is None):
                sample.lines.append((raw, parse_frame(text)))
                continue
            if text[0].isspace() or HEADER.match(text) is not None:
                # the next header: a recording without call graph has
                # no blank lines between samples
                yield sample
                sample = None
            else:
                sample.lines.append((raw, parse_frame(text, True)))
                continue
        if text[0] == "\t" or text.startswith("#"):
            yield raw
            continue
        comm, leaf = parse_header(text)
        sample = Sample(raw, comm, leaf)
    if sample is not None:
        yield sample


def interpreter_objects(stream):
    """The DSOs in which the text read from `stream` shows the evaluator
    (a quick first pass)."""
    found = set()
    key = EVALUATOR.encode()
    for raw in stream:
        if key in raw:
            frame = parse_frame(_decode(raw))
            if (frame is not None and not frame.inlined
                    and function_of(frame.symbol) == EVALUATOR):
                found.add(frame.dso)
    return found


# ---- Naming and dropping ----------------------------------------------------

def frame_name(frame):
    name = frame.symbol
    if not name or name == "[unknown]":
        obj = frame.obj
        if obj and obj not in ("[unknown]", "inlined"):
            name = obj if obj.startswith("[") else "[%s]" % (
                os.path.basename(obj) or obj)
        else:
            name = "[unknown]"
    return name.replace(";", ":")


def is_kernel(frame):
    return frame.obj == "[kernel.kallsyms]" or frame.obj.endswith("/vmlinux")


class Dropper(object):
    """Decides which frames of a sample the Python-level view leaves out;
    `interpreters` are the DSOs where the recording shows the
    evaluator."""

    def __init__(self, interpreters=()):
        self.interpreters = set(interpreters)
        self._cache = {}

    def is_interpreter(self, obj):
        if obj not in self._cache:
            self._cache[obj] = bool(obj) and (
                obj in self.interpreters or is_interpreter_file(obj))
        return self._cache[obj]

    def dropped(self, frames):
        """The indices in `frames` (innermost first, named) to leave out."""
        py = [i for i, f in enumerate(frames) if is_python(f.name)]
        if len(py) < 2:
            return set()
        return set(i for i in range(py[0] + 1, py[-1])
                   if not is_python(frames[i].name)
                   and self.is_interpreter(frames[i].obj)
                   and frames[i].symbol not in ("", "[unknown]")
                   and is_machinery(frames[i].symbol))


# ---- Lines: a Python function's two frames made one -------------------------

# Where a line trampoline's pads start in its symbol (x86-64,
# Python/asm_trampoline.S): its code ends before offset 47 (with endbr64;
# the evaluator's return address into it is at 44 at most), its pointer
# to the evaluator follows at 48, and pad 0 is at offset 56, shown at 55
# where perf prints a caller's address minus one (DWARF).  A plain
# trampoline is 16 bytes at most.  So a py:: frame at this offset or
# beyond is a pad, and one below it is trampoline code.
PAD_OFFSET = 48


def is_pad(frame):
    """Whether `frame` is the pad of a line trampoline: a Python function
    at the line it is on."""
    return (frame.offset is not None and frame.offset >= PAD_OFFSET
            and is_python(frame.symbol))


def pad_addresses(stream):
    """{DSO: set of addresses} of the pads in the text read from the
    binary `stream` (a quick pass)."""
    found = {}
    for raw in stream:
        if b"py::" in raw:
            frame = parse_frame(_decode(raw))
            if frame is not None and frame.address is not None \
                    and is_pad(frame):
                found.setdefault(frame.dso, set()).add(frame.address)
    return found


def pad_lines(pads, warn=None):
    """{(DSO, address): (function, line)} of the pads `pads` ({DSO:
    addresses}), read by binutils' addr2line (what perf 6.1 runs for its
    srcline) from the DSO's .debug_line, one run per file.  fold_lines()
    uses a line only where the function is the pad's too, so that a file
    replaced since the recording (its pid reused) gives no line rather
    than a wrong one.  What cannot be read is said through `warn` (a
    function of a message) and left without a line."""
    lines = {}
    for dso, addresses in sorted(pads.items()):
        addresses = sorted(addresses)
        problem = _not_elf(dso)
        if problem is None:
            problem = _addr2line(dso, addresses, lines)
        if problem is None:
            continue
        if warn is not None:
            warn("Python frames named without their lines: cannot read "
                 "the lines of %s: %s" % (dso, problem))
        if problem == NO_ADDR2LINE:
            break
    return lines


NO_ADDR2LINE = ("addr2line is not installed (apt install binutils; "
                "--no-lines names the frames without lines)")


def _not_elf(dso):
    """None when `dso` is an ELF file, else why not."""
    if not dso.startswith("/"):
        return "it is not a file"
    try:
        with open(dso, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return _reason(exc)
    if magic != b"\x7fELF":
        return "it is not an ELF file (a perf map has no lines)"
    return None


def _addr2line(dso, addresses, lines):
    """Add the lines of `addresses` in `dso` to `lines`; None, or what
    went wrong."""
    try:
        proc = subprocess.run(
            ["addr2line", "-f", "-e", dso],
            input="".join("%#x\n" % a for a in addresses).encode(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    except FileNotFoundError:
        return NO_ADDR2LINE
    except (OSError, subprocess.SubprocessError) as exc:
        return "addr2line failed: %s" % exc
    out = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(out) != 2 * len(addresses):
        return "addr2line failed: %s" % (
            proc.stderr.decode("utf-8", "replace").strip()
            or "exit status %d" % proc.returncode)
    for k, address in enumerate(addresses):
        function, where = out[2 * k], out[2 * k + 1]
        line = where.split(" (discriminator", 1)[0].rsplit(":", 1)[-1]
        if is_python(function) and line.isdigit() and int(line) > 0:
            lines[dso, address] = (function, int(line))
    return None


def fold_lines(frames, lines):
    """`frames` (innermost first, named) with each pad named with its
    line ("py::QUALNAME:FILE:LINE", where `lines` knows it: see
    pad_lines()) and the trampoline frame just inside a pad of the same
    function left out: with lines on, a Python function shows as its
    trampoline's frame (at the def line) then its pad's."""
    kept = []
    for i, frame in enumerate(frames):
        if is_pad(frame):
            known = lines.get((frame.dso, frame.address))
            if known is not None and known[0] == frame.symbol:
                frame.name = "%s:%d" % (frame.name, known[1])
        elif (i + 1 < len(frames) and is_pad(frames[i + 1])
                and frames[i + 1].symbol == frame.symbol
                and frames[i + 1].dso == frame.dso):
            continue
        kept.append(frame)
    return kept


# ---- The outputs ------------------------------------------------------------

class Node(object):
    __slots__ = ("name", "value", "libtype", "children")

    def __init__(self, name, libtype):
        self.name = name
        self.value = 0
        self.libtype = libtype
        self.children = {}


def _clean(text):
    """`text` with the bytes that are not UTF-8 (kept as surrogates)
    replaced by U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _js(value):
    """JSON text of `value` to put in a <script>: ASCII, no "<"."""
    return json.dumps(value).replace("<", "\\u003c")


def tree_json(root):
    """The d3-flame-graph JSON of the tree at `root`, written without
    recursion."""
    out = []
    todo = [root]
    while todo:
        node = todo.pop()
        if node is None:
            out.append("]}")
            continue
        if node is not root and not out[-1].endswith("["):
            out.append(",")
        out.append('{"name":%s,"value":%d,"libtype":%s,"children":['
                   % (_js(_clean(node.name)), node.value,
                      _js(node.libtype)))
        todo.append(None)
        todo.extend(reversed(list(node.children.values())))
    return "".join(out)


def find_template(explicit=None):
    """The path of a d3-flame-graph template (d3-flamegraph-base.html):
    `explicit` when given (whether or not it exists: the error then names
    it), else $PERF_FLAMEGRAPH_TEMPLATE when set, else perf's default
    /usr/share/d3-flame-graph/d3-flamegraph-base.html if it exists; None
    when there is none."""
    if explicit:
        return explicit
    env = os.environ.get(TEMPLATE_ENV)
    if env:
        return env
    if os.path.isfile(DEFAULT_TEMPLATE):
        return DEFAULT_TEMPLATE
    return None


def _read_template(template):
    if template is None:
        raise CollapseError(
            "no d3-flame-graph template: install d3-flame-graph (npm "
            "package d3-flame-graph, its dist/templates/"
            "d3-flamegraph-base.html) and give its path with --template "
            "or $%s" % TEMPLATE_ENV)
    try:
        with open(template, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CollapseError("cannot read the flame graph template %s: %s"
                            % (template, _reason(exc)))
    for placeholder in (FLAMEGRAPH_PLACEHOLDER, OPTIONS_PLACEHOLDER):
        if placeholder not in text:
            raise CollapseError(
                "%s is not a d3-flame-graph template (it has no %s): give "
                "d3-flame-graph's dist/templates/d3-flamegraph-base.html"
                % (template, placeholder))
    return text


def fill_template(text, tree, options):
    """The template `text` with its placeholders replaced by the JSON
    texts `tree` and `options` (each placeholder once, at the place it is
    in the template, so that nothing inserted is searched again)."""
    parts = []
    pos = 0
    marks = sorted((text.index(p), p, value) for p, value in (
        (FLAMEGRAPH_PLACEHOLDER, tree), (OPTIONS_PLACEHOLDER, options)))
    for at, placeholder, value in marks:
        parts.append(text[pos:at])
        parts.append(value)
        pos = at + len(placeholder)
    parts.append(text[pos:])
    return "".join(parts)


def _reason(exc):
    return getattr(exc, "strerror", None) or str(exc)


def _check_text(stream, name):
    head = stream.read(len(PERF_DATA_MAGIC))
    stream.seek(0)
    if head == PERF_DATA_MAGIC:
        raise CollapseError(
            "%s is a perf.data file, not its text: run `perf script -i %s "
            "> perf.txt` and collapse perf.txt" % (name, name))


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Links followed at most, as the kernel does (MAXSYMLINKS).
MAX_LINKS = 40


def _proc_device():
    """The device number of /proc (procfs), or None."""
    try:
        return os.stat("/proc/self/fd").st_dev
    except OSError:
        return None


def _check_link(link, st, output):
    """Refuse to follow the symbolic link `link` (its lstat `st`) when the
    kernel's fs.protected_symlinks rule would: in a world-writable sticky
    directory, owned neither by the caller nor by the directory's
    owner."""
    directory = os.path.dirname(link) or "."
    try:
        d = os.stat(directory)
    except OSError as exc:
        raise CollapseError("cannot write %s: %s" % (output, _reason(exc)))
    shared = stat.S_ISVTX | stat.S_IWOTH
    if (d.st_mode & shared == shared
            and st.st_uid not in (os.geteuid(), d.st_uid)):
        raise CollapseError(
            "will not follow %s%s: it is a symbolic link of uid %d in %s, "
            "a shared sticky directory where anyone can plant one to "
            "redirect what you write: remove it or give another path"
            % (link, "" if link == output else " to write %s" % output,
               st.st_uid, directory))


def _own_descriptor(path):
    """N when `path` is /proc/self/fd/N (or /dev/fd/N...), a file
    descriptor of this process; else None."""
    directory, name = os.path.split(path)
    if name.isdigit():
        try:
            if os.path.samestat(os.stat(directory or "."),
                                os.stat("/proc/self/fd")):
                return int(name)
        except OSError:
            pass
    return None


def _destination(output):
    """How to write the output path `output` (see the module's
    docstring): ("replace", path) to write a temporary file beside path
    and rename it over path; ("open", path) to open path and write it in
    place, ("follow", path) the same through a link of /proc, ("fd", n)
    to write to a duplicate of file descriptor n."""
    path = output
    proc = _proc_device()
    for _ in range(MAX_LINKS + 1):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return "replace", path
        except OSError as exc:
            raise CollapseError("cannot write %s: %s"
                                % (output, _reason(exc)))
        if stat.S_ISREG(st.st_mode):
            return "replace", path
        if not stat.S_ISLNK(st.st_mode):
            return "open", path
        _check_link(path, st, output)
        if st.st_dev == proc:
            fd = _own_descriptor(path)
            return ("follow", path) if fd is None else ("fd", fd)
        try:
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        except OSError as exc:
            raise CollapseError("cannot write %s: %s"
                                % (output, _reason(exc)))
    raise CollapseError("cannot write %s: more than %d symbolic links to "
                        "follow" % (output, MAX_LINKS))


class _Output(object):
    """A binary output: an open binary file, or a path, written as
    _destination() says: a regular file through a temporary file beside
    it, which replaces it once complete (a failure leaves no partial
    file, and the output can be the input itself, which is read to the
    end first); anything else in place.  Write errors become
    CollapseError naming the output."""

    def __init__(self, target):
        self.own = not hasattr(target, "write")
        self.target = target
        self.file = None if self.own else target
        self.temp = None
        self.final = None
        self.name = target if self.own else getattr(target, "name", "output")

    def _error(self, exc):
        return CollapseError("cannot write %s: %s" % (self.name, _reason(exc)))

    def open(self):
        if self.file is None:
            how, where = _destination(self.target)
            try:
                if how == "replace":
                    fd, self.temp = tempfile.mkstemp(
                        prefix="." + os.path.basename(where) + ".",
                        dir=os.path.dirname(where) or ".")
                    self.final = where
                    os.fchmod(fd, 0o666 & ~_umask())
                elif how == "fd":
                    for stream in (sys.stdout, sys.stderr):
                        if stream is not None:
                            stream.flush()
                    fd = os.dup(where)
                else:
                    fd = self._open_in_place(how, where)
            except OSError as exc:
                raise self._error(exc)
            self.file = os.fdopen(fd, "wb")
        return self

    def _open_in_place(self, how, path):
        flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
        if how == "open":
            flags |= os.O_NOFOLLOW
        fd = os.open(path, flags)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                if how == "open":
                    # lstat saw something else: a name swapped meanwhile
                    raise CollapseError("cannot write %s: it changed while "
                                        "being opened: try again"
                                        % self.name)
                os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, data):
        try:
            self.file.write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._error(exc)

    def close(self):
        """Finish the output (replace the path with what was written)."""
        if self.own and self.file is not None:
            try:
                self.file.close()
                if self.temp is not None:
                    os.replace(self.temp, self.final)
                    self.temp = None
            except OSError as exc:
                raise self._error(exc)
            finally:
                self.file = None

    def discard(self):
        """Leave the path as it was (after a failure)."""
        if self.own and self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None
        if self.temp is not None:
            try:
                os.unlink(self.temp)
            except OSError:
                pass
            self.temp = None


def collapse_stream(stream, name="-", folded=None, script=None, html=None,
                    template=None, python_level=True, require_samples=False,
                    lines=True, warn=None):
    """convert() on the seekable binary `stream` (`name` names it in
    messages); folded, script and html are paths or binary files."""
    template_text = _read_template(template) if html is not None else None
    _check_text(stream, name)
    dropper = Dropper(interpreter_objects(stream) if python_level else ())
    stream.seek(0)
    pads = {}
    if python_level and lines:
        pads = pad_lines(pad_addresses(stream), warn)
        stream.seek(0)
    counts = {}
    kernel_names = set()
    samples = 0
    outputs = [_Output(t) for t in (script, folded, html) if t is not None]
    try:
        script_out = outputs[0].open() if script is not None else None
        for item in read_script(stream):
            if not isinstance(item, Sample):
                if script_out is not None:
                    script_out.write(item)
                continue
            samples += 1
            frames = item.frames()
            for frame in frames:
                frame.name = frame_name(frame)
                if html is not None and is_kernel(frame):
                    kernel_names.add(frame.name)
            if python_level:
                frames = fold_lines(frames, pads)
            drop = dropper.dropped(frames) if python_level else ()
            stack = [item.comm.replace(";", ":")]
            stack.extend(frames[i].name for i in range(len(frames) - 1, -1, -1)
                         if i not in drop)
            key = ";".join(stack)
            counts[key] = counts.get(key, 0) + 1
            if script_out is not None:
                script_out.write(item.header)
                dropped = set(id(frames[i]) for i in drop)
                for raw, frame in item.lines:
                    if frame is None or id(frame) not in dropped:
                        script_out.write(raw)
                if item.end is not None:
                    script_out.write(item.end)
        if require_samples and not samples:
            raise CollapseError(
                "no samples in %s: give the text that `perf script` prints "
                "for a perf.data file recorded with `perf record -g`" % name)
        if folded is not None:
            out = outputs[script is not None].open()
            out.write("".join("%s %d\n" % (key, counts[key])
                              for key in sorted(counts))
                      .encode("utf-8", "surrogateescape"))
        if html is not None:
            outputs[-1].open().write(
                _html(counts, kernel_names, template_text, name, samples,
                      python_level).encode("utf-8"))
        for out in outputs:
            out.close()
    finally:
        for out in outputs:
            out.discard()
    return samples


def _html(counts, kernel_names, template_text, name, samples, python_level):
    root = Node("all", "root")
    for key, count in counts.items():
        node = root
        for depth, frame in enumerate(key.split(";")):
            child = node.children.get(frame)
            if child is None:
                libtype = ("kernel" if depth and frame in kernel_names
                           else "")
                child = node.children[frame] = Node(frame, libtype)
            node = child
        node.value += count
    view = ("Python-level view: the interpreter's frames between two "
            "Python frames are left out (collapse --all-frames keeps them)"
            if python_level else "All frames")
    context = "%s\nRecording: %s\nSamples: %d" % (view, name, samples)
    options = _js({"colorscheme": "blue-green", "context": _clean(context)})
    return fill_template(template_text, tree_json(root), options)


def convert(src, folded=None, script=None, html=None, template=None,
            python_level=True, require_samples=False, lines=True,
            warn=None):
    """Read the `perf script` text at path `src` and write any of: folded
    stacks to path `folded`, the `perf script` text with the
    interpreter's frames between Python frames left out (`python_level`)
    or unchanged to path `script`, a self-contained HTML flame graph to
    path `html` from the d3-flame-graph template `template` (default:
    find_template()).  In the Python-level folded stacks and HTML, a
    function recorded with lines is one frame, named with its line unless
    `lines` is false; `warn` is called with a message for lines that
    cannot be read.  Returns the number of samples read.  Raises
    CollapseError; with `require_samples`, also for a text without any
    sample, and then before any output path is replaced."""
    if html is not None and template is None:
        template = find_template()
    try:
        stream = open(src, "rb")
    except OSError as exc:
        raise CollapseError("cannot read %s: %s" % (src, _reason(exc)))
    with stream:
        if not stream.seekable():
            spool = tempfile.TemporaryFile()
            with spool:
                shutil.copyfileobj(stream, spool)
                spool.seek(0)
                return collapse_stream(spool, src, folded, script, html,
                                       template, python_level,
                                       require_samples, lines, warn)
        return collapse_stream(stream, src, folded, script, html, template,
                               python_level, require_samples, lines, warn)


# ---- The command ------------------------------------------------------------

def add_parser(sub):
    """Add the 'collapse' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser(
        "collapse", help="fold a `perf script` text into stacks for flame "
        "graphs, Python-level by default",
        description="Read the text `perf script` prints (SCRIPT_TEXT, or "
        "standard input) and write folded stacks, one 'root;outer;...;"
        "inner COUNT' line per stack, which flamegraph.pl, inferno and "
        "speedscope read.  By default the interpreter's frames between two "
        "Python frames (the evaluator and the call path) are left out; the "
        "frames of C extensions and libraries, the kernel's and those "
        "below the innermost Python function are kept.")
    p.add_argument("input", nargs="?", default="-", metavar="SCRIPT_TEXT",
                   help="the output of `perf script` (default: standard "
                        "input)")
    p.add_argument("-o", "--output", default="-", metavar="OUT",
                   help="where to write the folded stacks (default: "
                        "standard output); a regular file is replaced once "
                        "complete, a device or FIFO is written in place, "
                        "a symbolic link of another user in a shared "
                        "sticky directory such as /tmp is refused")
    p.add_argument("--all-frames", action="store_true",
                   help="keep every frame: no Python-level view")
    p.add_argument("--no-lines", dest="lines", action="store_false",
                   help="name each Python function recorded with lines "
                        "(-X perf_lines) without its line, as one recorded "
                        "without (by default its frame reads "
                        "py::QUALNAME:FILE:LINE, the line read from the "
                        "trampoline file by addr2line)")
    p.set_defaults(run=run)
    return p


def _fail(message):
    print("python -m perf_trampoline collapse: %s" % message, file=sys.stderr)
    return 1


def _warn(message):
    print("python -m perf_trampoline collapse: warning: %s" % message,
          file=sys.stderr)


def run(args):
    python_level = not args.all_frames
    out = args.output
    if out == "-":
        sys.stdout.flush()
        out = sys.stdout.buffer
    try:
        if args.input == "-":
            if sys.stdin is None or sys.stdin.isatty():
                return _fail("give the text `perf script` prints, as a "
                             "file or on standard input: perf script | "
                             "python -m perf_trampoline collapse")
            with tempfile.TemporaryFile() as spool:
                shutil.copyfileobj(sys.stdin.buffer, spool)
                spool.seek(0)
                collapse_stream(spool, "standard input", out,
                                python_level=python_level,
                                require_samples=True, lines=args.lines,
                                warn=_warn)
        else:
            convert(args.input, folded=out, python_level=python_level,
                    require_samples=True, lines=args.lines, warn=_warn)
        if out is sys.stdout.buffer:
            out.flush()
    except CollapseError as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        # The reader (head, less) stopped reading: not a failure.  Point
        # standard output at /dev/null, so that the flush at exit does not
        # fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    except OSError as exc:
        return _fail("cannot read or write: %s" % _reason(exc))
    return 0
