"""The account's password policy, IAM's default, where a user is given a console password."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.access.control import AccessControl
from lakeward.access.iam import IamService
from lakeward.config import load_settings
from lakeward.errors import InvalidRequest


@pytest.fixture
def iam(tmp_path: Path) -> IamService:
    return IamService(AccessControl(load_settings(data_dir=tmp_path / "data", env={})))


@pytest.mark.parametrize(
    ("password", "broken"),
    [
        ("Ab1!x", "it has 5 characters, fewer than 8"),
        ("alllowercase", "it has 1 of the four kinds of characters, not 3"),
        ("lower-and-symbols", "it has 2 of the four kinds of characters, not 3"),
        ("Mallory-Mallory" * 10, "more than 128"),
    ],
)
def test_a_password_the_policy_does_not_allow_is_refused_naming_the_rule(
    iam: IamService, password: str, broken: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        iam.create_user("mallory", password)
    assert str(refused.value).startswith("PasswordPolicyViolation: the password of user mallory")
    assert broken in str(refused.value)
    assert "mallory" not in [u.name for u in iam.list_users()]  # nothing half-made


def test_the_users_name_is_no_password_and_a_good_one_is_taken(iam: IamService) -> None:
    with pytest.raises(InvalidRequest, match="it is the user's name"):
        iam.create_user("Ana-Lyst1", "ana-lyst1")
    iam.create_user("analyst", "Correct-horse-7")
    iam.create_user("service")  # a user without a console password is not checked
    assert iam.access.principals.check_password("analyst", "Correct-horse-7")
