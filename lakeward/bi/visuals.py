"""A visual's data: filters applied, then the chart's aggregation, computed by DuckDB.

The rows come from the dataset's extract (in memory) or a live query; either
way they are an Arrow table with the dataset's fields, registered in DuckDB.
Field names are checked against the dataset's fields and values are passed
as parameters, so nothing a user typed is spliced into SQL unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

import duckdb
import pyarrow as pa

from lakeward.bi.datasets import quote
from lakeward.bi.model import Category, Column, Filter, Series, TimeRange, Visual
from lakeward.errors import InvalidRequest

_NUMERIC = ("integer", "decimal")
_TEMPORAL = ("date", "timestamp")


def merge_filters(*layers: Sequence[Filter]) -> list[Filter]:
    """Later layers win: a filter replaces an earlier one of the same type on the same field."""
    merged: dict[tuple[str, str], Filter] = {}
    for layer in layers:
        for item in layer:
            merged[(item.type, item.field)] = item
    return list(merged.values())


class _Fields:
    def __init__(self, columns: list[Column], visual: Visual) -> None:
        self.by_name = {c.name.lower(): c for c in columns}
        self.visual = visual

    def get(self, role: str, name: str | None, kinds: tuple[str, ...] = ()) -> Column:
        column = self.by_name.get((name or "").lower())
        if column is None:
            raise InvalidRequest(
                f"visual {self.visual.id}: {role}: the dataset has no field {name!r} "
                f"(fields: {', '.join(c.name for c in self.by_name.values())})"
            )
        if kinds and column.type not in kinds:
            raise InvalidRequest(
                f"visual {self.visual.id}: {role}: field {column.name} is {column.type}, "
                f"not {' or '.join(kinds)}"
            )
        return column


def _where(fields: _Fields, filters: list[Filter]) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    for item in filters:
        column = fields.get(f"filter on {item.field}", item.field)
        name = quote(column.name)
        if isinstance(item, TimeRange):
            if column.type not in _TEMPORAL:
                raise InvalidRequest(
                    f"visual {fields.visual.id}: time range filter: field {column.name} is "
                    f"{column.type}, not a date or timestamp"
                )
            if item.start is not None:
                clauses.append(f"CAST({name} AS TIMESTAMP) >= ?")
                params.append(item.start)
            if item.end is not None:
                clauses.append(f"CAST({name} AS TIMESTAMP) < ?")
                params.append(item.end)
        elif isinstance(item, Category):
            marks = ", ".join("?" for _ in item.values)
            clauses.append(f"CAST({name} AS VARCHAR) IN ({marks})")
            params.extend(str(v) for v in item.values)
    return " AND ".join(clauses), params


def _aggregate(aggregation: str, column: Column) -> str:
    return f"{'count' if aggregation == 'count' else aggregation}({quote(column.name)})"


def compute_series(
    table: pa.Table,
    columns: list[Column],
    visual: Visual,
    filters: list[Filter],
    source: Literal["extract", "live"],
) -> Series:
    """The data ``visual`` shows over ``table`` after ``filters`` (visual's own merged in)."""
    fields = _Fields(columns, visual)
    for name in visual.formats:
        fields.get("formats", name, _NUMERIC)
    where, params = _where(fields, merge_filters(filters, visual.filters))
    measure_kinds = () if visual.aggregation == "count" else _NUMERIC
    conn = duckdb.connect()
    try:
        conn.register("d", table)
        if visual.type == "map":
            data, rows = _map(conn, fields, visual, where, params, measure_kinds)
        elif visual.type in ("line", "bar"):
            data, rows = _xy(conn, fields, visual, where, params, measure_kinds)
        else:
            data, rows = _table(conn, fields, visual, where, params)
    except duckdb.Error as exc:
        raise InvalidRequest(f"visual {visual.id}: {str(exc).splitlines()[0]}") from None
    finally:
        conn.close()
    return Series(visual.id, visual.type, source, data, rows, truncated=rows >= visual.limit)


def _map(
    conn: duckdb.DuckDBPyConnection, fields: _Fields, visual: Visual, where: str,
    params: list[Any], measure_kinds: tuple[str, ...],
) -> tuple[dict[str, Any], int]:  # fmt: skip
    geo = quote(fields.get("geo", visual.geo, ("geopoint",)).name)
    size = fields.get("size", visual.size, measure_kinds)
    color = fields.get("color", visual.color) if visual.color else None
    tips = [fields.get("tooltips", t) for t in visual.tooltips]
    select = [f"{geo}.lat AS lat", f"{geo}.lon AS lon", f"{_aggregate(visual.aggregation, size)}"]
    groups = [f"{geo}.lat", f"{geo}.lon"]
    if color is not None:
        select.append(f"{quote(color.name)}")
        groups.append(quote(color.name))
    for tip in tips:
        agg = visual.aggregation if tip.type in _NUMERIC else "any_value"
        if tip.type not in _NUMERIC and visual.aggregation == "count":
            agg = "any_value"
        select.append(f"{agg}({quote(tip.name)})")
    sql = (
        f"SELECT {', '.join(select)} FROM d WHERE {where} AND {geo} IS NOT NULL "
        f"GROUP BY {', '.join(groups)} ORDER BY 3 DESC NULLS LAST "
        f"LIMIT {min(visual.limit, visual.top_n or visual.limit)}"
    )
    points = []
    for row in conn.execute(sql, params).fetchall():
        lat, lon, value = row[0], row[1], _json(row[2])
        offset = 3
        label = _json(row[offset]) if color is not None else None
        offset += color is not None
        tooltip = {tip.name: _json(row[offset + i]) for i, tip in enumerate(tips)}
        points.append({"color": label, "lat": lat, "lon": lon, "size": value, "tooltip": tooltip})
    unmapped = conn.execute(f"SELECT count(*) FROM d WHERE {where} AND {geo} IS NULL", params)
    found = unmapped.fetchone()
    return {"points": points, "unmapped_rows": int(found[0]) if found else 0}, len(points)


def _xy(
    conn: duckdb.DuckDBPyConnection, fields: _Fields, visual: Visual, where: str,
    params: list[Any], measure_kinds: tuple[str, ...],
) -> tuple[dict[str, Any], int]:  # fmt: skip
    x = fields.get("x", visual.x, _TEMPORAL if visual.type == "line" else ())
    y = fields.get("y", visual.y, measure_kinds)
    color = fields.get("color", visual.color) if visual.color else None
    color_sql = quote(color.name) if color is not None else "NULL"
    where = f"{where} AND {quote(x.name)} IS NOT NULL"
    measure = _aggregate(visual.aggregation, y)
    bucket, where, params = _top(conn, x, visual, measure, where, params)
    sql = (
        f"SELECT {color_sql} AS series, {bucket} AS x, {measure} "
        f"FROM d WHERE {where} GROUP BY ALL "
        f"ORDER BY series NULLS FIRST, x LIMIT {visual.limit}"
    )
    series: dict[str, dict[str, Any]] = {}
    rows = conn.execute(sql, params).fetchall()
    for name, x_value, y_value in rows:
        label = str(_json(name)) if color is not None else y.name
        entry = series.setdefault(label, {"name": label, "x": [], "y": []})
        entry["x"].append(_json(x_value))
        entry["y"].append(_json(y_value))
    data: dict[str, Any] = {"series": list(series.values())}
    if visual.type == "bar":
        totals = conn.execute(
            f"SELECT {bucket} AS x, {measure} FROM d WHERE {where} GROUP BY ALL", params
        ).fetchall()
        order = _ordered([(_json(k), _json(v)) for k, v in totals], visual)
        rank = {key: i for i, key in enumerate(order)}
        for entry in data["series"]:
            pairs = sorted(zip(entry["x"], entry["y"], strict=True), key=lambda p: rank[p[0]])
            entry["x"], entry["y"] = [p[0] for p in pairs], [p[1] for p in pairs]
        data["categories"] = order
    return data, len(rows)


OTHER = "Other"


def _top(
    conn: duckdb.DuckDBPyConnection, x: Column, visual: Visual, measure: str, where: str,
    params: list[Any],
) -> tuple[str, str, list[Any]]:  # fmt: skip
    """The x expression and filter of a top-N chart: the N categories with the largest
    measure (over every colour), the rest left out or, with ``other``, one Other bar."""
    name = quote(x.name)
    if visual.top_n is None:
        return name, where, params
    kept = [
        row[0]
        for row in conn.execute(
            f"SELECT {name} FROM d WHERE {where} GROUP BY 1 "
            f"ORDER BY {measure} DESC NULLS LAST, 1 LIMIT {visual.top_n}",
            params,
        ).fetchall()
    ]
    if not kept:
        return name, where, params
    marks = ", ".join("?" for _ in kept)
    if not visual.other:
        return name, f"{where} AND {name} IN ({marks})", [*params, *kept]
    # Other is text, so the kept categories are shown as text too. The bucket stands in
    # the select list, before the WHERE clause: its parameters bind first.
    bucket = f"CASE WHEN {name} IN ({marks}) THEN CAST({name} AS VARCHAR) ELSE '{OTHER}' END"
    return bucket, where, [*kept, *params]


def _ordered(totals: list[tuple[Any, Any]], visual: Visual) -> list[Any]:
    """Category labels in the visual's order (labels ascending unless sorted); Other last."""
    sort = visual.sort
    descending = sort is not None and sort.order == "desc"
    if sort is not None and sort.by == "value":
        # Ties in label order either way, as top_n breaks them.
        present = sorted((t for t in totals if t[1] is not None), key=lambda t: _label_key(t[0]))
        present.sort(key=lambda t: t[1], reverse=descending)
        keys = [k for k, _v in present] + [k for k, v in totals if v is None]
    else:
        keys = sorted((k for k, _v in totals), key=_label_key, reverse=descending)
    if visual.other:
        keys = [k for k in keys if k != OTHER] + [k for k in keys if k == OTHER]
    return keys


def _table(
    conn: duckdb.DuckDBPyConnection, fields: _Fields, visual: Visual, where: str,
    params: list[Any],
) -> tuple[dict[str, Any], int]:  # fmt: skip
    shown = [fields.get("columns", c) for c in visual.columns]
    select = []
    for column in shown:
        name = quote(column.name)
        # A point shows as "lat, lon": JSON has no place for a struct in a table cell.
        select.append(
            f"concat_ws(', ', {name}.lat, {name}.lon)" if column.type == "geopoint" else name
        )
    sql = f"SELECT {', '.join(select)} FROM d WHERE {where} LIMIT {visual.limit}"
    rows = [[_json(v) for v in row] for row in conn.execute(sql, params).fetchall()]
    return {"columns": [c.name for c in shown], "rows": rows}, len(rows)


def _label_key(value: Any) -> tuple[int, Any]:
    """Numbers in numeric order, before text (dates are ISO text: in date order)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def _json(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value
