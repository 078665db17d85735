#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A FUSE mount whose daemon can be stopped, which is how a dead s3fs or a
# frozen network filesystem looks to its clients: every syscall on a path
# under it blocks until the daemon runs again.
#
#   . tests/integration/hungfs_lib.sh
#   hungfs_mount DIR        bindfs of a fresh backing directory on DIR
#                           (allow_other: root's calls reach the daemon);
#                           sets HUNGFS_PID, HUNGFS_BACK
#   hungfs_stop / hungfs_cont   SIGSTOP / SIGCONT the daemon
#   hungfs_abort            fail every pending and future request (fusectl),
#                           which frees threads stuck on it
#   hungfs_cleanup          resume, abort, unmount, remove (trap it)
#
# A cached name still answers while the daemon is stopped: use fresh
# names after hungfs_stop.

HUNGFS_DIR= HUNGFS_PID= HUNGFS_BACK=

# hungfs_require: a suite without bindfs or /dev/fuse fails (it does not
# skip), naming what is missing.
hungfs_require() {
	command -v bindfs >/dev/null && [ -e /dev/fuse ] && return 0
	echo "$T_NAME: bindfs or /dev/fuse missing (scripts/setup.sh)"
	echo "$T_NAME: 0 passed, 1 failed"
	exit 1
}

hungfs_mount() {
	HUNGFS_DIR=$1
	HUNGFS_BACK=$(mktemp -d /tmp/envd-hungfs-back.XXXXXX)
	mkdir -p "$HUNGFS_DIR"
	chmod 0777 "$HUNGFS_BACK"
	# -f keeps bindfs in the foreground so its pid is ours to stop.
	bindfs -f -o allow_other "$HUNGFS_BACK" "$HUNGFS_DIR" \
		>/dev/null 2>&1 &
	HUNGFS_PID=$!
	wait_for 120 _hungfs_is_mounted || { echo "hungfs: bindfs did not mount $HUNGFS_DIR" >&2; return 1; }
}

_hungfs_is_mounted() { awk -v d="$HUNGFS_DIR" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# The fusectl connection of the mount: the minor of its anonymous device.
_hungfs_conn() {
	awk -v d="$HUNGFS_DIR" '$5 == d { split($3, a, ":"); print a[2] }' /proc/self/mountinfo | tail -n1
}

hungfs_stop() { kill -STOP "$HUNGFS_PID"; }
hungfs_cont() { kill -CONT "$HUNGFS_PID"; }

hungfs_abort() {
	local c
	c=$(_hungfs_conn)
	[ -n "$c" ] || return 0
	grep -q ' /sys/fs/fuse/connections ' /proc/self/mounts ||
		mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
	[ -w "/sys/fs/fuse/connections/$c/abort" ] && echo 1 >"/sys/fs/fuse/connections/$c/abort"
	return 0
}

hungfs_cleanup() {
	[ -n "$HUNGFS_PID" ] || return 0
	kill -CONT "$HUNGFS_PID" 2>/dev/null || true
	umount "$HUNGFS_DIR" 2>/dev/null || { hungfs_abort; umount -l "$HUNGFS_DIR" 2>/dev/null || true; }
	kill "$HUNGFS_PID" 2>/dev/null || true
	wait "$HUNGFS_PID" 2>/dev/null || true
	rm -rf "$HUNGFS_BACK"
	rmdir "$HUNGFS_DIR" 2>/dev/null || true
	HUNGFS_PID=
}
