"""Console forms to the BI service's definitions (checked there, by its own models).

A form names fields plainly (``op_kind_0``, ``op_a_0``, ...); these functions
only gather them into the JSON shapes of docs/bi.md, so every rule and every
message stays in one place, ``lakeward.bi.model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Field operations and what their columns a, b, c mean on the form.
FIELD_OPS = {
    "rename": ("field", "new name", ""),
    "convert": (
        "field",
        "to (date, timestamp, integer, decimal, string)",
        "format, e.g. yyyy-MM-dd",
    ),
    "geo": ("new field", "latitude field", "longitude field"),
    "computed": ("new field", "expression, e.g. deaths / confirmed", ""),
}
VISUAL_TYPES = {
    "map": "Point map (geo point, size by a measure, color by a dimension)",
    "line": "Line chart (x: date, y: a measure, one line per color value)",
    "bar": "Bar chart (x: a dimension, y: a measure)",
    "table": "Table (columns)",
}
OP_ROWS = 6


def _text(form: Mapping[str, Any], key: str) -> str:
    value = form.get(key)
    return value.strip() if isinstance(value, str) else ""


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def field_ops_from(form: Mapping[str, Any]) -> list[dict[str, str]]:
    """The operation rows filled in, in order (empty rows are skipped)."""
    ops = []
    for row in range(OP_ROWS):
        kind = _text(form, f"op_kind_{row}")
        a, b, c = (_text(form, f"op_{x}_{row}") for x in "abc")
        if not kind or not (a or b or c):
            continue
        ops.append({"op": kind, "a": a, "b": b, "c": c})
    return ops


def _field_op(row: Mapping[str, str]) -> dict[str, Any]:
    kind, a, b, c = row["op"], row["a"], row["b"], row["c"]
    if kind == "rename":
        return {"op": kind, "field": a, "to": b}
    if kind == "convert":
        return {"op": kind, "field": a, "to": b, **({"format": c} if c else {})}
    if kind == "geo":
        return {"op": kind, "name": a, "latitude": b, "longitude": c}
    return {"op": kind, "name": a, "expression": b}


def dataset_spec_from(form: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The DatasetSpec JSON of a dataset form, and its operation rows (to show again)."""
    ops = field_ops_from(form)
    spec: dict[str, Any] = {
        "name": _text(form, "name"),
        "data_source_id": _text(form, "data_source_id"),
        "fields": [_field_op(row) for row in ops],
        "import_mode": _text(form, "import_mode") or "SPICE",
    }
    if _text(form, "database"):
        spec["database"] = _text(form, "database")
    interval = _text(form, "refresh_interval_minutes")
    if interval:
        # A number or not, the model's check names the field and its range.
        spec["refresh_interval_minutes"] = int(interval) if interval.isdigit() else interval
    if _text(form, "source_kind") == "table":
        spec["table"] = _text(form, "table")
    else:
        spec["sql"] = _text(form, "sql")
    return spec, ops


def filters_from(form: Mapping[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """A time-range and a category filter, when their field is given."""
    filters: list[dict[str, Any]] = []
    time_field = _text(form, f"{prefix}time_field")
    if time_field:
        start, end = _text(form, f"{prefix}time_start"), _text(form, f"{prefix}time_end")
        filters.append(
            {"type": "time_range", "field": time_field, "start": start or None, "end": end or None}
        )
    category_field = _text(form, f"{prefix}category_field")
    if category_field:
        values = _names(_text(form, f"{prefix}category_values"))
        filters.append({"type": "category", "field": category_field, "values": values})
    return filters


def visual_from(form: Mapping[str, Any], visual_id: str) -> dict[str, Any]:
    """The Visual JSON of a visual form (fields left empty are left out)."""
    visual: dict[str, Any] = {"id": visual_id, "type": _text(form, "type")}
    for key in ("title", "geo", "size", "x", "y", "color", "aggregation"):
        if _text(form, key):
            visual[key] = _text(form, key)
    for key in ("columns", "tooltips"):
        if _names(_text(form, key)):
            visual[key] = _names(_text(form, key))
    visual["filters"] = filters_from(form)
    return visual
