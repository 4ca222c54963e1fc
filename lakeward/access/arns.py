"""Every ARN lakeward names, built in one place.

Policies match resources by these strings, so a second spelling of the same
ARN would be a second, silently different permission: services, the CLI and
the console all build them here.
"""

from __future__ import annotations

ARN_PREFIX = "arn:lakeward"

AUDIT_LOG = f"{ARN_PREFIX}:audit:::log"
ROOT = f"{ARN_PREFIX}:iam:::root"
ERASURE_INDEX = f"{ARN_PREFIX}:erasure:::index"
"""The resource of the erasure index's maintenance (``erasure:BuildIndex``)."""
ERASURE_WEBHOOK = f"{ARN_PREFIX}:erasure:::webhook"


def iam_arn(kind: str, name: str) -> str:
    """An IAM object: ``kind`` is user, group, role or policy; ``name`` may be ``*``."""
    return f"{ARN_PREFIX}:iam:::{kind}/{name}"


def user_arn(name: str) -> str:
    return iam_arn("user", name)


def secret_arn(name: str) -> str:
    return f"{ARN_PREFIX}:secretsmanager:::secret:{name}"


def catalog_arn(name: str) -> str:
    return f"{ARN_PREFIX}:athena:::datacatalog/{name}"


def workgroup_arn(name: str) -> str:
    return f"{ARN_PREFIX}:athena:::workgroup/{name}"


def quicksight_arn(kind: str, resource_id: str) -> str:
    """A BI object: ``kind`` is datasource, dataset, analysis or dashboard."""
    return f"{ARN_PREFIX}:quicksight:::{kind}/{resource_id}"


def s3_arn(bucket: str, key: str = "") -> str:
    return f"{ARN_PREFIX}:s3:::{bucket}/{key}" if key else f"{ARN_PREFIX}:s3:::{bucket}"


def db_arn(name: str) -> str:
    """A managed database instance (``rds:*`` actions)."""
    return f"{ARN_PREFIX}:rds:::db:{name}"


def erasure_user_arn(user_id: str) -> str:
    """The resource a permission on one data subject names (``erasure:Find`` and friends)."""
    return f"{ARN_PREFIX}:erasure:::user/{user_id}"


def erasure_request_arn(request_id: str) -> str:
    return f"{ARN_PREFIX}:erasure:::request/{request_id}"
