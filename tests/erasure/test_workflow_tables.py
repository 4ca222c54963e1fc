"""Open table formats in the workflow: Delta and Iceberg purged through their own deletes,
their files never rewritten as objects, superseded files physically gone; Hudi reported."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from lakeward.config import load_settings
from lakeward.erasure import report
from lakeward.erasure.requests import COMPLETED
from lakeward.erasure.service import ErasureIndexService
from lakeward.erasure.workflow import ErasureWorkflow
from lakeward.storage import load_storage
from lakeward.storage.local import path_of_uri
from tests.erasure.workflow_helpers import busiest_users, make_lake, smtp_server, workflow_settings


def test_delta_and_iceberg_tables_are_purged_through_their_formats(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with smtp_server() as (_mailbox, port):
        settings = workflow_settings(data_dir, port)
        make_lake(settings, records=800)
        users = busiest_users(settings, 6)
        gone, kept = users[0], users[1:]
        bucket = settings.lake.data_bucket
        lake = path_of_uri(settings.lake_root)
        # A Delta table inside an indexed Parquet dataset: its files are indexed as objects.
        delta_dir = lake / bucket / "gdpr/reviews/parquet/events_delta"
        events = pa.table({"user_id": users * 10, "n": list(range(60))})
        for start in range(0, 60, 20):
            write_deltalake(str(delta_dir), events.slice(start, 20), mode="append")
        warehouse = tmp_path / "warehouse"
        warehouse.mkdir()
        catalog_url = f"sqlite:///{tmp_path / 'iceberg.db'}"
        catalog = SqlCatalog("lakeward", uri=catalog_url, warehouse=warehouse.as_uri())
        catalog.create_namespace("shop")
        iceberg = catalog.create_table("shop.events", schema=events.schema)
        iceberg.append(events.slice(0, 30))
        iceberg.append(events.slice(30, 30))
        hudi_dir = tmp_path / "hudi"
        (hudi_dir / ".hoodie").mkdir(parents=True)
        stack_file = data_dir / "lakeward.toml"
        stack_file.write_text(
            stack_file.read_text()
            + "\n".join(
                [
                    "[[erasure.tables]]", 'name = "events_delta"', 'format = "delta"',
                    f"location = {json.dumps(delta_dir.as_uri())}",
                    "[[erasure.tables]]", 'name = "events_iceberg"', 'format = "iceberg"',
                    'location = "shop.events"', f"catalog_url = {json.dumps(catalog_url)}",
                    "[[erasure.tables]]", 'name = "clicks_hudi"', 'format = "hudi"',
                    f"location = {json.dumps(hudi_dir.as_uri())}",
                ]
            )
            + "\n"
        )  # fmt: skip
        settings = load_settings(data_dir=data_dir, config_file=stack_file, env={})
        index = ErasureIndexService(settings)
        index.reindex(prefix=f"{bucket}/gdpr/reviews/parquet/")
        delta_files_before = {p for p in delta_dir.glob("*.parquet")}
        assert any(h.location.endswith(".parquet") and "events_delta" in h.location
                   for h in index.store.find([gone])[gone])  # fmt: skip
        flow = ErasureWorkflow(settings, index=index, owns_index=True)
        created, _ = flow.request([gone], "dpo@example.com")
        flow.run_pending()
        storage = load_storage(settings)
        saved = json.loads(storage.get(bucket, report.report_prefix(created.id) + "report.json"))
        inside = saved["layers"]["inside_table_formats"]
        assert inside and all(e["format"] == "delta" for e in inside)
        assert not any("events_delta" in e["uri"] for e in saved["layers"]["lake"])
        rows = {t["name"]: t["rows"] for t in saved["layers"]["tables"]}
        assert rows == {"events_delta": 10, "events_iceberg": 10, "clicks_hudi": None}
        assert any("Hudi" in r["kind"] for r in saved["retained"])

        flow.approve(created.id, "test")
        flow.run_pending()

        assert flow.store.get(created.id).state == COMPLETED, flow.store.history(created.id)
        delta_rows = DeltaTable(str(delta_dir)).to_pyarrow_table()
        assert sorted(delta_rows["user_id"].to_pylist()) == sorted(kept * 10)
        assert not any(p.exists() for p in delta_files_before)
        for path in delta_dir.glob("*.parquet"):
            assert gone not in pq.read_table(path)["user_id"].to_pylist()
        ice = catalog.load_table("shop.events")
        assert sorted(ice.scan().to_arrow()["user_id"].to_pylist()) == sorted(kept * 10)
        for path in warehouse.rglob("*.parquet"):
            assert gone not in pq.read_table(path)["user_id"].to_pylist()
        certificate = json.loads(
            storage.get(bucket, report.report_prefix(created.id) + "certificate.json")
        )
        superseded = [r for r in certificate["retained"] if r["kind"] == "superseded file"]
        assert superseded and all(r["state"] == "removed" for r in superseded)
        assert {t["layer"] for t in certificate["tables"]} >= {"delta", "iceberg", "relational"}
        flow.close()
