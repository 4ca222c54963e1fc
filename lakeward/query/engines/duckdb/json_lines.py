"""JSON lines as Hive's and OpenX's JsonSerDe read them: one object per line, each value
typed by its column's Hive type (a value of another kind is NULL or fails, as in Athena)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakeward.errors import QueryFailed
from lakeward.query.types import (
    HiveType,
    arrow_type_of_hive,
)

if TYPE_CHECKING:
    pass

from lakeward.query.engines.text_layout import TextLayout

INTEGER_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "integer": 32, "bigint": 64}
STRINGS = ("string", "varchar", "char")


class _BadValue(Exception):
    pass


def json_fields(
    line: str,
    names: list[str],
    types: list[HiveType],
    layout: TextLayout,
    path: str,
    number: int,
) -> list[Any]:
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("the line holds no JSON object")
    except ValueError as exc:
        if layout.ignore_malformed:
            return [None] * len(names)
        raise QueryFailed(
            f"HIVE_CURSOR_ERROR: {path} line {number} is not a valid JSON object ({exc}); "
            "an OpenX JsonSerDe table with 'ignore.malformed.json'='true' reads it as NULLs"
        ) from None
    if layout.case_insensitive:
        keys = {str(k).lower(): v for k, v in record.items()}
    else:  # OpenX's case.insensitive false: only a key spelt as the column (lower case)
        keys = {str(k): v for k, v in record.items()}
    mapping = dict(layout.mapping)
    fields = []
    for name, hive_type in zip(names, types, strict=True):
        value = keys.get(mapping.get(name, name))
        try:
            fields.append(_json_value(value, hive_type))
        except _BadValue:
            shown = json.dumps(value)[:100]
            raise QueryFailed(
                f"HIVE_BAD_DATA: {path} line {number}: column {name} ({type_text(hive_type)}) "
                f"cannot hold the value {shown}"
            ) from None
    return fields


def _json_value(value: Any, hive: HiveType) -> Any:  # noqa: C901, PLR0911, PLR0912 - one case per type
    if value is None:
        return None
    name = hive.name
    if name in STRINGS:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, separators=(",", ":"))
    if name in INTEGER_BITS:
        number = _json_number(value)
        if not isinstance(number, int):
            if not number.is_integer():
                raise _BadValue
            number = int(number)
        bits = INTEGER_BITS[name]
        if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            raise _BadValue
        return number
    if name in ("double", "float"):
        return float(_json_number(value))
    if name == "decimal":
        precision, scale = (list(hive.params) + [10, 0][len(hive.params) :])[:2]
        try:
            exact = Decimal(str(value)).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP)
        except (InvalidOperation, ValueError):
            raise _BadValue from None
        if isinstance(value, bool) or len(exact.as_tuple().digits) > precision:
            raise _BadValue
        return exact
    if name == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise _BadValue
    if name == "date":
        try:
            return date.fromisoformat(str(value))
        except ValueError:
            raise _BadValue from None
    if name == "timestamp":
        if isinstance(value, int) and not isinstance(value, bool):
            return datetime.utcfromtimestamp(value / 1000)  # OpenX: milliseconds since 1970
        try:
            return datetime.fromisoformat(str(value))
        except ValueError:
            raise _BadValue from None
    if name == "array":
        if not isinstance(value, list):
            raise _BadValue
        return [_json_value(v, hive.args[0]) for v in value]
    if name == "map":
        if not isinstance(value, dict):
            raise _BadValue
        key, item = hive.args
        return [(_json_value(k, key), _json_value(v, item)) for k, v in value.items()]
    if name == "struct":
        if not isinstance(value, dict):
            raise _BadValue
        inner = {str(k).lower(): v for k, v in value.items()}
        return {
            field: _json_value(inner.get(field.lower()), arg)
            for field, arg in zip(hive.fields, hive.args, strict=True)
        }
    raise _BadValue


def _json_number(value: Any) -> int | float:
    if isinstance(value, bool):
        raise _BadValue
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise _BadValue from None
    raise _BadValue


def arrow_type(hive: HiveType) -> pa.DataType:
    if hive.name == "array":
        return pa.list_(arrow_type(hive.args[0]))
    if hive.name == "map":
        return pa.map_(arrow_type(hive.args[0]), arrow_type(hive.args[1]))
    if hive.name == "struct":
        return pa.struct([(f, arrow_type(a)) for f, a in zip(hive.fields, hive.args, strict=True)])
    if hive.name in ("binary", "uniontype"):
        raise QueryFailed(f"columns of type {hive.name} are not supported in JSON tables")
    return arrow_type_of_hive(type_text(hive))


def type_text(hive: HiveType) -> str:
    if hive.name == "array":
        return f"array<{type_text(hive.args[0])}>"
    if hive.name == "map":
        return f"map<{type_text(hive.args[0])},{type_text(hive.args[1])}>"
    if hive.name == "struct":
        inner = ",".join(f"{f}:{type_text(a)}" for f, a in zip(hive.fields, hive.args, strict=True))
        return f"struct<{inner}>"
    params = f"({','.join(map(str, hive.params))})" if hive.params else ""
    return hive.name + params
