#!/bin/sh
# deb.sh: Debian's own python3.11 package with our series in it, built as
# Debian builds it (dpkg-buildpackage, debian/rules' flags: hardening,
# GCC LTO), and checked from the unpacked .debs without installing them.
#
#   tools/deb.sh PATCHDIR WORK JOBS [prepare|build|check]
#
# PATCHDIR is the exported series (`make series`: dist/patches); WORK the
# directory the source package is unpacked and built in (build-deb/).
# With no step, build and check run.
#
# prepare (the first part of build):
#   - `apt-get source python3.11`: the newest version the archive both
#     lists and serves (DEB_VERSION=... picks one), unpacked with Debian's
#     own patches applied;
#   - our patches go into debian/patches/cpython-perf/, after Debian's in
#     debian/patches/series; each is pushed with quilt, and one that needs
#     fuzz on Debian's tree (0002: Debian rewrites run_profile_task) is
#     refreshed there, so the package's series applies exactly;
#   - a changelog entry (version +perf1).
#
# build:
#   - debian/rules' builds one at a time, each timed: static, no-PIE and
#     shared interpreters (-O3, LTO), then the debug ones, and
#     `dpkg-buildpackage -B` for the binary packages.  DEB_BUILD_OPTIONS is
#     "nocheck nobench nopgo parallel=JOBS" unless set: the PGO training
#     runs most of the test suite in each optimized build, far more than
#     two cores give in a working session; nocheck drops the test-suite
#     run of the package.  debian/rules has no switch to leave out the
#     debug builds.  Steps already done are kept (debian/rules' stamps),
#     so a build that was stopped goes on where it was.
#
# check (the .debs of WORK, unpacked with dpkg -x into WORK/root):
#   - sysconfig: PY_HAVE_PERF_TRAMPOLINE is 1, our frame-pointer flags and
#     Debian's hardening flags are in CFLAGS, and what is left of LTO;
#   - `perf record -g` of examples/demo.py under -X perf names py::baz <-
#     py::bar <- py::foo (tools/perf-chain.py);
#   - Debian's python3-numpy and python3-django (installed for the
#     system's python3.11, in /usr/lib/python3/dist-packages) import and
#     run a small workload under -X perf and -X perf_jit, and their Python
#     functions are in the perf map and the jitdump;
#   - the perf tests with the unpacked interpreter.
set -eu
patches=$1 work=$2 jobs=$3 step=${4:-all}
here=$(cd "$(dirname "$0")/.." && pwd)
patches=$(cd "$patches" && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)
: "${DEB_BUILD_OPTIONS:=nocheck nobench nopgo parallel=$jobs}"
export DEB_BUILD_OPTIONS
export QUILT_PATCHES=debian/patches

now() { date +%s; }

# The source package: the newest version that downloads.
fetch() {
    versions=${DEB_VERSION:-$(apt-cache showsrc python3.11 2>/dev/null |
        sed -n 's/^Version: //p' | sort -ruV)}
    [ -n "$versions" ] || {
        echo "error: apt lists no source of python3.11 (make deb runs" \
             "tools/install-deps.sh deb, which adds a deb-src entry)" >&2
        exit 1; }
    for v in $versions; do
        echo "+ apt-get source python3.11=$v"
        rm -rf "$work/python3.11-3.11.2"
        if (cd "$work" && apt-get source -qq "python3.11=$v" \
                > "$work/source.log" 2>&1); then
            echo "$v" > "$work/version"
            return 0
        fi
        grep '^E:' "$work/source.log" >&2 || tail -3 "$work/source.log" >&2
        echo "(python3.11 $v is listed but the archive does not serve it)" >&2
    done
    echo "error: no listed version of the source package python3.11 could" \
         "be downloaded: the source archive cannot be reached" >&2
    exit 1
}

