#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rootfs-overlay/install.sh: what it puts into a root, that a second run
# changes nothing, the systemd/OpenRC glue only where those exist, and the
# default user (in an overlay of the cached Debian rootfs when it exists).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
T_NAME=init_install

for b in build/envd build/init; do
	[ -x "$b" ] || { fail "$b exists" "run make"; finish; exit 1; }
done
mkdir -p build
W=$(mktemp -d "$PWD/build/install-test.XXXXXX")
on_exit 'rm -rf "$W"'
inst() { bash rootfs-overlay/install.sh --envd build/envd --init build/init "$@"; }

# 1. a bare directory: binaries and helper only
R=$W/bare
mkdir -p "$R"
inst "$R" 2>/dev/null
check "envd installed at /usr/bin/envd, executable" test -x "$R/usr/bin/envd"
check "init installed at /usr/sbin/envd-init" test -x "$R/usr/sbin/envd-init"
check "certificate helper installed" test -x "$R/usr/lib/envd/prepare-certs"
check "installed envd is the built one" cmp -s build/envd "$R/usr/bin/envd"
expect_eq "/tmp is 1777" 1777 "$(stat -c %a "$R/tmp")"
check "no systemd unit without systemd" test ! -e "$R/etc/systemd/system/envd.service"
check "no OpenRC script without OpenRC" test ! -e "$R/etc/init.d/envd"
out=$(inst "$R" 2>&1)
expect_eq "a second run changes nothing" "" "$out"

# 1b. a root of another architecture (judged by its /bin/sh) refuses the
# binaries: the host's shell stands in for the root's, and a copy of envd
# marked as aarch64 (or x86-64, when envd is the aarch64 one) for envd.
R=$W/foreign
mkdir -p "$R/bin"
cp /bin/dash "$R/bin/sh"
/usr/bin/python3 - build/envd "$W/other-envd" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[18:20] = b"\x3e\x00" if b[18:20] == b"\xb7\x00" else b"\xb7\x00"
open(sys.argv[2], "wb").write(b)
PY
chmod +x "$W/other-envd"
out=$(bash rootfs-overlay/install.sh --envd "$W/other-envd" --init build/init "$R" 2>&1)
rc=$?
check "an envd for another architecture is refused" test "$rc" -ne 0
expect_match "the refusal names both architectures" 'is built for (arm64|amd64), .* is (amd64|arm64)' "$out"
check "nothing was installed" test ! -e "$R/usr/bin/envd"

# 2. systemd and OpenRC roots get their glue, enabled
R=$W/svc
mkdir -p "$R/etc/systemd" "$R/sbin"
touch "$R/sbin/openrc-run"
inst "$R" 2>/dev/null
check "systemd unit installed" test -f "$R/etc/systemd/system/envd.service"
expect_eq "unit enabled for multi-user.target" ../envd.service \
	"$(readlink "$R/etc/systemd/system/multi-user.target.wants/envd.service")"
unit=$R/etc/systemd/system/envd.service
for kv in User=root Restart=always OOMScoreAdjust=-1000 Nice=-20 IOSchedulingClass=realtime Delegate=yes \
	MemoryMin=32M KillMode=process ExecStart=/usr/bin/envd; do
	check "unit has $kv" grep -qx "$kv" "$unit"
done
check "OpenRC script installed" test -x "$R/etc/init.d/envd"
expect_eq "OpenRC script in the default runlevel" /etc/init.d/envd "$(readlink "$R/etc/runlevels/default/envd")"
check "OpenRC script parses" sh -n "$R/etc/init.d/envd"
out=$(inst "$R" 2>&1)
expect_eq "a second run changes nothing (services)" "" "$out"
check "prepare-certs parses" sh -n rootfs-overlay/files/prepare-certs

# 3. bad usage
inst 2>/dev/null
expect_eq "no ROOT: usage error" 2 $?
inst "$W/missing" 2>/dev/null
expect_eq "ROOT must exist" 1 $?

# 4. creating the default user, in an overlay of the Debian rootfs
if [ -f build/rootfs/.base-done ] && unshare -m true 2>/dev/null; then
	mkdir -p "$W/up" "$W/wk" "$W/mnt"
	out=$(unshare -m --propagation private bash -c '
		mount -t overlay ov -o lowerdir=build/rootfs,upperdir='"$W"'/up,workdir='"$W"'/wk '"$W"'/mnt || exit 9
		bash rootfs-overlay/install.sh --envd build/envd --init build/init --user alice '"$W"'/mnt 2>/dev/null || exit 8
		bash rootfs-overlay/install.sh --envd build/envd --init build/init --user alice '"$W"'/mnt 2>&1 | wc -l
		grep -c "^alice:" '"$W"'/mnt/etc/passwd
		chroot '"$W"'/mnt stat -c "%U %a" /home/alice
		cat '"$W"'/mnt/etc/sudoers.d/alice
		chroot '"$W"'/mnt su -s /bin/sh alice -c "sudo -n id -u 2>/dev/null"
		chroot '"$W"'/mnt getent passwd alice | cut -d: -f6,7
	' 2>&1)
	expect_eq "user created with home, passwordless sudo; second run silent" \
		"0
1
alice 755
alice ALL=(ALL:ALL) NOPASSWD: ALL
0
/home/alice:/bin/bash" "$out"
else
	echo "note: build/rootfs not built yet; user creation is covered by the container test"
fi

finish
