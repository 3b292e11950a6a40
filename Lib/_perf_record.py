"""python -m perf_trampoline record: from a command or a running process
to a profile whose Python functions are named, in one command.

    python -m perf_trampoline record [-o NAME] [--python] [--flamegraph]
                                     [--template FILE]
                                     [--call-graph {fp,dwarf}] [-F HZ]
                                     (--pid PID [--children] [--duration S]
                                      | -- COMMAND [ARG...])

Design
------
`record` assembles what a user otherwise assembles by hand, in this
order, and stops at the first thing that cannot work with one line that
says what to do (RecordError; never a traceback):

1. Checks that can fail before anything runs: perf is on PATH; the
   caller may sample (kernel.perf_event_paranoid, read from
   PARANOID_FILE, against the caller's capabilities: CAP_PERFMON or
   CAP_SYS_ADMIN lift it); with --python or --flamegraph, the module
   that converts the text (Lib/_perf_collapse.py) and, for --flamegraph,
   the d3-flame-graph template it needs.

2. The interpreter being recorded decides the call-graph mode (unless
   --call-graph says): perf's `-g` (frame pointers) when it was built
   with frame pointers, else `--call-graph dwarf` with DWARF_STACK bytes
   of stack per sample (the trampoline files carry the unwinding tables
   that DWARF unwinding needs, so no jitdump and no perf inject).  For a
   command, the interpreter is COMMAND[0] found on PATH (through a
   script's #! line, `env` included); for a pid, /proc/PID/exe.  Only a
   program whose name is a Python's (python, python3, python3.11d...) is
   asked, by running it with `-I -c QUERY`, which reads sysconfig's
   PY_HAVE_PERF_TRAMPOLINE and PY_HAVE_FRAME_POINTERS: running an
   unknown program with those arguments could do anything (a shell
   would run the query as shell code).  A program that is not a Python
   is recorded with dwarf, which unwinds any code that has unwinding
   tables, and the note says so.  A Python without the trampoline
   (PY_HAVE_PERF_TRAMPOLINE unset) cannot have its functions named: a
   failure for the command (or pid) given.

3. The trampoline is turned on.  A command runs with PYTHONPERFSUPPORT=1
   in its environment, its command line untouched, so that it and every
   Python it starts name their functions.  A running process is asked
   through live activation (perf_trampoline.request_all()) when
   perf_trampoline.status() shows the trampoline off; a request left
   pending (an idle process serves it when it next runs Python code) is
   fine.  Whatever record turned on it turns off again when perf has
   stopped, whatever stopped it (the duration, Ctrl-C, the target's
   exit, a failure of perf): the restore runs in a `finally`.

4. perf record runs with -F HZ, the call-graph mode, and `-e cpu-clock`
   only where the default event (hardware cycles) cannot be counted
   here (a `perf stat` probe), and -p with the comma list of pids (the
   pid and, with --children, its descendants now; perf follows the
   children they fork later).  SIGINT and SIGTERM that reach record
   while perf runs are passed on to perf as SIGINT, which ends the
   recording cleanly; --duration sends that SIGINT itself; perf also
   stops when every target has exited.  perf succeeded when NAME.data
   is a new perf.data with its header written at the end (a perf that
   failed leaves none, or an empty one): for a command, perf's exit
   status is the command's, so it cannot tell.

5. `perf script` writes NAME.txt (the text that speedscope, the Firefox
   Profiler and the folded-stack tools read), with --force only when
   root reads the perf maps of processes of another user (perf ignores
   those otherwise).  With --python, NAME.txt is instead the Python-level
   text and NAME.folded its folded stacks; with --flamegraph, NAME.html;
   both from _perf_collapse.convert().  Last, what was written, each
   with the command that opens it.

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py (a
system python3 may be what records a process of this interpreter):
%-formatting, no f-strings, the standard library only.
"""

import argparse
import errno
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

