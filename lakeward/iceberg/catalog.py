"""The pyiceberg catalog of a stack's metastore, one per set of metastore URIs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.io import PY_IO_IMPL, load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table

from lakeward.config import Settings
from lakeward.failpoints import failpoint
from lakeward.iceberg.io import LAKE_ROOT
from lakeward.storage.arrow import S3Options

TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"
LOCK_POLL_SECONDS = 2
KEPT_TABLES = 64

# One catalog per thread: pyiceberg's HiveCatalog holds one Thrift client, which opens and
# closes its connection around each call and cannot be shared by threads at once.
_local = threading.local()
# Tables read by queries, by metadata file: a metadata file never changes once written.
_read_tables: OrderedDict[str, Table] = OrderedDict()
_read_tables_lock = threading.Lock()


class LakeCatalog(HiveCatalog):
    """pyiceberg's HiveCatalog, with the crash points of lakeward's kill -9 tests: after a
    change's data files and manifests are written, and after its new metadata file is
    written while the metastore lock is held."""

    def commit_table(self, table: Any, requirements: Any, updates: Any) -> Any:
        failpoint("iceberg-files-written")
        return super().commit_table(table, requirements, updates)

    @staticmethod
    def _write_metadata(metadata: Any, io: Any, metadata_path: str) -> None:
        HiveCatalog._write_metadata(metadata, io, metadata_path)
        failpoint("iceberg-metadata-written")


def is_iceberg(parameters: Mapping[str, str]) -> bool:
    """Whether a metastore table's parameters make it an Iceberg table."""
    return parameters.get(TABLE_TYPE, "").upper() == ICEBERG


def iceberg_catalog(settings: Settings, uris: list[str]) -> HiveCatalog:
    """pyiceberg's HiveCatalog over the metastore nodes at ``uris`` (tried in order)."""
    key = (settings.lake_root, *uris)
    catalogs: dict[tuple[str, ...], HiveCatalog] = _local.__dict__.setdefault("catalogs", {})
    found = catalogs.get(key)
    if found is None:
        found = catalogs[key] = LakeCatalog(
            "lakeward",
            **{"uri": ",".join(uris), **lock_properties(settings), **file_io_properties(settings)},
        )
    return found


def lock_properties(settings: Settings) -> dict[str, str]:
    """A commit waits on a table's lock until a dead writer's is released: polls every
    couple of seconds (each poll keeps the waiting lock alive) past the metastore's timeout."""
    timeout = settings.metastore.lock_timeout
    return {
        "lock-check-min-wait-time": "0.05",
        "lock-check-max-wait-time": str(LOCK_POLL_SECONDS),
        "lock-check-retries": str(timeout // LOCK_POLL_SECONDS + 10),
    }


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


def table_at(catalog: HiveCatalog, identifier: tuple[str, str], metadata_location: str) -> Table:
    """The table as the metadata file at ``metadata_location`` describes it, for reading:
    each file is read once by this process (the last ``KEPT_TABLES`` are kept)."""
    with _read_tables_lock:
        found = _read_tables.get(metadata_location)
        if found is not None:
            _read_tables.move_to_end(metadata_location)
            return found
    io = load_file_io(catalog.properties, metadata_location)
    metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
    table = Table(
        identifier=identifier,
        metadata=metadata,
        metadata_location=metadata_location,
        io=load_file_io({**catalog.properties, **metadata.properties}, metadata_location),
        catalog=catalog,
    )
    with _read_tables_lock:
        _read_tables[metadata_location] = table
        while len(_read_tables) > KEPT_TABLES:
            _read_tables.popitem(last=False)
    return table
