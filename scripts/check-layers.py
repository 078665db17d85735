# SPDX-License-Identifier: Apache-2.0
"""Layering check: every #include "dir/file.h" in the layered folders must
point at its own folder or a folder below it, and no two modules may
include each other, directly or through others, across folders or inside
one. A module is x.c with x.h; a header without a .c is a module of its
own; a .c without a header is part of the one header it implements (the
header that declares what it defines: rpc/connect.c implements rpc/rpc.h).

So that the includes show every dependency, a function or variable is
declared only in the header of the module that defines it: a header that
declares what another module defines (process_int.h declaring keep.c's
functions once hid a circle) and a .c that declares for itself what
another module defines both fail, as does a .c without a header that
implements two.

The layer order is read from docs/architecture.md (a line
"layers: base proto ..." inside a fenced block), so the document and the
check cannot drift apart. Known exceptions live in scripts/layers-allow.txt,
one "from/file.c -> to/file.h" edge a line; '#' starts a comment.

Usage: check-layers.py [ROOT]   (exit 0 clean, 1 violations, 2 bad setup)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# --- top-level names of a C file (enough of C for this tree) ---

TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\.\.\.|->|\S")
IDENT = re.compile(r"[A-Za-z_]\w*$")
NOT_NAMES = {"__attribute__", "__attribute", "sizeof", "_Alignof", "alignof", "__typeof__",
             "typeof", "__asm__", "asm", "_Alignas", "__extension__"}

def strip_c(text):
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    lines, cont = [], False
    for line in "".join(out).split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            line = ""
        lines.append(line)
    return lines

def declarator_name(toks):
    """('fn'|'var', name) of one declarator, or (None, None)."""
    depth = 0
    for i, t in enumerate(toks):
        if t == "(":
            if depth == 0:
                if i + 1 < len(toks) and toks[i + 1] == "*":
                    for u in toks[i + 2:]:
                        if u == ")":
                            break
                        if IDENT.match(u) and u not in ("const", "volatile", "restrict"):
                            return "var", u
                prev = toks[i - 1] if i else None
                if prev and IDENT.match(prev) and prev not in NOT_NAMES:
                    return "fn", prev
            depth += 1
        elif t == ")":
            depth -= 1
        elif depth == 0 and t in ("=", "["):
            break
    name, depth = None, 0
    for t in toks:
        if t in ("(", "["):
            depth += 1
        elif t in (")", "]"):
            depth -= 1
        elif t == "=" and depth == 0:
            break
        elif depth == 0 and IDENT.match(t) and t not in NOT_NAMES:
            name = t
    return ("var", name) if name else (None, None)

def scan(text):
    """Top-level names of a C file: (defs, decls), each {name: (kind, line)}.
    defs: non-static functions with a body and variables defined here;
    decls: non-static declarations without a definition (prototypes,
    extern variables)."""
    toks = []
    for no, line in enumerate(strip_c(text), 1):
        toks.extend((m.group(0), no) for m in TOKEN.finditer(line))
    defs, decls = {}, {}

    def statement(stmt, body):
        words = [w for w, _ in stmt]
        if not words or words[0] in ("typedef", "_Static_assert"):
            return
        if "{}" in words:  # struct/union/enum body: declarators follow it
            k = len(words) - 1 - words[::-1].index("{}")
            head, words = words[:k + 1], words[k + 1:]
        else:
            head = []
            if len(words) == 2 and words[0] in ("struct", "union", "enum"):
                return  # a forward declaration
        if not words:
            return
        static = "static" in words or "static" in head
        extern = "extern" in words or "extern" in head
        parts, depth, start = [], 0, 0
        for k, w in enumerate(words):
            if w in "([{":
                depth += 1
            elif w in ")]}":
                depth -= 1
            elif w == "," and depth == 0:
                parts.append(words[start:k])
                start = k + 1
        parts.append(words[start:])
        for part in parts:
            kind, name = declarator_name(part)
            if not name or static:
                continue
            if body:
                defs[name] = ("fn", stmt[0][1])
            elif kind == "fn" or extern:
                decls.setdefault(name, (kind, stmt[0][1]))
            else:
                defs[name] = ("var", stmt[0][1])

    stmt, i = [], 0
    while i < len(toks):
        t, no = toks[i]
        if t == "{":
            words = [w for w, _ in stmt]
            j, depth = i, 0
            while j < len(toks):
                if toks[j][0] == "{":
                    depth += 1
                elif toks[j][0] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            is_fn = bool(words) and words[-1] == ")" and "=" not in words
            if is_fn:
                statement(stmt, True)
                stmt = []
            elif "=" not in words:
                stmt.append(("{}", no))
            i = j + 1
            continue
        if t == ";":
            statement(stmt, False)
            stmt = []
        else:
            stmt.append((t, no))
        i += 1
    for name in list(decls):
        if name in defs:
            del decls[name]
    return defs, decls



def read_layers(root):
    path = os.path.join(root, "docs", "architecture.md")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit("check-layers: cannot read %s: %s" % (path, e.strerror))
    in_fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        m = re.match(r"^layers:\s+(.+)$", line.strip())
        if in_fence and m:
            return m.group(1).split()
    print("check-layers: no fenced 'layers: ...' line in docs/architecture.md",
          file=sys.stderr)
    sys.exit(2)


def read_allow(root):
    allow = set()
    path = os.path.join(root, "scripts", "layers-allow.txt")
    if not os.path.exists(path):
        return allow
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split("->")]
            if len(parts) != 2 or not all(parts):
                print("check-layers: %s:%d: expected 'from -> to'" % (path, n),
                      file=sys.stderr)
                sys.exit(2)
            allow.add((parts[0], parts[1]))
    return allow


def module(path):
    return os.path.splitext(path)[0]


def modules_and_declarations(files, errors):
    """Which module each file belongs to ({file: module}), after checking
    that every declaration sits in the header of the module that defines
    it. files: {file: text} of the layered folders."""
    names = {f: scan(text) for f, text in files.items()}
    defined = {}  # name -> [.c files defining it]
    for f in sorted(files):
        if f.endswith(".c"):
            for name in names[f][0]:
                defined.setdefault(name, []).append(f)
    of = {f: module(f) for f in files}
    # A .c without a header of its own is part of the header it implements.
    for f in sorted(files):
        if not f.endswith(".c") or module(f) + ".h" in files:
            continue
        mine = set(names[f][0])
        heads = sorted(h for h in files if h.endswith(".h") and mine & set(names[h][1]))
        if len(heads) == 1:
            of[f] = module(heads[0])
        elif heads:
            errors.append("%s has no header of its own and implements %s: give it %s.h"
                          % (f, ", ".join(heads), module(f)))
    for f in sorted(files):
        for name, (kind, line) in sorted(names[f][1].items(), key=lambda x: x[1][1]):
            where = defined.get(name, [])
            if not where or any(of[c] == of[f] for c in where):
                continue  # defined outside the layers (libc), or its own
            what = "function" if kind == "fn" else "variable"
            if f.endswith(".h"):
                errors.append("%s:%d declares %s %s, which %s defines: a module's "
                              "functions and variables are declared in its own header"
                              % (f, line, what, name, where[0]))
            else:
                errors.append("%s:%d declares %s %s, which %s defines: include the "
                              "header that declares it" % (f, line, what, name, where[0]))
    return of


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    layers = read_layers(root)
    rank = {d: i for i, d in enumerate(layers)}
    allow = read_allow(root)
    used_allow = set()
    errors = []
    edges = {}  # module -> {module: (file, line, target)}

    files = {}
    for d in layers:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            if name.endswith((".c", ".h")):
                with open(os.path.join(top, name), encoding="utf-8",
                          errors="replace") as f:
                    files[d + "/" + name] = f.read()
    of = modules_and_declarations(files, errors)

    for src in sorted(files):
        d = src.split("/", 1)[0]
        for n, line in enumerate(files[src].splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if "/" not in target:
                if target.endswith(".pb-c.h"):
                    continue  # generated, flat, below every layer
                errors.append("%s:%d: #include \"%s\" does not name its folder"
                              % (src, n, target))
                continue
            tdir = target.split("/", 1)[0]
            if (src, target) in allow:
                used_allow.add((src, target))
                continue
            if tdir not in rank:
                errors.append("%s:%d: #include \"%s\": folder %s is not a layer"
                              % (src, n, target, tdir))
                continue
            if rank[tdir] > rank[d]:
                errors.append("%s:%d: #include \"%s\": layer %s may not include %s "
                              "(order: %s)" % (src, n, target, d, tdir,
                                               " < ".join(layers)))
            a, b = of[src], of.get(target, module(target))
            if a != b:
                edges.setdefault(a, {}).setdefault(b, (src, n, target))

    # Cycles: strongly connected components of the module graph (Tarjan).
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    for comp in sccs:
        members = set(comp)
        links = []
        for a in comp:
            for b, (src, n, target) in sorted(edges.get(a, {}).items()):
                if b in members:
                    links.append("%s:%d includes \"%s\"" % (src, n, target))
        errors.append("include cycle between %s: %s"
                      % (", ".join(comp), "; ".join(links)))

    for src, target in sorted(allow - used_allow):
        print("check-layers: note: allowed edge %s -> %s no longer exists; "
              "remove it from scripts/layers-allow.txt" % (src, target))
    for src, target in sorted(used_allow):
        print("check-layers: allowed (scripts/layers-allow.txt): %s -> %s"
              % (src, target))
    for e in errors:
        print("check-layers: " + e, file=sys.stderr)
    if errors:
        print("check-layers: %d violation(s)" % len(errors), file=sys.stderr)
        return 1
    print("check-layers: ok (%s)" % " < ".join(layers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
