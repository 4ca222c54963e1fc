"""TPC-H through PyAthena against a running stack, beside DuckDB alone on the same files.

    .venv/bin/python bench/tpch.py --data-dir DIR [--scale 1] [--runs 3] [--workgroup primary]

In one run it

1. makes the data, the 22 queries and their reference answers with DuckDB's tpch extension
   in the side environment (``bench/tpc_env.sh``, ``bench/tpc_data.py``), once per scale;
2. puts the Parquet files in the stack's lake and registers each table with
   ``CREATE EXTERNAL TABLE`` through PyAthena, as a user would;
3. runs each query through PyAthena (``--workgroup``: ``primary`` is DuckDB's; a Spark
   workgroup measures the Spark engine) and through DuckDB alone over the same files
   (``read_parquet`` views, the extension's own query text), ``--runs`` times each, and
   keeps the fastest of each;
4. compares every answer with the reference within rounding (a value lakeward gives with s
   decimals is equal when it is within half a unit of its last digit) and prints one line
   per query: equal or different (the first differing row), both times and their ratio;
   then the counts and the ratio of the sums.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def generated(scale: float, cache: Path) -> Path:
    out = cache / f"tpch-sf{scale:g}"
    if not (out / "answers").is_dir():
        python = (
            subprocess.run(
                ["bash", str(HERE / "tpc_env.sh")], check=True, capture_output=True, text=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        subprocess.run(
            [python, str(HERE / "tpc_data.py"), "tpch", str(scale), str(out)], check=True
        )
    return out


def same(ours: str | None, reference: str) -> bool:
    if ours is None:
        return reference in ("", "NULL")
    if ours == reference or ours.rstrip() == reference.rstrip():
        return True
    try:
        a, b = float(ours), float(reference)
    except ValueError:
        return False
    digits = len(ours.split(".")[1]) if "." in ours and "e" not in ours.lower() else 12
    return abs(a - b) <= 0.5 * 10**-digits + 1e-9 * abs(b)


def difference(rows: list[list[str | None]], answer: Path) -> str | None:
    lines = answer.read_text().removesuffix("\n").split("\n")[1:]
    expected = [line.split("|") for line in lines]
    if len(rows) != len(expected):
        return f"{len(rows)} rows, the reference has {len(expected)}"
    for ours, theirs in zip(rows, expected, strict=True):
        if len(ours) != len(theirs) or not all(map(same, ours, theirs)):
            return f"{ours} against {theirs}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a stack that is up")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workgroup", default="primary")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/lakeward-tpc"))
    args = parser.parse_args()

    from pyathena import connect

    from lakeward.config import load_settings
    from lakeward.query.types import hive_type_of_arrow

    settings = load_settings(data_dir=args.data_dir)
    if settings.server.port is None:
        sys.exit(f"{args.data_dir} holds no stack that is up; start it with lakeward up")
    source = generated(args.scale, args.cache)
    database = f"tpch_sf{str(args.scale).replace('.', '_')}"
    lake = Path(settings.data_dir) / "lake" / settings.lake.data_bucket / "bench" / database
    cursor: Any = connect(
        s3_staging_dir="s3://staging/",
        endpoint_url=f"http://{settings.server.host}:{settings.server.port}",
        region_name=settings.api.region,
        aws_access_key_id=settings.api.access_key_id,
        aws_secret_access_key=settings.api.secret_access_key,
        work_group=args.workgroup,
        poll_interval=0.01,
        catalog_name="demo_hive_metastore",
        schema_name=database,
    ).cursor()
    cursor.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    floor = duckdb.connect()
    for folder in sorted((source / "data").iterdir()):
        if not (lake / folder.name).is_dir():
            shutil.copytree(folder, lake / folder.name)
        schema = pq.read_schema(folder / "data.parquet")
        columns = ", ".join(f"{f.name} {hive_type_of_arrow(f.type, f.name)}" for f in schema)
        place = f"{settings.lake_root}/{settings.lake.data_bucket}/bench/{database}"
        location = f"{place}/{folder.name}"
        cursor.execute(
            f"CREATE EXTERNAL TABLE IF NOT EXISTS {database}.{folder.name} ({columns}) "
            f"STORED AS PARQUET LOCATION '{location}'"
        )
        floor.execute(f"CREATE VIEW {folder.name} AS FROM read_parquet('{folder}/data.parquet')")

    def fastest(run: Any) -> tuple[float, Any]:
        best, result = float("inf"), None
        for _ in range(args.runs):
            start = time.perf_counter()
            result = run()
            best = min(best, time.perf_counter() - start)
        return best, result

    equal = refused = different = 0
    total_ours = total_floor = 0.0
    print(f"TPC-H sf {args.scale:g}, workgroup {args.workgroup}, fastest of {args.runs}")
    for query in sorted((source / "queries").glob("q*.sql")):
        sql = query.read_text().strip().rstrip(";")
        floor_time, _ = fastest(lambda sql=sql: floor.execute(sql).fetchall())
        try:
            ours_time, rows = fastest(lambda sql=sql: cursor.execute(sql).fetchall())
        except Exception as e:  # a refusal or a failure, reported as the client sees it
            refused += 1
            print(f"{query.stem}  refused: {str(e)[:200]}")
            continue
        text = [[None if v is None else str(v) for v in row] for row in rows]
        wrong = difference(text, source / "answers" / f"{query.stem}.csv")
        equal += wrong is None
        different += wrong is not None
        total_ours, total_floor = total_ours + ours_time, total_floor + floor_time
        verdict = "equal" if wrong is None else f"DIFFERENT: {wrong[:200]}"
        print(
            f"{query.stem}  {verdict:10}  lakeward {ours_time * 1000:8.0f} ms  "
            f"DuckDB {floor_time * 1000:7.0f} ms  ratio {ours_time / floor_time:6.1f}"
        )
    ratio = total_ours / total_floor if total_floor else float("nan")
    print(f"equal {equal}, different {different}, refused {refused}; sums: lakeward "
          f"{total_ours:.2f} s, DuckDB {total_floor:.2f} s, ratio {ratio:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
