#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The /files HTTP API against a hung FUSE mount (a bindfs whose daemon is
# stopped): GET (identity, gzip, archive), POST (multipart, raw, extract)
# and compose on it each end with 504 "filesystem did not answer within
# N s: PATH" at -fs-timeout while /health, a download elsewhere, Stat
# elsewhere and Start keep answering; a download whose reads stop midway
# is cut, not left open. Then the issue's scenario: with 40 requests
# (Stat, ListDir, GET) hung on the mount, /health, Stat elsewhere, a
# download elsewhere and Start each answer (their latency is printed, not
# judged: bench/ records it). After SIGCONT the mount works and envd's
# fds, threads (back to the pool's core size) and RSS are back.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/integration/hungfs_lib.sh

hungfs_require
T=$(mktemp -d /tmp/envd-hungfiles.XXXXXX)
M=$T/mnt
on_exit 'hungfs_cleanup; rm -rf "$T"; _t_cleanup'
hungfs_mount "$M" || exit 1
mkdir -p "$T/else"
head -c 1048576 /dev/urandom >"$T/else/blob"
# Written beside the mount, so no page of it is cached on the FUSE side.
head -c $((64 << 20)) /dev/urandom >"$HUNGFS_BACK/big"
mkdir -p "$HUNGFS_BACK/tree/sub"
echo one >"$HUNGFS_BACK/tree/a"
echo two >"$HUNGFS_BACK/tree/sub/b"
tar -C "$T/else" -cf "$T/small.tar" blob
# A sanitizer build keeps freed memory in quarantine: its RSS says nothing.
case $ENVD_BIN in *asan*) export HUNG_SANITIZED=1 ;; *) export HUNG_SANITIZED=0 ;; esac
envd_start -fs-timeout 3 || exit 1
ENVD1_PID=$ENVD_PID ENVD1_URL=$ENVD_URL
# The scenario's envd: a deadline longer than the probes take, so its 40
# requests stay hung throughout.
envd_start -fs-timeout 600 || exit 1

"$PY" - "$ENVD1_URL" "$ENVD1_PID" "$ENVD_URL" "$ENVD_PID" "$M" "$T" "$HUNGFS_PID" >"$T/out" 2>&1 <<'PY'
import hashlib, http.client, json, os, signal, struct, sys, threading, time, urllib.parse

url1, pid1, url2, pid2, M, T, fuse_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
    sys.argv[5], sys.argv[6], int(sys.argv[7])
HANG = 300  # seconds: a call that takes this long is a hang, whatever the machine
CORE = 4    # WORKER_THREADS_CORE
TO = 3      # envd 1's -fs-timeout

def ok(name, cond, detail=""):
    print(("ok   - " if cond else "FAIL - ") + name + ("" if cond or not detail else ": " + str(detail)), flush=True)

def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=HANG)

def req(url, method, path, body=None, headers=None):
    """(status, body, ms); status -1 when the body was cut."""
    c = conn(url)
    t0 = time.monotonic()
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    try:
        data = r.read()
        st = r.status
    except http.client.IncompleteRead as e:
        data, st = e.partial, -1
    c.close()
    return st, data, (time.monotonic() - t0) * 1000

def q(p):
    return urllib.parse.quote(p, safe="/")

def get(url, p, extra="", headers=None):
    return req(url, "GET", "/files?path=%s%s" % (q(p), extra), headers=headers)

def upload_multipart(url, p, data):
    b = b"----hungfilesboundary"
    body = (b"--" + b + b'\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + b + b"--\r\n")
    return req(url, "POST", "/files?path=" + q(p), body,
               {"Content-Type": "multipart/form-data; boundary=" + b.decode()})

def upload_raw(url, p, data):
    return req(url, "POST", "/files?path=" + q(p), data, {"Content-Type": "application/octet-stream"})

def extract(url, p, data):
    return req(url, "POST", "/files?extract=tar&path=" + q(p), data, {"Content-Type": "application/octet-stream"})

def compose(url, srcs, dest):
    return req(url, "POST", "/files/compose", json.dumps({"source_paths": srcs, "destination": dest}),
               {"Content-Type": "application/json"})

def rpc(url, svc, method, msg, timeout_ms=None):
    h = {"Content-Type": "application/json"}
    if timeout_ms:
        h["Connect-Timeout-Ms"] = str(timeout_ms)
    st, data, ms = req(url, "POST", "/%s/%s" % (svc, method), json.dumps(msg), h)
    try:
        return st, json.loads(data) if data else {}, ms
    except ValueError:
        return st, {"raw": data[:200]}, ms

def start_ok(url, cwd):
    b = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi"], "cwd": cwd}}).encode()
    c = conn(url)
    t0 = time.monotonic()
    c.request("POST", "/process.Process/Start", body=struct.pack(">BI", 0, len(b)) + b,
              headers={"Content-Type": "application/connect+json"})
    r = c.getresponse()
    ended = False
    while True:
        hdr = r.read(5)
        if len(hdr) < 5:
            break
        flags, n = struct.unpack(">BI", hdr)
        d = json.loads(r.read(n) or b"{}")
        if flags & 2:
            break
        e = d.get("event", {}).get("end")
        if e is not None:
            ended = e.get("exited") and e.get("status") == "exit status 0"
    c.close()
    return ended, (time.monotonic() - t0) * 1000

def health(url):
    st, _, ms = req(url, "GET", "/health")
    return st == 204, ms

def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))

