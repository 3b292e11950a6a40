"""Run a workload in stock 3.11 with or without the stand-in for
upstream's mechanism (pep523_hook.c) installed.

    REFERENCE_HOOK_DIR=DIR [REFERENCE_HOOK=1] python run_hooked.py WORKLOAD [ARG...]

Both ways import the module and compile the workload here, so that they
differ only in the hook: bench/run.py divides the difference by the
instructions of the workload run plainly.
"""
import os
import sys

sys.path.insert(0, os.environ["REFERENCE_HOOK_DIR"])
import pep523_hook

path = sys.argv[1]
sys.argv = sys.argv[1:]
with open(path) as f:
    code = compile(f.read(), path, "exec")
if os.environ.get("REFERENCE_HOOK") == "1":
    pep523_hook.install()
exec(code, {"__name__": "__main__", "__file__": path})
