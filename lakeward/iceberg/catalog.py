"""The pyiceberg catalog of a stack's metastore, one per set of metastore URIs."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.io import PY_IO_IMPL

from lakeward.config import Settings
from lakeward.iceberg.io import LAKE_ROOT
from lakeward.storage.arrow import S3Options

TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"

# One catalog per thread: pyiceberg's HiveCatalog holds one Thrift client, which opens and
# closes its connection around each call and cannot be shared by threads at once.
_local = threading.local()


def is_iceberg(parameters: Mapping[str, str]) -> bool:
    """Whether a metastore table's parameters make it an Iceberg table."""
    return parameters.get(TABLE_TYPE, "").upper() == ICEBERG


def iceberg_catalog(settings: Settings, uris: list[str]) -> HiveCatalog:
    """pyiceberg's HiveCatalog over the metastore nodes at ``uris`` (tried in order)."""
    key = (settings.lake_root, *uris)
    catalogs: dict[tuple[str, ...], HiveCatalog] = _local.__dict__.setdefault("catalogs", {})
    found = catalogs.get(key)
    if found is None:
        found = catalogs[key] = HiveCatalog(
            "lakeward", **{"uri": ",".join(uris), **file_io_properties(settings)}
        )
    return found


def file_io_properties(settings: Settings) -> dict[str, str]:
    """How the tables' files are reached: the embedded lake's directory, or S3's options."""
    if settings.lake_root.startswith("file:"):
        return {PY_IO_IMPL: "lakeward.iceberg.io.LakeFileIO", LAKE_ROOT: settings.lake_root}
    s3 = S3Options.from_settings(settings)
    properties = {"s3.region": s3.region or "us-east-1"}
    if s3.endpoint_url:
        properties["s3.endpoint"] = s3.endpoint_url
    if s3.access_key_id:
        properties["s3.access-key-id"] = s3.access_key_id
        properties["s3.secret-access-key"] = s3.secret_access_key or ""
    return properties
