"""The package's shape: imports run one way, and no module outgrows a reader.

Every import counts, at the top of a module, inside a function or under TYPE_CHECKING:
a cycle held together by an import inside a function is still a cycle for the reader.
An import names the module it loads (``from a.b import c`` is ``a.b.c`` when that is a
module, else ``a.b``); a package is not counted as importing its parent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lakeward"
MOST_LINES = 600


def _modules(package: Path) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: set(_imports(name, path, modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_check_finds_a_cycle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub.low import thing\n")
    (package / "sub" / "low.py").write_text(
        "def thing():\n    from pkg.high import other\n    return other\n"
    )
    (package / "high.py").write_text("from .sub import low\n\ndef other(): ...\n")
    (package / "alone.py").write_text("import pkg.high\n")
    graph = import_graph(package)
    assert graph["pkg.sub.low"] == {"pkg.high"}
    assert graph["pkg.high"] == {"pkg.sub.low"}
    assert cycles(graph) == [["pkg.high", "pkg.sub.low"]]


def test_no_import_cycle_in_lakeward() -> None:
    graph = import_graph()
    assert "lakeward.query.service" in graph["lakeward.http.app"]
    assert cycles(graph) == []


def test_the_query_layers_import_downwards_only() -> None:
    """http -> service -> statements -> planner -> sql, translate, engines, catalogs."""
    graph = import_graph()
    layers = [
        "lakeward.query.service",
        "lakeward.query.statements",
        "lakeward.query.planner",
        "lakeward.query.sql",
    ]

    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    for depth, layer in enumerate(layers):
        above = layers[:depth]
        for module, imported in graph.items():
            if under(module, layer):
                wrong = [m for m in imported for a in above if under(m, a)]
                assert wrong == [], f"{module} imports {wrong}, a layer above it"
    for lower in ("lakeward.query.sql", "lakeward.query.translate", "lakeward.query.catalogs"):
        for module, imported in graph.items():
            if under(module, lower):
                assert not any(under(m, "lakeward.query.engines") for m in imported), module


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert long == {}
