#!/bin/sh
# Run the cpython-perf test suite on each interpreter given.
#
#   run-tests.sh PYTHON...
#
# For each interpreter: Lib/test/test_perf_profiler.py (verbose), then the
# CPython suites whose code our patches touch, which must pass as they do on
# stock 3.11.2.  The caller (make test) has cleared PYTHON* variables.
# Ends with one line "N passed, N failed", counting test modules.
set -u
CPYTHON_TESTS="test_sys test_cmd_line test_embed test_capi test_threading test_subprocess"
passed=0
failed=0
failures=""

for py in "$@"; do
    echo "=== $py: $("$py" -c 'import sys; print(sys.version)' | head -1)"
    for t in test_perf_profiler $CPYTHON_TESTS; do
        verbose=""
        [ "$t" = test_perf_profiler ] && verbose=-v
        if "$py" -m test $verbose "$t"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            failures="$failures $py:$t"
        fi
    done
done

echo
[ "$failed" -eq 0 ] || echo "failed:$failures"
echo "test modules: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
