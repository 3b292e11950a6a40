"""Whether the test tools can give a run a /tmp of its own.

A run with a private /tmp (unshare --mount, then a directory of the run
bind-mounted on /tmp) leaves nothing in the /tmp that other programs share,
and finds only its own perf files there.  It is possible where this user
may make a mount namespace and where none of the paths the run needs (the
interpreters, this checkout, the output directory) lives under /tmp, which
the bind mount would hide.
"""

import os
import subprocess


def _under_tmp(path):
    path = os.path.realpath(path)
    return path == "/tmp" or path.startswith("/tmp/")


def possible(paths):
    """True if a run that needs `paths` (and the current directory) can
    have a private /tmp."""
    if any(_under_tmp(p) for p in list(paths) + [os.getcwd()]):
        return False
    try:
        r = subprocess.run(["unshare", "--mount", "true"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    except OSError:
        return False
    return r.returncode == 0
