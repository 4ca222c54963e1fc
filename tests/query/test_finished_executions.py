"""A finished execution is in the state database before any poll reports it finished."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path

import pytest

from lakeward.config import load_settings
from lakeward.query.model import QueryExecution, QueryState
from lakeward.query.service import QueryService
from tests.query.support import wait


def test_a_poll_sees_succeeded_only_once_the_state_database_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(data_dir=tmp_path / "data", env={})
    Path(settings.data_dir).mkdir(parents=True)
    service = QueryService(settings)
    polled_when_saved: list[QueryState] = []
    save = service.store.save_execution

    def save_and_poll(execution: QueryExecution) -> None:
        if execution.state.done:  # what a client polling this process sees meanwhile
            polled_when_saved.append(service.get_query_execution(execution.id).state)
        save(execution)

    monkeypatch.setattr(service.store, "save_execution", save_and_poll)
    try:
        execution_id = service.start_query_execution("SELECT 1 AS one")
        deadline = time.monotonic() + 60
        while not service.get_query_execution(execution_id).state.done:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        finished = service.store.execution(execution_id)
        assert finished is not None and finished.state == QueryState.SUCCEEDED
        # Result reuse and other processes read the database: a client told SUCCEEDED
        # must find it there.
        assert polled_when_saved == [QueryState.RUNNING]
    finally:
        service.close()


def test_a_query_the_full_disk_fails_names_it_and_logs_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(data_dir=tmp_path / "data", env={})
    Path(settings.data_dir).mkdir(parents=True)
    service = QueryService(settings)

    def disk_full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lakeward.query.results.write_results", disk_full)
    try:
        with caplog.at_level(logging.WARNING, logger="lakeward.query.service"):
            execution = wait(service, service.start_query_execution("SELECT 1 AS one"))
        assert execution.state == QueryState.FAILED
        assert "No space left on device" in (execution.state_change_reason or "")
        (record,) = [r for r in caplog.records if r.name == "lakeward.query.service"]
        assert record.levelno == logging.WARNING and not record.exc_info
        assert execution.id in record.getMessage()
    finally:
        service.close()
