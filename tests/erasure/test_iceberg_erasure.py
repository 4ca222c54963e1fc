"""Erasure through Iceberg: the person's rows deleted, exactly the files that held them
physically gone, other people's rows byte-for-byte the same, and every step resumable.

The first tests use a SQL catalog on file:// paths; the last runs the whole workflow on a
table of the session stack's metastore, made with SQL through boto3 on s3:// names.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

from lakeward.config import ErasureSettings, ErasureTable, Settings
from lakeward.erasure import report
from lakeward.erasure.requests import COMPLETED
from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.iceberg import erasure
from lakeward.storage import load_storage
from tests.erasure.workflow_helpers import smtp_server
from tests.query.support import api_failed, api_ok, credentials, endpoint, local, outside_catalog

GONE = "u-007"
USERS = [f"u-{i:03d}" for i in range(1, 13)]


def row_hashes(rows: pa.Table, without: str) -> list[str]:
    """A SHA-256 per row of everyone but ``without``, sorted: equal lists mean the same rows."""
    return sorted(
        hashlib.sha256(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest()
        for r in rows.to_pylist()
        if r["user_id"] != without
    )


def holding(paths: list[Path], who: str) -> list[Path]:
    return [p for p in paths if who in pq.read_table(p).column("user_id").to_pylist()]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    made = SqlCatalog(
        "test", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri()
    )
    made.create_namespace("shop")
    return made


def events(start: int, count: int) -> pa.Table:
    return pa.table(
        {
            "user_id": [USERS[i % len(USERS)] for i in range(start, start + count)],
            "n": pa.array(range(start, start + count), pa.int64()),
            "note": [f"event {i}" for i in range(start, start + count)],
        }
    )


def written_table(catalog: Catalog, batches: int = 4) -> Any:
    table = catalog.create_table(("shop", "events"), schema=events(0, 1).schema)
    for batch in range(batches):
        table.append(events(batch * 60, 60))
    return catalog.load_table(("shop", "events"))


def parquet_files(table: Any) -> list[Path]:
    return sorted(Path(table.location().removeprefix("file://")).rglob("*.parquet"))


def test_erase_deletes_the_rows_and_exactly_the_files_that_held_them(catalog: Catalog) -> None:
    table = written_table(catalog)
    before = table.scan().to_arrow()
    files_before = parquet_files(table)
    held = holding(files_before, GONE)
    assert held and len(held) < len(files_before) + 1

    done = erasure.erase(catalog, ("shop", "events"), "user_id", [GONE])

    assert done.removed_rows == sum(1 for u in before["user_id"].to_pylist() if u == GONE)
    table = catalog.load_table(("shop", "events"))
    assert row_hashes(table.scan().to_arrow(), GONE) == row_hashes(before, GONE)
    assert GONE not in table.scan().to_arrow()["user_id"].to_pylist()
    # Exactly the superseded files went: every one that held the person, physically.
    assert sorted(Path(p.removeprefix("file://")) for p in done.superseded) == held
    assert not any(p.exists() for p in held)
    assert holding(parquet_files(table), GONE) == []
    # Every snapshot naming them is expired; the current one is never.
    assert done.expired and table.current_snapshot() is not None
    assert all(s.snapshot_id not in done.expired for s in table.snapshots())
    # Nothing left to do: a second run changes nothing.
    again = erasure.erase(catalog, ("shop", "events"), "user_id", [GONE])
    assert (again.removed_rows, again.superseded, again.removed) == (0, [], [])


def test_an_erasure_stopped_after_any_step_is_finished_by_running_it_again(
    catalog: Catalog,
) -> None:
    table = written_table(catalog)
    held = holding(parquet_files(table), GONE)
    identifier = ("shop", "events")
    # Stopped after the delete, then after the expiry: the earlier metadata files still
    # name the snapshots that named the person's files, and the rerun finds them there.
    erasure.delete_rows(catalog, identifier, "user_id", [GONE])
    files = erasure.superseded_files(catalog.load_table(identifier), "user_id", [GONE])
    erasure.expire_snapshots(catalog, identifier, files)
    assert all(p.exists() for p in held)  # stopped before the removal
    done = erasure.erase(catalog, identifier, "user_id", [GONE])
    assert done.removed_rows == 0
    assert sorted(Path(p.removeprefix("file://")) for p in done.superseded) == held
    assert not any(p.exists() for p in held)


def test_a_tag_keeps_its_snapshot_and_is_reported(catalog: Catalog) -> None:
    table = written_table(catalog, batches=2)
    snapshot = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(snapshot, "audit-2024").commit()
    done = erasure.erase(catalog, ("shop", "events"), "user_id", [GONE])
    assert done.pinned == ["audit-2024"] and done.removed_rows
    # The tagged snapshot still holds the person's files: they are kept, and said so.
    assert done.superseded and not set(done.superseded) & set(done.removed)


def test_an_unknown_id_column_is_named(catalog: Catalog) -> None:
    written_table(catalog, batches=1)
    with pytest.raises(Exception, match="no column 'customer'"):
        erasure.erase(catalog, ("shop", "events"), "customer", [GONE])


@pytest.mark.spark
def test_the_workflow_erases_a_person_from_a_metastore_table_on_s3_names(
    stack: Settings, tmp_path: Path
) -> None:
    athena = boto3.client("athena", endpoint_url=endpoint(stack), **credentials(stack))
    name = f"erasure_{uuid.uuid4().hex[:8]}"
    place = f"s3://{stack.lake.data_bucket}/iceberg/{name}"
    api_ok(
        athena,
        f"CREATE TABLE {name} (user_id string, n bigint, day date) PARTITIONED BY (day) "
        f"LOCATION '{place}' TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    for batch in range(3):  # three snapshots, each with the person in two partitions
        api_ok(
            athena,
            f"INSERT INTO {name} SELECT 'u-' || lpad(CAST(i % 12 AS varchar), 3, '0'), i, "
            f"date_add('day', i % 2, DATE '2024-03-01') "
            f"FROM UNNEST(sequence({batch * 48}, {batch * 48 + 47})) AS t(i)",
        )
    api_ok(athena, f"DELETE FROM {name} WHERE n = 1")  # a DELETE of the owner's, not ours
    outside = outside_catalog(stack)
    before = outside.load_table(("default", name)).scan().to_arrow()
    first_snapshot = outside.load_table(("default", name)).history()[0].snapshot_id
    person = sum(1 for u in before["user_id"].to_pylist() if u == GONE)
    lake_files = sorted(local(stack, place).rglob("*.parquet"))
    held = holding(lake_files, GONE)
    assert person == 12 and held

    # A workflow of its own (its own request store), over the stack's lake and metastore.
    table = ErasureTable(name=name, format="iceberg", catalog="metastore",
                         location=f"default.{name}")  # fmt: skip
    with smtp_server() as (_mailbox, port):
        erasure_settings = ErasureSettings(
            tables=[table], smtp_host="127.0.0.1", smtp_port=port, approvers=["dpo@x.test"],
            run_worker=False,
        )  # fmt: skip
        lake = stack.lake.model_copy(update={"root": stack.lake_root})
        settings = stack.model_copy(
            update={"data_dir": tmp_path, "lake": lake, "erasure": erasure_settings}
        )
        flow = ErasureWorkflow(settings, index=ErasureIndexService(settings), owns_index=True)
        try:
            created, _ = flow.request([GONE], "dpo@example.com")
            flow.run_pending()
            storage = load_storage(settings)
            prefix = report.report_prefix(created.id)
            saved = json.loads(storage.get(stack.lake.data_bucket, prefix + "report.json"))
            assert {t["name"]: t["rows"] for t in saved["layers"]["tables"]} == {name: person}
            flow.approve(created.id, "dpo")
            flow.run_pending()
            assert flow.store.get(created.id).state == COMPLETED, flow.store.history(created.id)
            certificate = json.loads(
                storage.get(stack.lake.data_bucket, prefix + "certificate.json")
            )
        finally:
            flow.close()

    # The certificate lists each file that held the person as physically gone, and so it is.
    superseded = [r for r in certificate["retained"] if r["kind"] == "superseded file"]
    assert sorted(local(stack, r["copy"]) for r in superseded) == held
    assert all(r["state"] == "removed" for r in superseded)
    assert not any(p.exists() for p in held)
    assert holding(sorted(local(stack, place).rglob("*.parquet")), GONE) == []
    [row] = [t for t in certificate["tables"] if t["uri"] == f"default.{name}"]
    assert (row["removed"], row["remaining"]) == (person, 0)
    # Everyone else's rows are byte-for-byte the same, as another engine reads them.
    after = outside.load_table(("default", name)).scan().to_arrow()
    assert row_hashes(after, GONE) == row_hashes(before, GONE)
    rows = api_ok(athena, f"SELECT count(*) FROM {name} WHERE user_id = '{GONE}'")["rows"]
    assert rows[1:] == [["0"]]
    # The old snapshots that held the person are gone from time travel too.
    reason = api_failed(athena, f"SELECT * FROM {name} FOR VERSION AS OF {first_snapshot}")
    assert str(first_snapshot) in reason
