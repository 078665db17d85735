#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Leaves made ahead of time: a burst of concurrent Starts (which makes the
# pool of spare leaves fill) gives every command a leaf of its own, fresh
# (its usage is its own), and every leaf, spare or used, is removed once the
# run is over; a stopping envd removes its spares. Runs against a private
# cgroup2 directory; skipped without one.
. "$(dirname "$0")/process_lib.sh"
. "$(dirname "$0")/cgroup_lib.sh"

CG=$(cgroup_test_dir pool)
on_exit 'cleanup; cgroup_remove "$CG"'
leaves() { ls -d "$CG"/user/cmd-* "$CG"/ptys/cmd-* 2>/dev/null | wc -l; }
leaves_within() { # N SECONDS
	for _ in $(seq $(($2 * 20))); do [ "$(leaves)" = "$1" ] && return 0; sleep 0.05; done
	return 1
}
N=24

if [ -z "$CG" ]; then
	echo "# no private cgroup2 directory here: nothing to check"
	summary
	exit $?
fi
start_envd -cgroup-root "$CG"

# Two bursts: the first creates demand, the second finds spares.
# (`wait` with the clients' pids: a bare one would wait for envd too.)
for round in 1 2; do
	pids=()
	for i in $(seq $N); do
		stream Start '{"process":{"cmd":"cat","args":["/proc/self/cgroup"]},"stdin":false}' \
			>"$TMP/b$round-$i.out" &
		pids+=($!)
	done
	wait "${pids[@]}"
done
ended=0
for f in "$TMP"/b*.out; do grep -q '"end": {"exited": true' "$f" && ended=$((ended + 1)); done
check "every Start of both bursts ended with exit 0" "$((2 * N))" "$ended"
paths=$(for f in "$TMP"/b*.out; do stdout_of <"$f" | sed -n 's/^0:://p'; done)
check "each command in a leaf under user/" "$((2 * N))" "$(grep -cE '/user/cmd-[0-9]+-[0-9]+$' <<<"$paths")"
check "no two commands shared a leaf" "$((2 * N))" "$(sort -u <<<"$paths" | wc -l)"

# A busy command after the bursts: its usage is its own, not a leaf's past.
out=$(stream Start '{"process":{"cmd":"true"},"stdin":false}')
check_re "a command right after the bursts ends" '"end": \{"exited": true' "$out"
u=$(grep -o '"cpuUserUsec": "[0-9]*"' <<<"$out" | grep -o '[0-9]*' | head -1)
s=$(grep -o '"cpuSystemUsec": "[0-9]*"' <<<"$out" | grep -o '[0-9]*' | head -1)
# /bin/true takes well under a second of CPU however loaded the machine;
# a leaf carrying 48 earlier commands' counters would not.
check_re "its usage is its own (${u:-0}+${s:-0} us)" '^ok$' "$([ $((${u:-0} + ${s:-0})) -lt 1000000 ] && echo ok)"

leaves_within 0 120 && ok "spare and used leaves are all removed once the run stops" ||
	nok "spare and used leaves are all removed once the run stops" "$(leaves) left"

# A stopping envd removes the spares it holds.
pids=()
for i in $(seq $N); do
	stream Start '{"process":{"cmd":"true"},"stdin":false}' >/dev/null &
	pids+=($!)
done
wait "${pids[@]}"
kill "$ENVD_PID" && wait "$ENVD_PID" 2>/dev/null
ENVD_PID=
check "no leaf left behind by a stopped envd" "0" "$(leaves)"
summary
