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
#   curl                   every curl a test runs gives up after 2 x HANG_S
#                          (a curlrc in CURL_HOME; an explicit --max-time
#                          wins): a request the server never answers fails
#                          its check in minutes instead of holding the
#                          suite until the run's own deadline.
#   now_ms                 wall clock in milliseconds
#   on_exit 'CMDS'         run CMDS when the script exits, in the script's own
#                          shell only (instead of `trap 'CMDS' EXIT`; see below)

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

HANG_S=${HANG_S:-300}
export HANG_S

# One directory per deadline, shared by every suite (written whole, then
# renamed into place, so a suite never reads half of it).
T_CURL_HOME=/tmp/envd-test-curl.$((HANG_S * 2))
if [ ! -f "$T_CURL_HOME/.curlrc" ]; then
	mkdir -p "$T_CURL_HOME" &&
		echo "max-time = $((HANG_S * 2))" >"$T_CURL_HOME/.curlrc.$$" &&
		mv -f "$T_CURL_HOME/.curlrc.$$" "$T_CURL_HOME/.curlrc"
fi
export CURL_HOME=$T_CURL_HOME

# A background subshell `( ... ) &` starts with its parent's traps, EXIT
# included, until bash resets them. A fatal signal in that window (a
# watchdog subshell killed right after it was started, which a loaded
# machine makes likely) runs the parent's EXIT trap in the subshell: its
# cleanup then kills the script's daemons and removes its scratch
# directories while the script goes on. bash 5.2 even ignores a
# `[ ... ] || return` guard there, so the guard below is an `if` around
# the whole body: the cleanup runs in the shell that sourced this file.
T_MAIN_SHELL=$BASHPID
T_ON_EXIT=
on_exit() {
	T_ON_EXIT=$1
	trap _t_on_exit EXIT
}
_t_on_exit() {
	if [ "$BASHPID" = "$T_MAIN_SHELL" ]; then
		eval "$T_ON_EXIT"
	fi
}

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

# changes_flags [flags...]: a test envd keeps no change journal (every
# envd would otherwise resolve every change on the machine while the suites
# run side by side) unless the script passes -changes-max-paths itself.
changes_flags() {
	case " $* " in *" -changes-max-paths "*) return 0 ;; esac
	echo "-changes-max-paths 0"
}

# envd_under_qemu_user: ENVD_BIN runs a foreign-architecture envd through
# qemu-user (tests/arm64/envd). There envd cannot exec its own image (no
# binfmt handler: no live upgrade) and fanotify is not emulated (the change
# journal falls back to inotify); sections that need either say so and are
# not run.
envd_under_qemu_user() {
	grep -qs '^exec qemu-' "${ENVD_BIN:-}"
}
