"""A poll of a query running in the answering process waits, up to server.poll_wait_ms, for
its end: a client polling on a timer learns of the end at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.query.model import QueryState
from lakeward.query.service import QueryService
from tests.query.support import wait


def _service(tmp_path: Path, poll_wait_ms: int) -> QueryService:
    settings = load_settings(
        data_dir=tmp_path / "data", overrides={"server.poll_wait_ms": poll_wait_ms}, env={}
    )
    Path(settings.data_dir).mkdir(parents=True)
    return QueryService(settings)


@pytest.fixture
def held() -> Iterator[threading.Event]:
    """Set to let the held queries of a test go on."""
    release = threading.Event()
    yield release
    release.set()


def _hold_queries(service: QueryService, release: threading.Event) -> None:
    """Each query waits for ``release`` before its statement runs."""
    real = service._result

    def held_result(*args: object) -> object:
        assert release.wait(60)
        return real(*args)  # type: ignore[arg-type]

    service._result = held_result  # type: ignore[method-assign]


def test_a_poll_answers_when_the_query_ends(tmp_path: Path, held: threading.Event) -> None:
    service = _service(tmp_path, poll_wait_ms=20_000)
    try:
        _hold_queries(service, held)
        execution_id = service.start_query_execution("SELECT 41 + 1 AS answer")
        threading.Timer(0.2, held.set).start()
        # One poll, made while the query was held, is enough to see it end.
        execution = service.get_query_execution(execution_id)
        assert execution.state == QueryState.SUCCEEDED
        assert service.get_query_results(execution_id).rows == [["answer"], ["42"]]
    finally:
        service.close()


def test_a_poll_of_a_query_still_running_answers_after_the_wait(
    tmp_path: Path, held: threading.Event
) -> None:
    service = _service(tmp_path, poll_wait_ms=50)
    try:
        _hold_queries(service, held)
        execution_id = service.start_query_execution("SELECT 1 AS one")
        # Held for up to a minute: the poll answers before, with the state it has.
        assert not service.get_query_execution(execution_id).state.done
        held.set()
        assert wait(service, execution_id).state == QueryState.SUCCEEDED
    finally:
        service.close()


def test_no_wait_answers_at_once_as_athena_does(tmp_path: Path, held: threading.Event) -> None:
    service = _service(tmp_path, poll_wait_ms=0)
    try:
        _hold_queries(service, held)
        execution_id = service.start_query_execution("SELECT 1 AS one")
        threading.Timer(2, held.set).start()
        # The query ends two seconds on; the poll did not wait for it.
        assert not service.get_query_execution(execution_id).state.done
        assert wait(service, execution_id).state == QueryState.SUCCEEDED
    finally:
        service.close()


def test_polls_beyond_the_waiting_ones_answer_at_once(
    tmp_path: Path, held: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lakeward.query.service.POLL_WAITERS", 1)
    service = _service(tmp_path, poll_wait_ms=20_000)
    try:
        _hold_queries(service, held)
        execution_id = service.start_query_execution("SELECT 1 AS one")
        with service._poll_waits:  # as a poll waiting for another query holds it
            # Held for a minute and the poll would wait 20 s: it answered, so it did not.
            assert not service.get_query_execution(execution_id).state.done
        held.set()
        assert service.get_query_execution(execution_id).state == QueryState.SUCCEEDED
    finally:
        service.close()
