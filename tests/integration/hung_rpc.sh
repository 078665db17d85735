#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The filesystem and process RPCs against a hung FUSE mount (a bindfs whose
# daemon is stopped): each call on it ends with deadline_exceeded at its
# deadline (the client's Connect-Timeout-Ms, else -fs-timeout) while the
# rest of envd keeps answering, a Start of a command whose binary lives on
# the mount included; after SIGCONT everything on the mount works again.
# A recursive watcher whose new subdirectory hangs in its worker job holds
# back only its own events. Then envd's fds and threads are back, a Remove
# on a mount that is slow but moving outlives -fs-timeout and succeeds, and
# a 100 000-entry ListDir is answered in full while /health keeps answering.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/integration/hungfs_lib.sh

hungfs_require
T=$(mktemp -d /tmp/envd-hungrpc.XXXXXX)
M=$T/mnt
on_exit 'hungfs_cleanup; rm -rf "$T"; _t_cleanup'
hungfs_mount "$M" || exit 1
mkdir -p "$T/big" "$T/else"
# Commands on the mount under names the kernel has not looked up yet, so
# their exec asks the (stopped) daemon.
mkdir -p "$HUNGFS_BACK/hb"
cp /bin/true "$HUNGFS_BACK/hb/true1"
cp /bin/true "$HUNGFS_BACK/hb/true2"
envd_start -fs-timeout 2 || exit 1

"$PY" - "$ENVD_URL" "$ENVD_PID" "$M" "$T" "$HUNGFS_PID" "$HUNGFS_BACK" >"$T/out" 2>&1 <<'PY'
import http.client, json, os, signal, struct, sys, threading, time, urllib.parse

url, envd_pid, M, T, fuse_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
HUNGFS_BACK = sys.argv[6]
u = urllib.parse.urlparse(url)
HANG = 300  # seconds: a call that takes this long is a hang, whatever the machine
CORE = 4    # WORKER_THREADS_CORE

def ok(name, cond, detail=""):
    print(("ok   - " if cond else "FAIL - ") + name + ("" if cond or not detail else ": " + str(detail)), flush=True)

def post(path, body, ctype, headers=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    t0 = time.monotonic()
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, (time.monotonic() - t0) * 1000

def unary(svc, method, msg, timeout_ms=None):
    h = {"Connect-Timeout-Ms": str(timeout_ms)} if timeout_ms else {}
    st, data, ms = post("/%s/%s" % (svc, method), json.dumps(msg), "application/json", h)
    try:
        d = json.loads(data) if data else {}
    except ValueError:
        d = {"raw": data[:200]}
    return st, d, ms

def fs(method, msg, timeout_ms=None):
    return unary("filesystem.Filesystem", method, msg, timeout_ms)

def stream(svc, method, msg, timeout_ms=None, until=None):
    """Connect server stream; returns (messages, end error or None, ms)."""
    b = json.dumps(msg).encode()
    h = {"Connect-Timeout-Ms": str(timeout_ms)} if timeout_ms else {}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)
    t0 = time.monotonic()
    c.request("POST", "/%s/%s" % (svc, method), body=struct.pack(">BI", 0, len(b)) + b,
              headers=dict(h, **{"Content-Type": "application/connect+json"}))
    r = c.getresponse()
    msgs, end = [], None
    while True:
        hdr = r.read(5)
        if len(hdr) < 5:
            end = {"code": "eof"}
            break
        flags, n = struct.unpack(">BI", hdr)
        d = json.loads(r.read(n) or b"{}")
        if flags & 2:
            end = d.get("error")
            break
        msgs.append(d)
        if until and until(msgs):
            break
    c.close()
    return msgs, end, (time.monotonic() - t0) * 1000

def threads():
    return len(os.listdir("/proc/%d/task" % envd_pid))

def fds():
    return len(os.listdir("/proc/%d/fd" % envd_pid))

def wait_for(secs, f):
    end = time.monotonic() + secs
    while not f():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True

def start_ok(cwd):
    msgs, end, _ = stream("process.Process", "Start",
                          {"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi"], "cwd": cwd}})
    ends = [m["event"]["end"] for m in msgs if "end" in m.get("event", {})]
    return end is None and ends and ends[0].get("exited") and ends[0].get("status") == "exit status 0"

# --- the mount works; the baseline ---
os.mkdir(M + "/warm")
st, d, _ = fs("Stat", {"path": M + "/warm"})
ok("Stat on the live mount", st == 200 and d.get("entry", {}).get("type") == "FILE_TYPE_DIRECTORY", d)
ok("a command starts with cwd on the live mount", start_ok(M + "/warm"))
wait_for(HANG, lambda: threads() <= 1 + CORE)
fd0 = fds()

