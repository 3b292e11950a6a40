#!/bin/sh
# Install what `make check-viewer` needs: Debian's chromium and hotspot,
# then the npm packages locked in tools/viewer/package-lock.json into DIR
# (build/viewer), again only when the lock file changed.  Among them is a
# Node 24 binary (node-linux-ARCH, an optional dependency: npm installs the
# one for this machine): the Firefox Profiler's command line requires Node
# 24, and the system's node (Debian's is 18) runs only npm and the tests.
#
#   install.sh DIR
set -eu
dir=$1
here=$(cd "$(dirname "$0")" && pwd)

missing=""
for p in chromium hotspot linux-perf; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
# Node.js may come from elsewhere than Debian (with npm inside): only the
# commands matter.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends $missing
fi

mkdir -p "$dir"
if ! cmp -s "$here/package-lock.json" "$dir/package-lock.json" ||
   [ ! -d "$dir/node_modules" ]; then
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
ls "$dir"/node_modules/node-*-*/bin/node >/dev/null 2>&1 || {
    echo "no Node 24 binary for $(uname -m) in $dir: add this machine's" \
         "node-linux-ARCH to tools/viewer/package.json's optionalDependencies" >&2
    exit 1
}
