"""Access control with its state in PostgreSQL (access.database_url)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.access.control import AccessControl, Identity
from lakeward.config import load_settings
from tests.helpers import pg_url


@pytest.fixture
def database(postgres_db: str) -> str:
    return pg_url(postgres_db)


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
