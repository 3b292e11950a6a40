#!/bin/sh
# Check the exported series as a packager uses it: applied to the pristine
# tarball with `quilt push -a --fuzz=0` and, in a git repository, with
# `git am`, each result must equal SRC (the tree `make` builds from) but
# for the files autoconf generates; then the quilt tree is regenerated
# with `autoreconf -ivf`, as distributions do, and built out of tree.
#
#   check-export.sh TARBALL SERIES-DIR SRC WORKDIR JOBS
set -eu
tgz=$1 series=$2 src=$3 work=$4 jobs=$5
start=$(date +%s)
fail() { echo "error: $*" >&2; echo "check-export: FAILED after $(( $(date +%s) - start )) s" >&2; exit 1; }
series=$(cd "$series" && pwd) src=$(cd "$src" && pwd)
rm -rf "$work"
mkdir -p "$work/quilt" "$work/am"
work=$(cd "$work" && pwd)
tar -xzf "$tgz" -C "$work/quilt" --strip-components=1
tar -xzf "$tgz" -C "$work/am" --strip-components=1

(cd "$work/quilt" &&
    QUILT_PATCHES=$series quilt --quiltrc=- push -a -q --fuzz=0) \
    > "$work/quilt.log" 2>&1 || { cat "$work/quilt.log"; fail "quilt push -a --fuzz=0 failed"; }
echo "check-export: quilt push -a --fuzz=0 applied $(grep -c . "$series/series") patches"

(cd "$work/am" && git init -q && git add -A &&
    git -c user.name=check -c user.email=check@localhost commit -q -m pristine &&
    git tag pristine &&
    git -c user.name=check -c user.email=check@localhost am -q \
        $(sed "s|^|$series/|" "$series/series")) \
    > "$work/am.log" 2>&1 || { cat "$work/am.log"; fail "git am failed"; }
echo "check-export: git am made $(cd "$work/am" && git rev-list --count pristine..HEAD) commits"

# The same tree as SRC, but for generated files and what builds leave.
for t in quilt am; do
    diff -r -q -x .pc -x .git -x __pycache__ -x '*.pyc' \
        -x configure -x pyconfig.h.in -x aclocal.m4 "$src" "$work/$t" \
        > "$work/$t.diff" 2>&1 || { cat "$work/$t.diff"; fail "the $t tree differs from $src"; }
    for f in configure pyconfig.h.in aclocal.m4; do
        cmp -s "$work/$t/$f" "$work/quilt/$f" || fail "$t changed the generated $f"
    done
done
echo "check-export: both trees equal $src but for configure, pyconfig.h.in, aclocal.m4"

cd "$work/quilt"
autoreconf -ivf > "$work/autoreconf.log" 2>&1 ||
    { tail -20 "$work/autoreconf.log"; fail "autoreconf -ivf failed (tools/install-deps.sh installs autoconf, automake, autoconf-archive)"; }
mkdir -p "$work/obj"
cd "$work/obj"
../quilt/configure > configure.log 2>&1 || { tail -20 configure.log; fail "configure failed ($work/obj/configure.log)"; }
make -j"$jobs" > make.log 2>&1 || { tail -30 make.log; fail "make failed ($work/obj/make.log)"; }
./python -m sysconfig | grep -q 'PY_HAVE_PERF_TRAMPOLINE = "1"' ||
    fail "the build from the series has no PY_HAVE_PERF_TRAMPOLINE"
./python -X perf -c 'import glob, os, sys
assert sys.is_stack_trampoline_active()
sys.deactivate_stack_trampoline()
for p in [f"/tmp/perf-{os.getpid()}.map",
          *glob.glob(f"/tmp/py-perf-{os.getpid()}-*.so")]:
    os.unlink(p)' ||
    fail "-X perf does not activate the trampoline"
echo "check-export: OK in $(( $(date +%s) - start )) s: quilt and git am reproduce $src, autoreconf + configure + make build it, with trampolines"
