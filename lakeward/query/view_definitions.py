"""A view's definition as the metastore keeps it: Athena's encoding, its columns and types.

A view is a metastore table of type VIRTUAL_VIEW holding its SQL twice:

- ``viewOriginalText`` in Athena's (Trino's) encoding, ``/* Presto View: <base64 JSON> */``
  with the SQL as written, the catalog and schema its unqualified names resolve in, and
  its columns with Trino's types; table parameter ``presto_view = true``. This is what
  lakeward reads, so a view Athena or Trino made over the same metastore reads as well.
- ``viewExpandedText`` in Spark SQL (``lakeward.query.statements.views.spark``).

What a view records of the tables it reads (``READS``: their columns when it was made) lets
a query refuse a view whose tables changed since (``signature``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from sqlglot import exp

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import VIRTUAL_VIEW, Column, TableInfo
from lakeward.query.model import ColumnInfo, TableRef
from lakeward.query.types import athena_type_of_arrow

PRESTO_PREFIX = "/* Presto View: "
PRESTO_SUFFIX = " */"
PRESTO_FLAG = "presto_view"
PRESTO_COMMENT = "Presto View"  # the table comment Trino gives its views
READS = "lakeward.view.reads"  # the tables a view reads, with their columns when it was made
MOST_NESTED = 32  # views of views read through, at most (a cycle is refused before that)


@dataclass(frozen=True)
class ViewColumn:
    name: str
    type: str  # Trino's type name, as Athena stores it: varchar, bigint, decimal(10,2), ...


@dataclass(frozen=True)
class View:
    """A view's definition, as Athena encodes it."""

    ref: TableRef  # where it is stored
    sql: str  # the SELECT, Athena SQL
    catalog: str  # where its unqualified names resolve
    schema: str
    columns: tuple[ViewColumn, ...]
    comment: str | None = None
    named_catalog: str = ""  # the catalog as its creator named it (Athena: awsdatacatalog)

    def encoded(self) -> str:
        """``viewOriginalText``: Trino's JSON of the view, base64 in a comment."""
        data: dict[str, Any] = {
            "originalSql": self.sql,
            "catalog": self.catalog,
            "schema": self.schema,
            "columns": [{"name": c.name, "type": c.type} for c in self.columns],
            # Read with its reader's rights, as lakeward reads it (Trino: SECURITY INVOKER).
            "runAsInvoker": True,
        }
        if self.comment is not None:
            data["comment"] = self.comment
        payload = base64.b64encode(json.dumps(data).encode()).decode()
        return f"{PRESTO_PREFIX}{payload}{PRESTO_SUFFIX}"


def is_view(info: TableInfo) -> bool:
    return info.table_type == VIRTUAL_VIEW


def decode(ref: TableRef, info: TableInfo, catalogs: Collection[str]) -> View:
    """A stored view's definition; refused if Athena's encoding is not there.

    A view's catalog that lakeward does not know (Athena writes ``awsdatacatalog``) is
    the catalog the view is stored in, whatever its creator called it.
    """
    text = (info.view_original_text or "").strip()
    if not text.startswith(PRESTO_PREFIX) or not text.endswith(PRESTO_SUFFIX):
        raise InvalidRequest(
            f"view {ref.database}.{ref.table} was not made by Athena, Trino or lakeward (it "
            "holds Hive or Spark SQL, which Athena does not read); re-create it with CREATE VIEW"
        )
    try:
        payload = text[len(PRESTO_PREFIX) : -len(PRESTO_SUFFIX)]
        data = json.loads(base64.b64decode(payload, validate=True))
        columns = tuple(ViewColumn(c["name"].lower(), c["type"]) for c in data["columns"])
        sql = data["originalSql"]
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise InvalidRequest(
            f"view {ref.database}.{ref.table} cannot be read: its definition is damaged"
        ) from None
    named = str(data.get("catalog") or ref.catalog).lower()
    catalog = named if named in catalogs else ref.catalog
    schema = str(data.get("schema") or ref.database).lower()
    return View(ref, sql, catalog, schema, columns, data.get("comment"), named)


def columns_of(info: TableInfo) -> list[Column]:
    """A table's columns, or a view's as Athena describes them (Hive's type names).

    Trino stores a view with one ``dummy`` column in the metastore; its real columns
    are in the encoded definition.
    """
    if not is_view(info) or not (info.view_original_text or "").startswith(PRESTO_PREFIX):
        return info.columns
    view = decode(TableRef("", info.database, info.name), info, ())
    return [Column(c.name, hive_type(c.type)) for c in view.columns]


def described(info: TableInfo) -> TableInfo:
    """``info`` with a view's own columns, as DESCRIBE and GetTableMetadata show them."""
    if not is_view(info):
        return info
    try:
        return replace(info, columns=columns_of(info))
    except InvalidRequest:  # a damaged definition: listed as stored, refused when read
        return info


# -- types ------------------------------------------------------------------------------------

_TRINO_NAMES = {"float": "real", "timestamp": "timestamp(3)"}


def trino_type(column: ColumnInfo, arrow_type: pa.DataType | None) -> str:
    """The Trino type of a result column, as a view's definition names it."""
    name = column.type
    if name == "decimal":
        return f"decimal({column.precision},{column.scale})"
    if name == "char":
        return f"char({column.precision})"
    if name in ("array", "map", "row"):
        if arrow_type is None:
            raise InvalidRequest(
                f"the type of column {column.name} ({name}) cannot be known without rows; "
                "cast it to a scalar type in the view"
            )
        return _trino_of_arrow(arrow_type)
    return _TRINO_NAMES.get(name, name)


def _trino_of_arrow(arrow_type: pa.DataType) -> str:
    t = pa.types
    if t.is_map(arrow_type):
        key, item = _trino_of_arrow(arrow_type.key_type), _trino_of_arrow(arrow_type.item_type)
        return f"map({key}, {item})"
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return f"array({_trino_of_arrow(arrow_type.value_type)})"
    if t.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        return "row(" + ", ".join(f"{f.name} {_trino_of_arrow(f.type)}" for f in fields) + ")"
    found = athena_type_of_arrow(arrow_type)
    return trino_type(ColumnInfo(name="", type=found.name, precision=found.precision,
                                 scale=found.scale), None)  # fmt: skip


def hive_type(trino: str) -> str:
    """The Hive type the metastore (and Spark) gives a column of a Trino type."""
    try:
        built = exp.DataType.build(trino, dialect="trino")
    except Exception:  # sqlglot raises several kinds on a name it does not know
        return "string"
    for node in built.find_all(exp.DataType):
        if node.this in (exp.DataType.Type.JSON, exp.DataType.Type.TIME):
            node.set("this", exp.DataType.Type.TEXT)  # Hive has neither: text, as Athena shows
    text = built.sql("hive").lower()
    return text.replace(", ", ",").replace(": ", ":")


def qualified(ref: TableRef) -> str:
    return f"{ref.catalog}.{ref.database}.{ref.table}"


def signature(info: TableInfo) -> str:
    """What a view records of a table (or view) it reads: its columns then, so that a change
    since is seen. ``<count>:<hash of those columns>:<hash of the partition keys>``."""
    columns = columns_of(info)
    return f"{len(columns)}:{digest(columns)}:{digest(info.partition_keys)}"


def digest(columns: list[Column]) -> str:
    text = json.dumps([[c.name.lower(), c.type.lower()] for c in columns])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
