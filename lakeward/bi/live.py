"""A finished query's result, read back from the lake as an Arrow table.

The SQL service leaves a result as Athena does: a CSV in the lake with every
value quoted, NULL as an empty unquoted field, and the column types in the
execution's result metadata. The BI layer reads the whole result at once
(paging 1,000 rows at a time through ``GetQueryResults`` would only add round
trips), typing each column by its Athena type.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pacsv

from lakeward.config import Settings
from lakeward.errors import StorageError
from lakeward.query.model import ColumnInfo
from lakeward.storage import Storage

_INTEGERS = ("tinyint", "smallint", "integer", "int", "bigint")
_FLOATS = ("double", "float", "real", "decimal")


def arrow_type(athena_type: str) -> pa.DataType:
    """The Arrow type a column of an Athena type is read as (text for nested types)."""
    kind = athena_type.lower().split("(", 1)[0].strip()
    if kind in _INTEGERS:
        return pa.int64()
    if kind in _FLOATS:
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "date":
        return pa.date32()
    if kind.startswith("timestamp"):
        return pa.timestamp("ms")
    return pa.string()


def read_result(
    storage: Storage, settings: Settings, output_location: str, columns: list[ColumnInfo]
) -> pa.Table:
    relative = output_location.removeprefix(settings.lake_root + "/")
    bucket, _, key = relative.partition("/")
    names = [c.name for c in columns]
    if not names:
        return pa.table({})
    data = storage.get(bucket, key)
    unique = _unique(names)
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=unique, skip_rows=1),
            convert_options=pacsv.ConvertOptions(
                column_types={n: arrow_type(c.type) for n, c in zip(unique, columns, strict=True)},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                timestamp_parsers=[pacsv.ISO8601, "%Y-%m-%d %H:%M:%S"],
            ),
        )
    except pa.ArrowInvalid as exc:
        raise StorageError(f"the query result {output_location} could not be read: {exc}") from None
    return table


def _unique(names: list[str]) -> list[str]:
    """Result columns may repeat a name (``SELECT a, a``); a table's fields may not."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name.lower(), 0)
        seen[name.lower()] = count + 1
        out.append(name if count == 0 else f"{name}_{count + 1}")
    return out
