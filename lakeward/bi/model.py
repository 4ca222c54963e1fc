"""The BI layer's objects and the JSON shapes the API speaks.

Definitions a user writes (a dataset's source and field operations, visuals,
filters, sheets) are pydantic models, validated on the server with messages
that name the field at fault. Stored records (data sources, datasets,
analyses, dashboards, extracts) are dataclasses with a ``to_json``.

Field names inside a dataset are plain identifiers (letters, digits and ``_``,
not starting with a digit), so they can be used in expressions and SQL
without quoting games.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from lakeward.access.arns import quicksight_arn
from lakeward.errors import InvalidRequest

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
FIELD_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

FieldName = Annotated[str, Field(pattern=FIELD_PATTERN)]
FieldType = Literal["string", "integer", "decimal", "date", "timestamp", "boolean", "geopoint"]
Aggregation = Literal["sum", "avg", "min", "max", "count"]
ImportMode = Literal["SPICE", "DIRECT_QUERY"]
ShareRole = Literal["viewer", "owner"]
Kind = Literal["datasource", "dataset", "analysis", "dashboard"]
M = TypeVar("M", bound=BaseModel)
KIND_NAMES = {"datasource": "data source", "dataset": "dataset", "analysis": "analysis",
              "dashboard": "dashboard", "extract": "extract"}  # fmt: skip


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- field operations -------------------------------------------------------


class Rename(_Spec):
    op: Literal["rename"]
    field: FieldName
    to: FieldName


class Convert(_Spec):
    """Convert a field's type; values that do not convert become NULL and are reported."""

    op: Literal["convert"]
    field: FieldName
    to: Literal["string", "integer", "decimal", "date", "timestamp"]
    format: str | None = Field(
        default=None,
        max_length=64,
        description="For date/timestamp from text: Java-style pattern such as yyyy-MM-dd",
    )


class Geo(_Spec):
    """Combine a latitude and a longitude field into one geospatial point field."""

    op: Literal["geo"]
    name: FieldName
    latitude: FieldName
    longitude: FieldName


class Computed(_Spec):
    """A computed field: an arithmetic expression over other fields (see expressions.py)."""

    op: Literal["computed"]
    name: FieldName
    expression: str = Field(min_length=1, max_length=2000)


FieldOp = Annotated[Rename | Convert | Geo | Computed, Field(discriminator="op")]


class DatasetSpec(_Spec):
    """What a user defines: a source (custom SQL or one table) and field operations."""

    name: str = Field(min_length=1, max_length=128)
    data_source_id: str = Field(pattern=ID_PATTERN)
    database: str = Field(
        default="default", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="The database unqualified table names in sql refer to",
    )  # fmt: skip
    sql: str | None = Field(default=None, max_length=262_144)
    table: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$",
        description="database.table",
    )  # fmt: skip
    fields: list[FieldOp] = Field(default_factory=list)
    import_mode: ImportMode = "SPICE"
    refresh_interval_minutes: int | None = Field(default=None, ge=5, le=7 * 24 * 60)

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if (self.sql is None) == (self.table is None):
            raise ValueError("give exactly one of sql (custom SQL) or table (database.table)")
        if self.sql is not None and not self.sql.strip():
            raise ValueError("sql is empty")
        return self


# -- filters and visuals ----------------------------------------------------


class TimeRange(_Spec):
    """Rows with ``start <= field < end`` (either end may be open)."""

    type: Literal["time_range"]
    field: FieldName
    start: datetime | None = None
    end: datetime | None = None

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        # Dataset dates carry no zone: a bound with one is taken in UTC.
        if value is not None and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        return self


class Category(_Spec):
    """Rows whose field is one of ``values`` (a multi-select)."""

    type: Literal["category"]
    field: FieldName
    values: list[str | int | float] = Field(min_length=1, max_length=1000)


Filter = Annotated[TimeRange | Category, Field(discriminator="type")]


class NumberFormat(_Spec):
    """How a field's numbers are shown in axes, tooltips, value labels and tables."""

    style: Literal["number", "percent"] = "number"
    decimals: int | None = Field(default=None, ge=0, le=10, description="None: as needed")
    thousands: bool = Field(default=True, description="Group thousands: 1,234,567")


class Sort(_Spec):
    """A bar chart's order: by the bars' values or by their labels."""

    by: Literal["value", "label"] = "value"
    order: Literal["asc", "desc"] = "desc"


