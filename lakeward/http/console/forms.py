"""Console forms to the BI service's definitions (checked there, by its own models).

A form names fields plainly (``op_kind_0``, ``op_a_0``, ...); these functions
only gather them into the JSON shapes of docs/bi.md, so every rule and every
message stays in one place, ``lakeward.bi.model``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from lakeward.bi.model import DatasetSpec, TimeRange, Visual

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
FORMAT_ROWS = 3
# The form's fields each chart type draws (title and filters apply to every type); the
# page shows only the chosen type's, and only those are sent on.
TYPE_FIELDS = {
    "map": ("geo", "size", "color", "aggregation", "tooltips", "top_n", "formats"),
    "line": ("x", "y", "color", "aggregation", "x_title", "y_title", "value_labels", "formats"),
    "bar": ("x", "y", "color", "aggregation", "sort", "top_n", "other", "x_title", "y_title",
            "value_labels", "formats"),
    "table": ("columns", "formats"),
}  # fmt: skip
SORTS = {
    "": "as the data comes (labels A→Z)",
    "value:desc": "by value, largest first",
    "value:asc": "by value, smallest first",
    "label:asc": "by label, A→Z",
    "label:desc": "by label, Z→A",
}


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


def id_from_name(name: str) -> str:
    """An id for a new object from its name, as the form's script makes it ("COVID-19 by
    country" -> "covid-19-by-country"); what cannot be made one is left to the id's check."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9_]+", "-", plain).strip("-_")[:128].rstrip("-")


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
        table = _text(form, "table")
        # A bare table name is in the database chosen beside it.
        database = _text(form, "database") or "default"
        spec["table"] = table if "." in table or not table else f"{database}.{table}"
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
    """The Visual JSON of a visual form: the chosen type's fields that are filled in."""
    kind = _text(form, "type")
    wanted = TYPE_FIELDS.get(kind, ())
    visual: dict[str, Any] = {"id": visual_id, "type": kind}
    if _text(form, "title"):
        visual["title"] = _text(form, "title")
    for key in ("geo", "size", "x", "y", "color", "aggregation", "x_title", "y_title"):
        if key in wanted and _text(form, key):
            visual[key] = _text(form, key)
    for key in ("columns", "tooltips"):
        if key in wanted and _names(_text(form, key)):
            visual[key] = _names(_text(form, key))
    if "sort" in wanted and _text(form, "sort"):
        by, _, order = _text(form, "sort").partition(":")
        visual["sort"] = {"by": by, "order": order or "desc"}
    if "top_n" in wanted and _text(form, "top_n"):
        top = _text(form, "top_n")
        # A number or not, the model's check names the field and its range.
        visual["top_n"] = int(top) if top.isdigit() else top
        visual["other"] = "other" in wanted and bool(form.get("other"))
    if "value_labels" in wanted and form.get("value_labels"):
        visual["value_labels"] = True
    if "formats" in wanted:
        visual["formats"] = formats_from(form)
    visual["filters"] = filters_from(form)
    return visual


def formats_from(form: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Number formats per field: the rows whose field is given."""
    formats: dict[str, dict[str, Any]] = {}
    for row in range(FORMAT_ROWS):
        name = _text(form, f"fmt_field_{row}")
        if not name:
            continue
        decimals = _text(form, f"fmt_decimals_{row}")
        formats[name] = {
            "style": _text(form, f"fmt_style_{row}") or "number",
            "thousands": bool(form.get(f"fmt_thousands_{row}")),
            **({"decimals": int(decimals) if decimals.isdigit() else decimals} if decimals else {}),
        }
    return formats


def visual_values(visual: Visual) -> dict[str, str]:
    """A saved visual as its form's values, to edit it (the inverse of ``visual_from``)."""
    values = {key: str(getattr(visual, key) or "") for key in
              ("type", "title", "geo", "size", "x", "y", "color", "aggregation", "x_title",
               "y_title")}  # fmt: skip
    values["columns"], values["tooltips"] = ", ".join(visual.columns), ", ".join(visual.tooltips)
    values["sort"] = f"{visual.sort.by}:{visual.sort.order}" if visual.sort else ""
    values["top_n"] = str(visual.top_n or "")
    values["other"] = "1" if visual.other else ""
    values["value_labels"] = "1" if visual.value_labels else ""
    for row, (name, fmt) in enumerate(list(visual.formats.items())[:FORMAT_ROWS]):
        values[f"fmt_field_{row}"], values[f"fmt_style_{row}"] = name, fmt.style
        values[f"fmt_decimals_{row}"] = "" if fmt.decimals is None else str(fmt.decimals)
        values[f"fmt_thousands_{row}"] = "1" if fmt.thousands else ""
    for item in visual.filters:
        if isinstance(item, TimeRange):
            values["time_field"] = item.field
            values["time_start"] = item.start.strftime("%Y-%m-%dT%H:%M") if item.start else ""
            values["time_end"] = item.end.strftime("%Y-%m-%dT%H:%M") if item.end else ""
        else:
            values["category_field"] = item.field
            values["category_values"] = ", ".join(str(v) for v in item.values)
    return values


def dataset_values(spec: DatasetSpec) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A saved definition as the dataset form's values and operation rows."""
    values = {
        "name": spec.name, "data_source_id": spec.data_source_id, "database": spec.database,
        "import_mode": spec.import_mode,
        "refresh_interval_minutes": str(spec.refresh_interval_minutes or ""),
        "source_kind": "table" if spec.table else "sql",
        "table": spec.table or "", "sql": spec.sql or "",
    }  # fmt: skip
    ops = []
    for op in spec.fields:
        if op.op == "rename":
            ops.append({"op": op.op, "a": op.field, "b": op.to, "c": ""})
        elif op.op == "convert":
            ops.append({"op": op.op, "a": op.field, "b": op.to, "c": op.format or ""})
        elif op.op == "geo":
            ops.append({"op": op.op, "a": op.name, "b": op.latitude, "c": op.longitude})
        else:
            ops.append({"op": op.op, "a": op.name, "b": op.expression, "c": ""})
    return values, ops
