#!/bin/sh
# Install the Debian 12 packages that building and testing need.
# Needs root (or sudo); does nothing for packages already installed.
set -eu
PACKAGES="build-essential autoconf autoconf2.69 automake autoconf-archive pkg-config git quilt
 linux-perf gdb valgrind strace util-linux
 libssl-dev zlib1g-dev libsqlite3-dev libffi-dev libbz2-dev liblzma-dev
 libreadline-dev libncurses-dev uuid-dev libgdbm-dev libgdbm-compat-dev
 abigail-tools python3-numpy
 python3-sphinx python3-docs-theme"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
[ -n "$missing" ] || { echo "all build and test packages are installed"; exit 0; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
