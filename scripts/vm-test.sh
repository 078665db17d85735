#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boot the image as a VM (scripts/vm-run.sh) and test envd in it from the
# host, as the platform uses it:
#
#   1. boot; /init as the orchestrator sends it (access token whose SHA-512
#      the metadata stand-in serves, default user `user`, host time);
#      QEMU start to first /health and to first command are reported;
#   2. every tests/vm/*.sh in order (VM_SUITES="tests/vm/10_sdk.sh ..." picks some), each with VM_URL, VM_TOKEN, VM_RUN_DIR,
#      VM_CONSOLE, VM_MONITOR, VM_MMDS_DIR, VM_QEMU_PID, VM_GUEST_IP in its
#      environment (tests/vm/lib.sh has the helpers); add a script there
#      to add checks;
#   3. a clean power-off: SIGTERM to PID 1 must end in "reboot: Power down"
#      and QEMU exiting on its own.
#
# ARCH=arm64 tests the arm64 template (build/arm64/vm, software emulation
# on an x86-64 host) with the SDK, PID 1, pause, port-forwarding and cgroup
# suites by default. The OOM and limits suites exercise the guest kernel
# more than envd and are not run there (VM_SUITES can name them); the
# storage suites need clients the arm64 root does not have.
#
# Prints "vm: N passed, N failed" last; logs in build/test-logs/vm-*.log.
# Skips (0 passed, 0 failed) where QEMU cannot run. Everything is torn down
# on exit, also after an interrupt (vm-run.sh cleans up what an earlier,
# interrupted run left).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T_PASS=0
T_FAIL=0
LOGS=build/test-logs
mkdir -p "$LOGS"

pass() { T_PASS=$((T_PASS + 1)); echo "ok   - $1"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL - $1${2:+: $2}"; }
finish() {
	echo "vm: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
	exit $?
}
skip() {
	echo "SKIP: $1"
	echo "vm: 0 passed, 0 failed"
	exit 0
}
ms_now() { date +%s%3N; }
# Hang deadlines, not timings: HANG_S (as in tests/common.sh) bounds a wait
# for one event; VM_SUITE_S bounds one tests/vm suite, which under
# emulation on a loaded host runs many times slower than with KVM.
HANG_S=${HANG_S:-300}
VM_SUITE_S=${VM_SUITE_S:-3600}
export HANG_S VM_SUITE_S

[ "$(id -u)" = 0 ] || skip "the VM test needs root (image build)"
ARCH=${ARCH:-amd64}
case $ARCH in
amd64) ABUILD=build QEMU=qemu-system-x86_64 DEFAULT_SUITES="tests/vm/[0-9]*.sh" ;;
arm64)
	ABUILD=build/arm64 QEMU=qemu-system-aarch64
	DEFAULT_SUITES="tests/vm/10_sdk.sh tests/vm/20_pid1.sh tests/vm/30_pause.sh tests/vm/40_portfwd.sh tests/vm/50_cgroup.sh"
	;;
*) echo "vm-test: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
export ARCH
# Log names: vm-*.log, vm-arm64-*.log (the two may run side by side);
# VM_LOG_PREFIX names another run of the same template beside them.
LP=vm
[ "$ARCH" = amd64 ] || LP=vm-$ARCH
LP=${VM_LOG_PREFIX:-$LP}
command -v $QEMU >/dev/null || skip "$QEMU is not installed"
command -v socat >/dev/null || skip "socat is not installed"

# The SDK clients (its suites report their absence themselves).
bash scripts/npm-setup.sh || true
# One image build at a time per template: runs of the same template side
# by side (make test splits the amd64 suites over two VMs) wait here for
# the first one's build, then find the image up to date.
mkdir -p "$ABUILD"
exec 9>"$ABUILD/vm-image.lock"
if ! flock -w "$((6 * HANG_S))" 9; then
	fail "build the VM image" "another build holds $ABUILD/vm-image.lock"
	finish
fi
if ! bash scripts/rootfs.sh >"$LOGS/$LP-image.log" 2>&1 || ! bash scripts/vm-image.sh >>"$LOGS/$LP-image.log" 2>&1; then
	fail "build the VM image" "$(tail -n 5 "$LOGS/$LP-image.log")"
	finish
fi
exec 9>&-

RUN=$REPO/$ABUILD/vm/runs/test-$$
mkdir -p "$RUN"
RUN_PID=
cleanup() {
	trap - EXIT INT TERM
	if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
		kill -TERM "$RUN_PID" 2>/dev/null
		wait "$RUN_PID" 2>/dev/null
	fi
	cp "$RUN/console.log" "$LOGS/$LP-console.log" 2>/dev/null
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- boot ----
# A port of our own (never the default 49983 another envd may hold).
# Below the ephemeral range, so no outgoing connection holds it by chance.
for _ in $(seq 1 50); do
	PORT=$((20000 + RANDOM % 12000))
	ss -Hltn "sport = :$PORT" | grep -q . || break
done
TOKEN=vm-test-token-$$-$RANDOM
# No log collector unless asked for (VM_LOG_COLLECTOR=on): each shipped line
# makes QEMU start a socat on the host, which stalls the emulated guest (a
# Start round trip took 131 ms with it, 60 without); the exporter is tested
# on the host (tests/integration/logexport.sh).
VM_LOG_COLLECTOR=${VM_LOG_COLLECTOR:-off} VM_PORT=$PORT VM_RUN_DIR=$RUN VM_ACCESS_TOKEN=$TOKEN VM_PARENT_PID=$$ \
	bash scripts/vm-run.sh >"$LOGS/$LP-run.log" 2>&1 &
RUN_PID=$!
boot_deadline=$((SECONDS + 2 * HANG_S))
while [ "$SECONDS" -lt "$boot_deadline" ]; do
	[ -s "$RUN/env" ] && break
	kill -0 "$RUN_PID" 2>/dev/null || break
	sleep 0.05
done
if [ ! -s "$RUN/env" ]; then
	fail "the VM boots and envd answers" "$(tail -n 20 "$LOGS/$LP-run.log")"
	finish
fi
set -a
. "$RUN/env"
VM_TOKEN=$TOKEN
set +a
pass "VM booted ($VM_ARCH, $VM_ACCEL): QEMU start to first /health $VM_BOOT_MS ms"

code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Access-Token: $TOKEN" -X POST \
	-H 'Content-Type: application/json' \
	-d "{\"accessToken\":\"$TOKEN\",\"defaultUser\":\"user\",\"timestamp\":\"$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)\",\"envVars\":{\"VM_TEST\":\"1\"}}" \
	"$VM_URL/init")
if [ "$code" = 204 ]; then
	pass "POST /init with the token the metadata service vouches for"
else
	fail "POST /init" "HTTP $code"
fi
first=$("$PY" scripts/vm-exec.py 'echo $VM_TEST' 2>&1)
run_ms=$(($(ms_now) - VM_T0_MS))
[ "$first" = 1 ] && pass "QEMU start to first command result: $run_ms ms" || fail "first command" "$first"
code=$(curl -s -o /dev/null -w '%{http_code}' "$VM_URL/envs")
[ "$code" = 401 ] && pass "requests without the token are refused (401)" || fail "token gate" "HTTP $code"
sid=$(curl -s -H "X-Access-Token: $TOKEN" "$VM_URL/envs")
[[ $sid == *'"E2B_SANDBOX_ID":"vm-sandbox"'* ]] && pass "envd read its ids from the metadata service" ||
	fail "ids from the metadata service" "$sid"

# ---- the suites ----
for t in ${VM_SUITES:-$DEFAULT_SUITES}; do
	[ -f "$t" ] || continue
	# A suite marked "# vm: opt-in" runs only when named in VM_SUITES or
	# with VM_ALL=1 (one still being brought up, kept out of make test).
	if [ -z "${VM_SUITES:-}" ] && [ -z "${VM_ALL:-}" ] && grep -q '^# vm: opt-in' "$t"; then
		echo "vm: $(basename "$t" .sh) is opt-in (VM_ALL=1 or VM_SUITES=$t runs it)"
		continue
	fi
	name=$(basename "$t" .sh)
	log="$LOGS/$LP-$name.log"
	t0=$(ms_now)
	timeout "$VM_SUITE_S" bash "$t" >"$log" 2>&1
	rc=$?
	secs=$((($(ms_now) - t0) / 1000))
	line=$(grep -a -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
	p=$(sed -n 's/.*: \([0-9]*\) passed.*/\1/p' <<<"$line")
	f=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
	p=${p:-0} f=${f:-0}
	[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
	T_PASS=$((T_PASS + p))
	T_FAIL=$((T_FAIL + f))
	echo "vm $name: $p passed, $f failed (${secs} s)"
	[ "$f" -ne 0 ] && grep -a -E '^FAIL|^not ok|Error' "$log" | head -n 30
	if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time "$HANG_S" "$VM_URL/health")" != 204 ]; then
		fail "envd answers after $name"
		break
	fi
done

# ---- clean power-off ----
t0=$(ms_now)
"$PY" scripts/vm-exec.py 'setsid sh -c "sleep 0.2; kill -TERM 1" </dev/null >/dev/null 2>&1 &' >/dev/null 2>&1
off_deadline=$((SECONDS + HANG_S))
while [ "$SECONDS" -lt "$off_deadline" ]; do kill -0 "$VM_QEMU_PID" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$VM_QEMU_PID" 2>/dev/null; then
	fail "SIGTERM to PID 1 powers the VM off" "QEMU still runs after $HANG_S s"
else
	pass "SIGTERM to PID 1: QEMU exited on its own after $(($(ms_now) - t0)) ms"
fi
grep -q 'reboot: Power down' "$VM_CONSOLE" && pass "the console shows 'reboot: Power down'" ||
	fail "reboot: Power down on the console" "$(tail -n 5 "$VM_CONSOLE")"
grep -qE 'Kernel panic|Attempted to kill init' "$VM_CONSOLE" && fail "no kernel panic" "$(grep -m2 -E 'panic|kill init' "$VM_CONSOLE")" ||
	pass "no kernel panic"
wait "$RUN_PID" 2>/dev/null
st=$?
RUN_PID=
[ "$st" = 0 ] && pass "vm-run saw the guest power off and exited 0" || fail "vm-run exit status" "$st"
mport=$(cat "$VM_MMDS_DIR/port" 2>/dev/null)
left=$( (pgrep -f "$RUN"; [ -n "$mport" ] && pgrep -f "socat STDIO TCP:127.0.0.1:$mport$") | wc -l)
[ "$left" = 0 ] && pass "nothing of the run is left (QEMU, metadata stand-in, socat)" || fail "leftover processes" "$left"

echo "boot: QEMU start to /health $VM_BOOT_MS ms, to first command $run_ms ms ($VM_ARCH, $VM_ACCEL)"
finish
