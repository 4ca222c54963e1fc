"""``lakeward serve`` with several workers: real processes, real HTTP, boto3 clients.

Each response names the worker process that answered (``X-Lakeward-Worker``), so
the tests can prove an execution crossed processes. The SQL needs no table (no
metastore is started): ``VALUES`` and recursive CTEs make results and slow queries.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import uvicorn
from botocore.config import Config
from botocore.exceptions import ClientError
from uvicorn.server import ServerState

from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.erasure.realtime.status import read_status
from lakeward.erasure.realtime.webhook import webhook_token
from lakeward.http.keeper import MAX_DELAY, STEADY, next_start
from lakeward.http.supervisor import WORKERS_FILE, Supervisor, read_workers
from lakeward.http.worker import (
    WORKER_HEADER,
    OneSendProtocol,
    close_after_unread_body,
    tag_responses,
)
from lakeward.process import free_port, is_running
from lakeward.stack import Stack, write_state
from tests.helpers import lakeward

KEY, SECRET = "LKWWORKERSTEST001", "workers-test-secret-0123"
SLOW = (
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 1000000000) "
    "SELECT count(*) FROM t"
)
ROWS_2500 = (
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 2500) "
    "SELECT n, 'row ' || CAST(n AS VARCHAR) AS label FROM t ORDER BY n"
)
DONE = ("SUCCEEDED", "FAILED", "CANCELLED")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    data_dir = tmp_path_factory.mktemp("workers")
    settings = load_settings(data_dir=data_dir, env={})
    settings = settings.model_copy(
        update={
            "api": settings.api.model_copy(
                update={"access_key_id": KEY, "secret_access_key": SECRET}
            ),
            "server": settings.server.model_copy(
                update={"port": free_port("127.0.0.1", 18950), "workers": 2}
            ),
        }
    )
    write_state(settings)
    stack = Stack(settings)
    stack.start_server()
    wait_for(lambda: all(w["state"] == "running" for w in read_workers(settings)), 120, "workers")
    wait_for(lambda: _supervisor_record(settings)["spare"], 120, "the spare")
    yield settings
    stack.server_process.stop()


def _supervisor_record(settings: Settings) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        (settings.data_dir / "run" / "server-workers.json").read_text()
    )
    return record


def wait_for(ready: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)


def athena(settings: Settings, key: str = KEY, secret: str = SECRET, retries: int = 0) -> Any:
    """A client of its own: its own connection, so the kernel may give it either worker.
    No retries unless asked: a test sees which worker answered each call."""
    return boto3.client(
        "athena",
        endpoint_url=f"http://127.0.0.1:{settings.server.port}",
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(
            retries={"max_attempts": retries, "mode": "standard"}
            if retries
            else {"max_attempts": 0},
            read_timeout=30,
        ),
    )


def worker_of(response: dict[str, Any]) -> int:
    return int(response["ResponseMetadata"]["HTTPHeaders"][WORKER_HEADER])


def client_on_another_worker(settings: Settings, not_pid: int) -> tuple[Any, int]:
    for _ in range(200):
        client = athena(settings)
        pid = worker_of(client.list_work_groups())
        if pid != not_pid:
            return client, pid
    raise AssertionError(f"200 new connections all went to worker {not_pid}")


def state_of(client: Any, execution_id: str) -> dict[str, Any]:
    response = client.get_query_execution(QueryExecutionId=execution_id)
    status: dict[str, Any] = response["QueryExecution"]["Status"]
    return status


def wait_done(client: Any, execution_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (status := state_of(client, execution_id))["State"] not in DONE:
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    return status


def test_an_execution_started_in_one_worker_is_paged_and_stopped_from_another(
    server: Settings,
) -> None:
    starter = athena(server)
    started = starter.start_query_execution(QueryString=ROWS_2500)
    runner = worker_of(started)
    other, other_pid = client_on_another_worker(server, runner)

    assert wait_done(other, started["QueryExecutionId"])["State"] == "SUCCEEDED"
    rows, token, pages = [], None, 0
    while True:
        kwargs = {"NextToken": token} if token else {}
        page = other.get_query_results(QueryExecutionId=started["QueryExecutionId"], **kwargs)
        assert worker_of(page) == other_pid  # every page from the process that did not run it
        rows += [[d.get("VarCharValue") for d in r["Data"]] for r in page["ResultSet"]["Rows"]]
        pages += 1
        token = page.get("NextToken")
        if not token:
            break
    assert pages == 3 and rows[0] == ["n", "label"]
    assert rows[1:] == [[str(n), f"row {n}"] for n in range(1, 2501)]

    slow = starter.start_query_execution(QueryString=SLOW)
    other, other_pid = client_on_another_worker(server, worker_of(slow))
    wait_for(lambda: state_of(other, slow["QueryExecutionId"])["State"] == "RUNNING", 60, "RUNNING")
    stopped = other.stop_query_execution(QueryExecutionId=slow["QueryExecutionId"])
    assert worker_of(stopped) == other_pid
    status = wait_done(other, slow["QueryExecutionId"], timeout=60)
    assert status["State"] == "CANCELLED" and status["StateChangeReason"] == "stopped by the user"
    with pytest.raises(ClientError, match="CANCELLED"):
        other.get_query_results(QueryExecutionId=slow["QueryExecutionId"])


def test_a_workgroups_limits_hold_across_workers(server: Settings) -> None:
    root = athena(server)
    root.create_work_group(
        Name="one-at-a-time",
        Configuration={"AdditionalConfiguration": '{"MaxConcurrent": 1, "MaxPerPrincipal": 2}'},
    )
    first = root.start_query_execution(QueryString=SLOW, WorkGroup="one-at-a-time")
    other, other_pid = client_on_another_worker(server, worker_of(first))
    running = first["QueryExecutionId"]
    wait_for(lambda: state_of(other, running)["State"] == "RUNNING", 60, "RUNNING")

    # The other worker has free engine slots of its own, yet its query waits for the
    # workgroup's one running query, which the first worker runs.
    second = other.start_query_execution(QueryString="SELECT 42", WorkGroup="one-at-a-time")
    assert worker_of(second) == other_pid
    for _ in range(3):  # each poll waits up to server.poll_wait_ms (1 s) for its end
        assert state_of(other, second["QueryExecutionId"])["State"] == "QUEUED"
    # The principal has two queries in the workgroup (one in each worker): a third is
    # refused, whichever worker is asked.
    for client in (root, other):
        with pytest.raises(client.exceptions.TooManyRequestsException) as refused:
            client.start_query_execution(QueryString="SELECT 1", WorkGroup="one-at-a-time")
        assert refused.value.response["Error"]["Message"] == (
            "root has 2 queries queued or running in WorkGroup one-at-a-time, its limit "
            "per principal (2); retry when one has finished"
        )

    root.stop_query_execution(QueryExecutionId=first["QueryExecutionId"])
    assert wait_done(root, first["QueryExecutionId"], timeout=60)["State"] == "CANCELLED"
    assert wait_done(other, second["QueryExecutionId"], timeout=60)["State"] == "SUCCEEDED"
    page = root.get_query_results(QueryExecutionId=second["QueryExecutionId"])
    assert [d.get("VarCharValue") for d in page["ResultSet"]["Rows"][1]["Data"]] == ["42"]


def test_a_policy_change_decides_the_very_next_request_in_every_worker(
    server: Settings,
) -> None:
    access = AccessControl(server)  # another process than the workers, as `lakeward iam` is
    allow = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "athena:GetWorkGroup", "Resource": "*"}],
    }
    access.principals.create_user("erin")
    access.principals.create_policy("ReadWorkGroups", json.dumps(allow))
    access.principals.attach_user_policy("erin", "ReadWorkGroups")
    key, secret = access.principals.create_access_key("erin")
    clients: dict[int, Any] = {}
    for _ in range(200):
        client = athena(server, key, secret)
        clients.setdefault(worker_of(client.get_work_group(WorkGroup="primary")), client)
        if len(clients) == 2:
            break
    assert len(clients) == 2, f"200 new connections all went to worker {list(clients)}"

    def answers() -> list[str]:
        outcomes = []
        for client in clients.values():
            try:
                client.get_work_group(WorkGroup="primary")
                outcomes.append("allowed")
            except client.exceptions.ClientError as error:
                outcomes.append(error.response["Error"]["Code"])
        return outcomes

    assert answers() + answers() == ["allowed"] * 4  # decided once, then from each cache
    access.principals.detach_user_policy("erin", "ReadWorkGroups")
    assert answers() == ["AccessDeniedException"] * 2
    access.principals.attach_user_policy("erin", "ReadWorkGroups")
    assert answers() == ["allowed"] * 2


def test_a_worker_killed_under_load_is_replaced_and_its_queries_fail_with_a_reason(
    server: Settings,
) -> None:
    before = {w["index"]: w for w in read_workers(server)}
    starter = athena(server)
    slow = starter.start_query_execution(QueryString=SLOW)
    victim = worker_of(slow)
    wait_for(lambda: state_of(starter, slow["QueryExecutionId"])["State"] == "RUNNING", 60, "run")

    stop = threading.Event()
    results: dict[int, dict[str, Any]] = {}

    def load(n: int) -> None:
        mine: dict[str, Any] = {"ok": 0, "ok_after_kill": 0, "errors": [], "ids": []}
        results[n] = mine
        client = athena(server)
        while not stop.is_set():
            try:
                started = client.start_query_execution(QueryString=f"SELECT {n} AS client")
                mine["ids"].append(started["QueryExecutionId"])
                status = wait_done(client, started["QueryExecutionId"], timeout=60)
                assert status["State"] == "SUCCEEDED", status
                page = client.get_query_results(QueryExecutionId=started["QueryExecutionId"])
                assert page["ResultSet"]["Rows"][1]["Data"][0]["VarCharValue"] == str(n)
            except ClientError:
                raise  # an answer that is an error: never expected, fail the test below
            except Exception as exc:  # the connection itself: the worker died under it
                mine["errors"].append(f"{type(exc).__name__}: {exc}")
                client = athena(server)
                continue
            mine["ok"] += 1
            if killed.is_set():
                mine["ok_after_kill"] += 1

    killed = threading.Event()
    threads = [threading.Thread(target=load, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    os.kill(victim, signal.SIGKILL)
    killed.set()
    wait_for(
        lambda: any(
            w["restarts"] == before[w["index"]]["restarts"] + 1 and w["pid"] != victim
            for w in read_workers(server)
        ),
        10,
        "the supervisor's restart",
    )
    status = wait_done(starter, slow["QueryExecutionId"], timeout=30)
    assert status["State"] == "FAILED"
    assert f"(pid {victim} on" in status["StateChangeReason"]
    assert "was killed by signal 9" in status["StateChangeReason"]
    time.sleep(5)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)

    for n, mine in results.items():
        assert mine["ok_after_kill"] > 0, (n, mine)
        # Only a call in flight on the killed worker may fail, and only on its connection.
        assert len(mine["errors"]) <= 1, (n, mine["errors"])
    restarted = {w["index"]: w for w in read_workers(server)}
    assert (
        sum(w["restarts"] for w in restarted.values())
        == sum(w["restarts"] for w in before.values()) + 1
    )
    assert all(w["state"] == "running" for w in restarted.values())
    status = lakeward("status", data_dir=server.data_dir).stdout
    assert "server worker 1" in status and "server worker 2" in status
    assert "restarts 1" in status and f"pid {victim}," not in status
    # Nothing is left RUNNING: every execution of the run has ended (a call that failed
    # in flight may have started one on the killed worker: it is failed with the others).
    ids = [slow["QueryExecutionId"], *(i for mine in results.values() for i in mine["ids"])]
    for chunk in range(0, len(ids), 50):
        found = starter.batch_get_query_execution(QueryExecutionIds=ids[chunk : chunk + 50])
        states = {e["QueryExecutionId"]: e["Status"]["State"] for e in found["QueryExecutions"]}
        assert [i for i in ids[chunk : chunk + 50] if states[i] not in DONE] == []


def test_the_background_services_run_once_for_all_workers(server: Settings) -> None:
    # A spare is made once every worker serves again (an earlier test killed one).
    wait_for(lambda: _supervisor_record(server)["spare"] is not None, 60, "the spare")
    supervisor = _supervisor_record(server)
    servers = [supervisor["supervisor"], *(w["pid"] for w in supervisor["workers"])]
    servers.append(supervisor["spare"])
    # The lake's watcher: one inotify instance, in the supervisor only.
    watching = [pid for pid in servers if _inotify_instances(pid)]
    assert watching == [supervisor["supervisor"]]

    # Webhook posts through different connections (so, in time, different workers)
    # all reach the one indexer, in the supervisor.
    token = webhook_token(AccessControl(server).secrets)
    before = _events_settled(server)
    answered_by: set[int] = set()
    posted = 0
    while len(answered_by) < 2:
        assert posted < 200, f"200 new connections all went to worker {answered_by}"
        key = f"nowhere/k{posted}"
        body = {
            "Records": [
                {
                    "eventVersion": "2.1",
                    "eventSource": "aws:s3",
                    "eventName": "ObjectCreated:Put",
                    "s3": {"bucket": {"name": "nowhere"}, "object": {"key": key, "size": 1}},
                }
            ]
        }
        response = httpx.post(
            f"http://127.0.0.1:{server.server.port}/events/s3",
            json=body,
            headers={"Authorization": f"Bearer {token}", "Connection": "close"},
        )
        assert response.status_code == 202, response.text
        answered_by.add(int(response.headers[WORKER_HEADER]))
        posted += 1

    def all_counted() -> bool:
        status = read_status(server.data_dir / "erasure" / "realtime.json")
        return status is not None and status.outcomes.get("events", 0) >= before + posted

    wait_for(all_counted, 30, "the indexer counting the events")
    status = read_status(server.data_dir / "erasure" / "realtime.json")
    assert status is not None and status.pid == supervisor["supervisor"]
    # Each once: none lost, none doubled.
    assert _events_settled(server) == before + posted


def _events_settled(settings: Settings) -> int:
    """The indexer's event count once it has not moved for 2 s (the watcher's own
    events of the earlier tests' result files included)."""
    seen, since = -1, time.monotonic()
    while time.monotonic() - since < 2:
        status = read_status(settings.data_dir / "erasure" / "realtime.json")
        count = status.outcomes.get("events", 0) if status else 0
        if count != seen:
            seen, since = count, time.monotonic()
        time.sleep(0.2)
    return seen


