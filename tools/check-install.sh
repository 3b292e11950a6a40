#!/bin/sh
# Check the interpreter as users run it once installed.  The build tree
# BUILD (already built: CPython's `make install` rebuilds nothing when it
# is current) is installed twice into WORKDIR:
#
#   prefix/    make install prefix=WORKDIR/prefix, then a venv made from
#              it in venv/ (--without-pip: there is no package index);
#   destdir/   make install DESTDIR=WORKDIR/destdir, the configured prefix
#              staged under it, as a packager does.
#
# and then:
#   - perf record -g of `python -X perf EXAMPLE` (examples/demo.py) names
#     py::baz, py::bar and py::foo, in that order, in the stacks of the
#     samples in foo: with the venv's python and the staged one;
#   - python3.11-config --cflags of both shows the frame-pointer flags
#     that BUILD was compiled with;
#   - python -m sysconfig of both says PY_HAVE_PERF_TRAMPOLINE = "1";
#   - the venv's python imports the test modules from the installed
#     stdlib, and `python -m test test_perf_profiler test_perfmaps
#     test_perf_storms` passes there (but for the lines' accuracy
#     recordings, below).
# A failed check does not stop the others; the last line is the summary
# "check-install: N passed, N failed" (and the exit status 1 if any
# failed).  WORKDIR may be anywhere, under /tmp too; it is emptied first
# if it is one of ours (or empty), refused otherwise.
#
#   check-install.sh BUILD WORKDIR EXAMPLE
set -eu
build=$1 work=$2 example=$3
tools=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "check-install: ok: $*"; }
fail() { failed=$((failed + 1)); echo "check-install: FAILED: $*" >&2; }
summary() {
    echo "check-install: done in $(( $(date +%s) - start )) s"
    echo "check-install: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

build=$(cd "$build" && pwd)
example=$(cd "$(dirname "$example")" && pwd)/$(basename "$example")
[ -x "$build/python" ] || { fail "$build/python is not built"; summary; exit 1; }
case $work in /|/tmp|/tmp/) fail "refusing to use $work as WORKDIR"; summary; exit 1;; esac
if [ -d "$work" ] && [ ! -e "$work/.check-install" ] && [ -n "$(ls -A "$work")" ]; then
    fail "$work is not empty and not a WORKDIR of check-install.sh"
    summary
    exit 1
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
: > "$work/.check-install"

# The flags BUILD was compiled with that keep frame pointers.
fp_flags=$("$build/python" -c 'import sysconfig
print(" ".join(f for f in sysconfig.get_config_var("CFLAGS").split()
               if "frame-pointer" in f))')
[ -n "$fp_flags" ] || fail "$build was not compiled with frame pointers (CFLAGS)"

# do_install LABEL MAKE-ARGS...: make install into WORKDIR, log in WORKDIR.
do_install() {
    label=$1
    shift
    t0=$(date +%s)
    if make -C "$build" install "$@" > "$work/install-$label.log" 2>&1; then
        pass "make install $* ($(( $(date +%s) - t0 )) s)"
    else
        tail -20 "$work/install-$label.log" >&2
        fail "make install $* ($work/install-$label.log)"
        return 1
    fi
}

# check_config BINDIR: python3.11-config --cflags has the build's flags.
check_config() {
    config=$1/python3.11-config
    cflags=$("$config" --cflags 2>&1) || { fail "$config --cflags: $cflags"; return 0; }
    missing=
    for f in $fp_flags; do
        case " $cflags " in *" $f "*) ;; *) missing="$missing $f";; esac
    done
    if [ -z "$missing" ] && [ -n "$fp_flags" ]; then
        pass "$config --cflags has $fp_flags"
    else
        fail "$config --cflags lacks$missing: $cflags"
    fi
}

# check_sysconfig PYTHON
check_sysconfig() {
    if "$1" -m sysconfig 2>&1 | grep -q '^	PY_HAVE_PERF_TRAMPOLINE = "1"$'; then
        pass "$1 -m sysconfig: PY_HAVE_PERF_TRAMPOLINE = \"1\""
    else
        fail "$1 -m sysconfig does not say PY_HAVE_PERF_TRAMPOLINE = \"1\""
    fi
}

# check_perf LABEL PYTHON: perf record -g of EXAMPLE under -X perf names
# py::baz <- py::bar <- py::foo in at least 90% of the samples in foo.
check_perf() {
    label=$1 py=$2
    if verdict=$("$build/python" -I "$tools/perf-chain.py" --record \
            --buildid-dir "$work/buildid" --keep "$work/perf-$label" \
            "$py" "$example"); then
        pass "$label: perf record -g, -X perf: $verdict"
    else
        fail "$label: perf record -g, -X perf: $verdict ($work/perf-$label/)"
    fi
}

# --- make install prefix=..., and a venv ------------------------------------

prefix=$work/prefix venv=$work/venv
if do_install prefix prefix="$prefix"; then
    check_config "$prefix/bin"
    if "$prefix/bin/python3.11" -m venv --without-pip "$venv" \
            > "$work/venv.log" 2>&1; then
        pass "python3.11 -m venv --without-pip $venv"
        py=$venv/bin/python
        check_sysconfig "$py"
        check_perf venv "$py"
        where=$("$py" -c 'import test.test_perf_profiler._common, test.test_perfmaps, test.test_perf_storms, sys
print(*[m.__file__ for n, m in sys.modules.items() if n.startswith("test.test_perf")])' 2>&1) || true
        outside=
        for f in $where; do
            case $f in "$prefix"/lib/python3.11/test/*) ;; *) outside="$outside $f";; esac
        done
        if [ -n "$where" ] && [ -z "$outside" ]; then
            pass "the venv imports the test modules from $prefix/lib/python3.11"
        else
            fail "the venv's test modules are not the installed ones: $where"
        fi
        t0=$(date +%s)
        # (from WORKDIR: the build tree's Lib must not be on the path.
        # Not the lines' accuracy recordings, two minutes of the CI's 90
        # that `make test` spends on build/ already: nothing in them
        # depends on where the stdlib is.)
        if (cd "$work" && "$py" -m test -v test_perf_profiler test_perfmaps \
                test_perf_storms -i '*.LinesInSamplesTests.*' \
                > "$work/test.log" 2>&1); then
            skipped=$(grep -c '\.\.\. skipped' "$work/test.log" || true)
            pass "venv: python -m test test_perf_profiler test_perfmaps test_perf_storms ($(( $(date +%s) - t0 )) s, $skipped cases skipped: $work/test.log)"
        else
            tail -30 "$work/test.log" >&2
            fail "venv: python -m test test_perf_profiler test_perfmaps test_perf_storms ($work/test.log)"
        fi
    else
        cat "$work/venv.log" >&2
        fail "python3.11 -m venv --without-pip $venv"
    fi
fi

# --- make install DESTDIR=... -------------------------------------------------

destdir=$work/destdir
configured=$("$build/python" -c 'import sysconfig; print(sysconfig.get_config_var("prefix"))')
staged=$destdir$configured
if do_install destdir DESTDIR="$destdir"; then
    if [ -x "$staged/bin/python3.11" ] && [ -z "$(find "$destdir" -mindepth 1 \
            -maxdepth 1 ! -name "$(echo "$configured" | cut -d/ -f2)")" ]; then
        pass "make install DESTDIR= staged everything under $staged"
    else
        fail "make install DESTDIR= did not stage all under $staged"
    fi
    check_config "$staged/bin"
    check_sysconfig "$staged/bin/python3.11"
    check_perf destdir "$staged/bin/python3.11"
fi

summary
