"""Glue's Data Catalog operations: each takes Glue's checked request and answers Glue's shape.

Databases and tables are here, partitions in partitions.py, what they share in base.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymetastore.hive_metastore import ttypes as hive

from lakeward.access import Authorizer
from lakeward.access.arns import glue_catalog_arn, glue_database_arn
from lakeward.errors import (
    InvalidRequest,
    LakewardError,
)
from lakeward.glue import shapes
from lakeward.glue.base import (
    ConcurrentModification,
    check_name,
    detail,
    hive_pattern,
    paged,
)
from lakeward.glue.history import VersionOperations
from lakeward.glue.partitions import PartitionOperations
from lakeward.glue.versions import TableVersions
from lakeward.query.catalogs import Catalogs
from lakeward.query.model import JsonDict

Operation = Callable[["GlueService", JsonDict], JsonDict]


class GlueService(PartitionOperations, VersionOperations):
    def __init__(
        self,
        catalogs: Catalogs,
        access: Authorizer,
        default_catalog: str,
        versions: TableVersions,
    ) -> None:
        super().__init__(catalogs, access, default_catalog)
        self.versions = versions

    def call(self, operation: str, request: JsonDict) -> JsonDict:
        handler = OPERATIONS.get(operation)
        if handler is None:
            raise InvalidRequest(
                f"Glue operation {operation} is not supported by lakeward "
                f"(supported: {', '.join(sorted(OPERATIONS))})"
            )
        return handler(self, request)

    # -- databases ----------------------------------------------------------------------

    def get_database(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        name = r["Name"].lower()
        self._authorize("glue:GetDatabase", catalog, name)
        return {"Database": shapes.glue_database(self._raw_database(client, name), catalog_id)}

    def get_databases(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        self.access.authorize("glue:GetDatabases", glue_catalog_arn(catalog))
        with self._metastore("databases"):
            names = sorted(client.raw_read("get_all_databases"))
        visible = [
            n for n in names
            if self.access.allowed("glue:GetDatabases", glue_database_arn(catalog, n))
        ]  # fmt: skip
        page, more = paged(visible, r, limit=100)
        with self._metastore("databases"):
            found = [
                shapes.glue_database(client.raw_read("get_database", n), catalog_id) for n in page
            ]
        return {"DatabaseList": found, **more}

    def create_database(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        given = r["DatabaseInput"]
        name = check_name(given["Name"], "DatabaseInput.Name")
        self._authorize("glue:CreateDatabase", catalog, name)
        database = hive.Database(
            name=name,
            description=given.get("Description"),
            locationUri=given.get("LocationUri"),
            parameters=dict(given.get("Parameters", {})),
        )

        def exists(thrift: Any) -> bool:
            try:
                thrift.get_database(name)
            except hive.NoSuchObjectException:
                return False
            return True

        with self._metastore(f"Database {name}"):
            client.raw_mutate(name, None, "create_database", database, applied=exists)
        return {}

    def update_database(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        name = r["Name"].lower()
        given = r["DatabaseInput"]
        self._authorize("glue:UpdateDatabase", catalog, name)
        current = self._raw_database(client, name)
        if given["Name"].lower() != name:
            raise InvalidRequest("DatabaseInput.Name: a database cannot be renamed")
        location = given.get("LocationUri")
        if location is not None and location.rstrip("/") != (current.locationUri or "").rstrip("/"):
            raise InvalidRequest(
                "DatabaseInput.LocationUri: the metastore keeps a database's location once "
                "created (Hive 2.3 ignores a new one); create a database at the new location"
            )
        current.description = given.get("Description", current.description)
        current.parameters = dict(given.get("Parameters", {}))

        def applied(thrift: Any) -> bool:
            return bool(thrift.get_database(name).parameters == current.parameters)

        with self._metastore(f"Database {name}"):
            client.raw_mutate(name, None, "alter_database", name, current, applied=applied)
        return {}

    def delete_database(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        name = r["Name"].lower()
        self._authorize("glue:DeleteDatabase", catalog, name)
        self._raw_database(client, name)
        # Glue drops the database's tables with it; each needs the right to.
        self._authorize("glue:DeleteTable", catalog, name, "*")

        def gone(thrift: Any) -> bool:
            try:
                thrift.get_database(name)
            except hive.NoSuchObjectException:
                return True
            return False

        with self._metastore(f"Database {name}"):
            client.raw_mutate(name, None, "drop_database", name, False, True, applied=gone)
        return {}

    # -- tables -------------------------------------------------------------------------

    def get_table(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["Name"].lower()
        self._authorize("glue:GetTable", catalog, database, name)
        raw = self._raw_table(client, database, name)
        version = str(self.current_version(catalog, database, name, raw))
        return {"Table": shapes.glue_table(raw, catalog_id, version)}

    def get_tables(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        database = r["DatabaseName"].lower()
        self._authorize("glue:GetTables", catalog, database)
        self._raw_database(client, database)
        with self._metastore(f"Database {database}"):
            names = sorted(client.raw_read("get_all_tables", database))
        if r.get("Expression"):
            pattern = hive_pattern(r["Expression"])
            names = [n for n in names if pattern.fullmatch(n)]
        page, more = paged(names, r, limit=100)
        with self._metastore(f"Database {database}"):
            raw = client.raw_read("get_table_objects_by_name", database, page) if page else []
        return {"TableList": [shapes.glue_table(t, catalog_id) for t in raw], **more}

    def search_tables(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        self.access.authorize("glue:SearchTables", glue_catalog_arn(catalog))
        text = (r.get("SearchText") or "").lower()
        filters = r.get("Filters", [])
        found = []
        with self._metastore("databases"):
            for database in sorted(client.raw_read("get_all_databases")):
                if not self.access.allowed("glue:GetTables", glue_database_arn(catalog, database)):
                    continue
                names = sorted(client.raw_read("get_all_tables", database))
                for raw in (
                    client.raw_read("get_table_objects_by_name", database, names) if names else []
                ):
                    table = shapes.glue_table(raw, catalog_id)
                    if _searched(table, text, filters):
                        found.append(table)
        page, more = paged(found, r, limit=100)
        return {"TableList": page, **more}

    def create_table(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        database = r["DatabaseName"].lower()
        given = r["TableInput"]
        name = check_name(given["Name"], "TableInput.Name")
        owner = self._authorize("glue:CreateTable", catalog, database, name)
        self._raw_database(client, database)
        table = shapes.thrift_table(database, given, owner=owner)
        with self._metastore(f"Table {name} in database {database}"):
            client.raw_mutate(database, name, "create_table", table, applied=_table_holds(table))
        return {}

    def update_table(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        database = r["DatabaseName"].lower()
        given = r["TableInput"]
        name = given["Name"].lower()
        self._authorize("glue:UpdateTable", catalog, database, name)
        current = self._raw_table(client, database, name)
        version = self.current_version(catalog, database, name, current)
        expected = r.get("VersionId")
        if expected is not None and expected != str(version):
            raise ConcurrentModification(
                f"Table {database}.{name} changed since version {expected} "
                f"(now {version}); read it again and retry"
            )
        table = shapes.thrift_table(database, given, owner=current.owner)
        table.createTime = current.createTime
        with self._metastore(f"Table {name} in database {database}"):
            client.raw_mutate(
                database, name, "alter_table", database, name, table, applied=_table_holds(table)
            )
        if not r.get("SkipArchive", False):  # the replaced definition becomes a version
            previous = shapes.glue_table(current, "")
            self.versions.archive(catalog, database, name, current.createTime, version, previous)
        return {}

    def delete_table(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["Name"].lower()
        self._authorize("glue:DeleteTable", catalog, database, name)
        self._raw_table(client, database, name)
        with self._metastore(f"Table {name} in database {database}"):
            client.raw_mutate(
                database,
                name,
                "drop_table",
                database,
                name,
                False,
                applied=_table_gone(database, name),
            )
        self.versions.delete(catalog, database, name)
        return {}

    def batch_delete_table(self, r: JsonDict) -> JsonDict:
        errors = []
        for name in r["TablesToDelete"]:
            try:
                self.delete_table({**r, "Name": name})
            except LakewardError as exc:
                errors.append({"TableName": name, "ErrorDetail": detail(exc)})
        return {"Errors": errors}


def _searched(table: JsonDict, text: str, filters: list[JsonDict]) -> bool:
    if text:
        words = " ".join(
            [table["Name"], table["DatabaseName"], table.get("Description", ""),
             *map(str, table.get("Parameters", {}).values())]
        ).lower()  # fmt: skip
        if text not in words:
            return False
    for f in filters:
        key, value, comparator = f.get("Key", ""), f.get("Value", ""), f.get("Comparator", "EQUALS")
        actual = str(table.get(key, table.get("Parameters", {}).get(key, "")))
        if comparator == "EQUALS" and actual != value:
            return False
        if comparator != "EQUALS" and value.lower() not in actual.lower():
            return False
    return True


def _table_holds(table: Any) -> Callable[[Any], bool]:
    def check(thrift: Any) -> bool:
        try:
            stored = thrift.get_table(table.dbName, table.tableName)
        except hive.NoSuchObjectException:
            return False
        return bool(
            [(c.name, c.type) for c in stored.sd.cols] == [(c.name, c.type) for c in table.sd.cols]
            and (stored.sd.location or "").rstrip("/") == (table.sd.location or "").rstrip("/")
            and table.parameters.items() <= (stored.parameters or {}).items()
        )

    return check


def _table_gone(database: str, name: str) -> Callable[[Any], bool]:
    def gone(thrift: Any) -> bool:
        try:
            thrift.get_table(database, name)
        except hive.NoSuchObjectException:
            return True
        return False

    return gone


OPERATIONS: dict[str, Operation] = {
    "GetDatabase": GlueService.get_database,
    "GetDatabases": GlueService.get_databases,
    "CreateDatabase": GlueService.create_database,
    "UpdateDatabase": GlueService.update_database,
    "DeleteDatabase": GlueService.delete_database,
    "GetTable": GlueService.get_table,
    "GetTables": GlueService.get_tables,
    "SearchTables": GlueService.search_tables,
    "CreateTable": GlueService.create_table,
    "UpdateTable": GlueService.update_table,
    "DeleteTable": GlueService.delete_table,
    "BatchDeleteTable": GlueService.batch_delete_table,
    "GetPartition": GlueService.get_partition,
    "GetPartitions": GlueService.get_partitions,
    "BatchGetPartition": GlueService.batch_get_partition,
    "CreatePartition": GlueService.create_partition,
    "BatchCreatePartition": GlueService.batch_create_partition,
    "UpdatePartition": GlueService.update_partition,
    "DeletePartition": GlueService.delete_partition,
    "BatchDeletePartition": GlueService.batch_delete_partition,
    "GetTableVersions": GlueService.get_table_versions,
    "GetTableVersion": GlueService.get_table_version,
    "DeleteTableVersion": GlueService.delete_table_version,
    "BatchDeleteTableVersion": GlueService.batch_delete_table_version,
}
