"""Athena's partition projection: a table's partitions told by its properties, not the metastore.

A table with ``'projection.enabled'='true'`` has, for each partition column, a
``projection.<column>.type`` (enum, integer, date or injected) and the properties of that
type; its partitions are every value the types allow, each at the place
``storage.location.template`` names with ``${column}`` (by default Hive's
``<location>/column=value/``). Athena then never asks the metastore for partitions.

Rather than list every projected partition (a date range by the hour is tens of thousands),
a reader lists the files under the template's fixed prefix once and keeps a file whose
place matches the template with values the projection allows (``Projection.values``).
An injected column has no values of its own: a query must name them in its WHERE clause.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lakeward.errors import InvalidRequest

TYPES = ("enum", "integer", "date", "injected")
# Each type's own properties (besides type); any other projection.<column>.* is refused, as
# one lakeward does not know may change which partitions Athena reads.
_PROPERTIES = {
    "enum": {"values"},
    "integer": {"range", "interval", "digits"},
    "date": {"range", "format", "interval", "interval.unit"},
    "injected": set(),
}
_NOW = re.compile(r"NOW(?:\s*([+-])\s*(\d+)\s*([A-Z]+?)S?)?", re.IGNORECASE)
_FIXED_UNITS = {
    "WEEK": timedelta(weeks=1),
    "DAY": timedelta(days=1),
    "HOUR": timedelta(hours=1),
    "MINUTE": timedelta(minutes=1),
    "SECOND": timedelta(seconds=1),
    "MILLISECOND": timedelta(milliseconds=1),
}
_MONTHS = {"YEAR": 12, "MONTH": 1}
# Java's DateTimeFormatter letters lakeward reads: a value's field, its width, its regex.
_DATE_FIELDS = {
    "yyyy": ("year", 4), "uuuu": ("year", 4), "MM": ("month", 2), "dd": ("day", 2),
    "HH": ("hour", 2), "mm": ("minute", 2), "ss": ("second", 2), "SSS": ("millisecond", 3),
}  # fmt: skip
# The finest field of a format gives the unit a date projection steps by when not told.
_UNIT_OF_FIELD = {
    "year": "YEAR", "month": "MONTH", "day": "DAY", "hour": "HOUR", "minute": "MINUTE",
    "second": "SECOND", "millisecond": "MILLISECOND",
}  # fmt: skip


def enabled(parameters: dict[str, str]) -> bool:
    return parameters.get("projection.enabled", "").strip().lower() == "true"


@dataclass(frozen=True)
class ProjectedColumn:
    name: str
    type: str
    pattern: str  # a regular expression for the column's value in a path
    allows: Callable[[str], bool]


@dataclass(frozen=True)
class Projection:
    columns: tuple[ProjectedColumn, ...]
    prefix: str  # the template's fixed part: where a reader lists the files
    _path: re.Pattern[str]  # the rest of a file's place, relative to the prefix
    _groups: tuple[str, ...]  # the column each group of _path captures

    @property
    def injected(self) -> list[str]:
        return [c.name for c in self.columns if c.type == "injected"]

    def values(self, relative: str) -> tuple[str, ...] | None:
        """The partition values of a file at ``relative`` (to the prefix), or None when the
        file is not in a projected partition."""
        match = self._path.match(relative)
        if match is None:
            return None
        found: dict[str, str] = {}
        for group, name in zip(match.groups(), self._groups, strict=True):
            if found.setdefault(name, group) != group:
                return None  # a column named twice in the template, with two values
        for column in self.columns:
            if not column.allows(found[column.name]):
                return None
        return tuple(found[c.name] for c in self.columns)


def projection_of(
    parameters: dict[str, str], location: str, keys: list[str], now: datetime | None = None
) -> Projection | None:
    """The table's projection, or None when it has none; a property that is missing or
    malformed is refused, naming it."""
    if not enabled(parameters):
        return None
    if not keys:
        raise InvalidRequest("table property 'projection.enabled': the table has no partitions")
    props = {k.lower(): v for k, v in parameters.items()}
    known = {f"projection.{k}." for k in keys}
    for key in props:
        named = key.startswith("projection.") and key != "projection.enabled"
        if named and not any(key.startswith(prefix) for prefix in known):
            raise InvalidRequest(f"table property '{key}': no partition column is named so")
    moment = now or datetime.now(UTC).replace(tzinfo=None)
    columns = tuple(_column(props, key, moment) for key in keys)
    template = props.get("storage.location.template")
    if template is None:
        template = location.rstrip("/") + "/" + "/".join(f"{k}=${{{k}}}" for k in keys)
    return _compile(template, columns)


def _compile(template: str, columns: tuple[ProjectedColumn, ...]) -> Projection:
    parts = re.split(r"\$\{([^}]*)\}", template.rstrip("/") + "/")
    prefix, rest = parts[0], parts[1:]
    if not rest:
        raise InvalidRequest(
            "table property 'storage.location.template' names no partition column (${column})"
        )
    prefix = prefix[: prefix.rfind("/") + 1]  # listed by whole directories
    by_name = {c.name: c for c in columns}
    pattern, groups = re.escape(parts[0][len(prefix) :]), []
    for position in range(0, len(rest), 2):
        name, text = rest[position].strip().lower(), rest[position + 1]
        if name not in by_name:
            raise InvalidRequest(
                f"table property 'storage.location.template': ${{{name}}} is not a partition column"
            )
        pattern += f"({by_name[name].pattern})" + re.escape(text)
        groups.append(name)
    missing = [c.name for c in columns if c.name not in groups]
    if missing:
        raise InvalidRequest(
            f"table property 'storage.location.template' does not name partition column "
            f"{missing[0]} (as ${{{missing[0]}}})"
        )
    return Projection(columns, prefix, re.compile(pattern + ".+", re.DOTALL), tuple(groups))


def _column(props: dict[str, str], name: str, now: datetime) -> ProjectedColumn:
    base = f"projection.{name}."
    kind = props.get(base + "type", "").strip().lower()
    if kind not in TYPES:
        shown = f"'{props[base + 'type']}'" if base + "type" in props else "not set"
        raise InvalidRequest(
            f"table property '{base}type' is {shown}: partition projection needs one of "
            f"{', '.join(TYPES)} for every partition column"
        )
    for key in props:
        if key.startswith(base) and key[len(base) :] not in _PROPERTIES[kind] | {"type"}:
            raise InvalidRequest(f"table property '{key}' is not supported for {kind} projection")
    if kind == "enum":
        return _enum(props, base, name)
    if kind == "integer":
        return _integer(props, base, name)
    if kind == "date":
        return _date(props, base, name, now)
    return ProjectedColumn(name, kind, "[^/]+", lambda value: True)


def _required(props: dict[str, str], key: str) -> str:
    if not props.get(key, "").strip():
        raise InvalidRequest(f"table property '{key}' must be set for partition projection")
    return props[key].strip()


def _enum(props: dict[str, str], base: str, name: str) -> ProjectedColumn:
    values = [v.strip() for v in _required(props, base + "values").split(",")]
    if any(not v for v in values):
        raise InvalidRequest(f"table property '{base}values' has an empty value")
    allowed = frozenset(values)
    pattern = "|".join(re.escape(v) for v in sorted(allowed, key=len, reverse=True))
    return ProjectedColumn(name, "enum", pattern, allowed.__contains__)


def _whole(props: dict[str, str], key: str, default: int | None = None) -> int:
    text = props.get(key, "").strip()
    if not text and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidRequest(
            f"table property '{key}' must be a whole number, not '{text}'"
        ) from None


def _range(props: dict[str, str], key: str) -> tuple[str, str]:
    bounds = [b.strip() for b in _required(props, key).split(",")]
    if len(bounds) != 2 or not all(bounds):
        raise InvalidRequest(f"table property '{key}' must be two values: '<start>,<end>'")
    return bounds[0], bounds[1]


def _integer(props: dict[str, str], base: str, name: str) -> ProjectedColumn:
    low, high = _range(props, base + "range")
    start = _whole({"x": low}, "x") if low.lstrip("-").isdigit() else None
    end = _whole({"x": high}, "x") if high.lstrip("-").isdigit() else None
    if start is None or end is None or start > end:
        raise InvalidRequest(
            f"table property '{base}range' must be two whole numbers, the smaller first"
        )
    interval = _whole(props, base + "interval", 1)
    digits = _whole(props, base + "digits", 0)
    if interval < 1 or digits < 0:
        raise InvalidRequest(f"table property '{base}interval' or '{base}digits' is not positive")

    def allows(value: str) -> bool:
        number = int(value)
        shown = f"{number:0{digits}d}" if digits else str(number)
        return value == shown and start <= number <= end and (number - start) % interval == 0

    return ProjectedColumn(name, "integer", r"-?\d+", allows)


@dataclass(frozen=True)
class _DateFormat:
    """A Java DateTimeFormatter pattern of fixed-width numeric fields and literals."""

    parts: tuple[tuple[str, str], ...]  # ("field", name) or ("text", literal)

    @classmethod
    def parse(cls, pattern: str, key: str) -> _DateFormat:
        parts: list[tuple[str, str]] = []
        for match in re.finditer(r"'([^']*)'|([A-Za-z])\2*|.", pattern):
            text = match[0]
            if match[1] is not None:
                parts.append(("text", match[1] or "'"))
            elif match[2] is not None:
                if text not in _DATE_FIELDS:
                    raise InvalidRequest(
                        f"table property '{key}': the pattern '{text}' is not supported "
                        f"(supported: {', '.join(_DATE_FIELDS)} and literals)"
                    )
                parts.append(("field", text))
            else:
                parts.append(("text", text))
        if not any(kind == "field" for kind, _ in parts):
            raise InvalidRequest(f"table property '{key}' has no date field")
        return cls(tuple(parts))

    @property
    def regex(self) -> str:
        return "".join(
            rf"\d{{{_DATE_FIELDS[p][1]}}}" if kind == "field" else re.escape(p)
            for kind, p in self.parts
        )

    @property
    def finest(self) -> str:
        order = list(_UNIT_OF_FIELD)
        fields = [_DATE_FIELDS[p][0] for kind, p in self.parts if kind == "field"]
        return _UNIT_OF_FIELD[max(fields, key=order.index)]

    def format(self, moment: datetime) -> str:
        values = {
            "year": moment.year, "month": moment.month, "day": moment.day,
            "hour": moment.hour, "minute": moment.minute, "second": moment.second,
            "millisecond": moment.microsecond // 1000,
        }  # fmt: skip
        out = []
        for kind, part in self.parts:
            if kind == "field":
                field, width = _DATE_FIELDS[part]
                out.append(f"{values[field]:0{width}d}")
            else:
                out.append(part)
        return "".join(out)

    def read(self, text: str) -> datetime | None:
        match = re.fullmatch(
            "".join(
                rf"(\d{{{_DATE_FIELDS[p][1]}}})" if kind == "field" else re.escape(p)
                for kind, p in self.parts
            ),
            text,
        )
        if match is None:
            return None
        fields = [_DATE_FIELDS[p][0] for kind, p in self.parts if kind == "field"]
        values = {"year": 1970, "month": 1, "day": 1}
        values.update({f: int(v) for f, v in zip(fields, match.groups(), strict=True)})
        millisecond = values.pop("millisecond", 0)
        try:
            return datetime(**values, microsecond=millisecond * 1000)  # type: ignore[arg-type]
        except ValueError:
            return None  # 2024-02-30


def _unit(text: str, key: str) -> str:
    unit = text.strip().upper().rstrip("S")
    if unit not in _FIXED_UNITS and unit not in _MONTHS:
        raise InvalidRequest(f"table property '{key}': '{text}' is not a unit of time")
    return unit


def _step(moment: datetime, unit: str, count: int) -> datetime:
    if unit in _FIXED_UNITS:
        return moment + _FIXED_UNITS[unit] * count
    months = moment.year * 12 + moment.month - 1 + _MONTHS[unit] * count
    year, month = divmod(months, 12)
    last_day = [31, 29 if _leap(year) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month]
    return moment.replace(year=year, month=month + 1, day=min(moment.day, last_day))


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _date(props: dict[str, str], base: str, name: str, now: datetime) -> ProjectedColumn:
    shape = _DateFormat.parse(_required(props, base + "format"), base + "format")
    unit = _unit(props.get(base + "interval.unit", "") or shape.finest, base + "interval.unit")
    interval = _whole(props, base + "interval", 1)
    if interval < 1:
        raise InvalidRequest(f"table property '{base}interval' must be positive")

    def bound(text: str) -> datetime:
        relative = _NOW.fullmatch(text)
        if relative is not None:
            sign, count, named = relative.groups()
            if sign is None:
                return now
            step = _unit(named, base + "range")
            return _step(now, step, int(count) * (1 if sign == "+" else -1))
        moment = shape.read(text)
        if moment is None:
            raise InvalidRequest(
                f"table property '{base}range': '{text}' is neither NOW[+-<n><unit>] nor a "
                f"date in the format '{props[base + 'format']}'"
            )
        return moment

    low, high = _range(props, base + "range")
    start, end = bound(low), bound(high)
    if start > end:
        raise InvalidRequest(f"table property '{base}range' ends before it starts")

    def allows(value: str) -> bool:
        # A value is projected when start + k intervals (k >= 0, not past the end) shows as it.
        moment = shape.read(value)
        if moment is None or shape.format(moment) != value:
            return False
        if unit in _FIXED_UNITS:
            near = int((moment - start) / (_FIXED_UNITS[unit] * interval))
        else:
            months = (moment.year - start.year) * 12 + moment.month - start.month
            near = months // (_MONTHS[unit] * interval)
        for k in (near - 1, near, near + 1):
            step = _step(start, unit, k * interval)
            if k >= 0 and step <= end and shape.format(step) == value:
                return True
        return False

    return ProjectedColumn(name, "date", shape.regex, allows)
