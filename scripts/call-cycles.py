#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Circles of calls between paddock's C files, and calls against the rooms' layering.

File A depends on file B when A's object refers to a global symbol B's object defines (a
call, a callback taken by address, a shared variable): the linker's view, so nothing the
preprocessor or a macro hides is missed. The dependencies of every object of the build
form one graph; a strongly connected component of more than one file is a circle, printed
with the symbols that close it. Exit status 1 when there is one.

The rooms of each program are layered too (docs/architecture.md): ROOMS lists them from the
top down, and a file that calls into a room above its own, or into a sibling room on the
same level, is a breach of the layering, printed and failed like a circle.

usage: call-cycles.py BUILD_DIR [--only DIR]...   (--only sessiond: files under sessiond/)
"""

import argparse
import collections
import os
import subprocess
import sys


# Each program's rooms from the top down; rooms in one tuple share a level and must not
# call each other. A file belongs to the longest prefix that names it; common/ is below all.
ROOMS = [
    ("sessiond/",),  # main, manager, dispatch
    ("sessiond/admin/",),
    ("sessiond/lifecycle/",),
    ("sessiond/exec/",),
    ("sessiond/workspace/", "sessiond/httpc/"),
    ("sessiond/session/",),
    ("sessiond/core/",),
    ("sessiond/sandbox/",),
    ("sessiond/init/",),  # paddock-init, a program of its own
    ("fcgi-app/",),  # main, server
    ("fcgi-app/otari/", "fcgi-app/code/", "fcgi-app/mcp/"),
    ("fcgi-app/http/",),
    ("ctl/",),
    ("common/",),
]


def room_of(path):
    """(level, room) of a file: the entry of ROOMS with the longest prefix naming it."""
    best = None
    for level, rooms in enumerate(ROOMS):
        for r in rooms:
            if path.startswith(r) and (best is None or len(r) > len(best[1])):
                best = (level, r)
    return best


def breaches(g):
    """[(file, dependency, symbols)] that call a room above their own, or a sibling room."""
    out = []
    for src, deps in sorted(g.items()):
        a = room_of(src)
        for dst, syms in sorted(deps.items()):
            b = room_of(dst)
            if not a or not b or a[1] == b[1]:
                continue
            if b[1] == "common/":
                continue  # every room may use what the programs share
            same_program = a[1].split("/")[0] == b[1].split("/")[0]
            if not same_program or b[0] <= a[0]:
                out.append((src, dst, syms))
    return out


def objects(build):
    """{source path relative to the tree: object path} for the objects the build links now
    (each target's link command names them; stale objects of moved files are left out)."""
    out = {}
    cmf = os.path.join(build, "CMakeFiles")
    for target in sorted(os.listdir(cmf)):
        link = os.path.join(cmf, target, "link.txt")
        if not target.endswith(".dir") or not os.path.exists(link):
            continue
        with open(link) as f:
            words = [w.strip("\"'") for w in f.read().split()]
        for w in words:
            if not w.endswith(".c.o") or ".dir/" not in w:
                continue
            rel = w.split(".dir/", 1)[1][:-2]
            if rel.startswith(("tests/", "bench/")) or rel == "schema_embed.c":
                continue
            out[rel] = os.path.join(build, w)
    return out


def symbols(obj):
    """(defined, undefined) global symbol names of one object."""
    r = subprocess.run(["nm", "-g", obj], capture_output=True, text=True, check=True)
    defined, undefined = set(), set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    return defined, undefined


def graph(objs):
    """{file: {file it depends on: [symbols]}}."""
    defs, uses = {}, {}
    for src, obj in objs.items():
        d, u = symbols(obj)
        uses[src] = u
        for s in d:
            defs.setdefault(s, src)
    g = {src: collections.defaultdict(list) for src in objs}
    for src, u in uses.items():
        for s in sorted(u):
            dst = defs.get(s)
            if dst and dst != src:
                g[src][dst].append(s)
    return g


def components(g):
    """Strongly connected components (Tarjan), each a sorted list of files."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    objs = objects(a.build)
    if not objs:
        sys.exit(f"no objects under {a.build}/CMakeFiles: build first")
    g = graph(objs)
    circles = [c for c in components(g) if len(c) > 1
               and (not a.only or any(f.startswith(tuple(a.only)) for f in c))]
    for c in circles:
        print(f"circle of {len(c)} files:")
        members = set(c)
        for f in c:
            for dst, syms in sorted(g[f].items()):
                if dst in members:
                    print(f"  {f} -> {dst}: {', '.join(syms[:4])}{' ...' if len(syms) > 4 else ''}")
    up = [b for b in breaches(g) if not a.only or b[0].startswith(tuple(a.only))]
    for src, dst, syms in up:
        print(f"calls up: {src} -> {dst}: {', '.join(syms[:4])}{' ...' if len(syms) > 4 else ''}")
    print(f"{len(objs)} files, {sum(len(v) for v in g.values())} dependencies, "
          f"{len(circles)} circles, {len(up)} calls up")
    sys.exit(1 if circles or up else 0)


if __name__ == "__main__":
    main()
