#!/bin/sh
# Install the Debian 12 packages that building and testing need.
# Needs root (or sudo); does nothing for packages already installed.
#
#   install-deps.sh                  what make test and the other checks need
#   install-deps.sh cross-ARCH       that, plus the cross compiler, the
#                                    target's C library and qemu-user for
#                                    make check-cross ARCH=... (aarch64,
#                                    riscv64, i686); "cross" for all three
#   install-deps.sh deb              that, plus what make deb needs: a
#                                    deb-src entry for bookworm (added
#                                    when there is none), the build
#                                    dependencies of Debian's python3.11,
#                                    and the packages its check imports
set -eu
case ${1:-} in
    ""|deb) CROSS="" ;;
    cross-aarch64) CROSS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
    cross-riscv64) CROSS="gcc-riscv64-linux-gnu libc6-dev-riscv64-cross" ;;
    cross-i686) CROSS="gcc-i686-linux-gnu libc6-dev-i386-cross" ;;
    cross) CROSS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross
 gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
 gcc-i686-linux-gnu libc6-dev-i386-cross" ;;
    *) echo "usage: $0 [cross-aarch64|cross-riscv64|cross-i686|cross|deb]" >&2; exit 2 ;;
esac
# qemu-user, not qemu-user-binfmt: check-cross calls qemu explicitly.
[ -z "$CROSS" ] || CROSS="$CROSS qemu-user"
PACKAGES="$CROSS build-essential autoconf autoconf2.69 automake autoconf-archive pkg-config git quilt
 linux-perf gdb lldb elfutils debuginfod valgrind strace util-linux hotspot bzip2 llvm-14
 bpftrace podman runc
 libssl-dev zlib1g-dev libsqlite3-dev libffi-dev libbz2-dev liblzma-dev
 libreadline-dev libncurses-dev uuid-dev libgdbm-dev libgdbm-compat-dev
 abigail-tools python3-numpy python3-pyelftools python3-numba
 python3-sphinx python3-docs-theme"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -n "$missing" ]; then
    echo "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
else
    echo "all build and test packages are installed"
fi
[ "${1:-}" = deb ] || exit 0

# make deb: Debian's source of python3.11 and what building it needs.
# Debian 12's images list only binary archives; the source one is added
# beside them, signed by the same archive key.
if ! grep -rqs '^Types: *deb-src\|^deb-src ' /etc/apt/sources.list \
        /etc/apt/sources.list.d/; then
    echo "adding /etc/apt/sources.list.d/cpython-perf-src.sources"
    for suites in "debian bookworm bookworm-updates" \
                  "debian-security bookworm-security"; do
        set -- $suites
        archive=$1
        shift
        printf 'Types: deb-src\nURIs: http://deb.debian.org/%s\nSuites: %s\n%s\n\n' \
            "$archive" "$*" 'Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
    done | $SUDO tee /etc/apt/sources.list.d/cpython-perf-src.sources > /dev/null
    $SUDO apt-get update -qq
fi
apt-cache showsrc python3.11 2>/dev/null | grep -q '^Package: python3.11' || {
    echo "error: the apt sources list no source package python3.11" >&2
    exit 1
}
DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -qq python3.11
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    dpkg-dev quilt python3-numpy python3-django
