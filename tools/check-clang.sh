#!/bin/sh
# check-clang.sh: the patched tree built with clang, as users who pick
# clang build it, and checked there.
#
#   tools/check-clang.sh SRC OBJDIR JOBS [lto|thinlto]
#
# SRC is the patched tree (build/src), OBJDIR the object directory.  The
# build is `CC=clang configure CFLAGS=-fcf-protection` (the -O3 of
# CPython's own flags); with `lto` also --with-lto, which CPython 3.11.2's
# configure turns into clang's full LTO (-flto: it takes ThinLTO only when
# asked, --with-lto=thin, where 3.12 made thin the default for clang);
# with `thinlto`, --with-lto=thin (-flto=thin), under which clang renames
# the static functions it shares between modules name.llvm.N.
# -fcf-protection is what distributions add: it is given so
# that the CET form of the trampoline is what gets checked.  STOCK_SRC (an
# unpacked pristine 3.11.2, default build-stock/src) is built the same way,
# with the frame-pointer flags our configure adds, in OBJDIR-stock, for
# the figure against stock (STOCK_SRC=- leaves it out).  Each tree is (re)built when OBJDIR/python is
# missing or older than SRC/Python/ceval.c; the build time is printed.
#
# Then:
#   - sysconfig: PY_HAVE_PERF_TRAMPOLINE is 1, CC is clang, and which LTO
#     flags the build used;
#   - CET and the frame record under clang's code generation: the GNU
#     property note of Python/asm_trampoline.o has IBT and SHSTK, the
#     trampoline starts with endbr64 and builds a frame record (push %rbp;
#     mov %rsp,%rbp), and so does _PyEval_EvalFrameDefault in the linked
#     interpreter;
#   - the instructions per Python call (callgrind, fib(22) less fib(20),
#     divided by the calls between the two): stock, ours without the flag,
#     and what -X perf adds;
#   - `perf record -g` of examples/demo.py under -X perf names py::baz <-
#     py::bar <- py::foo (tools/perf-chain.py);
#   - the perf tests with that interpreter.
set -eu
src=$1 obj=$2 jobs=$3 mode=${4:-O3}
here=$(cd "$(dirname "$0")/.." && pwd)
stock_src=${STOCK_SRC:-$here/build-stock/src}
FP_CFLAGS=${FP_CFLAGS:--fno-omit-frame-pointer -mno-omit-leaf-frame-pointer}
case $mode in
    O3) lto="" ;;
    lto) lto=--with-lto ;;
    thinlto) lto=--with-lto=thin ;;
    *) echo "usage: $0 SRC OBJDIR JOBS [lto|thinlto]" >&2; exit 2 ;;
esac
command -v clang > /dev/null || { echo "error: no clang" >&2; exit 1; }

# build TREE OBJDIR CFLAGS: configure TREE in OBJDIR with clang and make.
build() {
    tree=$(cd "$1" && pwd) dir=$2 cflags=$3
    if [ -x "$dir/python" ] && [ ! "$tree/Python/ceval.c" -nt "$dir/python" ]
    then
        return 0
    fi
    echo "+ CC=clang configure $lto CFLAGS='$cflags' in $dir/ and make"
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && "$tree/configure" --without-ensurepip $lto CC=clang \
        CFLAGS="$cflags" > configure.log 2>&1) || {
        tail -30 "$dir/configure.log"; exit 1; }
    start=$(date +%s)
    make -C "$dir" -j"$jobs" > "$dir/build.log" 2>&1 || {
        tail -30 "$dir/build.log"; exit 1; }
    echo "built in $(( $(date +%s) - start )) s (log: $dir/build.log)"
}
build "$src" "$obj" "-fcf-protection"
py=$obj/python
stock=-
if [ "$stock_src" != - ]; then
    build "$stock_src" "$obj-stock" "-fcf-protection $FP_CFLAGS"
    stock=$obj-stock/python
fi

echo "+ sysconfig"
"$py" - <<'EOF'
import sysconfig
v = sysconfig.get_config_var
lto = sorted({w for w in (v("PY_CFLAGS_NODIST") + " " + v("PY_LDFLAGS_NODIST")).split()
              if w.startswith("-flto")})
