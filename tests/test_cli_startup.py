"""``lakeward`` starts fast: its command modules load no service core until a command runs.

``lakeward --help`` and ``lakeward status`` answer in a fraction of a second
only while ``import lakeward.cli`` stays free of the heavy libraries; each
command imports what it needs when it runs.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import lakeward.cli

HEAVY = ["sqlalchemy", "pyarrow", "duckdb", "sqlglot", "pyspark", "boto3", "fastapi", "uvicorn"]
CLI_DIR = Path(lakeward.cli.__file__).parent


def loaded_after(code: str) -> set[str]:
    """Top-level packages in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return {name.split(".")[0] for name in json.loads(result.stdout.splitlines()[-1])}


def test_importing_the_cli_loads_no_heavy_library() -> None:
    loaded = loaded_after("import lakeward.cli")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_building_every_command_and_its_help_loads_no_heavy_library() -> None:
    code = (
        "import click, typer.main, lakeward.cli\n"
        "def walk(command, ctx):\n"
        "    command.get_help(ctx)\n"
        "    for name in getattr(command, 'commands', {}):\n"
        "        sub = command.commands[name]\n"
        "        walk(sub, click.Context(sub, info_name=name, parent=ctx))\n"
        "root = typer.main.get_command(lakeward.cli.app)\n"
        "walk(root, click.Context(root, info_name='lakeward'))"
    )
    loaded = loaded_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def _cli_imports(path: Path) -> set[str]:
    """The ``lakeward.cli`` modules ``path`` imports when it is imported (not inside functions)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith("lakeward.cli."))
    return found


def test_command_modules_import_each_other_without_a_cycle() -> None:
    graph = {f"lakeward.cli.{p.stem}": _cli_imports(p) for p in CLI_DIR.glob("*.py")}
    graph["lakeward.cli"] = graph.pop("lakeward.cli.__init__")

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        for imported in graph.get(module, ()):
            visit(imported, (*path, module))

    for module in graph:
        visit(module, ())


def test_the_sql_front_the_bi_layer_parses_with_loads_no_engine() -> None:
    """BI checks a dataset's SQL with the SQL front alone: no DuckDB, no SQLAlchemy, no Arrow."""
    loaded = loaded_after(
        "import lakeward.query.sql.queries, lakeward.query.sql.names, lakeward.query.sql.tokens"
    )
    assert "sqlglot" in loaded
    assert not loaded & {"duckdb", "sqlalchemy", "pyarrow", "pyspark"}, sorted(loaded)
