"""Managed policies' versions, as IAM keeps them: an edit applies at once and can be undone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakeward import sqlstate
from lakeward.access import schema
from lakeward.access.control import AccessControl, Identity
from lakeward.access.iam import IamService
from lakeward.access.principals import Principals
from lakeward.config import load_settings
from lakeward.errors import InvalidRequest, ResourceNotFound


def reads(bucket: str) -> dict[str, object]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"arn:lakeward:s3:::{bucket}/*",
            }
        ],
    }


@pytest.fixture
def control(tmp_path: Path) -> AccessControl:
    access = AccessControl(load_settings(data_dir=tmp_path / "data", env={}))
    access.principals.create_user("ana")
    access.principals.create_policy("Reads", reads("sales"))
    access.principals.attach_user_policy("ana", "Reads")
    return access


def allowed(access: AccessControl, bucket: str) -> bool:
    return access.decide(Identity("ana"), "s3:GetObject", f"arn:lakeward:s3:::{bucket}/x").allowed


def test_an_edit_applies_at_once_and_is_undone_by_the_version_before(
    control: AccessControl,
) -> None:
    iam = IamService(control)
    assert [(v.version_id, v.is_default) for v in iam.list_policy_versions("Reads")] == [
        ("v1", True)
    ]
    draft = iam.create_policy_version("Reads", reads("hr"))  # kept, not applied
    assert draft.version_id == "v2" and not draft.is_default
    assert allowed(control, "sales") and not allowed(control, "hr")
    iam.create_policy_version("Reads", reads("finance"), set_as_default=True)
    assert allowed(control, "finance") and not allowed(control, "sales")
    assert iam.get_policy("Reads").document == reads("finance")
    iam.set_default_policy_version("Reads", "v1")  # undone
    assert allowed(control, "sales") and not allowed(control, "finance")
    listed = iam.list_policy_versions("Reads")
    assert [(v.version_id, v.is_default) for v in listed] == [
        ("v3", False), ("v2", False), ("v1", True)
    ]  # fmt: skip
    # The version that applies cannot be deleted; another can, and its number is not reused.
    with pytest.raises(InvalidRequest, match="DeleteConflict: v1 is the default version"):
        iam.delete_policy_version("Reads", "v1")
    iam.delete_policy_version("Reads", "v3")
    assert iam.create_policy_version("Reads", reads("ops")).version_id == "v4"
    with pytest.raises(ResourceNotFound, match="has no version v3"):
        iam.set_default_policy_version("Reads", "v3")


def test_at_most_five_versions_and_a_bad_document_is_refused_naming_the_policy(
    control: AccessControl,
) -> None:
    iam = IamService(control)
    for bucket in ("a", "b", "c", "d"):
        iam.create_policy_version("Reads", reads(bucket))
    with pytest.raises(InvalidRequest, match="LimitExceeded: policy Reads has 5 versions"):
        iam.create_policy_version("Reads", reads("e"))
    with pytest.raises(InvalidRequest, match="^policy Reads: "):
        iam.create_policy_version("Reads", '{"Version": "2012-10-17", "Statement": "nope"}')
    with pytest.raises(InvalidRequest, match="a policy version is v1, v2"):
        iam.set_default_policy_version("Reads", "latest")
    assert len(iam.list_policy_versions("Reads")) == 5 and allowed(control, "sales")


def test_policies_made_before_versions_were_kept_become_their_version_1(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = sqlstate.open_engine(path)
    sqlstate.migrate(engine, schema.COMPONENT, schema.MIGRATIONS[:3], label="access")
    with sqlstate.writer(engine).begin() as conn:
        conn.execute(
            schema.policies.insert().values(
                name="Old",
                document='{"Version": "2012-10-17", "Statement": []}',
                description="",
                created=datetime.now(UTC),
            )  # fmt: skip
        )
    engine.dispose()
    store = Principals(path, secret_key=b"k" * 32)
    try:
        versions = store.list_policy_versions("Old")
        assert [(v.version_id, v.is_default) for v in versions] == [("v1", True)]
        assert store.create_policy_version("Old", reads("x")).version_id == "v2"
    finally:
        store.close()
