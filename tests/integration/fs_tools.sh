#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agent's file tools (Glob, Grep, ReadLines) over Connect JSON, Connect
# proto and gRPC: results beside ripgrep's on the same tree (ignore files,
# hidden files, globs, regexes), every option, bad patterns with their
# offset, files the request's user may not read skipped and counted, the
# version beside Stat's, a hung mount under the path failing only its own
# call by its deadline, a cancelled stream giving everything back, and the
# memory of a search of a 1 GiB line.
# arm64: skip: it judges envd's RSS, which under qemu-user is the emulator's
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
. tests/integration/hungfs_lib.sh

hungfs_require
command -v rg >/dev/null || { echo "$T_NAME: ripgrep missing (scripts/setup.sh)"; echo "$T_NAME: 0 passed, 1 failed"; exit 1; }
id user >/dev/null 2>&1 || useradd -m -s /bin/bash user >/dev/null 2>&1
T=$(mktemp -d /tmp/envd-fstools.XXXXXX)
chmod 0755 "$T"
on_exit 'hungfs_cleanup; umount "$T/withproc/proc" 2>/dev/null; rm -rf "$T"; _t_cleanup'

# The tree: a repository with ignore files of every kind, hidden files, a
# binary file, a file and a directory only root may read.
R=$T/repo
mkdir -p "$R/.git/info" "$R/src/lib" "$R/src/gen" "$R/node_modules/pkg" "$R/dist" "$R/out" "$R/.config" \
	"$R/secret" "$R/docs"
echo '*.log' >"$R/.git/info/exclude"
printf 'node_modules/\ndist/\n!dist/keep.js\nout/*\n!out/keep.js\n*.tmp\n' >"$R/.gitignore"
printf '*.gen.ts\n!keep.gen.ts\n' >"$R/src/.gitignore"
printf 'docs/\n' >"$R/.ignore"
printf 'export function alpha() { return 1; }\n// TODO: beta\nconst Gamma = 3;\nfunction delta() {}\n' >"$R/src/a.ts"
printf 'import { alpha } from "./a";\nalpha();\n// todo lower\n' >"$R/src/b.ts"
printf 'export const x = "alpha";\n' >"$R/src/lib/c.ts"
printf 'alpha generated\n' >"$R/src/gen/x.gen.ts"
printf 'alpha kept\n' >"$R/src/gen/keep.gen.ts"
printf 'alpha in node_modules\n' >"$R/node_modules/pkg/index.ts"
printf 'alpha dist\n' >"$R/dist/keep.js"
printf 'alpha out other\n' >"$R/out/other.js"
printf 'alpha out keep\n' >"$R/out/keep.js"
printf 'alpha tmp\n' >"$R/x.tmp"
printf 'alpha log\n' >"$R/x.log"
printf 'alpha docs\n' >"$R/docs/d.md"
printf 'alpha hidden\n' >"$R/.config/h.ts"
printf 'alpha\0binary\n' >"$R/bin.dat"
printf 'alpha secret\n' >"$R/secret.ts"
chmod 0600 "$R/secret.ts"
printf 'alpha in secret dir\n' >"$R/secret/s.ts"
chmod 0700 "$R/secret"
ln -s src/a.ts "$R/link.ts"
seq 1 100 | sed 's/^/line /' >"$R/src/lines.txt"
# a long line
{ head -c 2000 /dev/zero | tr '\0' x; echo ' alpha at the end'; } >"$R/src/long.txt"
touch -d '2020-01-01' "$R/src/b.ts"
touch -d '2021-01-01' "$R/src/lib/c.ts"
touch -d '2022-01-01' "$R/src/a.ts"
touch -d '2023-01-01' "$R/src/gen/keep.gen.ts"
chmod -R a+rX "$R/src" "$R/.config" "$R/out" "$R/dist" "$R/docs" "$R/node_modules"

