"""A smoke test of Debian's own numpy (python3-numpy, built for Debian's
python3.11) inside our interpreter.

    PYTHONPATH=/usr/lib/python3/dist-packages python [-X perf|-X perf_jit] \
        numpy_smoke.py

numpy must come from the directory that PYTHONPATH names, not from
anywhere else.  The work mixes numpy's C loops with Python callbacks
(ufuncs made from Python functions, object arrays, sort keys), so that
calls from numpy's C code into Python go through the perf trampoline
when it is on.  Ends with one summary line; exits non-zero on failure.
"""

import glob
import os
import sys
import traceback

failed = 0
passed = 0


def step(name, fn):
    global failed, passed
    try:
        fn()
    except BaseException:
        failed += 1
        print(f"FAIL {name}")
        traceback.print_exc()
    else:
        passed += 1
        print(f"ok   {name}")


def load():
    global np
    import numpy
    np = numpy
    where = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    assert where and np.__file__.startswith(where), \
        f"numpy came from {np.__file__}, not from {where}"
    print(f"     numpy {np.__version__} from {os.path.dirname(np.__file__)}")


def arrays():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert a.shape == (3, 4) and a.sum() == 66.0
    assert (a.T @ a).trace() == sum(float(x) ** 2 for x in range(12))
    assert np.array_equal(np.sort(np.array([3, 1, 2])), [1, 2, 3])
    b = np.linspace(0, 1, 5)
    assert np.allclose(np.cumsum(b), [0, 0.25, 0.75, 1.5, 2.5])
    assert np.isclose(np.std(np.array([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0,
                                       9.0])), 2.0)


def linalg():
    m = np.array([[4.0, 1.0], [2.0, 3.0]])
    x = np.linalg.solve(m, np.array([1.0, 2.0]))
    assert np.allclose(m @ x, [1.0, 2.0])
    assert np.allclose(sorted(np.linalg.eigvals(m)), [2.0, 5.0])
    assert np.isclose(np.linalg.det(m), 10.0)


def fft_random():
    sig = np.sin(2 * np.pi * 3 * np.arange(64) / 64)
    peak = int(np.argmax(np.abs(np.fft.rfft(sig))))
    assert peak == 3, peak
    rng = np.random.default_rng(1234)
    draws = rng.integers(0, 10, size=1000)
    assert draws.min() >= 0 and draws.max() <= 9
    assert 4.0 < draws.mean() < 5.0


def numpy_calls_python():
    def scaled_by_abi(x, y):
        return x * 10 + y
    uf = np.frompyfunc(scaled_by_abi, 2, 1)
    r = uf(np.arange(4), 1)
    assert list(r) == [1, 11, 21, 31], r
    vec = np.vectorize(lambda v: v ** 2 if v % 2 else -v)
    assert list(vec(np.arange(5))) == [0, 1, -2, 9, -4]

    class Money:
        def __init__(self, v):
            self.v = v

        def __lt__(self, other):
            return self.v < other.v

        def __add__(self, other):
            return Money(self.v + other.v)
    objs = np.array([Money(v) for v in (5, 2, 9, 1)], dtype=object)
    assert [m.v for m in np.sort(objs)] == [1, 2, 5, 9]
    assert objs.sum().v == 17
    assert np.apply_along_axis(lambda row: row.max() - row.min(), 1,
                               np.array([[1, 5], [7, 2]])).tolist() == [4, 5]


def backend_file():
    opts = sys._xoptions
    pid = os.getpid()
    if "perf_jit" in opts:
        return f"/tmp/jit-{pid}.dump"
    if "perf" in opts:
        return f"/tmp/perf-{pid}.map"
    return None


def trampoline_file():
    path = backend_file()
    assert sys.is_stack_trampoline_active()
    # (activating again writes the records that wait in a block: those of
    # trampolines their arena files name already)
    sys.activate_stack_trampoline("perf_jit" if path.endswith(".dump")
                                  else "perf")
    try:
        with open(path, "rb") as f:
            data = f.read()
        # Called by numpy's C loop (frompyfunc), and numpy's own Python code.
        for name in (b"py::numpy_calls_python.<locals>.scaled_by_abi:",
                     b"numpy/core/"):
            assert name in data, f"{name!r} missing from {path}"
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        # and this process's trampoline files (mapped: unlinking keeps them)
        for p in glob.glob(f"/tmp/py-perf-{os.getpid()}-*.so"):
            os.unlink(p)


def main():
    step("import numpy", load)
    if passed:
        step("arrays", arrays)
        step("linalg", linalg)
        step("fft and random", fft_random)
        step("numpy calls python", numpy_calls_python)
        if backend_file() is not None:
            step("trampoline file names numpy's callbacks", trampoline_file)
    mode = ("perf_jit" if "perf_jit" in sys._xoptions else
            "perf" if "perf" in sys._xoptions else "off")
    print(f"numpy smoke ({mode}): {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
