#!/bin/sh
# Can a host that dlopen()s libpython load ours wherever it loads stock's?
#
#   dlopen_host.sh STOCK_LIB OURS_LIB WORK
#
# Builds dlopen_host.c and, for each size, a library taking that many bytes
# of glibc's static TLS surplus (tls_eater.c); the host loads it, then each
# libpython.  Ours must load wherever stock's does, and `readelf -d` of
# ours must not show STATIC_TLS when stock's does not.
#
# Then dlopen_embed.c, a host that dlopen()s ours with RTLD_GLOBAL after
# an eater, initialises it through PyConfig (program_name the python of
# ours's object directory, so that its stdlib is found; the xoption perf)
# and runs examples/demo.py under `perf record -g`: after the 64-byte and
# the 1600-byte eater, the samples in foo must show py::baz <- py::bar <-
# py::foo (tools/perf-chain.py).  With the xoption perf_jit after the
# 1600-byte eater, the host must write /tmp/jit-PID.dump and `perf inject
# --jit` must turn it into jitted-PID-*.so files, through which the
# samples in foo show the same stack (--call-graph dwarf).  The files
# those runs left in /tmp (the host's pid, written after the run started)
# are removed.
set -u
stock=$1 ours=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)
cc=${CC:-cc}
$cc -O2 -Wall "$here/dlopen_host.c" -o "$work/dlopen_host" -ldl || exit 1
r=0
for size in 64 1600 1700; do
    $cc -O2 -shared -fPIC -DTLS_EATER_SIZE=$size "$here/tls_eater.c" \
        -o "$work/eater$size.so" || exit 1
    s=$("$work/dlopen_host" "$work/eater$size.so" "$stock") ; s_rc=$?
    o=$("$work/dlopen_host" "$work/eater$size.so" "$ours") ; o_rc=$?
    echo "static TLS taken $size bytes: stock: $s; ours: $o"
    [ $s_rc -le 1 ] && [ $o_rc -le 1 ] || r=1
    [ $s_rc -ne 0 ] || [ $o_rc -eq 0 ] || r=1
done
s_flags=$(readelf -d "$stock" | grep -c STATIC_TLS)
o_flags=$(readelf -d "$ours" | grep -c STATIC_TLS)
echo "STATIC_TLS in readelf -d: stock $s_flags, ours $o_flags"
[ "$s_flags" -ne 0 ] || [ "$o_flags" -eq 0 ] || r=1

# --- the embedding host under perf -------------------------------------------

ours_so=$(cd "$(dirname "$ours")" && pwd)
src=$(sed -n 's/^srcdir=[[:space:]]*//p' "$ours_so/Makefile")
case $src in /*) ;; *) src=$ours_so/$src ;; esac
demo=$(cd "$here/../../examples" && pwd)/demo.py
host_py=${HOST_PYTHON:-/usr/bin/python3}
perf="perf --buildid-dir $work/buildid"
$cc -O2 -g -Wall -I "$src/Include" -I "$ours_so" "$here/dlopen_embed.c" \
    -o "$work/dlopen_embed" -ldl || exit 1
command -v perf >/dev/null 2>&1 || {
    echo "error: no perf (linux-perf; tools/install-deps.sh)"
    exit 1
}

# forget PID MARKER: remove what process PID left in /tmp after MARKER.
forget() {
    find /tmp -maxdepth 1 -newer "$2" \( -name "perf-$1.map" \
        -o -name "jit-$1.dump" -o -name "jitted-$1-*.so" \
        -o -name "py-perf-$1-*.so" \) \
        -exec rm -f {} + 2>/dev/null
}

# embed LABEL EATER XOPTION PERF-RECORD-ARGS...: run the host on demo.py
# under perf record; sets $pid (empty if the host did not start).
embed() {
    label=$1 eater=$2 xopt=$3
    shift 3
    : > "$work/since-$label"
    $perf record -q -F 999 -o "$work/$label.data" "$@" -- \
        "$work/dlopen_embed" "$work/$eater" "$ours" "$ours_so/python" \
        "$xopt" "$demo" > "$work/$label.log" 2>&1
    st=$?
    pid=$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$work/$label.log")
    [ $st -eq 0 ] && return 0
    cat "$work/$label.log"
    echo "$label: perf record of the host failed (status $st)"
    return 1
}

for size in 64 1600; do
    label=embed-perf-$size
    if embed "$label" "eater$size.so" perf -g; then
        $perf script -i "$work/$label.data" > "$work/$label.txt" 2>/dev/null
        v=$("$host_py" "$here/../perf-chain.py" "$work/$label.txt" "$demo")
        st=$?
        echo "host, static TLS taken $size bytes, -X perf: $v"
        [ $st -eq 0 ] || r=1
    else
        r=1
    fi
    [ -z "$pid" ] || forget "$pid" "$work/since-$label"
done

label=embed-perf_jit-1600
if embed "$label" eater1600.so perf_jit -k 1 --call-graph dwarf; then
    if [ -n "$(find /tmp -maxdepth 1 -newer "$work/since-$label" \
            -name "jit-$pid.dump" -size +0)" ]; then
        if $perf inject --jit -i "$work/$label.data" \
                -o "$work/$label.jit.data" > "$work/$label.inject.log" 2>&1
        then
            n=$(find /tmp -maxdepth 1 -newer "$work/since-$label" \
                -name "jitted-$pid-*.so" | wc -l)
            $perf script -i "$work/$label.jit.data" > "$work/$label.txt" \
                2>/dev/null
            v=$("$host_py" "$here/../perf-chain.py" "$work/$label.txt" \
                "$demo")
            st=$?
            echo "host, static TLS taken 1600 bytes, -X perf_jit:" \
                "/tmp/jit-$pid.dump written, perf inject --jit made $n" \
                "jitted-$pid-*.so; $v"
            [ "$n" -gt 0 ] && [ $st -eq 0 ] || r=1
        else
            cat "$work/$label.inject.log"
            echo "host, -X perf_jit: perf inject --jit failed"
            r=1
        fi
    else
        echo "host, -X perf_jit: no /tmp/jit-$pid.dump"
        r=1
    fi
else
    r=1
fi
[ -z "$pid" ] || forget "$pid" "$work/since-$label"
exit $r
