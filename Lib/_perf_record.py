"""python -m perf_trampoline record: from a command or a running process
to a profile whose Python functions are named, in one command.

    python -m perf_trampoline record [-o NAME] [--python [--no-lines]]
                                     [--flamegraph] [--template FILE]
                                     [--lines]
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
   the d3-flame-graph template it needs; -o NAME names files in a
   directory record can write in.

2. The interpreter being recorded decides the call-graph mode (unless
   --call-graph says): perf's `-g` (frame pointers) when it was built
   with frame pointers, else `--call-graph dwarf` with DWARF_STACK bytes
   of stack per sample (the trampoline files carry the unwinding tables
   that DWARF unwinding needs, so no jitdump and no perf inject).  For a
   command, the interpreter is COMMAND[0] found on PATH (through a
   script's #! line, `env` included); for a pid, the flags of its live
   activation block say (read, not run: a process in a container too),
   and without a block (an older build, or another Python), /proc/PID/exe
   does.  Only a program whose name is a Python's (python, python3,
   python3.11d...) is asked, by running it with `-I -S -c QUERY`, which
   reads sysconfig's PY_HAVE_PERF_TRAMPOLINE and PY_HAVE_FRAME_POINTERS:
   running an unknown program with those arguments could do anything (a
   shell would run the query as shell code).  The query runs in a session of
   its own (no controlling terminal to write to), and the executable of
   a running process runs with that process's user and groups: what the
   process runs already.  Root never runs, as root, a program that
   another user's process runs (that user may own it, or the standard
   library it imports, and make it do anything); a caller who is not
   root does not ask another user's Python at all.  A program that is
   not a Python, or not asked, is recorded with dwarf, which unwinds any
   code that has unwinding tables, and the note says so.  A Python
   without the trampoline (PY_HAVE_PERF_TRAMPOLINE unset) cannot have
   its functions named: a failure for the command (or pid) given.

3. The trampoline is turned on.  A command runs with PYTHONPERFSUPPORT=1
   in its environment, its command line untouched, so that it and every
   Python it starts name their functions.  A running process is asked
   through live activation (perf_trampoline.request_all()) when
   perf_trampoline.status() shows the trampoline off; a request left
   pending (an idle process serves it when it next runs Python code) is
   fine.  With --lines, a command also gets PYTHON_PERF_LINES=1, and a
   process is asked for line trampolines: one that was off is turned on
   with lines, one that runs a backend without lines gets them for the
   recording.  Whatever record turned on it turns off again when perf has
   stopped, whatever stopped it (the duration, a signal, the target's
   exit, a failure of perf): the restore runs in a `finally`.  A process
   that one of those forked meanwhile (a pre-fork server replacing a
   worker) inherited the trampoline from it: the processes they started
   since record did are turned off too, whatever they show at that moment
   (a child shows the trampoline off for a while after fork(), as it
   moves to files of its own).  The descendants that existed at the
   start are left as they were.

4. Signals (_Signals, from the start to the end of record): SIGINT,
   SIGTERM and SIGHUP raise Stopped (exit status 128 + the signal's
   number, 130 for Ctrl-C), so that a `finally` restores the trampoline
   and removes what was not written; while perf records they stop the
   recording instead (perf gets SIGINT, on which it ends cleanly, once
   it has made its output: its own handlers are in place then); while
   the trampoline is turned off again they are only said ("record:
   SIGINT: the trampoline is being turned off again first"), so that a
   second Ctrl-C cannot leave it half done.

5. perf record runs with -F HZ, the call-graph mode, and `-e cpu-clock`
   only where the default event (hardware cycles) cannot be counted
   here (a `perf stat` probe), and -p with the comma list of pids (the
   pid and, with --children, its descendants now; perf follows the
   children they fork later).  --duration sends the SIGINT itself; perf
   also stops when every target has exited.  Before perf stops, the
   targets seal their trampoline files (perf caches them by build-id),
   and the perf maps of targets in a container are held open, to be
   copied where perf looks for them once the container is gone (_Maps).
   perf succeeded when it wrote a perf.data with its header finished (a
   perf that failed leaves none, or an empty one): for a command, perf's
   exit status is the command's, so it cannot tell.

6. `perf script` writes NAME.txt (the text that speedscope, the Firefox
   Profiler and the folded-stack tools read), with --force only when
   root reads the perf maps of processes of another user (perf ignores
   those otherwise).  With --python, NAME.txt is instead the Python-level
   text and NAME.folded its folded stacks, in which a function recorded
   with lines is one frame named with its line unless --no-lines; with
   --flamegraph, NAME.html; both from _perf_collapse.convert(), which
   reads the lines (not `perf script -F +srcline`, which costs 20 s for
   a 3 s recording).  A recording without samples is
   written and said (a warning, exit status 0), with nothing to fold.
   Last, what was written, each with the command that opens it.

The files (_Outputs) are made in a directory of record's own beside
them (mkdtemp: mode 0700), each 0600 as perf makes perf.data (they all
hold the same information), and renamed into place, which never
follows a link: -o in a directory that others write in (/tmp, as root)
cannot be turned by a planted symlink into a write elsewhere.  An
existing NAME.data is renamed NAME.data.old first, whatever it is (a
symlink too, as itself).  NAME.data is moved into place once perf has
finished it, whatever fails after.

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py (a
system python3 may be what records a process of this interpreter):
%-formatting, no f-strings, the standard library only; newer features
where present, behind a version check (subprocess's own user and group
switch, 3.9 on, in place of a preexec_fn).
"""

