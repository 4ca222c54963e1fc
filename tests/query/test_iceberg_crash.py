"""A writer of an Iceberg table killed with SIGKILL in the middle of its commit: the table
stays readable at its last snapshot, the next writer commits, and VACUUM removes what the
dead writer left behind.

The writer is a SQL service in a process of its own, over the session stack, killed at
exact moments by its crash points: once its data files and manifests are written, and once
its new metadata file is written while it holds the metastore's lock on the table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lakeward.config import Settings
from lakeward.failpoints import FAILPOINTS_ENV
from lakeward.iceberg.catalog import iceberg_catalog
from lakeward.metastore.uris import metastore_uris
from lakeward.query.service import QueryService
from tests.query.support import local, run, written

pytestmark = pytest.mark.spark

WRITER = """
import sys, time
from pathlib import Path
from lakeward.config import load_settings
from lakeward.query.service import QueryService
from tests.helpers import over_stack

stack = load_settings(data_dir=Path(sys.argv[1]), env={})
service = QueryService(over_stack(stack, Path(sys.argv[2])), owner=True)
execution = service.start_query_execution(sys.argv[3])
while not service.get_query_execution(execution).state.done:
    time.sleep(0.02)
print(service.get_query_execution(execution).state_change_reason)
"""


def killed_writer(stack: Settings, state: Path, sql: str, point: str) -> int:
    """Run ``sql`` in a SQL service of its own process, killed at ``point``; its exit code."""
    env = os.environ | {FAILPOINTS_ENV: point}
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(stack.data_dir), str(state), sql],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    return done.returncode


def files_under(place: Path) -> set[Path]:
    return {p for p in place.rglob("*") if p.is_file()}


@pytest.mark.parametrize("point", ["iceberg-files-written", "iceberg-metadata-written"])
def test_a_writer_killed_mid_commit_loses_nothing_and_leaves_nothing_after_vacuum(
    stack: Settings, service: QueryService, tmp_path: Path, point: str
) -> None:
    name = f"crash_{uuid.uuid4().hex[:8]}"
    place = f"s3://{stack.lake.data_bucket}/iceberg/{name}"
    run(
        service,
        f"CREATE TABLE {name} (id bigint, part string) PARTITIONED BY (part) "
        f"LOCATION '{place}' TBLPROPERTIES ('table_type'='ICEBERG')",
    )
    written(service, f"INSERT INTO {name} SELECT i, 'p' || CAST(i % 3 AS varchar) "
                     "FROM UNNEST(sequence(1, 300)) AS t(i)")  # fmt: skip
    catalog = iceberg_catalog(stack, metastore_uris(stack))
    snapshot = catalog.load_table(("default", name)).current_snapshot().snapshot_id
    before = files_under(local(stack, place))

    code = killed_writer(
        stack,
        tmp_path,
        f"INSERT INTO {name} SELECT i, 'p9' FROM UNNEST(sequence(1000, 1999)) AS t(i)",
        point,
    )

    assert code == -9  # killed where it was told to be
    left = files_under(local(stack, place)) - before
    assert any(p.suffix == ".parquet" for p in left)  # its data files are there, unnamed
    # Readable at its last snapshot, by lakeward and by another engine.
    assert catalog.load_table(("default", name)).current_snapshot().snapshot_id == snapshot
    assert run(service, f"SELECT count(*), sum(id) FROM {name}")[1] == [["300", "45150"]]
    # The next writer commits (a lock the dead writer held does not stop it).
    written(service, f"INSERT INTO {name} VALUES (5000, 'p5')")
    assert run(service, f"SELECT count(*) FROM {name}")[1] == [["301"]]
    # VACUUM removes what the dead writer left: every file no snapshot names.
    run(service, f"ALTER TABLE {name} SET TBLPROPERTIES ('vacuum_max_snapshot_age_seconds'='0')")
    run(service, f"VACUUM {name}")
    remaining = files_under(local(stack, place))
    assert not remaining & left
    assert run(service, f"SELECT count(*), max(id) FROM {name}")[1] == [["301", "5000"]]
