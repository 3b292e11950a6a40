"""python -m perf_trampoline clean: remove the perf files of processes
that have ended.

    python -m perf_trampoline clean [--dry-run]

What it removes
---------------
A process profiled with perf leaves files in /tmp that nobody removes:
its perf map /tmp/perf-PID.map and jitdump /tmp/jit-PID.dump, its
trampoline files /tmp/py-perf-PID-N.so (Python/perf_elf.c), and the
/tmp/jitted-PID-N.so files that `perf inject --jit` wrote next to the
dump.  `clean` removes those of a process that no longer runs, whichever
program wrote them (perf reads a JIT's map the same way, and a stale one
misnames the samples of the next process that gets the pid).  A name
counts only when it is exactly one of these four, PID and N in plain
ASCII decimal without leading zeros, as the writers print them, and PID
at most 4194304 (the kernel's limit): perf-12a.map, perf-01.map,
perf-1.map.bak and py-perf-1.so are someone else's.

A file is removed only when all of these hold, checked in this order:

1. lstat() says it is a regular file: a symlink is never followed nor
   removed (our writers never make one; a link with such a name was
   made on purpose, for example to show perf the map of a process in a
   container under its host pid, and removing it frees nothing), and
   neither is a directory, FIFO, socket or device;
2. the file belongs to the effective uid of the caller: to root, when
   root runs it, never to another user (in a directory without the
   sticky bit a user could remove another's file; root always could);
3. the pid does not run: os.kill(pid, 0) fails with ESRCH and /proc/PID
   does not exist (EPERM means a process of another user; a zombie
   counts as running, and so does a thread id).  How old the file is
   does not matter: a file of a pid that runs now may be the new
   process's, or be reused by it in place (Python/perf_file.c empties a
   stale map and writes on);
4. no live process holds the writer's lock: Python/perf_file.c keeps an
   exclusive flock() on the map and the dump while it writes them, so
   the file is opened (O_NOFOLLOW, O_NONBLOCK), checked to be the inode
   that lstat() saw, and locked with LOCK_NB; a lock held elsewhere
   leaves the file alone.  This also protects the map and the dump of a
   process of another pid namespace that shares /tmp, while it has them
   open;
5. with the lock held, the pid still does not run and lstat() still
   finds the same (device, inode); then the name is unlinked, and the
   lock goes with the descriptor, closed last.

The order closes the races that matter.  A new process that gets the pid
after step 3 and opens its stale map in place finds it locked (its
writer leaves a locked file alone, with a warning, visible, rather than
writing into a file that is about to go) or finds it gone and makes a
new one; one that creates a new file (the trampoline files are always
new: O_EXCL, and the next N when a name is taken) makes another inode,
which step 5 does not match.  What remains is the time between the last
lstat() and unlink(): unlink() takes a name, not an inode, so if someone
else removed the file and a new process with the pid created one of the
same name in those microseconds (two cleaners at once, and a pid that
came round again), that one would go.  A file that the caller may not
open for reading (mode 0200, say, and the caller not root) skips step 4:
no writer of the same user could have opened it either (the writer opens
its file for reading and writing).

Not solved: pids are the caller's pid namespace's.  A process in a
container writes its files with its own pid (often 1) in its own /tmp;
when that is the host's /tmp too, the host sees a pid that is not the
process's, and only the lock (the map and the dump while open) protects
its files.  Its trampoline files, and all of them after it closed the
map, look like those of an ended process.  Give such containers a /tmp
of their own, or do not run `clean` while they run.

Output: each path removed, one per line, then "removed N files, B bytes
freed": the disk blocks of the files that had no other link.  A file
that perf's build-id cache (~/.debug) hard-linked keeps its blocks
there, and the summary says how many.  --dry-run prints each path that
would be removed, and nothing else: it makes every check, the lock
included (held for the moment it takes), and leaves out only unlink().
Each failure is one line on stderr, exit status 1, and the other files
are still done; nothing to remove is success (0).

--dir DIR (hidden) cleans another directory, for the tests, which must
not remove other processes' files in the shared /tmp; the pids are still
the caller's, so it is no way to clean a container's /tmp.

Runs under any Python 3 from 3.6 on, like Lib/perf_trampoline.py.
"""

import argparse
import collections
import errno
import fcntl
import os
import re
import stat
import sys

__all__ = ["TMP", "CleanError", "Removal", "pid_of", "is_running", "clean",
           "add_parser", "run"]

TMP = "/tmp"
# The kernel's highest pid (PID_MAX_LIMIT on 64-bit Linux).
MAX_PID = 4 * 1024 * 1024

_PID = r"([1-9][0-9]{0,6})"
_N = r"(?:0|[1-9][0-9]{0,19})"
# The writers: perf-%ld.map, jit-%ld.dump (Python/perf_map.c,
# Python/perf_jit_trampoline.c), py-perf-%ld-%u.so (Python/perf_elf.c),
# jitted-%d-%llu.so (perf inject --jit).
_NAME = re.compile(r"perf-%s\.map|jit-%s\.dump|py-perf-%s-%s\.so"
                   r"|jitted-%s-%s\.so" % (_PID, _PID, _PID, _N, _PID, _N))

# One file: `path`, removed (or, with dry_run, to be); `freed`, its disk
# bytes when it had no other link, else 0; `linked`, whether it had.
# A failure has `error`, a one-line message, and removed False.
Removal = collections.namedtuple("Removal",
                                 "path removed freed linked error")


