#!/bin/sh
# Run our tests, the storms and live activation's tests on the ASan + UBSan
# interpreter (make sanitize), and fail on any sanitizer report.
#
#   sanitize.sh PYTHON
#
# PYTHON is build-asan/python.  Every interpreter the tests start (their
# children, forked children, the ones perf, strace and gdb run) inherits
# the options below, so a report from any of them lands in LOGDIR
# (build-asan/sanitizer-logs, one file per reporting process) even where
# the test itself would not notice it.
# The caller (make sanitize) has cleared PYTHON* variables.
# Ends with one line: "sanitize: ... passed/failed, N sanitizer reports".
set -u
py=$1
logdir=$(cd "$(dirname "$py")" && pwd)/sanitizer-logs
rm -rf "$logdir"
mkdir -p "$logdir"

# AddressSanitizer:
# - detect_leaks=0: CPython 3.11 does not free everything at exit by design
#   (static types, interned strings, the memory of daemon threads...); with
#   leak detection every interpreter run ends in a report that is not ours.
#   Our own long-lived memory (arenas, slot records) is mmap()ed on purpose
#   and would not be seen by LeakSanitizer anyway.
# - detect_stack_use_after_return=1: frames that the trampoline calls into
#   live on a fake stack; a frame used after its trampoline returned is
#   caught.
# - halt_on_error=1, abort_on_error=0: the first report ends the process
#   with exitcode 99; the test that ran it fails too.
ASAN_OPTIONS="detect_leaks=0:detect_stack_use_after_return=1"
ASAN_OPTIONS="$ASAN_OPTIONS:halt_on_error=1:abort_on_error=0:exitcode=99"
ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$logdir/asan"
# UndefinedBehaviorSanitizer: gcc's checks print and go on by default;
# here the first report ends the process too (exit status 1), with a stack.
# With gcc's two runtimes (libasan, libubsan) UBSan ignores log_path and
# always writes to stderr: a report reaches us through the exit status and
# the stderr that the tests check, and through their output, which is
# searched for reports below.
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:report_error_type=1"
export ASAN_OPTIONS UBSAN_OPTIONS

out=$logdir/../sanitize-tests.log
: > "$out"
start=$(date +%s)
passed=0
failed=0
failures=""
. "$(dirname "$0")/logged.sh"
for t in test_perf_profiler test_perf_storms test_perf_live test_perf_live_hostile; do
    # (a module whose output could not all be kept fails too: that output
    # is searched for sanitizer reports below)
    logged "$out" "$py" -m test -v "$t"
    if [ "$logged_status" = 0 ] && [ "$logged_kept" = 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $t"
        [ "$logged_kept" = 1 ] || failures="$failures(log-not-written)"
    fi
done
elapsed=$(($(date +%s) - start))

reports=0
for log in "$logdir"/*; do
    [ -e "$log" ] || continue
    reports=$((reports + 1))
    echo "=== sanitizer report: $log"
    head -60 "$log"
done
# Reports on stderr of processes whose output the tests printed.
inline=$(grep -c -E 'runtime error:|ERROR: AddressSanitizer' "$out")
reports=$((reports + inline))
skips=$(grep -c -E "\.\.\. skipped '" "$out")

echo
"$(dirname "$0")/failed-tests.sh" "$out"
[ "$failed" -eq 0 ] || echo "failed:$failures"
echo "sanitize: test modules: $passed passed, $failed failed ($skips tests" \
     "skipped); $reports sanitizer reports (logs in $logdir); ${elapsed}s"
[ "$failed" -eq 0 ] && [ "$reports" -eq 0 ]
