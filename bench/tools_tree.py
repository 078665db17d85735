#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A generated git checkout for the agent-tools benchmark: about N files, of
# which two thirds are a node_modules-like tree the .gitignore leaves out,
# the rest sources (.ts, .js, .json, .md) of realistic line lengths.
# Deterministic; a stamp file makes a second run free.
#
#   tools_tree.py DIR N
# Exactly 20 source files hold the token "zqxjTOKEN" once (the SDK
# figure's 20 matches), all under src/mod000/ (one module of about 200
# files: what an agent searches in a project); node_modules never does.
import os, random, sys

root, n = sys.argv[1], int(sys.argv[2])
stamp = os.path.join(root, ".bench-stamp")
VERSION = "%d:2" % n
if os.path.exists(stamp) and open(stamp).read() == VERSION:
    sys.exit(0)
rnd = random.Random(42)
words = ["const", "let", "function", "return", "import", "export", "from", "async", "await", "if", "else",
         "for", "while", "new", "this", "value", "result", "data", "config", "options", "handler", "request",
         "response", "error", "user", "item", "index", "length", "string", "number", "Promise", "Array",
         "Object", "Map", "Set", "JSON", "parse", "stringify", "console", "log", "push", "filter", "map"]
types = ["Error", "Exception", "Handler", "Service", "Client", "Config", "Manager", "Builder"]

def line():
    k = rnd.randint(2, 14)
    s = " ".join(rnd.choice(words) for _ in range(k))
    if rnd.random() < 0.05:
        s += " throw new %s%s(msg)" % (rnd.choice(["Io", "Parse", "Network", "Timeout", "Auth"]), rnd.choice(types))
    if rnd.random() < 0.02:
        s = "// TODO: " + s
    return "  " * rnd.randint(0, 4) + s + ";\n"

def body(lines):
    return "".join(line() for _ in range(lines))

import shutil
shutil.rmtree(os.path.join(root, "src"), ignore_errors=True)
shutil.rmtree(os.path.join(root, "node_modules"), ignore_errors=True)
os.makedirs(os.path.join(root, ".git"), exist_ok=True)
with open(os.path.join(root, ".git", "HEAD"), "w") as f:
    f.write("ref: refs/heads/main\n")
with open(os.path.join(root, ".gitignore"), "w") as f:
    f.write("node_modules/\ndist/\n*.log\ncoverage/\n")
nm = n * 2 // 3
src = n - nm
made = 0
# node_modules: packages of 20-60 files in nested directories
p = 0
while made < nm:
    pkg = os.path.join(root, "node_modules", "pkg%04d" % p)
    files = rnd.randint(20, 60)
    for i in range(files):
        d = os.path.join(pkg, "lib", "sub%d" % (i % 5))
        os.makedirs(d, exist_ok=True)
        ext = rnd.choice([".js", ".js", ".ts", ".d.ts", ".json", ".md"])
        with open(os.path.join(d, "f%03d%s" % (i, ext)), "w") as f:
            f.write(body(rnd.randint(10, 80)))
        made += 1
    p += 1
# sources: modules of 10-30 files
token_files = set(rnd.sample(range(min(src, 150)), 20))
m = 0
k = 0
while k < src:
    d = os.path.join(root, "src", "mod%03d" % (m // 10), "part%02d" % (m % 10))
    os.makedirs(d, exist_ok=True)
    for i in range(rnd.randint(10, 30)):
        if k >= src:
            break
        ext = rnd.choice([".ts", ".ts", ".ts", ".js", ".json", ".md"])
        text = body(rnd.randint(20, 120))
        if k in token_files:
            text += "const marker = 'zqxjTOKEN';\n"
        with open(os.path.join(d, "file%02d%s" % (i, ext)), "w") as f:
            f.write(text)
        k += 1
    m += 1
with open(os.path.join(root, "build.log"), "w") as f:
    f.write(body(1000))
with open(stamp, "w") as f:
    f.write(VERSION)
