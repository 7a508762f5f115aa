#!/usr/bin/env python3
"""The layer check (issue 32): production code may depend only downwards.

C++: every quoted #include of runtime/, operator/ and python/src is resolved
to the file it names (the includer's folder first, then the include roots
the CMake targets export) and mapped to its component. runtime/src's layers
are ordered

    common < bootstrap < backend < observability < core < elastic

and a layer may include only its own and lower layers. Components above
runtime/src (launcher, rendezvous, operator, python/src) see each other as
ALLOWED says. Python: khorovod's modules may not import each other in a
cycle (module level and function level alike: a deferred import is a cycle
that a refactor turns into an import-time failure), and the framework-free
package may not import a framework binding (FRAMEWORKS).

A break that cannot be fixed at once is listed in KNOWN or KNOWN_PY (both
empty today) with the move that removes it; the check fails on anything
else, and also on a listed break that no longer occurs (so the lists only
shrink). Exit 0 when clean; prints
"layers: N includes, M imports checked, K known debts: OK".
Usage: check_layers.py [REPO_ROOT]
"""

import ast
import os
import re
import sys

LAYERS = ["common", "bootstrap", "backend", "observability", "core", "elastic"]

# component -> the components it may include (besides itself and the public
# API in runtime/include, which everything may include).
ALLOWED = {
    "runtime/include": set(),
    "runtime/util": set(),
    "runtime/metrics": {"runtime/util"},
    "runtime/rendezvous": {"runtime/util", "runtime/metrics"},
    "runtime/launcher": {"runtime/util", "runtime/metrics", "runtime/rendezvous"},
    "operator": {"runtime/util", "runtime/metrics"},
    "python/src": {"runtime/util"},
}
for i, layer in enumerate(LAYERS):
    ALLOWED["runtime/src/" + layer] = {"runtime/util", "runtime/metrics", "runtime/rendezvous"} | {
        "runtime/src/" + lower for lower in LAYERS[:i]
    }

INCLUDE_ROOTS = [
    "runtime/src",
    "runtime/include",
    "runtime/util",
    "runtime/metrics/include",
    "runtime/rendezvous",
    "runtime/launcher",
    "operator",
]

# (includer, included) -> the move that removes it. Empty: nothing breaks
# the order today; an entry is for a break that cannot be fixed at once.
KNOWN = {}
# The framework bindings sit above the framework-free package: nothing else
# imports them, and they do not import each other.
FRAMEWORKS = ("khorovod.torch", "khorovod.tensorflow", "khorovod.keras")
# Python imports that break a rule today: (importer, imported) -> the fix.
KNOWN_PY = {}

SOURCES = [
    "runtime/src",
    "runtime/include",
    "runtime/util",
    "runtime/metrics",
    "runtime/rendezvous",
    "runtime/launcher",
    "operator",
    "python/src",
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def component(rel):
    for comp in sorted(ALLOWED, key=len, reverse=True):
        if rel == comp or rel.startswith(comp + "/"):
            return comp
    return None


def resolve(root, includer, name):
    for base in [os.path.dirname(includer)] + [os.path.join(root, r) for r in INCLUDE_ROOTS]:
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return os.path.relpath(path, root)
    return None


def cpp_edges(root):
    """Yields (includer's component, included component, includer, name)."""
    for top in SOURCES:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith((".h", ".cc", ".cu")):
                    continue
                path = os.path.join(dirpath, f)
                src = component(os.path.relpath(path, root))
                with open(path, encoding="utf-8") as fh:
                    for name in INCLUDE.findall(fh.read()):
                        target = resolve(root, path, name)
                        if target is None:
                            continue  # generated or outside the tree (config headers, Gloo)
                        yield src, component(target), os.path.relpath(path, root), name


EXTENSIONS = {"khorovod._khorovod"}  # built by CMake; imports nothing of ours


def is_module(base, dotted):
    if dotted in EXTENSIONS:
        return True
    path = os.path.join(base, *dotted.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def py_imports(root):
    """{module: set of khorovod modules it imports}, for python/khorovod."""
    base = os.path.join(root, "python")
    graph = {}
    for dirpath, _, files in os.walk(os.path.join(base, "khorovod")):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), base)[:-3].replace(os.sep, ".")
            module = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
            package = module if f == "__init__.py" else module.rsplit(".", 1)[0]
            with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            deps = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    deps |= {a.name for a in node.names if a.name.startswith("khorovod")}
                elif isinstance(node, ast.ImportFrom):
                    target = node.module or ""
                    if node.level:
                        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                        target = ".".join(parts + ([target] if target else []))
                    if target.startswith("khorovod"):
                        # "from P import m" with m a module depends on P.m
                        # alone; with m a name of P's, on P.
                        for a in node.names:
                            sub = f"{target}.{a.name}"
                            deps.add(sub if is_module(base, sub) else target)
            graph[module] = deps
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def py_cycles(graph):
    """Pairs of modules that reach each other."""

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {m: reach(m) for m in graph}
    # Packages import their own submodules to re-export them; a package and
    # its submodule reaching each other is not a layering cycle.
    return {
        tuple(sorted((a, b)))
        for a in graph
        for b in reachable[a]
        if a < b and a in reachable[b] and not b.startswith(a + ".") and not a.startswith(b + ".")
    }


# khorovod.keras is horovod.keras's names for Keras on TensorFlow: it re-exports
# khorovod.tensorflow.keras, so it belongs to the TensorFlow binding.
FRAMEWORK_OF = {"khorovod.keras": "khorovod.tensorflow"}


def framework(module):
    found = next((f for f in FRAMEWORKS if module == f or module.startswith(f + ".")), None)
    return FRAMEWORK_OF.get(found, found)


def main():
    root = os.path.abspath(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    )
    errors, seen_known, includes = [], set(), 0
    for src, dst, path, name in cpp_edges(root):
        includes += 1
        if dst is None or dst == src or dst == "runtime/include" or dst in ALLOWED[src]:
            continue
        if (src, dst) in KNOWN:
            seen_known.add((src, dst))
            continue
        errors.append(f'{path}: includes "{name}" ({dst}), above or beside {src}')
    graph = py_imports(root)
    imports = sum(len(d) for d in graph.values())
    for edge in KNOWN_PY:
        if edge[1] in graph.get(edge[0], ()):
            seen_known.add(edge)
            graph[edge[0]].discard(edge[1])
    for pair in sorted(py_cycles(graph)):
        errors.append(f"python: {pair[0]} and {pair[1]} import each other")
    for module, deps in sorted(graph.items()):
        mine = framework(module)
        for dep in sorted(deps):
            theirs = framework(dep)
            if theirs is not None and theirs != mine and module != "khorovod":
                errors.append(f"python: {module} imports the framework binding {dep}")
    known = set(KNOWN) | set(KNOWN_PY)
    for gone in sorted(known - seen_known):
        errors.append(f"fixed, so remove it from KNOWN: {gone[0]} -> {gone[1]}")
    for e in errors:
        print("FAIL: layers: " + e)
    print(
        f"layers: {includes} includes, {imports} imports checked, {len(seen_known)} known debts: "
        + ("OK" if not errors else f"{len(errors)} errors")
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
