"""Partitions: ALTER TABLE ADD/DROP PARTITION, MSCK REPAIR TABLE, SHOW PARTITIONS.

A partition's values are kept as written (Glue does the same); each is checked against
its key's type so that a partition no engine could read is never registered. Several
partitions added or dropped by one statement go to the metastore in one call, one
transaction: all of them or none.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from lakeward.access.arns import s3_arn
from lakeward.errors import InvalidRequest
from lakeward.metastore.tables import PartitionInfo, TableInfo, partition_name, partition_values
from lakeward.query.engines.base import EngineResult
from lakeward.query.sql.names import Names
from lakeward.query.sql.tokens import Cursor
from lakeward.query.statements.base import Command, Context, lines, no_rows
from lakeward.query.statements.ddl.common import TableCommand, lake_location, refuse_view, table_ref
from lakeward.query.statements.ddl.evolution import parse_alter_iceberg
from lakeward.query.statements.ddl.parsing import Reader
from lakeward.query.statements.ddl.tables import parse_alter_definition
from lakeward.storage.paths import lake_place

_INTEGERS = {"tinyint": 8, "smallint": 16, "int": 32, "integer": 32, "bigint": 64}
_SPEC_ITEM = re.compile(r"([^=/]+)=([^/]*)")


def check_value(key: str, hive_type: str, value: str) -> None:
    """Refuse a partition value its key's type cannot hold (Hive's type check)."""
    base = hive_type.split("(", 1)[0]
    ok = True
    if base in _INTEGERS:
        bits = _INTEGERS[base]
        ok = re.fullmatch(r"-?\d+", value) is not None and (
            -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1)
        )
    elif base in ("double", "float", "decimal"):
        try:
            ok = Decimal(value).is_finite()
        except InvalidOperation:
            ok = False
    elif base == "boolean":
        ok = value.lower() in ("true", "false")
    elif base == "date":
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            ok = False
        ok = ok and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None
    elif base == "timestamp":
        ok = re.fullmatch(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,9})?", value) is not None
        try:
            ok = ok and bool(datetime.datetime.fromisoformat(value[:26]))
        except ValueError:
            ok = False
    elif base not in ("string", "varchar", "char"):
        raise InvalidRequest(f"partition column {key} of type {hive_type} is not supported")
    if not ok:
        raise InvalidRequest(f"partition value '{value}' is not of type {hive_type} (column {key})")
    if value == "":
        raise InvalidRequest(f"partition column {key} has an empty value")


def full_values(table: TableInfo, spec: list[tuple[str, str]]) -> list[str]:
    """The values of a spec naming every partition key, in the keys' order."""
    keys = [k.name for k in table.partition_keys]
    named = dict(spec)
    unknown = [k for k in named if k not in keys]
    if unknown or len(named) != len(keys):
        raise InvalidRequest(
            f"partition spec ({', '.join(named)}) does not match the partition columns of "
            f"{table.database}.{table.name} ({', '.join(keys)})"
        )
    for key in table.partition_keys:
        check_value(key.name, key.type, named[key.name])
    return [named[k] for k in keys]


def require_partitioned(table: TableInfo) -> None:
    if not table.partition_keys:
        raise InvalidRequest(f"Table {table.database}.{table.name} is not partitioned")


