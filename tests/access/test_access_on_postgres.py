"""Access control with its state in PostgreSQL (access.database_url)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeward.access.control import AccessControl, Identity
from lakeward.config import load_settings
from tests.helpers import need

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"


@pytest.fixture
def database() -> Iterator[str]:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    try:
        admin = sqlalchemy.create_engine(f"{SERVER}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            name = f"lakeward_access_{uuid.uuid4().hex[:8]}"
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001 - the reason is shown by need()
        need(False, f"no PostgreSQL server at 127.0.0.1:5432 ({exc})")
        raise
    yield f"{SERVER}/{name}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.dispose()


def test_users_policies_secrets_and_audit_share_one_database(database: str, tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, env={"LAKEWARD_ACCESS__DATABASE_URL": database})
    access = AccessControl(settings)
    access.principals.create_policy(
        "ReadAll",
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
        },
    )
    access.principals.create_user("ana")
    access.principals.attach_user_policy("ana", "ReadAll")
    access.secrets.put("AnaCreds", {"password": "p"})
    decision = access.decide(Identity("ana"), "s3:GetObject", "arn:lakeward:s3:::b/k")
    assert decision.allowed
    access.authorize("s3:GetObject", "arn:lakeward:s3:::b/k", principal="ana")

    again = AccessControl(settings)  # a second process sees the same state
    assert again.secrets.get("AnaCreds").value == {"password": "p"}
    assert [r.action for r in again.audit.query(principal="arn:lakeward:iam:::user/ana")] == [
        "s3:GetObject"
    ]
    assert again.audit.verify().ok
