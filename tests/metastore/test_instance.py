"""The metastore on a managed database instance (``lakeward db``), made by the stack itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import Settings, load_settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.uris import metastore_uris
from lakeward.stack import Stack
from tests.databases.conftest import db_data_dir  # noqa: F401  (a fixture)
from tests.helpers import lakeward, need_java
from tests.metastore.conftest import free_ports

pytestmark = pytest.mark.spark


@pytest.fixture
def instance_stack(db_data_dir: Path) -> Iterator[Path]:  # noqa: F811
    """A stack whose nodes stop before its instances are deleted (by ``db_data_dir``)."""
    need_java()
    yield db_data_dir
    for node in Stack(load_settings(data_dir=db_data_dir, env={})).metastore_nodes():
        node.stop()


def test_a_server_backend_without_url_gets_its_own_instance(instance_stack: Path) -> None:
    env = {
        "LAKEWARD_METASTORE__BACKEND": "postgres",
        "LAKEWARD_METASTORE__HEAP": "384m",
        "LAKEWARD_METASTORE__PORT": str(free_ports(2)),
    }
    lakeward("metastore", "start", "--nodes", "2", data_dir=instance_stack, env=env, timeout=600)
    settings: Settings = load_settings(data_dir=instance_stack, env={})
    assert settings.metastore.instance == "metastore" and settings.metastore.url is None
    described = lakeward("db", "describe", "metastore", data_dir=instance_stack)
    assert "available" in described.stdout and "postgres" in described.stdout
    uris = metastore_uris(settings)
    assert len(uris) == 2
    with MetastoreClient(uris[1:]) as client:
        client.create_database("on_instance", (instance_stack / "lake" / "x").as_uri())
    with MetastoreClient(uris[:1]) as client:
        assert "on_instance" in client.databases()
    # The password of the instance's master user is in no file a node reads except
    # hive-site.xml, which only its owner may read.
    site = instance_stack / "metastore" / "conf" / "hive-site.xml"
    assert site.stat().st_mode & 0o077 == 0
