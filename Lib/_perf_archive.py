"""python -m perf_trampoline archive: pack what a recording needs to be
reported on another machine, the trampoline files included.

    python -m perf_trampoline archive [--buildid-dir DIR] [DATA]

Why not perf archive
--------------------
`perf archive DATA` packs the files of perf's build-id cache (~/.debug)
that the recording's samples *hit*, which perf counts by each sample's
own address only (`perf buildid-list --with-hits`).  A trampoline is
never the innermost frame of a sample (it calls the evaluator at once),
so no trampoline file /tmp/py-perf-PID-N.so is ever hit, and a report of
perf archive's tarball on another machine, or after the files have left
/tmp, names no Python function.  `archive` packs every file that the
recording lists (`perf buildid-list`, which a recording made with
`--buildid-all`, as `python -m perf_trampoline record` makes them, fills
with every file the processes mapped), in perf archive's layout: unpack
it with `tar xf DATA.tar.bz2 -C ~/.debug` where the report is made.

A listed file that is not in the cache (a recording made without
--buildid-all) is added to it first from its path (`perf buildid-cache
--add`), when the file is still there and still has the build-id the
recording saw; otherwise it is named as missing (its frames will be
unnamed elsewhere) and the rest is packed.

The tarball is written as a new file beside DATA (mkstemp: mode 0600,
never following a link) and renamed into place.

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py:
%-formatting, no f-strings, the standard library only.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

# (perf's own default; `perf config buildid.dir` may say otherwise, and
# --buildid-dir then says where)
DEFAULT_BUILDID_DIR = "~/.debug"
PERF_TIMEOUT = 600


class ArchiveError(Exception):
    """One line that says what failed, and what to do."""


def add_parser(sub):
    """Add the 'archive' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser(
        "archive", help="pack a recording's files, the trampoline files "
        "included, for a report on another machine",
        description="Pack into DATA.tar.bz2 every file that the recording "
        "DATA lists, from perf's build-id cache, in the layout of perf "
        "archive (which leaves out the trampoline files: no sample's own "
        "address is ever in one).  Unpack it with `tar xf DATA.tar.bz2 -C "
        "~/.debug` where the report is made.",
        epilog="Exit status: 0 when the tarball was written (files that "
        "could not be found are named on stderr), 1 otherwise.")
    p.add_argument("data", nargs="?", default="perf.data", metavar="DATA",
                   help="the recording (default perf.data)")
    p.add_argument("--buildid-dir", metavar="DIR",
                   default=DEFAULT_BUILDID_DIR,
                   help="perf's build-id cache (default %(default)s)")
    p.set_defaults(run=run)
    return p


def run(args):
    try:
        path, packed, missing = archive(args.data, args.buildid_dir)
    except ArchiveError as exc:
        print("archive: %s" % exc, file=sys.stderr, flush=True)
        return 1
    for name in missing:
        print("archive: not in perf's build-id cache, nor at its path with "
              "the build-id recorded: %s (its frames will be unnamed "
              "elsewhere)" % name, file=sys.stderr, flush=True)
    print("wrote %s  %d files; where the report is made: tar xf %s -C "
          "~/.debug, then perf report -i %s"
          % (path, packed, path, args.data), flush=True)
    return 0


def _perf(cache, *args):
    perf = shutil.which("perf")
    if perf is None:
        raise ArchiveError("perf is not installed (or not on PATH)")
    try:
        return subprocess.run([perf, "--buildid-dir", cache] + list(args),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              universal_newlines=True,
                              timeout=PERF_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ArchiveError("perf %s did not end in %d s"
                           % (args[0], PERF_TIMEOUT))


def listed(data, cache):
    """[(build-id, name)] of the recording `data`."""
    if not os.path.isfile(data):
        raise ArchiveError("%s: no such recording" % data)
    proc = _perf(cache, "buildid-list", "-i", data)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no message"]
        raise ArchiveError("perf buildid-list -i %s failed: %s"
                           % (data, lines[-1]))
    entries = []
    for line in proc.stdout.splitlines():
        build_id, _, name = line.strip().partition(" ")
        if len(build_id) >= 2 and name and all(
                c in "0123456789abcdef" for c in build_id):
            entries.append((build_id, name))
    return entries


def _link(cache, build_id):
    return os.path.join(cache, ".build-id", build_id[:2], build_id[2:])


def _build_id_of(cache, path):
    """The build-id of the ELF file `path`, as perf reads it, or None."""
    proc = _perf(cache, "buildid-list", "-i", path)
    words = proc.stdout.split()
    return words[0] if proc.returncode == 0 and words else None


def _add_to_cache(cache, build_id, name):
    """Add the file `name` to the cache if it still has `build_id`."""
    if not os.path.isabs(name) or not os.path.isfile(name):
        return False
    if _build_id_of(cache, name) != build_id:
        return False
    proc = _perf(cache, "buildid-cache", "--add", name)
    return proc.returncode == 0 and os.path.lexists(_link(cache, build_id))


def archive(data, cache):
    """Write DATA.tar.bz2; returns (its path, files packed, names
    missing)."""
    cache = os.path.realpath(os.path.expanduser(cache))
    members = []
    missing = []
    for build_id, name in listed(data, cache):
        link = _link(cache, build_id)
        if not os.path.lexists(link) and not _add_to_cache(cache, build_id,
                                                           name):
            missing.append(name)
            continue
        target = os.path.realpath(link)
        if not target.startswith(cache + os.sep) or not os.path.exists(
                target):
            missing.append(name)
            continue
        members.append(os.path.relpath(link, cache))
        members.append(os.path.relpath(target, cache))
    if not members:
        raise ArchiveError("%s lists no file that perf's build-id cache %s "
                           "holds: record with --buildid-all (python -m "
                           "perf_trampoline record does), or give the "
                           "cache with --buildid-dir" % (data, cache))
    out = data + ".tar.bz2"
    directory = os.path.dirname(os.path.abspath(out))
    try:
        fd, staged = tempfile.mkstemp(prefix=".perf-archive-",
                                      dir=directory)
    except OSError as exc:
        raise ArchiveError("cannot write in %s: %s"
                           % (directory, exc.strerror or exc))
    try:
        with os.fdopen(fd, "wb") as f:
            with tarfile.open(fileobj=f, mode="w:bz2") as tar:
                for member in members:
                    tar.add(os.path.join(cache, member), arcname=member)
        os.replace(staged, out)
    except OSError as exc:
        os.unlink(staged)
        raise ArchiveError("cannot write %s: %s" % (out, exc.strerror or exc))
    except BaseException:
        os.unlink(staged)
        raise
    return out, len(members) // 2, missing
