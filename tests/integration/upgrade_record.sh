#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Taking over from a record in the upstream layout: the test writes its own
# .proto from the upstream field table (fields 1-8 only, none of ours),
# encodes a record with protoc-c --encode, and plays the outgoing envd: it
# starts a child with its pipes moved to descriptors 200-202 (close-on-exec
# clear), then execs envd -resume-handover in its own place, so envd is
# the child's parent exactly as after an upstream upgrade.
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
ENVD_BIN=$(readlink -f "$ENVD_BIN")
W=$(mktemp -d /tmp/envd-record.XXXXXX)
on_exit '_t_cleanup; rm -rf "$W"'

cat >"$W/upstream.proto" <<'EOF'
syntax = "proto3";
package upstream;
import "process.proto";
import "filesystem.proto";
message HandoverProc {
  uint32 pid = 1; string tag = 2; bool has_tag = 3; string cg_type = 4;
  process.ProcessConfig config = 5;
  int32 stdout_fd = 6; int32 stderr_fd = 7; int32 stdin_fd = 8; int32 tty_fd = 9;
  int64 timeout_ms = 10;
}
message HandoverExit {
  uint32 pid = 1; string tag = 2; bool has_tag = 3;
  process.ProcessEvent.EndEvent end = 4; int64 remaining_ms = 5;
}
message HandoverWatcher {
  string id = 1; string path = 2; bool recursive = 3; bool include_entry_info = 4;
  repeated filesystem.FilesystemEvent pending_events = 5;
}
message MountEntry { string path = 1; string lifecycle_id = 2; }
message ForwardedPort { string key = 1; uint32 port = 2; uint32 listener_pid = 3; uint32 family = 4; uint32 socat_pid = 5; }
message HandoverState {
  uint32 schema = 1; string from_ver = 2;
  repeated HandoverProc processes = 3; repeated HandoverExit terminated = 4;
  repeated HandoverWatcher watchers = 5; repeated MountEntry mounts = 6;
  repeated ForwardedPort forwards = 7; repeated string guest_frozen_cgroups = 8;
  string arch = 1011; // ours: the writer's architecture (absent upstream)
}
EOF
mkdir -p "$W/watched"

# launch SCHEMA [ARCH]: play the outgoing envd, then become envd; ARCH is
# written as the record's architecture (none: an upstream record).
launch() {
	ENVD_PORT=$(free_port)
	ENVD_URL="http://127.0.0.1:$ENVD_PORT"
	ENVD_LOG=$(mktemp /tmp/envd-test-log.XXXXXX)
	ENVD_LOGS+=("$ENVD_LOG")
	$PY - "$ENVD_BIN" "$ENVD_PORT" "$W" "$1" "${2:-}" >"$ENVD_LOG" 2>&1 <<'PY' &
import os, subprocess, sys
envd, port, w, schema, arch = sys.argv[1:]
r_out, w_out = os.pipe(); r_err, w_err = os.pipe(); r_in, w_in = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    os.dup2(r_in, 0); os.dup2(w_out, 1); os.dup2(w_err, 2)
    os.closerange(3, 256)
    os.execv("/bin/sh", ["sh", "-c", "echo ref-line-1; read x; echo got:$x; echo ref-err >&2; sleep 600"])
for fd in (w_out, w_err, r_in):
    os.close(fd)
# As upstream: fixed numbers from 200 up, close-on-exec clear.
os.dup2(r_out, 200); os.dup2(r_err, 201); os.dup2(w_in, 202)
for fd in (r_out, r_err, w_in):
    os.close(fd)
text = """
schema: %s
from_ver: "0.6.13"
processes { pid: %d tag: "ref" has_tag: true cg_type: "user"
  config { cmd: "sh" args: "-c" args: "echo ref-line-1; ..." }
  stdout_fd: 200 stderr_fd: 201 stdin_fd: 202 timeout_ms: 0 }
terminated { pid: 4000000 tag: "gone" has_tag: true
  end { exit_code: 3 exited: true status: "exit status 3" error: "exit status 3" } remaining_ms: 3600000 }
watchers { id: "wupstream1" path: "%s/watched" recursive: false include_entry_info: false
  pending_events { name: "pending-file" type: EVENT_TYPE_CREATE } }
mounts { path: "/mnt/none" lifecycle_id: "lc1" }
""" % (schema, pid, w)
if arch:
    text += 'arch: "%s"\n' % arch
rec = subprocess.run(["protoc-c", "-Iproto", "-I" + w, "--encode=upstream.HandoverState", w + "/upstream.proto"],
                     input=text.encode(), capture_output=True, check=True).stdout
path = w + "/envd-handover.pb"
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, rec); os.close(fd)
os.execv(envd, [envd, "-isnotfc", "-port", port, "-handover-file", path, "-verbose", "--resume-handover"])
PY
	ENVD_PID=$!
	ENVD_PIDS+=("$ENVD_PID")
	wait_for 10 curl -s -o /dev/null "$ENVD_URL/health" && return 0
	cat "$ENVD_LOG" >&2
	return 1
}

