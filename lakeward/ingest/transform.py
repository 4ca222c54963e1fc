"""The Spark side of the covid ETL: parse, validate, unpivot, combine, quarantine.

Everything here is Spark SQL expressions, so it runs in the JVM (no Python
workers) and executors need no Python packages. Rows are parsed once into one
"wide" row per location (its counts as an array), cached, and unpivoted only
when written: the daily change is a difference within that array, so no
window, sort or shuffle is needed, and the combined table joins locations
(hundreds of rows), not location-days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column as Col
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeward.ingest.jhu import COMBINED_TABLE, MEASURES, QUARANTINE_TABLE, Header, Measure
from lakeward.storage.paths import hadoop_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakeward.ingest.reports import MeasureReport

# One CSV field: quoted (with "" for a quote) or bare.
_FIELD = r'(?:"(?:[^"]|"")*"|[^,"]*)'
_PREFIX = rf"^({_FIELD},{_FIELD},[^,]*,[^,]*),"
_COUNT = "[0-9]{1,18}"  # a whole non-negative number that fits a bigint
_ROW_INDEX_BITS = (1 << 33) - 1  # monotonically_increasing_id: partition << 33 | row
RECORD_LIMIT = 1000
COLUMN_PLACEHOLDER = "\u0001column\u0001"  # replaced by the column's header in quarantine rows

LOCATION = [
    ("province_state", "string", "Province/State; null for a whole country"),
    ("country", "string", "Country/Region"),
    ("lat", "double", "latitude; null where the source has none"),
    ("lon", "double", "longitude; null where the source has none"),
    ("date", "date", "day of the count"),
]
TABLE_COMMENTS = {
    **{
        m.table: f"JHU CSSE global time series: cumulative {m.name} per location and day"
        for m in MEASURES
    },
    COMBINED_TABLE: "confirmed, deaths and recovered per location and day",
    QUARANTINE_TABLE: "source rows and columns the last covid ETL run could not load",
}


def table_schemas() -> dict[str, list[tuple[str, str, str]]]:
    """Column name, Hive type and comment of every table the ETL writes."""
    schemas = {
        m.table: [
            *LOCATION,
            (m.name, "bigint", f"cumulative {m.name}" + _untracked_note(m)),
            (m.new_column, "bigint", "change since the previous day; null on the first day"),
        ]
        for m in MEASURES
    }
    schemas[COMBINED_TABLE] = [
        *LOCATION,
        *((m.name, "bigint", f"cumulative {m.name}" + _untracked_note(m)) for m in MEASURES),
    ]
    schemas[QUARANTINE_TABLE] = [
        ("run_id", "string", "the ETL run"),
        ("file", "string", "source file"),
        ("line", "bigint", "line in the source file (1 is the header)"),
        ("column", "string", "the column at fault, if one is"),
        ("reason", "string", "why the row or column was not loaded"),
        ("record", "string", f"the source line, first {RECORD_LIMIT} characters"),
    ]
    return schemas


def _untracked_note(measure: Measure) -> str:
    if measure.tracked_until is None:
        return ""
    return f"; null after {measure.tracked_until} (no longer tracked by JHU)"


def untracked_columns(header: Header, measure: Measure) -> int:
    if measure.tracked_until is None:
        return 0
    return sum(1 for d in header.good_dates if d > measure.tracked_until)


def _unquote(field: Col) -> Col:
    inner = F.regexp_replace(field.substr(F.lit(2), F.length(field) - 2), '""', '"')
    value = F.when(field.startswith('"'), inner).otherwise(field)
    return F.when(value == "", F.lit(None)).otherwise(value)


def _strict_double(field: Col, name: str, limit: float) -> tuple[Col, Col]:
    """The value (null when empty) and, when it is not a number in range, why."""
    value = F.when(field == "", F.lit(None)).otherwise(field.cast("double"))
    bad = (field != "") & (value.isNull() | (F.abs(value) > limit))
    reason = F.concat(
        F.lit(f"{name} '"), field, F.lit(f"' is not a number between -{limit:g} and {limit:g}")
    )
    return value, F.when(bad, reason)


def parse_lines(spark: SparkSession, uri: str, header: Header, measure: Measure) -> DataFrame:
    """One row per data line: location, counts array, or the reason it is quarantined.

    Built in stages, each a select over the previous one's columns: a value
    several later expressions use (the prefix, the split counts, the reason)
    is computed once per row instead of once per use.
    """
    n_dates = len(header.dates)
    good_mask = [d is not None for d in header.dates]
    checked = [
        d is not None and (measure.tracked_until is None or d <= measure.tracked_until)
        for d in header.dates
    ]
    n_checked = sum(checked)
    checked_prefix = checked[:n_checked] == [True] * n_checked

    lines = spark.read.text(uri).select(
        F.input_file_block_start().alias("_block"),
        F.monotonically_increasing_id().alias("_rid"),
        "value",
    )
    # Line 1 is the header: the first row of the split that starts the file.
    is_header = (F.col("_block") == 0) & (F.col("_rid").bitwiseAND(_ROW_INDEX_BITS) == 0)
    value = F.col("value")
    staged = lines.where(~is_header).select(
        "_block", "_rid", "value", F.regexp_extract(value, _PREFIX, 1).alias("_prefix")
    )
    prefix = F.col("_prefix")
    staged = staged.select(
        "_block",
        "_rid",
        "value",
        "_prefix",
        value.substr(F.length(prefix) + 2, F.length(value)).alias("_rest"),
        _unquote(F.regexp_extract(prefix, rf"^({_FIELD})", 1)).alias("province_state"),
        _unquote(F.regexp_extract(prefix, rf"^{_FIELD},({_FIELD})", 1)).alias("country"),
        F.regexp_extract(prefix, r",([^,]*),[^,]*$", 1).alias("_lat"),
        F.regexp_extract(prefix, r",([^,]*)$", 1).alias("_lon"),
    )
    rest, values = F.col("_rest"), F.col("_values")
    if n_checked == 0:
        counts_ok: Col = F.lit(True)
    elif checked_prefix:
        # The usual case: the checked columns come first; one regex checks them all.
        counts_ok = rest.rlike(rf"^(?:{_COUNT},){{{n_checked - 1}}}{_COUNT}(?:,|$)")
    else:
        counts_ok = ~F.array_contains(_unchecked_flags(values, checked), True)
    lat, lat_bad = _strict_double(F.col("_lat"), "Lat", 90)
    lon, lon_bad = _strict_double(F.col("_lon"), "Long", 180)
    staged = staged.select(
        "_block",
        "_rid",
        "value",
        "_prefix",
        "_rest",
        "province_state",
        "country",
        F.split(rest, ",").alias("_values"),
        lat.alias("lat"),
        lon.alias("lon"),
        lat_bad.alias("_lat_bad"),
        lon_bad.alias("_lon_bad"),
    ).select("*", counts_ok.alias("_counts_ok"))

    # Which column holds the first bad count, as its position; the quarantine
    # step names it (keeping the 1,143 header names out of this plan).
    if checked_prefix:
        flags = F.transform(
            F.slice(values, 1, max(n_checked, 1)), lambda x: ~x.rlike(f"^{_COUNT}$")
        )
    else:
        flags = _unchecked_flags(values, checked)
    first_bad = F.array_position(flags, True).cast("int")
    n_fields = F.size(F.split(F.regexp_replace(value, '"(?:[^"]|"")*"', "x"), ",", -1))
    wrong_count = F.lit(f" fields, the header has {n_dates + 4}")
    bad_shape = (prefix == "") | (F.size(values) != n_dates)
    reason = (
        F.when(prefix == "", F.concat(F.lit("has "), n_fields.cast("string"), wrong_count))
        .when(
            F.size(values) != n_dates,
            F.concat(F.lit("has "), (F.size(values) + 4).cast("string"), wrong_count),
        )
        .when(F.col("country").isNull(), F.lit("Country/Region is empty"))
        .when(F.col("_lat_bad").isNotNull(), F.col("_lat_bad"))
        .when(F.col("_lon_bad").isNotNull(), F.col("_lon_bad"))
        .when(
            ~F.col("_counts_ok"),
            F.concat(
                F.lit(f"column '{COLUMN_PLACEHOLDER}': '"),
                F.element_at(values, first_bad),
                F.lit("' is not a whole non-negative number"),
            ),
        )
    )
    column = (
        F.when(bad_shape, F.lit(None))
        .when(F.col("country").isNull(), F.lit("Country/Region"))
        .when(F.col("_lat_bad").isNotNull(), F.lit("Lat"))
        .when(F.col("_lon_bad").isNotNull(), F.lit("Long"))
        .when(~F.col("_counts_ok"), F.lit(COLUMN_PLACEHOLDER))
    )
    bad_index = F.when(~bad_shape & ~F.col("_counts_ok"), first_bad)
    staged = staged.select(
        "*", reason.alias("_reason"), column.alias("_column"), bad_index.alias("_bad_index")
    )

    kept = values
    if not all(good_mask):
        good_lit = _literal_array(good_mask)
        kept = F.filter(values, lambda _x, i: F.element_at(good_lit, i + 1))
    until = measure.tracked_until
    n_tracked = sum(1 for d in header.good_dates if until is None or d <= until)
    if n_tracked == len(header.good_dates):
        counts = kept.cast("array<bigint>")
    else:
        counts = F.transform(kept, lambda x, i: F.when(i < n_tracked, x.cast("bigint")))
    failed = F.col("_reason").isNotNull()
    return staged.select(
        "_block",
        "_rid",
        "_reason",
        "_column",
        "_bad_index",
        F.when(failed, F.substring(value, 1, RECORD_LIMIT)).alias("_record"),
        "province_state",
        "country",
        "lat",
        "lon",
        F.when(~failed, counts).alias("_counts"),
    )


def _unchecked_flags(values: Col, checked: list[bool]) -> Col:
    """Per value: true where a checked column does not hold a whole non-negative number."""
    mask = _literal_array(checked)
    return F.transform(values, lambda x, i: F.element_at(mask, i + 1) & ~x.rlike(f"^{_COUNT}$"))


@dataclass(frozen=True)
class ParseStats:
    rows: int
    good: int
    bad: int
    no_coordinates: int
    locations: frozenset[tuple[str | None, str]]  # (province_state, country) of loaded rows


def parse_stats(parsed: DataFrame) -> ParseStats:
    good = F.col("_reason").isNull()
    location = F.when(good, F.struct("province_state", "country"))
    row = parsed.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(good.cast("int")).alias("good"),
        F.sum((~good).cast("int")).alias("bad"),
        F.sum((good & (F.col("lat").isNull() | F.col("lon").isNull())).cast("int")).alias(
            "no_coordinates"
        ),
        F.collect_set(location).alias("locations"),
    ).collect()[0]
    return ParseStats(
        rows=int(row["rows"] or 0),
        good=int(row["good"] or 0),
        bad=int(row["bad"] or 0),
        no_coordinates=int(row["no_coordinates"] or 0),
        locations=frozenset((r["province_state"], r["country"]) for r in row["locations"]),
    )


def _literal_array(items: list[Any]) -> Col:
    """An array literal, built in one call: thousands of F.lit calls cost seconds."""

    def sql(item: Any) -> str:
        if item is None:
            return "NULL"
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, date):
            return f"DATE'{item.isoformat()}'"
        if isinstance(item, int):
            return str(item)
        return "'" + str(item).replace("\\", "\\\\").replace("'", "\\'") + "'"

    return F.expr(f"array({', '.join(map(sql, items))})")


def _dates(dates: list[date]) -> Col:
    """The dates as an array: a sequence when they are consecutive days (the usual case)."""
    if dates and (dates[-1] - dates[0]).days == len(dates) - 1:
        return F.sequence(F.lit(dates[0]), F.lit(dates[-1]), F.expr("INTERVAL 1 DAY"))
    return _literal_array(list(dates))


def _with_daily_change(counts: Col) -> Col:
    return F.transform(counts, lambda x, i: F.when(i > 0, x - F.element_at(counts, i)))


def measure_rows(parsed: DataFrame, header: Header, measure: Measure) -> DataFrame:
    """Unpivot a measure: one row per location and day, with the daily change."""
    good = parsed.where(F.col("_reason").isNull())
    zipped = F.arrays_zip(
        _dates(header.good_dates).alias("date"),
        F.col("_counts").alias(measure.name),
        _with_daily_change(F.col("_counts")).alias(measure.new_column),
    )
    return good.select("province_state", "country", "lat", "lon", F.inline(zipped)).select(
        [name for name, _t, _c in table_schemas()[measure.table]]
    )


def _locations(
    parsed: dict[str, DataFrame], headers: dict[str, Header]
) -> tuple[DataFrame, list[date]]:
    """Locations of all measures joined, their counts aligned on the union of the dates."""
    all_dates = sorted({d for h in headers.values() for d in h.good_dates})
    joined: DataFrame | None = None
    for measure in MEASURES:
        dates = headers[measure.name].good_dates
        counts = F.col("_counts")
        if dates != all_dates:
            index = {d: i + 1 for i, d in enumerate(dates)}
            where = _literal_array([index.get(d) for d in all_dates]).cast("array<int>")
            counts = F.transform(
                where, lambda i: F.when(i.isNotNull(), F.element_at(F.col("_counts"), i))
            )
        frame = (
            parsed[measure.name]
            .where(F.col("_reason").isNull())
            .select(
                "province_state",
                "country",
                F.col("lat").alias(f"_lat_{measure.name}"),
                F.col("lon").alias(f"_lon_{measure.name}"),
                counts.alias(measure.name),
            )
        )
        if joined is None:
            joined = frame
        else:
            on = joined["province_state"].eqNullSafe(frame["province_state"]) & (
                joined["country"] == frame["country"]
            )
            joined = joined.join(frame, on, "full_outer").select(
                F.coalesce(joined["province_state"], frame["province_state"]).alias(
                    "province_state"
                ),
                F.coalesce(joined["country"], frame["country"]).alias("country"),
                *(c for c in joined.columns if c not in ("province_state", "country")),
                *(c for c in frame.columns if c not in ("province_state", "country")),
            )
    assert joined is not None
    names = [m.name for m in MEASURES]
    located = joined.select(
        "province_state",
        "country",
        F.coalesce(*(F.col(f"_lat_{n}") for n in names)).alias("lat"),
        F.coalesce(*(F.col(f"_lon_{n}") for n in names)).alias("lon"),
        *names,
    )
    return located, all_dates


def combined_rows(parsed: dict[str, DataFrame], headers: dict[str, Header]) -> DataFrame:
    """covid_cases: one row per location and day with every measure."""
    located, all_dates = _locations(parsed, headers)
    # The join leaves few, uneven partitions; the unpivot after it is the heavy part.
    located = located.repartition(2 * located.sparkSession.sparkContext.defaultParallelism)
    empty = F.array_repeat(F.lit(None).cast("bigint"), len(all_dates))
    zipped = F.arrays_zip(
        _dates(all_dates).alias("date"),
        *(F.coalesce(F.col(m.name), empty).alias(m.name) for m in MEASURES),
    )
    return located.select("province_state", "country", "lat", "lon", F.inline(zipped)).select(
        [name for name, _t, _c in table_schemas()[COMBINED_TABLE]]
    )


def combined_row_count(stats: list[ParseStats], headers: dict[str, Header]) -> int:
    """Rows of covid_cases: every location of any measure, every day of any measure."""
    locations = frozenset().union(*(s.locations for s in stats))
    return len(locations) * len({d for h in headers.values() for d in h.good_dates})


def quarantine_rows(
    spark: SparkSession,
    run_id: str,
    parsed: dict[str, DataFrame],
    headers: dict[str, Header],
    reports: list[MeasureReport],
) -> DataFrame:
    """Every row and column not loaded, with its file and line."""
    schema = T.StructType(
        [
            T.StructField(n, T.LongType() if t == "bigint" else T.StringType())
            for n, t, _c in table_schemas()[QUARANTINE_TABLE]
        ]
    )
    column_rows = [
        (run_id, h.file, 1, c.header, c.reason, None)
        for h in headers.values()
        for c in h.bad_columns
    ]
    result = spark.createDataFrame(column_rows, schema)
    for measure, report in zip(MEASURES, reports, strict=True):
        if report.rows_quarantined == 0:
            continue
        frame = parsed[measure.name]
        # Line numbers: rows before this split (counted per split) + row in split.
        lines_before = _lines_before_each_split(spark, report.raw_uri)
        offsets = spark.createDataFrame(list(lines_before.items()), "_block bigint, _before bigint")
        names = spark.createDataFrame(
            list(enumerate(headers[measure.name].columns[4:], start=1)),
            "_bad_index int, _header string",
        )
        bad = (
            frame.where(F.col("_reason").isNotNull())
            .join(F.broadcast(offsets), "_block")
            .join(F.broadcast(names), "_bad_index", "left")
        )
        header = F.coalesce(F.col("_header"), F.lit("?"))
        result = result.unionByName(
            bad.select(
                F.lit(run_id).alias("run_id"),
                F.lit(measure.file_name).alias("file"),
                (F.col("_before") + F.col("_rid").bitwiseAND(_ROW_INDEX_BITS) + 1).alias("line"),
                F.when(F.col("_column") == COLUMN_PLACEHOLDER, header)
                .otherwise(F.col("_column"))
                .alias("column"),
                F.call_function(
                    "replace", F.col("_reason"), F.lit(COLUMN_PLACEHOLDER), header
                ).alias("reason"),
                F.col("_record").alias("record"),
            )
        )
    return result.coalesce(1)


def _lines_before_each_split(spark: SparkSession, uri: str) -> dict[int, int]:
    counts = (
        spark.read.text(hadoop_uri(uri))
        .groupBy(F.input_file_block_start().alias("block"))
        .count()
        .collect()
    )
    before, total = {}, 0
    for row in sorted(counts, key=lambda r: r["block"]):
        before[int(row["block"])] = total
        total += int(row["count"])
    return before