class CleanError(Exception):
    """The directory cannot be read: one-line message."""


def pid_of(name):
    """The pid in `name` if it is one of the four names, else None."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    pid = int(next(g for g in m.groups() if g is not None))
    return pid if pid <= MAX_PID else None


def is_running(pid):
    """Whether a process (or thread) `pid` exists in our pid namespace.
    Anything but a clear "no such process" counts as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass
    except OSError:
        return True     # EPERM: another user's process
    else:
        return True
    return os.path.lexists("/proc/%d" % pid)


def _same(before, now):
    return (before.st_dev == now.st_dev and before.st_ino == now.st_ino
            and stat.S_ISREG(now.st_mode) and now.st_uid == before.st_uid)


def _lstat(name, dfd):
    return os.stat(name, dir_fd=dfd, follow_symlinks=False)


def _error(path, what, exc):
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    hint = ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        hint = (" (check the permissions of %s and the file's attributes"
                " with lsattr)" % os.path.dirname(path))
    elif exc.errno == errno.EROFS:
        hint = " (the file system is read-only)"
    return Removal(path, False, 0, False,
                   "cannot %s %s: %s%s" % (what, path, why, hint))


def _clean_one(dfd, directory, name, pid, dry_run, running):
    """The Removal of one file, or None to leave it (not ours, in use,
    gone or changed).  Steps as the module's docstring numbers them."""
    path = os.path.join(directory, name)
    euid = os.geteuid()
    try:
        st = _lstat(name, dfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _error(path, "examine", exc)
    # 1 and 2.
    if not stat.S_ISREG(st.st_mode) or st.st_uid != euid:
        return None
    # 3.
    if running(pid):
        return None
    # 4.
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None             # gone, or a symlink now
        if exc.errno != errno.EACCES:
            return _error(path, "open", exc)
        fd = None                   # no writer of ours opened it either
    try:
        if fd is not None:
            if not _same(st, os.fstat(fd)):
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return None     # a live process holds it
                # (ENOLCK, ...: no writer could have locked it either.)
        # 5.
        if running(pid):
            return None
        try:
            now = _lstat(name, dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return _error(path, "examine", exc)
        if not _same(st, now):
            return None
        if not dry_run:
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                return _error(path, "remove", exc)
        linked = now.st_nlink > 1
        freed = 0 if linked else now.st_blocks * 512
        return Removal(path, True, freed, linked, None)
    finally:
        if fd is not None:
            os.close(fd)


def clean(directory=TMP, dry_run=False, names=None, running=is_running):
    """Remove the stale perf files in `directory` (see the module's
    docstring), or with `dry_run` only find them.  `names`, a set of file
    names, limits it to those (the tests use it on /tmp, for the files
    their processes made).  `running(pid)` tells whether a pid runs.
    Yields a Removal per file removed (or to be) and per failure, sorted
    by pid, then name.  Raises CleanError if the directory cannot be
    read."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY
                      | os.O_CLOEXEC)
        try:
            listed = os.listdir(dfd)
        except OSError:
            os.close(dfd)
            raise
    except OSError as exc:
        raise CleanError("cannot read the directory %s: %s"
                         % (directory, os.strerror(exc.errno)))
    try:
        found = []
        for name in listed:
            pid = pid_of(name)
            if pid is not None and (names is None or name in names):
                found.append((pid, name))
        for pid, name in sorted(found):
            removal = _clean_one(dfd, directory, name, pid, dry_run, running)
            if removal is not None:
                yield removal
    finally:
        os.close(dfd)


def add_parser(sub):
    """Add the 'clean' subcommand to the subparsers `sub` of
    perf_trampoline.main(); its handler returns the exit status."""
    p = sub.add_parser(
        "clean", help="remove the perf files in /tmp of your processes "
        "that have ended",
        description="Remove /tmp/perf-PID.map, /tmp/jit-PID.dump, "
        "/tmp/py-perf-PID-N.so and /tmp/jitted-PID-N.so (perf inject's) "
        "of processes that no longer run: only regular files of your user "
        "(of root, as root), never a symlink's target, never a file of a "
        "running pid or one that a live process holds.  Run it once the "
        "recordings that needed them have been reported.  Prints each "
        "path removed and the bytes freed.",
        epilog="Exit status: 0, also when there was nothing to remove; 1 "
        "when a file or /tmp could not be read or removed (the other files "
        "are still done).")
    p.add_argument("--dry-run", action="store_true",
                   help="only list the files that would be removed, one "
                        "path per line")
    # For the tests: a private directory instead of the shared /tmp.
    p.add_argument("--dir", default=TMP, help=argparse.SUPPRESS)
    p.set_defaults(run=run)
    return p


def run(args):
    removed = freed = linked = failed = 0
    try:
        for r in clean(args.dir, dry_run=args.dry_run):
            if r.error is not None:
                failed += 1
                print(r.error, file=sys.stderr, flush=True)
                continue
            print(r.path, flush=True)
            removed += 1
            freed += r.freed
            linked += r.linked
    except CleanError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    except BrokenPipeError:
        # The reader went (`clean --dry-run | head -1`): stop quietly, and
        # let the interpreter's last flush of stdout go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    if not args.dry_run:
        line = "removed %d file%s, %d bytes freed" % (
            removed, "" if removed == 1 else "s", freed)
        if linked:
            line += ("; %d had another link (perf's build-id cache "
                     "~/.debug?), whose disk stays used" % linked)
        print(line, flush=True)
    return 1 if failed else 0
