#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz-sandbox.sh CMD ARGS...: run a fuzz target where it cannot change the
# machine. The targets that serve whole requests reach the real handlers as
# root: uploads and compose write and delete files, /init sets the clock and
# mounts NFS volumes, /freeze and /fsfreeze freeze cgroups and filesystems.
# CMD runs in a private mount namespace where every mount is read-only
# except build/fuzz (its corpora, logs and crash inputs) and a private
# /tmp, and without CAP_SYS_ADMIN and CAP_SYS_TIME (no remount, no mount,
# no FIFREEZE, no clock). Run from the repository root.
#
# Where namespaces are not available (not root), CMD runs as it is, with a
# warning on stderr.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
if ! unshare --mount --propagation private true 2>/dev/null || ! command -v setpriv >/dev/null; then
	echo "fuzz-sandbox: no mount namespace here; running $1 without a sandbox" >&2
	exec "$@"
fi
mkdir -p build/fuzz
exec unshare --mount --propagation private -- bash -c '
	keep=$PWD/build/fuzz
	mount --bind "$keep" "$keep" || exit 1
	mount -t tmpfs -o mode=1777,size=1g fuzz-tmp /tmp || exit 1
	findmnt -rn -o TARGET | while read -r m; do
		[ "$m" = "$keep" ] || [ "$m" = /tmp ] && continue
		mount -o remount,bind,ro "$m" 2>/dev/null
	done
	touch / 2>/dev/null && { echo "fuzz-sandbox: / is still writable" >&2; exit 1; }
	exec setpriv --bounding-set=-sys_admin,-sys_time --inh-caps=-sys_admin,-sys_time -- "$@"
' fuzz-sandbox "$@"