DEFAULT_NAME = "perf"
# Not a multiple of the kernel's tick, so that samples do not fall into
# step with periodic work.
DEFAULT_FREQUENCY = 999
# Bytes of user stack perf copies per sample for DWARF unwinding.  Each
# Python call takes some 350 bytes of C stack in a build without frame
# pointers (the evaluator's frame and the trampoline's): 16 KiB unwinds
# about 45 nested Python calls; perf's default of 8 KiB only about 20.
DWARF_STACK = 16384
PARANOID_FILE = "/proc/sys/kernel/perf_event_paranoid"
# The highest kernel.perf_event_paranoid at which a user without
# CAP_PERFMON may sample his own processes (2: user space only).
PARANOID_MAX = 2
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38
# Seconds to wait for the acknowledgement of an activation (or of the
# deactivation after): an idle process keeps it pending, which is fine.
REQUEST_TIMEOUT = 1.0
# Seconds given to the interpreter query and the event probe.
PROBE_TIMEOUT = 30

PERF_MISSING = ("perf is not installed (or not on PATH): apt install "
                "linux-perf (Debian; linux-tools-$(uname -r) on Ubuntu)")

# A Python's own name: python, python3, python3.11, python3.11d,
# python3.13t...
PYTHON_NAME = re.compile(r"^python[0-9.]*[a-z]*$")
QUERY_MARK = "perf-record-query"
# Runs in the interpreter being recorded, any Python 3: whether it has
# the trampoline, its PY_HAVE_FRAME_POINTERS (this project's) and, for
# other builds, whether it was compiled with frame pointers.
QUERY = (
    "import sysconfig\n"
    "v = sysconfig.get_config_var\n"
    "flags = ' '.join(str(v(n) or '') for n in ('PY_CFLAGS', 'CFLAGS'))\n"
    "print('%s', int(bool(v('PY_HAVE_PERF_TRAMPOLINE')\n"
    "                     or v('HAVE_PERF_TRAMPOLINE'))),\n"
    "      v('PY_HAVE_FRAME_POINTERS'),\n"
    "      int('-fno-omit-frame-pointer' in flags))\n" % QUERY_MARK)

CALL_GRAPH_OPTIONS = {
    "fp": ["-g"],
    "dwarf": ["--call-graph", "dwarf,%d" % DWARF_STACK],
}

# perf.data's header: magic, header size, attribute size, then the
# attributes' and the data's (offset, size).  perf writes the data size
# when it finishes.
_PERF_HEADER = struct.Struct("<8sQQQQQQ")
_PERF_MAGIC = b"PERFILE2"


class RecordError(Exception):
    """record cannot go on: the text, one line, says what to do."""


def note(text):
    print("record: %s" % text, file=sys.stderr, flush=True)


# ---- The command line ------------------------------------------------------

def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid int value: %r" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be 1 or more, not %r" % text)
    return value


def _positive_seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid float value: %r" % text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            "must be more than 0 seconds, not %r" % text)
    return value


