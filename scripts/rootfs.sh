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
# An arm64 root is not configured by its own programs: debootstrap's first
# stage downloads the packages and unpacks the essential ones on the host,
# this script unpacks the rest the same way and then does by hand what
# their maintainer scripts would have done that the guest needs (accounts,
# PAM, the alternatives, a few files of /etc; configure_unpacked below).
# Running those scripts means running aarch64 dpkg and shells, through
# qemu-user under proot (no binfmt_misc handler is registered: that would
# be one for the whole machine): 5 to 12 minutes of emulated CPU, the
# longest single step of a fresh make test. Unpacked, the root takes seconds.
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
# storage. Nor does it carry the tools of a user's template (git, python3,
# curl and the certificates): each package there is one more whose
# maintainer scripts configure_unpacked would stand in for. busybox stands
# in for the one server a suite starts in the guest (40_portfwd: its httpd
# where python3 is absent).
[ "$ARCH" = amd64 ] || MOUNT_PKGS=
if [ "$ARCH" != amd64 ]; then
	PKGS=bash,coreutils,sudo,ncurses-bin,ncurses-base,procps,iproute2,passwd,login,findutils,less,netbase,attr,busybox
	BASE_STAMP="$BASE_STAMP-$ARCH-unpacked"
fi

log() { echo "rootfs: $*" >&2; }

# in_root DIR CMD...: run a program of the (amd64) root in DIR.
in_root() {
	local dir=$1
	shift
	chroot "$dir" "$@"
}

# unpack_rest DIR: unpack every package debootstrap's first stage left
# packed (the list in DIR/debootstrap/base), as that stage unpacked the
# essential ones: data only, over the merged /usr's directory links.
unpack_rest() {
	local dir=$1 p deb
	for p in $(cat "$dir/debootstrap/base"); do
		deb=$(awk -v p="$p" '$1 == p {print $2; exit}' "$dir/debootstrap/debpaths")
		[ -n "$deb" ] && [ -f "$dir$deb" ] || { log "package $p: no .deb in $dir/debootstrap/debpaths"; return 1; }
		dpkg-deb --fsys-tarfile "$dir$deb" | tar --keep-directory-symlink --numeric-owner -xf - -C "$dir" ||
			{ log "package $p: cannot unpack $dir$deb"; return 1; }
	done
}

