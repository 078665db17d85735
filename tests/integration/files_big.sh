#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Large transfers through /files: a 1 GiB upload (raw and multipart) and
# download (identity and gzip) must round-trip byte-exact while envd's
# peak RSS stays flat. Prints envd's throughput for the record; comparisons
# with cat, dd and other servers are make bench's (bench/README.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

# The sanitizer build runs the same paths with far less data (the static
# pass carries the volume) and gets a looser memory bound: its allocator
# keeps a quarantine.
case "${ENVD_BIN:-build/envd}" in
*asan*) SIZE_MB=32 RSS_LIMIT_KB=$((400 * 1024)) ;;
*) SIZE_MB=1024 RSS_LIMIT_KB=$((48 * 1024)) ;;
esac

id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
envd_start || exit 1
D=$(mktemp -d /var/tmp/envd-big.XXXXXX)
on_exit 'rm -rf "$D"; _t_cleanup'
U="$ENVD_URL/files"
hwm() { awk '/VmHWM/ {print $2}' "/proc/$ENVD_PID/status"; }
now() { date +%s.%N; }
# rate T0 T1: MiB/s for SIZE_MB moved between the two timestamps
rate() { "$PY" -c "import sys; print(f'{$SIZE_MB / max(float(sys.argv[2]) - float(sys.argv[1]), 1e-9):.0f} MiB/s')" "$1" "$2"; }

head -c $((SIZE_MB * 1024 * 1024)) /dev/urandom >"$D/src.bin"
# same FILE...: every FILE has src.bin's bytes (cmp: far cheaper than a hash
# on a busy machine).
same() { local f; for f in "$@"; do cmp -s "$D/src.bin" "$f" || return 1; done; }
base_hwm=$(hwm)
echo "envd peak RSS after start: ${base_hwm} kB"

# No sync around the transfers: a file removed before write-back costs no
# disk time, and the figures below are for the record only.
t0=$(now)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
	-T "$D/src.bin" "$U?path=$D/up.bin")
t1=$(now)
expect_eq "raw upload ${SIZE_MB} MiB" 200 "$code"
echo "envd raw upload: $(rate "$t0" "$t1"), peak RSS $(hwm) kB"
check "raw upload byte-exact" same "$D/up.bin"
rm -f "$D/up.bin"

t0=$(now)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -F "file=@$D/src.bin;filename=$D/mp.bin" "$U")
t1=$(now)
expect_eq "multipart upload ${SIZE_MB} MiB" 200 "$code"
echo "envd multipart upload: $(rate "$t0" "$t1"), peak RSS $(hwm) kB"
check "multipart upload byte-exact" same "$D/mp.bin"
rm -f "$D/mp.bin"

t0=$(now)
curl -s -D "$D/h" "$U?path=$D/src.bin" | cmp -s - "$D/src.bin"
same_dl=${PIPESTATUS[1]}
t1=$(now)
expect_eq "identity download ${SIZE_MB} MiB" 200 "$(sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$D/h")"
echo "envd identity download: $(rate "$t0" "$t1"), peak RSS $(hwm) kB"
expect_eq "identity download byte-exact" 0 "$same_dl"

# gzip streams through zlib, CPU-bound on random data: a sixteenth of it,
# still far more than any buffer on the way, keeps the run short.
head -c $((SIZE_MB * 64 * 1024)) "$D/src.bin" >"$D/q.bin"
curl -s -H 'Accept-Encoding: gzip' --compressed "$U?path=$D/q.bin" | cmp -s - "$D/q.bin"
expect_eq "gzip download byte-exact" 0 "${PIPESTATUS[1]}"
echo "after gzip download: peak RSS $(hwm) kB"
gzip -1 -c "$D/q.bin" >"$D/q.gz"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
	-H 'Content-Encoding: gzip' -T "$D/q.gz" "$U?path=$D/gz.bin")
expect_eq "gzip upload" 200 "$code"
check "gzip upload byte-exact" cmp -s "$D/q.bin" "$D/gz.bin"
echo "after gzip upload: peak RSS $(hwm) kB"

# A client that disconnects mid-upload leaves nothing behind.
head -c $((64 * 1024 * 1024)) "$D/src.bin" | curl -s -o /dev/null --limit-rate 8M -m 1 -X POST \
	-H 'Content-Type: application/octet-stream' -H 'Transfer-Encoding: chunked' --data-binary @- "$U?path=$D/cut.bin"
wait_for 30 test ! -e "$D/cut.bin"
check "aborted upload removed" test ! -e "$D/cut.bin"

peak=$(hwm)
echo "envd peak RSS overall: ${peak} kB (limit ${RSS_LIMIT_KB} kB)"
check "peak RSS stays bounded" test "$peak" -lt "$RSS_LIMIT_KB"
envd_alive && pass "envd still alive" || fail "envd still alive"
finish
