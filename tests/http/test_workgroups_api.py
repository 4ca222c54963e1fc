"""CreateWorkGroup, UpdateWorkGroup, DeleteWorkGroup and the limits, through boto3 on the real app.

The server is lakeward's own app (real IAM, audit log and SQL service over a
fresh data dir); the workgroups' effect on queries is seen through the same API.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from lakeward.access.control import AccessControl
from lakeward.config import Settings, load_settings
from lakeward.http.app import create_app
from lakeward.query.service import QueryService
from tests.helpers import lakeward, serving

ROOT_KEY, ROOT_SECRET = "AKIDWORKGROUPROOT", "workgroup-root-secret"
TEAM_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": ["athena:*WorkGroup*", "athena:StartQueryExecution", "athena:GetQuery*"],
            "Resource": "arn:lakeward:athena:::workgroup/team-*",
        },
        {"Effect": "Allow", "Action": "lakeward:UseCatalog", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*"},
    ],
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return load_settings(
        data_dir=tmp_path_factory.mktemp("wg") / "data",
        env={},
        overrides={"api": {"access_key_id": ROOT_KEY, "secret_access_key": ROOT_SECRET}},
    )


@pytest.fixture(scope="module")
def url(settings: Settings) -> Iterator[str]:
    with serving(create_app(settings)) as url:
        yield url


def policy_of(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.fixture(scope="module")
def team_user(settings: Settings) -> tuple[str, str]:
    access = AccessControl(settings)
    access.principals.create_user("carol")
    access.principals.create_policy("TeamWorkGroups", json.dumps(TEAM_POLICY))
    access.principals.attach_user_policy("carol", "TeamWorkGroups")
    return access.principals.create_access_key("carol")


def athena(url: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET) -> Any:
    return boto3.client(
        "athena",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}),
    )


def wait(client: Any, execution_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        execution: dict[str, Any] = client.get_query_execution(QueryExecutionId=execution_id)[
            "QueryExecution"
        ]
        if execution["Status"]["State"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return execution
        assert time.monotonic() < deadline, execution
        time.sleep(0.02)


def test_create_get_list_update_delete(url: str, settings: Settings) -> None:
    client = athena(url)
    output = f"{settings.lake_root}/{settings.lake.data_bucket}/team-results"
    client.create_work_group(
        Name="team-a",
        Description="the A team",
        Configuration={
            "ResultConfiguration": {"OutputLocation": output},
            "EnforceWorkGroupConfiguration": True,
            "BytesScannedCutoffPerQuery": 20_000_000,
            "EngineVersion": {"SelectedEngineVersion": "duckdb"},
            "AdditionalConfiguration": '{"TimeoutSeconds": 90, "MaxPerPrincipal": 3}',
        },
    )
    group = client.get_work_group(WorkGroup="team-a")["WorkGroup"]
    assert group["Name"] == "team-a" and group["State"] == "ENABLED"
    assert group["Description"] == "the A team"
    configuration = group["Configuration"]
    assert configuration["ResultConfiguration"] == {"OutputLocation": output}
    assert configuration["BytesScannedCutoffPerQuery"] == 20_000_000
    assert configuration["EngineVersion"]["SelectedEngineVersion"] == "duckdb"
    assert json.loads(configuration["AdditionalConfiguration"]) == {
        "TimeoutSeconds": 90.0,
        "MaxConcurrent": 4,
        "MaxQueued": 100,
        "MaxPerPrincipal": 3,
    }
    names = [g["Name"] for g in client.list_work_groups()["WorkGroups"]]
    assert names == ["primary", "team-a"]

    execution = wait(
        client,
        client.start_query_execution(QueryString="SELECT 41 + 1 AS answer", WorkGroup="team-a")[
            "QueryExecutionId"
        ],
    )
    assert execution["Status"]["State"] == "SUCCEEDED", execution["Status"]
    assert execution["ResultConfiguration"]["OutputLocation"].startswith(output + "/")
    assert execution["WorkGroup"] == "team-a"
    rows = client.get_query_results(QueryExecutionId=execution["QueryExecutionId"])
    assert rows["ResultSet"]["Rows"][1] == {"Data": [{"VarCharValue": "42"}]}

    client.update_work_group(
        WorkGroup="team-a",
        State="DISABLED",
        ConfigurationUpdates={
            "RemoveBytesScannedCutoffPerQuery": True,
            "ResultConfigurationUpdates": {"RemoveOutputLocation": True},
            "AdditionalConfiguration": '{"MaxPerPrincipal": null, "MaxConcurrent": 1}',
        },
    )
    group = client.get_work_group(WorkGroup="team-a")["WorkGroup"]
    assert group["State"] == "DISABLED"
    assert "BytesScannedCutoffPerQuery" not in group["Configuration"]
    # No location of its own: the one its queries get (awswrangler reads results there).
    assert group["Configuration"]["ResultConfiguration"] == {
        "OutputLocation": "s3://lakeward-data/query-results/team-a"
    }
    extensions = json.loads(group["Configuration"]["AdditionalConfiguration"])
    assert extensions["MaxPerPrincipal"] is None and extensions["MaxConcurrent"] == 1
    assert extensions["TimeoutSeconds"] == 90.0  # what the update did not name stays
    with pytest.raises(client.exceptions.InvalidRequestException, match="is disabled"):
        client.start_query_execution(QueryString="SELECT 1", WorkGroup="team-a")

    client.delete_work_group(WorkGroup="team-a")
    with pytest.raises(client.exceptions.InvalidRequestException, match="not found"):
        client.get_work_group(WorkGroup="team-a")
    with pytest.raises(client.exceptions.InvalidRequestException, match="cannot be deleted"):
        client.delete_work_group(WorkGroup="primary")


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({"EngineVersion": {"SelectedEngineVersion": "Athena engine version 3"}}, "duckdb, spark"),
        ({"AdditionalConfiguration": '{"Timeout": 5}'}, "unknown key 'Timeout'"),
        ({"AdditionalConfiguration": '{"MaxConcurrent": "2"}'}, "MaxConcurrent must be an int"),
        ({"AdditionalConfiguration": "fast"}, "must be a JSON object"),
        ({"PublishCloudWatchMetricsEnabled": True}, "PublishCloudWatchMetricsEnabled is not"),
        ({"ResultConfiguration": {"ExpectedBucketOwner": "123456789012"}}, "ExpectedBucketOwner"),
        ({"ResultConfiguration": {"OutputLocation": "s3://elsewhere/x"}}, "is not in the lake"),
    ],
)
def test_what_lakeward_cannot_honour_is_refused(
    url: str, configuration: dict[str, Any], message: str
) -> None:
    client = athena(url)
    with pytest.raises(client.exceptions.InvalidRequestException, match=message):
        client.create_work_group(Name="team-bad", Configuration=configuration)
    assert "team-bad" not in [g["Name"] for g in client.list_work_groups()["WorkGroups"]]


def test_a_spark_workgroup_is_created_for_spark(url: str) -> None:
    client = athena(url)
    client.create_work_group(
        Name="team-spark", Configuration={"EngineVersion": {"SelectedEngineVersion": "spark"}}
    )
    group = client.get_work_group(WorkGroup="team-spark")["WorkGroup"]
    assert group["Configuration"]["EngineVersion"]["SelectedEngineVersion"] == "spark"
    client.delete_work_group(WorkGroup="team-spark")


def test_managing_workgroups_is_authorized_and_audited(
    url: str, settings: Settings, team_user: tuple[str, str]
) -> None:
    carol = athena(url, *team_user)
    carol.create_work_group(Name="team-c")
    with pytest.raises(carol.exceptions.ClientError, match="AccessDenied"):
        carol.create_work_group(Name="finance")
    with pytest.raises(carol.exceptions.ClientError, match="AccessDenied"):
        carol.delete_work_group(WorkGroup="primary")
    # Athena's list is all or nothing: athena:ListWorkGroups on "*", not on workgroups.
    with pytest.raises(
        carol.exceptions.ClientError, match="athena:ListWorkGroups on resource: \\*"
    ):
        carol.list_work_groups()
    lister = {"Effect": "Allow", "Action": "athena:ListWorkGroups", "Resource": "*"}
    access = AccessControl(settings)
    access.principals.create_policy("ListWorkGroups", json.dumps(policy_of(lister)))
    access.principals.attach_user_policy("carol", "ListWorkGroups")
    assert [g["Name"] for g in carol.list_work_groups()["WorkGroups"]] == ["primary", "team-c"]
    access.principals.detach_user_policy("carol", "ListWorkGroups")
    carol.delete_work_group(WorkGroup="team-c")
    audit = AccessControl(settings).audit
    seen = [
        (r.action, r.resource.rsplit("/", 1)[1], r.decision)
        for r in audit.query(principal="arn:lakeward:iam:::user/carol")
        if r.action.endswith("WorkGroup")
    ]
    assert ("athena:CreateWorkGroup", "team-c", "allowed") in seen
    assert ("athena:CreateWorkGroup", "finance", "implicitDeny") in seen
    assert ("athena:DeleteWorkGroup", "primary", "implicitDeny") in seen
    assert ("athena:DeleteWorkGroup", "team-c", "allowed") in seen


def test_the_limit_per_principal_answers_too_many_requests(
    url: str, settings: Settings, team_user: tuple[str, str]
) -> None:
    root, carol = athena(url), athena(url, *team_user)
    root.create_work_group(
        Name="team-limited",
        Configuration={"AdditionalConfiguration": '{"MaxPerPrincipal": 1, "MaxConcurrent": 2}'},
    )
    # Another process over the same state admitted a query of carol's that still runs.
    other = QueryService(settings)
    try:
        other.workgroups.admit("elsewhere", other.workgroups.find("team-limited"), "carol")
    finally:
        other.close()
    with pytest.raises(carol.exceptions.TooManyRequestsException) as refused:
        carol.start_query_execution(QueryString="SELECT 1", WorkGroup="team-limited")
    message = refused.value.response["Error"]["Message"]
    assert message == (
        "carol has 1 queries queued or running in WorkGroup team-limited, its limit per "
        "principal (1); retry when one has finished"
    )
    # Root is another principal: it still gets its share.
    execution = wait(
        root,
        root.start_query_execution(QueryString="SELECT 1", WorkGroup="team-limited")[
            "QueryExecutionId"
        ],
    )
    assert execution["Status"]["State"] == "SUCCEEDED"


def test_cli_workgroup_commands(settings: Settings, tmp_path: Path) -> None:
    data_dir = settings.data_dir
    made = lakeward(
        "workgroup", "create", "team-cli", "--engine", "spark", "--max-per-principal", "2",
        "--timeout", "120", data_dir=data_dir,
    )  # fmt: skip
    assert "created workgroup team-cli" in made.stdout
    lakeward("workgroup", "update", "team-cli", "--max-concurrent", "3", data_dir=data_dir)
    got = json.loads(lakeward("workgroup", "get", "team-cli", data_dir=data_dir).stdout)
    assert (got["engine"], got["max_per_principal"], got["max_concurrent"]) == ("spark", 2, 3)
    assert got["timeout_seconds"] == 120.0
    listed = lakeward("workgroup", "list", data_dir=data_dir).stdout
    assert "team-cli" in listed and "spark" in listed
    bad = lakeward("workgroup", "create", "team-x", "--engine", "presto", data_dir=data_dir,
                   check=False)  # fmt: skip
    assert bad.returncode != 0 and "engine must be one of duckdb, spark" in bad.stderr
    assert "Traceback" not in bad.stderr
    lakeward("workgroup", "delete", "team-cli", data_dir=data_dir)
    gone = lakeward("workgroup", "get", "team-cli", data_dir=data_dir, check=False)
    assert gone.returncode != 0 and "WorkGroup team-cli is not found" in gone.stderr


def test_named_queries_are_updated_and_deleted_as_in_athena(
    url: str, team_user: tuple[str, str]
) -> None:
    client = athena(url)
    made = client.create_named_query(
        Name="daily", Database="default", QueryString="SELECT 1", Description="first"
    )["NamedQueryId"]
    carol = athena(url, *team_user)  # may do nothing with primary's named queries
    with pytest.raises(carol.exceptions.ClientError, match="athena:DeleteNamedQuery"):
        carol.delete_named_query(NamedQueryId=made)
    with pytest.raises(carol.exceptions.ClientError, match="athena:UpdateNamedQuery"):
        carol.update_named_query(NamedQueryId=made, Name="x", QueryString="SELECT 2")

    client.update_named_query(NamedQueryId=made, Name="nightly", QueryString="SELECT 2")
    named = client.get_named_query(NamedQueryId=made)["NamedQuery"]
    assert (named["Name"], named["QueryString"], named["Description"]) == (
        "nightly", "SELECT 2", "first"
    )  # fmt: skip
    assert (named["Database"], named["WorkGroup"]) == ("default", "primary")
    unknown = str(uuid.uuid4())
    batch = client.batch_get_named_query(NamedQueryIds=[made, unknown])
    assert [n["Name"] for n in batch["NamedQueries"]] == ["nightly"]
    assert batch["UnprocessedNamedQueryIds"] == [
        {"NamedQueryId": unknown, "ErrorCode": "INVALID_INPUT",
         "ErrorMessage": f"NamedQuery {unknown} was not found"},
    ]  # fmt: skip
    theirs = carol.batch_get_named_query(NamedQueryIds=[made])
    assert theirs["NamedQueries"] == []
    assert theirs["UnprocessedNamedQueryIds"][0]["ErrorMessage"] == (
        "not authorized to read this NamedQuery"
    )
    client.delete_named_query(NamedQueryId=made)
    assert made not in client.list_named_queries()["NamedQueryIds"]
    with pytest.raises(client.exceptions.InvalidRequestException, match="not found"):
        client.get_named_query(NamedQueryId=made)
    with pytest.raises(client.exceptions.InvalidRequestException, match="not found"):
        client.delete_named_query(NamedQueryId=str(uuid.uuid4()))