def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))

def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

def wait_for(secs, f):
    end = time.monotonic() + secs
    while not f():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True

blob = open(T + "/else/blob", "rb").read()
small_tar = open(T + "/small.tar", "rb").read()

# --- the mount works: the baseline, on both envds ---
for url, pid in ((url1, pid1), (url2, pid2)):
    st, d, _ = upload_raw(url, M + "/warm/f", b"warm")
    ok("upload to the live mount", st == 200, (st, d[:200]))
    st, d, _ = get(url, M + "/warm/f")
    ok("download from the live mount", st == 200 and d == b"warm", (st, d[:200]))
    st, d, _ = get(url, M + "/big")
    ok("a 64 MiB download from the live mount", st == 200 and len(d) == 64 << 20, (st, len(d)))
    st, d, _ = get(url, M + "/tree", "&archive=tar")
    ok("archive of a directory on the live mount", st == 200 and len(d) > 0, (st, d[:200]))
    st, d, _ = compose(url, [M + "/warm/f"], M + "/warm/g")
    ok("compose on the live mount", st == 200, (st, d[:200]))
    ok("a command starts with cwd on the live mount", start_ok(url, M + "/warm")[0])
for url, pid in ((url1, pid1), (url2, pid2)):
    wait_for(HANG, lambda: threads(pid) <= 1 + CORE)
fd1, fd2 = fds(pid1), fds(pid2)
rss1 = rss_kb(pid1)

# --- a download that is under way when the daemon stops is cut ---
c = conn(url1)
c.request("GET", "/files?path=" + q(M + "/big"))
r = c.getresponse()
head = r.read(1 << 20)
os.kill(fuse_pid, signal.SIGSTOP)
t0 = time.monotonic()
cut = False
try:
    rest = r.read()
    cut = len(head) + len(rest) < (64 << 20)
except http.client.IncompleteRead:
    cut = True
except OSError:
    cut = True
c.close()
ok("a download whose reads stop on the hung mount is cut, not left open", cut)

# --- every /files request on the hung mount ends with 504 at the deadline ---
hung = {
    "GET": (lambda: get(url1, M + "/g1"), M + "/g1"),
    "GET gzip": (lambda: get(url1, M + "/g2", headers={"Accept-Encoding": "gzip"}), M + "/g2"),
    "GET archive": (lambda: get(url1, M + "/g3", "&archive=tar"), M + "/g3"),
    "POST multipart": (lambda: upload_multipart(url1, M + "/p1", b"data"), M + "/p1"),
    "POST raw": (lambda: upload_raw(url1, M + "/p2", b"data"), M + "/p2"),
    "POST extract": (lambda: extract(url1, M + "/p3", small_tar), M + "/p3"),
    "compose": (lambda: compose(url1, [M + "/c1"], T + "/else/composed"), M + "/c1"),
}
res = {}

def run(name, f):
    res[name] = f()

ths = [threading.Thread(target=run, args=(n, f)) for n, (f, _) in hung.items()]
for t in ths:
    t.start()
time.sleep(0.2)  # let the requests reach the mount first; not a verdict
ok("/health answers while /files requests hang on the mount", health(url1)[0])
st, d, _ = get(url1, T + "/else/blob")
ok("a download elsewhere answers", st == 200 and d == blob, (st, len(d)))
st, d, _ = rpc(url1, "filesystem.Filesystem", "Stat", {"path": T + "/else"})
ok("Stat elsewhere answers", st == 200, d)
ok("Start elsewhere answers", start_ok(url1, T + "/else")[0])
for t in ths:
    t.join()
for name, (_, path) in hung.items():
    st, d, ms = res[name]
    try:
        msg = json.loads(d).get("message")
    except ValueError:
        msg = d[:200]
    ok("%s on the hung mount: 504" % name, st == 504, (st, d[:200]))
    ok("%s: the message names the path" % name,
       msg == "filesystem did not answer within %g s: %s" % (TO, path), msg)
    ok("%s: ends within the deadline + 1 s" % name, ms <= TO * 1000 + 1000, "%.0f ms" % ms)
ok("envd 1 still answers after the deadlines", health(url1)[0])

# --- the issue's scenario: 40 requests hung on the mount (envd 2) ---
scen = []

def hang_one(i):
    k = i % 3
    if k == 0:
        scen.append(rpc(url2, "filesystem.Filesystem", "Stat", {"path": "%s/s%d" % (M, i)}, 600000))
    elif k == 1:
        scen.append(rpc(url2, "filesystem.Filesystem", "ListDir", {"path": "%s/l%d" % (M, i)}, 600000))
    else:
        scen.append(get(url2, "%s/f%d" % (M, i)))