import argparse
import contextlib
import errno
import fcntl
import os
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

import _perf_live

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
# How long to wait for the seal before perf ends: a process that runs no
# Python code now keeps it pending (served when it next does) and its
# newest file without a build-id in this recording; the recording's end
# does not wait for it.
SEAL_TIMEOUT = 0.5
# Seconds given to the interpreter query and the event probe.
PROBE_TIMEOUT = 30
# Seconds between two looks at perf while it records (a stop asked for,
# the duration over).
POLL_INTERVAL = 0.05
# Seconds a stop waits for perf to have made its output (and so its
# signal handlers) before perf gets the SIGINT anyway.
STOP_GRACE = 2.0
# The mode of every file record writes: perf's own for perf.data.
FILE_MODE = 0o600

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

EXIT_STATUS = (
    "Exit status: 0 when the recording was written (a command that failed "
    "is reported, not passed on; a recording without samples is written, "
    "with a warning), 1 when it could not be, 2 for a usage error, 128 + "
    "the signal's number when a signal stopped record before the "
    "recording (130 for Ctrl-C).  Ctrl-C, SIGTERM or SIGHUP while perf "
    "records ends the recording, and the files are written.")


class RecordError(Exception):
    """record cannot go on: the text, one line, says what to do."""


class Stopped(Exception):
    """A signal stopped record (outside the recording): `signum`."""

    def __init__(self, signum):
        Exception.__init__(self, signum)
        self.signum = signum


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
    """--duration's type: perf_trampoline's --timeout type, more than 0
    and finite."""
    value = _perf_live._seconds(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(
            "must be more than 0 seconds, and finite, not %r" % text)
    return value


def add_parser(sub):
    """Add the 'record' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser(
        "record", help="record a command or a running process with perf, "
        "its Python functions named",
        usage="python -m perf_trampoline record [-o NAME] [--python "
              "[--no-lines]] [--flamegraph] [--template FILE] [--lines] "
              "[--call-graph {fp,dwarf}] "
              "[-F HZ] (--pid PID [--children] [--duration S] | "
              "-- COMMAND [ARG...])",
        description="Record a command, or a running process, with perf "
        "record, the perf trampoline on (turned on in a running process if "
        "it was off, and off again after), with the call-graph mode that "
        "suits its interpreter; then write the perf script text that "
        "viewers open and, if asked, a Python-level view and a flame "
        "graph.  Prints what it wrote and how to open each file.",
        epilog=EXIT_STATUS)
    p.add_argument("-o", "--output", metavar="NAME", default=DEFAULT_NAME,
                   help="write NAME.data, NAME.txt and the like, mode 0600 "
                        "(default %(default)s; a trailing .data is dropped; "
                        "an existing NAME.data becomes NAME.data.old)")
    p.add_argument("--python", action="store_true",
                   help="write a Python-level view: NAME.txt without the "
                        "interpreter's frames between two Python frames, "
                        "and its folded stacks NAME.folded, in which a "
                        "function recorded with lines (-X perf_lines, "
                        "PYTHON_PERF_LINES=1) is one frame, "
                        "py::QUALNAME:FILE:LINE")
    p.add_argument("--no-lines", dest="lines", action="store_false",
                   help="with --python: name those frames without their "
                        "line (py::QUALNAME:FILE, as without lines), one "
                        "per function")
    p.add_argument("--flamegraph", action="store_true",
                   help="also write NAME.html, a self-contained flame "
                        "graph (d3-flame-graph's template)")
    p.add_argument("--template", metavar="FILE",
                   help="with --flamegraph: the d3-flamegraph-base.html "
                        "to fill (default: $PERF_FLAMEGRAPH_TEMPLATE, or "
                        "where perf looks for it)")
    p.add_argument("--lines", dest="record_lines", action="store_true",
                   help="each Python frame also carries the line it is on "
                        "(perf script -F +srcline, perf report --sort "
                        "sym,srcline): a command runs with "
                        "PYTHON_PERF_LINES=1; a process gets line "
                        "trampolines for the recording (functions already "
                        "running keep the trampoline they have)")
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
    if args.template is not None and not args.flamegraph:
        parser.error("--template goes with --flamegraph")
    if not args.lines and not args.python:
        parser.error("--no-lines goes with --python")
    try:
        with _Signals() as signals:
            return _record(args, command, signals)
    except RecordError as exc:
        note(str(exc))
        return 1
    except Stopped as exc:
        note(_stopped_text(exc.signum))
        return 128 + exc.signum
    except KeyboardInterrupt:
        note("interrupted")
        return 128 + signal.SIGINT


def _stopped_text(signum):
    if signum == signal.SIGINT:
        return "interrupted"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = "signal %d" % signum
    return "stopped by %s" % name


# ---- Signals ---------------------------------------------------------------

class _Signals(object):
    """What SIGINT, SIGTERM and SIGHUP do while record runs (a context
    manager; the handlers that were there before come back at its end).

    `mode` "raise": raise Stopped, so that the `finally`s run (the
    trampoline is turned off again, the staging directory removed);
    "perf": only set `stop_requested`, which _run_perf() passes on to
    perf; "ignore": only say so (while the trampoline is turned off
    again)."""

    HANDLED = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self):
        self.mode = "raise"
        self.stop_requested = False
        self._old = {}

    def __enter__(self):
        for name in self.HANDLED:
            signum = getattr(signal, name)
            self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._old.items():
            signal.signal(signum, handler)
        self._old.clear()

    def _handle(self, signum, frame):
        if self.mode == "raise":
            raise Stopped(signum)
        if self.mode == "perf":
            self.stop_requested = True
        elif self.mode == "ignore":
            # Said, so that the user knows the key was seen, in one
            # write(): the handler may run while the restore's own note()
            # holds sys.stderr's buffer (a print() would raise then), and
            # a stderr that cannot be written must not stop the restore.
            text = ("record: %s: the trampoline is being turned off again "
                    "first\n" % signal.Signals(signum).name)
            try:
                os.write(2, text.encode())
            except OSError:
                pass

    @contextlib.contextmanager
    def mode_of(self, mode):
        previous, self.mode = self.mode, mode
        try:
            yield self
        finally:
            self.mode = previous


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


class Credentials(object):
    """The user, group and supplementary groups of a process (effective
    ids), and the arguments that make a child take them on."""

    def __init__(self, uid, gid, groups):
        self.uid = uid
        self.gid = gid
        self.groups = groups

    def popen_args(self):
        """subprocess's own switch where it has one (3.9 on: done in the
        child, safe in a process with threads), else a preexec_fn."""
        if sys.version_info >= (3, 9):
            return {"user": self.uid, "group": self.gid,
                    "extra_groups": self.groups}
        return {"preexec_fn": self._become}

    def _become(self):
        os.setgroups(self.groups)
        os.setgid(self.gid)
        os.setuid(self.uid)


def credentials_of(pid):
    """The Credentials of process `pid` (from /proc/PID/status), or None
    when it cannot be read."""
    fields = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.split()
        return Credentials(int(fields["Uid"][1]), int(fields["Gid"][1]),
                           [int(g) for g in fields.get("Groups", [])])
    except (OSError, KeyError, IndexError, ValueError):
        return None


def _probe(cmd, env=None, user=None):
    """Run the short probe `cmd` (the interpreter query, the event probe):
    no input, from /, in a session of its own (no controlling terminal to
    reach), with the Credentials `user` when given.  Its CompletedProcess
    (text output), or None when it could not run or did not end within
    PROBE_TIMEOUT seconds."""
    try:
        return subprocess.run(cmd, env=env, cwd="/",
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              encoding="utf-8", errors="replace",
                              start_new_session=True,
                              timeout=PROBE_TIMEOUT,
                              **(user.popen_args() if user else {}))
    except (OSError, subprocess.SubprocessError):
        return None


def ask_python(program, user=None):
    """Run `program` (a Python) with -I -S -c QUERY, as the Credentials
    `user` if given: an Interpreter, or None when it does not answer as a
    Python 3 does.  (-I: no PYTHON* variable, no user site, nor the
    current directory on sys.path; -S: no site-packages, .pth files or
    sitecustomize: only the standard library's sysconfig.)"""
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("PYTHON"))
    proc = _probe([program, "-I", "-S", "-c", QUERY], env=env, user=user)
    if proc is None or proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == QUERY_MARK:
            trampoline = words[1] == "1"
            if words[2] == "None":      # not this project's build
                fp = words[3] == "1"
            else:
                fp = words[2] not in ("0", "")
            return Interpreter(program, trampoline, fp)
    return None


