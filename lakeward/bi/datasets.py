"""Datasets: a source table (custom SQL's result, or one table) shaped by field operations.

The source rows come from the SQL service as an Arrow table; the field
operations are applied in DuckDB, one step after another, so that each step
sees the fields the previous ones left (a computed field can use a renamed
or converted one). A conversion that fails on some rows does not fail the
dataset: those values become NULL, and the rows are counted and shown
(``ConversionIssue``) with a few example values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from lakeward.bi.expressions import compile_expression
from lakeward.bi.model import (
    Column,
    Computed,
    ConversionIssue,
    Convert,
    DatasetSpec,
    FieldOp,
    Geo,
    Rename,
)
from lakeward.errors import InvalidRequest

EXAMPLES = 5

# Java/QuickSight date pattern letters -> DuckDB strptime, longest first.
_PATTERN_TOKENS = [
    ("yyyy", "%Y"), ("yy", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("M", "%m"),
    ("dd", "%d"), ("d", "%d"), ("HH", "%H"), ("H", "%H"), ("hh", "%I"), ("h", "%I"),
    ("mm", "%M"), ("ss", "%S"), ("SSS", "%g"), ("a", "%p"), ("EEEE", "%A"), ("EEE", "%a"),
    ("Z", "%z"), ("XXX", "%z"),
]  # fmt: skip


@dataclass(frozen=True)
class Shaped:
    """A dataset's rows after its field operations."""

    table: pa.Table
    columns: list[Column]
    issues: list[ConversionIssue]


def source_sql(spec: DatasetSpec) -> str:
    """The query a dataset's rows come from: its custom SQL, or all of its table."""
    return spec.sql if spec.sql is not None else f"SELECT * FROM {spec.table}"


def strptime_format(pattern: str, where: str) -> str:
    """``yyyy-MM-dd`` -> ``%Y-%m-%d``; quoted text is literal; unknown letters are refused."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise InvalidRequest(f"{where}: format {pattern!r} has an unclosed quote")
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        for token, directive in _PATTERN_TOKENS:
            if pattern.startswith(token, i):
                out.append(directive)
                i += len(token)
                break
        else:
            if char.isalpha():
                raise InvalidRequest(
                    f"{where}: format {pattern!r}: unknown pattern letter {char!r} "
                    "(use yyyy, MM, dd, HH, mm, ss, SSS; quote literal text with ')"
                )
            out.append("%%" if char == "%" else char)
            i += 1
    return "".join(out)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def field_type(duck_type: str) -> str:
    kind = duck_type.upper()
    if kind.startswith("STRUCT"):
        return "geopoint"
    if kind in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER"):
        return "integer"
    if kind in ("DOUBLE", "FLOAT", "REAL") or kind.startswith("DECIMAL"):
        return "decimal"
    if kind == "DATE":
        return "date"
    if kind.startswith("TIMESTAMP"):
        return "timestamp"
    if kind == "BOOLEAN":
        return "boolean"
    return "string"


def arrow_type_of(kind: str) -> pa.DataType:
    """The Arrow type a field of a BI type is held in."""
    return {
        "integer": pa.int64(), "decimal": pa.float64(), "date": pa.date32(),
        "timestamp": pa.timestamp("us"), "boolean": pa.bool_(),
        "geopoint": pa.struct([("lat", pa.float64()), ("lon", pa.float64())]),
    }.get(kind, pa.string())  # fmt: skip


def describe(conn: duckdb.DuckDBPyConnection, relation: str) -> list[Column]:
    rows = conn.execute(f"DESCRIBE {relation}").fetchall()
    columns = []
    for name, duck_type, *_ in rows:
        kind = field_type(str(duck_type))
        role = "measure" if kind in ("integer", "decimal") else "dimension"
        columns.append(Column(str(name), kind, role))  # type: ignore[arg-type]
    return columns


class _Steps:
    """Applies the operations one at a time, each step a temporary table."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.conn = conn
        self.step = 0
        self.current = "source"

    def fields(self) -> list[str]:
        return [c.name for c in describe(self.conn, self.current)]

    def next(self, select_sql: str) -> None:
        self.step += 1
        name = f"step_{self.step}"
        self.conn.execute(f"CREATE TEMP TABLE {name} AS {select_sql}")
        self.current = name

    def failed(self, raw: str, converted: str) -> tuple[int, list[str]]:
        where = f"({raw}) IS NOT NULL AND ({converted}) IS NULL"
        count = self.conn.execute(f"SELECT count(*) FROM {self.current} WHERE {where}").fetchone()
        examples = self.conn.execute(
            f"SELECT DISTINCT CAST({raw} AS VARCHAR) FROM {self.current} WHERE {where} "
            f"ORDER BY 1 LIMIT {EXAMPLES}"
        ).fetchall()
        return int(count[0]) if count else 0, [str(e[0]) for e in examples]


