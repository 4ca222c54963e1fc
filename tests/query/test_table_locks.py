"""The table locks of writes (one file per table ever written): removed once none holds
them, without two writers ever holding the same table's lock at once."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from typing import Any

import pytest

from lakeward.access.audit import AuditLog
from lakeward.config import Settings, load_settings
from lakeward.http.background import tidy
from lakeward.query import journal
from lakeward.query.journal import sweep_table_locks, table_lock


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path / "data", env={})


def lock_files(settings: Settings) -> list[Path]:
    return sorted((settings.data_dir / "run" / "table-locks").glob("*.lock"))


def taken_elsewhere(path: Path) -> bool:
    """Whether another holder has ``path``'s lock (a non-blocking try fails)."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_the_locks_none_holds_are_swept_and_a_held_one_stays(settings: Settings) -> None:
    for n in range(5):
        with table_lock(settings, f"s3://lakeward-data/tables/t{n}/", shared=False):
            pass
    assert len(lock_files(settings)) == 5
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with table_lock(settings, "s3://lakeward-data/tables/t0/", shared=False):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(10)
    try:
        assert sweep_table_locks(settings) == 4
        (kept,) = lock_files(settings)
        assert taken_elsewhere(kept)
    finally:
        release.set()
        thread.join()
    with AuditLog(settings.data_dir / "audit.db") as audit:
        tidy(settings, audit)  # the server's periodic pass sweeps them
    assert lock_files(settings) == []


def test_a_writer_whose_lock_file_was_swept_while_it_waited_takes_the_new_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is removed between the writer opening it and locking it: the lock it then
    gets is of a file no one else will ever open, so it must take the one now there."""
    location = "s3://lakeward-data/tables/raced/"
    with table_lock(settings, location, shared=False):
        pass
    opened: list[str] = []

    def open_then_swept(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = open(path, mode, *args, **kwargs)  # noqa: SIM115 - the caller closes it
        if not opened:
            opened.append(str(path))
            assert sweep_table_locks(settings) == 1  # no one holds it yet
        return handle

    monkeypatch.setattr(journal, "open", open_then_swept, raising=False)
    with table_lock(settings, location, shared=False):
        (present,) = lock_files(settings)
        assert str(present) == opened[0]  # made again at the same path
        assert taken_elsewhere(present)  # and it is the file this writer holds
