#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cost of the change journal (docs/protocol.md, "Changes"): a `tar -x` of
# 10 000 small files and a 1 GiB `dd`, run through envd's Start, with the
# journal on and off (the median of RUNS each, wall time seen by the
# client, the end event included), with the fallback (-changes-source
# inotify) beside them, and envd's resident memory per 100 000 journal
# paths. Prints a table and writes bench/results/changes-<date>.txt.
#
#   bash bench/changes.sh            ENVD_BIN=build/envd RUNS=5 DD_MB=1024 FILES=10000
set -u
cd "$(dirname "$0")/.."
. tests/integration/process_lib.sh
RUNS=${RUNS:-5}
DD_MB=${DD_MB:-1024}
FILES=${FILES:-10000}
B=$(mktemp -d /var/tmp/envd-bench-changes.XXXXXX)
on_exit 'cleanup; rm -rf "$B"'

"$PY" -c '
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "w") as f:
        f.write("x" * 100)' "$B/src/tree" "$FILES"
tar -C "$B/src" -cf "$B/tree.tar" tree

# run_ms JSON: wall ms of one Start to its end
run_ms() {
	local t0 t1
	t0=$(now_ms)
	stream Start "$1" >"$B/last.out"
	t1=$(now_ms)
	grep -q '"exit status 0"' "$B/last.out" || { echo "command failed: $(tail -c 300 "$B/last.out")" >&2; }
	echo $((t1 - t0))
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The envds side by side: "off" (no journal), "on" (fanotify) and "inotify"
# (the fallback, forced), one run of each in turn, so that load elsewhere
# on the machine weighs on all of them alike.
declare -A EP EPID
for side in off on inotify; do
	case $side in
	off) start_envd -changes-max-paths 0 ;;
	on) start_envd -changes-max-paths 300000 ;;
	inotify) start_envd -changes-max-paths 300000 -changes-source inotify ;;
	esac
	EP[$side]=$PORT
	EPID[$side]=$ENVD_PID
done
on_exit 'for p in "${EPID[@]}"; do kill "$p" 2>/dev/null; done; cleanup; rm -rf "$B"'
declare -A TAR DD
for i in $(seq "$RUNS"); do
	for side in off on inotify; do
		PORT=${EP[$side]}
		track=$([ $side = off ] && echo false || echo true)
		rm -rf "$B/out" && mkdir -p "$B/out"
		TAR[$side]+="$(run_ms "{\"process\":{\"cmd\":\"tar\",\"args\":[\"-C\",\"$B/out\",\"-xf\",\"$B/tree.tar\"]},\"stdin\":false,\"trackChanges\":$track}") "
		rm -f "$B/dd"
		DD[$side]+="$(run_ms "{\"process\":{\"cmd\":\"dd\",\"args\":[\"if=/dev/zero\",\"of=$B/dd\",\"bs=1M\",\"count=$DD_MB\"]},\"stdin\":false,\"trackChanges\":$track}") "
		rm -f "$B/dd"
	done
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
for side in off on inotify; do kill "${EPID[$side]}" 2>/dev/null; wait "${EPID[$side]}" 2>/dev/null; done
# Memory on a journal of its own: nothing in it but what follows.
start_envd -changes-max-paths 300000
# memory: 100 000 new paths, then a Changes call (which waits until they are in)
rss0=$(envd_rss_kb)
"$PY" -c '
import os, sys
root = sys.argv[1]
for i in range(100000):
    d = os.path.join(root, "m%03d" % (i % 1000))
    if i < 1000:
        os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "file-%06d" % i), "w").close()' "$B/many"
curl -s -o /dev/null -H 'Content-Type: application/json' -d '{}' "http://127.0.0.1:$PORT/filesystem.Filesystem/Changes"
rss1=$(envd_rss_kb)

tar_off=$(med "${TAR[off]}"); tar_on=$(med "${TAR[on]}"); tar_ino=$(med "${TAR[inotify]}")
dd_off=$(med "${DD[off]}"); dd_on=$(med "${DD[on]}"); dd_ino=$(med "${DD[inotify]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b / a}'; }
res=$(
	echo "change journal cost ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RUNS runs each, interleaved, medians; $(date -u +%Y-%m-%dT%H:%MZ))"
	printf '%-22s %9s %9s %7s %13s %7s\n' "" "off (ms)" "on (ms)" "on/off" "inotify (ms)" "/off"
	printf '%-22s %9s %9s %7s %13s %7s\n' "tar -x, $FILES files" "$tar_off" "$tar_on" "$(ratio "$tar_off" "$tar_on")" "$tar_ino" "$(ratio "$tar_off" "$tar_ino")"
	printf '%-22s %9s %9s %7s %13s %7s\n' "dd ${DD_MB} MiB" "$dd_off" "$dd_on" "$(ratio "$dd_off" "$dd_on")" "$dd_ino" "$(ratio "$dd_off" "$dd_ino")"
	echo "envd RSS: $rss0 KiB before, $rss1 KiB after 100 000 new paths: $((rss1 - rss0)) KiB per 100 000 paths"
)
echo "$res"
mkdir -p bench/results
echo "$res" >"bench/results/changes-$(date -u +%Y-%m-%d).txt"
