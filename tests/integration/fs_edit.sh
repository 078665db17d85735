#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Edit and the /files conditionals: edits in order, all or none, replaceAll,
# CRLF kept, mode, owner and attributes kept, every refusal leaving the file
# byte for byte as it was, ifVersion under concurrent edits (one wins),
# concurrent edits without it (none lost), a writer that changes the file
# between Edit's read and its rename, the request's user, a hung mount;
# over Connect JSON and proto, gRPC-Web. Then GET's ETag beside Stat's
# version, 304 and 412, POST's If-Match and If-None-Match: *.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/integration/hungfs_lib.sh

hungfs_require
id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
command -v setfattr >/dev/null || { echo "$T_NAME: setfattr missing (attr, scripts/setup.sh)"; echo "$T_NAME: 0 passed, 1 failed"; exit 1; }
T=$(mktemp -d /tmp/envd-fsedit.XXXXXX)
chmod 0755 "$T"
on_exit 'hungfs_cleanup; rm -rf "$T"; _t_cleanup'
M=$T/mnt
hungfs_mount "$M" || exit 1
envd_start -fs-timeout 30 || exit 1

"$PY" - "$ENVD_URL" "$ENVD_PID" "$T" "$HUNGFS_PID" "$HUNGFS_BACK" >"$T/out" 2>&1 <<'PY'
import base64, ctypes, hashlib, http.client, json, os, pwd, signal, struct, subprocess, sys, threading, time
import urllib.parse

url, envd_pid, T, fuse_pid, back = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
u = urllib.parse.urlparse(url)
HANG = 300
USER = pwd.getpwnam("user")

def ok(name, cond, detail=""):
    print(("ok   - " if cond else "FAIL - ") + name + ("" if cond or detail == "" else ": " + str(detail)[:600]), flush=True)

def request(method, path, body=None, headers=None, timeout=HANG):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