# configure_unpacked DIR: what the maintainer scripts of an unpacked
# minbase root (plus sudo, procps, iproute2, less, busybox) would have
# left that a guest relies on. Not a dpkg database: nothing installs
# packages in that root afterwards.
configure_unpacked() {
	local dir=$1 days
	days=$(($(date +%s) / 86400))
	# The first stage leaves /proc a link to the host's; the second
	# stage would have made it the mount point it is.
	if [ -L "$dir/proc" ]; then
		rm "$dir/proc"
		mkdir -m 0755 "$dir/proc"
	fi
	# base-passwd, shadow: the system accounts and their shadow entries.
	sed 's/^\([^:]*\):\*:/\1:x:/' "$dir/usr/share/base-passwd/passwd.master" >"$dir/etc/passwd"
	sed 's/^\([^:]*\):\*:/\1:x:/' "$dir/usr/share/base-passwd/group.master" >"$dir/etc/group"
	awk -F: -v d="$days" '{print $1 ":*:" d ":0:99999:7:::"}' "$dir/etc/passwd" >"$dir/etc/shadow"
	awk -F: '{print $1 ":*::"}' "$dir/etc/group" >"$dir/etc/gshadow"
	chmod 0640 "$dir/etc/shadow" "$dir/etc/gshadow"
	chgrp 42 "$dir/etc/shadow" "$dir/etc/gshadow" # group shadow
	: >"$dir/etc/subuid"
	: >"$dir/etc/subgid"
	# base-files: the login profile (bash -l reads it), root's dot files,
	# the empty directories of the hierarchy.
	cp "$dir/usr/share/base-files/profile" "$dir/etc/profile"
	cp "$dir/usr/share/base-files/motd" "$dir/etc/motd"
	cp "$dir/usr/share/base-files/dot.bashrc" "$dir/root/.bashrc"
	cp "$dir/usr/share/base-files/dot.profile" "$dir/root/.profile"
	mkdir -p "$dir"/{media,mnt,opt,srv,etc/opt,run/lock,var/mail,var/opt} "$dir"/usr/local/{bin,etc,games,include,lib,man,sbin,share/man,src}
	printf 'default\t\t0.0.0.0\nloopback\t127.0.0.0\nlink-local\t169.254.0.0\n' >"$dir/etc/networks"
	# libc-bin, tzdata, libpam-modules.
	cp "$dir/usr/share/libc-bin/nsswitch.conf" "$dir/etc/nsswitch.conf"
	ln -sfn /usr/share/zoneinfo/Etc/UTC "$dir/etc/localtime"
	echo Etc/UTC >"$dir/etc/timezone"
	: >"$dir/etc/environment"
	install -m 0600 /dev/null "$dir/etc/security/opasswd"
	# debianutils: the login shells.
	printf '# /etc/shells: valid login shells\n' >"$dir/etc/shells"
	local sh
	for sh in sh bash rbash dash; do printf '/bin/%s\n/usr/bin/%s\n' "$sh" "$sh" >>"$dir/etc/shells"; done
	# update-alternatives: the commands that are only links to one.
	local alt
	for alt in awk:/usr/bin/mawk nawk:/usr/bin/mawk pager:/usr/bin/less \
		which:/usr/bin/which.debianutils; do
		ln -sfn "${alt#*:}" "$dir/etc/alternatives/${alt%%:*}"
		ln -sfn "/etc/alternatives/${alt%%:*}" "$dir/usr/bin/${alt%%:*}"
	done
	# pam-auth-update with only pam_unix: sudo's and login's stacks.
	printf 'auth\t[success=1 default=ignore]\tpam_unix.so nullok\nauth\trequisite\tpam_deny.so\nauth\trequired\tpam_permit.so\n' \
		>"$dir/etc/pam.d/common-auth"
	printf 'account\t[success=1 new_authtok_reqd=done default=ignore]\tpam_unix.so\naccount\trequisite\tpam_deny.so\naccount\trequired\tpam_permit.so\n' \
		>"$dir/etc/pam.d/common-account"
	printf 'password\t[success=1 default=ignore]\tpam_unix.so obscure yescrypt\npassword\trequisite\tpam_deny.so\npassword\trequired\tpam_permit.so\n' \
		>"$dir/etc/pam.d/common-password"
	local s
	for s in session session-noninteractive; do
		printf 'session\t[default=1]\tpam_permit.so\nsession\trequisite\tpam_deny.so\nsession\trequired\tpam_permit.so\nsession\trequired\tpam_unix.so\n' \
			>"$dir/etc/pam.d/common-$s"
	done
	# sudo: its policy is read only when no one else can write it.
	chmod 0440 "$dir/etc/sudoers"
	# useradd -m -s /bin/bash -U user, by hand (uid and gid 1000).
	echo 'user:x:1000:1000::/home/user:/bin/bash' >>"$dir/etc/passwd"
	echo 'user:x:1000:' >>"$dir/etc/group"
	echo "user:!:$days:0:99999:7:::" >>"$dir/etc/shadow"
	echo 'user:!::' >>"$dir/etc/gshadow"
	echo 'user:100000:65536' >>"$dir/etc/subuid"
	echo 'user:100000:65536' >>"$dir/etc/subgid"
	mkdir -p "$dir/home/user"
	cp -a "$dir/etc/skel/." "$dir/home/user/"
	chown -R 1000:1000 "$dir/home/user"
	rm -rf "$dir/debootstrap"
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
		local t0=$SECONDS
		unpack_rest "$tmp" && configure_unpacked "$tmp" || return 1
		log "unpacked and configured in $((SECONDS - t0)) s"
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
	if [ "$ARCH" = amd64 ]; then
		in_root "$tmp" /usr/sbin/groupadd -f user
		in_root "$tmp" /usr/sbin/useradd -m -s /bin/bash -g user user 2>/dev/null || true
	fi
	echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' >"$tmp/etc/sudoers.d/user"
	chmod 0440 "$tmp/etc/sudoers.d/user"
	echo sandbox >"$tmp/etc/hostname"
	printf '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
	# No network in the sandbox test; keep apt and resolvers quiet.
	: >"$tmp/etc/resolv.conf"
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
