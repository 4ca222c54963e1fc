"""Field operations, computed-field expressions and visual aggregation on small tables
(no stack needed: these are the pure parts the service composes)."""

from __future__ import annotations

from datetime import date, datetime

import pyarrow as pa
import pytest

from lakeward.bi.datasets import apply_fields, strptime_format
from lakeward.bi.expressions import compile_expression
from lakeward.bi.model import AnalysisSpec, DatasetSpec, Visual, parse
from lakeward.bi.visuals import compute_series
from lakeward.errors import InvalidRequest


def shaped(table: pa.Table, fields: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    spec = DatasetSpec.model_validate(
        {"name": "t", "data_source_id": "s", "sql": "SELECT 1", "fields": fields}
    )
    return apply_fields(table, spec.fields)


def test_java_style_date_patterns() -> None:
    assert strptime_format("yyyy-MM-dd", "f") == "%Y-%m-%d"
    assert strptime_format("M/d/yy HH:mm", "f") == "%m/%d/%y %H:%M"
    assert strptime_format("dd MMM yyyy 'at' hh:mm a", "f") == "%d %b %Y at %I:%M %p"
    with pytest.raises(InvalidRequest, match="unknown pattern letter 'Q'"):
        strptime_format("yyyy-QQ", "fields[0] (convert)")
    with pytest.raises(InvalidRequest, match="unclosed quote"):
        strptime_format("yyyy 'at", "fields[0] (convert)")


def test_conversions_keep_rows_and_report_failures() -> None:
    table = pa.table({
        "day": ["1/22/20", "9/10/20", "13/40/20", None, "soon"],
        "n": ["1", " 2 ", "x", None, "4.5"],  # 4.5 is no integer: not rounded
        "amount": ["1.5", "2", "abc", None, "1e3"],
    })  # fmt: skip
    result = shaped(table, [
        {"op": "convert", "field": "day", "to": "date", "format": "M/d/yy"},
        {"op": "convert", "field": "n", "to": "integer"},
        {"op": "convert", "field": "amount", "to": "decimal"},
    ])  # fmt: skip
    assert result.table.num_rows == 5
    assert result.table.column("day").to_pylist() == [
        date(2020, 1, 22), date(2020, 9, 10), None, None, None]  # fmt: skip
    assert result.table.column("n").to_pylist() == [1, 2, None, None, None]
    assert result.table.column("amount").to_pylist() == [1.5, 2.0, None, None, 1000.0]
    issues = {i.field: (i.failed_rows, i.examples) for i in result.issues}
    assert issues == {"day": (2, ["13/40/20", "soon"]), "n": (2, ["4.5", "x"]),
                      "amount": (1, ["abc"])}  # fmt: skip
    kinds = {c.name: (c.type, c.role) for c in result.columns}
    assert kinds == {"day": ("date", "dimension"), "n": ("integer", "measure"),
                     "amount": ("decimal", "measure")}  # fmt: skip


def test_geo_points_and_steps_that_build_on_each_other() -> None:
    table = pa.table({"Lat": [41.9, 95.0, None], "lon": [12.5, 0.0, None],
                      "deaths": [35_587, 1, 3], "confirmed": [283_180, 0, 3]})  # fmt: skip
    result = shaped(table, [
        {"op": "rename", "field": "Lat", "to": "latitude"},
        {"op": "geo", "name": "where", "latitude": "latitude", "longitude": "lon"},
        {"op": "computed", "name": "rate", "expression": "deaths / confirmed"},
        {"op": "computed", "name": "percent", "expression": "round(100 * rate, 2)"},
    ])  # fmt: skip
    rows = result.table.to_pylist()
    assert rows[0]["where"] == {"lat": 41.9, "lon": 12.5}
    assert rows[1]["where"] is None and rows[2]["where"] is None  # out of range; no coordinates
    assert rows[0]["percent"] == 12.57 and rows[1]["rate"] is None and rows[2]["rate"] == 1.0
    assert [(i.field, i.failed_rows, i.examples) for i in result.issues] == [
        ("where", 1, ["95.0, 0.0"])]  # fmt: skip
    assert {c.name: c.type for c in result.columns}["where"] == "geopoint"


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("deaths / nope", "unknown field 'nope'"),
        ("sum(deaths)", "SUM is not allowed"),
        ("(SELECT 1)", "SUBQUERY is not allowed"),
        ("read_parquet('x')", "is not allowed"),
        ("t.deaths", "refer to fields by name only"),
        ("deaths +", "does not parse"),
        ("deaths; DROP TABLE x", "give one expression (found 2)"),
        ("", "give one expression (found 0)"),
    ],
)
def test_expressions_outside_the_language_are_refused(expression: str, problem: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        compile_expression(expression, ["deaths", "confirmed"], "rate")
    assert str(refused.value).startswith("computed field rate: ")
    assert problem in str(refused.value)


def test_definitions_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest, match=r"sheets\.0\.visuals\.0: .*a map visual needs geo"):
        sheet = {"id": "s", "visuals": [{"id": "m", "type": "map", "size": "x"}]}
        parse(AnalysisSpec, {"name": "a", "dataset_id": "d", "sheets": [sheet]}, "analysis")
    with pytest.raises(InvalidRequest, match=r"refresh_interval_minutes: Input should be greater"):
        parse(DatasetSpec, {"name": "d", "data_source_id": "s", "sql": "SELECT 1",
                            "refresh_interval_minutes": 1}, "dataset")  # fmt: skip
    with pytest.raises(InvalidRequest, match=r"end must be after start"):
        parse(Visual, {"id": "v", "type": "table", "columns": ["a"], "filters": [
            {"type": "time_range", "field": "d", "start": "2020-09-11T00:00:00",
             "end": "2020-09-10T00:00:00"}]}, "visual")  # fmt: skip


