#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build/init as the command's file descriptor store and exit recorder,
# with a stand-in for envd that SIGKILLs itself: descriptors stored with
# FDSTORE=1 come back from fd 3 with LISTEN_FDS/LISTEN_FDNAMES/LISTEN_PID
# on the restart (as PID 1 of a PID namespace, and as a subreaper); a pipe
# kept only by the store delivers what its writer wrote after the crash;
# the exit status of a command that ended while the stand-in was down is
# in the init.exits ring when its pidfd is stored, and only then;
# FDSTOREREMOVE drops; fds without FDSTORE=1, messages of other processes
# and invalid names are refused. The socket is a path in a directory only
# root can enter.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
T_NAME=init_fdstore

INIT=${INIT_BIN:-build/init}
if [ ! -x "$INIT" ]; then
	fail "build/init exists" "run make"
	finish
	exit 1
fi
W=$(mktemp -d /tmp/envd-fdstore-test.XXXXXX)
UPIDS=()
cleanup() {
	for p in "${UPIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for f in "$W"/*/job.pid "$W"/*/other.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
	rm -rf "$W"
}
on_exit cleanup

cat >"$W/standin.py" <<'PY'
import json, mmap, os, signal, socket, struct, sys, time

D = sys.argv[1]
with open(D + "/starts", "a") as f:
    f.write("%d\n" % os.getpid())
n = len(open(D + "/starts").read().split())
addr = os.environ.get("NOTIFY_SOCKET", "")
sockaddr = "\0" + addr[1:] if addr.startswith("@") else addr

def send(text, fds=()):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.connect(sockaddr)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))] if fds else []
    s.sendmsg([text.encode()], anc)
    s.close()

got = {}
ok_pid = os.environ.get("LISTEN_PID") == str(os.getpid())
if ok_pid:
    names = os.environ.get("LISTEN_FDNAMES", "").split(":")
    for i in range(int(os.environ.get("LISTEN_FDS", "0"))):
        got.setdefault(names[i] if i < len(names) else "?", []).append(3 + i)
rep = {"n": n, "notify": addr, "listen_pid_ok": ok_pid, "names": sorted(got)}

def exit_of(pid, fd):
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
    magic, cap, count = struct.unpack_from("<IIQ", m, 0)
    if magic != 0x32544958:
        return None
    for i in range(count, max(0, count - cap), -1):
        rpid, st = struct.unpack_from("<ii", m, 16 + ((i - 1) % cap) * 40)
        if rpid == pid:
            return st
    return None

if n == 1:
    # A job that outlives us: it writes into a pipe whose read end only
    # the store keeps once we are gone, then exits 7.
    r, w = os.pipe()
    me = os.getpid()
    job = os.fork()
    if job == 0:
        os.setsid()
        os.close(r)
        while os.getppid() == me:
            time.sleep(0.01)
        os.write(w, b"written after the crash\n")
        os._exit(7)
    os.close(w)
    with open(D + "/job.pid", "w") as f:
        f.write(str(job))
    # Another one, which exits 9 once we are gone: its pidfd is not
    # stored, so init keeps no record of it.
    other = os.fork()
    if other == 0:
        os.setsid()
        while os.getppid() == me:
            time.sleep(0.01)
        os._exit(9)
    with open(D + "/other.pid", "w") as f:
        f.write(str(other))
    st = os.stat(os.path.dirname(addr))
    rep["dir_mode"] = "%o" % (st.st_mode & 0o7777)
    rep["dir_uid"] = st.st_uid
    send("FDSTORE=1\nFDPOLL=0\nFDNAME=job.out\n", [r])
    pfd = os.pidfd_open(job)
    send("FDSTORE=1\nFDNAME=job.pidfd\n", [pfd])
    os.close(pfd)
    g = os.open("/dev/null", os.O_RDONLY)
    send("FDSTORE=1\nFDNAME=gone\n", [g])
    send("FDSTOREREMOVE=1\nFDNAME=gone\n")
    send("FDNAME=nostore\n", [g])                # no FDSTORE=1: closed
    send("FDSTORE=1\nFDNAME=bad:name\n", [g])   # invalid name: refused
    send("FDSTORE=1\nFDNAME=init.exits\n", [g])  # init's own name
    if os.fork() == 0:                          # not the command: ignored
        send("FDSTORE=1\nFDNAME=foreign\n", [g])
        os._exit(0)
    os.wait()
    send("FDSTORE=1\nFDNAME=job.out\n", [r])     # a duplicate: dropped
    # every message is handled in order; this one last, then die
    rr, ww = os.pipe()
    send("FDSTORE=1\nFDNAME=marker\n", [rr])
    json.dump(rep, open(D + "/report.%d.json" % n, "w"))
    os.kill(os.getpid(), signal.SIGKILL)

