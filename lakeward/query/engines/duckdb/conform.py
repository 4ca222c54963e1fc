"""DuckDB's result columns in the types Athena reports for the same query.

Two DuckDB types have no Trino counterpart. A 128-bit integer is what DuckDB
sums integers into; Trino's sum of integers is a bigint that fails on overflow,
so such a column is narrowed to 64 bits, value by value, and fails the same way.
DuckDB has one interval type where Trino has two: ``interval year to month``
(``1-2``) and ``interval day to second`` (``1 01:30:00.000``). A Trino interval
is one or the other, so the values tell which: months alone, or days and time
alone. A column whose first values leave it open (only zero intervals or NULLs)
cannot be typed and fails rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lakeward.errors import QueryFailed
from lakeward.query.model import ColumnInfo
from lakeward.query.types import AthenaType, athena_type_of_duckdb

YEAR_TO_MONTH = "interval year to month"
DAY_TO_SECOND = "interval day to second"
_MILLIS_PER_DAY = 86_400_000


@dataclass
class Conformer:
    """What to change in each batch of one result, and the column types after it."""

    bigints: list[int] = field(default_factory=list)  # DuckDB HUGEINT columns
    intervals: dict[int, str | None] = field(default_factory=dict)  # column -> kind

    @classmethod
    def of(cls, duckdb_types: list[str]) -> Conformer:
        conformer = cls()
        for i, kind in enumerate(duckdb_types):
            if kind == "HUGEINT":
                conformer.bigints.append(i)
            elif kind == "INTERVAL":
                conformer.intervals[i] = None
        return conformer

    def columns(self, names: list[str], duckdb_types: list[str]) -> list[ColumnInfo]:
        """The result's columns; call after the first batch has gone through ``batch``."""
        columns = []
        for i, (name, kind) in enumerate(zip(names, duckdb_types, strict=True)):
            if i in self.bigints:
                athena = AthenaType.of("bigint")
            elif i in self.intervals:
                athena = AthenaType.of(self.intervals[i] or DAY_TO_SECOND)
            else:
                athena = athena_type_of_duckdb(kind)
            columns.append(athena.column(name))
        return columns

    def schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of the batches ``batch`` returns, given DuckDB's."""
        for i in self.bigints:
            schema = schema.set(i, schema.field(i).with_type(pa.int64()))
        for i in self.intervals:
            schema = schema.set(i, schema.field(i).with_type(pa.string()))
        return schema

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.bigints and not self.intervals:
            return batch
        arrays = list(batch.columns)
        for i in self.bigints:
            arrays[i] = _bigints(arrays[i], batch.schema.names[i])
        for i in self.intervals:
            arrays[i] = self._interval_texts(i, arrays[i], batch.schema.names[i])
        return pa.record_batch(arrays, names=batch.schema.names)

    def _interval_texts(self, index: int, values: pa.Array, name: str) -> pa.Array:
        kinds = {k for k in map(_interval_kind, values.to_pylist()) if k is not None}
        decided = self.intervals[index]
        if decided is not None:
            kinds.add(decided)
        if "mixed" in kinds or len(kinds) > 1 or (decided is None and not kinds and len(values)):
            raise QueryFailed(
                f"column {name}: an interval column whose values do not tell 'year to month' "
                "from 'day to second' (only zero intervals, or both kinds) is not supported"
            )
        kind = kinds.pop() if kinds else decided or DAY_TO_SECOND
        self.intervals[index] = kind
        texts = [None if v is None else _interval_text(v, kind) for v in values.to_pylist()]
        return pa.array(texts, pa.string())


def _bigints(values: pa.Array, name: str) -> pa.Array:
    try:
        return values.cast(pa.int64())
    except (pa.ArrowInvalid, OverflowError):
        raise QueryFailed(
            f"bigint overflow: a value of column {name} does not fit a bigint"
        ) from None


def _interval_kind(value: pa.MonthDayNano | None) -> str | None:
    if value is None or (value.months == 0 and value.days == 0 and value.nanoseconds == 0):
        return None
    if value.days == 0 and value.nanoseconds == 0:
        return YEAR_TO_MONTH
    if value.months == 0:
        return DAY_TO_SECOND
    return "mixed"


def _interval_text(value: pa.MonthDayNano, kind: str) -> str:
    if kind == YEAR_TO_MONTH:
        months = value.months
        sign, months = ("-", -months) if months < 0 else ("", months)
        return f"{sign}{months // 12}-{months % 12}"
    millis = value.days * _MILLIS_PER_DAY + value.nanoseconds // 1_000_000
    sign, millis = ("-", -millis) if millis < 0 else ("", millis)
    days, millis = divmod(millis, _MILLIS_PER_DAY)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    seconds, millis = divmod(millis, 1000)
    return f"{sign}{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"