print(f"CC={v('CC')!r} PY_HAVE_PERF_TRAMPOLINE={v('PY_HAVE_PERF_TRAMPOLINE')!r} "
      f"LTO flags: {' '.join(lto) or 'none'}")
if v("PY_HAVE_PERF_TRAMPOLINE") != 1:
    raise SystemExit("error: PY_HAVE_PERF_TRAMPOLINE is not 1")
if "clang" not in v("CC"):
    raise SystemExit("error: not built with clang")
if "-fno-omit-frame-pointer" not in v("CFLAGS"):
    raise SystemExit("error: the frame-pointer flags are not in CFLAGS")
EOF
want=""
case $mode in
    lto) want=-flto ;;
    thinlto) want=-flto=thin ;;
esac
if [ -n "$want" ]; then
    grep -q -- "^CONFIGURE_CFLAGS_NODIST=.* $want " "$obj/Makefile" || {
        grep '^CONFIGURE_CFLAGS_NODIST' "$obj/Makefile" >&2
        echo "error: $lto did not give clang $want" >&2; exit 1; }
    echo "LTO: $lto compiles with $want"
fi

echo "+ CET and the frame record"
obj_o=$obj/Python/asm_trampoline.o
readelf -n "$obj_o" | grep -q 'x86 feature: IBT, SHSTK' || {
    readelf -n "$obj_o" >&2
    echo "error: $obj_o has no IBT, SHSTK property note" >&2; exit 1; }
echo "$obj_o: x86 feature: IBT, SHSTK"
# the first three instructions of the template, then of the evaluator
first3() {
    objdump -d --no-show-raw-insn "$1" | awk -v fn="<$2>:" '
        $2 == fn { on = 1; next }
        on && NF >= 2 { sub(/^ *[0-9a-f]+:\t/, ""); print; if (++n == 3) exit }' |
        tr -s ' \t' ' ' | tr '\n' ';'
}
t=$(first3 "$obj_o" _Py_trampoline_func_start)
echo "trampoline: $t"
case $t in
    "endbr64;push %rbp;mov %rsp,%rbp;") ;;
    *) echo "error: the trampoline does not start endbr64; push; mov" >&2
       exit 1 ;;
esac
e=$(first3 "$py" _PyEval_EvalFrameDefault)
echo "_PyEval_EvalFrameDefault: $e"
case $e in
    "endbr64;push %rbp;mov %rsp,%rbp;") ;;
    *) echo "error: the evaluator has no frame record after endbr64" >&2
       exit 1 ;;
esac

echo "+ instructions per Python call (callgrind, fib(22) - fib(20))"
# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 that clang 14 writes
# ("unhandled dwarf2 abbrev form code 0x25", then it gives up): callgrind
# runs copies without the debug sections, beside the originals (so that
# they find their build directories), with the same code.
for p in "$py" "$stock"; do
    [ "$p" = - ] || objcopy --strip-debug "$p" "$p-nodebug"
done
PYTHONPATH="$here/bench" "$py" - "$py" "$stock" \
    "$here/bench/workloads/fib.py" <<'EOF'
import sys
import run                      # bench/run.py

py, stock, fib = sys.argv[1:]
(c1, _), (c2, _) = run.counts(py, fib, "20"), run.counts(py, fib, "22")
calls = c2 - c1
def per_call(python, args):
    python += "-nodebug"
    return (run.instructions(python, args, fib, "22")
            - run.instructions(python, args, fib, "20")) / calls
off = per_call(py, [])
perf = per_call(py, ["-X", "perf"])
if stock == "-":
    print(f"off: {off:.2f} per call; -X perf: +{perf - off:.2f} per call "
          f"({calls} calls)")
else:
    base = per_call(stock, [])
    print(f"stock: {base:.2f} per call; off: {off:.2f} ({off - base:+.2f} "
          f"vs stock); -X perf: +{perf - off:.2f} per call ({calls} calls)")
EOF

echo "+ perf record -g of examples/demo.py under -X perf"
"$py" -I "$here/tools/perf-chain.py" --record "$py" "$here/examples/demo.py"

echo "+ the perf tests"
env -u PYTHONPERFSUPPORT -u PYTHON_PERF_JIT_SUPPORT "$py" -m test \
    test_perf_profiler test_perf_unwind test_perfmaps test_perf_storms