# Options that only some chart types draw, and which types those are.
TYPE_OPTIONS: dict[str, tuple[str, ...]] = {
    "sort": ("bar",), "top_n": ("bar", "map"), "other": ("bar",),
    "value_labels": ("bar", "line"), "x_title": ("bar", "line"), "y_title": ("bar", "line"),
}  # fmt: skip


class Visual(_Spec):
    """One chart. Which fields a type needs:

    - ``map``: ``geo`` (geopoint), ``size`` (measure), optional ``color`` (dimension), ``tooltips``
    - ``line``: ``x`` (date/timestamp), ``y`` (measure), optional ``color`` (one line per value)
    - ``bar``: ``x`` (dimension), ``y`` (measure), optional ``color``
    - ``table``: ``columns`` (fields shown, rows as they are), optional ``limit``

    Presentation: ``sort`` and ``top_n`` (the N largest by the measure, the rest left
    out or, with ``other``, summed up as one "Other" bar), axis titles (the field
    names unless given), ``formats`` per field, ``value_labels`` on bars and points.
    """

    id: str = Field(pattern=ID_PATTERN)
    type: Literal["map", "line", "bar", "table"]
    title: str = Field(default="", max_length=256)
    geo: FieldName | None = None
    size: FieldName | None = None
    x: FieldName | None = None
    y: FieldName | None = None
    color: FieldName | None = None
    aggregation: Aggregation = "sum"
    tooltips: list[FieldName] = Field(default_factory=list, max_length=20)
    columns: list[FieldName] = Field(default_factory=list, max_length=100)
    limit: int = Field(default=1000, ge=1, le=100_000)
    filters: list[Filter] = Field(default_factory=list)
    sort: Sort | None = None
    top_n: int | None = Field(default=None, ge=1, le=1000)
    other: bool = Field(default=False, description="With top_n: the rest as one Other bar")
    x_title: str = Field(default="", max_length=128)
    y_title: str = Field(default="", max_length=128)
    formats: dict[FieldName, NumberFormat] = Field(default_factory=dict, max_length=100)
    value_labels: bool = False

    @model_validator(mode="after")
    def _fields_for_type(self) -> Visual:
        needed = {"map": ("geo", "size"), "line": ("x", "y"), "bar": ("x", "y"),
                  "table": ("columns",)}[self.type]  # fmt: skip
        missing = [name for name in needed if not getattr(self, name)]
        if missing:
            raise ValueError(f"a {self.type} visual needs {' and '.join(missing)}")
        for option, types in TYPE_OPTIONS.items():
            if getattr(self, option) and self.type not in types:
                raise ValueError(
                    f"{option} applies to {' and '.join(types)} visuals, not to a {self.type}"
                )
        if self.other and self.top_n is None:
            raise ValueError("other needs top_n (the bars beyond the top N make up Other)")
        return self


class Sheet(_Spec):
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field(default="", max_length=256)
    visuals: list[Visual] = Field(default_factory=list, max_length=50)
    filters: list[Filter] = Field(default_factory=list, description="Apply to every visual")

    @model_validator(mode="after")
    def _unique_visuals(self) -> Sheet:
        ids = [v.id for v in self.visuals]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"visual ids must be unique in a sheet: {', '.join(duplicates)}")
        return self


class AnalysisSpec(_Spec):
    name: str = Field(min_length=1, max_length=128)
    dataset_id: str = Field(pattern=ID_PATTERN)
    sheets: list[Sheet] = Field(min_length=1, max_length=20)


class Share(_Spec):
    """A grant on a BI object: ``user/<name>`` or ``group/<name>``, as viewer or owner."""

    principal: str = Field(pattern=r"^(user|group)/[A-Za-z0-9+=,.@_-]{1,64}$")
    role: ShareRole = "viewer"


def parse_filters(items: Sequence[Filter | dict[str, Any]]) -> list[Filter]:
    """Filters given as objects or as JSON-like dicts; problems named ``filters[i].<field>``."""
    adapter: TypeAdapter[Filter] = TypeAdapter(Filter)
    out = []
    for index, item in enumerate(items):
        if isinstance(item, dict):
            try:
                item = adapter.validate_python(item)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                path = ".".join(str(p) for p in first["loc"])
                raise InvalidRequest(f"filters[{index}].{path}: {first['msg']}") from None
        out.append(item)
    return out


