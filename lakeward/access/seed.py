"""The seed deployment's identities: four users in four groups, their policies and secrets.

The data engineer's group may use the metastore catalog, read its definitions
(``glue:Get*``, not create, change or drop them) and read the data bucket, so the
data engineer sees and queries the tables; the salesperson's
group may use Athena but not the catalog, so the salesperson sees no tables.
The console administrator (``admin``) may use the administration pages (IAM,
secret names, the audit log) and so may add anyone, themselves included, to
the data-protection group, whose members read and decide erasure requests.
Passwords and access keys are generated once and kept as secrets; running
this again changes nothing.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from lakeward.access.arns import (
    AUDIT_LOG,
    catalog_arn,
    erasure_request_arn,
    glue_catalog_arn,
    glue_database_arn,
    glue_table_arn,
    iam_arn,
    s3_arn,
    secret_arn,
    workgroup_arn,
)
from lakeward.access.control import AccessControl
from lakeward.config import Settings

CATALOG = "demo_hive_metastore"
BI_ROLE = "bi-service-role"
ADMIN = "admin"
ADMIN_SECRET = "ConsoleAdminCreds"
ADMIN_GROUP = "ConsoleAdministratorGroup"
DATA_PROTECTION_GROUP = "DataProtectionGroup"


def seed_policies(settings: Settings) -> dict[str, dict[str, Any]]:
    bucket = settings.lake.data_bucket
    return {
        "DataBucketReadAccessPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ReadDataBucket",
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:ListBucket"],
                    "Resource": [s3_arn(bucket), s3_arn(bucket, "*")],
                }
            ],
        },
        "HiveMetastoreDataSourceAccessPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "UseMetastoreCatalog",
                    "Effect": "Allow",
                    "Action": ["lakeward:UseCatalog", "athena:GetDataCatalog"],
                    "Resource": [catalog_arn(CATALOG)],
                },
                {
                    # Reading the catalog's definitions only: creating, changing or
                    # dropping databases, tables and partitions needs a grant of its own.
                    "Sid": "ReadCatalogMetadata",
                    "Effect": "Allow",
                    "Action": [
                        "glue:GetDatabase",
                        "glue:GetDatabases",
                        "glue:GetTable",
                        "glue:GetTables",
                        "glue:GetPartition",
                        "glue:GetPartitions",
                        "glue:BatchGetPartition",
                    ],
                    "Resource": [
                        glue_catalog_arn(CATALOG),
                        glue_database_arn(CATALOG, "*"),
                        glue_table_arn(CATALOG, "*", "*"),
                    ],
                },
                {
                    "Sid": "SpillAndResults",
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject"],
                    "Resource": [s3_arn(bucket, "query-results/*")],
                },
            ],
        },
        # Created and not attached: an administrator grants it to whoever may change the
        # catalog (DDL, CREATE TABLE AS, INSERT INTO) and write the lake's tables.
        "DataEngineerDDLPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ChangeCatalog",
                    "Effect": "Allow",
                    "Action": [
                        "glue:CreateDatabase",
                        "glue:UpdateDatabase",
                        "glue:DeleteDatabase",
                        "glue:CreateTable",
                        "glue:UpdateTable",
                        "glue:DeleteTable",
                        "glue:CreatePartition",
                        "glue:BatchCreatePartition",
                        "glue:UpdatePartition",
                        "glue:DeletePartition",
                        "glue:BatchDeletePartition",
                    ],
                    "Resource": [
                        glue_catalog_arn(CATALOG),
                        glue_database_arn(CATALOG, "*"),
                        glue_table_arn(CATALOG, "*", "*"),
                    ],
                },
                {
                    "Sid": "WriteTables",
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"],
                    "Resource": [s3_arn(bucket), s3_arn(bucket, "*")],
                },
            ],
        },
        "AthenaQueryAccessPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "RunQueriesInPrimary",
                    "Effect": "Allow",
                    "Action": ["athena:*"],
                    "Resource": [workgroup_arn("primary"), catalog_arn("*")],
                },
                {
                    "Sid": "ListWorkGroups",
                    "Effect": "Allow",
                    "Action": ["athena:ListWorkGroups"],
                    "Resource": "*",
                },
            ],
        },
        "ConsoleAdministratorPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ManageIdentities",
                    "Effect": "Allow",
                    "Action": ["iam:*"],
                    "Resource": [iam_arn("*", "*")],
                },
                {
                    "Sid": "SecretNamesAndAudit",
                    "Effect": "Allow",
                    "Action": ["secretsmanager:ListSecrets", "audit:Query"],
                    "Resource": [secret_arn("*"), AUDIT_LOG],
                },
            ],
        },
        "ErasureApprovalPolicy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "FileAndDecideErasureRequests",
                    "Effect": "Allow",
                    "Action": [
                        "erasure:CreateRequest",
                        "erasure:ListRequests",
                        "erasure:GetRequest",
                        "erasure:Approve",
                    ],
                    "Resource": [erasure_request_arn("*")],
                }
            ],
        },
    }


SEED_GROUPS = {
    "DataEngineerGroup": (
        "de_user",
        "DataEngineerUserCreds",
        ["DataBucketReadAccessPolicy", "HiveMetastoreDataSourceAccessPolicy",
         "AthenaQueryAccessPolicy"],
    ),
    "SalesGroup": ("sales_user", "SalesUserCreds", ["AthenaQueryAccessPolicy"]),
    ADMIN_GROUP: (ADMIN, ADMIN_SECRET, ["ConsoleAdministratorPolicy"]),
    DATA_PROTECTION_GROUP: ("dpo_user", "DataProtectionUserCreds", ["ErasureApprovalPolicy"]),
}  # fmt: skip


def seed_identities(settings: Settings, access: AccessControl) -> dict[str, str]:
    """Create what is missing; return the outputs (names of secrets, never their values)."""
    principals = access.principals
    policies_dir = settings.data_dir / "access" / "policies"
    policies_dir.mkdir(parents=True, exist_ok=True)
    existing_policies = {p.name for p in principals.list_policies()}
    for name, document in seed_policies(settings).items():
        (policies_dir / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
        if name not in existing_policies:
            principals.create_policy(name, document)
    users = {u.name for u in principals.list_users()}
    groups = {g.name for g in principals.list_groups()}
    for group, (user, secret_name, policies) in SEED_GROUPS.items():
        if group not in groups:
            principals.create_group(group)
            for policy in policies:
                principals.attach_group_policy(group, policy)
        if user not in users:
            password = secrets.token_urlsafe(18)
            principals.create_user(user, password=password)
            principals.add_user_to_group(user, group)
            key_id, secret = principals.create_access_key(user)
            access.secrets.put(
                secret_name,
                {"username": user, "password": password,
                 "access_key_id": key_id, "secret_access_key": secret},
                description=f"Console password and API key of {user}",
            )  # fmt: skip
    if BI_ROLE not in {r.name for r in principals.list_roles()}:
        principals.create_role(BI_ROLE, "The BI service; attach the metastore policy to it")
    return {
        "iam_users": ",".join(user for user, _s, _p in SEED_GROUPS.values()),
        "iam_secrets": ",".join(secret for _u, secret, _p in SEED_GROUPS.values()),
        "bi_role": BI_ROLE,
        "console_admin": ADMIN,
        "console_admin_secret": ADMIN_SECRET,
        "data_protection_group": DATA_PROTECTION_GROUP,
    }
