#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a circle.

Why: layers are only layers while their dependencies point one way. The
compiler allows cycles between the modules of one crate, so the test
command runs this check (scripts/test.sh).

What counts as an import: every `crate::`, `super::` and `self::` path in
a module's code (in `use` lines, brace groups included, and inline), up to
its first `#[cfg(test)]` line (unit tests may reach anywhere). A path
resolves to the deepest module file it names. A child naming one of its
ancestors is not counted (a `mod.rs` holds what its children share).

A crate may also declare its layers in a file `layers.txt` beside its
Cargo.toml:

    layers: server > coordinator > replica > partition > cluster > runtime
    apart: server::handlers server::http

`layers` lists modules top to bottom: a module (with its children)
imports nothing from a layer above its own. Several modules separated by
spaces share a layer (`kafka counters runtime`: they may import each
other, cycles aside). `apart` names modules that never import each
other. Once a crate declares layers, every top-level module of its src/
must be named in them, so no module escapes the check.

Usage: scripts/import-cycles.py [REPO] | --self-test ; --self-test shows
on a made-up crate that each kind of fault is caught (run by the test
command before the real check).

scripts/import-cycles.py [REPO] : prints each cycle with the
imports that close it, and each import against a declared layer; exits 1
if there is one.
"""
import os
import re
import sys

PATH_START = re.compile(r"\b(crate|super|self)::")
IDENT = re.compile(r"\w+")


def module_files(src):
    """{module path tuple: file} for a crate's src/ (binaries under
    src/bin are crates of their own and left out)."""
    found = {}
    for root, dirs, names in os.walk(src):
        if os.path.relpath(root, src).split(os.sep)[0] == "bin":
            continue
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                found[tuple(parts)] = path
    return found


def code_of(path):
    """The file's code before its unit tests, without comments or strings."""
    kept = []
    for line in open(path, encoding="utf-8", errors="replace"):
        if line.lstrip().startswith("#[cfg(test)]"):
            break
        kept.append(line)
    text = "".join(kept)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def expand(text, at):
    """The paths a path starting at `at` names: `a::b::{c, d::e}` gives
    [a::b::c, a::b::d::e]. Returns (paths, end)."""
    prefix = []
    i = at
    while True:
        m = IDENT.match(text, i)
        if m:
            prefix.append(m.group(0))
            i = m.end()
        elif text.startswith("{", i):
            paths, i = group(text, i + 1)
            return [prefix + p for p in paths], i
        else:
            return [prefix], i
        if text.startswith("::", i):
            i += 2
        else:
            return [prefix], i


def group(text, i):
    """The paths of a brace group whose `{` is just before `i`."""
    paths = []
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if text.startswith("}", i):
            return paths, i + 1
        sub, j = expand(text, i)
        paths.extend(sub)
        # Skip `as name` and anything else up to the next item.
        while j < len(text) and text[j] not in ",}":
            if text[j] == "{":
                return paths, j
            j += 1
        i = j
    return paths, i


def imports(text):
    """Every (kind, rest-of-path) a module's code names."""
    for m in PATH_START.finditer(text):
        kind = m.group(1)
        for rest in expand(text, m.end())[0]:
            yield kind, rest


def resolve(module, kind, rest, files):
    if kind == "crate":
        base = []
    elif kind == "self":
        base = list(module)
    else:
        base = list(module[:-1])
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    full = base + [p for p in rest if p != "self"]
    for n in range(len(full), 0, -1):
        if tuple(full[:n]) in files:
            return tuple(full[:n])
    return None


def graph_of(files):
    """{module: {imported module: an item named, for the message}}."""
    graph = {}
    for module, path in files.items():
        edges = {}
        for kind, rest in imports(code_of(path)):
            target = resolve(module, kind, rest, files)
            is_ancestor = target is not None and module[: len(target)] == target
            if target is not None and target != module and not is_ancestor:
                edges.setdefault(target, "::".join([kind] + rest))
        graph[module] = edges
    return graph


