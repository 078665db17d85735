#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start the debootstrap stage of the root filesystems the VM suites need
# (scripts/rootfs.sh --base, amd64, and arm64 where its VM can run) in the
# background and return at once: make test calls it before it builds, so
# on a fresh clone the downloads and the emulated second stage run while
# the compilers do, instead of after them inside the VM suites. Those call
# rootfs.sh themselves, which waits on the root's lock for a base still
# being made, and makes it again if this attempt failed (its log:
# build/test-logs/rootfs-base-ARCH.log). A cached base costs nothing here.
# The jobs stay in make's process group: an interrupt stops them too.
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || exit 0
command -v debootstrap >/dev/null || exit 0
mkdir -p build/test-logs
archs=amd64
command -v qemu-system-aarch64 >/dev/null && command -v qemu-aarch64-static >/dev/null && archs+=" arm64"
for a in $archs; do
	ARCH=$a bash scripts/rootfs.sh --base </dev/null >"build/test-logs/rootfs-base-$a.log" 2>&1 &
done
exit 0
