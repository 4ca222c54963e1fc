"""Fixtures the SQL service's tests share.

- ``memory_service``: a QueryService whose catalog ``mem`` is an in-memory catalog, with
  real storage, engines, journal and access control (a user ``analyst`` and the
  administrator's principal ``root``): statement logic runs end to end without Java.
- ``service`` and ``metastore``: the SQL service and a metastore client over the session's
  stack (the real metastore, Spark workgroups ``big``; ``duck`` is DuckDB's).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeward.access.arns import catalog_arn, s3_arn, workgroup_arn
from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.query.catalogs import URIS_PARAMETER
from lakeward.query.catalogs.memory import InMemoryCatalog
from lakeward.query.model import DataCatalog, WorkGroup
from lakeward.query.service import QueryService
from tests.helpers import over_stack
from tests.query.support import MEMORY


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.fixture
def memory_service(tmp_path: Path) -> Iterator[QueryService]:
    settings = load_settings(data_dir=tmp_path / "data", env={})
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    (Path(settings.data_dir) / "lake" / settings.lake.data_bucket).mkdir(parents=True)
    access = AccessControl(settings)
    bucket = settings.lake.data_bucket
    access.principals.create_policy(
        "Analyst",
        policy(
            {"Effect": "Allow", "Action": "athena:*", "Resource": workgroup_arn("*")},
            {"Effect": "Allow", "Action": "lakeward:UseCatalog", "Resource": catalog_arn("*")},
            {"Effect": "Allow", "Action": "glue:*", "Resource": "*"},
            {"Effect": "Allow", "Action": "s3:*", "Resource": s3_arn(bucket, "*")},
            # The data of the table `secret` is not the analyst's to read.
            {"Effect": "Deny", "Action": "s3:GetObject", "Resource": s3_arn(bucket, "secret/*")},
        ),
    )
    access.principals.create_user("analyst")
    access.principals.attach_user_policy("analyst", "Analyst")
    catalog = InMemoryCatalog()
    service = QueryService(settings, access=access, catalog_loader=lambda _: catalog)
    service.store.put_catalog(
        DataCatalog(MEMORY, "HIVE", "in memory", {URIS_PARAMETER: "thrift://127.0.0.1:1"})
    )
    yield service
    service.close()


@pytest.fixture(scope="module")
def service(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueryService]:
    service = QueryService(over_stack(stack, tmp_path_factory.mktemp("svc")), owner=True)
    service.put_work_group(WorkGroup(name="duck", engine="duckdb"))
    service.put_work_group(WorkGroup(name="big", engine="spark"))
    yield service
    service.close()


@pytest.fixture(scope="module")
def metastore(stack: Settings) -> Iterator[MetastoreClient]:
    with MetastoreClient(metastore_uris(stack)) as client:
        yield client
