"""The audit log, on SQLite and on PostgreSQL.

The PostgreSQL runs use a throwaway database on 127.0.0.1:5432 (user postgres,
trust auth), one schema per test; they skip without a server, and fail under
CI=true.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError

from lakeward.access.audit import GENESIS, AuditLog, AuditRecord
from lakeward.access.audit_tables import audit_log
from lakeward.errors import InvalidRequest

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# -- backends ---------------------------------------------------------------


@pytest.fixture
def log(db: str | Path) -> Iterator[AuditLog]:
    with AuditLog(db) as opened:
        yield opened


def record(n: int = 0, **changes: object) -> AuditRecord:
    values: dict[str, object] = {
        "time": T0 + timedelta(minutes=n),
        "principal": "arn:lakeward:iam:::user/alice",
        "action": "athena:StartQueryExecution",
        "resource": "arn:lakeward:athena:::workgroup/primary",
        "decision": "allowed",
        "statement": "AllowQueries",
        "request_id": f"req-{n}",
        "source": "athena-api",
    }
    values.update(changes)
    return AuditRecord(**values)  # type: ignore[arg-type]


def sql(log: AuditLog, statement: str) -> None:
    """Run SQL straight on the database, as someone with the sqlite3 CLI or psql would."""
    with log.engine.begin() as conn:
        conn.execute(text(statement))


def drop_triggers(log: AuditLog) -> None:
    if log.engine.dialect.name == "sqlite":
        sql(log, "DROP TRIGGER audit_log_no_update")
        sql(log, "DROP TRIGGER audit_log_no_delete")
    else:
        sql(log, "DROP TRIGGER audit_log_no_change ON audit_log")


# -- append and query -------------------------------------------------------


def test_append_and_query_round_trip(log: AuditLog) -> None:
    appended = record(0, statement=None, request_id=None)
    log.append(appended)
    [found] = log.query()
    assert found == appended
    assert found.id == 1
    assert found.time == T0
    assert found.time.tzinfo is not None


def test_query_filters(log: AuditLog) -> None:
    log.append(record(0))
    log.append(record(1, principal="bob", decision="implicitDeny", statement=None))
    log.append(record(2, principal="bob", decision="explicitDeny", statement="DenyAll"))
    log.append(record(3, action="athena:GetQueryResults"))
    log.append(record(4, principal="bob", decision="allowed", source="cli"))

    def ids(**filters: object) -> list[str | None]:
        return [r.request_id for r in log.query(**filters)]  # type: ignore[arg-type]

    assert ids() == ["req-0", "req-1", "req-2", "req-3", "req-4"]  # newest last
    assert ids(principal="bob") == ["req-1", "req-2", "req-4"]
    assert ids(decision="explicitDeny") == ["req-2"]
    assert ids(principal="bob", decision="allowed") == ["req-4"]
    assert ids(action="athena:GetQueryResults") == ["req-3"]
    assert ids(since=T0 + timedelta(minutes=2)) == ["req-2", "req-3", "req-4"]
    assert ids(until=T0 + timedelta(minutes=2)) == ["req-0", "req-1"]
    # The same instant in another zone selects the same records.
    cet = timezone(timedelta(hours=1))
    assert ids(since=(T0 + timedelta(minutes=3)).astimezone(cet)) == ["req-3", "req-4"]
    assert ids(limit=2) == ["req-3", "req-4"]  # the newest two, still oldest first


def test_query_refuses_bad_arguments(log: AuditLog) -> None:
    with pytest.raises(InvalidRequest, match="limit"):
        log.query(limit=0)
    with pytest.raises(InvalidRequest, match="decision must be one of"):
        log.query(decision="maybe")
    with pytest.raises(InvalidRequest, match="since must be a timezone-aware datetime"):
        log.query(since=datetime(2026, 1, 1))


def test_records_are_checked_before_they_are_queued() -> None:
    with pytest.raises(ValueError, match="decision 'deny' is not one of"):
        record(decision="deny")
    with pytest.raises(ValueError, match="time must be a timezone-aware datetime"):
        record(time=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="principal must be a str"):
        record(principal=None)
    assert record(time=datetime(2026, 1, 1, 13, tzinfo=timezone(timedelta(hours=1)))).time == (
        datetime(2026, 1, 1, 12, tzinfo=UTC)
    )


def test_nul_characters_do_not_keep_a_record_out(log: AuditLog) -> None:
    log.append(record(resource="arn:x\x00y"))
    [found] = log.query()
    assert found.resource == "arn:x\ufffdy"
    assert log.verify().ok


def test_commits_do_not_wait_for_the_disk(log: AuditLog) -> None:
    with log.engine.connect() as conn:
        if log.engine.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        else:
            assert conn.execute(text("SHOW synchronous_commit")).scalar() == "off"


# -- append-only ------------------------------------------------------------


def test_update_and_delete_are_refused_by_the_database(log: AuditLog) -> None:
    log.append(record(0))
    log.append(record(1))
    with pytest.raises(DBAPIError, match="append-only: UPDATE refused"):
        sql(log, "UPDATE audit_log SET decision = 'allowed', principal = 'nobody' WHERE id = 1")
    with pytest.raises(DBAPIError, match="append-only: DELETE refused"):
        sql(log, "DELETE FROM audit_log WHERE id = 2")
    with pytest.raises(DBAPIError, match="append-only: DELETE refused"):
        sql(log, "DELETE FROM audit_log")
    if log.engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError, match="append-only: TRUNCATE refused"):
            sql(log, "TRUNCATE audit_log")
    assert [r.principal for r in log.query()] == [record().principal] * 2
    assert log.verify().ok


def test_reopening_puts_dropped_triggers_back(db: str | Path) -> None:
    with AuditLog(db) as first:
        first.append(record(0))
        drop_triggers(first)
    with AuditLog(db) as again, pytest.raises(DBAPIError, match="append-only"):
        sql(again, "DELETE FROM audit_log")


# -- the hash chain ---------------------------------------------------------


def test_verify_an_empty_and_an_untouched_log(log: AuditLog) -> None:
    result = log.verify()
    assert (result.ok, result.checked, result.first_bad_id, result.head) == (True, 0, None, GENESIS)
    for n in range(20):
        log.append(record(n))
    result = log.verify()
    assert (result.ok, result.checked, result.first_bad_id) == (True, 20, None)
    assert result.head != GENESIS


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE audit_log SET decision = 'allowed' WHERE id = 3",
        "UPDATE audit_log SET principal = 'arn:lakeward:iam:::user/mallory' WHERE id = 3",
        "UPDATE audit_log SET statement = NULL WHERE id = 3",
        "UPDATE audit_log SET id = 30 WHERE id = 3",
    ],
)
def test_verify_finds_a_row_changed_behind_its_back(log: AuditLog, change: str) -> None:
    for n in range(6):
        log.append(record(n, decision="explicitDeny" if n == 2 else "allowed"))
    drop_triggers(log)
    sql(log, change)
    result = log.verify()
    assert (result.ok, result.first_bad_id) == (False, 3 if "id = 30" not in change else 4)


def test_verify_finds_a_changed_time(log: AuditLog) -> None:
    for n in range(4):
        log.append(record(n))
    drop_triggers(log)
    with log.engine.begin() as conn:
        conn.execute(audit_log.update().where(audit_log.c.id == 2).values(time=T0))
    assert log.verify().first_bad_id == 2


def test_verify_finds_a_deleted_row(log: AuditLog) -> None:
    for n in range(5):
        log.append(record(n))
    drop_triggers(log)
    sql(log, "DELETE FROM audit_log WHERE id = 3")
    result = log.verify()
    assert (result.ok, result.checked, result.first_bad_id) == (False, 3, 4)


def test_the_chain_goes_on_after_reopening(db: str | Path) -> None:
    with AuditLog(db) as first:
        first.append(record(0))
        first.append(record(1))
    with AuditLog(db) as again:
        again.append(record(2))
        assert again.verify().ok
        assert [r.id for r in again.query()] == [1, 2, 3]


# -- concurrency ------------------------------------------------------------


def test_eight_threads_appending_keep_the_chain_valid(log: AuditLog) -> None:
    per_thread = 60
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(per_thread):
                log.append(record(n, principal=f"user-{worker}"))
        except BaseException as e:  # reported below, from the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    result = log.verify()
    assert (result.ok, result.checked) == (True, 8 * per_thread)
    with log.engine.connect() as conn:
        assert conn.execute(select(func.max(audit_log.c.id))).scalar() == 8 * per_thread
    for worker in range(8):
        found = log.query(principal=f"user-{worker}")
        assert [r.request_id for r in found] == [f"req-{n}" for n in range(per_thread)]


def test_two_logs_on_one_database_share_the_chain(db: str | Path) -> None:
    # Two AuditLog objects stand for two processes: each caches a chain head
    # the other makes stale.
    with AuditLog(db) as one, AuditLog(db) as two:
        errors: list[BaseException] = []

        def work(log: AuditLog, who: str) -> None:
            try:
                for n in range(40):
                    log.append(record(n, principal=who))
            except BaseException as e:  # reported below, from the main thread
                errors.append(e)

        threads = [
            threading.Thread(target=work, args=(log, who))
            for log, who in [(one, "a"), (two, "b"), (one, "c"), (two, "d")]
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        result = one.verify()
        assert (result.ok, result.checked) == (True, 160)


def test_a_record_its_full_disk_turns_away_refuses_the_call_and_breaks_nothing(
    tmp_path: Path,
) -> None:
    """SQLite's own cap on the database's pages stands in for a full disk: the same
    SQLITE_FULL ("database or disk is full"). The call is refused as unavailable, with
    the cause, not as an internal error; the records before it stay whole and chained,
    and once there is room again the log takes records as before."""
    from sqlalchemy import event

    from lakeward.errors import Unavailable

    with AuditLog(tmp_path / "audit.db") as log:
        log.append(record(0))
        pages = int(log.engine.connect().execute(text("PRAGMA page_count")).scalar_one())
        cap = {"pages": pages + 2}

        def capped(dbapi_connection: object, _record: object) -> None:
            dbapi_connection.execute(f"PRAGMA max_page_count = {cap['pages']}")  # type: ignore[attr-defined]

        event.listen(log.engine, "connect", capped)
        log.engine.dispose()
        with pytest.raises(Unavailable, match=r"database or disk is full.*not done"):
            for n in range(1, 2_000):
                log.append(record(n, resource="arn:" + "x" * 2_000))
        kept = log.query(limit=10_000)
        assert log.verify().ok
        cap["pages"] = 1_000_000
        log.engine.dispose()
        log.append(record(5_000))
        assert [r.request_id for r in log.query(limit=10_000)] == [
            *(r.request_id for r in kept),
            "req-5000",
        ]
        assert log.verify().ok
