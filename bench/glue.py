"""Benchmark of Glue's Data Catalog API against the metastore's own Thrift calls.

    .venv/bin/python bench/glue.py --data-dir <a running stack's data dir> [--calls 300]
        [--partitions 1000]

In one run it creates a database and a table with ``--partitions`` partitions (through
Glue's BatchCreatePartition, 100 at a time), then times, interleaved call by call so the
machine's load falls on both alike:

- Glue ``GetTable`` through boto3, against ``get_table`` through lakeward's Thrift client
  (no cache: a round trip to the metastore each time);
- Glue ``GetPartitions`` with an ``Expression`` that selects about a tenth of the
  partitions, against the metastore's ``get_partitions_by_filter`` with the same filter.

It prints the p50 and p90 of each and the ratio of the p50s, then drops the database.
Glue's side pays what a client of the API pays: the HTTP round trip, SigV4, IAM and the
audit record of each call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import ms, percentile, say  # noqa: E402

from lakeward.config import load_settings  # noqa: E402
from lakeward.metastore.client import MetastoreClient  # noqa: E402
from lakeward.metastore.tables import PARQUET  # noqa: E402
from lakeward.metastore.uris import metastore_uris  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()

    import boto3

    settings = load_settings(data_dir=args.data_dir, env={})
    glue = boto3.client(
        "glue",
        endpoint_url=settings.server_url,
        region_name="us-east-1",
        aws_access_key_id=settings.api.access_key_id,
        aws_secret_access_key=settings.api.secret_access_key,
    )
    database = f"bench_glue_{uuid.uuid4().hex[:6]}"
    bucket = settings.lake.data_bucket
    glue.create_database(DatabaseInput={"Name": database})
    try:
        glue.create_table(
            DatabaseName=database,
            TableInput={
                "Name": "events",
                "PartitionKeys": [
                    {"Name": "day", "Type": "int"},
                    {"Name": "kind", "Type": "string"},
                ],
                "StorageDescriptor": {
                    "Columns": [{"Name": "id", "Type": "bigint"}],
                    "Location": f"s3://{bucket}/bench-glue/{database}/",
                    "InputFormat": PARQUET["input_format"],
                    "OutputFormat": PARQUET["output_format"],
                    "SerdeInfo": {"SerializationLibrary": PARQUET["serde"]},
                },
            },
        )
        values = [(day, kind) for day in range(args.partitions // 2) for kind in ("a", "b")]
        for start in range(0, len(values), 100):
            chunk = values[start : start + 100]
            glue.batch_create_partition(
                DatabaseName=database,
                TableName="events",
                PartitionInputList=[
                    {
                        "Values": [str(d), k],
                        "StorageDescriptor": {
                            "Location": f"s3://{bucket}/bench-glue/{database}/day={d}/kind={k}/"
                        },
                    }
                    for d, k in chunk
                ],
            )
        tenth = args.partitions // 20
        expression = f"day < {tenth} AND kind = 'a'"
        thrift_filter = f'day < {tenth} and kind = "a"'
        kinds = ("glue_table", "thrift_table", "glue_parts", "thrift_parts")
        timings: dict[str, list[float]] = {k: [] for k in kinds}
        with MetastoreClient(metastore_uris(settings)) as client:
            for _ in range(args.calls):
                started = time.perf_counter()
                glue.get_table(DatabaseName=database, Name="events")
                timings["glue_table"].append(time.perf_counter() - started)
                started = time.perf_counter()
                client.raw_read("get_table", database, "events")
                timings["thrift_table"].append(time.perf_counter() - started)
                started = time.perf_counter()
                found = glue.get_partitions(
                    DatabaseName=database, TableName="events", Expression=expression
                )["Partitions"]
                timings["glue_parts"].append(time.perf_counter() - started)
                started = time.perf_counter()
                raw = client.raw_read(
                    "get_partitions_by_filter", database, "events", thrift_filter, -1
                )
                timings["thrift_parts"].append(time.perf_counter() - started)
                assert len(found) == len(raw) == tenth, (len(found), len(raw))
        say(f"{args.calls} calls each, interleaved; table of {len(values)} partitions, "
            f"the filter selects {tenth}")  # fmt: skip
        say(f"{'call':<40}{'p50':>10}{'p90':>10}")
        rows = [
            ("Glue GetTable (boto3, HTTP)", "glue_table"),
            ("Thrift get_table", "thrift_table"),
            ("Glue GetPartitions + Expression", "glue_parts"),
            ("Thrift get_partitions_by_filter", "thrift_parts"),
        ]
        for label, key in rows:
            t = timings[key]
            say(f"{label:<40}{ms(statistics.median(t)):>10}{ms(percentile(t, 90)):>10}")
        for what, glue_key, thrift_key in (
            ("GetTable", "glue_table", "thrift_table"),
            ("GetPartitions", "glue_parts", "thrift_parts"),
        ):
            ratio = statistics.median(timings[glue_key]) / statistics.median(timings[thrift_key])
            say(f"ratio {what}: Glue / Thrift = {ratio:.2f}")
    finally:
        glue.delete_database(Name=database)


if __name__ == "__main__":
    main()