@dataclass
class AddPartitions(TableCommand):
    if_not_exists: bool = False
    specs: list[tuple[list[tuple[str, str]], str | None]] = field(default_factory=list)

    def run(self, context: Context) -> EngineResult:
        locations = [None if loc is None else lake_location(context, loc) for _, loc in self.specs]
        context.authorize_table(["glue:BatchCreatePartition"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, "ALTER TABLE ADD PARTITION")
        require_partitioned(table)
        keys = [k.name for k in table.partition_keys]
        existing = set(client.partition_names(self.ref.database, self.ref.table))
        adding: dict[str, PartitionInfo] = {}
        for (spec, _), location in zip(self.specs, locations, strict=True):
            values = full_values(table, spec)
            name = partition_name(keys, values)
            if name in adding:
                raise InvalidRequest(f"partition {name} is named twice in the statement")
            if name in existing:
                if self.if_not_exists:
                    continue
                raise InvalidRequest(f"Partition already exists: {name}")
            where = location or f"{table.location.rstrip('/')}/{name}"
            adding[name] = PartitionInfo(values, where)
        if adding:
            client.add_partitions(self.ref.database, self.ref.table, list(adding.values()))
        return no_rows()


@dataclass
class DropPartitions(TableCommand):
    if_exists: bool = False
    specs: list[list[tuple[str, str]]] = field(default_factory=list)

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:BatchDeletePartition"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, "ALTER TABLE DROP PARTITION")
        require_partitioned(table)
        keys = {k.name: k for k in table.partition_keys}
        names = client.partition_names(self.ref.database, self.ref.table)
        dropping: dict[str, None] = {}
        for spec in self.specs:
            for key, value in spec:
                if key not in keys:
                    raise InvalidRequest(
                        f"{key} is not a partition column of {self.ref.database}."
                        f"{self.ref.table} ({', '.join(keys)})"
                    )
                check_value(key, keys[key].type, value)
            wanted = partition_name([k for k, _ in spec], [v for _, v in spec]).split("/")
            matched = [n for n in names if set(wanted) <= set(n.split("/"))]
            if not matched and not self.if_exists:
                shown = ", ".join(f"{k}={v}" for k, v in spec)
                raise InvalidRequest(f"No partition matches the specification ({shown})")
            dropping.update(dict.fromkeys(matched))
        client.drop_partitions(self.ref.database, self.ref.table, list(dropping))
        return no_rows()


@dataclass
class MovePartition(TableCommand):
    """ALTER TABLE t PARTITION (...) SET LOCATION '...': one partition read from elsewhere."""

    spec: list[tuple[str, str]] = field(default_factory=list)
    location: str = ""

    def run(self, context: Context) -> EngineResult:
        location = lake_location(context, self.location)
        context.authorize_table(["glue:UpdatePartition"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, "ALTER TABLE PARTITION SET LOCATION")
        require_partitioned(table)
        values = full_values(table, self.spec)
        name = partition_name([k.name for k in table.partition_keys], values)
        if name not in client.partition_names(self.ref.database, self.ref.table):
            raise InvalidRequest(
                f"Partition {name} of {self.ref.database}.{self.ref.table} does not exist"
            )
        client.move_partition(self.ref.database, self.ref.table, PartitionInfo(values, location))
        return no_rows()


def parse_alter_table(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect_words("ALTER", "TABLE")
    ref = table_ref(reader, names)
    if reader.peek() == "ADD" and reader.peek(1) in ("IF", "PARTITION"):
        reader.expect("ADD")
        if_not_exists = reader.if_not_exists()
        add = AddPartitions(ref, if_not_exists)
        while reader.peek() == "PARTITION":
            spec = reader.partition_spec()
            location = reader.string("a quoted location") if reader.word("LOCATION") else None
            add.specs.append((spec, location))
        if not add.specs:
            reader.fail("expected PARTITION")
        reader.done()
        return add
    if reader.peek() == "PARTITION":
        spec = reader.partition_spec()
        reader.expect_words("SET", "LOCATION")
        location = reader.string("a quoted location")
        reader.done()
        return MovePartition(ref, spec, location)
    if (reader.peek(), reader.peek(1)) == ("DROP", "COLUMN") or reader.peek() in (
        "CHANGE",
        "UNSET",
    ):
        return parse_alter_iceberg(reader, ref)
    if reader.word("DROP"):
        drop = DropPartitions(ref, reader.if_exists())
        drop.specs.append(reader.partition_spec())
        while reader.word(","):
            drop.specs.append(reader.partition_spec())
        reader.word("PURGE")
        reader.done()
        return drop
    if reader.peek() not in ("ADD", "REPLACE", "SET", "RENAME"):
        reader.fail(
            "expected ADD, DROP, PARTITION, SET, UNSET, CHANGE, RENAME TO or REPLACE COLUMNS"
        )
    return parse_alter_definition(reader, ref, names)


@dataclass
class RepairTable(TableCommand):
    """MSCK REPAIR TABLE: register the ``k=v`` directories under the table's location."""

    def run(self, context: Context) -> EngineResult:
        context.authorize_table(["glue:GetPartitions", "glue:BatchCreatePartition"], self.ref)
        client = self.metastore(context)
        table = client.table(self.ref.database, self.ref.table)
        refuse_view(table, "MSCK REPAIR TABLE")
        require_partitioned(table)
        settings = context.settings
        place = lake_place(settings, table.location)
        if place is None:
            raise InvalidRequest(
                f"the location of {self.ref} ({table.location}) is not in the lake"
            )
        bucket, prefix = place
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        context.authorize("s3:ListBucket", s3_arn(bucket))  # S3's: listing is on the bucket
        keys = [k.name for k in table.partition_keys]
        existing = set(client.partition_names(self.ref.database, self.ref.table))
        found: dict[str, PartitionInfo] = {}
        skipped: dict[str, str] = {}
        for key in context.storage.keys(bucket, prefix):
            parts = key[len(prefix) :].split("/")
            if len(parts) <= len(keys) or any(p.startswith(("_", ".")) for p in parts):
                continue  # a file beside the partitions, or a hidden one (Hive skips both)
            directory = "/".join(parts[: len(keys)])
            if directory in found or directory in skipped or directory in existing:
                continue
            values = partition_values(directory.split("/"), keys)
            if values is None:
                skipped[directory] = "not a directory of the table's partition columns"
                continue
            try:
                for column, value in zip(table.partition_keys, values, strict=True):
                    check_value(column.name, column.type, value)
            except InvalidRequest as e:
                skipped[directory] = e.message
                continue
            name = partition_name(keys, values)
            if name in existing or name in found:
                continue
            location = f"{table.location.rstrip('/')}/{directory}"
            found[name] = PartitionInfo(values, location)
        if found:
            client.add_partitions(self.ref.database, self.ref.table, list(found.values()))
        out = []
        if found:
            added = "\t".join(f"{self.ref.table}:{n}" for n in sorted(found))
            out.append(f"Partitions not in metastore:\t{added}")
            out += [
                f"Repair: Added partition to metastore {self.ref.table}:{n}" for n in sorted(found)
            ]
        out += [f"Skipped {d}: {why}" for d, why in sorted(skipped.items())]
        return lines("result", out) if out else no_rows()


def parse_msck(sql: str, cursor: Cursor, names: Names) -> Command:
    reader = Reader(sql, cursor)
    reader.expect("MSCK")
    reader.expect("REPAIR")
    reader.expect("TABLE")
    ref = table_ref(reader, names)
    reader.done()
    return RepairTable(ref)