# a proc mount inside a searched tree
mkdir -p "$T/withproc/proc"
echo 'VmRSS in a plain file' >"$T/withproc/plain.txt"
mount -t proc proc "$T/withproc/proc" || { echo "$T_NAME: cannot mount proc"; echo "$T_NAME: 0 passed, 1 failed"; exit 1; }
M=$T/mnt
hungfs_mount "$M" || exit 1
mkdir -p "$HUNGFS_BACK/sub"
echo 'alpha on the mount' >"$HUNGFS_BACK/sub/f.ts"
# Memory is measured in this suite: the sanitizer build must not keep
# what is freed (its quarantine would hold every match message sent).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
envd_start -fs-timeout 30 || exit 1

"$PY" - "$ENVD_URL" "$ENVD_PID" "$T" "$HUNGFS_PID" >"$T/out" 2>&1 <<'PY'
import http.client, json, os, signal, socket, struct, subprocess, sys, time, urllib.parse, base64

url, envd_pid, T, fuse_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
R = T + "/repo"
u = urllib.parse.urlparse(url)
HANG = 300

def ok(name, cond, detail=""):
    print(("ok   - " if cond else "FAIL - ") + name + ("" if cond or detail == "" else ": " + str(detail)[:600]), flush=True)

def post(path, body, ctype, headers=None, timeout=HANG):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = {"Content-Type": ctype}
    h.update(headers or {})
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

def unary(method, msg, headers=None):
    st, data = post("/filesystem.Filesystem/" + method, json.dumps(msg), "application/json", headers)
    return st, json.loads(data) if data else {}

def frames(data):
    out, i = [], 0
    while i + 5 <= len(data):
        f, n = data[i], struct.unpack(">I", data[i + 1:i + 5])[0]
        out.append((f, data[i + 5:i + 5 + n]))
        i += 5 + n
    return out

def grep(msg, headers=None):
    body = json.dumps(msg).encode()
    st, data = post("/filesystem.Filesystem/Grep", b"\0" + struct.pack(">I", len(body)) + body,
                    "application/connect+json", headers)
    matches, summary, end = [], None, None
    for f, p in frames(data):
        d = json.loads(p)
        if f & 2:
            end = d
        elif "match" in d:
            matches.append(d["match"])
        elif "summary" in d:
            summary = d["summary"]
    return matches, summary, end