def add_parser(sub):
    """Add the 'record' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser(
        "record", help="record a command or a running process with perf, "
        "its Python functions named",
        usage="python -m perf_trampoline record [-o NAME] [--python] "
              "[--flamegraph] [--template FILE] [--call-graph {fp,dwarf}] "
              "[-F HZ] (--pid PID [--children] [--duration S] | "
              "-- COMMAND [ARG...])",
        description="Record a command, or a running process, with perf "
        "record, the perf trampoline on (turned on in a running process if "
        "it was off, and off again after), with the call-graph mode that "
        "suits its interpreter; then write the perf script text that "
        "viewers open and, if asked, a Python-level view and a flame "
        "graph.  Prints what it wrote and how to open each file.",
        epilog="Exit status: 0 when the recording was written (a command "
        "that failed is reported, not passed on), 1 when it could not be, "
        "2 for a usage error.")
    p.add_argument("-o", "--output", metavar="NAME", default=DEFAULT_NAME,
                   help="write NAME.data, NAME.txt and the like (default "
                        "%(default)s; a trailing .data is dropped)")
    p.add_argument("--python", action="store_true",
                   help="write a Python-level view: NAME.txt without the "
                        "interpreter's frames between two Python frames, "
                        "and its folded stacks NAME.folded")
    p.add_argument("--flamegraph", action="store_true",
                   help="also write NAME.html, a self-contained flame "
                        "graph (d3-flame-graph's template)")
    p.add_argument("--template", metavar="FILE",
                   help="the d3-flamegraph-base.html for --flamegraph "
                        "(default: $PERF_FLAMEGRAPH_TEMPLATE, or where "
                        "perf looks for it)")
    p.add_argument("--call-graph", choices=sorted(CALL_GRAPH_OPTIONS),
                   dest="call_graph",
                   help="fp: perf's -g (frame pointers); dwarf: "
                        "--call-graph dwarf,%d.  Default: fp when the "
                        "interpreter recorded has frame pointers "
                        "(PY_HAVE_FRAME_POINTERS), else dwarf"
                        % DWARF_STACK)
    p.add_argument("-F", "--freq", type=_positive_int, metavar="HZ",
                   default=DEFAULT_FREQUENCY,
                   help="samples per second (default %(default)s)")
    p.add_argument("--pid", type=_positive_int, metavar="PID",
                   help="record this running process")
    p.add_argument("--children", action="store_true",
                   help="with --pid: its descendants too (a pre-fork "
                        "server's workers)")
    p.add_argument("--duration", type=_positive_seconds, metavar="S",
                   help="with --pid: stop after S seconds (default: at "
                        "Ctrl-C, or when the process exits)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                   help="the command to run and record, after --")
    p.set_defaults(run=run, record_parser=p)
    return p


def run(args):
    parser = args.record_parser
    command = list(args.command)
    if command and command[0] == "--":
        command.pop(0)
    if args.pid is None and not command:
        parser.error("give --pid PID or -- COMMAND")
    if args.pid is not None and command:
        parser.error("--pid and a COMMAND cannot be recorded together")
    if args.pid is None and (args.children or args.duration is not None):
        parser.error("--children and --duration go with --pid")
    try:
        return _record(args, command)
    except RecordError as exc:
        print("record: %s" % exc, file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("record: interrupted", file=sys.stderr, flush=True)
        return 130


# ---- Checks before anything runs -------------------------------------------

def find_perf():
    """perf's path; RecordError when it is not installed."""
    perf = shutil.which("perf")
    if perf is None:
        raise RecordError(PERF_MISSING)
    return perf


