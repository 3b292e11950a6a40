"""Tests for the perf trampolines (cpython-perf): -X perf, -X perf_jit,
PYTHONPERFSUPPORT, PYTHON_PERF_JIT_SUPPORT, sys.activate_stack_trampoline()
and friends, one module per concern:

  test_profiling        sampling with the real perf record / perf script
  test_disassembly      the evaluator disassembly and clone-name checks
  test_map_file         /tmp/perf-PID.map
  test_process_shapes   forks, perf attached later, embedding, other writers
  test_helpers          the readers and cleanup of test.support.perf_helper
  test_jitdump          /tmp/jit-PID.dump, and profiling with perf inject --jit
  test_arena_files      /tmp/py-perf-PID-N.so, the trampolines' ELF files, and
                        DWARF unwinding through them without inject
  test_sys_api          the sys functions
  test_child_processes  the options children inherit
  test_hostile_input    bad values, the sys functions from unusual places
  test_hostile_system   hostile /tmp, limits, signals
  test_recursion        deep recursion
  test_build            what the build reports

The profiling tests run the real `perf record` / `perf script` and are
skipped only when a probe shows that perf cannot sample on this machine
(the probes, the readers of the files and the cleanup helpers are in
test.support.perf_helper; what only these modules share is in _common).
Each module runs the probes in its setUpModule() (once per process: their
answers are kept).  Every test removes the perf.data files and the /tmp
files of the processes it started, and only those.
"""

import os
import unittest

from test import support
from test.support import load_package_tests

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")


def load_tests(*args):
    return load_package_tests(os.path.dirname(__file__), *args)
