"""Tests of `python -m perf_trampoline collapse` and Lib/_perf_collapse.py:
reading `perf script` text (hand-written texts with the lines perf can
print), folded stacks, the Python-level view, the Python-level `perf
script` text, the HTML flame graph, the command line, and a real
recording (perf record of this interpreter with -X perf: -g where it has
frame pointers, --call-graph dwarf where it has not) of Python calling a
C extension (_bisect, _heapq) that calls Python back.
"""

import json
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import time
import types
import unittest

from test import support
from test.support import os_helper
from test.support import perf_helper
from test.support.perf_helper import (
    HAVE_FRAME_POINTERS, HAVE_TRAMPOLINE, NESTED, NO_TRAMPOLINE, env_with,
    forget_files, parse_perf_script, perf_command, script_pid)

import _perf_collapse
from _perf_collapse import CollapseError, convert, find_template

if not support.has_subprocess_support:
    raise unittest.SkipTest("test requires subprocess support")


def tearDownModule():
    perf_helper.teardown_module()


PY = "/usr/bin/python3.11"
EXT = "/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so"


def sample(header, *frames):
    """A sample block: the header and its frame lines, innermost first
    (each "symbol (dso)" or a whole line given with its tab)."""
    lines = [header]
    for i, frame in enumerate(frames):
        lines.append(frame if frame.startswith("\t")
                     else "\t%16x %s" % (0x1000 + i, frame))
    return "\n".join(lines) + "\n\n"


HEADER = "python 4242 100.000001:    1001001 cpu-clock: "

# py::bar calls py::foo through the evaluator and our call path; foo is
# in the evaluator, which is in PyNumber_Add.
NESTED_SAMPLE = sample(
    HEADER,
    "PyNumber_Add+0x12 (%s)" % PY,
    "_PyEval_EvalFrameDefault+0x2e03 (%s)" % PY,
    "py::foo:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "eval_frame_new_code+0x73 (%s)" % PY,
    "_PyEval_EvalFrameDefault+0x92d6 (%s)" % PY,
    "py::bar:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "eval_frame_new_code+0x73 (%s)" % PY,
    "PyEval_EvalCode+0x174 (%s)" % PY,
    "main+0x1 (%s)" % PY)
NESTED_LEVEL = ("python;main;PyEval_EvalCode;eval_frame_new_code;"
                "py::bar:/app/x.py;py::foo:/app/x.py;"
                "_PyEval_EvalFrameDefault;PyNumber_Add")
NESTED_ALL = ("python;main;PyEval_EvalCode;eval_frame_new_code;"
              "py::bar:/app/x.py;_PyEval_EvalFrameDefault;"
              "eval_frame_new_code;py::foo:/app/x.py;"
              "_PyEval_EvalFrameDefault;PyNumber_Add")