def _inotify_instances(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == "anon_inode:inotify":
                count += 1
        except OSError:
            continue
    return count


BACKGROUND_THREADS = {"erasure-worker", "erasure-indexer", "bi-refresh"}


def test_a_worker_application_runs_no_background_service(tmp_path: Path) -> None:
    """What keeps them once: a worker's application starts none of them (the
    supervisor does), while an application alone runs each once."""
    from fastapi.testclient import TestClient

    from lakeward.http import create_app
    from lakeward.http.relay import RelayClient

    settings = load_settings(data_dir=tmp_path, env={})
    settings = settings.model_copy(
        update={"erasure": settings.erasure.model_copy(update={"run_worker": True})}
    )

    def running() -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.name in BACKGROUND_THREADS)

    assert running() == []
    relay = RelayClient("\0lakeward-test-nobody", b"key")
    with TestClient(create_app(settings, process="test:1:w1", relay=relay)):
        assert running() == []
    with TestClient(create_app(settings)):
        assert running() == sorted(BACKGROUND_THREADS)
    wait_for(lambda: running() == [], 30, "the background threads to stop")


def test_a_stopping_supervisor_leaves_a_newer_supervisors_workers_file(tmp_path: Path) -> None:
    """A restart can start the next supervisor before the last one has finished
    stopping: the one stopping removes the workers file only if it wrote it."""
    settings = load_settings(data_dir=tmp_path / "data", env={})
    stopping = Supervisor(settings, free_port("127.0.0.1", 19950))
    stopping._write()
    assert read_workers(settings) == []  # no worker yet, but the file is the stopping one's
    newer = {"supervisor": os.getpid() + 1, "port": 1, "workers": [{"index": 1, "pid": 2}]}
    (settings.data_dir / "run" / WORKERS_FILE).write_text(json.dumps(newer))
    stopping._forget()
    assert read_workers(settings) == newer["workers"]
    stopping._write()
    stopping._forget()
    assert not (settings.data_dir / "run" / WORKERS_FILE).exists()


