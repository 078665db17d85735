#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A command that allocates until the guest runs out of memory is killed by
# the kernel; envd and init live on (same pids, no restart). envd has the
# OOM protection its systemd unit would give it.
. "$(dirname "$0")/lib.sh"

# What envd.service would set, given by our init instead; envd puts its
# commands back to normal.
expect_eq "envd is never the OOM killer's choice (oom_score_adj)" -1000 \
	"$(vm_exec 'cat /proc/$(pidof envd)/oom_score_adj')"
expect_eq "envd runs at nice -20" -20 "$(vm_exec 'ps -o ni= -p $(pidof envd) | tr -d " "')"
expect_eq "a command runs with oom_score_adj 100, nice 0" "100 0" \
	"$(vm_exec 'echo $(cat /proc/self/oom_score_adj) $(nice)')"

envd_before=$(vm_exec 'pidof envd')
# Under emulation on a busy host, memory compaction near the limit runs for
# minutes (kcompactd soft lockups of 150 s seen) and huge page faults wake
# it: not the subject here, so both are off while the test runs.
knobs="/sys/kernel/mm/transparent_hugepage/enabled=never /proc/sys/vm/compaction_proactiveness=0 /proc/sys/vm/extfrag_threshold=1000"
restore=
for k in $knobs; do
	f=${k%%=*}
	was=$(vm_exec "sed -n 's/.*\\[\\(.*\\)\\].*/\\1/p;t;p' $f")
	restore+=" $f=$was"
	vm_exec "echo ${k#*=} >$f" >/dev/null
done
# Filling 512 MiB page by page under emulation takes minutes on a busy
# host. Most of the guest's free memory is taken out of play first as
# reserved huge pages (taken whole from the free lists, never touched), so
# the command runs the guest out of memory after ~50 MiB; they are given
# back afterwards.
avail_kb=$(vm_exec "sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo")
huge=0
if [ -n "$avail_kb" ] && [ "$avail_kb" -gt $((192 * 1024)) ]; then
	want=$(((avail_kb - 96 * 1024) / 2048))
	huge=$(vm_exec "echo $want >/proc/sys/vm/nr_hugepages; cat /proc/sys/vm/nr_hugepages" 2>/dev/null || echo 0)
fi
echo "# $avail_kb kB available; $huge huge pages (2 MiB) reserved for the test"
# The allocator takes memory 8 MiB at a time. Left to run into the wall,
# the guest spends minutes evicting and faulting back its file pages
# before the kernel gives up (164 s seen on a busy host: every page fault
# is emulated), so by default it stops when less than 48 MiB is available
# and the kernel's OOM killer is invoked there (sysrq f): the same choice
# of victim by badness, without the thrashing. VM_OOM_FULL=1 lets it run
# until the kernel kills it on its own.
stop_kb=$((48 * 1024))
[ "${VM_OOM_FULL:-0}" = 1 ] && stop_kb=0
vm_exec 'rm -f /tmp/oom.ready' >/dev/null
t0=$(date +%s%3N)
vm_exec -u user -t 600 "python3 -c '
import sys, time
stop = int(sys.argv[1])
def avail():
    for l in open(\"/proc/meminfo\"):
        if l.startswith(\"MemAvailable:\"):
            return int(l.split()[1])
x = []
while True:
    if stop and avail() < stop:
        open(\"/tmp/oom.ready\", \"w\").close()
        while True:
            time.sleep(1)
    x.append(bytearray(8 << 20))
' $stop_kb" >/dev/null 2>"$VM_RUN_DIR/oom.err" &
alloc=$!
if [ "$stop_kb" -gt 0 ]; then
	for _ in $(seq 1200); do
		kill -0 "$alloc" 2>/dev/null || break
		vm_exec 'test -e /tmp/oom.ready' 2>/dev/null && break
		sleep 0.5
	done
	echo "# $(vm_exec "sed -n 's/^MemAvailable: *//p' /proc/meminfo") available when the OOM killer is invoked"
	vm_exec 'echo f >/proc/sysrq-trigger' >/dev/null
fi
wait "$alloc"
st=$?
ms=$(($(date +%s%3N) - t0))
expect_eq "the allocating command is killed (SIGKILL, status 137) after $ms ms" 137 "$st"
for k in $restore; do vm_exec "echo ${k#*=} >${k%%=*}" >/dev/null; done
[ "${huge:-0}" -gt 0 ] && vm_exec 'echo 0 >/proc/sys/vm/nr_hugepages' >/dev/null
expect_eq "the reserved huge pages are given back" 0 "$(vm_exec 'cat /proc/sys/vm/nr_hugepages')"
expect_eq "envd still answers /health" 204 "$(vm_health)"
expect_eq "the same envd runs (no restart)" "$envd_before" "$(vm_exec 'pidof envd')"
expect_eq "init is still PID 1" envd-init "$(vm_exec 'cat /proc/1/comm')"
kern=$(vm_exec 'dmesg | grep -E "Out of memory|oom-kill" | tail -n 2')
expect_match "the kernel's OOM killer chose the allocator" 'python3' "$kern"
expect_match "commands still run" '^ok$' "$(vm_exec 'echo ok')"
finish