def ask_python_of(exe, owner):
    """ask_python() for the executable `exe` of a running process whose
    Credentials are `owner`: run with those credentials, what the process
    runs already.  Root switches to them (never runs another user's
    program as root: its owner may make it, or the standard library it
    imports, do anything); another caller asks only his own processes'
    programs.  None when it is not asked."""
    if owner is None or not looks_like_python(exe):
        return None
    if owner.uid == os.geteuid():
        return ask_python(exe)
    if os.geteuid() == 0:
        return ask_python(exe, user=owner)
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
    proc = _probe([perf, "stat", "-x", ",", "-e", "cycles:u", "--", "true"])
    if proc is not None and proc.returncode == 0:
        for line in proc.stderr.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2].startswith("cycles") \
                    and fields[0].strip().isdigit():
                return []
    return ["-e", "cpu-clock"]


# ---- Running processes: which to record, the trampoline on and off ---------

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


def _file_id(path):
    """The device and inode of the file at `path` (a process's
    /proc/PID/exe: the same program in two containers), or `path` itself
    when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    return (st.st_dev, st.st_ino)


class _Targets:
    """The processes of --pid [--children], checked: their pids, the
    Interpreters and other programs among them (for the call-graph
    mode), those where the trampoline is to be turned on, the users
    they run as, and `known`: the pid and all its descendants now
    (those that _restore() must leave as they are)."""

    def __init__(self, pid, children, lines=False):
        pt = _perf_live
        if not os.path.exists("/proc/%d" % pid):
            raise RecordError("process %d does not exist: give the pid of "
                              "a running process" % pid)
        descendants = pt.children_of(pid)
        self.known = set([pid] + descendants)
        self.pids = [pid] + (descendants if children else [])
        self.interpreters = []
        self.others = []
        self.to_activate = []
        # (with --lines: those that run a backend without lines, to have
        # them for the recording: {backend name: pids})
        self.to_add_lines = {}
        self.uids = set()
        asked = {}
        gone = []
        for p in self.pids:
            outcome = _status(p)
            snap = outcome.snapshot
            if not outcome.ok:
                why = outcome.text
                if isinstance(outcome.error, pt.ProcessGone):
                    if p == pid:
                        raise RecordError("process %d does not exist" % p)
                    gone.append(p)
                    continue
                if not isinstance(outcome.error, pt.NoBlock):
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
            owner = credentials_of(p)
            if exe is None or owner is None:
                if p == pid:
                    raise RecordError("process %d runs no program (a kernel "
                                      "thread, or a zombie): nothing to "
                                      "record" % p)
                gone.append(p)
                continue
            self.uids.add(owner.uid)
            if outcome.ok and snap.flags is not None:
                # The block says how the interpreter was built: nothing of
                # the process's runs here (in a container it could not
                # find its standard library on this side anyway).
                key = (_file_id(exe),
                       bool(snap.flags & pt.FLAG_TRAMPOLINE),
                       bool(snap.flags & pt.FLAG_FRAME_POINTERS))
                if key not in asked:
                    asked[key] = Interpreter(exe, key[1], key[2])
            else:
                key = (exe, owner.uid, owner.gid, tuple(owner.groups))
                if key not in asked:
                    asked[key] = ask_python_of(exe, owner)
            interp = asked[key]
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
            elif lines and not snap.lines:
                backend = pt.BACKEND_NAMES.get(snap.active, "perf")
                self.to_add_lines.setdefault(backend, []).append(p)
            if interp not in self.interpreters:
                self.interpreters.append(interp)
        self.pids = [p for p in self.pids if p not in gone]


def _activate(pids, lines=False, what="turned on", backend="perf"):
    """Turn the trampoline on in `pids` (`backend`), with lines if
    `lines`: (the pids it reached, on or with the request pending; the
    Outcome of the first that refused, or None)."""
    if not pids:
        return [], None
    pt = _perf_live
    code = pt.activation_code(backend, True if lines else None)
    reached, failed = [], []
    for out in pt.request_all(pids, code, REQUEST_TIMEOUT):
        if out.ok:
            reached.append(out.pid)
            note("%s (%s; off again after the recording)" % (out.text, what))
        elif out.pending:
            reached.append(out.pid)
            note(out.text)
        else:
            failed.append(out)
    return reached, (failed[0] if failed else None)


def _status(pid):
    """perf_trampoline.status(pid), given up to REQUEST_TIMEOUT seconds to
    come through fork(): a child that has not run since shows a copy of
    its parent's block (which names the parent's pid)."""
    pt = _perf_live
    deadline = time.monotonic() + REQUEST_TIMEOUT
    out = pt.status(pid)
    while not out.ok and isinstance(out.error, pt.CopiedBlock) \
            and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL)
        out = pt.status(pid)
    return out


def started_since(pids, known):
    """The descendants of `pids` that are not in `known` (started since)
    and take requests.  A child that one of `pids` forked inherited the
    trampoline that _activate() turned on; it may show it off while it
    moves to files of its own after the fork, so whether it is on is not
    asked."""
    found = []
    for p in pids:
        for q in _perf_live.children_of(p):
            if q not in known and q not in found and _status(q).ok:
                found.append(q)
    return found


def _seal(pids):
    """Have `pids` (the targets and the processes they started since,
    started_since()) seal their trampoline files, so that perf, which
    reads the build-ids when its recording ends, keeps a copy of every
    file it saw for reports made once the files are gone.  A process that
    does not know the request (an earlier build) is left as it is; one
    that runs no Python code now: see SEAL_TIMEOUT (a later request, the
    restore's, takes the pending one's place)."""
    pt = _perf_live
    try:
        outcomes = pt.request_all(pids, pt.REQ_SEAL, SEAL_TIMEOUT)
    except Exception as exc:
        # (a best effort: the recording is what matters)
        note("could not ask for the trampoline files' build-ids: %s" % exc)
        return
    for out in outcomes:
        if not out.ok and not out.pending and pt.exists(out.pid) \
                and out.snapshot is not None \
                and out.snapshot.result == pt.RESULT_REFUSED:
            note("could not seal the trampoline files: %s" % out.text)


def _restore(pids, known=(), lines_only=False, backend="perf"):
    """Turn the trampoline off again in `pids` (those _activate() turned
    on) and in the processes they started meanwhile (started_since(pids,
    known)); a process that has exited meanwhile needs nothing.  With
    `lines_only`, `pids` are those that ran `backend` without lines
    before: they keep it, without lines again."""
    if not pids:
        return
    pt = _perf_live
    started = started_since(pids, known)
    if lines_only:
        code, what = pt.activation_code(backend, False), "lines"
    else:
        code, what = pt.REQ_DEACTIVATE, "trampoline"
    for out in pt.request_all(list(pids) + started, code, REQUEST_TIMEOUT):
        if out.ok or out.pending:
            note("%d: %s off%s%s"
                 % (out.pid, what, (" (started during the recording)"
                                    if out.pid in started else " again"),
                    " (requested)" if out.pending else ""))
        elif pt.exists(out.pid):
            note("could not turn the %s off again: %s" % (what, out.text))


class _Maps(object):
    """The perf maps of target processes that perf, reporting after they
    have ended, would look for in vain.  perf reads the map of a process
    in another mount namespace (a container) in that namespace, by the
    pid the process knows itself by (/tmp/perf-1.map in the container's
    /tmp); once the namespace is gone, it reads /tmp/perf-HOSTPID.map on
    this side instead.  So record keeps a copy there: what names the
    functions of trampolines that are in no file (a noexec /tmp).

    hold() opens each map while its process runs, through the process's
    root (/proc/PID/root), one component at a time and none of them a
    symlink, first with O_PATH (the container's file system is not to be
    trusted: a device or a FIFO there is never opened).  The map must be
    a regular file of the process's user on which the process itself
    holds the writer's lock (/proc/locks): a map of the same name may be
    another process's (a second container that shares the /tmp, whose
    interpreter then writes no map).  The open descriptor keeps the file
    after the container's /tmp has gone.  write() copies each non-empty
    one, at the end, into a file of this user's made with O_EXCL and
    renamed to its name, unless that name is a live process's map (its
    writer's lock), or the copy would eat into /tmp's reserve (the
    interpreter's: 1 MiB or 2%), or it is the process's own map already
    (no container).  close() closes what is left."""

    def __init__(self):
        self.held = {}

    def hold(self, pids):
        for pid in pids:
            if pid not in self.held:
                fd = self._open(pid)
                if fd is not None:
                    self.held[pid] = fd

    @staticmethod
    def _locked_by(pid, st):
        """Does process `pid` hold a flock() on the file of `st`?"""
        want = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev),
                                 st.st_ino)
        try:
            with open("/proc/locks") as f:
                for line in f:
                    # "N: [-> ]FLOCK ADVISORY WRITE PID MAJ:MIN:INO ..."
                    words = [w for w in line.split() if w != "->"]
                    if len(words) >= 6 and words[1] == "FLOCK" \
                            and words[4] == str(pid) and words[5] == want:
                        return True
        except OSError:
            pass
        return False

    @classmethod
    def _open(cls, pid):
        nspid = _perf_live.ns_pid(pid)
        owner = credentials_of(pid)
        if owner is None:
            return None
        fds = []
        try:
            where = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
            fds.append(os.open("/proc/%d/root" % pid, os.O_PATH
                               | os.O_DIRECTORY | os.O_CLOEXEC))
            fds.append(os.open("tmp", where | os.O_DIRECTORY,
                               dir_fd=fds[-1]))
            fds.append(os.open("perf-%d.map" % nspid, where,
                               dir_fd=fds[-1]))
            st = os.fstat(fds[-1])
            if not stat.S_ISREG(st.st_mode) or st.st_uid != owner.uid \
                    or not cls._locked_by(pid, st):
                return None
            try:
                here = os.stat("/tmp/perf-%d.map" % pid,
                               follow_symlinks=False)
                if os.path.samestat(st, here):
                    return None
            except OSError:
                pass
            # (a regular file, checked: now opened for reading)
            return os.open("/proc/self/fd/%d" % fds[-1], os.O_RDONLY
                           | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        finally:
            for d in fds:
                os.close(d)

    def write(self):
        for pid in sorted(self.held):
            fd = self.held.pop(pid)
            try:
                self._copy(pid, fd)
            except OSError as exc:
                note("could not keep the map of process %d as "
                     "/tmp/perf-%d.map: %s" % (pid, pid, exc))
            finally:
                os.close(fd)

    def close(self):
        for fd in self.held.values():
            os.close(fd)
        self.held = {}

    @staticmethod
    def _copy(pid, fd):
        size = os.fstat(fd).st_size
        if size == 0:
            # (nothing to name: every trampoline is in a file)
            return
        path = "/tmp/perf-%d.map" % pid
        try:
            old = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                          | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            old = None
        if old is not None:
            try:
                fcntl.flock(old, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    note("/tmp/perf-%d.map is a live process's: the map of "
                         "process %d was not kept there" % (pid, pid))
                    return
            finally:
                os.close(old)
        fs = os.statvfs("/tmp")
        reserve = max(1 << 20, fs.f_blocks * fs.f_frsize // 50)
        if size > fs.f_bavail * fs.f_frsize - reserve:
            note("no room in /tmp to keep the map of process %d (%d bytes) "
                 "as %s" % (pid, size, path))
            return
        out, staged = tempfile.mkstemp(prefix=".perf-%d.map." % pid,
                                       dir="/tmp")
        try:
            with os.fdopen(out, "wb") as f:
                os.lseek(fd, 0, os.SEEK_SET)
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
            os.rename(staged, path)
        except BaseException:
            os.unlink(staged)
            raise
        note("kept a copy of the map of process %d as %s, where perf looks "
             "for it once the process has ended" % (pid, path))


# ---- The files -------------------------------------------------------------

class _Outputs(object):
    """The files of -o NAME: `final[kind]` for kind data, txt, folded and
    html.  Each is written first as `staged(kind)` in a directory of
    record's own beside them (stage()), made 0600 and renamed into place
    (commit()); discard() removes what is left there."""

    KINDS = ("data", "txt", "folded", "html")

    def __init__(self, output):
        name = output[:-len(".data")] if output.endswith(".data") else output
        if not name or name.endswith("/") or os.path.isdir(name):
            raise RecordError("-o %s: give a file name, not a directory "
                              "(-o %s writes %s.data, ...)"
                              % (output, os.path.join(name, DEFAULT_NAME),
                                 os.path.join(name, DEFAULT_NAME)))
        self.final = dict((kind, name + "." + kind) for kind in self.KINDS)
        self.directory = os.path.dirname(name) or "."
        self.staging = None
        if not os.path.isdir(self.directory):
            raise RecordError("-o %s: directory %s does not exist"
                              % (output, self.directory))
        for path in list(self.final.values()) + [self.old_data()]:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                raise RecordError("-o %s: %s is a directory: remove it, or "
                                  "give another name" % (output, path))

    def old_data(self):
        return self.final["data"] + ".old"

    def stage(self):
        try:
            self.staging = tempfile.mkdtemp(prefix=".perf-record-",
                                            dir=self.directory)
        except OSError as exc:
            raise RecordError("cannot write in %s: %s"
                              % (self.directory, exc.strerror or exc))

    def staged(self, kind):
        return os.path.join(self.staging,
                            os.path.basename(self.final[kind]))

    def commit(self, kind):
        """Move the staged file of `kind` into place, 0600; for data,
        what has the name already becomes NAME.data.old."""
        staged, final = self.staged(kind), self.final[kind]
        try:
            fd = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, FILE_MODE)
            finally:
                os.close(fd)
            if kind == "data" and os.path.lexists(final):
                try:
                    os.rename(final, self.old_data())
                except FileNotFoundError:
                    pass
            os.replace(staged, final)
        except OSError as exc:
            raise RecordError("cannot write %s: %s"
                              % (final, exc.strerror or exc))

    def discard(self):
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None


# ---- perf record and perf script -------------------------------------------

def data_written(path):
    """Whether `path` is a perf.data that perf finished (its header gives
    the data's size, written last)."""
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


def _run_perf(cmd, signals, output, announce=(), env=None, stop_after=None,
              capture=False, before_stop=None):
    """Run perf record `cmd`, writing `output`, to its end.  From before
    it starts (when the lines `announce` are printed), SIGINT, SIGTERM and
    SIGHUP stop the recording, not record: perf gets SIGINT, the signal it
    ends cleanly on, once it has made `output` (its handlers are in place
    then; or after STOP_GRACE seconds), and `before_stop()` was called.
    It gets the same after `stop_after` seconds.  Returns (exit status,
    its stderr when `capture`)."""
    err = tempfile.TemporaryFile() if capture else None
    try:
        with signals.mode_of("perf"):
            signals.stop_requested = False
            for line in announce:
                note(line)
            try:
                proc = subprocess.Popen(cmd, env=env, stderr=err)
            except OSError as exc:
                raise RecordError("cannot run perf: %s" % exc)
            _wait_for_perf(proc, signals, output, stop_after, before_stop)
        text = ""
        if err is not None:
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
        return proc.returncode, text
    finally:
        if err is not None:
            err.close()


def _wait_for_perf(proc, signals, output, stop_after, before_stop):
    start = time.monotonic()
    asked = sent = None
    try:
        while True:
            try:
                proc.wait(timeout=POLL_INTERVAL)
                return
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if asked is None and (signals.stop_requested or (
                    stop_after is not None and now - start >= stop_after)):
                asked = now
            if asked is not None and sent is None and (
                    os.path.exists(output) or now - asked >= STOP_GRACE):
                if before_stop is not None:
                    before_stop()
                proc.send_signal(signal.SIGINT)
                sent = now
    finally:
        if proc.poll() is None:     # an exception in this process
            proc.send_signal(signal.SIGINT)
            proc.wait()


def _perf_script(perf, data, out, force):
    """perf script -i `data` > `out` (a new file)."""
    cmd = [perf, "script", "-i", data] + (["--force"] if force else [])
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as f, tempfile.TemporaryFile() as err:
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

def _record(args, command, signals):
    perf = find_perf()
    is_privileged = privileged()
    problem = sampling_problem(is_privileged=is_privileged)
    if problem:
        raise RecordError(problem)
    level = paranoid_level()
    if level is not None and level >= 2 and not is_privileged:
        note("kernel frames are not recorded: kernel.perf_event_paranoid "
             "is %d (1 or less, or root, records them)" % level)
    collapse, template = _converter(args)
    outputs = _Outputs(args.output)
    outputs.stage()
    try:
        if args.pid is None:
            force, idle = _record_command(perf, args, command, outputs,
                                          signals)
        else:
            force, idle = _record_pids(perf, args, outputs, signals)
        try:
            kinds, samples, named = _write_outputs(
                perf, args, outputs, collapse, template, force, idle)
        finally:
            if os.path.exists(outputs.staged("data")):
                # the recording, whatever failed after it
                outputs.commit("data")
    finally:
        outputs.discard()
    _report(outputs.final, ["data"] + kinds, samples, named)
    return 0


def _perf_record_cmd(perf, args, interpreters, others, data):
    """perf record's command line up to its targets, the call-graph mode
    chosen (and said)."""
    mode, notes = _call_graph(args, interpreters, others)
    for text in notes:
        note(text)
    # --buildid-all: perf keeps in its build-id cache only the files that
    # hold a sample's own address, and a trampoline is never the innermost
    # frame; with it the arena files are kept too, and the recording is
    # still named once /tmp has lost them (clean, a reboot, a container
    # that ended, `perf archive` to another machine).
    return ([perf, "record", "-F", str(args.freq)] + _event_options(perf)
            + CALL_GRAPH_OPTIONS[mode] + ["--buildid-all", "-o", data])


def _command_line(cmd):
    return "running: %s" % " ".join(shlex.quote(c) for c in cmd)


def _record_command(perf, args, command, outputs, signals):
    """perf record -- COMMAND, PYTHONPERFSUPPORT=1 (and, unless set,
    PYTHON_PERF_TMP_LIMIT=unlimited) in its environment.  Returns (perf
    script's --force, what no sample means)."""
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
    data = outputs.staged("data")
    cmd = (_perf_record_cmd(perf, args, interpreters, others, data)
           + ["--"] + command)
    env = dict(os.environ)
    env["PYTHONPERFSUPPORT"] = "1"
    if args.record_lines:
        env["PYTHON_PERF_LINES"] = "1"
    # The trampoline files a long run replaces stay until perf has copied
    # them (--buildid-all) when the recording ends.
    env.setdefault("PYTHON_PERF_TMP_LIMIT", "unlimited")
    status, _ = _run_perf(cmd, signals, data, [_command_line(cmd)], env=env)
    if not data_written(data):
        raise RecordError("perf record failed (exit status %d): its "
                          "messages are above" % status)
    if status != 0:
        note("the command ended with status %d" % status if status > 0
             else "the command ended with signal %d" % -status)
    return False, ("the command ended before perf took one (it needs "
                   "1/HZ s of CPU time)")


def _record_pids(perf, args, outputs, signals):
    """perf record -p of --pid [--children], the trampoline turned on for
    the recording where it was off.  Returns (perf script's --force, what
    no sample means)."""
    targets = _Targets(args.pid, args.children, args.record_lines)
    data = outputs.staged("data")
    cmd = (_perf_record_cmd(perf, args, targets.interpreters, targets.others,
                            data)
           + ["-p", ",".join(str(p) for p in targets.pids)])
    which = ("the process" if len(targets.pids) == 1 else "the processes")
    if args.duration is None:
        until = "recording until Ctrl-C, or until %s %s" % (
            which, "exits" if len(targets.pids) == 1 else "exit")
    else:
        until = "recording for %g s" % args.duration
    # (all of them until _activate() has said which it reached: a signal
    # may come while the requests are out)
    turned_on = list(targets.to_activate)
    # {backend: pids}, as for turned_on
    lines_on = dict(targets.to_add_lines)
    maps = _Maps()

    def before_stop():
        try:
            pids = targets.pids + started_since(targets.pids, targets.known)
        except Exception as exc:
            # (a best effort: the recording is what matters)
            note("could not list the processes started since: %s" % exc)
            pids = targets.pids
        _seal(pids)
        maps.hold(pids)

    try:
        turned_on, refused = _activate(targets.to_activate,
                                       args.record_lines)
        for backend, pids in sorted(targets.to_add_lines.items()):
            if refused is None:
                lines_on[backend], refused = _activate(
                    pids, True, "lines turned on", backend)
            else:
                lines_on[backend] = []
        if refused is not None:
            raise RecordError("cannot turn the trampoline on: %s"
                              % refused.text)
        maps.hold(targets.pids)
        status, err = _run_perf(
            cmd, signals, data, [_command_line(cmd), until],
            stop_after=args.duration, capture=True, before_stop=before_stop)
        maps.write()
    finally:
        # Plain stores, with no call before them: the interpreter runs a
        # signal handler only at calls and backward jumps, so no Stopped
        # can come between the end of the try and the restore (a
        # context manager's calls would leave it room).
        previous, signals.mode = signals.mode, "ignore"
        try:
            _restore(turned_on, targets.known)
            for backend, pids in sorted(lines_on.items()):
                _restore(pids, targets.known, lines_only=True,
                         backend=backend)
        finally:
            maps.close()
            signals.mode = previous
    if not data_written(data):
        raise RecordError("perf record failed (exit status %d): %s"
                          % (status, _perf_error(err)))
    # perf ignores the maps that root did not write unless forced
    force = os.geteuid() == 0 and bool(targets.uids - {0})
    return force, ("%s ran no code on a CPU while recorded (idle?): record "
                   "while %s busy" % (which, "it is" if which ==
                                      "the process" else "they are"))


def _write_outputs(perf, args, outputs, collapse, template, force, idle):
    """perf script and the conversions, into the staging directory, then
    each file moved into place (NAME.data by the caller).  Returns (the
    kinds written, samples, samples with Python functions)."""
    staged = outputs.staged
    raw = staged("txt")
    if args.python:
        raw = os.path.join(outputs.staging, "perf-script.txt")
    _perf_script(perf, staged("data"), raw, force)
    samples, named = count_samples(raw)
    kinds = ["txt"]
    if samples == 0:
        skipped = [outputs.final[k] for k, wanted in
                   (("folded", args.python), ("html", args.flamegraph))
                   if wanted]
        note("no samples were recorded: %s%s" % (idle, (
            "; nothing to fold, so no %s" % " or ".join(skipped))
            if skipped else ""))
        if raw != staged("txt"):
            os.rename(raw, staged("txt"))
    elif collapse is not None:
        wanted = {}
        if args.python:
            wanted = dict(folded=staged("folded"), script=staged("txt"))
            kinds.append("folded")
        if args.flamegraph:
            wanted["html"] = staged("html")
            kinds.append("html")
        try:
            collapse.convert(raw, template=template,
                             python_level=args.python, lines=args.lines,
                             warn=note, **wanted)
        except (collapse.CollapseError, OSError) as exc:
            raise RecordError("cannot convert %s: %s"
                              % (outputs.final["txt"], exc))
        if args.python:
            # what is reported is the text written: the Python-level one
            samples, named = count_samples(staged("txt"))
    for kind in kinds:
        outputs.commit(kind)
    return kinds, samples, named


def _report(files, kinds, samples, named):
    """What was written (`files[kind]` for each of `kinds`), and how to
    open each."""
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
    written = [files[kind] for kind in kinds]
    width = max(len(path) for path in written)
    for path in written:
        print("wrote %-*s  open: %s" % (width, path, how[path]), flush=True)
