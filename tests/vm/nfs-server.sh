#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An NFSv3 server on the host for the VM tests: NFS-Ganesha exporting a
# tmpfs (DIR/export, as /export), in a network and mount namespace of its
# own (rpcbind, which Ganesha registers with, its sockets and the tmpfs stay
# private).
#
#   nfs-server.sh start DIR     exports DIR/export; DIR/ns.pid is a process in
#                               the namespace (nsenter --net=/proc/PID/ns/net
#                               reaches 127.0.0.1:2049 and :20048),
#                               DIR/ganesha.pid the server; waits until it listens
#   nfs-server.sh stop DIR      ends them
#
# Needs root, nfs-ganesha, nfs-ganesha-vfs and rpcbind (scripts/setup.sh).
set -uo pipefail
cmd=${1:?start or stop}
dir=${2:?directory}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

case $cmd in
start)
	for t in ganesha.nfsd rpcbind unshare nsenter; do
		command -v "$t" >/dev/null || { echo "nfs-server: $t is missing (scripts/setup.sh installs it)" >&2; exit 1; }
	done
	mkdir -p "$dir/export"
	cat >"$dir/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	NFS_Port = 2049;
	MNT_Port = 20048;
	Protocols = 3;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
}
NFSV4 { Graceless = true; }
EXPORT {
	Export_Id = 1;
	Path = $dir/export;
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	Protocols = 3;
	Transports = TCP;
	SecType = sys;
	FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF
	rm -f "$dir/ganesha.pid" "$dir/ns.pid"
	setsid unshare -n -m --propagation private bash -c '
		dir=$1
		echo $$ >"$dir/ns.pid"
		ip link set lo up
		mount -t tmpfs tmpfs /run
		mount -t tmpfs -o mode=1777,size=64m tmpfs "$dir/export"
		mkdir -p /run/rpcbind
		rpcbind -f 2>>"$dir/rpcbind.log" &
		for _ in $(seq 1 100); do [ -S /run/rpcbind.sock ] && break; sleep 0.05; done
		ganesha.nfsd -F -f "$dir/ganesha.conf" -L "$dir/ganesha.log" -p /run/ganesha.pid -N NIV_EVENT &
		echo $! >"$dir/ganesha.pid"
		wait' _ "$dir" </dev/null >/dev/null 2>&1 &
	for _ in $(seq 1 600); do
		ns=$(cat "$dir/ns.pid" 2>/dev/null)
		[ -n "$ns" ] && nsenter --net=/proc/$ns/ns/net ss -Hltn 'sport = :2049' 2>/dev/null | grep -q . &&
			nsenter --net=/proc/$ns/ns/net ss -Hltn 'sport = :20048' 2>/dev/null | grep -q . && exit 0
		sleep 0.1
	done
	echo "nfs-server: Ganesha did not listen within 60 s; its log:" >&2
	grep -v DBUS "$dir/ganesha.log" 2>/dev/null | tail -n 10 >&2
	exit 1
	;;
stop)
	ns=$(cat "$dir/ns.pid" 2>/dev/null) || exit 0
	pkill -CONT -s "$ns" 2>/dev/null
	pkill -TERM -s "$ns" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$ns" 2>/dev/null || break; sleep 0.1; done
	pkill -KILL -s "$ns" 2>/dev/null
	exit 0
	;;
esac
echo "nfs-server: start or stop" >&2
exit 2
