"""What the TPC benchmark and its reduced test share: the data, loading it into a stack,
the query texts and the comparison with the reference answers.

Imported by ``bench/tpc.py`` and by the test suite; it imports lakeward only inside the
functions that talk to a stack.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def side_python() -> str:
    """The side environment's Python (``bench/tpc_env.sh``), made if it is missing."""
    made = subprocess.run(
        ["bash", str(HERE / "tpc_env.sh")], check=True, capture_output=True, text=True
    )
    return made.stdout.strip().splitlines()[-1]


def generated(suite: str, scale: float, cache: Path) -> Path:
    """The suite's data, queries and answers at a scale, made once per cache folder."""
    out = cache / f"{suite}-sf{scale:g}"
    if not (out / "answers").is_dir():
        python = str(ROOT / side_python())
        partial = out.with_name(out.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [python, str(HERE / "tpc_data.py"), suite, str(scale), str(partial)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        partial.rename(out)
    return out


def database_name(suite: str, scale: float) -> str:
    return f"{suite}_sf{scale:g}".replace(".", "_")


def trino_queries(folder: Path, database: str) -> dict[str, str]:
    """Trino's benchmark texts (``qNN.sql``, with ``${database}.${schema}.`` before each
    table) named after the reference answers they are compared with. TPC-DS queries 14, 23,
    24 and 39 have two parts there (``qNN.sql`` and ``qNNb.sql``, or ``qNN_1``/``qNN_2``);
    the first is the one the reference answers."""
    texts: dict[str, str] = {}
    for path in sorted(folder.glob("q*.sql")):
        name = path.stem.removesuffix("_1")
        if not re.fullmatch(r"q\d+", name):
            continue
        text = path.read_text().replace("${database}.${schema}.", f"{database}.")
        texts[name] = text.strip().rstrip(";")
    return texts


def extension_queries(source: Path) -> dict[str, str]:
    return {
        p.stem: p.read_text().strip().rstrip(";").replace(" NULLS FIRST", "")
        for p in sorted((source / "queries").glob("q*.sql"))
    }


@dataclass
class Stack:
    """A stack that is up, with a PyAthena cursor on a database of its own."""

    settings: Any
    cursor: Any
    database: str

    @classmethod
    def connect(cls, settings: Any, database: str, workgroup: str = "primary") -> Stack:
        from pyathena import connect

        cursor = connect(
            s3_staging_dir="s3://staging/",
            endpoint_url=f"http://{settings.server.host}:{settings.server.port}",
            region_name=settings.api.region,
            aws_access_key_id=settings.api.access_key_id,
            aws_secret_access_key=settings.api.secret_access_key,
            work_group=workgroup,
            poll_interval=0.01,
            catalog_name="demo_hive_metastore",
            schema_name=database,
        ).cursor()
        return cls(settings, cursor, database)

    def load(self, source: Path) -> None:
        """Copies each table's Parquet file into the lake and registers it with
        ``CREATE EXTERNAL TABLE`` through the SQL service, as a user would."""
        import pyarrow.parquet as pq

        from lakeward.query.types import hive_type_of_arrow

        bucket = self.settings.lake.data_bucket
        lake = Path(self.settings.data_dir) / "lake" / bucket / "bench" / self.database
        place = f"{self.settings.lake_root}/{bucket}/bench/{self.database}"
        self.cursor.execute(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        for folder in sorted((source / "data").iterdir()):
            if not (lake / folder.name).is_dir():
                shutil.copytree(folder, lake / folder.name)
            schema = pq.read_schema(folder / "data.parquet")
            columns = ", ".join(f"{f.name} {hive_type_of_arrow(f.type, f.name)}" for f in schema)
            self.cursor.execute(
                f"CREATE EXTERNAL TABLE IF NOT EXISTS {self.database}.{folder.name} ({columns}) "
                f"STORED AS PARQUET LOCATION '{place}/{folder.name}'"
            )

    def rows(self, sql: str) -> list[list[str | None]]:
        fetched = self.cursor.execute(sql).fetchall()
        return [[None if v is None else str(v) for v in row] for row in fetched]


# Where the texts give Trino's answer and DuckDB's differs, by a rule of Trino's checked by
# hand on the rows that differ: a quotient or average of decimals is a decimal rounded to
# its scale (DuckDB's is a double), so a filter or ranking on it can keep other rows.
TRINO_RULES: dict[str, str] = {
    "q21": "CAST(inv_after AS DECIMAL(7,2)) / inv_before is rounded to 2 places and the "
    "bounds DECIMAL '2.00' / DECIMAL '3.00' to 0.67: 2480/3728 = 0.6652 rounds to 0.67 "
    "and is kept",
    "q36": "sum/sum of decimal(7,2) is rounded to 2 places: margins that round alike tie "
    "in rank(), and the ORDER BY's later keys order them",
    "q44": "avg of decimal(7,2) is a decimal(7,2): averages that round alike tie in "
    "rank(), and the joined rows of a tied rank are ordered by product name",
    "q53": "avg(sum(ss_sales_price)) OVER (...) is a decimal(38,2) rounded half up "
    "(435.02, not 435.015), and in the extension's text abs(sum_sales - avg) / avg is "
    "rounded to 2 places before it is compared with 0.1: other rows pass the filter",
    "q58": "in the extension's text ss_item_rev / ((ss + cs + ws) / 3) is rounded to 2 "
    "places before * 100: 104.00 where the double gives 103.72",
    "q61": "CAST(promotions AS DECIMAL(15,4)) / CAST(total AS DECIMAL(15,4)) is rounded "
    "to 4 places before * 100: 51.8200, where the double gives 51.8232",
    "q63": "abs(sum_sales - avg_monthly_sales) / avg_monthly_sales is rounded to 2 places: "
    "117.80 / 1152.19 = 0.1022 is 0.10, not above DECIMAL '0.1', so that row is left out",
    "q66": "jan_sales / w_warehouse_sq_ft (a decimal by an integer) is rounded to 2 places "
    "in each row before the sum: 9.29 where the sum of doubles gives 9.2828",
}


def same(ours: str | None, reference: str) -> bool:
    """Equal within rounding: a value lakeward gives with s decimals is equal when it lies
    within half a unit of its last digit (Trino rounds a decimal average or quotient to the
    operands' scale where DuckDB answers a double)."""
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


def answer_rows(answer: Path) -> list[list[str]]:
    """A reference answer's rows (pipe-separated text under a header)."""
    lines = answer.read_text().removesuffix("\n").split("\n")[1:]
    return [line.split("|") for line in lines]


def duckdb_rows(connection: Any, trino_text: str) -> list[list[str]]:
    """DuckDB's own answer to a Trino text (made DuckDB's by sqlglot), in the answers' form:
    the reference where Trino's benchmark text asks another question than the extension's
    (other columns, other substitution parameters)."""
    import sqlglot

    sql = sqlglot.transpile(trino_text, read="trino", write="duckdb")[0]
    return [
        ["NULL" if v is None else str(v) for v in row] for row in connection.execute(sql).fetchall()
    ]


def difference(rows: list[list[str | None]], expected: list[list[str]]) -> str | None:
    """None when the rows are the reference's, in order; else the first difference."""
    if len(rows) != len(expected):
        return f"{len(rows)} rows, the reference has {len(expected)}"
    for ours, theirs in zip(rows, expected, strict=True):
        if len(ours) != len(theirs) or not all(map(same, ours, theirs)):
            return f"{ours} against {theirs}"
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("LAKEWARD_TPC_CACHE", "/tmp/lakeward-tpc"))
