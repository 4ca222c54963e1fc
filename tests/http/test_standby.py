"""``server.standby``: a supervisor with its workers built waits beside the serving one,
and takes over at once when the serving supervisor and all its workers are killed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import Settings, load_settings
from lakeward.http.supervisor import read_record, read_workers
from lakeward.process import children, free_port, is_running
from lakeward.stack import Stack, write_state
from tests.http.test_workers import KEY, SECRET, athena, wait_done, wait_for, worker_of


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Settings]:
    settings = load_settings(data_dir=tmp_path / "data", env={})
    settings = settings.model_copy(
        update={
            "api": settings.api.model_copy(
                update={"access_key_id": KEY, "secret_access_key": SECRET}
            ),
            "server": settings.server.model_copy(
                update={"port": free_port("127.0.0.1", 18970), "workers": 1, "standby": True}
            ),
        }
    )
    write_state(settings)
    stack = Stack(settings)
    stack.start_server()
    yield settings
    stack.server_process.stop()


def standby_of(settings: Settings) -> tuple[int, set[int]]:
    """The standby supervisor's pid and its built workers' pids, once there are some."""
    keeper = Stack(settings).server_process.pid()
    assert keeper is not None
    found: list[tuple[int, set[int]]] = []

    def ready() -> bool:
        serving = read_record(settings).get("supervisor")
        for pid in set(children(keeper)) - {serving}:
            if workers := set(children(pid)):
                found.append((pid, workers))
                return True
        return False

    wait_for(ready, 120, "a standby supervisor with its workers")
    return found[-1]


def test_the_standby_takes_over_when_the_server_is_killed(server: Settings) -> None:
    wait_for(lambda: all(w["state"] == "running" for w in read_workers(server)), 120, "workers")
    before = read_record(server)
    standby, standby_workers = standby_of(server)
    # Its workers are built: they wait, and serve nothing while the supervisor lives.
    for _ in range(20):
        assert worker_of(athena(server).list_work_groups()) not in standby_workers

    victims = [before["supervisor"], *(w["pid"] for w in before["workers"]), before["spare"]]
    for pid in filter(None, victims):
        os.kill(pid, signal.SIGKILL)
    client = athena(server, retries=10)
    answered = worker_of(client.list_work_groups())
    # The standby's workers answer: none had to be started and loaded after the kill.
    assert answered in standby_workers
    started = client.start_query_execution(QueryString="SELECT 40 + 2")["QueryExecutionId"]
    assert wait_done(client, started)["State"] == "SUCCEEDED"
    wait_for(lambda: read_record(server).get("supervisor") == standby, 60, "the standby's record")
    assert {w["pid"] for w in read_workers(server)} == standby_workers

    # Another standby is built for the next time.
    second, _ = standby_of(server)
    assert second not in (standby, before["supervisor"])

    # Stopping the server stops both supervisors and every worker.
    every = {standby, second, *standby_workers, *children(second)}
    keeper = Stack(server).server_process.pid()
    Stack(server).server_process.stop()
    deadline = time.monotonic() + 30
    while any(is_running(pid) for pid in every) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in every if is_running(pid)] == []
    assert keeper is not None and not is_running(keeper)
