"""TPC-H and TPC-DS data, queries and reference answers, made with DuckDB's tpch and tpcds
extensions.

    python bench/tpc_data.py tpch 0.01 OUT      # OUT/data/<table>/data.parquet,
                                                # OUT/queries/qNN.sql, OUT/answers/qNN.csv

It runs in a side environment (``bench/tpc_env.sh`` makes it): the extensions on PyPI are
built for DuckDB 1.5.5, not for the DuckDB lakeward runs on, and they are a benchmark's
tool, not something lakeward needs. It imports nothing from lakeward.

TPC-H's answers are the extension's own (``tpch_answers()``, scale factors 0.01, 0.1 and 1):
pipe-separated text with a header. TPC-DS's are computed here by DuckDB from the extension's
query text (see ``computed``), in the same format. The queries are the extensions' text (the
specifications' queries with their default substitution parameters).
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

import duckdb


def connect(suite: str) -> duckdb.DuckDBPyConnection:
    import importlib.util

    spec = importlib.util.find_spec(f"duckdb_extension_{suite}")
    if spec is None or spec.origin is None:
        sys.exit(f"duckdb-extension-{suite} is not installed: run bench/tpc_env.sh")
    found = glob.glob(os.path.join(os.path.dirname(spec.origin), "extensions", "*", "*"))
    connection = duckdb.connect()
    connection.execute(f"LOAD '{found[0]}'")
    return connection


def computed(connection: duckdb.DuckDBPyConnection, query: str) -> str:
    """A query's answer as DuckDB computes it, in the extension's answer format.

    The tpcds extension on PyPI carries no answers (``tpcds_answers()`` fails), so the
    reference is DuckDB's own result of the extension's query text. Its queries order
    NULLs first; Trino (and DuckDB by default) order them last, so the reference drops
    ``NULLS FIRST`` to be the answer under Trino's ordering rules.
    """
    result = connection.execute(query.replace(" NULLS FIRST", ""))
    header = "|".join(d[0] for d in result.description)
    rows = ["|".join("NULL" if v is None else str(v) for v in row) for row in result.fetchall()]
    return "\n".join([header, *rows]) + "\n"


def generate(suite: str, scale: float, out: Path) -> None:
    connection = connect(suite)
    connection.execute(f"CALL {'dbgen' if suite == 'tpch' else 'dsdgen'}(sf = {scale})")
    tables = [r[0] for r in connection.execute("SHOW TABLES").fetchall()]
    for table in tables:
        folder = out / "data" / table
        folder.mkdir(parents=True, exist_ok=True)
        connection.execute(f"COPY {table} TO '{folder / 'data.parquet'}' (FORMAT parquet)")
    (out / "queries").mkdir(exist_ok=True)
    for number, query in connection.execute(f"FROM {suite}_queries()").fetchall():
        (out / "queries" / f"q{number:02d}.sql").write_text(query)
    (out / "answers").mkdir(exist_ok=True)
    if suite == "tpch":
        answers = connection.execute(
            "SELECT query_nr, answer FROM tpch_answers() WHERE scale_factor = ?", [scale]
        ).fetchall()
    else:
        answers = [(n, computed(connection, q)) for n, q in connection.execute(
            "FROM tpcds_queries()").fetchall()]  # fmt: skip
    for number, answer in answers:
        (out / "answers" / f"q{number:02d}.csv").write_text(answer)
    print(f"{suite} sf {scale}: {len(tables)} tables, {len(answers)} answers in {out}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("tpch", "tpcds"):
        sys.exit("usage: tpc_data.py tpch|tpcds SCALE OUT")
    generate(sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]))