launch 1 || { fail "envd takes over from an upstream record"; finish; exit 1; }
U=$ENVD_URL
pass "envd took over from an upstream record and serves /health"
rpc() { curl -s --max-time "$HANG_S" -H 'Content-Type: application/json' -d "$2" "$U/$1"; }
expect_eq "the record is removed once read" "" "$(ls "$W/envd-handover.pb" 2>/dev/null)"
expect_eq "before /init other routes are refused" '{"code":401,"message":"envd not initialized"}' \
	"$(curl -s "$U/envs" | tr -d '\n')"
hdrs=$(curl -s -D - -o /dev/null -X POST -d '{}' "$U/init" | tr -d '\r')
expect_match "/init is 204" 'HTTP/1.1 204' "$hdrs"
expect_match "/init reports what was taken over" \
	'X-Envd-Handover: \{"failed":false,"procs":1,"procs_failed":0,"retained":1,"retained_failed":0,"watchers":1,"watchers_failed":0' "$hdrs"

list=$(rpc process.Process/List '{}')
expect_match "adopted process listed with its tag and config" '"cmd":"sh".*"tag":"ref"' "$list"
pid=$(grep -o '"pid":[0-9]*' <<<"$list" | head -1 | grep -o '[0-9]*')

out=$($PY - "$U" <<'PY'
import os, sys, json, base64, threading, time, urllib.request
sys.path.insert(0, "tests/integration")
from upgrade_probe import stream, data_of
u = sys.argv[1]
hang = int(os.environ.get("HANG_S", "300"))
res = {}
def reader():
    res["ev"] = stream(u, "Connect", {"process": {"tag": "ref"}, "replayFrom": "0"}, "", hang,
                       lambda ev: b"got:hello" in b"".join(d for _, d in data_of(ev)) and
                       b"ref-err" in b"".join(d for _, d in data_of(ev, "stderr")))
t = threading.Thread(target=reader); t.start(); time.sleep(0.3)
body = json.dumps({"process": {"tag": "ref"}, "input": {"stdin": base64.b64encode(b"hello\n").decode()}}).encode()
urllib.request.urlopen(urllib.request.Request(u + "/process.Process/SendInput", data=body,
                       headers={"Content-Type": "application/json"}), timeout=hang).read()
t.join()
ev = res["ev"]
print(b"".join(d for _, d in data_of(ev)).decode().replace("\n", "|"), b"".join(d for _, d in data_of(ev, "stderr")).decode().strip())
PY
)
expect_eq "inherited stdout (replayed from 0), stdin and stderr work" "ref-line-1|got:hello| ref-err" "$out"