if n == 2:
    job = int(open(D + "/job.pid").read())
    data = b""
    if "job.out" in got:
        fd = got["job.out"][0]
        while True:
            b = os.read(fd, 4096)
            if not b:
                break
            data += b
    rep["job_out"] = data.decode()
    rep["job_out_count"] = len(got.get("job.out", []))
    st = None
    if "init.exits" in got:
        fd = got["init.exits"][0]
        deadline = time.time() + float(os.environ.get("HANG_S", "300"))
        while st is None and time.time() < deadline:
            st = exit_of(job, fd)
            if st is None:
                time.sleep(0.01)
        try:
            os.write(fd, b"x")
            rep["exits_writable"] = True
        except OSError:
            rep["exits_writable"] = False
        try:
            os.ftruncate(fd, 0)
            rep["exits_truncatable"] = True
        except OSError:
            rep["exits_truncatable"] = False
    rep["job_status"] = st
    # the unwatched one: gone (reaped by init), and not in the ring
    other = int(open(D + "/other.pid").read())
    deadline = time.time() + float(os.environ.get("HANG_S", "300"))
    def gone(pid):  # reaped (kill, unlike /proc here, is in our pid namespace)
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
    while not gone(other) and time.time() < deadline:
        time.sleep(0.01)
    rep["other_reaped"] = gone(other)
    rep["other_status"] = exit_of(other, got["init.exits"][0]) if "init.exits" in got else "no ring"
    send("FDSTOREREMOVE=1\nFDNAME=job.out\n")
    send("FDSTOREREMOVE=1\nFDNAME=job.pidfd\n")
    send("FDSTOREREMOVE=1\nFDNAME=init.exits\n")  # init's own: kept
    send("FDSTOREREMOVE=1\nFDNAME=marker\n")
    json.dump(rep, open(D + "/report.%d.json" % n, "w"))
    os.kill(os.getpid(), signal.SIGKILL)

json.dump(rep, open(D + "/report.%d.json" % n, "w"))
while True:
    time.sleep(1)
PY

field() { "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if not isinstance(v,str) else v)' "$1" "$2" 2>/dev/null; }
has_report() { [ -s "$1" ]; }

# run MODE: the three starts under init (pid1: in a new PID namespace).
run() {
	local mode=$1 D=$W/$1
	mkdir -p "$D"
	if [ "$mode" = pid1 ]; then
		unshare --pid --fork --mount --propagation private "$INIT" --no-mount --grace 5 -- "$PY" "$W/standin.py" "$D" \
			>"$D/log" 2>&1 &
	else
		"$INIT" --no-mount --grace 5 -- "$PY" "$W/standin.py" "$D" >"$D/log" 2>&1 &
	fi
	local upid=$!
	UPIDS+=("$upid")
	if ! wait_for 120 has_report "$D/report.3.json"; then
		fail "$mode: three starts" "$(cat "$D/log")"
		return
	fi
	pass "$mode: the stand-in was started three times"
	expect_match "$mode: NOTIFY_SOCKET is a path in init's directory" '^/run/envd-init/notify\.[0-9]+\.[0-9a-f]{8}$' \
		"$(field "$D/report.1.json" notify)"
	expect_eq "$mode: the socket's directory is root's, mode 0700" "0 700" \
		"$(field "$D/report.1.json" dir_uid) $(field "$D/report.1.json" dir_mode)"
	expect_eq "$mode: first start: only init's exit ring is handed over" '["init.exits"]' "$(field "$D/report.1.json" names)"
	expect_eq "$mode: restart: LISTEN_PID names the new process" true "$(field "$D/report.2.json" listen_pid_ok)"
	expect_eq "$mode: restart: stored fds come back by name, refused ones do not" \
		'["init.exits", "job.out", "job.pidfd", "marker"]' "$(field "$D/report.2.json" names)"
	expect_eq "$mode: a duplicate of a stored fd is stored once" 1 "$(field "$D/report.2.json" job_out_count)"
	expect_eq "$mode: the pipe kept by the store delivers what the job wrote after the crash" \
		"written after the crash" "$(field "$D/report.2.json" job_out)"
	expect_eq "$mode: the job's exit status (7) is in the exit ring" $((7 << 8)) "$(field "$D/report.2.json" job_status)"
	expect_eq "$mode: an orphan whose pidfd was not stored was reaped" true "$(field "$D/report.2.json" other_reaped)"
	expect_eq "$mode: ... and is not in the exit ring" null "$(field "$D/report.2.json" other_status)"
	expect_eq "$mode: the exit ring cannot be written through the fd" false "$(field "$D/report.2.json" exits_writable)"
	expect_eq "$mode: the exit ring cannot be resized" false "$(field "$D/report.2.json" exits_truncatable)"
	expect_eq "$mode: FDSTOREREMOVE dropped the entries; init's own stays" '["init.exits"]' \
		"$(field "$D/report.3.json" names)"
	grep -q 'ignoring a notify message from pid' "$D/log" && pass "$mode: another process's message is refused" ||
		fail "$mode: another process's message is refused" "$(cat "$D/log")"
	grep -q 'invalid FDNAME' "$D/log" && pass "$mode: an invalid FDNAME is refused" || fail "$mode: invalid FDNAME"
	if [ "$mode" = pid1 ]; then
		kill -TERM "$(pgrep -P "$upid" | head -n1)" 2>/dev/null
	else
		kill -TERM "$upid"
	fi
	local deadline=$((SECONDS + HANG_S))
	while kill -0 "$upid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
	if kill -0 "$upid" 2>/dev/null; then fail "$mode: init stops on SIGTERM"; else pass "$mode: init stops on SIGTERM"; fi
}

run subreaper
if unshare --pid --fork --mount --propagation private true 2>/dev/null; then
	run pid1
else
	echo "# no PID namespaces here: PID 1 mode not run"
fi
finish
