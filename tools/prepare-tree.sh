#!/bin/sh
# Bring build/src to "pristine 3.11.2 + patches/series + configure fragment"
# while rewriting only the files whose content actually changes, so that an
# edited patch rebuilds only what it touches.
#
#   prepare-tree.sh SRC PATCHDIR FRAGMENT
#
# SRC is a git work tree (repository SRC.git) whose tag `upstream` holds
# the unpacked tarball.
# Patches are applied with zero fuzz: a patch that no longer applies exactly
# stops the build and is named.
set -eu
src=$1 patchdir=$2 fragment=$3
stage=$src/../stage
gitdir=$(cd "$src.git" && pwd)
AUTOCONF=${AUTOCONF:-autoconf2.69} AUTOHEADER=${AUTOHEADER:-autoheader2.69}
touched=$src/../.stamps/touched-files

rm -rf "$stage"
mkdir -p "$stage"

# Files the series touches now, plus the ones it touched last time (so that
# a hunk removed from a patch is reverted too), plus what the splice and the
# autotools regenerate.
{
    for p in $(grep -v '^#' "$patchdir/series" | grep .); do
        sed -n 's|^+++ b/\([^	 ]*\).*|\1|p' "$patchdir/$p"
    done
    [ -f "$touched" ] && cat "$touched"
    printf '%s\n' configure.ac configure pyconfig.h.in aclocal.m4
} | sort -u > "$stage.files"

while read -r f; do
    mkdir -p "$stage/$(dirname "$f")"
    git --git-dir="$src.git" --work-tree="$src" show "upstream:$f" > "$stage/$f" 2>/dev/null || rm -f "$stage/$f"
done < "$stage.files"
cp -R "$src/m4" "$stage/m4" 2>/dev/null || true

for p in $(grep -v '^#' "$patchdir/series" | grep .); do
    if ! patch -d "$stage" -p1 -F0 -N -s --no-backup-if-mismatch \
            -r - < "$patchdir/$p"; then
        echo "error: patches/$p does not apply exactly to CPython 3.11.2" >&2
        echo "       (zero fuzz; refresh it: Doc/cpython-perf/developing.md, 'Editing a CPython file')" >&2
        exit 1
    fi
done

# Splice the configure probe in just before the output files are declared.
anchor='AC_CONFIG_FILES(Makefile.pre Misc/python.pc Misc/python-embed.pc Misc/python-config.sh)'
if ! grep -qF "$anchor" "$stage/configure.ac"; then
    echo "error: configure.ac has no line '$anchor' to splice $fragment before" >&2
    exit 1
fi
awk -v anchor="$anchor" -v frag="$fragment" '
    $0 == anchor { while ((getline line < frag) > 0) print line; print "" }
    { print }' "$stage/configure.ac" > "$stage/configure.ac.new"
mv "$stage/configure.ac.new" "$stage/configure.ac"

# Regenerate with Autoconf 2.69, the version that made 3.11.2's configure,
# so that configure and pyconfig.h.in change by our probe only.  The
# tarball's configure came from a 2.69 carrying a distribution's
# --runstatedir addition, which Debian's autoconf2.69 lacks: configure is
# therefore the tarball's, plus the difference that the probe makes to
# what 2.69 generates (stock configure.ac versus ours).
for tool in $AUTOCONF $AUTOHEADER; do
    command -v "$tool" > /dev/null || {
        echo "error: $tool not found: run tools/install-deps.sh (Debian package autoconf2.69)" >&2
        exit 1
    }
done
(cd "$stage" &&
    git --git-dir="$gitdir" show upstream:configure.ac > configure.ac.stock &&
    "$AUTOCONF" --force -o configure.stock configure.ac.stock &&
    "$AUTOCONF" --force -o configure.ours configure.ac &&
    "$AUTOHEADER" --force) || {
    echo "error: $AUTOCONF failed on the spliced configure.ac" >&2
    exit 1
}
diff -u "$stage/configure.stock" "$stage/configure.ours" > "$stage/configure.delta" || true
git --git-dir="$gitdir" show upstream:configure > "$stage/configure"
patch -s -F0 --no-backup-if-mismatch -r - "$stage/configure" < "$stage/configure.delta" || {
    echo "error: the probe's change to configure does not apply to the tarball's configure;" >&2
    echo "       is $AUTOCONF the Autoconf that made it (2.69)?" >&2
    exit 1
}
rm -rf "$stage/autom4te.cache" "$stage"/configure.ac.stock "$stage"/configure.stock \
    "$stage/configure.ours" "$stage/configure.delta"

# Copy back what changed; keep the mtime of everything else.
while read -r f; do
    if [ -f "$stage/$f" ]; then
        if ! cmp -s "$stage/$f" "$src/$f"; then
            mkdir -p "$src/$(dirname "$f")"
            cp "$stage/$f" "$src/$f"
        fi
    else
        rm -f "$src/$f"
    fi
done < "$stage.files"
chmod +x "$src/configure"
mkdir -p "$(dirname "$touched")"
grep -v -x -e configure.ac -e configure -e pyconfig.h.in -e aclocal.m4 \
    "$stage.files" > "$touched" || true
rm -rf "$stage" "$stage.files"
