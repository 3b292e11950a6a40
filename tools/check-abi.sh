#!/bin/sh
# Check that the patched interpreter keeps the ABI of stock CPython 3.11.2.
#
#   check-abi.sh PYTHON STOCK_SRC STOCK_SHARED OURS_SRC OURS_SHARED WORK
#
# PYTHON is the patched interpreter (build/python); STOCK_SRC the pristine
# tree unpacked from the verified tarball, OURS_SRC the patched one;
# *_SHARED the object directories of --enable-shared builds of each, made
# with the same flags (their pyconfig.h, libpython3.11.so.1.0 and python);
# WORK a scratch directory.  `make check-abi` provides all of them.
#
# Five parts, each timed:
#   ext      tools/abi/abiext.c, compiled against the stock headers, imported
#            and run by PYTHON and by the shared patched python, with perf
#            support off, -X perf and -X perf_jit
#   layout   sizeof, alignment and offsets of every public struct, enum
#            values and macros, stock headers against patched ones
#            (tools/abi/layout.py), and a self-test of that comparison
#   abidiff  libpython3.11.so.1.0, stock against patched: nothing but added
#            _PyPerf* functions and variables, the six PyUnstable_ perf
#            functions of CPython 3.13's C API (and the two assembly
#            symbols of the trampoline template), as the suppressions of
#            tools/abi/ours.abignore say; they are tested first on small
#            libraries with known changes
#   numpy    Debian's python3-numpy (built for Debian's python3.11) under
#            PYTHON, off, -X perf and -X perf_jit, with PYTHONPATH at
#            Debian's dist-packages; stock shared python as the reference
#   dlopen   a host that dlopen()s each libpython after a library that took
#            most of glibc's static TLS surplus; then one that embeds ours
#            that way through PyConfig and, under perf, runs
#            examples/demo.py with -X perf and -X perf_jit: py:: names
#            (tools/abi/dlopen_host.sh)
#
# Ends with one line "check-abi: N passed, N failed"; exits non-zero when
# any part fails.
set -u
if [ $# -ne 6 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
py=$1 stock_src=$2 stock_so=$3 ours_src=$4 ours_so=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
abi=$here/abi
mkdir -p "$work"
work=$(cd "$work" && pwd)
passed=0
failed=0
failures=""
timings=""
LIB=libpython3.11.so.1.0
# The tools' own interpreter: Debian's, which has python3-pyelftools.
host_py=${HOST_PYTHON:-/usr/bin/python3}
DIST=${DEBIAN_DIST_PACKAGES:-/usr/lib/python3/dist-packages}
# What our libpython may add: libabigail suppressions; abidiff reports the rest.
SUPPRESSIONS=$abi/ours.abignore

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# part NAME COMMAND...: run one part, count it, note its time.
part() {
    name=$1
    shift
    echo
    echo "=== check-abi: $name"
    t0=$(now)
    if "$@"; then
        passed=$((passed + 1))
        result=ok
    else
        failed=$((failed + 1))
        failures="$failures $name"
        result=FAILED
    fi
    t=$(elapsed "$t0")
    timings="$timings $name=${t}s"
    echo "=== check-abi: $name $result (${t}s)"
}

# The shared patched python runs from its object directory.
ours_shared_py() {
    LD_LIBRARY_PATH=$ours_so${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        "$ours_so/python" "$@"
}
stock_shared_py() {
    LD_LIBRARY_PATH=$stock_so${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        "$stock_so/python" "$@"
}

# --- ext --------------------------------------------------------------------

part_ext() {
    grep -q 'PY_HAVE_PERF_TRAMPOLINE' "$stock_so/pyconfig.h" && {
        echo "error: $stock_so/pyconfig.h is not from a stock configure"
        return 1
    }
    suffix=$("$py" -c 'import sysconfig
print(sysconfig.get_config_var("EXT_SUFFIX"))') || return 1
    out=$work/ext
    rm -rf "$out" && mkdir -p "$out" || return 1
    # As a distribution builds an extension: position-independent, not
    # linked to libpython, stock headers only.
    ${CC:-cc} -shared -fPIC -O2 -g -Wall \
        -Werror=implicit-function-declaration \
        -I "$stock_src/Include" -I "$stock_so" \
        "$abi/abiext.c" -o "$out/abiext$suffix" || return 1
    ok=0
    for mode in "" "-X perf" "-X perf_jit"; do
        # shellcheck disable=SC2086  # $mode is two words or none
        "$py" $mode "$abi/ext_smoke.py" "$out" || ok=1
        # shellcheck disable=SC2086
        ours_shared_py $mode "$abi/ext_smoke.py" "$out" || ok=1
    done
    return $ok
}

# --- layout -----------------------------------------------------------------

part_layout() {
    "$host_py" "$abi/layout.py" "$work/layout" "$stock_src" "$stock_so" \
        "$ours_src" "$ours_so" || return 1
    "$host_py" "$abi/layout.py" --self-test "$work/layout" "$stock_src" \
        "$stock_so" "$ours_src" "$ours_so" > "$work/layout-selftest.log" 2>&1
    st=$?
    tail -1 "$work/layout-selftest.log"
    [ $st -eq 0 ] || { cat "$work/layout-selftest.log"; return 1; }
}

# --- abidiff ----------------------------------------------------------------

# abidiff_ok OLD NEW REPORT: abidiff OLD NEW into REPORT, with what we may
# add suppressed; 0 when abidiff then finds no change at all.
abidiff_ok() {
    # --harmless: the changes libabigail deems harmless count too.
    abidiff --harmless --suppressions "$SUPPRESSIONS" "$1" "$2" > "$3" 2>&1
    st=$?
    # Bits: 1 error, 2 usage error, 4 ABI change, 8 incompatible change.
    if [ $((st & 3)) -ne 0 ]; then
        cat "$3"
        echo "abidiff did not run (status $st)"
        return 1
    fi
    [ $((st & 8)) -eq 0 ] || echo "abidiff: incompatible change (status $st)"
    [ "$st" -eq 0 ]
}

# The suppressions, on libraries whose differences are known: a struct that
# grew must be rejected, an added function or variable that is not ours
# too, and an added _PyPerf function and variable alone accepted.
abidiff_self_test() {
    t=$work/abidiff-selftest
    rm -rf "$t" && mkdir -p "$t" || return 1
    cat > "$t/lib.c" <<'EOF'
struct box {
    int a;
#ifdef GROW
    int b;
#endif
};
int box_get(struct box *b) { return b->a; }
#ifdef OURS
int _PyPerfSelfTest(void) { return 1; }
int _PyPerf_SelfTestVariable = 3;
#endif
#ifdef OTHER
int other_function(void) { return 2; }
#endif
#ifdef OTHERVAR
int other_variable = 2;
#endif
EOF
    for v in base "GROW" "OURS" "OTHER" "OTHERVAR"; do
        ${CC:-cc} -g -O0 -shared -fPIC ${v:+-D$v} "$t/lib.c" \
            -o "$t/lib-$v.so" || return 1
    done
    r=0
    # expect accept|reject NAME WHAT: lib-base.so against lib-NAME.so.
    expect() {
        if abidiff_ok "$t/lib-base.so" "$t/lib-$2.so" "$t/$2.txt" \
                > "$t/$2.log"; then
            got=accept
        else
            got=reject
        fi
        [ "$got" = "$1" ] && return 0
        echo "self-test: $3: ${got}ed, should be ${1}ed"
        cat "$t/$2.txt" "$t/$2.log"
        r=1
    }
    expect accept OURS "an added _PyPerf function and variable"
    expect reject GROW "a struct that grew"
    expect reject OTHER "an added function that is not ours"
    expect reject OTHERVAR "an added variable that is not ours"
    [ $r -eq 0 ] && echo "abidiff suppressions self-test: 4 passed, 0 failed"
    return $r
}

part_abidiff() {
    command -v abidiff >/dev/null 2>&1 || {
        echo "error: no abidiff (Debian's abigail-tools; tools/install-deps.sh)"
        return 1
    }
    abidiff_self_test || return 1
    report=$work/abidiff.txt
    if abidiff_ok "$stock_so/$LIB" "$ours_so/$LIB" "$report"; then
        # What the suppressions let through, for the log.
        abidiff "$stock_so/$LIB" "$ours_so/$LIB" 2>&1 |
            sed -n 's/^  \[A\] /  added: /p'
        return 0
    fi
    echo "--- $report"
    cat "$report"
    return 1
}

# --- numpy ------------------------------------------------------------------

part_numpy() {
    [ -d "$DIST/numpy" ] || {
        echo "error: no numpy in $DIST (python3-numpy; tools/install-deps.sh)"
        return 1
    }
    echo "--- reference: stock 3.11.2, shared, off"
    PYTHONPATH=$DIST stock_shared_py "$abi/numpy_smoke.py" ||
        echo "note: numpy fails on stock 3.11.2 built with our flags as well"
    ok=0
    for mode in "" "-X perf" "-X perf_jit"; do
        echo "--- $py ${mode:-(off)}"
        # shellcheck disable=SC2086
        PYTHONPATH=$DIST "$py" $mode "$abi/numpy_smoke.py" || ok=1
    done
    return $ok
}

part ext part_ext
part layout part_layout
part abidiff part_abidiff
part numpy part_numpy
part dlopen "$abi/dlopen_host.sh" "$stock_so/$LIB" "$ours_so/$LIB" \
    "$work/dlopen"

echo
echo "times:$timings"
[ "$failed" -eq 0 ] || echo "failed parts:$failures"
echo "check-abi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
