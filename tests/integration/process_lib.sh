#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shared helpers for tests/integration/process_*.sh: start a private envd on a
# free port, frame and decode Connect streams, count results.
#
# ENVD_BIN overrides the binary (default build/envd). Each script starts its
# own envd so it can pass flags and watch its memory.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$ROOT/tests/common.sh"
ENVD_BIN=${ENVD_BIN:-$ROOT/build/envd}
PASS=0
FAIL=0
TMP=$(mktemp -d /tmp/envd-proc-test.XXXXXX)
ENVD_PID=
PORT=

cleanup() {
	[ -n "$ENVD_PID" ] && kill "$ENVD_PID" 2>/dev/null && wait "$ENVD_PID" 2>/dev/null
	rm -rf "$TMP"
}
on_exit cleanup

ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
nok() { FAIL=$((FAIL + 1)); echo "FAIL - $1${2:+: $2}"; }
# check NAME EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then ok "$1"; else nok "$1" "expected [$2] got [$3]"; fi; }
# check_re NAME REGEX ACTUAL
check_re() { if [[ $3 =~ $2 ]]; then ok "$1"; else nok "$1" "[$3] !~ /$2/"; fi; }

summary() {
	# A clean SIGTERM exit first, so the sanitizer build reports leaks too.
	if [ -n "$ENVD_PID" ]; then
		kill "$ENVD_PID" 2>/dev/null && wait "$ENVD_PID" 2>/dev/null
		ENVD_PID=
	fi
	if grep -qE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$TMP/envd.log" 2>/dev/null; then
		nok "envd sanitizer report" "$(grep -m3 -E 'ERROR|runtime error' "$TMP/envd.log")"
	fi
	echo "$(basename "$0" .sh): $PASS passed, $FAIL failed"
	[ "$FAIL" -eq 0 ]
}

free_port() {
	"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# cgroup_flags [flags...]: a test envd leaves the machine's cgroup tree
# alone unless the script passes -cgroup-root itself, or ENVD_CGROUP_ROOT
# names a cgroup2 directory to run every suite under.
cgroup_flags() {
	case " $* " in *" -cgroup-root "* | *" -no-cgroups "*) return 0 ;; esac
	if [ -n "${ENVD_CGROUP_ROOT:-}" ]; then
		echo "-cgroup-root $ENVD_CGROUP_ROOT"
	else
		echo "-no-cgroups"
	fi
}

# start_envd [extra flags...]
start_envd() {
	PORT=$(free_port)
	# Under ASan a small quarantine keeps RSS figures meaningful.
	ASAN_OPTIONS="quarantine_size_mb=4:thread_local_quarantine_size_kb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		"$ENVD_BIN" -isnotfc -port "$PORT" $(cgroup_flags "$@") $(changes_flags "$@") "$@" >"$TMP/envd.log" 2>&1 &
	ENVD_PID=$!
	wait_for 60 curl -s -o /dev/null "http://127.0.0.1:$PORT/health" && return 0
	echo "envd did not start: $(cat "$TMP/envd.log")" >&2
	exit 1
}

url() { echo "http://127.0.0.1:$PORT/process.Process/$1"; }

