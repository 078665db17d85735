#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Workload freeze for snapshots: /freeze stops a command (no output while
# frozen) and reports what it froze, /unfreeze and /init resume it (the
# latter with the audit header), envd keeps serving meanwhile; hierarchy
# mode freezes other cgroups too but not allowlisted ones, and leaves the
# guest's own frozen cgroups frozen after the thaw; without cgroups the
# endpoints answer with nothing frozen. /fsthaw's answer shape (freezing the
# test machine's root filesystem is not something to try here).
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"

CG=$(cgroup_test_dir frz)
on_exit 'cleanup; cgroup_remove "$CG"'
base() { echo "http://127.0.0.1:$PORT"; }
post() { curl -s --max-time "$HANG_S" -X POST "$(base)$1" -w '\n%{http_code}' "${@:2}"; }
status_of() { tail -1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
json_field() { /usr/bin/python3 -c 'import sys, json; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
# output size of the counter stream so far
out_len() { stdout_of <"$TMP/c.out" | wc -c; }
# settle: wait until output already in flight has arrived: the child's
# stdout pipe is empty and the length stays the same over three samples
# 0.2 s apart (HANG_S at most).
pipe_unread() { # bytes waiting in the pipe that is fd 1 of pid $1
	/usr/bin/python3 -c '
import fcntl, os, struct, sys, termios
fd = os.open("/proc/%s/fd/1" % sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])' "$1" 2>/dev/null || echo 0
}
settle() {
	local a b c deadline=$((SECONDS + HANG_S))
	a=$(out_len)
	while [ "$SECONDS" -lt "$deadline" ]; do
		sleep 0.2
		b=$(out_len)
		sleep 0.2
		c=$(out_len)
		[ "$a" = "$b" ] && [ "$b" = "$c" ] && [ "$(pipe_unread "$pid")" = 0 ] && return 0
		a=$c
	done
	return 1
}
# grows_within SECONDS: the counter's output grows (SECONDS or HANG_S at most)
out_grew() { [ "$(out_len)" -gt "$1" ]; }
grows_within() { wait_for "$1" out_grew "$(out_len)"; }

if [ -n "$CG" ]; then
	start_envd -cgroup-root "$CG"
	# The counter's stream lasts the whole section, however long a loaded
	# machine takes over it: its limit is not the per-request HANG_S.
	MAXTIME=$((12 * HANG_S)) stream Start '{"process":{"cmd":"sh","args":["-c","i=0; while :; do echo $i; i=$((i+1)); sleep 0.01; done"]},"stdin":false}' >"$TMP/c.out" &
	bg=$!
	pid=$(pid_in "$TMP/c.out") || exit 1
	grows_within 10 && ok "counter running" || nok "counter running"

	# --- legacy freeze with confirmation ---
	r=$(post '/freeze?maxWaitMs=60000')
	check "/freeze?maxWaitMs: 200" "200" "$(status_of "$r")"
	b=$(body_of "$r")
	echo "# FreezeResult: $b"
	check "mode legacy" "legacy" "$(json_field mode <<<"$b")"
	check_re "frozen >= 1" '^[1-9][0-9]*$' "$(json_field frozen <<<"$b")"
	check "notFrozen 0" "0" "$(json_field notFrozen <<<"$b")"
	check "result has every field" "mode visited allowlisted truncated preFrozen requested frozen notFrozen failed unobservable sweepMs waitMs" \
		"$(/usr/bin/python3 -c 'import sys, json; print(" ".join(json.loads(sys.stdin.read())))' <<<"$b")"
	check "cgroup.freeze of user is 1" "1" "$(cat "$CG/user/cgroup.freeze")"
	check "the command's task is frozen" "frozen 1" "$(grep frozen "$(dirname "$CG")$(grep '^0::' /proc/$pid/cgroup | cut -d: -f3)/cgroup.events" 2>/dev/null || grep frozen "$CG/user/cgroup.events")"
	settle
	n0=$(out_len)
	check "envd serves /health while the workload is frozen" "204" "$(curl -s -o /dev/null -w '%{http_code}' "$(base)/health")"
	check "and List" "200" "$(unary List '{}' | cut -d' ' -f1)"
	sleep 0.5
	check "no output while frozen" "$n0" "$(out_len)"
	# A command born into a frozen cgroup could not even exec: refused at once.
	out=$(stream Start '{"process":{"cmd":"true"},"stdin":false}')
	check_re "Start while frozen: unavailable" '"unavailable".*frozen' "$out"
	out=$(stream Start '{"process":{"cmd":"echo","args":["sys"]},"stdin":false,"tag":"_system"}')
	check_re "a _system command still runs while frozen" '"stdout": "sys\\n"' "$out"
	check "envd still serves after that" "204" "$(curl -s -o /dev/null -w '%{http_code}' "$(base)/health")"

	# --- /unfreeze resumes ---
	r=$(post /unfreeze -D "$TMP/h")
	check "/unfreeze: 204" "204" "$(status_of "$r")"
	check_re "/unfreeze: no-store" 'Cache-Control: no-store' "$(cat "$TMP/h")"
	grows_within 10 && ok "output resumes after /unfreeze" || nok "output resumes after /unfreeze"

	# --- freeze without waiting, then /init thaws (with the audit header) ---
	r=$(post /freeze)
	check "/freeze without maxWaitMs: 204" "204" "$(status_of "$r")"
	wait_for 10 grep -q 'frozen 1' "$CG/user/cgroup.events"
	settle
	n0=$(out_len)
	sleep 0.5
	check "no output while frozen (again)" "$n0" "$(out_len)"
	r=$(post /init -D "$TMP/h" -H 'Content-Type: application/json' -d '{}')
	check "/init: 204" "204" "$(status_of "$r")"
	audit=$(grep -i '^X-Envd-Freeze-Audit:' "$TMP/h" | cut -d' ' -f2- | tr -d '\r')
	echo "# audit: $audit"
	check_re "/init reports the audit" '^\{"visited":[0-9]+,"frozen":[1-9][0-9]*,"escaped":0,"violations":0,"truncated":false\}$' "$audit"
	grows_within 10 && ok "output resumes after /init" || nok "output resumes after /init"
	r=$(post /init -D "$TMP/h" -H 'Content-Type: application/json' -d '{}')
	check "no audit header when nothing was frozen" "" "$(grep -i '^X-Envd-Freeze-Audit:' "$TMP/h")"

	# --- hierarchy mode ---
	mkdir "$CG/other" "$CG/guest" "$CG/socats"
	sleep 1000 &
	op=$!
	echo "$op" >"$CG/other/cgroup.procs"
	echo 1 >"$CG/guest/cgroup.freeze"
	r=$(post '/freeze?mode=hierarchy&maxWaitMs=60000')
	b=$(body_of "$r")
	echo "# FreezeResult: $b"
	check "hierarchy: 200" "200" "$(status_of "$r")"
	check "mode hierarchy" "hierarchy" "$(json_field mode <<<"$b")"
	check "socats allowlisted" "1" "$(json_field allowlisted <<<"$b")"
	check "guest-frozen cgroup counted as preFrozen" "1" "$(json_field preFrozen <<<"$b")"
	check "user, ptys and other requested" "3" "$(json_field requested <<<"$b")"
	check "other frozen" "1" "$(cat "$CG/other/cgroup.freeze")"
	check "socats left running" "0" "$(cat "$CG/socats/cgroup.freeze")"
	check "process in other is frozen" "frozen 1" "$(grep frozen "$CG/other/cgroup.events")"
	r=$(post '/freeze?mode=hierarchy&maxCgroups=1&maxWaitMs=1000')
	check "maxCgroups bounds the walk" "True" "$(body_of "$r" | json_field truncated)"
	r=$(post /unfreeze)
	check "/unfreeze after hierarchy: 204" "204" "$(status_of "$r")"
	check "other thawed" "0" "$(cat "$CG/other/cgroup.freeze")"
	check "the guest's own frozen cgroup stays frozen" "1" "$(cat "$CG/guest/cgroup.freeze")"
	grows_within 10 && ok "counter runs again" || nok "counter runs again"
	kill -KILL "$op"
	wait "$op" 2>/dev/null
	unary SendSignal "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" >/dev/null
	wait $bg
	kill "$ENVD_PID" && wait "$ENVD_PID" 2>/dev/null
	ENVD_PID=
else
	echo "# no private cgroup2 directory here: only the no-cgroup checks run"
fi

# --- without cgroups ---
start_envd -no-cgroups
r=$(post /freeze)
check "no cgroups: /freeze 204" "204" "$(status_of "$r")"
r=$(post '/freeze?maxWaitMs=100&mode=hierarchy')
check "no cgroups: /freeze?maxWaitMs 200" "200" "$(status_of "$r")"
check "no cgroups: nothing frozen" "hierarchy 0 0 0" "$(body_of "$r" | /usr/bin/python3 -c 'import sys, json; j = json.load(sys.stdin); print(j["mode"], j["requested"], j["frozen"], j["visited"])')"
check "no cgroups: /unfreeze 204" "204" "$(status_of "$(post /unfreeze)")"
r=$(post /fsthaw)
if [ "$(status_of "$r")" = 204 ]; then
	ok "/fsthaw: 204 (root filesystem not frozen)"
else
	check_re "/fsthaw: a 500 naming FITHAW" '^\{"code":500,"message":"FITHAW /: .*"\}$' "$(body_of "$r")"
fi
summary