ID_RULE = "use 1 to 128 letters, digits, - or _, starting with a letter or digit"
NAME_RULE = "use letters, digits and _, starting with a letter or _"
PLAIN_PATTERNS = {
    "table": "pick a table (database.table; each part: letters, digits and _)",
    "database": f"pick a database ({NAME_RULE})",
    "data_source_id": f"pick a data source ({ID_RULE})",
    "dataset_id": f"pick a dataset ({ID_RULE})",
    "id": ID_RULE,
}


def check_id(what: str, value: str) -> None:
    if not re.fullmatch(ID_PATTERN, value or ""):
        raise InvalidRequest(f"{what} {value!r}: {ID_RULE}")


def now() -> datetime:
    return datetime.now(UTC)


def parse(model: type[M], data: object, what: str) -> M:
    """Validate ``data`` as ``model``; refuse with every problem named by its path."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            path = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "string_pattern_mismatch":
                # Say what the field takes, not the regular expression that checks it.
                message = PLAIN_PATTERNS.get(
                    str(error["loc"][-1]), "has characters not allowed here"
                )
            problems.append(f"{path}: {message}" if path else message)
        raise InvalidRequest(f"invalid {what}: " + "; ".join(problems)) from None


# -- stored records ---------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=False)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


R = TypeVar("R", bound="_Record")


class _Record:
    id: str
    arn: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _jsonable({k: getattr(self, k) for k in self.__dataclass_fields__})  # type: ignore[attr-defined]
        return out


def with_arn(record: R, kind: str) -> R:
    """The record with its ARN filled in (``arn:lakeward:quicksight:::<kind>/<id>``)."""
    record.arn = quicksight_arn(kind, record.id)
    return record


@dataclass
class DataSource(_Record):
    """A connection to a catalog of the SQL service (QuickSight's Athena data source)."""

    id: str
    name: str
    catalog: str
    workgroup: str
    owner: str
    created: datetime
    status: Literal["UNVALIDATED", "VALID", "INVALID"] = "UNVALIDATED"
    status_message: str = ""
    validated: datetime | None = None
    arn: str = ""


@dataclass(frozen=True)
class Column:
    """A field of a dataset as visuals see it."""

    name: str
    type: FieldType
    role: Literal["dimension", "measure"]


@dataclass(frozen=True)
class ConversionIssue:
    """Rows a field operation could not convert (they hold NULL in that field)."""

    field: str
    operation: str  # e.g. "convert to date (yyyy-MM-dd)"
    failed_rows: int
    examples: list[str]


@dataclass
class Dataset(_Record):
    id: str
    spec: DatasetSpec
    owner: str
    created: datetime
    updated: datetime
    columns: list[Column] = field(default_factory=list)
    arn: str = ""


@dataclass
class Extract(_Record):
    """The dataset's materialized copy in the lake (the SPICE analogue)."""

    dataset_id: str
    status: Literal["NONE", "RUNNING", "COMPLETED", "FAILED"] = "NONE"
    uri: str = ""
    size_bytes: int = 0
    row_count: int = 0
    last_refresh: datetime | None = None
    duration_ms: int = 0
    error: str = ""
    issues: list[ConversionIssue] = field(default_factory=list)
    next_refresh: datetime | None = None


@dataclass
class Analysis(_Record):
    id: str
    spec: AnalysisSpec
    owner: str
    created: datetime
    updated: datetime
    arn: str = ""


@dataclass
class Dashboard(_Record):
    """A published, read-only copy of an analysis's definition."""

    id: str
    name: str
    analysis_id: str | None
    definition: AnalysisSpec
    version: int
    owner: str
    published: datetime
    arn: str = ""


@dataclass
class DashboardVersion:
    """One published version of a dashboard; the dashboard shows one of them."""

    dashboard_id: str
    version: int
    name: str
    analysis_id: str | None
    definition: AnalysisSpec
    publisher: str
    published: datetime

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _jsonable(
            {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "definition"}
        )
        return out


@dataclass(frozen=True)
class Series:
    """What a visual shows, computed from the extract or live.

    ``data`` per type:

    - map: ``{"points": [{"color", "lat", "lon", "size", "tooltip": {field: value}}],
      "unmapped_rows": n}``
    - line/bar: ``{"series": [{"name", "x": [...], "y": [...]}]}`` (``name`` is the color
      value, or the y field when there is no color); a bar chart adds ``categories``,
      its x values in the visual's order
    - table: ``{"columns": [...], "rows": [[...]]}``
    """

    visual_id: str
    type: str
    source: Literal["extract", "live"]
    data: dict[str, Any]
    row_count: int
    truncated: bool = False  # the visual's ``limit`` cut the points or rows short

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _jsonable(asdict(self))
        return out
