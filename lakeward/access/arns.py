"""Every ARN lakeward names, built in one place.

Policies match resources by these strings, so a second spelling of the same
ARN would be a second, silently different permission: services, the CLI and
the console all build them here.
"""

from __future__ import annotations

ARN_PREFIX = "arn:lakeward"
# lakeward has no accounts; where a client needs an account id (STS, Glue's CatalogId,
# AWS-spelled ARNs in a trust policy) this is the one.
ACCOUNT_ID = "000000000000"


def arn(service: str, resource: str) -> str:
    """``arn:lakeward:<service>:::<resource>``: lakeward has no regions or accounts."""
    return f"{ARN_PREFIX}:{service}:::{resource}"


AUDIT_LOG = arn("audit", "log")
ROOT = arn("iam", "root")
ERASURE_INDEX = arn("erasure", "index")
"""The resource of the erasure index's maintenance (``erasure:BuildIndex``)."""
ERASURE_WEBHOOK = arn("erasure", "webhook")


def iam_arn(kind: str, name: str) -> str:
    """An IAM object: ``kind`` is user, group, role or policy; ``name`` may be ``*``."""
    return arn("iam", f"{kind}/{name}")


def user_arn(name: str) -> str:
    return iam_arn("user", name)


def assumed_role_arn(role: str, session: str) -> str:
    """A session of a role, as STS names whoever holds its temporary credentials."""
    return arn("sts", f"assumed-role/{role}/{session}")


def secret_arn(name: str) -> str:
    return arn("secretsmanager", f"secret:{name}")


def catalog_arn(name: str) -> str:
    return arn("athena", f"datacatalog/{name}")


def workgroup_arn(name: str) -> str:
    return arn("athena", f"workgroup/{name}")


def quicksight_arn(kind: str, resource_id: str) -> str:
    """A BI object: ``kind`` is datasource, dataset, analysis or dashboard."""
    return arn("quicksight", f"{kind}/{resource_id}")


def s3_arn(bucket: str, key: str = "") -> str:
    return arn("s3", f"{bucket}/{key}" if key else bucket)


def db_arn(name: str) -> str:
    """A managed database instance (``rds:*`` actions)."""
    return arn("rds", f"db:{name}")


def erasure_user_arn(user_id: str) -> str:
    """The resource a permission on one data subject names (``erasure:Find`` and friends)."""
    return arn("erasure", f"user/{user_id}")


def erasure_request_arn(request_id: str) -> str:
    return arn("erasure", f"request/{request_id}")


def glue_catalog_arn(catalog: str) -> str:
    """A data catalog's metadata, as ``glue:*`` actions name it (one per registered catalog)."""
    return arn("glue", f"catalog/{catalog}")


def glue_database_arn(catalog: str, database: str) -> str:
    return arn("glue", f"database/{catalog}/{database}")


def glue_table_arn(catalog: str, database: str, table: str) -> str:
    """A table or a view (Glue names both ``table``); ``table`` may be ``*``."""
    return arn("glue", f"table/{catalog}/{database}/{table}")


def glue_arns(catalog: str, database: str, table: str | None = None) -> list[str]:
    """Where Glue checks an action on a database or a table: the catalog, the database and
    the table each (an action is allowed only when it is allowed on all of them)."""
    found = [glue_catalog_arn(catalog), glue_database_arn(catalog, database)]
    return found if table is None else [*found, glue_table_arn(catalog, database, table)]
