#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Helpers every test script shares; sourced by tests/lib.sh and
# tests/integration/process_lib.sh.
#
#   $PY                    the system python3. A version-manager shim first on
#                          PATH can cost hundreds of ms per start, and helpers
#                          start one per request.
#   wait_for SECS cmd...   run cmd every 50 ms until it succeeds; non-zero if
#                          it still fails after SECS. Tests wait for what they
#                          need to see; SECS is an upper bound only, sized
#                          for a loaded machine, never a pass/fail timing.
#   now_ms                 wall clock in milliseconds

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

wait_for() {
	local deadline=$((SECONDS + $1))
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

# changes_flags [flags...]: a test envd keeps no change journal (every
# envd would otherwise resolve every change on the machine while the suites
# run side by side) unless the script passes -changes-max-paths itself.
changes_flags() {
	case " $* " in *" -changes-max-paths "*) return 0 ;; esac
	echo "-changes-max-paths 0"
}
