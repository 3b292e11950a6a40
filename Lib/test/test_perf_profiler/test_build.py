"""The build reports the trampoline and documents the options."""

import os
import sys
import unittest

from test.support.perf_helper import (
    run_python)
# (setUpModule runs the probes of perf_helper for this module's tests.)
from ._common import (
    setUpModule, tearDownModule)


class TestBuild(unittest.TestCase):

    @unittest.skipUnless(sys.platform == "linux" and os.uname().machine
                         in ("x86_64", "aarch64", "riscv64"),
                         "the trampoline is built on Linux x86_64, aarch64 "
                         "and riscv64")
    def test_sysconfig_reports_trampoline(self):
        proc = run_python("-m", "sysconfig")
        self.assertIn('PY_HAVE_PERF_TRAMPOLINE = "1"', proc.stdout)

    def test_help_mentions_option_and_variable(self):
        proc = run_python("--help-all")
        text = proc.stdout
        self.assertIn("-X perf", text)
        self.assertIn("PYTHONPERFSUPPORT", text)


if __name__ == "__main__":
    unittest.main()