def cycles(graph):
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                groups.append(sorted(members))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def read_layers(path):
    """([layer module tuples, top first], [groups of modules kept apart])."""
    layers, apart = [], []
    if not os.path.isfile(path):
        return layers, apart
    for line in open(path, encoding="utf-8"):
        line = line.split("#")[0].strip()
        if line.startswith("layers:"):
            layers = [
                [tuple(m.split("::")) for m in rank.split()] for rank in line[7:].split(">")
            ]
        elif line.startswith("apart:"):
            apart.append([tuple(m.split("::")) for m in line[6:].split()])
    return layers, apart


def under(module, prefixes):
    """The longest of `prefixes` that `module` is or is inside, if any."""
    matches = [p for p in prefixes if module[: len(p)] == p]
    return max(matches, key=len) if matches else None


def layer_violations(graph, layers, apart):
    """(module, imported, item, why) for each import against the layers."""
    found = []
    rank = {module: i for i, members in enumerate(layers) for module in members}
    for module, edges in sorted(graph.items()):
        mine = under(module, rank)
        for target, item in sorted(edges.items()):
            theirs = under(target, rank)
            if mine is not None and theirs is not None and rank[theirs] < rank[mine]:
                found.append((module, target, item, "imports a layer above its own"))
            for group in apart:
                a, b = under(module, group), under(target, group)
                if a is not None and b is not None and a != b:
                    found.append((module, target, item, "imports a module kept apart"))
    return found


def unnamed_modules(files, layers):
    """The crate's top-level modules that its layers do not name."""
    named = {module[0] for members in layers for module in members}
    top = {module[0] for module in files if module}
    return sorted(top - named) if layers else []


def crates(repo):
    for name in sorted(os.listdir(repo)):
        src = os.path.join(repo, name, "src")
        if os.path.isfile(os.path.join(repo, name, "Cargo.toml")) and os.path.isdir(src):
            yield name, src


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    found = 0
    names = lambda m: "::".join(m) or "(root)"
    for crate, src in crates(repo):
        files = module_files(src)
        graph = graph_of(files)
        layers, apart = read_layers(os.path.join(os.path.dirname(src), "layers.txt"))
        for module in unnamed_modules(files, layers):
            found += 1
            print(f"{crate}: module {module} is not named in layers.txt")
        for module, target, item, why in layer_violations(graph, layers, apart):
            found += 1
            print(f"{crate}: {names(module)} {why}: {names(target)}  ({item})")
        for members in cycles(graph):
            found += 1
            print(f"{crate}: import cycle of {len(members)} modules:")
            inside = set(members)
            for m in members:
                for target, item in sorted(graph[m].items()):
                    if target in inside:
                        print(f"  {names(m)} -> {names(target)}  ({item})")
    print(f"{found} import cycle(s) or layer violation(s)")
    return 1 if found else 0


def self_test():
    """Each fault the check exists for, planted in a made-up crate, is
    reported; the same crate without it passes."""
    import contextlib
    import io
    import tempfile

    clean = {
        "lib.rs": "mod top; mod low; mod side; mod peer;",
        "top.rs": "pub fn y() {}",
        "low.rs": "pub fn x() {}",
        "side.rs": "use crate::low::x;",
        "peer.rs": "use crate::low::x;",
    }
    faults = {
        "an upward import": {"low.rs": "use crate::top::y;"},
        "a cycle": {"low.rs": "use crate::peer::w;"},
        "an unnamed module": {"lib.rs": "mod top; mod low; mod side; mod peer; mod stray;",
                              "stray.rs": ""},
        "imports between modules kept apart": {"side.rs": "use crate::top::y;"},
    }
    def run(files):
        with tempfile.TemporaryDirectory() as repo:
            os.makedirs(os.path.join(repo, "c", "src"))
            open(os.path.join(repo, "c", "Cargo.toml"), "w").close()
            with open(os.path.join(repo, "c", "layers.txt"), "w") as f:
                f.write("layers: top side > low peer\napart: top side\n")
            for name, text in files.items():
                with open(os.path.join(repo, "c", "src", name), "w") as f:
                    f.write(text)
            sys.argv = ["import-cycles", repo]
            with contextlib.redirect_stdout(io.StringIO()):
                return main()
    assert run(clean) == 0, "the clean crate passes"
    for fault, change in faults.items():
        assert run({**clean, **change}) == 1, f"{fault} is caught"
    print(f"self-test: the clean crate passes, {len(faults)} planted faults caught")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