def unary(method, msg, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    st, _, data = request("POST", "/filesystem.Filesystem/" + method, json.dumps(msg), h)
    return st, json.loads(data) if data else {}

def edit(path, edits, if_version=None, headers=None):
    msg = {"path": path, "edits": edits}
    if if_version is not None:
        msg["ifVersion"] = if_version
    return unary("Edit", msg, headers)

def e(old, new, all=False):
    d = {"oldText": old, "newText": new}
    if all:
        d["replaceAll"] = True
    return d

def as_user(name):
    return {"Authorization": "Basic " + base64.b64encode((name + ":").encode()).decode()}

def put(path, data, mode=0o644, owner=None):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.chmod(path, mode)
    if owner:
        os.chown(path, owner.pw_uid, owner.pw_gid)

def get(path):
    with open(path, "rb") as f:
        return f.read()

def fingerprint(path):
    st = os.stat(path)
    return (hashlib.sha256(get(path)).hexdigest(), st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)

def version(path):
    st, d = unary("Stat", {"path": path})
    return d.get("entry", {}).get("version")

D = T + "/work"
os.makedirs(D)
os.chmod(D, 0o777)

# ---- the edits ----
f = D + "/a.ts"
put(f, "const alpha = 1;\nconst beta = 2;\nfunction gamma() { return alpha + beta; }\n")
st, d = edit(f, [e("beta = 2", "beta = 20")])
ok("one edit: replaced, the new version is Stat's, replacements 1",
   st == 200 and get(f) == b"const alpha = 1;\nconst beta = 20;\nfunction gamma() { return alpha + beta; }\n" and
   d.get("replacements") == 1 and d.get("version") == version(f), (st, d, get(f)))
st, d = edit(f, [e("alpha", "ALPHA", True), e("const ALPHA = 1;", "let ALPHA = 1;")])
ok("several edits in order, each on the result before; replaceAll",
   st == 200 and d.get("replacements") == 3 and
   get(f) == b"let ALPHA = 1;\nconst beta = 20;\nfunction gamma() { return ALPHA + beta; }\n", (d, get(f)))
crlf = D + "/crlf.txt"
put(crlf, b"one\r\ntwo\r\nthree\r\n")
st, d = edit(crlf, [e("two\r\n", "TWO\r\nand a half\r\n")])
ok("CRLF line endings kept, byte for byte", st == 200 and get(crlf) == b"one\r\nTWO\r\nand a half\r\nthree\r\n", (d, get(crlf)))
st, d = edit(crlf, [e("TWO\nand", "x")])
ok("no line ending is translated: LF does not match CRLF", d.get("code") == "failed_precondition", d)

# ---- every refusal leaves the file as it was ----
g = D + "/g.txt"
put(g, "foo\nbar\nfoo baz\n")
before = fingerprint(g)
v0 = version(g)
big = D + "/big.txt"
put(big, b"a" * (8 << 20))
cases = [
    ("oldText not found", g, [e("nope", "x")], None, "failed_precondition", "not found"),
    ("found twice without replaceAll (count and lines)", g, [e("foo", "x")], None, "failed_precondition",
     "found 2 times in " + g + ", on lines 1 and 3"),
    ("all or none: the second edit fails, the first is not applied", g, [e("bar\n", "BAR\n"), e("zzz", "y")], None,
     "failed_precondition", "(edit 2 of 2)"),
    ("empty oldText on a file that is not empty", g, [e("", "new")], None, "failed_precondition", "oldText is empty"),
    ("stale ifVersion: aborted", g, [e("bar\n", "BAR\n")], "0" * 32, "aborted", "changed since version"),
    ("malformed ifVersion", g, [e("bar\n", "BAR\n")], "v1", "invalid_argument", "not a version"),
    ("no edits", g, [], None, "invalid_argument", "no edits"),
    ("a result over the size bound", big, [e("a", "aaa", True)], None, "failed_precondition", "over Edit's limit"),
]
for name, path, edits, iv, code, words in cases:
    fp = fingerprint(path)
    st, d = edit(path, edits, iv)
    ok("refused, file byte-identical: " + name,
       d.get("code") == code and words in d.get("message", "") and fingerprint(path) == fp, (st, d))
huge = D + "/huge.txt"
put(huge, b"x" * ((16 << 20) + 1))
fp = fingerprint(huge)
st, d = edit(huge, [e("x", "y")])
ok("refused, file byte-identical: a file over 16 MiB", d.get("code") == "failed_precondition" and
   "Edit takes files up to" in d.get("message", "") and fingerprint(huge) == fp, d)
os.unlink(huge)
os.unlink(big)
st, d = edit(D, [e("x", "y")])
ok("a directory: invalid_argument", d.get("code") == "invalid_argument", d)
st, d = edit(D + "/missing.txt", [e("x", "y")])
ok("a missing file with an oldText: not_found", d.get("code") == "not_found", d)
ok("and the refused edits left nothing behind",
   fingerprint(g) == before and not [n for n in os.listdir(D) if n.startswith(".envd-upload.")], os.listdir(D))
st, d = edit(g, [e("bar\n", "BAR\n")], v0)
ok("the current ifVersion: applied", st == 200 and get(g) == b"foo\nBAR\nfoo baz\n", d)
st, d = edit(g, [e("BAR", "BAR")])
ok("edits that change nothing: no write, the version stays", st == 200 and d.get("version") == version(g) and
   d.get("replacements") == 1 and fingerprint(g)[1] == os.stat(g).st_ino, d)

# ---- creation ----
n = D + "/new/dir/created.txt"
st, d = edit(n, [e("", "created\n")], headers=as_user("user"))
s = os.stat(n) if os.path.exists(n) else None
ok("empty oldText and no file: created (with its directories), owned by the user",
   st == 200 and get(n) == b"created\n" and s.st_uid == USER.pw_uid and d.get("version") == version(n), (d, s))
st, d = edit(n, [e("", "again")], "0" * 32)
ok("creation is not a way round ifVersion", d.get("code") == "aborted", d)

# ---- mode, owner, attributes ----
m = D + "/meta.txt"
put(m, "owned by user\n", 0o640, USER)
subprocess.run(["setfattr", "-n", "user.note", "-v", "keep me", m], check=True)
subprocess.run(["setfattr", "-n", "user.e2b.tag", "-v", "envd metadata", m], check=True)
ino = os.stat(m).st_ino
st, d = edit(m, [e("owned", "still owned")])
s = os.stat(m)
attrs = {k: os.getxattr(m, k) for k in os.listxattr(m)}
ok("root's edit of a user's file: replaced (new inode), mode, owner and attributes kept",
   st == 200 and get(m) == b"still owned by user\n" and s.st_ino != ino and (s.st_mode & 0o7777) == 0o640 and
   s.st_uid == USER.pw_uid and s.st_gid == USER.pw_gid and attrs == {"user.note": b"keep me", "user.e2b.tag": b"envd metadata"},
   (d, oct(s.st_mode), s.st_uid, attrs))
st, d = unary("Stat", {"path": m})
ok("Stat still sees the user.e2b.* metadata", d.get("entry", {}).get("metadata") == {"tag": "envd metadata"}, d)
st, d = edit(m, [e("still", "yet still")], headers=as_user("user"))
s = os.stat(m)
ok("the owner's own edit: the same", st == 200 and (s.st_mode & 0o7777) == 0o640 and s.st_uid == USER.pw_uid and
   os.getxattr(m, "user.note") == b"keep me", d)

shared = D + "/shared.txt"
put(shared, "group writable\n", 0o664)
os.chown(shared, 0, USER.pw_gid)
ino = os.stat(shared).st_ino
st, d = edit(shared, [e("group", "GROUP")], headers=as_user("user"))
s = os.stat(shared)
ok("a file the user may write but not own: edited in place, owner kept",
   st == 200 and get(shared) == b"GROUP writable\n" and s.st_uid == 0 and s.st_ino == ino, (d, s.st_uid))

locked_dir = T + "/rootdir"
os.makedirs(locked_dir)
own = locked_dir + "/own.txt"
put(own, "in a root directory\n", 0o644, USER)
st, d = edit(own, [e("root", "ROOT")], headers=as_user("user"))
ok("a file of the user's in a directory it may not write: edited in place",
   st == 200 and get(own) == b"in a ROOT directory\n", d)

secret = D + "/root.txt"
put(secret, "root's\n", 0o644)
fp = fingerprint(secret)
st, d = edit(secret, [e("root", "user")], headers=as_user("user"))
ok("a file the user may not write: permission_denied, unchanged",
   d.get("code") == "permission_denied" and fingerprint(secret) == fp, d)
os.chmod(secret, 0o600)
fp = fingerprint(secret)
st, d = edit(secret, [e("root", "user")], headers=as_user("user"))
ok("nor read: permission_denied", d.get("code") == "permission_denied" and fingerprint(secret) == fp, d)
# Where the mode says the user may write (its owner's write bit, or
# root), what only the write can tell: an immutable file, a read-only
# mount. The same answer as where the mode says no.
mine = D + "/mine-ro.txt"
put(mine, "the owner's, 0444\n", 0o444, USER)
fp = fingerprint(mine)
st, d = edit(mine, [e("0444", "0644")], headers=as_user("user"))
ok("the owner's file without the owner's write bit: permission_denied, unchanged",
   d.get("code") == "permission_denied" and fingerprint(mine) == fp, d)
imm = D + "/immutable.txt"
put(imm, "immutable\n", 0o644, USER)
if subprocess.run(["chattr", "+i", imm], capture_output=True).returncode == 0:
    try:
        fp = fingerprint(imm)
        st, d = edit(imm, [e("immutable", "changed")], headers=as_user("user"))
        ok("an immutable file of the user's: permission_denied, unchanged",
           d.get("code") == "permission_denied" and fingerprint(imm) == fp, d)
        st, d = edit(imm, [e("immutable", "changed")])
        ok("and as root: permission_denied, unchanged", d.get("code") == "permission_denied" and fingerprint(imm) == fp, d)
    finally:
        subprocess.run(["chattr", "-i", imm])
else:
    print("# chattr +i refused here: the immutable case is not run")
ro = T + "/ro"
os.makedirs(ro)
put(ro + "/f.txt", "on a read-only mount\n", 0o644, USER)
if subprocess.run(["mount", "--bind", ro, ro], capture_output=True).returncode == 0:
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", ro], check=True)
        fp = fingerprint(ro + "/f.txt")
        st, d = edit(ro + "/f.txt", [e("read-only", "READ-ONLY")], headers=as_user("user"))
        ok("on a read-only mount: permission_denied, unchanged",
           d.get("code") == "permission_denied" and fingerprint(ro + "/f.txt") == fp, d)
        st, d = edit(ro + "/f.txt", [e("read-only", "READ-ONLY")])
        ok("and as root: permission_denied", d.get("code") == "permission_denied" and fingerprint(ro + "/f.txt") == fp, d)
    finally:
        subprocess.run(["umount", ro])
else:
    print("# no bind mount here: the read-only mount case is not run")

target = D + "/target.txt"
put(target, "behind a link\n")
os.symlink("target.txt", D + "/link.txt")
st, d = edit(D + "/link.txt", [e("behind", "BEHIND")])
ok("through a symlink: the file it leads to is edited, the link stays a link",
   st == 200 and get(target) == b"BEHIND a link\n" and os.path.islink(D + "/link.txt") and
   d.get("version") == version(target), d)
# A second name in a directory only root may write: in place, both names
# see it. In D, which anyone may write, that name could be someone's hard
# link to a file of root's: root's rights do not write through it, the
# name is replaced and the other name keeps its content (docs/security.md).
P = D + "/private"
os.makedirs(P)
os.chmod(P, 0o755)
put(P + "/target.txt", "behind a link\n")
os.link(P + "/target.txt", P + "/hard.txt")
st, d = edit(P + "/target.txt", [e("behind", "BEHIND")])
ok("a file with another name: edited in place, both names see it",
   st == 200 and get(P + "/hard.txt") == b"BEHIND a link\n" and
   os.stat(P + "/target.txt").st_ino == os.stat(P + "/hard.txt").st_ino, d)
os.link(target, D + "/hard.txt")
st, d = edit(target, [e("BEHIND", "behind")])
ok("a second name in a directory anyone may write: replaced as root, the other name unchanged",
   st == 200 and get(target) == b"behind a link\n" and get(D + "/hard.txt") == b"BEHIND a link\n" and
   os.stat(target).st_ino != os.stat(D + "/hard.txt").st_ino, d)

# ---- concurrent edits ----
c = D + "/counter.txt"
put(c, "COUNTER = 0\n")
v = version(c)
results = [None] * 8
def one(i):
    results[i] = edit(c, [e("COUNTER = 0", "COUNTER = %d" % (i + 1))], v)
ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
wins = [i for i, (st, d) in enumerate(results) if st == 200]
lost = [d.get("code") for st, d in results if st != 200]
ok("8 concurrent edits with one ifVersion: one wins, the others are aborted",
   len(wins) == 1 and lost == ["aborted"] * 7 and get(c) == ("COUNTER = %d\n" % (wins[0] + 1)).encode(), (results, get(c)))

slots = D + "/slots.txt"
put(slots, "".join("slot %d: empty\n" % i for i in range(8)))
def fill(i):
    results[i] = edit(slots, [e("slot %d: empty" % i, "slot %d: filled" % i)])
ts = [threading.Thread(target=fill, args=(i,)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
ok("8 concurrent edits without ifVersion, each of its own line: none is lost",
   all(st == 200 for st, d in results) and get(slots) == "".join("slot %d: filled\n" % i for i in range(8)).encode(),
   (results, get(slots)))

# ---- a writer that changes the file between Edit's read and its rename ----
# The writer wakes when envd has read the file (inotify IN_ACCESS: the
# snapshot is taken; envd keeps that descriptor open until its write has
# begun, so its close comes too late to tell), stops envd, and writes the
# file while no temporary of envd's is there yet (envd has read, not
# written: its last look before the rename is still ahead); when one
# already is, the try is set up again.
libc = ctypes.CDLL(None, use_errno=True)
IN_ACCESS = 0x1
def raced_edit(path, edits, setup, act, iv_of=None):
    """An Edit of path, stopped once envd has read it; act() runs while no
    temporary of envd's is there yet (set up again, up to 20 times, when one
    already is). (the Edit's result, the try it took)"""
    for attempt in range(20):
        setup()
        iv = version(path) if iv_of else None
        fdn = libc.inotify_init1(0)
        libc.inotify_add_watch(fdn, path.encode(), IN_ACCESS)
        box = {}
        t = threading.Thread(target=lambda: box.update(r=edit(path, edits, iv)))
        t.start()
        os.read(fdn, 4096)            # envd has read it
        os.kill(envd_pid, signal.SIGSTOP)
        early = not [x for x in os.listdir(os.path.dirname(path)) if x.startswith(".envd-upload.")]
        if early:
            act()
        os.kill(envd_pid, signal.SIGCONT)
        t.join()
        os.close(fdn)
        if early:
            return box["r"], attempt
    return None, attempt
def write_x(path):
    with open(path, "r+b") as fh:  # in place, the same size: only the version shows it
        fh.write(b"X")
def racer_edit(path, content, edits, iv_of=None):
    return raced_edit(path, edits, lambda: put(path, content), lambda: write_x(path), iv_of)
race = D + "/race.txt"
body = "".join("line %06d\n" % i for i in range(1 << 19))
r, tries = racer_edit(race, body, [e("line 000001\n", "LINE 000001\n")], iv_of=True)
print("set up after %d tries" % (tries + 1))
ok("a change between the read and the rename, with ifVersion: aborted, the writer's content stays",
   r is not None and r[1].get("code") == "aborted" and get(race)[:12] == b"Xine 000000\n" and
   get(race)[12:24] == b"line 000001\n", (r, tries))
r, tries = racer_edit(race, body, [e("line 000001\n", "LINE 000001\n")])
print("set up after %d tries" % (tries + 1))
ok("without ifVersion: read again and applied to the writer's content, nothing lost",
   r is not None and r[0] == 200 and get(race)[:24] == b"Xine 000000\nLINE 000001\n", (r, tries))

# The name made a symbolic link between the read and the rename (to a file
# of the same content elsewhere): the last look does not follow it, so the
# edit is read again where the link leads, and the link stays a link.
def swap_edit(path, elsewhere, content, edits):
    def setup():
        for x in (path, elsewhere):
            if os.path.lexists(x):
                os.unlink(x)
        put(path, content)
        put(elsewhere, content)
    def swap():
        os.unlink(path)
        os.symlink(os.path.basename(elsewhere), path)
    return raced_edit(path, edits, setup, swap)
sw, there = D + "/swapped.txt", D + "/swapped-there.txt"
r, tries = swap_edit(sw, there, body, [e("line 000001\n", "LINE 000001\n")])
print("set up after %d tries" % (tries + 1))
ok("a symlink swapped in before the rename: the edit goes where it leads, the link stays a link",
   r is not None and r[0] == 200 and os.path.islink(sw) and get(there)[:24] == b"line 000000\nLINE 000001\n" and
   r[1].get("version") == version(there), (r, tries))

# ---- a hung mount ----
hm = T + "/mnt/h.txt"
put(back + "/h.txt", "on the mount\n")
os.kill(fuse_pid, signal.SIGSTOP)
try:
    t0 = time.monotonic()
    st, d = edit(T + "/mnt/fresh-name.txt", [e("on", "ON")], headers={"Connect-Timeout-Ms": "1500"})
    ok("Edit on a hung mount ends at its deadline: deadline_exceeded", d.get("code") == "deadline_exceeded", (d, time.monotonic() - t0))
    st, d = edit(g, [e("foo baz", "foo BAZ")])
    ok("the rest of envd answers meanwhile (an Edit elsewhere)", st == 200, d)
finally:
    os.kill(fuse_pid, signal.SIGCONT)
st, d = edit(hm, [e("on the", "ON THE")])
ok("and once the mount answers, Edit works there", st == 200 and get(back + "/h.txt") == b"ON THE mount\n", d)

# ---- proto, gRPC-Web ----
def pb_str(field, s):
    b = s.encode() if isinstance(s, str) else s
    return bytes([field << 3 | 2]) + bytes([len(b)]) + b
p = D + "/proto.txt"
put(p, "over proto\n")
te = pb_str(1, "proto") + pb_str(2, "PROTO")
req = pb_str(1, p) + pb_str(2, te)
st, _, data = request("POST", "/filesystem.Filesystem/Edit", req, {"Content-Type": "application/proto"})
ok("Edit over Connect proto", st == 200 and get(p) == b"over PROTO\n" and version(p).encode() in data, (st, data))
te = pb_str(1, "PROTO") + pb_str(2, "gRPC-Web")
req = pb_str(1, p) + pb_str(2, te)
st, _, data = request("POST", "/filesystem.Filesystem/Edit", b"\0" + struct.pack(">I", len(req)) + req,
                      {"Content-Type": "application/grpc-web+proto"})
ok("Edit over gRPC-Web", st == 200 and get(p) == b"over gRPC-Web\n" and b"grpc-status: 0" in data, data)

# ---- /files: ETag, If-Match, If-None-Match ----
h = D + "/http.txt"
put(h, "served\n")
st, hd, data = request("GET", "/files?path=" + urllib.parse.quote(h))
v = version(h)
ok("GET answers ETag: the quoted version, as Stat gives it", st == 200 and hd.get("etag") == '"%s"' % v, hd)
st, hd, data = request("GET", "/files?path=" + urllib.parse.quote(h), headers={"If-None-Match": '"%s"' % v})
ok("GET with If-None-Match of the version: 304, no body", st == 304 and data == b"" and hd.get("etag") == '"%s"' % v, (st, hd))
st, hd, data = request("GET", "/files?path=" + urllib.parse.quote(h), headers={"If-Match": '"%s"' % ("0" * 32)})
ok("GET with a stale If-Match: 412", st == 412, (st, data))
st, hd, data = request("GET", "/files?path=" + urllib.parse.quote(h), headers={"If-Match": '"%s"' % v})
ok("GET with the current If-Match: 200", st == 200 and data == b"served\n", st)
fp = fingerprint(h)
st, hd, data = request("POST", "/files?path=" + urllib.parse.quote(h), b"replaced\n",
                       {"Content-Type": "application/octet-stream", "If-Match": '"%s"' % ("0" * 32)})
ok("POST with a stale If-Match: 412, nothing written", st == 412 and fingerprint(h) == fp and
   not [x for x in os.listdir(D) if x.startswith(".envd-upload.")], (st, data))
st, hd, data = request("POST", "/files?path=" + urllib.parse.quote(h), b"replaced\n",
                       {"Content-Type": "application/octet-stream", "If-Match": '"%s"' % v})
ok("POST with the current If-Match: written, its ETag is the new version",
   st == 200 and get(h) == b"replaced\n" and hd.get("etag") == '"%s"' % version(h), (st, hd))
st, d = edit(h, [e("replaced", "edited")], hd.get("etag", "").strip('"'))
ok("the upload's ETag is what Edit's ifVersion takes", st == 200, d)
fp = fingerprint(h)
st, hd, data = request("POST", "/files?path=" + urllib.parse.quote(h), b"clobber\n",
                       {"Content-Type": "application/octet-stream", "If-None-Match": "*"})
ok("POST with If-None-Match: * on a file that exists: 412, nothing written", st == 412 and fingerprint(h) == fp, (st, data))
fresh = D + "/fresh.txt"
st, hd, data = request("POST", "/files?path=" + urllib.parse.quote(fresh), b"only once\n",
                       {"Content-Type": "application/octet-stream", "If-None-Match": "*"})
ok("POST with If-None-Match: * where there is none: created", st == 200 and get(fresh) == b"only once\n", (st, data))
bnd = "XbOuNdArY"
mp = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"fresh.txt\"\r\n\r\nagain\r\n--%s--\r\n" % (bnd, bnd)).encode()
st, hd, data = request("POST", "/files?path=" + urllib.parse.quote(fresh), mp,
                       {"Content-Type": "multipart/form-data; boundary=" + bnd, "If-None-Match": "*"})
ok("and a multipart POST the same: 412", st == 412 and get(fresh) == b"only once\n", (st, data))
PY
while IFS= read -r line; do
	case $line in
	"ok   - "*) pass "${line#ok   - }" ;;
	"FAIL - "*) fail "${line#FAIL - }" ;;
	*) echo "$line" ;;
	esac
done <"$T/out"
check "envd is alive" envd_alive
finish
