#!/usr/bin/env python3
"""caliper — the library's structure, checked from what the linker sees.

The file graph of lib/ is read from the object files: file A depends on file
B when A's object leaves a symbol undefined (nm "U") that B's object defines,
so a call counts whether or not a header was included for it. Three rules:

  circle   no two files of lib/ depend on each other, directly or round a
           loop (a strongly connected set of more than one file);
  layer    no file depends on a file of a higher layer (LAYERS below);
  size     no .c or .h file of the tree is over 1,000 lines (tests and the
           engine's tables excepted).

The layers, lowest first, as the code stands (README's source tour):

  1 util       buffers, clock, units, errors, UTF-8, JSON readers
  2 platform   the OS calls (process spawn, fds, /proc);
    analysis   pure functions: statistics, histograms, fits, formulas, gguf
  3 probe      the HTTP/SSE client and its event loops (percentiles: stats)
  4 store      SQLite and the schema table (writes histograms: hist);
    proxy      the recording proxy;  workload: prompts, lengths, datasets
  5 telemetry  sampler and backends;  watch: /metrics;  ops: operating points
  6 protocol   shots, runs, targets, recorder, keep, shards
  7 report     results, compare, the outputs

ARCHITECTURE.md draws the data's one-way flow (probe -> store -> analysis
-> report); the calls differ in one place: analysis is pure functions over
numbers, so the probe and the store call it, and it calls nothing above
util. The noise priors, which read runs from the store and pool their
shots, are the protocol's (lib/protocol/noise.c).

Files of one layer may depend on each other (never in a circle). Known,
still-open breaks are listed in scripts/check-layers.allow, one a line, each
marked temporary; an exception that no longer matches is reported (so it can
be deleted) but does not fail.

Usage:
  check-layers.py [--objs DIR] [--nm-listing FILE] [--allow FILE] [--root DIR]
                  [--no-size]
  --objs DIR         object tree of lib/ (default build/obj/lib): nm is run on
                     every .o under it
  --nm-listing FILE  read `nm -A` output from FILE instead of running nm
                     (lines "PATH.o: ADDR TYPE NAME" or "PATH.o:  U NAME")
  --allow FILE       the exceptions (default scripts/check-layers.allow)
  --root DIR         the tree the size rule walks (default .)
Exit 0 when every rule holds, 1 naming each break, 2 on bad usage.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

LAYERS = [
    ["util"],
    ["platform", "analysis"],
    ["probe"],
    ["store", "proxy", "workload"],
    ["telemetry", "watch", "ops"],
    ["protocol"],
    ["report"],
]
LAYER_OF = {m: i + 1 for i, ms in enumerate(LAYERS) for m in ms}
MAX_LINES = 1000
# Trees the size rule walks, and what it leaves out: tests (fixtures and
# exhaustive cases), build output, and generated tables.
SIZE_DIRS = ["lib", "src", "include", "engine", "server", "bench", "examples"]
SIZE_SKIP = re.compile(r"(^|/)(tests|build)/|_table\.[ch]$|_tables\.[ch]$")


def source_of(obj):
    """build/obj/lib/report/json.o -> lib/report/json.c"""
    p = obj.replace("\\", "/")
    i = p.rfind("lib/")
    if i < 0:
        return None
    p = p[i:]
    return p[:-2] + ".c" if p.endswith(".o") else p


def read_nm(lines):
    """defined: name -> set(files); undefined: file -> set(names)."""
    defined, undefined = {}, {}
    for line in lines:
        line = line.rstrip("\n")
        m = re.match(r"^(.*?\.o):\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z?])\s+(\S+)$", line)
        if not m:
            continue
        src = source_of(m.group(1))
        if not src:
            continue
        kind, name = m.group(2), m.group(3)
        undefined.setdefault(src, set())
        if kind == "U":
            undefined[src].add(name)
        elif kind.isupper() or kind in "vw":
            defined.setdefault(name, set()).add(src)
    return defined, undefined


def graph(defined, undefined):
    """edges: (a, b) -> sorted names a takes from b. A name defined by more
    than one file (one per platform, say) ties to none of them."""
    edges = {}
    for a, names in undefined.items():
        for n in names:
            owners = defined.get(n, set())
            if len(owners) != 1:
                continue
            b = next(iter(owners))
            if b != a:
                edges.setdefault((a, b), set()).add(n)
    return {k: sorted(v) for k, v in edges.items()}


def circles(nodes, edges):
    """Strongly connected sets of more than one file (Tarjan, iterative)."""
    succ = {n: [] for n in nodes}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on.add(v)
            ws = sorted(succ[v])
            if i < len(ws):
                work.append((v, i + 1))
                w = ws[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            for w in ws:
                if w in on:
                    low[v] = min(low[v], low[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def layer(path):
    parts = path.split("/")
    return LAYER_OF.get(parts[1]) if len(parts) > 2 and parts[0] == "lib" else None


def read_allow(path):
    """Lines: 'circle F F...', 'arrow A B' (A, B may be fnmatch patterns:
    lib/store/*), 'size F', each with 'temporary' in its comment. Returns the three sets, or raises ValueError."""
    allow = {"circle": set(), "arrow": set(), "size": set()}
    if not path or not os.path.exists(path):
        return allow
    with open(path, encoding="utf-8") as f:
        for no, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            body, _, comment = line.partition("#")
            if "temporary" not in comment.lower():
                raise ValueError("%s:%d: an exception must say it is temporary "
                                 "(# temporary: why)" % (path, no))
            w = body.split()
            if not w or w[0] not in allow:
                raise ValueError("%s:%d: \"%s\" is not circle, arrow or size" %
                                 (path, no, w[0] if w else ""))
            if w[0] == "circle" and len(w) >= 3:
                allow["circle"].add(frozenset(w[1:]))
            elif w[0] == "arrow" and len(w) == 3:
                allow["arrow"].add((w[1], w[2]))
            elif w[0] == "size" and len(w) == 2:
                allow["size"].add(w[1])
            else:
                raise ValueError("%s:%d: wrong number of files for %s" % (path, no, w[0]))
    return allow


def oversized(root):
    out = []
    for d in SIZE_DIRS:
        for dirpath, dirs, files in os.walk(os.path.join(root, d)):
            dirs.sort()
            for fn in sorted(files):
                if not fn.endswith((".c", ".h")):
                    continue
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, root).replace("\\", "/")
                if SIZE_SKIP.search(rel):
                    continue
                with open(full, "rb") as f:
                    n = sum(1 for _ in f)
                if n > MAX_LINES:
                    out.append((rel, n))
    return out


def main():
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("--objs", default="build/obj/lib")
    ap.add_argument("--nm-listing")
    ap.add_argument("--allow", default="scripts/check-layers.allow")
    ap.add_argument("--root", default=".")
    ap.add_argument("--no-size", action="store_true")
    a = ap.parse_args()

    if a.nm_listing:
        with open(a.nm_listing, encoding="utf-8") as f:
            lines = f.readlines()
    else:
        # an object whose source is gone (a renamed file) is stale: left out
        objs = sorted(os.path.join(dp, fn) for dp, _, fs in os.walk(a.objs)
                      for fn in fs if fn.endswith(".o")
                      and os.path.exists(os.path.join(a.root, source_of(os.path.join(dp, fn)) or "")))
        if not objs:
            print("check-layers: --objs: no object files under %s (run make first)" % a.objs,
                  file=sys.stderr)
            return 2
        r = subprocess.run(["nm", "-A"] + objs, capture_output=True, text=True)
        if r.returncode != 0:
            print("check-layers: nm failed: %s" % r.stderr.strip(), file=sys.stderr)
            return 2
        lines = r.stdout.splitlines()
    try:
        allow = read_allow(a.allow)
    except ValueError as e:
        print("check-layers: %s" % e, file=sys.stderr)
        return 2

    defined, undefined = read_nm(lines)
    edges = graph(defined, undefined)
    nodes = set(undefined) | {f for fs in defined.values() for f in fs}
    fails, used = [], set()

    for c in circles(nodes, edges):
        key = frozenset(c)
        if key in allow["circle"]:
            used.add(("circle", key))
            continue
        ties = ["  %s -> %s: %s" % (x, y, ", ".join(edges[(x, y)][:6]))
                for x in c for y in c if (x, y) in edges]
        fails.append("circle: %s\n%s" % (" <-> ".join(c), "\n".join(ties)))

    for (x, y), names in sorted(edges.items()):
        lx, ly = layer(x), layer(y)
        if lx is None or ly is None or lx >= ly:
            continue
        hit = [p for p in allow["arrow"] if fnmatch.fnmatchcase(x, p[0]) and fnmatch.fnmatchcase(y, p[1])]
        if hit:
            used.update(("arrow", p) for p in hit)
            continue
        fails.append("layer: %s (layer %d) -> %s (layer %d): %s" %
                     (x, lx, y, ly, ", ".join(names[:6])))

    if not a.no_size:
        for rel, n in oversized(a.root):
            if rel in allow["size"]:
                used.add(("size", rel))
                continue
            fails.append("size: %s has %d lines (over %d)" % (rel, n, MAX_LINES))

    for kind in ("circle", "arrow", "size"):
        for x in sorted(allow[kind], key=lambda v: str(sorted(v)) if kind == "circle" else str(v)):
            if (kind, x) not in used and not (kind == "size" and a.no_size):
                shown = " ".join(sorted(x)) if kind == "circle" else " ".join(x) if kind == "arrow" else x
                print("check-layers: stale exception (no longer needed, delete it): %s %s" %
                      (kind, shown), file=sys.stderr)

    for f in fails:
        print(f)
    print("check-layers: %d files, %d arrows, %d breaks" % (len(nodes), len(edges), len(fails)),
          file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
