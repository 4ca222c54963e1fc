"""TPC-H and TPC-DS through PyAthena against a running stack, beside DuckDB alone on the
same files.

    .venv/bin/python bench/tpc.py tpch  --data-dir DIR [--scale 1] [--runs 3] [--workgroup W]
    .venv/bin/python bench/tpc.py tpcds --data-dir DIR --queries TRINO_TPCDS_DIR [...]

In one run it

1. makes the data, the queries and their reference answers with DuckDB's tpch or tpcds
   extension in the side environment (``bench/tpc_env.sh``, ``bench/tpc_data.py``), once
   per scale;
2. puts the Parquet files in the stack's lake and registers each table with
   ``CREATE EXTERNAL TABLE`` through PyAthena, as a user would;
3. runs each query through PyAthena (``--workgroup``: ``primary`` is DuckDB's; a Spark
   workgroup measures the Spark engine) and through DuckDB alone over the same files
   (``read_parquet`` views, the extension's own query text), ``--runs`` times each, and
   keeps the fastest of each. TPC-H's text is the extension's (the specification's). For
   TPC-DS, ``--queries`` names the folder of Trino's own benchmark texts
   (``testing/trino-benchmark-queries/src/main/resources/sql/trino/tpcds`` in Trino's
   repository); without it the extension's text is sent;
4. compares every answer with the reference within rounding and prints one line per
   query: equal or different (the first differing row), both times and their ratio; then
   the counts and the ratio of the sums. Where Trino's text asks another question than the
   extension's (other columns or substitution parameters: the answers differ), it is
   compared with DuckDB's answer to Trino's text (made DuckDB's by sqlglot), and marked
   ``*`` when equal to that. A query whose answer differs from DuckDB's by a rule of
   Trino's (``TRINO_RULES``: decimal quotients and averages rounded to their scale),
   checked by hand, is counted apart.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
from _tpc import (
    TRINO_RULES,
    Stack,
    answer_rows,
    cache_dir,
    database_name,
    difference,
    duckdb_rows,
    extension_queries,
    generated,
    trino_queries,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=["tpch", "tpcds"])
    parser.add_argument("--data-dir", type=Path, required=True, help="a stack that is up")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workgroup", default="primary")
    parser.add_argument("--queries", type=Path, help="Trino's TPC-DS texts (a folder)")
    parser.add_argument("--only", help="comma-separated query names, e.g. q01,q17")
    parser.add_argument("--cache", type=Path, default=cache_dir())
    args = parser.parse_args()
    logging.getLogger("pyathena").setLevel(logging.CRITICAL)  # its traceback of a refusal

    from lakeward.config import load_settings

    settings = load_settings(data_dir=args.data_dir)
    if settings.server.port is None:
        sys.exit(f"{args.data_dir} holds no stack that is up; start it with lakeward up")
    source = generated(args.suite, args.scale, args.cache)
    database = database_name(args.suite, args.scale)
    stack = Stack.connect(settings, database, args.workgroup)
    stack.load(source)
    floor = duckdb.connect()
    for folder in sorted((source / "data").iterdir()):
        floor.execute(f"CREATE VIEW {folder.name} AS FROM read_parquet('{folder}/data.parquet')")
    floor_texts = extension_queries(source)
    texts = trino_queries(args.queries, database) if args.queries else floor_texts
    names = sorted(floor_texts) if not args.only else args.only.split(",")

    def fastest(run: Any) -> tuple[float, Any]:
        best, result = float("inf"), None
        for _ in range(args.runs):
            start = time.perf_counter()
            result = run()
            best = min(best, time.perf_counter() - start)
        return best, result

    equal = refused = different = by_rules = 0
    total_ours = total_floor = 0.0
    texts_from = "Trino's texts" if args.queries else "the extension's texts"
    print(f"{args.suite} sf {args.scale:g}, workgroup {args.workgroup}, {texts_from}, "
          f"fastest of {args.runs}")  # fmt: skip
    for name in names:
        floor_time, _ = fastest(lambda sql=floor_texts[name]: floor.execute(sql).fetchall())
        if name not in texts:
            refused += 1
            print(f"{name}  missing: no such text in {args.queries}")
            continue
        try:
            ours_time, rows = fastest(lambda sql=texts[name]: stack.rows(sql))
        except Exception as e:  # a refusal or a failure, reported as the client sees it
            refused += 1
            print(f"{name}  refused: {' '.join(str(e).split())[:240]}", flush=True)
            continue
        wrong = difference(rows, answer_rows(source / "answers" / f"{name}.csv"))
        if wrong is not None and args.queries:  # Trino's text may ask another question
            other = difference(rows, duckdb_rows(floor, texts[name].replace(f"{database}.", "")))
            wrong = None if other is None else f"{wrong}; DuckDB on Trino's text: {other}"
            name = name if other is not None else f"{name}*"
        if wrong is not None and name in TRINO_RULES:
            by_rules += 1
            print(f"{name}  equal by Trino's rules: {TRINO_RULES[name]}", flush=True)
            continue
        equal += wrong is None
        different += wrong is not None
        total_ours, total_floor = total_ours + ours_time, total_floor + floor_time
        verdict = "equal" if wrong is None else f"DIFFERENT: {wrong[:240]}"
        print(
            f"{name}  {verdict:10}  lakeward {ours_time * 1000:8.0f} ms  "
            f"DuckDB {floor_time * 1000:7.0f} ms  ratio {ours_time / floor_time:6.1f}",
            flush=True,
        )
    ratio = total_ours / total_floor if total_floor else float("nan")
    sums = f"lakeward {total_ours:.2f} s, DuckDB {total_floor:.2f} s, ratio {ratio:.2f}"
    print(
        f"equal {equal}, different {different}, refused {refused}; sums over the answered: {sums}"
    )


if __name__ == "__main__":
    main()
