#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boot the sandbox image (scripts/vm-image.sh) as a QEMU microVM with our
# init as PID 1 and envd reachable from the host, then stay in the
# foreground until killed (or until the guest powers off) and clean up.
#
#   VM_PORT=49983 scripts/vm-run.sh
#
# The guest is 169.254.0.21 on QEMU's user-mode network (slirp, restricted:
# the guest reaches nothing but what is forwarded). envd's port is forwarded
# to http://127.0.0.1:$VM_PORT; a metadata stand-in (scripts/vm-mmds.py) on
# the host is the guest's 169.254.169.254:80. The root disk is used with
# snapshot=on, so every boot starts from the same image.
#
# Environment:
#   ARCH             amd64 (default: build/vm, QEMU microvm) or arm64
#                    (build/arm64/vm, qemu-system-aarch64 -M virt; software
#                    emulation on an x86-64 host)
#   VM_PORT          host port for envd (default 49983)
#   VM_ACCESS_TOKEN  the metadata service hands out its SHA-512 (as the
#                    orchestrator does), so /init may install that token
#   VM_LOG_COLLECTOR on (default): the metadata service hands out a log
#                    collector address (its own /logs), so envd ships every
#                    log line there, one POST each, as on the platform;
#                    off: no address. Each of those connections makes QEMU
#                    start a socat (guestfwd), which stalls the emulated
#                    guest: measurements of envd itself turn it off
#   VM_CPUS, VM_MEM  guest CPUs (2) and MiB of memory (512: the platform's
#                    default sandbox size)
#   VM_ACCEL         kvm or tcg (default: kvm when /dev/kvm works and the
#                    guest is the host's architecture, else tcg)
#   VM_TCG_THREAD    under tcg: multi (default), a host thread per guest
#                    CPU; single: one thread runs them all in turn, which
#                    the guest spends less on where the host's CPUs are
#                    busy (make test: docs/vm.md)
#   VM_BOOT_TIMEOUT  seconds to wait for the first /health (default 300)
#   VM_PARENT_PID    stop the VM when this process is gone (for scripts)
#   VM_HOST_PORTS    ports of 169.254.169.254 that reach a service on the host
#                    (default "22 2049"): each guest connection to one runs
#                    VM_RUN_DIR/host/PORT (any executable a test puts
#                    there) with the connection as its stdin and stdout;
#                    without that file the connection is closed
#   VM_RUN_DIR       where to keep the run's state (default: a fresh
#                    build/vm/runs/<pid>); VM_RUN_DIR/env is written once
#                    envd answers, for scripts to source
#
# slirp's host forwarding listens with a backlog of 1: sequential clients are
# fine, a burst of concurrent connections stalls for seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

PORT=${VM_PORT:-49983}
CPUS=${VM_CPUS:-2}
MEM=${VM_MEM:-512}
GUEST_IP=169.254.0.21
HOST_IP=169.254.0.22
ARCH=${ARCH:-amd64}
case $ARCH in
amd64) ABUILD=build QEMU=qemu-system-x86_64 HOST_MACH=x86_64 ;;
arm64) ABUILD=build/arm64 QEMU=qemu-system-aarch64 HOST_MACH=aarch64 ;;
*) echo "vm: unknown ARCH $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac
IMG=$ABUILD/vm
RUNS=$REPO/$ABUILD/vm/runs

log() { echo "vm: $*" >&2; }
ms_now() { date +%s%3N; }

