#!/bin/sh
# Locate the pinned CPython tarball, verify its sha256 and print its path.
#
#   find-tarball.sh NAME SHA256 URL CACHE_DIR DIR...
#
# Looks in each DIR, then in CACHE_DIR; if none holds a copy with the right
# checksum, downloads URL into CACHE_DIR (when curl or wget is available and
# the network allows it).  A file whose checksum does not match is never
# used.  Exits non-zero with a message naming the file, the expected
# checksum and every place looked at when no verified copy can be had.
set -u
name=$1 sha=$2 url=$3 cache=$4
shift 4

looked=""
bad=""

verify() {
    got=$(sha256sum "$1" 2>/dev/null | cut -d' ' -f1)
    [ "$got" = "$sha" ] && return 0
    bad="$bad
  $1: sha256 is ${got:-unreadable}"
    return 1
}

for dir in "$@" "$cache"; do
    [ -n "$dir" ] || continue
    looked="$looked
  $dir/$name"
    if [ -f "$dir/$name" ] && verify "$dir/$name"; then
        echo "$dir/$name"
        exit 0
    fi
done

# Not found locally: try the network, into the cache, atomically.
if [ -n "$url" ] && mkdir -p "$cache" 2>/dev/null; then
    part="$cache/$name.part.$$"
    looked="$looked
  $url"
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --connect-timeout 20 -o "$part" "$url" 2>/dev/null
    elif command -v wget >/dev/null 2>&1; then
        wget -q -T 20 -O "$part" "$url" 2>/dev/null
    fi
    if [ -s "$part" ] && verify "$part"; then
        mv -f "$part" "$cache/$name"
        echo "$cache/$name"
        exit 0
    fi
    rm -f "$part"
fi

cat >&2 <<MSG
error: no verified copy of $name.
  expected sha256: $sha
  looked in:$looked${bad:+
  rejected (checksum mismatch):$bad}
Put the python.org tarball in one of those places (or set PYTHON_TARBALL=/path/to/$name)
and run make again.
MSG
exit 1