CASES = pa.table({
    "country": ["US", "US", "Italy", "Italy", "Spain"],
    "day": [date(2020, 9, 10), date(2020, 9, 11), date(2020, 9, 10), date(2020, 9, 11),
            date(2020, 9, 10)],
    "confirmed": [6_420_040, 6_443_652, 283_180, 284_796, 566_326],
    "where": [{"lat": 40.0, "lon": -100.0}, {"lat": 40.0, "lon": -100.0},
              {"lat": 41.9, "lon": 12.6}, {"lat": 41.9, "lon": 12.6}, None],
})  # fmt: skip
COLUMNS = shaped(CASES, []).columns


def series(visual: dict[str, object], filters: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    spec = parse(Visual, {"id": "v", **visual}, "visual")
    parsed = parse(Visual, {"id": "f", "type": "table", "columns": ["day"],
                            "filters": filters or []}, "visual").filters  # fmt: skip
    return compute_series(CASES, COLUMNS, spec, parsed, "extract").data


def test_time_range_keeps_one_day_and_the_viewer_filter_wins() -> None:
    day = [{"type": "time_range", "field": "day", "start": "2020-09-10T00:00:00",
            "end": "2020-09-11T00:00:00"}]  # fmt: skip
    points = series({"type": "map", "geo": "where", "size": "confirmed", "color": "country"}, day)
    assert {p["color"]: p["size"] for p in points["points"]} == {"US": 6_420_040, "Italy": 283_180}
    assert points["unmapped_rows"] == 1  # Spain has no coordinates
    # A visual's own filter is replaced by the viewer's filter on the same field.
    saved = {"type": "map", "geo": "where", "size": "confirmed", "filters": day}
    next_day = [{**day[0], "start": "2020-09-11T00:00:00", "end": "2020-09-12T00:00:00"}]
    assert sum(p["size"] for p in series(saved)["points"]) == 6_420_040 + 283_180
    visual = parse(Visual, {"id": "v", **saved}, "visual")
    viewer = parse(Visual, {"id": "f", "type": "table", "columns": ["day"],
                            "filters": next_day}, "visual").filters  # fmt: skip
    merged = compute_series(CASES, COLUMNS, visual.model_copy(update={"filters": []}),
                            [*visual.filters, *viewer], "extract")  # fmt: skip
    assert sum(p["size"] for p in merged.data["points"]) == 6_443_652 + 284_796


def test_lines_bars_and_tables() -> None:
    two = [{"type": "category", "field": "country", "values": ["US", "Italy"]}]
    lines = series({"type": "line", "x": "day", "y": "confirmed", "color": "country"}, two)
    assert lines["series"] == [
        {"name": "Italy", "x": ["2020-09-10", "2020-09-11"], "y": [283_180, 284_796]},
        {"name": "US", "x": ["2020-09-10", "2020-09-11"], "y": [6_420_040, 6_443_652]},
    ]
    bars = series({"type": "bar", "x": "country", "y": "confirmed", "aggregation": "count"})
    assert bars["series"] == [{"name": "confirmed", "x": ["Italy", "Spain", "US"],
                               "y": [2, 1, 2]}]  # fmt: skip
    table = series({"type": "table", "columns": ["country", "where"], "limit": 2})
    assert table == {"columns": ["country", "where"], "rows": [["US", "40.0, -100.0"]] * 2}
    spec = parse(Visual, {"id": "v", "type": "table", "columns": ["country"], "limit": 2}, "v")
    assert compute_series(CASES, COLUMNS, spec, [], "extract").truncated
    assert not compute_series(CASES, COLUMNS, spec.model_copy(update={"limit": 9}), [],
                              "extract").truncated  # fmt: skip
    with pytest.raises(InvalidRequest, match="visual v: x: field country is string, not date"):
        series({"type": "line", "x": "country", "y": "confirmed"})
    with pytest.raises(InvalidRequest, match="visual v: y: the dataset has no field 'deaths'"):
        series({"type": "bar", "x": "country", "y": "deaths"})
    with pytest.raises(InvalidRequest, match="time range filter: field country is string"):
        series(
            {"type": "bar", "x": "country", "y": "confirmed"},
            [{"type": "time_range", "field": "country", "start": "2020-01-01T00:00:00"}],
        )


def test_zoned_bounds_compare_in_utc() -> None:
    noon = [{"type": "time_range", "field": "day", "start": "2020-09-10T02:00:00+02:00",
             "end": datetime(2020, 9, 11).isoformat()}]  # fmt: skip
    points = series({"type": "map", "geo": "where", "size": "confirmed"}, noon)
    assert sum(p["size"] for p in points["points"]) == 6_420_040 + 283_180
