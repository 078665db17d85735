#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A pause/resume cycle as the platform does it around a snapshot: the whole
# VM is stopped (QEMU monitor `stop`), its clock is behind when it comes
# back (`cont`), and /init brings the new host time. A stream open across
# the pause must carry on: every line arrives once, keep-alives go on.
. "$(dirname "$0")/lib.sh"
PAUSE_S=${PAUSE_S:-8}
OUT=$VM_RUN_DIR/pause.events

"$PY" scripts/vm-exec.py --events --keepalive 1 -t 600 \
	'for i in $(seq 1 12); do echo tick $i; sleep 1; done' >"$OUT" 2>&1 &
sp=$!
wait_for 15 grep -q '"tick 2' "$OUT"
grep -q '"tick 2' "$OUT" && pass "stream open, ticking" || fail "stream started" "$(head -c 300 "$OUT")"

# The guest's clock goes back a minute, as in a VM restored from an old
# snapshot; the pause adds to that.
vm_exec 'date -s "@$(( $(date +%s) - 60 ))" >/dev/null' >/dev/null
vm_monitor stop >/dev/null
status=$(vm_monitor 'info status')
expect_match "QEMU reports the VM paused" 'paused' "$status"
t_stop=$(date +%s.%N)
sleep "$PAUSE_S"
vm_monitor cont >/dev/null
t_cont=$(date +%s.%N)
expect_match "QEMU reports the VM running" 'running' "$(vm_monitor 'info status')"

lag=$(vm_exec 'date +%s.%N' | awk -v h="$(date +%s.%N)" '{printf "%d", h - $1}')
[ "${lag:-0}" -ge 50 ] && pass "guest clock is behind after the resume (${lag} s)" || fail "guest clock behind" "lag [$lag]"
t_init0=$(date +%s.%N)
expect_eq "/init with the new timestamp right after the resume" 204 "$(vm_init)"
t_init1=$(date +%s.%N)
# /init carries the host time of its start, so the guest clock may be
# behind by as long as /init took; reading it back takes a command in the
# guest, so it is compared with the host clock before and after that read.
hb=$(date +%s.%N)
g=$(vm_exec 'date +%s.%N')
ha=$(date +%s.%N)
awk -v g="$g" -v hb="$hb" -v ha="$ha" -v i0="$t_init0" -v i1="$t_init1" \
	'BEGIN {exit !(g >= hb - (i1 - i0) - 1 && g <= ha + 1)}' &&
	pass "/init set the guest clock ($(awk -v g="$g" -v hb="$hb" 'BEGIN {printf "%.2f", hb - g}') s behind the host, /init took $(awk -v a="$t_init0" -v b="$t_init1" 'BEGIN {printf "%.2f", b - a}') s)" ||
	fail "guest clock set" "guest $g, host $hb..$ha, /init $t_init0..$t_init1"

wait "$sp"
ticks=$(grep -o '"tick [0-9]*' "$OUT" | tr -d '"' | tr '\n' ' ')
expect_eq "every line arrived once, in order" "$(seq -f 'tick %g' 1 12 | tr '\n' ' ')" "$ticks"
expect_match "the stream ended with exit status 0" '"status": "exit status 0"' "$(grep '"end"' "$OUT")"
after=$(awk -v t="$t_cont" '$1 > t && /"keepalive"/' "$OUT" | wc -l)
[ "$after" -ge 1 ] && pass "keep-alives went on after the resume ($after)" || fail "keep-alives after the resume"
# The stream fell silent for the pause. Bytes the guest sent just before
# the stop may still reach the reader after it (QEMU's network backend runs
# while the vCPUs are stopped, and a loaded host delays the reader), so the
# pause shows as the longest gap between two events, not as an empty
# window: at least PAUSE_S - 3 s (ticks and keep-alives come every second).
gap=$(awk '{print $1}' "$OUT" | sort -n | awk 'NR > 1 && $1 - p > g {g = $1 - p} {p = $1} END {printf "%.1f", g}')
awk -v g="$gap" -v m=$((PAUSE_S - 3)) 'BEGIN {exit !(g >= m)}' &&
	pass "the stream was silent while the VM was stopped (longest gap $gap s)" ||
	fail "the stream was silent while the VM was stopped" "longest gap $gap s, pause $PAUSE_S s"
finish