hth = [threading.Thread(target=hang_one, args=(i,)) for i in range(40)]
for t in hth:
    t.start()
time.sleep(0.5)  # let them reach the mount first; not a verdict
lat = {"health": [], "stat": [], "download": [], "start": []}
answered = {k: 0 for k in lat}
N = 20
for i in range(N):
    good, ms = health(url2)
    answered["health"] += good
    lat["health"].append(ms)
    st, d, ms = rpc(url2, "filesystem.Filesystem", "Stat", {"path": T + "/else"})
    answered["stat"] += st == 200
    lat["stat"].append(ms)
    st, d, ms = get(url2, T + "/else/blob")
    answered["download"] += st == 200 and d == blob
    lat["download"].append(ms)
    good, ms = start_ok(url2, T + "/else")
    answered["start"] += bool(good)
    lat["start"].append(ms)
ok("with 40 requests hung none of them has returned yet", len(scen) == 0, len(scen))
for k, what in (("health", "/health"), ("stat", "Stat elsewhere"), ("download", "a download elsewhere"),
                ("start", "Start")):
    ok("with 40 requests hung, %s answers (%d of %d)" % (what, answered[k], N), answered[k] == N)

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]

for k in lat:
    print("info - with 40 hung: %s p50 %.1f ms p99 %.1f ms (n=%d)" % (k, pct(lat[k], 50), pct(lat[k], 99), N),
          flush=True)

# --- the daemon runs again ---
os.kill(fuse_pid, signal.SIGCONT)
for t in hth:
    t.join()
ok("the 40 hung requests all return after SIGCONT", len(scen) == 40, len(scen))
ok("... each with an answer of the mount (not found), none failed by envd",
   all(s[0] in (404, 500) or (s[0] == 200) for s in scen) and all(s[0] != 504 for s in scen),
   sorted(set(s[0] for s in scen)))
for url, name in ((url1, "envd 1"), (url2, "envd 2")):
    st, d, _ = upload_multipart(url, M + "/after/m", b"multi")
    ok("%s: multipart upload to the mount after SIGCONT" % name, st == 200, (st, d[:200]))
    st, d, _ = upload_raw(url, M + "/after/r", blob)
    ok("%s: raw upload to the mount after SIGCONT" % name, st == 200, (st, d[:200]))
    st, d, _ = get(url, M + "/after/r")
    ok("%s: download from the mount after SIGCONT" % name, st == 200 and d == blob, (st, len(d)))
    st, d, _ = get(url, M + "/after/r", headers={"Accept-Encoding": "gzip"})
    ok("%s: gzip download from the mount after SIGCONT" % name, st == 200 and len(d) > 0, (st, len(d)))
    st, d, _ = get(url, M + "/after/r", headers={"Range": "bytes=10-19,100-109"})
    ok("%s: multi-range download from the mount after SIGCONT" % name,
       st == 206 and blob[10:20] in d and blob[100:110] in d, (st, len(d)))
    st, d, _ = extract(url, M + "/after/x", small_tar)
    ok("%s: extract onto the mount after SIGCONT" % name,
       st == 200 and open(M + "/after/x/blob", "rb").read() == blob, (st, d[:200]))
    st, d, _ = get(url, M + "/after", "&archive=tar")
    ok("%s: archive of the mount after SIGCONT" % name, st == 200 and len(d) > len(blob), (st, len(d)))
    st, d, _ = compose(url, [M + "/after/m", M + "/after/r"], M + "/after/c")
    ok("%s: compose on the mount after SIGCONT" % name,
       st == 200 and open(M + "/after/c", "rb").read() == b"multi" + blob, (st, d[:200]))
    st, d, _ = get(url, M + "/big")
    ok("%s: the 64 MiB download works again" % name, st == 200 and len(d) == 64 << 20, (st, len(d)))
    os.system("rm -rf '%s/after'" % M)
for pid, fd0, name in ((pid1, fd1, "envd 1"), (pid2, fd2, "envd 2")):
    ok("%s: threads back to the pool's core size (%d)" % (name, 1 + CORE),
       wait_for(HANG, lambda: threads(pid) <= 1 + CORE), threads(pid))
    ok("%s: fds back to %d" % (name, fd0), wait_for(HANG, lambda: fds(pid) <= fd0), fds(pid))
rss = rss_kb(pid1)
print("info - envd 1 RSS before the hang %d KiB, after recovery %d KiB" % (rss1, rss), flush=True)
if os.environ.get("HUNG_SANITIZED") != "1":
    ok("envd 1: RSS back near where it was (%d KiB, was %d KiB)" % (rss, rss1), rss <= rss1 + 16384)
print("info - done", flush=True)
PY
cat "$T/out"
T_PASS=$((T_PASS + $(grep -c '^ok' "$T/out")))
T_FAIL=$((T_FAIL + $(grep -c '^FAIL' "$T/out")))
grep -q '^info - done' "$T/out" || fail "the test script ran to its end" "$(tail -n 5 "$T/out")"
check "envd 1 alive" envd_alive "$ENVD1_PID"
check "envd 2 alive" envd_alive
finish
