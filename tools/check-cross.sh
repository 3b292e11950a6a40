#!/bin/sh
# Cross-build the patched tree for another architecture and check the perf
# trampolines there under qemu-user (make check-cross ARCH=...).
#
#   check-cross.sh ARCH BUILD_PYTHON SRC OBJDIR JOBS
#
# ARCH is aarch64, riscv64 or i686.  BUILD_PYTHON is our native build
# (CPython's configure wants a python of the same version to run the build
# steps), SRC the patched tree, OBJDIR the cross build directory.
# CROSS_CFLAGS adds compiler flags (e.g. -mbranch-protection=standard for
# aarch64; the build directory then gets a suffix of its own).
#
# aarch64, riscv64: the interpreter (`make python`, with the few modules
# the check needs linked in statically, Modules/Setup.local) and a helper
# extension (tools/cross/stackwalk.c) are built; under qemu, a script with
# -X perf, and again with -X perf_jit, calls three Python functions deep
# into the helper, which records its stack; tools/cross/unwind.py then
# unwinds it on this machine, through frame records and /tmp/perf-PID.map,
# and through DWARF rules (the jitdump's for the trampolines, the ELF
# files' .eh_frame or .debug_frame elsewhere, read with pyelftools: it runs
# on HOST_PYTHON, /usr/bin/python3 by default, which has Debian's
# python3-pyelftools), and checks the three functions; the trampoline's
# unwind data is also decoded by the target's readelf, in an ELF file laid
# out as perf inject lays one out (perf cannot inject a recording of qemu),
# and checked against its objdump.
# i686: no trampoline there; the probe says so, -X perf warns once, the
# sys API refuses, and test_perf_profiler skips what needs trampolines.
#
# qemu is always called explicitly with -L SYSROOT (binfmt_misc is not
# relied upon).  Children of the emulated interpreter run through a
# wrapper script next to it (OBJDIR/python-qemu), which is what
# sys.executable names.  Ends with one summary line; exits non-zero on any
# failure.
set -u
arch=$1 build_python=$2 src=$3 objdir=$4 jobs=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)

case $arch in
    aarch64) triplet=aarch64-linux-gnu qemu=qemu-aarch64 trampoline=yes ;;
    riscv64) triplet=riscv64-linux-gnu qemu=qemu-riscv64 trampoline=yes ;;
    i686)    triplet=i686-linux-gnu   qemu=qemu-i386    trampoline=no ;;
    *) echo "check-cross: ARCH must be aarch64, riscv64 or i686, not '$arch'" >&2
       exit 2 ;;
esac
sysroot=/usr/$triplet
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "PASS: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
finish() {
    echo "check-cross: $arch took $(( $(date +%s) - start )) s"
    echo "check-cross-$arch: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
    exit $?
}
die() { echo "check-cross: $*" >&2; fail "$*"; finish; }

for tool in $triplet-gcc $qemu; do
    command -v "$tool" > /dev/null ||
        die "$tool not found: run tools/install-deps.sh cross"
done
host_python=${HOST_PYTHON:-/usr/bin/python3}
if [ "$trampoline" = yes ]; then
    "$host_python" -c 'import elftools' 2> /dev/null ||
        die "$host_python cannot import elftools: run tools/install-deps.sh"
fi
build_python=$(cd "$(dirname "$build_python")" && pwd)/$(basename "$build_python")
src=$(cd "$src" && pwd)
mkdir -p "$objdir/Modules"
objdir=$(cd "$objdir" && pwd)

# --- the build -------------------------------------------------------------