# --- stop the daemon; every call on the mount waits for it ---
os.kill(fuse_pid, signal.SIGSTOP)
TO = 3000
hung = {
    "Stat": lambda: fs("Stat", {"path": M + "/s1"}, TO),
    "MakeDir": lambda: fs("MakeDir", {"path": M + "/d1"}, TO),
    "Move": lambda: fs("Move", {"source": M + "/m1", "destination": M + "/m2"}, TO),
    "Remove": lambda: fs("Remove", {"path": M + "/r1"}, TO),
    "ListDir": lambda: fs("ListDir", {"path": M + "/l1"}, TO),
    "CreateWatcher": lambda: fs("CreateWatcher", {"path": M + "/c1", "allowNetworkMounts": True}, TO),
    "CreateWatcher (network check)": lambda: fs("CreateWatcher", {"path": M + "/c2"}, TO),
    "Stat, server deadline": lambda: fs("Stat", {"path": M + "/s2"}),
}
paths = {"Stat": "/s1", "MakeDir": "/d1", "Move": "/m1", "Remove": "/r1", "ListDir": "/l1",
         "CreateWatcher": "/c1", "CreateWatcher (network check)": "/c2", "Stat, server deadline": "/s2"}
res = {}

def run(name, f):
    res[name] = f()

def run_stream(name, svc, method, msg):
    msgs, end, ms = stream(svc, method, msg, TO)
    res[name] = (msgs, end, ms)

ths = [threading.Thread(target=run, args=(n, f)) for n, f in hung.items()]
ths.append(threading.Thread(target=run_stream, args=("WatchDir", "filesystem.Filesystem", "WatchDir",
                                                    {"path": M + "/w1", "allowNetworkMounts": True})))
ths.append(threading.Thread(target=run_stream, args=("Start", "process.Process", "Start",
                                                    {"process": {"cmd": "/bin/true", "cwd": M + "/cwd1"}})))
ths.append(threading.Thread(target=run_stream, args=("Start of a command on the mount", "process.Process",
                                                    "Start", {"process": {"cmd": M + "/hb/true1",
                                                                          "cwd": T + "/else"}})))

def run_start_server_deadline():
    res["Start of a command on the mount, server deadline"] = stream(
        "process.Process", "Start", {"process": {"cmd": M + "/hb/true2", "cwd": T + "/else"}})

ths.append(threading.Thread(target=run_start_server_deadline))
for t in ths:
    t.start()

# the rest of envd answers meanwhile
time.sleep(0.2)  # let the hung calls reach the mount first; not a verdict
c = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)
c.request("GET", "/health")
ok("/health answers while calls hang on the mount", c.getresponse().status == 204)
c.close()
st, d, _ = fs("Stat", {"path": T + "/else"})
ok("Stat elsewhere answers", st == 200, d)
st, d, _ = fs("ListDir", {"path": T + "/else"})
ok("ListDir elsewhere answers", st == 200, d)
st, d, _ = unary("process.Process", "List", {})
ok("process List answers", st == 200, d)
ok("Start elsewhere answers", start_ok(T + "/else"))

for t in ths:
    t.join()
for name, rel in paths.items():
    st, d, ms = res[name]
    limit = 2000 if "server" in name else TO
    want = "filesystem did not answer within %g s: %s" % (limit / 1000, M + rel)
    ok("%s on the hung mount: deadline_exceeded" % name, d.get("code") == "deadline_exceeded", (st, d))
    ok("%s: the message names the path" % name, d.get("message") == want, d.get("message"))
    ok("%s: ends within its deadline + 1 s" % name, ms <= limit + 1000, "%.0f ms" % ms)
for name, path, limit in (("WatchDir", M + "/w1", TO), ("Start", M + "/cwd1", TO),
                          ("Start of a command on the mount", M + "/hb/true1", TO),
                          ("Start of a command on the mount, server deadline", M + "/hb/true2", 2000)):
    msgs, end, ms = res[name]
    ok("%s on the hung mount: deadline_exceeded" % name, (end or {}).get("code") == "deadline_exceeded",
       (msgs, end))
    ok("%s: the message names the path" % name,
       (end or {}).get("message") == "filesystem did not answer within %g s: %s" % (limit / 1000, path), end)
    ok("%s: ends within its deadline + 1 s" % name, ms <= limit + 1000, "%.0f ms" % ms)
st, d, _ = unary("process.Process", "List", {})
ok("the commands that did not start are not listed",
   st == 200 and not [p for p in d.get("processes", []) if "/hb/" in p.get("config", {}).get("cmd", "")], d)
