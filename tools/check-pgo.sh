#!/bin/sh
# check-pgo.sh: the patched tree built as packagers build it with GCC,
# `./configure --enable-optimizations --with-lto` (PGO trained by CPython's
# own profile task, then by Lib/test/perf_pgo_task.py under -X perf: patch
# 0013; then LTO), and checked there.
#
#   tools/check-pgo.sh SRC OBJDIR JOBS
#
# Builds OBJDIR (from the patched tree SRC, when OBJDIR/python is missing
# or older than SRC/Python/ceval.c; about 11 minutes on two idle cores),
# then:
#   - prints the instructions per Python call (callgrind, fib(22) less
#     fib(20), divided by the calls between the two) without the flag, and
#     what -X perf adds to each: profile feedback that never saw -X perf
#     must not make the trampolined call path cost more than on the -O3
#     build (patch 0013 says how the path is kept hot);
#   - `perf record -g` of examples/demo.py under -X perf names py::baz <-
#     py::bar <- py::foo in at least 90% of the samples in foo
#     (tools/perf-chain.py --record);
#   - runs the perf tests with the PGO interpreter.
set -eu
src=$1 obj=$2 jobs=$3
here=$(cd "$(dirname "$0")/.." && pwd)

if [ ! -x "$obj/python" ] || [ "$src/Python/ceval.c" -nt "$obj/python" ]; then
    echo "+ configure --enable-optimizations --with-lto in $obj/ and make"
    rm -rf "$obj"
    mkdir -p "$obj"
    abs_src=$(cd "$src" && pwd)
    (cd "$obj" && "$abs_src/configure" --without-ensurepip \
        --enable-optimizations --with-lto > configure.log 2>&1) || {
        tail -30 "$obj/configure.log"; exit 1; }
    start=$(date +%s)
    make -C "$obj" -j"$jobs" > "$obj/build.log" 2>&1 || {
        tail -30 "$obj/build.log"; exit 1; }
    echo "built in $(( $(date +%s) - start )) s (log: $obj/build.log)"
fi
py=$obj/python

# The trampoline call (the one that passes _PyEval_EvalFrameDefault as
# the evaluator) must not sit in the cold section, where GCC puts what the
# training never ran, optimized for size.
where=$(objdump -d --no-show-raw-insn "$py" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2 }
    fn ~ /^<_PyEval_EvalFrameDefault/ && /lea .*<_PyEval_EvalFrameDefault>/ {
        print fn }' | sort -u | tr -d '<>:' | tr '\n' ' ')
echo "the trampoline call is in: $where"
case $where in
    *.cold*|"")
        echo "error: not in the hot body of _PyEval_EvalFrameDefault" >&2
        exit 1 ;;
esac

echo "+ instructions per Python call (callgrind, fib(22) - fib(20))"
PYTHONPATH="$here/bench" "$py" - "$py" "$here/bench/workloads/fib.py" <<'EOF'
import sys
import run                      # bench/run.py

py, fib = sys.argv[1:]
(c1, _), (c2, _) = run.counts(py, fib, "20"), run.counts(py, fib, "22")
calls = c2 - c1
ir = {(flag, n): run.instructions(py, ["-X", "perf"] if flag else [],
                                  fib, n)
      for flag in (False, True) for n in ("20", "22")}
off = (ir[False, "22"] - ir[False, "20"]) / calls
perf = (ir[True, "22"] - ir[True, "20"]) / calls
print(f"off: {off:.2f} per call; -X perf: +{perf - off:.2f} per call "
      f"({calls} calls)")
EOF

echo "+ perf record -g of examples/demo.py under -X perf"
"$py" -I "$here/tools/perf-chain.py" --record "$py" "$here/examples/demo.py"

echo "+ the perf tests"
env -u PYTHONPERFSUPPORT -u PYTHON_PERF_JIT_SUPPORT "$py" -m test \
    test_perf_profiler test_perf_unwind test_perfmaps test_perf_storms