# A C extension between two Python functions: numpy calls py::key back
# through the interpreter's call path.  The extension's own frames stay,
# even one named like call machinery and a CPython inline function
# inlined into it (DWARF's "(inlined)" frames belong to the next real
# frame's object).
EXTENSION_SAMPLE = sample(
    HEADER,
    "_PyEval_EvalFrameDefault.cold+0x10 (%s)" % PY,
    "py::key:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "call_trampoline+0x36 (inlined)",
    "_PyPerfTrampoline_EvalFrame+0x36 (%s)" % PY,
    "_PyEval_EvalFrame+0x9a (inlined)",
    "_PyEval_Vector+0x9a (%s)" % PY,
    "_PyObject_VectorcallTstate+0x55 (inlined)",
    "PyObject_CallOneArg+0x55 (%s)" % PY,
    "PyObject_Vectorcall@plt+0x0 (%s)" % EXT,
    "_PyObject_VectorcallTstate+0x20 (inlined)",
    "npy_sort_key+0x15a (%s)" % EXT,
    "cfunction_vectorcall_FASTCALL_KEYWORDS+0x52 (%s)" % PY,
    "PyObject_Vectorcall+0x2d (%s)" % PY,
    "_PyEval_EvalFrameDefault+0x40e9 (%s)" % PY,
    "py::search:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "main (%s)" % PY)
EXTENSION_LEVEL = ("python;main;py::search:/app/x.py;npy_sort_key;"
                   "_PyObject_VectorcallTstate;PyObject_Vectorcall@plt;"
                   "py::key:/app/x.py;_PyEval_EvalFrameDefault.cold")

# sorted() calling a key function: builtin_sorted and list_sort_impl are
# the user's call and stay, the call protocol around them goes.
SORTED_SAMPLE = sample(
    HEADER,
    "_PyEval_EvalFrameDefault+0x1 (%s)" % PY,
    "py::key:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "_PyPerfTrampoline_EvalFrame+0x33 (%s)" % PY,
    "_PyEval_Vector+0xa3 (%s)" % PY,
    "PyObject_CallOneArg+0x45 (%s)" % PY,
    "list_sort_impl+0x2b7 (%s)" % PY,
    "list_sort+0x1c (%s)" % PY,
    "builtin_sorted+0xa6 (%s)" % PY,
    "cfunction_vectorcall_FASTCALL_KEYWORDS+0x52 (%s)" % PY,
    "PyObject_Vectorcall+0x2d (%s)" % PY,
    "_PyEval_EvalFrameDefault+0x5250 (%s)" % PY,
    "py::srt:/app/x.py+0x6 (/tmp/py-perf-4242-0.so)",
    "eval_frame_new_code+0x73 (%s)" % PY)
SORTED_LEVEL = ("python;eval_frame_new_code;py::srt:/app/x.py;"
                "builtin_sorted;list_sort;list_sort_impl;py::key:/app/x.py;"
                "_PyEval_EvalFrameDefault")


def folded_of(text, **kw):
    """{stack: count} of convert() on `text` (a str, or bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.txt")
        out = os.path.join(tmp, "out.folded")
        with open(src, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        n = convert(src, folded=out, **kw)
        with open(out, "rb") as f:
            data = f.read()
    result = {}
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        stack, count = line.rsplit(" ", 1)
        result[stack] = int(count)
    assert sum(result.values()) == n, (result, n)
    return result


def is_subsequence(short, long):
    it = iter(long)
    return all(line in it for line in short)


class FoldingTests(unittest.TestCase):

    def test_nested_python_level(self):
        self.assertEqual(folded_of(NESTED_SAMPLE * 3), {NESTED_LEVEL: 3})

    def test_nested_all_frames(self):
        self.assertEqual(folded_of(NESTED_SAMPLE, python_level=False),
                         {NESTED_ALL: 1})

    def test_extension_kept_between_python_frames(self):
        self.assertEqual(folded_of(EXTENSION_SAMPLE), {EXTENSION_LEVEL: 1})

    def test_user_call_kept(self):
        self.assertEqual(folded_of(SORTED_SAMPLE), {SORTED_LEVEL: 1})

    def test_one_python_frame_keeps_everything(self):
        text = sample(HEADER,
                      "_PyEval_EvalFrameDefault+0x1 (%s)" % PY,
                      "py::foo:/app/x.py+0x6 (/tmp/perf-4242.map)",
                      "_PyEval_Vector+0x1 (%s)" % PY,
                      "PyObject_Call+0x1 (%s)" % PY)
        self.assertEqual(folded_of(text), {
            "python;PyObject_Call;_PyEval_Vector;py::foo:/app/x.py;"
            "_PyEval_EvalFrameDefault": 1})

    def test_embedding_application(self):
        # The evaluator in an object named otherwise makes it the
        # interpreter; the application's own function stays.
        app = "/usr/bin/uwsgi"
        text = sample(HEADER,
                      "py::foo:/app/x.py (/tmp/perf-4242.map)",
                      "eval_frame_new_code (%s)" % app,
                      "uwsgi_request_hook (%s)" % app,
                      "_PyEval_EvalFrameDefault (%s)" % app,
                      "py::bar:/app/x.py (/tmp/perf-4242.map)")
        self.assertEqual(folded_of(text), {
            "python;py::bar:/app/x.py;uwsgi_request_hook;"
            "py::foo:/app/x.py": 1})

    def test_shared_libpython(self):
        lib = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
        text = sample(HEADER,
                      "py::foo:/app/x.py (/tmp/perf-4242.map)",
                      "slot_tp_richcompare (%s)" % lib,
                      "do_richcompare (inlined)",
                      "PyObject_RichCompare (%s)" % lib,
                      "siftdown (/usr/lib/python3.11/_heapq.so)",
                      "_PyEval_EvalFrameDefault (%s)" % lib,
                      "py::bar:/app/x.py (/tmp/perf-4242.map)")
        self.assertEqual(folded_of(text), {
            "python;py::bar:/app/x.py;siftdown;py::foo:/app/x.py": 1})

    def test_unknown_frames_kept(self):
        text = sample(HEADER,
                      "py::foo:/app/x.py (/tmp/perf-4242.map)",
                      "[unknown] (%s)" % PY,
                      "[unknown] ([unknown])",
                      "[unknown] (/usr/lib/libfoo.so.1)",
                      "_PyEval_EvalFrameDefault (%s)" % PY,
                      "py::bar:/app/x.py (/tmp/perf-4242.map)")
        self.assertEqual(folded_of(text), {
            "python;py::bar:/app/x.py;[libfoo.so.1];[unknown];[python3.11];"
            "py::foo:/app/x.py": 1})

    def test_line_trampolines(self):
        # With -X perf_lines a call is two frames of one function: its
        # trampoline's (at offset 0x1a) then its pad's (0x40 or more).
        # The pair is one frame; it is named with the pad's line, which
        # addr2line reads from the file, here missing: a warning, and the
        # names of a recording without lines.
        arena = "/nonexistent/py-perf-4242-0.so"
        text = sample(
            HEADER,
            "_PyEval_EvalFrameDefault+0x1 (%s)" % PY,
            "py::foo:/app/x.py+0x1a (%s)" % arena,
            "py::foo:/app/x.py+0x62 (%s)" % arena,
            "_PyEval_EvalFrameDefault+0x2 (%s)" % PY,
            "py::bar:/app/x.py+0x1a (%s)" % arena,
            "py::bar:/app/x.py+0x4d (%s)" % arena,
            "main+0x1 (%s)" % PY)
        # a pad alone: a sample taken as the evaluator starts (-g misses
        # the trampoline's return address)
        text += sample(
            HEADER,
            "_PyEval_EvalFrameDefault+0x1 (%s)" % PY,
            "py::foo:/app/x.py+0x62 (%s)" % arena,
            "main+0x1 (%s)" % PY)
        # a sample in the trampoline of foo called by foo: three frames of
        # foo, the first alone, the other two a pair
        text += sample(
            HEADER,
            "py::foo:/app/x.py+0x4 (%s)" % arena,
            "py::foo:/app/x.py+0x1a (%s)" % arena,
            "py::foo:/app/x.py+0x62 (%s)" % arena,
            "main+0x1 (%s)" % PY)
        # plain trampolines (16 bytes) are never pads
        text += sample(
            HEADER,
            "py::foo:/app/x.py+0x4 (/tmp/py-perf-4242-1.so)",
            "py::foo:/app/x.py+0x6 (/tmp/py-perf-4242-1.so)",
            "main+0x1 (%s)" % PY)
        warnings = []
        expected = {
            "python;main;py::bar:/app/x.py;py::foo:/app/x.py;"
            "_PyEval_EvalFrameDefault": 1,
            "python;main;py::foo:/app/x.py;_PyEval_EvalFrameDefault": 1,
            "python;main;py::foo:/app/x.py;py::foo:/app/x.py": 2}
        self.assertEqual(folded_of(text, warn=warnings.append), expected)
        self.assertEqual(warnings, [
            "Python frames named without their lines: cannot read the "
            "lines of %s: No such file or directory" % arena])
        warnings = []
        self.assertEqual(folded_of(text, lines=False, warn=warnings.append),
                         expected)
        self.assertEqual(warnings, [])
        # --all-frames: every frame, as perf showed it
        all_frames = folded_of(text, python_level=False)
        self.assertIn("python;main;py::bar:/app/x.py;py::bar:/app/x.py;"
                      "_PyEval_EvalFrameDefault;py::foo:/app/x.py;"
                      "py::foo:/app/x.py;_PyEval_EvalFrameDefault",
                      all_frames)

    def test_tricky_lines(self):
        text = (
            "# ========\n# captured on: today\n# ========\n#\n"
            # a command name with spaces, pid/tid, cpu, a kernel frame,
            # frames without offsets, odd spacing, CRLF, trailing blanks
            "Web Content 4242/4243 [001] 100.5: 1 cycles:u: \r\n"
            "\tffffffff8106fc04 native_write_msr+0x4 ([kernel.kallsyms])\n"
            "\t   7f00 ns::f(int, char const*) const+0x12 "
            "(/opt/my lib (v2)/libx.so)\r\n"
            "\t\t 7f01   main   (/usr/bin/firefox)   \n"
            "\n"
            # a padded command name, a path with ";" in a perf map name
            "         swapper     0 [000]  101.000000: 1 cpu-clock: \n"
            "\t  5c6 py::f:/tmp/a;b.py+0x6 (/tmp/perf-0.map)\n"
            "\t  5c7 start_kernel ([kernel.kallsyms])\n"
            "   \n"
            # a source line (perf script -F +srcline) is not a frame
            "python 4242 102.0: 1 cpu-clock: \n"
            "\t 1000 PyNumber_Add+0x12 (%s)\n"
            "  Objects/abstract.c:1138\n"
            "\t 1001 main+0x1 (%s)\n" % (PY, PY))
        self.assertEqual(folded_of(text), {
            "Web Content;main;ns::f(int, char const*) const;"
            "native_write_msr": 1,
            "swapper;start_kernel;py::f:/tmp/a:b.py": 1,
            "python;main;PyNumber_Add": 1})

    def test_without_call_graph(self):
        # perf record without -g: the leaf on the header line, no blank
        # lines between the samples.
        text = ("python 4242 100.0:    1001001 cpu-clock:  "
                "7f00 PyNumber_Add+0x12 (%s)\n"
                "       python  4242 100.1:    1001001 cpu-clock:  "
                "5c6 py::foo:/app/x.py+0x6 (/tmp/perf-4242.map)\n"
                "python 4242 100.2:    1001001 cpu-clock:  "
                "5c6 py::foo:/app/x.py+0x6 (/tmp/perf-4242.map)\n" % PY)
        self.assertEqual(folded_of(text), {"python;PyNumber_Add": 1,
                                           "python;py::foo:/app/x.py": 2})

    def test_no_frames(self):
        self.assertEqual(folded_of(HEADER + "\n\n" + HEADER + "\n"),
                         {"python": 2})

    def test_bytes_that_are_not_utf8(self):
        text = (b"py\xffthon 1 1.0: 1 cpu-clock: \n"
                b"\t 10 f\xfe+0x1 (/x/lib.so)\n\n")
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.txt")
            out = os.path.join(tmp, "out.folded")
            with open(src, "wb") as f:
                f.write(text)
            self.assertEqual(convert(src, folded=out), 1)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), b"py\xffthon;f\xfe 1\n")

    def test_lines_sorted_and_counted(self):
        text = SORTED_SAMPLE + NESTED_SAMPLE * 2 + EXTENSION_SAMPLE
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.txt")
            out = os.path.join(tmp, "out.folded")
            with open(src, "w") as f:
                f.write(text)
            self.assertEqual(convert(src, folded=out), 4)
            with open(out) as f:
                lines = f.read().splitlines()
        self.assertEqual(lines, sorted([EXTENSION_LEVEL + " 1",
                                        NESTED_LEVEL + " 2",
                                        SORTED_LEVEL + " 1"]))


class ScriptOutputTests(unittest.TestCase):

    def convert_script(self, text, **kw):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.txt")
            out = os.path.join(tmp, "out.txt")
            with open(src, "wb") as f:
                f.write(text)
            convert(src, script=out, **kw)
            with open(out, "rb") as f:
                return f.read()

    def test_dropped_lines_only(self):
        text = ("# header\n\n" + NESTED_SAMPLE + EXTENSION_SAMPLE
                + SORTED_SAMPLE).encode().replace(b"\n\n", b"\r\n\n", 1)
        out = self.convert_script(text)
        kept = out.splitlines(keepends=True)
        lines = text.splitlines(keepends=True)
        self.assertTrue(is_subsequence(kept, lines))
        removed = list(lines)
        for line in kept:
            removed.remove(line)
        names = sorted(re.sub(rb"^\s*[0-9a-f]+ (\S+?)(\+0x\w+)? .*\n", rb"\1",
                              line).decode() for line in removed)
        self.assertEqual(names, sorted(
            # NESTED_SAMPLE
            ["eval_frame_new_code", "_PyEval_EvalFrameDefault"]
            # EXTENSION_SAMPLE
            + ["call_trampoline", "_PyPerfTrampoline_EvalFrame",
               "_PyEval_EvalFrame", "_PyEval_Vector",
               "_PyObject_VectorcallTstate", "PyObject_CallOneArg",
               "cfunction_vectorcall_FASTCALL_KEYWORDS",
               "PyObject_Vectorcall", "_PyEval_EvalFrameDefault"]
            # SORTED_SAMPLE
            + ["_PyPerfTrampoline_EvalFrame", "_PyEval_Vector",
               "PyObject_CallOneArg", "cfunction_vectorcall_FASTCALL_KEYWORDS",
               "PyObject_Vectorcall", "_PyEval_EvalFrameDefault"]))

    def test_in_place_and_no_partial_output(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "perf.txt")
            with open(src, "w") as f:
                f.write(NESTED_SAMPLE + SORTED_SAMPLE)
            expected = self.convert_script((NESTED_SAMPLE
                                            + SORTED_SAMPLE).encode())
            self.assertEqual(convert(src, script=src), 2)
            with open(src, "rb") as f:
                self.assertEqual(f.read(), expected)
            mask = os.umask(0o022)
            os.umask(mask)
            self.assertEqual(os.stat(src).st_mode & 0o777, 0o666 & ~mask)
            # a failure leaves the outputs written before it unmade
            with self.assertRaisesRegex(CollapseError, "cannot write "):
                convert(src, script=os.path.join(tmp, "script.txt"),
                        folded=os.path.join(tmp, "no", "such.folded"))
            self.assertEqual(os.listdir(tmp), ["perf.txt"])

    def test_no_samples(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "perf.txt")
            with open(src, "w") as f:
                f.write("# perf script of an empty recording\n")
            outputs = {}
            for kind in ("folded", "script"):
                outputs[kind] = os.path.join(tmp, kind)
                with open(outputs[kind], "w") as f:
                    f.write("earlier\n")
            with self.assertRaisesRegex(CollapseError,
                                        "^no samples in .*perf.txt: "):
                convert(src, require_samples=True, **outputs)
            for path in outputs.values():
                with open(path) as f:
                    self.assertEqual(f.read(), "earlier\n")
            # without require_samples (record), empty outputs
            self.assertEqual(convert(src, **outputs), 0)
            with open(outputs["folded"]) as f:
                self.assertEqual(f.read(), "")
            with open(outputs["script"]) as f:
                self.assertEqual(f.read(),
                                 "# perf script of an empty recording\n")

    def test_all_frames_unchanged(self):
        text = (b"# header\n" + NESTED_SAMPLE.encode()
                + b"py\xff 1 1.0: 1 cpu-clock: \r\n\t 1 f (x)\n\n\n"
                + EXTENSION_SAMPLE.encode().rstrip(b"\n"))
        self.assertEqual(self.convert_script(text, python_level=False), text)
        # nothing to drop: byte for byte the same too
        plain = text.replace(NESTED_SAMPLE.encode(), b"").replace(
            EXTENSION_SAMPLE.encode().rstrip(b"\n"), b"")
        self.assertEqual(self.convert_script(plain), plain)


def fake_template(tmp):
    path = os.path.join(tmp, "template.html")
    with open(path, "w") as f:
        f.write("<html><script>\nconst stacks = [/** @flamegraph_json **/];"
                "\nconst options = [/** @options_json **/];\n</script>\n")
    return path


def template_data(html):
    m = re.search(r"const stacks = \[(.*)\];\nconst options = \[(.*)\];",
                  html)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))  # json.loads recurses
    try:
        return json.loads(m.group(1)), json.loads(m.group(2))
    finally:
        sys.setrecursionlimit(limit)


class HtmlTests(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_perf_collapse_")
        self.addCleanup(os_helper.rmtree, self.tmp)
        self.src = os.path.join(self.tmp, "in.txt")

    def html(self, text, template=None, **kw):
        with open(self.src, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp, "out.html")
        n = convert(self.src, html=out,
                    template=template or fake_template(self.tmp), **kw)
        with open(out, encoding="utf-8") as f:
            return n, f.read()

    def test_tree(self):
        kernel = sample("swapper 0 [000] 1.0: 1 cpu-clock: ",
                        "native_safe_halt ([kernel.kallsyms])",
                        "</script><b> (/x/evil.so)")
        n, html = self.html(NESTED_SAMPLE * 2 + SORTED_SAMPLE + kernel)
        self.assertEqual(n, 4)
        self.assertNotIn("<b>", html)
        tree, options = template_data(html)
        self.assertEqual(tree["name"], "all")
        self.assertEqual(tree["libtype"], "root")
        self.assertEqual(options["colorscheme"], "blue-green")
        self.assertIn("Python-level", options["context"])

        def paths(node, prefix=()):
            here = prefix + (node["name"],)
            if node["value"]:
                yield ";".join(here[1:]), node["value"], node["libtype"]
            for child in node["children"]:
                yield from paths(child, here)

        got = sorted(paths(tree))
        self.assertEqual(got, sorted([
            (NESTED_LEVEL, 2, ""), (SORTED_LEVEL, 1, ""),
            ("swapper;</script><b>;native_safe_halt", 1, "kernel")]))

    def test_deep_tree(self):
        frames = ["f%d (/x/lib.so)" % i for i in range(5000)]
        n, html = self.html(sample(HEADER, *frames))
        tree, _ = template_data(html)
        depth = 0
        while tree["children"]:
            (tree,) = tree["children"]
            depth += 1
        self.assertEqual((depth, tree["name"], tree["value"]),
                         (5001, "f0", 1))

    def test_bad_templates(self):
        with self.assertRaisesRegex(CollapseError, "cannot read the flame "
                                    "graph template .*nowhere"):
            self.html(NESTED_SAMPLE, os.path.join(self.tmp, "nowhere"))
        other = os.path.join(self.tmp, "other.html")
        with open(other, "w") as f:
            f.write("<html>/** @flamegraph_json **/</html>")
        with self.assertRaisesRegex(CollapseError, "not a d3-flame-graph "
                                    "template"):
            self.html(NESTED_SAMPLE, other)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "out.html")))

    def test_find_template(self):
        with os_helper.EnvironmentVarGuard() as env:
            env.unset("PERF_FLAMEGRAPH_TEMPLATE")
            self.assertEqual(find_template("/x/t.html"), "/x/t.html")
            expected = (_perf_collapse.DEFAULT_TEMPLATE
                        if os.path.isfile(_perf_collapse.DEFAULT_TEMPLATE)
                        else None)
            self.assertEqual(find_template(), expected)
            env["PERF_FLAMEGRAPH_TEMPLATE"] = "/y/t.html"
            self.assertEqual(find_template(), "/y/t.html")
            self.assertEqual(find_template("/x/t.html"), "/x/t.html")


class RealTemplateTests(unittest.TestCase):

    def setUp(self):
        self.template = perf_helper.flamegraph_template()
        if self.template is None:
            self.skipTest("d3-flame-graph is not installed in build/viewer "
                          "(make check-viewer installs it)")
        self.tmp = tempfile.mkdtemp(prefix="test_perf_collapse_")
        self.addCleanup(os_helper.rmtree, self.tmp)

    def test_real_template(self):
        src = os.path.join(self.tmp, "in.txt")
        out = os.path.join(self.tmp, "out.html")
        with open(src, "w") as f:
            f.write(NESTED_SAMPLE)
        self.assertEqual(convert(src, html=out, template=self.template), 1)
        with open(out, encoding="utf-8") as f:
            html = f.read()
        self.assertNotIn("/** @flamegraph_json **/", html)
        self.assertNotIn("/** @options_json **/", html)
        self.assertIn('{"name":"all","value":0,"libtype":"root"', html)
        self.assertIn("py::foo:/app/x.py", html)
        # self-contained: nothing loaded from elsewhere
        self.assertNotRegex(html, r"<(?:script|link|img)[^>]*(?:src|href)=")


class CommandTests(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_perf_collapse_")
        self.addCleanup(os_helper.rmtree, self.tmp)

    def collapse(self, *args, input=None, stdout=subprocess.PIPE, **kw):
        return subprocess.run(
            [sys.executable, "-m", "perf_trampoline", "collapse", *args],
            input=input, stdout=stdout, stderr=subprocess.PIPE,
            env=env_with(), timeout=120, **kw)

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_stdin_to_stdout(self):
        proc = self.collapse(input=NESTED_SAMPLE.encode())
        self.assertEqual((proc.returncode, proc.stderr), (0, b""))
        self.assertEqual(proc.stdout.decode(), NESTED_LEVEL + " 1\n")

    def test_file_to_file_all_frames(self):
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        out = os.path.join(self.tmp, "perf.folded")
        proc = self.collapse("--all-frames", "-o", out, src)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, b"", b""))
        with open(out) as f:
            self.assertEqual(f.read(), NESTED_ALL + " 1\n")

    def check_error(self, proc, pattern):
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, b"")
        err = proc.stderr.decode()
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, "^python -m perf_trampoline collapse: "
                         + pattern)

    def test_errors(self):
        missing = os.path.join(self.tmp, "missing.txt")
        self.check_error(self.collapse(missing), "cannot read .*missing.txt")
        data = self.write("perf.data", b"PERFILE2\0\0\0\x10binary")
        self.check_error(self.collapse(data), ".*perf.data is a perf.data "
                         "file, not its text: run `perf script -i")
        self.check_error(self.collapse(input=b""), "no samples in standard "
                         "input")
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        self.check_error(
            self.collapse("-o", os.path.join(self.tmp, "no", "dir"), src),
            "cannot write .*no/dir")
        self.check_error(self.collapse(self.tmp), "cannot read ")

    def test_no_samples_keeps_output(self):
        out = self.write("perf.folded", b"earlier\n")
        empty = self.write("empty.txt", b"# nothing recorded\n")
        self.check_error(self.collapse("-o", out, empty),
                         "no samples in .*empty.txt: ")
        self.check_error(self.collapse("-o", out, input=b""),
                         "no samples in standard input: ")
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"earlier\n")

    def test_fifo_written_in_place(self):
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, reader)
        proc = self.collapse("-o", fifo, src)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, b"", b""))
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        self.assertEqual(os.read(reader, 65536),
                         (NESTED_LEVEL + " 1\n").encode())

    def test_device_written_in_place(self):
        # a null device of the test's own, not /dev/null: a collapse
        # that replaced it would break the machine
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        null = os.path.join(self.tmp, "null")
        try:
            os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            os.close(os.open(null, os.O_WRONLY))
        except PermissionError as exc:
            self.skipTest("cannot make and open a device file here: %s"
                          % exc)
        proc = self.collapse("-o", null, src)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                         (0, b"", b""))
        st = os.lstat(null)
        self.assertTrue(stat.S_ISCHR(st.st_mode))
        self.assertEqual(st.st_rdev, os.makedev(1, 3))

    def test_descriptors_through_links(self):
        # -o /dev/stdout, /dev/stderr, /dev/fd/N, through links of the
        # test's own (a collapse that replaced the link /dev/stdout would
        # break the machine)
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        expected = (NESTED_LEVEL + " 1\n").encode()
        out = os.path.join(self.tmp, "out")
        os.symlink("/proc/self/fd/1", out)
        err = os.path.join(self.tmp, "err")
        os.symlink("/dev/stderr", err)
        with self.subTest(stdout="pipe"):
            proc = self.collapse("-o", out, src)
            self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                             (0, expected, b""))
        with self.subTest(stderr="pipe"):
            proc = self.collapse("-o", err, src)
            self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                             (0, b"", expected))
        with self.subTest(stdout="a file written before"):
            # appended at the offset the caller's file is at, not written
            # over its start
            with open(os.path.join(self.tmp, "log"), "w+b") as log:
                log.write(b"header\n")
                log.flush()
                proc = self.collapse("-o", out, src, stdout=log)
                self.assertEqual((proc.returncode, proc.stderr), (0, b""))
                log.seek(0)
                self.assertEqual(log.read(), b"header\n" + expected)
        with self.subTest(fd="a file opened to append"):
            with open(os.path.join(self.tmp, "appended"), "ab") as log:
                log.write(b"before\n")
                log.flush()
                fd = log.fileno()
                link = os.path.join(self.tmp, "fd")
                os.symlink("/dev/fd/%d" % fd, link)
                proc = self.collapse("-o", link, src, pass_fds=[fd])
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                                 (0, b"", b""))
            with open(os.path.join(self.tmp, "appended"), "rb") as log:
                self.assertEqual(log.read(), b"before\n" + expected)
        with self.subTest(stdout="socket"):
            # /proc/self/fd/1 of a socket cannot be opened
            ours, theirs = socket.socketpair()
            with ours, theirs:
                proc = self.collapse("-o", out, src, stdout=theirs.fileno())
                theirs.close()
                ours.settimeout(30)
                data = b""
                while True:
                    chunk = ours.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            self.assertEqual((proc.returncode, proc.stderr, data),
                             (0, b"", expected))
        self.assertEqual(os.readlink(out), "/proc/self/fd/1")
        self.assertEqual(os.readlink(err), "/dev/stderr")

    def test_links_followed(self):
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        expected = (NESTED_LEVEL + " 1\n").encode()
        target = self.write("target", b"earlier\n")
        # the target is replaced, not written over: another name of the
        # earlier file keeps it
        keep = os.path.join(self.tmp, "keep")
        os.link(target, keep)
        links = {"link": "target", "chain": "link", "dangling": "new"}
        for name, to in links.items():
            os.symlink(to, os.path.join(self.tmp, name))
        for name, written in (("link", "target"), ("chain", "target"),
                              ("dangling", "new")):
            with self.subTest(link=name):
                proc = self.collapse("-o", os.path.join(self.tmp, name), src)
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                                 (0, b"", b""))
                with open(os.path.join(self.tmp, written), "rb") as f:
                    self.assertEqual(f.read(), expected)
        for name, to in links.items():
            self.assertEqual(os.readlink(os.path.join(self.tmp, name)), to)
        with open(keep, "rb") as f:
            self.assertEqual(f.read(), b"earlier\n")

    def test_link_planted_in_shared_directory(self):
        # A link in a world-writable sticky directory (/tmp) of another
        # user, who may have planted it to redirect what root writes, is
        # not followed; the caller's own, or the directory owner's, is.
        src = self.write("perf.txt", NESTED_SAMPLE.encode())
        expected = (NESTED_LEVEL + " 1\n").encode()
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        victim = self.write("victim", b"victim\n")
        planted = os.path.join(shared, "perf.folded")
        os.symlink(victim, planted)
        other = 65534 if os.geteuid() != 65534 else 65533
        try:
            os.lchown(planted, other, -1)
        except PermissionError:
            self.skipTest("only root can give a link to another user")
        self.check_error(
            self.collapse("-o", planted, src),
            "will not follow %s: it is a symbolic link of uid %d in %s, a "
            "shared sticky directory" % (re.escape(planted), other,
                                         re.escape(shared)))
        # the same at the end of a link of one's own
        mine = os.path.join(self.tmp, "mine")
        os.symlink(planted, mine)
        self.check_error(
            self.collapse("-o", mine, src),
            "will not follow %s to write %s: " % (re.escape(planted),
                                                 re.escape(mine)))
        self.assertEqual(os.readlink(planted), victim)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"victim\n")

        own = os.path.join(shared, "own")
        os.symlink(victim, own)
        proc = self.collapse("-o", own, src)
        self.assertEqual((proc.returncode, proc.stderr), (0, b""))
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), expected)
        self.assertEqual(os.readlink(own), victim)

        self.write("victim", b"victim\n")
        os.chown(shared, other, -1)
        proc = self.collapse("-o", planted, src)
        self.assertEqual((proc.returncode, proc.stderr), (0, b""))
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), expected)
        self.assertEqual(os.readlink(planted), victim)

    def test_closed_pipe(self):
        src = self.write("perf.txt", (NESTED_SAMPLE * 2 + SORTED_SAMPLE * 2
                                      + EXTENSION_SAMPLE).encode() * 2000)
        proc = subprocess.run(
            "%s -m perf_trampoline collapse --all-frames %s | head -c 1"
            % (sys.executable, src), shell=True, capture_output=True,
            env=env_with(), timeout=120)
        self.assertEqual(proc.stderr, b"")


# The program recorded: the nested calls of the perf howto, then Python
# calling C extensions that call Python back: bisect.bisect() with a key
# function (_bisect) and heapq.heappush() of objects with a Python __lt__
# (_heapq).  The Python callbacks do enough work to hold most samples.
PROGRAM = NESTED + """
import bisect, heapq

def key(x):
    y = x
    for _ in range(40):
        y += 0
    return -y

def search(data, reps):
    t = 0
    for i in range(reps):
        t += bisect.bisect(data, -i, key=key)
    return t

class Item:
    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        a = self.v
        for _ in range(40):
            a += 0
        return a < other.v

def heap(n):
    h = []
    for i in range(n):
        heapq.heappush(h, Item((i * 7919) % 1000))
    return len(h)

baz(6_000_000)
search(list(range(-2000, 0))[::-1], 30_000)
heap(150_000)
"""


# Where the interpreter's call path is certainly machinery.
CALL_PATH = ("_PyEval_EvalFrameDefault", "eval_frame_new_code",
             "_PyPerfTrampoline_EvalFrame", "_PyEval_Vector")


@unittest.skipUnless(HAVE_TRAMPOLINE, NO_TRAMPOLINE)
class RecordingTests(unittest.TestCase):
    """perf record of PROGRAM on this interpreter (-g where it has frame
    pointers, --call-graph dwarf where it has not), once for the class,
    collapsed."""

    @classmethod
    def setUpClass(cls):
        import _bisect
        import _heapq
        cls.extensions = {}
        for module in (_bisect, _heapq):
            path = getattr(module, "__file__", None)
            if path is None:
                raise unittest.SkipTest("%s is built into the interpreter: "
                                        "no extension object to keep"
                                        % module.__name__)
            cls.extensions[module.__name__] = os.path.realpath(path)
        reason = perf_helper.perf_problem()
        if reason:
            raise unittest.SkipTest(reason)
        cls.tmp = tempfile.mkdtemp(prefix="test_perf_collapse_")
        cls.addClassCleanup(os_helper.rmtree, cls.tmp)
        cls.script = os.path.join(cls.tmp, "app.py")
        with open(cls.script, "w") as f:
            f.write(PROGRAM)
        data = os.path.join(cls.tmp, "perf.data")
        callgraph = (["-g"] if HAVE_FRAME_POINTERS
                     else ["--call-graph", "dwarf"])
        owner = types.SimpleNamespace(since=time.time() - 1,
                                      addCleanup=cls.addClassCleanup)
        proc = subprocess.run(
            perf_command("record", "-e", "cpu-clock", "-F", "999",
                         *callgraph, "-o", data, "--", sys.executable,
                         "-X", "perf", cls.script),
            capture_output=True, text=True, env=env_with(), timeout=300)
        if proc.returncode != 0:
            raise AssertionError("perf record failed: " + proc.stderr)
        forget_files(owner, script_pid(proc.stdout))
        text = subprocess.run(perf_command("script", "-i", data),
                              capture_output=True, timeout=300)
        if text.returncode != 0:
            raise AssertionError("perf script failed: %r" % text.stderr)
        cls.src = os.path.join(cls.tmp, "perf.txt")
        with open(cls.src, "wb") as f:
            f.write(text.stdout)
        cls.original = text.stdout
        cls.full = parse_perf_script(text.stdout.decode(errors="replace"))

    def py(self, name):
        return "py::%s:%s" % (name, self.script)

    def between(self, samples, outer, inner):
        """For each sample (perf_helper's parse: leaf first) with the py::
        frames `outer` and `inner`, the frames between them."""
        found = []
        for s in samples:
            syms = [sym for sym, _ in s]
            if outer in syms and inner in syms:
                i, o = syms.index(inner), syms.index(outer)
                self.assertLess(i, o)
                found.append(s[i + 1:o])
        return found

    @staticmethod
    def gaps(samples):
        """The frames between each two py:: frames of `samples`."""
        for s in samples:
            pos = [i for i, (sym, _) in enumerate(s)
                   if sym.startswith("py::")]
            for a, b in zip(pos, pos[1:]):
                yield s[a + 1:b]

    def collapse(self, *args):
        proc = subprocess.run(
            [sys.executable, "-m", "perf_trampoline", "collapse", *args,
             self.src], capture_output=True, text=True, env=env_with(),
            timeout=300)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        stacks = {}
        for line in proc.stdout.splitlines():
            stack, count = line.rsplit(" ", 1)
            stacks[stack] = int(count)
        self.assertEqual(sum(stacks.values()), len(self.full))
        return stacks

    def test_python_level_script(self):
        level = os.path.join(self.tmp, "perf.python.txt")
        self.assertEqual(convert(self.src, script=level), len(self.full))
        with open(level, "rb") as f:
            level_text = f.read()
        view = parse_perf_script(level_text.decode(errors="replace"))
        self.assertEqual(len(view), len(self.full))

        # The recording less some frame lines, all the interpreter's.
        kept = level_text.splitlines(keepends=True)
        lines = self.original.splitlines(keepends=True)
        self.assertTrue(is_subsequence(kept, lines))
        interpreter = os.path.realpath(sys.executable)
        removed = list(lines)
        for line in kept:
            removed.remove(line)
        self.assertGreater(len(removed), len(self.full))
        for line in removed:
            m = re.match(rb"^\t\s*[0-9a-f]+ \S+ \((.*)\)\n$", line)
            self.assertIsNotNone(m, line)
            if m.group(1) != b"inlined":
                self.assertEqual(os.path.realpath(m.group(1).decode()),
                                 interpreter, line)

        # The evaluator and our call path are between the py:: frames of
        # the recording, and gone from the view.
        full_gaps = list(self.gaps(self.full))
        self.assertGreater(len(full_gaps), 100)
        with_evaluator = [gap for gap in full_gaps
                          if any(perf_helper.is_function(sym, *CALL_PATH)
                                 for sym, _ in gap)]
        self.assertGreaterEqual(len(with_evaluator), 0.9 * len(full_gaps))
        for gap in self.gaps(view):
            for sym, dso in gap:
                self.assertFalse(perf_helper.is_function(sym, *CALL_PATH),
                                 gap)

        # Between a Python function and the Python function a C extension
        # called, the extension's frames stay, and nothing else.
        for name, outer, inner in (("_bisect", "search", "key"),
                                   ("_heapq", "heap", "Item.__lt__")):
            with self.subTest(extension=name):
                before = self.between(self.full, self.py(outer),
                                      self.py(inner))
                after = self.between(view, self.py(outer), self.py(inner))
                self.assertGreaterEqual(len(before), 10)
                self.assertEqual(len(after), len(before))
                for gap in after:
                    self.assertTrue(gap)
                    for sym, dso in gap:
                        self.assertEqual(os.path.realpath(dso),
                                         self.extensions[name], gap)

    def test_folded_stacks(self):
        stacks = self.collapse()
        # the seed chain in one piece in at least 90% of foo's samples
        chain = ";".join(self.py(name)
                         for name in ("<module>", "baz", "bar", "foo"))
        in_foo = sum(c for s, c in stacks.items()
                     if self.py("foo") in s.split(";"))
        whole = sum(c for s, c in stacks.items()
                    if ";%s;" % chain in ";%s;" % s)
        self.assertGreater(in_foo, 20)
        self.assertGreaterEqual(whole, 0.9 * in_foo)
        # py::search calls py::key through _bisect's frames, and only
        # them (with DWARF, inlined ones too), py::heap calls
        # Item.__lt__ through _heapq's.
        for outer, inner, ext in (("search", "key", "_bisect"),
                                  ("heap", "Item.__lt__", "_heapq")):
            with self.subTest(outer=outer):
                names = self.names_in(self.extensions[ext])
                call = re.compile(";%s;((?:[^;]+;)*?)%s;" % (
                    re.escape(self.py(outer)), re.escape(self.py(inner))))
                middles = [m.group(1) for m in
                           (call.search(";%s;" % s) for s in stacks) if m]
                self.assertGreaterEqual(len(middles), 3)
                for middle in middles:
                    self.assertTrue(middle)
                    for frame in middle.rstrip(";").split(";"):
                        self.assertIn(frame, names, middle)

    def names_in(self, path):
        """The names of the frames of the object at `path` in the
        recording, inlined ones included (the functions inlined into a
        frame are listed just before it, with the DSO "inlined")."""
        names = set()
        inlined = []
        for line in self.original.decode(errors="replace").splitlines():
            m = re.match(r"^\t\s*[0-9a-f]+ (.*?)(?:\+0x[0-9a-f]+)? "
                         r"\((.*)\)$", line)
            if m is None:
                inlined = []
            elif m.group(2) == "inlined":
                inlined.append(m.group(1))
            else:
                if os.path.realpath(m.group(2)) == path:
                    names.add(m.group(1))
                    names.update(inlined)
                inlined = []
        return names

    def test_all_frames(self):
        stacks = self.collapse("--all-frames")
        depth = sum(c * len(s.split(";")) for s, c in stacks.items())
        frames = sum(len(s) + 1 for s in self.full)
        if HAVE_FRAME_POINTERS:
            self.assertEqual(depth, frames)
        else:
            # and the inlined frames, which perf_helper leaves out
            self.assertGreater(depth, frames)
        # the evaluator and our call path are there between py::bar and
        # py::foo
        call = re.compile(";%s;((?:[^;]+;)*?)%s;" % (
            re.escape(self.py("bar")), re.escape(self.py("foo"))))
        middles = [m.group(1) for m in
                   (call.search(";%s;" % s) for s in stacks) if m]
        self.assertTrue(middles)
        for middle in middles:
            self.assertIn("_PyEval_EvalFrameDefault", middle)


if __name__ == "__main__":
    unittest.main()
