#!/bin/sh
# Run the cpython-perf test suite on each interpreter given.
#
#   run-tests.sh PYTHON...
#
# For each interpreter: the package Lib/test/test_perf_profiler/ (verbose), then
# test_perf_unwind, test_perfmaps, test_perf_storms, test_perf_live,
# test_perf_live_hostile, test_perf_live_perf, test_perf_record,
# test_perf_clean, test_perf_collapse and test_perf_containers.  Then, on
# the first interpreter, a slice of CPython's own suite in three modes (off,
# PYTHONPERFSUPPORT=1, PYTHON_PERF_JIT_SUPPORT=1), which must give the same
# result test by test but for the known differences listed in
# Doc/cpython-perf/developing.md
# (tools/suite-modes.py, which also removes the perf files the runs make), and
# the README's quick-start commands as written (tools/check-readme.py, which is
# given every interpreter: a block for an interpreter without frame pointers
# runs with that one).  (The others ran the CPython suites whose code our
# patches touch too; the three-mode comparison runs them all, and the builds
# differ only in their frame pointers.)
# The caller (make test) has cleared PYTHON* variables.
# Ends with one line "N passed, N failed", counting test modules, the
# three-mode comparison and the README check.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Calls, frames, generators, coroutines, threads, processes, signals,
# tracing and profiling, sys, embedding, gc, weakrefs, descriptors,
# exceptions and tracebacks, pickling, introspection, debuggers.
MODES_TESTS="test_call test_frame test_scope test_funcattrs test_code
 test_generators test_coroutines test_asyncgen test_asyncio test_contextlib
 test_contextlib_async test_threading test_thread test_threading_local
 test_subprocess test_multiprocessing_fork test_signal test_faulthandler
 test_sys_settrace test_sys_setprofile test_sys test_embed test_capi
 test_cmd_line test_gc test_weakref test_descr test_class test_exceptions
 test_traceback test_pickle test_copyreg test_dis test_inspect test_functools
 test_bdb test_pdb test_trace test_profile test_cprofile"
passed=0
failed=0
. "$here/logged.sh"

# Run the interpreter $1 with the arguments that follow, SIGINT back to its
# default action: a shell without job control starts its background
# commands (`make test &`, a nohup'ed CI script) with SIGINT ignored, and
# a Python started so installs no KeyboardInterrupt handler, so that
# test_threading's interrupt_main() cases fail (stock 3.11 too).
python_with_sigint() {
    "$1" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
failures=""
first=""

for py in "$@"; do
    echo "=== $py: $("$py" -c 'import sys; print(sys.version)' | head -1)"
    tests="test_perf_profiler test_perf_unwind test_perfmaps test_perf_storms
           test_perf_live test_perf_live_hostile test_perf_live_perf
           test_perf_record test_perf_clean test_perf_collapse
           test_perf_containers"
    for t in $tests; do
        verbose=""
        [ "$t" = test_perf_profiler ] && verbose=-v
        # (a copy of the output, whose failures the end lists)
        log="$(dirname "$py")/tests-$t.log"
        : > "$log"
        logged "$log" python_with_sigint "$py" -m test $verbose "$t"
        if [ "$logged_status" = 0 ]; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            failures="$failures $py:$t"
        fi
    done
    if [ -z "$first" ]; then
        first=$py
        echo "=== $py: CPython's suite off, with PYTHONPERFSUPPORT=1, with PYTHON_PERF_JIT_SUPPORT=1"
        # shellcheck disable=SC2086
        if "$py" "$here/suite-modes.py" --python "$py" --jobs 2 \
               --out "$(dirname "$py")/suite-modes" \
               --known "$here/../Doc/cpython-perf/developing.md" \
               $MODES_TESTS; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            failures="$failures $py:suite-modes"
        fi
        echo "=== $py: the README's quick start, as written"
        if "$py" "$here/check-readme.py" --out "$(dirname "$py")/check-readme" \
               "$@"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            failures="$failures $py:check-readme"
        fi
    fi
done

echo
for f in $failures; do
    case $f in
    *:test_*)
        echo "${f%:test_*}: ${f##*:}:"
        "$here/failed-tests.sh" "$(dirname "${f%:test_*}")/tests-${f##*:}.log" ;;
    *:suite-modes)
        echo "${f%:suite-modes}: suite-modes:"
        sed 's/^/    /' "$(dirname "${f%:suite-modes}")/suite-modes/problems.txt" \
            2>/dev/null ;;
    esac
done
[ "$failed" -eq 0 ] || echo "failed:$failures"
echo "test modules: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
