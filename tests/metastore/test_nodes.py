"""Three metastore nodes over one PostgreSQL or MariaDB database.

Every node goes through the full start (server check, schema under the
database lock, launcher, health over Thrift), three at the same moment, on a
database of its own that is dropped afterwards.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pymetastore.hive_metastore import ttypes as hive

from lakeward.config import Settings, load_settings
from lakeward.metastore import MetastoreClient
from lakeward.metastore.backends import load_backend
from lakeward.metastore.backends.server import ServerBackend
from lakeward.metastore.node import MetastoreNode
from lakeward.metastore.uris import metastore_uris
from lakeward.stack import Stack, pin_settings
from tests.helpers import IN_CI, fresh_database, lakeward, need, need_java
from tests.metastore.conftest import ENGINES, metastore_env

pytestmark = pytest.mark.spark  # Java: the metastore runs on the JVM

NODES = 3
SIOCGIFADDR = 0x8915


@dataclass
class Cluster:
    engine: str
    settings: Settings
    schema_creations: int
    start_errors: list[BaseException]

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir


CHANGE_LOG_RETENTION = 15  # seconds: short, so that the pruning test sees it work


def stack_settings(data_dir: Path, engine: str, url: str, nodes: int = NODES) -> Settings:
    env = {
        **metastore_env(engine, url, nodes),
        "LAKEWARD_METASTORE__CHANGE_LOG_RETENTION": str(CHANGE_LOG_RETENTION),
    }
    return pin_settings(load_settings(data_dir=data_dir, env=env))


@pytest.fixture(scope="module", params=ENGINES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three nodes started by three threads at the same moment on a fresh database."""
    need_java()
    engine: str = request.param
    with fresh_database(engine) as url, pytest.MonkeyPatch.context() as patch:
        settings = stack_settings(tmp_path_factory.mktemp(engine) / "data", engine, url)
        creations: list[int] = []
        real_create = ServerBackend.create_schema

        def counting_create(self: ServerBackend, java: Path) -> None:
            creations.append(1)
            real_create(self, java)

        patch.setattr(ServerBackend, "create_schema", counting_create)
        barrier = threading.Barrier(NODES)
        errors: list[BaseException] = []

        def start(index: int) -> None:
            node = MetastoreNode(settings, index)
            barrier.wait()
            try:
                node.start()
            except BaseException as exc:  # reported by the test, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(i,)) for i in range(1, NODES + 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        patch.undo()
        yield Cluster(engine, settings, len(creations), errors)
        for node in Stack(settings).metastore_nodes():
            node.stop()


def test_three_nodes_start_at_once_over_one_schema(cluster: Cluster) -> None:
    assert cluster.start_errors == []
    assert cluster.schema_creations == 1
    statuses = [node.status() for node in Stack(cluster.settings).metastore_nodes()]
    assert [s.healthy for s in statuses] == [True] * NODES
    assert len({s.uri for s in statuses}) == NODES
    # Exactly one VERSION row, the one Hive's tools look for.
    backend = load_backend(cluster.settings)
    assert isinstance(backend, ServerBackend)
    with backend.connection() as connection:
        cursor = connection.cursor()
        cursor.execute(f"SELECT {backend.quote('SCHEMA_VERSION')} FROM {backend.quote('VERSION')}")
        assert [tuple(row) for row in cursor.fetchall()] == [("2.3.0",)]
        # DataNucleus' id table exists before any node inserts (nodes would race to make it).
        cursor.execute(f"SELECT COUNT(*) FROM {backend.quote('SEQUENCE_TABLE')}")
    # The command shows every node healthy.
    result = lakeward("metastore", "status", data_dir=cluster.data_dir)
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ metastore-")]
    assert len(rows) == NODES and all("│ yes " in row for row in rows)


def test_every_node_writes_at_the_same_moment_and_sees_all(cluster: Cluster) -> None:
    uris = metastore_uris(cluster.settings)
    lake = cluster.data_dir / "lake"
    barrier = threading.Barrier(len(uris))
    errors: list[BaseException] = []

    def create(index: int, uri: str) -> None:
        with MetastoreClient([uri]) as client:
            barrier.wait()
            try:
                client.create_database(f"at_once_{index}", (lake / f"at_once_{index}").as_uri())
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=create, args=(i, u)) for i, u in enumerate(uris)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    expected = {f"at_once_{i}" for i in range(len(uris))}
    for uri in uris:
        with MetastoreClient([uri]) as client:
            assert expected <= set(client.databases())


def test_heal_restarts_a_killed_node(cluster: Cluster) -> None:
    node = MetastoreNode(cluster.settings, 2)
    pid = node.process.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while node.process.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    status = lakeward("metastore", "status", data_dir=cluster.data_dir, check=False)
    assert status.returncode == 1
    result = lakeward("metastore", "heal", data_dir=cluster.data_dir, timeout=300)
    assert "restarted: metastore-2" in result.stdout
    new_pid = node.process.pid()
    assert new_pid is not None and new_pid != pid
    with MetastoreClient([node.uri], rounds=1) as client:
        assert "default" in client.databases()
    assert lakeward("metastore", "status", data_dir=cluster.data_dir).returncode == 0
    again = lakeward("metastore", "heal", data_dir=cluster.data_dir)
    assert "every node is healthy" in again.stdout


