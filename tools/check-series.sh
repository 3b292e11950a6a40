#!/bin/sh
# Check that every prefix of patches/series builds.
#
#   check-series.sh MAKE WORKDIR
#
# Copies the series into WORKDIR/patches one patch at a time and, after
# each, has the project's Makefile bring WORKDIR/tree (a build of its own,
# BUILD=WORKDIR/tree) to that prefix and rebuild python there.  Stops at
# the first prefix that does not build, with the tail of its log.
set -eu
make=$1 work=$2
mkdir -p "$work/patches"
if ! $make BUILD="$work/tree" "$work/tree/.stamps/unpacked" > "$work/unpack.log" 2>&1; then
    echo "error: cannot unpack the pristine tree in $work/tree ($work/unpack.log):" >&2
    tail -20 "$work/unpack.log" >&2
    exit 1
fi
: > "$work/patches/series"
for p in $(grep -v '^#' patches/series | grep .); do
    cp "patches/$p" "$work/patches/$p"
    echo "$p" >> "$work/patches/series"
    log=$work/${p%.patch}.log
    if $make BUILD="$work/tree" PATCHES="$work/patches" "$work/tree/python" \
            > "$log" 2>&1; then
        echo "builds: the series up to $p"
    else
        echo "error: the series up to $p does not build ($log):" >&2
        tail -20 "$log" >&2
        exit 1
    fi
done
echo "every prefix of patches/series builds"
