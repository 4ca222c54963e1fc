"""Hive's type names to Iceberg's types and back, and Athena's partition transforms.

SQL declares an Iceberg table's columns with Hive's names (``string``, ``int``,
``struct<a:int>``), as Athena's DDL does; the metastore shows them the same way. Field ids
are given in order here; the catalog assigns the table's own when it creates it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from pyiceberg.catalog.hive import SchemaToHiveConverter
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, visit
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
)

from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import Column
from lakeward.query.types import HiveType, parse_hive_type

_PRIMITIVES: dict[str, IcebergType] = {
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "double": DoubleType(),
    "float": FloatType(),
    "boolean": BooleanType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "binary": BinaryType(),
}
# Iceberg has no 8- or 16-bit integers: Athena refuses them in an Iceberg table.
_REFUSED = {"tinyint", "smallint"}


def iceberg_schema(columns: list[Column]) -> Schema:
    """The Iceberg schema of columns declared with Hive's type names."""
    ids = itertools.count(1)
    fields = [
        NestedField(next(ids), c.name, _iceberg_type(c.name, _parsed(c), ids), False, c.comment)
        for c in columns
    ]
    return Schema(*fields)


def table_columns(schema: Schema) -> list[Column]:
    """A table's columns as the metastore and SQL name their types."""
    converter = SchemaToHiveConverter(hive2_compatible=True)
    return [Column(f.name, visit(f.field_type, converter), f.doc) for f in schema.fields]


def _parsed(column: Column) -> HiveType:
    try:
        return parse_hive_type(column.type)
    except ValueError:
        raise InvalidRequest(f"column {column.name}: {column.type!r} is not a type") from None


def _iceberg_type(name: str, hive: HiveType, ids: Iterator[int]) -> IcebergType:
    if hive.name in _REFUSED:
        raise InvalidRequest(
            f"column {name}: type {hive.name} is not supported in an Iceberg table "
            "(use int or bigint)"
        )
    if hive.name == "decimal":
        precision, scale = (hive.params + (10, 0)[len(hive.params) :])[:2]
        return DecimalType(precision, scale)
    if hive.name == "array":
        return ListType(next(ids), _iceberg_type(name, hive.args[0], ids), element_required=False)
    if hive.name == "map":
        key_id, value_id = next(ids), next(ids)
        key, value = (_iceberg_type(name, a, ids) for a in hive.args)
        return MapType(key_id, key, value_id, value, value_required=False)
    if hive.name == "struct":
        return StructType(
            *(
                NestedField(next(ids), field, _iceberg_type(name, arg, ids), False)
                for field, arg in zip(hive.fields, hive.args, strict=True)
            )
        )
    try:
        return _PRIMITIVES[hive.name]
    except KeyError:
        raise InvalidRequest(
            f"column {name}: type {hive.name} is not supported in an Iceberg table"
        ) from None


# -- partitioning ------------------------------------------------------------------------------

_TRANSFORM = re.compile(
    r"^\s*(?:(?P<unit>year|month|day|hour)\s*\(\s*(?P<time>\w+)\s*\)"
    r"|(?P<kind>bucket|truncate)\s*\(\s*(?P<width>\d+)\s*,\s*(?P<of>\w+)\s*\)"
    r"|(?P<column>\w+))\s*$",
    re.IGNORECASE,
)
_TIME_UNITS: dict[str, Transform] = {  # type: ignore[type-arg]
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
}


def partition_spec(schema: Schema, transforms: list[str]) -> PartitionSpec:
    """Athena's PARTITIONED BY of an Iceberg table: ``col``, ``day(ts)``, ``bucket(16, id)``..."""
    fields = []
    for field_id, text in enumerate(transforms, start=1000):
        match = _TRANSFORM.match(text)
        if match is None:
            raise InvalidRequest(
                f"partition transform {text!r} is not one of: column, year(c), month(c), "
                "day(c), hour(c), bucket(n, c), truncate(n, c)"
            )
        source = match["time"] or match["of"] or match["column"]
        try:
            column = schema.find_field(source, case_sensitive=False)
        except ValueError:
            raise InvalidRequest(f"partition transform {text!r}: no column {source}") from None
        transform: Transform  # type: ignore[type-arg]
        if match["unit"]:
            unit = match["unit"].lower()
            allowed = (TimestampType,) if unit == "hour" else (DateType, TimestampType)
            if not isinstance(column.field_type, allowed):
                raise InvalidRequest(
                    f"partition transform {text!r}: column {column.name} is "
                    f"{column.field_type}, and {unit}() takes a "
                    f"{'timestamp' if unit == 'hour' else 'date or timestamp'}"
                )
            transform, name = _TIME_UNITS[unit], f"{column.name}_{unit}"
        elif match["kind"]:
            width = int(match["width"])
            kind = match["kind"].lower()
            transform = BucketTransform(width) if kind == "bucket" else TruncateTransform(width)
            if not transform.can_transform(column.field_type):
                raise InvalidRequest(
                    f"partition transform {text!r}: column {column.name} is "
                    f"{column.field_type}, which {kind}() does not take"
                )
            name = f"{column.name}_{kind}"
        else:
            transform, name = IdentityTransform(), column.name
        fields.append(PartitionField(column.field_id, field_id, transform, name))
    return PartitionSpec(*fields)


def transform_text(schema: Schema, spec: PartitionSpec) -> list[str]:
    """A partition spec as Athena's PARTITIONED BY writes it (SHOW CREATE TABLE)."""
    texts = []
    for field in spec.fields:
        column = schema.find_column_name(field.source_id)
        transform = field.transform
        if isinstance(transform, IdentityTransform):
            texts.append(f"{column}")
        elif isinstance(transform, BucketTransform):
            texts.append(f"bucket({transform.num_buckets}, {column})")
        elif isinstance(transform, TruncateTransform):
            texts.append(f"truncate({transform.width}, {column})")
        else:
            texts.append(f"{str(transform)}({column})")
    return texts
