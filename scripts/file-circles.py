#!/usr/bin/env python3
"""Finds import circles between the files of each crate: a file that imports a
file that (directly or through others) imports it back.

An edge A -> B is a path in A's code (a `use`, or an inline path) that names an
item of B: `crate::...`, `super::...` or `self::...`, resolved to the file of
the longest module prefix it names. A module reaching into its own descendants
(declaring them, re-exporting their items) is not an edge: that is how Rust
builds a module tree, and a parent is read before its children.

Usage: scripts/file-circles.py [CRATE_DIR...]   (default: every crates/*)
Prints each circle's files and exits 1 when there is any, except the ones
listed in ALLOWED (each with its reason in the module doc of its files).
"""

import re
import sys
from pathlib import Path

# Circles kept on purpose, by crate and files (sorted); say why in the files' module docs.
ALLOWED = {
    # toolgate-protocol: a message type and its strict parser are one unit; the
    # parser builds the types and the types' Deserialize calls the parser.
    ("toolgate-protocol", ("message.rs", "parse.rs")),
}

PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
USE_TREE = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::\{([^;]*)\};", re.S)
COMMENT = re.compile(r"//[^\n]*")


def module_of(src: Path, file: Path) -> tuple:
    """The module path of a source file: lib.rs is (), a/mod.rs and a.rs are ('a',)."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts and parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def brace_paths(base: str, rest: str, body: str):
    """The paths of `use base::rest::{a, b::c, d::{e, f}}`, flattened."""
    prefix = (base + rest).split("::")
    depth, start, items = 0, 0, []
    for i, ch in enumerate(body + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    for item in items:
        if not item:
            continue
        if "{" in item:
            head, inner = item.split("{", 1)
            head = head.rstrip(":").strip()
            yield from brace_paths(base, rest + ("::" + head if head else ""), inner.rsplit("}", 1)[0])
        else:
            yield prefix + item.split(" as ")[0].strip().split("::")


def resolve(path: list, here: tuple, modules: dict):
    """The file a path names: the longest module prefix of its absolute form."""
    absolute = list(here) if path[0] in ("super", "self") else []
    rest = path
    if path[0] == "crate":
        rest = path[1:]
    while rest and rest[0] in ("super", "self"):
        if rest[0] == "super":
            if not absolute:
                return None
            absolute.pop()
        rest = rest[1:]
    absolute += [part for part in rest if part != "self"]
    for end in range(len(absolute), -1, -1):
        if tuple(absolute[:end]) in modules:
            return tuple(absolute[:end])
    return None


def circles(crate: Path):
    src = crate / "src"
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    edges = {m: set() for m in modules}
    for module, file in modules.items():
        text = COMMENT.sub("", file.read_text())
        paths = [m.group(0).split("::") for m in PATH.finditer(text)]
        for m in USE_TREE.finditer(text):
            paths.extend(brace_paths(m.group(1), m.group(2), m.group(3)))
        for path in paths:
            target = resolve(path, module, modules)
            # A module's own descendants (and itself) are not edges.
            if target is None or target[: len(module)] == module:
                continue
            edges[module].add(target)
    return strongly_connected(edges), modules


def strongly_connected(edges):
    """Tarjan's algorithm: the components of more than one module."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def main(args):
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in args] or sorted(p for p in (root / "crates").iterdir() if (p / "src").is_dir())
    found = kept = 0
    for crate in crates:
        components, modules = circles(crate)
        for component in components:
            names = tuple(sorted(str(modules[m].relative_to(crate / "src")) for m in component))
            if (crate.name, names) in ALLOWED:
                kept += 1
                continue
            found += 1
            print(f"{crate.name}: {' <-> '.join(names)}")
    print(f"file circles: {found} (and {kept} listed in ALLOWED)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
