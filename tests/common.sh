#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Helpers every test script shares; sourced by tests/lib.sh and
# tests/integration/process_lib.sh.
#
#   $PY                    the system python3. A version-manager shim first on
#                          PATH can cost hundreds of ms per start, and helpers
#                          start one per request.
#   HANG_S                 how long a wait for an event goes on before the
#                          test calls it a hang (default 300 s): sized for a
#                          machine ten times slower than a loaded one, so a
#                          slow machine makes a suite slower, never red. Only
#                          a real hang (or a real failure) costs that long.
#   wait_for SECS cmd...   run cmd every 50 ms until it succeeds; non-zero if
#                          it still fails after SECS or HANG_S, whichever is
#                          longer. Tests wait for what they need to see; SECS
#                          says how long that takes at most on an ordinary
#                          machine, never a pass/fail timing.
#   now_ms                 wall clock in milliseconds

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

HANG_S=${HANG_S:-300}
export HANG_S

wait_for() {
	local secs=$1
	[ "$secs" -ge "$HANG_S" ] 2>/dev/null || secs=$HANG_S
	local deadline=$((SECONDS + secs))
	shift
	until "$@"; do
		[ "$SECONDS" -ge "$deadline" ] && return 1
		sleep 0.05
	done
	return 0
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# has FILE REGEX: FILE (maybe not there yet) has a line matching REGEX
has() { grep -aqE "$2" "$1" 2>/dev/null; }
