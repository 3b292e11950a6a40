#!/bin/sh
# Check the source tarball as a user gets it: unpack, `./configure && make`
# with no autotools (they are hidden from PATH), no top-level Makefile and
# no flags; then the interpreter must have trampoline support and frame
# pointers, name a Python function under real `perf record -g` with
# -X perf, and pass the parts of test_perf_profiler that depend on what
# the generated configure found (the build's options, trampolines under
# perf, arena files, the second evaluator of -X perf_lines and its
# objcopy, read by addr2line, eu-stack and perf inject).  The whole
# package runs in `make test` on build/, whose tree `make check-export`
# shows equal to the tarball's but for the generated configure; running
# it again here took 5 of the CI's 90 minutes.
#
#   check-dist.sh TARBALL WORKDIR JOBS
set -eu
tgz=$1 work=$2 jobs=$3
start=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "error: $*" >&2; echo "check-dist: FAILED after $(( $(date +%s) - start )) s" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/no-autotools"
work=$(cd "$work" && pwd)
for t in autoconf autoheader autoreconf aclocal automake autom4te; do
    printf '#!/bin/sh\necho "check-dist: $0 was run, the tarball must not need it" >&2\nexit 1\n' \
        > "$work/no-autotools/$t"
    chmod +x "$work/no-autotools/$t"
done
tar -xzf "$tgz" -C "$work"
top=$(tar -tzf "$tgz" | head -1 | cut -d/ -f1)
cd "$work/$top"
PATH=$work/no-autotools:$PATH
export PATH
echo "check-dist: ./configure && make in $work/$top"
./configure > "$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; fail "./configure failed ($work/configure.log)"; }
grep -E "perf trampoline support|frame pointers" "$work/configure.log"
make -j"$jobs" > "$work/make.log" 2>&1 || { tail -30 "$work/make.log"; fail "make failed ($work/make.log)"; }
echo "check-dist: built in $(( $(date +%s) - start )) s"

./python -m sysconfig > "$work/sysconfig.txt"
grep -E 'PY_HAVE_PERF_TRAMPOLINE|PY_HAVE_FRAME_POINTERS' "$work/sysconfig.txt"
grep -q 'PY_HAVE_PERF_TRAMPOLINE = "1"' "$work/sysconfig.txt" ||
    fail "python -m sysconfig does not say PY_HAVE_PERF_TRAMPOLINE = \"1\""
grep -q 'PY_HAVE_FRAME_POINTERS = "1"' "$work/sysconfig.txt" ||
    fail "the default build has no frame pointers (PY_HAVE_FRAME_POINTERS)"

# -X perf under real perf: a Python function appears in the stacks.
cat > "$work/prog.py" <<'PY'
def check_dist_leaf(n):
    return sum(i * i for i in range(n))
def check_dist_main():
    for _ in range(300):
        check_dist_leaf(20000)
check_dist_main()
PY
perf record -q -F 999 -g -o "$work/perf.data" \
    sh -c 'echo $$ > "$1"; exec ./python -X perf "$2"' sh "$work/pid" "$work/prog.py" \
    > "$work/perf-record.log" 2>&1 || { cat "$work/perf-record.log"; fail "perf record failed (perf installed? perf_event_paranoid <= 1 or root?)"; }
perf script -i "$work/perf.data" > "$work/perf-script.txt" 2>/dev/null
rm -f "/tmp/perf-$(cat "$work/pid").map" /tmp/py-perf-"$(cat "$work/pid")"-*.so
grep -q 'py::check_dist_leaf' "$work/perf-script.txt" ||
    fail "perf script names no py::check_dist_leaf ($work/perf-script.txt)"
echo "check-dist: perf record -g names py::check_dist_leaf"

# (test_lines without its recordings and debuggers: LinesElsewhereTests)
tests="test_build test_profiling test_arena_files test_lines"
./python -m test -v $(printf 'test_perf_profiler.%s ' $tests) \
    -i '*.LinesInSamplesTests.*' -i '*.RecordLinesTests.*' \
    -i '*.LinesInDebuggersTests.*' > "$work/test.log" 2>&1 ||
    { tail -8 "$work/test.log"; "$here/failed-tests.sh" "$work/test.log"
      fail "test_perf_profiler failed ($work/test.log)"; }
tail -3 "$work/test.log"
echo "check-dist: OK in $(( $(date +%s) - start )) s: ./configure && make gives trampolines, frame pointers, -X perf under perf, test_perf_profiler ($tests) passes"
