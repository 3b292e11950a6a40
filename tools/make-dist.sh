#!/bin/sh
# Make the source tarball: the pristine tree with the series applied and
# configure and pyconfig.h.in regenerated, so that `./configure && make`
# builds it with no autotools and no flags.
#
#   make-dist.sh SRC NAME OUT.tar.gz OVERLAY-FILE...
#
# SRC is the prepared tree (a git work tree, repository SRC.git, tag
# `upstream` = the tarball).  The archive holds the tarball's files with
# SRC's versions of those it changes, plus the overlay files, all under
# NAME/; nothing else that lies in SRC (bytecode caches, say) gets in.
# Its file dates are those of the project's last commit, so the same
# sources give the same bytes.
set -eu
src=$1 name=$2 out=$3
shift 3
gitdir=$(cd "$src.git" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g() { GIT_INDEX_FILE=$tmp/index git --git-dir="$gitdir" --work-tree="$src" "$@"; }

g read-tree upstream
changed=$(g diff --name-only upstream)
# shellcheck disable=SC2086
g add -f -A -- $changed "$@"
tree=$(g write-tree)
when=$(git log -1 --format=%ct 2>/dev/null || echo 0)
commit=$(echo "$name" | GIT_AUTHOR_DATE="@$when +0000" GIT_COMMITTER_DATE="@$when +0000" \
    GIT_AUTHOR_NAME=cpython-perf GIT_AUTHOR_EMAIL=dev@cpython-perf.invalid \
    GIT_COMMITTER_NAME=cpython-perf GIT_COMMITTER_EMAIL=dev@cpython-perf.invalid \
    git --git-dir="$gitdir" commit-tree "$tree")
mkdir -p "$(dirname "$out")"
git --git-dir="$gitdir" archive --format=tar --prefix="$name/" "$commit" |
    gzip -n -9 > "$out.new"
mv "$out.new" "$out"
echo "wrote $out ($(du -k "$out" | cut -f1) KiB: $(echo $changed | wc -w) changed files, $# new)"
