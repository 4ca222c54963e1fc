"""Result values as Athena (Trino) prints them, column by column with Arrow compute.

``2020-01-02 03:04:05.000``, ``true``, ``1.0E7``, ``[1, 2]``, ``{a=1}``, ``68 69``:
the text forms of Athena's CSV and of ``GetQueryResults``. Scalars are cast
and formatted in Arrow; nested values (arrays, maps, rows) and varbinary, which
Arrow cannot print this way, go through ``value_text`` one value at a time.
"""

from __future__ import annotations

import math
import struct
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def is_plain(kind: pa.DataType) -> bool:
    """Whether the texts of this type are ASCII letters, digits and signs only (no escaping)."""
    t = pa.types
    return bool(
        t.is_integer(kind)
        or t.is_floating(kind)
        or t.is_decimal(kind)
        or t.is_boolean(kind)
        or t.is_date(kind)
        or t.is_time(kind)
        or (t.is_timestamp(kind) and kind.tz in (None, "UTC"))
    )


def column_texts(values: pa.Array) -> pa.Array:
    """A column's values as Athena writes them, nulls kept."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    kind = values.type
    t = pa.types
    if t.is_dictionary(kind):
        return column_texts(values.dictionary_decode())
    if t.is_string(kind) or t.is_large_string(kind) or t.is_string_view(kind):
        return values.cast(pa.string())
    if t.is_timestamp(kind):
        millis = pc.floor_temporal(values, unit="millisecond")
        pattern = "%Y-%m-%d %H:%M:%S %Z" if kind.tz else "%Y-%m-%d %H:%M:%S"
        return pc.strftime(millis.cast(pa.timestamp("ms", kind.tz)), format=pattern)
    if t.is_time(kind):
        # Truncating to milliseconds, as Athena prints times.
        return pc.strftime(values.cast(pa.time32("ms"), safe=False), format="%H:%M:%S")
    if t.is_integer(kind) or t.is_boolean(kind) or t.is_decimal(kind) or t.is_date(kind):
        return values.cast(pa.string())
    if t.is_float32(kind) or t.is_float64(kind):
        return _float_texts(values)
    return pa.array(
        [None if v is None else value_text(v, kind) for v in values.to_pylist()], pa.string()
    )


def _float_texts(values: pa.Array) -> pa.Array:
    # Arrow prints the same shortest digits as Java, only without Java's ".0" and
    # E-notation: add the one, and leave values that need the other to java_float.
    text = values.cast(pa.string())
    whole = pc.binary_join_element_wise(text, ".0", "")
    text = pc.if_else(pc.match_substring(text, "."), text, whole)
    magnitude = pc.abs(values)
    plain = pc.fill_null(pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)), True)
    if pc.all(plain).as_py():
        return text
    single = pa.types.is_float32(values.type)
    fixed = zip(text.to_pylist(), plain.to_pylist(), values.to_pylist(), strict=True)
    return pa.array([s if ok else java_float(v, single) for s, ok, v in fixed], pa.string())


def value_text(value: Any, kind: pa.DataType) -> str:
    """One value in Trino's text form: nested values unquoted, nested NULLs as ``null``."""
    if value is None:
        return "null"
    t = pa.types
    if t.is_map(kind):
        pairs = (
            f"{value_text(k, kind.key_type)}={value_text(v, kind.item_type)}" for k, v in value
        )
        return "{" + ", ".join(pairs) + "}"
    if t.is_struct(kind):
        fields = (kind.field(i) for i in range(kind.num_fields))
        return (
            "{" + ", ".join(f"{f.name}={value_text(value[f.name], f.type)}" for f in fields) + "}"
        )
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return "[" + ", ".join(value_text(v, kind.value_type) for v in value) + "]"
    if t.is_dictionary(kind):
        return value_text(value, kind.value_type)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_float(value, single=t.is_float32(kind) or t.is_float16(kind))
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return " ".join(f"{b:02x}" for b in value)
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return f"{text} {value.tzname()}" if value.tzinfo else text
    if isinstance(value, date | time):
        return value.isoformat(timespec="milliseconds") if isinstance(value, time) else str(value)
    return str(value)


def java_float(value: float, single: bool) -> str:
    """Java's ``Double.toString`` (``Float.toString`` if ``single``), as Trino prints doubles."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    shortest = repr(value)
    if single:  # the fewest digits that read back as the same 32-bit float
        packed = struct.pack("<f", value)
        for precision in range(1, 10):
            shortest = f"{value:.{precision}g}"
            if struct.pack("<f", float(shortest)) == packed:
                break
    sign, digits, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)
    magnitude = exponent + len(digits) - 1  # of the leading digit
    text = "".join(map(str, digits)).rstrip("0") or "0"
    if -3 <= magnitude < 7:
        if magnitude < 0:
            whole, fraction = "0", "0" * (-magnitude - 1) + text
        else:
            whole, fraction = text[: magnitude + 1].ljust(magnitude + 1, "0"), text[magnitude + 1 :]
        body = f"{whole}.{fraction or '0'}"
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{magnitude}"
    return ("-" if sign else "") + body
