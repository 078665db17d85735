#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cgroup_root_for_test NAME: make a private cgroup2 directory for one test
# run (removed on exit with whatever is left in it) and print its path, or
# print nothing when this machine cannot give one (not root, no cgroup2,
# read-only cgroupfs).
cgroup_test_dir() {
	local base d
	[ "$(id -u)" = 0 ] || return 0
	for base in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -fc %T "$base" 2>/dev/null)" = cgroup2fs ] || continue
		[ -e "$base/cgroup.procs" ] || continue
		d="$base/envd-test-$1-$$"
		mkdir "$d" 2>/dev/null || continue
		if [ ! -e "$d/cgroup.kill" ] || [ ! -e "$d/cgroup.freeze" ]; then
			rmdir "$d"
			continue
		fi
		echo "$d"
		return 0
	done
}

# cgroup_remove DIR: kill everything below DIR and remove it, deepest first.
cgroup_remove() {
	local d=$1
	[ -n "$d" ] && [ -d "$d" ] || return 0
	find "$d" -depth -type d | while read -r c; do
		echo 0 >"$c/cgroup.freeze" 2>/dev/null
		echo 1 >"$c/cgroup.kill" 2>/dev/null
	done
	# The killed tasks leave on the kernel's time: retried until they have.
	_cg_rmdirs() { find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null; [ ! -d "$1" ]; }
	wait_for 60 _cg_rmdirs "$d"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "cgroup_lib: helpers only"
fi
