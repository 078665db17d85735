# SPDX-License-Identifier: Apache-2.0
"""Layering check: every #include "dir/file.h" in the layered folders must
point at its own folder or a folder below it, and no two modules (x.c and
x.h count as one) may include each other, directly or through others.

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


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    layers = read_layers(root)
    rank = {d: i for i, d in enumerate(layers)}
    allow = read_allow(root)
    used_allow = set()
    errors = []
    edges = {}  # module -> {module: (file, line, target)}

    for d in layers:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            if not name.endswith((".c", ".h")):
                continue
            src = d + "/" + name
            with open(os.path.join(root, src), encoding="utf-8",
                      errors="replace") as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
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
                a, b = module(src), module(target)
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
