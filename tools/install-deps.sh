#!/bin/sh
# Install the Debian 12 packages that building and testing need.
# Needs root (or sudo); does nothing for packages already installed.
#
#   install-deps.sh                  what make test and the other checks need
#   install-deps.sh cross-ARCH       that, plus the cross compiler, the
#                                    target's C library and qemu-user for
#                                    make check-cross ARCH=... (aarch64,
#                                    riscv64, i686); "cross" for all three
set -eu
case ${1:-} in
    "") CROSS="" ;;
    cross-aarch64) CROSS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
    cross-riscv64) CROSS="gcc-riscv64-linux-gnu libc6-dev-riscv64-cross" ;;
    cross-i686) CROSS="gcc-i686-linux-gnu libc6-dev-i386-cross" ;;
    cross) CROSS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross
 gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
 gcc-i686-linux-gnu libc6-dev-i386-cross" ;;
    *) echo "usage: $0 [cross-aarch64|cross-riscv64|cross-i686|cross]" >&2; exit 2 ;;
esac
# qemu-user, not qemu-user-binfmt: check-cross calls qemu explicitly.
[ -z "$CROSS" ] || CROSS="$CROSS qemu-user"
PACKAGES="$CROSS build-essential autoconf autoconf2.69 automake autoconf-archive pkg-config git quilt
 linux-perf gdb elfutils valgrind strace util-linux
 libssl-dev zlib1g-dev libsqlite3-dev libffi-dev libbz2-dev liblzma-dev
 libreadline-dev libncurses-dev uuid-dev libgdbm-dev libgdbm-compat-dev
 abigail-tools python3-numpy python3-pyelftools
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
