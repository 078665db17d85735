#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hung network filesystems, the way sandbox users get them: a FUSE mount
# (sshfs, mounted with `sudo ... -o allow_other` as user `user`) and an NFS
# volume mounted by /init, each served from the host, whose server then
# stops answering (SIGSTOP). envd must stay responsive while requests on
# the mount end with deadline_exceeded; `umount -l` through a command
# clears the mount. The scenario is tests/vm/sdk/hungfs.mjs (through the
# SDK); this script runs the servers:
#
#   SFTP    /usr/lib/openssh/sftp-server, one per guest connection to
#           169.254.169.254:22 (QEMU's guestfwd, scripts/vm-run.sh), as
#           root in a scratch directory (sshfs -o directport speaks SFTP
#           without SSH)
#   NFS     tests/vm/nfs-server.sh (NFS-Ganesha, in-memory export) in a
#           namespace of its own; guest connections to 169.254.169.254:2049
#           reach it through tests/vm/rpc-demux.py (one process in that
#           namespace, on a Unix socket; QEMU runs a socat to it per
#           connection), which sends MOUNT calls to its MOUNT port (/init
#           asks for both on 2049)
. "$(dirname "$0")/lib.sh"
command -v node >/dev/null || { fail "node is installed"; finish; exit; }
[ -d tests/sdk/node_modules/e2b ] || { fail "tests/sdk/node_modules (npm ci)"; finish; exit; }
[ -x /usr/lib/openssh/sftp-server ] || { fail "openssh-sftp-server on the host (scripts/setup.sh)"; finish; exit; }
[ -d "$VM_RUN_DIR/host" ] || { fail "the VM forwards 169.254.169.254:22 and :2049 to the host (scripts/vm-run.sh)"; finish; exit; }
REPO=$(pwd)
H=$VM_RUN_DIR/hungfs
rm -rf "$H"
mkdir -p "$H/sftp-root"
chmod 0777 "$H/sftp-root"

cat >"$VM_RUN_DIR/host/22" <<EOF
#!/bin/sh
echo \$\$ >>"$H/sftp.pids"
exec /usr/lib/openssh/sftp-server -d "$H/sftp-root" 2>>"$H/sftp.log"
EOF
chmod 0755 "$VM_RUN_DIR/host/22"

DEMUX=
cleanup() {
	for p in $(cat "$H/sftp.pids" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
	[ -n "$DEMUX" ] && kill "$DEMUX" 2>/dev/null
	bash tests/vm/nfs-server.sh stop "$H/nfs"
	rm -f "$VM_RUN_DIR/host/22" "$VM_RUN_DIR/host/2049"
}
on_exit cleanup

# results LOG: add the "hungfs-X: N passed, N failed" of a node run to ours.
results() {
	local line p f
	line=$(grep -a -E '^hungfs-[a-z]+: [0-9]+ passed, [0-9]+ failed' "$1" | tail -n1)
	p=$(sed -n 's/.*: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	T_PASS=$((T_PASS + ${p:-0}))
	T_FAIL=$((T_FAIL + ${f:-1}))
}
scenario() {
	local t0
	t0=$(date +%s%3N)
	(cd tests/sdk && E2B_DEBUG=true E2B_SANDBOX_URL=$VM_URL HUNGFS_SFTP_PIDS=$H/sftp.pids \
		HUNGFS_NFS_PID=$(cat "$H/nfs/ganesha.pid" 2>/dev/null) HUNGFS_NFS_EXPORT=$H/nfs/export \
		timeout 400 node --import ../vm/sdk/preload.mjs ../vm/sdk/hungfs.mjs "$1") >"$H/$1.log" 2>&1
	cat "$H/$1.log"
	echo "# $1 scenario: $(($(date +%s%3N) - t0)) ms"
	results "$H/$1.log"
}

# HUNGFS_SCENARIOS picks ("fuse nfs" by default).
want() { [[ " ${HUNGFS_SCENARIOS:-fuse nfs} " == *" $1 "* ]]; }
T0=$(date +%s%3N)

# ---- FUSE: sshfs against the host's SFTP server ----
want fuse && scenario fuse

# ---- NFS: a volume from /init against the host's NFS server ----
t0=$(date +%s%3N)
! want nfs || if bash tests/vm/nfs-server.sh start "$H/nfs"; then
	echo "# NFS server up after $(($(date +%s%3N) - t0)) ms"
	ns=$(cat "$H/nfs/ns.pid")
	nsenter --net=/proc/$ns/ns/net /usr/bin/python3 "$REPO/tests/vm/rpc-demux.py" --listen "$H/demux.sock" 2049 20048 \
		2>>"$H/demux.log" &
	DEMUX=$!
	cat >"$VM_RUN_DIR/host/2049" <<EOF
#!/bin/sh
exec socat STDIO UNIX-CONNECT:$H/demux.sock
EOF
	chmod 0755 "$VM_RUN_DIR/host/2049"
	if wait_for 120 test -S "$H/demux.sock"; then
		scenario nfs
	else
		fail "the NFS relay listens ($H/demux.sock)" "$(tail -n 5 "$H/demux.log")"
	fi
else
	fail "the NFS server starts on the host"
fi
echo "# scenarios: $(($(date +%s%3N) - T0)) ms"
finish
