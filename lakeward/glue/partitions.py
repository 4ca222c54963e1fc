"""Glue's partition operations over the metastore's partitions.

GetPartitions evaluates its ``Expression`` as Glue does (expressions.py) and splits the
result into ``Segment``s; the batch calls report each partition's failure as Glue does,
beside the ones that succeed.
"""

from __future__ import annotations

from typing import Any

from lakeward.errors import (
    InvalidRequest,
    LakewardError,
    ResourceNotFound,
)
from lakeward.glue import shapes
from lakeward.glue.base import AlreadyExists, GlueBase, detail, paged
from lakeward.glue.expressions import compile_expression
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import partition_name, partition_values
from lakeward.query.model import JsonDict


class PartitionOperations(GlueBase):
    # -- partitions ---------------------------------------------------------------------

    def get_partition(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize("glue:GetPartition", catalog, database, name)
        self._raw_table(client, database, name)
        values = list(r["PartitionValues"])
        with self._metastore(f"Partition {values} of table {database}.{name}"):
            raw = client.raw_read("get_partition", database, name, values)
        return {"Partition": shapes.glue_partition(raw, catalog_id)}

    def get_partitions(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize("glue:GetPartitions", catalog, database, name)
        table = self._raw_table(client, database, name)
        keys = [(k.name, k.type) for k in table.partitionKeys or []]
        # The names first (short strings), the expression tested on the values they spell,
        # and only the page's partitions fetched whole.
        with self._metastore(f"Table {database}.{name}"):
            names = sorted(client.raw_read("get_partition_names", database, name, -1))
        if r.get("Expression"):
            test = compile_expression(r["Expression"], keys)
            key_names = [k for k, _ in keys]
            names = [
                n
                for n in names
                if (values := partition_values(n.split("/"), key_names)) is not None
                and test(values)
            ]
        segment = r.get("Segment")
        if segment is not None:
            number, total = segment["SegmentNumber"], segment["TotalSegments"]
            if number >= total:
                raise InvalidRequest(
                    f"Segment.SegmentNumber {number} must be less than TotalSegments {total}"
                )
            names = names[number::total]
        page_names, more = paged(names, r)
        with self._metastore(f"Table {database}.{name}"):
            raw = (
                client.raw_read("get_partitions_by_names", database, name, page_names)
                if page_names
                else []
            )
        by_name = {partition_name([k for k, _ in keys], p.values): p for p in raw}
        page = [by_name[n] for n in page_names if n in by_name]  # one dropped meanwhile: gone
        columns = not r.get("ExcludeColumnSchema", False)
        return {
            "Partitions": [shapes.glue_partition(p, catalog_id, columns=columns) for p in page],
            **more,
        }

    def batch_get_partition(self, r: JsonDict) -> JsonDict:
        catalog, client, catalog_id = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize("glue:BatchGetPartition", catalog, database, name)
        table = self._raw_table(client, database, name)
        keys = [k.name for k in table.partitionKeys or []]
        wanted = [list(p["Values"]) for p in r["PartitionsToGet"]]
        names = [partition_name(keys, v) for v in wanted if len(v) == len(keys)]
        with self._metastore(f"Table {database}.{name}"):
            raw = client.raw_read("get_partitions_by_names", database, name, names) if names else []
        # A partition that does not exist is left out, as Glue leaves it out.
        return {
            "Partitions": [shapes.glue_partition(p, catalog_id) for p in raw],
            "UnprocessedKeys": [],
        }

    def create_partition(self, r: JsonDict) -> JsonDict:
        errors = self._add_partitions(r, [r["PartitionInput"]], "glue:CreatePartition")
        if errors:
            raise errors[0][1]
        return {}

    def batch_create_partition(self, r: JsonDict) -> JsonDict:
        errors = self._add_partitions(r, list(r["PartitionInputList"]), "glue:BatchCreatePartition")
        return {
            "Errors": [
                {"PartitionValues": list(p.get("Values", [])), "ErrorDetail": detail(exc)}
                for p, exc in errors
            ]
        }

    def _partitioned(
        self, r: JsonDict, action: str
    ) -> tuple[MetastoreClient, str, str, Any, list[str], set[str]]:
        """The table a batch call names, authorized: its client, database, name, Thrift
        table, partition keys and the names of the partitions it has."""
        catalog, client, _ = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize(action, catalog, database, name)
        table = self._raw_table(client, database, name)
        keys = [k.name for k in table.partitionKeys or []]
        with self._metastore(f"Table {database}.{name}"):
            existing = set(client.raw_read("get_partition_names", database, name, -1))
        return client, database, name, table, keys, existing

    def _add_partitions(
        self, r: JsonDict, given: list[JsonDict], action: str
    ) -> list[tuple[JsonDict, LakewardError]]:
        """Add each partition; the ones refused, each with its reason (as Glue reports)."""
        client, database, name, table, keys, existing = self._partitioned(r, action)
        errors: list[tuple[JsonDict, LakewardError]] = []
        accepted = []
        for partition in given:
            values = list(partition.get("Values", []))
            if len(values) != len(keys):
                errors.append((partition, InvalidRequest(
                    f"Partition values {values} do not match the table's keys {keys}"
                )))  # fmt: skip
                continue
            key = partition_name(keys, values)
            if key in existing:
                errors.append((partition, AlreadyExists(f"Partition already exists: {values}")))
                continue
            existing.add(key)
            accepted.append(shapes.thrift_partition(table, partition))
        if accepted:
            added = {partition_name(keys, p.values) for p in accepted}

            def present(thrift: Any) -> bool:
                return added <= set(thrift.get_partition_names(database, name, -1))

            with self._metastore(f"Partitions of table {database}.{name}"):
                client.raw_mutate(database, name, "add_partitions", accepted, applied=present)
        return errors

    def update_partition(self, r: JsonDict) -> JsonDict:
        catalog, client, _ = self._catalog(r)
        database, name = r["DatabaseName"].lower(), r["TableName"].lower()
        self._authorize("glue:UpdatePartition", catalog, database, name)
        table = self._raw_table(client, database, name)
        values = list(r["PartitionValueList"])
        with self._metastore(f"Partition {values} of table {database}.{name}"):
            current = client.raw_read("get_partition", database, name, values)
        partition = shapes.thrift_partition(table, r["PartitionInput"])
        if list(partition.values) != values:
            raise InvalidRequest(
                "PartitionInput.Values: a partition's values cannot change "
                f"({values} -> {list(partition.values)})"
            )
        partition.createTime = current.createTime

        def moved(thrift: Any) -> bool:
            stored = thrift.get_partition(database, name, values)
            return bool(stored.sd.location == partition.sd.location)

        with self._metastore(f"Partition {values} of table {database}.{name}"):
            client.raw_mutate(
                database, name, "alter_partition", database, name, partition, applied=moved
            )
        return {}

    def delete_partition(self, r: JsonDict) -> JsonDict:
        errors = self._drop_partitions(r, [list(r["PartitionValues"])], "glue:DeletePartition")
        if errors:
            raise errors[0][1]
        return {}

    def batch_delete_partition(self, r: JsonDict) -> JsonDict:
        wanted = [list(p["Values"]) for p in r["PartitionsToDelete"]]
        errors = self._drop_partitions(r, wanted, "glue:BatchDeletePartition")
        return {"Errors": [{"PartitionValues": v, "ErrorDetail": detail(exc)} for v, exc in errors]}

    def _drop_partitions(
        self, r: JsonDict, wanted: list[list[str]], action: str
    ) -> list[tuple[list[str], LakewardError]]:
        client, database, name, table, keys, existing = self._partitioned(r, action)
        errors: list[tuple[list[str], LakewardError]] = []
        names = []
        for values in wanted:
            key = partition_name(keys, values) if len(values) == len(keys) else None
            if key is None or key not in existing:
                errors.append((values, ResourceNotFound(f"Partition not found: {values}")))
            else:
                names.append(key)
        if names:
            with self._metastore(f"Partitions of table {database}.{name}"):
                client.drop_partitions(database, name, names)
        return errors