def test_the_server_comes_back_by_itself_when_its_supervisor_is_killed(server: Settings) -> None:
    """The keeper restarts a killed supervisor on the same socket; its workers serve
    until the new supervisor's do, so no call goes unanswered, and a query started just
    before the kill finishes. (Last in the module: it replaces every worker.)"""
    before = _supervisor_record(server)
    client = athena(server)
    old_workers = {w["pid"] for w in before["workers"]}
    running = client.start_query_execution(QueryString=ROWS_2500)["QueryExecutionId"]
    os.kill(before["supervisor"], signal.SIGKILL)
    killed = time.monotonic()
    answered_by = []
    # Each call on a connection of its own and without retries: every one is answered.
    while (worker := worker_of(athena(server).list_work_groups())) in old_workers:
        answered_by.append(worker)
        assert time.monotonic() - killed < 60, "no new worker answered within 60 s"
    back = time.monotonic() - killed
    print(f"\nold workers answered {len(answered_by)} calls; a new one {back:.2f} s after")
    assert answered_by, "the old workers stopped serving at once"
    assert wait_done(client, running)["State"] == "SUCCEEDED"
    wait_for(
        lambda: (
            _supervisor_record(server)["supervisor"] != before["supervisor"]
            and all(w["state"] == "running" for w in read_workers(server))
        ),
        120,
        "a new supervisor's workers",
    )
    # Queries run again, from a client whose connection the old workers had.
    started = client.start_query_execution(QueryString="SELECT 40 + 2")["QueryExecutionId"]
    assert wait_done(client, started)["State"] == "SUCCEEDED"
    assert client.get_query_results(QueryExecutionId=started)["ResultSet"]["Rows"][1] == {
        "Data": [{"VarCharValue": "42"}]
    }


