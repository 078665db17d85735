#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Profile envd under one benchmark load with perf, to see where a missed
# target goes. Builds build/bench/envd-prof: the same static musl build as
# build/envd, same -Os, plus symbols and frame pointers (not stripped).
#
#   scripts/bench-profile.sh SCENARIO [SECONDS]
#   SCENARIO: stat-h2 stat-h1 stream-h2 stream-h1 download-h2 upload rtt-h2
#
# Prints `perf report` (self and inclusive) for envd's process; the data is
# kept in build/bench/profile/<scenario>.data.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:?usage: $0 SCENARIO [SECONDS]}
secs=${2:-5}
out=build/bench/profile
mkdir -p "$out/obj"
command -v perf >/dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 1; }

# Same flags as the product, with symbols and frame pointers.
CFLAGS=$(make -s -f Makefile -p 2>/dev/null | sed -n 's/^MUSL_CFLAGS := //p' | head -n1)
[ -n "$CFLAGS" ] || { echo "cannot read MUSL_CFLAGS from the Makefile" >&2; exit 1; }
CFLAGS=$(eval echo "$CFLAGS")
objs=()
for src in base/*.c search/*.c proto/*.c http/*.c rpc/*.c pty/*.c process/*.c changes/*.c fs/*.c try/*.c transfer/*.c sandbox/*.c envd/*.c build/gen/*.pb-c.c build/gen/google/protobuf/*.pb-c.c; do
	[ -f "$src" ] || continue
	o=$out/obj/${src//\//_}.o
	if [ ! -f "$o" ] || [ "$src" -nt "$o" ]; then
		# shellcheck disable=SC2086
		musl-gcc $CFLAGS -g -fno-omit-frame-pointer -c "$src" -o "$o"
	fi
	objs+=("$o")
done
musl-gcc -static -Wl,--gc-sections "${objs[@]}" -o build/bench/envd-prof -Lbuild/deps/musl/lib \
	-lnghttp2 -lev -lprotobuf-c -lyajl -ljansson -lhttp_parser -larchive -lpcre2-8 -lz -lm -lpthread

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tmp=$(mktemp -d build/bench/profile/tmp.XXXXXX)
build/bench/envd-prof -isnotfc -port "$port" >"$tmp/envd.log" 2>&1 &
epid=$!
cleanup() { kill "$epid" 2>/dev/null || true; wait "$epid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
sleep 0.3

B=build/bench/envdbench
printf '\n\004/tmp' >"$tmp/stat.bin"
load() {
	case $scenario in
	stat-h2) h2load -n 10000000 -D "$secs" -c 4 -m 32 -t 1 -d "$tmp/stat.bin" -H 'content-type: application/proto' \
		"http://127.0.0.1:$port/filesystem.Filesystem/Stat" | grep -E 'finished|status codes' ;;
	stat-h1) h2load --h1 -n 10000000 -D "$secs" -c 32 -t 1 -d "$tmp/stat.bin" -H 'content-type: application/proto' \
		"http://127.0.0.1:$port/filesystem.Filesystem/Stat" | grep -E 'finished|status codes' ;;
	stream-h2) $B stream-h2 "$port" $((1 << 30)) ;;
	stream-h1) $B stream-h1 "$port" $((1 << 30)) ;;
	download-h2 | upload)
		head -c 1G /dev/zero >"$tmp/big.bin"
		if [ "$scenario" = upload ]; then
			curl -s -o /dev/null -w '%{speed_upload} B/s\n' -X POST -T "$tmp/big.bin" \
				-H 'Content-Type: application/octet-stream' "http://127.0.0.1:$port/files?path=$PWD/$tmp/up.bin"
		else
			h2load -n 1 -c 1 "http://127.0.0.1:$port/files?path=$PWD/$tmp/big.bin" | grep finished
		fi ;;
	rtt-h2) $B start-h2 "$port" 3000 ;;
	*) echo "unknown scenario $scenario" >&2; exit 2 ;;
	esac
}
perf record -q -F 1999 --call-graph fp -o "$out/$scenario.data" -p "$epid" >/dev/null 2>&1 &
ppid=$!
sleep 0.5
load
kill -INT "$ppid" 2>/dev/null || true
wait "$ppid" 2>/dev/null || true
echo "== self"
perf report -i "$out/$scenario.data" --no-children --sort symbol -g none 2>/dev/null | grep -E '^ +[0-9]' | head -25 || true
echo "== inclusive"
perf report -i "$out/$scenario.data" --children --sort symbol -g none 2>/dev/null | grep -E '^ +[0-9]' | head -45 || true