st, d, _ = fs("Stat", {"path": T + "/else"})
ok("Stat elsewhere still answers after the deadlines", st == 200, d)

# --- the daemon runs again: the stuck jobs finish, the mount works ---
os.kill(fuse_pid, signal.SIGCONT)
st, d, _ = fs("MakeDir", {"path": M + "/after/x"})
ok("MakeDir on the mount after SIGCONT", st == 200, d)
st, d, _ = fs("Stat", {"path": M + "/after/x"})
ok("Stat on the mount after SIGCONT", st == 200, d)
st, d, _ = fs("Move", {"source": M + "/after/x", "destination": M + "/after/y"})
ok("Move on the mount after SIGCONT", st == 200 and d.get("entry", {}).get("path") == M + "/after/y", d)
st, d, _ = fs("ListDir", {"path": M + "/after"})
ok("ListDir on the mount after SIGCONT", st == 200 and [e["name"] for e in d.get("entries", [])] == ["y"], d)
st, d, _ = fs("CreateWatcher", {"path": M + "/after", "allowNetworkMounts": True})
ok("CreateWatcher on the mount after SIGCONT", st == 200 and d.get("watcherId"), d)
if d.get("watcherId"):
    fs("RemoveWatcher", {"watcherId": d["watcherId"]})
msgs, end, _ = stream("filesystem.Filesystem", "WatchDir", {"path": M + "/after", "allowNetworkMounts": True},
                      until=lambda m: any("start" in x.get("event", x) for x in m))
ok("WatchDir on the mount after SIGCONT starts", end is None and msgs, (msgs, end))
ok("Start with cwd on the mount after SIGCONT", start_ok(M + "/after"))
st, d, _ = fs("Remove", {"path": M + "/after"})
ok("Remove on the mount after SIGCONT", st == 200 and not os.path.exists(M + "/after"), d)
msgs, end, _ = stream("process.Process", "Start", {"process": {"cmd": M + "/hb/true1", "cwd": M + "/warm"}})
ends = [m["event"]["end"] for m in msgs if "end" in m.get("event", {})]
ok("Start of the command on the mount after SIGCONT exits 0", end is None and ends and
   ends[0].get("status") == "exit status 0", (msgs, end))

# --- a recursive watcher whose new subdirectory hangs in the watch's job ---
# envd is stopped while the directory is made (the daemon answers), so the
# event waits in the kernel; then the daemon stops and envd goes on: the
# job's opendir of the new directory waits for the daemon.
def fsname(m):  # a WatchDirResponse: its oneof is inlined in JSON
    return m.get("filesystem", {}).get("name")

os.mkdir(M + "/rw")
st, d, _ = fs("CreateWatcher", {"path": M + "/rw", "recursive": True, "includeEntry": True,
                                "allowNetworkMounts": True})
wid = d.get("watcherId")
ok("recursive CreateWatcher with includeEntry on the mount", st == 200 and wid, d)
started = threading.Event()
wres = {}

def until_sub(msgs):
    if any("start" in m for m in msgs):
        started.set()
    return any(fsname(m) == "new/sub" for m in msgs)

def watch_rw():
    wres["r"] = stream("filesystem.Filesystem", "WatchDir", {"path": M + "/rw", "recursive": True,
                       "includeEntry": True, "allowNetworkMounts": True}, HANG * 1000, until_sub)

wt = threading.Thread(target=watch_rw)
wt.start()
ok("recursive WatchDir on the mount starts", started.wait(HANG))
os.kill(envd_pid, signal.SIGSTOP)
os.makedirs(M + "/rw/new/sub")
os.kill(fuse_pid, signal.SIGSTOP)
os.kill(envd_pid, signal.SIGCONT)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)
c.request("GET", "/health")
ok("/health answers while the watch's job hangs on the new directory", c.getresponse().status == 204)
c.close()
st, d, _ = fs("Stat", {"path": T + "/else"})
ok("Stat elsewhere answers while the watch's job hangs", st == 200, d)
st, d, ms = fs("GetWatcherEvents", {"watcherId": wid}, TO)
ok("GetWatcherEvents answers while its watch's job hangs", st == 200, d)
ok("GetWatcherEvents: within half its deadline + 1 s", ms <= TO / 2 + 1000, "%.0f ms" % ms)
events = d.get("events", [])
os.kill(fuse_pid, signal.SIGCONT)
wait_for(HANG, lambda: any(e.get("name") == "new/sub" for e in events) or
         events.extend(fs("GetWatcherEvents", {"watcherId": wid})[1].get("events", [])) or False)
