#!/bin/sh
# Can a host that dlopen()s libpython load ours wherever it loads stock's?
#
#   dlopen_host.sh STOCK_LIB OURS_LIB WORK
#
# Builds dlopen_host.c and, for each size, a library taking that many bytes
# of glibc's static TLS surplus (tls_eater.c); the host loads it, then each
# libpython.  Ours must load wherever stock's does, and `readelf -d` of
# ours must not show STATIC_TLS when stock's does not.
set -u
stock=$1 ours=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" || exit 1
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
exit $r
