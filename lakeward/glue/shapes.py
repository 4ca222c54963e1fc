"""Glue's Data Catalog shapes and the Hive Metastore's Thrift objects, field for field.

Glue's Table is the metastore's table under other names (``StorageDescriptor`` is the
``sd``, ``PartitionKeys`` the ``partitionKeys``...), so each direction is a renaming.
What Glue has and Hive 2.3 does not is kept where Glue's own Hive client keeps it: a
table's or partition's ``Description`` in its ``comment`` parameter, a database's owner
in Hive's owner field.
"""

from __future__ import annotations

import time
from typing import Any

from pymetastore.hive_metastore import ttypes as hive

from lakeward.query.model import JsonDict

COMMENT = "comment"  # the parameter Hive keeps a table's description in
LAST_DDL_TIME = "transient_lastDdlTime"  # set by the metastore on each create and alter


def _columns(items: list[Any] | None) -> list[JsonDict]:
    return [
        {"Name": c.name, "Type": c.type, **({"Comment": c.comment} if c.comment else {})}
        for c in items or []
    ]


def _field_schemas(items: list[JsonDict] | None) -> list[Any]:
    return [
        hive.FieldSchema(c["Name"], c.get("Type", "string"), c.get("Comment")) for c in items or []
    ]


def storage_descriptor(sd: Any, *, columns: bool = True) -> JsonDict:
    serde = sd.serdeInfo or hive.SerDeInfo()
    skewed = sd.skewedInfo
    found: JsonDict = {
        **({"Columns": _columns(sd.cols)} if columns else {}),
        "Location": sd.location,
        "InputFormat": sd.inputFormat,
        "OutputFormat": sd.outputFormat,
        "Compressed": bool(sd.compressed),
        "NumberOfBuckets": sd.numBuckets if sd.numBuckets is not None else -1,
        "SerdeInfo": {
            k: v
            for k, v in (
                ("Name", serde.name),
                ("SerializationLibrary", serde.serializationLib),
                ("Parameters", dict(serde.parameters or {})),
            )
            if v is not None
        },
        "BucketColumns": list(sd.bucketCols or []),
        "SortColumns": [{"Column": o.col, "SortOrder": o.order} for o in sd.sortCols or []],
        "Parameters": dict(sd.parameters or {}),
        "StoredAsSubDirectories": bool(sd.storedAsSubDirectories),
    }
    if skewed is not None and (skewed.skewedColNames or skewed.skewedColValues):
        found["SkewedInfo"] = {
            "SkewedColumnNames": list(skewed.skewedColNames or []),
            "SkewedColumnValues": ["|".join(v) for v in skewed.skewedColValues or []],
            "SkewedColumnValueLocationMaps": {
                "|".join(k): v for k, v in (skewed.skewedColValueLocationMaps or {}).items()
            },
        }
    return {k: v for k, v in found.items() if v is not None}


def thrift_storage(sd: JsonDict | None) -> Any:
    sd = sd or {}
    serde = sd.get("SerdeInfo", {})
    skewed = sd.get("SkewedInfo")
    return hive.StorageDescriptor(
        cols=_field_schemas(sd.get("Columns")),
        location=sd.get("Location"),
        inputFormat=sd.get("InputFormat"),
        outputFormat=sd.get("OutputFormat"),
        compressed=bool(sd.get("Compressed", False)),
        numBuckets=sd.get("NumberOfBuckets", -1),
        serdeInfo=hive.SerDeInfo(
            name=serde.get("Name"),
            serializationLib=serde.get("SerializationLibrary"),
            parameters=dict(serde.get("Parameters", {})),
        ),
        bucketCols=list(sd.get("BucketColumns", [])),
        sortCols=[
            hive.Order(o["Column"], o.get("SortOrder", 1)) for o in sd.get("SortColumns", [])
        ],
        parameters=dict(sd.get("Parameters", {})),
        skewedInfo=hive.SkewedInfo(
            skewedColNames=list(skewed.get("SkewedColumnNames", [])),
            skewedColValues=[v.split("|") for v in skewed.get("SkewedColumnValues", [])],
            skewedColValueLocationMaps={
                tuple(k.split("|")): v
                for k, v in skewed.get("SkewedColumnValueLocationMaps", {}).items()
            },
        )
        if skewed
        else None,
        storedAsSubDirectories=bool(sd.get("StoredAsSubDirectories", False)),
    )


