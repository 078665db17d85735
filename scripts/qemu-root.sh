#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# qemu-root.sh ROOT SYSROOT CMD...: run CMD (an aarch64 unit test under
# qemu-user) in a mount namespace of its own where ROOT stands for the
# machine's root, and QEMU_LD_PREFIX=ROOT.
#
# qemu-user opens an absolute path under its prefix when the path exists
# there, so the tests' shared libraries come from the sysroot. But "/"
# exists under any prefix: a walk that starts by opening "/" (fs/wpath)
# would walk the prefix, not the machine. ROOT holds the sysroot's lib and
# usr (links) and, bind-mounted here, every other directory of the
# machine's root; the rest of the root's names are links to them. The
# mounts go with the namespace when CMD ends.
set -euo pipefail
root=$1 sysroot=$2
shift 2
if [ ! -e "$root/.made" ]; then
	mkdir -p "$root"
	ln -sfn "$sysroot/lib" "$root/lib"
	ln -sfn "$sysroot/usr" "$root/usr"
	for e in /*; do
		n=${e#/}
		case $n in lib | usr) continue ;; esac
		if [ -d "$e" ] && [ ! -L "$e" ]; then
			mkdir -p "$root/$n"
		else
			ln -sfn "$e" "$root/$n"
		fi
	done
	: >"$root/.made"
fi
[ "${ENVD_QEMU_ROOT_NS:-}" = 1 ] || exec unshare --mount --propagation private env ENVD_QEMU_ROOT_NS=1 "$0" "$root" "$sysroot" "$@"
for e in /*; do
	n=${e#/}
	case $n in lib | usr) continue ;; esac
	[ -d "$e" ] && [ ! -L "$e" ] && [ -d "$root/$n" ] && [ ! -L "$root/$n" ] && mount --rbind "$e" "$root/$n"
done
export QEMU_LD_PREFIX=$root
exec "$@"