# The modules that the check scripts and test_perf_profiler import, built
# into the interpreter (no shared modules: `make python` is all it takes).
setup_local=$objdir/Modules/Setup.local
cat > "$setup_local.new" <<'EOF'
# check-cross: built in, so that `make python` is the whole build
*static*
_struct _struct.c
math mathmodule.c
select selectmodule.c
_posixsubprocess _posixsubprocess.c
fcntl fcntlmodule.c
binascii binascii.c
_random _randommodule.c
_bisect _bisectmodule.c
_heapq _heapqmodule.c
_sha512 sha512module.c
_json _json.c
_contextvars _contextvarsmodule.c
_opcode _opcode.c
array arraymodule.c
unicodedata unicodedata.c
_socket socketmodule.c
_datetime _datetimemodule.c
EOF
cmp -s "$setup_local.new" "$setup_local" || mv "$setup_local.new" "$setup_local"
rm -f "$setup_local.new"

if [ ! -f "$objdir/Makefile" ]; then
    echo "check-cross: configuring $objdir for $triplet"
    # Cache answers configure cannot find out without running target code.
    # pkg-config must not offer this machine's libraries (zlib, say) to
    # the target: it looks into the target's (empty) directory only.
    (cd "$objdir" && PKG_CONFIG_LIBDIR=$sysroot/lib/pkgconfig "$src/configure" --host=$triplet \
        --build="$(gcc -dumpmachine)" --with-build-python="$build_python" \
        --without-ensurepip \
        ${CROSS_CFLAGS:+CFLAGS="$CROSS_CFLAGS"} \
        ac_cv_buggy_getaddrinfo=no ac_cv_file__dev_ptmx=yes \
        ac_cv_file__dev_ptc=no > configure.log 2>&1) || {
        tail -30 "$objdir/configure.log"; die "configure failed"; }
fi
echo "check-cross: building $objdir/python ($triplet, nice)"
t0=$(date +%s)
nice make -C "$objdir" -j"$jobs" -s python pybuilddir.txt > "$objdir/build.log" 2>&1 || {
    tail -40 "$objdir/build.log"; die "the cross build failed"; }
echo "check-cross: built in $(( $(date +%s) - t0 )) s"

# The emulated interpreter, as the checks and its own children start it.
wrapper=$objdir/python-qemu
cat > "$wrapper" <<EOF
#!/bin/sh
# $triplet python under qemu-user, argv[0] kept (sys.executable is this file)
exec $qemu -L $sysroot -0 "\$0" "$objdir/python" "\$@"
EOF
chmod +x "$wrapper"

# --- checks common to every architecture ------------------------------------

