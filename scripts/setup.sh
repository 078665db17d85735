#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install what building and testing envd needs on Debian 12, if missing:
# build tools, the glibc -dev libraries (test and sanitizer builds), the
# deb-src entries the static build's `apt-get source` needs, and the clients
# the tests drive envd with. Idempotent and quiet when nothing is missing.
set -euo pipefail

pkgs=(gcc make cmake musl-tools dpkg-dev pkg-config protobuf-c-compiler
      libcriterion-dev libnghttp2-dev libev-dev libprotobuf-c-dev libyajl-dev libjansson-dev
      libhttp-parser-dev libarchive-dev libpcre2-dev zlib1g-dev ripgrep curl nghttp2-client nghttp2-server
      xz-utils bzip2 zip unzip patch file procps iproute2 util-linux passwd clang libclang-rt-14-dev python3 iptables
      qemu-system-x86 busybox-static socat e2fsprogs cpio debootstrap
      bindfs fuse3 kmod openssh-sftp-server nfs-ganesha nfs-ganesha-vfs rpcbind strace attr
      # arm64: the cross compiler, Debian's musl for arm64 (its wrapper
      # aarch64-linux-musl-gcc), the arm64 kernel headers as a cross
      # package (linux-libc-dev:arm64 would have to match, and upgrade, the
      # host's), qemu-user for the tests and qemu-system for the arm64 VM.
      # Not musl-tools:arm64 nor busybox-static:arm64: each would replace
      # the amd64 package (the VM image unpacks busybox from its .deb).
      gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu linux-libc-dev-arm64-cross
      musl-dev:arm64 qemu-user-static qemu-system-arm)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# The arm64 packages above come from the same archive once dpkg knows the
# architecture.
need_update=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	dpkg --add-architecture arm64
	need_update=1
fi

# deb-src entries for `apt-get source`: the same archives apt already uses
# for binary packages, with the source type added.
src_list=/etc/apt/sources.list.d/envd-src
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	tmp=$(mktemp)
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && [ "$f" != "$src_list.sources" ] || continue
		sed -n '/^Types:/,$p' "$f" | sed 's/^Types:.*/Types: deb-src/'
		echo
	done >"$tmp"
	[ -s "$tmp" ] && install -m 0644 "$tmp" "$src_list.sources"
	grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/^deb /deb-src /' >"$tmp" || true
	[ -s "$tmp" ] && install -m 0644 "$tmp" "$src_list.list"
	rm -f "$tmp"
	need_update=1
fi

if [ ${#missing[@]} -gt 0 ] || [ $need_update = 1 ]; then
	echo "setup: installing ${missing[*]:-deb-src entries}" >&2
	apt-get update -qq
	if [ ${#missing[@]} -gt 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi
