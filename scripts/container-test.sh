#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boot the sandbox image without Docker and test envd in it as the
# platform would.
#
# The Debian rootfs (scripts/rootfs.sh) is the lower layer of an overlay,
# so runs never change the cached image. Our init is PID 1 in new PID,
# mount, UTS, IPC and network namespaces, chrooted into the overlay. A veth
# pair joins the sandbox (169.254.0.21, as in Firecracker) and the host
# (169.254.0.22). envd runs with -isnotfc, like the reference debug image.
#
# The SDK tests (tests/sdk/*.test.mjs and tests/container/*.test.mjs) send
# their traffic from the host network namespace through the veth to
# http://169.254.0.21:49983 after POST /init {"defaultUser":"user"}. The
# node process sees the sandbox's filesystem and PIDs (the tests compare
# what the SDK reports with the machine it runs on), using the host's node
# binary, bind-mounted read-only.
#
# Prints "container: N passed, N failed" last. Everything it creates (the
# namespaces, the veth, the overlay, the processes) is removed on exit,
# also after a failure or an interrupt.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

SBX_IP=169.254.0.21
HOST_IP=169.254.0.22
PORT=49983
URL="http://$SBX_IP:$PORT"
ROOTFS=${ROOTFS:-build/rootfs}
T_PASS=0
T_FAIL=0

pass() { T_PASS=$((T_PASS + 1)); echo "ok   - $1"; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "FAIL - $1${2:+: $2}"; }
finish() {
	echo "container: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
	exit $?
}
skip() {
	echo "SKIP: $1"
	echo "container: 0 passed, 0 failed"
	exit 0
}
ms_now() { date +%s%3N; }
# until_ms MS CMD...: run CMD until it succeeds (true) or MS (at least
# HANG_S, as in tests/common.sh) have passed (false). Waits are deadlines
# sized for a machine ten times slower than a loaded one; the times it
# prints are figures, not verdicts.
HANG_S=${HANG_S:-300}
until_ms() {
	local ms=$1
	[ "$ms" -ge $((HANG_S * 1000)) ] || ms=$((HANG_S * 1000))
	local end=$(($(ms_now) + ms))
	shift
	until "$@"; do
		[ "$(ms_now)" -ge "$end" ] && return 1
		sleep 0.005
	done
}

[ "$(id -u)" = 0 ] || skip "the container test needs root (namespaces, veth, mounts)"
unshare --pid --fork --mount --uts --ipc --net true 2>/dev/null || skip "namespaces are not available here"
command -v ip >/dev/null || skip "iproute2 is missing"

# The SDK tests need the e2b package (scripts/run-tests.sh installs it only
# later, for its own SDK pass).
# The SDK clients (its suites report their absence themselves).
bash scripts/npm-setup.sh || true

if ! bash scripts/rootfs.sh "$ROOTFS"; then
	fail "build the Debian rootfs"
	finish
fi

TAG=$$
NS=envd-ct-$TAG
VH=ve${TAG}h
VS=ve${TAG}s
RUN=$(mktemp -d "$REPO/build/container-run.XXXXXX")
MERGED=$RUN/merged
BOOT_PID=
INIT_PID=

cleanup() {
	trap - EXIT INT TERM
	if [ -n "$INIT_PID" ] && kill -0 "$INIT_PID" 2>/dev/null; then
		kill -TERM "$INIT_PID" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$INIT_PID" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$INIT_PID" 2>/dev/null
	fi
	[ -n "$BOOT_PID" ] && { kill -KILL "$BOOT_PID" 2>/dev/null; wait "$BOOT_PID" 2>/dev/null; }
	# The mounts live in the container's mount namespace and vanish with
	# it; this catches anything that leaked into ours.
	findmnt -rn -o TARGET | grep -F "$RUN" | sort -r | while read -r m; do umount -l "$m"; done
	ip netns pids "$NS" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	ip link del "$VH" 2>/dev/null
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The host address and the route to the sandbox are the machine's: one
# container test at a time. Another one (from any checkout) is waited for,
# not failed on.
exec 9>/run/lock/envd-container-test.lock && flock -w 600 9
host_ip_free() { ! ip -br addr | grep -q "$HOST_IP/"; }
for _ in $(seq 1 600); do host_ip_free && break; sleep 1; done
if ! host_ip_free; then
	fail "host address $HOST_IP is free" "another container test held it for 10 min"
	finish
fi

# ---- network: netns with the sandbox end of a veth ----
ip netns add "$NS" &&
	ip link add "$VH" type veth peer name "$VS" &&
	ip link set "$VS" netns "$NS" &&
	ip addr add "$HOST_IP/30" dev "$VH" &&
	ip link set "$VH" up &&
	ip -n "$NS" link set lo up &&
	ip -n "$NS" addr add "$SBX_IP/30" dev "$VS" &&
	ip -n "$NS" link set "$VS" up ||
	{ fail "set up the veth pair"; finish; }

# ---- boot ----
mkdir -p "$RUN/upper" "$RUN/work" "$MERGED"
# tests/container imports the SDK from tests/sdk; the tree (and clients/) is mounted read-only.
[ -e tests/container/node_modules ] || ln -sfn ../sdk/node_modules tests/container/node_modules
NODE=$(command -v node || true)
cat >"$RUN/boot.sh" <<EOF
set -e
mount -t overlay envd-rootfs -o lowerdir=$REPO/$ROOTFS,upperdir=$RUN/upper,workdir=$RUN/work $MERGED
mkdir -p $MERGED/opt/envd-tests
mount --bind $REPO/tests $MERGED/opt/envd-tests
mount -o remount,bind,ro $MERGED/opt/envd-tests
# The SDK suites import the JS clients beside the tests (../../clients/js).
mkdir -p $MERGED/opt/clients
mount --bind $REPO/clients $MERGED/opt/clients
mount -o remount,bind,ro $MERGED/opt/clients
if [ -n "$NODE" ]; then
	mkdir -p $MERGED/usr/local/bin
	touch $MERGED/usr/local/bin/node
	mount --bind $NODE $MERGED/usr/local/bin/node
	mount -o remount,bind,ro $MERGED/usr/local/bin/node
fi
exec unshare --pid --fork --uts --ipc --root=$MERGED --wd=/ \
	/usr/sbin/envd-init --grace 3 -- /usr/bin/envd -isnotfc -port $PORT
EOF
t0=$(ms_now)
ip netns exec "$NS" unshare --mount --propagation private bash "$RUN/boot.sh" >"$RUN/console.log" 2>&1 &
BOOT_PID=$!

# init is the child of the unshare that forks into the new PID namespace
find_init() {
	for p in $(pgrep -P "$BOOT_PID" 2>/dev/null); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = envd-init ] && INIT_PID=$p
	done
	[ -n "$INIT_PID" ]
}
until_ms 60000 find_init
[ -n "$INIT_PID" ] && pass "init started as the container's PID 1 (host pid $INIT_PID)" ||
	{ fail "init started"; cat "$RUN/console.log"; finish; }

healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/health")" = 204 ]; }
boot_ms=
until_ms 60000 healthy && boot_ms=$(($(ms_now) - t0))
[ -n "$boot_ms" ] && pass "boot to first /health from the host: $boot_ms ms" ||
	{ fail "envd answers /health on $SBX_IP"; cat "$RUN/console.log"; finish; }

code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-d '{"defaultUser":"user"}' "$URL/init")
[ "$code" = 204 ] && pass "POST /init {defaultUser: user}" || fail "POST /init" "HTTP $code"

# in_sbx CMD...: run a command inside the sandbox (all its namespaces).
in_sbx() { nsenter -t "$INIT_PID" -m -u -i -n -p -r -w "$@"; }

expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected [$2] got [$3]"; fi; }

expect_eq "PID 1 in the sandbox is envd-init" envd-init "$(in_sbx cat /proc/1/comm)"
expect_eq "hostname from the image's /etc/hostname" sandbox "$(in_sbx hostname)"
mounts=$(in_sbx sh -c 'for m in /proc /sys /dev /dev/pts /dev/shm /run; do grep -q " $m " /proc/self/mounts && echo $m; done' | tr '\n' ' ')
expect_eq "init mounted the API filesystems" "/proc /sys /dev /dev/pts /dev/shm /run " "$mounts"
expect_eq "/tmp is writable by user" ok "$(in_sbx su -s /bin/sh user -c 'touch /tmp/.w && rm /tmp/.w && echo ok')"

# ---- SDK tests, from the host network namespace ----
node_tests() { # node_tests LABEL FILES...: run node's test runner in the sandbox's view
	local label=$1
	shift
	local log="$RUN/$label.log"
	nsenter -t "$INIT_PID" -m -p -r sh -c "cd /opt/envd-tests/sdk && exec env \
		PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
		E2B_DEBUG=true E2B_SANDBOX_URL=$URL ENVD_URL=$URL ENVD_PORT=$PORT \
		ENVD_BIN=/usr/bin/envd ENVD_IN_CONTAINER=1 HANG_S=$HANG_S \
		timeout 3600 node --test --test-concurrency=1 $*" >"$log" 2>&1
	local rc=$?
	mkdir -p build/test-logs
	cp "$log" "build/test-logs/container-$label.log"
	local p f
	p=$(grep -a -E '^# pass ' "$log" | tail -n1 | awk '{print $3}')
	f=$(grep -a -E '^# fail ' "$log" | tail -n1 | awk '{print $3}')
	p=${p:-0}
	f=${f:-0}
	[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
	T_PASS=$((T_PASS + p))
	T_FAIL=$((T_FAIL + f))
	echo "sdk $label: $p passed, $f failed"
	if [ "$f" -ne 0 ]; then
		grep -a -E '^not ok|^# Subtest|Error|error:|expected|actual' "$log" | head -n 60
	fi
}

if [ -z "$NODE" ]; then
	fail "node is installed on the host" "the SDK tests need it"
else
	sdk_files=$(cd tests/sdk && ls ./*.test.mjs 2>/dev/null | tr '\n' ' ')
	[ -n "$sdk_files" ] && node_tests sdk $sdk_files
	ct_files=$(cd tests && ls container/*.test.mjs 2>/dev/null | sed 's|^|../|' | tr '\n' ' ')
	[ -n "$ct_files" ] && node_tests container $ct_files
fi

# ---- port forwarding: detection latency and relay throughput ----
# A 128 MiB file served by python's http.server twice: bound to the sandbox
# address (a direct connection) and to 127.0.0.1 (through envd's relay).
in_sbx sh -c 'head -c 134217728 /dev/zero >/tmp/pf-big'
in_sbx setsid python3 -m http.server 4142 --bind "$SBX_IP" --directory /tmp >/dev/null 2>&1 &
t_listen=$(ms_now)
in_sbx setsid python3 -m http.server 4143 --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1 &
fwd_ms=
until_ms 60000 curl -s -o /dev/null --max-time 5 "http://$SBX_IP:4143/" && fwd_ms=$(($(ms_now) - t_listen))
[ -n "$fwd_ms" ] && pass "python3 -m http.server on 127.0.0.1:4143 reachable from the host on $SBX_IP:4143 after $fwd_ms ms (incl. python start-up)" ||
	fail "loopback http.server reachable from the host"
until_ms 60000 curl -s -o /dev/null --max-time 5 "http://$SBX_IP:4142/"
speed() { curl -s -o /dev/null -w '%{speed_download}' "$1" | awk '{printf "%d", $1 / 1048576}'; }
direct=$(speed "http://$SBX_IP:4142/pf-big")
relayed=$(speed "http://$SBX_IP:4143/pf-big")
if [ "${relayed:-0}" -gt 0 ] && [ "${direct:-0}" -gt 0 ]; then
	pass "128 MiB over the veth: direct $direct MiB/s, through envd's relay $relayed MiB/s"
else
	fail "throughput" "direct [$direct] relayed [$relayed]"
fi
# Detection latency alone, with the probe inside the sandbox's network.
out=$(in_sbx python3 /opt/envd-tests/integration/portfwd_probe.py latency "$SBX_IP" 4144 10 2>&1) &&
	pass "in-sandbox listener detection: $out" || fail "detection latency in the sandbox" "$out"

# ---- envd restart under init: user processes survive ----
in_sbx setsid sleep 601.$TAG </dev/null >/dev/null 2>&1 &
survivor=
find_survivor() { survivor=$(pgrep -f "^sleep 601.$TAG$" -n); [ -n "$survivor" ]; }
until_ms 60000 find_survivor
envd_pid=$(pgrep -P "$INIT_PID" -x envd)
if [ -n "$envd_pid" ]; then
	kill -KILL "$envd_pid"
	t0=$(ms_now)
	back=
	until_ms 60000 healthy && back=$(($(ms_now) - t0))
	[ -n "$back" ] && pass "envd killed with SIGKILL is restarted by init: /health again after $back ms" ||
		fail "envd restarted by init"
	new_pid=$(pgrep -P "$INIT_PID" -x envd)
	[ -n "$new_pid" ] && [ "$new_pid" != "$envd_pid" ] && pass "a new envd runs under init" || fail "new envd under init"
	[ -n "$survivor" ] && kill -0 "$survivor" 2>/dev/null && pass "a process started before the restart survives it" ||
		fail "process survives envd restart"
else
	fail "find envd under init"
fi
zombies_of_init() { ps -e -o stat=,ppid= | awk -v p="$INIT_PID" '$1 ~ /^Z/ && $2 == p' | wc -l; }
no_zombies() { [ "$(zombies_of_init)" = 0 ]; }
# A process that just exited is reaped on init's next turn. A moment with
# none is the proof (a zombie init left would stay); a count taken after
# it could catch the next exit between exit and reaping.
until_ms 30000 no_zombies && pass "no zombies under init" ||
	fail "no zombies under init" "$(zombies_of_init) left"

# ---- shutdown ----
t0=$(ms_now)
kill -TERM "$INIT_PID"
wait "$BOOT_PID" 2>/dev/null
st=$?
stop_ms=$(($(ms_now) - t0))
BOOT_PID=
INIT_PID=
# envd has no SIGTERM handler: killed by TERM, init exits 128+15.
if [ "$st" = 143 ] || [ "$st" = 0 ]; then
	pass "SIGTERM shuts the container down in $stop_ms ms, exit status $st"
else
	fail "container shutdown" "status $st after $stop_ms ms"
	tail -n 20 "$RUN/console.log"
fi
grep -q 'init: stopped' "$RUN/console.log" && pass "init logged an orderly stop" || fail "init stop log"
left=$(findmnt -rn -o TARGET | grep -cF "$RUN")
expect_eq "no mounts left behind" 0 "$left"
left=$(ip netns pids "$NS" 2>/dev/null | wc -l)
expect_eq "no processes left in the sandbox network namespace" 0 "$left"

echo "boot to /health: ${boot_ms} ms; port-forward reachability: ${fwd_ms} ms; relay: ${relayed} MiB/s vs direct ${direct} MiB/s"
finish
