"""Turn the perf trampoline on or off in running Python processes.

    python -m perf_trampoline activate [--backend perf|perf_jit]
                                       [--lines | --no-lines]
                                       [--children] [--wait] [--timeout S]
                                       PID...
    python -m perf_trampoline deactivate [--children] [--wait]
                                         [--timeout S] PID...
    python -m perf_trampoline status [--children] PID...
    python -m perf_trampoline record ...   (Lib/_perf_record.py)
    python -m perf_trampoline collapse ... (Lib/_perf_collapse.py)
    python -m perf_trampoline clean ...    (Lib/_perf_clean.py)

The requester itself is Lib/_perf_live.py (its docstring gives the
design); this module is its command line and re-exports its public names
(__all__), which Doc/library/perf_trampoline.rst documents.  Run as
`python -m perf_trampoline`, this module is __main__, and the modules of
the other commands import _perf_live, never this one: no second copy.
Runs under any Python 3 from 3.6 on, like _perf_live.
"""

import argparse
import sys

import _perf_live
from _perf_live import *  # noqa: F401,F403 (the public names)
from _perf_live import (BACKEND_CODES, CLI_TIMEOUT, EXIT_PENDING,
                        REQ_DEACTIVATE, REQ_SEAL, WAIT_TIMEOUT, _seconds,
                        activation_code, children_of, request_all, status)

__all__ = _perf_live.__all__ + ["main"]


def _with_children(pids, children):
    if not children:
        return pids
    out = []
    for p in pids:
        for q in [p] + children_of(p):
            if q not in out:
                out.append(q)
    return out


def _add_live_parsers(sub):
    """The commands of live activation: activate, deactivate, seal,
    status."""
    def common(p, timeout=True):
        p.add_argument("--children", action="store_true",
                       help="also reach every descendant of each PID "
                            "(for example a pre-fork server's workers)")
        if timeout:
            p.add_argument("--wait", action="store_true",
                           help="wait for every process to acknowledge: "
                                "a request still pending at the timeout "
                                "gives exit status %d" % EXIT_PENDING)
            p.add_argument("--timeout", type=_seconds, default=None,
                           metavar="S",
                           help="seconds to wait for the acknowledgements "
                                "(default %g, or %g with --wait); a process "
                                "that runs no Python code meanwhile keeps "
                                "the request pending and serves it when it "
                                "next does" % (CLI_TIMEOUT, WAIT_TIMEOUT))
        p.add_argument("pids", type=int, nargs="+", metavar="PID")

    exit_status = (
        "Exit status: 0 when every process acknowledged, or has the "
        "request pending (a process that runs no Python code now serves "
        "it when it next does: `activate PID && perf record ...` works on "
        "an idle server); 1 when any request failed; with --wait, %d when "
        "none failed but some are still pending." % EXIT_PENDING)
    p = sub.add_parser("activate", help="turn the trampoline on: each "
                       "process writes its perf map or jitdump",
                       description="Turn the perf trampoline on in each "
                       "process; prints one line per pid: the backend, the "
                       "file that perf reads, and '(lines on)' when the "
                       "process has lines on.", epilog=exit_status)
    p.add_argument("--backend", choices=sorted(BACKEND_CODES),
                   default="perf",
                   help="perf: /tmp/perf-PID.map, for frame-pointer "
                        "unwinding (default); perf_jit: /tmp/jit-PID.dump, "
                        "for --call-graph dwarf and perf inject --jit")
    lines = p.add_mutually_exclusive_group()
    lines.add_argument("--lines", dest="lines", action="store_const",
                       const=True, default=None,
                       help="with line trampolines: each Python frame in "
                            "perf's samples also carries the line it is on, "
                            "as with -X perf_lines (refused where the "
                            "interpreter has no lines); functions already "
                            "running keep the trampoline they have")
    lines.add_argument("--no-lines", dest="lines", action="store_const",
                       const=False,
                       help="without line trampolines.  Default: lines as "
                            "the process has them (off if the trampoline "
                            "was off)")
    common(p)
    p.set_defaults(run=_run_request)
    p = sub.add_parser("deactivate", help="turn the trampoline off",
                       description="Turn the perf trampoline off in each "
                       "process: functions entered afterwards run without "
                       "trampoline; the perf map keeps its records.",
                       epilog=exit_status)
    common(p)
    p.set_defaults(run=_run_request, backend=None)
    p = sub.add_parser("seal", help="give the trampoline files their "
                       "build-ids now (before perf record -p ends)",
                       description="Have each process seal the trampoline "
                       "file that still takes names: it gets its build-id, "
                       "which perf reads when its recording ends, and "
                       "keeps a copy of the file in its build-id cache "
                       "(with --buildid-all) for reports made after the "
                       "file is gone.  Later functions go to a new file.",
                       epilog=exit_status)
    common(p)
    p.set_defaults(run=_run_request, backend=None, seal=True)
    p = sub.add_parser("status", help="show what is active (only reads)",
                       description="Show, for each process, whether it "
                       "takes requests, the active backend and its file, "
                       "whether lines are on, and any pending request.  "
                       "Writes nothing.")
    common(p, timeout=False)
    p.set_defaults(run=_run_status)


def _run_status(args):
    failed = 0
    for pid in _with_children(args.pids, args.children):
        out = status(pid)
        print(out.text, flush=True)
        failed += not out.ok
    return 1 if failed else 0


def _run_request(args):
    """activate (args.backend set), deactivate or seal: one line per
    process."""
    if getattr(args, "seal", False):
        code = REQ_SEAL
    elif args.backend:
        code = activation_code(args.backend, args.lines)
    else:
        code = REQ_DEACTIVATE
    timeout = args.timeout
    if timeout is None:
        timeout = WAIT_TIMEOUT if args.wait else CLI_TIMEOUT
    failed = pending = 0
    pids = _with_children(args.pids, args.children)
    # (a seal still pending has not sealed: the recording that asks for
    # it is about to end)
    waits = args.wait or code == REQ_SEAL
    for out in request_all(pids, code, timeout):
        # Pending is delivered: a failure only to a caller who waits.
        delivered = out.ok or (out.pending and not waits)
        stream = sys.stdout if delivered else sys.stderr
        print(out.text, file=stream, flush=True)
        if out.pending:
            pending += 1
        elif not out.ok:
            failed += 1
    if failed:
        return 1
    return EXIT_PENDING if pending and waits else 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m perf_trampoline",
        description="Profile Python processes with Linux perf: turn the "
                    "perf trampoline on or off in running processes (as "
                    "if each ran sys.activate_stack_trampoline() or "
                    "sys.deactivate_stack_trampoline() itself), record a "
                    "command or a process, pack a recording for another "
                    "machine, fold perf script text into stacks, and "
                    "remove the files of ended processes.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_live_parsers(sub)
    # The commands that work with perf itself and with its files, each in
    # a module of its own that adds its parser (whose handler `run` gives
    # the exit status).
    import _perf_archive
    import _perf_clean
    import _perf_collapse
    import _perf_record
    for module in (_perf_record, _perf_archive, _perf_collapse, _perf_clean):
        module.add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
