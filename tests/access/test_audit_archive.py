"""The audit log's sealed archive segments, on SQLite and on PostgreSQL: the log's
old records leave the database for files whose chain ``verify`` still checks."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from lakeward.access import audit
from lakeward.access.audit import GENESIS, AuditLog
from lakeward.access.audit_tables import audit_log, audit_segments
from lakeward.errors import InvalidRequest, StorageError
from tests.access.test_audit import T0, drop_triggers, record, sql
from tests.helpers import lakeward

NOW = T0 + timedelta(days=100)  # records n minutes after T0 are all 100 days old


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return tmp_path / "audit-archive"


@pytest.fixture
def log(db: str | Path, archive: Path) -> Iterator[AuditLog]:
    with AuditLog(db, archive=archive) as opened:
        yield opened


def rows_in_table(log: AuditLog) -> list[int]:
    with log.engine.connect() as conn:
        return list(conn.execute(select(audit_log.c.id).order_by(audit_log.c.id)).scalars())


def lines_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]


def test_old_records_move_to_a_segment_and_the_chain_still_verifies(
    log: AuditLog, archive: Path
) -> None:
    for n in range(10):
        log.append(record(n))
    before = log.verify()
    # Records 0-5 are older than 100 days less 6 minutes; 6-9 are not.
    (segment,) = log.seal(timedelta(days=100, minutes=-6), now=NOW)
    assert (segment.first_id, segment.last_id, segment.records) == (1, 6, 6)
    assert (segment.prev_hash, segment.name) == (
        GENESIS,
        "audit-000000000001-000000000006.jsonl.gz",
    )
    assert rows_in_table(log) == [7, 8, 9, 10]
    assert [r.request_id for r in log.query()] == [f"req-{n}" for n in range(6, 10)]
    # The file holds the records as they were, each with its hash.
    lines = lines_of(archive / segment.name)
    assert [line["request_id"] for line in lines] == [f"req-{n}" for n in range(6)]
    assert segment.sha256 == hashlib.sha256((archive / segment.name).read_bytes()).hexdigest()
    assert not list(archive.glob(".*"))  # no partial file left beside it
    after = log.verify()
    assert (after.ok, after.checked, after.head) == (True, 10, before.head)
    # The chain goes on: new records, a second segment chained onto the first.
    log.append(record(10))
    (second,) = log.seal(timedelta(days=100, minutes=-9), now=NOW)
    assert (second.first_id, second.last_id, second.prev_hash) == (7, 9, segment.last_hash)
    assert [s.name for s in log.segments()] == [segment.name, second.name]
    assert log.verify().ok and log.verify().checked == 11
    assert log.seal(timedelta(days=100, minutes=-9), now=NOW) == []  # nothing more is due


def test_a_long_stretch_is_sealed_in_segments_of_a_bounded_size(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "SEGMENT_RECORDS", 3)
    for n in range(8):
        log.append(record(n))
    sealed = log.seal(timedelta(days=100, minutes=-7), now=NOW)
    assert [(s.first_id, s.last_id) for s in sealed] == [(1, 3), (4, 6), (7, 7)]
    assert [s.prev_hash for s in sealed[1:]] == [s.last_hash for s in sealed[:-1]]
    assert rows_in_table(log) == [8] and log.verify().ok


def test_unsealed_records_and_segment_rows_cannot_be_removed(log: AuditLog) -> None:
    for n in range(4):
        log.append(record(n))
    log.seal(timedelta(days=100, minutes=-2), now=NOW)
    with pytest.raises(DBAPIError, match="append-only: DELETE refused"):
        sql(log, "DELETE FROM audit_log WHERE id = 3")
    with pytest.raises(DBAPIError, match="append-only: UPDATE refused"):
        sql(log, "UPDATE audit_segments SET last_id = 4")
    with pytest.raises(DBAPIError, match="append-only: DELETE refused"):
        sql(log, "DELETE FROM audit_segments")
    assert rows_in_table(log) == [3, 4]
    assert log.verify().ok


def test_verify_names_a_changed_a_missing_and_a_forged_segment(
    log: AuditLog, archive: Path
) -> None:
    for n in range(6):
        log.append(record(n))
    first, second = log.seal(timedelta(days=100, minutes=-2), now=NOW) + log.seal(
        timedelta(days=100, minutes=-4), now=NOW
    )
    path = archive / first.name
    original = path.read_bytes()

    path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    result = log.verify()
    assert (result.ok, result.first_bad_id) == (False, 1)
    assert result.problem and first.name in result.problem and "not the file" in result.problem

    path.unlink()
    result = log.verify()
    assert not result.ok and result.problem and "cannot be read" in result.problem

    # A record changed in the file, with the file's hash in the database changed to
    # match (the triggers dropped): the chain breaks at that record.
    lines = lines_of(archive / second.name)
    lines[1]["decision"] = "allowed" if lines[1]["decision"] != "allowed" else "explicitDeny"
    forged = gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    (archive / second.name).write_bytes(forged)
    path.write_bytes(original)
    drop_triggers(log)
    with log.engine.begin() as conn:
        if log.engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER audit_segments_no_update"))
        else:
            conn.execute(text("DROP TRIGGER audit_segments_no_change ON audit_segments"))
        conn.execute(
            audit_segments.update()
            .where(audit_segments.c.first_id == second.first_id)
            .values(sha256=hashlib.sha256(forged).hexdigest())
        )
    result = log.verify()
    assert (result.ok, result.first_bad_id, result.checked) == (False, 4, 4)


def test_sealing_refuses_records_whose_chain_is_broken(log: AuditLog, archive: Path) -> None:
    for n in range(4):
        log.append(record(n))
    drop_triggers(log)
    sql(log, "UPDATE audit_log SET decision = 'explicitDeny' WHERE id = 2")
    with pytest.raises(StorageError, match="record 2 does not fit its chain; nothing was sealed"):
        log.seal(timedelta(days=1), now=NOW)
    assert log.segments() == [] and rows_in_table(log) == [1, 2, 3, 4]
    assert not archive.exists() or not list(archive.iterdir())


def test_a_file_left_by_an_interrupted_seal_is_replaced(log: AuditLog, archive: Path) -> None:
    for n in range(3):
        log.append(record(n))
    archive.mkdir()
    name = "audit-000000000001-000000000003.jsonl.gz"
    (archive / name).write_bytes(b"what a seal killed before its commit left")
    (segment,) = log.seal(timedelta(days=1), now=NOW)
    assert segment.name == name and log.verify().ok
    assert len(lines_of(archive / name)) == 3


def test_sealing_needs_an_archive_directory(db: str | Path) -> None:
    with AuditLog(db) as log, pytest.raises(InvalidRequest, match="no archive directory"):
        log.seal(timedelta(days=1))


def test_a_log_made_before_segments_can_be_sealed(tmp_path: Path, archive: Path) -> None:
    """A SQLite log of the first schema (its DELETE trigger refusing every row) is
    migrated when opened: its old records can then be sealed, the others not deleted."""
    path = tmp_path / "audit.db"
    with AuditLog(path) as first:
        for n in range(3):
            first.append(record(n))
        with first.engine.begin() as conn:
            conn.execute(text("DROP TABLE audit_segments"))
            conn.execute(text("DROP TRIGGER audit_log_no_delete"))
            conn.execute(
                text(
                    "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN "
                    "SELECT RAISE(ABORT, 'the audit log is append-only: DELETE refused'); END"
                )
            )
            conn.execute(text("UPDATE schema_version SET version = 1 WHERE component = 'audit'"))
    with AuditLog(path, archive=archive) as log:
        (segment,) = log.seal(timedelta(days=100, minutes=-2), now=NOW)
        assert (segment.first_id, segment.last_id) == (1, 2)
        with pytest.raises(DBAPIError, match="append-only: DELETE refused"):
            sql(log, "DELETE FROM audit_log")
        assert log.verify().ok and log.verify().checked == 3


# -- the server's pass and the command --------------------------------------


def test_the_servers_pass_seals_what_the_setting_says(tmp_path: Path) -> None:
    from lakeward.access.control import AccessControl
    from lakeward.config import load_settings
    from lakeward.http.background import tidy

    data_dir = tmp_path / "data"
    env = {"LAKEWARD_ACCESS__AUDIT_KEEP_DAYS": "30"}
    settings = load_settings(data_dir=data_dir, env=env)
    access = AccessControl(settings)
    now = datetime.now(UTC)
    for days in (45, 31, 29, 1):
        access.audit.append(record(days, time=now - timedelta(days=days)))
    tidy(settings, access.audit)
    (segment,) = access.audit.segments()
    assert segment.records == 2
    assert [r.request_id for r in access.audit.query()] == ["req-29", "req-1"]
    assert (data_dir / "access" / "audit-archive" / segment.name).is_file()
    # 0 keeps every record in the database.
    kept = load_settings(data_dir=data_dir, env={"LAKEWARD_ACCESS__AUDIT_KEEP_DAYS": "0"})
    tidy(kept, access.audit)
    assert len(access.audit.segments()) == 1
    access.audit.close()


def test_the_command_seals_and_verifies_for_whoever_may(tmp_path: Path) -> None:
    from lakeward.access.control import AccessControl
    from lakeward.config import load_settings

    data_dir = tmp_path / "data"
    access = AccessControl(load_settings(data_dir=data_dir, env={}))
    access.principals.create_user("reader")
    access.principals.create_policy(
        "read-audit",
        {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "audit:Query", "Resource": "arn:lakeward:audit:::log"},
        ]},
    )  # fmt: skip
    access.principals.attach_user_policy("reader", "read-audit")
    key_id, secret = access.principals.create_access_key("reader")
    reader = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}
    for n in range(5):
        access.audit.append(record(n, time=datetime.now(UTC) - timedelta(days=10)))

    denied = lakeward("audit", "--seal", "7", data_dir=data_dir, env=reader, check=False)
    assert denied.returncode == 1 and "not authorized to perform: audit:Seal" in denied.stderr
    assert "Traceback" not in denied.stderr

    sealed = lakeward("audit", "--seal", "7", data_dir=data_dir).stdout
    assert "records 1-5 sealed in audit-000000000001-000000000005.jsonl.gz" in sealed
    assert (
        "no record older than 7 days" in lakeward("audit", "--seal", "7", data_dir=data_dir).stdout
    )
    verified = lakeward("audit", "--verify", data_dir=data_dir, env=reader).stdout
    assert "audit log intact" in verified

    (data_dir / "access" / "audit-archive" / "audit-000000000001-000000000005.jsonl.gz").unlink()
    broken = lakeward("audit", "--verify", data_dir=data_dir, check=False)
    assert broken.returncode == 1 and "ALTERED at record 1" in broken.stdout
    assert "audit-000000000001-000000000005.jsonl.gz cannot be read" in broken.stdout
    access.audit.close()