# The probe's answer, from config.log (configure may have been run again
# by CPython's Makefile since).
probe=$(awk '/checking for perf trampoline support/ { p = 1; next }
             p && /result:/ { sub(/.*result: /, ""); r = $0; p = 0 }
             END { print r }' "$objdir/config.log")
if [ "$probe" = "$trampoline" ]; then
    pass "configure: perf trampoline support... $probe"
else
    fail "configure: perf trampoline support... '$probe', expected $trampoline"
fi
sysconf=$("$wrapper" -c 'import sysconfig; print(bool(sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE")), sysconfig.get_config_var("MULTIARCH"))' 2>&1)
if [ "$trampoline" = yes ]; then want="True $triplet"; else want="False $triplet"; fi
[ "$arch" = i686 ] && want="False i386-linux-gnu"
if [ "$sysconf" = "$want" ]; then
    pass "sysconfig: PY_HAVE_PERF_TRAMPOLINE, MULTIARCH = $sysconf"
else
    fail "sysconfig says '$sysconf', expected '$want'"
fi
fp=$(grep '^checking whether to build with frame pointers' "$objdir/configure.log" | sed 's/.*\.\.\. //')
echo "check-cross: frame pointers: $fp"

if [ "$trampoline" = no ]; then
    # -X perf and the variables: accepted, nothing happens, one warning.
    for how in "-X perf" "-X perf_jit" "-X perf -X perf_jit" "env PYTHONPERFSUPPORT=1" "env PYTHON_PERF_JIT_SUPPORT=1"; do
        case $how in
            env*) out=$(env ${how#env } "$wrapper" -c 'import sys; print(sys.is_stack_trampoline_active())' 2>"$objdir/stderr.txt") ;;
            *) out=$("$wrapper" $how -c 'import sys; print(sys.is_stack_trampoline_active())' 2>"$objdir/stderr.txt") ;;
        esac
        nwarn=$(grep -c 'RuntimeWarning: perf trampoline not available on this platform' "$objdir/stderr.txt")
        nlines=$(wc -l < "$objdir/stderr.txt")
        if [ "$out" = False ] && [ "$nwarn" = 1 ] && [ "$nlines" -le 2 ]; then
            pass "$how: runs, inactive, one warning: $(head -1 "$objdir/stderr.txt" | sed 's/^.*RuntimeWarning/RuntimeWarning/')"
        else
            fail "$how: printed '$out', stderr: $(cat "$objdir/stderr.txt")"
        fi
    done
    out=$("$wrapper" -c '
import sys
try:
    sys.activate_stack_trampoline("perf")
except ValueError as e:
    print("ValueError:", e)
print(sys.deactivate_stack_trampoline(), sys.is_stack_trampoline_active())
' 2>&1)
    if [ "$out" = "ValueError: perf trampoline not available
None False" ]; then
        pass "sys API refuses: $(echo "$out" | tr '\n' ' ')"
    else
        fail "sys API: $out"
    fi
    # The test module, in the emulated interpreter: the trampoline tests
    # skip with their reason, the rest (API refusal, --help) pass.
    (cd "$objdir" && "$wrapper" -m unittest -v test.test_perf_profiler \
        > test_perf_profiler.log 2>&1)
    rc=$?
    ran=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$objdir/test_perf_profiler.log")
    skipped=$(grep -c "\.\.\. skipped 'perf trampoline not supported" "$objdir/test_perf_profiler.log")
    okay=$(grep -c '\.\.\. ok$' "$objdir/test_perf_profiler.log")
    unsupported=$(grep -c 'test_unsupported_build .* \.\.\. ok$' "$objdir/test_perf_profiler.log")
    if [ "$rc" -eq 0 ] && [ "${ran:-0}" -gt 0 ] && [ "$unsupported" = 1 ]; then
        pass "test_perf_profiler under $qemu: $ran tests, $okay passed, $skipped skipped as 'perf trampoline not supported'"
    else
        tail -30 "$objdir/test_perf_profiler.log"
        fail "test_perf_profiler under $qemu (exit $rc; $objdir/test_perf_profiler.log)"
    fi
    finish
fi

# --- aarch64, riscv64: the stack, through the trampolines --------------------

if [ "$arch" = aarch64 ]; then
    # The template's GNU property note says what the compiler's
    # branch-protection macros asked for, no more, no less.
    macros=$($triplet-gcc ${CROSS_CFLAGS:-} -dM -E - < /dev/null)
    want=
    echo "$macros" | grep -q '__ARM_FEATURE_BTI_DEFAULT 1' && want=BTI
    echo "$macros" | grep -q '__ARM_FEATURE_PAC_DEFAULT' && want="${want:+$want, }PAC"
    note=$($triplet-readelf -n "$objdir/Python/asm_trampoline.o" |
           sed -n 's/.*AArch64 feature: //p')
    if [ "$note" = "$want" ]; then
        pass "asm_trampoline.o: GNU property note '${note:-none}', as asked by ${CROSS_CFLAGS:-the default flags}"
    else
        fail "asm_trampoline.o: GNU property note '$note', expected '$want'"
    fi
    echo "check-cross: the interpreter's own note: '$($triplet-readelf -n "$objdir/python" | sed -n 's/.*AArch64 feature: //p')' (the C library's start files decide)"
fi

# The flags extensions get (python-config's): frame pointers, -g, and
# -mbranch-protection when CROSS_CFLAGS has it.
cflags=$("$wrapper" -c 'import sysconfig; print(sysconfig.get_config_var("CFLAGS"))')
ext_suffix=$("$wrapper" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
helper=$objdir/check-cross/_stackwalk$ext_suffix
mkdir -p "$objdir/check-cross"
$triplet-gcc -shared -fPIC $cflags -I"$objdir" -I"$src/Include" \
    -o "$helper" "$here/cross/stackwalk.c" || \
    die "the helper extension does not build"
echo "check-cross: helper built with $cflags"
pass "helper extension built: $(basename "$helper")"

case "$arch ${CROSS_CFLAGS:-}" in
    aarch64*-mbranch-protection=standard*|aarch64*-mbranch-protection=*pac-ret*)
        expect_pac=--expect-pac ;;
    *) expect_pac= ;;
esac
for mode in perf perf_jit; do
    out=$objdir/check-cross/$mode
    rm -rf "$out" && mkdir -p "$out"
    "$wrapper" -X $mode "$here/cross/three_deep.py" "$objdir/check-cross" \
        "$out" > "$out/stdout.txt" 2> "$out/stderr.txt"
    rc=$?
    pid=$(sed -n 's/^PID //p' "$out/stdout.txt")
    # The file the process wrote, taken out of /tmp (and deleted there:
    # the process was ours; a file of the other kind with its pid is not).
    case $mode in
        perf) f=/tmp/perf-$pid.map ;;
        perf_jit) f=/tmp/jit-$pid.dump ;;
    esac
    if [ -n "$pid" ] && [ -f "$f" ]; then cp "$f" "$out/" && rm -f "$f"; fi
    if [ -n "$pid" ]; then
        for a in /tmp/py-perf-"$pid"-*.so; do
            [ -f "$a" ] && cp "$a" "$out/"
        done
        rm -f /tmp/py-perf-"$pid"-*.so
    fi
    if [ $rc -ne 0 ] || [ -z "$pid" ] || [ ! -f "$out/stack.txt" ] ||
            ! grep -qx "active True" "$out/stdout.txt"; then
        cat "$out/stdout.txt" "$out/stderr.txt"
        fail "-X $mode: the script failed (exit $rc) or ran without the trampoline"
        continue
    fi
    if [ -s "$out/stderr.txt" ]; then
        cat "$out/stderr.txt"
        fail "-X $mode: the script wrote to stderr"
        continue
    fi
    # The trampolines' ELF files, read by the target's binutils: headers,
    # unwind table and line table without a warning, and py::f3's symbol
    # and source line (in whichever file its trampoline is).
    f3_line=$(grep -n '^def f3(' "$here/cross/three_deep.py" | cut -d: -f1)
    arena= f3= warnings=
    for a in "$out"/py-perf-"$pid"-*.so; do
        [ -f "$a" ] || continue
        warnings=$warnings$($triplet-readelf -W -h -l -S -s -n \
            --debug-dump=frames,info,line,aranges "$a" 2>&1 > /dev/null)
        s=$($triplet-readelf -W -s "$a" | awk '$8 ~ /^py::f3:/ { print $2 }')
        [ -n "$s" ] && arena=$a f3=$s
    done
    if [ -z "$f3" ] || [ -n "$warnings" ]; then
        echo "$warnings"
        fail "-X $mode: no py::f3 in the trampolines' files in $out, or $triplet-readelf warned"
    elif [ "$($triplet-addr2line -e "$arena" "0x$f3")" != \
           "$here/cross/three_deep.py:$f3_line" ]; then
        $triplet-addr2line -e "$arena" "0x$f3"
        fail "-X $mode: $triplet-addr2line gives another line for py::f3"
    else
        pass "-X $mode: $triplet-readelf reads the trampolines' file ($(
            $triplet-readelf -h "$arena" | sed -n 's/^ *Machine: *//p')), py::f3 at three_deep.py:$f3_line"
    fi
    binutils=
    [ $mode = perf_jit ] && binutils="--binutils $triplet-"
    if "$host_python" "$here/cross/unwind.py" --mode $mode --arch $arch \
            --dir "$out" --python "$objdir/python" --helper "$helper" \
            $expect_pac $binutils; then
        pass "-X $mode: the stack names py::f3, py::f2, py::f1, py::<module> in order, with their callers"
    else
        fail "-X $mode: see above ($out)"
    fi
done
finish