ev=$(rpc filesystem.Filesystem/GetWatcherEvents '{"watcherId":"wupstream1"}')
expect_match "watcher returns its pending event" '"name":"pending-file"' "$ev"
echo x >"$W/watched/new-file"
ev=$(rpc filesystem.Filesystem/GetWatcherEvents '{"watcherId":"wupstream1"}')
expect_match "re-armed watcher reports new events" '"name":"new-file"' "$ev"

ret=$($PY - "$U" <<'PY'
import os, sys
sys.path.insert(0, "tests/integration")
from upgrade_probe import stream
ev = stream(sys.argv[1], "Connect", {"process": {"tag": "gone"}}, "", int(os.environ.get("HANG_S", "300")))
print([m.get("event", {}).get("end", {}).get("exitCode") for f, m in ev if "end" in m.get("event", {})])
PY
)
expect_eq "retained exit answers Connect with its end event" "[3]" "$ret"

rpc process.Process/SendSignal '{"process":{"tag":"ref"},"signal":"SIGNAL_SIGKILL"}' >/dev/null
gone=no
unlisted() { ! rpc process.Process/List '{}' | grep -q "\"pid\":$pid"; }
wait_for 5 unlisted && gone=yes
expect_eq "the adopted child is reaped by the new image" yes "$gone"
check "no zombie left" test -z "$(ps -o stat= --ppid "$ENVD_PID" | grep Z)"

# A record from a newer schema is refused, and says so at /init.
launch 3 || { fail "envd starts with a newer-schema record"; finish; exit 1; }
U=$ENVD_URL
hdrs=$(curl -s -D - -o /dev/null -X POST -d '{}' "$U/init" | tr -d '\r')
expect_match "newer schema: hand-over reported failed" 'X-Envd-Handover: \{"failed":true' "$hdrs"
check "the inherited descriptors were closed, not leaked" test ! -e "/proc/$ENVD_PID/fd/200" -a ! -e "/proc/$ENVD_PID/fd/202"
# A record written by an image of another architecture is refused by name.
launch 1 riscv64 || { fail "envd starts with a record of another architecture"; finish; exit 1; }
U=$ENVD_URL
hdrs=$(curl -s -D - -o /dev/null -X POST -d '{}' "$U/init" | tr -d '\r')
expect_match "another architecture: hand-over reported failed" 'X-Envd-Handover: \{"failed":true' "$hdrs"
expect_match "the log names both architectures" 'record written for riscv64, this image is (amd64|arm64)' "$(cat "$ENVD_LOG")"
check "its inherited descriptors were closed" test ! -e "/proc/$ENVD_PID/fd/200" -a ! -e "/proc/$ENVD_PID/fd/202"
# No record at all, and an inherited listener on envd's own port: the
# descriptor is closed so envd can listen, and /init reports the failure.
ENVD_PORT=$(free_port)
U="http://127.0.0.1:$ENVD_PORT"
ENVD_LOG=$(mktemp /tmp/envd-test-log.XXXXXX)
ENVD_LOGS+=("$ENVD_LOG")
$PY - "$ENVD_BIN" "$ENVD_PORT" "$W" >"$ENVD_LOG" 2>&1 <<'PY' &
import os, socket, sys
envd, port, w = sys.argv[1:]
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(port)))
s.listen(16)
s.set_inheritable(True)
os.execv(envd, [envd, "-isnotfc", "-port", port, "-handover-file", w + "/absent.pb", "--resume-handover"])
PY
NR_PID=$!
ENVD_PIDS+=("$NR_PID")
check "without a record envd still comes up on its port" wait_for 30 curl -s -o /dev/null "$U/health"
hdrs=$(curl -s -D - -o /dev/null -X POST -d '{}' "$U/init" | tr -d '\r')
expect_match "and reports the failed hand-over" 'X-Envd-Handover: \{"failed":true' "$hdrs"

# Its child was not taken over; end it (its output pipe is envd's fd 200).
c=$(ps -o pid= --ppid "$ENVD_PID" | head -1 | tr -d " ")
[ -n "$c" ] && kill -- "-$c" 2>/dev/null
finish
