#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cgroup2 is mounted by our init at /sys/fs/cgroup with every controller
# the kernel has.
. "$(dirname "$0")/lib.sh"

mnt=$(vm_exec 'findmnt -n -o FSTYPE,OPTIONS /sys/fs/cgroup')
expect_match "cgroup2 is mounted at /sys/fs/cgroup" '^cgroup2 ' "$mnt"
expect_match "with nsdelegate and memory_recursiveprot" 'nsdelegate.*memory_recursiveprot' "$mnt"
ctl=$(vm_exec 'cat /sys/fs/cgroup/cgroup.controllers')
for c in memory pids cpu io; do
	expect_match "controller $c is available" "(^| )$c( |$)" "$ctl"
done
# All eight of the kernel's cgroup2 controllers (the v1-only ones such as
# freezer or devices are built into cgroup2 itself).
have=$(tr ' ' '\n' <<<"$ctl" | sort | tr '\n' ' ')
expect_eq "every controller is in the hierarchy" "cpu cpuset hugetlb io memory misc pids rdma " "$have"
# Usable: a child cgroup with a memory and pids limit.
out=$(vm_exec 'cd /sys/fs/cgroup && echo "+memory +pids" >cgroup.subtree_control && mkdir -p vmtest &&
	echo 64M >vmtest/memory.max && echo 16 >vmtest/pids.max && cat vmtest/memory.max vmtest/pids.max && rmdir vmtest' | tr '\n' ' ')
expect_eq "a child cgroup takes memory.max and pids.max" "67108864 16 " "$out"
finish