names = [e.get("name") for e in events]
ok("after SIGCONT the watcher gets the held events, in order", "new" in names and "new/sub" in names and
   names.index("new") < names.index("new/sub"), names)
ok("the held events carry entries", all("entry" in e for e in events if e.get("name") in ("new", "new/sub")),
   events)
wt.join()
msgs, end, _ = wres["r"]
names = [fsname(m) for m in msgs if fsname(m)]
ok("after SIGCONT the recursive WatchDir gets them, in order", "new" in names and "new/sub" in names and
   names.index("new") < names.index("new/sub"), (names, end))
fs("RemoveWatcher", {"watcherId": wid})
ok("envd's threads back to the pool's core size (%d)" % (1 + CORE),
   wait_for(HANG, lambda: threads() <= 1 + CORE), threads())
ok("envd's fds back to %d" % fd0, wait_for(HANG, lambda: fds() <= fd0), fds())

# --- a slow mount that keeps moving is not a hung one ---
# With no deadline from the client, -fs-timeout (2 s) bounds a stall, not
# the request: a Remove of a big tree on a mount whose daemon runs in short
# bursts between 1 s stops keeps going past three times -fs-timeout and
# ends with success. Each burst lasts until a file is seen gone, so every
# stall is shorter than the deadline however slow the machine.
SLOW_N = 30000
os.mkdir(HUNGFS_BACK + "/slow")
for i in range(SLOW_N):
    os.close(os.open("%s/slow/f%05d" % (HUNGFS_BACK, i), os.O_CREAT | os.O_WRONLY, 0o644))

def slow_left():
    return len(os.listdir(HUNGFS_BACK + "/slow")) if os.path.isdir(HUNGFS_BACK + "/slow") else 0

slow = {}

def slow_remove():
    slow["r"] = fs("Remove", {"path": M + "/slow"})

t0 = time.monotonic()
rt = threading.Thread(target=slow_remove)
rt.start()
ok("the slow Remove starts removing", wait_for(HANG, lambda: slow_left() < SLOW_N), slow_left())
bursts = 0
while rt.is_alive() and time.monotonic() - t0 < 3 * 2.0:
    os.kill(fuse_pid, signal.SIGSTOP)
    time.sleep(1.0)
    before = slow_left()
    os.kill(fuse_pid, signal.SIGCONT)
    wait_for(HANG, lambda: slow_left() < before or not rt.is_alive())
    bursts += 1
left = slow_left()
os.kill(fuse_pid, signal.SIGCONT)
rt.join()
st, d, ms = slow["r"]
ok("a slow Remove still moving after %d stops of 1 s (%d of %d files left)" % (bursts, left, SLOW_N),
   left > 0 and bursts >= 3, (bursts, left))
ok("the slow Remove succeeds past three times -fs-timeout (%.1f s)" % (ms / 1000),
   st == 200 and d == {} and ms > 3 * 2000, (st, d, ms))
ok("the slow Remove removed the tree", not os.path.exists(M + "/slow") and slow_left() == 0, slow_left())

# --- a 100 000-entry ListDir is answered, and /health while it is built ---
N = 100000
for i in range(N):
    os.close(os.open("%s/big/f%06d" % (T, i), os.O_CREAT | os.O_WRONLY, 0o644))
done = threading.Event()
health = []

def probe():
    while not done.is_set():
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)
        t0 = time.monotonic()
        c.request("GET", "/health")
        s = c.getresponse().status
        c.close()
        health.append((s, (time.monotonic() - t0) * 1000, done.is_set()))
        done.wait(0.05)  # a probe every 50 ms, not a flood of connections

p = threading.Thread(target=probe)
p.start()
st, d, ms = fs("ListDir", {"path": T + "/big"}, 600000)
done.set()
p.join()
ok("a %d-entry ListDir is answered" % N, st == 200 and len(d.get("entries", [])) == N,
   (st, str(d)[:200]))
during = [h for h in health if not h[2]]
ok("/health answered while it was built", all(h[0] == 204 for h in health) and len(health) > 0, health[:5])
print("info - ListDir of %d entries: %.0f ms; /health probes meanwhile: %d, slowest %.0f ms" %
      (N, ms, len(during), max([h[1] for h in during] or [0])), flush=True)
PY
cat "$T/out"
T_PASS=$((T_PASS + $(grep -c '^ok' "$T/out")))
T_FAIL=$((T_FAIL + $(grep -c '^FAIL' "$T/out")))
grep -q '^info - ListDir' "$T/out" || fail "the test script ran to its end" "$(tail -n 5 "$T/out")"
check "envd alive" envd_alive
finish