add_series() {
    cd "$work/python3.11-3.11.2"
    mkdir -p debian/patches/cpython-perf
    refreshed=""
    for p in $(grep -v '^#' "$patches/series"); do
        cp "$patches/$p" "debian/patches/cpython-perf/$p"
        echo "cpython-perf/$p" >> debian/patches/series
        # Where Debian's patches changed a hunk's context, quilt's fuzz
        # (which drops context lines at the hunk's ends) is needed; the
        # added lines must come out the same, and the patch is refreshed.
        out=$(quilt push "cpython-perf/$p" 2>&1) ||
            out=$(quilt push --fuzz=3 "cpython-perf/$p" 2>&1) || {
            echo "$out" >&2
            echo "error: $p does not apply on Debian's tree" >&2
            exit 1; }
        grep '^+[^+]' "$patches/$p" > "$work/added.ours" || :
        quilt diff -P "cpython-perf/$p" | grep '^+[^+]' > "$work/added.deb" || :
        if ! cmp -s "$work/added.ours" "$work/added.deb"; then
            echo "error: $p adds other lines on Debian's tree" >&2
            exit 1
        fi
        case $out in
            *fuzz*|*offset*)
                quilt refresh --no-timestamps --no-index -pab > /dev/null
                refreshed="$refreshed $p"
                echo "$out" | grep fuzz | sed "s/^/$p: /" ;;
        esac
    done
    echo "our series is in debian/patches/cpython-perf/ (refreshed on" \
         "Debian's tree:${refreshed:- none})"
    v=$(cat "$work/version")
    { printf 'python3.11 (%s+perf1) bookworm; urgency=medium\n\n' "$v"
      printf '  * Add the cpython-perf series: Linux perf support (-X perf,\n'
      printf '    -X perf_jit, sys.activate_stack_trampoline()).\n\n'
      printf ' -- cpython-perf <build@localhost>  %s\n\n' "$(date -R)"
      cat debian/changelog; } > debian/changelog.new
    mv debian/changelog.new debian/changelog
    rm -f "$work/added.ours" "$work/added.deb"
    sha256sum "$patches"/*.patch > "$work/patched"
}

prepare() {
    if [ ! -d "$work/python3.11-3.11.2/debian" ] ||
       ! sha256sum "$patches"/*.patch | cmp -s - "$work/patched"; then
        fetch
        add_series
    else
        echo "$work/python3.11-3.11.2 has this series already"
    fi
}

build() {
    prepare
    cd "$work/python3.11-3.11.2"
    echo "DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS"
    for s in stamp-build-static stamp-build-nopie stamp-build-shared \
             stamp-build-debug stamp-build-shared-debug; do
        if [ -f "stamps/$s" ]; then
            echo "$s: done before"
            continue
        fi
        start=$(now)
        nice -n 19 debian/rules "stamps/$s" > "$work/$s.log" 2>&1 || {
            tail -30 "$work/$s.log"
            echo "error: debian/rules stamps/$s failed ($work/$s.log)" >&2
            exit 1; }
        echo "$s: $(( $(now) - start )) s (log: $work/$s.log)" |
            tee -a "$work/times"
    done
    start=$(now)
    nice -n 19 dpkg-buildpackage -B -uc -us -nc > "$work/dpkg-buildpackage.log" 2>&1 || {
        tail -30 "$work/dpkg-buildpackage.log"
        echo "error: dpkg-buildpackage failed ($work/dpkg-buildpackage.log)" >&2
        exit 1; }
    echo "dpkg-buildpackage -B (the rest, and the packages):" \
         "$(( $(now) - start )) s" | tee -a "$work/times"
    ls "$work"/*.deb
}

check() {
    debs=$(ls "$work"/*.deb 2>/dev/null | grep -v -- '-dbg_\|-dbgsym_\|-udeb_') || {
        echo "error: no .deb in $work: run the build step first" >&2; exit 1; }
    root=$work/root
    rm -rf "$root"
    for d in $debs; do
        dpkg -x "$d" "$root"
    done
    py=$root/usr/bin/python3.11
    # Debian's site.py looks in its prefix's lib/python3/dist-packages:
    # the system's, where python3-numpy and python3-django are, is added.
    run() { env -u PYTHONPERFSUPPORT -u PYTHON_PERF_JIT_SUPPORT \
                PYTHONPATH=/usr/lib/python3/dist-packages "$py" "$@"; }
    echo "+ sysconfig of $py"
    run - <<'EOF'
import sys, sysconfig
v = sysconfig.get_config_var
print(sys.version.replace("\n", " "))
cflags = v("CFLAGS")
print("CFLAGS:", cflags)
print("LDFLAGS:", v("LDFLAGS"))
print("CONFIG_ARGS:", v("CONFIG_ARGS"))
lto = sorted({w for w in (v("CONFIG_ARGS") + " " + v("PY_CFLAGS") + " "
                          + v("LDFLAGS")).replace("'", " ").split()
              if w.startswith("-flto")})
print("LTO flags left in sysconfig:", " ".join(lto) or "none")
bad = []
if v("PY_HAVE_PERF_TRAMPOLINE") != 1:
    bad.append("PY_HAVE_PERF_TRAMPOLINE is not 1")
for flag in ("-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
             "-fstack-protector-strong", "-Werror=format-security"):
    if flag not in cflags.split():
        bad.append(f"{flag} is not in CFLAGS")
if "-D_FORTIFY_SOURCE=2" not in (v("CPPFLAGS") + v("CONFIG_ARGS")):
    bad.append("-D_FORTIFY_SOURCE=2 is in neither CPPFLAGS nor CONFIG_ARGS")
if bad:
    raise SystemExit("error: " + "; ".join(bad))
print("PY_HAVE_PERF_TRAMPOLINE=1, frame pointers and hardening flags: yes")
EOF

    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    example=$here/examples/demo.py
    echo "+ perf record -g of examples/demo.py under -X perf"
    status=0
    perf record -q -F 999 -g -o "$tmp/perf.data" -- sh -c \
        'echo $$ > "$1"; shift; exec "$@"' sh "$tmp/pid" \
        env -u PYTHONPERFSUPPORT "$py" -X perf "$example" \
        > "$tmp/out" 2> "$tmp/err" || status=$?
    [ $status -ne 0 ] ||
        perf script -i "$tmp/perf.data" > "$tmp/script" 2>/dev/null ||
        status=$?
    [ -s "$tmp/pid" ] && rm -f "/tmp/perf-$(cat "$tmp/pid").map"
    if [ $status -ne 0 ]; then
        cat "$tmp/err" >&2
        exit 1
    fi
    run -I "$here/tools/perf-chain.py" "$tmp/script" "$example"

    echo "+ Debian's numpy and django under -X perf and -X perf_jit"
    cat > "$tmp/work.py" <<'EOF'
import os, sys
import numpy
import django
from django.conf import settings
settings.configure(TEMPLATES=[{
    "BACKEND": "django.template.backends.django.DjangoTemplates"}])
django.setup()
from django.template import Context, Engine
for name in ("numpy", "django"):
    path = sys.modules[name].__file__
    if not path.startswith("/usr/lib/python3/dist-packages/"):
        raise SystemExit(f"error: {name} is not Debian's: {path}")
a = numpy.arange(10000.0).reshape(100, 100)
total = float((a @ a.T).trace()) + float(numpy.linalg.norm(a))
template = Engine.get_default().from_string(
    "{% for x in items %}{{ x|add:1 }},{% endfor %}")
html = template.render(Context({"items": range(200)}))
print(os.getpid(), numpy.__version__, django.get_version(),
      round(total), len(html))
EOF
    for mode in perf perf_jit; do
        out=$(run -X "$mode" "$tmp/work.py") || {
            echo "error: the workload failed under -X $mode" >&2; exit 1; }
        pid=${out%% *}
        case $mode in
            perf) file=/tmp/perf-$pid.map ;;
            perf_jit) file=/tmp/jit-$pid.dump ;;
        esac
        names=$(grep -a -o 'py::[A-Za-z_.<>]*:/usr/lib/python3/dist-packages/[a-z]*' \
                "$file" | sed 's,.*/,,' | sort | uniq -c | tr '\n' ' ')
        rm -f "$file"
        echo "-X $mode: numpy ${out#* }; py:: entries by package: $names"
        for package in numpy django; do
            case $names in
                *" $package "*) ;;
                *) echo "error: -X $mode wrote no py:: entry of $package" \
                        "code in $file" >&2
                   exit 1 ;;
            esac
        done
    done

    echo "+ the perf tests with $py"
    run -m test test_perf_profiler test_perf_unwind test_perfmaps \
        test_perf_storms
}

case $step in
    prepare) prepare ;;
    build) build ;;
    check) check ;;
    all) build; check ;;
    *) echo "usage: $0 PATCHDIR WORK JOBS [prepare|build|check]" >&2; exit 2 ;;
esac
