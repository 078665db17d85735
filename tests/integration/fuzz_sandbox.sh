#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fuzz targets' sandbox (scripts/fuzz-sandbox.sh): what a target does
# to files, the clock, mounts and cgroups stays inside it, so fuzzing the
# request handlers beside the other suites cannot disturb them.
# asan: skip
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "$(id -u)" != 0 ] || ! unshare --mount --propagation private true 2>/dev/null; then
	echo "# no mount namespaces here (needs root): the sandbox runs targets as they are"
	echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
	exit 0
fi
mark=/tmp/envd-fuzz-sandbox.$$
on_exit 'rm -f "$mark"; _t_cleanup'
t0=$(date +%s)
out=$(bash scripts/fuzz-sandbox.sh bash -c '
	touch /etc/envd-fuzz-sandbox 2>/dev/null && echo wrote-etc
	: >"'"$mark"'" && echo wrote-tmp
	: >build/fuzz/.sandbox-probe && rm build/fuzz/.sandbox-probe && echo wrote-build-fuzz
	date -s "2001-01-01" >/dev/null 2>&1 && echo set-clock
	mount -t tmpfs x /mnt 2>/dev/null && echo mounted
	mount -o remount,rw / 2>/dev/null && echo remounted
	echo 1 2>/dev/null >/proc/sys/vm/drop_caches && echo wrote-proc
	exit 7')
rc=$?
expect_eq "the command's exit status comes through" 7 "$rc"
expect_eq "only the private /tmp and build/fuzz are writable" "wrote-tmp wrote-build-fuzz" "$(echo $out)"
check "nothing reached /etc" test ! -e /etc/envd-fuzz-sandbox
check "the sandbox's /tmp is its own" test ! -e "$mark"
t1=$(date +%s)
check "the clock was not set" test $((t1 - t0)) -ge 0 -a $((t1 - t0)) -lt 600
echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
[ "$T_FAIL" -eq 0 ]
