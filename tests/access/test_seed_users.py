"""The seed's two users end to end: the data engineer queries, the salesperson may not."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from lakeward.config import Settings
from tests.helpers import lakeward

pytestmark = pytest.mark.spark

SEED = (
    "SELECT * FROM demo_hive_metastore.default.covid_confirmed_cases WHERE country = 'US' "
    "OR country = 'Italy' OR country = 'India' OR country = 'Brazil' OR country = 'Spain' "
    "OR country = 'United Kingdom'"
)


def creds(stack: Settings, secret: str) -> dict[str, str]:
    value: dict[str, str] = json.loads(
        lakeward("secrets", "get", secret, data_dir=stack.data_dir).stdout
    )
    return value


def athena(stack: Settings, user_creds: dict[str, str]) -> Any:
    import boto3

    return boto3.client(
        "athena",
        endpoint_url=f"http://{stack.server.host}:{stack.server.port}",
        region_name="us-east-1",
        aws_access_key_id=user_creds["access_key_id"],
        aws_secret_access_key=user_creds["secret_access_key"],
    )


def run_seed(client: Any) -> list[list[str | None]]:
    execution_id = client.start_query_execution(QueryString=SEED)["QueryExecutionId"]
    while True:
        state = client.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]
        if state["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.05)
    assert state["Status"]["State"] == "SUCCEEDED", state["Status"]
    rows = []
    for page in client.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id):
        rows += [[d.get("VarCharValue") for d in r["Data"]] for r in page["ResultSet"]["Rows"]]
    return rows[1:]


def tables(client: Any) -> list[str]:
    found = client.list_table_metadata(CatalogName="demo_hive_metastore", DatabaseName="default")
    return [t["Name"] for t in found["TableMetadataList"]]


def test_up_names_the_secrets_not_their_values(stack: Settings, stack_dir: Any) -> None:
    text = (stack_dir / "up.stdout").read_text()
    assert "DataEngineerUserCreds" in text and "SalesUserCreds" in text
    de = creds(stack, "DataEngineerUserCreds")
    assert set(de) == {"username", "password", "access_key_id", "secret_access_key"}
    assert de["username"] == "de_user"
    assert de["password"] not in text and de["secret_access_key"] not in text
    policy = json.loads(
        (stack.data_dir / "access" / "policies" / "DataBucketReadAccessPolicy.json").read_text()
    )
    assert policy["Statement"][0]["Action"] == ["s3:GetObject", "s3:ListBucket"]


def test_data_engineer_queries_salesperson_is_denied(stack: Settings) -> None:
    from botocore.exceptions import ClientError

    de = athena(stack, creds(stack, "DataEngineerUserCreds"))
    rows = run_seed(de)
    assert {r[1] for r in rows} == {"US", "Italy", "India", "Brazil", "Spain", "United Kingdom"}
    assert "covid_confirmed_cases" in tables(de)

    sales = athena(stack, creds(stack, "SalesUserCreds"))
    with pytest.raises(ClientError) as denied:
        sales.start_query_execution(QueryString=SEED)
    error = denied.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert "sales_user" in error["Message"] and "lakeward:UseCatalog" in error["Message"]
    assert "datacatalog/demo_hive_metastore" in error["Message"]
    assert tables(sales) == []


def test_policies_attached_at_runtime_take_effect_at_once(stack: Settings) -> None:
    from botocore.exceptions import ClientError

    sales = athena(stack, creds(stack, "SalesUserCreds"))
    for policy in ("HiveMetastoreDataSourceAccessPolicy", "DataBucketReadAccessPolicy"):
        lakeward(
            "iam",
            "attach-group-policy",
            "--group",
            "SalesGroup",
            "--policy",
            policy,
            data_dir=stack.data_dir,
        )
    try:
        assert len(run_seed(sales)) > 3000
        assert "covid_deaths" in tables(sales)
    finally:
        for policy in ("HiveMetastoreDataSourceAccessPolicy", "DataBucketReadAccessPolicy"):
            lakeward(
                "iam",
                "detach-group-policy",
                "--group",
                "SalesGroup",
                "--policy",
                policy,
                data_dir=stack.data_dir,
            )
    with pytest.raises(ClientError, match="AccessDenied"):
        sales.start_query_execution(QueryString=SEED)


def test_secrets_are_readable_only_by_those_allowed(stack: Settings) -> None:
    sales = creds(stack, "SalesUserCreds")
    env = {
        "AWS_ACCESS_KEY_ID": sales["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": sales["secret_access_key"],
    }
    refused = lakeward(
        "secrets", "get", "DataEngineerUserCreds", data_dir=stack.data_dir, env=env, check=False
    )
    assert refused.returncode != 0
    assert "secretsmanager:GetSecretValue" in refused.stderr and "Traceback" not in refused.stderr
    wrong = {**env, "AWS_SECRET_ACCESS_KEY": "x" * 40}
    refused = lakeward("secrets", "list", data_dir=stack.data_dir, env=wrong, check=False)
    assert refused.returncode != 0 and "not valid" in refused.stderr


def test_simulate_and_the_audit_log(stack: Settings) -> None:
    result = lakeward(
        "iam",
        "simulate",
        "--user",
        "de_user",
        "--action",
        "lakeward:UseCatalog",
        "--resource",
        "arn:lakeward:athena:::datacatalog/demo_hive_metastore",
        data_dir=stack.data_dir,
    )
    assert "allowed" in result.stdout
    assert "HiveMetastoreDataSourceAccessPolicy/UseMetastoreCatalog" in result.stdout
    result = lakeward(
        "iam",
        "simulate",
        "--user",
        "sales_user",
        "--action",
        "lakeward:UseCatalog",
        "--resource",
        "arn:lakeward:athena:::datacatalog/demo_hive_metastore",
        data_dir=stack.data_dir,
        check=False,
    )
    assert result.returncode == 1 and "implicitDeny" in result.stdout

    # A simulation decides without auditing: the log shows the calls each user made.
    from botocore.exceptions import ClientError

    run_seed(athena(stack, creds(stack, "DataEngineerUserCreds")))
    with pytest.raises(ClientError, match="AccessDenied"):
        athena(stack, creds(stack, "SalesUserCreds")).start_query_execution(QueryString=SEED)
    log = lakeward("audit", "--user", "sales_user", "--limit", "1000", data_dir=stack.data_dir)
    assert "lakeward:UseCatalog" in log.stdout and "implicitDeny" in log.stdout
    log = lakeward(
        "audit",
        "--user",
        "de_user",
        "--decision",
        "allowed",
        "--limit",
        "1000",
        data_dir=stack.data_dir,
    )
    assert "athena:StartQueryExecution" in log.stdout and "athena-api" in log.stdout
    assert "intact" in lakeward("audit", "--verify", data_dir=stack.data_dir).stdout


def test_bad_policy_is_rejected_with_the_path_of_the_field(stack: Settings) -> None:
    bad = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
                {"Effect": "allow", "Action": "s3:GetObject", "Resource": "*"},
            ],
        }
    )
    result = lakeward(
        "iam",
        "create-policy",
        "--policy",
        "Broken",
        "--document",
        bad,
        data_dir=stack.data_dir,
        check=False,
    )
    assert result.returncode != 0
    assert "Statement[1].Effect" in result.stderr and "Traceback" not in result.stderr
    in_use = lakeward(
        "iam", "delete-group", "--group", "SalesGroup", data_dir=stack.data_dir, check=False
    )
    assert in_use.returncode != 0 and "sales_user" in in_use.stderr


def test_conditions_see_the_callers_address(stack: Settings) -> None:
    def policy(cidr: str) -> str:
        return json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "athena:GetWorkGroup",
                        "Resource": "arn:lakeward:athena:::workgroup/*",
                        "Condition": {"IpAddress": {"aws:SourceIp": cidr}},
                    }
                ],
            }
        )

    def run(*args: str) -> str:
        return lakeward("iam", *args, data_dir=stack.data_dir).stdout

    run("create-user", "--user", "ip_user")
    run("create-policy", "--policy", "FromLoopback", "--document", policy("127.0.0.0/8"))
    run("create-policy", "--policy", "FromTenNet", "--document", policy("10.0.0.0/8"))
    keys = run("create-access-key", "--user", "ip_user")
    pair = dict(line.split(" = ") for line in keys.strip().splitlines())
    client = athena(stack, {k.strip(): v.strip() for k, v in pair.items()})
    from botocore.exceptions import ClientError

    run("attach-user-policy", "--user", "ip_user", "--policy", "FromTenNet")
    with pytest.raises(ClientError, match="athena:GetWorkGroup"):
        client.get_work_group(WorkGroup="primary")
    run("attach-user-policy", "--user", "ip_user", "--policy", "FromLoopback")
    assert client.get_work_group(WorkGroup="primary")["WorkGroup"]["Name"] == "primary"
    with pytest.raises(ClientError, match="athena:ListNamedQueries"):
        client.list_named_queries()
