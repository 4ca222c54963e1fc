"""lakeward's metastore client against a real metastore, its nodes failing on cue.

Each test puts fresh TCP proxies ("nodes", tests/metastore/proxy.py) in front
of one real Thrift Hive Metastore and kills one at the moment that matters:
between calls, after a mutation reached the metastore but before its answer
came back, or when a mutation's request arrives. The client must answer every
call, apply every mutation exactly once, and never report a failure for a
mutation that took.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.errors import MetastoreError, TableNotFound
from lakeward.metastore.client import MetastoreClient
from lakeward.metastore.tables import Column, PartitionInfo, TableInfo
from lakeward.metastore.uris import metastore_uris
from lakeward.process import free_port
from tests.helpers import lakeward, need_java
from tests.metastore.proxy import Fault, NodeProxy

pytestmark = pytest.mark.spark  # a real metastore JVM

DB = "chaos_client"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """One real metastore (Derby) for the module; the proxies stand in for its nodes."""
    need_java()
    data_dir = tmp_path_factory.mktemp("client") / "data"
    env = {"LAKEWARD_METASTORE__PORT": str(free_port("127.0.0.1", 19600))}
    lakeward("metastore", "start", data_dir=data_dir, env=env, timeout=300)
    settings = load_settings(data_dir=data_dir, env={})
    uri = metastore_uris(settings)[0]
    host, port = uri.removeprefix("thrift://").rsplit(":", 1)
    with MetastoreClient([uri]) as client:
        client.create_database(DB, (data_dir / "lake" / DB).as_uri())
    yield host, int(port)
    lakeward("down", data_dir=data_dir, check=False, timeout=120)


@pytest.fixture
def nodes(upstream: tuple[str, int]) -> Iterator[list[NodeProxy]]:
    proxies = [NodeProxy(upstream) for _ in range(3)]
    yield proxies
    for proxy in proxies:
        proxy.kill()


def client_of(nodes: list[NodeProxy], **options: float) -> MetastoreClient:
    options = {"timeout": 10.0, "retry_delay": 0.1, **options}
    return MetastoreClient([n.uri for n in nodes], **options)  # type: ignore[arg-type]


def a_table(tmp_path: Path, name: str, version: str = "1") -> TableInfo:
    return TableInfo(
        database=DB,
        name=name,
        location=(tmp_path / name / f"v{version}").as_uri(),
        columns=[Column("country", "string"), Column("confirmed", "bigint")],
        partition_keys=[Column("day", "string")],
        parameters={"lakeward.run_id": f"run-{version}"},
    )


def test_reads_move_on_when_the_node_in_use_dies(nodes: list[NodeProxy], tmp_path: Path) -> None:
    with client_of(nodes) as client:
        client.put_external_table(a_table(tmp_path, "reads"))
        assert client.current_uri == nodes[0].uri
        nodes[0].kill()  # its pooled connection is now dead too
        assert client.table(DB, "reads").columns[0].name == "country"
        assert DB in client.databases()
        assert client.current_uri == nodes[1].uri


def test_the_live_node_is_shared_by_every_client_and_thread(
    nodes: list[NodeProxy], tmp_path: Path
) -> None:
    first, second, _ = nodes
    with client_of(nodes) as client:
        client.put_external_table(a_table(tmp_path, "sticky"))
    first.kill()
    with client_of(nodes) as client:
        assert client.table(DB, "sticky").name == "sticky"  # found the dead node, moved on
    # The clients above are closed, and with them the spares the first one opened on its
    # standby (the second node) in the background, replaying its reads: from here on only
    # the client below calls the second node (its own spares go to the third).
    second_calls = second.calls["get_table"]

    def read(_: int) -> tuple[str, str | None]:
        return other.table(DB, "sticky").name, other.answered_by

    with client_of(nodes) as other, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(read, range(200)))
    # A new client went straight to the node that answered last, for every one of its
    # calls, from every thread: each was answered there, and none was made twice.
    assert answers == [("sticky", second.uri)] * 200
    assert second.calls["get_table"] == second_calls + 200


def test_an_unreachable_node_costs_the_connect_timeout_not_the_call_timeout(
    nodes: list[NodeProxy],
) -> None:
    # A listener that never accepts, its backlog full: connecting to it hangs, as to a
    # host that is down.
    blackhole = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = blackhole.getsockname()[1]
    fillers = [socket.socket() for _ in range(4)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
    try:
        uris = [f"thrift://127.0.0.1:{port}", nodes[0].uri]
        call_timeout = 60.0
        with MetastoreClient(uris, timeout=call_timeout, connect_timeout=0.5) as client:
            started = time.monotonic()
            assert DB in client.databases()
            waited = time.monotonic() - started
        assert waited < call_timeout / 2, "the connect waited for the call timeout"
    finally:
        for sock in [*fillers, blackhole]:
            sock.close()


def test_a_read_with_no_answer_in_time_is_repeated_on_the_next_node(
    nodes: list[NodeProxy], tmp_path: Path
) -> None:
    with client_of(nodes, timeout=1.0) as client:
        client.put_external_table(a_table(tmp_path, "hung"))
        nodes[0].fail_on("get_table", "hang")
        assert client.table(DB, "hung").name == "hung"
        assert client.answered_by == nodes[1].uri


@pytest.mark.parametrize("fault", ["lose_reply", "lose_request", "hang"])
def test_a_create_table_whose_answer_is_lost_is_checked_not_repeated(
    nodes: list[NodeProxy], tmp_path: Path, fault: Fault
) -> None:
    table = a_table(tmp_path, f"created_{fault}")
    nodes[0].fail_on("create_table", fault)
    with client_of(nodes, timeout=1.0) as client:
        client.put_external_table(table)  # no error: it took, once
        stored = client.table(DB, table.name)
    assert stored.parameters["lakeward.run_id"] == "run-1"
    assert stored.location.endswith(f"{table.name}/v1")
    applied_by_first = fault != "lose_request"
    # The next node was asked whether the table exists, and created it only if not.
    assert nodes[1].calls["create_table"] == (0 if applied_by_first else 1)


@pytest.mark.parametrize("fault", ["lose_reply", "lose_request"])
def test_an_alter_table_whose_answer_is_lost_is_checked_not_repeated(
    nodes: list[NodeProxy], tmp_path: Path, fault: Fault
) -> None:
    name = f"altered_{fault}"
    with client_of(nodes) as client:
        client.put_external_table(a_table(tmp_path, name, "1"))
        nodes[0].fail_on("alter_table", fault)
        client.put_external_table(a_table(tmp_path, name, "2"))
        stored = client.table(DB, name)
    assert stored.location.endswith(f"{name}/v2")
    assert stored.parameters["lakeward.run_id"] == "run-2"
    assert nodes[1].calls["alter_table"] == (0 if fault == "lose_reply" else 1)


@pytest.mark.parametrize("fault", ["lose_reply", "lose_request"])
def test_a_drop_table_whose_answer_is_lost_is_checked_not_repeated(
    nodes: list[NodeProxy], tmp_path: Path, fault: Fault
) -> None:
    name = f"dropped_{fault}"
    with client_of(nodes) as client:
        client.put_external_table(a_table(tmp_path, name))
        nodes[0].fail_on("drop_table", fault)
        client.drop_table(DB, name)  # repeated blindly, it would fail: no such table
        assert not client.table_exists(DB, name)
        with pytest.raises(TableNotFound):
            client.drop_table(DB, name)
    assert nodes[1].calls["drop_table"] == (1 if fault == "lose_reply" else 2)


@pytest.mark.parametrize("fault", ["lose_reply", "lose_request"])
def test_add_partitions_whose_answer_is_lost_is_checked_not_repeated(
    nodes: list[NodeProxy], tmp_path: Path, fault: Fault
) -> None:
    name = f"partitioned_{fault}"
    table = a_table(tmp_path, name)
    days = [
        PartitionInfo([day], f"{table.location}/day={day}") for day in ("2020-03-01", "2020-03-02")
    ]
    with client_of(nodes) as client:
        client.put_external_table(table)
        nodes[0].fail_on("add_partitions", fault)
        client.add_partitions(DB, name, days)  # repeated blindly: "partition exists"
        stored = client.partitions(DB, name)
    assert sorted(p.values[0] for p in stored) == ["2020-03-01", "2020-03-02"]
    assert all(p.location.endswith(f"/day={p.values[0]}") for p in stored)
    assert nodes[1].calls["add_partitions"] == (0 if fault == "lose_reply" else 1)


@pytest.mark.parametrize("fault", ["lose_reply", "lose_request"])
def test_create_and_drop_database_whose_answer_is_lost(
    nodes: list[NodeProxy], tmp_path: Path, fault: Fault
) -> None:
    name = f"db_{fault}"
    with client_of(nodes) as client:
        nodes[0].fail_on("create_database", fault)
        client.create_database(name, (tmp_path / name).as_uri())
        assert name in client.databases()
        nodes[1].fail_on("drop_database", fault)
        client.drop_database(name)
        assert name not in client.databases()
    assert nodes[1].calls["create_database"] == (0 if fault == "lose_reply" else 1)
    assert nodes[2].calls["drop_database"] == (0 if fault == "lose_reply" else 1)


def test_a_mutation_in_doubt_with_every_node_down_says_so(
    nodes: list[NodeProxy], tmp_path: Path
) -> None:
    nodes[0].fail_on("create_table", "lose_reply")
    nodes[1].kill()
    nodes[2].kill()
    with (
        client_of(nodes, rounds=1) as client,
        pytest.raises(MetastoreError, match="create_table was sent and may have been applied"),
    ):
        client.put_external_table(a_table(tmp_path, "in_doubt"))


def test_errors_of_the_metastore_itself_are_not_retried(nodes: list[NodeProxy]) -> None:
    with client_of(nodes) as client:
        with pytest.raises(TableNotFound, match=f"{DB}.missing does not exist"):
            client.table(DB, "missing")
        with pytest.raises(TableNotFound):
            client.drop_table(DB, "missing")
    assert nodes[0].calls["get_table"] == 1 and nodes[0].calls["drop_table"] == 1
    assert nodes[1].calls["get_table"] == 0 and nodes[1].calls["drop_table"] == 0


def test_a_busy_client_keeps_warm_spares_on_the_next_node(
    nodes: list[NodeProxy], tmp_path: Path
) -> None:
    with client_of(nodes) as client, ThreadPoolExecutor(4) as pool:
        client.put_external_table(a_table(tmp_path, "spares"))
        barrier = threading.Barrier(4)

        def read(_: int) -> str:
            barrier.wait()  # four calls at once: four connections to the first node
            return client.table(DB, "spares").name

        assert list(pool.map(read, range(4))) == ["spares"] * 4
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            t.name == "metastore-spares" for t in threading.enumerate()
        ):
            time.sleep(0.05)  # the spares are opened in the background
        spares = nodes[1].accepted
        assert spares == 4 and nodes[2].accepted == 0
        nodes[0].kill()
        assert list(pool.map(lambda _: client.table(DB, "spares").name, range(4))) == ["spares"] * 4
        assert nodes[1].calls["get_table"] >= 1
    # The failover used the spares; opening new connections to the next node had no part in it.
    assert nodes[1].accepted == spares


def test_the_metadata_cache_serves_reads_and_forgets_a_changed_table(
    nodes: list[NodeProxy], tmp_path: Path
) -> None:
    with client_of(nodes, cache=True) as cached, client_of(nodes) as writer:
        writer.put_external_table(a_table(tmp_path, "cached", "1"))
        before = nodes[0].calls["get_table"]
        for _ in range(50):
            assert cached.table(DB, "cached").location.endswith("/v1")
        assert nodes[0].calls["get_table"] == before + 1  # one load, 49 hits
        # Another client in this process re-points the table: the cache forgets it.
        writer.put_external_table(a_table(tmp_path, "cached", "2"))
        assert cached.table(DB, "cached").location.endswith("/v2")
        assert "cached" in cached.tables(DB)
        cached.invalidate()
        nodes[0].kill()  # a hit needs no node; a miss fails over
        assert cached.table(DB, "cached").location.endswith("/v2")


def test_the_cache_forgets_exactly_what_another_metastore_client_changed(
    upstream: tuple[str, int], tmp_path: Path
) -> None:
    # The writer is a client of its own URI list (its own process, as far as the
    # cache can tell): only the metastore's change log tells the reader.
    reader_nodes = [NodeProxy(upstream)]
    host, port = upstream
    try:
        with (
            client_of(reader_nodes, cache=True) as cached,
            MetastoreClient([f"thrift://{host}:{port}"]) as writer,
        ):
            writer.put_external_table(a_table(tmp_path, "moved", "1"))
            writer.put_external_table(a_table(tmp_path, "steady", "1"))
            assert cached.table(DB, "moved").location.endswith("/v1")
            assert cached.table(DB, "steady").location.endswith("/v1")
            loads = reader_nodes[0].calls["get_table"]

            writer.put_external_table(a_table(tmp_path, "moved", "2"))
            assert cached.table(DB, "moved").location.endswith("/v2")  # no wait, no invalidate()
            assert cached.table(DB, "steady").location.endswith("/v1")
            assert reader_nodes[0].calls["get_table"] == loads + 1  # only the changed table

            writer.drop_table(DB, "moved")
            with pytest.raises(TableNotFound):
                cached.table(DB, "moved")
            assert "moved" not in cached.tables(DB)
            assert reader_nodes[0].calls["get_table"] == loads + 2
            assert cached.table(DB, "steady").location.endswith("/v1")
            assert reader_nodes[0].calls["get_table"] == loads + 2
    finally:
        reader_nodes[0].kill()


def test_concurrent_changes_each_get_a_number_of_their_own(
    upstream: tuple[str, int], tmp_path: Path
) -> None:
    from pymetastore.hive_metastore import ttypes as hive

    host, port = upstream
    uri = f"thrift://{host}:{port}"
    with MetastoreClient([uri]) as client:
        first = client._failover.read("get_current_notificationEventId").eventId

    def change(index: int) -> None:
        with MetastoreClient([uri]) as writer:  # a connection each: changes run side by side
            for version in ("1", "2"):
                writer.put_external_table(a_table(tmp_path, f"race_{index}", version))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(change, range(8)))
    with MetastoreClient([uri]) as client:
        request = hive.NotificationEventRequest(lastEvent=first, maxEvents=1000)
        events = client._failover.read("get_next_notification", request).events
        last = client._failover.read("get_current_notificationEventId").eventId
    ours = [e for e in events if (e.tableName or "").startswith("race_")]
    assert sorted((e.tableName, e.eventType) for e in ours) == sorted(
        (f"race_{i}", kind) for i in range(8) for kind in ("CREATE_TABLE", "ALTER_TABLE")
    )
    ids = [e.eventId for e in events]
    assert ids == list(range(first + 1, last + 1))  # unique, no gap


def test_many_threads_through_a_kill_lose_nothing(nodes: list[NodeProxy], tmp_path: Path) -> None:
    with client_of(nodes) as client:
        client.put_external_table(a_table(tmp_path, "threads"))
        errors: list[BaseException] = []
        done = threading.Event()

        def work() -> int:
            calls = 0
            while not done.is_set():
                try:
                    client.table(DB, "threads")
                    client.partitions(DB, "threads")
                except BaseException as exc:
                    errors.append(exc)
                calls += 2
            return calls

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(work) for _ in range(8)]
            time.sleep(0.5)
            nodes[0].kill()
            time.sleep(0.5)
            done.set()
            total = sum(f.result() for f in futures)
    assert errors == []
    assert total > 0 and nodes[1].calls["get_table"] > 0
