#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install envd into a root filesystem (Debian, Ubuntu, Alpine, ...).
#
#   install.sh [--envd BIN] [--init BIN] [--user NAME] [--no-services] ROOT
#
# Puts envd at ROOT/usr/bin/envd and the init at ROOT/usr/sbin/envd-init,
# and the start-up glue for whatever the image boots with:
#   systemd   /etc/systemd/system/envd.service, enabled for multi-user.target
#   OpenRC    /etc/init.d/envd in the default runlevel (only when OpenRC is there)
#   neither   boot with init=/usr/sbin/envd-init (PID 1 that supervises envd)
# With --user NAME it creates that user (home /home/NAME, bash when present,
# passwordless sudo when sudo is installed). Running it again changes
# nothing but the binaries. ROOT=/ installs into the running system.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
envd_bin="$here/../build/envd"
init_bin="$here/../build/init"
user=
services=1

while [ $# -gt 0 ]; do
	case $1 in
	--envd) envd_bin=$2; shift 2 ;;
	--init) init_bin=$2; shift 2 ;;
	--user) user=$2; shift 2 ;;
	--no-services) services=0; shift ;;
	-h | --help) sed -n '3,15p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "install.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: install.sh [--envd BIN] [--init BIN] [--user NAME] ROOT" >&2; exit 2; }
root=${1%/}
[ -d "${root:-/}" ] || { echo "install.sh: $1 is not a directory" >&2; exit 1; }

log() { echo "install: $*" >&2; }

# install_file SRC DST MODE: copy only when the content differs.
install_file() {
	local src=$1 dst=$root$2 mode=$3
	mkdir -p "$(dirname "$dst")"
	if [ -f "$dst" ] && cmp -s "$src" "$dst"; then
		chmod "$mode" "$dst"
		return 0
	fi
	# Copy then rename, so a running binary is replaced, not overwritten.
	cp "$src" "$dst.new.$$"
	chmod "$mode" "$dst.new.$$"
	mv -f "$dst.new.$$" "$dst"
	log "installed $2"
}

for b in "$envd_bin" "$init_bin"; do
	[ -x "$b" ] || { echo "install.sh: $b is missing (run make)" >&2; exit 1; }
done

# elf_arch FILE: amd64, arm64, other, or nothing for a file that is not ELF.
elf_arch() {
	[ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] || return 0
	case $(od -An -tx1 -j18 -N2 "$1" | tr -d ' \n') in
	3e00) echo amd64 ;;
	b700) echo arm64 ;;
	*) echo other ;;
	esac
}
# The binaries must be built for the root's architecture (make ARCH=...),
# judged by its shell.
sh_real=$(readlink -f "$root/bin/sh" 2>/dev/null || true)
case $sh_real in "$root"/*) ;; *) sh_real=$root/bin/sh ;; esac
root_arch=$(elf_arch "$sh_real")
for b in "$envd_bin" "$init_bin"; do
	a=$(elf_arch "$b")
	if [ -n "$root_arch" ] && [ -n "$a" ] && [ "$a" != "$root_arch" ]; then
		echo "install.sh: $b is built for $a, $root is $root_arch (make ARCH=$root_arch install ...)" >&2
		exit 1
	fi
done
host_arch=$(elf_arch /bin/sh)
install_file "$envd_bin" /usr/bin/envd 0755
install_file "$init_bin" /usr/sbin/envd-init 0755
install_file "$here/files/prepare-certs" /usr/lib/envd/prepare-certs 0755
mkdir -p "$root/run" "$root/tmp" "$root/home"
chmod 1777 "$root/tmp"

if [ $services = 1 ]; then
	if [ -d "$root/etc/systemd" ] || [ -e "$root/lib/systemd/systemd" ] || [ -e "$root/usr/lib/systemd/systemd" ]; then
		install_file "$here/files/envd.service" /etc/systemd/system/envd.service 0644
		mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
		ln -sfn ../envd.service "$root/etc/systemd/system/multi-user.target.wants/envd.service"
	fi
	if [ -e "$root/sbin/openrc-run" ] || [ -e "$root/usr/sbin/openrc-run" ]; then
		install_file "$here/files/envd.openrc" /etc/init.d/envd 0755
		mkdir -p "$root/etc/runlevels/default"
		ln -sfn /etc/init.d/envd "$root/etc/runlevels/default/envd"
	fi
fi

# run_in_root CMD...: run a command of the image inside ROOT.
run_in_root() {
	if [ -z "$root" ] || [ "$root" -ef / ]; then
		"$@"
	elif [ -n "$root_arch" ] && [ "$root_arch" != "$host_arch" ] && [ "$root_arch" = arm64 ]; then
		# A foreign root: its programs run under qemu-user (no binfmt_misc
		# handler needed).
		proot -q qemu-aarch64-static -r "$root" -w / "$@"
	else
		chroot "$root" "$@"
	fi
}

if [ -n "$user" ]; then
	if ! grep -q "^$user:" "$root/etc/passwd" 2>/dev/null; then
		shell=/bin/sh
		[ -x "$root/bin/bash" ] && shell=/bin/bash
		if [ -x "$root/usr/sbin/useradd" ]; then
			grep -q "^$user:" "$root/etc/group" || run_in_root /usr/sbin/groupadd "$user"
			run_in_root /usr/sbin/useradd -m -s "$shell" -g "$user" "$user"
		elif [ -x "$root/usr/sbin/adduser" ] || [ -x "$root/bin/busybox" ]; then
			run_in_root adduser -D -s "$shell" "$user"
		else
			echo "install.sh: no useradd or adduser in $root" >&2
			exit 1
		fi
		log "created user $user"
	fi
	home=$(awk -F: -v u="$user" '$1 == u { print $6 }' "$root/etc/passwd")
	if [ -n "$home" ] && [ ! -d "$root$home" ]; then
		mkdir -p "$root$home"
		run_in_root chown "$user:" "$home"
	fi
	if [ -d "$root/etc/sudoers.d" ]; then
		line="$user ALL=(ALL:ALL) NOPASSWD: ALL"
		f="$root/etc/sudoers.d/$user"
		if [ "$(cat "$f" 2>/dev/null)" != "$line" ]; then
			echo "$line" >"$f"
			chmod 0440 "$f"
			log "passwordless sudo for $user"
		fi
	fi
fi
exit 0
