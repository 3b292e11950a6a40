"""Drive abiext, the extension built against the stock 3.11.2 headers.

    python [-X perf | -X perf_jit] ext_smoke.py DIR

DIR holds abiext.cpython-311-*.so.  Every check runs once without
assumptions about the perf backend; when a backend is on, the functions
the extension called or made must also have reached its file.  Ends with
one summary line; exits non-zero when a check fails.
"""

import gc
import glob
import os
import sys
import threading
import traceback

sys.path.insert(0, sys.argv[1])
import abiext  # noqa: E402

checks = []


def check(fn):
    checks.append(fn)
    return fn


def _add(x, key=0):
    return x + key


@check
def calls():
    assert abiext.call(_add, 2, key=3) == 5
    assert abiext.call(lambda *a: a, 1, 2) == (1, 2)
    assert abiext.vectorcall(_add, 40, 2) == 42
    assert abiext.call_method([3, 1, 2], "index", 2) == 2

    def boom():
        raise KeyError("from python")
    try:
        abiext.call(boom)
    except KeyError as e:
        assert e.args == ("from python",)
    else:
        raise AssertionError("exception lost on the way through C")
    # Deep recursion through C and Python frames alternately.
    def down(n):
        return n if n == 0 else abiext.call(down, n - 1) + 1
    assert down(150) == 150


@check
def made_functions():
    src = ("def made_by_abiext(x):\n"
           "    return [i * x for i in range(3)]\n")
    f = abiext.make_function(src, "abiext_made.py", "made_by_abiext")
    assert f.__name__ == "made_by_abiext"
    assert f.__code__.co_filename == "abiext_made.py"
    for _ in range(50):
        assert f(2) == [0, 2, 4]
    assert abiext.call(f, 3) == [0, 3, 6]
    co = abiext.empty_code("abiext_empty.py", "empty_made", 12)
    assert co.co_name == "empty_made" and co.co_firstlineno == 12
    assert type(co) is type(f.__code__)
    # In 3.11 the body of an empty code object raises AssertionError.
    g = type(f)(co, {})
    try:
        g()
    except AssertionError:
        pass
    else:
        raise AssertionError("PyCode_NewEmpty's code did not raise")


@check
def code_extra():
    # A code object of its own (made at run time, referenced by nothing
    # else), so that dropping the function frees it.
    src = "def tagged(x):\n    return 'tagged'\n"
    tagged = abiext.make_function(src, "abiext_tagged.py", "tagged")
    start = abiext.extra_freed()
    assert abiext.tag_code(tagged, 17) == 17
    for _ in range(20):         # runs with its extra slot (and ours) set
        assert tagged(0) == "tagged"
    assert abiext.tag_code(tagged, 18) == 18
    assert abiext.extra_freed() == start + 1, "replaced value not freed"
    del tagged
    gc.collect()
    assert abiext.extra_freed() == start + 2, "co_extra not freed"


@check
def generators():
    def gen(n):
        for i in range(n):
            yield i * i
    assert abiext.iterate(gen(5)) == [0, 1, 4, 9, 16]

    def echo():
        got = []
        while True:
            v = yield len(got)
            if v == "stop":
                return got
            got.append(v)
    assert abiext.send_all(echo(), (None, "a", "b", "stop")) == \
        [0, 1, 2, ["a", "b"]]
    assert abiext.iterate(x for x in "ab") == ["a", "b"]


@check
def thread_state():
    assert abiext.thread_state() is True
    errors = []

    def run():
        try:
            assert abiext.thread_state() is True
        except BaseException as e:
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@check
def config_structs():
    assert abiext.config() is True


@check
def static_type():
    Box = abiext.Box
    b = Box([1, 2, 3], lambda v, x: [e * x for e in v])
    assert repr(b) == "Box([1, 2, 3])"
    assert b(2) == [2, 4, 6] and b.count == 1
    assert list(b) == [1, 2, 3]
    b.value = 21
    assert b.doubled == 42
    b.doubled = 10
    assert b.value == 5
    try:
        b.count = 3
    except AttributeError:
        pass
    else:
        raise AssertionError("READONLY member was written")

    class Sub(Box):
        def convert(self, item):
            return ("sub", item)
    s = Sub("xy", func=lambda v, x: v * x)
    assert list(s) == [("sub", "x"), ("sub", "y")]
    assert s(2) == "xyxy"
    assert isinstance(s, Box) and Sub.__mro__[1] is Box
    del b, s
    gc.collect()


def backend():
    """The perf backend that is on, as the interpreter was told."""
    opts = sys._xoptions
    if "perf_jit" in opts:
        return "perf_jit"
    if "perf" in opts:
        return "perf"
    return None


def backend_file(kind):
    pid = os.getpid()
    return f"/tmp/perf-{pid}.map" if kind == "perf" else f"/tmp/jit-{pid}.dump"


def run_check(fn, fail_label, ok_label):
    """Run one check, print its outcome; 1 if it failed, else 0."""
    try:
        fn()
    except BaseException:
        print(f"FAIL {fail_label}")
        traceback.print_exc()
        return 1
    print(f"ok   {ok_label}")
    return 0


def main():
    kind = backend()
    if kind is not None:
        assert sys.is_stack_trampoline_active(), "backend not on"
    failed = sum(run_check(fn, fn.__name__, fn.__name__) for fn in checks)
    n = len(checks)
    if kind is not None:
        n += 1
        path = backend_file(kind)

        def file_names_functions():
            # (activating again writes the records that wait in a block:
            # those of trampolines their arena files name already)
            sys.activate_stack_trampoline(kind)
            with open(path, "rb") as f:
                data = f.read()
            # Functions made by the extension, and called from C.
            for name in (b"py::made_by_abiext:abiext_made.py",
                         b"py::calls.<locals>.down:",
                         b"py::_add:"):
                assert name in data, f"{name!r} missing from {path}"

        try:
            failed += run_check(file_names_functions, f"{kind} file",
                                f"{kind} file names the extension's "
                                "functions")
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
            # and this process's trampoline files (mapped: unlinking keeps them)
            for p in glob.glob(f"/tmp/py-perf-{os.getpid()}-*.so"):
                os.unlink(p)
    print(f"abiext ({kind or 'off'}): {n - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
