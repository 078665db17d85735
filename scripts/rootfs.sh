#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Build the sandbox root filesystem used by the container test: Debian 12
# (bookworm) from debootstrap with the tools SDK users expect, user `user`
# with passwordless sudo, and the envd overlay installed.
#
#   scripts/rootfs.sh [ROOT]        default ROOT: build/rootfs
#   ARCH=arm64 scripts/rootfs.sh    the arm64 root (build/arm64/rootfs) with
#                                   build/arm64/envd and build/arm64/init
#
# An arm64 root is a foreign debootstrap: the first stage unpacks the
# packages on the host, the second runs the root's own aarch64 programs
# (dpkg, maintainer scripts) through qemu-user, by way of proot -q: no
# binfmt_misc handler is registered (that would be one for the whole
# machine, seen by every other program on it).
#
# The debootstrap stage is cached: it runs once and leaves ROOT/.base-done.
# The overlay stage (envd, init, units) runs every time, so the image always
# carries the binaries just built. Downloaded .debs are kept in apt's own
# cache directory so a fresh clone on the same machine rebuilds quickly.
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH=${ARCH:-amd64}
case $ARCH in
amd64) ABUILD=build ;;
arm64) ABUILD=build/arm64 ;;
*) echo "rootfs: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
ROOT=${1:-$ABUILD/rootfs}
# The container test and the VM test both ask for the rootfs, side by side
# under make test: one builds it, the other waits and finds it built.
mkdir -p "$(dirname "$ROOT")"
exec 8>"$ROOT.lock"
flock -w 1800 8 || { echo "rootfs: $ROOT is locked by another build" >&2; exit 1; }
SUITE=bookworm
# The archive this machine's apt already uses (first "deb" source that is
# not a security or updates suite), unless DEBIAN_MIRROR says otherwise.
apt_mirror() {
	{
		awk '/^Types:/ {deb = ($0 ~ /(^|[ \t])deb([ \t]|$)/)} deb && /^URIs:/ {print $2}' \
			/etc/apt/sources.list.d/*.sources 2>/dev/null
		awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
	} | grep -v -e security -e updates | head -n1 || true
}
MIRROR=${DEBIAN_MIRROR:-$(apt_mirror)}
[ -n "$MIRROR" ] || { echo "rootfs: no Debian archive found in apt's sources; set DEBIAN_MIRROR" >&2; exit 1; }
# Bump when the package list changes so cached roots are rebuilt.
BASE_STAMP="v4"
PKGS=bash,libstdc++6,coreutils,git,python3,python-is-python3,sudo,ncurses-bin,ncurses-base,ca-certificates,curl,procps,iproute2,passwd,login,findutils,less,netbase,attr
# What agent frameworks mount storage with: FUSE (fuse3; s3fs as the Mastra
# template installs it; sshfs, a FUSE client whose server the VM test runs on
# the host), NFS volumes (/init runs mount.nfs), kmod so the kernel can load
# the filesystem modules. Installed by apt in the new root, not by
# debootstrap, whose resolver does not follow Provides (s3fs wants "fuse",
# which fuse3 provides and the real fuse package would conflict with).
MOUNT_PKGS="fuse3 s3fs sshfs nfs-common kmod"
# The arm64 root goes without them: it serves the VM suites that run on
# arm64 (SDK, PID 1, pause, port forwarding, cgroups), none of which mounts
# storage, and every package there costs its maintainer scripts under
# qemu-user (the base's second stage alone takes 10-12 minutes).
[ "$ARCH" = amd64 ] || MOUNT_PKGS=
# Nor does it carry the tools of a user's template (git, python3, curl and
# the certificates): python3's byte-compiling and the certificate hashing
# were most of that second stage. busybox stands in for the one server a
# suite starts in the guest (40_portfwd: its httpd where python3 is absent).
if [ "$ARCH" != amd64 ]; then
	PKGS=bash,coreutils,sudo,ncurses-bin,ncurses-base,procps,iproute2,passwd,login,findutils,less,netbase,attr,busybox
	BASE_STAMP="$BASE_STAMP-$ARCH-small"
fi

log() { echo "rootfs: $*" >&2; }

# in_root DIR CMD...: run a program of the root in DIR.
in_root() {
	local dir=$1
	shift
	if [ "$ARCH" = amd64 ]; then
		chroot "$dir" "$@"
	else
		# In a mount namespace of its own: the root's /dev is the host's
		# (proot binds it), and what the second stage mounts and unmounts
		# there (devpts on /dev/pts, on exit) must not reach the host's.
		unshare --mount --propagation private \
			proot -q qemu-aarch64-static -r "$dir" -b /dev -b /proc -b /sys -w / "$@"
	fi
}

# Undo any mount debootstrap left inside DIR (it mounts proc/sys itself and
# can leave them behind when it fails half-way).
umount_under() {
	local dir
	dir=$(readlink -f "$1" 2>/dev/null) || return 0
	findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d' | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

build_base() {
	local tmp="$ROOT.tmp"
	command -v debootstrap >/dev/null 2>&1 || {
		log "installing debootstrap"
		apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
			{ apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
	}
	trap 'umount_under "$ROOT.tmp"' EXIT
	local cache=/var/cache/apt/archives
	mkdir -p "$cache"
	local try
	for try in 1 2; do
		umount_under "$tmp"
		rm -rf "$tmp"
		mkdir -p "$tmp"
		log "debootstrap $SUITE into $tmp (attempt $try)"
		if [ "$ARCH" = amd64 ]; then
			debootstrap --variant=minbase --cache-dir="$cache" --include="$PKGS" \
				"$SUITE" "$tmp" "$MIRROR" >"$tmp.log" 2>&1 && break
		else
			debootstrap --arch="$ARCH" --foreign --variant=minbase --cache-dir="$cache" \
				--include="$PKGS" "$SUITE" "$tmp" "$MIRROR" >"$tmp.log" 2>&1 && break
		fi
		# One line that says what and where (a package the mirror does
		# not serve, a Release file it cannot give), then the log's tail.
		local why
		why=$(grep -m1 -E "Couldn't download|Failed getting release|Couldn't find these debs|E: " "$tmp.log" | sed 's/^[EWI]: //')
		log "debootstrap of $SUITE from $MIRROR failed: ${why:-see $tmp.log}"
		tail -n 15 "$tmp.log" >&2
		[ "$try" = 2 ] && { log "giving up: ${why:-debootstrap failed} (log: $tmp.log; $ROOT is left as it was)"; return 1; }
		sleep 5
	done
	umount_under "$tmp"
	if [ "$ARCH" != amd64 ]; then
		# proot does not translate every path-taking call (the shell's
		# faccessat2 for `test -x`, among them): the second stage is told
		# where its own files are rather than left to find them.
		# dpkg syncs every file it unpacks, each sync one more system call
		# through proot and the emulator; a root that is not in use yet
		# does not need them (Debian's container images do the same).
		mkdir -p "$tmp/etc/dpkg/dpkg.cfg.d"
		echo force-unsafe-io >"$tmp/etc/dpkg/dpkg.cfg.d/envd-unsafe-io"
		log "debootstrap second stage under qemu-user (proot)"
		local t0=$SECONDS
		if ! DEBOOTSTRAP_DIR=/debootstrap in_root "$tmp" /debootstrap/debootstrap --second-stage >>"$tmp.log" 2>&1; then
			log "debootstrap second stage failed; last lines:"
			tail -n 15 "$tmp.log" >&2
			tail -n 15 "$tmp/debootstrap/debootstrap.log" >&2 2>/dev/null
			return 1
		fi
		rm -f "$tmp/etc/dpkg/dpkg.cfg.d/envd-unsafe-io"
		log "second stage done in $((SECONDS - t0)) s"
		# The second stage mounts /proc itself; proot leaves the mount
		# point of the host's root it gives qemu.
		umount_under "$tmp"
		rmdir "$tmp/host-rootfs" 2>/dev/null || true
	fi
	if [ -n "$MOUNT_PKGS" ]; then
		# No service may start inside the chroot while packages are installed.
		printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
		chmod 0755 "$tmp/usr/sbin/policy-rc.d"
		log "apt-get install $MOUNT_PKGS"
		if ! in_root "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			$MOUNT_PKGS >"$tmp.log" 2>&1; then
			in_root "$tmp" apt-get update -q >>"$tmp.log" 2>&1
			in_root "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
				$MOUNT_PKGS >>"$tmp.log" 2>&1 || { log "apt-get install failed:"; tail -n 15 "$tmp.log" >&2; return 1; }
		fi
		rm -f "$tmp/usr/sbin/policy-rc.d"
		# Users may mount with allow_other (sudo s3fs ... -o allow_other does
		# not need it, a FUSE mount made by the user does).
		grep -q '^user_allow_other' "$tmp/etc/fuse.conf" 2>/dev/null || echo user_allow_other >>"$tmp/etc/fuse.conf"
	fi

	# Same conventions as the reference debug image: user `user`, home
	# /home/user (mode 777 there; 755 is enough here since envd acts as the
	# user), passwordless sudo.
	in_root "$tmp" /usr/sbin/groupadd -f user
	in_root "$tmp" /usr/sbin/useradd -m -s /bin/bash -g user user 2>/dev/null || true
	echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' >"$tmp/etc/sudoers.d/user"
	chmod 0440 "$tmp/etc/sudoers.d/user"
	echo sandbox >"$tmp/etc/hostname"
	printf '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
	# No network in the sandbox test; keep apt and resolvers quiet.
	: >"$tmp/etc/resolv.conf"
	[ "$ARCH" = amd64 ] || { umount_under "$tmp"; rmdir "$tmp/host-rootfs" 2>/dev/null || true; }
	rm -rf "$tmp/var/cache/apt/archives/"*.deb "$tmp/var/lib/apt/lists/"* 2>/dev/null || true
	echo "$BASE_STAMP" >"$tmp/.base-done"
	rm -rf "$ROOT"
	mv "$tmp" "$ROOT"
	rm -f "$tmp.log"
	trap - EXIT
}

if [ "$(id -u)" != 0 ]; then
	log "must run as root (debootstrap, chroot)"
	exit 1
fi
if [ "$(cat "$ROOT/.base-done" 2>/dev/null)" != "$BASE_STAMP" ]; then
	build_base
else
	log "reusing cached base in $ROOT"
fi
for b in $ABUILD/envd $ABUILD/init; do
	[ -x "$b" ] || { log "$b is missing: run make${ARCH:+ ARCH=$ARCH} first"; exit 1; }
done
bash rootfs-overlay/install.sh --envd $ABUILD/envd --init $ABUILD/init --user user "$ROOT"
log "ready: $ROOT"