def test_a_node_that_dies_while_awaited_is_started_afresh(cluster: Cluster) -> None:
    """A heal that finds a node running but silent waits for it; if the node dies
    meanwhile (killed again, as under chaos), the heal starts it rather than failing."""
    node = MetastoreNode(cluster.settings, 2)
    pid = node.process.pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # running, but it answers nothing
    killer = threading.Timer(3.0, os.kill, args=(pid, signal.SIGKILL))
    killer.start()
    try:
        assert node.launch() is True  # found dead after the wait: launched again
        node.wait_ready()
    finally:
        killer.cancel()
    new_pid = node.process.pid()
    assert new_pid is not None and new_pid != pid
    with MetastoreClient([node.uri], rounds=1) as client:
        assert "default" in client.databases()


def test_the_change_log_is_pruned_past_its_retention(cluster: Cluster, tmp_path: Path) -> None:
    uris = metastore_uris(cluster.settings)
    everything = hive.NotificationEventRequest(lastEvent=0, maxEvents=1_000_000)
    with MetastoreClient(uris) as client:
        client.create_database("pruned_later", (tmp_path / "pruned_later").as_uri())

        def logged() -> set[str]:
            return {e.dbName for e in client.raw_read("get_next_notification", everything).events}

        assert "pruned_later" in logged()
        current = client.raw_read("get_current_notificationEventId").eventId
        deadline = time.monotonic() + CHANGE_LOG_RETENTION + 45
        while "pruned_later" in logged():
            assert time.monotonic() < deadline, "the change log was not pruned"
            time.sleep(1)
        # Pruning removes events, never the count: a client that looked before sees a gap.
        assert client.raw_read("get_current_notificationEventId").eventId >= current
        assert "pruned_later" in client.databases()


def test_failover_pins_clients_to_a_node(cluster: Cluster) -> None:
    before = metastore_uris(load_settings(data_dir=cluster.data_dir, env={}))
    assert before == [
        f"thrift://127.0.0.1:{cluster.settings.metastore.port + i}" for i in range(NODES)
    ]
    result = lakeward("metastore", "failover", "--node", "3", data_dir=cluster.data_dir)
    assert before[2] in result.stdout
    after = metastore_uris(load_settings(data_dir=cluster.data_dir, env={}))
    assert after[0] == before[2] and sorted(after) == sorted(before)
    status = lakeward("metastore", "status", data_dir=cluster.data_dir)
    rows = [line for line in status.stdout.splitlines() if line.startswith("│ metastore-")]
    preferred = [row.split("│")[1].strip() for row in rows if row.count("│ yes ") == 2]
    assert preferred == ["metastore-3"]
    wrong = lakeward("metastore", "failover", "--node", "4", data_dir=cluster.data_dir, check=False)
    assert wrong.returncode == 2 and "--node" in wrong.stderr and "Traceback" not in wrong.stderr
    lakeward("metastore", "failover", "--node", "1", data_dir=cluster.data_dir)
    assert metastore_uris(load_settings(data_dir=cluster.data_dir, env={})) == before


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine outside 127.0.0.0/8, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:  # no IPv4 address on this interface
                continue
            address = socket.inet_ntoa(answer[20:24])
            if not address.startswith("127."):
                return address
    return None


def test_nodes_listen_on_loopback_only(cluster: Cluster) -> None:
    address = non_loopback_ipv4()
    if address is None and not IN_CI:
        pytest.skip("this machine has no IPv4 address besides loopback")
    need(address is not None, "the machine has a non-loopback IPv4 address")
    assert address is not None
    for node in Stack(cluster.settings).metastore_nodes():
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, node.port), timeout=5).close()
        socket.create_connection(("127.0.0.1", node.port), timeout=5).close()
        with MetastoreClient([f"thrift://{address}:{node.port}"], timeout=2, rounds=1) as client:
            assert not client.ping()


def test_iceberg_commits_lock_through_any_node(cluster: Cluster) -> None:
    """Iceberg's HiveCatalog commits under a metastore lock: writers on different nodes
    at the same moment each land their snapshot, none lost, and no lock is left held."""
    import pyarrow as pa
    from pyiceberg.catalog.hive import HiveCatalog
    from pyiceberg.exceptions import CommitFailedException

    uris = metastore_uris(cluster.settings)
    catalogs = [HiveCatalog(f"node{i}", uri=uri) for i, uri in enumerate(uris)]
    location = (cluster.data_dir / "lake" / "iceberg_locks").as_uri()
    schema = pa.schema([pa.field("writer", pa.int64())])
    catalogs[0].create_table("default.iceberg_locks", schema, location=location)
    barrier = threading.Barrier(len(catalogs))
    errors: list[BaseException] = []

    def append(index: int) -> None:
        table = catalogs[index].load_table("default.iceberg_locks")
        barrier.wait()
        for _ in range(20):  # a writer that lost the race re-reads and tries again
            try:
                table.append(pa.table({"writer": [index]}, schema=schema))
                return
            except CommitFailedException:
                table = catalogs[index].load_table("default.iceberg_locks")
            except BaseException as exc:
                errors.append(exc)
                return
        errors.append(AssertionError(f"writer {index} never committed"))

    threads = [threading.Thread(target=append, args=(i,)) for i in range(len(catalogs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    table = catalogs[1].load_table("default.iceberg_locks")
    assert sorted(table.scan().to_arrow()["writer"].to_pylist()) == list(range(len(catalogs)))
    assert len(table.snapshots()) == len(catalogs)
    backend = load_backend(cluster.settings)
    assert isinstance(backend, ServerBackend)
    with backend.connection() as connection:
        cursor = connection.cursor()
        cursor.execute("SELECT COUNT(*) FROM HIVE_LOCKS")
        assert cursor.fetchone()[0] == 0