def glue_table(raw: Any, catalog_id: str, version_id: str | None = None) -> JsonDict:
    parameters = dict(raw.parameters or {})
    updated = parameters.get(LAST_DDL_TIME)
    found: JsonDict = {
        "Name": raw.tableName,
        "DatabaseName": raw.dbName,
        "Description": parameters.get(COMMENT),
        "Owner": raw.owner,
        "CreateTime": raw.createTime,
        "UpdateTime": int(updated) if updated and updated.isdigit() else raw.createTime,
        "LastAccessTime": raw.lastAccessTime or None,
        "Retention": raw.retention or 0,
        "StorageDescriptor": storage_descriptor(raw.sd) if raw.sd else None,
        "PartitionKeys": _columns(raw.partitionKeys),
        "ViewOriginalText": raw.viewOriginalText,
        "ViewExpandedText": raw.viewExpandedText,
        "TableType": raw.tableType,
        "Parameters": parameters,
        "IsRegisteredWithLakeFormation": False,
        "CatalogId": catalog_id,
        "VersionId": version_id,
    }
    return {k: v for k, v in found.items() if v is not None}


def thrift_table(database: str, table: JsonDict, owner: str) -> Any:
    """A Glue ``TableInput`` as the metastore's table (a view keeps no location)."""
    parameters = dict(table.get("Parameters", {}))
    if table.get("Description") is not None:
        parameters[COMMENT] = table["Description"]
    kind = table.get("TableType") or "EXTERNAL_TABLE"
    if kind == "EXTERNAL_TABLE":
        parameters.setdefault("EXTERNAL", "TRUE")
    return hive.Table(
        tableName=table["Name"].lower(),
        dbName=database,
        owner=table.get("Owner") or owner,
        createTime=int(time.time()),
        lastAccessTime=int(table.get("LastAccessTime") or 0),
        retention=int(table.get("Retention") or 0),
        sd=thrift_storage(table.get("StorageDescriptor")),
        partitionKeys=_field_schemas(table.get("PartitionKeys")),
        parameters=parameters,
        viewOriginalText=table.get("ViewOriginalText"),
        viewExpandedText=table.get("ViewExpandedText"),
        tableType=kind,
    )


def glue_database(raw: Any, catalog_id: str) -> JsonDict:
    parameters = dict(raw.parameters or {})
    found = {
        "Name": raw.name,
        "Description": raw.description or None,
        "LocationUri": raw.locationUri,
        "Parameters": parameters,
        "CatalogId": catalog_id,
    }
    return {k: v for k, v in found.items() if v is not None}


def glue_partition(raw: Any, catalog_id: str, *, columns: bool = True) -> JsonDict:
    parameters = dict(raw.parameters or {})
    updated = parameters.get(LAST_DDL_TIME)
    found = {
        "Values": list(raw.values),
        "DatabaseName": raw.dbName,
        "TableName": raw.tableName,
        "CreationTime": raw.createTime,
        "LastAccessTime": raw.lastAccessTime or None,
        "LastAnalyzedTime": None,
        "StorageDescriptor": storage_descriptor(raw.sd, columns=columns) if raw.sd else None,
        "Parameters": parameters,
        "CatalogId": catalog_id,
        "UpdateTime": int(updated) if updated and updated.isdigit() else None,
    }
    return {k: v for k, v in found.items() if v is not None}


def thrift_partition(table: Any, partition: JsonDict) -> Any:
    """A Glue ``PartitionInput`` of ``table``; its storage defaults to the table's, as in
    Glue (a partition given only a Location reads with the table's format)."""
    given = partition.get("StorageDescriptor") or {}
    sd = thrift_storage(given)
    base = table.sd
    if base is not None:
        if not given.get("Columns"):
            sd.cols = list(base.cols or [])
        for name in ("inputFormat", "outputFormat"):
            if getattr(sd, name) is None:
                setattr(sd, name, getattr(base, name))
        if sd.serdeInfo.serializationLib is None and base.serdeInfo is not None:
            sd.serdeInfo = base.serdeInfo
    return hive.Partition(
        values=list(partition.get("Values", [])),
        dbName=table.dbName,
        tableName=table.tableName,
        createTime=int(time.time()),
        lastAccessTime=int(partition.get("LastAccessTime") or 0),
        sd=sd,
        parameters=dict(partition.get("Parameters", {})),
    )