def rg(*args, cwd=R):
    r = subprocess.run(["rg"] + list(args), cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return r.stdout

def as_user(name):
    return {"Authorization": "Basic " + base64.b64encode((name + ":").encode()).decode()}

# ---- Glob ----
st, d = unary("Glob", {"path": R, "pattern": "**/*.ts"})
got = sorted(e["path"][len(R) + 1:] for e in d.get("entries", []))
want = sorted(l for l in rg("--files").splitlines() if l.endswith(".ts"))
ok("Glob **/*.ts lists what rg --files lists (ignore files, hidden, symlinks)", got == want, (got, want))
ok("Glob entries are EntryInfo with a version", all(e.get("version") for e in d["entries"]) and
   d["entries"][0]["type"] == "FILE_TYPE_FILE", d)
st, d = unary("Glob", {"path": R, "pattern": "src/*.ts"})
ok("Glob src/*.ts: one directory, sorted by path",
   [e["name"] for e in d.get("entries", [])] == ["a.ts", "b.ts"], d)
st, d = unary("Glob", {"path": R, "pattern": "src/**/*.ts", "sort": "mtime", "limit": 2})
ok("Glob sort mtime newest first, limit and truncated",
   [e["name"] for e in d.get("entries", [])] == ["keep.gen.ts", "a.ts"] and d.get("truncated") is True, d)
st, d = unary("Glob", {"path": R, "pattern": "**/*.{ts,js}", "hidden": True})
got = sorted(e["path"][len(R) + 1:] for e in d.get("entries", []))
want = sorted(l for l in rg("--files", "--hidden").splitlines() if l.endswith((".ts", ".js")))
ok("Glob hidden: as rg --files --hidden", got == want, (got, want))
st, d = unary("Glob", {"path": R, "pattern": "**/*.ts", "noIgnore": True})
got = sorted(e["path"][len(R) + 1:] for e in d.get("entries", []))
want = sorted(l for l in rg("--files", "--no-ignore").splitlines() if l.endswith(".ts"))
ok("Glob noIgnore: as rg --files --no-ignore", got == want, (got, want))
st, d = unary("Glob", {"path": R, "pattern": "src/[ab"})
ok("Glob bad pattern: invalid_argument with the offset",
   st == 400 and d.get("code") == "invalid_argument" and "offset 4" in d.get("message", ""), (st, d))
st, d = unary("Glob", {"path": R + "/nope", "pattern": "*"})
ok("Glob of a missing path: not_found", d.get("code") == "not_found", d)

# ---- Grep beside rg ----
def rg_lines(*args):
    out = set()
    for l in rg("-n", "--no-heading", "--with-filename", *args).splitlines():
        p, n, _ = l.split(":", 2)
        out.add((p, int(n)))
    return out

for name, msg, args in [
    ("literal", {"pattern": "alpha"}, ["alpha"]),
    ("regex with a class", {"pattern": "[A-Z][a-z]+ ="}, ["[A-Z][a-z]+ ="]),
    ("ignoreCase", {"pattern": "todo", "ignoreCase": True}, ["-i", "todo"]),
    ("fixedString", {"pattern": "alpha()", "fixedString": True}, ["-F", "alpha()"]),
    ("word boundary and \\d", {"pattern": "\\bx\\b|\\d"}, ["\\bx\\b|\\d"]),
    ("include", {"pattern": "alpha", "include": ["*.ts"]}, ["-g", "*.ts", "alpha"]),
    ("exclude", {"pattern": "alpha", "exclude": ["lib"]}, ["-g", "!lib", "alpha"]),
    ("hidden", {"pattern": "alpha", "hidden": True}, ["--hidden", "alpha"]),
    ("noIgnore", {"pattern": "alpha", "noIgnore": True}, ["--no-ignore", "alpha"]),
]:
    msg = dict(msg, path=R, limit=10000)
    m, s, e = grep(msg)
    got = set((x["path"], x["line"]) for x in m)
    want = rg_lines(*args)
    ok("Grep %s: the lines rg finds" % name, got == want and e == {} and s is not None,
       (sorted(got ^ want), e))

m, s, e = grep({"path": R, "pattern": "TODO", "contextBefore": 1, "contextAfter": 2})
ok("Grep context lines", len(m) == 1 and m[0]["before"] == ["export function alpha() { return 1; }"] and
   m[0]["after"] == ["const Gamma = 3;", "function delta() {}"] and m[0]["column"] == 4 and m[0]["line"] == 2, m)
m, s, e = grep({"path": R, "pattern": "alpha", "outputMode": "files"})
paths = [x["path"] for x in m]
mt = [os.stat(R + "/" + p).st_mtime_ns for p in paths]
ok("Grep files: paths only, newest first", paths and mt == sorted(mt, reverse=True) and
   all(set(x) == {"path"} for x in m) and s["filesMatched"] == len(paths), (paths, m))
m, s, e = grep({"path": R, "pattern": "line \\d+", "outputMode": "count"})
ok("Grep count", [(x["path"], x["count"]) for x in m] == [("src/lines.txt", 100)], m)
m, s, e = grep({"path": R + "/src/lines.txt", "pattern": "line", "maxCount": 3})
ok("Grep maxCount per file; path may be a file",
   [x["line"] for x in m] == [1, 2, 3] and m[0]["path"] == "lines.txt", m)
m, s, e = grep({"path": R, "pattern": "line", "limit": 5})
ok("Grep limit: exactly that many, summary truncated", len(m) == 5 and s["truncated"] is True, s)
m, s, e = grep({"path": R + "/src/long.txt", "pattern": "alpha at", "maxLineBytes": 100})
ok("Grep maxLineBytes cuts the text and says so",
   len(m) == 1 and len(m[0]["text"]) == 100 and m[0]["textTruncated"] is True and m[0]["column"] == 2002, m)
m, s, e = grep({"path": R, "pattern": "alpha("})
ok("Grep bad pattern: invalid_argument with the offset",
   m == [] and e and e["error"]["code"] == "invalid_argument" and "offset 6" in e["error"]["message"], e)
m, s, e = grep({"path": R, "pattern": "binary", "noIgnore": True})
ok("Grep skips binary files found by the walk and counts them", m == [] and s["binarySkipped"] >= 1, s)
m, s, e = grep({"path": R + "/bin.dat", "pattern": "binary"})
ok("Grep searches a binary file named as the path", len(m) == 1 and m[0]["text"] == "alpha\ufffdbinary", m)
m, s, e = grep({"path": R, "pattern": "x", "outputMode": "lines"})
ok("Grep bad outputMode: invalid_argument", e and e["error"]["code"] == "invalid_argument", e)
m, s, e = grep({"path": R, "pattern": "(a+)+$", "fixedString": False, "include": ["long.txt"]})
ok("Grep: a pattern cannot pin a CPU (a limit, reported)", e == {} or e["error"]["code"] == "resource_exhausted", e)

m, s, e = grep({"path": T + "/withproc", "pattern": "VmRSS", "limit": 100})
ok("Grep does not enter a proc mount below its path", [x["path"] for x in m] == ["plain.txt"] and e == {}, (m[:3], e))
m, s, e = grep({"path": T + "/withproc/proc/self/status", "pattern": "VmRSS"})
ok("but searches it when it is the path", len(m) == 1 and m[0]["text"].startswith("VmRSS"), (m, e))

# ---- the request's user ----
m, s, e = grep({"path": R, "pattern": "alpha", "limit": 10000}, as_user("user"))
got = set(x["path"] for x in m)
ok("Grep as user: a file and a directory only root reads are skipped and counted",
   "secret.ts" not in got and "secret/s.ts" not in got and s["filesSkipped"] >= 2 and
   "src/lib/c.ts" in got, (sorted(got), s))
m, s, e = grep({"path": R, "pattern": "alpha", "limit": 10000})
got = set(x["path"] for x in m)
ok("Grep as root reads them", "secret.ts" in got and "secret/s.ts" in got, sorted(got))
m, s, e = grep({"path": R + "/secret.ts", "pattern": "alpha"}, as_user("user"))
ok("Grep of a file the user may not read: permission_denied", e and e["error"]["code"] == "permission_denied", e)
m, s, e = grep({"path": R + "/secret", "pattern": "alpha"}, as_user("user"))
ok("Grep of a directory the user may not read: permission_denied", e and e["error"]["code"] == "permission_denied", e)
st, d = unary("ReadLines", {"path": R + "/secret.ts"}, as_user("user"))
ok("ReadLines of a file the user may not read: permission_denied", d.get("code") == "permission_denied", d)

# ---- ReadLines and versions ----
st, d = unary("ReadLines", {"path": R + "/src/lines.txt", "offset": 10, "limit": 3})
ok("ReadLines offset and limit", d.get("lines") == ["line 10", "line 11", "line 12"] and d["firstLine"] == 10 and
   d["totalLines"] == 100 and d["truncated"] is True, d)
st, s2 = unary("Stat", {"path": R + "/src/lines.txt"})
ok("ReadLines' version is Stat's", d.get("version") and d["version"] == s2["entry"]["version"], (d, s2))
st, d = unary("ReadLines", {"path": R + "/src/lines.txt", "offset": 99})
ok("ReadLines to the end", d.get("lines") == ["line 99", "line 100"] and "truncated" not in d, d)
st, d = unary("ReadLines", {"path": R + "/src/lines.txt", "maxBytes": 20})
ok("ReadLines maxBytes", d.get("lines") == ["line 1", "line 2", "line 3"] and d["truncated"] is True, d)
st, d = unary("ReadLines", {"path": R + "/bin.dat"})
ok("ReadLines of a binary file: binary, no lines", d.get("binary") is True and "lines" not in d, d)
st, d = unary("ReadLines", {"path": R + "/src"})
ok("ReadLines of a directory: invalid_argument", d.get("code") == "invalid_argument", d)
with open(R + "/latin1.txt", "wb") as fh:
    fh.write("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u00e0 la fa\u00e7on\n".encode("latin-1") + b"\xff" * 40 + b"\nplain\n")
st, d = unary("ReadLines", {"path": R + "/latin1.txt"})
ok("ReadLines of Latin-1 text: each byte that is not UTF-8 is U+FFFD, whole lines",
   d.get("lines") == ["caf\ufffd cr\ufffdme br\ufffdl\ufffde \ufffd la fa\ufffdon", "\ufffd" * 40, "plain"], d)
# the pool keeps its scanners between calls: a long line after short ones
for max_line in (8, 8, 4000, 4000):
    m, summary, end = grep({"path": R + "/latin1.txt", "pattern": "plain", "contextBefore": 1,
                            "maxLineBytes": max_line})
ok("a Grep with long lines after ones with short lines: its context whole", len(m) == 1 and
   m[0].get("before") == ["\ufffd" * 40] and end == {}, (m, end))
f = R + "/src/v.txt"
versions = set()
for i in range(20):
    with open(f, "w") as fh:
        fh.write("v%02d\n" % i)  # same size every time, back to back
    st, d = unary("ReadLines", {"path": f})
    versions.add((d["version"], d["lines"][0]))
ok("every write gets a new version, even within one clock tick", len(set(v for v, _ in versions)) == 20, versions)

# ---- proto and gRPC ----
def pb_str(field, s):
    b = s.encode()
    return bytes([field << 3 | 2, len(b)]) + b
st, data = post("/filesystem.Filesystem/Glob", pb_str(1, R) + pb_str(2, "src/*.ts"), "application/proto")
ok("Glob over Connect proto", st == 200 and (R + "/src/a.ts").encode() in data and
   (R + "/src/b.ts").encode() in data, (st, data[:200]))
req = pb_str(1, R + "/src/a.ts") + pb_str(2, "Gamma")
p = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-X", "POST", "-H", "content-type: application/grpc",
                    "-H", "te: trailers", "--data-binary", "@-", "-D", "-", url + "/filesystem.Filesystem/Grep"],
                   input=b"\0" + struct.pack(">I", len(req)) + req, capture_output=True)
