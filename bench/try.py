#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A try run's commit beside `cp -a` of the same changed files, on the same
# warm tree, in the same run (docs/try.md).
#
#   try.py PORT TREE ROUNDS N_MOD N_NEW
# Each round: a try over TREE (its N files stay where they are) appends a
# line to N_MOD files, writes N_NEW new files of about 2 KiB in 10 new
# directories, deletes 1 % of N_MOD files and chmods as many; CommitTry is
# timed from the request to its answer (curl). Then the files that commit
# wrote are copied (untimed) to a scratch directory and `cp -a` of that
# directory back over the tree is timed: what a plain copy of the changed
# files costs. Best of ROUNDS for each side; the two alternate. Afterwards
# the tree is put back as it was (new directories removed, deleted files
# written again), so a cached tree serves the next run.
# Prints one JSON line: commit_s, cp_s, files, per-round times, errors.
import json, os, shutil, struct, subprocess, sys, tempfile, time

port, tree, rounds, n_mod, n_new = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
url = "http://127.0.0.1:%s/process.Process/" % port
tmp = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(tree)))
errors = 0
tag = "%d" % os.getpid()

files = []
for d, dirs, names in os.walk(tree):
    dirs.sort()
    if ".git" in dirs:
        dirs.remove(".git")
    for n in sorted(names):
        files.append(os.path.relpath(os.path.join(d, n), tree))
files = [f for f in files if not f.startswith(".bench")]

def post(method, msg, stream=False):
    b = json.dumps(msg).encode()
    body = b"\0" + struct.pack(">I", len(b)) + b if stream else b
    r = subprocess.run(["curl", "-s", "--max-time", "3600", "-X", "POST", "--data-binary", "@-", "-H",
                        "content-type: " + ("application/connect+json" if stream else "application/json"),
                        "-w", "\n%{http_code}", url + method], input=body, capture_output=True)
    out, _, code = r.stdout.rpartition(b"\n")
    return int(code or 0), out

def start_pid(out):
    i = 0
    while i + 5 <= len(out):
        k = struct.unpack(">I", out[i + 1:i + 5])[0]
        d = json.loads(out[i + 5:i + 5 + k])
        if "event" in d and "start" in d["event"]:
            return d["event"]["start"]["pid"]
        i += 5 + k
    return None

res = {"commit_rounds_s": [], "cp_rounds_s": [], "files": n_mod + n_new, "modified": n_mod, "new": n_new,
       "tree_files": len(files)}
saved = {}
for r in range(rounds):
    step = max(1, len(files) // (n_mod + 1))
    mod = [files[(r + 1 + i * step) % len(files)] for i in range(n_mod)]
    gone = mod[: max(1, n_mod // 100)]
    mod = mod[len(gone):]
    chm = mod[: max(1, n_mod // 100)]
    for p in gone:
        with open(os.path.join(tree, p), "rb") as f:
            saved[p] = f.read()
    new = ["try-new-%s-%d/d%d/f%04d.txt" % (tag, r, i % 10, i) for i in range(n_new)]
    script = os.path.join(tmp, "round%d.sh" % r)
    with open(script, "w") as f:
        f.write("set -e\ncd %s\n" % tree)
        for p in mod:
            f.write("echo 'round %d' >> '%s'\n" % (r, p))
        for d in sorted({os.path.dirname(p) for p in new}):
            f.write("mkdir -p '%s'\n" % d)
        f.write("for p in %s; do head -c 2048 /dev/urandom | base64 > \"$p\"; done\n" % " ".join(new))
        for p in gone:
            f.write("rm -f '%s'\n" % p)
        for p in chm:
            f.write("chmod u+x '%s'\n" % p)
    code, out = post("Start", {"process": {"cmd": "/bin/sh", "args": [script], "cwd": tree},
                                "tryRun": {"paths": [tree]}}, stream=True)
    pid = start_pid(out)
    if code != 200 or not pid or b"\"exitCode\"" in out:
        sys.stderr.write("start: %d %s\n" % (code, out[-600:]))
        errors += 1
        break
    # Both sides start with nothing dirty to write back.
    subprocess.run(["sync"])
    t0 = time.perf_counter()
    code, out = post("CommitTry", {"pid": pid})
    dt = time.perf_counter() - t0
    if code != 200:
        errors += 1
        sys.stderr.write("commit: %d %s\n" % (code, out[:300]))
        break
    res["commit_rounds_s"].append(dt)
    # The same files as the commit wrote them, copied back with cp -a.
    src = os.path.join(tmp, "src%d" % r)
    for p in mod + new:
        os.makedirs(os.path.join(src, os.path.dirname(p)), exist_ok=True)
        shutil.copy2(os.path.join(tree, p), os.path.join(src, p))
    subprocess.run(["sync"])
    t0 = time.perf_counter()
    rc = subprocess.run(["cp", "-a", src + "/.", tree + "/"]).returncode
    res["cp_rounds_s"].append(time.perf_counter() - t0)
    if rc:
        errors += 1
    shutil.rmtree(src)
    files = [f for f in files if f not in set(gone)]

for p, data in saved.items():
    with open(os.path.join(tree, p), "wb") as f:
        f.write(data)
for d in os.listdir(tree):
    if d.startswith("try-new-%s-" % tag):
        shutil.rmtree(os.path.join(tree, d), ignore_errors=True)
res["commit_s"] = min(res["commit_rounds_s"]) if res["commit_rounds_s"] else None
res["cp_s"] = min(res["cp_rounds_s"]) if res["cp_rounds_s"] else None
res["errors"] = errors
shutil.rmtree(tmp, ignore_errors=True)
print(json.dumps(res))
