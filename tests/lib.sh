#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shared helpers for integration tests: start envd on a free port, make
# assertions, print the summary line the test runner reads.
#
#   . tests/lib.sh
#   envd_start [extra envd flags]     # sets ENVD_PORT, ENVD_URL, ENVD_PID
#   check "description" test-command...
#   expect_eq "description" expected actual
#   finish                            # prints "N passed, N failed", exits

: "${ENVD_BIN:=build/envd}"
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T_PASS=0
T_FAIL=0
T_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
ENVD_PIDS=()
ENVD_LOGS=()

free_port() {
	"$PY" - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
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

# envd_start [flags...]: start envd, wait until /health answers.
envd_start() {
	ENVD_PORT=$(free_port)
	ENVD_URL="http://127.0.0.1:$ENVD_PORT"
	ENVD_LOG=$(mktemp /tmp/envd-test-log.XXXXXX)
	ENVD_LOGS+=("$ENVD_LOG")
	"$ENVD_BIN" -isnotfc -port "$ENVD_PORT" $(cgroup_flags "$@") $(changes_flags "$@") "$@" >"$ENVD_LOG" 2>&1 &
	ENVD_PID=$!
	ENVD_PIDS+=("$ENVD_PID")
	local deadline=$((SECONDS + HANG_S))
	while [ "$SECONDS" -lt "$deadline" ]; do
		if curl -s -o /dev/null "$ENVD_URL/health" 2>/dev/null; then
			export ENVD_PORT ENVD_URL ENVD_PID
			return 0
		fi
		kill -0 "$ENVD_PID" 2>/dev/null || break
		sleep 0.02
	done
	echo "envd did not start; log:" >&2
	cat "$ENVD_LOG" >&2
	return 1
}

envd_stop() {
	local pid=${1:-$ENVD_PID}
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

envd_alive() { kill -0 "${1:-$ENVD_PID}" 2>/dev/null; }

_t_cleanup() {
	for p in "${ENVD_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for l in "${ENVD_LOGS[@]}"; do rm -f "$l"; done
}
on_exit _t_cleanup

pass() { T_PASS=$((T_PASS + 1)); echo "ok   - $1"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL - $1${2:+: $2}"; }

# check "desc" cmd...: passes when the command succeeds.
check() {
	local desc=$1
	shift
	if "$@" >/dev/null 2>&1; then pass "$desc"; else fail "$desc"; fi
}

# expect_eq "desc" expected actual
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected [$2] got [$3]"; fi
}

# expect_match "desc" regex actual
expect_match() {
	if [[ "$3" =~ $2 ]]; then pass "$1"; else fail "$1" "[$3] does not match /$2/"; fi
}

finish() {
	# Stop every envd this script started (SIGTERM: a clean exit, so the
	# sanitizer build runs its leak check), then read their logs.
	for p in "${ENVD_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${ENVD_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	local bad=""
	for l in "${ENVD_LOGS[@]}"; do
		if grep -qE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$l" 2>/dev/null; then
			bad+="$(grep -m3 -E 'ERROR|runtime error|SUMMARY' "$l") "
		fi
	done
	if [ -n "$bad" ]; then fail "no sanitizer reports" "$bad"; else pass "no sanitizer reports"; fi
	echo "$T_NAME: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
}