out = p.stdout
ok("Grep over gRPC: a match and the summary, grpc-status 0",
   b"const Gamma = 3;" in out and b"grpc-status: 0" in out, out[-300:])

st, data = post("/filesystem.Filesystem/Grep", b"\0" + struct.pack(">I", len(req)) + req, "application/grpc-web+proto")
fr = frames(data)
ok("Grep over gRPC-Web: a match, the summary, the trailer frame",
   st == 200 and any(b"const Gamma = 3;" in p for f, p in fr if f == 0) and fr and fr[-1][0] == 0x80 and
   b"grpc-status: 0" in fr[-1][1], fr)

# ---- a hung mount under the path ----
os.kill(fuse_pid, signal.SIGSTOP)
try:
    t0 = time.monotonic()
    m, s, e = grep({"path": T, "pattern": "alpha", "limit": 100000}, {"Connect-Timeout-Ms": "1500"})
    took = time.monotonic() - t0
    ok("Grep into a hung mount ends at its deadline: deadline_exceeded",
       e and e.get("error", {}).get("code") == "deadline_exceeded", (e, took))
    st, d = unary("ReadLines", {"path": R + "/src/lines.txt", "limit": 1})
    ok("the rest of envd answers meanwhile", d.get("lines") == ["line 1"], d)
    m, s, e = grep({"path": R + "/src", "pattern": "Gamma"})
    ok("another Grep, off the mount, answers", len(m) == 1 and e == {}, (m, e))