[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
for t in $QEMU socat curl; do
	command -v "$t" >/dev/null || { log "$t is missing (scripts/setup.sh installs it)"; exit 1; }
done
for f in vmlinuz initramfs.gz rootfs.ext4; do
	[ -s "$IMG/$f" ] || { log "$IMG/$f is missing: run make vm-image"; exit 1; }
done

# pid_in DIR PIDFILE: the pid recorded in DIR/PIDFILE if that process
# still runs with DIR on its command line (a recycled pid is left alone).
pid_in() {
	local pid
	pid=$(cat "$1/$2" 2>/dev/null) || return 1
	[ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$1" && echo "$pid"
}

# Remove what an interrupted run left: its owner is gone but QEMU or the
# stand-in may still run, holding ports.
clean_stale() {
	local d owner p
	for d in "$RUNS"/*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		owner=$(cat "$d/owner" 2>/dev/null)
		[ -n "$owner" ] && kill -0 "$owner" 2>/dev/null && continue
		for p in qemu.pid mmds.pid; do
			p=$(pid_in "$d" "$p") && kill -KILL "$p" 2>/dev/null
		done
		rm -rf "$d"
	done
}

mkdir -p "$RUNS"
clean_stale
RUN=${VM_RUN_DIR:-$RUNS/$$}
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)
echo $$ >"$RUN/owner"
QEMU_PID=
MMDS_PID=

cleanup() {
	trap - EXIT INT TERM
	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill -TERM "$QEMU_PID" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$QEMU_PID" 2>/dev/null
	fi
	[ -n "$MMDS_PID" ] && kill -KILL "$MMDS_PID" 2>/dev/null
	wait 2>/dev/null
	# Keep the console of a run whose state was asked for; remove ours.
	if [ -n "${VM_RUN_DIR:-}" ]; then
		rm -f "$RUN/monitor.sock" "$RUN/owner"
	else
		rm -rf "$RUN"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/" 2>/dev/null ||
	ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then
	log "port $PORT is in use (VM_PORT=... picks another)"
	exit 1
fi

# ---- metadata stand-in ----
mkdir -p "$RUN/mmds"
[ "${VM_LOG_COLLECTOR:-on}" = off ] && : >"$RUN/mmds/address"
if [ -n "${VM_ACCESS_TOKEN:-}" ]; then
	printf '%s' "$VM_ACCESS_TOKEN" | sha512sum | cut -d' ' -f1 >"$RUN/mmds/token_hash"
fi
/usr/bin/python3 "$REPO/scripts/vm-mmds.py" "$RUN/mmds" 2>>"$RUN/mmds/stderr" &
MMDS_PID=$!
echo "$MMDS_PID" >"$RUN/mmds.pid"
# Waits here end on the event; the deadlines (HANG_S, as in tests/common.sh)
# only catch a hang, on a host far slower than a loaded one.
HANG_S=${HANG_S:-300}
mmds_deadline=$((SECONDS + HANG_S))
while [ "$SECONDS" -lt "$mmds_deadline" ]; do
	[ -s "$RUN/mmds/port" ] && break
	kill -0 "$MMDS_PID" 2>/dev/null || break
	sleep 0.05
done
MMDS_PORT=$(cat "$RUN/mmds/port" 2>/dev/null) || { log "the metadata stand-in did not start"; exit 1; }

# ---- accelerator ----
# /dev/kvm can exist where KVM does not work (no vmx/svm exposed to this
# machine): such a guest never runs, so look for the CPU flag too.
accel=${VM_ACCEL:-}
if [ -z "$accel" ]; then
	if [ "$(uname -m)" = "$HOST_MACH" ] && [ -w /dev/kvm ] &&
		{ [ "$ARCH" != amd64 ] || grep -qwE 'vmx|svm' /proc/cpuinfo; }; then
		accel=kvm
	else
		accel=tcg
	fi
fi
TCG_THREAD=${VM_TCG_THREAD:-multi}
case $TCG_THREAD in multi | single) ;; *) log "VM_TCG_THREAD=$TCG_THREAD: multi or single"; exit 2 ;; esac
append="root=/dev/vda init=/usr/sbin/envd-init panic=-1 vm.ip=$GUEST_IP/30 vm.gw=$HOST_IP"
if [ "$ARCH" = amd64 ]; then
	machine=(-M microvm,rtc=on)
	case $accel in
	kvm) accel_opts=(-accel kvm -cpu host) ;;
	*) accel=tcg accel_opts=(-accel tcg,thread=$TCG_THREAD -cpu max) ;;
	esac
	append="console=ttyS0 $append"
	# Under TCG the kernel's TSC calibration sometimes never finishes on
	# microvm; telling it the host's TSC rate skips the calibration.
	khz=$(awk -F: '/^cpu MHz/ {printf "%d", $2 * 1000; exit}' /proc/cpuinfo)
	[ -n "$khz" ] && append+=" tsc_early_khz=$khz"
	# With more than one vCPU under TCG the kernel finds the TSCs "unsynchronized"
	# and falls back to jiffies, which lose time whenever the host is busy (the
	# guest clock fell 3 minutes behind in 20 on a loaded host); QEMU's TSC follows the host.
	append+=" tsc=reliable"
else
	# virt: PL011 console, PL031 clock, virtio-mmio slots for the devices
	# below; the architected timer needs no calibration. Under TCG a
	# cortex-a57 rather than "max": max emulates pointer authentication,
	# which makes the guest 2-3 times slower.
	machine=(-M virt)
	case $accel in
	kvm) accel_opts=(-accel kvm -cpu host) ;;
	*) accel=tcg accel_opts=(-accel tcg,thread=$TCG_THREAD -cpu cortex-a57) ;;
	esac
	append="console=ttyAMA0 $append"
	# An emulator does not speculate, so the kernel's speculation
	# mitigations only cost there, and on arm64 the costly one is on:
	# KASLR forces kernel page-table isolation, a page-table switch (and
	# a flush of QEMU's TLB) on every entry to the kernel. Without them
	# make test's part of the arm64 VM took 23 % less CPU (100 to 76
	# CPU-seconds alone). (The amd64 guest has no page-table isolation
	# under TCG; the same option changed nothing measurable there.)
	[ "$accel" = tcg ] && append+=" mitigations=off nokaslr"
fi
append+=" ${VM_APPEND:-}"

netdev="user,id=net0,net=169.254.0.0/16,host=$HOST_IP,dhcpstart=$GUEST_IP,restrict=on"
netdev+=",hostfwd=tcp:127.0.0.1:$PORT-$GUEST_IP:49983"
netdev+=",guestfwd=tcp:169.254.169.254:80-cmd:socat STDIO TCP:127.0.0.1:$MMDS_PORT"
# Servers the tests run on the host (an SFTP server for a FUSE mount, an
# NFS server), reached from the guest the way a sandbox reaches a storage
# endpoint: over the network, with the host's process able to stop answering.
mkdir -p "$RUN/host"
for p in ${VM_HOST_PORTS-22 2049}; do
	netdev+=",guestfwd=tcp:169.254.169.254:$p-cmd:$RUN/host/$p"
done

start_qemu() {
	t0=$(ms_now)
	# A session of its own: Ctrl-C reaches this script, which stops QEMU
	# in order, instead of QEMU quitting under it.
	setsid $QEMU -name envd-vm "${machine[@]}" "${accel_opts[@]}" -smp "$CPUS" -m "$MEM" \
		-nodefaults -no-user-config -nographic -no-reboot \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.gz" -append "$append" \
		-serial "file:$RUN/console.log" \
		-monitor "unix:$RUN/monitor.sock,server=on,wait=off" \
		-pidfile "$RUN/qemu.pid" \
		-drive "id=root,file=$IMG/rootfs.ext4,format=raw,if=none,snapshot=on" \
		-device virtio-blk-device,drive=root \
		-netdev "$netdev" -device virtio-net-device,netdev=net0 \
		-device virtio-rng-device \
		>"$RUN/qemu.log" 2>&1 &
	QEMU_PID=$!
	echo "$QEMU_PID" >"$RUN/qemu.pid"
}

URL="http://127.0.0.1:$PORT"
boot_ms=
for attempt in 1 2 3 4 5; do
	start_qemu
	boot_deadline=$((SECONDS + ${VM_BOOT_TIMEOUT:-$((2 * HANG_S))}))
	while [ "$SECONDS" -lt "$boot_deadline" ]; do
		kill -0 "$QEMU_PID" 2>/dev/null || break
		if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$URL/health")" = 204 ]; then
			boot_ms=$(($(ms_now) - t0))
			break
		fi
		sleep 0.05
	done
	[ -n "$boot_ms" ] && break
	# The port can be taken for a moment by another program's outgoing
	# connection (it is in the ephemeral range): try again.
	grep -q 'Could not set up host forwarding' "$RUN/qemu.log" || break
	log "port $PORT is busy; retrying"
	wait "$QEMU_PID" 2>/dev/null
	QEMU_PID=
	sleep 1
done
if [ -z "$boot_ms" ]; then
	log "envd did not answer; last console lines:"
	tail -n 30 "$RUN/console.log" >&2 2>/dev/null
	cat "$RUN/qemu.log" >&2
	exit 1
fi
cat >"$RUN/env" <<EOF
VM_URL=$URL
VM_PORT=$PORT
VM_RUN_DIR=$RUN
VM_CONSOLE=$RUN/console.log
VM_MONITOR=$RUN/monitor.sock
VM_MMDS_DIR=$RUN/mmds
VM_QEMU_PID=$QEMU_PID
VM_ACCEL=$accel
VM_ARCH=$ARCH
VM_GUEST_IP=$GUEST_IP
VM_T0_MS=$t0
VM_BOOT_MS=$boot_ms
EOF
log "envd at $URL ($ARCH, $accel, ${CPUS} CPUs, ${MEM} MiB): QEMU start to first /health in $boot_ms ms"
log "console: $RUN/console.log; monitor: $RUN/monitor.sock; Ctrl-C stops the VM"

# A script that started us (VM_PARENT_PID) and died without stopping us
# must not leave the VM running.
while kill -0 "$QEMU_PID" 2>/dev/null; do
	if [ -n "${VM_PARENT_PID:-}" ] && ! kill -0 "$VM_PARENT_PID" 2>/dev/null; then
		log "process $VM_PARENT_PID that started the VM is gone; stopping"
		exit 1
	fi
	sleep 0.5
done
wait "$QEMU_PID"
st=$?
QEMU_PID=
if grep -q 'reboot: Power down' "$RUN/console.log"; then
	log "the guest powered off"
	exit 0
fi
log "QEMU exited with status $st"
exit 1
