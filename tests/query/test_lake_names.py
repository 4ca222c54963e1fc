"""The metastore keeps the embedded lake's places by their s3:// names. A stack made before
that, with file:// locations, keeps answering, and ``lakeward up`` renames them: table and
partition locations, with the files left where they are (a database keeps its location:
Hive 2.3's metastore never changes one)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeward.config import Settings
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import Column, PartitionInfo, TableInfo
from lakeward.query.service import QueryService
from lakeward.storage.paths import data_uri, local_path
from tests.helpers import lakeward, parse_outputs
from tests.query.statements.test_views import rows

pytestmark = pytest.mark.spark

DB = "names_test"


@pytest.fixture
def old_tables(stack: Settings, metastore: MetastoreClient) -> Iterator[str]:
    """A database, a table and a partitioned table made the old way: file:// locations."""
    prefix = f"{DB}-files"
    root = local_path(data_uri(stack, prefix))
    assert root is not None
    (root / "plain").mkdir(parents=True)
    pq.write_table(pa.table({"n": [1, 2, 3]}), root / "plain" / "a.parquet")
    (root / "parted" / "k=x").mkdir(parents=True)
    pq.write_table(pa.table({"n": [10, 20]}), root / "parted" / "k=x" / "b.parquet")
    old = data_uri(stack, prefix).replace("file:///", "file:/")  # as Hadoop spells it
    metastore.create_database(DB, f"{old}/{DB}.db")
    metastore.create_table(TableInfo(DB, "plain", f"{old}/plain", [Column("n", "bigint")]))
    metastore.create_table(
        TableInfo(DB, "parted", f"{old}/parted", [Column("n", "bigint")], [Column("k", "string")])
    )
    metastore.add_partitions(DB, "parted", [PartitionInfo(["x"], f"{old}/parted/k=x")])
    try:
        yield prefix
    finally:
        metastore.drop_database(DB, cascade=True)
        shutil.rmtree(root, ignore_errors=True)


def totals(service: QueryService, workgroup: str) -> list[list[str | None]]:
    return rows(
        service,
        f"SELECT (SELECT sum(n) FROM {DB}.plain), (SELECT sum(n) FROM {DB}.parted WHERE k = 'x')",
        workgroup=workgroup,
    )


def test_up_renames_file_locations_to_s3_names(
    stack: Settings, metastore: MetastoreClient, service: QueryService, old_tables: str
) -> None:
    bucket = stack.lake.data_bucket
    # Before: the file:// locations are read as they are.
    assert totals(service, "duck") == [["6", "30"]]

    outputs = parse_outputs(lakeward("up", data_dir=stack.data_dir, timeout=600).stdout)

    # Ours, and those other tests of the session made with file:// locations.
    tables, partitions = (int(n.split()[0]) for n in outputs["renamed_to_s3_names"].split(", "))
    assert tables >= 2 and partitions >= 1
    base = f"s3://{bucket}/{old_tables}"
    metastore.invalidate()
    assert metastore.table(DB, "plain").location == f"{base}/plain"
    assert metastore.table(DB, "parted").location == f"{base}/parted"
    assert [p.location for p in metastore.partitions(DB, "parted")] == [f"{base}/parted/k=x"]
    # After: the same answers from both engines, and a row's file by its S3 name.
    assert totals(service, "duck") == [["6", "30"]]
    assert totals(service, "big") == [["6", "30"]]
    assert rows(service, f'SELECT "$path" FROM {DB}.plain LIMIT 1') == [[f"{base}/plain/a.parquet"]]
    # A second up has nothing left to rename.
    again = parse_outputs(lakeward("up", data_dir=stack.data_dir, timeout=600).stdout)
    assert "renamed_to_s3_names" not in again
