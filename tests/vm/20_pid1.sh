#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Our init as the machine's PID 1 on a real kernel: it reaps orphans and
# restarts envd after kill -9, while processes started earlier survive.
. "$(dirname "$0")/lib.sh"

expect_eq "PID 1 is envd-init" envd-init "$(vm_exec 'cat /proc/1/comm')"
expect_eq "envd is a child of PID 1" 1 "$(vm_exec 'ps -o ppid= -p $(pidof envd) | tr -d " "')"

# The template's user, as a template's commands meet it: uid 1000 with
# its home, a login shell that read the profile (PATH), passwordless sudo
# (through PAM), and the commands that are alternatives (awk, which).
expect_eq "user: uid, home, login PATH" "1000 /home/user /usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games" \
	"$(vm_exec -u user 'echo $(id -u) $HOME $PATH')"
expect_eq "user: passwordless sudo" 0 "$(vm_exec -u user 'sudo -n id -u' 2>&1)"
expect_eq "awk and which are there" "mawk /usr/bin/awk" \
	"$(vm_exec 'echo | awk "{print \"mawk\"}"; which awk' | tr '\n' ' ' | sed 's/ $//')"

# Orphans: each sh exits at once and leaves its sleep to PID 1; when they
# are killed, PID 1 must reap them.
out=$(vm_exec 'for i in 1 2 3 4 5 6 7 8; do setsid sh -c "sleep 601.5 </dev/null >/dev/null 2>&1 & echo \$!"; done' | tr '\n' ' ')
first=${out%% *}
expect_eq "an orphan is re-parented to PID 1" 1 "$(vm_exec "ps -o ppid= -p ${first:-0} | tr -d ' '")"
# Reaped means the pid's /proc entry is gone (a zombie keeps one): wait
# for that, as long as a loaded host needs, instead of a fixed pause.
orphans_left() { vm_exec "echo left: \$(for p in $out; do [ -e /proc/\$p ] && echo \$p; done)"; }
vm_exec 'pkill -f "^sleep 601.5$"' >/dev/null
orphans_reaped() { [ "$(orphans_left)" = "left:" ]; }
wait_for 60 orphans_reaped
expect_eq "the killed orphans are reaped (none left)" "left:" "$([ -n "${first:-}" ] && orphans_left)"
# And no zombie stays anywhere in the guest: a moment with none is the
# proof (one PID 1 left behind would stay), not a count that could catch
# a process between its exit and its parent's wait.
guest_no_zombies() { [ "$(vm_exec 'ps -eo stat= | grep -c "^Z"')" = 0 ]; }
wait_for 60 guest_no_zombies && pass "no zombie stays in the guest" ||
	fail "no zombie stays in the guest" "$(vm_exec 'ps -eo pid=,ppid=,stat=,args= | grep " Z"')"

# envd killed with SIGKILL: init starts a new one; a process started before
# survives, and the new envd takes it back (docs/crash.md): listed again,
# its whole output by tag from offset 0 with no gap, its exit code, though
# it ended while envd was down or after. This kernel may predate pidfd
# exit information: the exit status comes from init's exit ring. The
# request that carries the kill is cut by it.
survivor=$(vm_exec --background 'exec sleep 600')
vm_exec --background --tag vmcrash 'for i in $(seq 1 400); do echo "line $i"; sleep 0.005; done; exit 3' >/dev/null
old=$(vm_exec 'pidof envd')
vm_exec 'kill -9 $(pidof envd)' >/dev/null 2>&1
if ms=$(wait_health 30); then
	pass "envd restarted by init after kill -9: /health again after $ms ms"
else
	fail "envd restarted after kill -9"
fi
# A new envd has forgotten /init: the platform sends it again.
expect_eq "/init again after the restart (token from the metadata service)" 204 "$(vm_init)"
new=$(vm_exec 'pidof envd')
[ -n "$new" ] && [ "$new" != "$old" ] && pass "a new envd runs (pid $old -> $new)" || fail "new envd" "[$old] -> [$new]"
expect_eq "a process started before the restart survives it" yes \
	"$(vm_exec "kill -0 $survivor && echo yes")"
probe() { CRASH_TOKEN=$VM_TOKEN "$PY" tests/integration/crash_probe.py "$@"; }
expect_match "the new envd lists the processes of the killed one" '"vmcrash"' "$(probe list "$VM_URL")"
want=$(seq 1 400 | sed 's/^/line /' | wc -c)
got=$(probe follow "$VM_URL" vmcrash)
expect_match "a job's whole output by tag across the crash ($want bytes, no gap)" \
	"\"bytes\": $want, \"contiguous\": true, .*\"gaps\": \[\]" "$got"
expect_match "the job's exit code across the crash" '"exitCode": 3' "$got"
vm_exec "kill $survivor" >/dev/null
grep -q "envd killed by signal 9; restarting" "$VM_CONSOLE" && pass "init logged the restart on the console" ||
	fail "restart logged on the console"
finish