def test_a_taken_port_is_named_when_the_server_starts(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        failed = lakeward("serve", "--port", str(port), data_dir=tmp_path / "data", check=False)
    assert failed.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in failed.stderr
    assert "server.port" in failed.stderr and "Traceback" not in failed.stderr


def test_a_supervisor_that_served_is_replaced_at_once_one_failing_to_start_ever_later() -> None:
    # Killed after it served, however often: no wait, and no crash loop counted.
    assert next_start(5, served=True, lived=2.0) == (0, 0.0)
    # Dying before it serves: 0.1 s, then twice as long each time, up to MAX_DELAY.
    waits = []
    failures = 0
    for _ in range(12):
        failures, delay = next_start(failures, served=False, lived=1.0)
        waits.append(delay)
    assert waits[:4] == [0.1, 0.2, 0.4, 0.8] and waits[-1] == MAX_DELAY
    # One that lived long before it died starts the count again.
    assert next_start(7, served=False, lived=STEADY + 1) == (1, 0.1)


def test_a_response_head_leaves_only_with_its_body() -> None:
    """Killed between a response's head and its body, a worker must send neither: botocore
    reads a head with no body as an empty answer (``KeyError: 'QueryExecution'``)."""
    sent: list[str] = []
    seen_before_body: list[list[str]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(0.01)  # the moment a kill would fall in
        seen_before_body.append(list(sent))
        await send({"type": "http.response.body", "body": b"{}"})

    async def record(message: Any) -> None:
        sent.append(message["type"])

    asyncio.run(tag_responses(app, 42)({"type": "http"}, None, record))
    assert seen_before_body == [[]]
    assert sent == ["http.response.start", "http.response.body"]


class _Wire:
    """A connection's transport that records each write it is asked to send."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sends.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def test_a_response_leaves_in_one_send() -> None:
    """uvicorn writes a head and its body apart; a worker killed between the two sends,
    as happens on a busy machine, would leave the client a head without its body."""
    body = json.dumps({"QueryExecution": {"Status": {"State": "SUCCEEDED"}}}).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        length = (b"content-length", str(len(body)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [length]})
        await asyncio.sleep(0.01)  # the application is slow to give its body
        await send({"type": "http.response.body", "body": body})

    async def serve_one() -> _Wire:
        config = uvicorn.Config(tag_responses(app, 42), http=OneSendProtocol, lifespan="off")
        config.load()
        protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=ServerState(), app_state={}
        )
        wire = _Wire()
        protocol.connection_made(wire)
        protocol.data_received(b"POST / HTTP/1.1\r\nHost: lakeward\r\nContent-Length: 0\r\n\r\n")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if wire.sends:
                break
        await asyncio.sleep(0.05)
        protocol.connection_lost(None)
        return wire

    wire = asyncio.run(serve_one())
    assert len(wire.sends) == 1, wire.sends
    assert wire.sends[0].startswith(b"HTTP/1.1 200") and wire.sends[0].endswith(body)


ORPHAN_LAUNCHER = """
import json, os, socket, subprocess, sys
listener = socket.create_server(("127.0.0.1", 0))
listener.set_inheritable(True)
worker = subprocess.Popen([sys.executable, "-m", "lakeward.http.worker"],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, pass_fds=[listener.fileno()])
config = json.loads(sys.argv[1]) | {"supervisor": os.getpid(), "fd": listener.fileno()}
worker.stdin.write(json.dumps(config).encode() + b"\\nserve\\n")
worker.stdin.flush()
print(worker.pid, flush=True)
os._exit(0)  # dies before the worker, still loading, could ask to die with it
"""


def test_a_worker_whose_supervisor_died_before_it_started_does_not_serve_on(
    tmp_path: Path,
) -> None:
    """A supervisor killed right after starting a worker (and telling it to serve) left it
    serving for good: the worker took init for its supervisor and never handed over."""
    import subprocess
    import sys

    settings = load_settings(data_dir=tmp_path, env={})
    config = {
        "data_dir": str(tmp_path),
        "settings": settings.to_raw(),
        "process": "test:1:w1",
        "relay": "\0lakeward-test-nobody",
        "key": b"key".hex(),
    }
    launched = subprocess.run(
        [sys.executable, "-c", ORPHAN_LAUNCHER, json.dumps(config)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    pid = int(launched.stdout)
    try:
        # Before the fix it built its application and served on the socket for good.
        wait_for(lambda: not is_running(pid), 60, f"the orphaned worker {pid} to go")
    finally:
        if is_running(pid):
            os.kill(pid, signal.SIGKILL)


def test_an_orphaned_worker_whose_shutdown_hangs_exits_after_its_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hour's soak found a worker whose supervisor died still running 30 minutes on:
    told to stop, its shutdown waited on something that never ended."""
    from lakeward.http import worker

    class Hanging:  # a uvicorn.Server told to stop that never does
        should_exit = False

    exits: list[int] = []
    monkeypatch.setattr(worker, "STOP_GRACE", 0.2)
    monkeypatch.setattr(worker.os, "_exit", exits.append)
    settings = load_settings(data_dir=tmp_path, env={})
    server = Hanging()
    not_its_parent = os.getppid() + 1_000_000  # its supervisor is gone from the start
    started = time.monotonic()
    worker.hand_over_when_orphaned(server, settings, not_its_parent)  # type: ignore[arg-type]
    assert server.should_exit and exits == [1]
    assert time.monotonic() - started >= 0.2


def test_a_put_refused_before_its_body_was_read_leaves_the_connection_usable() -> None:
    """botocore sends S3 bodies after "Expect: 100-continue" and, refused before the body
    was asked for, never sends it; the hour's soak then saw the client's next request on
    that connection read as the refused one's body, and a bare 400 "Bad Request"."""
    import boto3
    from botocore.config import Config

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        xml = b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>"
        if scope["method"] == "PUT":  # refused from its head alone
            status, body = 403, xml
        else:
            status, body = 200, b"the object"
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    port = free_port("127.0.0.1", 19620)
    config = uvicorn.Config(
        tag_responses(close_after_unread_body(app), 42), host="127.0.0.1", port=port,
        http=OneSendProtocol, lifespan="off", log_level="warning",
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 10, "the test server to start")
        s3 = boto3.client(
            "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
            aws_access_key_id="k", aws_secret_access_key="s",
            config=Config(retries={"max_attempts": 1}, read_timeout=5,
                          s3={"addressing_style": "path"}),
        )  # fmt: skip
        for _ in range(3):
            with pytest.raises(ClientError, match="AccessDenied") as refused:
                s3.put_object(Bucket="b", Key="k", Body=os.urandom(300 * 1024))
            # Kept open, the connection's next request was read as the unsent body: the
            # call stalled until the client gave up on it (or was answered a bare 400).
            headers = refused.value.response["ResponseMetadata"]["HTTPHeaders"]
            assert headers.get("connection") == "close"
            got = s3.get_object(Bucket="b", Key="k")["Body"].read()
            assert got == b"the object"
    finally:
        server.should_exit = True
        thread.join(10)