def _capabilities():
    """The effective capabilities of this process, as a bit mask."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def privileged():
    """Whether perf_event_paranoid does not apply to this process (the
    kernel's perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN)."""
    caps = _capabilities()
    return bool(caps & (1 << CAP_PERFMON) or caps & (1 << CAP_SYS_ADMIN))


def paranoid_level(path=None):
    """kernel.perf_event_paranoid (an int), or None if it cannot be read."""
    try:
        with open(path or PARANOID_FILE) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def sampling_problem(path=None, is_privileged=None):
    """Why this process may not sample its own processes with perf (a
    string), or None.  `path` is the paranoid file (PARANOID_FILE),
    `is_privileged` whether CAP_PERFMON lifts it (privileged())."""
    path = path or PARANOID_FILE
    if not os.path.exists(path):
        return ("this kernel offers no perf events (%s does not exist): "
                "a kernel built with CONFIG_PERF_EVENTS is needed" % path)
    if is_privileged is None:
        is_privileged = privileged()
    if is_privileged:
        return None
    level = paranoid_level(path)
    if level is None:
        return None     # let perf say
    if level > PARANOID_MAX:
        return ("not allowed to sample: kernel.perf_event_paranoid is %d, "
                "and a user without CAP_PERFMON needs %d or less to "
                "record his own processes: run `sudo sysctl "
                "kernel.perf_event_paranoid=%d`, or record as root"
                % (level, PARANOID_MAX, PARANOID_MAX))
    return None


def _converter(args):
    """(the _perf_collapse module, the template) for --python and
    --flamegraph, or (None, None)."""
    if not (args.python or args.flamegraph):
        return None, None
    try:
        import _perf_collapse
    except ImportError as exc:
        raise RecordError("--python and --flamegraph need "
                          "Lib/_perf_collapse.py: %s" % exc)
    convert = getattr(_perf_collapse, "convert", None)
    if convert is None or not hasattr(_perf_collapse, "CollapseError"):
        raise RecordError("--python and --flamegraph need "
                          "_perf_collapse.convert(), which this "
                          "installation lacks")
    template = None
    if args.flamegraph:
        template = _perf_collapse.find_template(args.template)
        if template is not None and not os.path.isfile(template):
            raise RecordError("the flame graph template %s is not a file: "
                              "give d3-flame-graph's dist/templates/"
                              "d3-flamegraph-base.html" % template)
        if template is None:
            raise RecordError(
                "no d3-flame-graph template for --flamegraph: install the "
                "npm package d3-flame-graph and give its dist/templates/"
                "d3-flamegraph-base.html with --template FILE or "
                "$PERF_FLAMEGRAPH_TEMPLATE")
    return _perf_collapse, template


# ---- Which interpreter, and what it was built with -------------------------

class Interpreter:
    """What QUERY found out about one Python: `path`, `trampoline` (it
    has the perf trampoline), `frame_pointers`."""

    def __init__(self, path, trampoline, frame_pointers):
        self.path = path
        self.trampoline = trampoline
        self.frame_pointers = frame_pointers


def looks_like_python(path):
    """Whether `path` (or what its links lead to) is named as a Python."""
    names = {os.path.basename(path), os.path.basename(os.path.realpath(path))}
    return any(PYTHON_NAME.match(name) for name in names)


def _shebang_program(path):
    """The program named by the #! line of `path` (through `env`), found
    on PATH, or None when `path` is no script."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    program, rest = words[0], words[1:]
    if os.path.basename(program) == "env":
        # env [-S] [-i] [NAME=VALUE]... PROGRAM
        rest = [w for w in rest if not w.startswith("-") and "=" not in w]
        if not rest:
            return None
        program = rest[0]
    return shutil.which(program) or (program if os.path.isabs(program)
                                     else None)


def ask_python(program):
    """Run `program` (a Python) with -I -c QUERY: an Interpreter, or None
    when it does not answer as a Python 3 does."""
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("PYTHON"))
    try:
        proc = subprocess.run([program, "-I", "-c", QUERY], env=env,
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL,
                              universal_newlines=True,
                              timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in proc.stdout.splitlines():
        words = line.split()
        if proc.returncode == 0 and len(words) == 4 \
                and words[0] == QUERY_MARK:
            trampoline = words[1] == "1"
            if words[2] == "None":      # not this project's build
                fp = words[3] == "1"
            else:
                fp = words[2] not in ("0", "")
            return Interpreter(program, trampoline, fp)
    return None


def _command_program(command):
    """(program run, interpreter it is run by): COMMAND[0] on PATH, and
    the program of its #! line if it is a script."""
    program = shutil.which(command[0])
    if program is None:
        raise RecordError("%s: command not found" % command[0])
    return program, _shebang_program(program) or program


def _ignores_environment(command):
    """Whether a Python command line gives -E or -I (PYTHONPERFSUPPORT is
    then ignored) and no -X perf of its own."""
    flags, xoptions = set(), []
    i = 1
    while i < len(command):
        arg = command[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            break
        if arg.startswith("--"):
            i += 1
            continue
        j = 1
        while j < len(arg):
            ch = arg[j]
            if ch in "cm":
                return bool(flags & {"E", "I"}) and not _perf_x(xoptions)
            if ch in "XW":
                value = arg[j + 1:]
                if not value and i + 1 < len(command):
                    i += 1
                    value = command[i]
                if ch == "X":
                    xoptions.append(value)
                break
            flags.add(ch)
            j += 1
        i += 1
    return bool(flags & {"E", "I"}) and not _perf_x(xoptions)


def _perf_x(xoptions):
    return any(x.split("=", 1)[0] in ("perf", "perf_jit") for x in xoptions)


def _call_graph(args, interpreters, others):
    """The call-graph mode ("fp" or "dwarf"), and notes on the choice.
    `interpreters`: the Interpreters recorded; `others`: descriptions of
    the programs recorded that are no Python we could ask."""
    if args.call_graph:
        return args.call_graph, ["call graph %s, as asked"
                                 % _describe_mode(args.call_graph)]
    notes = []
    for what in others:
        notes.append("%s is not a Python this command can ask: call graph "
                     "%s, which unwinds any code that has unwinding tables"
                     % (what, _describe_mode("dwarf")))
    without = [i for i in interpreters if not i.frame_pointers]
    for interp in without:
        notes.append("%s has no frame pointers: call graph %s"
                     % (interp.path, _describe_mode("dwarf")))
    if others or without or not interpreters:
        return "dwarf", notes
    for interp in interpreters:
        notes.append("%s has frame pointers: call graph %s"
                     % (interp.path, _describe_mode("fp")))
    return "fp", notes


def _describe_mode(mode):
    return "%s (perf record %s)" % (mode, " ".join(CALL_GRAPH_OPTIONS[mode]))


def _event_options(perf):
    """[] when perf's default event (hardware cycles) counts here, else
    -e cpu-clock (a virtual machine or container without a PMU)."""
    try:
        proc = subprocess.run([perf, "stat", "-x", ",", "-e", "cycles:u",
                               "--", "true"],
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE,
                              universal_newlines=True,
                              timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return ["-e", "cpu-clock"]
    for line in proc.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("cycles"):
            if proc.returncode == 0 and fields[0].strip().isdigit():
                return []
    return ["-e", "cpu-clock"]


# ---- Running processes: which to record, the trampoline on and off ---------

def _pt():
    import perf_trampoline
    return perf_trampoline


def _exe_of(pid):
    """The executable of `pid`, as a path this process can run."""
    link = "/proc/%d/exe" % pid
    try:
        path = os.readlink(link)
        st = os.stat(link)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise RecordError(
                "no permission to process %d: record it as its own user, "
                "or as root" % pid)
        if not os.path.exists("/proc/%d" % pid):
            raise RecordError("process %d does not exist" % pid)
        return None
    try:
        same = os.path.samestat(st, os.stat(path))
    except OSError:
        same = False
    # (a replaced or deleted executable, or one in another mount
    # namespace, is still reached through the link)
    return path if same else link


def _uid_of(pid):
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return None


class _Targets:
    """The processes of --pid [--children], checked: their pids, the
    Interpreters and other programs among them (for the call-graph
    mode), those where the trampoline is to be turned on."""

    def __init__(self, pid, children):
        pt = _pt()
        if not os.path.exists("/proc/%d" % pid):
            raise RecordError("process %d does not exist: give the pid of "
                              "a running process" % pid)
        self.pids = [pid] + (pt.children_of(pid) if children else [])
        self.interpreters = []
        self.others = []
        self.to_activate = []
        asked = {}
        gone = []
        for p in self.pids:
            outcome = pt.status(p)
            snap = outcome.snapshot
            if not outcome.ok:
                why = outcome.text
                if "does not exist" in why or "has exited" in why:
                    if p == pid:
                        raise RecordError("process %d does not exist" % p)
                    gone.append(p)
                    continue
                if "is not a Python with live perf activation" not in why \
                        and "built --without-remote-debug" not in why:
                    # no permission, and anything else: say it as is
                    raise RecordError(why)
            elif snap.active == 0 and snap.state == pt.STATE_DISABLED:
                raise RecordError(
                    "live activation is disabled in process %d (it was "
                    "started with -X disable_remote_debug or "
                    "PYTHON_DISABLE_REMOTE_DEBUG) and its trampoline is "
                    "off: restart it with -X perf, or without that option"
                    % p)
            exe = _exe_of(p)
            if exe is None:
                if p == pid:
                    raise RecordError("process %d runs no program (a kernel "
                                      "thread, or a zombie): nothing to "
                                      "record" % p)
                gone.append(p)
                continue
            if exe not in asked:
                asked[exe] = (ask_python(exe) if looks_like_python(exe)
                              else None)
            interp = asked[exe]
            if interp is None:
                self.others.append("process %d (%s)" % (p, exe))
                continue
            if not interp.trampoline:
                if p == pid:
                    raise RecordError(
                        "process %d runs %s, a Python without the perf "
                        "trampoline (no PY_HAVE_PERF_TRAMPOLINE): its "
                        "Python functions cannot be named" % (p, exe))
                note("process %d runs %s, a Python without the perf "
                     "trampoline: its Python functions stay unnamed"
                     % (p, exe))
            elif not outcome.ok:
                note("process %d: %s; its Python functions are named only "
                     "if it was started with -X perf"
                     % (p, why.split(": ", 1)[-1]))
            elif snap.active == 0:
                self.to_activate.append(p)
            if interp not in self.interpreters:
                self.interpreters.append(interp)
        self.pids = [p for p in self.pids if p not in gone]
        self.uids = set(_uid_of(p) for p in self.pids)


def _activate(pids):
    """Turn the trampoline on in `pids`: (the pids it reached, on or with
    the request pending; the Outcome of the first that refused, or
    None)."""
    if not pids:
        return [], None
    pt = _pt()
    reached, failed = [], []
    for out in pt.request_all(pids, pt.REQ_PERF, REQUEST_TIMEOUT):
        if out.ok:
            reached.append(out.pid)
            note("%s (turned on; off again after the recording)" % out.text)
        elif out.pending:
            reached.append(out.pid)
            note(out.text)
        else:
            failed.append(out)
    return reached, (failed[0] if failed else None)


def _restore(pids):
    """Turn the trampoline off again in `pids` (those _activate() turned
    on); a process that has exited meanwhile needs nothing."""
    if not pids:
        return
    pt = _pt()
    for out in pt.request_all(pids, pt.REQ_DEACTIVATE, REQUEST_TIMEOUT):
        if out.ok or out.pending:
            note("%d: trampoline off again%s"
                 % (out.pid, " (requested)" if out.pending else ""))
        elif pt.exists(out.pid):
            note("could not turn the trampoline off again: %s" % out.text)


# ---- perf record and perf script -------------------------------------------

def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def data_written(path, before=None):
    """Whether `path` is a perf.data that perf finished (its header gives
    the data's size, written last), and not the file `before` was."""
    ident = _identity(path)
    if ident is None or ident == before:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(_PERF_HEADER.size)
    except OSError:
        return False
    if len(head) < _PERF_HEADER.size:
        return False
    fields = _PERF_HEADER.unpack(head)
    return fields[0] == _PERF_MAGIC and fields[6] > 0


def _perf_error(text):
    """The line of perf's stderr that says what went wrong."""
    lines = [row.strip() for row in text.splitlines() if row.strip()]
    for i, line in enumerate(lines):
        if line.rstrip(":") == "Error" and i + 1 < len(lines):
            return lines[i + 1]
        if line.startswith("Error:") or "error" in line.lower():
            return line
    return lines[-1] if lines else "no message"


def _run_perf(cmd, env=None, stop_after=None, capture=False):
    """Run perf record `cmd` to its end; SIGINT and SIGTERM received
    meanwhile stop it (as SIGINT, the signal perf record ends cleanly
    on), and so does `stop_after` seconds.  Returns (exit status, its
    stderr when `capture`)."""
    state = {"proc": None}

    def stop(signum, frame):
        proc = state["proc"]
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass

    handled = (signal.SIGINT, signal.SIGTERM)
    old = dict((s, signal.signal(s, stop)) for s in handled)
    err = tempfile.TemporaryFile() if capture else None
    try:
        try:
            state["proc"] = proc = subprocess.Popen(cmd, env=env,
                                                    stderr=err)
        except OSError as exc:
            raise RecordError("cannot run perf: %s" % exc)
        try:
            if stop_after is not None:
                try:
                    proc.wait(timeout=stop_after)
                except subprocess.TimeoutExpired:
                    stop(None, None)
            proc.wait()
        finally:
            if proc.poll() is None:     # an exception in this process
                stop(None, None)
                proc.wait()
        text = ""
        if err is not None:
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        return proc.returncode, text
    finally:
        if err is not None:
            err.close()
        for s, h in old.items():
            signal.signal(s, h)


def _perf_script(perf, data, out, force):
    """perf script -i `data` > `out`."""
    cmd = [perf, "script", "-i", data] + (["--force"] if force else [])
    with open(out, "wb") as f, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=f,
                                  stderr=err)
        except OSError as exc:
            raise RecordError("cannot run perf script: %s" % exc)
        if proc.returncode != 0:
            err.seek(0)
            raise RecordError("perf script -i %s failed (exit status %d): "
                              "%s" % (data, proc.returncode, _perf_error(
                                  err.read().decode("utf-8", "replace"))))


def count_samples(path):
    """(samples, samples with a py:: frame) of a perf script text."""
    samples = named = 0
    in_sample = has_py = False
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                if in_sample:
                    samples += 1
                    named += has_py
                in_sample = has_py = False
            elif line[:1] not in (b" ", b"\t"):
                in_sample = True
            elif b" py::" in line:
                has_py = True
    if in_sample:
        samples += 1
        named += has_py
    return samples, named


# ---- record ----------------------------------------------------------------

def _names(output):
    name = output[:-len(".data")] if output.endswith(".data") else output
    if not name or name.endswith("/"):
        raise RecordError("-o %s: give a file name, not a directory"
                          % output)
    return dict((kind, name + "." + kind)
                for kind in ("data", "txt", "folded", "html"))


def _record(args, command):
    perf = find_perf()
    problem = sampling_problem()
    if problem:
        raise RecordError(problem)
    level = paranoid_level()
    if level is not None and level >= 2 and not privileged():
        note("kernel frames are not recorded: kernel.perf_event_paranoid "
             "is %d (1 or less, or root, records them)" % level)
    collapse, template = _converter(args)
    files = _names(args.output)
    directory = os.path.dirname(files["data"]) or "."
    if not os.path.isdir(directory):
        raise RecordError("-o %s: directory %s does not exist"
                          % (args.output, directory))

    if args.pid is None:
        targets = None
        program, interp_path = _command_program(command)
        interpreters, others = [], []
        interp = None
        if looks_like_python(interp_path):
            interp = ask_python(interp_path)
        if interp is None:
            others.append(interp_path if interp_path == program
                          else "%s (run by %s)" % (program, interp_path))
        elif not interp.trampoline:
            raise RecordError(
                "%s is a Python without the perf trampoline (no "
                "PY_HAVE_PERF_TRAMPOLINE in its sysconfig): its Python "
                "functions cannot be named; run the command with a Python "
                "that has it" % interp_path)
        else:
            interpreters.append(interp)
            if interp_path == program and _ignores_environment(command):
                note("the command gives -E or -I, so its Python ignores "
                     "PYTHONPERFSUPPORT=1: add -X perf to it to name its "
                     "Python functions")
    else:
        targets = _Targets(args.pid, args.children)
        interpreters, others = targets.interpreters, targets.others

    mode, notes = _call_graph(args, interpreters, others)
    for text in notes:
        note(text)
    cmd = ([perf, "record", "-F", str(args.freq)] + _event_options(perf)
           + CALL_GRAPH_OPTIONS[mode] + ["-o", files["data"]])
    before = _identity(files["data"])
    force = False
    if targets is None:
        cmd += ["--"] + command
        env = dict(os.environ)
        env["PYTHONPERFSUPPORT"] = "1"
        note("running: %s" % " ".join(shlex.quote(c) for c in cmd))
        status, _ = _run_perf(cmd, env=env)
        if not data_written(files["data"], before):
            raise RecordError("perf record failed (exit status %d): its "
                              "messages are above" % status)
        if status != 0:
            note("the command ended with status %d" % status
                 if status > 0 else
                 "the command ended with signal %d" % -status)
    else:
        cmd += ["-p", ",".join(str(p) for p in targets.pids)]
        # (all of them until _activate() has said which it reached: an
        # interrupt may come while the requests are out)
        turned_on = list(targets.to_activate)
        try:
            turned_on, refused = _activate(targets.to_activate)
            if refused is not None:
                raise RecordError("cannot turn the trampoline on: %s"
                                  % refused.text)
            note("running: %s" % " ".join(shlex.quote(c) for c in cmd))
            if args.duration is None:
                note("recording until Ctrl-C, or until %s"
                     % ("the process exits" if len(targets.pids) == 1
                        else "the processes exit"))
            else:
                note("recording for %g s" % args.duration)
            status, err = _run_perf(cmd, stop_after=args.duration,
                                    capture=True)
        finally:
            _restore(turned_on)
        if not data_written(files["data"], before):
            raise RecordError("perf record failed (exit status %d): %s"
                              % (status, _perf_error(err)))
        # perf ignores the maps that root did not write unless forced
        force = os.geteuid() == 0 and bool(targets.uids - {0, None})

    written = [files["data"]]
    if collapse is None:
        _perf_script(perf, files["data"], files["txt"], force)
        written.append(files["txt"])
    else:
        fd, raw = tempfile.mkstemp(prefix=".perf-record-", suffix=".txt",
                                   dir=directory)
        os.close(fd)
        try:
            _perf_script(perf, files["data"], raw, force)
            if args.python:
                outputs = dict(folded=files["folded"], script=files["txt"])
            else:
                os.replace(raw, files["txt"])
                raw = files["txt"]
                outputs = {}
            if args.flamegraph:
                outputs["html"] = files["html"]
            try:
                collapse.convert(raw, template=template,
                                 python_level=args.python, **outputs)
            except (collapse.CollapseError, OSError) as exc:
                raise RecordError("cannot convert %s: %s"
                                  % (files["txt"], exc))
        finally:
            if raw != files["txt"] and os.path.exists(raw):
                os.unlink(raw)
        written.append(files["txt"])
        if args.python:
            written.append(files["folded"])
        if args.flamegraph:
            written.append(files["html"])
    _report(written, files)
    return 0


def _report(written, files):
    samples, named = count_samples(files["txt"])
    q = shlex.quote
    how = {
        files["data"]: "perf report -i %s (or hotspot %s)"
                       % (q(files["data"]), q(files["data"])),
        files["txt"]: "speedscope %s, or load it in the Firefox Profiler "
                      "(https://profiler.firefox.com)" % q(files["txt"]),
        files["folded"]: "flamegraph.pl %s > %s.svg, or speedscope %s"
                         % (q(files["folded"]),
                            q(files["folded"][:-len(".folded")]),
                            q(files["folded"])),
        files["html"]: "xdg-open %s (any browser)" % q(files["html"]),
    }
    print("%d samples, %d with Python functions" % (samples, named),
          flush=True)
    if samples and not named:
        note("no sample names a Python function: was the process running "
             "Python code, under this project's interpreter?")
    width = max(len(path) for path in written)
    for path in written:
        print("wrote %-*s  open: %s" % (width, path, how[path]), flush=True)
