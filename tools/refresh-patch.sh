#!/bin/sh
# Regenerate one patch of the series from the edits made in build/src.
#
#   refresh-patch.sh SRC patches/NNNN-name.patch
#
# The patch keeps its header (everything before the first "diff --git" line)
# and gets a fresh diff, against the pristine tarball, of exactly the files
# it touched before.  That diff is the patch's change only when no other
# patch of the series touches its files: a patch that shares a file is
# refused, and edited by hand.
set -eu
src=$1 patch=$2
[ -f "$patch" ] || { echo "error: no such patch: $patch" >&2; exit 1; }
files=$(sed -n 's|^+++ b/\([^	 ]*\).*|\1|p' "$patch")
[ -n "$files" ] || { echo "error: $patch touches no file" >&2; exit 1; }
dir=$(dirname "$patch")
for f in $files; do
    for other in $(grep -v '^#' "$dir/series" | grep .); do
        [ "$dir/$other" = "$patch" ] && continue
        if grep -q "^+++ b/$f\$" "$dir/$other"; then
            echo "error: $f is also touched by $other; refresh by hand" >&2
            exit 1
        fi
    done
done
tmp=$patch.new
sed '/^diff --git /,$d' "$patch" > "$tmp"
git --git-dir="$src.git" --work-tree="$src" diff --no-color --no-ext-diff upstream -- $files >> "$tmp"
mv "$tmp" "$patch"
echo "refreshed $patch ($files)"