# frame JSON... : Connect envelopes (flag 0) for each argument. Plain bash:
# no interpreter start per request.
frame() {
	local LC_ALL=C a n b0 b1 b2 b3
	for a in "$@"; do
		n=${#a}
		printf -v b0 '%03o' $((n >> 24 & 255))
		printf -v b1 '%03o' $((n >> 16 & 255))
		printf -v b2 '%03o' $((n >> 8 & 255))
		printf -v b3 '%03o' $((n & 255))
		printf "\\000\\$b0\\$b1\\$b2\\$b3%s" "$a"
	done
}

# decode: Connect+JSON stream on stdin -> one line per envelope:
#   "<flags> <json>" with data payloads base64-decoded to text.
decode() {
	"$PY" -u -c '
import sys, struct, json, base64
r = sys.stdin.buffer
while True:
    h = r.read(5)
    if len(h) < 5:
        if h:
            print("TRAILING", len(h))
        break
    f = h[0]; n = struct.unpack(">I", h[1:5])[0]
    p = r.read(n)
    m = json.loads(p)
    e = m.get("event", {})
    if "data" in e:
        for k in ("stdout", "stderr", "pty"):
            if k in e["data"]:
                e["data"][k] = base64.b64decode(e["data"][k]).decode("utf-8", "replace")
    print(f, json.dumps(m, sort_keys=True), flush=True)'
}

# stream METHOD JSON [curl args...]: run a server-streaming call, decoded.
stream() {
	local m=$1 j=$2
	shift 2
	frame "$j" | curl -s -N --max-time "${MAXTIME:-$HANG_S}" -X POST "$(url "$m")" \
		-H 'Content-Type: application/connect+json' \
		-H 'Connect-Protocol-Version: 1' --data-binary @- "$@" | decode
}

# unary METHOD JSON: prints "<http status> <body>".
unary() {
	curl -s --max-time "$HANG_S" -X POST "$(url "$1")" -H 'Content-Type: application/json' -d "$2" \
		-w ' %{http_code}' | awk '{code=$NF; $NF=""; sub(/ $/,""); print code, $0}'
}

# pid_in FILE: wait (up to HANG_S) for the start event in a decoded stream file.
pid_in() {
	local p deadline=$((SECONDS + HANG_S))
	while :; do
		p=$(head -1 "$1" 2>/dev/null | grep -o '"pid": [0-9]*' | grep -o '[0-9]*$')
		[ -n "$p" ] && { echo "$p"; return 0; }
		[ "$SECONDS" -ge "$deadline" ] && break
		sleep 0.05
	done
	echo "no start event in $1" >&2
	return 1
}

# stream_bg OUT METHOD JSON [curl args...]: run a server-streaming call in the
# background, decoded into OUT; STREAM_PID is the curl (kill it to drop the
# stream), STREAM_JOB the job to wait for (curl and decoder both done).
stream_bg() {
	local out=$1 m=$2 j=$3
	shift 3
	frame "$j" >"$out.req"
	: >"$out"
	rm -f "$out.fifo" "$out.curl"
	mkfifo "$out.fifo"
	(
		curl -s -N --max-time "${MAXTIME:-$HANG_S}" -X POST "$(url "$m")" \
			-H 'Content-Type: application/connect+json' \
			-H 'Connect-Protocol-Version: 1' --data-binary @"$out.req" "$@" \
			>"$out.fifo" &
		echo $! >"$out.curl"
		decode <"$out.fifo" >"$out"
		wait
	) &
	STREAM_JOB=$!
	wait_for 60 test -s "$out.curl"
	STREAM_PID=$(cat "$out.curl")
}

# stream_until OUT REGEX METHOD JSON [curl args...]: run a stream until its
# decoded output in OUT matches REGEX (HANG_S at most), then drop it. With
# SETTLE=S it is held S seconds longer first, for checks that nothing else
# comes (a slow machine can only make those pass more easily).
stream_until() {
	local out=$1 re=$2
	shift 2
	stream_bg "$out" "$@"
	wait_for 60 has "$out" "$re"
	[ -n "${SETTLE:-}" ] && sleep "$SETTLE"
	kill "$STREAM_PID" 2>/dev/null
	wait "$STREAM_JOB"
}

# stdout_of DECODED: concatenated stdout text of a decoded stream.
stdout_of() {
	"$PY" -c '
import sys, json
out = []
for line in sys.stdin:
    f, j = line.split(" ", 1)
    e = json.loads(j).get("event", {})
    if "data" in e and "stdout" in e["data"]:
        out.append(e["data"]["stdout"])
sys.stdout.write("".join(out))'
}

# kinds < DECODED: the event kinds in order, "eos" for the end-stream envelope.
kinds() {
	sed -E 's/^0 \{"event": \{"([a-z]+)".*/\1/; s/^2 .*/eos/' | tr '\n' ' ' | sed 's/ $//'
}

# Resident set of the envd under test, KiB.
envd_rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$ENVD_PID/status"; }

# Sourced by the process_*.sh tests; run on its own it checks nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "process_lib: helpers only"
fi
