#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A local user of the sandbox against a root envd under build/init
# (docs/security.md, "A local user against envd and init"), each attack
# performed for real (hostile_local_probe.py):
#  - uid 65534 sends init's notify socket a TCP socket whose close would
#    block init (it cannot reach the socket); root does (init hands the
#    close to a throw-away child), and a SIGKILL of envd is still followed
#    by a restart; a flooder of uid 65534 gets nothing through; with init
#    stopped, Start does not wait for it and its processes are kept;
#  - in a private pid namespace, orphans of uid 65534 exit 77 on the pids
#    a root job then gets; envd is killed and the job ends while init is
#    stopped: the end event says the job's own 3, and 1100 more orphans
#    leave no record in init's exit ring;
#  - a session command (as `user`) forges status lines, now and from a
#    background subshell during the next command: every command ends with
#    its own code; no file of a finished command stays; the user cannot
#    create names in the session directory; a racer swapping its FIFOs for
#    links to root's FIFO gets root's FIFO neither chowned nor read; the
#    session directory of a killed envd is removed by the next one.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
T_NAME=hostile_local

INIT=${INIT_BIN:-build/init}
if [ ! -x "$INIT" ]; then
	fail "build/init exists" "run make"
	finish
	exit 1
fi
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! id user >/dev/null 2>&1; then
	echo "SKIP: needs root, setpriv and a user called user"
	echo "hostile_local: 0 passed, 0 failed"
	exit 0
fi
W=$(mktemp -d /tmp/envd-hostile-local.XXXXXX)
chmod 755 "$W"
IPID=""
NSPID=""
NSINIT=""
cleanup_hl() {
	[ -n "$NSINIT" ] && kill -CONT "$NSINIT" 2>/dev/null
	[ -n "$IPID" ] && kill -CONT "$IPID" 2>/dev/null
	[ -n "$IPID" ] && kill -TERM "$IPID" 2>/dev/null && wait "$IPID" 2>/dev/null
	[ -n "$NSINIT" ] && kill -TERM "$NSINIT" 2>/dev/null
	[ -n "$NSPID" ] && wait "$NSPID" 2>/dev/null
	rm -rf "$W"
}
on_exit cleanup_hl

# probe SCENARIO ARGS...: run it and count its ok/FAIL lines.
probe() {
	"$PY" tests/integration/hostile_local_probe.py "$@" >"$W/out" 2>&1
	local rc=$?
	cat "$W/out"
	T_PASS=$((T_PASS + $(grep -c '^ok ' "$W/out")))
	T_FAIL=$((T_FAIL + $(grep -c '^FAIL ' "$W/out")))
	[ "$rc" -eq 0 ] || [ "$(grep -c '^FAIL ' "$W/out")" -gt 0 ] || fail "$1 ran to the end" "$(tail -5 "$W/out")"
}

PORT=$(free_port)
BASE="http://127.0.0.1:$PORT"
"$INIT" --no-mount --grace 10 -- "$ENVD_BIN" -isnotfc -port "$PORT" $(cgroup_flags) -upload-registry "$W/reg" \
	>"$W/log" 2>&1 &
IPID=$!
ENVD_LOGS+=("$W/log")
if ! wait_for 60 curl -s -o /dev/null "$BASE/health"; then
	fail "envd starts under init" "$(cat "$W/log")"
	finish
	exit 1
fi
pass "envd starts under init"

probe session_forge "$BASE" user
probe session_files "$BASE" user
SDIR=$(sed -n 's/^SESSION_DIR //p' "$W/out")
probe fifo_race "$BASE" user "$W" "${HOSTILE_RACE_ROUNDS:-100}"
probe notify "$BASE" "$IPID" "$W"
if [ -n "$SDIR" ]; then
	check "the session directory of a killed envd is removed by the next one" wait_for 60 test ! -e "$SDIR"
fi

# A private pid namespace, where pids can be chosen (ns_last_pid).
if unshare --pid --fork true 2>/dev/null; then
	PORT2=$(free_port)
	BASE2="http://127.0.0.1:$PORT2"
	unshare --pid --kill-child "$INIT" --no-mount --grace 5 -- "$ENVD_BIN" -isnotfc -port "$PORT2" $(cgroup_flags) \
		-upload-registry "$W/reg2" >"$W/log2" 2>&1 &
	NSPID=$!
	ENVD_LOGS+=("$W/log2")
	if wait_for 60 curl -s -o /dev/null "$BASE2/health"; then
		NSINIT=$(pgrep -P "$NSPID" | head -n1)
		probe pidns "$BASE2" "$NSINIT" "$W"
	else
		fail "envd starts under init in a pid namespace" "$(cat "$W/log2")"
	fi
else
	echo "# no pid namespaces here: the pid reuse attack is not run"
fi
[ "$T_FAIL" -gt 0 ] && grep -aE '^(init|envd):|keep|session|taken back' "$W/log" "$W/log2" 2>/dev/null | tail -n 40
finish