def apply_fields(source: pa.Table, operations: list[FieldOp]) -> Shaped:
    """Apply the field operations to the source rows; problems name ``fields[i]``."""
    conn = duckdb.connect()
    try:
        conn.register("source_rows", source)
        conn.execute("CREATE TEMP TABLE source AS SELECT * FROM source_rows")
        steps = _Steps(conn)
        issues: list[ConversionIssue] = []
        for index, operation in enumerate(operations):
            where = f"fields[{index}] ({operation.op})"
            present = steps.fields()
            lowered = {f.lower(): f for f in present}

            def need(name: str, where: str = where, lowered: dict[str, str] = lowered) -> str:
                if name.lower() not in lowered:
                    raise InvalidRequest(
                        f"{where}: no field {name!r} (fields: {', '.join(lowered.values())})"
                    )
                return lowered[name.lower()]

            def free(name: str, where: str = where, lowered: dict[str, str] = lowered) -> None:
                if name.lower() in lowered:
                    raise InvalidRequest(f"{where}: a field named {name!r} exists already")

            if isinstance(operation, Rename):
                old = need(operation.field)
                if operation.to.lower() != old.lower():
                    free(operation.to)
                steps.next(
                    f"SELECT * RENAME ({quote(old)} AS {quote(operation.to)}) FROM {steps.current}"
                )
            elif isinstance(operation, Convert):
                name = need(operation.field)
                converted = _conversion(quote(name), operation, where)
                count, examples = steps.failed(quote(name), converted)
                label = f"convert to {operation.to}" + (
                    f" ({operation.format})" if operation.format else ""
                )
                if count:
                    issues.append(ConversionIssue(name, label, count, examples))
                steps.next(f"SELECT * REPLACE ({converted} AS {quote(name)}) FROM {steps.current}")
            elif isinstance(operation, Geo):
                lat, lon = need(operation.latitude), need(operation.longitude)
                free(operation.name)
                lat_sql = f"TRY_CAST({quote(lat)} AS DOUBLE)"
                lon_sql = f"TRY_CAST({quote(lon)} AS DOUBLE)"
                point = (
                    f"CASE WHEN {lat_sql} BETWEEN -90 AND 90 AND {lon_sql} BETWEEN -180 AND 180 "
                    f"THEN struct_pack(lat := {lat_sql}, lon := {lon_sql}) END"
                )
                raw = f"CASE WHEN {quote(lat)} IS NOT NULL OR {quote(lon)} IS NOT NULL THEN " \
                      f"concat_ws(', ', {quote(lat)}, {quote(lon)}) END"  # fmt: skip
                count, examples = steps.failed(raw, point)
                if count:
                    issues.append(
                        ConversionIssue(operation.name, f"geospatial point from {lat}, {lon}",
                                        count, examples)
                    )  # fmt: skip
                steps.next(f"SELECT *, {point} AS {quote(operation.name)} FROM {steps.current}")
            elif isinstance(operation, Computed):
                free(operation.name)
                sql = compile_expression(operation.expression, present, operation.name)
                try:
                    steps.next(f"SELECT *, {sql} AS {quote(operation.name)} FROM {steps.current}")
                except duckdb.Error as exc:
                    raise InvalidRequest(
                        f"{where}: computed field {operation.name}: {_first_line(exc)}"
                    ) from None
        table = conn.sql(f"SELECT * FROM {steps.current}").to_arrow_table()
        return Shaped(table, describe(conn, steps.current), issues)
    finally:
        conn.close()


def _conversion(field_sql: str, operation: Convert, where: str) -> str:
    text = f"CAST({field_sql} AS VARCHAR)"
    if operation.to in ("date", "timestamp"):
        if operation.format:
            fmt = strptime_format(operation.format, where).replace("'", "''")
            parsed = f"try_strptime(trim({text}), '{fmt}')"
            return f"CAST({parsed} AS DATE)" if operation.to == "date" else parsed
        return f"TRY_CAST({field_sql} AS {'DATE' if operation.to == 'date' else 'TIMESTAMP'})"
    if operation.format:
        raise InvalidRequest(f"{where}: a format only applies to date and timestamp conversions")
    if operation.to == "integer":
        # TRY_CAST would round 4.5 to 5: a number with a fraction is not an integer.
        whole = f"regexp_full_match(trim({text}), '[+-]?[0-9]+(\\.0*)?')"
        return f"CASE WHEN {whole} THEN TRY_CAST(CAST(trim({text}) AS DOUBLE) AS BIGINT) END"
    if operation.to == "decimal":
        return f"TRY_CAST(trim({text}) AS DOUBLE)"
    return text


def _first_line(exc: Exception) -> str:
    return re.sub(r"\s+", " ", str(exc).strip().splitlines()[0])
