"""A service acting as a role (``role/<name>``): the role's policies decide, not a user's,
the audit names the role, and a resource share allows only what no policy denies."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeward.access.control import AccessControl, role_principal
from lakeward.config import load_settings
from lakeward.errors import AccessDenied

CATALOG = "arn:lakeward:athena:::datacatalog/demo_hive_metastore"
DASHBOARD = "arn:lakeward:quicksight:::dashboard/d1"


def allow(action: str, resource: str, effect: str = "Allow") -> dict[str, object]:
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": effect, "Action": action, "Resource": resource}]}  # fmt: skip


@pytest.fixture
def access(tmp_path: Path) -> AccessControl:
    return AccessControl(load_settings(data_dir=tmp_path, env={}))


def test_a_role_is_decided_by_its_own_policies(access: AccessControl) -> None:
    iam = access.principals
    iam.create_role("bi-service-role")
    iam.create_user("bi-service-role2")  # a user with a similar name is someone else
    iam.put_user_policy("bi-service-role2", "Catalog", allow("lakeward:UseCatalog", CATALOG))
    role = role_principal("bi-service-role")
    with pytest.raises(AccessDenied, match="role/bi-service-role is not authorized"):
        access.authorize("lakeward:UseCatalog", CATALOG, principal=role)
    iam.create_policy("Catalog", allow("lakeward:UseCatalog", CATALOG))
    iam.attach_role_policy("bi-service-role", "Catalog")
    assert access.authorize("lakeward:UseCatalog", CATALOG, principal=role).is_role
    iam.detach_role_policy("bi-service-role", "Catalog")  # takes effect at once
    with pytest.raises(AccessDenied):
        access.authorize("lakeward:UseCatalog", CATALOG, principal=role)
    principals = {r.principal for r in access.audit.query(action="lakeward:UseCatalog")}
    assert principals == {"arn:lakeward:iam:::role/bi-service-role"}


def test_a_share_allows_unless_a_policy_denies(access: AccessControl) -> None:
    iam = access.principals
    iam.create_user("viewer")
    with pytest.raises(AccessDenied):
        access.authorize("quicksight:DescribeDashboard", DASHBOARD, principal="viewer")
    access.authorize("quicksight:DescribeDashboard", DASHBOARD, principal="viewer", shared=True)
    decided = access.audit.query(principal="arn:lakeward:iam:::user/viewer", decision="allowed")
    assert [r.statement for r in decided] == ["resource share"]
    iam.put_user_policy("viewer", "NoDashboards",
                        allow("quicksight:*", "arn:lakeward:quicksight:::*", "Deny"))  # fmt: skip
    with pytest.raises(AccessDenied, match="with an explicit deny"):
        access.authorize("quicksight:DescribeDashboard", DASHBOARD, principal="viewer",
                         shared=True)  # fmt: skip