finally:
    os.kill(fuse_pid, signal.SIGCONT)

# ---- a cancelled stream gives back what it held ----
big = T + "/big"
os.makedirs(big)
for i in range(40):
    with open("%s/f%02d.txt" % (big, i), "w") as fh:
        fh.write(("match this line number %d\n" % i) * 20000)
def nfds():
    return len(os.listdir("/proc/%d/fd" % envd_pid))
base_fds = nfds()
s = socket.create_connection((u.hostname, u.port))
body = json.dumps({"path": big, "pattern": "match", "limit": 100000}).encode()
s.sendall(b"POST /filesystem.Filesystem/Grep HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\n"
          b"Content-Length: %d\r\n\r\n" % (len(body) + 5) + b"\0" + struct.pack(">I", len(body)) + body)
s.recv(4096)  # the stream has started; then this client stops reading
def cpu():
    f = open("/proc/%d/stat" % envd_pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
def rss():
    for l in open("/proc/%d/status" % envd_pid):
        if l.startswith("VmRSS"):
            return int(l.split()[1])
rss0 = rss()
deadline = time.monotonic() + HANG
idle = False
while time.monotonic() < deadline and not idle:
    c0 = cpu()
    time.sleep(0.5)
    idle = cpu() == c0
ok("a stream the client does not read: its jobs stop (no CPU) instead of piling up output", idle)
ok("and what waits for the client stays bounded (RSS within 16 MiB)", rss() - rss0 < 16 * 1024, (rss0, rss()))
s.close()
deadline = time.monotonic() + HANG
while nfds() > base_fds and time.monotonic() < deadline:
    time.sleep(0.05)
ok("after the client leaves, every file is closed", nfds() <= base_fds, (base_fds, nfds()))
st, d = unary("ReadLines", {"path": R + "/src/lines.txt", "limit": 1})
ok("and envd answers", d.get("lines") == ["line 1"], d)
PY
while IFS= read -r line; do
	case $line in
	"ok   - "*) pass "${line#ok   - }" ;;
	"FAIL - "*) fail "${line#FAIL - }" ;;
	*) echo "$line" ;;
	esac
