"""The Spark side of the covid ETL: parse, validate, unpivot, combine, quarantine.

Everything here is Spark SQL expressions, so it runs in the JVM (no Python
workers) and executors need no Python packages. Rows are parsed once into one
"wide" row per location (its counts as an array), cached, and unpivoted only
when written: the daily change is a difference within that array, so no
window, sort or shuffle is needed, and the combined table joins locations
(hundreds of rows), not location-days.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column as Col
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeward.ingest.jhu import COMBINED_TABLE, MEASURES, QUARANTINE_TABLE, Header, Measure
from lakeward.storage.paths import hadoop_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakeward.ingest.covid import MeasureReport

# One CSV field: quoted (with "" for a quote) or bare.
_FIELD = r'(?:"(?:[^"]|"")*"|[^,"]*)'
_PREFIX = rf"^({_FIELD},{_FIELD},[^,]*,[^,]*),"
_COUNT = "[0-9]{1,18}"  # a whole non-negative number that fits a bigint
_ROW_INDEX_BITS = (1 << 33) - 1  # monotonically_increasing_id: partition << 33 | row
RECORD_LIMIT = 1000

LOCATION = [
    ("province_state", "string", "Province/State; null for a whole country"),
    ("country", "string", "Country/Region"),
    ("lat", "double", "latitude; null where the source has none"),
    ("lon", "double", "longitude; null where the source has none"),
    ("date", "date", "day of the count"),
]
TABLE_COMMENTS = {
    **{m.table: f"JHU CSSE global time series: cumulative {m.name} per location and day"
       for m in MEASURES},
    COMBINED_TABLE: "confirmed, deaths and recovered per location and day",
    QUARANTINE_TABLE: "source rows and columns the last covid ETL run could not load",
}  # fmt: skip


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
    """One row per data line: location, counts array, or the reason it is quarantined."""
    n_dates = len(header.dates)
    good_mask = [d is not None for d in header.dates]
    checked = [
        d is not None and (measure.tracked_until is None or d <= measure.tracked_until)
        for d in header.dates
    ]
    n_checked = sum(checked)

    lines = (
        spark.read.text(uri)
        .withColumn("_block", F.input_file_block_start())
        .withColumn("_rid", F.monotonically_increasing_id())
    )
    # Line 1 is the header: the first row of the split that starts the file.
    lines = lines.where(
        ~((F.col("_block") == 0) & (F.col("_rid").bitwiseAND(_ROW_INDEX_BITS) == 0))
    )

    value = F.col("value")
    prefix = F.regexp_extract(value, _PREFIX, 1)
    rest = value.substr(F.length(prefix) + 2, F.length(value))
    values = F.split(rest, ",")
    province = _unquote(F.regexp_extract(prefix, rf"^({_FIELD})", 1))
    country = _unquote(F.regexp_extract(prefix, rf"^{_FIELD},({_FIELD})", 1))
    lat, lat_bad = _strict_double(F.regexp_extract(prefix, r",([^,]*),[^,]*$", 1), "Lat", 90)
    lon, lon_bad = _strict_double(F.regexp_extract(prefix, r",([^,]*)$", 1), "Long", 180)

    if n_checked == 0:
        counts_ok = F.lit(True)
    elif checked[:n_checked] == [True] * n_checked:
        # The usual case: the checked columns come first; one regex checks them all.
        counts_ok = rest.rlike(rf"^(?:{_COUNT},){{{n_checked - 1}}}{_COUNT}(?:,|$)")
    else:
        counts_ok = ~F.array_contains(_unchecked_flags(values, checked), True)
    first_bad = F.array_position(_unchecked_flags(values, checked), True).cast("int")
    headers_lit = _literal_array(header.columns[4:])
    count_reason = F.concat(
        F.lit("column '"), F.element_at(headers_lit, first_bad), F.lit("': '"),
        F.element_at(values, first_bad), F.lit("' is not a whole non-negative number"),
    )  # fmt: skip

    n_fields = F.size(F.split(F.regexp_replace(value, '"(?:[^"]|"")*"', "x"), ",", -1))
    wrong_count = F.lit(f" fields, the header has {n_dates + 4}")
    reason = (
        F.when(prefix == "", F.concat(F.lit("has "), n_fields.cast("string"), wrong_count))
        .when(
            F.size(values) != n_dates,
            F.concat(F.lit("has "), (F.size(values) + 4).cast("string"), wrong_count),
        )
        .when(country.isNull(), F.lit("Country/Region is empty"))
        .when(lat_bad.isNotNull(), lat_bad)
        .when(lon_bad.isNotNull(), lon_bad)
        .when(~counts_ok, count_reason)
    )
    column = (
        F.when((prefix == "") | (F.size(values) != n_dates), F.lit(None))
        .when(country.isNull(), F.lit("Country/Region"))
        .when(lat_bad.isNotNull(), F.lit("Lat"))
        .when(lon_bad.isNotNull(), F.lit("Long"))
        .when(~counts_ok, F.element_at(headers_lit, first_bad))
    )

    good_lit = _literal_array(good_mask)
    kept = (
        values if all(good_mask) else F.filter(values, lambda _x, i: F.element_at(good_lit, i + 1))
    )
    n_tracked = sum(
        1 for d in header.good_dates if measure.tracked_until is None or d <= measure.tracked_until
    )
    if n_tracked == len(header.good_dates):
        counts = kept.cast("array<bigint>")
    else:
        counts = F.transform(kept, lambda x, i: F.when(i < n_tracked, x.cast("bigint")))

    parsed = lines.select(
        "_block", "_rid",
        reason.alias("_reason"), column.alias("_column"),
        F.when(reason.isNotNull(), F.substring(value, 1, RECORD_LIMIT)).alias("_record"),
        province.alias("province_state"), country.alias("country"),
        lat.alias("lat"), lon.alias("lon"),
        F.when(reason.isNull(), counts).alias("_counts"),
    )  # fmt: skip
    return parsed


def _unchecked_flags(values: Col, checked: list[bool]) -> Col:
    """Per value: true where a checked column does not hold a whole non-negative number."""
    mask = _literal_array(checked)
    return F.transform(values, lambda x, i: F.element_at(mask, i + 1) & ~x.rlike(f"^{_COUNT}$"))


def parse_stats(parsed: DataFrame) -> dict[str, int]:
    good = F.col("_reason").isNull()
    row = parsed.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(good.cast("int")).alias("good"),
        F.sum((~good).cast("int")).alias("bad"),
        F.sum((good & (F.col("lat").isNull() | F.col("lon").isNull())).cast("int")).alias(
            "no_coordinates"
        ),
    ).collect()[0]
    return {k: int(row[k] or 0) for k in ("rows", "good", "bad", "no_coordinates")}


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
        frame = parsed[measure.name].where(F.col("_reason").isNull()).select(
            "province_state", "country",
            F.col("lat").alias(f"_lat_{measure.name}"), F.col("lon").alias(f"_lon_{measure.name}"),
            counts.alias(measure.name),
        )  # fmt: skip
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
        "province_state", "country",
        F.coalesce(*(F.col(f"_lat_{n}") for n in names)).alias("lat"),
        F.coalesce(*(F.col(f"_lon_{n}") for n in names)).alias("lon"),
        *names,
    )  # fmt: skip
    return located, all_dates


def combined_rows(parsed: dict[str, DataFrame], headers: dict[str, Header]) -> DataFrame:
    """covid_cases: one row per location and day with every measure."""
    located, all_dates = _locations(parsed, headers)
    empty = F.array_repeat(F.lit(None).cast("bigint"), len(all_dates))
    zipped = F.arrays_zip(
        _dates(all_dates).alias("date"),
        *(F.coalesce(F.col(m.name), empty).alias(m.name) for m in MEASURES),
    )
    return located.select("province_state", "country", "lat", "lon", F.inline(zipped)).select(
        [name for name, _t, _c in table_schemas()[COMBINED_TABLE]]
    )


def combined_row_count(parsed: dict[str, DataFrame], headers: dict[str, Header]) -> int:
    located, all_dates = _locations(parsed, headers)
    return located.count() * len(all_dates)


def quarantine_rows(
    spark: SparkSession,
    run_id: str,
    parsed: dict[str, DataFrame],
    headers: dict[str, Header],
    reports: list[MeasureReport],
) -> DataFrame:
    """Every row and column not loaded, with its file and line."""
    schema = T.StructType(
        [T.StructField(n, T.LongType() if t == "bigint" else T.StringType())
         for n, t, _c in table_schemas()[QUARANTINE_TABLE]]
    )  # fmt: skip
    column_rows = [
        (run_id, h.file, 1, c.header, c.reason, None)
        for h in headers.values() for c in h.bad_columns
    ]  # fmt: skip
    result = spark.createDataFrame(column_rows, schema)
    for measure, report in zip(MEASURES, reports, strict=True):
        if report.rows_quarantined == 0:
            continue
        frame = parsed[measure.name]
        # Line numbers: rows before this split (counted per split) + row in split.
        lines_before = _lines_before_each_split(spark, report.raw_uri)
        offsets = spark.createDataFrame(list(lines_before.items()), "_block bigint, _before bigint")
        bad = frame.where(F.col("_reason").isNotNull()).join(F.broadcast(offsets), "_block")
        result = result.unionByName(
            bad.select(
                F.lit(run_id).alias("run_id"),
                F.lit(measure.file_name).alias("file"),
                (F.col("_before") + F.col("_rid").bitwiseAND(_ROW_INDEX_BITS) + 1).alias("line"),
                F.col("_column").alias("column"),
                F.col("_reason").alias("reason"),
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