done <"$T/out"

# ---- a 1 GiB line: memory stays bounded ----
# (the sanitizer pass, which is slower by far, takes 64 MiB: still 256
# windows of one line; the static pass carries the volume)
LINE_MB=1024
case $ENVD_BIN in *asan*) LINE_MB=64 ;; esac
L=$T/gigaline
head -c $((LINE_MB * 1024 * 1024)) /dev/zero | tr '\0' a >"$L"
echo ' needle' >>"$L"
rss_before=$(awk '/^VmRSS/ {print $2}' "/proc/$ENVD_PID/status")
body="{\"path\":\"$L\",\"pattern\":\"needle\"}"
res=$("$PY" - "$ENVD_URL" "$body" <<'PY'
import http.client, json, struct, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); b = sys.argv[2].encode()
c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
c.request("POST", "/filesystem.Filesystem/Grep", body=b"\0" + struct.pack(">I", len(b)) + b,
          headers={"Content-Type": "application/connect+json"})
data = c.getresponse().read()
i, out = 0, []
while i + 5 <= len(data):
    n = struct.unpack(">I", data[i + 1:i + 5])[0]
    d = json.loads(data[i + 5:i + 5 + n])
    if "match" in d:
        out.append("%d:%d" % (d["match"]["line"], d["match"]["column"]))
    i += 5 + n
print(" ".join(out))
PY
)
rss_peak=$(awk '/^VmHWM/ {print $2}' "/proc/$ENVD_PID/status")
expect_eq "Grep finds the match at the end of a $LINE_MB MiB line" "1:$((LINE_MB * 1024 * 1024 + 2))" "$res"
echo "rss before ${rss_before} KiB, peak ${rss_peak} KiB"
check "memory of a $LINE_MB MiB line search: peak RSS within 32 MiB of where it was" \
	test $((rss_peak - rss_before)) -lt $((32 * 1024))
rl=$(curl -s -X POST "$ENVD_URL/filesystem.Filesystem/ReadLines" -H 'Content-Type: application/json' \
	-d "{\"path\":\"$L\",\"maxBytes\":10}")
expect_eq "ReadLines of a $LINE_MB MiB line: its start, cut, one line" \
	'{"lines":["aaaaaaaaaa"],"firstLine":1,"totalLines":1,"truncated":true' "${rl%%,\"version\"*}"
rss_peak2=$(awk '/^VmHWM/ {print $2}' "/proc/$ENVD_PID/status")
check "ReadLines of it in bounded memory too" test $((rss_peak2 - rss_before)) -lt $((32 * 1024))
rm -f "$L"

finish
